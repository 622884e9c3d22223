// SPDX-License-Identifier: MIT
/* The replay source: records from memory through the same dispatcher as the ring's. */
#include <errno.h>
#include <stdlib.h>
#include "track/consumer.h"

struct replay_priv {
	const struct mt_event *ev;
	size_t nr, next, batch;
	struct event_source src;
};

static int replay_source__drain(struct event_source *src, struct consumer *c)
{
	struct replay_priv *p = src->priv;
	size_t end = p->nr - p->next > p->batch ? p->next + p->batch : p->nr;
	int n = (int)(end - p->next);

	for (; p->next < end; p->next++)
		consumer__dispatch_fast(c, &p->ev[p->next]);
	return n;
}

static void replay_source__destroy(struct event_source *src)
{
	free(src->priv);
}

int replay_source__new(struct event_source **src, const struct mt_event *ev, size_t nr,
		       size_t batch)
{
	struct replay_priv *p;

	if (!src || (!ev && nr))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	/* drain returns an int count: keep a batch within it */
	if (!batch || batch > (1u << 30))
		batch = 1u << 30;
	p->ev = ev;
	p->nr = nr;
	p->batch = batch;
	p->src = (struct event_source){.name = "replay",
				       .fd = -1,
				       .drain = replay_source__drain,
				       .destroy = replay_source__destroy,
				       .priv = p};
	*src = &p->src;
	return 0;
}
