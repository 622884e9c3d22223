// SPDX-License-Identifier: MIT
/* Shell quoting: the exact text for plain and special words, and a round trip through /bin/sh
 * (each word comes back byte for byte), for the words that break naive quoting. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "common/shquote.h"

static void expect_quoted(char *const argv[], const char *want)
{
	char *q = shquote__argv(argv);

	assert_non_null(q);
	assert_string_equal(q, want);
	free(q);
}

static void test_exact(void **state)
{
	(void)state;
	expect_quoted((char *[]){"/usr/bin/g++", "-O2", "-o", "a.out", "x.cc", NULL},
		      "/usr/bin/g++ -O2 -o a.out x.cc");
	expect_quoted((char *[]){"echo", "a b", "", NULL}, "echo 'a b' ''");
	expect_quoted((char *[]){"echo", "it's", NULL}, "echo 'it'\\''s'");
	expect_quoted((char *[]){"echo", "$HOME", "*", "~", "a;b", NULL},
		      "echo '$HOME' '*' '~' 'a;b'");
	expect_quoted((char *[]){NULL}, "");
}

/* sh -c 'printf "%s\0" WORDS' prints each word NUL-terminated: they must be ours. */
static void test_round_trip(void **state)
{
	char *words[] = {"printf", "%s\\0", "plain", "two words", "", "it's", "'", "\"", "\\",
			 "$HOME", "`id`", "$(id)", "*", "?", "[a]", "~", "#", "a;b", "a|b",
			 "a&b", "<", ">", "new\nline", "\ttab", "caf\xc3\xa9", "-n", NULL};
	char *q = shquote__argv(words), out[1024];
	size_t len = 0, off = 0;
	int pfd[2], status;
	ssize_t n;
	pid_t pid;

	(void)state;
	assert_non_null(q);
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], 1);
		execl("/bin/sh", "sh", "-c", q, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while ((n = read(pfd[0], out + len, sizeof(out) - len)) > 0)
		len += (size_t)n;
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 2; words[i]; i++) {
		size_t wl = strlen(words[i]);

		assert_true(off + wl < len);
		assert_memory_equal(out + off, words[i], wl);
		assert_int_equal(out[off + wl], 0);
		off += wl + 1;
	}
	assert_int_equal(off, len);
	free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact),
		cmocka_unit_test(test_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
