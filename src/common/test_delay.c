// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <time.h>
#include "common/test_delay.h"

void test_delay__sleep(const char *name, long *ms)
{
	if (*ms < 0) {
		const char *e = getenv(name);

		*ms = e ? strtol(e, NULL, 10) : 0;
		if (*ms < 0)
			*ms = 0;
	}
	if (*ms)
		nanosleep(&(struct timespec){*ms / 1000, *ms % 1000 * 1000000}, NULL);
}
