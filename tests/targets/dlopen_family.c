// SPDX-License-Identifier: MIT
/*
 * `dlopen_family`: dlopen libmimalloc (RTLD_LOCAL: it does not become the process's malloc) and
 * call its allocator at once, with no pause after the load: its calls are recorded only if
 * memtrack attached to it before dlsym returned (the interposer's dlopen announcement, or a
 * uprobe already on the file). Run twice in one tree, the second load brings a file memtrack
 * inspected at the first (src/preload/preload_dl.c: no stop then). Exits 2 without mimalloc.
 */
#include <dlfcn.h>
#include "expect.h"

static void *volatile sink; /* every pointer escapes: -O2 keeps each call */

int main(void)
{
	void *(*mi_malloc)(size_t), *(*mi_calloc)(size_t, size_t);
	void (*mi_free)(void *);
	void *h, *a, *b;

	mt_expect_init();
	h = dlopen("libmimalloc.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 2;
	mi_malloc = (void *(*)(size_t))dlsym(h, "mi_malloc");
	mi_calloc = (void *(*)(size_t, size_t))dlsym(h, "mi_calloc");
	mi_free = (void (*)(void *))dlsym(h, "mi_free");
	if (!mi_malloc || !mi_calloc || !mi_free)
		return 3;
	mt_say_fact("begin", 0);
	a = mi_malloc(4321);
	sink = a;
	mt_say("malloc", MT_P(a), 0, 4321);
	b = mi_calloc(3, 777);
	sink = b;
	mt_say("calloc", MT_P(b), 0, 2331);
	mi_free(a);
	mt_say("free", MT_P(a), 0, 0);
	mi_free(b);
	mt_say("free", MT_P(b), 0, 0);
	mt_say_fact("end", 0);
	return 0;
}
