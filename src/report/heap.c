// SPDX-License-Identifier: MIT
/*
 * Heap and RSS accounting. Hot path (runs in the tracker's consumer): one open-addressing table,
 * linear probing with backward-shift deletion (no tombstones, so probe lengths do not degrade
 * over a long malloc/free storm), no allocation per event, a one-entry pid cache in front of
 * the pid table. Blocks of an image that exec'd or exited stay in the table as dead slots
 * (their image is no longer their process' current one) and are purged at the next rehash:
 * exec/exit cost O(1), not a scan of every live block of the tree.
 *
 * Slots are 16 bytes, four to a cache line and never straddling two: with ~200k live blocks the
 * table is far bigger than what the compressor leaves of the caches, and 24-byte slots made the
 * table half as big again and a quarter of the slots cost two misses (~10-15% of the consumer's
 * CPU time then). The owner is a 32-bit image id (a global numbering of process images, each
 * mapped back to its process in imgs[]) and the size is 32 bits; sizes that do not fit live in
 * a side array, and an exec that cannot get a new image id purges the old image's slots in
 * place instead, so the accounting stays exact either way. A new process that cannot get one
 * (past ~4 billion images, or out of memory) is not recorded and counts in nomem, as when its
 * proc record cannot be allocated.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "common/log.h"
#include "report/heap.h"

#define TAB_MIN_CAP 1024 /* slots, power of two */
#define PID_MIN_CAP 64
#define LOAD_NUM 7 /* grow past 7/10 full: linear probing stays ~2 probes per hit */
#define LOAD_DEN 10
#define HUGE_PAGE (2UL << 20)
#define SIZE_BIG UINT32_MAX /* slot.size: the size is in the side array big[] */
#define IMG_NONE UINT32_MAX /* proc.img after Exit: owns no slot */
#ifndef HEAP_IMG_MAX
#define HEAP_IMG_MAX (UINT32_MAX - 1) /* image ids 0 .. HEAP_IMG_MAX - 1; tests lower it */
#endif

struct slot {
	uint64_t addr; /* 0: empty (no block lives at 0) */
	uint32_t size; /* bytes; SIZE_BIG: see big[] */
	uint32_t owner; /* image id of the allocating process image */
};

/* A block of SIZE_BIG bytes or more: rare, so a plain array searched linearly. */
struct big_block {
	uint64_t addr, size;
	uint32_t owner;
};

struct proc {
	int32_t pid, ppid;
	uint32_t img; /* current image id; older images' slots are dead; IMG_NONE after Exit */
	bool exited;
	uint64_t live, live_count, peak_heap; /* bytes, blocks, bytes */
	uint64_t allocs, frees, execs;
	uint64_t leaked_bytes, leaked_count; /* live at Exit */
	uint64_t lost_bytes, lost_count; /* live at Exec */
	uint64_t rss[MT_RSS_NR]; /* bytes, last absolute value per member */
	uint64_t rss_sum, peak_rss; /* file + anon + shmem */
	char comm[16]; /* the kernel's name for it, NUL-terminated; "" until told */
};

struct pid_slot {
	int32_t pid;
	uint32_t idx1; /* proc index + 1; 0: empty */
};

struct heap_acct {
	struct slot *tab;
	size_t cap, mask, used, dead, grow_at; /* used counts dead slots too */
	unsigned shift; /* 64 - log2(cap) */

	struct proc *procs;
	uint32_t nr_procs, procs_cap;
	uint32_t *imgs; /* image id -> proc index */
	uint32_t nr_imgs, imgs_cap;
	struct big_block *big;
	size_t nr_big, big_cap;
	struct pid_slot *pids; /* pid -> current proc (the newest one with that pid) */
	uint32_t pids_cap;
	int32_t last_pid; /* one-entry cache: events come in runs of one process */
	uint32_t last_idx;
	bool last_valid;

	uint64_t live, live_count, peak_heap; /* tree-wide, bytes */
	uint64_t rss, peak_rss; /* tree-wide, bytes: sum over live processes */
	uint64_t allocs, frees;
	uint64_t counts[MT_EV_TYPE_MAX], events;
	uint64_t unmatched_frees, replaced, lost_bytes, lost_count, ignored, nomem;
	uint64_t first_ts, last_ts;
	bool warned;
};

static inline size_t tab_home(const struct heap_acct *a, uint64_t addr, uint32_t owner)
{
	/* malloc addresses have their low 4 bits clear: multiply and keep the high bits */
	uint64_t h = (addr ^ ((uint64_t)owner * 0x9e3779b97f4a7c15ULL)) * 0xbf58476d1ce4e5b9ULL;

	return h >> a->shift;
}

static unsigned log2_exact(size_t v)
{
	return (unsigned)__builtin_ctzll(v);
}

/* Big tables on transparent huge pages when allowed: a lookup in a table much larger than the
 * caches is one DRAM miss, and without huge pages a TLB miss on top of it. */
static struct slot *tab_calloc(size_t cap)
{
	size_t bytes = cap * sizeof(struct slot);
	void *p;

	if (bytes < HUGE_PAGE)
		return calloc(cap, sizeof(struct slot));
	if (posix_memalign(&p, HUGE_PAGE, bytes))
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE); /* advisory: failure only costs speed */
	memset(p, 0, bytes);
	return p;
}

static int tab_alloc(struct heap_acct *a, size_t cap)
{
	struct slot *tab = tab_calloc(cap);

	if (!tab)
		return -ENOMEM;
	a->tab = tab;
	a->cap = cap;
	a->mask = cap - 1;
	a->shift = 64 - log2_exact(cap);
	a->grow_at = cap / LOAD_DEN * LOAD_NUM;
	a->used = 0;
	a->dead = 0;
	return 0;
}

static inline bool img_is_dead(const struct heap_acct *a, uint32_t img)
{
	return a->procs[a->imgs[img]].img != img;
}

/* Drops the side entries of dead images (after a rehash dropped their slots). */
static void big_purge_dead(struct heap_acct *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->nr_big; i++)
		if (!img_is_dead(a, a->big[i].owner))
			a->big[n++] = a->big[i];
	a->nr_big = n;
}

/* Removes and returns the size of a big block. */
static uint64_t big_take(struct heap_acct *a, uint64_t addr, uint32_t owner)
{
	for (size_t i = 0; i < a->nr_big; i++) {
		uint64_t size = a->big[i].size;

		if (a->big[i].addr != addr || a->big[i].owner != owner)
			continue;
		a->big[i] = a->big[--a->nr_big];
		return size;
	}
	return 0; /* not reached: every SIZE_BIG slot has its entry */
}

static int big_reserve(struct heap_acct *a)
{
	struct big_block *big;
	size_t cap;

	if (a->nr_big < a->big_cap)
		return 0;
	cap = a->big_cap ? a->big_cap * 2 : 8;
	big = realloc(a->big, cap * sizeof(*big));
	if (!big)
		return -ENOMEM;
	a->big = big;
	a->big_cap = cap;
	return 0;
}

/* The size of the block in slot s, which leaves the table (or is overwritten) next. */
static inline uint64_t slot_take_size(struct heap_acct *a, const struct slot *s)
{
	return s->size == SIZE_BIG ? big_take(a, s->addr, s->owner) : s->size;
}

/* Rehash into a table sized for the blocks that are still alive: doubles, or keeps the size
 * when dropping dead slots frees enough. */
static int tab_rehash(struct heap_acct *a)
{
	struct slot *old = a->tab;
	size_t old_cap = a->cap, alive = a->used - a->dead, cap = a->cap;
	int err;

	while ((alive + 1) * LOAD_DEN * 2 > cap * LOAD_NUM)
		cap *= 2;
	err = tab_alloc(a, cap);
	if (err) {
		a->tab = old;
		/* keep going until truly full; retry growing only then */
		a->grow_at = old_cap - 1;
		return err;
	}
	for (size_t i = 0; i < old_cap; i++) {
		const struct slot *s = &old[i];
		size_t j;

		if (!s->addr || img_is_dead(a, s->owner))
			continue;
		for (j = tab_home(a, s->addr, s->owner); a->tab[j].addr; j = (j + 1) & a->mask)
			;
		a->tab[j] = *s;
		a->used++;
	}
	free(old);
	if (a->nr_big)
		big_purge_dead(a);
	return 0;
}

/* Removes slot i, shifting back the entries of its cluster that would become unreachable. */
static inline void tab_delete(struct heap_acct *a, size_t i)
{
	size_t j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & a->mask;
		if (!a->tab[j].addr)
			break;
		k = tab_home(a, a->tab[j].addr, a->tab[j].owner);
		/* move j into the hole at i unless its home lies cyclically in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
			a->tab[i] = a->tab[j];
			i = j;
		}
	}
	a->tab[i].addr = 0;
	a->used--;
}

/* Deletes every slot of image img, without allocating. A forward scan is enough: a deletion
 * at i only moves entries from after i into i (checked again) or into holes after i, and
 * entries that wrap around from the table's start were already checked. */
static void tab_purge_img(struct heap_acct *a, uint32_t img)
{
	for (size_t i = 0; i < a->cap; i++) {
		while (a->tab[i].addr && a->tab[i].owner == img) {
			if (a->tab[i].size == SIZE_BIG)
				big_take(a, a->tab[i].addr, img);
			tab_delete(a, i);
		}
	}
}

/* A new image id for process pi: 0, or -ENOMEM when imgs[] cannot grow or ids ran out. */
static int img_new(struct heap_acct *a, uint32_t pi, uint32_t *img)
{
	if (a->nr_imgs >= HEAP_IMG_MAX)
		return -ENOMEM;
	if (a->nr_imgs == a->imgs_cap) {
		uint64_t cap = (uint64_t)a->imgs_cap * 2;
		uint32_t *imgs;

		if (cap > HEAP_IMG_MAX)
			cap = HEAP_IMG_MAX;
		imgs = realloc(a->imgs, cap * sizeof(*imgs));
		if (!imgs)
			return -ENOMEM;
		a->imgs = imgs;
		a->imgs_cap = (uint32_t)cap;
	}
	a->imgs[a->nr_imgs] = pi;
	*img = a->nr_imgs++;
	return 0;
}

static void pid_insert(struct heap_acct *a, int32_t pid, uint32_t idx)
{
	uint32_t mask = a->pids_cap - 1;
	uint32_t i = ((uint32_t)pid * 2654435761u) & mask;

	while (a->pids[i].idx1 && a->pids[i].pid != pid)
		i = (i + 1) & mask;
	a->pids[i].pid = pid;
	a->pids[i].idx1 = idx + 1;
}

static int pid_lookup(const struct heap_acct *a, int32_t pid)
{
	uint32_t mask = a->pids_cap - 1;
	uint32_t i = ((uint32_t)pid * 2654435761u) & mask;

	for (; a->pids[i].idx1; i = (i + 1) & mask)
		if (a->pids[i].pid == pid)
			return (int)(a->pids[i].idx1 - 1);
	return -1;
}

/* Adds a process record for pid (a new one even if pid was seen before: pid reuse). */
static int proc_new(struct heap_acct *a, int32_t pid, int32_t ppid)
{
	struct proc *p;

	if (a->nr_procs == a->procs_cap) {
		uint32_t cap = a->procs_cap * 2;
		struct proc *procs = realloc(a->procs, cap * sizeof(*procs));

		if (!procs)
			return -ENOMEM;
		a->procs = procs;
		a->procs_cap = cap;
	}
	/* keep the pid table at most half full; it holds one entry per distinct pid */
	if ((a->nr_procs + 1) * 2 > a->pids_cap) {
		struct pid_slot *old = a->pids;
		uint32_t old_cap = a->pids_cap;

		a->pids = calloc(old_cap * 2, sizeof(*a->pids));
		if (!a->pids) {
			a->pids = old;
			return -ENOMEM;
		}
		a->pids_cap = old_cap * 2;
		for (uint32_t i = 0; i < old_cap; i++)
			if (old[i].idx1)
				pid_insert(a, old[i].pid, old[i].idx1 - 1);
		free(old);
	}
	p = &a->procs[a->nr_procs];
	memset(p, 0, sizeof(*p));
	if (img_new(a, a->nr_procs, &p->img))
		return -ENOMEM;
	p->pid = pid;
	p->ppid = ppid;
	pid_insert(a, pid, a->nr_procs);
	a->last_valid = false;
	return (int)a->nr_procs++;
}

static void acct_nomem(struct heap_acct *a)
{
	a->nomem++;
	if (!a->warned) {
		a->warned = true;
		log__warn("accounting: out of memory, heap figures are incomplete");
	}
}

int heap_acct__new(struct heap_acct **out)
{
	struct heap_acct *a = calloc(1, sizeof(*a));
	int err = -ENOMEM;

	*out = NULL;
	if (!a)
		return -ENOMEM;
	a->procs_cap = 16;
	a->procs = calloc(a->procs_cap, sizeof(*a->procs));
	a->pids_cap = PID_MIN_CAP;
	a->pids = calloc(a->pids_cap, sizeof(*a->pids));
	a->imgs_cap = 16;
	a->imgs = calloc(a->imgs_cap, sizeof(*a->imgs));
	if (!a->procs || !a->pids || !a->imgs)
		goto cleanup;
	err = tab_alloc(a, TAB_MIN_CAP);
	if (err)
		goto cleanup;
	*out = a;
	return 0;
cleanup:
	heap_acct__free(a);
	return err;
}

void heap_acct__free(struct heap_acct *a)
{
	if (!a)
		return;
	free(a->tab);
	free(a->procs);
	free(a->pids);
	free(a->imgs);
	free(a->big);
	free(a);
}

static void heap_remove(struct heap_acct *a, struct proc *p, uint64_t addr)
{
	uint32_t owner = p->img;
	size_t i = tab_home(a, addr, owner);

	for (; a->tab[i].addr; i = (i + 1) & a->mask) {
		struct slot *s = &a->tab[i];
		uint64_t size;

		if (s->addr != addr || s->owner != owner)
			continue;
		size = slot_take_size(a, s);
		p->live -= size;
		p->live_count--;
		p->frees++;
		a->live -= size;
		a->live_count--;
		a->frees++;
		tab_delete(a, i);
		return;
	}
	a->unmatched_frees++;
}

static void heap_add(struct heap_acct *a, struct proc *p, uint64_t addr, uint64_t size)
{
	uint32_t owner = p->img;
	size_t i;

	/* before anything changes: a block that cannot be recorded is not accounted at all */
	if (size >= SIZE_BIG && big_reserve(a)) {
		acct_nomem(a);
		return;
	}
	if (a->used + 1 > a->grow_at) {
		/* a failed rehash still leaves room unless the table is completely full */
		if (tab_rehash(a) && a->used + 1 >= a->cap) {
			acct_nomem(a);
			return;
		}
	}
	for (i = tab_home(a, addr, owner); a->tab[i].addr; i = (i + 1) & a->mask) {
		struct slot *s = &a->tab[i];
		uint64_t old;

		if (s->addr != addr || s->owner != owner)
			continue;
		/* still live: its free was lost. Replace it, it is no free. */
		old = slot_take_size(a, s);
		p->live -= old;
		a->live -= old;
		p->live_count--;
		a->live_count--;
		a->replaced++;
		a->used--;
		break;
	}
	a->tab[i].addr = addr;
	a->tab[i].size = size >= SIZE_BIG ? SIZE_BIG : (uint32_t)size;
	a->tab[i].owner = owner;
	if (size >= SIZE_BIG)
		a->big[a->nr_big++] = (struct big_block){.addr = addr, .size = size, .owner = owner};
	a->used++;
	p->allocs++;
	a->allocs++;
	p->live += size;
	p->live_count++;
	a->live += size;
	a->live_count++;
	if (p->live > p->peak_heap)
		p->peak_heap = p->live;
	if (a->live > a->peak_heap)
		a->peak_heap = a->live;
}

/* The image's blocks leave the live heap; they become dead slots, purged at the next rehash.
 * At exec, a process without a new image id (out of memory, or ids ran out) keeps its id and
 * its old slots are deleted now. */
static void heap_drop_image(struct heap_acct *a, struct proc *p, uint32_t pi, bool exec)
{
	uint32_t img = IMG_NONE;

	a->live -= p->live;
	a->live_count -= p->live_count;
	if (exec && img_new(a, pi, &img)) {
		tab_purge_img(a, p->img);
	} else {
		a->dead += p->live_count;
		p->img = img;
	}
	p->live = 0;
	p->live_count = 0;
}

static void rss_reset(struct heap_acct *a, struct proc *p)
{
	a->rss -= p->rss_sum;
	p->rss_sum = 0;
	memset(p->rss, 0, sizeof(p->rss));
}

static void rss_set(struct heap_acct *a, struct proc *p, uint32_t member, uint64_t val)
{
	if (member >= MT_RSS_NR)
		return;
	if (member != MT_RSS_SWAP) {
		/* unsigned wrap-around makes the delta right in both directions */
		p->rss_sum += val - p->rss[member];
		a->rss += val - p->rss[member];
		if (p->rss_sum > p->peak_rss)
			p->peak_rss = p->rss_sum;
		if (a->rss > a->peak_rss)
			a->peak_rss = a->rss;
	}
	p->rss[member] = val;
}

/* The process an event belongs to, or -1 when the event is to be ignored. */
static inline int proc_of(struct heap_acct *a, const struct mt_event *ev)
{
	struct proc *p;
	int idx;

	if (a->last_valid && a->last_pid == ev->pid && ev->type != MT_EV_FORK)
		return (int)a->last_idx;
	idx = pid_lookup(a, ev->pid);
	if (ev->type == MT_EV_FORK) {
		int32_t ppid = (int32_t)ev->size;

		if (idx >= 0 && !a->procs[idx].exited) {
			/* its own records overtook the Fork: keep them */
			a->procs[idx].ppid = ppid;
			return idx;
		}
		return proc_new(a, ev->pid, ppid);
	}
	if (idx < 0)
		idx = proc_new(a, ev->pid, 0);
	if (idx < 0)
		return idx;
	p = &a->procs[idx];
	if (p->exited) {
		if (ev->type == MT_EV_RSS || ev->type == MT_EV_RMAP || ev->type == MT_EV_EXIT) {
			a->ignored++;
			return -1;
		}
		/* anything else means a new process got this pid and its Fork was lost */
		idx = proc_new(a, ev->pid, 0);
		if (idx < 0)
			return idx;
	}
	a->last_pid = ev->pid;
	a->last_idx = (uint32_t)idx;
	a->last_valid = true;
	return idx;
}

void heap_acct__event(struct heap_acct *a, const struct mt_event *ev)
{
	struct proc *p;
	int idx;

	if (ev->type == MT_EV_NONE || ev->type >= MT_EV_CTL_EXEC_STOPPED)
		return;
	a->counts[ev->type]++;
	if (!a->events++)
		a->first_ts = ev->ts;
	if (ev->ts > a->last_ts)
		a->last_ts = ev->ts;
	idx = proc_of(a, ev);
	if (idx < 0) {
		if (idx != -1)
			acct_nomem(a);
		return;
	}
	p = &a->procs[idx];

	switch (ev->type) {
	case MT_EV_MALLOC:
	case MT_EV_CALLOC:
	case MT_EV_ALIGNED_ALLOC:
		if (ev->addr)
			heap_add(a, p, ev->addr, ev->size);
		break;
	case MT_EV_FREE:
		if (ev->addr)
			heap_remove(a, p, ev->addr);
		break;
	case MT_EV_REALLOC:
		if (!ev->addr) {
			if (!ev->size && ev->old_addr)
				heap_remove(a, p, ev->old_addr);
			break; /* otherwise it failed: the old block stays valid */
		}
		if (ev->old_addr)
			heap_remove(a, p, ev->old_addr);
		heap_add(a, p, ev->addr, ev->size);
		break;
	case MT_EV_EXEC:
		p->execs++;
		p->lost_bytes += p->live;
		p->lost_count += p->live_count;
		a->lost_bytes += p->live;
		a->lost_count += p->live_count;
		heap_drop_image(a, p, (uint32_t)idx, true);
		rss_reset(a, p);
		break;
	case MT_EV_EXIT:
		p->leaked_bytes += p->live;
		p->leaked_count += p->live_count;
		heap_drop_image(a, p, (uint32_t)idx, false);
		rss_reset(a, p);
		p->exited = true;
		a->last_valid = false;
		break;
	case MT_EV_RSS:
		rss_set(a, p, ev->aux, ev->size);
		break;
	default: /* Mmap, Munmap, Brk, Fork (handled in proc_of), Rmap: counted only */
		break;
	}
}

/* Touch the slots a record will probe, so its cache miss overlaps the records before it.
 * A hint only: a wrong guess (the process exec'd or the table grew meanwhile) costs nothing. */
static inline void heap_prefetch(const struct heap_acct *a, const struct mt_event *ev)
{
	uint32_t owner;
	int idx;

	if (ev->type > MT_EV_REALLOC && ev->type != MT_EV_ALIGNED_ALLOC && ev->type != MT_EV_FREE)
		return;
	if (a->last_valid && a->last_pid == ev->pid)
		idx = (int)a->last_idx;
	else if ((idx = pid_lookup(a, ev->pid)) < 0)
		return;
	owner = a->procs[idx].img;
	if (ev->addr)
		__builtin_prefetch(&a->tab[tab_home(a, ev->addr, owner)], 1);
	if (ev->type == MT_EV_REALLOC && ev->old_addr)
		__builtin_prefetch(&a->tab[tab_home(a, ev->old_addr, owner)], 1);
}

/* Records ahead to prefetch: enough to cover a DRAM miss at ~20-40 ns of work per record. */
#define PREFETCH_AHEAD 8
/* Below this a table stays in L2 and a prefetch only costs its hashing. */
#define PREFETCH_MIN_BYTES (512 * 1024)

void heap_acct__events(struct heap_acct *a, const struct mt_event *ev, size_t n)
{
	if (a->cap * sizeof(struct slot) < PREFETCH_MIN_BYTES) {
		for (size_t i = 0; i < n; i++)
			heap_acct__event(a, &ev[i]);
		return;
	}
	for (size_t i = 0; i < n && i < PREFETCH_AHEAD; i++)
		heap_prefetch(a, &ev[i]);
	for (size_t i = 0; i < n; i++) {
		if (i + PREFETCH_AHEAD < n)
			heap_prefetch(a, &ev[i + PREFETCH_AHEAD]);
		heap_acct__event(a, &ev[i]);
	}
}

int heap_acct__fill(const struct heap_acct *a, struct manifest *m)
{
	struct manifest_proc *procs = NULL;

	if (a->nr_procs) {
		procs = calloc(a->nr_procs, sizeof(*procs));
		if (!procs)
			return -ENOMEM;
	}
	free(m->procs);
	m->procs = procs;
	m->nr_procs = a->nr_procs;
	m->leaked_bytes = 0;
	m->leaked_count = 0;
	for (uint32_t i = 0; i < a->nr_procs; i++) {
		const struct proc *p = &a->procs[i];
		struct manifest_proc *mp = &procs[i];

		mp->pid = p->pid;
		mp->ppid = p->ppid;
		mp->peak_heap = p->peak_heap;
		mp->peak_rss = p->peak_rss;
		mp->allocs = p->allocs;
		mp->frees = p->frees;
		/* p->live is 0 after Exit: this is what leaked at exit, or is live at the end */
		mp->leaked_bytes = p->leaked_bytes + p->live;
		mp->leaked_count = p->leaked_count + p->live_count;
		mp->execs = p->execs;
		memcpy(mp->comm, p->comm, sizeof(mp->comm));
		m->leaked_bytes += mp->leaked_bytes;
		m->leaked_count += mp->leaked_count;
	}
	m->peak_heap = a->peak_heap;
	m->peak_rss = a->peak_rss;
	m->allocs = a->allocs;
	m->frees = a->frees;
	memcpy(m->counts, a->counts, sizeof(m->counts));
	m->events_total = a->events;
	return 0;
}

void heap_acct__set_comm(struct heap_acct *a, int32_t pid, const char comm[16])
{
	int idx = pid_lookup(a, pid);

	if (idx < 0 || a->procs[idx].exited)
		return; /* its Fork was lost: the name has no process to go to */
	heap_acct__comm_copy(a->procs[idx].comm, comm);
}

void heap_acct__comm_copy(char out[16], const char comm[16])
{
	/* any byte but NUL may be in a name (PR_SET_NAME), and 15 bytes may cut a UTF-8
	 * sequence: printable ASCII only, so that the JSON written from it stays valid */
	for (int i = 0; i < 16; i++)
		out[i] = i == 15 || !comm[i] ? 0 : comm[i] < 0x20 || comm[i] > 0x7e ? '?' : comm[i];
	for (int i = (int)strnlen(out, 16); i < 16; i++)
		out[i] = 0;
}

void heap_acct__stats(const struct heap_acct *a, struct heap_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->live_bytes = a->live;
	s->live_count = a->live_count;
	s->rss = a->rss;
	s->unmatched_frees = a->unmatched_frees;
	s->replaced_allocs = a->replaced;
	s->lost_at_exec_bytes = a->lost_bytes;
	s->lost_at_exec_count = a->lost_count;
	s->ignored_after_exit = a->ignored;
	s->nomem = a->nomem;
	s->first_ts = a->first_ts;
	s->last_ts = a->last_ts;
	s->nr_procs = a->nr_procs;
}

uint64_t heap_acct__live_heap(const struct heap_acct *a)
{
	return a->live;
}

uint64_t heap_acct__live_rss(const struct heap_acct *a)
{
	return a->rss;
}

int heap_acct__proc_lost(const struct heap_acct *a, uint32_t idx, uint64_t *bytes,
			 uint64_t *count)
{
	if (idx >= a->nr_procs)
		return -ENOENT;
	*bytes = a->procs[idx].lost_bytes;
	*count = a->procs[idx].lost_count;
	return 0;
}
