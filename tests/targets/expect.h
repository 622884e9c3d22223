/* SPDX-License-Identifier: MIT */
/*
 * The side channel of the test targets. When $MT_EXPECT_FD names an inherited fd, a target
 * writes one line per operation there:
 *
 *	OP PID TID TS ADDR OLD SIZE
 *
 * PID/TID in decimal, TS = CLOCK_MONOTONIC ns (the clock of bpf_ktime_get_ns, so a line can be
 * placed among the artifact's events), ADDR/OLD in hex with 0x, SIZE in decimal.
 * OP is the event type the tracker must record for the call ("malloc", "calloc", "realloc",
 * "aligned", "free"), or a marker that has no event of its own: "begin"/"end" bracket a window
 * in which the thread makes no allocator call but the ones it reports; "einval" is a call that
 * must give no event; "fork" (SIZE = child pid), "stage" (SIZE = exec stage), "hwm" (SIZE =
 * VmHWM bytes), "pid" (SIZE unused) carry facts.
 *
 * Lines are formatted into a stack buffer and written with write(2): no stdio, so reporting
 * makes no allocation of its own that would show up between the ones under test.
 * Usable from C and C++; header-only because every target is a single-file build.
 */
#ifndef MT_TARGET_EXPECT_H
#define MT_TARGET_EXPECT_H

#include <malloc.h>
#include <stdlib.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

static int mt_expect_fd = -2; /* -2: not looked up yet, -1: no channel */

static inline int mt_expect_init(void)
{
	const char *e;

	if (mt_expect_fd != -2)
		return mt_expect_fd;
	/* getenv does not allocate */
	e = getenv("MT_EXPECT_FD");
	mt_expect_fd = e && *e ? atoi(e) : -1;
	return mt_expect_fd;
}

static inline uint64_t mt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Not gettid(): the raw syscall, never a cached value (forked children must report their own). */
/* Addresses as integers: reporting a freed pointer is not a use of it (-Wuse-after-free). */
#define MT_P(p) ((uintptr_t)(p))

static inline void mt_say(const char *op, uintptr_t addr, uintptr_t old, uint64_t size)
{
	char buf[160];
	int n;

	if (mt_expect_init() < 0)
		return;
	n = snprintf(buf, sizeof(buf), "%s %ld %ld %llu 0x%llx 0x%llx %llu\n", op,
		     (long)syscall(SYS_getpid), (long)syscall(SYS_gettid),
		     (unsigned long long)mt_now_ns(), (unsigned long long)addr,
		     (unsigned long long)old, (unsigned long long)size);
	if (n > 0)
		(void)!write(mt_expect_fd, buf, (size_t)n);
}

/*
 * The interposer's TSC stamps lie within 0.4 us of CLOCK_MONOTONIC read at the same instant
 * (src/preload/preload_clock.c), while a window's "begin"/"end" reads here are exact: a call
 * made tens of ns after "begin" (or before "end") could be stamped outside its window. So the
 * reads stand 1 us from the calls they bracket: after "begin" and before "end" the thread
 * waits that long (reading the clock: no allocation).
 */
#define MT_WINDOW_GAP_NS 1000ull

static inline void mt_spin_ns(uint64_t ns)
{
	uint64_t until = mt_now_ns() + ns;

	while (mt_now_ns() < until)
		;
}

static inline void mt_say_fact(const char *op, uint64_t value)
{
	int end = op[0] == 'e' && op[1] == 'n' && op[2] == 'd' && !op[3];

	if (end)
		mt_spin_ns(MT_WINDOW_GAP_NS);
	mt_say(op, 0, 0, value);
	if (op[0] == 'b' && op[1] == 'e' && op[2] == 'g' && op[3] == 'i' && op[4] == 'n' && !op[5])
		mt_spin_ns(MT_WINDOW_GAP_NS);
}

/* One window: malloc(base), calloc(3, base), both freed, each call reported (forker,
 * late_work). */
static inline void mt_alloc_round(size_t base)
{
	void *p, *q;

	mt_say_fact("begin", 0);
	p = malloc(base);
	mt_say("malloc", MT_P(p), 0, base);
	q = calloc(3, base);
	mt_say("calloc", MT_P(q), 0, 3 * base);
	mt_say("free", MT_P(p), 0, 0);
	free(p);
	mt_say("free", MT_P(q), 0, 0);
	free(q);
	mt_say_fact("end", 0);
}

/* The standard names every replacement allocator exports, with what each call should record.
 * Shared by the jemalloc, tcmalloc and static targets; their own APIs come between the two. */
struct mt_std {
	void *a, *b, *c, *d, *e;
};

static inline void mt_std_alloc(struct mt_std *s, int use_aligned_alloc)
{
	uintptr_t o;

	s->a = malloc(100);
	mt_say("malloc", MT_P(s->a), 0, 100);
	s->b = calloc(10, 30);
	mt_say("calloc", MT_P(s->b), 0, 300);
	s->c = malloc(40);
	mt_say("malloc", MT_P(s->c), 0, 40);
	o = MT_P(s->c);
	s->c = realloc(s->c, 40000);
	mt_say("realloc", MT_P(s->c), o, 40000);
	s->d = NULL;
	if (posix_memalign(&s->d, 64, 640) == 0)
		mt_say("aligned", MT_P(s->d), 0, 640);
	s->e = use_aligned_alloc ? aligned_alloc(256, 512) : memalign(256, 512);
	mt_say("aligned", MT_P(s->e), 0, 512);
}

static inline void mt_std_free(struct mt_std *s)
{
	void *all[] = {s->a, s->b, s->c, s->d, s->e};

	for (int i = 0; i < 5; i++) {
		mt_say("free", MT_P(all[i]), 0, 0);
		free(all[i]);
	}
}

#endif
