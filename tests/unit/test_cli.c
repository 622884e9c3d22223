// SPDX-License-Identifier: MIT
/* `memtrack track` option parsing: shell string vs argv, flags, environment precedence. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "cli/cmd_track.h"
#include "common/log.h"

static int parse(int argc, char **argv, struct tracker_opts *o, char *sh[4])
{
	return cmd_track__parse(argc, argv, o, sh);
}

static void test_shell_string(void **state)
{
	char *argv[] = {"track", "-o", "/tmp/x", "ls -la > /dev/null", NULL};
	struct tracker_opts o;
	char *sh[4];

	(void)state;
	assert_int_equal(parse(4, argv, &o, sh), 0);
	assert_string_equal(o.outdir, "/tmp/x");
	assert_string_equal(o.command, "ls -la > /dev/null");
	assert_string_equal(o.argv[0], "bash");
	assert_string_equal(o.argv[1], "-c");
	assert_string_equal(o.argv[2], "ls -la > /dev/null");
	assert_null(o.argv[3]);
	assert_false(o.rmap);
	assert_int_equal(o.ring_bytes, 8 << 20);
	assert_int_equal(o.rss_step, 64 << 10);
}

static void test_argv_after_dashes(void **state)
{
	char *argv[] = {"track", "-q", "--", "prog", "-o", "x", NULL};
	struct tracker_opts o;
	char *sh[4];

	(void)state;
	assert_int_equal(parse(6, argv, &o, sh), 0);
	assert_null(o.command);
	assert_string_equal(o.argv[0], "prog");
	/* the program's own -o is not ours */
	assert_string_equal(o.argv[1], "-o");
	assert_string_equal(o.outdir, ".");
	assert_true(o.quiet);
	log__level = LOG_NORMAL;
}

static void test_two_words_without_dashes_is_an_error(void **state)
{
	char *argv[] = {"track", "ls", "-la", NULL};
	struct tracker_opts o;
	char *sh[4];

	(void)state;
	assert_int_equal(parse(3, argv, &o, sh), -EINVAL);
}

static void test_no_command(void **state)
{
	char *argv[] = {"track", "-o", "d", NULL};
	struct tracker_opts o;
	char *sh[4];

	(void)state;
	assert_int_equal(parse(3, argv, &o, sh), -EINVAL);
}

static void test_sizes(void **state)
{
	char *argv[] = {"track", "--ring-size", "5M", "--rss-step", "0", "true", NULL};
	char *bad[] = {"track", "--ring-size", "12x", "true", NULL};
	struct tracker_opts o;
	char *sh[4];

	(void)state;
	assert_int_equal(parse(6, argv, &o, sh), 0);
	assert_int_equal(o.ring_bytes, 8u << 20); /* rounded up to a power of two */
	assert_int_equal(o.rss_step, 0);
	assert_int_equal(parse(4, bad, &o, sh), -EINVAL);
}

static void test_rmap_env_and_flag(void **state)
{
	char *plain[] = {"track", "true", NULL};
	char *off[] = {"track", "--no-rmap", "true", NULL};
	char *on[] = {"track", "--rmap", "true", NULL};
	struct tracker_opts o;
	char *sh[4];

	(void)state;
	unsetenv("MEMTRACK_TRACK_RMAP");
	setenv("CODSPEED_MEMTRACK_TRACK_PHYSICAL", "1", 1);
	assert_int_equal(parse(2, plain, &o, sh), 0);
	assert_true(o.rmap);
	setenv("MEMTRACK_TRACK_RMAP", "0", 1); /* ours wins over codspeed's names */
	assert_int_equal(parse(2, plain, &o, sh), 0);
	assert_false(o.rmap);
	setenv("MEMTRACK_TRACK_RMAP", "1", 1);
	assert_int_equal(parse(3, off, &o, sh), 0); /* the flag wins over the environment */
	assert_false(o.rmap);
	unsetenv("MEMTRACK_TRACK_RMAP");
	unsetenv("CODSPEED_MEMTRACK_TRACK_PHYSICAL");
	assert_int_equal(parse(3, on, &o, sh), 0);
	assert_true(o.rmap);
}

/* The exit statuses of `track` itself: usage errors 2, as in `report` (issue 10, item 6);
 * --help 0. Nothing is run in either case. */
static void test_track_exit_statuses(void **state)
{
	char *bad_opt[] = {"track", "--bogus", "true", NULL};
	char *bad_size[] = {"track", "--ring-size", "1x", "true", NULL};
	char *none[] = {"track", NULL};
	char *help[] = {"track", "--help", NULL};
	int err_fd = dup(2), out_fd = dup(1), null_fd = open("/dev/null", O_WRONLY);

	(void)state;
	dup2(null_fd, 2); /* getopt's complaint, the usage text */
	dup2(null_fd, 1);
	assert_int_equal(cmd_track(3, bad_opt), 2);
	assert_int_equal(cmd_track(4, bad_size), 2);
	assert_int_equal(cmd_track(1, none), 2);
	assert_int_equal(cmd_track(2, help), 0);
	dup2(err_fd, 2);
	dup2(out_fd, 1);
	close(err_fd);
	close(out_fd);
	close(null_fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shell_string),
		cmocka_unit_test(test_argv_after_dashes),
		cmocka_unit_test(test_two_words_without_dashes_is_an_error),
		cmocka_unit_test(test_no_command),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_rmap_env_and_flag),
		cmocka_unit_test(test_track_exit_statuses),
	};

	log__level = LOG_QUIET;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
