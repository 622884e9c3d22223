/* SPDX-License-Identifier: MIT */
/*
 * Per allocation site figures: the artifact replayed through the accounting (acct.h, whose
 * blocks carry their site as a tag) with the stacks file (src/stacks/stackfile.h) naming the
 * stack of each allocation record. A site is a distinct stack, or with root frames a distinct
 * (process, stack) or (process, thread, stack).
 *
 * Figures per site, in bytes and blocks (the accounting's semantics, acct.h):
 * - alloc_*: blocks added over the run (a Realloc adds its whole new size), as allocated_bytes;
 *   sums over sites equal the manifest's allocs and allocated_bytes.
 * - peak_*: live at the tree's heap peak (the first event at which the tree's live heap reached
 *   its maximum); sums equal peak_heap.
 * - leak_*: live when its process exited, or at the end for processes still running; sums equal
 *   leaked_bytes / leaked_count. Blocks live at an exec are lost, not leaked (acct.h).
 * - temp_*: temporary blocks: freed by the thread that allocated them as that thread's next
 *   heap call: no allocation (Malloc, Calloc, Realloc, AlignedAlloc, failed calls included) and
 *   no free of that thread in between; a Free or realloc(p, 0). Other threads do not matter.
 *   heaptrack's rule (a free right after the last allocation; any free resets it), made exact:
 *   heaptrack compares the freed allocation's (size, stack) with the last allocation's, over
 *   the process' whole event order; we compare the block, per thread.
 */
#ifndef MEMTRACK_ACCT_SITES_H
#define MEMTRACK_ACCT_SITES_H

#include <stdint.h>
#include "acct/acct.h"
#include "stacks/stackfile.h"

enum site_root {
	SITE_ROOT_NONE = 0, /* sites are stacks */
	SITE_ROOT_PROCESS,  /* (pid, stack) */
	SITE_ROOT_THREAD,   /* (pid, tid, stack) */
};

struct site {
	uint32_t stack;	   /* stack id; 0: allocations without a stack */
	int32_t pid, tid;  /* 0 unless the root says */
	uint32_t proc_img; /* an image of the process (for its name): the first seen */
	uint64_t alloc_bytes, alloc_count;
	uint64_t peak_bytes, peak_count;
	uint64_t leak_bytes, leak_count;
	uint64_t temp_bytes, temp_count;
	/* private: live now, and its value at the latest peak when changed since (snap_epoch) */
	uint64_t live_bytes, live_count, snap_bytes, snap_count;
	uint64_t snap_epoch;
};

struct site_acct;

/* Hooks itself into a (which must not have seen an event yet); sf and a must outlive s. */
int site_acct__new(struct site_acct **s, struct heap_acct *a, const struct stackfile *sf,
		   enum site_root root);
void site_acct__free(struct site_acct *s); /* NULL-safe */
/* Every artifact record, in order, in place of heap_acct__event. */
void site_acct__event(struct site_acct *s, const struct mt_event *ev);
/* After the last event: leaks of processes still running, peak figures. 0 or -ENOMEM. */
int site_acct__finish(struct site_acct *s);
const struct site *site_acct__sites(const struct site_acct *s, uint32_t *n);
/* Allocation records read, and how many of them the stacks file had an id for. */
void site_acct__counts(const struct site_acct *s, uint64_t *alloc_records, uint64_t *with_id);
/* Nonzero after a failed allocation: figures are incomplete. */
uint64_t site_acct__nomem(const struct site_acct *s);

#endif
