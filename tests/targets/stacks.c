// SPDX-License-Identifier: MIT
/*
 * Known call paths for --stacks, built -O2 -fomit-frame-pointer (targets.mk): no frame
 * pointers, so only a CFI unwinder finds them. Every call below is named in the side channel
 * with its address (op "malloc", "calloc", ...), and its path by a "path" fact before it:
 *   1  main -> a -> b        100 x malloc(1 KiB)
 *   2  main -> c             10 x malloc(64 KiB)
 *   3  main -> thread_main (a thread) -> d   7 x calloc(1, 4 KiB)
 *   4  main -> lib_alloc (libstacks_lib.so, linked)   5 x realloc(NULL, 2 KiB)
 *   5  main -> dl_alloc (libstacks_dl.so, dlopen'ed)   3 x aligned_alloc(64, 512)
 *   6  main -> raise -> (signal frame) on_signal -> e   2 x malloc(3000)
 *   7  main -> (a fork child) f   4 x malloc(5000)
 * then frees the 100 blocks of path 1 (frees have no stack). noipa: no inlining, cloning or
 * tail calls across these functions (`sink` keeps a call from being the last thing done).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include "expect.h"

#define NOIPA __attribute__((noipa))

void lib_alloc(void **out, int n, size_t size);

static void *volatile keep[256];
static volatile int sink;

NOIPA void b(void)
{
	for (int i = 0; i < 100; i++) {
		keep[i] = malloc(1024);
		mt_say("malloc", (uintptr_t)keep[i], 0, 1024);
	}
	sink++;
}

NOIPA void a(void)
{
	b();
	sink++;
}

NOIPA void c(void)
{
	for (int i = 0; i < 10; i++) {
		keep[100 + i] = malloc(65536);
		mt_say("malloc", (uintptr_t)keep[100 + i], 0, 65536);
	}
	sink++;
}

NOIPA void d(void)
{
	for (int i = 0; i < 7; i++) {
		keep[110 + i] = calloc(1, 4096);
		mt_say("calloc", (uintptr_t)keep[110 + i], 0, 4096);
	}
	sink++;
}

NOIPA void *thread_main(void *arg)
{
	d();
	sink++;
	return arg;
}

NOIPA void e(void)
{
	for (int i = 0; i < 2; i++) {
		keep[140 + i] = malloc(3000);
		mt_say("malloc", (uintptr_t)keep[140 + i], 0, 3000);
	}
	sink++;
}

NOIPA void on_signal(int sig)
{
	(void)sig;
	e(); /* not async-signal-safe in general; fine here: main is in raise, not in malloc */
	sink++;
}

NOIPA void f(void)
{
	for (int i = 0; i < 4; i++) {
		keep[150 + i] = malloc(5000);
		mt_say("malloc", (uintptr_t)keep[150 + i], 0, 5000);
	}
	sink++;
}

int main(void)
{
	void (*dl_alloc)(void **, int, size_t);
	void *out[8], *h;
	pthread_t t;

	mt_expect_init();
	mt_say_fact("path", 1);
	a();
	mt_say_fact("path", 2);
	c();
	mt_say_fact("path", 3);
	if (pthread_create(&t, NULL, thread_main, NULL) || pthread_join(t, NULL))
		return 2;
	mt_say_fact("path", 4);
	lib_alloc(out, 5, 2048);
	for (int i = 0; i < 5; i++) {
		keep[120 + i] = out[i];
		mt_say("realloc", (uintptr_t)out[i], 0, 2048);
	}
	h = dlopen("libstacks_dl.so", RTLD_NOW | RTLD_LOCAL);
	dl_alloc = h ? (void (*)(void **, int, size_t))dlsym(h, "dl_alloc") : NULL;
	if (!dl_alloc)
		return 3;
	mt_say_fact("path", 5);
	dl_alloc(out, 3, 512);
	for (int i = 0; i < 3; i++) {
		keep[130 + i] = out[i];
		mt_say("aligned", (uintptr_t)out[i], 0, 512);
	}
	mt_say_fact("path", 6);
	signal(SIGUSR1, on_signal);
	raise(SIGUSR1);
	mt_say_fact("path", 7);
	pid_t child = fork();
	if (child == 0) {
		f();
		_exit(0);
	}
	if (child < 0 || waitpid(child, NULL, 0) != child)
		return 4;
	mt_say_fact("path", 0);
	for (int i = 0; i < 100; i++) {
		mt_say("free", (uintptr_t)keep[i], 0, 0);
		free(keep[i]);
	}
	sink++;
	return 0;
}
