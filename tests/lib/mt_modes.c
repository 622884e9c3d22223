// SPDX-License-Identifier: MIT
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "mt_modes.h"

/* A heap event reduced to what both mechanisms must agree on. */
struct key {
	int32_t pid;
	uint32_t type;
	uint64_t size;
	int has_old;
};

static int key_cmp(const void *a, const void *b)
{
	const struct key *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->size != y->size)
		return x->size < y->size ? -1 : 1;
	return x->has_old - y->has_old;
}

static int ms_cmp(const void *a, const void *b)
{
	const struct mt_proc_ms *x = a, *y = b;

	return strcmp(x->s, y->s);
}

/* Frees of blocks the run never saw allocated: glibc's internal ones (the thread cache and the
 * DTV freed at thread exit through __libc_free), which a uprobe on free sees and the
 * interposer does not. Marked by index in `skip`. */
struct ref {
	int32_t pid;
	uint64_t addr;
	size_t idx;
};

static int ref_cmp(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void unmatched_frees(const struct mt_run *r, char *skip)
{
	struct ref *v = calloc(2 * r->nr_ev + 1, sizeof(*v));
	size_t n = 0;

	if (!v)
		abort();
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *e = &r->ev[i];

		if (!mt_is_heap_type(e->type))
			continue;
		v[n++] = (struct ref){e->pid, e->addr, 2 * i + 1}; /* the block it returns/frees */
		if (e->type == MT_EV_REALLOC && e->old_addr)
			v[n++] = (struct ref){e->pid, e->old_addr, 2 * i}; /* freed first */
	}
	qsort(v, n, sizeof(*v), ref_cmp);
	for (size_t i = 0; i < n; i++) {
		const struct mt_event *e = &r->ev[v[i].idx / 2];
		bool live =
		    i > 0 && v[i - 1].pid == v[i].pid && v[i - 1].addr == v[i].addr &&
		    !(r->ev[v[i - 1].idx / 2].type == MT_EV_FREE || (v[i - 1].idx % 2 == 0));

		if (e->type == MT_EV_FREE && !live)
			skip[v[i].idx / 2] = 1;
	}
	free(v);
}

size_t mt_modes_per_process(const struct mt_run *r, mt_modes_keep_fn keep, void *ctx,
			    struct mt_proc_ms **out)
{
	struct key *k = calloc(r->nr_ev + 1, sizeof(*k));
	struct mt_proc_ms *v = calloc(r->nr_ev + 1, sizeof(*v));
	char *skip = calloc(r->nr_ev + 1, 1);
	size_t nk = 0, nv = 0;

	if (!k || !v || !skip)
		abort();
	unmatched_frees(r, skip);
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *e = &r->ev[i];

		if (!mt_is_heap_type(e->type) || skip[i] || (keep && !keep(r, i, ctx)))
			continue;
		k[nk++] = (struct key){e->pid, e->type, e->type == MT_EV_FREE ? 0 : e->size,
				       e->old_addr != 0};
	}
	free(skip);
	qsort(k, nk, sizeof(*k), key_cmp);
	for (size_t i = 0; i < nk;) {
		size_t j = i, len = 0, cap = 64;
		char *s = malloc(cap);

		if (!s)
			abort();
		s[0] = 0;
		for (; j < nk && k[j].pid == k[i].pid; j++) {
			char one[64];
			int w = snprintf(one, sizeof(one), "%u:%llu:%d,", k[j].type,
					 (unsigned long long)k[j].size, k[j].has_old);

			if (len + (size_t)w + 1 > cap) {
				cap = (len + (size_t)w + 1) * 2;
				s = realloc(s, cap);
				if (!s)
					abort();
			}
			memcpy(s + len, one, (size_t)w + 1);
			len += (size_t)w;
		}
		v[nv++] = (struct mt_proc_ms){s, j - i};
		i = j;
	}
	qsort(v, nv, sizeof(*v), ms_cmp);
	free(k);
	*out = v;
	return nv;
}

/*
 * Equal, but for the differences the interposer's presence makes by construction, each an
 * allocation exactly 16 bytes larger than its uprobe-side partner: it is a module with
 * thread-local storage, so the dynamic thread vector glibc callocs for every new thread has
 * one more 16-byte dtv_t entry (272 -> 288 bytes with libc alone: a Calloc, a multiple of 16);
 * and it is one more loaded object, so the loader's per-object arrays that a dlopen reallocates
 * (the init/fini list: 8 + 16 per object, e.g. tcmalloc's constructor loading libgcc_s) are
 * 16 bytes larger (Reallocs).
 */
struct sized {
	unsigned type, has_old;
	unsigned long long size;
};

static size_t split_sized(const char *ms, char *rest, struct sized *v, size_t cap)
{
	char *a = strdup(ms), *sa, *t;
	size_t n = 0;

	if (!a)
		return 0;
	rest[0] = 0;
	for (t = strtok_r(a, ",", &sa); t; t = strtok_r(NULL, ",", &sa)) {
		struct sized x;

		if ((t[0] == '2' || t[0] == '3') && t[1] == ':' && n < cap &&
		    sscanf(t, "%u:%llu:%u", &x.type, &x.size, &x.has_old) == 3)
			v[n++] = x;
		else
			strcat(strcat(rest, t), ",");
	}
	free(a);
	return n;
}

static bool same_but_dtv(const char *u, const char *p)
{
	static struct sized ua[4096], pb[4096];
	char *ra = malloc(strlen(u) + 1), *rb = malloc(strlen(p) + 1);
	size_t nu, np;
	bool ok;

	if (!ra || !rb) {
		free(ra);
		free(rb);
		return false;
	}
	nu = split_sized(u, ra, ua, 4096);
	np = split_sized(p, rb, pb, 4096);
	ok = !strcmp(ra, rb) && nu == np;
	for (size_t i = 0; ok && i < np; i++) {
		bool found = false;

		for (size_t j = 0; j < nu && !found; j++) {
			const struct sized *x = &ua[j];

			if (x->type != pb[i].type || x->has_old != pb[i].has_old)
				continue;
			if (x->size == pb[i].size ||
			    (x->size + 16 == pb[i].size && (x->type == 3 || x->size % 16 == 0))) {
				ua[j].type = 0;
				found = true;
			}
		}
		ok = found;
	}
	free(ra);
	free(rb);
	return ok;
}

bool mt_modes_same(const char *uprobe, const char *preload)
{
	return !strcmp(uprobe, preload) || same_but_dtv(uprobe, preload);
}

void mt_modes_free(struct mt_proc_ms *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].s);
	free(v);
}
