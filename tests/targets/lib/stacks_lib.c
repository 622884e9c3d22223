// SPDX-License-Identifier: MIT
/* The shared-library callers of tests/targets/stacks.c: libstacks_lib.so (linked) and, built
 * with -DDL, libstacks_dl.so (dlopen'ed). -O2 -fomit-frame-pointer. */
#include <stdlib.h>

extern volatile int lib_sink;
volatile int lib_sink;

#ifdef DL
__attribute__((noipa)) void dl_alloc(void **out, int n, size_t size)
{
	for (int i = 0; i < n; i++)
		out[i] = aligned_alloc(64, size);
	lib_sink++;
}
#else
__attribute__((noipa)) void lib_alloc(void **out, int n, size_t size)
{
	for (int i = 0; i < n; i++)
		out[i] = realloc(NULL, size);
	lib_sink++;
}
#endif
