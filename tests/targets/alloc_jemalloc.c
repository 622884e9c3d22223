// SPDX-License-Identifier: MIT
/*
 * Linked against Debian's libjemalloc (unprefixed: it interposes malloc & co.): the standard
 * entry points and jemalloc's extended API, one event each.
 */
#include <stdlib.h>
#include <jemalloc/jemalloc.h>
#include "expect.h"

int main(void)
{
	struct mt_std s;
	void *x, *y;

	uintptr_t o;

	mt_expect_init();
	free(malloc(1)); /* jemalloc initialises on its first call */
	mt_say_fact("begin", 0);
	mt_std_alloc(&s, 1);
	x = mallocx(700, 0);
	mt_say("malloc", MT_P(x), 0, 700);
	o = MT_P(x);
	x = rallocx(x, 7000, 0);
	mt_say("realloc", MT_P(x), MT_P(o), 7000);
	y = mallocx(800, MALLOCX_ZERO);
	mt_say("malloc", MT_P(y), 0, 800);
	mt_std_free(&s);
	mt_say("free", MT_P(x), 0, 0);
	dallocx(x, 0);
	mt_say("free", MT_P(y), 0, 0);
	sdallocx(y, 800, 0);
	mt_say_fact("end", 0);
	return 0;
}
