// SPDX-License-Identifier: MIT
/*
 * `exec_chain N [thread]`: allocate 1000 + N bytes, report it with "stage N", then exec
 * /proc/self/exe with N - 1, down to 0. The same pid runs every stage; each stage's
 * allocation must be in the artifact, after that stage's Exec event. With `thread`, a second
 * thread of each stage allocates (and frees) first and then does the exec: the kernel gives it
 * the leader's pid (de_thread), so per-thread state must follow the task, not its old tid.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "expect.h"

static char next_arg[16];
static int threaded;

static void *exec_next(void *unused)
{
	void *q = malloc(64); /* this thread's call state exists before the exec */

	(void)unused;
	free(q);
	execl("/proc/self/exe", "exec_chain", next_arg, threaded ? "thread" : (char *)NULL,
	      (char *)NULL);
	exit(126);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	pthread_t th;
	void *p;

	threaded = argc > 2 && !strcmp(argv[2], "thread");
	mt_expect_init();
	mt_say_fact("stage", (uint64_t)n);
	p = malloc(1000 + (size_t)n);
	mt_say("malloc", MT_P(p), 0, 1000 + (size_t)n);
	if (n <= 0)
		return 0;
	/* not freed: exec drops the whole heap */
	snprintf(next_arg, sizeof(next_arg), "%d", n - 1);
	if (!threaded)
		exec_next(NULL);
	if (pthread_create(&th, NULL, exec_next, NULL))
		return 125;
	pthread_join(th, NULL); /* the exec ends this thread */
	return 126;
}
