// SPDX-License-Identifier: MIT
/*
 * Record timestamps: CLOCK_MONOTONIC nanoseconds, the clock bpf_ktime_get_ns reads, so that the
 * interposer's records and the BPF programs' (Fork, Exec, Exit, Rss, Mmap) interleave.
 *
 * clock_gettime costs ~30 ns through the vDSO here (more under load), rdtsc ~12 ns. Where the
 * kernel's clocksource is the TSC (memtrack checks, and leaves its anchor in the header), a
 * record is stamped from the TSC the way the vDSO computes the clock: each thread keeps an
 * anchor (a TSC read paired with clock_gettime) and extrapolates with a cycles -> ns factor,
 * mult / 2^32, measured between memtrack's anchor and this process's start (hundreds of ms
 * apart: a 40 ns reading error is < 1 ppm of that). The anchor is renewed every PL_TSC_SPAN_NS
 * of the thread's TSC, so the stamp follows CLOCK_MONOTONIC even where NTP slews it (500 ppm
 * at most: 125 ns over a span) and where the TSC is the clocksource no longer; a TSC that
 * reads backwards (another CPU's) renews it too. A thread's stamps never decrease: a new
 * anchor below what the old one gave is raised to that (t->ts_floor).
 * Anywhere else (no TSC, memtrack said no, within 10 ms of memtrack's anchor) clock_gettime.
 *
 * Error against CLOCK_MONOTONIC read at the same instant: an anchor's TSC is the midpoint of
 * two reads around clock_gettime within PL_TSC_PAIR_NS (pl_tsc_pair), off by at most half that
 * (memtrack's anchor alike): 250 ns; mult, measured over >= 10 ms between two such pairs
 * (hundreds of ms in practice: memtrack anchors before loading its BPF programs), is off by
 * at most 500 ns / 10 ms = 50 ppm, 12.5 ns over a span; NTP's slew adds 125 ns at most.
 * Under 0.4 us in all: tests/bpf/test_track_preload.c relies on 1 us.
 */
#include <time.h>
#include "preload/preload.h"

#define PL_TSC_SPAN_NS 250000ull   /* a thread renews its anchor this often (ns) */
#define PL_TSC_CAL_NS  10000000ull /* the least time between the anchors that give mult (ns) */
#ifndef PL_TSC_PAIR_NS /* tests/unit/test_preload_clock.c sets 0: every pair fails */
#define PL_TSC_PAIR_NS 500ull /* the widest clock reads around an anchor's TSC pair (ns) */
#endif
#define PL_RECHECK_NS  1000000ull  /* a read this far past a thread's last stamp is read twice */

/* A stamp past this (146 years of uptime) is a wild read, never a time: a record stamped with
 * one would wait forever for the consumer's "older than now" (seen once in a 6.12 guest as
 * 2^64 - 96, i.e. {tv_sec -1, tv_nsec 999999904}; its source is not found yet). */
#define PL_NS_WILD (1ull << 62)

uint64_t pl_now(void)
{
	struct timespec ts;

	for (int i = 0; i < 3; i++) {
		uint64_t ns;

		if (clock_gettime(CLOCK_MONOTONIC, &ts)) /* the vDSO */
			continue;
		ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		if (ts.tv_sec >= 0 && ns < PL_NS_WILD)
			return ns;
	}
	return 0; /* no sane read: the caller's floor (a thread's last stamp) stands */
}

/*
 * A clock read to stamp with when the last stamp was `floor` (0: none yet): pl_now, read again
 * when it is more than PL_RECHECK_NS past floor, and the lower of the two kept. In a 6.12 qemu
 * TCG guest one vDSO read in some millions came back ~39 hours ahead (tv_sec 140544 at an
 * uptime of 41 s), once a thread's floor it stamped every later record of the thread there,
 * outside the process's life. A second read cannot be ahead of true time the way a wild one
 * is, and a true time is never above a later read: the minimum is right either way. A thread
 * allocating at least every PL_RECHECK_NS never reads twice.
 */
uint64_t pl_clock(uint64_t floor)
{
	uint64_t ns = pl_now(), again;

	if (ns > floor + PL_RECHECK_NS) {
		again = pl_now();
		if (again && again < ns)
			ns = again;
	}
	return ns;
}

#if PL_HAVE_TSC
/*
 * A TSC value and CLOCK_MONOTONIC at the same instant: TSC reads (ordered: lfence) just before
 * and after clock_gettime, their midpoint, all between two more clock reads no more than
 * PL_TSC_PAIR_NS apart, which bounds the error by half that. Retried when they are further
 * apart (preempted, interrupted); -1 when every try was.
 */
static int pl_tsc_pair(uint64_t *tsc, uint64_t *ns)
{
	for (int i = 0; i < 4; i++) {
		uint64_t n0 = pl_now(), c0 = pl_rdtsc_ordered(), n = pl_now(),
			 c1 = pl_rdtsc_ordered(), n1 = pl_now();

		/* n between n0 and n1: a wild middle read (pl_clock) is not an anchor */
		if (n1 - n0 > PL_TSC_PAIR_NS || c1 < c0 || n < n0 || n > n1)
			continue;
		*tsc = c0 + (c1 - c0) / 2;
		*ns = n;
		return 0;
	}
	return -1;
}

/* Measures mult once per process (a forked child inherits it). 0 when the TSC may be used. */
static int pl_tsc_calibrate(void)
{
	uint64_t c0, ns, tsc_anchor, ns_anchor;
	double per_cycle;

	if (pl.tsc_mult)
		return 0;
	if (pl.tsc_off || !pl.hdr)
		return -1;
	tsc_anchor = pl.hdr->tsc_anchor;
	ns_anchor = pl.hdr->ns_anchor;
	if (!tsc_anchor) {
		pl.tsc_off = 1;
		return -1;
	}
	if (pl_tsc_pair(&c0, &ns))
		return -1; /* preempted each time: clock_gettime for now */
	if (ns < ns_anchor + PL_TSC_CAL_NS)
		return -1; /* too close to tell: clock_gettime meanwhile */
	if (c0 <= tsc_anchor) {
		pl.tsc_off = 1; /* the TSC went backwards across processes: not the clock */
		return -1;
	}
	per_cycle = (double)(ns - ns_anchor) / (double)(c0 - tsc_anchor);
	if (!(per_cycle > 1e-3 && per_cycle < 1e3)) { /* 1 MHz .. 1 THz */
		pl.tsc_off = 1;
		return -1;
	}
	/* span * mult stays far below 2^64: span < 2^40 cycles, mult < 2^42 */
	pl.tsc_span = (uint64_t)((double)PL_TSC_SPAN_NS / per_cycle);
	__atomic_store_n(&pl.tsc_mult, (uint64_t)(per_cycle * 4294967296.0), __ATOMIC_RELEASE);
	return 0;
}

uint64_t pl_stamp_slow(struct pl_thread *t)
{
	uint64_t c0, ns, d;

	if (pl_tsc_calibrate()) {
		ns = pl_clock(t->ts_floor);
		goto out;
	}
	/* the most the old anchor can have given: its extrapolation now, or at its span's end */
	if (t->tsc_span) {
		d = pl_rdtsc() - t->tsc_a;
		if (d > t->tsc_span)
			d = t->tsc_span;
		ns = t->ns_a + ((d * pl.tsc_mult) >> PL_TSC_SHIFT);
		if (ns > t->ts_floor)
			t->ts_floor = ns;
	}
	if (pl_tsc_pair(&c0, &ns)) {
		t->tsc_span = 0; /* no anchor: clock_gettime, and try again next time */
		ns = pl_clock(t->ts_floor);
		goto out;
	}
	t->tsc_a = c0;
	t->ns_a = ns;
	t->tsc_span = pl.tsc_span;
out:
	if (ns >= PL_NS_WILD)
		ns = t->ts_floor; /* a wild extrapolation must not become the thread's floor */
	if (ns < t->ts_floor)
		ns = t->ts_floor;
	t->ts_floor = ns;
	return ns;
}
#endif
