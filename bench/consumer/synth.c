// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "synth.h"

#define NR_CLASSES 64 /* size classes of 16 B up to 1 KiB; bigger sizes share the last */
#define PAGE	   4096ull

struct free_stack {
	uint64_t *addr;
	size_t nr, cap;
};

struct block {
	uint64_t addr, size;
};

struct thr {
	int32_t pid, tid;
	uint64_t brk;	    /* next fresh address of this thread's arena */
	uint64_t mmap_next; /* next address for big blocks (mmap'd by malloc) */
	struct block *live; /* live blocks, unordered */
	size_t nr_live, cap_live;
	struct free_stack cls[NR_CLASSES];
};

struct gen {
	uint64_t rng, ts;
	struct mt_event *ev;
	size_t nr, cap;
	uint64_t *anon; /* per process: the anon Rss counter, bytes */
};

/* splitmix64: fast, good enough for a workload mix */
static uint64_t rnd(struct gen *g)
{
	uint64_t z = (g->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned pct(struct gen *g)
{
	return (unsigned)(rnd(g) % 100);
}

static struct mt_event *emit(struct gen *g, uint32_t type, int32_t pid, int32_t tid)
{
	struct mt_event *e = &g->ev[g->nr++];

	/* 0.1-3 us between records: a few hundred thousand records/s, what uprobes allow */
	g->ts += 100 + rnd(g) % 2900;
	memset(e, 0, sizeof(*e));
	e->type = type;
	e->pid = pid;
	e->tid = tid;
	e->ts = g->ts;
	return e;
}

static uint64_t pick_size(struct gen *g)
{
	unsigned p = pct(g);

	if (p < 70)
		return 16 + rnd(g) % 113;
	if (p < 90)
		return 129 + rnd(g) % 896;
	if (p < 99)
		return 1025 + rnd(g) % (15 * 1024);
	return 16385 + rnd(g) % (240 * 1024);
}

static unsigned size_class(uint64_t size)
{
	uint64_t c = (size + 15) / 16;

	return c < NR_CLASSES ? (unsigned)c : NR_CLASSES - 1;
}

static int push(void **arr, size_t *cap, size_t nr, size_t elem)
{
	void *p;

	if (nr < *cap)
		return 0;
	p = realloc(*arr, (*cap ? *cap * 2 : 64) * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = *cap ? *cap * 2 : 64;
	return 0;
}

/* An address the allocator would return: a recently freed one of the class, or fresh. */
static uint64_t take_addr(struct gen *g, struct thr *t, uint64_t size)
{
	struct free_stack *fs = &t->cls[size_class(size)];
	uint64_t a;

	if (size > 128 * 1024) {
		a = t->mmap_next + 16;
		t->mmap_next += (size + 16 + PAGE - 1) / PAGE * PAGE;
		return a;
	}
	if (fs->nr && pct(g) < 90)
		return fs->addr[--fs->nr];
	a = t->brk + 16; /* after the chunk header */
	t->brk += (size + 16 + 15) / 16 * 16;
	return a;
}

static int give_addr(struct thr *t, const struct block *b)
{
	struct free_stack *fs = &t->cls[size_class(b->size)];

	if (b->size > 128 * 1024)
		return 0; /* munmap'd: never reused here */
	if (push((void **)&fs->addr, &fs->cap, fs->nr, sizeof(uint64_t)))
		return -ENOMEM;
	fs->addr[fs->nr++] = b->addr;
	return 0;
}

static int add_live(struct thr *t, uint64_t addr, uint64_t size)
{
	if (push((void **)&t->live, &t->cap_live, t->nr_live, sizeof(struct block)))
		return -ENOMEM;
	t->live[t->nr_live].addr = addr;
	t->live[t->nr_live++].size = size;
	return 0;
}

static int heap_call(struct gen *g, struct thr *t, unsigned live)
{
	unsigned p = pct(g), want_free;
	struct mt_event *e;
	struct block b;
	size_t i;

	want_free = t->nr_live > live ? 70 : t->nr_live < live / 2 ? 30 : 50;
	if (t->nr_live && pct(g) < want_free) {
		i = rnd(g) % t->nr_live;
		b = t->live[i];
		t->live[i] = t->live[--t->nr_live];
		e = emit(g, MT_EV_FREE, t->pid, t->tid);
		e->addr = b.addr;
		return give_addr(t, &b);
	}
	if (p < 5 && t->nr_live) { /* realloc of a live block */
		i = rnd(g) % t->nr_live;
		b = t->live[i];
		e = emit(g, MT_EV_REALLOC, t->pid, t->tid);
		e->old_addr = b.addr;
		e->size = pick_size(g);
		if (pct(g) < 33 && e->size <= b.size) {
			e->addr = b.addr; /* shrunk in place */
		} else {
			e->addr = take_addr(g, t, e->size);
			if (give_addr(t, &b))
				return -ENOMEM;
		}
		t->live[i].addr = e->addr;
		t->live[i].size = e->size;
		return 0;
	}
	e = emit(g,
		 p < 88	  ? MT_EV_MALLOC
		 : p < 93 ? MT_EV_CALLOC
			  : MT_EV_ALIGNED_ALLOC,
		 t->pid, t->tid);
	e->size = pick_size(g);
	e->addr = take_addr(g, t, e->size);
	if (e->type == MT_EV_ALIGNED_ALLOC)
		e->addr = (e->addr + 63) & ~63ull;
	return add_live(t, e->addr, e->size);
}

static void rss_record(struct gen *g, struct thr *t, unsigned proc)
{
	struct mt_event *e = emit(g, MT_EV_RSS, t->pid, t->tid);

	g->anon[proc] += (rnd(g) % 64) * PAGE;
	if (pct(g) < 30 && g->anon[proc] > 256 * PAGE)
		g->anon[proc] -= 128 * PAGE;
	e->aux = MT_RSS_ANON;
	e->size = g->anon[proc];
}

int synth__generate(const struct synth_opts *o, struct mt_event **out)
{
	unsigned np = o->procs ? o->procs : 1, nt = o->threads ? o->threads : 1;
	size_t nthr = (size_t)np * nt, body;
	struct gen g = {.rng = o->seed, .ts = 1000000000ull};
	struct thr *thr;
	int err = -ENOMEM;

	*out = NULL;
	if (o->events < 3 * (size_t)np)
		return -EINVAL;
	body = o->events - 3 * (size_t)np; /* Fork, Exec, Exit per process */
	thr = calloc(nthr, sizeof(*thr));
	g.anon = calloc(np, sizeof(*g.anon));
	g.ev = malloc(o->events * sizeof(*g.ev));
	if (!thr || !g.anon || !g.ev)
		goto cleanup;
	for (size_t k = 0; k < nthr; k++) {
		unsigned proc = (unsigned)(k / nt);

		thr[k].pid = 41000 + (int32_t)proc * 64;
		thr[k].tid = thr[k].pid + (int32_t)(k % nt);
		/* the main thread on the brk heap, the others in their own 64 MiB arenas */
		thr[k].brk = k % nt ? 0x7f0000000000ull + (uint64_t)k * (64ull << 20)
				    : 0x555555559000ull + (uint64_t)proc * (1ull << 32);
		thr[k].mmap_next = 0x7e0000000000ull + (uint64_t)k * (1ull << 36);
	}
	for (unsigned p = 0; p < np; p++) {
		struct mt_event *e = emit(&g, MT_EV_FORK, thr[p * nt].pid, thr[p * nt].pid);

		e->size = 40999;
		emit(&g, MT_EV_EXEC, thr[p * nt].pid, thr[p * nt].pid);
	}
	while (g.nr < 2 * (size_t)np + body) {
		/* the ring holds runs of one thread (one CPU's burst), interleaved */
		size_t k = rnd(&g) % nthr, run = 1 + rnd(&g) % 32;

		for (; run && g.nr < 2 * (size_t)np + body; run--) {
			if (pct(&g) == 0 && rnd(&g) % 5 == 0)
				rss_record(&g, &thr[k], (unsigned)(k / nt));
			else if (heap_call(&g, &thr[k], o->live ? o->live : 1))
				goto cleanup;
		}
	}
	for (unsigned p = 0; p < np; p++)
		emit(&g, MT_EV_EXIT, thr[p * nt].pid, thr[p * nt].pid);
	*out = g.ev;
	g.ev = NULL;
	err = 0;
cleanup:
	for (size_t k = 0; thr && k < nthr; k++) {
		free(thr[k].live);
		for (int c = 0; c < NR_CLASSES; c++)
			free(thr[k].cls[c].addr);
	}
	free(thr);
	free(g.anon);
	free(g.ev);
	return err;
}
