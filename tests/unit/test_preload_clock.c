// SPDX-License-Identifier: MIT
/*
 * The interposer's record timestamps (src/preload/preload_clock.c, compiled in here): a stamp
 * is a CLOCK_MONOTONIC time read between the caller's reads before and after, never below the
 * thread's last one, also when every TSC anchor pair fails. That path once stamped with an
 * unset variable (what the stack held: ~39 hours ahead in a 6.12 qemu guest, where the pairs
 * often fail), and the thread's later records all took that time as their floor.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#define PL_TSC_PAIR_NS 0ull /* no anchor pair is ever within bounds: the fallback runs */
#include "../../src/preload/preload_clock.c"

struct pl_proc pl;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What the stack held before: a value that is no time (a pointer's worth of bits). */
static __attribute__((noinline)) void dirty_stack(void)
{
	volatile unsigned char junk[4096];

	memset((void *)junk, 0x7f, sizeof(junk));
}

static void test_stamp_between_reads(void **state)
{
	(void)state;
	for (int i = 0; i < 1000; i++) {
		struct pl_thread t = {0};
		uint64_t before, s, after;

		dirty_stack();
		before = now_ns();
		s = pl_stamp(&t);
		after = now_ns();
		if (s < before || s > after)
			fail_msg("stamp %llu not within [%llu, %llu] (try %d)", (unsigned long long)s,
				 (unsigned long long)before, (unsigned long long)after, i);
		assert_int_equal(t.ts_floor, s);
	}
}

#if PL_HAVE_TSC
/* Calibrated (mult known), a fresh thread, and its anchor pair fails: the path that was wrong. */
static void test_stamp_calibrated_pair_fails(void **state)
{
	struct mt_shm_hdr hdr = {0};

	(void)state;
	pl.hdr = &hdr;
	pl.tsc_mult = 1ull << PL_TSC_SHIFT;
	pl.tsc_span = 250000;
	test_stamp_between_reads(state);
	pl.hdr = NULL;
	pl.tsc_mult = pl.tsc_span = 0;
}
#endif

/* A thread's stamps never go down: a floor ahead of the clock stands. */
static void test_floor_holds(void **state)
{
	struct pl_thread t = {0};
	uint64_t floor = now_ns() + 1000000000ull;

	(void)state;
	t.ts_floor = floor;
	assert_int_equal(pl_stamp(&t), floor);
	assert_int_equal(pl_stamp(&t), floor);
}

/* pl_clock reads between the caller's reads, with a floor far behind (read twice) or near. */
static void test_clock_reads(void **state)
{
	(void)state;
	for (int i = 0; i < 1000; i++) {
		uint64_t before = now_ns(), a = pl_clock(0), b = pl_clock(a), after = now_ns();

		assert_true(before <= a && a <= b && b <= after);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stamp_between_reads),
#if PL_HAVE_TSC
		cmocka_unit_test(test_stamp_calibrated_pair_fails),
#endif
		cmocka_unit_test(test_floor_holds),
		cmocka_unit_test(test_clock_reads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
