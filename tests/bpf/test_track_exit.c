// SPDX-License-Identifier: MIT
/*
 * Root tests: memtrack exits with the command's status: its own code, 128+N when signal N
 * killed it, 127 when it cannot be executed; the manifest says the same. Both `-- PROG` and
 * the shell-string form.
 */
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

static void check_manifest_status(struct mt_run *r, int want)
{
	uint64_t st = mt_need_u64(r, "exit_status");

	MT_CHECK(r, st == (uint64_t)want, "manifest exit_status %llu, want %d",
		 (unsigned long long)st, want);
}

static void test_exit_code_3(void **state)
{
	struct mt_run *r = mt_new_run(state);

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("exit_code", "3"), 3);
	check_manifest_status(r, 3);
}

static void test_exit_code_0(void **state)
{
	struct mt_run *r = mt_new_run(state);

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("exit_code", "0"), 0);
	check_manifest_status(r, 0);
}

static void test_sigterm_143(void **state)
{
	struct mt_run *r = mt_new_run(state);
	uint64_t sig;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("self_kill", "15"), 128 + SIGTERM);
	check_manifest_status(r, 128 + SIGTERM);
	sig = mt_need_u64(r, "term_signal");
	MT_CHECK(r, sig == SIGTERM, "manifest term_signal %llu, want %d", (unsigned long long)sig,
		 SIGTERM);
}

static void test_sigkill_137(void **state)
{
	struct mt_run *r = mt_new_run(state);

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("self_kill", "9"), 128 + SIGKILL);
	check_manifest_status(r, 128 + SIGKILL);
}

/* A program that does not exist: 127, as a shell would say. */
static void test_missing_program_127(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const char *const argv[] = {"/nonexistent/memtrack-test-program", NULL};

	MT_REQUIRE_ROOT();
	mt_need_file(mt_memtrack());
	assert_int_equal(mt_track(r, NULL, argv), 0);
	MT_CHECK(r, r->status == 127, "memtrack exited %d for a missing program, want 127",
		 r->status);
}

static void test_shell_exit_5(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.shell = "exit 5"};

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, NULL, 5);
	check_manifest_status(r, 5);
}

static void test_shell_kill_self_143(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.shell = "kill -TERM $$"};

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, NULL, 143);
}

static void test_shell_missing_command_127(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.shell = "memtrack-test-no-such-command"};

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, NULL, 127);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_exit_code_3, mt_teardown),
		cmocka_unit_test_teardown(test_exit_code_0, mt_teardown),
		cmocka_unit_test_teardown(test_sigterm_143, mt_teardown),
		cmocka_unit_test_teardown(test_sigkill_137, mt_teardown),
		cmocka_unit_test_teardown(test_missing_program_127, mt_teardown),
		cmocka_unit_test_teardown(test_shell_exit_5, mt_teardown),
		cmocka_unit_test_teardown(test_shell_kill_self_143, mt_teardown),
		cmocka_unit_test_teardown(test_shell_missing_command_127, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
