// SPDX-License-Identifier: MIT
#include "common/records.h"
#include "stacks/stack_sink.h"
#include "track/sinks.h"

/* Malloc, Calloc, Realloc, AlignedAlloc: the records with a stack (docs/stacks.md). */
_Static_assert(MT_EV_MALLOC == 1 && MT_EV_CALLOC == 2 && MT_EV_REALLOC == 3 &&
		       MT_EV_ALIGNED_ALLOC == 4 && MT_EV_FREE == 5,
	       "the allocation records are 1..4");
static inline bool has_stack(uint32_t type)
{
	return type - MT_EV_MALLOC <= MT_EV_ALIGNED_ALLOC - MT_EV_MALLOC;
}

static void stacks_written(struct stack_sink *ss, const struct mt_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (has_stack(ev[i].type))
			stack_sink__alloc(ss, ev[i].aux);
}

/*
 * One sink for both, over a batch: written records are counted, then accounted in one call
 * that can prefetch ahead. A record the writer refuses (its errors are sticky I/O failures, so
 * once one fails the rest do) is not accounted.
 */
static size_t sink_artifact(struct record_sinks *s, const struct mt_event *ev, size_t n)
{
	size_t refused = 0, written;
	int err;

	written = artifact_writer__write_many(s->writer, ev, n, s->counts, &err);
	if (err && !s->write_err)
		s->write_err = err;
	if (s->stacks)
		stacks_written(s->stacks, ev, written);
	if (s->acct && written)
		heap_acct__events(s->acct, ev, written);
	/* the rest, one by one: a refusal may be per record (an unknown type) */
	for (size_t i = written; i < n; i++) {
		if (artifact_writer__write(s->writer, &ev[i])) {
			refused++;
			continue;
		}
		s->counts[ev[i].type]++;
		if (s->stacks)
			stacks_written(s->stacks, &ev[i], 1);
		if (s->acct)
			heap_acct__event(s->acct, &ev[i]);
	}
	return refused;
}

/* Companion records (markers: rare) are accounted, never written: runs of the others go
 * through the artifact path above. */
static size_t sink_records(void *ctx, const struct mt_event *ev, size_t n)
{
	struct record_sinks *s = ctx;
	size_t refused = 0, i = 0;

	while (i < n) {
		size_t j = i;

		if (records__has(ev[i].type, REC_COMPANION)) {
			if (s->acct)
				heap_acct__event(s->acct, &ev[i]);
			i++;
			continue;
		}
		while (j < n && !records__has(ev[j].type, REC_COMPANION))
			j++;
		refused += sink_artifact(s, ev + i, j - i);
		i = j;
	}
	return refused;
}

int record_sinks__add(struct record_sinks *s, struct consumer *c)
{
	return consumer__add_sink(c, sink_records, s);
}
