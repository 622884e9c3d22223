// SPDX-License-Identifier: MIT
/*
 * Short-lived processes for --stacks (built -O2 -fomit-frame-pointer, like stacks.c): the parent
 * runs itself as "child" CHILDREN times (fork, exec, wait), one at a time; each child allocates
 * along known paths and exits at once, gone (reaped) long before memtrack consumes its records,
 * so its stacks can only be unwound with maps read while it lived, image by image:
 *   main -> sp         1 x malloc(200)      the parent, first
 *   main -> sf         1 x malloc(700)      each fork child, before its exec (the parent's image)
 *   main -> sa -> sb   4 x malloc(1000)     each exec'd child
 *   main -> sc         2 x calloc(1, 3000)  each exec'd child
 */
#include <string.h>
#include <sys/wait.h>
#include "expect.h"

#define NOIPA	 __attribute__((noipa))
#define CHILDREN 10

static void *volatile keep[8];
static volatile int sink;

NOIPA void sb(void)
{
	for (int i = 0; i < 4; i++)
		keep[i] = malloc(1000);
	sink++;
}

NOIPA void sa(void)
{
	sb();
	sink++;
}

NOIPA void sp(void)
{
	keep[6] = malloc(200);
	sink++;
}

NOIPA void sf(void)
{
	keep[7] = malloc(700);
	sink++;
}

NOIPA void sc(void)
{
	for (int i = 0; i < 2; i++)
		keep[4 + i] = calloc(1, 3000);
	sink++;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child")) {
		sa();
		sc();
		return 0;
	}
	sp();
	for (int i = 0; i < CHILDREN; i++) {
		int status;
		pid_t pid = fork();

		if (pid == 0) {
			sf();
			execl("/proc/self/exe", argv[0], "child", (char *)NULL);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			return 1;
	}
	return 0;
}
