// SPDX-License-Identifier: MIT
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include "common/records.h"
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

void consumer__set_stack(struct consumer *c, consumer_stack_fn fn, void *ctx)
{
	c->stack.fn = fn;
	c->stack.ctx = ctx;
}

void consumer__flush(struct consumer *c)
{
	if (!c->nr_batch)
		return;
	for (int i = 0; i < c->nr_sinks; i++)
		c->rejected += c->sinks[i].fn(c->sinks[i].ctx, c->batch, c->nr_batch);
	c->nr_batch = 0;
}

void consumer__dispatch(struct consumer *c, const struct mt_event *src)
{
	/* Copied first, then judged: a source in shared memory (the interposer's rings) is
	 * writable by the tracked program, which must not change a record once it passed. */
	struct mt_event *ev = &c->batch[c->nr_batch], copy;

	*ev = *src;
	c->dispatched++;
	if (!records__has(ev->type, REC_ARTIFACT | REC_COMPANION)) {
		if (!records__has(ev->type, REC_CONTROL)) {
			c->rejected++; /* unknown */
			return;
		}
		copy = *ev; /* the flush reuses the batch */
		consumer__flush(c);
		if (!c->control.fn || c->control.fn(c->control.ctx, &copy))
			c->rejected++;
		return;
	}
	if (c->order.fn && !c->ordering && !records__has(ev->type, REC_HEAP)) {
		copy = *ev; /* the hook dispatches records into the batch first */
		c->ordering = true; /* what it dispatches calls no hook */
		c->order.fn(c->order.ctx, c, &copy);
		c->ordering = false;
		ev = &c->batch[c->nr_batch];
		*ev = copy;
	}
	if (c->stack.fn && records__has(ev->type, REC_LAYOUT)) {
		copy = *ev;
		c->stack.fn(c->stack.ctx, &copy, NULL, 0);
	}
	if (++c->nr_batch == CONSUMER_BATCH)
		consumer__flush(c);
}

void consumer__dispatch_var(struct consumer *c, const void *rec, size_t len)
{
	struct mt_event ev;

	memcpy(&ev, rec, sizeof(ev));
	if (len > sizeof(ev)) {
		if (!records__has(ev.type, REC_VARLEN)) {
			c->dispatched++;
			c->rejected++;
			return;
		}
		if (c->stack.fn)
			c->stack.fn(c->stack.ctx, &ev, (const uint8_t *)rec + sizeof(ev),
				    len - sizeof(ev));
	}
	consumer__dispatch(c, &ev);
}

int consumer__drain(struct consumer *c)
{
	struct timespec ts;
	uint64_t before = 0, after = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	c->round_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	for (int i = 0; i < c->nr_sources; i++)
		before += c->sources[i]->delivered;
	for (int i = 0; i < c->nr_sources; i++) {
		int n = c->sources[i]->drain(c->sources[i], c);

		consumer__flush(c);
		if (n < 0) {
			if (!c->read_err)
				c->read_err = n;
			continue;
		}
		c->sources[i]->delivered += n;
	}
	/* what a source delivered ahead of another's record (the ordering hook) counts too: a
	 * served process's records mostly leave that way, before the Rss records of its pages */
	for (int i = 0; i < c->nr_sources; i++)
		after += c->sources[i]->delivered;
	return after - before > INT_MAX ? INT_MAX : (int)(after - before);
}

void consumer__destroy(struct consumer *c)
{
	for (int i = 0; i < c->nr_sources; i++)
		if (c->sources[i]->destroy)
			c->sources[i]->destroy(c->sources[i]);
	c->nr_sources = 0;
}

/* --- the BPF ring buffer ------------------------------------------------------------------ */

/*
 * Read directly rather than through libbpf's ring_buffer: libbpf maps the data area twice, back
 * to back, so that a record crossing the end reads contiguously; the kernel maps every page of
 * both copies at mmap, and a 32 MiB ring then counts 64 MiB in memtrack's RSS (the manifest's
 * memtrack_max_rss). Here the data area is mapped once and the rare record that wraps is copied
 * out. The protocol is the kernel's (include/uapi/linux/bpf.h): an 8-byte header per record,
 * length with BUSY (still being written) and DISCARD bits, records 8-byte aligned, positions
 * growing forever and masked by the power-of-two size; the consumer position is ours to write.
 *
 * The data area is mapped as far as records have reached, not whole: the kernel inserts every
 * page of a mapping at mmap, ~0.7 us a page (an 8 MiB ring: ~1.5 ms of every run's start-up,
 * and as much again to unmap), while a short run's records fill a few pages. The address range
 * is reserved whole at the start (PROT_NONE) and mapped over from its beginning, doubling, as
 * the producer position moves on (ringbuf_cover); after one lap all of it is mapped.
 */
#define RINGBUF_FIRST_MAP (64 * 1024) /* bytes of the data area mapped at the start */

/* MEMTRACK_TEST_RING_MAP_FAIL set: every mapping past the first fails, as with ENOMEM (the
 * tests' way to check that such a run ends, releases its stopped tasks and says it is
 * incomplete) */
static bool ringbuf_fail_map;

struct ringbuf_priv {
	int map_fd;
	size_t page, size;	/* bytes; size is a power of two */
	size_t mapped;		/* bytes of the data area mapped, from its start */
	uint64_t *consumer_pos; /* one read-write page */
	void *producer_map;	/* producer page, then the data area once, read-only */
	const uint8_t *data;
	const uint64_t *producer_pos;
	uint8_t *wrap; /* a record that wraps around the end, copied out (allocated when met) */
	struct event_source src;
};

/* The longest record the BPF side writes: an allocation with its stack (events.h). */
#define RINGBUF_MAX_RECORD (sizeof(struct mt_event) + sizeof(struct mt_ustack) + MT_USTACK_MAX)

static inline size_t ringbuf_span(uint32_t len)
{
	return ((len & ~(uint32_t)BPF_RINGBUF_DISCARD_BIT) + BPF_RINGBUF_HDR_SZ + 7) & ~(size_t)7;
}

/* Maps the data area up to where records between cons and prod lie (the whole area once they
 * cross the end): at least twice what was mapped. Returns 0 or -errno. */
static int ringbuf_cover(struct ringbuf_priv *p, uint64_t cons, uint64_t prod)
{
	uint64_t need = prod - (cons & ~(uint64_t)(p->size - 1)); /* from the lap's start */
	size_t want;

	if (need <= p->mapped || p->mapped == p->size)
		return 0;
	want = p->mapped * 2 > need ? p->mapped * 2 : (size_t)need;
	/* twice as far, or failing that (ENOMEM: a memory cgroup's limit, vm.max_map_count) just
	 * as far as the records reach */
	for (int i = 0; i < 2; i++, want = (size_t)need) {
		want = want < p->size ? (want + p->page - 1) & ~(p->page - 1) : p->size;
		if (!ringbuf_fail_map &&
		    mmap((uint8_t *)p->data + p->mapped, want - p->mapped, PROT_READ,
			 MAP_SHARED | MAP_FIXED, p->map_fd,
			 (off_t)(2 * p->page + p->mapped)) != MAP_FAILED) {
			p->mapped = want;
			return 0;
		}
	}
	return ringbuf_fail_map ? -ENOMEM : -errno;
}

static int ringbuf_source__drain(struct event_source *src, struct consumer *c)
{
	struct ringbuf_priv *p = src->priv;
	uint64_t cons = __atomic_load_n(p->consumer_pos, __ATOMIC_ACQUIRE), prod;
	uint64_t stop = cons + p->size; /* a bounded pass: the loop must get back to its signals */
	size_t mask = p->size - 1;
	int n = 0, err;

	prod = __atomic_load_n(p->producer_pos, __ATOMIC_ACQUIRE);
	if ((err = ringbuf_cover(p, cons, prod)))
		return err;
	while (cons < prod && cons < stop) {
		const uint8_t *hdr = p->data + (cons & mask); /* 8-aligned: a header never wraps */
		uint32_t len = __atomic_load_n((const uint32_t *)hdr, __ATOMIC_ACQUIRE);
		size_t off = (cons & mask) + BPF_RINGBUF_HDR_SZ;

		if (len & BPF_RINGBUF_BUSY_BIT)
			break; /* reserved, not committed yet: records after it wait for it */
		if (!(len & BPF_RINGBUF_DISCARD_BIT)) {
			if (len < sizeof(struct mt_event) || len > RINGBUF_MAX_RECORD) {
				c->rejected++;
			} else if (off + len <= p->size) {
				if (len == sizeof(struct mt_event))
					consumer__dispatch_fast(
					    c, (const struct mt_event *)(p->data + off));
				else
					consumer__dispatch_var(c, p->data + off, len);
			} else if (p->wrap || (p->wrap = malloc(RINGBUF_MAX_RECORD))) {
				size_t first = off < p->size ? p->size - off : 0;

				memcpy(p->wrap, p->data + (off & mask), first);
				memcpy(p->wrap + first, p->data, len - first);
				consumer__dispatch_var(c, p->wrap, len);
			} else {
				c->rejected++;
			}
			n++;
		}
		cons += ringbuf_span(len);
		/* dispatch copied the record (or handled it): its space can go back */
		__atomic_store_n(p->consumer_pos, cons, __ATOMIC_RELEASE);
		if (cons >= prod) {
			prod = __atomic_load_n(p->producer_pos, __ATOMIC_ACQUIRE);
			if ((err = ringbuf_cover(p, cons, prod)))
				return err;
		}
	}
	src->caught_up = cons >= prod;
	return n;
}

static void ringbuf_source__destroy(struct event_source *src)
{
	struct ringbuf_priv *p = src->priv;

	if (p->producer_map)
		munmap(p->producer_map, p->page + p->size);
	if (p->consumer_pos)
		munmap(p->consumer_pos, p->page);
	free(p->wrap);
	free(p);
}

int ringbuf_source__new(struct event_source **src, int map_fd)
{
	struct bpf_map_info info = {0};
	__u32 info_len = sizeof(info);
	struct ringbuf_priv *p;
	void *m;
	int err;

	if (bpf_obj_get_info_by_fd(map_fd, &info, &info_len))
		return -errno;
	if (info.type != BPF_MAP_TYPE_RINGBUF || !info.max_entries ||
	    (info.max_entries & (info.max_entries - 1)))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->map_fd = map_fd;
	p->page = (size_t)sysconf(_SC_PAGESIZE);
	ringbuf_fail_map = getenv("MEMTRACK_TEST_RING_MAP_FAIL") != NULL;
	p->size = info.max_entries;
	m = mmap(NULL, p->page, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
	if (m == MAP_FAILED)
		goto fail;
	p->consumer_pos = m;
	/* the producer page and the data area's addresses; what is mapped over them (ringbuf_cover)
	 * reads the ring, the rest faults */
	m = mmap(NULL, p->page + p->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	if (m == MAP_FAILED)
		goto fail;
	p->producer_map = m;
	p->mapped = p->size < RINGBUF_FIRST_MAP ? p->size : RINGBUF_FIRST_MAP;
	if (mmap(m, p->page + p->mapped, PROT_READ, MAP_SHARED | MAP_FIXED, map_fd,
		 (off_t)p->page) == MAP_FAILED)
		goto fail;
	p->producer_pos = m;
	p->data = (const uint8_t *)m + p->page;
	/* a ring buffer map polls readable while records are pending */
	p->src = (struct event_source){.name = "bpf-ringbuf",
				       .fd = map_fd,
				       .drain = ringbuf_source__drain,
				       .destroy = ringbuf_source__destroy,
				       .priv = p};
	*src = &p->src;
	return 0;
fail:
	err = -errno;
	p->src.priv = p;
	ringbuf_source__destroy(&p->src);
	return err;
}
