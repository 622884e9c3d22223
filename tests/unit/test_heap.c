// SPDX-License-Identifier: MIT
/* Accounting over synthetic event streams, with hand-computed peaks and leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "report/heap.h"

static struct mt_event E(uint32_t type, int pid, uint64_t addr, uint64_t size, uint64_t old)
{
	static uint64_t ts;
	struct mt_event e = {.type = type, .pid = pid, .tid = pid, .ts = ++ts, .addr = addr,
			     .size = size, .old_addr = old};
	return e;
}

static void feed(struct heap_acct *a, const struct mt_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++)
		heap_acct__event(a, &ev[i]);
}

static void test_malloc_realloc_free(void **state)
{
	struct mt_event ev[] = {
		E(MT_EV_MALLOC, 10, 0x1000, 100, 0),	 /* live 100 */
		E(MT_EV_CALLOC, 10, 0x2000, 200, 0),	 /* 300 */
		E(MT_EV_REALLOC, 10, 0x3000, 1000, 0x1000), /* 1200: moved */
		E(MT_EV_FREE, 10, 0x2000, 0, 0),	 /* 1000 */
		E(MT_EV_ALIGNED_ALLOC, 10, 0x4000, 50, 0), /* 1050 */
		E(MT_EV_FREE, 10, 0x9999, 0, 0),	 /* unknown: unmatched */
		E(MT_EV_EXIT, 10, 0, 0, 0),
	};
	struct heap_acct *a;
	struct manifest m = {0};
	struct heap_stats st;

	(void)state;
	assert_int_equal(heap_acct__new(&a), 0);
	feed(a, ev, sizeof(ev) / sizeof(ev[0]));
	assert_int_equal(heap_acct__fill(a, &m), 0);
	heap_acct__stats(a, &st);
	assert_int_equal(m.peak_heap, 1200);
	assert_int_equal(m.leaked_bytes, 1050); /* 0x3000 (1000) and 0x4000 (50) */
	assert_int_equal(m.leaked_count, 2);
	assert_int_equal(st.unmatched_frees, 1);
	assert_int_equal(m.nr_procs, 1);
	assert_int_equal(m.procs[0].pid, 10);
	free(m.procs);
	heap_acct__free(a);
}

static void test_tree_rss_peak_is_not_sum_of_peaks(void **state)
{
	struct mt_event ev[] = {
		E(MT_EV_RSS, 1, 0, 100 << 20, 0), /* p1 anon? member set below */
		E(MT_EV_FORK, 2, 0, 1, 0),
		E(MT_EV_RSS, 1, 0, 10 << 20, 0), /* p1 falls to 10 MiB */
		E(MT_EV_RSS, 2, 0, 50 << 20, 0), /* p2 rises to 50: tree 60 */
		E(MT_EV_EXIT, 2, 0, 0, 0),
	};
	struct heap_acct *a;
	struct manifest m = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		ev[i].aux = MT_RSS_ANON;
	assert_int_equal(heap_acct__new(&a), 0);
	feed(a, ev, sizeof(ev) / sizeof(ev[0]));
	assert_int_equal(heap_acct__fill(a, &m), 0);
	/* peaks 100 and 50 MiB at different times: the tree never held 150 */
	assert_int_equal(m.peak_rss, 100 << 20);
	assert_int_equal(m.nr_procs, 2);
	for (uint32_t i = 0; i < m.nr_procs; i++) {
		if (m.procs[i].pid == 2) {
			assert_int_equal(m.procs[i].ppid, 1);
			assert_int_equal(m.procs[i].peak_rss, 50 << 20);
		} else {
			assert_int_equal(m.procs[i].peak_rss, 100 << 20);
		}
	}
	free(m.procs);
	heap_acct__free(a);
}

static void test_swap_is_not_resident(void **state)
{
	struct mt_event ev[] = {
		E(MT_EV_RSS, 1, 0, 4096, 0),
		E(MT_EV_RSS, 1, 0, 1 << 20, 0),
	};
	struct heap_acct *a;
	struct manifest m = {0};

	(void)state;
	ev[0].aux = MT_RSS_FILE;
	ev[1].aux = MT_RSS_SWAP;
	assert_int_equal(heap_acct__new(&a), 0);
	feed(a, ev, 2);
	assert_int_equal(heap_acct__fill(a, &m), 0);
	assert_int_equal(m.peak_rss, 4096);
	free(m.procs);
	heap_acct__free(a);
}

static void test_many_live_blocks(void **state)
{
	struct heap_acct *a;
	struct manifest m = {0};
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
	free(m.procs);
	heap_acct__free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_malloc_realloc_free),
		cmocka_unit_test(test_tree_rss_peak_is_not_sum_of_peaks),
		cmocka_unit_test(test_swap_is_not_resident),
		cmocka_unit_test(test_many_live_blocks),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
