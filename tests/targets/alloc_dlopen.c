// SPDX-License-Identifier: MIT
/*
 * An allocator that appears after start: dlopen libjemalloc.so.2 (RTLD_LOCAL, so it does not
 * interpose libc's malloc) and call its entry points through dlsym. The tracker has to notice
 * the new executable mapping and attach to it before the calls (or catch them some other way).
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "expect.h"

#define TUNABLE "glibc.rtld.optional_static_tls=65536"

/*
 * Debian's libjemalloc uses initial-exec TLS, which a dlopen can only get from the surplus of
 * the static TLS block; glibc's default surplus is too small ("cannot allocate memory in
 * static TLS block"). Re-exec once with a larger surplus, as a program that dlopens jemalloc
 * has to be run. The extra exec happens before any allocation under test.
 */
static void ensure_tls_surplus(char **argv)
{
	const char *t = getenv("GLIBC_TUNABLES");

	if (t && strstr(t, "optional_static_tls"))
		return;
	setenv("GLIBC_TUNABLES", TUNABLE, 1);
	execv("/proc/self/exe", argv);
}

int main(int argc, char **argv)
{
	void *(*je_malloc)(size_t), *(*je_calloc)(size_t, size_t), *(*je_realloc)(void *, size_t);
	void (*je_free)(void *);
	void *h, *a, *b, *c;
	uintptr_t o;
	struct timespec settle = {0, 200 * 1000 * 1000};

	(void)argc;
	ensure_tls_surplus(argv);
	mt_expect_init();
	h = dlopen("libjemalloc.so.2", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 2;
	je_malloc = (void *(*)(size_t))dlsym(h, "malloc");
	je_calloc = (void *(*)(size_t, size_t))dlsym(h, "calloc");
	je_realloc = (void *(*)(void *, size_t))dlsym(h, "realloc");
	je_free = (void (*)(void *))dlsym(h, "free");
	if (!je_malloc || !je_calloc || !je_realloc || !je_free)
		return 3;
	/*
	 * A tracker that attaches on a new mapping asynchronously needs a moment; a real program
	 * would also not allocate the very instant dlopen returns. The desired behaviour is that
	 * every call below is seen.
	 */
	nanosleep(&settle, NULL);
	je_free(je_malloc(1));
	mt_say_fact("begin", 0);
	a = je_malloc(54321);
	mt_say("malloc", MT_P(a), 0, 54321);
	b = je_calloc(3, 1111);
	mt_say("calloc", MT_P(b), 0, 3333);
	c = je_malloc(64);
	mt_say("malloc", MT_P(c), 0, 64);
	o = MT_P(c);
	c = je_realloc(c, 65536);
	mt_say("realloc", MT_P(c), MT_P(o), 65536);
	mt_say("free", MT_P(a), 0, 0);
	je_free(a);
	mt_say("free", MT_P(b), 0, 0);
	je_free(b);
	mt_say("free", MT_P(c), 0, 0);
	je_free(c);
	mt_say_fact("end", 0);
	return 0;
}
