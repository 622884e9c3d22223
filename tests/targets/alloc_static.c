// SPDX-License-Identifier: MIT
/*
 * Linked with -static: glibc's malloc lives in the executable's own symbol table, no shared
 * libc to attach to. The usual calls, one event each.
 */
#include <malloc.h>
#include <stdlib.h>
#include "expect.h"

int main(void)
{
	struct mt_std s;

	mt_expect_init();
	free(malloc(1));
	mt_say_fact("begin", 0);
	mt_std_alloc(&s, 0);
	mt_std_free(&s);
	mt_say_fact("end", 0);
	return 0;
}
