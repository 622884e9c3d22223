// SPDX-License-Identifier: MIT
/*
 * Linked against Debian's libtcmalloc (gperftools), which replaces malloc & co.: the standard
 * names and the tc_* API, one event each.
 */
#include <malloc.h>
#include <stdlib.h>
#include <gperftools/tcmalloc.h>
#include "expect.h"

int main(void)
{
	void *a, *b, *c, *d = NULL, *e, *x;

	uintptr_t o;

	mt_expect_init();
	free(malloc(1));
	mt_say_fact("begin", 0);
	a = malloc(100);
	mt_say("malloc", MT_P(a), 0, 100);
	b = calloc(10, 30);
	mt_say("calloc", MT_P(b), 0, 300);
	c = malloc(40);
	mt_say("malloc", MT_P(c), 0, 40);
	o = MT_P(c);
	c = realloc(c, 40000);
	mt_say("realloc", MT_P(c), MT_P(o), 40000);
	if (posix_memalign(&d, 64, 640) == 0)
		mt_say("aligned", MT_P(d), 0, 640);
	e = memalign(256, 512);
	mt_say("aligned", MT_P(e), 0, 512);
	x = tc_malloc(700);
	mt_say("malloc", MT_P(x), 0, 700);
	mt_say("free", MT_P(a), 0, 0);
	free(a);
	mt_say("free", MT_P(b), 0, 0);
	free(b);
	mt_say("free", MT_P(c), 0, 0);
	free(c);
	mt_say("free", MT_P(d), 0, 0);
	free(d);
	mt_say("free", MT_P(e), 0, 0);
	free(e);
	mt_say("free", MT_P(x), 0, 0);
	tc_free(x);
	mt_say_fact("end", 0);
	return 0;
}
