// SPDX-License-Identifier: MIT
/*
 * C++ allocation operators. libstdc++'s operator new calls malloc (aligned new calls
 * aligned_alloc), and delete calls free: the tracker must record each user-visible call once,
 * new/delete as Malloc/Free, aligned new as AlignedAlloc. Reports on the side channel.
 */
#include <cstdlib>
#include <cstring>
#include "cxx_ops.h"

/* cxx_static.cc sets it to 0: there aligned new only with the argument "aligned", for the size
 * it records differs between the mechanisms (README, "Known differences") */
#ifndef MT_ALIGNED_BY_DEFAULT
#define MT_ALIGNED_BY_DEFAULT 1
#endif

int main(int argc, char **argv)
{
	mt_expect_init();
	/* libstdc++'s emergency EH pool and iostream init happen before main; one warm-up pair
	 * keeps malloc's first-call setup out of the window */
	operator delete(operator new(1));
	return cxx_ops(MT_ALIGNED_BY_DEFAULT || (argc > 1 && !strcmp(argv[1], "aligned")));
}
