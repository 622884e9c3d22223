// SPDX-License-Identifier: MIT
/*
 * Every glibc allocation entry point once, each reported on the side channel (see expect.h)
 * with the event the tracker must record for it. Between "begin" and "end" this thread calls
 * nothing else that allocates, so the tests can ask for an exact, event-by-event match.
 */
#define _GNU_SOURCE /* dlvsym, RTLD_DEFAULT */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include "expect.h"

/* C23 names, in glibc only from 2.39 (not in Debian 12's 2.36): weak, so the target links
 * everywhere and calls them only where the running libc has them. */
extern void free_sized(void *ptr, size_t size) __attribute__((weak));
extern void free_aligned_sized(void *ptr, size_t align, size_t size) __attribute__((weak));

/* Keep -O1 from merging or dropping calls whose results only go to the side channel. */
static void *volatile sink;
/* volatile: no compile-time size warning, and rb is not taken for freed by it */
static volatile size_t huge = (size_t)1 << 32;
static void *volatile rbv;

int main(void)
{
	void (*cfree_fn)(void *);
	void *a, *b, *c, *d, *e, *f, *g = NULL, *h = NULL, *v, *pv, *ra, *rb, *x, *y, *guard;
	void *s;
	uintptr_t o, ro;
	int rc;

	mt_expect_init();
	/*
	 * cfree is only a compat symbol in glibc >= 2.26 (cfree@GLIBC_2.2.5, no default version),
	 * so it cannot be linked; dlvsym finds it. Looked up before "begin": dlvsym may allocate.
	 */
	cfree_fn = (void (*)(void *))dlvsym(RTLD_DEFAULT, "cfree", "GLIBC_2.2.5");
	/* glibc sets up its arena on the first call: keep that out of the window too */
	free(malloc(1));

	mt_say_fact("begin", 0);

	a = malloc(100);
	mt_say("malloc", MT_P(a), 0, 100);
	b = calloc(10, 20);
	mt_say("calloc", MT_P(b), 0, 200);

	c = realloc(NULL, 33); /* allocates: a Realloc with no old address */
	mt_say("realloc", MT_P(c), 0, 33);

	/* grow and shrink inside the chunk (200 -> 204 fits the same 208-byte chunk) */
	x = malloc(200);
	mt_say("malloc", MT_P(x), 0, 200);
	o = MT_P(x);
	x = realloc(x, 204);
	mt_say("realloc", MT_P(x), MT_P(o), 204);
	o = MT_P(x);
	x = realloc(x, 50);
	mt_say("realloc", MT_P(x), MT_P(o), 50);

	/* move: the guard right behind y keeps it from growing in place */
	y = malloc(64);
	mt_say("malloc", MT_P(y), 0, 64);
	guard = malloc(64);
	mt_say("malloc", MT_P(guard), 0, 64);
	o = MT_P(y);
	y = realloc(y, 100000);
	mt_say("realloc", MT_P(y), MT_P(o), 100000);

	/* realloc(p, 0) frees p and returns NULL in glibc: a Free of p, nothing else */
	mt_say("free", MT_P(c), 0, 0);
	d = realloc(c, 0);
	sink = d;

	ra = reallocarray(NULL, 7, 9);
	mt_say("realloc", MT_P(ra), 0, 63);
	ro = MT_P(ra);
	rb = reallocarray(ra, 10, 10);
	mt_say("realloc", MT_P(rb), ro, 100);
	/* a product past 64 bits: ENOMEM, rb untouched, no event (one wrapping to 0 was taken for
	 * realloc(rb, 0)'s free until 8 December 2026) */
	rbv = rb;
	sink = reallocarray(rbv, huge, huge);

	e = aligned_alloc(64, 256);
	mt_say("aligned", MT_P(e), 0, 256);
	f = memalign(128, 300);
	mt_say("aligned", MT_P(f), 0, 300);
	rc = posix_memalign(&g, 32, 400);
	mt_say(rc == 0 ? "aligned" : "error", MT_P(g), 0, 400);
	/* alignment 3 is not a power of two: EINVAL, nothing allocated, no event */
	rc = posix_memalign(&h, 3, 500);
	mt_say(rc == EINVAL ? "einval" : "error", MT_P(h), 0, 500);
	v = valloc(1000);
	mt_say("aligned", MT_P(v), 0, 1000);
	pv = pvalloc(1000); /* the size as passed, not rounded to the page */
	mt_say("aligned", MT_P(pv), 0, 1000);

	mt_say("free", MT_P(a), 0, 0);
	free(a);
	mt_say("free", MT_P(b), 0, 0);
	free(b);
	mt_say("free", MT_P(x), 0, 0);
	free(x);
	mt_say("free", MT_P(y), 0, 0);
	free(y);
	mt_say("free", MT_P(guard), 0, 0);
	free(guard);
	mt_say("free", MT_P(rb), 0, 0);
	free(rb);
	mt_say("free", MT_P(e), 0, 0);
	free(e);
	mt_say("free", MT_P(f), 0, 0);
	free(f);
	if (cfree_fn) {
		mt_say("free", MT_P(g), 0, 0);
		cfree_fn(g);
	} else {
		mt_say("free", MT_P(g), 0, 0);
		free(g);
	}
	if (free_sized) {
		mt_say("free", MT_P(v), 0, 0);
		free_sized(v, 1000);
	} else {
		mt_say("free", MT_P(v), 0, 0);
		free(v);
	}
	if (free_aligned_sized) {
		s = aligned_alloc(256, 512);
		mt_say("aligned", MT_P(s), 0, 512);
		mt_say("free", MT_P(s), 0, 0);
		free_aligned_sized(s, 256, 512);
	}
	mt_say("free", MT_P(pv), 0, 0);
	free(pv);

	mt_say_fact("end", 0);
	/* facts for the tests: which optional entry points ran */
	mt_say_fact("have_cfree", cfree_fn != NULL);
	mt_say_fact("have_free_sized", free_sized != NULL);
	return 0;
}
