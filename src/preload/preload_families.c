// SPDX-License-Identifier: MIT
/*
 * jemalloc, mimalloc and tcmalloc as shared libraries: when one of them is the process's
 * malloc (the next definition after the interposer: LD_PRELOAD=libmimalloc.so, a program linked
 * with -ljemalloc), the standard names in preload_hooks.c record as they do over glibc (the
 * API is the same), operator new and delete go to the library's own (pl_fam_new), and the
 * library's public entry points below are interposed by name, forwarded with dlsym(RTLD_NEXT)
 * and recorded with the meaning their row has in the uprobe path's table
 * (src/track/alloc_table.c; the same probe_spec.h shapes, decoded as alloc.bpf.c does). Only
 * the outermost hooked call of a thread records: mimalloc's malloc calling mi_malloc through
 * its PLT reaches mi_malloc here nested.
 *
 * Not served, so left to uprobes: an allocator inside the executable (redis-server's jemalloc,
 * Rust's _rjem_*; the executable's own calls never reach a shared library), prefixed builds
 * (je_*), which do not define malloc, and a library whose entry point is not the one after us
 * (one dlopen'ed beside another malloc: its calls forward unrecorded, alloc_table's uprobes
 * keep them).
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdbool.h>
#include <string.h>
#include "bpf/probe_spec.h"
#include "preload/preload.h"

#define PL_API __attribute__((visibility("default")))

/* The families, by a symbol only that library defines (alloc_table.c's marks). */
static const struct {
	const char *mark;
	uint32_t flag; /* MT_SHM_PROC_* */
} pl_fams[] = {
    {"mi_malloc", MT_SHM_PROC_MIMALLOC},
    {"tc_malloc", MT_SHM_PROC_TCMALLOC},
    {"mallocx", MT_SHM_PROC_JEMALLOC},
};

/* The served library (its link map): an entry point records only when its next definition
 * lies in it. NULL when no family is served. */
static struct link_map *pl_fam_obj;

uint32_t pl_fam_serve(void)
{
	struct link_map *next;

	/* our malloc is the one the program calls, and the next one is a shared library's */
	if (!pl_malloc_is_ours() || !pl.next.malloc || !(next = pl_obj_of((void *)pl.next.malloc)))
		return 0;
	for (size_t i = 0; i < sizeof(pl_fams) / sizeof(pl_fams[0]); i++) {
		void *m = dlsym(RTLD_NEXT, pl_fams[i].mark);

		if (m && pl_obj_of(m) == next) {
			pl_fam_obj = next;
			return MT_SHM_PROC_LIBC | MT_SHM_PROC_CXX | pl_fams[i].flag;
		}
	}
	return 0;
}

/* --- C++ operator new of the served library --------------------------------------------- */

typedef void *(*pl_new_fn1)(size_t, uintptr_t);
typedef void *(*pl_new_fn2)(size_t, uintptr_t, uintptr_t);
typedef void *(*pl_new_fn0)(size_t);

static inline void *pl_fam_new_fwd(void *f, int nargs, size_t n, uintptr_t a, uintptr_t b)
{
	return nargs == 1   ? ((pl_new_fn0)f)(n)
	       : nargs == 2 ? ((pl_new_fn1)f)(n, a)
			    : ((pl_new_fn2)f)(n, a, b);
}

void *pl_fam_new(void *thr, void *nothrow, bool is_nothrow, uint32_t type, int nargs, size_t n,
		 uintptr_t a, uintptr_t b)
{
	static const char nothrow_tag; /* std::nothrow's value is never read */
	struct pl_thread *t = &pl_t;
	void *p;

	if (!pl_enter(t)) {
		pl_leave(t);
		return pl_fam_new_fwd(thr, nargs, n, a, b); /* nested: unrecorded */
	}
	if (is_nothrow)
		p = pl_fam_new_fwd(thr, nargs, n, a, b);
	else /* new(size [, align]) -> new(size [, align], nothrow) */
		p = pl_fam_new_fwd(nothrow, nargs + 1, n, nargs == 1 ? (uintptr_t)&nothrow_tag : a,
				   (uintptr_t)&nothrow_tag);
	if (!p && !is_nothrow) {
		/* the throwing form with our depth released: it may throw through here */
		pl_leave(t);
		p = pl_fam_new_fwd(thr, nargs, n, a, b);
		if (!pl_enter(t)) {
			pl_leave(t);
			return p;
		}
	}
	if (p)
		pl_emit(t, type, (uintptr_t)p, n, 0);
	pl_leave(t);
	return p;
}

/* --- the public entry points --------------------------------------------------------------- */

/* The rows of alloc_table.c's jemalloc, mimalloc and tcmalloc tables that a shared library
 * exports (no je_ or _rjem_ prefixes), with their argument counts; tc_new, tc_newarray,
 * mi_new and mi_new_aligned throw, so their first attempt is the nothrow form (pl_fam_call). */
enum pl_fam_fn {
	PF_MALLOCX,
	PF_RALLOCX,
	PF_DALLOCX,
	PF_SDALLOCX,
	PF_MI_MALLOC,
	PF_MI_CALLOC,
	PF_MI_ZALLOC,
	PF_MI_REALLOC,
	PF_MI_FREE,
	PF_MI_MALLOC_ALIGNED,
	PF_MI_ZALLOC_ALIGNED,
	PF_MI_REALLOC_ALIGNED,
	PF_MI_NEW,
	PF_MI_NEW_NOTHROW,
	PF_MI_NEW_ALIGNED,
	PF_MI_NEW_ALIGNED_NOTHROW,
	PF_MI_MALLOCN,
	PF_MI_CALLOC_ALIGNED,
	PF_TC_MALLOC,
	PF_TC_CALLOC,
	PF_TC_REALLOC,
	PF_TC_FREE,
	PF_TC_CFREE,
	PF_TC_MEMALIGN,
	PF_TC_POSIX_MEMALIGN,
	PF_TC_VALLOC,
	PF_TC_PVALLOC,
	PF_TC_FREE_SIZED,
	PF_TC_NEW,
	PF_TC_NEWARRAY,
	PF_TC_DELETE,
	PF_TC_DELETEARRAY,
	PF_TC_NEW_NOTHROW,
	PF_TC_NEWARRAY_NOTHROW,
	PF_NR,
};

static const struct {
	const char *name;
	uint32_t spec; /* probe_spec.h shape, as in alloc_table.c */
	uint8_t nargs;
	uint8_t nothrow; /* throws: its nothrow form (enum pl_fam_fn), else 0 */
} pl_fam_fns[PF_NR] = {
    [PF_MALLOCX] = {"mallocx", S_MALLOC0, 2},
    [PF_RALLOCX] = {"rallocx", S_REALLOC, 3},
    [PF_DALLOCX] = {"dallocx", S_FREE, 2},
    [PF_SDALLOCX] = {"sdallocx", S_FREE, 3},
    [PF_MI_MALLOC] = {"mi_malloc", S_MALLOC0, 1},
    [PF_MI_CALLOC] = {"mi_calloc", S_CALLOC, 2},
    [PF_MI_ZALLOC] = {"mi_zalloc", S_ZALLOC0, 1},
    [PF_MI_REALLOC] = {"mi_realloc", S_REALLOC, 2},
    [PF_MI_FREE] = {"mi_free", S_FREE, 1},
    [PF_MI_MALLOC_ALIGNED] = {"mi_malloc_aligned", S_ALIGNED0, 2},
    [PF_MI_ZALLOC_ALIGNED] = {"mi_zalloc_aligned", S_ALIGNED0, 2},
    [PF_MI_REALLOC_ALIGNED] = {"mi_realloc_aligned", S_REALLOC, 3},
    [PF_MI_NEW] = {"mi_new", S_MALLOC0, 1, PF_MI_NEW_NOTHROW},
    [PF_MI_NEW_NOTHROW] = {"mi_new_nothrow", S_MALLOC0, 1},
    [PF_MI_NEW_ALIGNED] = {"mi_new_aligned", S_ALIGNED0, 2, PF_MI_NEW_ALIGNED_NOTHROW},
    [PF_MI_NEW_ALIGNED_NOTHROW] = {"mi_new_aligned_nothrow", S_ALIGNED0, 2},
    [PF_MI_MALLOCN] = {"mi_mallocn", S_MALLOCN, 2},
    [PF_MI_CALLOC_ALIGNED] = {"mi_calloc_aligned", S_CALLOC, 3},
    [PF_TC_MALLOC] = {"tc_malloc", S_MALLOC0, 1},
    [PF_TC_CALLOC] = {"tc_calloc", S_CALLOC, 2},
    [PF_TC_REALLOC] = {"tc_realloc", S_REALLOC, 2},
    [PF_TC_FREE] = {"tc_free", S_FREE, 1},
    [PF_TC_CFREE] = {"tc_cfree", S_FREE, 1},
    [PF_TC_MEMALIGN] = {"tc_memalign", S_ALIGNED1, 2},
    [PF_TC_POSIX_MEMALIGN] = {"tc_posix_memalign", S_MEMALIGN, 3},
    [PF_TC_VALLOC] = {"tc_valloc", S_ALIGNED0, 1},
    [PF_TC_PVALLOC] = {"tc_pvalloc", S_ALIGNED0, 1},
    [PF_TC_FREE_SIZED] = {"tc_free_sized", S_FREE, 2},
    [PF_TC_NEW] = {"tc_new", S_MALLOC0, 1, PF_TC_NEW_NOTHROW},
    [PF_TC_NEWARRAY] = {"tc_newarray", S_MALLOC0, 1, PF_TC_NEWARRAY_NOTHROW},
    [PF_TC_DELETE] = {"tc_delete", S_FREE, 1},
    [PF_TC_DELETEARRAY] = {"tc_deletearray", S_FREE, 1},
    /* not rows of the uprobe table, nor interposed (neither mechanism records a direct call
     * of them): what tc_new and tc_newarray try first */
    [PF_TC_NEW_NOTHROW] = {"tc_new_nothrow", S_MALLOC0, 2},
    [PF_TC_NEWARRAY_NOTHROW] = {"tc_newarray_nothrow", S_MALLOC0, 2},
};

/* The next definitions, resolved at first use (bit 0 set: it lies in the served library). */
static uintptr_t pl_fam_next[PF_NR];

/* 0 when there is no next definition: a program testing for the allocator with a weak
 * reference found ours. It gets what a failed call gives (NULL, ENOMEM; a free does nothing). */
static uintptr_t pl_fam_resolve(enum pl_fam_fn i)
{
	uintptr_t v = __atomic_load_n(&pl_fam_next[i], __ATOMIC_ACQUIRE);
	void *f;

	if (pl_likely(v))
		return v;
	f = pl_next_sym(pl_fam_fns[i].name);
	if (!f)
		return 0;
	v = (uintptr_t)f | (pl_fam_obj && pl_obj_of(f) == pl_fam_obj);
	__atomic_store_n(&pl_fam_next[i], v, __ATOMIC_RELEASE);
	return v;
}

typedef uintptr_t (*pl_fn1)(uintptr_t);
typedef uintptr_t (*pl_fn2)(uintptr_t, uintptr_t);
typedef uintptr_t (*pl_fn3)(uintptr_t, uintptr_t, uintptr_t);

static inline uintptr_t pl_fam_fwd(uintptr_t f, int nargs, const uintptr_t *a)
{
	f &= ~(uintptr_t)1;
	return nargs == 1   ? ((pl_fn1)f)(a[0])
	       : nargs == 2 ? ((pl_fn2)f)(a[0], a[1])
			    : ((pl_fn3)f)(a[0], a[1], a[2]);
}

/* What the uprobe path writes for a call of shape spec that returned ret (alloc.bpf.c's
 * return program): posix_memalign-like only on 0, realloc-like with old_addr or a Free when a
 * 0-byte resize returned NULL, any other only when it returned a block. */
static void pl_fam_record(struct pl_thread *t, uint32_t spec, const uintptr_t *a, uintptr_t ret)
{
	uint64_t size = 0, old = a[MT_SPEC_PTR(spec)];
	void *out;

	if (spec & MT_SPEC_HAS_SIZE)
		size = a[MT_SPEC_SIZE(spec)];
	if (spec & MT_SPEC_PRODUCT)
		size *= a[MT_SPEC_NMEMB(spec)]; /* u64, wrapping, as the uprobe path */
	if (spec & MT_SPEC_MEMPTR) {
		if ((int)ret == 0 && old) {
			memcpy(&out, (void *)(uintptr_t)old, sizeof(out));
			if (out)
				pl_emit(t, MT_SPEC_TYPE(spec), (uintptr_t)out, size, 0);
		}
	} else if (spec & MT_SPEC_OLD) {
		if (ret)
			pl_emit(t, MT_EV_REALLOC, ret, size, old);
		else if (size == 0 && old)
			pl_emit(t, MT_EV_FREE, old, 0, 0);
	} else if (ret) {
		pl_emit(t, MT_SPEC_TYPE(spec), ret, size, 0);
	}
}

static uintptr_t pl_fam_call(enum pl_fam_fn i, uintptr_t a0, uintptr_t a1, uintptr_t a2)
{
	const uintptr_t a[3] = {a0, a1, a2};
	uint32_t spec = pl_fam_fns[i].spec;
	int nargs = pl_fam_fns[i].nargs, m = pl_mode();
	struct pl_thread *t = &pl_t;
	uintptr_t f, ret, nt[3];
	enum pl_fam_fn alt;

	if (pl_unlikely(m == PL_BOOT))
		return 0; /* the bootstrap's dlsym calls only the standard names */
	if (m != PL_ON) {
		f = pl_fam_resolve(i);
		goto fwd;
	}
	if (!pl_enter(t)) {
		f = pl_fam_resolve(i);
		ret = f ? pl_fam_fwd(f, nargs, a) : 0;
		pl_leave(t);
		goto out;
	}
	f = pl_fam_resolve(i); /* what dlsym may allocate is nested: not the program's */
	if (!(f & 1)) {
		/* not the served library's (or none): forwarded, left to uprobes */
		pl_leave(t);
		goto fwd;
	}
	if (spec & MT_SPEC_FREE) {
		/* written before the block can be reused; free(NULL) is no event */
		if (a[MT_SPEC_PTR(spec)])
			pl_emit(t, MT_EV_FREE, a[MT_SPEC_PTR(spec)], 0, 0);
		ret = pl_fam_fwd(f, nargs, a);
		pl_leave(t);
		return ret;
	}
	alt = pl_fam_fns[i].nothrow;
	if (alt) {
		/* A throwing entry: the nothrow form first, with our depth held; only if it fails,
		 * the throwing one with the depth released (it may throw through here: nothing to
		 * undo), its block recorded after it returned. */
		uintptr_t g = pl_fam_resolve(alt);
		static const char nothrow_tag; /* std::nothrow's value is never read */
		int ntargs = pl_fam_fns[alt].nargs;

		/* the same arguments, and a const std::nothrow_t & after them if it takes one */
		nt[0] = a0;
		nt[1] = nargs > 1 ? a1 : (uintptr_t)&nothrow_tag;
		nt[2] = (uintptr_t)&nothrow_tag;
		ret = g ? pl_fam_fwd(g, ntargs, nt) : 0;
		if (!ret) {
			pl_leave(t);
			ret = pl_fam_fwd(f, nargs, a);
			if (!pl_enter(t)) {
				pl_leave(t);
				return ret;
			}
		}
	} else {
		ret = pl_fam_fwd(f, nargs, a);
	}
	pl_fam_record(t, spec, a, ret);
	pl_leave(t);
	return ret;
fwd:
	ret = f ? pl_fam_fwd(f, nargs, a) : 0;
out:
	if (!f && !(spec & MT_SPEC_FREE))
		errno = ENOMEM;
	return (spec & MT_SPEC_MEMPTR) && !f ? ENOMEM : ret;
}

/* Integer stand-ins for every argument and for int results: the same registers in the x86-64
 * and AArch64 ABIs. */
typedef uintptr_t u;

PL_API void *mallocx(u n, u fl)
{
	return (void *)pl_fam_call(PF_MALLOCX, n, fl, 0);
}
PL_API void *rallocx(u p, u n, u fl)
{
	return (void *)pl_fam_call(PF_RALLOCX, p, n, fl);
}
PL_API void dallocx(u p, u fl)
{
	pl_fam_call(PF_DALLOCX, p, fl, 0);
}
PL_API void sdallocx(u p, u n, u fl)
{
	pl_fam_call(PF_SDALLOCX, p, n, fl);
}

PL_API void *mi_malloc(u n)
{
	return (void *)pl_fam_call(PF_MI_MALLOC, n, 0, 0);
}
PL_API void *mi_calloc(u c, u n)
{
	return (void *)pl_fam_call(PF_MI_CALLOC, c, n, 0);
}
PL_API void *mi_zalloc(u n)
{
	return (void *)pl_fam_call(PF_MI_ZALLOC, n, 0, 0);
}
PL_API void *mi_realloc(u p, u n)
{
	return (void *)pl_fam_call(PF_MI_REALLOC, p, n, 0);
}
PL_API void mi_free(u p)
{
	pl_fam_call(PF_MI_FREE, p, 0, 0);
}
PL_API void *mi_malloc_aligned(u n, u al)
{
	return (void *)pl_fam_call(PF_MI_MALLOC_ALIGNED, n, al, 0);
}
PL_API void *mi_zalloc_aligned(u n, u al)
{
	return (void *)pl_fam_call(PF_MI_ZALLOC_ALIGNED, n, al, 0);
}
PL_API void *mi_realloc_aligned(u p, u n, u al)
{
	return (void *)pl_fam_call(PF_MI_REALLOC_ALIGNED, p, n, al);
}

PL_API void *mi_new(u n) { return (void *)pl_fam_call(PF_MI_NEW, n, 0, 0); }
PL_API void *mi_new_nothrow(u n) { return (void *)pl_fam_call(PF_MI_NEW_NOTHROW, n, 0, 0); }
PL_API void *mi_new_aligned(u n, u al)
{
	return (void *)pl_fam_call(PF_MI_NEW_ALIGNED, n, al, 0);
}
PL_API void *mi_new_aligned_nothrow(u n, u al)
{
	return (void *)pl_fam_call(PF_MI_NEW_ALIGNED_NOTHROW, n, al, 0);
}
PL_API void *mi_mallocn(u c, u n) { return (void *)pl_fam_call(PF_MI_MALLOCN, c, n, 0); }
PL_API void *mi_calloc_aligned(u c, u n, u al)
{
	return (void *)pl_fam_call(PF_MI_CALLOC_ALIGNED, c, n, al);
}

PL_API void *tc_malloc(u n)
{
	return (void *)pl_fam_call(PF_TC_MALLOC, n, 0, 0);
}
PL_API void *tc_calloc(u c, u n)
{
	return (void *)pl_fam_call(PF_TC_CALLOC, c, n, 0);
}
PL_API void *tc_realloc(u p, u n)
{
	return (void *)pl_fam_call(PF_TC_REALLOC, p, n, 0);
}
PL_API void tc_free(u p)
{
	pl_fam_call(PF_TC_FREE, p, 0, 0);
}
PL_API void tc_cfree(u p)
{
	pl_fam_call(PF_TC_CFREE, p, 0, 0);
}
PL_API void *tc_memalign(u al, u n)
{
	return (void *)pl_fam_call(PF_TC_MEMALIGN, al, n, 0);
}
PL_API int tc_posix_memalign(u out, u al, u n)
{
	return (int)pl_fam_call(PF_TC_POSIX_MEMALIGN, out, al, n);
}
PL_API void *tc_valloc(u n)
{
	return (void *)pl_fam_call(PF_TC_VALLOC, n, 0, 0);
}
PL_API void *tc_pvalloc(u n)
{
	return (void *)pl_fam_call(PF_TC_PVALLOC, n, 0, 0);
}
PL_API void tc_free_sized(u p, u n)
{
	pl_fam_call(PF_TC_FREE_SIZED, p, n, 0);
}
PL_API void *tc_new(u n)
{
	return (void *)pl_fam_call(PF_TC_NEW, n, 0, 0);
}
PL_API void *tc_newarray(u n)
{
	return (void *)pl_fam_call(PF_TC_NEWARRAY, n, 0, 0);
}
PL_API void tc_delete(u p)
{
	pl_fam_call(PF_TC_DELETE, p, 0, 0);
}
PL_API void tc_deletearray(u p)
{
	pl_fam_call(PF_TC_DELETEARRAY, p, 0, 0);
}
