// SPDX-License-Identifier: MIT
/*
 * A C program (libstdc++ not among its libraries) that dlopens a C++ library with RTLD_LOCAL
 * (lib/cxx_local.cc, found beside it) and runs the C++ allocation operators there, reported
 * on the side channel (cxx_ops.h). Exit status 2 or 3: the library or its function not found.
 */
#include <dlfcn.h>
#include "expect.h"

int main(void)
{
	int (*run)(void);
	void *h;

	mt_expect_init();
	h = dlopen("libcxx_local.so", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 2;
	run = (int (*)(void))dlsym(h, "cxx_local_run");
	if (!run)
		return 3;
	return run();
}
