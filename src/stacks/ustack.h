/* SPDX-License-Identifier: MIT */
/*
 * --stacks in the uprobe event path: the BPF side writes each allocation record with the
 * caller's registers and a slice of its stack after it (src/bpf/events.h, struct mt_ustack);
 * the consumer hands that payload here (consumer_stack_fn) before the record is batched. It is
 * unwound with libdwfl (unwind_dwfl.h), its frames interned in the stack sink, and the record's
 * aux set to the stack id, which is all the sinks see (stack_sink.h). Fork and Exec records come
 * here too, without payload: a child starts with its parent's maps, an exec forgets them.
 */
#ifndef MEMTRACK_USTACK_H
#define MEMTRACK_USTACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "bpf/events.h"
#include "stacks/stack_sink.h"

struct ustack;

struct ustack_stats {
	uint64_t records;    /* allocation records with a stack payload */
	uint64_t bytes;	     /* ring bytes of those records (header, registers, stack) */
	uint64_t failed;     /* ... that could not be unwound at all (aux 0) */
	uint64_t truncated;  /* ... unwound in part (the copy ended first) */
	uint64_t remembered; /* ... whose unwind was remembered from an earlier one */
	uint64_t bad;	     /* payloads that were not a struct mt_ustack and its bytes */
	uint64_t unwind_ns;  /* time spent unwinding and interning */
	uint64_t maps_reads; /* /proc/PID/maps readings */
	uint64_t fast;	     /* walked with cached CFI rules, not by libdwfl */
};

int ustack__new(struct ustack **u, struct stack_sink *sink);
/* consumer_stack_fn: ctx is the struct ustack; len 0 for Fork and Exec records. */
void ustack__record(void *ctx, struct mt_event *ev, const void *payload, size_t len);
/* pid is stopped (at its image's first allocation with a stack, or after a dlopen): its maps
 * are complete now; read them, for this image's stacks to come. NULL-safe. */
void ustack__read_maps(struct ustack *u, pid_t pid);
void ustack__stats(const struct ustack *u, struct ustack_stats *st);
void ustack__free(struct ustack *u); /* NULL-safe */

#endif
