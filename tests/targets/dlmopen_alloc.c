// SPDX-License-Identifier: MIT
/*
 * `dlmopen_alloc [N]`: loads libz into a new link-map namespace (dlmopen(LM_ID_NEWLM), which
 * brings a libc of its own there) and makes N (default 100) deflateInit/deflateEnd pairs
 * through it: each allocates and frees zlib's state with that libc's malloc and free (5
 * blocks a pair). Reports "pairs" (SIZE = N) on the side channel. Exit status 2: no libz.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include <zlib.h>
#include "expect.h"

int main(int argc, char **argv)
{
	int (*init)(z_streamp, int, const char *, int);
	int (*end)(z_streamp);
	long n = argc > 1 ? atol(argv[1]) : 100;
	void *h;

	mt_expect_init();
	h = dlmopen(LM_ID_NEWLM, "libz.so.1", RTLD_NOW);
	if (!h)
		return 2;
	init = (int (*)(z_streamp, int, const char *, int))dlsym(h, "deflateInit_");
	end = (int (*)(z_streamp))dlsym(h, "deflateEnd");
	if (!init || !end)
		return 2;
	for (long i = 0; i < n; i++) {
		z_stream s;

		memset(&s, 0, sizeof(s));
		if (init(&s, 6, ZLIB_VERSION, (int)sizeof(s)) != Z_OK)
			return 3;
		end(&s);
	}
	mt_say_fact("pairs", (uint64_t)n);
	return 0;
}
