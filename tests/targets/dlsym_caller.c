// SPDX-License-Identifier: MIT
/*
 * `dlsym_caller`: glibc's dlsym answers relative to its caller (RTLD_NEXT: the objects after
 * the caller's). The interposer's dlsym (src/preload/preload_dl.c) must leave that caller
 * alone, before and after a dlopen that it announces. This executable defines no malloc, so
 * RTLD_NEXT from it finds the first malloc after it: the same object as RTLD_DEFAULT's (the
 * interposer, or libc without one); answered from the interposer it would be the one after
 * the interposer. Exits 0 when both lookups agree each time, 1 otherwise, 2 without libz.
 */
#define _GNU_SOURCE /* Dl_info, dladdr, RTLD_NEXT */
#include <dlfcn.h>
#include <stdio.h>

static int same_object(void)
{
	Dl_info n, d;

	if (!dladdr(dlsym(RTLD_NEXT, "malloc"), &n) || !dladdr(dlsym(RTLD_DEFAULT, "malloc"), &d))
		return 0;
	if (n.dli_fbase != d.dli_fbase) {
		fprintf(stderr, "RTLD_NEXT malloc in %s, RTLD_DEFAULT's in %s\n", n.dli_fname,
			d.dli_fname);
		return 0;
	}
	return 1;
}

int main(void)
{
	void *h;

	if (!same_object())
		return 1;
	h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h || !dlsym(h, "zlibVersion"))
		return 2;
	return same_object() ? 0 : 1;
}
