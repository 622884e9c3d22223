/* SPDX-License-Identifier: MIT */
/*
 * The skeleton's big hash maps created ahead of the load, on the ring's thread (tracker_load.c),
 * while the main thread opens the skeleton and prepares the BTF: each costs 0.1-0.7 ms of
 * kernel time (its bucket array, the allocator's per-CPU caches) that the load would otherwise
 * wait for. A map is handed to libbpf (bpf_map__reuse_fd) only when its definition is exactly
 * the object's after every resize; libbpf creates any other map as usual. Nothing here ever
 * fails a run: a map not created or not handed over costs only the time it would have cost.
 */
#ifndef MEMTRACK_MAP_PREP_H
#define MEMTRACK_MAP_PREP_H

#include <stdbool.h>
#include <linux/bpf.h>

struct bpf_object;

#define MAP_PREP_MAX 8

/* One map to create: what bpf_map_create takes, and what the object's map must say. */
struct map_prep_def {
	const char *name; /* the object's map name: libbpf takes the kernel's name on reuse */
	enum bpf_map_type type;
	__u32 key_size, value_size, max_entries, map_flags;
};

struct map_prep {
	const struct map_prep_def *defs;
	int n;
	int fd[MAP_PREP_MAX]; /* per def: the map, or -errno when it was not created */
	unsigned given;	      /* bit i: defs[i] was handed to the last object (map_prep__give) */
};

/* The skeleton's maps that are worth creating early (memtrack.bpf.o's definitions). */
extern const struct map_prep_def map_prep_memtrack[];
extern const int map_prep_memtrack_nr;

/* Sets mp up for defs (at most MAP_PREP_MAX), nothing created yet. 0 or -EINVAL. */
int map_prep__init(struct map_prep *mp, const struct map_prep_def *defs, int n);
/* Creates every map of mp (any thread). 0 when all were created, else the first -errno; the
 * others are created all the same. */
int map_prep__create(struct map_prep *mp);
/* Hands each created map whose definition matches obj's map of that name to obj, before its
 * load. 0 (whatever was handed over: mp->given), or -EINVAL. */
int map_prep__give(struct map_prep *mp, struct bpf_object *obj);
/* Closes mp's descriptors (an object given them holds its own). NULL-safe, idempotent. */
void map_prep__close(struct map_prep *mp);

#endif
