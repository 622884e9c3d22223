// SPDX-License-Identifier: MIT
#include "track/sinks.h"

static int sink_artifact(void *ctx, const struct mt_event *ev)
{
	struct record_sinks *s = ctx;
	int err = artifact_writer__write(s->writer, ev);

	if (err && !s->write_err)
		s->write_err = err;
	if (!err)
		s->counts[ev->type]++;
	return err;
}

static int sink_acct(void *ctx, const struct mt_event *ev)
{
	heap_acct__event(ctx, ev);
	return 0;
}

int record_sinks__add(struct record_sinks *s, struct consumer *c)
{
	int err = consumer__add_sink(c, sink_artifact, s);

	if (!err && s->acct)
		err = consumer__add_sink(c, sink_acct, s->acct);
	return err;
}
