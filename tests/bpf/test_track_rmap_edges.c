// SPDX-License-Identifier: MIT
/*
 * Root tests of rmap mode where pages change without a user page fault (build/targets/rmap_ops
 * readbuf|populate|shrink|exec): kernel-mode faults of read(2), MAP_POPULATE,
 * MADV_POPULATE_WRITE, mlock, mremap shrinking in place, brk lowered, exec re-basing.
 * The rule for every backend: an address is the page's or 0 (unknown), never another page's.
 * Where the tracepoint backend cannot know it (MAP_POPULATE: the range is the syscall's
 * result) 0 is accepted under "tracepoint" only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_rmap_check.h"

/* read(2) into a fresh buffer: copy_to_user faults the pages in from kernel mode. */
static void test_rmap_read_into_fresh_buffer(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *b, *e;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "readbuf", mt_disk_dir()));
	b = mt_need_expect(r, "readbuf_begin", 0, 0);
	e = mt_need_expect(r, "readbuf", 0, 0);
	mt_rmap_want(r, "read(2): anon adds", r->root_pid, MT_RSS_ANON, 1, b->ts, e->ts, e->addr,
		     e->addr + e->size, mt_pages(e));
}

/* Pages mapped by the kernel without any fault. */
static void test_rmap_populate(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *pb, *p, *mb, *m, *lb, *l;
	bool exact;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "populate"));
	exact = mt_rmap_exact(r);
	pb = mt_need_expect(r, "populate_begin", 0, 0);
	p = mt_need_expect(r, "populate", 0, 0);
	mb = mt_need_expect(r, "madv_begin", 0, 0);
	m = mt_need_expect(r, "madv", 0, 0);
	lb = mt_need_expect(r, "mlock_begin", 0, 0);
	l = mt_need_expect(r, "mlock", 0, 0);
	/* the tracepoint backend learns mmap's range only from its result, after the pages */
	mt_rmap_want_ex(r, "MAP_POPULATE: anon adds", r->root_pid, MT_RSS_ANON, 1, pb->ts, p->ts,
			p->addr, p->addr + p->size, mt_pages(p), !exact);
	mt_rmap_want(r, "MADV_POPULATE_WRITE: anon adds", r->root_pid, MT_RSS_ANON, 1, mb->ts,
		     m->ts, m->addr, m->addr + m->size, mt_pages(m));
	mt_rmap_want(r, "mlock: anon adds", r->root_pid, MT_RSS_ANON, 1, lb->ts, l->ts, l->addr,
		     l->addr + l->size, mt_pages(l));
}

/* mremap shrinking in place and brk lowering remove the tail, not the start. */
static void test_rmap_shrink(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *m, *c, *bb, *b, *bc;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "shrink"));
	m = mt_need_expect(r, "map", 0, 0);
	c = mt_need_expect(r, "cut", 0, 0);
	bb = mt_need_expect(r, "brk_begin", 0, 0);
	b = mt_need_expect(r, "brk", 0, 0);
	bc = mt_need_expect(r, "brk_cut", 0, 0);
	mt_rmap_want(r, "mremap shrink: anon removes", r->root_pid, MT_RSS_ANON, -1, m->ts, c->ts,
		     c->addr, c->addr + c->size, -mt_pages(c));
	mt_rmap_want(r, "brk area touched: anon adds", r->root_pid, MT_RSS_ANON, 1, bb->ts, b->ts,
		     b->addr, b->addr + b->size, mt_pages(b));
	mt_rmap_want(r, "brk lowered: anon removes", r->root_pid, MT_RSS_ANON, -1, b->ts, bc->ts,
		     bc->addr, bc->addr + bc->size, -mt_pages(bc));
}

/*
 * exec: the old mm is torn down inside execve (removes before the Exec record), then the new
 * image's counters replace the old ones (a re-base record per member that changed, no
 * address). The invariant (checked by mt_rmap_run) must hold across it, and nothing after the
 * Exec may be placed in the old image's touched range.
 */
static void test_rmap_exec_rebase(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *m;
	struct mt_rmap_sel old = {.member = -1};
	size_t exec_at = 0, n;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "exec"));
	m = mt_need_expect(r, "map", 0, 0);
	(void)mt_need_expect(r, "shmem", 0, 0); /* the new image ran */
	for (size_t i = 0; i < r->nr_ev; i++)
		if (r->ev[i].type == MT_EV_EXEC && r->ev[i].pid == r->root_pid && r->ev[i].ts > m->ts)
			exec_at = i;
	MT_CHECK(r, exec_at, "no Exec record after the touch");
	old.pid = r->root_pid;
	old.t0 = r->ev[exec_at].ts;
	old.lo = m->addr;
	old.hi = m->addr + m->size;
	MT_CHECK(r, mt_rmap_sum(r, &old, &n) == 0 && n == 0,
		 "%zu records after the exec inside the old image's range", n);
	/* the old mm is torn down inside execve, before the Exec record, by the task itself */
	old.lo = old.hi = 0;
	old.member = MT_RSS_ANON;
	old.sign = -1;
	old.t1 = old.t0;
	old.t0 = m->ts;
	print_message("  anon removed by the exec: %lld pages\n",
		      (long long)mt_rmap_sum(r, &old, NULL));
	MT_CHECK(r, mt_rmap_sum(r, &old, NULL) <= -mt_pages(m),
		 "the old image's anon (%lld pages) was not taken back at the exec",
		 (long long)mt_pages(m));
}

/*
 * A member that rises by less than --rss-step from 0 and falls back to 0 at exit: its top is
 * an Rss record (peak keeping), and so is the 0 (mt_rmap_run's invariant: the last Rss of
 * every pair is 0).
 */
static void test_rmap_small_member_exit(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *e;
	struct mt_rmap_sel s = {.member = MT_RSS_SHMEM};

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "small"));
	e = mt_need_expect(r, "shmem", 0, 0);
	s.pid = r->root_pid;
	MT_CHECK(r, mt_rmap_peak(r, &s) == mt_pages(e), "shmem Rmap peak %lld pages, want %lld",
		 (long long)mt_rmap_peak(r, &s), (long long)mt_pages(e));
	MT_CHECK(r, mt_rss_member_peak(r, r->root_pid, MT_RSS_SHMEM) == e->size,
		 "shmem Rss peak %llu bytes, want %llu",
		 (unsigned long long)mt_rss_member_peak(r, r->root_pid, MT_RSS_SHMEM),
		 (unsigned long long)e->size);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_rmap_read_into_fresh_buffer, mt_teardown),
		cmocka_unit_test_teardown(test_rmap_populate, mt_teardown),
		cmocka_unit_test_teardown(test_rmap_shrink, mt_teardown),
		cmocka_unit_test_teardown(test_rmap_exec_rebase, mt_teardown),
		cmocka_unit_test_teardown(test_rmap_small_member_exit, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
