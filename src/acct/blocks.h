/* SPDX-License-Identifier: MIT */
/*
 * The live-block table of the accounting: (addr, owner image) -> size. Open addressing, linear
 * probing with backward-shift deletion (no tombstones, so probe lengths do not degrade over a
 * long malloc/free storm), no allocation per event. Blocks of an image that exec'd or exited
 * stay as dead slots (the owner says which images are dead) and are purged at the next rehash.
 *
 * Slots are 16 bytes, four to a cache line and never straddling two: with ~200k live blocks the
 * table is far bigger than what the compressor leaves of the caches, and 24-byte slots made the
 * table half as big again and a quarter of the slots cost two misses (~10-15% of the consumer's
 * CPU time then). The size is 32 bits; sizes that do not fit live in a side array.
 */
#ifndef MEMTRACK_ACCT_BLOCKS_H
#define MEMTRACK_ACCT_BLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct block_slot {
	uint64_t addr; /* 0: empty (no block lives at 0) */
	uint32_t size; /* bytes; BLOCK_SIZE_BIG: see big[] */
	uint32_t owner; /* image id of the allocating process image */
};

#define BLOCK_SIZE_BIG UINT32_MAX

/* A block of BLOCK_SIZE_BIG bytes or more: rare, so a plain array searched linearly. */
struct big_block {
	uint64_t addr, size;
	uint32_t owner;
};

/* true when owner's slots are dead (its image is gone); consulted only when rehashing */
typedef bool (*blocks_dead_fn)(const void *ctx, uint32_t owner);

struct blocks {
	struct block_slot *tab;
	size_t cap, mask, used, dead, grow_at; /* used counts dead slots too */
	unsigned shift; /* 64 - log2(cap) */
	struct big_block *big;
	size_t nr_big, big_cap;
	blocks_dead_fn is_dead;
	const void *ctx;
	/* optional: a 32-bit tag per slot (tags[i] goes with tab[i]), for readers that follow each
	 * block's origin (memtrack report's stack sites); NULL in the tracker, which pays nothing */
	uint32_t *tags;
};

int blocks__init(struct blocks *b, blocks_dead_fn is_dead, const void *ctx);
void blocks__free(struct blocks *b);
/* Gives every block a tag from now on (call on an empty table). 0 or -ENOMEM. */
int blocks__enable_tags(struct blocks *b);
/* Removes the block (addr, owner); true and its size in *size when it was there. tag: NULL, or
 * where to put its tag (0 without tags). */
bool blocks__take(struct blocks *b, uint64_t addr, uint32_t owner, uint64_t *size, uint32_t *tag);
/* Adds a block with tag (ignored without tags). 1 when one was live at (addr, owner) already:
 * it is replaced, its size in *old and its tag in *old_tag (when not NULL); 0 when new;
 * -ENOMEM when it cannot be recorded (nothing changed then). */
int blocks__put(struct blocks *b, uint64_t addr, uint32_t owner, uint64_t size, uint32_t tag,
		uint64_t *old, uint32_t *old_tag);
/* count slots just became dead (their owner's image is gone) */
static inline void blocks__add_dead(struct blocks *b, uint64_t count)
{
	b->dead += count;
}
/* Deletes every slot of owner now, without allocating. */
void blocks__purge(struct blocks *b, uint32_t owner);

static inline size_t blocks__home(const struct blocks *b, uint64_t addr, uint32_t owner)
{
	/* malloc addresses have their low 4 bits clear: multiply and keep the high bits */
	uint64_t h = (addr ^ ((uint64_t)owner * 0x9e3779b97f4a7c15ULL)) * 0xbf58476d1ce4e5b9ULL;

	return h >> b->shift;
}

/* Touches the slot a lookup of (addr, owner) starts at: a hint, a wrong guess costs nothing. */
static inline void blocks__prefetch(const struct blocks *b, uint64_t addr, uint32_t owner)
{
	__builtin_prefetch(&b->tab[blocks__home(b, addr, owner)], 1);
}

static inline size_t blocks__bytes(const struct blocks *b)
{
	return b->cap * sizeof(struct block_slot);
}

#endif
