// SPDX-License-Identifier: MIT
/*
 * The interposer's edge cases, each call reported on the side channel:
 *   preload_edges          a raw clone() child (no CLONE_VM, no atfork handlers: glibc does not
 *                          know it forked) allocates; a signal handler allocates; a vfork child
 *                          allocates, then execs; a fork child vforks first thing, its vfork
 *                          child allocates and execs, then it allocates; a thread allocates
 *                          and exits
 *   preload_edges abort    allocates, then abort()s: what was written before must survive
 *   preload_edges threads N  N threads in waves of 64 (more than the interposer's slots over
 *                          the run: slots come back at thread exit), one pair each
 *   preload_edges shm      reports the mode of the shared memory named in the environment and
 *                          the memtrack pid in its name
 *   preload_edges ring_pages  reports, after a few records and again after 3000 more pairs,
 *                          how far the main thread's ring is mapped in this process
 *                          (/proc/self/pagemap) and how many records it wrote
 *   preload_edges vfork_loop N  a vfork child allocates and execs; then, with no record of the
 *                          parent between, a fork child runs N rounds of (vfork: its child
 *                          allocates 7777 bytes and execs; then one pair of 7778 bytes itself),
 *                          as a dash subshell runs commands. Unreported.
 *   preload_edges pidns_fork  (root) enters a new pid namespace for its children and forks
 *                          one (pid 1 there), which first forks a grandchild that makes 8
 *                          pairs of 13133 bytes, then makes 8 pairs of 13131 bytes itself,
 *                          neither exec'ing; then 8 pairs of 13132 bytes in the parent.
 *                          Unreported: the children's pids differ between namespaces.
 *   preload_edges pidns_vfork  (root) the same namespace entered, then a vfork child that
 *                          makes 4 pairs of 13135 bytes and _exits; then 8 pairs of 13132
 *                          bytes in the parent. Unreported.
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
#include <fcntl.h>
#include <unistd.h>
#include "expect.h"
#include "preload/shm_abi.h"

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
		/* allocates before its exec, as dash does (its path search): the child's, not the
		 * parent's, though it runs on the parent's memory */
		sink = malloc(5556); /* first: one_pair's block must not take its address */
		mt_say("malloc", MT_P(sink), 0, 5556);
		one_pair(5555);
		/* itself, not /bin/true: that may be a static busybox (the VM lane), which no
		 * interposer can serve */
		execl("/proc/self/exe", "preload_edges", "noop", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return 1;
	/* a fork child whose first act is a vfork, before any record of its own: the vfork child
	 * allocates, then the fork child (each under its own pid, not the parent's) */
	pid = fork();
	if (pid == 0) {
		pid_t v = vfork();

		if (v == 0) {
			sink = malloc(6661);
			mt_say("malloc", MT_P(sink), 0, 6661);
			execl("/proc/self/exe", "preload_edges", "noop", (char *)NULL);
			_exit(127);
		}
		if (v < 0 || waitpid(v, &st, 0) != v)
			_exit(1);
		one_pair(6662);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
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

/* Where the calling thread's ring is in the shared memory; NULL when not found. */
static const struct mt_event *my_ring(uint64_t *head, uint32_t *nrec)
{
	const char *path = getenv("MEMTRACK_PRELOAD_SHM");
	char line[512];
	uintptr_t start = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && path && fgets(line, sizeof(line), f)) {
		size_t n = strlen(line), pl = strlen(path);

		if (n > pl && !strncmp(line + n - pl - 1, path, pl) && !start)
			start = (uintptr_t)strtoull(line, NULL, 16);
	}
	if (f)
		fclose(f);
	if (!start)
		return NULL;
	{
		const struct mt_shm_hdr *h = (const void *)start;
		const struct mt_shm_slot *sl = (const void *)(start + h->slots_off);

		for (uint32_t i = 0; i < h->next_slot; i++) {
			if (sl[i].tid != (int32_t)syscall(SYS_gettid) || sl[i].state != MT_SLOT_OWNED)
				continue;
			*head = __atomic_load_n(&sl[i].head, __ATOMIC_ACQUIRE);
			*nrec = h->slot_records;
			return (const void *)(start + h->data_off +
					      (size_t)i * h->slot_records * sizeof(struct mt_event));
		}
	}
	return NULL;
}

/* The ring's pages present in this process: how many, and the first one absent. */
static void say_ring(const char *when)
{
	uint64_t head = 0, present = 0, first_absent = ~0ull;
	uint32_t nrec = 0;
	const struct mt_event *ring = my_ring(&head, &nrec);
	long pg = sysconf(_SC_PAGESIZE);
	int fd = open("/proc/self/pagemap", O_RDONLY);
	char op[32];

	if (!ring || fd < 0)
		exit(3);
	for (uint64_t p = 0; p < (uint64_t)nrec * sizeof(*ring) / (uint64_t)pg; p++) {
		uint64_t e = 0;

		if (pread(fd, &e, 8, (off_t)(((uintptr_t)ring / (uint64_t)pg + p) * 8)) != 8)
			exit(3);
		if (e >> 63)
			present++;
		else if (first_absent == ~0ull)
			first_absent = p;
	}
	close(fd);
	snprintf(op, sizeof(op), "ring_head_%s", when);
	mt_say_fact(op, head);
	snprintf(op, sizeof(op), "ring_present_%s", when);
	mt_say_fact(op, present);
	snprintf(op, sizeof(op), "ring_absent_%s", when);
	mt_say_fact(op, first_absent);
}

static int ring_pages(void)
{
	say_ring("a");
	for (int i = 0; i < 3000; i++) { /* 6000 records, unreported */
		void *p = malloc(48);

		sink = p;
		free(p);
	}
	say_ring("b");
	return 0;
}

/* n malloc/free pairs of size bytes, each pointer escaping */
static void pairs(size_t size, int n)
{
	for (int i = 0; i < n; i++) {
		void *p = malloc(size);

		sink = p;
		free(p);
	}
}

static int waited_ok(pid_t pid)
{
	int st;

	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st);
}

static int pidns_fork(void)
{
	pid_t pid;

	if (unshare(CLONE_NEWPID))
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		/* before any call of its own: it still holds its parent's answer to "which
		 * namespace", and its child sees it as a parent (getppid() is 1, not 0) */
		pid_t g = fork();

		if (g == 0) {
			pairs(13133, 8);
			_exit(0);
		}
		if (g < 0 || !waited_ok(g))
			_exit(3);
		pairs(13131, 8);
		_exit(0);
	}
	if (!waited_ok(pid))
		return 3;
	pairs(13132, 8);
	return 0;
}

static int pidns_vfork(void)
{
	pid_t pid;

	if (unshare(CLONE_NEWPID))
		return 2;
	pid = vfork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		pairs(13135, 4);
		_exit(0);
	}
	if (!waited_ok(pid))
		return 3;
	pairs(13132, 8);
	return 0;
}

/* vfork, whose child allocates size bytes and execs noop; waits for it */
static int vfork_alloc(size_t size)
{
	int st;
	pid_t v = vfork();

	if (v == 0) {
		sink = malloc(size);
		execl("/proc/self/exe", "preload_edges", "noop", (char *)NULL);
		_exit(127);
	}
	return v > 0 && waitpid(v, &st, 0) == v ? 0 : 1;
}

static int vfork_loop(int n)
{
	pid_t pid;
	int st;

	if (vfork_alloc(7770))
		return 1;
	pid = fork(); /* before any record of the parent since its vfork */
	if (pid == 0) {
		for (int i = 0; i < n; i++) {
			if (vfork_alloc(7777))
				_exit(1);
			sink = malloc(7778);
			free(sink);
		}
		_exit(0);
	}
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "noop")) /* the vfork child's exec */
		return 0;
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
	if (argc > 1 && !strcmp(argv[1], "ring_pages"))
		return ring_pages();
	if (argc > 2 && !strcmp(argv[1], "vfork_loop"))
		return vfork_loop(atoi(argv[2]));
	if (argc > 1 && !strcmp(argv[1], "pidns_fork"))
		return pidns_fork();
	if (argc > 1 && !strcmp(argv[1], "pidns_vfork"))
		return pidns_vfork();
	return edges();
}
