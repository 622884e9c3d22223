// SPDX-License-Identifier: MIT
/*
 * Symbolisation test target (tests/unit/test_symbols.c), built -O2 -fomit-frame-pointer: each
 * known call site calls mark(), which prints "<name> <vaddr>" where vaddr is its return address
 * in this file's ELF address space (the load bias removed), as a stack file stores frames.
 * The line each call is on is marked with a comment the test looks for ("// @name").
 */
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

static ElfW(Addr) bias;

static int first_object(struct dl_phdr_info *info, size_t, void *)
{
	bias = info->dlpi_addr; /* the first object is the executable */
	return 1;
}

extern "C" __attribute__((noinline)) void mark(const char *name)
{
	void *ra = __builtin_return_address(0);

	printf("%s %#lx\n", name, (unsigned long)((ElfW(Addr))ra - bias));
	asm volatile("" ::: "memory");
}

void *volatile sink;

/* always inlined into outer_function: one frame, two functions; internal linkage, so DWARF
 * has no linkage name for it, only its name in its namespace */
namespace util {
static inline __attribute__((always_inline)) void inlined_helper(int n)
{
	sink = malloc((size_t)n);
	mark("inlined"); // @inlined
	asm volatile("" ::: "memory");
}
} // namespace util

__attribute__((noinline)) void outer_function(int n)
{
	util::inlined_helper(n); // @outer
	asm volatile("" ::: "memory");
}

namespace shapes {
template <typename T> struct Box {
	T value;
	__attribute__((noinline)) void fill(T v)
	{
		value = v;
		sink = this;
		mark("template"); // @template
		asm volatile("" ::: "memory");
	}
};
} // namespace shapes

int main()
{
	static shapes::Box<double> box;

	dl_iterate_phdr(first_object, nullptr);
	outer_function(16);
	box.fill(2.5);
	mark("main"); // @main
	return 0;
}
