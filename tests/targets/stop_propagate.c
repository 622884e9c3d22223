// SPDX-License-Identifier: MIT
/*
 * `stop_propagate PROGRAM [ARGS...]`: passes job control on as su, runuser and sudo do: runs
 * PROGRAM as its child, waits for it with WUNTRACED, and when the child stops, stops itself
 * (SIGSTOP) and, once continued, continues the child. Reports "propagated" (SIZE = the times
 * it stopped itself) on the side channel at the end. Exits with the child's status (128 + N
 * for signal N).
 */
#include <signal.h>
#include <sys/wait.h>
#include "expect.h"

int main(int argc, char **argv)
{
	uint64_t propagated = 0;
	int st;
	pid_t pid;

	if (argc < 2)
		return 2;
	mt_expect_init();
	pid = fork();
	if (pid < 0)
		return 2;
	if (!pid) {
		execv(argv[1], argv + 1);
		_exit(127);
	}
	for (;;) {
		if (waitpid(pid, &st, WUNTRACED) != pid)
			return 2;
		if (WIFSTOPPED(st)) {
			propagated++;
			kill(getpid(), SIGSTOP);
			kill(pid, SIGCONT);
			continue;
		}
		mt_say_fact("propagated", propagated);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
}
