// SPDX-License-Identifier: MIT
/*
 * Whether the interposer may stamp from the TSC (src/track/stamp_clock.c), and, where this
 * machine lets it, that its stamps (src/preload/preload_clock.c, compiled in here) follow
 * CLOCK_MONOTONIC from memtrack's anchor: every stamp within 1 us of the clock reads around it
 * (the mechanism's bound is 0.4 us: an anchor's half pair of 250 ns, 12.5 ns of rate error over
 * a 250 us span, 125 ns of NTP slew), over 200 ms of a thread's stamps, many spans.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "../../src/preload/preload_clock.c"
#include "track/stamp_clock.h"

struct pl_proc pl;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void test_refusal_table(void **state)
{
	static const struct {
		const char *cs;
		int pv;
		const char *env;
		bool tsc;
	} rows[] = {
	    {"tsc", -1, NULL, true},
	    {"tsc", -1, "1", true},
	    {"tsc", -1, "0", false},
	    {"kvm-clock", STAMP_PVCLOCK_TSC_STABLE, NULL, true},
	    {"kvm-clock", STAMP_PVCLOCK_TSC_STABLE | 0x2, NULL, true},
	    {"kvm-clock", STAMP_PVCLOCK_TSC_STABLE, "0", false},
	    {"kvm-clock", 0x2, NULL, false}, /* no stable bit: the vDSO makes a system call */
	    {"kvm-clock", -1, NULL, false},  /* no page read */
	    {"hpet", STAMP_PVCLOCK_TSC_STABLE, NULL, false},
	    {"acpi_pm", -1, NULL, false},
	    {"xen", -1, NULL, false},
	    {"tsc-early", -1, NULL, false},
	    {NULL, -1, NULL, false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *why = stamp_clock__refusal(rows[i].cs, rows[i].pv, rows[i].env);

		if (!PL_HAVE_TSC) {
			assert_non_null(why);
			continue;
		}
		if (rows[i].tsc != !why)
			fail_msg("row %zu (%s, %d, %s): %s", i, rows[i].cs ? rows[i].cs : "NULL",
				 rows[i].pv, rows[i].env ? rows[i].env : "unset",
				 why ? why : "tsc");
	}
}

/* The pvclock read never faults, whatever the machine: a flags byte or -1. */
static void test_pvclock_read_safe(void **state)
{
	int f = stamp_clock__pvclock_flags();

	(void)state;
	assert_true(f >= -1 && f <= 0xff);
	printf("# pvclock flags here: %d\n", f);
}

#if PL_HAVE_TSC
static void test_tsc_stamps_follow_clock(void **state)
{
	struct mt_shm_hdr hdr = {0};
	struct pl_thread t = {0};
	const char *why = stamp_clock__anchor(&hdr.tsc_anchor, &hdr.ns_anchor);
	uint64_t end, n = 0, worst = 0;

	(void)state;
	if (why) {
		assert_int_equal(hdr.tsc_anchor, 0);
		printf("# skipped: this machine stamps with clock_gettime (%s)\n", why);
		skip();
	}
	assert_true(hdr.tsc_anchor && hdr.ns_anchor);
	pl.hdr = &hdr;
	/* the rate is measured over >= PL_TSC_CAL_NS after the anchor */
	nanosleep(&(struct timespec){.tv_nsec = 2 * PL_TSC_CAL_NS}, NULL);
	end = now_ns() + 200000000ull;
	for (uint64_t before = now_ns(); before < end; before = now_ns(), n++) {
		uint64_t s = pl_stamp(&t), after = now_ns();

		if (s + 1000 < before || s > after + 1000)
			fail_msg("stamp %llu outside [%llu, %llu] by more than 1 us (stamp %llu)",
				 (unsigned long long)s, (unsigned long long)before,
				 (unsigned long long)after, (unsigned long long)n);
		if (s < before && before - s > worst)
			worst = before - s;
		if (s > after && s - after > worst)
			worst = s - after;
	}
	/* calibrated from memtrack's anchor, and the stamps came from the TSC */
	assert_true(pl.tsc_mult != 0 && !pl.tsc_off);
	assert_true(t.tsc_span != 0);
	printf("# %llu stamps, worst %llu ns outside the clock reads around them\n",
	       (unsigned long long)n, (unsigned long long)worst);
	pl.hdr = NULL;
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refusal_table),
		cmocka_unit_test(test_pvclock_read_safe),
#if PL_HAVE_TSC
		cmocka_unit_test(test_tsc_stamps_follow_clock),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
