// SPDX-License-Identifier: MIT
/*
 * `thread_dlerror N`: N threads one after another, never two alive at once, each making one
 * malloc(777) (kept until its free) and one failed dlsym. glibc keeps the thread's dlerror
 * message in a buffer it mallocs, and frees it at the thread's exit after the key destructors
 * (__libc_thread_freeres): the interposer's slot for the thread was given back already, and
 * that free claims another that no destructor gives back. test_preload_thread_exit_slots.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

static void *volatile kept;
static void *volatile sym;

static void *one(void *arg)
{
	(void)arg;
	kept = malloc(777);
	sym = dlsym(RTLD_DEFAULT, "memtrack_no_such_symbol");
	free(kept);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;

	for (int i = 0; i < n; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, one, NULL) || pthread_join(t, NULL))
			return 1;
	}
	return 0;
}
