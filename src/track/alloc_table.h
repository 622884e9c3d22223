/* SPDX-License-Identifier: MIT */
/* Which allocator entry points to probe in a library, and what each call means. */
#ifndef MEMTRACK_ALLOC_TABLE_H
#define MEMTRACK_ALLOC_TABLE_H

#include <stdint.h>
#include "track/elf_syms.h"

enum alloc_kind {
	ALLOC_NONE = 0,
	ALLOC_LIBC,
	ALLOC_CXX, /* libstdc++ / libc++ operator new and delete */
	ALLOC_JEMALLOC,
	ALLOC_MIMALLOC,
	ALLOC_TCMALLOC,
	ALLOC_STATIC, /* an executable with an allocator linked in */
};

struct alloc_site {
	const char *name;
	uint64_t offset; /* the function's first instruction */
	uint64_t probe;	 /* where its probes sit, entry and return: offset, or later when the
			  * first instructions would be single-stepped (probe_place.h) */
	uint32_t spec; /* probe_spec.h cookie, MT_SPEC_AT and MT_SPEC_SELF included */
	bool ret; /* needs a return probe */
	bool entry; /* needs an entry probe */
};

const char *alloc_kind__name(enum alloc_kind k);
/* Classifies by defined symbols, the non-libc allocators first: they export libc names too. */
enum alloc_kind alloc_table__classify(const struct elf_info *info, bool is_executable);
/* Does the file define one of the C allocator's entry points (malloc, calloc, realloc, free,
 * the aligned ones...)? An executable of kind ALLOC_STATIC that defines none has C++'s
 * operators only (a static libstdc++), which call the process's malloc. */
bool alloc_table__defines_c(const struct elf_info *info);
/* Fills sites (cap entries) with the symbols of info to probe; aliases that share an offset
 * appear once. In a shared library a direct call from its own code to a site is not recorded
 * (MT_SPEC_SELF); in an executable every call is the program's. Returns the count. */
int alloc_table__sites(const struct elf_info *info, enum alloc_kind kind, bool is_executable,
		       struct alloc_site *sites, int cap);

#endif
