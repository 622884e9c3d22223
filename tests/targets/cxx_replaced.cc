// SPDX-License-Identifier: MIT
/*
 * `cxx_replaced [N]`: a program that replaces only the scalar operator new(size_t) and
 * operator delete(void *), as a debug allocator or a pool's tag does: each block gets a
 * 16-byte header (a canary and the size) before the pointer the program sees. The standard
 * says the other forms (new[], nothrow, sized delete, delete[]) then call these. N objects
 * of 40 bytes (new S) and N arrays of 40 bytes (new int[10]) are kept, then deleted: 2N
 * malloc(56) and 2N free of those blocks. Aborts when a delete finds no header (a block its new
 * did not make); exit 0 otherwise. test_cxx_replaced_operators (test_track_cxx.c).
 */
/* only the unsized forms, on purpose: the others must reach them */
#pragma GCC diagnostic ignored "-Wsized-deallocation"

#include <cstdio>
#include <cstdlib>
#include <new>

static const unsigned long canary = 0x6d656d747261636bul;

void *operator new(std::size_t n)
{
	unsigned long *b = static_cast<unsigned long *>(std::malloc(n + 16));

	if (!b)
		throw std::bad_alloc();
	b[0] = canary;
	b[1] = n;
	return b + 2;
}

void operator delete(void *p) noexcept
{
	unsigned long *b = static_cast<unsigned long *>(p) - 2;

	if (!p)
		return;
	if (b[0] != canary) {
		std::fprintf(stderr, "cxx_replaced: no header before %p\n", p);
		std::abort();
	}
	std::free(b);
}

struct S {
	long a[5];
};

static S *volatile objs[1000];
static int *volatile arrs[1000];

int main(int argc, char **argv)
{
	int n = argc > 1 ? std::atoi(argv[1]) : 100;

	if (n > 1000)
		n = 1000;
	for (int i = 0; i < n; i++) {
		objs[i] = new S;
		arrs[i] = new int[10];
	}
	for (int i = 0; i < n; i++) {
		delete objs[i]; /* sized delete (C++14): the library's, which calls ours */
		delete[] arrs[i];
	}
	return 0;
}
