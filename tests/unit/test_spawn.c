// SPDX-License-Identifier: MIT
/* Starting the command: PATH resolution as execvp does it, and the held start (go, then the
 * exec's result) that lets memtrack work while the command execs. No root needed. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "track/spawn.h"
#include "../lib/mt_tmpdir.h"

struct dirs {
	char a[64], b[64];
	char *old_path;
};

static void make_exec(const char *dir, const char *name, mode_t mode)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "#!/bin/sh\nexit 7\n", 17), 17);
	close(fd);
	chmod(p, mode);
}

static int setup(void **state)
{
	struct dirs *d = calloc(1, sizeof(*d));
	const char *path = getenv("PATH");

	assert_int_equal(mt_tmpdir_make(d->a, sizeof(d->a), "spawn-a"), 0);
	assert_int_equal(mt_tmpdir_make(d->b, sizeof(d->b), "spawn-b"), 0);
	d->old_path = path ? strdup(path) : NULL;
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct dirs *d = *state;

	if (d->old_path)
		setenv("PATH", d->old_path, 1);
	else
		unsetenv("PATH");
	assert_int_equal(mt_tmpdir_remove(d->a), 0);
	assert_int_equal(mt_tmpdir_remove(d->b), 0);
	free(d->old_path);
	free(d);
	return 0;
}

static void test_resolve_path_order(void **state)
{
	struct dirs *d = *state;
	char path[256], out[PATH_MAX], want[PATH_MAX];

	make_exec(d->a, "tool", 0644); /* not executable: skipped, as execvp skips it */
	make_exec(d->b, "tool", 0755);
	snprintf(path, sizeof(path), "%s:%s", d->a, d->b);
	setenv("PATH", path, 1);
	assert_int_equal(spawn__resolve("tool", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/tool", d->b);
	assert_string_equal(out, want);

	make_exec(d->a, "tool", 0755); /* now the first entry wins */
	assert_int_equal(spawn__resolve("tool", out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "%s/tool", d->a);
	assert_string_equal(out, want);

	assert_int_equal(spawn__resolve("no-such-tool", out, sizeof(out)), -ENOENT);
	/* a directory of that name is not a program */
	snprintf(want, sizeof(want), "%s/subdir", d->a);
	assert_int_equal(mkdir(want, 0755), 0);
	assert_int_equal(spawn__resolve("subdir", out, sizeof(out)), -ENOENT);
}

static void test_resolve_slash_and_empty_entry(void **state)
{
	struct dirs *d = *state;
	char out[PATH_MAX], cwd[PATH_MAX];

	/* with a slash: taken as is, found or not (exec reports the error) */
	assert_int_equal(spawn__resolve("./x/y", out, sizeof(out)), 0);
	assert_string_equal(out, "./x/y");
	/* an empty PATH entry is the current directory */
	make_exec(d->b, "here", 0755);
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(d->b), 0);
	setenv("PATH", "/nonexistent-dir:", 1);
	assert_int_equal(spawn__resolve("here", out, sizeof(out)), 0);
	assert_string_equal(out, "here");
	assert_int_equal(chdir(cwd), 0);
}

static void test_held_start_go_then_result(void **state)
{
	struct dirs *d = *state;
	char prog[PATH_MAX], *argv[] = {prog, NULL};
	struct spawn sp;
	int status;

	make_exec(d->a, "seven", 0755);
	snprintf(prog, sizeof(prog), "%s/seven", d->a);
	assert_int_equal(spawn__start(&sp, argv, false), 0);
	/* held: not exited before the go */
	usleep(50 * 1000);
	assert_int_equal(waitpid(sp.pid, &status, WNOHANG), 0);
	assert_int_equal(spawn__go(&sp), 0);
	assert_int_equal(spawn__exec_result(&sp), 0);
	assert_int_equal(waitpid(sp.pid, &status, 0), sp.pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 7);
	spawn__close(&sp);
}

static void test_exec_failure_reported(void **state)
{
	char *argv[] = {"/nonexistent/prog", NULL};
	struct spawn sp;
	int status;

	(void)state;
	assert_int_equal(spawn__start(&sp, argv, false), 0);
	assert_int_equal(spawn__release(&sp), -ENOENT);
	assert_int_equal(waitpid(sp.pid, &status, 0), sp.pid);
	assert_int_equal(WEXITSTATUS(status), 127);
	spawn__close(&sp);
}

static void test_abort_unreleased(void **state)
{
	char *argv[] = {"/bin/true", NULL};
	struct spawn sp;

	(void)state;
	assert_int_equal(spawn__start(&sp, argv, false), 0);
	spawn__abort(&sp);
	assert_int_equal(sp.pid, 0);
	assert_int_equal(sp.pidfd, -1);
	spawn__abort(&sp); /* idempotent */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_resolve_path_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_slash_and_empty_entry, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_held_start_go_then_result, setup, teardown),
		cmocka_unit_test(test_exec_failure_reported),
		cmocka_unit_test(test_abort_unreleased),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
