// SPDX-License-Identifier: MIT
/*
 * Linked against Debian's libmimalloc, which also overrides malloc & co.: the standard names
 * and the mi_* API, one event each. mi_zalloc(n) is a zeroing allocation of n bytes: Calloc n.
 */
#include <stdlib.h>
#include <mimalloc.h>
#include "expect.h"

int main(void)
{
	void *a, *b, *c, *x, *y, *z, *w, *v, *n1, *n2, *n3, *n4;

	uintptr_t o;

	mt_expect_init();
	free(malloc(1));
	mi_free(mi_malloc(1));
	mt_say_fact("begin", 0);
	a = malloc(100);
	mt_say("malloc", MT_P(a), 0, 100);
	b = calloc(10, 30);
	mt_say("calloc", MT_P(b), 0, 300);
	c = realloc(NULL, 50);
	mt_say("realloc", MT_P(c), 0, 50);
	x = mi_malloc(700);
	mt_say("malloc", MT_P(x), 0, 700);
	y = mi_calloc(7, 11);
	mt_say("calloc", MT_P(y), 0, 77);
	z = mi_zalloc(900);
	mt_say("calloc", MT_P(z), 0, 900);
	o = MT_P(x);
	x = mi_realloc(x, 70000);
	mt_say("realloc", MT_P(x), MT_P(o), 70000);
	w = mi_malloc_aligned(1000, 128);
	mt_say("aligned", MT_P(w), 0, 1000);
	v = mi_zalloc_aligned(300, 64);
	mt_say("aligned", MT_P(v), 0, 300);
	o = MT_P(v);
	v = mi_realloc_aligned(v, 5000, 64);
	mt_say("realloc", MT_P(v), MT_P(o), 5000);
	n1 = mi_new(64);
	mt_say("malloc", MT_P(n1), 0, 64);
	n2 = mi_new_aligned(96, 64);
	mt_say("aligned", MT_P(n2), 0, 96);
	n3 = mi_mallocn(3, 40);
	mt_say("malloc", MT_P(n3), 0, 120);
	n4 = mi_calloc_aligned(5, 12, 32);
	mt_say("calloc", MT_P(n4), 0, 60);
	mt_say("free", MT_P(a), 0, 0);
	free(a);
	mt_say("free", MT_P(b), 0, 0);
	free(b);
	mt_say("free", MT_P(c), 0, 0);
	free(c);
	mt_say("free", MT_P(x), 0, 0);
	mi_free(x);
	mt_say("free", MT_P(y), 0, 0);
	mi_free(y);
	mt_say("free", MT_P(z), 0, 0);
	mi_free(z);
	mt_say("free", MT_P(w), 0, 0);
	mi_free(w);
	mt_say("free", MT_P(v), 0, 0);
	mi_free(v);
	mt_say("free", MT_P(n1), 0, 0);
	mi_free(n1);
	mt_say("free", MT_P(n2), 0, 0);
	mi_free(n2);
	mt_say("free", MT_P(n3), 0, 0);
	mi_free(n3);
	mt_say("free", MT_P(n4), 0, 0);
	mi_free(n4);
	mt_say_fact("end", 0);
	return 0;
}
