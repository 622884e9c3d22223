// SPDX-License-Identifier: MIT
/*
 * `alloc_ownmalloc [N]`: an executable that defines malloc itself (a bump allocator over an
 * array; free forgets), as some programs do. The preload interposer must forward to it (the
 * executable's malloc comes first in symbol lookup) and leave it to the uprobes on the
 * executable: N mallocs of 100 + i bytes and N frees, each counted once in every mode.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static _Alignas(64) unsigned char arena[16 << 20];
static size_t used;

void *memalign(size_t align, size_t n)
{
	size_t off, start = __atomic_load_n(&used, __ATOMIC_RELAXED);

	if (align < 16)
		align = 16;
	do {
		off = (start + sizeof(size_t) + align - 1) & ~(align - 1);
		if (off + n > sizeof(arena) || off + n < off)
			return NULL;
	} while (!__atomic_compare_exchange_n(&used, &start, off + n, 0, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	memcpy(arena + off - sizeof(size_t), &n, sizeof(n));
	return arena + off;
}

void *malloc(size_t n) { return memalign(16, n); }
void free(void *p) { (void)p; }
void *aligned_alloc(size_t align, size_t n) { return memalign(align, n); }

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p = memalign(align, n);

	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *calloc(size_t nmemb, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n))
		return NULL;
	return malloc(n); /* the arena is never reused: zero already */
}

void *realloc(void *old, size_t n)
{
	void *p = malloc(n);
	size_t have;

	if (p && old) {
		memcpy(&have, (unsigned char *)old - sizeof(size_t), sizeof(have));
		memcpy(p, old, have < n ? have : n);
	}
	return p;
}

static void *volatile sink;

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10;

	for (int i = 0; i < n; i++) {
		sink = malloc(100 + (size_t)i);
		free(sink);
	}
	return 0;
}
