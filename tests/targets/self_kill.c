// SPDX-License-Identifier: MIT
/* `self_kill SIG`: kills itself with signal SIG (default SIGTERM), for 128+N passthrough. */
#include <signal.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int sig = argc > 1 ? atoi(argv[1]) : SIGTERM;

	/* an inherited SIG_IGN would make raise() a no-op */
	signal(sig, SIG_DFL);
	raise(sig);
	return 1;
}
