// SPDX-License-Identifier: MIT
/*
 * `child_wrapper MODE PROGRAM [ARGS...]`: runs PROGRAM as its child the way a tool that holds
 * a child does, and exits with the child's status (128 + N for signal N).
 *   ptrace     a minimal debugger: the child asks to be traced (PTRACE_TRACEME), stops itself,
 *              then execs; the parent continues it through every stop, passing each signal on,
 *              and reports every signal the child received ("signal", SIZE = the number) but
 *              its own first SIGSTOP and the exec's SIGTRAP event.
 *   propagate  job control passed on, as su, runuser and sudo do: waits with WUNTRACED, and when
 *              the child stops, stops itself (SIGSTOP) and, once continued, continues the
 *              child. Reports "propagated" (SIZE = the times it stopped itself) at the end.
 *   nobody     the child becomes user and group 65534 (no supplementary groups) before its
 *              exec, as runuser does; the parent waits plainly (no job control).
 */
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <grp.h>
#include <unistd.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include "expect.h"

static int status_of(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int traced(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st)) /* its own SIGSTOP */
		return 2;
	if (ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_TRACEEXEC) ||
	    ptrace(PTRACE_CONT, pid, NULL, NULL))
		return 2;
	for (;;) {
		int sig;

		if (waitpid(pid, &st, 0) != pid)
			return 2;
		if (!WIFSTOPPED(st))
			return status_of(st);
		sig = WSTOPSIG(st);
		if (st >> 8 == (SIGTRAP | (PTRACE_EVENT_EXEC << 8)))
			sig = 0; /* the exec event */
		else
			mt_say_fact("signal", (uint64_t)sig);
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig))
			return 2;
	}
}

static int propagating(pid_t pid)
{
	uint64_t propagated = 0;
	int st;

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
		return status_of(st);
	}
}

int main(int argc, char **argv)
{
	bool trace, nobody;
	pid_t pid;

	if (argc < 3 ||
	    (strcmp(argv[1], "ptrace") && strcmp(argv[1], "propagate") && strcmp(argv[1], "nobody")))
		return 2;
	trace = !strcmp(argv[1], "ptrace");
	nobody = !strcmp(argv[1], "nobody");
	mt_expect_init();
	pid = fork();
	if (pid < 0)
		return 2;
	if (!pid) {
		if (trace && ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(126);
		if (trace)
			raise(SIGSTOP);
		if (nobody && (setgroups(0, NULL) || setgid(65534) || setuid(65534)))
			_exit(126);
		execv(argv[2], argv + 2);
		_exit(127);
	}
	if (nobody) {
		int st;

		return waitpid(pid, &st, 0) == pid ? status_of(st) : 2;
	}
	return trace ? traced(pid) : propagating(pid);
}
