// SPDX-License-Identifier: MIT
/*
 * `fork_chain N MS COUNT`: N generations of fork, each parent exiting at once (a daemon's
 * double fork, drawn out), so that the tree keeps changing while memtrack walks it; the last
 * child sleeps MS milliseconds, then makes COUNT malloc(777), kept until all are made, then
 * freed (test_glibc_kept_for_fork_chain).
 */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *volatile kept[4096];

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100, count = argc > 3 ? atoi(argv[3]) : 100;
	long ms = argc > 2 ? atol(argv[2]) : 0;
	struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};

	if (count > 4096)
		count = 4096;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();

		if (p < 0)
			return 1;
		if (p > 0)
			_exit(0);
	}
	nanosleep(&ts, NULL);
	for (int i = 0; i < count; i++)
		kept[i] = malloc(777);
	for (int i = 0; i < count; i++)
		free(kept[i]);
	return 0;
}
