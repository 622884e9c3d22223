/* SPDX-License-Identifier: MIT */
/*
 * The consumer: sources of struct mt_event records (the BPF ring buffer today; a perf buffer, a
 * replay file or a second ring tomorrow) feed one dispatcher. Control records go to the control
 * handler, everything else to the sinks in order (artifact writer, live accounting). Each
 * source counts what it delivered; the dispatcher counts what the sinks refused.
 */
#ifndef MEMTRACK_CONSUMER_H
#define MEMTRACK_CONSUMER_H

#include <stddef.h>
#include <stdint.h>
#include "bpf/events.h"

struct consumer;

typedef int (*consumer_sink_fn)(void *ctx, const struct mt_event *ev);

struct event_source {
	const char *name;
	int fd; /* pollable; readable when records are pending */
	/* Delivers every pending record through consumer__dispatch; returns the count or -errno */
	int (*drain)(struct event_source *src, struct consumer *c);
	void (*destroy)(struct event_source *src);
	uint64_t delivered;
	void *priv;
};

struct consumer {
	struct event_source *sources[4];
	int nr_sources;
	struct {
		consumer_sink_fn fn;
		void *ctx;
	} sinks[4], control;
	int nr_sinks;
	uint64_t dispatched;
	uint64_t rejected; /* records a sink failed on, or of unknown type */
};

void consumer__init(struct consumer *c);
int consumer__add_source(struct consumer *c, struct event_source *src);
int consumer__add_sink(struct consumer *c, consumer_sink_fn fn, void *ctx);
void consumer__set_control(struct consumer *c, consumer_sink_fn fn, void *ctx);
void consumer__dispatch(struct consumer *c, const struct mt_event *ev);
/* Drains every source once; returns records delivered or -errno. */
int consumer__drain(struct consumer *c);
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
