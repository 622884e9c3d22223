// SPDX-License-Identifier: MIT
/*
 * Heap and RSS accounting: what each record means (see acct.h). Runs in the tracker's consumer:
 * no allocation per event, a one-entry pid cache in front of the pid table, live blocks in the
 * table of blocks.h. Blocks of an image that exec'd or exited stay in the table as dead slots
 * (their image is no longer their process' current one): exec/exit cost O(1), not a scan of
 * every live block of the tree.
 *
 * The owner of a block is a 32-bit image id (a global numbering of process images, each mapped
 * back to its process in imgs[]); an exec that cannot get a new image id purges the old image's
 * slots in place instead, so the accounting stays exact either way. A new process that cannot
 * get one (past ~4 billion images, or out of memory) is not recorded and counts in nomem, as
 * when its proc record cannot be allocated.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "common/log.h"
#include "acct/acct.h"
#include "acct/blocks.h"
#include "common/records.h"

#include "acct/acct_priv.h"

static bool img_is_dead(const void *ctx, uint32_t img)
{
	const struct heap_acct *a = ctx;

	return a->procs[a->imgs[img]].img != img;
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

void acct__nomem(struct heap_acct *a)
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
	err = blocks__init(&a->blocks, img_is_dead, a);
	if (!err)
		err = window__init(a);
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
	blocks__free(&a->blocks);
	window__free(a);
	free(a->procs);
	free(a->pids);
	free(a->imgs);
	free(a);
}

static void heap_remove(struct heap_acct *a, const struct mt_event *ev, struct proc *p,
			uint64_t addr)
{
	uint64_t size;
	uint32_t tag;

	if (!blocks__take(&a->blocks, addr, p->img, &size, &tag)) {
		a->unmatched_frees++;
		return;
	}
	if (p->win_count)
		window__remove(a, p, addr, true);
	if (a->hooks.remove)
		a->hooks.remove(a->hooks.ctx, ev, p->img, tag, size, false);
	p->live -= size;
	p->live_count--;
	p->frees++;
	a->live -= size;
	a->live_count--;
	a->frees++;
}

static void heap_add(struct heap_acct *a, const struct mt_event *ev, struct proc *p, uint64_t addr,
		     uint64_t size)
{
	uint64_t old = 0;
	uint32_t old_tag = 0;
	int rc = blocks__put(&a->blocks, addr, p->img, size, a->tag, &old, &old_tag);

	if (rc < 0) {
		acct__nomem(a);
		return;
	}
	if (a->hooked) {
		if (a->hooks.add)
			a->hooks.add(a->hooks.ctx, ev, p->img, a->tag, size);
		if (rc && a->hooks.remove)
			a->hooks.remove(a->hooks.ctx, ev, p->img, old_tag, old, true);
	}
	if (rc) {
		/* still live: its free was lost. Replaced, it is no free. */
		p->live -= old;
		a->live -= old;
		p->live_count--;
		a->live_count--;
		a->replaced++;
		if (p->win_count)
			window__remove(a, p, addr, false);
	}
	p->allocs++;
	a->allocs++;
	a->allocated += size;
	p->live += size;
	p->live_count++;
	a->live += size;
	a->live_count++;
	if (p->live > p->peak_heap)
		p->peak_heap = p->live;
	if (a->live > a->peak_heap) {
		a->peak_heap = a->live;
		if (a->hooks.peak)
			a->hooks.peak(a->hooks.ctx);
	}
	if (p->win_open)
		window__add(a, p, addr, size);
}

/* The image's blocks leave the live heap; they become dead slots, purged at the next rehash.
 * At exec, a process without a new image id (out of memory, or ids ran out) keeps its id and
 * its old slots are deleted now. */
static void heap_drop_image(struct heap_acct *a, struct proc *p, uint32_t pi, bool exec,
			    uint64_t ts)
{
	uint32_t img = IMG_NONE, old = p->img;
	bool purged = exec && img_new(a, pi, &img);

	if (a->hooks.drop)
		a->hooks.drop(a->hooks.ctx, p->img, !exec);
	a->live -= p->live;
	a->live_count -= p->live_count;
	if (purged) {
		blocks__purge(&a->blocks, p->img);
	} else {
		blocks__add_dead(&a->blocks, p->live_count);
		p->img = img;
	}
	window__drop_image(a, p, old, purged, !exec, ts);
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
		p->rss_sum += (u128)val - p->rss[member];
		a->rss += (u128)val - p->rss[member];
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

int acct__proc_of(struct heap_acct *a, const struct mt_event *ev)
{
	return proc_of(a, ev);
}

int acct__pid_lookup(const struct heap_acct *a, int32_t pid)
{
	return pid_lookup(a, pid);
}

void heap_acct__event(struct heap_acct *a, const struct mt_event *ev)
{
	struct proc *p;
	int idx;

	if (!records__has(ev->type, REC_ARTIFACT)) {
		if (records__has(ev->type, REC_COMPANION))
			window__record(a, ev);
		return;
	}
	a->counts[ev->type]++;
	if (!a->events++)
		a->first_ts = ev->ts;
	if (ev->ts > a->last_ts)
		a->last_ts = ev->ts;
	idx = proc_of(a, ev);
	if (idx < 0) {
		if (idx != -1)
			acct__nomem(a);
		return;
	}
	p = &a->procs[idx];

	switch (ev->type) {
	case MT_EV_MALLOC:
	case MT_EV_CALLOC:
	case MT_EV_ALIGNED_ALLOC:
		if (ev->addr)
			heap_add(a, ev, p, ev->addr, ev->size);
		break;
	case MT_EV_FREE:
		if (ev->addr)
			heap_remove(a, ev, p, ev->addr);
		break;
	case MT_EV_REALLOC:
		if (!ev->addr) {
			if (!ev->size && ev->old_addr)
				heap_remove(a, ev, p, ev->old_addr);
			break; /* otherwise it failed: the old block stays valid */
		}
		if (ev->old_addr)
			heap_remove(a, ev, p, ev->old_addr);
		heap_add(a, ev, p, ev->addr, ev->size);
		break;
	case MT_EV_EXEC:
		p->execs++;
		p->lost_bytes += p->live;
		p->lost_count += p->live_count;
		a->lost_bytes += p->live;
		a->lost_count += p->live_count;
		heap_drop_image(a, p, (uint32_t)idx, true, ev->ts);
		rss_reset(a, p);
		break;
	case MT_EV_EXIT:
		p->leaked_bytes += p->live;
		p->leaked_count += p->live_count;
		heap_drop_image(a, p, (uint32_t)idx, false, ev->ts);
		rss_reset(a, p);
		p->exited = true;
		a->last_valid = false;
		break;
	case MT_EV_RSS:
		rss_set(a, p, ev->aux, ev->size);
		break;
	case MT_EV_FORK: /* the process itself is made by proc_of */
		window__fork(a, p, (int32_t)ev->size, ev->ts);
		break;
	default: /* Mmap, Munmap, Brk, Rmap: counted only */
		break;
	}
}

/* Leaked at exit, and live at the end, over every process. */
static u128 leaked_total(const struct heap_acct *a)
{
	u128 sum = 0;

	for (uint32_t i = 0; i < a->nr_procs; i++)
		sum += a->procs[i].leaked_bytes + a->procs[i].live;
	return sum;
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
	m->leaked_count = 0;
	for (uint32_t i = 0; i < a->nr_procs; i++) {
		const struct proc *p = &a->procs[i];
		struct manifest_proc *mp = &procs[i];

		mp->pid = p->pid;
		mp->ppid = p->ppid;
		mp->peak_heap = sat64(p->peak_heap);
		mp->peak_rss = sat64(p->peak_rss);
		mp->allocs = p->allocs;
		mp->frees = p->frees;
		/* p->live is 0 after Exit: this is what leaked at exit, or is live at the end */
		mp->leaked_bytes = sat64(p->leaked_bytes + p->live);
		mp->leaked_count = p->leaked_count + p->live_count;
		mp->execs = p->execs;
		memcpy(mp->comm, p->comm, sizeof(mp->comm));
		m->leaked_count += mp->leaked_count;
	}
	m->leaked_bytes = sat64(leaked_total(a));
	m->peak_heap = sat64(a->peak_heap);
	m->peak_rss = sat64(a->peak_rss);
	m->allocs = a->allocs;
	m->allocated_bytes = sat64(a->allocated);
	m->frees = a->frees;
	memcpy(m->counts, a->counts, sizeof(m->counts));
	m->events_total = a->events;
	return window__fill(a, m);
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
	s->live_bytes = sat64(a->live);
	s->live_count = a->live_count;
	s->rss = sat64(a->rss);
	s->unmatched_frees = a->unmatched_frees;
	s->replaced_allocs = a->replaced;
	s->lost_at_exec_bytes = sat64(a->lost_bytes);
	s->lost_at_exec_count = a->lost_count;
	s->ignored_after_exit = a->ignored;
	s->nomem = a->nomem;
	s->first_ts = a->first_ts;
	s->last_ts = a->last_ts;
	s->nr_procs = a->nr_procs;
	/* every per-process figure is bounded by one of these tree-wide ones */
	s->saturated = a->peak_heap > UINT64_MAX || a->peak_rss > UINT64_MAX ||
		       a->lost_bytes > UINT64_MAX || leaked_total(a) > UINT64_MAX ||
		       a->allocated > UINT64_MAX;
}

int heap_acct__set_hooks(struct heap_acct *a, const struct heap_acct_hooks *h)
{
	int err;

	if (a->events)
		return -EBUSY;
	err = blocks__enable_tags(&a->blocks);
	if (err)
		return err;
	a->hooks = *h;
	a->hooked = true;
	return 0;
}

void heap_acct__event_tagged(struct heap_acct *a, const struct mt_event *ev, uint32_t tag)
{
	a->tag = tag;
	heap_acct__event(a, ev);
	a->tag = 0;
}

uint64_t heap_acct__live_heap(const struct heap_acct *a)
{
	return sat64(a->live);
}

uint64_t heap_acct__live_rss(const struct heap_acct *a)
{
	return sat64(a->rss);
}

int heap_acct__proc_lost(const struct heap_acct *a, uint32_t idx, uint64_t *bytes,
			 uint64_t *count)
{
	if (idx >= a->nr_procs)
		return -ENOENT;
	*bytes = sat64(a->procs[idx].lost_bytes);
	*count = a->procs[idx].lost_count;
	return 0;
}
