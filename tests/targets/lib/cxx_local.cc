// SPDX-License-Identifier: MIT
/*
 * libcxx_local.so, for cxx_dlopen.c: a C++ library that a C program (no libstdc++ of its own)
 * loads with dlopen(RTLD_LOCAL). libstdc++ then arrives as this library's dependency, outside
 * the global scope: the operators here bind to the interposer's (global scope first), whose
 * dlsym(RTLD_NEXT) cannot see libstdc++'s. binutils' ar loading the LLVM gold plugin (libz3's
 * constructors call operator new) aborted that way.
 */
#include "../cxx_ops.h"

void *volatile cxx_local_ctor_block;

/* A constructor's operator new, as libz3's: it runs inside dlopen, before dlopen returns. */
__attribute__((constructor)) static void cxx_local_ctor(void)
{
	cxx_local_ctor_block = operator new(40);
	mt_say("malloc", MT_P(cxx_local_ctor_block), 0, 40);
}

extern "C" int cxx_local_run(void)
{
	mt_say("free", MT_P(cxx_local_ctor_block), 0, 0);
	operator delete(cxx_local_ctor_block);
	cxx_local_ctor_block = nullptr;
	return cxx_ops(true);
}
