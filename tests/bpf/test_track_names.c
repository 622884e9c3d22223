// SPDX-License-Identifier: MIT
/*
 * Root tests: what the outputs call things. Each process carries the kernel's name for it
 * (comm), taken at its fork and again at each exec, in the manifest and in the summary of
 * `memtrack report`; an executable inspected at its exec is listed by its path, not by
 * /proc/PID/exe; with `--`, the command is recorded and shown whole, shell-quoted.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

/* The manifest's processes[] entry of pid (the last one if the pid was reused). */
static json_t *proc_of(const struct mt_run *r, int64_t pid)
{
	json_t *procs = mt_json(r, "processes"), *p, *found = NULL;
	size_t i;

	json_array_foreach(procs, i, p)
		if (json_integer_value(json_object_get(p, "pid")) == pid)
			found = p;
	return found;
}

static const char *comm_of(json_t *p)
{
	const char *s = json_string_value(json_object_get(p, "comm"));

	return s ? s : "(none)";
}

/*
 * bash runs a subshell (a fork that does not exec: the parent's name), /bin/true (fork, then
 * exec: "true") and finally execs exit_code itself: the root's name is the last exec's.
 */
static void test_process_names(void **state)
{
	struct mt_run *r = mt_new_run(state);
	char shell[PATH_MAX + 64], out[8192];
	struct mt_run_opts o = {.shell = shell};
	json_t *procs, *p;
	int have_bash = 0, have_true = 0, rc;
	size_t i;

	MT_REQUIRE_ROOT();
	snprintf(shell, sizeof(shell), "(exit 0); /bin/true; exec %s 0", mt_target("exit_code"));
	mt_track_ok(r, &o, NULL, 0);
	procs = mt_json(r, "processes");
	MT_CHECK(r, json_array_size(procs) == 3, "%zu processes, want 3",
		 json_array_size(procs));
	p = proc_of(r, r->root_pid);
	MT_CHECK(r, p && !strcmp(comm_of(p), "exit_code"),
		 "root's comm '%s', want 'exit_code' (its last exec)", p ? comm_of(p) : "-");
	json_array_foreach(procs, i, p) {
		if (json_integer_value(json_object_get(p, "pid")) == r->root_pid)
			continue;
		have_bash += !strcmp(comm_of(p), "bash");
		have_true += !strcmp(comm_of(p), "true");
	}
	MT_CHECK(r, have_bash == 1 && have_true == 1,
		 "children named bash %d and true %d times, want once each", have_bash,
		 have_true);

	rc = mt_report_summary(r, out, sizeof(out));
	fprintf(stderr, "%s", out);
	MT_CHECK(r, rc == 0, "memtrack report exited %d", rc);
	MT_CHECK(r, strstr(out, " exit_code ") && strstr(out, " bash ") && strstr(out, " true "),
		 "the summary does not name the three processes");
}

/* A static executable exec'd by a child of the shell: inspected at its exec stop, through
 * /proc/PID/exe, and listed (it has allocator sites) by its own path. */
static void test_exe_path(void **state)
{
	struct mt_run *r = mt_new_run(state);
	char shell[PATH_MAX + 64], want[PATH_MAX];
	struct mt_run_opts o = {.shell = shell, .no_expect_fd = true};
	json_t *libs, *l;
	bool found = false;
	size_t i;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_target("alloc_static"));
	MT_CHECK(r, realpath(mt_target("alloc_static"), want), "no alloc_static");
	snprintf(shell, sizeof(shell), "%s; exit 0", mt_target("alloc_static"));
	mt_track_ok(r, &o, NULL, 0);
	libs = mt_json(r, "libraries");
	json_array_foreach(libs, i, l) {
		const char *path = json_string_value(json_object_get(l, "path"));

		MT_CHECK(r, path && strncmp(path, "/proc/", 6), "library listed as '%s'",
			 path ? path : "(null)");
		found |= !strcmp(path, want);
	}
	MT_CHECK(r, found, "'%s' is not among the libraries", want);
}

/* With --, the manifest's command is argv shell-quoted, and the summary shows it. */
static void test_command_quoted(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const char *argv[] = {mt_target("exit_code"), "0", "two words", "it's", "", "$HOME", NULL};
	char want[PATH_MAX + 128], line[PATH_MAX + 192], out[8192];
	json_t *cmd;
	int rc;

	MT_REQUIRE_ROOT();
	snprintf(want, sizeof(want), "%s 0 'two words' 'it'\\''s' '' '$HOME'", argv[0]);
	mt_track_ok(r, NULL, argv, 0);
	cmd = mt_json(r, "command");
	MT_CHECK(r, json_is_string(cmd) && !strcmp(json_string_value(cmd), want),
		 "manifest command %s, want %s",
		 json_is_string(cmd) ? json_string_value(cmd) : "(not a string)", want);
	rc = mt_report_summary(r, out, sizeof(out));
	fprintf(stderr, "%s", out);
	snprintf(line, sizeof(line), "memtrack: command: %s (exit status 0)\n", want);
	MT_CHECK(r, rc == 0 && strstr(out, line), "the summary does not show the command whole");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_process_names, mt_teardown),
		cmocka_unit_test_teardown(test_exe_path, mt_teardown),
		cmocka_unit_test_teardown(test_command_quoted, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
