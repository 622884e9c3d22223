// SPDX-License-Identifier: MIT
/*
 * Root tests: a signal after the root exited stops memtrack's wait for the rest of the tree.
 * A process still running then has no Exit record: the manifest must say which ones
 * (still_running: pid, comm), must not call the run complete, memtrack must exit 123 and say
 * so, and `memtrack report` must show it. The process itself runs on, untracked.
 */
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

#define MT_EXIT_LOST 123

/*
 * Runs SHELL (which starts TARGET in the background and exits at once), sends SIGTERM 500 ms
 * after TARGET's first side-channel line OP (memtrack then waits for the tree alone: bash is
 * gone, there is nothing to forward the signal to) and checks the outputs name TARGET as
 * still running. TARGET runs for 30 s: memtrack must be done long before (timeout 20 s).
 */
static void check_still_running(void **state, const char *shell, const char *op,
				const char *target)
{
	struct mt_run *r = mt_new_run(state);
	char out[8192], want[128];
	struct mt_run_opts o = {.shell = shell,
				.signal = SIGTERM,
				.signal_after_ms = 500,
				.signal_after_line = op,
				.timeout_s = 20};
	struct mt_filter f = {.type = MT_EV_EXIT};
	const struct mt_expect *p;
	json_t *run, *e;
	int rc;

	rc = mt_track(r, &o, NULL);
	p = mt_expect_find(r->exp, r->nr_exp, op, 0, 0);
	if (p)
		kill(p->pid, SIGKILL); /* it would run on for 30 s: nothing of ours any more */
	MT_CHECK(r, rc == 0, "harness could not run memtrack: %s", strerror(-rc));
	MT_CHECK(r, p, "%s never reported", target);
	MT_CHECK(r, !r->timed_out, "memtrack did not finish in time (killed)");
	MT_CHECK(r, r->status == MT_EXIT_LOST, "memtrack exited %d, want %d", r->status,
		 MT_EXIT_LOST);
	MT_CHECK(r, r->nr_artifacts == 1 && r->read_rc == 0 && r->manifest,
		 "no artifact decoding to the end, or no manifest");

	MT_CHECK(r, json_is_false(mt_json(r, "complete")), "manifest complete is not false");
	MT_CHECK(r, mt_need_u64(r, "drops.total") == 0, "records were dropped");
	run = mt_json(r, "still_running");
	MT_CHECK(r, json_is_array(run) && json_array_size(run) == 1,
		 "still_running is not a one-entry array");
	e = json_array_get(run, 0);
	MT_CHECK(r, json_integer_value(json_object_get(e, "pid")) == p->pid &&
			    json_is_string(json_object_get(e, "comm")) &&
			    !strcmp(json_string_value(json_object_get(e, "comm")), target),
		 "still_running[0] is not {pid %d, comm %s}", p->pid, target);
	f.pid = p->pid;
	MT_CHECK(r, mt_count(r, &f) == 0, "an Exit record for the process still running");
	f.pid = r->root_pid;
	MT_CHECK(r, mt_count(r, &f) == 1, "no Exit record for the root");
	snprintf(want, sizeof(want), "%d (%s)", p->pid, target);
	MT_CHECK(r, strstr(r->log, "still running") && strstr(r->log, want),
		 "memtrack's error does not name the process still running");

	rc = mt_report_summary(r, out, sizeof(out));
	fprintf(stderr, "%s", out);
	MT_CHECK(r, rc == 0, "memtrack report exited %d", rc);
	MT_CHECK(r, strstr(out, "INCOMPLETE") && strstr(out, "still running") && strstr(out, want),
		 "the report's summary does not show the process still running");
}

/* neighbour: a malloc/free pair every ms. */
static void test_still_running(void **state)
{
	char shell[PATH_MAX + 64];

	MT_REQUIRE_ROOT();
	mt_need_file(mt_target("neighbour"));
	snprintf(shell, sizeof(shell), "%s 30 555 & exit 0", mt_target("neighbour"));
	check_still_running(state, shell, "pid", "neighbour");
}

/* alloc_storm: pairs nonstop, which would keep a drain of the ring busy for its 30 s unless
 * memtrack stops tracking it first. */
static void test_still_running_storm(void **state)
{
	char shell[PATH_MAX + 64];

	MT_REQUIRE_ROOT();
	mt_need_file(mt_target("alloc_storm"));
	snprintf(shell, sizeof(shell), "%s -d 30 & exit 0", mt_target("alloc_storm"));
	check_still_running(state, shell, "begin", "alloc_storm");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_still_running, mt_teardown),
		cmocka_unit_test_teardown(test_still_running_storm, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
