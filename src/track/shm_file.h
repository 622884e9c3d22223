/* SPDX-License-Identifier: MIT */
/* The shared files memtrack creates for the interposer (its rings: shm_source.c; its stack
 * area: stack_shm.c): in /dev/shm, created never reused, 0600, the invoking user's under sudo. */
#ifndef MEMTRACK_SHM_FILE_H
#define MEMTRACK_SHM_FILE_H

#include <stddef.h>
#include <sys/types.h>

/* Creates /dev/shm/memtrack-<our pid>-<tag><random> (path: cap bytes; "" when nothing was
 * created) of size bytes (sparse), owned by uid/gid unless -1, and maps it shared into *map.
 * *lock_fd: the file, open and share-locked (flock) until the caller closes it (after unlinking
 * the file): a later run's shm_file__sweep removes it only once that lock is free, so also
 * when we were killed. 0 or -errno; on failure nothing is left behind. */
int shm_file__create(char *path, size_t cap, const char *tag, size_t size, uid_t uid, gid_t gid,
		     void **map, int *lock_fd);
/* Removes the files of memtrack runs that are gone (killed before removing their own). */
void shm_file__sweep(void);

#endif
