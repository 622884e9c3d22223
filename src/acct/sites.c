// SPDX-License-Identifier: MIT
/*
 * Allocation sites over the accounting's hooks (see sites.h). Live figures per (image, site)
 * are kept in entries, linked per image, so that an exit or exec moves exactly that image's
 * blocks out of the sites' live figures without a scan of the block table.
 *
 * Peak figures without a copy at every new peak: a peak only bumps an epoch; the first change
 * of a site after a peak first saves its live figures (their value at that peak) into snap_*.
 * At the end a site changed since the last peak has its peak value in snap_*, any other one in
 * live_*. O(1) per event.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "acct/sites.h"
#include "common/kvmap.h"
#include "common/log.h"

#define NO_ENTRY UINT32_MAX

struct site_entry {
	uint32_t site, next;   /* next entry of the same image, NO_ENTRY at the end */
	uint64_t bytes, count; /* live blocks of the site in the image */
	bool linked;	       /* in its image's list */
};

struct site_acct {
	struct heap_acct *acct;
	const struct stackfile *sf;
	enum site_root root;
	struct site *sites;
	uint32_t nr_sites, sites_cap;
	struct kvmap site_ids; /* (root key, stack) -> index in sites */
	struct site_entry *entries;
	uint32_t nr_entries, entries_cap;
	struct kvmap entry_ids; /* (image, site) -> index in entries */
	struct kvmap heads;	/* (image, 0) -> first entry + 1 */
	struct kvmap threads;	/* (pid, tid) -> address of the thread's last allocation, 0: none */
	uint64_t epoch;		/* peaks reached */
	uint64_t records, with_id, nomem;
};

static void site_nomem(struct site_acct *s)
{
	if (!s->nomem++)
		log__warn("stack sites: out of memory, per-site figures are incomplete");
}

static void touch(struct site_acct *s, struct site *st)
{
	if (st->snap_epoch != s->epoch) {
		st->snap_bytes = st->live_bytes;
		st->snap_count = st->live_count;
		st->snap_epoch = s->epoch;
	}
}

/* The entry of (img, site), linked into the image's list; NULL when out of memory. */
static struct site_entry *entry_get(struct site_acct *s, uint32_t img, uint32_t site)
{
	uint64_t *id = kvmap__get(&s->entry_ids, img, site, NULL), *head;
	struct site_entry *e;

	if (!id)
		return NULL;
	if (!*id) {
		if (s->nr_entries == s->entries_cap) {
			uint32_t cap = s->entries_cap ? s->entries_cap * 2 : 256;
			struct site_entry *en = realloc(s->entries, (size_t)cap * sizeof(*en));

			if (!en)
				return NULL;
			s->entries = en;
			s->entries_cap = cap;
		}
		s->entries[s->nr_entries] = (struct site_entry){.site = site, .next = NO_ENTRY};
		*id = ++s->nr_entries; /* index + 1: 0 is "new" */
	}
	e = &s->entries[*id - 1];
	if (!e->linked) {
		head = kvmap__get(&s->heads, img, 0, NULL);
		if (!head)
			return NULL;
		e->next = *head ? (uint32_t)(*head - 1) : NO_ENTRY;
		*head = *id;
		e->linked = true;
	}
	return e;
}

static void on_add(void *ctx, const struct mt_event *ev, uint32_t img, uint32_t tag, uint64_t size)
{
	struct site_acct *s = ctx;
	struct site_entry *e;
	struct site *st;
	uint64_t *last;

	if (!tag || tag > s->nr_sites)
		return;
	st = &s->sites[tag - 1];
	touch(s, st);
	st->live_bytes += size;
	st->live_count++;
	st->alloc_bytes += size;
	st->alloc_count++;
	e = entry_get(s, img, tag - 1);
	last = kvmap__get(&s->threads, (uint32_t)ev->pid, (uint32_t)ev->tid, NULL);
	if (!e || !last) {
		site_nomem(s);
		return;
	}
	e->bytes += size;
	e->count++;
	*last = ev->addr;
}

static void on_remove(void *ctx, const struct mt_event *ev, uint32_t img, uint32_t tag,
		      uint64_t size, bool replaced)
{
	struct site_acct *s = ctx;
	uint64_t *id, *last, freed = 0;
	struct site *st;

	if (!tag || tag > s->nr_sites)
		return;
	st = &s->sites[tag - 1];
	touch(s, st);
	st->live_bytes -= size;
	st->live_count--;
	id = kvmap__find(&s->entry_ids, img, tag - 1);
	if (id) {
		s->entries[*id - 1].bytes -= size;
		s->entries[*id - 1].count--;
	}
	if (replaced)
		return;
	if (ev->type == MT_EV_FREE)
		freed = ev->addr;
	else if (ev->type == MT_EV_REALLOC && !ev->addr && !ev->size)
		freed = ev->old_addr; /* realloc(p, 0): a free */
	last = kvmap__find(&s->threads, (uint32_t)ev->pid, (uint32_t)ev->tid);
	if (freed && last && *last == freed) {
		st->temp_bytes += size;
		st->temp_count++;
		*last = 0;
	}
}

static void on_drop(void *ctx, uint32_t img, bool exit)
{
	struct site_acct *s = ctx;
	uint64_t *head = kvmap__find(&s->heads, img, 0);

	if (!head || !*head)
		return;
	for (uint32_t i = (uint32_t)(*head - 1); i != NO_ENTRY;) {
		struct site_entry *e = &s->entries[i];
		struct site *st = &s->sites[e->site];

		if (e->count || e->bytes) {
			touch(s, st);
			st->live_bytes -= e->bytes;
			st->live_count -= e->count;
			if (exit) {
				st->leak_bytes += e->bytes;
				st->leak_count += e->count;
			}
		}
		e->bytes = e->count = 0;
		e->linked = false;
		i = e->next;
	}
	*head = 0;
}

static void on_peak(void *ctx)
{
	((struct site_acct *)ctx)->epoch++;
}

int site_acct__new(struct site_acct **out, struct heap_acct *a, const struct stackfile *sf,
		   enum site_root root)
{
	struct site_acct *s = calloc(1, sizeof(*s));
	struct heap_acct_hooks h;
	int err;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->acct = a;
	s->sf = sf;
	s->root = root;
	h = (struct heap_acct_hooks){
	    .ctx = s, .add = on_add, .remove = on_remove, .drop = on_drop, .peak = on_peak};
	err = heap_acct__set_hooks(a, &h);
	if (err) {
		free(s);
		return err;
	}
	*out = s;
	return 0;
}

void site_acct__free(struct site_acct *s)
{
	if (!s)
		return;
	free(s->sites);
	free(s->entries);
	kvmap__free(&s->site_ids);
	kvmap__free(&s->entry_ids);
	kvmap__free(&s->heads);
	kvmap__free(&s->threads);
	free(s);
}

/* The tag (site index + 1) of an allocation by ev with that stack; 0 when out of memory. */
static uint32_t site_tag(struct site_acct *s, const struct mt_event *ev, uint32_t stack)
{
	int32_t pid = s->root != SITE_ROOT_NONE ? ev->pid : 0;
	int32_t tid = s->root == SITE_ROOT_THREAD ? ev->tid : 0;
	uint64_t key = (uint64_t)(uint32_t)pid << 32 | (uint32_t)tid, *id;
	bool added;

	id = kvmap__get(&s->site_ids, key, stack, &added);
	if (!id)
		return 0;
	if (added) {
		if (s->nr_sites == s->sites_cap) {
			uint32_t cap = s->sites_cap ? s->sites_cap * 2 : 256;
			struct site *sites = realloc(s->sites, (size_t)cap * sizeof(*sites));

			if (!sites) {
				*id = 0;
				return 0;
			}
			s->sites = sites;
			s->sites_cap = cap;
		}
		s->sites[s->nr_sites] = (struct site){.stack = stack, .pid = pid, .tid = tid};
		*id = ++s->nr_sites;
	}
	return (uint32_t)*id;
}

/* The thread's last allocation is no longer the one its next heap call may free. */
static void thread_forget(struct site_acct *s, const struct mt_event *ev)
{
	uint64_t *last = kvmap__find(&s->threads, (uint32_t)ev->pid, (uint32_t)ev->tid);

	if (last)
		*last = 0;
}

void site_acct__event(struct site_acct *s, const struct mt_event *ev)
{
	bool is_free = ev->type == MT_EV_FREE ||
		       (ev->type == MT_EV_REALLOC && !ev->addr && !ev->size); /* realloc(p, 0) */
	uint32_t stack = 0, tag;

	switch (ev->type) {
	case MT_EV_MALLOC:
	case MT_EV_CALLOC:
	case MT_EV_REALLOC:
	case MT_EV_ALIGNED_ALLOC:
		break;
	default:
		heap_acct__event(s->acct, ev);
		/* a free is the thread's heap call that came next: whatever it freed, a later free
		 * of the last allocation is not "right after" it any more */
		if (is_free)
			thread_forget(s, ev);
		return;
	}
	/* an allocation record: the next id of the stacks file is its stack */
	if (s->records++ < s->sf->nr_allocs) {
		stack = s->sf->allocs[s->records - 1];
		s->with_id++;
	}
	if (stack > s->sf->nr_stacks)
		stack = 0; /* names no stack of the file: a corrupt id */
	/* an allocation call (failed ones too) ends the chance of the thread's last allocation;
	 * realloc(p, 0) is a free, checked against it first */
	if (!is_free)
		thread_forget(s, ev);
	tag = site_tag(s, ev, stack);
	if (!tag)
		site_nomem(s);
	heap_acct__event_tagged(s->acct, ev, tag);
	if (is_free)
		thread_forget(s, ev);
}

int site_acct__finish(struct site_acct *s)
{
	/* what is still live belongs to processes still running: leaked, as the accounting says */
	for (uint32_t i = 0; i < s->nr_entries; i++) {
		struct site_entry *e = &s->entries[i];

		if (!e->linked)
			continue;
		s->sites[e->site].leak_bytes += e->bytes;
		s->sites[e->site].leak_count += e->count;
	}
	for (uint32_t i = 0; i < s->nr_sites; i++) {
		struct site *st = &s->sites[i];

		if (!s->epoch) {
			st->peak_bytes = st->peak_count = 0;
		} else if (st->snap_epoch == s->epoch) {
			st->peak_bytes = st->snap_bytes;
			st->peak_count = st->snap_count;
		} else {
			st->peak_bytes = st->live_bytes;
			st->peak_count = st->live_count;
		}
	}
	return 0;
}

const struct site *site_acct__sites(const struct site_acct *s, uint32_t *n)
{
	*n = s->nr_sites;
	return s->sites;
}

void site_acct__counts(const struct site_acct *s, uint64_t *alloc_records, uint64_t *with_id)
{
	*alloc_records = s->records;
	*with_id = s->with_id;
}

uint64_t site_acct__nomem(const struct site_acct *s)
{
	return s->nomem;
}
