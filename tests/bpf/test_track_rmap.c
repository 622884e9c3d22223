// SPDX-License-Identifier: MIT
/*
 * Root tests: --rmap (page events). build/targets/rss_touch maps 64 MiB, touches every page,
 * then unmaps it (THP disabled for it: "nothp"; Debian's kernels have THP "always", where one
 * fault would map 512 pages in one record): exactly its 16384 pages are added inside the
 * mapping (one record per fault)
 * and removed inside it by the munmap, and the run satisfies the Rmap/Rss invariant.
 * The per-operation scenarios are in test_track_rmap_ops.c and test_track_rmap_edges.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_rmap_check.h"

static void test_rmap_touch_and_unmap(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *t;
	struct mt_rmap_sel s = {.member = MT_RSS_ANON};
	int64_t up, down;
	size_t n_up, n_down;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rss_touch", "64", "nothp"));
	t = mt_need_expect(r, "touch", 0, 0);
	s.pid = r->root_pid;
	s.lo = t->addr;
	s.hi = t->addr + t->size;
	s.sign = 1;
	up = mt_rmap_sum(r, &s, &n_up);
	s.sign = -1;
	down = mt_rmap_sum(r, &s, &n_down);
	MT_CHECK(r, up == mt_pages(t) && n_up == (size_t)mt_pages(t),
		 "anon adds inside the mapping: %lld pages in %zu records, want %lld in as many",
		 (long long)up, n_up, (long long)mt_pages(t));
	MT_CHECK(r, down == -mt_pages(t), "anon removes inside the mapping: %lld pages, want %lld",
		 (long long)down, (long long)-mt_pages(t));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_rmap_touch_and_unmap, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
