/* SPDX-License-Identifier: MIT */
/* What the stacks file's writer and reader share (not part of the API). */
#ifndef MEMTRACK_STACKFILE_PRIV_H
#define MEMTRACK_STACKFILE_PRIV_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Makes room for `need` elements in *p (capacity *cap, doubling from 16). 0 or -ENOMEM. */
static inline int stackfile__grow(void **p, uint64_t *cap, uint64_t need, size_t elem)
{
	uint64_t ncap = *cap ? *cap : 16;
	void *np;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, ncap * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

#endif
