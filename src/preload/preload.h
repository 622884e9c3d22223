/* SPDX-License-Identifier: MIT */
/*
 * The interposer's internals, shared by its two files: preload_ring.c (process and thread
 * state, the shared-memory rings), preload_hooks.c (the interposed entry points) and
 * preload_families.c (jemalloc, mimalloc and tcmalloc as shared libraries).
 * Nothing here is exported from the library but the entry points.
 */
#ifndef MEMTRACK_PRELOAD_H
#define MEMTRACK_PRELOAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "preload/shm_abi.h"

/*
 * The first instruction of each control point (memtrack puts a uprobe there): a jump to the
 * next one, which the kernel emulates. Single-stepped out of line instead (a `ret`, an empty
 * body), the first trap of each process made it a "[uprobes]" page: the area's set-up and its
 * fault in every served image (a tracked /bin/true: 66.6 -> 65.5 faults, 7 December 2026).
 * tests/unit/test_elf.c checks the bytes.
 */
#if defined(__x86_64__) || defined(__i386__)
#define PL_CTL_FIRST ".byte 0xeb, 0x00" /* jmp .+2 */
#else
#define PL_CTL_FIRST ""
#endif

#define PL_HIDDEN __attribute__((visibility("hidden")))
/* built as the i386 interposer (libmemtrack-preld32.so, src/track/abi32.h) */
#if defined(__i386__)
#define PL_I386 1
#else
#define PL_I386 0
#endif
#define pl_likely(x) __builtin_expect(!!(x), 1)
#define pl_unlikely(x) __builtin_expect(!!(x), 0)

enum pl_state {
	PL_UNINIT = 0,
	PL_INIT, /* one thread resolves the next definitions; its own calls use the bootstrap */
	PL_ON, /* recording */
	PL_PASS, /* forwarding only: no memtrack, another allocator, or memtrack went away */
	PL_BOOT, /* returned by pl_mode() to the initialising thread: bootstrap buffer */
};

/* The next definition of every C entry point (glibc's, normally). */
struct pl_next {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	void (*free)(void *);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	void (*free_sized)(void *, size_t);
	void (*free_aligned_sized)(void *, size_t, size_t);
};

struct pl_proc {
	int state; /* enum pl_state */
	struct pl_next next;
	struct mt_shm_hdr *hdr;
	struct mt_shm_slot *slots;
	struct mt_event *data;
	uint32_t nrec, mask; /* records per slot, nrec - 1 */
	/* checked at the map and kept: every process of the tree writes the header (other users'
	 * too: src/track/handoff.h), so its offsets are read once */
	uint32_t nr_slots;
	struct mt_shm_proc *procs;
	struct mt_shm_seen *seen; /* memtrack's seen-files table, seen_nr entries (0: none) */
	uint32_t seen_nr;
	struct mt_shm_seen *kept; /* its kept-files table: room for kept_max entries */
	uint32_t kept_max;
	size_t map_len;
	uint32_t page_size;
	uint32_t gen_counter;
	/* A MADV_WIPEONFORK page, all 0 in a fresh fork or raw clone child. Word PL_WIPE_GEN:
	 * this process's generation (a child claims its own slots before its first record);
	 * PL_WIPE_NS: 1 once this process is known to be in memtrack's pid namespace
	 * (pl_other_pidns). */
	uint32_t *wipe;
	uint32_t flags; /* MT_SHM_PROC_* */
	/* TSC stamps (preload_clock.c): ns = cycles * tsc_mult >> PL_TSC_SHIFT; 0 until known */
	uint64_t tsc_mult, tsc_span; /* tsc_span: a thread's anchor lasts this many cycles */
	int tsc_off;		     /* the TSC cannot be used: clock_gettime */
	/* this image's served call may have come before memtrack's control link was live
	 * (preload_ctl.c): its fork children call again */
	int ctl_unseen;
};

/* Per-thread state: initial-exec TLS (no __tls_get_addr, which may allocate). */
struct pl_thread {
	struct mt_shm_slot *slot;
	struct mt_event *ring;
	uint64_t head, tail; /* our copy of the slot's head; the last tail we read */
	uint64_t check;	     /* head at which pl_room looks at the ring's fill again */
	/* the ring's pages are mapped in this process up to record `pop` (pl_populate), until
	 * pop_end: one whole ring past the claim, after which every page is */
	uint64_t pop, pop_end;
	/* TSC anchor (preload_clock.c): CLOCK_MONOTONIC ns_a at cycle tsc_a, valid for tsc_span
	 * cycles (0: none); no stamp below ts_floor */
	uint64_t tsc_a, ns_a, tsc_span, ts_floor;
	uint32_t gen; /* the process generation the slot was claimed in */
	int depth; /* hooked calls in progress: only the outermost is recorded */
	/* 1 while pl_emit writes a record (its slot claimed, up to the record's publication):
	 * a hooked call then made at depth > 0 is a signal handler's that interrupted the write,
	 * not a call nested in the allocator; it is counted lost (MT_SHM_DROP_SIGNAL) */
	int own;
	/* the process generation in which a wait for a free slot was in vain (pl_claim): no
	 * waiting again in it; a fork child, in a new generation, waits */
	uint32_t claim_failed;
	int32_t pid, tid;
	int in_init;
	/* set by fork's prepare handler: the forking process is in memtrack's pid namespace
	 * (pl_ns_prepare; read in the child, whose copy of the thread this is) */
	int fork_ns_ok;
	/* vfork (preload_vfork.c): set by the interposer's vfork, which keeps the thread's ring
	 * state in vf and sets gen to PL_GEN_VFORK, until the parent's first record after it */
	int vfork_on;
	int32_t vf_foreign; /* a vfork child in another pid namespace, counted unserved */
	struct pl_vfork_saved {
		struct mt_shm_slot *slot;
		struct mt_event *ring;
		uint64_t head, tail, check, pop, pop_end;
		uint32_t gen;
		int32_t pid, tid; /* pid: the parent's, from the kernel */
	} vf;
};

extern struct pl_proc pl PL_HIDDEN;
extern __thread struct pl_thread pl_t PL_HIDDEN __attribute__((tls_model("initial-exec")));

int pl_mode_slow(void) PL_HIDDEN;
static inline int pl_mode(void)
{
	int s = __atomic_load_n(&pl.state, __ATOMIC_ACQUIRE);

	return pl_likely(s == PL_ON) ? PL_ON : pl_mode_slow();
}

/* Bootstrap buffer for the allocations dlsym makes while the next definitions are resolved. */
void *pl_boot_alloc(size_t size, size_t align) PL_HIDDEN;
size_t pl_boot_size(const void *p) PL_HIDDEN;
#define PL_BOOT_SIZE (64 << 10)
extern unsigned char pl_boot[PL_BOOT_SIZE] PL_HIDDEN;

/* Inline: every free asks (a call per free cost as much as the question). */
static inline int pl_boot_owns(const void *p)
{
	return (uintptr_t)p - (uintptr_t)pl_boot < PL_BOOT_SIZE;
}

/* --stacks (preload_stack.c): set once the stack area is mapped; the stack of the calling
 * allocation as a ref for aux (0: none). */
extern int pl_stacks_on PL_HIDDEN;
uint32_t pl_stack_capture(void) PL_HIDDEN;

void *pl_map_file(const char *path, size_t min, size_t *size) PL_HIDDEN;
int pl_handoff(const char *path) PL_HIDDEN;
int pl_thread_prepare(struct pl_thread *t) PL_HIDDEN;
/* The generation of a thread that vforked (preload_vfork.c): no process has it, nor is it a
 * fork child's wiped 0, so the next record of every side takes the slow path */
#define PL_GEN_VFORK 0xffffffffu
/* After vfork: which side records now (preload_vfork.c); 0, or -1 to drop the record */
int pl_vfork_side(struct pl_thread *t) PL_HIDDEN;
/* The vforking thread's saved state back when pid is its process (preload_vfork.c); 1 if so */
int pl_vfork_restore(struct pl_thread *t, int32_t pid) PL_HIDDEN;
int pl_vfork_settle(struct pl_thread *t, int32_t pid) PL_HIDDEN;
/* A slot of its own for t in generation gen (preload_ring.c); 0, or -1 (counted) */
int pl_claim(struct pl_thread *t, uint32_t gen) PL_HIDDEN;
void pl_register(void) PL_HIDDEN;
void pl_set_slot_key(struct mt_shm_slot *s) PL_HIDDEN;
int pl_room(struct pl_thread *t) PL_HIDDEN;
uint64_t pl_now(void) PL_HIDDEN;
/* pl_now, read twice when far past floor (a thread's last stamp, or 0): preload_clock.c */
uint64_t pl_clock(uint64_t floor) PL_HIDDEN;
/* Marks this image served for the BPF side (preload_ctl.c); before the first recorded call. */
void pl_ctl_served(void) PL_HIDDEN;
void pl_ctl_unserved(void) PL_HIDDEN;
/* Before announcing a dlopen: until the control points trap, or memtrack is gone. */
void pl_ctl_wait_live(void) PL_HIDDEN;
/* memtrack stopped reading or died (preload_ring.c) */
int pl_consumer_gone(void) PL_HIDDEN;
/* A fork child's first look: a new generation, registered (preload_ring.c) */
uint32_t pl_refork(void) PL_HIDDEN;
/* In a pid namespace other than memtrack's (the shared memory's header says which) */
int pl_other_pidns(void) PL_HIDDEN;
/* fork's prepare handler and the first step of its child handler (preload_ctl.c): a fork
 * child of a process in memtrack's pid namespace that still sees its parent is in it too */
void pl_ns_prepare(void) PL_HIDDEN;
void pl_ns_child(void) PL_HIDDEN;
#define PL_WIPE_GEN 0
#define PL_WIPE_NS  1

/* CLOCK_MONOTONIC through the vDSO (pl_clock: read twice after an idle millisecond), never
 * below the thread's last stamp (pl_now gives 0 when it had no sane read) */
static inline uint64_t pl_stamp_clock(struct pl_thread *t)
{
	uint64_t ns = pl_clock(t->ts_floor);

	if (ns < t->ts_floor)
		ns = t->ts_floor;
	t->ts_floor = ns;
	return ns;
}

#if defined(__x86_64__)
#define PL_HAVE_TSC  1
#define PL_TSC_SHIFT 32
uint64_t pl_stamp_slow(struct pl_thread *t) PL_HIDDEN;

static inline uint64_t pl_rdtsc(void)
{
	return __builtin_ia32_rdtsc();
}

static inline uint64_t pl_rdtsc_ordered(void)
{
	__builtin_ia32_lfence(); /* not before the instructions ahead of it */
	return __builtin_ia32_rdtsc();
}

/* A record's timestamp, CLOCK_MONOTONIC ns (preload_clock.c): the TSC extrapolated from the
 * thread's anchor while it lasts (an unsigned compare: a TSC behind the anchor renews it too).
 * Once the process knows it cannot use the TSC (memtrack offered no anchor), the
 * clock alone: no TSC read, which cost as much again as the clock's own (a storm's records
 * read both before). */
static inline uint64_t pl_stamp(struct pl_thread *t)
{
	uint64_t d, ns;

	if (pl.tsc_off)
		return pl_stamp_clock(t);
	d = pl_rdtsc() - t->tsc_a;
	if (pl_unlikely(d >= t->tsc_span))
		return pl_stamp_slow(t);
	ns = t->ns_a + ((d * pl.tsc_mult) >> PL_TSC_SHIFT);
	return ns > t->ts_floor ? ns : t->ts_floor;
}
#else
#define PL_HAVE_TSC 0
static inline uint64_t pl_stamp(struct pl_thread *t)
{
	return pl_stamp_clock(t);
}
#endif

void pl_signal_lost(void) PL_HIDDEN;

/* Marks the thread inside a hooked call; returns nonzero for the outermost one. The compiler
 * barriers keep the ring writes inside the marked region: a signal handler that allocates in
 * between sees depth > 0 and records nothing, rather than writing the same ring slot; while
 * a record is being written (t->own) such a call is counted lost, never silent. While the
 * thread looks for room in its ring (the doorbell, the wait when full) no record is
 * half-written, and depth is 0 there (pl_room): a handler's calls are recorded. */
static inline int pl_enter(struct pl_thread *t)
{
	int outer = t->depth++ == 0;

	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (pl_unlikely(!outer && t->own))
		pl_signal_lost();
	return outer;
}

static inline void pl_leave(struct pl_thread *t)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->depth--;
}

/* preload_dl.c: the loaded object holding addr (its link map: l_addr, l_name), or NULL. Through
 * the loader's sorted table of objects, not dladdr, which scans the object's whole symbol table
 * for the nearest name (~45 us on libc.so.6, in every process at start-up). */
struct link_map *pl_obj_of(const void *addr) PL_HIDDEN;
/* preload_dl.c: the next definition of name, also where RTLD_NEXT cannot see it (a library's
 * dependencies loaded with dlopen(RTLD_LOCAL)); NULL when none. */
void *pl_next_sym(const char *name) PL_HIDDEN;
/* The first malloc (`name`) in symbol lookup order is the interposer's (preload_ring.c). */
int pl_malloc_is_ours(void) PL_HIDDEN;
int pl_sym_is_ours(const char *name) PL_HIDDEN;
/* preload_families.c: when a shared jemalloc, mimalloc or tcmalloc is the next malloc, the
 * MT_SHM_PROC_* flags the interposer serves it with (LIBC | CXX | its family), else 0. */
uint32_t pl_fam_serve(void) PL_HIDDEN;
/* operator new (thr) of such a library, nothrow its nothrow form: recorded, outermost only. */
void *pl_fam_new(void *thr, void *nothrow, _Bool is_nothrow, uint32_t type, int nargs, size_t n,
		 uintptr_t a, uintptr_t b) PL_HIDDEN;

/* Writes one record for the calling thread; the caller holds depth, so that a signal handler
 * allocating meanwhile is never a second writer of the ring: while the record is written
 * (own) its calls are counted lost (pl_enter), and while pl_room looks for room, when no
 * record is half-written, they are recorded (pl_room). */
static inline __attribute__((always_inline)) void
pl_emit(struct pl_thread *t, uint32_t type, uint64_t addr, uint64_t size, uint64_t old)
{
	struct mt_event *e;
	/* the allocation records (1..4) carry their stack */
	uint32_t aux = pl_unlikely(pl_stacks_on) && type - MT_EV_MALLOC < 4 ? pl_stack_capture() : 0;

	if (pl_unlikely(!t->slot || t->gen != __atomic_load_n(pl.wipe, __ATOMIC_RELAXED)) &&
	    pl_thread_prepare(t))
		return;
	t->own = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (pl_unlikely(t->head >= t->check) && pl_room(t)) {
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t->own = 0;
		return;
	}
	e = &t->ring[t->head & pl.mask];
	e->type = type;
	e->pid = t->pid;
	e->tid = t->tid;
	e->aux = aux;
	e->ts = pl_stamp(t);
	e->addr = addr;
	e->size = size;
	e->old_addr = old;
	t->head++;
	__atomic_store_n(&t->slot->head, t->head, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	t->own = 0;
}

#endif
