// SPDX-License-Identifier: MIT
/*
 * Root tests: fork (build/targets/forker). A child's allocations are attributed to the child's
 * pid, after a Fork event {pid = child, parent_pid = parent}; the same one level down for the
 * grandchild; the parent's own allocations stay the parent's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

static struct mt_run *run_forker(void **state)
{
	struct mt_run *r = mt_new_run(state);

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("forker"), 0);
	return r;
}

/* The Fork record for child, with the parent's pid, before the child's first heap event. */
static void check_fork_event(struct mt_run *r, int32_t child, int32_t parent)
{
	struct mt_filter f = {.type = MT_EV_FORK, .pid = child};
	struct mt_filter h = {.pid = child, .heap_only = true};
	const struct mt_event *fe, *first;

	MT_CHECK(r, mt_count(r, &f) == 1, "%zu Fork events for child %d, want 1", mt_count(r, &f),
		 child);
	fe = mt_first(r, &f);
	MT_CHECK(r, (int32_t)fe->size == parent, "Fork of %d has parent_pid %llu, want %d", child,
		 (unsigned long long)fe->size, parent);
	first = mt_first(r, &h);
	MT_CHECK(r, first && first->ts >= fe->ts, "child %d has heap events before its Fork",
		 child);
}

static void test_fork_child_attribution(void **state)
{
	struct mt_run *r = run_forker(state);
	const struct mt_expect *fk = mt_need_expect(r, "fork", r->root_pid, 0);
	int32_t child = (int32_t)fk->size;
	const struct mt_expect *b = mt_need_expect(r, "begin", child, 0);

	MT_CHECK(r, b->pid == child, "target: child reports pid %d, parent said %d", b->pid, child);
	check_fork_event(r, child, r->root_pid);
	mt_window_ok(r, child, 0);
}

static void test_fork_grandchild(void **state)
{
	struct mt_run *r = run_forker(state);
	const struct mt_expect *fk = mt_need_expect(r, "fork", r->root_pid, 0);
	int32_t child = (int32_t)fk->size;
	const struct mt_expect *gk = mt_need_expect(r, "fork", child, 0);
	int32_t grandchild = (int32_t)gk->size;

	check_fork_event(r, grandchild, child);
	mt_window_ok(r, grandchild, 0);
}

/* Nobody's calls are recorded twice or under someone else's pid. */
static void test_fork_each_op_once(void **state)
{
	struct mt_run *r = run_forker(state);

	mt_each_op_once(r);
}

/* Every process of the tree exits once, and the manifest lists the tree with parents. */
static void test_fork_exits_and_manifest(void **state)
{
	struct mt_run *r = run_forker(state);
	const struct mt_expect *fk = mt_need_expect(r, "fork", r->root_pid, 0);
	int32_t child = (int32_t)fk->size;
	int32_t grandchild = (int32_t)mt_need_expect(r, "fork", child, 0)->size;
	int32_t pids[3] = {r->root_pid, child, grandchild};
	int32_t ppids[3] = {0, r->root_pid, child};
	json_t *procs = mt_json(r, "processes");

	for (int i = 0; i < 3; i++) {
		struct mt_filter f = {.type = MT_EV_EXIT, .pid = pids[i]};
		bool listed = false;
		size_t k;
		json_t *p;

		MT_CHECK(r, mt_count(r, &f) == 1, "%zu Exit events for pid %d, want 1",
			 mt_count(r, &f), pids[i]);
		MT_CHECK(r, json_is_array(procs), "manifest: no processes[]");
		for (k = 0; k < json_array_size(procs) && (p = json_array_get(procs, k)); k++) {
			if (json_integer_value(json_object_get(p, "pid")) == pids[i]) {
				listed = true;
				MT_CHECK(r,
					 json_integer_value(json_object_get(p, "ppid")) == ppids[i],
					 "manifest: pid %d has ppid %lld, want %d", pids[i],
					 (long long)json_integer_value(json_object_get(p, "ppid")),
					 ppids[i]);
			}
		}
		MT_CHECK(r, listed, "manifest: pid %d not in processes[]", pids[i]);
	}
}

/* 300 short-lived children one after the other: each one's calls, Fork and Exit are there
 * (per-process state is released at exit, or the tracked-process map would fill up). */
static void test_fork_many_children(void **state)
{
	struct mt_run *r = mt_new_run(state);
	size_t nfork;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("forker", "300"), 0);
	nfork = mt_expect_count(r->exp, r->nr_exp, "fork", r->root_pid);
	MT_CHECK(r, nfork == 300, "target: %zu forks reported", nfork);
	for (size_t i = 0; i < nfork; i++) {
		int32_t child = (int32_t)mt_need_expect(r, "fork", r->root_pid, i)->size;
		struct mt_filter f = {.type = MT_EV_EXIT, .pid = child};

		check_fork_event(r, child, r->root_pid);
		mt_window_ok(r, child, 0);
		MT_CHECK(r, mt_count(r, &f) == 1, "child #%zu (%d): %zu Exit events", i, child,
			 mt_count(r, &f));
	}
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "manifest complete is not true");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_fork_child_attribution, mt_teardown),
		cmocka_unit_test_teardown(test_fork_grandchild, mt_teardown),
		cmocka_unit_test_teardown(test_fork_each_op_once, mt_teardown),
		cmocka_unit_test_teardown(test_fork_exits_and_manifest, mt_teardown),
		cmocka_unit_test_teardown(test_fork_many_children, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
