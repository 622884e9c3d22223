// SPDX-License-Identifier: MIT
/*
 * heap_acct__events: the tracker's batches of records through the accounting, faster than one
 * heap_acct__event each and with the same results (tests/unit/test_acct_batch.c holds them to
 * it): slots prefetched ahead on big tables, and runs of one process' heap records handled
 * with their figures in locals.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "acct/acct_priv.h"
#include "common/records.h"

/* Touch the slots a record will probe, so its cache miss overlaps the records before it.
 * A hint only: a wrong guess (the process exec'd or the table grew meanwhile) costs nothing. */
static inline void heap_prefetch(const struct heap_acct *a, const struct mt_event *ev)
{
	uint32_t owner;
	int idx;

	if (!records__has(ev->type, REC_HEAP))
		return;
	if (a->last_valid && a->last_pid == ev->pid)
		idx = (int)a->last_idx;
	else if ((idx = acct__pid_lookup(a, ev->pid)) < 0)
		return;
	owner = a->procs[idx].img;
	if (ev->addr)
		blocks__prefetch(&a->blocks, ev->addr, owner);
	if (ev->old_addr)
		blocks__prefetch(&a->blocks, ev->old_addr, owner);
}

/*
 * The hot path: a run of heap records (Malloc, Calloc, AlignedAlloc, Free, Realloc) of the
 * process of the one-entry cache, with the figures they change in locals (registers), written
 * back once at the end of the run; heap_add and heap_remove do the same arithmetic one record
 * at a time through memory. Only taken when nothing else has to see each change: no hooks, and
 * the process' window closed with none of its blocks (nothing in a run can open it: markers
 * and Fork end a run).
 *
 * An allocation followed at once by the Free of its block (the storm's malloc/free pairs)
 * leaves the table as it was, but for a block live at that address already, whose free was
 * lost: that one is taken out (replaced). The pair costs one lookup instead of an insertion
 * and a deletion; its figures are those of the two records in order (allocs, frees, bytes, the
 * peaks with the block live). Not for a big block or a full table, where the insertion could
 * fail for lack of memory (the Free would then be unmatched): those go one by one.
 */
struct heap_hot {
	u128 live, peak, allocated;	     /* tree */
	u128 p_live, p_peak;		     /* process */
	uint64_t live_count, allocs, frees; /* tree */
	uint64_t p_live_count, p_allocs, p_frees;
	uint64_t replaced, unmatched, events, last_ts;
	uint64_t counts[MT_EV_FREE + 1];
};

static inline void hot_alloc(struct heap_hot *h, uint64_t size)
{
	h->allocs++;
	h->p_allocs++;
	h->allocated += size;
	h->live += size;
	h->p_live += size;
	h->live_count++;
	h->p_live_count++;
	if (h->p_live > h->p_peak)
		h->p_peak = h->p_live;
	if (h->live > h->peak)
		h->peak = h->live;
}

/* size bytes left the live heap: freed, or replaced */
static inline void hot_release(struct heap_hot *h, uint64_t size, bool freed)
{
	h->live -= size;
	h->p_live -= size;
	h->live_count--;
	h->p_live_count--;
	if (freed) {
		h->frees++;
		h->p_frees++;
	} else {
		h->replaced++;
	}
}

static inline void hot_free(struct heap_hot *h, struct blocks *b, uint64_t addr, uint32_t img)
{
	uint64_t size;

	if (blocks__take(b, addr, img, &size, NULL))
		hot_release(h, size, true);
	else
		h->unmatched++;
}

static inline void hot_add(struct heap_acct *a, struct heap_hot *h, uint64_t addr, uint32_t img,
			   uint64_t size)
{
	uint64_t old;
	int rc = blocks__put(&a->blocks, addr, img, size, 0, &old, NULL);

	if (rc < 0) {
		acct__nomem(a);
		return;
	}
	if (rc)
		hot_release(h, old, false);
	hot_alloc(h, size);
}

static inline bool hot_type(uint32_t type)
{
	return type - MT_EV_MALLOC <= MT_EV_FREE - MT_EV_MALLOC;
}

/* Handles ev[i..] while they qualify; returns the index of the first record it left. */
static size_t heap_run(struct heap_acct *a, const struct mt_event *ev, size_t i, size_t n,
		       bool prefetch)
{
	struct proc *p = &a->procs[a->last_idx];
	struct blocks *b = &a->blocks;
	const int32_t pid = a->last_pid;
	const uint32_t img = p->img;
	struct heap_hot h = {
		.live = a->live, .peak = a->peak_heap, .allocated = a->allocated,
		.p_live = p->live, .p_peak = p->peak_heap, .live_count = a->live_count,
		.allocs = a->allocs, .frees = a->frees, .p_live_count = p->live_count,
		.p_allocs = p->allocs, .p_frees = p->frees, .last_ts = a->last_ts,
	};

	for (; i < n; i++) {
		const struct mt_event *e = &ev[i];
		const uint32_t type = e->type;

		if (e->pid != pid || !hot_type(type))
			break;
		if (prefetch && i + PREFETCH_AHEAD < n)
			heap_prefetch(a, &ev[i + PREFETCH_AHEAD]);
		h.counts[type]++;
		h.events++;
		if (e->ts > h.last_ts)
			h.last_ts = e->ts;
		if (type == MT_EV_FREE) {
			if (e->addr)
				hot_free(&h, b, e->addr, img);
			continue;
		}
		if (type == MT_EV_REALLOC) {
			if (e->old_addr && (e->addr || !e->size))
				hot_free(&h, b, e->old_addr, img);
			if (e->addr)
				hot_add(a, &h, e->addr, img, e->size);
			continue;
		}
		if (!e->addr)
			continue; /* a failed call: counted only */
		if (i + 1 < n && e[1].type == MT_EV_FREE && e[1].addr == e->addr && e[1].pid == pid &&
		    e->size < BLOCK_SIZE_BIG && b->used + 1 <= b->grow_at) {
			uint64_t old;

			if (blocks__take(b, e->addr, img, &old, NULL))
				hot_release(&h, old, false);
			hot_alloc(&h, e->size);
			hot_release(&h, e->size, true);
			i++;
			h.counts[MT_EV_FREE]++;
			h.events++;
			if (e[1].ts > h.last_ts)
				h.last_ts = e[1].ts;
			continue;
		}
		hot_add(a, &h, e->addr, img, e->size);
	}
	for (uint32_t t = MT_EV_MALLOC; t <= MT_EV_FREE; t++)
		a->counts[t] += h.counts[t];
	a->events += h.events;
	a->last_ts = h.last_ts;
	a->live = h.live;
	a->peak_heap = h.peak;
	a->allocated = h.allocated;
	a->live_count = h.live_count;
	a->allocs = h.allocs;
	a->frees = h.frees;
	a->replaced += h.replaced;
	a->unmatched_frees += h.unmatched;
	p->live = h.p_live;
	p->peak_heap = h.p_peak;
	p->live_count = h.p_live_count;
	p->allocs = h.p_allocs;
	p->frees = h.p_frees;
	return i;
}

void heap_acct__events(struct heap_acct *a, const struct mt_event *ev, size_t n)
{
	bool prefetch = blocks__bytes(&a->blocks) >= PREFETCH_MIN_BYTES;

	for (size_t i = 0; prefetch && i < n && i < PREFETCH_AHEAD; i++)
		heap_prefetch(a, &ev[i]);
	for (size_t i = 0; i < n;) {
		/* a run needs a process known already (its first record went the generic way) */
		if (!a->hooked && a->last_valid && ev[i].pid == a->last_pid && hot_type(ev[i].type) &&
		    !a->procs[a->last_idx].win_open && !a->procs[a->last_idx].win_count) {
			size_t j = heap_run(a, ev, i, n, prefetch);

			if (j > i) {
				i = j;
				continue;
			}
		}
		if (prefetch && i + PREFETCH_AHEAD < n)
			heap_prefetch(a, &ev[i + PREFETCH_AHEAD]);
		heap_acct__event(a, &ev[i]);
		i++;
	}
}
