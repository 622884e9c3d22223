// SPDX-License-Identifier: MIT
/*
 * `window_cost [CALLS [ROUNDS]]`: what a MEMTRACK_START() / _STOP() / _MARK() call costs in a
 * program that is not tracked (the semaphore is 0). Rounds interleave a loop of CALLS macro
 * calls with the same loop without them; prints the median per-call difference of each macro,
 * in ns. Under memtrack (the semaphore raised) every call traps into the kernel instead: run
 * it with a small CALLS there to see that cost.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "memtrack.h"

#define MAX_ROUNDS 101

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The loops: the same body but for the macro; the barrier keeps the loop a loop. */
#define LOOP(calls, stmt)                                                                          \
	do {                                                                                       \
		for (unsigned long i = 0; i < (calls); i++) {                                      \
			stmt;                                                                      \
			__asm__ __volatile__("" ::: "memory");                                     \
		}                                                                                  \
	} while (0)

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	unsigned long calls = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000000;
	int rounds = argc > 2 ? atoi(argv[2]) : 21;
	double d[3][MAX_ROUNDS];
	static const char *const names[3] = {"MEMTRACK_START", "MEMTRACK_STOP", "MEMTRACK_MARK"};

	if (rounds < 1 || rounds > MAX_ROUNDS || !calls)
		return 2;
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < 3; k++) {
			double t0 = now_ns(), t1, t2;

			LOOP(calls, (void)0);
			t1 = now_ns();
			if (k == 0)
				LOOP(calls, MEMTRACK_START());
			else if (k == 1)
				LOOP(calls, MEMTRACK_STOP());
			else
				LOOP(calls, MEMTRACK_MARK("a marker"));
			t2 = now_ns();
			d[k][r] = ((t2 - t1) - (t1 - t0)) / (double)calls;
		}
	}
	for (int k = 0; k < 3; k++) {
		qsort(d[k], (size_t)rounds, sizeof(double), cmp);
		printf("%-15s %s: %+.3f ns per call (median of %d rounds of %lu; min %+.3f, max "
		       "%+.3f)\n",
		       names[k], memtrack_semaphore ? "tracked" : "untracked", d[k][rounds / 2],
		       rounds, calls, d[k][0], d[k][rounds - 1]);
	}
	return 0;
}
