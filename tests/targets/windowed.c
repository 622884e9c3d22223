// SPDX-License-Identifier: MIT
/*
 * `windowed [MODE]`: the measured window's proof. 50 MiB allocated (and kept) before
 * MEMTRACK_START(), 1 MiB then 2 MiB live together inside it, a MEMTRACK_MARK between them, both
 * freed before MEMTRACK_STOP(), 30 MiB after it. Window: peak heap exactly 3 MiB, 2 allocations.
 * MODE "free-old": also frees the 50 MiB block inside the window (a free of an older block: it
 * must not lower anything of the window's). MODE "none": no START/STOP at all (measured whole).
 * MODE "twice": a second START/STOP pair with 4 MiB inside (window peak 4 MiB, 3 allocations).
 * MODE "fork": after the mark, a child (forked inside the window: it inherits it) allocates
 * 5 MiB while the parent's 1 MiB is live (window peak 6 MiB, 3 allocations).
 * No stdio: nothing else allocates.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "memtrack.h"

#define MIB (1024ul * 1024)

static void *volatile before, *volatile in1, *volatile in2, *volatile in3, *volatile after;
static void *volatile child;

static void *touch(size_t n)
{
	void *p = malloc(n);

	if (p)
		memset(p, 1, n);
	return p;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int win = strcmp(mode, "none") != 0;

	before = touch(50 * MIB);
	if (win)
		MEMTRACK_START();
	in1 = touch(1 * MIB);
	MEMTRACK_MARK("one MiB live");
	if (!strcmp(mode, "fork")) {
		int status;
		pid_t pid = fork();

		if (pid == 0) {
			child = touch(5 * MIB);
			free(child);
			_exit(child ? 0 : 1);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
			return 1;
	}
	in2 = touch(2 * MIB);
	if (!strcmp(mode, "free-old"))
		free(before);
	free(in2);
	free(in1);
	if (win)
		MEMTRACK_STOP();
	if (!strcmp(mode, "twice")) {
		MEMTRACK_START();
		in3 = touch(4 * MIB);
		free(in3);
		MEMTRACK_STOP();
	}
	after = touch(30 * MIB);
	free(after);
	if (strcmp(mode, "free-old"))
		free(before);
	return before && in1 && in2 && after ? 0 : 1;
}
