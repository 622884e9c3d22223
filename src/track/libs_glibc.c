// SPDX-License-Identifier: MIT
/* Auto mode's glibc group (libs.h): glibc's and libstdc++'s sites, and the shared families'
 * kept back with them, attached while a process of the tree needs them and taken out again,
 * each attach a generation of its own (probe_spec.h, MT_COOKIE_GEN). */
#include <stdlib.h>
#include <string.h>
#include "track/attach.h"
#include "track/libs.h"
#include "track/libs_priv.h"

/* Attaches e's kept-back sites (e->sites counts them already) in glibc's group, which
 * libs__detach_glibc takes out; before libs__bind, libs__bind does. */
int libs__attach_later(struct libs *l, struct lib_entry *e)
{
	int err;

	if (!l->set || !e->nr_later)
		return 0;
	attach_set__group(l->set, e->group);
	/* a family's group may be kept for good (libs__family_dlopened): no generation */
	attach_set__generation(l->set, e->group == LIBS_GROUP_GLIBC ? l->glibc_gen : 0);
	err = libs__attach_sites(l, e, e->later, e->nr_later);
	attach_set__generation(l->set, 0);
	attach_set__group(l->set, 0);
	return err;
}

int libs__attach_glibc(struct libs *l)
{
	int err = 0, added = 0;

	if (l->glibc_on)
		return 0;
	l->glibc_gen = libs__glibc_next_gen(l);
	l->glibc_on = true;
	l->glibc_used = true;
	for (size_t i = 0; i < l->nr && !err; i++) {
		struct lib_entry *e = &l->v[i];

		if (!e->nr_later)
			continue;
		e->sites += e->nr_later;
		err = libs__attach_later(l, e);
		added += !err;
	}
	return err ? err : added;
}

uint32_t libs__glibc_next_gen(const struct libs *l)
{
	uint32_t gen = l->glibc_on ? l->glibc_gen : l->glibc_gen + 1;

	return gen ? gen : 1; /* 0: no generation */
}

void libs__glibc_gen_after(struct libs *l, uint32_t last)
{
	if (!l->glibc_used)
		l->glibc_gen = last;
}

bool libs__glibc_untagged(const struct libs *l)
{
	for (size_t i = 0; l->glibc_on && i < l->nr; i++)
		if (l->v[i].group >= LIBS_GROUP_FAMILY && l->v[i].nr_later)
			return true;
	return false;
}

int libs__detach_glibc(struct libs *l, struct attach_taken **out)
{
	*out = NULL;
	if (!l->glibc_on || !l->set)
		return 0;
	l->glibc_on = false;
	for (size_t i = 0; i < l->nr; i++)
		l->v[i].sites -= l->v[i].nr_later;
	return attach_set__take_groups(l->set, LIBS_GROUP_GLIBC, out);
}

int libs__attach_glibc_dlopen(struct libs *l)
{
	int err = 0, added = 0;

	if (l->glibc_on || l->dlopen_on)
		return 0;
	l->dlopen_on = true;
	for (size_t i = 0; i < l->nr && !err; i++) {
		struct lib_entry *e = &l->v[i];
		int k = e->nr_later ? libs__dlopen_first(e->later, e->nr_later) : 0;

		if (!k)
			continue;
		if (!l->set) /* libs__bind attaches them */
			err = libs__keep(e, &e->pending, e->sites, e->later, k);
		e->sites += k;
		if (l->set && !err)
			err = libs__attach_sites(l, e, e->later, k);
		memmove(e->later, e->later + k, (size_t)(e->nr_later - k) * sizeof(*e->later));
		e->nr_later -= k;
		added += !err;
	}
	return err ? err : added;
}

bool libs__exe_malloc(const struct libs *l)
{
	return l->exe_malloc && !l->lib_family;
}

bool libs__glibc_attached(const struct libs *l)
{
	return !l->defer || l->glibc_on;
}

bool libs__glibc_used(const struct libs *l)
{
	return !l->defer || l->glibc_used;
}
