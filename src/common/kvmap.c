// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include "common/kvmap.h"

static inline size_t kv_home(uint64_t a, uint64_t b, size_t mask)
{
	uint64_t h =
	    (a * 0x9e3779b97f4a7c15ULL) ^ (b + 0x7f4a7c159e3779b9ULL + (a << 6) + (a >> 2));

	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 29;
	return (size_t)h & mask;
}

uint64_t *kvmap__find(const struct kvmap *m, uint64_t a, uint64_t b)
{
	if (!m->cap)
		return NULL;
	for (size_t i = kv_home(a, b, m->cap - 1); m->slots[i].used; i = (i + 1) & (m->cap - 1))
		if (m->slots[i].a == a && m->slots[i].b == b)
			return &m->slots[i].val;
	return NULL;
}

static int kv_grow(struct kvmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct kv_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t j = 0; j < m->cap; j++) {
		const struct kv_slot *s = &m->slots[j];
		size_t i;

		if (!s->used)
			continue;
		for (i = kv_home(s->a, s->b, cap - 1); slots[i].used; i = (i + 1) & (cap - 1))
			;
		slots[i] = *s;
	}
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return 0;
}

uint64_t *kvmap__get(struct kvmap *m, uint64_t a, uint64_t b, bool *added)
{
	uint64_t *v = kvmap__find(m, a, b);
	size_t i;

	if (added)
		*added = !v;
	if (v)
		return v;
	/* at most half full: probes stay short */
	if ((m->nr + 1) * 2 > m->cap && kv_grow(m))
		return NULL;
	for (i = kv_home(a, b, m->cap - 1); m->slots[i].used; i = (i + 1) & (m->cap - 1))
		;
	m->slots[i] = (struct kv_slot){.a = a, .b = b, .val = 0, .used = 1};
	m->nr++;
	return &m->slots[i].val;
}

void kvmap__free(struct kvmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->nr = 0;
}

uint64_t kvmap__hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}
