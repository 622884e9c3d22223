// SPDX-License-Identifier: MIT
/*
 * `ptraced_exec PROGRAM [ARGS...]`: a minimal debugger. Forks a child that asks to be traced
 * (PTRACE_TRACEME), stops itself, then execs PROGRAM; the parent continues it through every
 * stop, passing each signal on as a debugger does, and reports on the side channel every
 * signal the child received ("signal", SIZE = the number) other than its own first SIGSTOP
 * and the exec's SIGTRAP event. Exits with the child's status (128 + N for signal N).
 */
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include "expect.h"

int main(int argc, char **argv)
{
	int st;
	pid_t pid;

	if (argc < 2)
		return 2;
	mt_expect_init();
	pid = fork();
	if (pid < 0)
		return 2;
	if (!pid) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(126);
		raise(SIGSTOP);
		execv(argv[1], argv + 1);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st)) /* its own SIGSTOP */
		return 2;
	if (ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_TRACEEXEC) ||
	    ptrace(PTRACE_CONT, pid, NULL, NULL))
		return 2;
	for (;;) {
		int sig;

		if (waitpid(pid, &st, 0) != pid)
			return 2;
		if (WIFEXITED(st))
			return WEXITSTATUS(st);
		if (WIFSIGNALED(st))
			return 128 + WTERMSIG(st);
		sig = WSTOPSIG(st);
		if (st >> 8 == (SIGTRAP | (PTRACE_EVENT_EXEC << 8))) {
			sig = 0; /* the exec event */
		} else {
			mt_say_fact("signal", (uint64_t)sig);
		}
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig))
			return 2;
	}
}
