// SPDX-License-Identifier: MIT
/*
 * Libraries loaded after start (dlopen, dlmopen), announced to memtrack without a probe on
 * glibc. memtrack must look at a new library before the program uses it when it holds
 * allocator entry points the interposer does not serve (jemalloc, mimalloc, tcmalloc) or
 * memtrack's USDT probes (include/memtrack.h). A uprobe on glibc's dlopen would trap every
 * process on the machine that calls it (and registering it walks every process mapping libc);
 * a dlopen wrapper would call glibc's from here, and glibc resolves a relative name, $ORIGIN
 * and the namespace from its caller's object: the interposer's, not the program's.
 *
 * Instead dlsym, the way a program reaches what a dlopen'ed library defines, checks first:
 * when the loader's count of objects added (dl_iterate_phdr's dlpi_adds) moved since the last
 * look, it calls __memtrack_preload_dlopen, on which memtrack has a uprobe (on this file only:
 * src/bpf/served.bpf.c); the BPF side stops the process there and memtrack inspects its
 * mappings, attaches, and resumes it, before dlsym returns the first address into the new
 * library. The stub jumps to glibc's dlsym with the caller's return address in place, so
 * RTLD_NEXT and the caller's namespace mean what they did. A count that did not move costs one
 * dl_iterate_phdr callback (~0.1 us) per dlsym.
 *
 * A stop that would find nothing new is not made (a stop costs ~0.5-1 ms here: a python3 that
 * imports ten extension modules makes six). memtrack lists in the shared memory the files it
 * has inspected (shm_abi.h's seen table: their sites are attached, whoever mapped them) and
 * those earlier runs found inert (the kept table: src/track/inert_cache.h); when every object
 * the load added is such a file, by what stat(2) gives for its path (device, inode, size and
 * times), the dlopen goes on unannounced and is counted (mechanisms.dlopens_judged). The added
 * objects are the last ones of the walk: the loader appends to its namespace's list, and the
 * walk is taken only when nothing was removed since the last one (dlpi_subs) and the list grew
 * by exactly the objects added (dlpi_adds; one added to another namespace by dlmopen does not
 * show in this one's walk). Otherwise, and for a path that is not absolute (relative to a
 * working directory that may have changed since), the stop is made as before.
 */
#include <dlfcn.h>
#include <link.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include "preload/preload.h"

/* The loader's dlpi_adds when last looked at (startup objects: the constructor below). */
static unsigned long long pl_dl_adds;
struct link_map *pl_obj_of(const void *addr)
{
	struct dl_find_object o;

	return _dl_find_object((void *)addr, &o) == 0 ? o.dlfo_link_map : NULL;
}

/* glibc's dlsym (resolved at the first call through the stub) */
static void *pl_dl_next;

__attribute__((visibility("default"), noinline, used)) void __memtrack_preload_dlopen(void)
{
	/* a body the compiler can neither drop nor merge with another function */
	__asm__ volatile(PL_CTL_FIRST ::: "memory");
}

static int pl_dl_adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs))
		*(unsigned long long *)arg = info->dlpi_adds;
	return 1; /* one object is enough: the count is the loader's, the same in each */
}

static unsigned long long pl_dl_count(void)
{
	unsigned long long adds = 0;

	dl_iterate_phdr(pl_dl_adds_cb, &adds);
	return adds;
}

/* The loader's state at a look: its counts of objects ever added and removed (every
 * namespace), and the objects of the interposer's namespace. */
struct pl_dl_view {
	unsigned long long adds, subs;
	unsigned n;
};

/* The last full look (pl_dl_needs_stop), and its lock: held for a walk and its stats. */
static struct pl_dl_view pl_dl_last;
static int pl_dl_lock;

struct pl_dl_walk {
	struct pl_dl_view now;
	unsigned from; /* objects from this index on are the new ones (UINT32_MAX: none) */
	int unlisted;  /* new objects memtrack has not inspected, or that cannot be told */
};

/* Is the file at path one memtrack inspected in this run (its seen table), or an earlier run
 * found inert (the kept table)? */
static int pl_dl_listed(const char *path)
{
	struct mt_shm_seen f;
	struct stat st;
	uint32_t kept;

	if (!pl.seen_nr || !path || path[0] != '/' || stat(path, &st) || !st.st_ino)
		return 0;
	f = (struct mt_shm_seen){
	    .dev = st.st_dev,
	    .ino = st.st_ino,
	    .size = (uint64_t)st.st_size,
	    .mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec,
	    .ctime_ns = (uint64_t)st.st_ctim.tv_sec * 1000000000ull + (uint64_t)st.st_ctim.tv_nsec,
	};
	if (mt_shm_seen_has(pl.seen, pl.seen_nr, &f))
		return 1;
	/* set before the command ran; bounded by the room the map checked */
	kept = __atomic_load_n(&pl.hdr->kept_nr, __ATOMIC_ACQUIRE);
	return kept && kept <= pl.kept_max && !(kept & (kept - 1)) &&
	       mt_shm_seen_has(pl.kept, kept, &f);
}

static int pl_dl_walk_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct pl_dl_walk *w = arg;

	if (size < offsetof(struct dl_phdr_info, dlpi_tls_modid)) {
		w->unlisted++; /* no counts: nothing can be told */
		return 1;
	}
	w->now.adds = info->dlpi_adds;
	w->now.subs = info->dlpi_subs;
	if (w->now.n++ >= w->from && !w->unlisted)
		w->unlisted += !pl_dl_listed(info->dlpi_name);
	return 0;
}

/* A full look under the lock: does the load since the last one need a stop? */
static int pl_dl_needs_stop(void)
{
	struct pl_dl_walk w = {.from = UINT32_MAX};
	struct pl_dl_view last;
	int stop;

	while (__atomic_exchange_n(&pl_dl_lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
	last = pl_dl_last;
	w.from = last.n;
	dl_iterate_phdr(pl_dl_walk_cb, &w);
	if (w.now.adds == last.adds)
		stop = 0; /* another thread looked at this load already */
	else
		stop = w.unlisted || w.now.subs != last.subs ||
		       w.now.n != last.n + (w.now.adds - last.adds);
	pl_dl_last = w.now;
	__atomic_store_n(&pl_dl_adds, w.now.adds, __ATOMIC_RELAXED);
	__atomic_store_n(&pl_dl_lock, 0, __ATOMIC_RELEASE);
	if (!stop && w.now.adds != last.adds)
		__atomic_fetch_add(&pl.hdr->dl_judged, 1, __ATOMIC_RELAXED);
	return stop;
}

__attribute__((constructor)) static void pl_dl_ctor(void)
{
	struct pl_dl_walk w = {.from = UINT32_MAX};

	dl_iterate_phdr(pl_dl_walk_cb, &w);
	pl_dl_last = w.now;
	__atomic_store_n(&pl_dl_adds, w.now.adds, __ATOMIC_RELAXED);
}

/*
 * After a load: a libc in a namespace other than the first is a dlmopen namespace's own.
 * glibc preloads nothing into a new namespace, so the interposer is not there and what the
 * namespace allocates reaches that libc directly, unrecorded: counted once per image
 * (drops.namespace: the run is incomplete, and the advice is --alloc-hooks uprobe, whose probes
 * are on the file and fire in every namespace). The namespaces are read from the loader's
 * debugger interface (r_debug_extended, version 2 since glibc 2.35: dl_iterate_phdr reports
 * only its caller's namespace).
 */
static void pl_dl_namespaces(void)
{
	static int told;
	const struct r_debug_extended *ns;
	unsigned libcs = 0;

	/* _r_debug is declared as the version-1 struct; the loader's object is the extended one
	 * (r_version says so): the asm hides the declared size from the bounds warnings */
	__asm__("" : "=r"(ns) : "0"(&_r_debug));

	if (__atomic_load_n(&told, __ATOMIC_RELAXED) || ns->base.r_version < 2)
		return;
	for (ns = ns->r_next; ns; ns = ns->r_next)
		for (const struct link_map *lm = ns->base.r_map; lm; lm = lm->l_next) {
			const char *slash = lm->l_name ? strrchr(lm->l_name, '/') : NULL;

			libcs += slash && !strncmp(slash + 1, "libc.so.", 8);
		}
	if (libcs && !__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
		__atomic_fetch_add(&pl.hdr->drops[MT_SHM_DROP_NAMESPACE], 1, __ATOMIC_RELAXED);
}

/* Called by the dlsym stub below with its arguments saved; returns glibc's dlsym. */
PL_HIDDEN void *pl_dl_check(void)
{
	void *next = __atomic_load_n(&pl_dl_next, __ATOMIC_ACQUIRE);
	int s = __atomic_load_n(&pl.state, __ATOMIC_ACQUIRE);

	if (!next) {
		/* dlvsym is not interposed: its RTLD_NEXT is the one after this file */
		next = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
		if (!next)
			next = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
		__atomic_store_n(&pl_dl_next, next, __ATOMIC_RELEASE);
	}
	/* only once the shared memory is mapped (memtrack runs), never while initialising */
	if ((s == PL_ON || s == PL_PASS) && pl.hdr) {
		unsigned long long now = pl_dl_count();

		if (__atomic_load_n(&pl_dl_adds, __ATOMIC_RELAXED) != now) {
			if (s == PL_ON)
				pl_dl_namespaces();
			if (pl_dl_needs_stop()) {
				pl_ctl_wait_live(); /* a call before memtrack's link would not stop
						     */
				__memtrack_preload_dlopen();
			}
		}
	}
	return next;
}

/*
 * The definition of `name` after the interposer's. dlsym(RTLD_NEXT) searches the global scope
 * only; a library loaded with dlopen(RTLD_LOCAL) brings its dependencies outside it, and its
 * calls of a name both define bind to ours (the global scope comes first): a C program
 * loading a C++ plugin calls our operator new while libstdc++ is only in the plugin's scope
 * (binutils' ar with the LLVM gold plugin aborted there). Then each object loaded after us is
 * asked in its own scope (itself and its dependencies: where its calls would have gone without
 * us), in load order; the first definition outside this file wins. Its handle comes from
 * dlopen(RTLD_NOLOAD), which loads nothing, and goes back with dlclose, which unloads nothing
 * another object still depends on (a link_map is a handle only once glibc has given it a scope:
 * a dependency loaded at start has none, and dlsym on it crashed). What the loader allocates
 * meanwhile is nested in the calling thread's depth: not the program's. NULL when no object
 * defines the name.
 */
void *pl_next_sym(const char *name)
{
	struct pl_thread *t = &pl_t;
	struct link_map *self, *lm;
	void *f;

	pl_enter(t);
	f = dlsym(RTLD_NEXT, name);
	self = f ? NULL : pl_obj_of((const void *)pl_next_sym);
	for (lm = self ? self->l_next : NULL; lm && !f; lm = lm->l_next) {
		void *h;

		if (!lm->l_name || !lm->l_name[0])
			continue; /* the vDSO's is a name, but no file dlopen finds */
		h = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		f = dlsym(h, name);
		if (f && pl_obj_of(f) == self)
			f = NULL;
		dlclose(h);
	}
	pl_leave(t);
	return f;
}

#if defined(__x86_64__)
/*
 * dlsym(handle, name): the arguments saved around the check, then a jump, so that glibc's
 * dlsym sees the caller's return address as its own caller. Three pushes over the return
 * address keep the stack 16-byte aligned at the call.
 */
__asm__(".text\n"
	".globl dlsym\n"
	".type dlsym, @function\n"
	"dlsym:\n"
	"	push %rdi\n"
	"	push %rsi\n"
	"	push %rdx\n"
	"	call pl_dl_check\n"
	"	pop %rdx\n"
	"	pop %rsi\n"
	"	pop %rdi\n"
	"	test %rax, %rax\n"
	"	jz 1f\n"
	"	jmp *%rax\n"
	"1:	xor %eax, %eax\n" /* no glibc dlsym: as a failed lookup */
	"	ret\n"
	".size dlsym, .-dlsym\n");
#endif
