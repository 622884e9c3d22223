// SPDX-License-Identifier: MIT
/*
 * In-process call stacks (memtrack track --stacks, preload path). For each allocation record
 * pl_emit calls pl_stack_capture, which returns the ref of the call stack's entry in the
 * shared stack area (stack_abi.h) for the record's aux:
 *
 *  - unwinding uses the call-frame information (.eh_frame), so code without frame pointers is
 *    unwound right: libunwind's unw_backtrace, whose x86-64 fast path caches each return
 *    address's frame layout per thread (~140 ns for 25 frames here; libgcc's
 *    _Unwind_Backtrace, which parses the CFI at every frame, took ~3.2 us). libunwind is
 *    dlopen'ed RTLD_LOCAL, only when stacks are on: its _Unwind_* and backtrace definitions
 *    stay out of the program's symbol scope (a link against it would interpose libgcc_s's
 *    unwinder), and Debian ships no position-independent libunwind.a to link in.
 *  - the frames of the interposer itself (and libunwind's) are skipped: the leaf is the
 *    caller of malloc / operator new.
 *  - a per-process cache (hash of the return addresses -> ref) makes a known stack cost the
 *    unwind and one lookup; only a new stack takes the lock, resolves its frames to
 *    (module, ELF vaddr) with the loaded objects' program headers (dl_iterate_phdr, re-read
 *    when its adds/subs counters move) and their build-ids (PT_NOTE, in memory), and writes
 *    the entries.
 *
 * Every table here but the cache is read and written under the lock, on new stacks only.
 *
 * Re-entrancy: everything here runs inside a hooked call (the thread's depth is held), so an
 * allocation made by the unwinder, by dl_iterate_phdr or by a signal handler meanwhile is
 * nested and not recorded. The lock is taken around fork (pthread_atfork), so a child never
 * inherits it held; the child keeps the cache, whose refs name entries of the shared area.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "preload/preload.h"
#include "preload/stack_abi.h"

int pl_stacks_on;

#define CACHE_SLOTS (1u << 18) /* stacks per process before the cache stops growing: half */
#define MAX_MODS    4096 /* loaded objects seen per process (dlopen/dlclose cycles included) */
#define NAMES_BYTES (1u << 20)
#define BT_CAP	    (MT_STK_MAX_FRAMES + 16) /* the interposer's and libunwind's frames too */

struct pl_cache_ent {
	uint64_t key; /* 0: empty; published last (release) */
	uint32_t ref;
	uint32_t pad;
};

struct pl_mod {
	uintptr_t lo, hi, bias; /* [lo, hi): its PT_LOAD segments */
	uint32_t ref;		/* its entry in the area, written on first use; 0 until then */
	uint32_t name_off;
	uint8_t build_id[20];
	uint8_t build_id_len;
};

static struct {
	struct mt_stk_hdr *hdr;
	char *data;
	uint64_t data_size; /* checked at the map: the header is written by every process */
	int (*backtrace)(void **, int);
	uintptr_t self_lo, self_hi;
	struct pl_cache_ent *cache;
	uint32_t cached;
	struct pl_mod *mods;
	uint32_t nr_mods;
	char *names;
	size_t names_used;
	unsigned long long adds, subs;
	int lock;
	/* the kernel's uretprobe trampoline page ("[uprobes]") as last found in process pid */
	uintptr_t xol_lo, xol_hi;
	pid_t xol_pid;
	char exe[PATH_MAX];
} ps;

static void pl_stk_lock(void)
{
	while (__atomic_exchange_n(&ps.lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void pl_stk_unlock(void)
{
	__atomic_store_n(&ps.lock, 0, __ATOMIC_RELEASE);
}

static inline int pl_in_self(uintptr_t a)
{
	return a - 1 >= ps.self_lo && a - 1 < ps.self_hi;
}

static inline uint64_t pl_stack_key(void *const *ip, uint32_t nr, int truncated)
{
	uint64_t h = 0x9e3779b97f4a7c15ull * (nr * 2 + 1 + (unsigned)truncated);

	for (uint32_t i = 0; i < nr; i++) {
		h = (h ^ (uintptr_t)ip[i]) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	return h ? h : 1;
}

/* --- the loaded objects ------------------------------------------------------------------ */

static void pl_build_id(struct dl_phdr_info *info, const ElfW(Phdr) *ph, struct pl_mod *m)
{
	const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;

	while (p + sizeof(ElfW(Nhdr)) <= end) {
		const ElfW(Nhdr) *n = (const void *)p;
		size_t name = (n->n_namesz + 3) & ~3u, desc = (n->n_descsz + 3) & ~3u;
		const char *d = p + sizeof(*n) + name;

		if (d + desc > end)
			return;
		if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
		    !memcmp(p + sizeof(*n), "GNU", 4) && n->n_descsz <= sizeof(m->build_id)) {
			memcpy(m->build_id, d, n->n_descsz);
			m->build_id_len = (uint8_t)n->n_descsz;
			return;
		}
		p = d + desc;
	}
}

/* [lo, hi) of an object's PT_LOAD segments, as mapped; hi 0 when it has none. */
static void pl_load_range(const struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
	*lo = UINTPTR_MAX;
	*hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < *lo)
			*lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > *hi)
			*hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
}

/* Adds the objects not known yet (same range and bias: the same mapping). The first object
 * is the executable, whose dlpi_name is empty. */
static int pl_mods_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	int *index = arg;
	uintptr_t lo, hi;
	const char *name = info->dlpi_name;
	struct pl_mod *m;
	size_t len;

	if ((*index)++ == 0 &&
	    size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		ps.adds = info->dlpi_adds;
		ps.subs = info->dlpi_subs;
	}
	pl_load_range(info, &lo, &hi);
	if (!hi)
		return 0;
	for (uint32_t i = 0; i < ps.nr_mods; i++)
		if (ps.mods[i].lo == lo && ps.mods[i].hi == hi &&
		    ps.mods[i].bias == info->dlpi_addr)
			return 0;
	if (!name || !*name)
		name = *index == 1 ? ps.exe : "";
	len = strlen(name) + 1;
	if (ps.nr_mods == MAX_MODS || ps.names_used + len > NAMES_BYTES)
		return 0;
	m = &ps.mods[ps.nr_mods];
	memset(m, 0, sizeof(*m));
	m->lo = lo;
	m->hi = hi;
	m->bias = info->dlpi_addr;
	m->name_off = (uint32_t)ps.names_used;
	memcpy(ps.names + ps.names_used, name, len);
	ps.names_used += len;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_NOTE && !m->build_id_len)
			pl_build_id(info, &info->dlpi_phdr[i], m);
	ps.nr_mods++;
	return 0;
}

static void pl_mods_refresh(void)
{
	int index = 0;

	dl_iterate_phdr(pl_mods_cb, &index);
}

static int pl_gen_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *g = arg;

	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		g[0] = info->dlpi_adds;
		g[1] = info->dlpi_subs;
	}
	return 1; /* the counters are the same in every entry */
}

/* The newest mapping first: a range reused after a dlclose belongs to the later object. */
static struct pl_mod *pl_mod_find(uintptr_t ret)
{
	for (uint32_t i = ps.nr_mods; i--;)
		if (ret - 1 >= ps.mods[i].lo && ret - 1 < ps.mods[i].hi)
			return &ps.mods[i];
	return NULL;
}

/*
 * Is a (a frame's return address) in the kernel's uretprobe trampoline page, "[uprobes]"? A
 * return probe on a function the call went through replaced that function's return address
 * with it; the unwinder cannot go past it. The page appears at a process's first uprobe hit
 * and a fork child does not inherit it (VM_DONTCOPY): looked up in /proc/self/maps when an
 * address outside every module ends a new stack, once per process while found. Under the lock.
 */
static int pl_in_xol(uintptr_t a)
{
	char buf[4096], *line, *nl;
	size_t have = 0;
	ssize_t n;
	int fd;

	if (ps.xol_pid == getpid() && a >= ps.xol_lo && a < ps.xol_hi)
		return 1;
	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while ((n = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		have += (size_t)n;
		buf[have] = 0;
		for (line = buf; (nl = strchr(line, '\n')); line = nl + 1) {
			char *end;
			unsigned long lo, hi;

			*nl = 0;
			if (!strstr(line, " [uprobes]"))
				continue;
			lo = strtoul(line, &end, 16);
			hi = *end == '-' ? strtoul(end + 1, NULL, 16) : 0;
			if (hi > lo) {
				ps.xol_lo = lo;
				ps.xol_hi = hi;
				ps.xol_pid = getpid();
				close(fd);
				return a >= lo && a < hi;
			}
		}
		have = (size_t)(buf + have - line);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)
			have = 0; /* a line longer than the buffer: not ours */
	}
	close(fd);
	return 0;
}

/* --- the shared area --------------------------------------------------------------------- */

static void *pl_area_take(uint32_t len, uint32_t *ref)
{
	uint64_t off = __atomic_fetch_add(&ps.hdr->used, len, __ATOMIC_RELAXED);

	if (off > ps.data_size || len > ps.data_size - off)
		return NULL;
	*ref = (uint32_t)(off / 8 + 1);
	return ps.data + off;
}

static uint32_t pl_mod_ref(struct pl_mod *m)
{
	const char *name = ps.names + m->name_off;
	size_t plen = strlen(name) + 1;
	uint32_t len = (uint32_t)((sizeof(struct mt_stk_module) + plen + 7) & ~(size_t)7), ref;
	struct mt_stk_module *e;

	if (m->ref)
		return m->ref;
	e = pl_area_take(len, &ref);
	if (!e)
		return 0;
	e->e = (struct mt_stk_entry){.kind = MT_STK_MODULE, .len = len};
	e->pid = (int32_t)getpid();
	e->build_id_len = m->build_id_len;
	e->bias = m->bias;
	memcpy(e->build_id, m->build_id, m->build_id_len);
	memcpy(e->path, name, plen);
	m->ref = ref;
	return ref;
}

/* A stack the cache does not know: resolved, written, cached. 0 when the area is full. */
static uint32_t pl_stack_new(void *const *ip, uint32_t nr, int truncated, uint64_t key)
{
	struct mt_stk_frame f[MT_STK_MAX_FRAMES];
	unsigned long long g[2] = {0, 0};
	uint32_t slot, ref = 0, len, flags = truncated ? MT_STK_TRUNCATED : 0;
	struct mt_stk_stack *e;
	int refreshed = 0;

	pl_stk_lock();
	/* another thread may have added it meanwhile */
	for (slot = key & (CACHE_SLOTS - 1); ps.cache[slot].key;
	     slot = (slot + 1) & (CACHE_SLOTS - 1))
		if (ps.cache[slot].key == key) {
			ref = ps.cache[slot].ref;
			goto out;
		}
	dl_iterate_phdr(pl_gen_cb, g);
	if (g[0] != ps.adds || g[1] != ps.subs) {
		pl_mods_refresh();
		refreshed = 1;
	}
	for (uint32_t i = 0; i < nr; i++) {
		uintptr_t a = (uintptr_t)ip[i];
		struct pl_mod *m = pl_mod_find(a);

		if (!m && !refreshed) { /* mapped by other means than the loader, or missed */
			pl_mods_refresh();
			refreshed = 1;
			m = pl_mod_find(a);
		}
		f[i].pad = 0;
		if (m) {
			f[i].module = pl_mod_ref(m);
			if (!f[i].module)
				goto full;
			f[i].vaddr = a - m->bias;
		} else if (pl_in_xol(a)) {
			/* the frames past it are not the program's: the stack ends here */
			flags = MT_STK_TRUNCATED | MT_STK_URETPROBE;
			nr = i;
			break;
		} else {
			f[i].module = 0;
			f[i].vaddr = a;
		}
	}
	len = (uint32_t)(sizeof(*e) + nr * sizeof(f[0]));
	e = pl_area_take(len, &ref);
	if (!e)
		goto full;
	e->e = (struct mt_stk_entry){.kind = MT_STK_STACK, .len = len, .nr = nr | flags};
	memcpy(e->f, f, nr * sizeof(f[0]));
	if (ps.cached < CACHE_SLOTS / 2) {
		ps.cache[slot].ref = ref;
		__atomic_store_n(&ps.cache[slot].key, key, __ATOMIC_RELEASE);
		ps.cached++;
	}
out:
	pl_stk_unlock();
	return ref;
full:
	pl_stk_unlock();
	__atomic_fetch_add(&ps.hdr->full, 1, __ATOMIC_RELAXED);
	return 0;
}

uint32_t pl_stack_capture(void)
{
	void *ip[BT_CAP];
	int n = ps.backtrace ? ps.backtrace(ip, BT_CAP) : 0, i = 0, truncated;
	uint32_t nr, slot;
	uint64_t key, k;

	/* libunwind's own frames, then the interposer's: the leaf is the allocator's caller */
	while (i < n && !pl_in_self((uintptr_t)ip[i]))
		i++;
	while (i < n && pl_in_self((uintptr_t)ip[i]))
		i++;
	if (i >= n) {
		__atomic_fetch_add(&ps.hdr->failed, 1, __ATOMIC_RELAXED);
		return 0;
	}
	nr = (uint32_t)(n - i);
	truncated = n == BT_CAP;
	if (nr > MT_STK_MAX_FRAMES) {
		nr = MT_STK_MAX_FRAMES;
		truncated = 1;
	}
	key = pl_stack_key(ip + i, nr, truncated);
	for (slot = key & (CACHE_SLOTS - 1);
	     (k = __atomic_load_n(&ps.cache[slot].key, __ATOMIC_ACQUIRE));
	     slot = (slot + 1) & (CACHE_SLOTS - 1))
		if (k == key)
			return ps.cache[slot].ref;
	return pl_stack_new(ip + i, nr, truncated, key);
}

/* --- set-up ------------------------------------------------------------------------------ */

static int pl_self_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t me = (uintptr_t)arg, lo, hi;
	(void)size;

	pl_load_range(info, &lo, &hi);
	if (me < lo || me >= hi)
		return 0;
	ps.self_lo = lo;
	ps.self_hi = hi;
	return 1;
}

static int pl_stk_map(const char *path)
{
	struct mt_stk_hdr *h;
	uint64_t off, dsize;
	size_t size;
	void *m = pl_map_file(path, sizeof(*h), &size);

	if (!m)
		return -1;
	h = m;
	/* copied once: other processes write the area meanwhile */
	off = h->data_off;
	dsize = h->data_size;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (h->magic != MT_STK_MAGIC || h->version != MT_STK_VERSION ||
	    h->file_size != (uint64_t)size || h->max_frames != MT_STK_MAX_FRAMES || off > size ||
	    dsize > size - off || (off & 7)) {
		munmap(m, size);
		return -1;
	}
	ps.hdr = h;
	ps.data = (char *)m + off;
	ps.data_size = dsize;
	return 0;
}

static void *pl_anon(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* The unwinder, loaded with the thread's depth held: what dlopen allocates is not the
 * program's doing, and is not recorded. */
static void pl_load_unwinder(void)
{
	struct pl_thread *t = &pl_t;
	void *h, *as;
	int (*policy)(void *, int);

	if (PL_I386)
		return; /* untested there: its allocations have no stack (counted as failed) */
	t->depth++;
	h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	if (h) {
		ps.backtrace = (int (*)(void **, int))dlsym(h, "unw_backtrace");
		/* per-thread caches of the CFI: no lock on the hot path (UNW_CACHE_PER_THREAD) */
		policy = (int (*)(void *, int))dlsym(h, "_ULx86_64_set_caching_policy");
		as = dlsym(h, "_ULx86_64_local_addr_space");
		if (policy && as)
			policy(*(void **)as, 2);
	}
	t->depth--;
}

__attribute__((constructor)) static void pl_stack_ctor(void)
{
	const char *path = getenv(MT_STK_ENV);
	ssize_t n;

	if (!path || !*path || pl_mode() != PL_ON || pl_stk_map(path))
		return;
	ps.cache = pl_anon(CACHE_SLOTS * sizeof(*ps.cache));
	ps.mods = pl_anon(MAX_MODS * sizeof(*ps.mods));
	ps.names = pl_anon(NAMES_BYTES);
	if (!ps.cache || !ps.mods || !ps.names)
		return;
	n = readlink("/proc/self/exe", ps.exe, sizeof(ps.exe) - 1);
	ps.exe[n > 0 ? n : 0] = 0;
	dl_iterate_phdr(pl_self_cb, (void *)(uintptr_t)pl_stack_ctor);
	pl_load_unwinder();
	pthread_atfork(pl_stk_lock, pl_stk_unlock, pl_stk_unlock);
	/* without an unwinder every allocation counts as failed (hdr->failed) */
	__atomic_store_n(&pl_stacks_on, 1, __ATOMIC_RELEASE);
}
