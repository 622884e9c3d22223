/* SPDX-License-Identifier: MIT */
/*
 * The inert files of earlier runs: shared libraries a dlopen brought that held no allocator
 * entry point and no memtrack probe, so that a dlopen stop found nothing to do for them. Kept
 * between runs in one file, by each file's full identity (struct mt_shm_seen: device, inode,
 * size, modification and change times; a file rewritten since is another), ready to be copied
 * as it is into the shared memory's kept-files table (src/preload/shm_abi.h), where a served
 * process's dlopen that brings only such files (or files this run inspected) goes on without
 * a stop. The file: a 64-byte header (magic, format, the memtrack executable that wrote it: a
 * rebuilt memtrack may classify otherwise), then the table, nr entries, a power of two.
 *   $MEMTRACK_INERT_CACHE: 0 turns it off, a path names the file; else inert-files in the
 *   cache folder of btf_cache.h, with its trust rules (ours, nobody else can write it: a
 *   forged entry would let a library's calls go unrecorded).
 */
#ifndef MEMTRACK_INERT_CACHE_H
#define MEMTRACK_INERT_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "preload/shm_abi.h"

/* at most this many files kept (the table twice as large, at most MT_SHM_KEPT_MAX) */
#define INERT_CACHE_MAX 4096

/* Copies the cached table into dst_fd at off (room for max_nr entries) without reading it
 * here (sendfile: no page of it is touched in memtrack, where each would fault); *nr its
 * entries. Moves dst_fd's file position. 0, or -errno (-ENOENT: no usable cache; *nr 0). */
int inert_cache__copy(int dst_fd, off_t off, uint32_t max_nr, uint32_t *nr);
/* Writes the cache anew when some of the n_add files found inert in this run are not in it:
 * those, then the cached ones (read again: not from the shared memory, which the tree can
 * write), INERT_CACHE_MAX at most. Best effort. */
void inert_cache__update(const struct mt_shm_seen *add, size_t n_add);

#endif
