/* SPDX-License-Identifier: MIT */
/*
 * What an allocator probe site does, packed into the 64-bit BPF cookie of its uprobe. One
 * generic entry program and one return program serve every site; user space builds the cookie
 * from the table in src/track/alloc_table.c. Bits:
 *   0-7   event type written at return (MT_EV_MALLOC ...), or 0 for a free-class site
 *   8-9   argument index (0-3) of the size
 *   10-11 argument index of the second factor (calloc nmemb) when MT_SPEC_PRODUCT
 *   12-13 argument index of the old pointer (realloc) or out-pointer (posix_memalign)
 *   14-15 MT_SPEC_FAM: with MT_SPEC_PL, the family library the site is in (0: glibc's)
 *   16-23 flags below
 *   24-29 MT_SPEC_AT: bytes from the function's entry to its probes (probe_place.h)
 *   30    MT_SPEC_PL: a family the preload interposer serves (glibc, libstdc++, a shared
 *         jemalloc, mimalloc or tcmalloc)
 *   32-63 MT_COOKIE_GEN: the generation of glibc's links the site belongs to (auto mode,
 *         src/track/tracker_glibc.c), 0 for a site kept in for the whole run. The programs
 *         do nothing at a site of another generation than stop_ctl[13]'s: links taken out and
 *         still closing (the kernel's grace period, ~25-40 ms) beside the next generation's
 *         would otherwise run for the same call.
 * The programs read bits 0-31 as `spec` (__u32).
 */
#ifndef MEMTRACK_PROBE_SPEC_H
#define MEMTRACK_PROBE_SPEC_H

#include "bpf/events.h"

#define MT_SPEC_TYPE(s)	  ((s)&0xff)
#define MT_SPEC_SIZE(s)	  (((s) >> 8) & 3)
#define MT_SPEC_NMEMB(s)  (((s) >> 10) & 3)
#define MT_SPEC_PTR(s)	  (((s) >> 12) & 3)
#define MT_SPEC_PRODUCT	  (1u << 16) /* size = arg[SIZE] * arg[NMEMB] */
#define MT_SPEC_OLD	  (1u << 17) /* arg[PTR] is the old block (realloc family) */
#define MT_SPEC_MEMPTR	  (1u << 18) /* arg[PTR] is void **: success = return 0, addr = *arg */
#define MT_SPEC_FREE	  (1u << 19) /* frees arg[PTR]; written at entry */
#define MT_SPEC_LEAF	  (1u << 20) /* calls no hooked function: no return probe, no depth */
#define MT_SPEC_HAS_SIZE  (1u << 21) /* the site has a size argument */
#define MT_SPEC_DLOPEN	  (1u << 22) /* dlopen/dlmopen: at return, stop for library discovery */
/* A direct call (call rel32) from this file's own code to this entry is the library's business,
 * not a user's call: an LD_PRELOAD interposer never sees it (glibc flushing a thread's cache
 * at thread exit calls __libc_free, the address of free). Shared libraries only: in an
 * executable with a linked-in allocator the program's own calls are direct. Set on frees only
 * (alloc_table.c says why). */
#define MT_SPEC_SELF	  (1u << 23)
#define MT_SPEC_AT(s)	  (((s) >> 24) & 63)
#define MT_SPEC_AT_MAX	  63
/* A site of glibc or libstdc++, whose calls the preload interposer records for the processes
 * it serves (struct mt_proc.served): the programs skip those processes at such a site. */
#define MT_SPEC_PL (1u << 30)
/* With MT_SPEC_PL, a site of a shared jemalloc (1), mimalloc (2) or tcmalloc (3): the
 * interposer records its calls only in a process whose malloc it is (mt_proc.served has that
 * family's bit, MT_SERVED_FAM_BIT); another process that calls it (one that dlopen'ed it
 * RTLD_LOCAL and calls it through dlsym) is recorded at the site. 0: glibc or libstdc++. */
#define MT_SPEC_FAM(s)		 (((s) >> 14) & 3)
#define MT_COOKIE_GEN_SHIFT	 32
#define MT_COOKIE_GEN(c)	 ((__u32)((c) >> MT_COOKIE_GEN_SHIFT))
#define MT_SPEC_WITH_FAM(s, fam) ((unsigned)(s) | ((unsigned)(fam) << 14))

#define MT_SPEC(type, size_arg, nmemb_arg, ptr_arg, flags)                                          \
	((unsigned)(type) | ((unsigned)(size_arg) << 8) | ((unsigned)(nmemb_arg) << 10) |          \
	 ((unsigned)(ptr_arg) << 12) | (unsigned)(flags))
#define MT_SPEC_WITH_AT(s, at) ((unsigned)(s) | ((unsigned)(at) << 24))

/* The shapes of allocator calls, for the rows of src/track/alloc_table.c. The return-value-based
 * cases (realloc(p, 0) freeing, NULL on failure) are decided in the BPF return program. */
#define S_MALLOC0  MT_SPEC(MT_EV_MALLOC, 0, 0, 0, MT_SPEC_HAS_SIZE) /* f(size) */
#define S_CALLOC   MT_SPEC(MT_EV_CALLOC, 1, 0, 0, MT_SPEC_HAS_SIZE | MT_SPEC_PRODUCT)
#define S_ZALLOC0  MT_SPEC(MT_EV_CALLOC, 0, 0, 0, MT_SPEC_HAS_SIZE) /* zeroed f(size) */
#define S_MALLOCN  MT_SPEC(MT_EV_MALLOC, 1, 0, 0, MT_SPEC_HAS_SIZE | MT_SPEC_PRODUCT) /* f(n, size) */
#define S_REALLOC  MT_SPEC(MT_EV_REALLOC, 1, 0, 0, MT_SPEC_HAS_SIZE | MT_SPEC_OLD)
#define S_REALLOCA MT_SPEC(MT_EV_REALLOC, 2, 1, 0, MT_SPEC_HAS_SIZE | MT_SPEC_OLD | MT_SPEC_PRODUCT)
#define S_ALIGNED1 MT_SPEC(MT_EV_ALIGNED_ALLOC, 1, 0, 0, MT_SPEC_HAS_SIZE) /* f(align, size) */
#define S_ALIGNED0 MT_SPEC(MT_EV_ALIGNED_ALLOC, 0, 0, 0, MT_SPEC_HAS_SIZE) /* f(size, ...) */
#define S_MEMALIGN MT_SPEC(MT_EV_ALIGNED_ALLOC, 2, 0, 0, MT_SPEC_HAS_SIZE | MT_SPEC_MEMPTR)
#define S_FREE	   MT_SPEC(0, 0, 0, 0, MT_SPEC_FREE)
#define S_FREELEAF MT_SPEC(0, 0, 0, 0, MT_SPEC_FREE | MT_SPEC_LEAF)
#define S_DLOPEN   MT_SPEC(0, 0, 0, 0, MT_SPEC_DLOPEN)

#endif
