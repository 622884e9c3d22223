// SPDX-License-Identifier: MIT
/*
 * libown_ops.so, for cxx_own_ops.c: a shared library with operator new and delete of its own,
 * linked -Bsymbolic-functions, as libLLVM is (rustc's, Rust's LLVM): its own calls to them
 * are direct (call rel32, no PLT), and delete is a tail call of free through the PLT. memtrack
 * takes a library's direct call to its own free-like entry as internal; the free it makes
 * through the PLT is the user-visible one (what an LD_PRELOAD interposer sees).
 */
#include <cstdlib>
#include <new>
#include "../expect.h"

void *operator new(std::size_t n)
{
	void *p = std::malloc(n ? n : 1);

	if (!p)
		std::abort();
	return p;
}

void operator delete(void *p) noexcept
{
	std::free(p);
}

void operator delete(void *p, std::size_t) noexcept
{
	std::free(p);
}

extern "C" int own_ops_run(void)
{
	void *volatile keep[8];

	mt_say_fact("begin", 0);
	for (int i = 0; i < 8; i++) {
		keep[i] = operator new(1000 + (std::size_t)i);
		mt_say("malloc", MT_P(keep[i]), 0, 1000 + (uint64_t)i);
	}
	for (int i = 0; i < 8; i++) {
		mt_say("free", MT_P(keep[i]), 0, 0);
		operator delete(keep[i]);
	}
	mt_say_fact("end", 0);
	return 0;
}
