// SPDX-License-Identifier: MIT
/*
 * `stall_consumer [PAIRS]`: stops its parent (memtrack, which runs it as its command) with
 * SIGSTOP, waits until it is stopped, then makes PAIRS (default 40,000) malloc/free pairs:
 * more records than one interposer ring holds (16,384), so its thread must wait on the full
 * ring (back-pressure) whatever the machine's speed. A child resumes memtrack (SIGCONT) after
 * 300 ms. Nothing here allocates before the pairs (raw reads of /proc, no stdio).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "expect.h"

void *volatile stall_sink;

/* The state letter of /proc/<pid>/stat, or 0. */
static char proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
	return p && p[1] == ' ' ? p[2] : 0;
}

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
	for (i = 0; i < 5000 && proc_state(mt) != 'T'; i++)
		nanosleep(&ms, NULL);
	if (proc_state(mt) != 'T')
		return 4;
	for (long k = 0; k < pairs; k++) {
		void *p = malloc(64);

		stall_sink = p;
		free(p);
	}
	waitpid(child, NULL, 0);
	return 0;
}
