/* SPDX-License-Identifier: MIT */
/*
 * Running a program (usually build/memtrack) the way the output and privilege tests need to:
 * as another user, with extra environment, stdout and stderr captured. No cmocka in the .c.
 */
#ifndef MT_TEST_EXEC_H
#define MT_TEST_EXEC_H

#include <stdbool.h>
#include <sys/types.h>

struct mt_exec_opts {
	bool as_user; /* run as uid/gid (no supplementary groups), else as we are */
	uid_t uid;
	gid_t gid;
	const char *const *env; /* extra "K=V" (or "K" to unset), NULL-terminated */
	int timeout_s;		/* kill it after this long; 0 = 60 s */
	/* run it as pid 1 of a new pid namespace, with that namespace's /proc (in a new mount
	 * namespace): the processes it forks then get pids 2, 3... (known in advance) */
	bool new_pid_ns;
};

struct mt_exec_result {
	int status;   /* exit status, 128+N if killed by signal N, -1 if it could not run */
	char *output; /* stdout and stderr, interleaved, NUL-terminated (malloc'd) */
};

/* Runs argv (argv[0] a path), waits, captures. Returns 0 or -errno on harness failures. */
int mt_exec(const struct mt_exec_opts *o, const char *const argv[], struct mt_exec_result *r);
void mt_exec_free(struct mt_exec_result *r);

#endif
