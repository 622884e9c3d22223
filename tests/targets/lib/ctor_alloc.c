// SPDX-License-Identifier: MIT
/* libctor_alloc.so, dlopen'ed by tests/targets/dlopen_ctor.c: its constructor allocates. */
#include <stdlib.h>

void *volatile ctor_keep[3];

__attribute__((noipa)) void ctor_alloc(void)
{
	for (int i = 0; i < 3; i++)
		ctor_keep[i] = malloc(7777);
}

__attribute__((constructor)) static void ctor_run(void)
{
	ctor_alloc();
}
