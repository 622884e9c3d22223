/* SPDX-License-Identifier: MIT */
/*
 * A small hash map from a pair of 64-bit keys to a 64-bit value: open addressing, linear probing,
 * no deletion (the readers that use it only add). For `memtrack report`'s stack sites and symbol
 * cache; not for the tracker's hot path (the block table is acct/blocks.h).
 */
#ifndef MEMTRACK_KVMAP_H
#define MEMTRACK_KVMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kv_slot {
	uint64_t a, b, val;
	uint64_t used; /* 0: empty */
};

struct kvmap {
	struct kv_slot *slots;
	size_t cap, nr; /* cap: 0 or a power of two */
};

/* The value of (a, b), or NULL. */
uint64_t *kvmap__find(const struct kvmap *m, uint64_t a, uint64_t b);
/* The value of (a, b), added as 0 (and *added set) when missing; NULL when out of memory. */
uint64_t *kvmap__get(struct kvmap *m, uint64_t a, uint64_t b, bool *added);
void kvmap__free(struct kvmap *m); /* leaves an empty map */

/* FNV-1a of a string, for maps keyed by text (check the text on a hit). */
uint64_t kvmap__hash_str(const char *s);

#endif
