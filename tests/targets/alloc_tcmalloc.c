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
	struct mt_std s;
	void *x;

	mt_expect_init();
	free(malloc(1));
	mt_say_fact("begin", 0);
	mt_std_alloc(&s, 0);
	x = tc_malloc(700);
	mt_say("malloc", MT_P(x), 0, 700);
	mt_std_free(&s);
	mt_say("free", MT_P(x), 0, 0);
	tc_free(x);
	mt_say_fact("end", 0);
	return 0;
}
