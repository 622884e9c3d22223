// SPDX-License-Identifier: MIT
/*
 * Root tests: exec (build/targets/exec_chain 3): the process execs itself three times. Every
 * exec is an Exec event of the same pid (the first being memtrack's own exec of the command),
 * and each stage's allocation is recorded after its stage's Exec, exactly once. The second
 * test execs from a non-leader thread (which takes over the leader's pid) that allocated before.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

#define STAGES 3

static void check_exec_chain(void **state, bool threaded)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_filter f = {.type = MT_EV_EXEC};
	const struct mt_event **execs;
	size_t n;

	MT_REQUIRE_ROOT();
	if (threaded)
		mt_track_ok(r, NULL, MT_TARGET_ARGV("exec_chain", "3", "thread"), 0);
	else
		mt_track_ok(r, NULL, MT_TARGET_ARGV("exec_chain", "3"), 0);
	f.pid = r->root_pid;
	n = mt_select(r, &f, &execs);
	if (n != STAGES + 1) {
		free(execs);
		MT_CHECK(r, 0, "%zu Exec events for pid %d, want %d (the command's exec + %d)", n,
			 r->root_pid, STAGES + 1, STAGES);
	}
	for (int s = STAGES, k = 0; s >= 0; s--, k++) {
		const struct mt_expect *m =
		    mt_expect_find(r->exp, r->nr_exp, "malloc", 0, (size_t)k);
		const struct mt_event *ev = NULL;

		if (!m || m->size != 1000u + (unsigned)s || m->pid != r->root_pid) {
			free(execs);
			MT_CHECK(r, 0, "side channel: stage %d malloc missing", s);
		}
		for (size_t i = 0; i < r->nr_ev; i++)
			if (mt_event_matches(&r->ev[i], m))
				ev = &r->ev[i];
		if (!ev || mt_count_matching(r, m) != 1) {
			free(execs);
			MT_CHECK(r, 0, "stage %d: malloc(%llu) = 0x%llx recorded %zu times, want 1",
				 s, (unsigned long long)m->size, (unsigned long long)m->addr,
				 mt_count_matching(r, m));
		}
		/* after the k-th exec, before the next one */
		if (ev->ts < execs[k]->ts || (k + 1 < (int)n && ev->ts > execs[k + 1]->ts)) {
			free(execs);
			MT_CHECK(r, 0, "stage %d's malloc is not between Exec #%d and #%d", s, k,
				 k + 1);
		}
	}
	free(execs);
	f.type = MT_EV_EXIT;
	MT_CHECK(r, mt_count(r, &f) == 1, "%zu Exit events, want 1 (exec is not an exit)",
		 mt_count(r, &f));
}

static void test_exec_chain(void **state)
{
	check_exec_chain(state, false);
}

static void test_exec_chain_thread(void **state)
{
	check_exec_chain(state, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_exec_chain, mt_teardown),
		cmocka_unit_test_teardown(test_exec_chain_thread, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
