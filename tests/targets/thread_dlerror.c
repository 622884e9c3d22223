// SPDX-License-Identifier: MIT
/*
 * `thread_dlerror N [rawexit]`: N threads one after another, never two alive at once, each
 * making one malloc(777) (kept until its free) and one failed dlsym. glibc keeps the thread's
 * dlerror message in a buffer it mallocs, and frees it at the thread's exit after the key
 * destructors (__libc_thread_freeres): the interposer's slot for the thread was given back
 * already, and that free takes another. With `rawexit` each thread ends with the exit system
 * call, so no destructor runs at all: its slot is never given back by the thread.
 * test_preload_thread_exit_slots.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *volatile kept;
static void *volatile sym;
static int raw_exit;

static void *one(void *arg)
{
	(void)arg;
	kept = malloc(777);
	sym = dlsym(RTLD_DEFAULT, "memtrack_no_such_symbol");
	free(kept);
	if (raw_exit)
		syscall(SYS_exit, 0); /* the thread alone; pthread_join still sees it end */
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;

	raw_exit = argc > 2 && !strcmp(argv[2], "rawexit");
	for (int i = 0; i < n; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, one, NULL) || pthread_join(t, NULL))
			return 1;
	}
	return 0;
}
