// SPDX-License-Identifier: MIT
/*
 * The interposer's edge cases, each call reported on the side channel:
 *   preload_edges          a raw clone() child (no CLONE_VM, no atfork handlers: glibc does not
 *                          know it forked) allocates; a signal handler allocates; a vfork child
 *                          execs; a thread allocates and exits
 *   preload_edges abort    allocates, then abort()s: what was written before must survive
 *   preload_edges threads N  N threads in waves of 64 (more than the interposer's slots over
 *                          the run: slots come back at thread exit), one pair each
 *   preload_edges shm      reports the mode of the shared memory named in the environment and
 *                          the memtrack pid in its name
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "expect.h"

static void *volatile sink;

static void one_pair(size_t size)
{
	void *p = malloc(size);

	mt_say("malloc", MT_P(p), 0, size);
	sink = p;
	mt_say("free", MT_P(p), 0, 0);
	free(p);
}

static void on_usr1(int sig)
{
	(void)sig;
	one_pair(4321); /* not async-signal-safe in general; fine here: nothing else allocates */
}

static void *thread_body(void *arg)
{
	(void)arg;
	one_pair(777);
	return NULL;
}

static int edges(void)
{
	pid_t pid;
	pthread_t th;
	int st;

	one_pair(100);
	/* raw clone: a fork glibc does not see */
	pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
	if (pid == 0) {
		one_pair(2222);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 1;
	signal(SIGUSR1, on_usr1);
	raise(SIGUSR1);
	pid = vfork();
	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 1;
	if (pthread_create(&th, NULL, thread_body, NULL) || pthread_join(th, NULL))
		return 1;
	one_pair(300);
	return 0;
}

static int many_threads(int n)
{
	pthread_t th[64];

	for (int done = 0; done < n;) {
		int k = n - done < 64 ? n - done : 64;

		for (int i = 0; i < k; i++)
			if (pthread_create(&th[i], NULL, thread_body, NULL))
				return 1;
		for (int i = 0; i < k; i++)
			pthread_join(th[i], NULL);
		done += k;
	}
	return 0;
}

static int shm(void)
{
	const char *path = getenv("MEMTRACK_PRELOAD_SHM");
	struct stat st;
	int pid = 0;

	if (!path || stat(path, &st) || sscanf(path, "/dev/shm/memtrack-%d-", &pid) != 1)
		return 1;
	mt_say_fact("shm_mode", st.st_mode);
	mt_say_fact("shm_pid", (uint64_t)pid);
	return 0;
}

int main(int argc, char **argv)
{
	mt_expect_init();
	free(malloc(1));
	if (argc > 1 && !strcmp(argv[1], "abort")) {
		void *p = malloc(5555);

		sink = p;
		mt_say("malloc", MT_P(p), 0, 5555);
		abort();
	}
	if (argc > 2 && !strcmp(argv[1], "threads"))
		return many_threads(atoi(argv[2]));
	if (argc > 1 && !strcmp(argv[1], "shm"))
		return shm();
	return edges();
}
