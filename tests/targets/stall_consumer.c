// SPDX-License-Identifier: MIT
/*
 * `stall_consumer [PAIRS]`: stops its parent (memtrack, which runs it as its command) with
 * SIGSTOP, waits until it is stopped, then makes PAIRS (default 40,000) malloc/free pairs:
 * more records than one interposer ring holds (16,384), so its thread must wait on the full
 * ring (back-pressure) whatever the machine's speed. A child resumes memtrack (SIGCONT) after
 * 300 ms. Nothing here allocates before the pairs (raw reads of /proc, no stdio).
 */
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "expect.h"
#include "../lib/mt_proc_state.h"

void *volatile stall_sink;

int main(int argc, char **argv)
{
	long pairs = argc > 1 ? atol(argv[1]) : 40000;
	pid_t mt = getppid(), child;
	struct timespec ms = {0, 1000000}, wait300 = {0, 300000000};
	int i;

	child = fork();
	if (child < 0)
		return 2;
	if (child == 0) {
		nanosleep(&wait300, NULL);
		kill(mt, SIGCONT);
		_exit(0);
	}
	if (kill(mt, SIGSTOP))
		return 3;
	for (i = 0; i < 5000 && mt_proc_state(mt) != 'T'; i++)
		nanosleep(&ms, NULL);
	if (mt_proc_state(mt) != 'T')
		return 4;
	for (long k = 0; k < pairs; k++) {
		void *p = malloc(64);

		stall_sink = p;
		free(p);
	}
	waitpid(child, NULL, 0);
	return 0;
}
