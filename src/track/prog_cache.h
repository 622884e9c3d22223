/* SPDX-License-Identifier: MIT */
/*
 * Loaded programs and their maps kept between runs, pinned in a BPF filesystem: a run that
 * finds them skips opening, relocating and verifying the object and creating the ring
 * (~15 ms of the ~27 a run of /bin/true costs here).
 *
 * Layout: <bpffs>/memtrack/<key>-<slot>/{m,p}-<name>, one file per map and program, named as
 * in the object (a '.' as '+': bpffs keeps dots for itself); <key> hashes the object's bytes and
 * everything the load sets (read-only values, ring size, which programs load), so a slot only ever
 * holds one exact load. The bpffs is /sys/fs/bpf, mounted there if it is not (as bpftool does);
 * pins last until reboot or `memtrack unload`.
 *
 * One run per slot: a run holds flock(LOCK_EX) on the slot's directory from its lookup until
 * its last process exits (the detacher's copy of the descriptors, the watchdog's, which it is
 * sent). A slot is also busy while any process of its last run lives (memtrack, its watchdog,
 * its detacher: pids and pid namespace in the slot's "owner" map, looked up only from that
 * namespace): a process that is exiting may still have links on the programs, and a link of
 * an old run on a shared program would record the new run's events twice. A run
 * that finds every slot busy loads as without a cache; at most PROG_CACHE_SLOTS per key, and
 * PROG_CACHE_MAX_KEPT in all (the idle ones used longest ago removed first).
 *
 * State: at each reuse every map is emptied as a fresh load would have it (prog_cache__reset):
 * hashes emptied, arrays zeroed, the ring's reader moved to its writer; read-only maps,
 * program arrays and task storage (each task's, freed with it) are kept.
 */
#ifndef MEMTRACK_PROG_CACHE_H
#define MEMTRACK_PROG_CACHE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define PROG_CACHE_SLOTS 3
/* slots kept in all, every key: the idle ones used longest ago are removed beyond that */
#define PROG_CACHE_MAX_KEPT 4
#define PROG_CACHE_MAX_OBJS 64
#define PROG_CACHE_NAME_MAX 40

enum prog_cache_owner { PC_OWNER_MEMTRACK, PC_OWNER_WATCHDOG, PC_OWNER_DETACHER, PC_OWNER_NR };

struct prog_cache {
	int dir_fd;    /* the slot's directory, flock'ed; -1: no slot this run */
	int linger_fd; /* the root's "linger" map (prog_cache__linger_done); -1: none */
	int owner_fd;  /* its owner map; -1 */
	bool hit;      /* the slot held a complete load: taken, not loaded */
	char path[PATH_MAX];
	int n;
	struct {
		char name[PROG_CACHE_NAME_MAX];
		int fd;
		bool prog;
	} obj[PROG_CACHE_MAX_OBJS];
	char state[PATH_MAX + 64]; /* for the manifest: how this run's programs came */
};

/* The root of the slots: /sys/fs/bpf/memtrack unless MEMTRACK_BPFFS names another bpffs
 * directory (tests). */
const char *prog_cache__root(void);
/* A slot for key: a hit (c->hit, every pinned object's fd taken) or an empty slot to store
 * into. Off (0 returned, dir_fd -1, state says why) when MEMTRACK_PROG_CACHE=0, no bpffs can
 * be had, or every slot is busy. -errno only for out of memory. */
int prog_cache__open(struct prog_cache *c, uint64_t key);
/* The fd of the pinned object called name, or -ENOENT. */
int prog_cache__fd(const struct prog_cache *c, const char *name);
/* Pins fd as name into the slot (a no-op without one). Returns 0 or -errno. */
int prog_cache__store(struct prog_cache *c, const char *name, int fd, bool prog);
/* After every pin of a fresh load: the slot is complete (its owner map, pinned last). */
int prog_cache__seal(struct prog_cache *c);
/* Puts the maps of a hit back as a fresh load leaves them. 0 or -errno (then do not use). */
int prog_cache__reset(struct prog_cache *c);
/* Records a process of this run in the slot's owner map (busy while it lives). */
void prog_cache__set_owner(struct prog_cache *c, enum prog_cache_owner who, pid_t pid);
/*
 * The root's "linger" map: one counter, raised by each run once its tracepoints are linked
 * (prog_cache__linger_done). A detacher that keeps the last run's tracepoint links for the next
 * one (track/detacher.h) lets them go when it changes: at most a run's worth of idle links
 * linger while runs follow each other. Opened by prog_cache__open whenever the root is usable,
 * slot or not.
 */
void prog_cache__linger_done(struct prog_cache *c);
/* Closes the fds (a hit's, and the lock: call only once no link of this run is left, or
 * leave it to exit). NULL-safe, idempotent. */
void prog_cache__close(struct prog_cache *c);
/* Drops the slot's pins (a load that failed after a miss). */
void prog_cache__discard(struct prog_cache *c);
/* memtrack unload: removes every idle slot; *kept counts the busy ones. 0 or -errno. */
int prog_cache__unload(int *removed, int *kept);

/* An FNV-1a-style 64-bit hash, 8 bytes a step, to chain over the key's parts (seed:
 * PROG_CACHE_SEED). Not cryptographic: the folder is private, the key only tells loads apart. */
#define PROG_CACHE_SEED 0xcbf29ce484222325ull
uint64_t prog_cache__hash(uint64_t h, const void *p, size_t n);

#endif
