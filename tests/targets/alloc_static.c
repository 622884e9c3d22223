// SPDX-License-Identifier: MIT
/*
 * Linked with -static: glibc's malloc lives in the executable's own symbol table, no shared
 * libc to attach to. The usual calls, one event each. `alloc_static MS`: then sleeps MS
 * milliseconds before it exits (alive when memtrack looks at it, even not stopped).
 */
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>
#include "expect.h"

int main(int argc, char **argv)
{
	struct mt_std s;

	mt_expect_init();
	free(malloc(1));
	mt_say_fact("begin", 0);
	mt_std_alloc(&s, 0);
	mt_std_free(&s);
	mt_say_fact("end", 0);
	if (argc > 1)
		usleep((useconds_t)strtoul(argv[1], NULL, 10) * 1000);
	return 0;
}
