// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "track/consumer.h"

void consumer__init(struct consumer *c)
{
	memset(c, 0, sizeof(*c));
}

int consumer__add_source(struct consumer *c, struct event_source *src)
{
	if (c->nr_sources == (int)(sizeof(c->sources) / sizeof(c->sources[0])))
		return -ENOSPC;
	c->sources[c->nr_sources++] = src;
	return 0;
}

int consumer__add_sink(struct consumer *c, consumer_sink_fn fn, void *ctx)
{
	if (c->nr_sinks == (int)(sizeof(c->sinks) / sizeof(c->sinks[0])))
		return -ENOSPC;
	c->sinks[c->nr_sinks].fn = fn;
	c->sinks[c->nr_sinks++].ctx = ctx;
	return 0;
}

void consumer__set_control(struct consumer *c, consumer_control_fn fn, void *ctx)
{
	c->control.fn = fn;
	c->control.ctx = ctx;
}

void consumer__flush(struct consumer *c)
{
	if (!c->nr_batch)
		return;
	for (int i = 0; i < c->nr_sinks; i++)
		c->rejected += c->sinks[i].fn(c->sinks[i].ctx, c->batch, c->nr_batch);
	c->nr_batch = 0;
}

void consumer__dispatch(struct consumer *c, const struct mt_event *ev)
{
	c->dispatched++;
	if (ev->type >= MT_EV_CTL_EXEC_STOPPED) {
		consumer__flush(c);
		if (ev->type >= MT_EV_TYPE_MAX || !c->control.fn ||
		    c->control.fn(c->control.ctx, ev))
			c->rejected++;
		return;
	}
	if (ev->type == MT_EV_NONE || ev->type > MT_EV_RMAP) {
		c->rejected++;
		return;
	}
	c->batch[c->nr_batch++] = *ev;
	if (c->nr_batch == CONSUMER_BATCH)
		consumer__flush(c);
}

int consumer__drain(struct consumer *c)
{
	int total = 0;

	for (int i = 0; i < c->nr_sources; i++) {
		int n = c->sources[i]->drain(c->sources[i], c);

		consumer__flush(c);
		if (n < 0)
			return n;
		c->sources[i]->delivered += n;
		total += n;
	}
	return total;
}

void consumer__destroy(struct consumer *c)
{
	for (int i = 0; i < c->nr_sources; i++)
		if (c->sources[i]->destroy)
			c->sources[i]->destroy(c->sources[i]);
	c->nr_sources = 0;
}

/* --- the BPF ring buffer ------------------------------------------------------------------ */

struct ringbuf_priv {
	struct ring_buffer *rb;
	struct consumer *c; /* set for the duration of a drain */
	struct event_source src;
};

static int ringbuf_source__record(void *ctx, void *data, size_t len)
{
	struct ringbuf_priv *p = ctx;

	if (len < sizeof(struct mt_event)) {
		p->c->rejected++;
		return 0;
	}
	consumer__dispatch(p->c, data);
	return 0;
}

static int ringbuf_source__drain(struct event_source *src, struct consumer *c)
{
	struct ringbuf_priv *p = src->priv;
	int n;

	p->c = c;
	n = ring_buffer__consume(p->rb);
	p->c = NULL;
	return n;
}

static void ringbuf_source__destroy(struct event_source *src)
{
	struct ringbuf_priv *p = src->priv;

	ring_buffer__free(p->rb);
	free(p);
}

int ringbuf_source__new(struct event_source **src, int map_fd)
{
	struct ringbuf_priv *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->rb = ring_buffer__new(map_fd, ringbuf_source__record, p, NULL);
	if (!p->rb) {
		int err = -errno;

		free(p);
		return err;
	}
	p->src.name = "bpf-ringbuf";
	p->src.fd = ring_buffer__epoll_fd(p->rb);
	p->src.drain = ringbuf_source__drain;
	p->src.destroy = ringbuf_source__destroy;
	p->src.priv = p;
	*src = &p->src;
	return 0;
}
