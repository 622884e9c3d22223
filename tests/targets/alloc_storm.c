// SPDX-License-Identifier: MIT
/*
 * `alloc_storm [N [THREADS]]`: N (default 200000) malloc/free pairs of small sizes (16..79
 * bytes), the benchmarks' worst case for per-call probe cost. With THREADS > 1, each of that
 * many threads does N pairs at the same time (per-thread tracker state under contention).
 * Reports only begin/end per thread and the count.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "expect.h"

static unsigned long n = 200000;

static void *storm(void *arg)
{
	void *volatile p; /* per thread; volatile keeps -O1 from dropping the pairs */

	(void)arg;
	free(malloc(1)); /* a thread's first call sets up its arena */
	mt_say_fact("begin", n);
	for (unsigned long i = 0; i < n; i++) {
		p = malloc(16 + i % 64);
		free(p);
	}
	mt_say_fact("end", n);
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned nthreads = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 1;
	pthread_t th[64];

	if (argc > 1)
		n = strtoul(argv[1], NULL, 0);
	if (nthreads > 64)
		nthreads = 64;
	mt_expect_init();
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
