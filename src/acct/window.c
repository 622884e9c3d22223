// SPDX-License-Identifier: MIT
/* The measured window and the markers in the accounting (semantics: window.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acct/acct_priv.h"
#include "common/log.h"
#include "common/records.h"

static bool win_img_dead(const void *ctx, uint32_t img)
{
	const struct heap_acct *a = ctx;

	return a->procs[a->imgs[img]].img != img;
}

int window__init(struct heap_acct *a)
{
	return blocks__init(&a->win.blocks, win_img_dead, a);
}

void window__free(struct heap_acct *a)
{
	blocks__free(&a->win.blocks);
	free(a->win.marks);
}

void window__add(struct heap_acct *a, struct proc *p, uint64_t addr, uint64_t size)
{
	struct acct_window *w = &a->win;
	uint64_t old = 0;
	int rc = blocks__put(&w->blocks, addr, p->img, size, 0, &old, NULL);

	if (rc < 0) {
		a->nomem++;
		return;
	}
	if (rc) { /* cannot happen while frees reach window__remove; stay exact if it does */
		w->live -= old;
		p->win_live -= old;
		w->live_count--;
		p->win_count--;
	}
	w->allocs++;
	w->allocated += size;
	w->live += size;
	w->live_count++;
	p->win_live += size;
	p->win_count++;
	if (w->live > w->peak)
		w->peak = w->live;
}

void window__remove(struct heap_acct *a, struct proc *p, uint64_t addr, bool freed)
{
	struct acct_window *w = &a->win;
	uint64_t size;

	if (!p->win_count || !blocks__take(&w->blocks, addr, p->img, &size, NULL))
		return;
	w->live -= size;
	w->live_count--;
	p->win_live -= size;
	p->win_count--;
	w->frees += freed;
}

static void window_close(struct acct_window *w, struct proc *p, uint64_t ts)
{
	p->win_open = false;
	if (--w->open == 0 && ts > w->open_since)
		w->open_ns += ts - w->open_since;
}

static void window_open(struct acct_window *w, struct proc *p, uint64_t ts)
{
	p->win_open = true;
	if (w->open++ == 0)
		w->open_since = ts;
}

void window__drop_image(struct heap_acct *a, struct proc *p, uint32_t old_img, bool purged,
			bool exit, uint64_t ts)
{
	struct acct_window *w = &a->win;

	if (exit) {
		w->exited_bytes += p->win_live;
		w->exited_count += p->win_count;
		if (p->win_open)
			window_close(w, p, ts);
	}
	w->live -= p->win_live;
	w->live_count -= p->win_count;
	if (purged)
		blocks__purge(&w->blocks, old_img);
	else
		blocks__add_dead(&w->blocks, p->win_count);
	p->win_live = 0;
	p->win_count = 0;
}

void window__fork(struct heap_acct *a, struct proc *child, int32_t ppid, uint64_t ts)
{
	int idx = acct__pid_lookup(a, ppid);

	if (idx >= 0 && a->procs[idx].win_open && !child->win_open)
		window_open(&a->win, child, ts);
}

/* A MARK's name parts come before it, from the same thread. */
static struct acct_name_slot *name_slot(struct acct_window *w, int32_t tid, bool create)
{
	struct acct_name_slot *free_slot = NULL;

	for (int i = 0; i < ACCT_NAME_SLOTS; i++) {
		if (w->names[i].tid == tid)
			return &w->names[i];
		if (!w->names[i].tid && !free_slot)
			free_slot = &w->names[i];
	}
	if (!create)
		return NULL;
	if (!free_slot) /* a thread whose marker never came: reuse its slot */
		free_slot = &w->names[(uint32_t)tid % ACCT_NAME_SLOTS];
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->tid = tid;
	return free_slot;
}

static void name_part(struct acct_window *w, const struct mt_event *ev)
{
	struct acct_name_slot *s = name_slot(w, ev->tid, true);
	size_t off = (size_t)ev->aux * MT_MARK_NAME_PART;

	if (off + MT_MARK_NAME_PART <= sizeof(s->name))
		memcpy(s->name + off, &ev->addr, MT_MARK_NAME_PART);
}

static void marker_add(struct heap_acct *a, const struct mt_event *ev, const char *kind)
{
	struct acct_window *w = &a->win;
	struct acct_name_slot *s = name_slot(w, ev->tid, false);
	struct manifest_marker *mk;

	if (w->nr_marks == ACCT_MARKERS_MAX) {
		w->marks_dropped++;
		goto cleanup;
	}
	if (w->nr_marks == w->marks_cap) {
		uint32_t cap = w->marks_cap ? w->marks_cap * 2 : 16;
		void *p = realloc(w->marks, cap * sizeof(*w->marks));

		if (!p) {
			w->marks_dropped++;
			goto cleanup;
		}
		w->marks = p;
		w->marks_cap = cap;
	}
	mk = &w->marks[w->nr_marks++];
	memset(mk, 0, sizeof(*mk));
	snprintf(mk->kind, sizeof(mk->kind), "%s", kind);
	if (s && ev->aux == MT_MARK_MARK) /* printable ASCII: the JSON stays valid */
		for (size_t i = 0; i < MT_MARK_NAME_MAX && s->name[i]; i++)
			mk->name[i] = s->name[i] < 0x20 || s->name[i] > 0x7e ? '?' : s->name[i];
	mk->pid = ev->pid;
	mk->tid = ev->tid;
	mk->ts_ns = ev->ts;
	mk->heap = sat64(a->live);
	mk->window_heap = sat64(w->live);
cleanup:
	if (s)
		s->tid = 0;
}

void window__record(struct heap_acct *a, const struct mt_event *ev)
{
	static const char *const kinds[MT_MARK_NR] = {
	    [MT_MARK_START] = "start", [MT_MARK_STOP] = "stop", [MT_MARK_MARK] = "mark"};
	struct acct_window *w = &a->win;
	struct proc *p;
	int idx;

	if (ev->type == MT_EV_MARKER_NAME) {
		name_part(w, ev);
		return;
	}
	if (ev->type != MT_EV_MARKER || ev->aux == MT_MARK_NONE || ev->aux >= MT_MARK_NR)
		return;
	idx = acct__proc_of(a, ev);
	if (idx < 0)
		return;
	p = &a->procs[idx];
	if (ev->aux == MT_MARK_START) {
		w->present = true;
		if (p->win_open) {
			w->extra_starts++;
		} else {
			window_open(w, p, ev->ts);
			w->starts++;
		}
	} else if (ev->aux == MT_MARK_STOP) {
		if (p->win_open) {
			window_close(w, p, ev->ts);
			w->stops++;
		} else {
			w->unmatched_stops++;
		}
	}
	marker_add(a, ev, kinds[ev->aux]);
}

int window__fill(const struct heap_acct *a, struct manifest *m)
{
	const struct acct_window *w = &a->win;
	struct manifest_window *mw = &m->window;

	free(m->markers);
	m->markers = NULL;
	m->nr_markers = 0;
	memset(mw, 0, sizeof(*mw));
	m->markers_dropped = w->marks_dropped;
	if (w->nr_marks) {
		m->markers = malloc(w->nr_marks * sizeof(*m->markers));
		if (!m->markers)
			return -ENOMEM;
		memcpy(m->markers, w->marks, w->nr_marks * sizeof(*m->markers));
		m->nr_markers = w->nr_marks;
	}
	mw->present = w->present;
	mw->peak_heap = sat64(w->peak);
	mw->allocs = w->allocs;
	mw->allocated_bytes = sat64(w->allocated);
	mw->frees = w->frees;
	mw->live_bytes = sat64(w->live + w->exited_bytes);
	mw->live_count = w->live_count + w->exited_count;
	mw->starts = w->starts;
	mw->stops = w->stops;
	mw->duration_ns = w->open_ns;
	if (w->open && a->last_ts > w->open_since) /* still open at the end */
		mw->duration_ns += a->last_ts - w->open_since;
	return 0;
}
