/* SPDX-License-Identifier: MIT */
/*
 * The C++ allocation operators, each reported on the side channel (expect.h), between "begin"
 * and "end": new/delete as Malloc/Free, aligned new as AlignedAlloc, the nothrow and sized
 * forms. Shared by nested_cxx.cc (and cxx_static.cc) and by lib/cxx_local.cc, the library
 * cxx_dlopen loads with RTLD_LOCAL. C++ only; header-only like expect.h.
 */
#ifndef MT_TARGET_CXX_OPS_H
#define MT_TARGET_CXX_OPS_H

#include <new>
#include "expect.h"

static inline int cxx_ops(bool aligned)
{
	void *e = nullptr, *f = nullptr;

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

#endif
