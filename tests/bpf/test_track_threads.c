// SPDX-License-Identifier: MIT
/*
 * Root tests: threads (build/targets/threads). Events carry the thread-group id as pid and the
 * calling thread as tid; when the leader calls pthread_exit, the group is still tracked until
 * its last thread is gone, and only then is there an Exit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

#define NTHREADS 3

/* Each worker's window is exact, with its own tid; the tids are distinct and not the leader. */
static void check_workers(struct mt_run *r, int32_t tids[NTHREADS])
{
	for (int k = 0; k < NTHREADS; k++) {
		const struct mt_expect *b = mt_need_expect(r, "begin", 0, (size_t)k);

		MT_CHECK(r, b->pid == r->root_pid, "worker pid %d != root %d", b->pid, r->root_pid);
		MT_CHECK(r, b->tid != b->pid, "worker reported tid == pid");
		tids[k] = b->tid;
		for (int j = 0; j < k; j++)
			MT_CHECK(r, tids[j] != tids[k], "two workers with tid %d", tids[k]);
		mt_window_ok(r, b->tid, 0);
	}
}

static void test_threads_tids(void **state)
{
	struct mt_run *r = mt_new_run(state);
	int32_t tids[NTHREADS];
	const struct mt_expect *m;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("threads", "join"), 0);
	check_workers(r, tids);
	/* the leader's own allocation carries tid == pid */
	m = mt_expect_find(r->exp, r->nr_exp, "malloc", r->root_pid, 0);
	MT_CHECK(r, m && m->size == 99999, "side channel: no leader malloc");
	MT_CHECK(r, mt_count_matching(r, m) == 1,
		 "leader's malloc(99999) not recorded once with "
		 "tid %d",
		 m->tid);
	mt_each_op_once(r);
}

/* pthread_exit in the leader: the workers allocate 200 ms later and are still tracked. */
static void test_threads_leader_exit(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *le;
	struct mt_filter f = {.type = MT_EV_EXIT};
	const struct mt_event *ex;
	int32_t tids[NTHREADS];
	uint64_t last_end = 0;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("threads", "leader-exit"), 0);
	le = mt_need_expect(r, "leader_exit", 0, 0);
	check_workers(r, tids);
	for (int k = 0; k < NTHREADS; k++) {
		const struct mt_expect *b = mt_need_expect(r, "begin", tids[k], 0);
		const struct mt_expect *e = mt_need_expect(r, "end", tids[k], 0);

		MT_CHECK(r, b->ts > le->ts, "target: worker %d began before the leader exited",
			 tids[k]);
		if (e->ts > last_end)
			last_end = e->ts;
	}
	mt_each_op_once(r);
	/* one Exit for the group, after the last worker's last call */
	f.pid = r->root_pid;
	MT_CHECK(r, mt_count(r, &f) == 1,
		 "%zu Exit events for pid %d, want 1 (when the last "
		 "thread goes)",
		 mt_count(r, &f), r->root_pid);
	ex = mt_first(r, &f);
	MT_CHECK(r, ex->ts >= last_end,
		 "Exit at %llu before the last worker finished (%llu): the "
		 "leader's pthread_exit was taken for the group's exit",
		 (unsigned long long)ex->ts, (unsigned long long)last_end);
}

/* 8 threads x 20,000 malloc/free pairs at once: every call of every thread, nothing lost. */
static void test_threads_storm(void **state)
{
	struct mt_run *r = mt_new_run(state);

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("alloc_storm", "20000", "8"), 0);
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "manifest complete is not true");
	MT_CHECK(r, mt_expect_count(r->exp, r->nr_exp, "begin", 0) == 8, "target: not 8 threads");
	for (size_t k = 0; k < 8; k++) {
		const struct mt_expect *b = mt_need_expect(r, "begin", 0, k);
		const struct mt_expect *e = mt_need_expect(r, "end", b->tid, 0);
		struct mt_filter f = {.pid = b->pid, .tid = b->tid, .t0 = b->ts, .t1 = e->ts};
		size_t nm, nf;

		f.type = MT_EV_MALLOC;
		nm = mt_count(r, &f);
		f.type = MT_EV_FREE;
		nf = mt_count(r, &f);
		f.type = 0;
		f.heap_only = true;
		MT_CHECK(r, nm == 20000 && nf == 20000 && mt_count(r, &f) == 40000,
			 "thread %d: %zu Malloc, %zu Free, %zu heap events; want 20000, 20000, 40000",
			 b->tid, nm, nf, mt_count(r, &f));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_threads_tids, mt_teardown),
		cmocka_unit_test_teardown(test_threads_leader_exit, mt_teardown),
		cmocka_unit_test_teardown(test_threads_storm, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
