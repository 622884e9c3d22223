// SPDX-License-Identifier: MIT
/*
 * Allocations made inside glibc's dlopen (test_stacks_through_dlopen): main -> open_lib ->
 * dlopen("libctor_alloc.so"), whose constructor (ctor_alloc, tests/targets/lib/ctor_alloc.c)
 * makes 3 x malloc(7777). A return probe on dlopen (memtrack's dlopen stop, where the kernel
 * has no uprobe sessions; another tool's) replaces open_lib's return address while they are
 * made: an unwinder in process cannot see past dlopen then. -O2 -fomit-frame-pointer.
 */
#include <dlfcn.h>
#include <stdio.h>
#include "expect.h"

static volatile int sink;

__attribute__((noipa)) void *open_lib(const char *name)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);

	sink++; /* not a tail call: open_lib stays on the stack */
	return h;
}

int main(void)
{
	mt_expect_init();
	if (!open_lib("libctor_alloc.so")) {
		fprintf(stderr, "dlopen_ctor: %s\n", dlerror());
		return 2;
	}
	return 0;
}
