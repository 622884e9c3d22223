// SPDX-License-Identifier: MIT
/*
 * fork: the child allocates known sizes and forks a grandchild that does too; each exits and
 * is waited for. The parent reports each child's pid ("fork", SIZE = child pid) and allocates
 * after the wait, so the tests can tell whose events are whose.
 * `forker N`: N children one after the other instead (child i allocates 1000 + i and 3x that),
 * to check that the tracker's per-process state survives many short-lived processes.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "expect.h"

static void child_work(size_t base)
{
	free(malloc(1)); /* a fresh process inherits the arena, but stay symmetric with others */
	mt_alloc_round(base);
}

static int many(int n)
{
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0)
			return 1;
		if (pid == 0) {
			child_work(1000 + (size_t)i);
			_exit(0);
		}
		mt_say_fact("fork", (uint64_t)pid);
		waitpid(pid, NULL, 0);
	}
	return 0;
}

int main(int argc, char **argv)
{
	pid_t pid, gpid;
	void *p;

	mt_expect_init();
	if (argc > 1)
		return many(atoi(argv[1]));
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		child_work(12345);
		gpid = fork();
		if (gpid == 0) {
			child_work(22222);
			_exit(0);
		}
		if (gpid > 0) {
			mt_say_fact("fork", (uint64_t)gpid);
			waitpid(gpid, NULL, 0);
		}
		_exit(0);
	}
	mt_say_fact("fork", (uint64_t)pid);
	waitpid(pid, NULL, 0);
	p = malloc(54321);
	mt_say("malloc", MT_P(p), 0, 54321);
	mt_say("free", MT_P(p), 0, 0);
	free(p);
	return 0;
}
