// SPDX-License-Identifier: MIT
/*
 * `dlopen_mimalloc_exe MS`: jemalloc linked into the executable (it defines malloc: auto mode
 * gives it uprobes on itself and glibc's dlopen stop only), which sleeps MS milliseconds, then
 * dlopens Debian's libmimalloc (RTLD_LOCAL) and calls mi_malloc and mi_free through dlsym: only
 * the dlopen stop lets memtrack attach to that library before the calls
 * (tests/bpf/test_track_glibc.c).
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include "expect.h"

void *mallocx(size_t size, int flags); /* jemalloc's: links its malloc into the executable */

int main(int argc, char **argv)
{
	long ms = argc > 1 ? atol(argv[1]) : 0;
	void *(*mi_malloc)(size_t);
	void (*mi_free)(void *);
	void *volatile p;
	void *h;

	mt_expect_init();
	p = mallocx(64, 0);
	mt_say("malloc", MT_P(p), 0, 64);
	free(p);
	mt_say("free", MT_P(p), 0, 0);
	nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000L}, NULL);
	h = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 2;
	mi_malloc = (void *(*)(size_t))dlsym(h, "mi_malloc");
	mi_free = (void (*)(void *))dlsym(h, "mi_free");
	if (!mi_malloc || !mi_free)
		return 2;
	p = mi_malloc(4321);
	mt_say("malloc", MT_P(p), 0, 4321);
	mi_free(p);
	mt_say("free", MT_P(p), 0, 0);
	return 0;
}
