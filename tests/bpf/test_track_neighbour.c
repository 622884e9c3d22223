// SPDX-License-Identifier: MIT
/*
 * Root tests: isolation. A process started outside memtrack (build/targets/neighbour, malloc
 * of 123457 bytes in a loop) runs while memtrack tracks another copy with a different size:
 * the outsider's pid and its size must never appear; the tracked copy's calls must.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

#define OUTSIDE_SIZE 123457
#define INSIDE_SIZE  4321

static void test_neighbour_not_tracked(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_proc out;
	struct mt_filter f = {0};
	const struct mt_expect *pid_line, *loops;
	size_t n_size, n_pid, n_inside;
	int rc;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_target("neighbour"));
	rc =
	    mt_proc_start(&out, (const char *const[]){mt_target("neighbour"), "4", "123457", NULL});
	assert_int_equal(rc, 0);
	/* tracked copy: 1.5 s of its own loop while the outsider runs (started first, so it
	 * already allocates when the probes go in, and still does when they come out) */
	mt_track(r, NULL, MT_TARGET_ARGV("neighbour", "1.5", "4321"));
	rc = mt_proc_wait(&out, 30);
	pid_line = mt_expect_find(out.exp, out.nr_exp, "pid", 0, 0);
	loops = mt_expect_find(out.exp, out.nr_exp, "loops", 0, 0);
	if (rc || !pid_line || !loops || out.status != 0) {
		mt_proc_free(&out);
		fail_msg("the outside neighbour did not run properly");
	}
	f.pid = pid_line->pid;
	n_pid = mt_count(r, &f);
	mt_proc_free(&out);

	MT_CHECK(r, r->status == 0 && r->nr_artifacts == 1 && r->read_rc == 0,
		 "tracked run failed: status %d, %zu artifacts", r->status, r->nr_artifacts);
	memset(&f, 0, sizeof(f));
	f.by_size = true;
	f.size = OUTSIDE_SIZE;
	f.heap_only = true;
	n_size = mt_count(r, &f);
	f.size = INSIDE_SIZE;
	f.pid = r->root_pid;
	n_inside = mt_count(r, &f);
	MT_CHECK(r, n_pid == 0, "%zu events from the outside process", n_pid);
	MT_CHECK(r, n_size == 0, "%zu heap events of the outsider's size %d", n_size, OUTSIDE_SIZE);
	/* the tracked copy did about 1 loop per ms: its events are there */
	MT_CHECK(r, n_inside >= 100, "only %zu events of the tracked copy's size %d", n_inside,
		 INSIDE_SIZE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_neighbour_not_tracked, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
