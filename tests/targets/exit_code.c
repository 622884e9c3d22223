// SPDX-License-Identifier: MIT
/* `exit_code N`: exits with status N, for the exit-status passthrough tests. */
#include <stdlib.h>

int main(int argc, char **argv)
{
	return argc > 1 ? atoi(argv[1]) : 0;
}
