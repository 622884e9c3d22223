/* SPDX-License-Identifier: MIT */
/*
 * The tracker's stack sink (memtrack track --stacks): what every event path hands its stacks
 * to, and what writes `<pid>.memtrack.stacks` (src/stacks/stackfile.h) beside the artifact.
 *
 * The contract with the sources (the record ABI, src/bpf/events.h): when an allocation record
 * (Malloc, Calloc, Realloc, AlignedAlloc) reaches the sinks, its `aux` is the id that
 * stack_sink__stack returned for its stack, or 0 for none. A source translates its own stack
 * references into these ids before it dispatches the record: the preload path's shared stack
 * area (src/track/stack_shm.c), the BPF path's unwinder (libdwfl) alike:
 *
 *     stack_sink__module(s, pid, "/usr/lib/x86_64-linux-gnu/libc.so.6", bid, 20, bias, &m);
 *     frames[0] = (struct stack_frame){.module = m, .vaddr = ip - bias};  ... leaf first
 *     stack_sink__stack(s, frames, nr, truncated, &ev.aux);
 *     consumer__dispatch(c, &ev);
 *
 * The record sinks (src/track/sinks.c) then call stack_sink__alloc for each allocation record
 * the artifact writer took, in artifact order, so the k-th id of the file belongs to the k-th
 * allocation record of the artifact. All calls come from the consumer's thread.
 */
#ifndef MEMTRACK_STACK_SINK_H
#define MEMTRACK_STACK_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "stacks/stackfile.h"

struct stack_sink;

/* fd: the open, empty stacks file (taken over); artifact_name: the artifact's file name;
 * unwinder: per event path, "preload=libunwind,uprobe=dwfl" (the header's `unwinder`). */
int stack_sink__open(struct stack_sink **s, int fd, const char *artifact_name,
		     const char *unwinder);
/* An ELF object that frames of process pid point into, mapped at bias (load address - ELF
 * vaddr; STACK_SINK_NO_BIAS when the caller does not know it: no `load` is then written).
 * Modules are interned by (path, build-id): the same file in many processes is one module;
 * each new (pid, module, bias) is written as a `load`. *id goes in stack_frame.module. */
#define STACK_SINK_NO_BIAS UINT64_MAX
int stack_sink__module(struct stack_sink *s, int32_t pid, const char *path, const uint8_t *build_id,
		       size_t build_id_len, uint64_t bias, uint32_t *id);
/* A stack, leaf (the allocator's caller) first, at most STACKFILE_MAX_FRAMES frames (cut
 * deeper stacks at the root end and set truncated). Interned: *id is what aux carries. */
int stack_sink__stack(struct stack_sink *s, const struct stack_frame *frames, uint32_t nr,
		      bool truncated, uint32_t *id);
/* The stack of the next allocation record of the artifact (the record sinks call it). */
int stack_sink__alloc(struct stack_sink *s, uint32_t stack_id);

struct stack_sink_stats {
	uint64_t allocs;	  /* allocation records */
	uint64_t with_stack;	  /* ... whose aux named a stack */
	uint32_t stacks, modules; /* distinct */
};
void stack_sink__stats(const struct stack_sink *s, struct stack_sink_stats *st);
/* Writes the end of the file and closes it; frees s (NULL-safe). 0 or the first -errno. */
int stack_sink__close(struct stack_sink *s);

#endif
