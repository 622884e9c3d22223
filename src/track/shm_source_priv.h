/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory source's state, for its two files: shm_source.c (the file made, the rings
 * drained and merged, the doorbell) and shm_header.c (what the header and its tables say).
 * Not for other modules: they use shm_source.h.
 */
#ifndef MEMTRACK_SHM_SOURCE_PRIV_H
#define MEMTRACK_SHM_SOURCE_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "track/consumer.h"
#include "preload/shm_abi.h"

struct shm_heap_ent {
	uint64_t ts;
	uint32_t slot;
};

struct shm_source {
	struct event_source src;
	const struct event_source *ring;
	char path[96];
	/* the file, locked while we use it (shm_file.h) */
	int lock_fd;
	void *map;
	size_t map_len;
	/* Written by every process of the tree, other users' too (src/track/handoff.h): nothing
	 * in it is trusted for a bound or an address; the layout is ours, kept here. */
	struct mt_shm_hdr *hdr;
	struct mt_shm_proc *procs;
	struct mt_shm_seen *seen; /* MT_SHM_SEEN_NR entries, nr_seen of them ours */
	uint32_t nr_seen;
	size_t kept_off; /* the kept-files table (shm_source__keep_load), never read here */
	struct mt_shm_slot *slots;
	struct mt_event *data;
	uint32_t nr_slots, nrec, mask;
	bool closed;		   /* shm_source__close ran */
	const char *clock_refusal; /* stamp_clock__anchor: why no TSC stamps, NULL if they may */
	uint64_t safe_ns;	   /* every BPF record older than this has been dispatched */
	struct shm_heap_ent *heap; /* the k-way merge by timestamp, nr_slots entries */
	struct {
		uint32_t (*fn)(void *ctx, const struct mt_event *ev);
		void *ctx;
	} stacks;    /* --stacks: aux translation (shm_source__set_stacks) */
	uint64_t orphan_ns, orphan_gap_ns; /* shm__reclaim_orphans: last look, the next's wait */
	int bell_fd; /* eventfd in the event loop's set: the doorbell rang */
	pthread_t bell_thread;
	bool bell_started, bell_stopped;
	uint32_t bell_stop;
};

#endif
