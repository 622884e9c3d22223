// SPDX-License-Identifier: MIT
/*
 * `alloc_storm [N [THREADS]]` or `alloc_storm [-n N | -d SECONDS] [-t THREADS] [-p PROCS]`:
 * malloc/free pairs of small sizes (16..79 bytes), the benchmarks' worst case for per-call
 * probe cost, from THREADS threads in each of PROCS processes at once (the first process forks
 * the others). Each thread does N pairs (default 200000), or as many as it can in SECONDS.
 * Reports per thread only "begin" (SIZE = N, 0 in duration mode) and "end" (SIZE = the pairs
 * it made), so a test can check every call of every thread was recorded.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "expect.h"

#define MAX_THREADS 64
#define MAX_PROCS   64

static unsigned long n = 200000;
static uint64_t deadline_ns; /* CLOCK_MONOTONIC; 0: count mode */

static void *storm(void *arg)
{
	void *volatile p; /* per thread; volatile keeps -O1 from dropping the pairs */
	unsigned long i;

	(void)arg;
	free(malloc(1)); /* a thread's first call sets up its arena */
	mt_say_fact("begin", deadline_ns ? 0 : n);
	for (i = 0; deadline_ns || i < n; i++) {
		/* the clock is a vDSO call: no allocation, no probe */
		if (deadline_ns && i % 256 == 0 && mt_now_ns() >= deadline_ns)
			break;
		p = malloc(16 + i % 64);
		free(p);
	}
	mt_say_fact("end", i);
	return NULL;
}

static int run_threads(unsigned nthreads)
{
	pthread_t th[MAX_THREADS];

	if (nthreads <= 1) {
		storm(NULL);
		return 0;
	}
	for (unsigned k = 0; k < nthreads; k++)
		if (pthread_create(&th[k], NULL, storm, NULL))
			return 1;
	for (unsigned k = 0; k < nthreads; k++)
		pthread_join(th[k], NULL);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned nthreads = 1, nprocs = 1;
	pid_t kids[MAX_PROCS];
	int opt, rc = 0, st;

	while ((opt = getopt(argc, argv, "n:d:t:p:")) != -1) {
		switch (opt) {
		case 'n':
			n = strtoul(optarg, NULL, 0);
			break;
		case 'd':
			deadline_ns = (uint64_t)(strtod(optarg, NULL) * 1e9);
			break;
		case 't':
			nthreads = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'p':
			nprocs = (unsigned)strtoul(optarg, NULL, 0);
			break;
		default:
			return 2;
		}
	}
	/* the historical form: alloc_storm [N [THREADS]] */
	if (optind < argc)
		n = strtoul(argv[optind++], NULL, 0);
	if (optind < argc)
		nthreads = (unsigned)strtoul(argv[optind], NULL, 0);
	if (nthreads > MAX_THREADS)
		nthreads = MAX_THREADS;
	if (nprocs < 1 || nprocs > MAX_PROCS)
		nprocs = nprocs ? MAX_PROCS : 1;
	mt_expect_init();
	if (deadline_ns)
		deadline_ns += mt_now_ns();
	for (unsigned k = 1; k < nprocs; k++) {
		kids[k] = fork();
		if (kids[k] == 0)
			_exit(run_threads(nthreads));
		if (kids[k] < 0)
			return 1;
	}
	rc = run_threads(nthreads);
	for (unsigned k = 1; k < nprocs; k++)
		if (waitpid(kids[k], &st, 0) != kids[k] || !WIFEXITED(st) || WEXITSTATUS(st))
			rc = 1;
	return rc;
}
