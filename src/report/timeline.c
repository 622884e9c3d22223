// SPDX-License-Identifier: MIT
/*
 * Downsampled timeline: fixed array of buckets, width doubling (pairs merged) whenever a sample
 * falls past the last one, so memory is O(max_points) whatever the run length and every peak
 * is kept as a bucket maximum.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "report/report.h"

#define FIRST_WIDTH_NS 1000 /* 1 us: doubled as needed, so a 1 ms run still gets fine buckets */

struct bucket {
	bool set; /* had a sample */
	uint64_t heap_max, rss_max; /* bytes */
	uint64_t heap_last, rss_last; /* bytes, after the bucket's last sample */
};

struct timeline {
	uint32_t cap, n; /* buckets; n: highest used + 1 */
	uint64_t t0, width; /* ns */
	bool started;
	uint64_t heap_now, rss_now; /* level after the latest sample: where the next bucket starts */
	struct bucket *b;
	struct timeline_point *out;
};

int timeline__new(struct timeline **out, uint32_t max_points)
{
	struct timeline *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->cap = max_points < 2 ? 2 : max_points & ~1u; /* even: pairs merge cleanly */
	t->width = FIRST_WIDTH_NS;
	t->b = calloc(t->cap, sizeof(*t->b));
	t->out = calloc(t->cap, sizeof(*t->out));
	if (!t->b || !t->out) {
		timeline__free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

void timeline__free(struct timeline *t)
{
	if (!t)
		return;
	free(t->b);
	free(t->out);
	free(t);
}

static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static void timeline__halve(struct timeline *t)
{
	for (uint32_t i = 0; i < t->cap / 2; i++) {
		const struct bucket *x = &t->b[2 * i], *y = &t->b[2 * i + 1];
		struct bucket m = *x;

		if (y->set) {
			m.heap_max = x->set ? max64(x->heap_max, y->heap_max) : y->heap_max;
			m.rss_max = x->set ? max64(x->rss_max, y->rss_max) : y->rss_max;
			m.heap_last = y->heap_last;
			m.rss_last = y->rss_last;
			m.set = true;
		}
		t->b[i] = m;
	}
	memset(&t->b[t->cap / 2], 0, t->cap / 2 * sizeof(*t->b));
	t->n = (t->n + 1) / 2;
	t->width *= 2;
}

void timeline__add(struct timeline *t, uint64_t ts, uint64_t heap, uint64_t rss)
{
	struct bucket *b;
	uint64_t idx;

	if (!t->started) {
		t->started = true;
		t->t0 = ts;
	}
	/* out of order across CPUs by a little: the first bucket takes it */
	idx = ts > t->t0 ? (ts - t->t0) / t->width : 0;
	while (idx >= t->cap) {
		timeline__halve(t);
		idx = (ts - t->t0) / t->width;
	}
	b = &t->b[idx];
	if (!b->set) {
		/* the level before this sample held from the bucket's start */
		b->set = true;
		b->heap_max = t->heap_now;
		b->rss_max = t->rss_now;
	}
	b->heap_max = max64(b->heap_max, heap);
	b->rss_max = max64(b->rss_max, rss);
	b->heap_last = heap;
	b->rss_last = rss;
	t->heap_now = heap;
	t->rss_now = rss;
	if (idx + 1 > t->n)
		t->n = (uint32_t)idx + 1;
}

const struct timeline_point *timeline__points(struct timeline *t, uint32_t *n, uint64_t *t0,
					       uint64_t *bucket_ns)
{
	uint64_t heap = 0, rss = 0;

	for (uint32_t i = 0; i < t->n; i++) {
		const struct bucket *b = &t->b[i];

		t->out[i].t = (uint64_t)i * t->width;
		t->out[i].heap = b->set ? b->heap_max : heap;
		t->out[i].rss = b->set ? b->rss_max : rss;
		if (b->set) {
			heap = b->heap_last;
			rss = b->rss_last;
		}
	}
	*n = t->n;
	if (t0)
		*t0 = t->t0;
	if (bucket_ns)
		*bucket_ns = t->width;
	return t->out;
}
