// SPDX-License-Identifier: MIT
/*
 * Threads that allocate, free and exit, in two rounds (the second reuses the first's stacks).
 * Each worker frees small blocks, so glibc's per-thread cache holds some when it exits; glibc
 * then frees the cache's blocks and the cache itself with direct calls to __libc_free, which
 * are not the program's calls. Every allocator call a worker makes in its life is reported;
 * it makes no other (a worker's first malloc sets up its arena and cache without a hooked call).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "expect.h"

#define NTHREADS 4
#define ROUNDS	 2
#define NBLOCKS	 24

static void *body(void *arg)
{
	void *volatile p[NBLOCKS];

	mt_say_fact("begin", (uintptr_t)arg);
	for (unsigned i = 0; i < NBLOCKS; i++) {
		/* tcache sizes (up to 1032 bytes), a few in each bin, and one larger */
		size_t n = i + 1 == NBLOCKS ? 5000 : 24 + 100 * (i % 8);

		p[i] = malloc(n);
		mt_say("malloc", MT_P(p[i]), 0, n);
	}
	for (unsigned i = 0; i < NBLOCKS; i++) {
		mt_say("free", MT_P(p[i]), 0, 0);
		free(p[i]);
	}
	mt_say_fact("end", (uintptr_t)arg);
	return NULL;
}

int main(void)
{
	pthread_t th[NTHREADS];

	mt_expect_init();
	for (unsigned r = 0; r < ROUNDS; r++) {
		for (unsigned k = 0; k < NTHREADS; k++)
			if (pthread_create(&th[k], NULL, body, (void *)(uintptr_t)(r * NTHREADS + k)))
				return 1;
		for (unsigned k = 0; k < NTHREADS; k++)
			pthread_join(th[k], NULL);
	}
	return 0;
}
