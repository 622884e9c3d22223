// SPDX-License-Identifier: MIT
#include "track/sinks.h"

/*
 * One sink for both, over a batch: written records are counted, then accounted in one call
 * that can prefetch ahead. A record the writer refuses (its errors are sticky I/O failures, so
 * once one fails the rest do) is not accounted.
 */
static size_t sink_records(void *ctx, const struct mt_event *ev, size_t n)
{
	struct record_sinks *s = ctx;
	size_t refused = 0, written;
	int err;

	written = artifact_writer__write_many(s->writer, ev, n, &err);
	if (err && !s->write_err)
		s->write_err = err;
	for (size_t i = 0; i < written; i++)
		s->counts[ev[i].type]++;
	if (s->acct && written)
		heap_acct__events(s->acct, ev, written);
	/* the rest, one by one: a refusal may be per record (an unknown type) */
	for (size_t i = written; i < n; i++) {
		if (artifact_writer__write(s->writer, &ev[i])) {
			refused++;
			continue;
		}
		s->counts[ev[i].type]++;
		if (s->acct)
			heap_acct__event(s->acct, &ev[i]);
	}
	return refused;
}

int record_sinks__add(struct record_sinks *s, struct consumer *c)
{
	return consumer__add_sink(c, sink_records, s);
}
