/* SPDX-License-Identifier: MIT */
/*
 * The interposer's shared memory as a second event source (ABI: src/preload/shm_abi.h).
 *
 * Ordering against the BPF ring (same clock, CLOCK_MONOTONIC): a record of the interposer is
 * delivered only once every BPF record that could precede it has been: those with an earlier
 * timestamp. The consumer takes the time before each ring drain (consumer.round_ns); when that
 * drain caught up with the ring (no record still being written), every BPF record committed
 * before that time has been dispatched, and interposer records older than it may follow,
 * merged across threads by timestamp. What a record of the interposer can depend on (its
 * process's Fork, the Exec of its image) is committed before its thread runs, so before its
 * timestamp. The other direction: before the consumer dispatches a ring record of a process
 * that is not an allocator call (Rss, Fork, Exec, Exit; not Rmap) it asks this source
 * (consumer.order hook) for that process's records older than it; before an Exec or Exit they
 * are all written, since no thread of the old image or of the exited process runs any more.
 */
#ifndef MEMTRACK_SHM_SOURCE_H
#define MEMTRACK_SHM_SOURCE_H

#include <stdint.h>
#include <sys/types.h>
#include "preload/shm_abi.h"
#include "track/consumer.h"

struct shm_source;

/* Creates the shared file (mode 0600 in /dev/shm, owned by uid/gid when they are not -1) with
 * nr_slots rings of slot_records records (a power of two) and maps it. `ring` is the source
 * whose drains order ours (the BPF ring). Returns 0 or -errno. */
int shm_source__new(struct shm_source **s, uint32_t nr_slots, uint32_t slot_records, uid_t uid,
		    gid_t gid, const struct event_source *ring);
void shm_source__set_ring(struct shm_source *s, const struct event_source *ring);
/* memtrack's pid namespace (its inode; 0: unknown) for the interposer: it serves no other */
void shm_source__set_pidns(struct shm_source *s, uint64_t ino);
const char *shm_source__path(const struct shm_source *s);
/* The file's descriptor (read-write), memtrack's own: handoff.h sends copies of it. */
int shm_source__fd(const struct shm_source *s);
/* Why the interposer stamps with clock_gettime (stamp_clock.h), or NULL: it may use the TSC. */
const char *shm_source__clock_refusal(const struct shm_source *s);
struct event_source *shm_source__src(struct shm_source *s);
/* --stacks: fn(ctx, record) gives the aux each allocation record is dispatched with
 * (stack_shm__translate: the interposer's ref -> the stack file's id). */
void shm_source__set_stacks(struct shm_source *s, uint32_t (*fn)(void *ctx, const struct mt_event *ev),
			    void *ctx);
/* Registers the ordering hook with the consumer. */
void shm_source__order(struct shm_source *s, struct consumer *c);
/* Starts the doorbell thread (once the command exists); 0 or -errno. */
int shm_source__start(struct shm_source *s);
/* Delivers every record left, whatever its time (the tree has exited). */
int shm_source__drain_all(struct shm_source *s, struct consumer *c);
/* Tells the producers nobody reads any more (they pass through from then on), wakes any that
 * waits, and removes the file's name. */
void shm_source__close(struct shm_source *s);
/* Drops by reason (enum mt_shm_drop); returns their sum. */
uint64_t shm_source__drops(const struct shm_source *s, uint64_t drops[MT_SHM_DROP_NR]);
/* Back-pressure so far: the times a producer slept on its full ring, and their total ns. */
void shm_source__waits(const struct shm_source *s, uint64_t *waits, uint64_t *ns);
/* Lists a file memtrack has inspected in the seen-files table: an interposer's dlopen bringing
 * only such files goes on without a stop (shm_abi.h). 0, or -ENOSPC once the table is 3/4
 * full. */
int shm_source__seen_add(struct shm_source *s, const struct mt_shm_seen *f);
/* Copies the inert files of earlier runs (inert_cache.h) into the kept-files table: before the
 * command runs. Nothing when there is no cache. */
void shm_source__keep_load(struct shm_source *s);
/* The dlopens the interposers judged by that table (mechanisms.dlopens_judged). */
uint64_t shm_source__dl_judged(const struct shm_source *s);
/* The processes the interposer saw: flags (MT_SHM_PROC_*) of pid, or -1 if it never loaded. */
int shm_source__proc_flags(const struct shm_source *s, int32_t pid);
/* The header's ctl_live word (shm_abi.h), for early_links__publish; NULL without s. */
uint32_t *shm_source__ctl_live(struct shm_source *s);
/* Processes that told their refusal in the header rather than by the control point. */
uint64_t shm_source__unserved(const struct shm_source *s);
/* Calls fn for every complete registration, with its flags (MT_SHM_PROC_*). */
void shm_source__each_proc(const struct shm_source *s,
			   void (*fn)(void *ctx, int32_t pid, uint64_t ts, uint32_t flags),
			   void *ctx);
/* Calls fn for each registration of a served image (pid, its CLOCK_MONOTONIC stamp, its flags
 * MT_SHM_PROC_*) listed now; returns how many. */
uint32_t shm_source__each_served(const struct shm_source *s,
				 void (*fn)(void *ctx, int32_t pid, uint64_t ts, uint32_t flags),
				 void *ctx);

#endif
