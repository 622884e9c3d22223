// SPDX-License-Identifier: MIT
/*
 * The interposer's process and thread state: initialisation (next definitions, the shared
 * file), slot claims per thread and per process generation (fork), back-pressure, release at
 * thread exit. Everything here may run inside malloc: no stdio, no allocation except through
 * the bootstrap buffer while dlsym runs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "common/populate.h"
#include "preload/preload.h"
#include "preload/preload_sys.h"

struct pl_proc pl;
__thread struct pl_thread pl_t __attribute__((tls_model("initial-exec")));
static pthread_key_t pl_key;

/* --- bootstrap buffer -------------------------------------------------------------------- */

/* dlsym allocates its error state (a few dozen bytes) with calloc; 64 KiB is ample. Blocks are
 * never reused: a free of one is ignored. Each block is preceded by its size. */
_Alignas(64) unsigned char pl_boot[PL_BOOT_SIZE];
static size_t pl_boot_used;

void *pl_boot_alloc(size_t size, size_t align)
{
	size_t off, start;

	if (align < 16)
		align = 16;
	start = __atomic_load_n(&pl_boot_used, __ATOMIC_RELAXED);
	for (;;) {
		off = (start + sizeof(size_t) + align - 1) & ~(align - 1);
		if (off + size > sizeof(pl_boot) || off + size < off)
			return NULL;
		if (__atomic_compare_exchange_n(&pl_boot_used, &start, off + size, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			break;
	}
	memcpy(pl_boot + off - sizeof(size_t), &size, sizeof(size));
	return pl_boot + off;
}

size_t pl_boot_size(const void *p)
{
	size_t n;

	memcpy(&n, (const unsigned char *)p - sizeof(size_t), sizeof(n));
	return n;
}

/* --- initialisation ---------------------------------------------------------------------- */

/* Is the interposer's `name` the one the program calls? Judged by the file that defines the
 * first `name` (`malloc` here is itself looked up, through the GOT, and names the executable's
 * when the executable defines one); an undefined symbol with a value is a non-PIE executable's
 * canonical PLT entry (python3 takes malloc's address), which jumps to the first definition:
 * ours, the first preloaded object. */
int pl_sym_is_ours(const char *name)
{
	void *m = dlsym(RTLD_DEFAULT, name);
	struct link_map *self = pl_obj_of((void *)pl_sym_is_ours);
	const ElfW(Sym) *sym = NULL;
	Dl_info info;

	if (!m || !self)
		return 0;
	if (pl_obj_of(m) == self)
		return 1;
	/* only then the symbol (dladdr1 scans the object's symbol table) */
	return dladdr1(m, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_shndx == SHN_UNDEF;
}

int pl_malloc_is_ours(void)
{
	return pl_sym_is_ours("malloc");
}

/* Is the interposer's malloc the one the program calls, and libc's the next? Otherwise another
 * allocator (preloaded, linked in, or in the executable) serves the process: uprobes cover it,
 * and recording here as well would count its calls twice (a shared jemalloc, mimalloc or
 * tcmalloc next: preload_families.c). */
static int pl_next_is_libc(void)
{
	struct link_map *o;

	if (!pl_malloc_is_ours())
		return 0;
	o = pl_obj_of((void *)pl.next.malloc);
	return o && o->l_name && strstr(o->l_name, "/libc.so") != NULL;
}

static void pl_resolve(void)
{
#define PL_NEXT(f) pl.next.f = (__typeof__(pl.next.f))dlsym(RTLD_NEXT, #f)
	PL_NEXT(malloc);
	PL_NEXT(calloc);
	PL_NEXT(realloc);
	PL_NEXT(reallocarray);
	PL_NEXT(free);
	PL_NEXT(posix_memalign);
	PL_NEXT(aligned_alloc);
	PL_NEXT(memalign);
	PL_NEXT(valloc);
	PL_NEXT(pvalloc);
#if __GLIBC_PREREQ(2, 39)
	/* only where they can exist: a failed dlsym allocates its error (through an allocator
	 * the interposer may not serve, e.g. the executable's, which uprobes record) */
	PL_NEXT(free_sized);
	PL_NEXT(free_aligned_sized);
#endif
#undef PL_NEXT
}

static void pl_release(void *arg);

/* Adds this process to the header's list (the manifest's per-process mechanism). */
void pl_register(void)
{
	struct mt_shm_proc *procs = pl.procs;
	uint32_t i = __atomic_fetch_add(&pl.hdr->nr_procs, 1, __ATOMIC_RELAXED);

	if (i >= MT_SHM_MAX_PROCS)
		return;
	procs[i].flags = pl.flags | (PL_I386 ? MT_SHM_PROC_I386 : 0);
	procs[i].ts = pl_clock(0); /* read twice: a wild time here would mislabel it */
	__atomic_store_n(&procs[i].pid, (int32_t)pl_sys_getpid(), __ATOMIC_RELEASE);
}

/* Maps a shared file of memtrack's read-write, whole; NULL unless it is at least min bytes (its
 * size in *size). Used for the rings here and the stack area (preload_stack.c). A file this
 * process may not open (another user's credentials) or cannot see (another /dev/shm) is asked
 * of memtrack (preload_handoff.c). */
void *pl_map_file(const char *path, size_t min, size_t *size)
{
	struct stat st;
	void *m;
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0 && (errno == EACCES || errno == EPERM || errno == ENOENT))
		fd = pl_handoff(path);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || (size_t)st.st_size < min) {
		close(fd);
		return NULL;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	*size = (size_t)st.st_size;
	return m;
}

/* The layout fields of a header, copied once: other processes write the file meanwhile, so
 * what is checked must be what is used. */
struct pl_layout {
	uint64_t magic, file_size, procs_off, slots_off, data_off, seen_off, kept_off;
	uint32_t version, nr_slots, slot_records, seen_nr;
};

/* Do the header's three areas lie inside the file (size bytes), without overflow? */
static int pl_layout_ok(const struct pl_layout *h, uint64_t size)
{
	uint64_t procs = (uint64_t)MT_SHM_MAX_PROCS * sizeof(struct mt_shm_proc), slots, data;

	if (!h->nr_slots || !h->slot_records || (h->slot_records & (h->slot_records - 1)) ||
	    __builtin_mul_overflow((uint64_t)h->nr_slots, sizeof(struct mt_shm_slot), &slots) ||
	    __builtin_mul_overflow((uint64_t)h->nr_slots * h->slot_records, sizeof(struct mt_event),
				   &data))
		return 0;
	return h->procs_off <= size && procs <= size - h->procs_off && h->slots_off <= size &&
	       slots <= size - h->slots_off && h->data_off <= size && data <= size - h->data_off &&
	       !(h->procs_off % 8) && !(h->slots_off % 64) && !(h->data_off % 8) &&
	       !(h->seen_nr & (h->seen_nr - 1)) && h->seen_nr <= (1u << 20) &&
	       h->seen_off <= size &&
	       h->seen_nr * sizeof(struct mt_shm_seen) <= size - h->seen_off &&
	       !(h->seen_off % 8) && h->kept_off <= size &&
	       MT_SHM_KEPT_MAX * sizeof(struct mt_shm_seen) <= size - h->kept_off &&
	       !(h->kept_off % 8);
}

/* Maps the shared file named in the environment. 0, or -1 when there is none to use. */
static int pl_map(void)
{
	const char *path = getenv(MT_SHM_ENV);
	struct mt_shm_hdr *h;
	struct pl_layout l;
	size_t size;
	void *m;

	if (!path || !*path)
		return -1;
	m = pl_map_file(path, sizeof(*h), &size);
	if (!m)
		return -1;
	h = m;
	l = (struct pl_layout){.magic = __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE),
			       .file_size = h->file_size,
			       .procs_off = h->procs_off,
			       .slots_off = h->slots_off,
			       .data_off = h->data_off,
			       .seen_off = h->seen_off,
			       .kept_off = h->kept_off,
			       .version = h->version,
			       .seen_nr = h->seen_nr,
			       .nr_slots = h->nr_slots,
			       .slot_records = h->slot_records};
	__atomic_signal_fence(__ATOMIC_SEQ_CST); /* copied here, not read again below */
	if (l.magic != MT_SHM_MAGIC || l.version != MT_SHM_VERSION ||
	    l.file_size != (uint64_t)size || !pl_layout_ok(&l, size) ||
	    __atomic_load_n(&h->closed, __ATOMIC_ACQUIRE)) {
		munmap(m, size);
		return -1;
	}
	pl.hdr = h;
	pl.procs = (void *)((char *)m + l.procs_off);
	pl.slots = (void *)((char *)m + l.slots_off);
	pl.data = (void *)((char *)m + l.data_off);
	pl.seen = (void *)((char *)m + l.seen_off);
	pl.seen_nr = l.seen_nr;
	pl.kept = (void *)((char *)m + l.kept_off);
	pl.kept_max = MT_SHM_KEPT_MAX;
	pl.nr_slots = l.nr_slots;
	pl.nrec = l.slot_records;
	pl.mask = l.slot_records - 1;
	pl.map_len = size;
	return 0;
}

/* The wipe page, once made (pl_init) */
static uint32_t *pl_wipe_page(void)
{
	return pl.wipe && pl.wipe != MAP_FAILED ? pl.wipe : NULL;
}

/* In a pid namespace other than memtrack's (the tree ran `unshare -p`)? Our getpid() is then
 * not the pid memtrack knows us by: such a process is left to the uprobes (auto mode, judged at
 * its exec stop, src/track/preload_setup.c). The header's inode unknown, or /proc not telling:
 * the same. The answer "the same" is kept in the wipe page, which a child does not inherit: in
 * a fresh fork child the stat costs ~50 us here (the kernel makes the child's /proc entries for
 * it, and drops them at its exit), so fork's handlers answer for it where they can (below). */
int pl_other_pidns(void)
{
	uint64_t want = pl.hdr->pidns_ino;
	uint32_t *w = pl_wipe_page();
	struct stat st;

	if (!want || (w && __atomic_load_n(&w[PL_WIPE_NS], __ATOMIC_RELAXED)))
		return 0;
	if (stat("/proc/self/ns/pid", &st))
		return 0;
	if ((uint64_t)st.st_ino != want)
		return 1;
	if (w)
		__atomic_store_n(&w[PL_WIPE_NS], 1, __ATOMIC_RELAXED);
	return 0;
}

/* fork(): a child goes to its parent's namespace for children, which is the parent's own unless
 * it ran unshare(CLONE_NEWPID) or setns. A parent outside the child's namespace is not in it,
 * and getppid() then gives 0: so a child that sees its parent, of a parent known to be in
 * memtrack's namespace, is in memtrack's namespace too. (Reparented before it asks, it sees the
 * reaper of its own namespace: a foreign namespace's reaper is that namespace's pid 1, never a
 * process of the tree in memtrack's, and a reaper in memtrack's namespace leaves the answer
 * right.) Children made otherwise (_Fork, raw clone) run no handler: their first record stats,
 * as before. */
void pl_ns_prepare(void)
{
	uint32_t *w = pl_wipe_page();

	pl_t.fork_ns_ok = w && __atomic_load_n(&w[PL_WIPE_NS], __ATOMIC_RELAXED);
}

void pl_ns_child(void)
{
	uint32_t *w = pl_wipe_page();

	if (pl_t.fork_ns_ok && w && pl_sys_getppid() > 0)
		__atomic_store_n(&w[PL_WIPE_NS], 1, __ATOMIC_RELAXED);
	pl_t.fork_ns_ok = 0;
}

/*
 * Under valgrind (its tools preload vgpreload_core, and put it in the program's LD_PRELOAD):
 * valgrind runs the program's code from its own translation of the bytes it reads, and a
 * uprobe is an int3 written into those bytes, which the translation then executes as a
 * breakpoint: the program dies of SIGTRAP at the first control point (preload_ctl.c), or at
 * glibc's malloc when memtrack has probed it. So the interposer passes through there and calls
 * no control point; the process is counted as not served (drops.unserved) through the header.
 */
static int pl_under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p && strstr(p, "/vgpreload_");
}

static int pl_init(void)
{
	int state = PL_PASS, saved = errno;
	uint32_t mine;

	pl_t.in_init = 1;
	pl.page_size = (uint32_t)sysconf(_SC_PAGESIZE);
	pl_resolve();
	/* before the shared memory: what dlsym allocates (through an allocator the interposer
	 * may not serve) is then the same whether memtrack runs or not */
	mine = pl_next_is_libc() ? MT_SHM_PROC_LIBC | MT_SHM_PROC_CXX : pl_fam_serve();
	pl.flags = MT_SHM_PROC_OFF;
	if (pl_under_valgrind()) {
		if (!pl_map()) {
			__atomic_fetch_add(&pl.hdr->unserved, 1, __ATOMIC_RELAXED);
			munmap(pl.hdr, pl.map_len);
		}
		/* no header: no dlopen announcement (preload_dl.c) either */
		pl.hdr = NULL;
		pl.slots = NULL;
		pl.data = NULL;
		pl.seen = NULL;
		pl.seen_nr = 0;
		pl.kept = NULL;
		pl.kept_max = 0;
	} else if (!pl.next.malloc || !pl.next.free || pl_map()) {
		const char *shm = getenv(MT_SHM_ENV);

		if (shm && *shm) /* memtrack expects this process: it must hear of it */
			pl_ctl_unserved();
	} else if (pl_other_pidns()) {
		/* not registered: memtrack judged it at its exec (uprobes in auto mode) */
	} else {
		pl.wipe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		/* MEMTRACK_TEST_PRELOAD_UNSERVED: the tests' way to reach the refusal below */
		if (pl.wipe != MAP_FAILED && !madvise(pl.wipe, 4096, MADV_WIPEONFORK) &&
		    !pthread_key_create(&pl_key, pl_release) &&
		    !getenv("MEMTRACK_TEST_PRELOAD_UNSERVED")) {
			if (mine) {
				pl.flags = mine;
				state = PL_ON;
			}
			pl.gen_counter = 1;
			pl.wipe[PL_WIPE_GEN] = 1;
			pl.wipe[PL_WIPE_NS] = 1; /* checked just above */
		}
		/* registered before the served call (preload_ctl.c: the link may miss the call) */
		pl_register();
		if (state == PL_ON)
			pl_ctl_served();
		else if (mine)
			pl_ctl_unserved(); /* could serve it, cannot: say so */
	}
	pl_t.in_init = 0;
	__atomic_store_n(&pl.state, state, __ATOMIC_RELEASE);
	errno = saved;
	return state;
}

int pl_mode_slow(void)
{
	int s = __atomic_load_n(&pl.state, __ATOMIC_ACQUIRE);

	if (s == PL_UNINIT) {
		int want = PL_UNINIT;

		if (__atomic_compare_exchange_n(&pl.state, &want, PL_INIT, false, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE))
			return pl_init();
		s = want;
	}
	if (s == PL_INIT) {
		if (pl_t.in_init)
			return PL_BOOT;
		while ((s = __atomic_load_n(&pl.state, __ATOMIC_ACQUIRE)) == PL_INIT)
			sched_yield();
	}
	return s;
}

__attribute__((constructor)) static void pl_ctor(void)
{
	pl_mode();
}

/* --- slots ------------------------------------------------------------------------------- */

/* A fork (or raw clone) child: its page was wiped. Take a new generation, so that every thread
 * claims a slot of its own before writing. */
uint32_t pl_refork(void)
{
	uint32_t gen = __atomic_load_n(pl.wipe, __ATOMIC_ACQUIRE), want = 0;

	if (gen)
		return gen;
	gen = __atomic_add_fetch(&pl.gen_counter, 1, __ATOMIC_RELAXED);
	while (!gen || gen == PL_GEN_VFORK)
		gen = __atomic_add_fetch(&pl.gen_counter, 1, __ATOMIC_RELAXED);
	if (__atomic_compare_exchange_n(pl.wipe, &want, gen, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		/* the calling thread, the fork child's only one, is not the vforking parent whose
		 * state it may have inherited (preload_vfork.c): that state is not its own */
		pl_t.vfork_on = 0;
		pl_t.slot = NULL;
		/* a fork child in a new pid namespace: it had the parent's served mark, with no
		 * exec to judge it; the call in progress is lost: counted (the BPF side clears
		 * the mark, so attached uprobes take the rest) */
		if (pl_other_pidns()) {
			__atomic_store_n(&pl.state, PL_PASS, __ATOMIC_RELEASE);
			pl_ctl_unserved();
			return gen;
		}
		pl_register();
		/* the parent's served call may have come before memtrack's control link: the BPF
		 * side gave this child its unmarked state (preload_ctl.c) */
		if (__atomic_load_n(&pl.ctl_unseen, __ATOMIC_RELAXED))
			pl_ctl_served();
		return gen;
	}
	return want;
}

int pl_thread_prepare(struct pl_thread *t)
{
	uint32_t gen;

	if (pl_unlikely(t->vfork_on))
		return pl_vfork_side(t);
	gen = pl_refork();
	if (__atomic_load_n(&pl.state, __ATOMIC_ACQUIRE) != PL_ON)
		return -1; /* pl_refork gave up on this process */
	return pl_claim(t, gen);
}

void pl_set_slot_key(struct mt_shm_slot *s)
{
	pthread_setspecific(pl_key, s); /* released by pl_release at thread exit */
}

static int pl_claim_look(struct pl_thread *t, uint32_t gen)
{
	uint32_t n = pl.nr_slots;

	/* a slot inherited from the parent (fork) is the parent's: leave it alone */
	t->slot = NULL;
	/* lowest free slot first: the consumer scans only up to the highest ever taken */
	for (uint32_t idx = 0; idx < n; idx++) {
		uint32_t want = MT_SLOT_FREE, hwm;
		struct mt_shm_slot *s = &pl.slots[idx];

		if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) != MT_SLOT_FREE ||
		    !__atomic_compare_exchange_n(&s->state, &want, MT_SLOT_OWNED, false,
						 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			continue;
		t->pid = (int32_t)pl_sys_getpid();
		t->tid = (int32_t)pl_sys_gettid();
		t->head = __atomic_load_n(&s->head, __ATOMIC_RELAXED);
		t->tail = __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE);
		t->check = t->head; /* the first record looks at the ring */
		t->pop = t->head;
		t->pop_end = t->head + pl.nrec;
		t->ring = pl.data + (size_t)idx * pl.nrec;
		t->gen = gen;
		s->claim_ns = pl_clock(0); /* read twice: compared with its Exit/Exec */
		s->tid = t->tid;
		__atomic_store_n(&s->pid, t->pid, __ATOMIC_RELEASE);
		hwm = __atomic_load_n(&pl.hdr->next_slot, __ATOMIC_RELAXED);
		while (hwm < idx + 1 &&
		       !__atomic_compare_exchange_n(&pl.hdr->next_slot, &hwm, idx + 1, false,
						    __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			;
		t->slot = s;
		pl_set_slot_key(s);
		return 0;
	}
	return -1;
}

/* Thread exit (a pthread key destructor): the slot goes back once the consumer drained it.
 * An event after this (a later destructor) claims a slot again, and the key runs again. */
static void pl_release(void *arg)
{
	struct pl_thread *t = &pl_t;

	/* it vforked and made no record since: its own slot back first, to be released */
	if (t->vfork_on && pl_vfork_restore(t, (int32_t)pl_sys_getpid()))
		arg = t->slot;

	if (!t->slot || t->slot != arg || t->gen != __atomic_load_n(pl.wipe, __ATOMIC_RELAXED))
		return;
	/* forgotten before it is given back: a signal handler allocating in between claims a
	 * slot of its own, instead of writing into one the consumer may already hand to
	 * another thread (one record overwritten, uncounted) */
	t->slot = NULL;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&((struct mt_shm_slot *)arg)->state, MT_SLOT_RELEASED, __ATOMIC_RELEASE);
}

int pl_consumer_gone(void)
{
	if (__atomic_load_n(&pl.hdr->closed, __ATOMIC_ACQUIRE))
		return 1;
	/* EPERM (memtrack runs as root, we do not) still means it is there */
	return kill(pl.hdr->consumer_pid, 0) && errno == ESRCH;
}

static inline void pl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#else
	__asm__ volatile("" ::: "memory");
#endif
}

/* Asks memtrack to drain now (shm_abi.h: the doorbell). */
static void pl_ring_bell(void)
{
	int saved = errno;

	__atomic_fetch_add(&pl.hdr->bell, 1, __ATOMIC_SEQ_CST);
	/* seq_cst pairs with the bell thread's bell_sleeping store then bell load */
	if (__atomic_load_n(&pl.hdr->bell_sleeping, __ATOMIC_SEQ_CST))
		syscall(SYS_futex, &pl.hdr->bell, FUTEX_WAKE, 1, NULL, NULL, 0);
	errno = saved;
}

#define PL_CLAIM_WAIT_NS     100000	  /* between two looks for a free slot... */
#define PL_CLAIM_WAIT_MAX_NS 100000000ull /* ...for this long before its record is dropped */

/*
 * A slot for the thread. None free: memtrack is asked to drain (the doorbell), which gives back
 * the slots of exited threads (RELEASED and drained, or of threads gone: shm_source.c), and the
 * thread waits for one, up to ~100 ms, as a full ring waits for room: threads made and joined
 * faster than memtrack's rounds (~1,500 in 50 ms) had used the 1,024 slots up before it came
 * round, and lost their records as no_slot, until 8 December 2026
 * (test_preload_thread_exit_slots, 4 runs in 10). Only more than 1,024 threads alive at once,
 * or memtrack gone, still drop (counted). errno is the program's: kept.
 */
int pl_claim(struct pl_thread *t, uint32_t gen)
{
	int saved = errno;
	uint64_t end = 0;

	for (int i = 0;; i++) {
		struct timespec ts = {0, PL_CLAIM_WAIT_NS};
		uint64_t now;

		if (!pl_claim_look(t, gen)) {
			errno = saved;
			return 0;
		}
		/* a thread that waited in vain once only looks from then on: with more threads
		 * alive than slots, each of its calls would wait */
		if (t->claim_failed == gen)
			break;
		now = pl_now();
		if (!end)
			end = now + PL_CLAIM_WAIT_MAX_NS;
		if (now >= end || i >= 2000 || (i % 16 == 0 && pl_consumer_gone()))
			break;
		pl_ring_bell();
		nanosleep(&ts, NULL);
	}
	t->claim_failed = gen;
	__atomic_fetch_add(&pl.hdr->drops[MT_SHM_DROP_NO_SLOT], 1, __ATOMIC_RELAXED);
	errno = saved;
	return -1;
}

void pl_signal_lost(void)
{
	if (pl.hdr)
		__atomic_fetch_add(&pl.hdr->drops[MT_SHM_DROP_SIGNAL], 1, __ATOMIC_RELAXED);
}

/* The ring is full: wait for the consumer (back-pressure). 0 when there is room; -1 when
 * memtrack stopped reading: the process then passes through, untracked, and never hangs. */
static int pl_wait_room(struct pl_thread *t)
{
	struct mt_shm_slot *s = t->slot;
	int saved = errno, rc = 0;
	bool slept = false;
	uint64_t from = 0; /* CLOCK_MONOTONIC at the first sleep */

	for (int spin = 0;; spin++) {
		struct timespec to = {0, 10 * 1000 * 1000};
		uint64_t tail;

		t->tail = __atomic_load_n(&s->tail, __ATOMIC_ACQUIRE);
		if (t->head - t->tail < pl.nrec)
			break;
		if (spin < 64) {
			pl_cpu_relax();
			continue;
		}
		if (!slept) {
			slept = true;
			from = pl_clock(0);
		}
		__atomic_store_n(&s->waiting, 1, __ATOMIC_SEQ_CST);
		tail = __atomic_load_n(&s->tail, __ATOMIC_SEQ_CST);
		if (t->head - tail >= pl.nrec &&
		    syscall(SYS_futex, (uint32_t *)&s->tail, FUTEX_WAIT, (uint32_t)tail, &to, NULL,
			    0) &&
		    errno == ETIMEDOUT && pl_consumer_gone()) {
			__atomic_store_n(&s->waiting, 0, __ATOMIC_RELAXED);
			__atomic_fetch_add(&pl.hdr->drops[MT_SHM_DROP_CLOSED], 1, __ATOMIC_RELAXED);
			__atomic_store_n(&pl.state, PL_PASS, __ATOMIC_RELEASE);
			rc = -1;
			break;
		}
		__atomic_store_n(&s->waiting, 0, __ATOMIC_RELAXED);
	}
	if (slept) { /* one wait, however many futex rounds it took */
		uint64_t until = pl_clock(0);

		__atomic_fetch_add(&pl.hdr->waits, 1, __ATOMIC_RELAXED);
		if (from && until > from)
			__atomic_fetch_add(&pl.hdr->wait_ns, until - from, __ATOMIC_RELAXED);
	}
	errno = saved;
	return rc;
}

/* Bytes of ring mapped ahead at a time; the first piece after a claim is smaller: mapped pages
 * of the shared file count in the process's shmem RSS, and a short-lived process writes few
 * records (16 KiB: at most 12 KiB more than it would have touched). */
#define PL_POP_FIRST (16u << 10)
#define PL_POP_BYTES (64u << 10)
static int pl_no_populate;

/* Maps the ring's pages from record `from` on, PL_POP_BYTES of them (PL_POP_FIRST from the
 * claim; to the ring's end at most), in one system call (common/populate.h). Returns the
 * record after the last mapped. */
static uint64_t pl_populate(struct pl_thread *t, uint64_t from)
{
	uintptr_t pg = pl.page_size, a, b;
	uint64_t idx = from & pl.mask;
	uint64_t n = (from == t->pop_end - pl.nrec ? PL_POP_FIRST : PL_POP_BYTES) /
		     sizeof(struct mt_event);

	if (n > pl.nrec - idx)
		n = pl.nrec - idx; /* up to the ring's end; the next call starts at its start */
	a = (uintptr_t)&t->ring[idx] & ~(pg - 1);
	b = ((uintptr_t)&t->ring[idx + n] + pg - 1) & ~(pg - 1);
	/* as populate__pages (common/populate.h) does, inline: no libc code a fork child has yet
	 * to fault in (preload_sys.h) */
	if (!pl_no_populate && b > a &&
	    pl_sys_madvise((void *)a, b - a, MADV_POPULATE_WRITE) == -EINVAL)
		pl_no_populate = 1; /* an older kernel: faults, as before */
	return from + n;
}

/*
 * A record's slow path, taken when head reaches t->check: reads the consumer's tail; from half
 * full on rings the doorbell, and when full waits for room. Then sets the next check: when the
 * ring would be half full as far as we know, or an eighth of a ring later if it is past half
 * already (the doorbell rings at most that often), and no later than the end of the ring's
 * mapped part (pl_populate) until the whole ring was mapped once. 0 when there is room, -1
 * when memtrack stopped reading.
 */
static int pl_room_look(struct pl_thread *t)
{
	uint64_t half = pl.nrec / 2;

	t->tail = __atomic_load_n(&t->slot->tail, __ATOMIC_ACQUIRE);
	if (t->head - t->tail >= half) {
		pl_ring_bell();
		if (t->head - t->tail >= pl.nrec && pl_wait_room(t))
			return -1;
	}
	t->check = t->tail + half;
	if (t->check <= t->head) {
		t->check = t->head + pl.nrec / 8;
		if (t->check > t->tail + pl.nrec)
			t->check = t->tail + pl.nrec; /* > head: there is room */
	}
	if (t->pop < t->pop_end) {
		if (t->head >= t->pop)
			t->pop = pl_populate(t, t->head);
		if (t->check > t->pop)
			t->check = t->pop;
	}
	return 0;
}

/*
 * No record is half-written while pl_room looks, rings the doorbell or waits (pl_emit writes
 * its own afterwards, at the head as it is then): the thread's depth and own mark are taken
 * down meanwhile, so a signal handler that allocates then, during a wait of hundreds of ms
 * say, is recorded like any other call, in this ring (waiting itself if it is full). Until 7
 * December 2026 it was taken for a nested call and went unrecorded, uncounted. Its records
 * may take the room found: looked at again once the marks are back, when no handler can write.
 */
int pl_room(struct pl_thread *t)
{
	int depth = t->depth, own = t->own, rc;

	for (;;) {
		t->depth = t->own = 0;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		rc = pl_room_look(t);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t->depth = depth;
		t->own = own;
		if (rc || t->head - __atomic_load_n(&t->slot->tail, __ATOMIC_ACQUIRE) < pl.nrec)
			return rc;
	}
}
