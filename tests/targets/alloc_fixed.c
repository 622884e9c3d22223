// SPDX-License-Identifier: MIT
/*
 * `alloc_fixed COUNT BYTES`: COUNT blocks of BYTES each, all live at once, then all freed; no
 * other allocation (no stdio). Its peak heap is COUNT * BYTES exactly, the same every run: the
 * deterministic program memtrack-bench's memory-mode test measures.
 * `alloc_fixed COUNT BYTES exec PROGRAM ARGS...`: then execs PROGRAM (exit 127 if it cannot):
 * chains of 32- and 64-bit builds (alloc_fixed32, test_foreign_abi).
 * `alloc_fixed COUNT BYTES hold MS`: then sleeps MS milliseconds before it exits (a process
 * that lives a little, test_login_under_queue_auto).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BLOCKS 4096

static void *volatile blocks[MAX_BLOCKS]; /* volatile: -O2 must keep every pair */

int main(int argc, char **argv)
{
	unsigned long count = argc > 1 ? strtoul(argv[1], NULL, 10) : 0;
	unsigned long bytes = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;

	if (count > MAX_BLOCKS || bytes == 0)
		return 2;
	for (unsigned long i = 0; i < count; i++) {
		blocks[i] = malloc(bytes);
		if (!blocks[i])
			return 1;
		memset(blocks[i], 1, bytes); /* resident, as data a program uses */
	}
	for (unsigned long i = 0; i < count; i++)
		free(blocks[i]);
	if (argc > 4 && !strcmp(argv[3], "exec")) {
		execv(argv[4], argv + 4);
		return 127;
	}
	if (argc > 4 && !strcmp(argv[3], "hold")) {
		long ms = strtol(argv[4], NULL, 10);

		nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
	}
	return 0;
}
