/* SPDX-License-Identifier: MIT */
/*
 * The preload path's stack area (--stacks; ABI: src/preload/stack_abi.h), memtrack's side:
 * creates the shared file before the command is forked (named in $MEMTRACK_STACKS_SHM), and
 * translates the refs that the interposer's allocation records carry in aux into stack-file
 * ids (stack_sink.h), reading each entry once: the id is kept in the entry's sink_id.
 */
#ifndef MEMTRACK_STACK_SHM_H
#define MEMTRACK_STACK_SHM_H

#include <stdint.h>
#include <sys/types.h>
#include "bpf/events.h"

struct stack_shm;
struct stack_sink;

/* Creates the file (mode 0600 in /dev/shm, owned by uid/gid unless -1), maps it, and sets
 * $MEMTRACK_STACKS_SHM in our environment (the command inherits it). 0 or -errno. */
int stack_shm__new(struct stack_shm **s, uid_t uid, gid_t gid);
const char *stack_shm__path(const struct stack_shm *s);
int stack_shm__fd(const struct stack_shm *s); /* read-write, ours (handoff.h) */
void stack_shm__set_sink(struct stack_shm *s, struct stack_sink *sink);
/* aux of an allocation record of the interposer -> the stack-file id (0: none, counted in
 * early when aux is 0, in bad when the ref names no well-formed entry). Fits
 * shm_source__set_stacks. */
uint32_t stack_shm__translate(void *s, const struct mt_event *ev);

struct stack_shm_stats {
	uint64_t full;	 /* allocations without a stack: the area was full */
	uint64_t failed; /* ... the unwinder failed or was not available */
	uint64_t bad;	 /* ... the ref named no well-formed entry */
	uint64_t early;	 /* ... made before the process's unwinder was set up (aux 0) */
	uint64_t used;	 /* bytes of the area used */
	/* allocations whose stack is cut at the root end (MT_STK_TRUNCATED); among them, cut at a
	 * return address a uretprobe had replaced (MT_STK_URETPROBE) */
	uint64_t truncated, uretprobe;
};
void stack_shm__stats(const struct stack_shm *s, struct stack_shm_stats *st);
/* Removes the file's name and unmaps it; NULL-safe. */
void stack_shm__free(struct stack_shm *s);

#endif
