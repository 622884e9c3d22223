/* SPDX-License-Identifier: MIT */
/*
 * The consumer: sources of struct mt_event records (the BPF ring buffer, a replay of records in
 * memory; a perf buffer or a second ring tomorrow) feed one dispatcher. Control records go to
 * the control handler at once, everything else is copied into a batch that goes to every sink
 * when full and at the end of each source's drain: one indirect call per sink per batch, not
 * per record, and a sink can look ahead in it (the accounting prefetches its table slots).
 * A control record flushes the batch first, so sinks see records in ring order. Each source
 * counts what it delivered; the dispatcher counts what the sinks refused.
 */
#ifndef MEMTRACK_CONSUMER_H
#define MEMTRACK_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/events.h"

struct consumer;

/* Takes n records (n >= 1) in order; returns how many of them it refused. */
typedef size_t (*consumer_sink_fn)(void *ctx, const struct mt_event *ev, size_t n);
/* Handles one control record; nonzero counts it as rejected. */
typedef int (*consumer_control_fn)(void *ctx, const struct mt_event *ev);
/* Takes what follows the header of a longer record (REC_VARLEN: a struct mt_ustack and the stack
 * bytes, len bytes in all), before the header is batched; may set ev->aux (the stack id). The
 * payload is released on return. Also called with len 0 for REC_LAYOUT records (Fork, Exec), in
 * ring order, so that the stacks after them are read against the right layout. */
typedef void (*consumer_stack_fn)(void *ctx, struct mt_event *ev, const void *payload, size_t len);

#define CONSUMER_BATCH 64 /* records; 3 KiB, stays in L1 */

struct event_source {
	const char *name;
	int fd; /* pollable; readable when records are pending */
	/* Delivers every pending record through consumer__dispatch; returns the count or -errno */
	int (*drain)(struct event_source *src, struct consumer *c);
	void (*destroy)(struct event_source *src);
	uint64_t delivered;
	bool caught_up; /* its last drain reached the end: nothing committed before it is left */
	void *priv;
};

struct consumer {
	struct event_source *sources[4];
	int nr_sources;
	struct {
		consumer_sink_fn fn;
		void *ctx;
	} sinks[4];
	struct {
		consumer_control_fn fn;
		void *ctx;
	} control;
	int nr_sinks;
	struct {
		consumer_stack_fn fn; /* NULL: payloads are ignored, headers delivered */
		void *ctx;
	} stack;
	/* Called before a record that is not an allocator call (Exec, Exit, Rss, Fork...) is
	 * dispatched, so that another source can hand over that process's older records first
	 * (shm_source.h); not for the records the hook itself dispatches (`ordering`). */
	struct {
		void (*fn)(void *ctx, struct consumer *c, const struct mt_event *ev);
		void *ctx;
	} order;
	bool ordering;
	uint64_t round_ns; /* CLOCK_MONOTONIC when the current consumer__drain began */
	uint64_t dispatched;
	uint64_t rejected; /* refusals by a sink or the control handler, and unknown types */
	/* the first error a source's drain returned (the BPF ring's data area could not be mapped
	 * further: its records past that point are unread); 0 if none. The run is incomplete. */
	int read_err;
	unsigned nr_batch;
	struct mt_event batch[CONSUMER_BATCH]; /* copies: a ring record is released on return */
};

void consumer__init(struct consumer *c);
int consumer__add_source(struct consumer *c, struct event_source *src);
int consumer__add_sink(struct consumer *c, consumer_sink_fn fn, void *ctx);
void consumer__set_control(struct consumer *c, consumer_control_fn fn, void *ctx);
void consumer__set_stack(struct consumer *c, consumer_stack_fn fn, void *ctx);
/* For sources: one record. It may stay batched until the source's drain returns. */
void consumer__dispatch(struct consumer *c, const struct mt_event *ev);
/* For sources: one record of len bytes (>= sizeof(struct mt_event)); longer ones only of
 * REC_VARLEN types (others are rejected). */
void consumer__dispatch_var(struct consumer *c, const void *rec, size_t len);
/* Hands the batched records to the sinks (consumer__drain does it after each source). */
void consumer__flush(struct consumer *c);
/* consumer__dispatch for the records of every run's bulk, the allocator calls (Malloc..Free),
 * inline: copied, then judged by the copy's type; they need no control, ordering or layout
 * step. Anything else goes through consumer__dispatch. */
static inline void consumer__dispatch_fast(struct consumer *c, const struct mt_event *src)
{
	struct mt_event *ev = &c->batch[c->nr_batch];

	*ev = *src;
	if (__builtin_expect(ev->type - MT_EV_MALLOC > MT_EV_FREE - MT_EV_MALLOC, 0)) {
		struct mt_event copy = *ev; /* what was read is what is judged */

		consumer__dispatch(c, &copy);
		return;
	}
	c->dispatched++;
	if (++c->nr_batch == CONSUMER_BATCH)
		consumer__flush(c);
}

/* Drains every source once; returns the records delivered, those the ordering hook delivered
 * included (at most INT_MAX). A source's failure is kept in
 * read_err and the other sources are still drained. Every record delivered has reached the
 * sinks when it returns. */
int consumer__drain(struct consumer *c);
/* Frees the sources. Records still batched are dropped: drain (or flush) first. */
void consumer__destroy(struct consumer *c);

/* The BPF ring buffer as a source. */
int ringbuf_source__new(struct event_source **src, int map_fd);

/*
 * An array of records as a source: a recorded run (an artifact read back) or a synthetic one
 * (memtrack-bench-consumer, tests). Each drain delivers the next `batch` records (0: all), as
 * one wake-up of the ring would; 0 once the array is exhausted. fd is -1: always ready, nothing
 * to poll. The array is borrowed and must outlive the source.
 */
int replay_source__new(struct event_source **src, const struct mt_event *ev, size_t nr,
		       size_t batch);

#endif
