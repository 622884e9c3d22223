/* SPDX-License-Identifier: MIT */
/*
 * Accounting over an event stream, the same code live (memtrack track) and offline
 * (memtrack report): live heap per process and tree (addr -> size), RSS per process and member,
 * peaks, counts, leaks. Feed it events in timestamp order per process.
 *
 * Semantics (all sizes in bytes, peaks exact at event granularity):
 * - Malloc, Calloc, AlignedAlloc with addr != 0 add a block; addr 0 (a failed call) is only
 *   counted in counts[]. An allocation at an address already live in the same image means a
 *   free was missed: the old block is replaced (counted in replaced_allocs, not as a free).
 * - Free removes a block; a free of an address not live in that image counts as an unmatched
 *   free. Realloc removes old_addr (if nonzero) then adds addr: one free and one alloc.
 *   Realloc with addr 0 failed and leaves the old block live, except realloc(p, 0) reported as
 *   Realloc{size 0, addr 0} by other trackers, which frees p.
 * - Addresses are per image: the key is (process, image, addr), so a forked child's blocks never
 *   match its parent's. A child starts with an empty heap; it freeing a block inherited through
 *   fork counts as an unmatched free.
 * - Exec: the old image's live blocks are gone with it. They leave the live heap without being
 *   counted as frees, go to lost_at_exec_*, and are NOT part of leaked_* (no double count).
 *   The process' RSS is reset (the new mm's counters follow as Rss events).
 * - Exit: what is live is the process' leak (leaked_*), then leaves the live heap; its RSS
 *   contribution drops to 0. Later Rss/Rmap/Exit records of that pid are ignored (mm teardown);
 *   any other record, or a Fork naming that pid, starts a new process (pid reuse).
 *   Processes still running at the end of the stream leak what is live then.
 * - Rss{member, size} is the absolute value of one counter; process RSS = file + anon + shmem
 *   (swap excluded); the tree RSS is the sum over live processes.
 * - Mmap, Munmap, Brk, Rmap are only counted. Control records (REC_CONTROL, records.h) and
 *   unknown types are ignored entirely.
 * - Byte sums never wrap: past 2^64 - 1 they show as UINT64_MAX and heap_stats.saturated is set.
 * - allocated_bytes sums the sizes of the blocks added (a Realloc adds its whole new size): the
 *   bytes requested over the run, freed or not.
 * Invariant: allocs - frees == live_count + leaked_count + lost_at_exec_count + replaced_allocs.
 */
#ifndef MEMTRACK_ACCT_H
#define MEMTRACK_ACCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/events.h"
#include "artifact/manifest.h"

struct heap_acct;

/* What the manifest has no room for. */
struct heap_stats {
	uint64_t live_bytes, live_count; /* now, tree-wide, processes still running */
	uint64_t rss; /* bytes, now, tree-wide */
	uint64_t unmatched_frees; /* Free / Realloc old_addr not live in that image */
	uint64_t replaced_allocs; /* allocation at an address already live */
	uint64_t lost_at_exec_bytes, lost_at_exec_count; /* live when their image exec'd */
	uint64_t ignored_after_exit; /* Rss/Rmap/Exit records of a pid after its Exit */
	uint64_t nomem; /* blocks not recorded: the table could not grow */
	uint64_t first_ts, last_ts; /* ns, over accounted records; 0 when none */
	uint32_t nr_procs;
	/* a byte figure passed 2^64 - 1 (crafted or corrupt sizes): it is shown as UINT64_MAX */
	bool saturated;
};

int heap_acct__new(struct heap_acct **a);
void heap_acct__free(struct heap_acct *a);
/* Updates the accounting with one artifact event (control records are ignored). Never fails:
 * a block that cannot be recorded for lack of memory is counted in heap_stats.nomem. */
void heap_acct__event(struct heap_acct *a, const struct mt_event *ev);
/* The same over n records in order; faster on big tables (it prefetches the slots ahead). */
void heap_acct__events(struct heap_acct *a, const struct mt_event *ev, size_t n);
/* Fills the results part of the manifest: peak_heap, peak_rss, allocs, allocated_bytes, frees,
 * leaked_*, counts[], events_total and procs[] (allocated: the manifest's, freed by
 * manifest__free; a procs[] already there is released first). comm is what
 * heap_acct__set_comm said, else empty: the artifact does not carry names. */
int heap_acct__fill(const struct heap_acct *a, struct manifest *m);
void heap_acct__stats(const struct heap_acct *a, struct heap_stats *s);
/* Names pid's current process (the tracker's RA_NAME control records, which follow the Fork or
 * Exec they name); ignored when pid has no live process. comm: up to 16 bytes, NUL-padded. */
void heap_acct__set_comm(struct heap_acct *a, int32_t pid, const char comm[16]);
/* A kernel name as the outputs keep it: NUL-terminated, bytes outside printable ASCII as '?'. */
void heap_acct__comm_copy(char out[16], const char comm[16]);
/* Tree-wide values now, cheap enough to sample after every event (timelines). */
uint64_t heap_acct__live_heap(const struct heap_acct *a);
uint64_t heap_acct__live_rss(const struct heap_acct *a);
/*
 * For a reader that follows each block's origin (memtrack report's stack sites) without a second
 * accounting: blocks carry a 32-bit tag given with the event that adds them, and the hooks see
 * every change of the live heap. Any hook may be NULL. Set before the first event.
 */
struct heap_acct_hooks {
	void *ctx;
	/* ev added a block of size bytes tagged tag to image img (after the table took it) */
	void (*add)(void *ctx, const struct mt_event *ev, uint32_t img, uint32_t tag, uint64_t size);
	/* the block tagged tag (size bytes, image img) left the live heap: freed by ev (a Free or a
	 * Realloc), or replaced (an allocation at its address: its free was lost) */
	void (*remove)(void *ctx, const struct mt_event *ev, uint32_t img, uint32_t tag,
		       uint64_t size, bool replaced);
	/* every live block of image img left the live heap: exit (leaked) or exec (lost) */
	void (*drop)(void *ctx, uint32_t img, bool exit);
	/* the tree's live heap has just reached a new maximum (the add that made it seen first) */
	void (*peak)(void *ctx);
};
/* 0, -EBUSY after the first event, -ENOMEM. */
int heap_acct__set_hooks(struct heap_acct *a, const struct heap_acct_hooks *h);
/* heap_acct__event, the block ev adds (if any) tagged tag. */
void heap_acct__event_tagged(struct heap_acct *a, const struct mt_event *ev, uint32_t tag);

/* Per-process lost-at-exec figures, by index in the procs[] heap_acct__fill produces. */
int heap_acct__proc_lost(const struct heap_acct *a, uint32_t idx, uint64_t *bytes,
			 uint64_t *count);

#endif
