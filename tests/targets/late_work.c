// SPDX-License-Identifier: MIT
/*
 * `late_work MS`: allocates at once, forks a child at once, and then both sleep MS
 * milliseconds before allocating again (known sizes, each reported): a process and a fork
 * child that start before memtrack's control link is live (MEMTRACK_TEST_CTL_DELAY_MS) and
 * allocate after something else in the tree made memtrack attach glibc's uprobes. The child
 * makes no call between the fork and its sleep.
 * `late_work MS orphan`: the parent exits at once after the fork (no second round, no wait):
 * its child allocates MS milliseconds after its parent is gone (tests/bpf/test_track_glibc.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "expect.h"

static void nap(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 500;
	pid_t pid;

	mt_expect_init();
	mt_alloc_round(1111); /* before the link */
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		nap(ms);
		mt_alloc_round(2222);
		_exit(0);
	}
	mt_say_fact("fork", (uint64_t)pid);
	if (argc > 2 && !strcmp(argv[2], "orphan"))
		return 0;
	nap(ms);
	mt_alloc_round(3333);
	waitpid(pid, NULL, 0);
	return 0;
}
