// SPDX-License-Identifier: MIT
/*
 * Root tests: the command runs before the interposer's control link is live (early_links.h;
 * src/preload/preload_ctl.c). MEMTRACK_TEST_CTL_DELAY_MS holds the link back for 300 ms, so
 * that what the tree does in its first milliseconds happens before it, deterministically:
 * - a served process and its fork child (no call between the fork and their later work),
 *   both started before the link, allocate after a secure-exec process in the tree made
 *   memtrack attach glibc's uprobes: each call once (memtrack's scan of the registrations
 *   marks them served; the child registers and calls again at the fork), and a process that
 *   registered, then exec'd the secure one, is not marked (its calls by uprobes, once);
 * - a dlopen announced in the first milliseconds still stops (the interposer waits for the
 *   link): jemalloc's calls recorded once;
 * - a refusal before the link is counted once (drops.unserved), from the shared memory's
 *   header: the root shell refuses, and the link is held (MEMTRACK_TEST_CTL_HOLD) until that
 *   shell has written a file, an order no machine's speed can change;
 * - a refusal after the link (each exec's stop waits for it) is counted once too, by the call,
 *   the only way for a process that cannot map its shared memory.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "../lib/mt_check.h"
#include "../lib/mt_tmpdir.h"

static const char *const auto_opts[] = {"--alloc-hooks", "auto", NULL};
static const char *const preload_opts[] = {"--alloc-hooks", "preload", NULL};
static const char *const late_env[] = {"MEMTRACK_TEST_CTL_DELAY_MS=300", NULL};

static void check_complete(struct mt_run *r)
{
	const char *ctl = json_string_value(mt_json(r, "mechanisms.control_link"));

	MT_CHECK(r, mt_json(r, "drops.total") && mt_need_u64(r, "drops.total") == 0,
		 "records were dropped");
	/* made late, not taken from a finished run (which would be live from the start) */
	MT_CHECK(r, ctl && strcmp(ctl, "taken from a finished run"),
		 "control_link %s: the late link was not tested", ctl ? ctl : "-");
}

static void test_served_before_link(void **state)
{
	struct mt_run *r = mt_new_run(state);
	char dir[128], sg[192], cmd[1024];
	struct mt_run_opts o = {.track_opts = auto_opts, .shell = cmd, .env = late_env};
	const char *links;

	MT_REQUIRE_ROOT();
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "ctl"), 0);
	assert_int_equal(mt_tmpdir_setgid_copy(dir, "alloc_each", sg, sizeof(sg)), 0);
	/* late_work's second half comes 500 ms in, well after the link (300 ms) and the attach
	 * that waits for it at the set-gid exec's stop; `sh -c "exec"` registers, then execs it */
	snprintf(cmd, sizeof(cmd), "'%s' 500 & sh -c \"exec '%s'\"; wait", mt_target("late_work"),
		 sg);
	mt_track_ok(r, &o, NULL, 0);
	mt_tmpdir_remove(dir);
	links = json_string_value(mt_json(r, "mechanisms.hook_links"));
	MT_CHECK(r,
		 links && (!strcmp(links, "while loading") ||
			   !strcmp(links, "taken from a finished run")),
		 "hook_links %s", links ? links : "-");
	MT_CHECK(r, json_array_size(mt_json(r, "libraries")) > 0,
		 "glibc's uprobes were not attached: the test proves nothing");
	check_complete(r);
	mt_each_op_once(r);
}

/* jemalloc dlopen'ed in the first milliseconds: announced at its dlsym, after the interposer
 * waited for the link; inspected and attached before the calls. */
static void test_dlopen_before_link(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = auto_opts, .env = late_env};
	const struct mt_expect *b;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("alloc_dlopen"), 0);
	b = mt_need_expect(r, "begin", 0, 0);
	mt_window_ok(r, b->tid, 0);
	mt_each_op_once(r);
	check_complete(r);
}

/*
 * One refusal: drops.unserved exactly 1, the run incomplete (status 123). `how` is put before
 * `cmd` in the shell's command line; `env`, the run's environment.
 */
static void check_unserved(const char *const *opts, const char *const *env, const char *how,
			   const char *cmd)
{
	struct mt_run r = {0};
	char line[1024];
	struct mt_run_opts o = {
	    .track_opts = opts, .shell = line, .no_expect_fd = true, .env = env};

	snprintf(line, sizeof(line), "%s%s", how, cmd);
	assert_int_equal(mt_track(&r, &o, NULL), 0);
	MT_CHECK(&r, r.status == 123, "%s %s: memtrack status %d, want 123 (events lost)", opts[1],
		 how, r.status);
	MT_CHECK(&r, mt_need_u64(&r, "drops.unserved") == 1, "%s %s: drops.unserved %llu, want 1",
		 opts[1], how, (unsigned long long)mt_need_u64(&r, "drops.unserved"));
	mt_run_free(&r);
}

/*
 * A refusal before the link is counted in the shared memory's header, not called. Only the
 * root's image runs before the link (every later exec's stop waits for it: tracker_control.c),
 * so the root shell refuses (MEMTRACK_TEST_PRELOAD_UNSERVED in the run's environment), and the
 * link is held until that shell has written a file (MEMTRACK_TEST_CTL_HOLD; a redirection, no
 * exec) after its refusal: the order is certain whatever the machine's speed.
 */
static void test_unserved_before_link(void **state)
{
	char dir[128], file[192], hold[256], cmd[256];
	const char *const env[] = {"MEMTRACK_TEST_PRELOAD_UNSERVED=1", hold, NULL};

	(void)state;
	MT_REQUIRE_ROOT();
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "hold"), 0);
	snprintf(file, sizeof(file), "%s/linked", dir);
	snprintf(hold, sizeof(hold), "MEMTRACK_TEST_CTL_HOLD=%s", file);
	snprintf(cmd, sizeof(cmd), ": > '%s'", file);
	check_unserved(preload_opts, env, "", cmd);
	unlink(file);
	check_unserved(auto_opts, env, "", cmd);
	mt_tmpdir_remove(dir);
}

/* After the link (the exec's stop waits for it), the refusal is a call of the control point;
 * a process that cannot map its shared memory at all can only call it */
static void test_unserved_after_link(void **state)
{
	char cmd[256];

	(void)state;
	MT_REQUIRE_ROOT();
	snprintf(cmd, sizeof(cmd), "'%s' 64 12345", mt_target("alloc_fixed"));
	check_unserved(preload_opts, late_env, "MEMTRACK_TEST_PRELOAD_UNSERVED=1 ", cmd);
	check_unserved(auto_opts, late_env, "MEMTRACK_TEST_PRELOAD_UNSERVED=1 ", cmd);
	check_unserved(preload_opts, late_env, "MEMTRACK_PRELOAD_SHM=/dev/shm/memtrack-none ", cmd);
}

/*
 * A vfork, then a fork before the parent's next record, in a process whose served call came
 * before the link (its fork children register and call again at the fork, taking a new
 * generation then): the fork child must leave the vfork's state behind. It did not, once: each
 * of its later vforks took it for the vfork child and claimed it a new slot, never freed while
 * it ran, so that after ~1024 commands of a dash subshell the tree dropped records (no_slot).
 * 1100 rounds: every one of the child's 7778-byte pairs and its vfork children's 7777-byte
 * blocks recorded, nothing dropped.
 */
static void test_vfork_then_fork(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts, .env = late_env, .timeout_s = 120};
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 7778};

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("preload_edges", "vfork_loop", "1100"), 0);
	check_complete(r);
	MT_CHECK(r, mt_count(r, &f) == 1100, "%zu Mallocs of 7778 bytes, want 1100",
		 mt_count(r, &f));
	f.size = 7777;
	MT_CHECK(r, mt_count(r, &f) == 1100, "%zu Mallocs of 7777 bytes, want 1100",
		 mt_count(r, &f));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_served_before_link, mt_teardown),
	    cmocka_unit_test_teardown(test_dlopen_before_link, mt_teardown),
	    cmocka_unit_test_teardown(test_unserved_before_link, mt_teardown),
	    cmocka_unit_test_teardown(test_unserved_after_link, mt_teardown),
	    cmocka_unit_test_teardown(test_vfork_then_fork, mt_teardown),
	};

	if (getenv("MT_TEST_FILTER")) /* one test by name (a glob), e.g. to repeat it */
		cmocka_set_test_filter(getenv("MT_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
