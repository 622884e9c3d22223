// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <string.h>
#include "bpf/events.h"
#include "bpf/probe_spec.h"
#include "track/alloc_table.h"
#include "track/probe_place.h"

/* Shapes of calls. The return-value-based cases (realloc(p, 0) freeing, NULL on failure) are
 * decided in the BPF return program. */
#define S_MALLOC0  MT_SPEC(MT_EV_MALLOC, 0, 0, 0, MT_SPEC_HAS_SIZE) /* f(size) */
#define S_CALLOC   MT_SPEC(MT_EV_CALLOC, 1, 0, 0, MT_SPEC_HAS_SIZE | MT_SPEC_PRODUCT)
#define S_ZALLOC0  MT_SPEC(MT_EV_CALLOC, 0, 0, 0, MT_SPEC_HAS_SIZE) /* zeroed f(size) */
#define S_REALLOC  MT_SPEC(MT_EV_REALLOC, 1, 0, 0, MT_SPEC_HAS_SIZE | MT_SPEC_OLD)
#define S_REALLOCA MT_SPEC(MT_EV_REALLOC, 2, 1, 0, MT_SPEC_HAS_SIZE | MT_SPEC_OLD | MT_SPEC_PRODUCT)
#define S_ALIGNED1 MT_SPEC(MT_EV_ALIGNED_ALLOC, 1, 0, 0, MT_SPEC_HAS_SIZE) /* f(align, size) */
#define S_ALIGNED0 MT_SPEC(MT_EV_ALIGNED_ALLOC, 0, 0, 0, MT_SPEC_HAS_SIZE) /* f(size, ...) */
#define S_MEMALIGN MT_SPEC(MT_EV_ALIGNED_ALLOC, 2, 0, 0, MT_SPEC_HAS_SIZE | MT_SPEC_MEMPTR)
#define S_FREE	   MT_SPEC(0, 0, 0, 0, MT_SPEC_FREE)
#define S_FREELEAF MT_SPEC(0, 0, 0, 0, MT_SPEC_FREE | MT_SPEC_LEAF)
#define S_DLOPEN   MT_SPEC(0, 0, 0, 0, MT_SPEC_DLOPEN)

struct alloc_entry {
	const char *name;
	uint32_t spec;
};

/* The standard C names; glibc's free calls nothing hooked, so it needs no return probe (the
 * return probe of free is half of its cost). In other allocators free may be a compat wrapper
 * around their own free: it gets depth tracking. */
static const struct alloc_entry libc_names[] = {
	{"malloc", S_MALLOC0},	     {"calloc", S_CALLOC},	   {"realloc", S_REALLOC},
	{"reallocarray", S_REALLOCA}, {"free", S_FREE},		   {"cfree", S_FREE},
	{"aligned_alloc", S_ALIGNED1}, {"memalign", S_ALIGNED1},    {"posix_memalign", S_MEMALIGN},
	{"valloc", S_ALIGNED0},	     {"pvalloc", S_ALIGNED0},	   {"free_sized", S_FREE},
	{"free_aligned_sized", S_FREE}, {"dlopen", S_DLOPEN}, {"dlmopen", S_DLOPEN},
	{NULL, 0},
};

static const struct alloc_entry cxx_names[] = {
	{"_Znwm", S_MALLOC0},
	{"_Znam", S_MALLOC0},
	{"_ZnwmRKSt9nothrow_t", S_MALLOC0},
	{"_ZnamRKSt9nothrow_t", S_MALLOC0},
	{"_ZnwmSt11align_val_t", S_ALIGNED0},
	{"_ZnamSt11align_val_t", S_ALIGNED0},
	{"_ZnwmSt11align_val_tRKSt9nothrow_t", S_ALIGNED0},
	{"_ZnamSt11align_val_tRKSt9nothrow_t", S_ALIGNED0},
	{"_ZdlPv", S_FREE},
	{"_ZdaPv", S_FREE},
	{"_ZdlPvm", S_FREE},
	{"_ZdaPvm", S_FREE},
	{"_ZdlPvSt11align_val_t", S_FREE},
	{"_ZdaPvSt11align_val_t", S_FREE},
	{"_ZdlPvmSt11align_val_t", S_FREE},
	{"_ZdaPvmSt11align_val_t", S_FREE},
	{"_ZdlPvRKSt9nothrow_t", S_FREE},
	{"_ZdaPvRKSt9nothrow_t", S_FREE},
	{"_ZdlPvSt11align_val_tRKSt9nothrow_t", S_FREE},
	{"_ZdaPvSt11align_val_tRKSt9nothrow_t", S_FREE},
	{NULL, 0},
};

static const struct alloc_entry jemalloc_names[] = {
	/* mallocx(size, flags), rallocx(ptr, size, flags), dallocx(ptr, flags), sdallocx(ptr,
	 * size, flags); prefixed copies for custom builds (je_) and Rust (_rjem_) */
	{"mallocx", S_MALLOC0},	     {"rallocx", S_REALLOC},	   {"dallocx", S_FREE},
	{"sdallocx", S_FREE},	     {"je_malloc", S_MALLOC0},	   {"je_calloc", S_CALLOC},
	{"je_realloc", S_REALLOC},    {"je_free", S_FREE},	   {"je_mallocx", S_MALLOC0},
	{"je_rallocx", S_REALLOC},    {"je_dallocx", S_FREE},	   {"je_sdallocx", S_FREE},
	{"je_aligned_alloc", S_ALIGNED1}, {"je_posix_memalign", S_MEMALIGN},
	{"_rjem_malloc", S_MALLOC0},  {"_rjem_calloc", S_CALLOC},  {"_rjem_realloc", S_REALLOC},
	{"_rjem_free", S_FREE},	     {"_rjem_mallocx", S_MALLOC0}, {"_rjem_rallocx", S_REALLOC},
	{"_rjem_dallocx", S_FREE},    {"_rjem_sdallocx", S_FREE},
	{"_rjem_aligned_alloc", S_ALIGNED1}, {"_rjem_posix_memalign", S_MEMALIGN},
	{NULL, 0},
};

static const struct alloc_entry mimalloc_names[] = {
	{"mi_malloc", S_MALLOC0},	   {"mi_calloc", S_CALLOC},
	{"mi_zalloc", S_ZALLOC0},	   {"mi_realloc", S_REALLOC},
	{"mi_free", S_FREE},		   {"mi_malloc_aligned", S_ALIGNED0},
	{"mi_zalloc_aligned", S_ALIGNED0}, {"mi_realloc_aligned", S_REALLOC},
	{NULL, 0},
};

static const struct alloc_entry tcmalloc_names[] = {
	{"tc_malloc", S_MALLOC0},	{"tc_calloc", S_CALLOC},      {"tc_realloc", S_REALLOC},
	{"tc_free", S_FREE},		{"tc_cfree", S_FREE},	      {"tc_memalign", S_ALIGNED1},
	{"tc_posix_memalign", S_MEMALIGN}, {"tc_valloc", S_ALIGNED0}, {"tc_pvalloc", S_ALIGNED0},
	{"tc_free_sized", S_FREE},	{"tc_new", S_MALLOC0},	      {"tc_newarray", S_MALLOC0},
	{"tc_delete", S_FREE},		{"tc_deletearray", S_FREE},   {"sdallocx", S_FREE},
	{NULL, 0},
};

const char *alloc_kind__name(enum alloc_kind k)
{
	static const char *const names[] = {"none",	"libc",	    "libstdc++", "jemalloc",
					    "mimalloc", "tcmalloc", "static"};

	return k <= ALLOC_STATIC ? names[k] : "?";
}

enum alloc_kind alloc_table__classify(const struct elf_info *info, bool is_executable)
{
	bool has_malloc = elf_info__find(info, "malloc") != 0;

	if (elf_info__find(info, "mi_malloc"))
		return ALLOC_MIMALLOC;
	if (elf_info__find(info, "tc_malloc"))
		return ALLOC_TCMALLOC;
	if (elf_info__find(info, "mallocx") || elf_info__find(info, "je_malloc") ||
	    elf_info__find(info, "_rjem_malloc"))
		return ALLOC_JEMALLOC;
	if (is_executable && (has_malloc || elf_info__find(info, "_Znwm")))
		return ALLOC_STATIC;
	if (has_malloc && elf_info__find(info, "__libc_malloc"))
		return ALLOC_LIBC;
	if (elf_info__find(info, "_Znwm"))
		return ALLOC_CXX;
	return has_malloc ? ALLOC_LIBC : ALLOC_NONE;
}

/* What a site's cookie says beyond its table row: where the entry probe sits, and whether a
 * direct call from the file's own code is internal (probe_spec.h, MT_SPEC_SELF). Frees only:
 * the check costs ~250 ns per outermost call (two reads of user memory, measured with
 * alloc_storm), and glibc's own direct calls to an allocating entry (realloc -> malloc) are
 * all nested in a hooked call already, while its thread-exit cache flush frees directly. */
static uint32_t alloc_table__cookie(const struct alloc_site *s, bool shared)
{
	uint64_t at = s->probe - s->offset;

	if (!shared || !s->entry || !(s->spec & MT_SPEC_FREE) || at > MT_SPEC_AT_MAX)
		return s->spec;
	return MT_SPEC_WITH_AT(s->spec | MT_SPEC_SELF, at);
}

static int alloc_table__add(const struct elf_info *info, const struct alloc_entry *t, bool leaf_free,
			    bool shared, struct alloc_site *sites, int n, int cap)
{
	for (; t->name && n < cap; t++) {
		uint64_t off = elf_info__find(info, t->name);
		uint32_t spec = t->spec;
		bool dup = false;

		if (!off)
			continue;
		for (int i = 0; i < n && !dup; i++)
			dup = sites[i].offset == off; /* free, cfree, __libc_free: one site */
		if (dup)
			continue;
		if ((spec & MT_SPEC_FREE) && leaf_free)
			spec |= MT_SPEC_LEAF;
		sites[n].name = t->name;
		sites[n].offset = off;
		sites[n].spec = spec;
		sites[n].ret = !(spec & MT_SPEC_LEAF);
		sites[n].entry = !(spec & MT_SPEC_DLOPEN); /* dlopen: a return probe only */
		sites[n].probe = off;
		if (sites[n].entry && !sites[n].ret)
			sites[n].probe = probe_place__entry(info, off, MT_SPEC_PTR(spec));
		sites[n].spec = alloc_table__cookie(&sites[n], shared);
		n++;
	}
	return n;
}

int alloc_table__sites(const struct elf_info *info, enum alloc_kind kind, bool is_executable,
		       struct alloc_site *sites, int cap)
{
	bool so = !is_executable;
	int n = 0;

	switch (kind) {
	case ALLOC_LIBC:
		return alloc_table__add(info, libc_names, true, so, sites, 0, cap);
	case ALLOC_CXX:
		return alloc_table__add(info, cxx_names, false, so, sites, 0, cap);
	case ALLOC_JEMALLOC:
		n = alloc_table__add(info, jemalloc_names, false, so, sites, n, cap);
		break;
	case ALLOC_MIMALLOC:
		n = alloc_table__add(info, mimalloc_names, false, so, sites, n, cap);
		break;
	case ALLOC_TCMALLOC:
		n = alloc_table__add(info, tcmalloc_names, false, so, sites, n, cap);
		break;
	case ALLOC_STATIC:
		break;
	default:
		return 0;
	}
	/* Replacement allocators export the standard and C++ names too. A static executable's
	 * free may be glibc's own leaf free, but we cannot tell: track its depth. */
	n = alloc_table__add(info, libc_names, false, so, sites, n, cap);
	return alloc_table__add(info, cxx_names, false, so, sites, n, cap);
}
