// SPDX-License-Identifier: MIT
/* Sites -> symbolised samples (profile.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/profile.h"

/* Allocator entry points and wrappers: the capture starts stacks at the allocator's caller, but
 * an interposer, a libc-internal call or an unwinder that starts one frame early would show
 * them; they are cut from the leaf end. */
static const char *const alloc_funcs[] = {
    "malloc",	      "calloc",		  "realloc",	    "reallocarray",    "free",
    "posix_memalign", "aligned_alloc",	  "memalign",	    "valloc",	       "pvalloc",
    "__libc_malloc",  "__libc_calloc",	  "__libc_realloc", "__libc_memalign", "__libc_valloc",
    "__libc_pvalloc", "__posix_memalign", "_int_malloc",
};

static bool is_alloc_func(const char *f)
{
	if (!strncmp(f, "operator new", 12) || !strncmp(f, "operator delete", 15))
		return true;
	for (size_t i = 0; i < sizeof(alloc_funcs) / sizeof(*alloc_funcs); i++)
		if (!strcmp(f, alloc_funcs[i]))
			return true;
	return false;
}

static bool is_allocator(const struct sym_loc *l, const struct stackfile *sf)
{
	const struct stack_module *m = stackfile__module(sf, l->module);

	if (m && m->path && strstr(m->path, "libmemtrack-preload"))
		return true;
	return is_alloc_func(l->lines[l->nr - 1].func);
}

/* Allocator wrappers inlined into the leaf frame (ld.so's malloc -> __rtld_malloc): how many of
 * its innermost functions to leave out. */
static uint32_t leaf_skip(const struct sym_loc *l)
{
	uint32_t k = 0;

	while (k + 1 < l->nr && is_alloc_func(l->lines[k].func))
		k++;
	return k;
}

/* The name of the process of pid in m: its comm, else "?" */
static const char *comm_of(const struct manifest *m, int32_t pid)
{
	for (uint32_t i = 0; m && i < m->nr_procs; i++)
		if (m->procs[i].pid == pid && m->procs[i].comm[0])
			return m->procs[i].comm;
	return "?";
}

static const char *add_name(struct profile_build *b, char *s)
{
	if (!s)
		return NULL;
	b->names[b->nr_names++] = s;
	return s;
}

int profile__build(struct profile_build *b, const struct stackfile *sf, const struct site *sites,
		   uint32_t nr_sites, struct symbolizer *sym, const struct manifest *m)
{
	size_t nr_locs = 0, k = 0;

	memset(b, 0, sizeof(*b));
	for (uint32_t i = 0; i < nr_sites; i++) {
		const struct stack_trace *t = stackfile__stack(sf, sites[i].stack);

		nr_locs += t ? t->nr : 0;
	}
	b->samples = calloc(nr_sites ? nr_sites : 1, sizeof(*b->samples));
	b->locs = calloc(nr_locs ? nr_locs : 1, sizeof(*b->locs));
	b->names = calloc(2 * (size_t)nr_sites + 1, sizeof(*b->names));
	if (!b->samples || !b->locs || !b->names)
		goto nomem;
	for (uint32_t i = 0; i < nr_sites; i++) {
		const struct site *st = &sites[i];
		const struct stack_trace *t = stackfile__stack(sf, st->stack);
		struct prof_sample *s = &b->samples[i];
		uint32_t f = 0;
		char *n;

		s->locs = &b->locs[k];
		s->stack = t ? st->stack : 0;
		s->truncated = t && t->truncated;
		for (uint32_t j = 0; t && j < t->nr; j++) {
			const struct sym_loc *l =
			    symbolizer__lookup(sym, t->frames[j].module, t->frames[j].vaddr);

			if (!l)
				goto nomem;
			b->locs[k + f] = l;
			/* allocator frames only at the leaf end */
			if (f || !is_allocator(l, sf))
				f++;
		}
		s->nr_locs = f;
		s->leaf_skip = f ? leaf_skip(s->locs[0]) : 0;
		k += f;
		if (st->pid) {
			if (asprintf(&n, "%s (pid %d)", comm_of(m, st->pid), st->pid) < 0 ||
			    !(s->root[s->nr_root++] = add_name(b, n)))
				goto nomem;
		}
		if (st->tid) {
			if (asprintf(&n, "tid %d", st->tid) < 0 ||
			    !(s->root[s->nr_root++] = add_name(b, n)))
				goto nomem;
		}
		s->alloc_count = st->alloc_count;
		s->alloc_bytes = st->alloc_bytes;
		s->inuse_count = st->peak_count;
		s->inuse_bytes = st->peak_bytes;
		s->leak_count = st->leak_count;
		s->leak_bytes = st->leak_bytes;
		s->temp_count = st->temp_count;
		s->temp_bytes = st->temp_bytes;
	}
	b->module_source = calloc(sf->nr_modules + 1, sizeof(*b->module_source));
	if (!b->module_source)
		goto nomem;
	for (uint32_t i = 0; i < sf->nr_modules; i++)
		b->module_source[i] = symbolizer__module_source(sym, i + 1);
	b->p.module_source = b->module_source;
	b->p.modules = sf->modules;
	b->p.nr_modules = sf->nr_modules;
	b->p.samples = b->samples;
	b->p.nr_samples = nr_sites;
	return 0;
nomem:
	profile__free(b);
	return -ENOMEM;
}

void profile__free(struct profile_build *b)
{
	for (uint32_t i = 0; b->names && i < b->nr_names; i++)
		free(b->names[i]);
	free(b->names);
	free(b->module_source);
	free(b->samples);
	free(b->locs);
	memset(b, 0, sizeof(*b));
}

uint32_t profile__depth(const struct prof_sample *s)
{
	uint32_t d = s->nr_root + (s->truncated ? 1 : 0) + (s->nr_locs ? 0 : 1);

	for (uint32_t i = 0; i < s->nr_locs; i++)
		d += s->locs[i]->nr;
	return d - s->leaf_skip;
}

int64_t profile__frames(const struct prof_sample *s, const char ***buf, uint32_t *cap)
{
	uint32_t d = profile__depth(s);
	const char **out = *buf;

	if (d > *cap) {
		out = realloc(*buf, d * sizeof(*out));
		if (!out)
			return -ENOMEM;
		*buf = out;
		*cap = d;
	}
	d = 0;

	for (uint32_t i = 0; i < s->nr_root; i++)
		out[d++] = s->root[i];
	if (s->truncated)
		out[d++] = "[truncated]";
	if (!s->nr_locs)
		out[d++] = s->stack ? "[no frames]" : "[no stack]";
	for (uint32_t i = s->nr_locs; i-- > 0;)
		for (uint32_t j = s->locs[i]->nr; j-- > (i ? 0 : s->leaf_skip);)
			out[d++] = s->locs[i]->lines[j].func;
	return d;
}
