/* SPDX-License-Identifier: MIT */
/*
 * The record sinks of a run, as the tracker wires them behind the consumer: every artifact
 * record is written to the artifact, then accounted (live heap, RSS); a companion record (the
 * markers of <memtrack.h>) is only accounted, in its place; with --stacks, each allocation
 * record's stack id (its aux) goes to the stack sink in artifact order. Shared by `memtrack track`
 * and memtrack-bench-consumer, so the benchmark measures the tracker's own path.
 */
#ifndef MEMTRACK_SINKS_H
#define MEMTRACK_SINKS_H

#include <stdint.h>
#include "artifact/artifact.h"
#include "acct/acct.h"
#include "track/consumer.h"

struct stack_sink;

struct record_sinks {
	struct artifact_writer *writer;	 /* borrowed */
	struct heap_acct *acct;		 /* borrowed; NULL: no accounting */
	struct stack_sink *stacks;	 /* borrowed; NULL: no --stacks */
	int write_err;			 /* first writer failure, -errno; 0 when none */
	uint64_t counts[MT_EV_TYPE_MAX]; /* records written to the artifact, by type */
};

/* Registers the sinks of s on c. A record the writer refuses is not accounted: the consumer
 * counts it as rejected. */
int record_sinks__add(struct record_sinks *s, struct consumer *c);

#endif
