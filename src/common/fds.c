// SPDX-License-Identifier: MIT
#include <sys/syscall.h>
#include <unistd.h>
#include "common/fds.h"

void fds__close_all_but(unsigned from, int *keep, int n)
{
	unsigned lo = from;

	for (int i = 1; i < n; i++) /* insertion sort */
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int x = keep[j];

			keep[j] = keep[j - 1];
			keep[j - 1] = x;
		}
	for (int i = 0; i < n; i++) {
		if (keep[i] < (int)lo)
			continue;
		if ((unsigned)keep[i] > lo)
			syscall(SYS_close_range, lo, (unsigned)keep[i] - 1, 0);
		lo = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, lo, ~0u, 0);
}
