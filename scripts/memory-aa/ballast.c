// SPDX-License-Identifier: MIT
/*
 * LD_PRELOAD=ballast.so MEMTRACK_AA_BALLAST=N PROG: PROG with a heap N bytes larger, for
 * scripts/memory-aa.sh. Before main one block of N bytes is allocated and written (so it is
 * resident, like data a program uses), and it lives until the destructors run at exit: peak
 * heap and allocated bytes grow by exactly N, allocations by one, peak RSS by about N; leaks do
 * not change. N = 0 allocates nothing: the A side loads the same library with the same
 * environment size, so the block is the only difference.
 */
#include <stdlib.h>
#include <string.h>

static void *volatile ballast; /* volatile: the compiler must not drop the pair */

__attribute__((constructor)) static void ballast__init(void)
{
	const char *s = getenv("MEMTRACK_AA_BALLAST");
	unsigned long long n = s ? strtoull(s, NULL, 10) : 0;

	if (n == 0)
		return;
	ballast = malloc(n);
	if (ballast)
		memset(ballast, 0xa5, n);
}

__attribute__((destructor)) static void ballast__fini(void)
{
	free(ballast);
}
