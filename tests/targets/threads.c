// SPDX-License-Identifier: MIT
/*
 * Allocations from three threads: `threads join` (the leader waits for them) or
 * `threads leader-exit` (the leader calls pthread_exit first; the group lives on in its other
 * threads, which allocate after that). Each thread brackets its own calls with begin/end.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "expect.h"

#define NTHREADS   3
#define PER_THREAD 5

static int leader_exits;

static void *body(void *arg)
{
	unsigned k = (unsigned)(uintptr_t)arg;
	void *p[PER_THREAD];

	if (leader_exits) {
		/* long enough for the leader to be gone before anything is allocated */
		struct timespec ts = {0, 200 * 1000 * 1000};

		nanosleep(&ts, NULL);
	}
	/* the first call in a thread sets up its arena: keep that out of the window */
	free(malloc(1));
	mt_say_fact("begin", k);
	for (unsigned i = 0; i < PER_THREAD; i++) {
		size_t n = 10000 * (k + 1) + i; /* thread k's sizes: 10000*(k+1) + i */

		p[i] = malloc(n);
		mt_say("malloc", MT_P(p[i]), 0, n);
	}
	for (unsigned i = 0; i < PER_THREAD; i++) {
		mt_say("free", MT_P(p[i]), 0, 0);
		free(p[i]);
	}
	mt_say_fact("end", k);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[NTHREADS];
	void *m;

	mt_expect_init();
	leader_exits = argc > 1 && !strcmp(argv[1], "leader-exit");
	for (unsigned k = 0; k < NTHREADS; k++)
		if (pthread_create(&th[k], NULL, body, (void *)(uintptr_t)k))
			return 1;
	m = malloc(99999);
	mt_say("malloc", MT_P(m), 0, 99999);
	mt_say("free", MT_P(m), 0, 0);
	free(m);
	if (leader_exits) {
		mt_say_fact("leader_exit", 0);
		pthread_exit(NULL);
	}
	for (unsigned k = 0; k < NTHREADS; k++)
		pthread_join(th[k], NULL);
	return 0;
}
