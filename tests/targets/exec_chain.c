// SPDX-License-Identifier: MIT
/*
 * `exec_chain N`: allocate 1000 + N bytes, report it with "stage N", then exec
 * /proc/self/exe with N - 1, down to 0. The same pid runs every stage; each stage's
 * allocation must be in the artifact, after that stage's Exec event.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "expect.h"

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	char arg[16];
	void *p;

	mt_expect_init();
	mt_say_fact("stage", (uint64_t)n);
	p = malloc(1000 + (size_t)n);
	mt_say("malloc", MT_P(p), 0, 1000 + (size_t)n);
	if (n <= 0)
		return 0;
	/* not freed: exec drops the whole heap */
	snprintf(arg, sizeof(arg), "%d", n - 1);
	execl("/proc/self/exe", "exec_chain", arg, (char *)NULL);
	return 126;
}
