// SPDX-License-Identifier: MIT
/*
 * heap_acct__events (the tracker's batches: runs of one process' heap records with their figures
 * in locals, malloc/free pairs in one lookup) against heap_acct__event one record at a time:
 * every figure of the manifest and of heap_stats must be the same, over hand-made streams and
 * random ones with the cases a run has to leave to the generic path or get right itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "acct/acct.h"
#include "artifact/manifest.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct result {
	struct manifest m;
	struct heap_stats st;
};

/* batch 0: one record at a time (heap_acct__event); else heap_acct__events over batches of 1 to
 * batch records, their sizes drawn from seed */
static void feed(struct result *r, const struct mt_event *ev, size_t n, size_t batch,
		 unsigned seed)
{
	struct heap_acct *a;

	memset(r, 0, sizeof(*r));
	assert_int_equal(heap_acct__new(&a), 0);
	srandom(seed);
	for (size_t i = 0; i < n;) {
		size_t k = batch ? 1 + (size_t)random() % batch : 1;

		if (k > n - i)
			k = n - i;
		if (batch)
			heap_acct__events(a, ev + i, k);
		else
			heap_acct__event(a, ev + i);
		i += k;
	}
	assert_int_equal(heap_acct__fill(a, &r->m), 0);
	heap_acct__stats(a, &r->st);
	heap_acct__free(a);
}

static void assert_same(const struct result *x, const struct result *y)
{
	const struct manifest *a = &x->m, *b = &y->m;

	assert_int_equal(a->peak_heap, b->peak_heap);
	assert_int_equal(a->peak_rss, b->peak_rss);
	assert_int_equal(a->allocs, b->allocs);
	assert_int_equal(a->frees, b->frees);
	assert_int_equal(a->allocated_bytes, b->allocated_bytes);
	assert_int_equal(a->leaked_bytes, b->leaked_bytes);
	assert_int_equal(a->leaked_count, b->leaked_count);
	assert_int_equal(a->events_total, b->events_total);
	assert_memory_equal(a->counts, b->counts, sizeof(a->counts));
	assert_int_equal(a->nr_procs, b->nr_procs);
	if (a->nr_procs)
		assert_memory_equal(a->procs, b->procs, a->nr_procs * sizeof(*a->procs));
	assert_int_equal(a->window.present, b->window.present);
	assert_int_equal(a->window.peak_heap, b->window.peak_heap);
	assert_int_equal(a->window.allocs, b->window.allocs);
	assert_int_equal(a->window.allocated_bytes, b->window.allocated_bytes);
	assert_int_equal(a->window.frees, b->window.frees);
	assert_int_equal(a->window.live_bytes, b->window.live_bytes);
	assert_int_equal(a->window.live_count, b->window.live_count);
	assert_int_equal(a->window.duration_ns, b->window.duration_ns);
	assert_int_equal(a->nr_markers, b->nr_markers);
	for (uint32_t i = 0; i < a->nr_markers; i++) {
		assert_int_equal(a->markers[i].heap, b->markers[i].heap);
		assert_int_equal(a->markers[i].window_heap, b->markers[i].window_heap);
	}
	assert_memory_equal(&x->st, &y->st, sizeof(x->st));
}

static uint64_t ts;

static struct mt_event E(uint32_t type, int pid, uint64_t addr, uint64_t size, uint64_t old)
{
	return (struct mt_event){.type = type, .pid = pid, .tid = pid, .ts = ++ts, .addr = addr,
				 .size = size, .old_addr = old};
}

/* The pair cases by hand: a pair over a live block replaces it; the figures are exact. */
static void test_pairs_by_hand(void **state)
{
	const struct mt_event ev[] = {
		E(MT_EV_MALLOC, 1, 0x10, 100, 0),
		E(MT_EV_MALLOC, 1, 0x20, 8, 0),	 E(MT_EV_FREE, 1, 0x20, 0, 0),
		E(MT_EV_MALLOC, 1, 0x10, 40, 0), E(MT_EV_FREE, 1, 0x10, 0, 0), /* replaces 100 */
		E(MT_EV_FREE, 1, 0x10, 0, 0),					 /* unmatched */
		E(MT_EV_CALLOC, 1, 0x30, 1000, 0), E(MT_EV_FREE, 1, 0x30, 0, 0),
		E(MT_EV_MALLOC, 1, 0, 5, 0),	 E(MT_EV_FREE, 1, 0, 0, 0), /* failed, free(NULL) */
		E(MT_EV_MALLOC, 1, 0x40, 7, 0),	 E(MT_EV_FREE, 2, 0x40, 0, 0), /* other process */
	};
	struct result one, batch;

	(void)state;
	feed(&one, ev, N(ev), 0, 0);
	feed(&batch, ev, N(ev), N(ev), 1);
	assert_same(&one, &batch);
	assert_int_equal(batch.m.allocs, 5); /* the failed malloc is counted by type only */
	assert_int_equal(batch.m.frees, 3);
	assert_int_equal(batch.st.replaced_allocs, 1);
	assert_int_equal(batch.st.unmatched_frees, 2);
	assert_int_equal(batch.m.allocated_bytes, 100 + 8 + 40 + 1000 + 7);
	assert_int_equal(batch.m.peak_heap, 1000);
	assert_int_equal(batch.m.leaked_bytes, 7);
	assert_int_equal(batch.m.counts[MT_EV_MALLOC], 5);
	assert_int_equal(batch.m.counts[MT_EV_FREE], 6);
	manifest__free(&one.m);
	manifest__free(&batch.m);
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * A random stream: runs of one process, malloc/free pairs, addresses from a small pool (replaced
 * blocks, unmatched frees) or a large one that stays live (tens of thousands of blocks: the table
 * grows past the size where batches prefetch), every Realloc variant, failed calls, sizes past
 * 32 bits, Fork, Exec, Exit (and pid reuse after it), Rss, Mmap, and windows opened and closed.
 */
static size_t make_stream(struct mt_event *ev, size_t cap, uint64_t seed)
{
	uint64_t s = seed | 1;
	int pid = 1;
	size_t n = 0;

	while (n + 2 < cap) {
		uint64_t r = rnd(&s), pick = r % 1000;
		uint64_t addr = (r >> 10) % 4 == 0 ? 0x100000 + ((r >> 20) % 40000) * 16 :
						       0x1000 + ((r >> 20) % 64) * 16;
		uint64_t size = (r >> 40) % 200 == 0 ? (1ULL << 32) + (r >> 48) : 1 + (r >> 44) % 512;

		if (pick < 8)
			pid = 1 + (int)(rnd(&s) % 4);
		if (pick < 350) {
			ev[n++] = E(MT_EV_MALLOC + (uint32_t)(r >> 8) % 2 * 3, pid, addr, size, 0);
			ev[n++] = E(MT_EV_FREE, pid, (r >> 30) % 50 ? addr : addr + 16, 0, 0);
		} else if (pick < 700) {
			ev[n++] = E(MT_EV_MALLOC + (uint32_t)(r >> 8) % 2, pid, (r >> 31) % 30 ? addr : 0,
				    size, 0);
		} else if (pick < 900) {
			ev[n++] = E(MT_EV_FREE, pid, (r >> 31) % 30 ? addr : 0, 0, 0);
		} else if (pick < 980) {
			uint64_t old = 0x1000 + (rnd(&s) % 64) * 16;

			switch ((r >> 8) % 4) {
			case 0: ev[n++] = E(MT_EV_REALLOC, pid, addr, size, old); break;
			case 1: ev[n++] = E(MT_EV_REALLOC, pid, addr, size, 0); break;
			case 2: ev[n++] = E(MT_EV_REALLOC, pid, 0, 0, old); break;
			default: ev[n++] = E(MT_EV_REALLOC, pid, 0, size, old); break;
			}
		} else if (pick < 985) {
			ev[n] = E(MT_EV_RSS, pid, 0, size * 4096, 0);
			ev[n++].aux = (uint32_t)(r >> 8) % 4;
		} else if (pick < 988) {
			ev[n++] = E(MT_EV_MMAP, pid, addr, size, 0);
		} else if (pick < 992) {
			ev[n] = E(MT_EV_MARKER, pid, 0, 0, 0);
			ev[n++].aux = (r >> 8) % 2 ? MT_MARK_START : MT_MARK_STOP;
		} else if (pick < 995) {
			int child = 1 + (int)(rnd(&s) % 4);

			ev[n++] = E(MT_EV_FORK, child, 0, (uint64_t)pid, 0);
		} else if (pick < 998) {
			ev[n++] = E(MT_EV_EXEC, pid, 0, 0, 0);
		} else {
			ev[n++] = E(MT_EV_EXIT, pid, 0, 0, 0);
		}
	}
	return n;
}

static void test_random_streams(void **state)
{
	const size_t cap = 400000;
	struct mt_event *ev = malloc(cap * sizeof(*ev));

	(void)state;
	assert_non_null(ev);
	for (uint64_t seed = 1; seed <= 6; seed++) {
		size_t n = make_stream(ev, seed % 2 ? cap : cap / 20, seed * 0x9e3779b97f4a7c15ULL);
		struct result one, batch;

		feed(&one, ev, n, 0, 0);
		assert_true(one.st.replaced_allocs > 0 && one.st.unmatched_frees > 0);
		assert_true(one.m.window.present && one.st.lost_at_exec_count > 0);
		for (size_t b = 1; b <= 4096; b *= 8) {
			feed(&batch, ev, n, b, (unsigned)(seed * 31 + b));
			assert_same(&one, &batch);
			manifest__free(&batch.m);
		}
		manifest__free(&one.m);
	}
	free(ev);
}

/* The storm: a single process' pairs, with a few blocks kept live in between. */
static void test_storm(void **state)
{
	const size_t cap = 200000;
	struct mt_event *ev = malloc(cap * sizeof(*ev));
	struct result one, batch;
	size_t n = 0;

	(void)state;
	assert_non_null(ev);
	ev[n++] = E(MT_EV_FORK, 7, 0, 1, 0);
	for (uint64_t i = 0; n + 3 < cap; i++) {
		ev[n++] = E(MT_EV_MALLOC, 7, 0x5000 + i % 5 * 16, 16 + i % 64, 0);
		ev[n++] = E(MT_EV_FREE, 7, 0x5000 + i % 5 * 16, 0, 0);
		if (i % 1000 == 0)
			ev[n++] = E(MT_EV_MALLOC, 7, 0x900000 + i * 16, 1 << 20, 0);
	}
	feed(&one, ev, n, 0, 0);
	feed(&batch, ev, n, 5461, 3);
	assert_same(&one, &batch);
	assert_int_equal(batch.m.peak_heap, batch.m.leaked_bytes + 16 + 63);
	assert_int_equal(batch.st.replaced_allocs, 0);
	assert_int_equal(batch.st.unmatched_frees, 0);
	manifest__free(&one.m);
	manifest__free(&batch.m);
	free(ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pairs_by_hand),
		cmocka_unit_test(test_random_streams),
		cmocka_unit_test(test_storm),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
