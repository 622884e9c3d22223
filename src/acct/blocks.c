// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "acct/blocks.h"

#define TAB_MIN_CAP 1024 /* slots, power of two */
#define LOAD_NUM 7 /* grow past 7/10 full: linear probing stays ~2 probes per hit */
#define LOAD_DEN 10
#define HUGE_PAGE (2UL << 20)

/* Big tables on transparent huge pages when allowed: a lookup in a table much larger than the
 * caches is one DRAM miss, and without huge pages a TLB miss on top of it. */
static struct block_slot *tab_calloc(size_t cap)
{
	size_t bytes = cap * sizeof(struct block_slot);
	void *p;

	if (bytes < HUGE_PAGE)
		return calloc(cap, sizeof(struct block_slot));
	if (posix_memalign(&p, HUGE_PAGE, bytes))
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE); /* advisory: failure only costs speed */
	memset(p, 0, bytes);
	return p;
}

static int tab_alloc(struct blocks *b, size_t cap)
{
	struct block_slot *tab = tab_calloc(cap);
	uint32_t *tags = NULL;

	if (!tab)
		return -ENOMEM;
	if (b->tags && !(tags = malloc(cap * sizeof(*tags)))) {
		free(tab);
		return -ENOMEM;
	}
	b->tab = tab;
	b->tags = tags;
	b->cap = cap;
	b->mask = cap - 1;
	b->shift = 64 - (unsigned)__builtin_ctzll(cap);
	b->grow_at = cap / LOAD_DEN * LOAD_NUM;
	b->used = 0;
	b->dead = 0;
	return 0;
}

int blocks__init(struct blocks *b, blocks_dead_fn is_dead, const void *ctx)
{
	memset(b, 0, sizeof(*b));
	b->is_dead = is_dead;
	b->ctx = ctx;
	return tab_alloc(b, TAB_MIN_CAP);
}

void blocks__free(struct blocks *b)
{
	free(b->tab);
	free(b->big);
	free(b->tags);
	b->tab = NULL;
	b->big = NULL;
	b->tags = NULL;
}

int blocks__enable_tags(struct blocks *b)
{
	if (b->used)
		return -EBUSY;
	free(b->tags);
	b->tags = malloc(b->cap * sizeof(*b->tags));
	return b->tags ? 0 : -ENOMEM;
}

/* Drops the side entries of dead images (after a rehash dropped their slots). */
static void big_purge_dead(struct blocks *b)
{
	size_t n = 0;

	for (size_t i = 0; i < b->nr_big; i++)
		if (!b->is_dead(b->ctx, b->big[i].owner))
			b->big[n++] = b->big[i];
	b->nr_big = n;
}

/* Removes and returns the size of a big block. */
static uint64_t big_take(struct blocks *b, uint64_t addr, uint32_t owner)
{
	for (size_t i = 0; i < b->nr_big; i++) {
		uint64_t size = b->big[i].size;

		if (b->big[i].addr != addr || b->big[i].owner != owner)
			continue;
		b->big[i] = b->big[--b->nr_big];
		return size;
	}
	return 0; /* not reached: every BLOCK_SIZE_BIG slot has its entry */
}

static int big_reserve(struct blocks *b)
{
	struct big_block *big;
	size_t cap;

	if (b->nr_big < b->big_cap)
		return 0;
	cap = b->big_cap ? b->big_cap * 2 : 8;
	big = realloc(b->big, cap * sizeof(*big));
	if (!big)
		return -ENOMEM;
	b->big = big;
	b->big_cap = cap;
	return 0;
}

/* The size of the block in slot s, which leaves the table (or is overwritten) next. */
static inline uint64_t slot_take_size(struct blocks *b, const struct block_slot *s)
{
	return s->size == BLOCK_SIZE_BIG ? big_take(b, s->addr, s->owner) : s->size;
}

/* Rehash into a table sized for the blocks that are still alive: doubles, or keeps the size
 * when dropping dead slots frees enough. */
static int tab_rehash(struct blocks *b)
{
	struct block_slot *old = b->tab;
	uint32_t *old_tags = b->tags;
	size_t old_cap = b->cap, alive = b->used - b->dead, cap = b->cap;
	int err;

	while ((alive + 1) * LOAD_DEN * 2 > cap * LOAD_NUM)
		cap *= 2;
	err = tab_alloc(b, cap);
	if (err) {
		b->tab = old;
		b->tags = old_tags;
		/* keep going until truly full; retry growing only then */
		b->grow_at = old_cap - 1;
		return err;
	}
	for (size_t i = 0; i < old_cap; i++) {
		const struct block_slot *s = &old[i];
		size_t j;

		if (!s->addr || b->is_dead(b->ctx, s->owner))
			continue;
		for (j = blocks__home(b, s->addr, s->owner); b->tab[j].addr; j = (j + 1) & b->mask)
			;
		b->tab[j] = *s;
		if (old_tags)
			b->tags[j] = old_tags[i];
		b->used++;
	}
	free(old);
	free(old_tags);
	if (b->nr_big)
		big_purge_dead(b);
	return 0;
}

/* Removes slot i, shifting back the entries of its cluster that would become unreachable. */
static inline void tab_delete(struct blocks *b, size_t i)
{
	size_t j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & b->mask;
		if (!b->tab[j].addr)
			break;
		k = blocks__home(b, b->tab[j].addr, b->tab[j].owner);
		/* move j into the hole at i unless its home lies cyclically in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
			b->tab[i] = b->tab[j];
			if (b->tags)
				b->tags[i] = b->tags[j];
			i = j;
		}
	}
	b->tab[i].addr = 0;
	b->used--;
}

/* A forward scan is enough: a deletion at i only moves entries from after i into i (checked
 * again) or into holes after i, and entries that wrap around from the table's start were
 * already checked. */
void blocks__purge(struct blocks *b, uint32_t owner)
{
	for (size_t i = 0; i < b->cap; i++) {
		while (b->tab[i].addr && b->tab[i].owner == owner) {
			if (b->tab[i].size == BLOCK_SIZE_BIG)
				big_take(b, b->tab[i].addr, owner);
			tab_delete(b, i);
		}
	}
}

bool blocks__take(struct blocks *b, uint64_t addr, uint32_t owner, uint64_t *size, uint32_t *tag)
{
	for (size_t i = blocks__home(b, addr, owner); b->tab[i].addr; i = (i + 1) & b->mask) {
		const struct block_slot *s = &b->tab[i];

		if (s->addr != addr || s->owner != owner)
			continue;
		*size = slot_take_size(b, s);
		if (tag)
			*tag = b->tags ? b->tags[i] : 0;
		tab_delete(b, i);
		return true;
	}
	return false;
}

int blocks__put(struct blocks *b, uint64_t addr, uint32_t owner, uint64_t size, uint32_t tag,
		uint64_t *old, uint32_t *old_tag)
{
	bool big = size >= BLOCK_SIZE_BIG;
	int replaced = 0;
	size_t i;

	/* before anything changes: a block that cannot be recorded is not accounted at all */
	if (big && big_reserve(b))
		return -ENOMEM;
	/* a failed rehash still leaves room unless the table is completely full */
	if (b->used + 1 > b->grow_at && tab_rehash(b) && b->used + 1 >= b->cap)
		return -ENOMEM;
	for (i = blocks__home(b, addr, owner); b->tab[i].addr; i = (i + 1) & b->mask) {
		struct block_slot *s = &b->tab[i];

		if (s->addr != addr || s->owner != owner)
			continue;
		*old = slot_take_size(b, s);
		if (old_tag)
			*old_tag = b->tags ? b->tags[i] : 0;
		replaced = 1;
		b->used--;
		break;
	}
	b->tab[i].addr = addr;
	b->tab[i].size = big ? BLOCK_SIZE_BIG : (uint32_t)size;
	b->tab[i].owner = owner;
	if (b->tags)
		b->tags[i] = tag;
	if (big)
		b->big[b->nr_big++] = (struct big_block){.addr = addr, .size = size, .owner = owner};
	b->used++;
	return replaced;
}
