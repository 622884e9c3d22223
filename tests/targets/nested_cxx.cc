// SPDX-License-Identifier: MIT
/*
 * C++ allocation operators. libstdc++'s operator new calls malloc (aligned new calls
 * aligned_alloc), and delete calls free: the tracker must record each user-visible call once,
 * new/delete as Malloc/Free, aligned new as AlignedAlloc. Reports on the side channel.
 */
#include <cstdlib>
#include <cstring>
#include <new>
#include "expect.h"

/* cxx_static.cc sets it to 0: there aligned new only with the argument "aligned", for the size
 * it records differs between the mechanisms (README, "Known differences") */
#ifndef MT_ALIGNED_BY_DEFAULT
#define MT_ALIGNED_BY_DEFAULT 1
#endif

int main(int argc, char **argv)
{
	bool aligned = MT_ALIGNED_BY_DEFAULT || (argc > 1 && !strcmp(argv[1], "aligned"));
	void *e = nullptr, *f = nullptr;

	mt_expect_init();
	/* libstdc++'s emergency EH pool and iostream init happen before main; one warm-up pair
	 * keeps malloc's first-call setup out of the window */
	operator delete(operator new(1));
	mt_say_fact("begin", 0);

	void *a = operator new(123);
	mt_say("malloc", MT_P(a), 0, 123);
	void *b = operator new[](456);
	mt_say("malloc", MT_P(b), 0, 456);
	int *c = new int[100];
	mt_say("malloc", MT_P(c), 0, 400);
	long *d = new long(7);
	mt_say("malloc", MT_P(d), 0, sizeof(long));
	if (aligned) {
		e = operator new(333, std::align_val_t(64));
		mt_say("aligned", MT_P(e), 0, 333);
		f = operator new[](555, std::align_val_t(128));
		mt_say("aligned", MT_P(f), 0, 555);
	}
	void *g = operator new(444, std::nothrow);
	mt_say("malloc", MT_P(g), 0, 444);
	char *h = new (std::nothrow) char[789];
	mt_say("malloc", MT_P(h), 0, 789);

	mt_say("free", MT_P(a), 0, 0);
	operator delete(a);
	mt_say("free", MT_P(b), 0, 0);
	operator delete[](b);
	mt_say("free", MT_P(c), 0, 0);
	delete[] c;
	delete d; /* sized delete (_ZdlPvm) with -fsized-deallocation, the C++14 default */
	mt_say("free", MT_P(d), 0, 0);
	if (aligned) {
		mt_say("free", MT_P(e), 0, 0);
		operator delete(e, std::align_val_t(64));
		mt_say("free", MT_P(f), 0, 0);
		operator delete[](f, 555, std::align_val_t(128));
	}
	mt_say("free", MT_P(g), 0, 0);
	operator delete(g, std::nothrow);
	mt_say("free", MT_P(h), 0, 0);
	delete[] h;

	mt_say_fact("end", 0);
	return 0;
}
