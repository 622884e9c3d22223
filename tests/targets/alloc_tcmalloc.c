// SPDX-License-Identifier: MIT
/*
 * Linked against Debian's libtcmalloc (gperftools), which replaces malloc & co.: the standard
 * names and the tc_* API (tc_new and tc_newarray included), one event each.
 */
#include <malloc.h>
#include <stdlib.h>
#include <gperftools/tcmalloc.h>
#include "expect.h"

/* extern "C" in libtcmalloc; its header declares them for C++ only */
void *tc_new(size_t size);
void *tc_newarray(size_t size);
void tc_delete(void *p);
void tc_deletearray(void *p);

int main(void)
{
	struct mt_std s;
	void *x, *y, *z, *w = NULL, *n, *na;
	uintptr_t o;

	mt_expect_init();
	free(malloc(1));
	mt_say_fact("begin", 0);
	mt_std_alloc(&s, 0);
	x = tc_malloc(700);
	mt_say("malloc", MT_P(x), 0, 700);
	y = tc_calloc(3, 50);
	mt_say("calloc", MT_P(y), 0, 150);
	o = MT_P(y);
	y = tc_realloc(y, 9000);
	mt_say("realloc", MT_P(y), o, 9000);
	z = tc_memalign(256, 600);
	mt_say("aligned", MT_P(z), 0, 600);
	if (tc_posix_memalign(&w, 64, 320) == 0)
		mt_say("aligned", MT_P(w), 0, 320);
	n = tc_new(48);
	mt_say("malloc", MT_P(n), 0, 48);
	na = tc_newarray(96);
	mt_say("malloc", MT_P(na), 0, 96);
	mt_std_free(&s);
	mt_say("free", MT_P(x), 0, 0);
	tc_free(x);
	mt_say("free", MT_P(y), 0, 0);
	tc_free_sized(y, 9000);
	mt_say("free", MT_P(z), 0, 0);
	tc_cfree(z);
	mt_say("free", MT_P(w), 0, 0);
	tc_free(w);
	mt_say("free", MT_P(n), 0, 0);
	tc_delete(n);
	mt_say("free", MT_P(na), 0, 0);
	tc_deletearray(na);
	mt_say_fact("end", 0);
	return 0;
}
