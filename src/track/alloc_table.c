// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <string.h>
#include "bpf/probe_spec.h"
#include "bpf/proc.h"
#include "track/alloc_table.h"
#include "track/probe_place.h"

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
	/* the C++ helpers and the counted form: they call mi_malloc's code directly (no PLT), so
	 * only their own entry is seen by an interposer */
	{"mi_new", S_MALLOC0},		   {"mi_new_nothrow", S_MALLOC0},
	{"mi_new_aligned", S_ALIGNED0},	   {"mi_new_aligned_nothrow", S_ALIGNED0},
	{"mi_mallocn", S_MALLOCN},	   {"mi_calloc_aligned", S_CALLOC},
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

/*
 * One row per allocator family, in classification order: a file's defined symbols are matched
 * against the rows top down and the first row that fits names it. The non-libc allocators come
 * first: they export the libc names too.
 */
struct alloc_family {
	enum alloc_kind kind;
	const char *name; /* the manifest's library "kind" */
	const char *marks[4]; /* any of these defined: this family (NULL ends) */
	const char *unless; /* ... unless this one is defined too */
	bool exe_only; /* only the executable itself can be of this family */
	const struct alloc_entry *own; /* its own entry points, probed first */
	bool leaf_free; /* its free calls nothing hooked: entry probe only, no depth */
	bool std_names; /* also the libc and C++ names (a replacement exports them), with depth */
};

static const struct alloc_family families[] = {
	{ALLOC_MIMALLOC, "mimalloc", {"mi_malloc"}, .own = mimalloc_names, .std_names = true},
	{ALLOC_TCMALLOC, "tcmalloc", {"tc_malloc"}, .own = tcmalloc_names, .std_names = true},
	{ALLOC_JEMALLOC, "jemalloc", {"mallocx", "je_malloc", "_rjem_malloc"},
	 .own = jemalloc_names, .std_names = true},
	/* an executable with an allocator linked in; its free may be glibc's own leaf free, but
	 * we cannot tell */
	{ALLOC_STATIC, "static", {"malloc", "_Znwm"}, .exe_only = true, .std_names = true},
	{ALLOC_CXX, "libstdc++", {"_Znwm"}, .unless = "__libc_malloc", .own = cxx_names},
	{ALLOC_LIBC, "libc", {"malloc"}, .own = libc_names, .leaf_free = true},
};
#define NR_FAMILIES (sizeof(families) / sizeof(families[0]))

static const struct alloc_family *family_of(enum alloc_kind k)
{
	for (size_t i = 0; i < NR_FAMILIES; i++)
		if (families[i].kind == k)
			return &families[i];
	return NULL;
}

const char *alloc_kind__name(enum alloc_kind k)
{
	const struct alloc_family *f = family_of(k);

	return f ? f->name : k == ALLOC_NONE ? "none" : "?";
}

enum alloc_kind alloc_table__classify(const struct elf_info *info, bool is_executable)
{
	/* memtrack's interposer exports the whole malloc family, C++'s operators and mimalloc's,
	 * jemalloc's and tcmalloc's names, and forwards each call to the next definition, which is
	 * probed or served: never an allocator. Probed (as a mimalloc, in uprobe mode, loaded idle
	 * by a nested memtrack or the tests' reference runs), its return probes hijacked the
	 * return address of each call, and for a while after the run (the detacher, detacher.h)
	 * the stacks the next run's interposer unwound ended there: one frame, "[uprobes]" */
	if (elf_info__find(info, MT_PRELOAD_MARK))
		return ALLOC_NONE;
	for (size_t i = 0; i < NR_FAMILIES; i++) {
		const struct alloc_family *f = &families[i];
		bool hit = false;

		if (f->exe_only && !is_executable)
			continue;
		for (int m = 0; m < 4 && f->marks[m] && !hit; m++)
			hit = elf_info__find(info, f->marks[m]) != 0;
		if (hit && !(f->unless && elf_info__find(info, f->unless)))
			return f->kind;
	}
	return ALLOC_NONE;
}

bool alloc_table__defines_c(const struct elf_info *info)
{
	for (const struct alloc_entry *t = libc_names; t->name; t++)
		if (!(t->spec & MT_SPEC_DLOPEN) && elf_info__find(info, t->name))
			return true;
	return false;
}

/* What a site's cookie says beyond its table row: where its probes sit, and whether a
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

/* The argument registers the entry program reads for a site (bit i: argument i), which the
 * instructions its probes skip must leave alone (probe_place.h). */
static unsigned alloc_table__args(uint32_t spec)
{
	unsigned m = 0;

	if (spec & (MT_SPEC_FREE | MT_SPEC_OLD | MT_SPEC_MEMPTR))
		m |= 1u << MT_SPEC_PTR(spec);
	if (spec & MT_SPEC_HAS_SIZE)
		m |= 1u << MT_SPEC_SIZE(spec);
	if (spec & MT_SPEC_PRODUCT)
		m |= 1u << MT_SPEC_NMEMB(spec);
	return m;
}

/* The site's argument indices where its probes moved them (probe_place__site's where). */
static uint32_t alloc_table__moved_args(uint32_t spec, const uint8_t where[4])
{
	uint32_t size = MT_SPEC_SIZE(spec), nmemb = MT_SPEC_NMEMB(spec), ptr = MT_SPEC_PTR(spec);

	if (spec & MT_SPEC_HAS_SIZE)
		size = where[size];
	if (spec & MT_SPEC_PRODUCT)
		nmemb = where[nmemb];
	if (spec & (MT_SPEC_FREE | MT_SPEC_OLD | MT_SPEC_MEMPTR))
		ptr = where[ptr];

	return MT_SPEC(MT_SPEC_TYPE(spec), size, nmemb, ptr, spec & ~0x3fffu);
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
		if (sites[n].entry) {
			uint8_t where[4];

			/* as far as a shared library's free can say in its cookie (MT_SPEC_AT,
			 * for MT_SPEC_SELF: 6 bits; jemalloc's free moves 48 bytes) */
			sites[n].probe = probe_place__site(info, off, alloc_table__args(spec),
							   MT_SPEC_AT_MAX, where);
			sites[n].spec = alloc_table__moved_args(spec, where);
		}
		sites[n].spec = alloc_table__cookie(&sites[n], shared);
		n++;
	}
	return n;
}

int alloc_table__sites(const struct elf_info *info, enum alloc_kind kind, bool is_executable,
		       struct alloc_site *sites, int cap)
{
	const struct alloc_family *f = family_of(kind);
	bool so = !is_executable;
	int n = 0;

	if (!f)
		return 0;
	if (f->own)
		n = alloc_table__add(info, f->own, f->leaf_free, so, sites, n, cap);
	/* Replacement allocators export the standard and C++ names too. A static executable's
	 * free may be glibc's own leaf free, but we cannot tell: track its depth. */
	if (f->std_names) {
		n = alloc_table__add(info, libc_names, false, so, sites, n, cap);
		n = alloc_table__add(info, cxx_names, false, so, sites, n, cap);
	}
	return n;
}
