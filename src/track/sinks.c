// SPDX-License-Identifier: MIT
#include "track/sinks.h"

/*
 * One sink for both: the dispatcher's loop makes an indirect call per sink and per record, and
 * at millions of records per second one call less is measurable. Same contract as two sinks in
 * order: a record the writer refuses stops there and is not accounted.
 */
static int sink_record(void *ctx, const struct mt_event *ev)
{
	struct record_sinks *s = ctx;
	int err = artifact_writer__write(s->writer, ev);

	if (err) {
		if (!s->write_err)
			s->write_err = err;
		return err;
	}
	s->counts[ev->type]++;
	if (s->acct)
		heap_acct__event(s->acct, ev);
	return 0;
}

int record_sinks__add(struct record_sinks *s, struct consumer *c)
{
	return consumer__add_sink(c, sink_record, s);
}
