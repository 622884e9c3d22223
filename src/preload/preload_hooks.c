// SPDX-License-Identifier: MIT
/*
 * The interposed entry points: glibc's malloc family and every C++ operator new/delete. Each
 * forwards to the next definition and, when it is the outermost hooked call of its thread and
 * succeeded, writes the record the uprobe path writes for the same call (alloc.bpf.c and
 * src/track/alloc_table.c are the reference): calloc size = nmemb x size (saturated),
 * realloc(NULL, n) a Realloc without old_addr, realloc(p, 0) returning NULL a Free of p,
 * posix_memalign only when it returns 0, free(NULL) nothing, failed calls nothing.
 * operator new may throw through these frames (unwound by their .eh_frame, no cleanup needed:
 * see pl_new).
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "preload/preload.h"

#define PL_API __attribute__((visibility("default")))

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

/* --- the C family ------------------------------------------------------------------------ */

PL_API void *malloc(size_t n)
{
	int m = pl_mode();
	struct pl_thread *t;
	void *p;

	if (pl_unlikely(m != PL_ON)) {
		if (m == PL_BOOT)
			return pl_boot_alloc(n, 16);
		return pl.next.malloc ? pl.next.malloc(n) : __libc_malloc(n);
	}
	t = &pl_t;
	if (!pl_enter(t)) {
		p = pl.next.malloc(n);
	} else {
		p = pl.next.malloc(n);
		if (p)
			pl_emit(t, MT_EV_MALLOC, (uintptr_t)p, n, 0);
	}
	pl_leave(t);
	return p;
}

PL_API void free(void *p)
{
	int m;
	struct pl_thread *t;

	if (pl_unlikely(pl_boot_owns(p)))
		return; /* the bootstrap buffer is never reused */
	m = pl_mode();
	if (pl_unlikely(m != PL_ON)) {
		if (m != PL_BOOT)
			(pl.next.free ? pl.next.free : __libc_free)(p);
		return;
	}
	if (!p) {
		pl.next.free(p);
		return;
	}
	t = &pl_t;
	/* Written before the block can be reused: its Free precedes any later Malloc of it. */
	if (pl_enter(t))
		pl_emit(t, MT_EV_FREE, (uintptr_t)p, 0, 0);
	pl.next.free(p);
	pl_leave(t);
}

PL_API void *calloc(size_t nmemb, size_t size)
{
	int m = pl_mode();
	struct pl_thread *t;
	size_t total;
	void *p;

	if (pl_unlikely(m != PL_ON)) {
		if (m == PL_BOOT)
			return __builtin_mul_overflow(nmemb, size, &total) ? NULL
									   : pl_boot_alloc(total, 16);
		if (pl.next.calloc)
			return pl.next.calloc(nmemb, size);
		if (__builtin_mul_overflow(nmemb, size, &total))
			return NULL;
		p = __libc_malloc(total);
		return p ? memset(p, 0, total) : NULL;
	}
	t = &pl_t;
	if (!pl_enter(t)) {
		p = pl.next.calloc(nmemb, size);
	} else {
		p = pl.next.calloc(nmemb, size);
		if (p) {
			if (__builtin_mul_overflow(nmemb, size, &total))
				total = SIZE_MAX;
			pl_emit(t, MT_EV_CALLOC, (uintptr_t)p, total, 0);
		}
	}
	pl_leave(t);
	return p;
}

/* nmemb * size, saturated as the uprobe path computes it (alloc.bpf.c): a product that wrapped
 * to 0 made a failed reallocarray (NULL, the block untouched) read as realloc(p, 0), a Free of a
 * block still live, until 8 December 2026 */
static inline uint64_t pl_product(size_t nmemb, size_t size)
{
	uint64_t total;

	return __builtin_mul_overflow((uint64_t)nmemb, (uint64_t)size, &total) ? UINT64_MAX : total;
}

/* realloc and reallocarray: size is what was asked for (a product for reallocarray). */
static void pl_realloc_record(struct pl_thread *t, void *old, void *p, uint64_t size)
{
	if (p)
		pl_emit(t, MT_EV_REALLOC, (uintptr_t)p, size, (uintptr_t)old);
	else if (size == 0 && old)
		pl_emit(t, MT_EV_FREE, (uintptr_t)old, 0, 0); /* glibc freed it */
}

/* A block from the bootstrap buffer moves to the real allocator: recorded as an allocation. */
static void *pl_realloc_boot(void *old, size_t n)
{
	size_t have = pl_boot_size(old);
	void *p = malloc(n);

	if (p)
		memcpy(p, old, have < n ? have : n);
	return p;
}

PL_API void *realloc(void *old, size_t n)
{
	int m;
	struct pl_thread *t;
	void *p;

	if (pl_unlikely(old && pl_boot_owns(old)))
		return pl_realloc_boot(old, n);
	m = pl_mode();
	if (pl_unlikely(m != PL_ON)) {
		if (m == PL_BOOT)
			return old ? NULL : pl_boot_alloc(n, 16);
		return pl.next.realloc(old, n);
	}
	t = &pl_t;
	if (!pl_enter(t)) {
		p = pl.next.realloc(old, n);
	} else {
		p = pl.next.realloc(old, n);
		pl_realloc_record(t, old, p, n);
	}
	pl_leave(t);
	return p;
}

PL_API void *reallocarray(void *old, size_t nmemb, size_t size)
{
	int m;
	struct pl_thread *t;
	void *p;

	if (pl_unlikely(old && pl_boot_owns(old))) {
		size_t total;

		if (__builtin_mul_overflow(nmemb, size, &total)) {
			errno = ENOMEM;
			return NULL;
		}
		return pl_realloc_boot(old, total);
	}
	m = pl_mode();
	if (pl_unlikely(m != PL_ON || !pl.next.reallocarray)) {
		if (m == PL_BOOT)
			return NULL;
		return pl.next.reallocarray(old, nmemb, size);
	}
	t = &pl_t;
	if (!pl_enter(t)) {
		p = pl.next.reallocarray(old, nmemb, size);
	} else {
		p = pl.next.reallocarray(old, nmemb, size);
		pl_realloc_record(t, old, p, pl_product(nmemb, size));
	}
	pl_leave(t);
	return p;
}

PL_API int posix_memalign(void **out, size_t align, size_t n)
{
	int m = pl_mode(), rc;
	struct pl_thread *t;

	if (pl_unlikely(m != PL_ON)) {
		if (m == PL_BOOT) {
			*out = pl_boot_alloc(n, align);
			return *out ? 0 : ENOMEM;
		}
		return pl.next.posix_memalign(out, align, n);
	}
	t = &pl_t;
	if (!pl_enter(t)) {
		rc = pl.next.posix_memalign(out, align, n);
	} else {
		rc = pl.next.posix_memalign(out, align, n);
		if (rc == 0 && *out)
			pl_emit(t, MT_EV_ALIGNED_ALLOC, (uintptr_t)*out, n, 0);
	}
	pl_leave(t);
	return rc;
}

/* aligned_alloc(align, size), memalign(align, size), valloc(size), pvalloc(size): one shape,
 * AlignedAlloc with the size asked for. */
#define PL_ALIGNED(name, params, args, size_expr, boot_align)                                      \
	PL_API void *name params                                                                   \
	{                                                                                          \
		int m = pl_mode();                                                                 \
		struct pl_thread *t;                                                               \
		void *p;                                                                           \
                                                                                                   \
		if (pl_unlikely(m != PL_ON)) {                                                     \
			if (m == PL_BOOT)                                                          \
				return pl_boot_alloc(size_expr, boot_align);                       \
			return pl.next.name args;                                                  \
		}                                                                                  \
		t = &pl_t;                                                                         \
		if (!pl_enter(t)) {                                                                \
			p = pl.next.name args;                                                     \
		} else {                                                                           \
			p = pl.next.name args;                                                     \
			if (p)                                                                     \
				pl_emit(t, MT_EV_ALIGNED_ALLOC, (uintptr_t)p, size_expr, 0);       \
		}                                                                                  \
		pl_leave(t);                                                                       \
		return p;                                                                          \
	}

PL_ALIGNED(aligned_alloc, (size_t align, size_t n), (align, n), n, align)
PL_ALIGNED(memalign, (size_t align, size_t n), (align, n), n, align)
PL_ALIGNED(valloc, (size_t n), (n), n, 4096)
PL_ALIGNED(pvalloc, (size_t n), (n), n, 4096)

#if __GLIBC_PREREQ(2, 39)
/* free_sized and free_aligned_sized (C23; glibc 2.39+). Defined only against a C library that
 * has them: a definition here would turn a program's weak reference non-NULL and change what
 * it calls. */
static void pl_free_common(void *p, void (*fwd)(void *, size_t, size_t), size_t a, size_t b)
{
	int m;
	struct pl_thread *t;

	if (pl_unlikely(pl_boot_owns(p)))
		return;
	m = pl_mode();
	if (pl_unlikely(m == PL_BOOT))
		return;
	t = &pl_t;
	if (m == PL_ON && p && pl_enter(t)) {
		pl_emit(t, MT_EV_FREE, (uintptr_t)p, 0, 0);
		fwd ? fwd(p, a, b) : pl.next.free(p);
		pl_leave(t);
		return;
	}
	if (m == PL_ON && p)
		pl_leave(t);
	fwd ? fwd(p, a, b) : pl.next.free(p);
}

static void (*pl_fs_fwd)(void *, size_t);
static void pl_free_sized_fwd(void *p, size_t size, size_t unused)
{
	(void)unused;
	pl_fs_fwd(p, size);
}

PL_API void free_sized(void *p, size_t size)
{
	pl_fs_fwd = pl.next.free_sized;
	pl_free_common(p, pl_fs_fwd ? pl_free_sized_fwd : NULL, size, 0);
}

PL_API void free_aligned_sized(void *p, size_t align, size_t size)
{
	pl_free_common(p, pl.next.free_aligned_sized, align, size);
}

#endif

/* cfree: glibc's compatibility alias of free (old binaries). */
PL_API void cfree(void *p)
{
	free(p);
}

/* --- C++ operator new and delete ------------------------------------------------------- */

enum pl_cxx {
	PL_NWM, PL_NAM, PL_NWM_NT, PL_NAM_NT, PL_NWM_AL, PL_NAM_AL, PL_NWM_AL_NT, PL_NAM_AL_NT,
	PL_DLPV, PL_DAPV, PL_DLPVM, PL_DAPVM, PL_DLPV_AL, PL_DAPV_AL, PL_DLPVM_AL, PL_DAPVM_AL,
	PL_DLPV_NT, PL_DAPV_NT, PL_DLPV_AL_NT, PL_DAPV_AL_NT, PL_CXX_NR,
};

/* size_t's letter in mangled names: unsigned long (m) on LP64, unsigned int (j) on i386 (the
 * 32-bit interposer, libmemtrack-preld32.so) */
#if defined(__i386__)
#define PL_Z "j"
#else
#define PL_Z "m"
#endif

static const char *const pl_cxx_names[PL_CXX_NR] = {
    "_Znw" PL_Z,
    "_Zna" PL_Z,
    "_Znw" PL_Z "RKSt9nothrow_t",
    "_Zna" PL_Z "RKSt9nothrow_t",
    "_Znw" PL_Z "St11align_val_t",
    "_Zna" PL_Z "St11align_val_t",
    "_Znw" PL_Z "St11align_val_tRKSt9nothrow_t",
    "_Zna" PL_Z "St11align_val_tRKSt9nothrow_t",
    "_ZdlPv",
    "_ZdaPv",
    "_ZdlPv" PL_Z,
    "_ZdaPv" PL_Z,
    "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t",
    "_ZdlPv" PL_Z "St11align_val_t",
    "_ZdaPv" PL_Z "St11align_val_t",
    "_ZdlPvRKSt9nothrow_t",
    "_ZdaPvRKSt9nothrow_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

static void *pl_cxx_next[PL_CXX_NR];

/* Resolved at first use: libstdc++ may be loaded by dlopen after we initialised, in the global
 * scope or, as a dlopen'ed library's dependency, outside it (pl_next_sym). */
static void *pl_cxx(enum pl_cxx i)
{
	static const char why[] = "memtrack interposer: no definition of a C++ allocation "
				  "operator after ours; aborting\n";
	void *f = __atomic_load_n(&pl_cxx_next[i], __ATOMIC_ACQUIRE);

	if (pl_unlikely(!f)) {
		f = pl_next_sym(pl_cxx_names[i]);
		if (!f) {
			/* called, so a loaded object refers to it, and every definition of it
			 * is in some object's scope: cannot happen */
			(void)!write(2, why, sizeof(why) - 1);
			abort();
		}
		__atomic_store_n(&pl_cxx_next[i], f, __ATOMIC_RELEASE);
	}
	return f;
}

typedef void *(*pl_new1)(size_t);
typedef void *(*pl_new2)(size_t, uintptr_t);
typedef void *(*pl_new3)(size_t, uintptr_t, uintptr_t);

/* Is f in the C++ standard library (libstdc++; libc++, whose operators are libc++abi's), whose
 * forms call one another? */
static int pl_cxx_in_std(void *f)
{
	struct link_map *o = f ? pl_obj_of(f) : NULL;

	return o && o->l_name &&
	       (strstr(o->l_name, "/libstdc++.so") || strstr(o->l_name, "/libc++.so") ||
		strstr(o->l_name, "/libc++abi.so"));
}

/*
 * Does the program replace any operator new or delete (the executable, or a library preloaded
 * before us, defines one: the first definition is not ours)? The standard library's other
 * forms then call the replacement (its new[] calls new, its sized delete calls delete), so
 * none may be short-cut: every form is forwarded unrecorded, and the replacement's own malloc
 * and free are recorded. Until 8 December 2026 new[] went straight to malloc while delete[]
 * reached the replacement through libstdc++: a program whose operator new adds a header
 * aborted under the interposer ("bad header"), and each delete was recorded at the pointer the
 * program saw, not the block malloc gave.
 */
static int pl_cxx_replaced(void)
{
	static int known; /* 0 unknown, 1 replaced, 2 not */
	int k = __atomic_load_n(&known, __ATOMIC_ACQUIRE);

	if (pl_unlikely(!k)) {
		struct pl_thread *t = &pl_t;

		k = 2;
		pl_enter(t); /* what dlsym allocates is the loader's, not the program's */
		for (int i = 0; i < PL_CXX_NR && k == 2; i++)
			if (!pl_sym_is_ours(pl_cxx_names[i]))
				k = 1;
		pl_leave(t);
		__atomic_store_n(&known, k, __ATOMIC_RELEASE);
	}
	return k == 1;
}

/* Is the next operator new libstdc++'s (or libc++'s), and none replaced? Then it is malloc, or
 * aligned_alloc for the aligned forms, in a loop that calls the new_handler or throws: see
 * pl_new. 1, or 0 when another library defines it (its calls are forwarded; its mallocs are
 * recorded). */
static int pl_cxx_std(void)
{
	static int known; /* 0 unknown, 1 std, 2 other */
	int k = __atomic_load_n(&known, __ATOMIC_ACQUIRE);

	if (pl_unlikely(!k)) {
		/* pl_next_sym, not pl_cxx: asked from a delete too, where no operator new after
		 * ours need exist */
		k = pl_cxx_in_std(pl_next_sym(pl_cxx_names[PL_NWM])) && !pl_cxx_replaced() ? 1 : 2;
		__atomic_store_n(&known, k, __ATOMIC_RELEASE);
	}
	return k == 1;
}

static inline void *pl_new_fwd(void *f, int nargs, size_t n, uintptr_t a, uintptr_t b)
{
	return nargs == 1 ? ((pl_new1)f)(n) : nargs == 2 ? ((pl_new2)f)(n, a) : ((pl_new3)f)(n, a, b);
}

/*
 * new(size [, align] [, nothrow]): `type` is MT_EV_MALLOC or MT_EV_ALIGNED_ALLOC, size is
 * argument 0. The first attempt is the one libstdc++ makes (malloc of at least 1 byte, or
 * aligned_alloc of the size rounded up to the alignment), made here through the next
 * definitions; only a failure goes to the next operator new, which calls the new_handler and
 * retries, or throws. It runs with our depth released, so nothing here has to be undone when
 * it throws (no unwinding cleanup, no libgcc_s), and its own malloc, outermost then, records
 * the block it finally gets.
 */
static inline void *pl_new(enum pl_cxx i, uint32_t type, int nargs, size_t n, uintptr_t a,
			   uintptr_t b)
{
	int m = pl_mode();
	struct pl_thread *t = &pl_t;
	size_t sz = n ? n : 1;
	void *p;

	if (pl_unlikely(m == PL_BOOT))
		return pl_boot_alloc(n, type == MT_EV_ALIGNED_ALLOC ? a : 16);
	if (pl_unlikely(m != PL_ON || !pl_cxx_std())) {
		/* a served jemalloc/mimalloc/tcmalloc's own operator new; i | 2: its nothrow form */
		if (m == PL_ON && (pl.flags & MT_SHM_PROC_FAMILIES))
			return pl_fam_new(pl_cxx(i), pl_cxx(i | 2), i & 2, type, nargs, n, a, b);
		return pl_new_fwd(pl_cxx(i), nargs, n, a, b);
	}
	if (pl_enter(t)) {
		if (type == MT_EV_ALIGNED_ALLOC)
			p = pl.next.aligned_alloc(a, (sz + a - 1) & ~(a - 1));
		else
			p = pl.next.malloc(sz);
		if (p)
			pl_emit(t, type, (uintptr_t)p, n, 0);
	} else {
		p = NULL; /* nested (rare): the next operator new, unrecorded */
	}
	pl_leave(t);
	return p ? p : pl_new_fwd(pl_cxx(i), nargs, n, a, b);
}

typedef void (*pl_del1)(void *);
typedef void (*pl_del2)(void *, uintptr_t);
typedef void (*pl_del3)(void *, uintptr_t, uintptr_t);

static inline void pl_delete(enum pl_cxx i, int nargs, void *p, uintptr_t a, uintptr_t b)
{
	int m;
	struct pl_thread *t = &pl_t;
	void *f;

	if (pl_unlikely(pl_boot_owns(p)))
		return;
	m = pl_mode();
	if (pl_unlikely(m == PL_BOOT))
		return;
	f = pl_cxx(i);
	/* Recorded: the standard library's delete with nothing replaced (its free is nested), or
	 * a served family's own. Any other is forwarded unrecorded and its free recorded: the
	 * standard library's reaching a replacement (which may free a header before p), a
	 * library's own operators (pl_new forwards their new unrecorded too). */
	if (m == PL_ON && p &&
	    (pl_cxx_std() || ((pl.flags & MT_SHM_PROC_FAMILIES) && !pl_cxx_in_std(f)))) {
		/* operator delete never throws */
		if (pl_enter(t))
			pl_emit(t, MT_EV_FREE, (uintptr_t)p, 0, 0);
		nargs == 1 ? ((pl_del1)f)(p) : nargs == 2 ? ((pl_del2)f)(p, a) : ((pl_del3)f)(p, a, b);
		pl_leave(t);
		return;
	}
	nargs == 1 ? ((pl_del1)f)(p) : nargs == 2 ? ((pl_del2)f)(p, a) : ((pl_del3)f)(p, a, b);
}

/* Declared with integer stand-ins for std::align_val_t (a size_t enum) and const
 * std::nothrow_t & (a pointer): the same registers in the x86-64 and AArch64 ABIs, the same
 * stack slots in i386's. Named through asm labels: the size_t letter differs (PL_Z). */
#define PL_OP(ret, fn, name, ...) PL_API ret fn(__VA_ARGS__) __asm__(name)
PL_OP(void *, pl_nw, "_Znw" PL_Z, size_t n);
PL_OP(void *, pl_na, "_Zna" PL_Z, size_t n);
PL_OP(void *, pl_nw_nt, "_Znw" PL_Z "RKSt9nothrow_t", size_t n, uintptr_t nt);
PL_OP(void *, pl_na_nt, "_Zna" PL_Z "RKSt9nothrow_t", size_t n, uintptr_t nt);
PL_OP(void *, pl_nw_al, "_Znw" PL_Z "St11align_val_t", size_t n, uintptr_t al);
PL_OP(void *, pl_na_al, "_Zna" PL_Z "St11align_val_t", size_t n, uintptr_t al);
PL_OP(void *, pl_nw_al_nt, "_Znw" PL_Z "St11align_val_tRKSt9nothrow_t", size_t n, uintptr_t al,
      uintptr_t nt);
PL_OP(void *, pl_na_al_nt, "_Zna" PL_Z "St11align_val_tRKSt9nothrow_t", size_t n, uintptr_t al,
      uintptr_t nt);
PL_OP(void, pl_dl_z, "_ZdlPv" PL_Z, void *p, uintptr_t n);
PL_OP(void, pl_da_z, "_ZdaPv" PL_Z, void *p, uintptr_t n);
PL_OP(void, pl_dl_z_al, "_ZdlPv" PL_Z "St11align_val_t", void *p, uintptr_t n, uintptr_t al);
PL_OP(void, pl_da_z_al, "_ZdaPv" PL_Z "St11align_val_t", void *p, uintptr_t n, uintptr_t al);

void *pl_nw(size_t n)
{
	return pl_new(PL_NWM, MT_EV_MALLOC, 1, n, 0, 0);
}
void *pl_na(size_t n)
{
	return pl_new(PL_NAM, MT_EV_MALLOC, 1, n, 0, 0);
}
void *pl_nw_nt(size_t n, uintptr_t nt)
{
	return pl_new(PL_NWM_NT, MT_EV_MALLOC, 2, n, nt, 0);
}
void *pl_na_nt(size_t n, uintptr_t nt)
{
	return pl_new(PL_NAM_NT, MT_EV_MALLOC, 2, n, nt, 0);
}
void *pl_nw_al(size_t n, uintptr_t al)
{
	return pl_new(PL_NWM_AL, MT_EV_ALIGNED_ALLOC, 2, n, al, 0);
}
void *pl_na_al(size_t n, uintptr_t al)
{
	return pl_new(PL_NAM_AL, MT_EV_ALIGNED_ALLOC, 2, n, al, 0);
}
void *pl_nw_al_nt(size_t n, uintptr_t al, uintptr_t nt)
{
	return pl_new(PL_NWM_AL_NT, MT_EV_ALIGNED_ALLOC, 3, n, al, nt);
}
void *pl_na_al_nt(size_t n, uintptr_t al, uintptr_t nt)
{
	return pl_new(PL_NAM_AL_NT, MT_EV_ALIGNED_ALLOC, 3, n, al, nt);
}

PL_API void _ZdlPv(void *p) { pl_delete(PL_DLPV, 1, p, 0, 0); }
PL_API void _ZdaPv(void *p) { pl_delete(PL_DAPV, 1, p, 0, 0); }
void pl_dl_z(void *p, uintptr_t n)
{
	pl_delete(PL_DLPVM, 2, p, n, 0);
}
void pl_da_z(void *p, uintptr_t n)
{
	pl_delete(PL_DAPVM, 2, p, n, 0);
}
PL_API void _ZdlPvSt11align_val_t(void *p, uintptr_t al) { pl_delete(PL_DLPV_AL, 2, p, al, 0); }
PL_API void _ZdaPvSt11align_val_t(void *p, uintptr_t al) { pl_delete(PL_DAPV_AL, 2, p, al, 0); }
void pl_dl_z_al(void *p, uintptr_t n, uintptr_t al)
{
	pl_delete(PL_DLPVM_AL, 3, p, n, al);
}
void pl_da_z_al(void *p, uintptr_t n, uintptr_t al)
{
	pl_delete(PL_DAPVM_AL, 3, p, n, al);
}
PL_API void _ZdlPvRKSt9nothrow_t(void *p, uintptr_t nt) { pl_delete(PL_DLPV_NT, 2, p, nt, 0); }
PL_API void _ZdaPvRKSt9nothrow_t(void *p, uintptr_t nt) { pl_delete(PL_DAPV_NT, 2, p, nt, 0); }
PL_API void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, uintptr_t al, uintptr_t nt)
{
	pl_delete(PL_DLPV_AL_NT, 3, p, al, nt);
}
PL_API void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, uintptr_t al, uintptr_t nt)
{
	pl_delete(PL_DAPV_AL_NT, 3, p, al, nt);
}
