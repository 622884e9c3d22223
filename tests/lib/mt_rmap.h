/* SPDX-License-Identifier: MIT */
/*
 * Rmap-record queries and invariants for the root tests (no cmocka: plain C like mt_harness).
 * An Rmap record's `size` is a signed delta in pages (two's complement); `aux` the member.
 * Everything here walks the artifact in its own order, which is the ring buffer's reservation
 * order: the order in which the BPF side changed its per-process counters.
 */
#ifndef MT_TEST_RMAP_H
#define MT_TEST_RMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "mt_harness.h"

static inline int64_t mt_rmap_delta(const struct mt_event *ev)
{
	return (int64_t)ev->size;
}

/* Which Rmap records to sum; zero fields match anything. */
struct mt_rmap_sel {
	int32_t pid, tid;
	int member;	 /* -1 = any member but swap; else MT_RSS_* */
	uint64_t t0, t1; /* timestamp window, inclusive; t1 0 = no upper bound */
	uint64_t lo, hi; /* address range [lo, hi); both 0 = any address */
	bool outside;	 /* select addresses outside [lo, hi) instead (0 counts as outside) */
	int sign;	 /* 1 = adds only, -1 = removes only, 0 = both */
};

/* Is ev an Rmap record the selection takes? */
bool mt_rmap_selected(const struct mt_event *ev, const struct mt_rmap_sel *s);

/* Sum of the selected deltas in pages; *n (if given) = how many records matched. */
int64_t mt_rmap_sum(const struct mt_run *r, const struct mt_rmap_sel *s, size_t *n);

/* Peak over the run of the running sum of the selected deltas, in pages (the running sum
 * starts at 0; records outside the selection do not move it). */
int64_t mt_rmap_peak(const struct mt_run *r, const struct mt_rmap_sel *s);

/* Running sum (pages) of pid's member over the records before index `upto` of r->ev. */
int64_t mt_rmap_sum_before(const struct mt_run *r, int32_t pid, uint32_t member, size_t upto);

/* Highest Rss value (bytes) written for pid and member over the run. */
uint64_t mt_rss_member_peak(const struct mt_run *r, int32_t pid, uint32_t member);

/*
 * The invariant that holds by construction on every backend that counts what rss_stat counts,
 * checked per (pid, member) in artifact order:
 *  - every Rss record equals the Rmap running sum at that point, or (peak keeping: a top is
 *    written late, when the counter starts falling) the highest running sum since the previous
 *    Rss record of that pair;
 *  - no local maximum of the running sum goes unwritten: the highest sum between two Rss
 *    records is not above both of them (the peak-keeping promise of RSS mode);
 *  - no Rmap record of a process after its Exit record, every sum is 0 at the Exit, and every
 *    sum ends equal to its last Rss record (0: memtrack waits for the whole tree);
 *  - no Rmap record for a pid that never had an Rss record (not tracked).
 * Exact under the tracepoint backend, threads racing included: its Rmap and Rss records are
 * the counter's own moves, read and written under the process's lock (src/bpf/rss.bpf.h), so
 * they reach the ring in counter order. The fentry backend's Rmap records come from the rmap
 * calls, outside that lock and in a separate step from the counter change (zap even batches
 * the counter per page table): there the sum may lead or lag an Rss record by one such
 * operation (mt_rmap_backend_lag) plus, when other tasks changed the same mm at the same
 * time, the pages of their last records (which may reach the ring on either side). The Exit
 * and final checks stay exact on every backend.
 * backend: the manifest's mechanisms.rmap_backend.
 * Returns 0, or -1 with the first violation described in msg.
 */
int mt_rmap_check_rss(const struct mt_run *r, const char *backend, char *msg, size_t len);

/* Pages of one rmap operation the counter may be ahead of or behind under the fentry backend:
 * one page table's worth (512 pages of 4 KiB: a zap batch or a THP); 0 for any other. */
int64_t mt_rmap_backend_lag(const char *backend);

#endif
