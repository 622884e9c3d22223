// SPDX-License-Identifier: MIT
/* Accounting over synthetic event streams, with hand-computed peaks and leaks. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
/* The accounting itself, with few image ids, so that the path taken when ids run out (after
 * ~4 billion images otherwise) runs here too: every process past the 64th image id execs by
 * purging its old image in place. */
#define HEAP_IMG_MAX 64
#include "acct/blocks.c"
#include "acct/acct.c"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define MiB (1ULL << 20)

static struct mt_event E(uint32_t type, int pid, uint64_t addr, uint64_t size, uint64_t old)
{
	static uint64_t ts;
	struct mt_event e = {.type = type, .pid = pid, .tid = pid, .ts = ++ts, .addr = addr,
			     .size = size, .old_addr = old};
	return e;
}

static struct mt_event R(int pid, uint32_t member, uint64_t bytes)
{
	struct mt_event e = E(MT_EV_RSS, pid, 0, bytes, 0);

	e.aux = member;
	return e;
}

struct run {
	struct heap_acct *a;
	struct manifest m;
	struct heap_stats st;
};

static void run(struct run *r, const struct mt_event *ev, size_t n)
{
	memset(r, 0, sizeof(*r));
	assert_int_equal(heap_acct__new(&r->a), 0);
	for (size_t i = 0; i < n; i++)
		heap_acct__event(r->a, &ev[i]);
	assert_int_equal(heap_acct__fill(r->a, &r->m), 0);
	heap_acct__stats(r->a, &r->st);
	/* the documented invariant, always */
	assert_int_equal(r->m.allocs - r->m.frees,
			 r->m.leaked_count + r->st.lost_at_exec_count + r->st.replaced_allocs);
}

static void done(struct run *r)
{
	free(r->m.procs);
	heap_acct__free(r->a);
}

static const struct manifest_proc *proc(const struct run *r, int pid)
{
	for (uint32_t i = 0; i < r->m.nr_procs; i++)
		if (r->m.procs[i].pid == pid)
			return &r->m.procs[i];
	fail_msg("no process %d", pid);
	return NULL;
}

static void test_malloc_realloc_free(void **state)
{
	struct mt_event ev[] = {
		E(MT_EV_MALLOC, 10, 0x1000, 100, 0),	   /* live 100 */
		E(MT_EV_CALLOC, 10, 0x2000, 200, 0),	   /* 300 */
		E(MT_EV_REALLOC, 10, 0x3000, 1000, 0x1000), /* 1200: moved */
		E(MT_EV_FREE, 10, 0x2000, 0, 0),	   /* 1000 */
		E(MT_EV_ALIGNED_ALLOC, 10, 0x4000, 50, 0), /* 1050 */
		E(MT_EV_FREE, 10, 0x9999, 0, 0),	   /* unknown: unmatched */
		E(MT_EV_EXIT, 10, 0, 0, 0),
	};
	struct run r;

	(void)state;
	run(&r, ev, N(ev));
	assert_int_equal(r.m.peak_heap, 1200);
	assert_int_equal(r.m.leaked_bytes, 1050); /* 0x3000 (1000) and 0x4000 (50) */
	assert_int_equal(r.m.leaked_count, 2);
	assert_int_equal(r.m.allocs, 4);
	assert_int_equal(r.m.allocated_bytes, 100 + 200 + 1000 + 50);
	assert_int_equal(r.m.frees, 2); /* the realloc's old block and 0x2000 */
	assert_int_equal(r.st.unmatched_frees, 1);
	assert_int_equal(r.st.live_bytes, 0); /* exited */
	assert_int_equal(r.m.nr_procs, 1);
	assert_int_equal(r.m.procs[0].pid, 10);
	assert_int_equal(r.m.procs[0].peak_heap, 1200);
	assert_int_equal(r.m.counts[MT_EV_MALLOC], 1);
	assert_int_equal(r.m.counts[MT_EV_FREE], 2);
	assert_int_equal(r.m.events_total, N(ev));
	done(&r);
}

static void test_realloc_variants(void **state)
{
	struct mt_event ev[] = {
		E(MT_EV_REALLOC, 1, 0x100, 64, 0),	/* realloc(NULL, 64): 64 */
		E(MT_EV_REALLOC, 1, 0x100, 32, 0x100),	/* shrink in place: 32 */
		E(MT_EV_REALLOC, 1, 0x100, 96, 0x100),	/* grow in place: 96 */
		E(MT_EV_REALLOC, 1, 0, 1 << 30, 0x100), /* failed: 0x100 stays, 96 */
		E(MT_EV_REALLOC, 1, 0x900, 500, 0x100), /* moved: 500 (peak) */
		E(MT_EV_REALLOC, 1, 0, 0, 0x900),	/* realloc(p, 0) as a Realloc: 0 */
		E(MT_EV_REALLOC, 1, 0xa00, 8, 0x5555),	/* unknown old block: 8 */
		E(MT_EV_MALLOC, 1, 0, 10, 0),		/* failed malloc: nothing */
	};
	struct run r;

	(void)state;
	run(&r, ev, N(ev));
	assert_int_equal(r.m.peak_heap, 500);
	assert_int_equal(r.st.live_bytes, 8);
	assert_int_equal(r.st.live_count, 1);
	assert_int_equal(r.m.allocs, 5);
	assert_int_equal(r.m.allocated_bytes, 64 + 32 + 96 + 500 + 8); /* failures add nothing */
	assert_int_equal(r.m.frees, 4);
	assert_int_equal(r.st.unmatched_frees, 1);
	/* never exited: still live at the end counts as leaked */
	assert_int_equal(r.m.leaked_bytes, 8);
	assert_int_equal(r.m.counts[MT_EV_REALLOC], 7);
	done(&r);
}

static void test_replaced_and_ignored(void **state)
{
	struct mt_event ev[] = {
		E(MT_EV_MALLOC, 1, 0x100, 10, 0),
		E(MT_EV_MALLOC, 1, 0x100, 30, 0), /* its free was lost: replaced */
		E(MT_EV_MMAP, 1, 0x7000, 4096, 0),
		E(MT_EV_BRK, 1, 0x8000, 4096, 0),
		E(MT_EV_CTL_EXEC_STOPPED, 1, 0, 0, 0), /* control: ignored entirely */
		E(MT_EV_NONE, 1, 0x200, 0, 0),
	};
	struct run r;

	(void)state;
	run(&r, ev, N(ev));
	assert_int_equal(r.st.replaced_allocs, 1);
	assert_int_equal(r.st.live_bytes, 30);
	assert_int_equal(r.m.peak_heap, 30);
	assert_int_equal(r.m.events_total, 4);
	assert_int_equal(r.m.counts[MT_EV_MMAP], 1);
	done(&r);
}

static void test_tree_heap_peak_below_sum(void **state)
{
	struct mt_event ev[] = {
		E(MT_EV_MALLOC, 1, 0x1000, 300, 0), /* tree 300 */
		E(MT_EV_FORK, 2, 0, 1, 0),
		E(MT_EV_MALLOC, 1, 0x2000, 200, 0), /* p1 500 (its peak), tree 500 */
		E(MT_EV_FREE, 1, 0x2000, 0, 0),	    /* 300 */
		E(MT_EV_FREE, 1, 0x1000, 0, 0),	    /* 0 */
		E(MT_EV_MALLOC, 2, 0x1000, 400, 0), /* same address, other process: p2 400 */
		E(MT_EV_FREE, 1, 0x1000, 0, 0),	    /* not p1's any more: unmatched */
		E(MT_EV_MALLOC, 1, 0x3000, 50, 0),  /* tree 450 */
		E(MT_EV_EXIT, 2, 0, 0, 0),	    /* p2 leaks 400 */
	};
	struct run r;

	(void)state;
	run(&r, ev, N(ev));
	assert_int_equal(proc(&r, 1)->peak_heap, 500);
	assert_int_equal(proc(&r, 2)->peak_heap, 400);
	assert_int_equal(r.m.peak_heap, 500); /* < 900, the sum of the peaks */
	assert_int_equal(proc(&r, 2)->ppid, 1);
	assert_int_equal(proc(&r, 1)->ppid, 0);
	assert_int_equal(proc(&r, 2)->leaked_bytes, 400);
	assert_int_equal(proc(&r, 1)->leaked_bytes, 50);
	assert_int_equal(r.m.leaked_bytes, 450);
	assert_int_equal(r.st.unmatched_frees, 1);
	assert_int_equal(r.st.live_bytes, 50);
	done(&r);
}

static void test_tree_rss_peak_is_not_sum_of_peaks(void **state)
{
	struct mt_event ev[] = {
		R(1, MT_RSS_ANON, 100 * MiB),
		E(MT_EV_FORK, 2, 0, 1, 0),
		R(1, MT_RSS_ANON, 10 * MiB), /* p1 falls to 10 MiB */
		R(2, MT_RSS_ANON, 50 * MiB), /* p2 rises to 50: tree 60 */
		E(MT_EV_EXIT, 2, 0, 0, 0),
	};
	struct run r;

	(void)state;
	run(&r, ev, N(ev));
	/* peaks 100 and 50 MiB at different times: the tree never held 150 */
	assert_int_equal(r.m.peak_rss, 100 * MiB);
	assert_int_equal(proc(&r, 2)->peak_rss, 50 * MiB);
	assert_int_equal(proc(&r, 1)->peak_rss, 100 * MiB);
	assert_int_equal(r.st.rss, 10 * MiB); /* p2 gone */
	done(&r);
}

static void test_rss_members(void **state)
{
	struct mt_event ev[] = {
		R(1, MT_RSS_FILE, 4 * MiB),  /* 4 */
		R(1, MT_RSS_ANON, 10 * MiB), /* 14 */
		R(1, MT_RSS_SHMEM, 2 * MiB), /* 16 */
		R(1, MT_RSS_SWAP, 64 * MiB), /* swap: not resident, 16 */
		R(1, MT_RSS_ANON, 6 * MiB),  /* absolute, not a delta: 12 */
		R(1, MT_RSS_FILE, 8 * MiB),  /* 16 */
		R(1, MT_RSS_ANON, 9 * MiB),  /* 19: peak */
		R(1, MT_RSS_NR, 1 << 30),    /* bad member: ignored */
	};
	struct run r;

	(void)state;
	run(&r, ev, N(ev));
	assert_int_equal(r.m.peak_rss, 19 * MiB);
	assert_int_equal(r.st.rss, 19 * MiB);
	assert_int_equal(r.m.procs[0].peak_rss, 19 * MiB);
	done(&r);
}

static void test_exit_resets_and_pid_reuse(void **state)
{
	struct mt_event ev[] = {
		R(5, MT_RSS_ANON, 30 * MiB),
		E(MT_EV_FORK, 6, 0, 5, 0),
		R(6, MT_RSS_ANON, 20 * MiB), /* tree 50 */
		E(MT_EV_MALLOC, 6, 0x10, 100, 0),
		E(MT_EV_EXIT, 6, 0, 0, 0),   /* tree 30 */
		R(6, MT_RSS_ANON, 5 * MiB),  /* teardown noise after exit: ignored */
		R(5, MT_RSS_ANON, 40 * MiB), /* tree 40 */
		E(MT_EV_FORK, 6, 0, 5, 0),   /* pid 6 again: a new process */
		E(MT_EV_FREE, 6, 0x10, 0, 0), /* not the old 6's block */
		R(6, MT_RSS_ANON, 15 * MiB), /* tree 55: peak */
	};
	struct run r;
	int sixes = 0;

	(void)state;
	run(&r, ev, N(ev));
	assert_int_equal(r.m.peak_rss, 55 * MiB);
	assert_int_equal(r.st.rss, 55 * MiB);
	assert_int_equal(r.st.ignored_after_exit, 1);
	assert_int_equal(r.st.unmatched_frees, 1);
	assert_int_equal(r.m.nr_procs, 3);
	for (uint32_t i = 0; i < r.m.nr_procs; i++) {
		const struct manifest_proc *p = &r.m.procs[i];

		if (p->pid != 6)
			continue;
		assert_int_equal(p->ppid, 5);
		if (sixes++ == 0) {
			assert_int_equal(p->peak_rss, 20 * MiB);
			assert_int_equal(p->leaked_bytes, 100);
		} else {
			assert_int_equal(p->peak_rss, 15 * MiB);
			assert_int_equal(p->leaked_bytes, 0);
		}
	}
	assert_int_equal(sixes, 2);
	assert_int_equal(r.m.leaked_bytes, 100);
	done(&r);
}

static void test_exec(void **state)
{
	struct mt_event ev[] = {
		E(MT_EV_MALLOC, 3, 0x100, 1000, 0), /* shell's blocks */
		E(MT_EV_MALLOC, 3, 0x200, 24, 0),
		E(MT_EV_FREE, 3, 0x200, 0, 0),
		R(3, MT_RSS_ANON, 8 * MiB),
		E(MT_EV_EXEC, 3, 0, 0, 0),	  /* 1000 bytes gone with the image; RSS reset */
		R(3, MT_RSS_ANON, 1 * MiB),	  /* the new image's seed */
		E(MT_EV_FREE, 3, 0x100, 0, 0),	  /* the old image's address: unmatched */
		E(MT_EV_MALLOC, 3, 0x100, 10, 0), /* same address, new image: fine */
		E(MT_EV_MALLOC, 3, 0x300, 20, 0),
		E(MT_EV_FREE, 3, 0x300, 0, 0),
		E(MT_EV_EXIT, 3, 0, 0, 0), /* leaks 10, not 1010 */
	};
	struct run r;
	uint64_t lost_bytes, lost_count;

	(void)state;
	run(&r, ev, N(ev));
	assert_int_equal(r.st.lost_at_exec_bytes, 1000);
	assert_int_equal(r.st.lost_at_exec_count, 1);
	assert_int_equal(r.m.leaked_bytes, 10);
	assert_int_equal(r.m.leaked_count, 1);
	assert_int_equal(r.m.frees, 2); /* lost blocks are no frees */
	assert_int_equal(r.m.allocs, 4);
	assert_int_equal(r.st.unmatched_frees, 1);
	assert_int_equal(r.m.peak_heap, 1024);
	assert_int_equal(r.m.peak_rss, 8 * MiB);
	assert_int_equal(r.m.procs[0].execs, 1);
	assert_int_equal(heap_acct__proc_lost(r.a, 0, &lost_bytes, &lost_count), 0);
	assert_int_equal(lost_bytes, 1000);
	assert_int_equal(heap_acct__proc_lost(r.a, 1, &lost_bytes, &lost_count), -ENOENT);
	done(&r);
}

static void test_fill_twice(void **state)
{
	struct mt_event ev[] = {
		E(MT_EV_MALLOC, 1, 0x100, 10, 0),
		E(MT_EV_FORK, 2, 0, 1, 0),
	};
	struct run r;

	(void)state;
	run(&r, ev, N(ev));
	/* a second fill replaces procs[] (the first is released, ASan/valgrind would tell) */
	assert_int_equal(heap_acct__fill(r.a, &r.m), 0);
	assert_int_equal(r.m.nr_procs, 2);
	assert_int_equal(r.m.leaked_bytes, 10);
	done(&r);
}

static void test_many_live_blocks(void **state)
{
	struct heap_acct *a;
	struct manifest m = {0};
	struct heap_stats st;
	const uint64_t n = 1000000;

	(void)state;
	assert_int_equal(heap_acct__new(&a), 0);
	for (uint64_t i = 0; i < n; i++) {
		struct mt_event e = E(MT_EV_MALLOC, 7, 0x10000 + i * 16, 16, 0);

		heap_acct__event(a, &e);
	}
	for (uint64_t i = 0; i < n; i += 2) {
		struct mt_event e = E(MT_EV_FREE, 7, 0x10000 + i * 16, 0, 0);

		heap_acct__event(a, &e);
	}
	assert_int_equal(heap_acct__fill(a, &m), 0);
	assert_int_equal(m.peak_heap, n * 16);
	assert_int_equal(m.leaked_count, n / 2);
	assert_int_equal(m.frees, n / 2);
	/* every remaining block is still found after the table grew many times */
	for (uint64_t i = 1; i < n; i += 2) {
		struct mt_event e = E(MT_EV_FREE, 7, 0x10000 + i * 16, 0, 0);

		heap_acct__event(a, &e);
	}
	heap_acct__stats(a, &st);
	assert_int_equal(st.unmatched_frees, 0);
	assert_int_equal(st.live_count, 0);
	assert_int_equal(st.nomem, 0);
	free(m.procs);
	heap_acct__free(a);
}

/* Dead slots of exec'd images are purged at rehash, and never match the new image. */
static void test_exec_purge_at_growth(void **state)
{
	struct heap_acct *a;
	struct heap_stats st;
	const uint64_t n = 200000;

	(void)state;
	assert_int_equal(heap_acct__new(&a), 0);
	for (int round = 0; round < 5; round++) {
		struct mt_event x = E(MT_EV_EXEC, 9, 0, 0, 0);

		for (uint64_t i = 0; i < n; i++) {
			struct mt_event e = E(MT_EV_MALLOC, 9, 0x10000 + i * 32, 32, 0);

			heap_acct__event(a, &e);
		}
		heap_acct__event(a, &x);
	}
	for (uint64_t i = 0; i < n; i++) {
		struct mt_event e = E(MT_EV_MALLOC, 9, 0x10000 + i * 32, 8, 0);

		heap_acct__event(a, &e);
	}
	heap_acct__stats(a, &st);
	assert_int_equal(st.lost_at_exec_count, 5 * n);
	assert_int_equal(st.live_count, n);
	assert_int_equal(st.live_bytes, n * 8);
	assert_int_equal(st.replaced_allocs, 0);
	heap_acct__free(a);
}

#define GiB (1ULL << 30)

/* Sizes of 4 GiB and more do not fit a slot: they take the side path, exactly. */
static void test_big_blocks(void **state)
{
	struct mt_event ev[] = {
		E(MT_EV_MALLOC, 1, 0x1000, 5 * GiB, 0),
		E(MT_EV_MALLOC, 1, 0x2000, 0xffffffffULL, 0), /* the marker value itself */
		E(MT_EV_MALLOC, 1, 0x3000, 0xfffffffeULL, 0), /* the biggest in-slot size */
		E(MT_EV_REALLOC, 1, 0x4000, 9 * GiB, 0x1000),
		E(MT_EV_MALLOC, 1, 0x2000, 7 * GiB, 0), /* replaces a big block by a big one */
		E(MT_EV_FREE, 1, 0x3000, 0, 0),
		E(MT_EV_FORK, 2, 0, 1, 0),
		E(MT_EV_MALLOC, 2, 0x4000, 6 * GiB, 0), /* same address, other process */
		E(MT_EV_FREE, 1, 0x2000, 0, 0),
		E(MT_EV_EXEC, 2, 0, 0, 0), /* a big block in a dead slot */
		E(MT_EV_MALLOC, 2, 0x4000, 3 * GiB, 0),
		E(MT_EV_FREE, 2, 0x4000, 0, 0),
		E(MT_EV_FREE, 2, 0x4000, 0, 0), /* unmatched: the dead image's block is gone */
	};
	struct run r;

	(void)state;
	run(&r, ev, N(ev));
	assert_int_equal(r.m.peak_heap, 9 * GiB + 7 * GiB + 6 * GiB);
	assert_int_equal(proc(&r, 1)->peak_heap, 9 * GiB + 7 * GiB + 0xfffffffeULL);
	assert_int_equal(proc(&r, 1)->leaked_bytes, 9 * GiB);
	assert_int_equal(r.st.lost_at_exec_bytes, 6 * GiB);
	assert_int_equal(r.st.live_bytes, 9 * GiB);
	assert_int_equal(r.st.replaced_allocs, 1);
	assert_int_equal(r.st.unmatched_frees, 1);
	assert_int_equal(r.a->blocks.nr_big, 2); /* 9 GiB live, 6 GiB in a dead slot */
	done(&r);
}

/* Past the last image id, exec deletes the old image's blocks at once: nothing of an earlier
 * image may be found again, whatever address the new image reuses. */
static void test_image_ids_run_out(void **state)
{
	struct heap_acct *a;
	struct heap_stats st;
	const int images = 3 * HEAP_IMG_MAX;

	(void)state;
	assert_int_equal(heap_acct__new(&a), 0);
	for (int i = 0; i < images; i++) {
		struct mt_event x = E(MT_EV_EXEC, 5, 0, 0, 0);
		/* the previous image's block at 0x100 is dead: a free here is unmatched */
		struct mt_event f = E(MT_EV_FREE, 5, 0x100, 0, 0);

		heap_acct__event(a, &f);
		for (uint64_t k = 0; k < 3000; k++) {
			struct mt_event e = E(MT_EV_MALLOC, 5, 0x100 + k * 16, 16 + (uint64_t)i, 0);

			heap_acct__event(a, &e);
		}
		if (i % 7 == 0) {
			struct mt_event b = E(MT_EV_MALLOC, 5, 0x8000000, 5 * GiB, 0);

			heap_acct__event(a, &b);
		}
		heap_acct__event(a, &x);
	}
	heap_acct__stats(a, &st);
	assert_int_equal(a->nr_imgs, HEAP_IMG_MAX);
	assert_int_equal(st.unmatched_frees, images);
	assert_int_equal(st.replaced_allocs, 0);
	assert_int_equal(st.live_count, 0);
	assert_int_equal(st.live_bytes, 0);
	assert_int_equal(st.lost_at_exec_count, 3000ULL * images + (images + 6) / 7);
	assert_int_equal(st.nomem, 0);
	assert_int_equal(a->blocks.nr_big, 0);
	assert_true(a->blocks.used <= 3001); /* the purged slots are gone, not dead */
	heap_acct__free(a);
}

static uint64_t rnd_state = 42;

static uint64_t rnd(void)
{
	uint64_t z = (rnd_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#define MODEL_PIDS 4
#define MODEL_ADDRS 12000

/*
 * Random streams of allocations, frees, reallocs, execs, exits and pid reuse over four pids that
 * share their addresses, big sizes included, fed in batches (the prefetching path: the table
 * outgrows PREFETCH_MIN_BYTES and grows with dead slots in it, and image ids run out on the
 * way). A plain array per pid is the reference; every figure must match at every batch end.
 */
static void test_against_model(void **state)
{
	static uint64_t size[MODEL_PIDS][MODEL_ADDRS]; /* 0: not live */
	static struct mt_event ev[1000];
	uint64_t live = 0, count = 0, peak = 0, unmatched = 0, replaced = 0, lost = 0;
	uint64_t allocs = 0, frees = 0, allocated = 0;
	size_t max_cap = 0;
	struct heap_acct *a;
	struct heap_stats st;

	(void)state;
	memset(size, 0, sizeof(size));
	assert_int_equal(heap_acct__new(&a), 0);
	for (int batch = 0; batch < 800; batch++) {
		for (size_t i = 0; i < N(ev); i++) {
			int p = (int)(rnd() % MODEL_PIDS), pid = 300 + p;
			uint64_t k = rnd() % MODEL_ADDRS, r = rnd() % 1000, sz;
			uint64_t addr = 0x10000 + k * 16;

			sz = rnd() % 50 ? 1 + rnd() % 4096 : 0xffffffffULL + rnd() % 3;
			/* exec, or (while image ids last: a new process needs one) exit then reuse */
			if ((r < 2 && !(rnd() % 8)) || (r == 2 && batch < 10)) {
				bool exec = r < 2;

				for (uint64_t j = 0; j < MODEL_ADDRS; j++) {
					if (!size[p][j])
						continue;
					lost += exec ? size[p][j] : 0;
					live -= size[p][j];
					count--;
					size[p][j] = 0;
				}
				ev[i] = E(exec ? MT_EV_EXEC : MT_EV_EXIT, pid, 0, 0, 0);
				if (!exec && i + 1 < N(ev))
					ev[++i] = E(MT_EV_FORK, pid, 0, 1, 0);
				continue;
			}
			if (r < 530) { /* free k, or realloc k2 -> k */
				uint64_t k2 = r < 480 ? k : rnd() % MODEL_ADDRS;

				ev[i] = r < 480 ? E(MT_EV_FREE, pid, addr, 0, 0)
						: E(MT_EV_REALLOC, pid, addr, sz, 0x10000 + k2 * 16);
				if (size[p][k2]) {
					live -= size[p][k2];
					count--;
					frees++;
					size[p][k2] = 0;
				} else {
					unmatched++;
				}
				if (r < 480)
					continue;
			} else {
				ev[i] = E(MT_EV_MALLOC, pid, addr, sz, 0);
			}
			if (size[p][k]) {
				live -= size[p][k];
				count--;
				replaced++;
			}
			size[p][k] = sz;
			live += sz;
			count++;
			allocs++;
			allocated += sz;
			if (live > peak)
				peak = live;
		}
		heap_acct__events(a, ev, N(ev));
		heap_acct__stats(a, &st);
		if (a->blocks.cap > max_cap)
			max_cap = a->blocks.cap;
		assert_int_equal(st.live_bytes, live);
		assert_int_equal(st.live_count, count);
		assert_int_equal(st.unmatched_frees, unmatched);
		assert_int_equal(st.replaced_allocs, replaced);
		assert_int_equal(st.lost_at_exec_bytes, lost);
		assert_int_equal(st.nomem, 0);
		assert_int_equal(a->peak_heap, peak);
		assert_int_equal(a->allocs, allocs);
		assert_int_equal(a->allocated, allocated);
		assert_int_equal(a->frees, frees);
	}
	assert_int_equal(a->nr_imgs, HEAP_IMG_MAX); /* the fallback ran */
	assert_true(max_cap * sizeof(struct block_slot) >= PREFETCH_MIN_BYTES);
	heap_acct__free(a);
}

/* Names go to the pid's current process only, as printable ASCII (the manifest is JSON). */
static void test_comm(void **state)
{
	struct heap_acct *a;
	struct manifest m = {0};
	struct mt_event ev[] = {
		E(MT_EV_EXEC, 10, 0, 0, 0), E(MT_EV_FORK, 11, 0, 10, 0), E(MT_EV_EXIT, 11, 0, 0, 0),
		E(MT_EV_FORK, 11, 0, 10, 0), /* pid 11 again */
	};
	char odd[16] = "caf\xc3\xa9\tx", sh[16] = "sh", first[16] = "first", nobody[16] = "nobody";

	(void)state;
	assert_int_equal(heap_acct__new(&a), 0);
	heap_acct__events(a, ev, 2);
	heap_acct__set_comm(a, 10, sh);
	heap_acct__set_comm(a, 11, first);
	heap_acct__set_comm(a, 12, nobody); /* no such process: ignored */
	heap_acct__events(a, ev + 2, 2);
	heap_acct__set_comm(a, 11, odd);
	assert_int_equal(heap_acct__fill(a, &m), 0);
	assert_int_equal(m.nr_procs, 3);
	assert_string_equal(m.procs[0].comm, "sh");
	assert_string_equal(m.procs[1].comm, "first");
	assert_string_equal(m.procs[2].comm, "caf???x");
	free(m.procs);
	heap_acct__free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_malloc_realloc_free),
		cmocka_unit_test(test_realloc_variants),
		cmocka_unit_test(test_replaced_and_ignored),
		cmocka_unit_test(test_tree_heap_peak_below_sum),
		cmocka_unit_test(test_tree_rss_peak_is_not_sum_of_peaks),
		cmocka_unit_test(test_rss_members),
		cmocka_unit_test(test_exit_resets_and_pid_reuse),
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_fill_twice),
		cmocka_unit_test(test_many_live_blocks),
		cmocka_unit_test(test_exec_purge_at_growth),
		cmocka_unit_test(test_big_blocks),
		cmocka_unit_test(test_image_ids_run_out),
		cmocka_unit_test(test_against_model),
		cmocka_unit_test(test_comm),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
