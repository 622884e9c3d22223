// SPDX-License-Identifier: MIT
/*
 * `neighbour SECONDS [SIZE]`: malloc/free SIZE bytes (default 123457, easy to recognise) in a
 * loop for SECONDS. The tests run one copy outside memtrack while memtrack tracks another
 * program: none of the outsider's calls may show up. Reports its pid ("pid") first.
 */
#include <stdlib.h>
#include <time.h>
#include "expect.h"

static void *volatile sink;

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3;
	size_t size = argc > 2 ? strtoul(argv[2], NULL, 0) : 123457;
	uint64_t end;
	unsigned long n = 0;

	mt_expect_init();
	mt_say_fact("pid", 0);
	end = mt_now_ns() + (uint64_t)(secs * 1e9);
	while (mt_now_ns() < end) {
		struct timespec ts = {0, 1000 * 1000};

		sink = malloc(size);
		free(sink);
		n++;
		nanosleep(&ts, NULL);
	}
	mt_say_fact("loops", n);
	return 0;
}
