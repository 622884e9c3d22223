/* SPDX-License-Identifier: MIT */
/*
 * The preload -> memtrack shared-memory ABI (the interposer, src/preload/, writes; the
 * consumer's shm source, src/track/shm_source.c, reads). memtrack creates one file per run
 * (mode 0600, owned by the user the command runs as) and names it in $MEMTRACK_PRELOAD_SHM;
 * every process of the tree that loads the interposer maps it. Records are struct mt_event
 * (src/bpf/events.h), the same fixed-width records the BPF programs write.
 *
 * Layout (offsets in the header):
 *   page 0             struct mt_shm_hdr
 *   procs_off          MT_SHM_MAX_PROCS x struct mt_shm_proc: which process the interposer
 *                      served, and how (the manifest's per-process mechanism)
 *   seen_off           seen_nr x struct mt_shm_seen: the files memtrack has inspected (a
 *                      dlopen of those only needs no stop, src/preload/preload_dl.c)
 *   kept_off           kept_nr x struct mt_shm_seen: the inert files earlier runs found
 *                      (src/track/inert_cache.h), copied from memtrack's cache at the start
 *   slots_off          nr_slots x struct mt_shm_slot (128 bytes: producer line, consumer line)
 *   data_off           nr_slots rings of slot_records records each (slot i at
 *                      data_off + i * slot_records * sizeof(struct mt_event))
 *
 * One slot is a single-producer single-consumer ring owned by one thread: the producer writes
 * a record at head % slot_records, then publishes head + 1 (release); the consumer copies
 * records from tail to head and publishes tail (release). A full ring makes the producer
 * wait (futex on the low 32 bits of `tail`, woken by the consumer when `waiting` is set):
 * back-pressure, never a silent drop. The consumer wakes a sleeping producer once half of
 * its ring is free, or at the end of a drain (not at every publication of tail: the two would
 * take turns at 256 records each). A record is written entirely (timestamp last but one, head
 * last), so the consumer never sees a partial one.
 *
 * The doorbell: memtrack polls the rings, and sleeps meanwhile. A producer whose ring is half
 * full adds one to `bell` and, when memtrack's bell thread sleeps on it (`bell_sleeping`),
 * wakes it (futex); that thread wakes the event loop, which drains. So a storm's rings are
 * drained as they fill, not at the next poll (10 ms later, with the producer asleep).
 *
 * Slot life: FREE -(thread's first event, CAS)-> OWNED -(thread exit)-> RELEASED; the
 * consumer returns RELEASED slots to FREE once drained, and OWNED slots of a process that
 * exited or exec'd (claimed before that Exit/Exec) as well: their threads are gone.
 */
#ifndef MEMTRACK_SHM_ABI_H
#define MEMTRACK_SHM_ABI_H

#include <stdint.h>
#include "bpf/events.h"

#define MT_SHM_ENV "MEMTRACK_PRELOAD_SHM"

/*
 * The handoff: a process of the tree that cannot open one of memtrack's shared files by its
 * path (another user's credentials: su, runuser, setpriv; a sandbox's own /dev/shm) asks
 * memtrack for it over a unix socket in the abstract namespace named "\0" + this prefix + the
 * rings' path ($MEMTRACK_PRELOAD_SHM). SOCK_SEQPACKET; the request is the path wanted (no
 * NUL); the answer one byte, 0 with the file's descriptor (SCM_RIGHTS, read-write), or an
 * errno value without. memtrack answers only processes of its tree (SO_PEERCRED's pid in the
 * BPF procs map) and only for its own files (src/track/handoff.c); abstract sockets belong to
 * a network namespace, so a process in another one cannot reach it (it is judged at its exec
 * and left to the uprobes). The interposer waits at most MT_HANDOFF_WAIT_MS for the answer.
 */
#define MT_HANDOFF_PREFIX  "memtrack-handoff:"
#define MT_HANDOFF_WAIT_MS 2000
#define MT_SHM_MAGIC 0x316b61727474656dull /* "mettrak1" little-endian */
#define MT_SHM_VERSION	   9
#define MT_SHM_MAX_PROCS 16384
/* entries of the seen-files table (a power of two; memtrack fills at most 3/4 of it) */
#define MT_SHM_SEEN_NR 4096
/* at most this many entries of the kept-files table (a power of two; the room is reserved,
 * tmpfs gives pages only to what is written) */
#define MT_SHM_KEPT_MAX 8192

enum mt_slot_state {
	MT_SLOT_FREE = 0,
	MT_SLOT_OWNED = 1, /* a live thread writes it */
	MT_SLOT_RELEASED = 2, /* its thread exited; records may remain */
};

/* Records the interposer could not write, by reason (header `drops`): each one is counted in
 * the manifest and makes the run incomplete. */
enum mt_shm_drop {
	MT_SHM_DROP_NO_SLOT = 0, /* every slot owned by a live thread (more threads than slots) */
	MT_SHM_DROP_CLOSED,	 /* memtrack stopped reading (it exited or was killed) */
	/* processes (served images, counted once each) that made a dlmopen namespace with a libc
	 * of its own: the interposer is not in it (glibc preloads nothing into a new namespace),
	 * so what is allocated there goes unrecorded (version 6) */
	MT_SHM_DROP_NAMESPACE,
	/* a signal handler's allocator calls made while the interrupted thread was writing a
	 * record (a few instructions of the interposer): not recorded (version 9) */
	MT_SHM_DROP_SIGNAL,
	MT_SHM_DROP_NR,
};

/* flags of struct mt_shm_proc */
#define MT_SHM_PROC_LIBC 1u /* the glibc malloc family was served by the interposer */
#define MT_SHM_PROC_CXX 2u /* operator new/delete too */
#define MT_SHM_PROC_OFF 4u /* interposer loaded but passing through (another allocator or the
			    * executable defines malloc): uprobes serve the process */
#define MT_SHM_PROC_ENDED 8u /* set by memtrack: the image exec'd another since (shm_source.c) */
/* A shared jemalloc, mimalloc or tcmalloc is the process's malloc, served by the interposer:
 * its own public entry points (mi_malloc, mallocx, tc_malloc, ...), the standard names (LIBC)
 * and operator new/delete (CXX) over it (src/preload/preload_families.c) */
#define MT_SHM_PROC_JEMALLOC 0x10u
#define MT_SHM_PROC_MIMALLOC 0x20u
#define MT_SHM_PROC_TCMALLOC 0x40u
#define MT_SHM_PROC_FAMILIES (MT_SHM_PROC_JEMALLOC | MT_SHM_PROC_MIMALLOC | MT_SHM_PROC_TCMALLOC)
/* the i386 interposer registered it (version 7): memtrack expects one such registration after
 * each 32-bit exec it prepared (src/track/abi32.h) */
#define MT_SHM_PROC_I386 0x80u

/* One image's registration, written before its first record. */
struct mt_shm_proc {
	mt_s32 pid; /* stored last (release): the entry is complete once it is nonzero */
	mt_u32 flags;
	mt_u64 ts; /* CLOCK_MONOTONIC: orders it against the process's Exec records */
};

struct mt_shm_hdr {
	mt_u64 magic;
	mt_u32 version;
	mt_u32 nr_slots;
	mt_u32 slot_records; /* power of two */
	mt_s32 consumer_pid; /* memtrack; producers stop waiting when it is gone */
	mt_u64 procs_off, slots_off, data_off, file_size;
	mt_u32 closed; /* set by memtrack when it stops reading: producers pass through */
	mt_u32 next_slot; /* 1 + the highest slot index ever claimed: the consumer scans below */
	mt_u32 nr_procs; /* entries of procs[] taken (may exceed MT_SHM_MAX_PROCS: not listed) */
	/* Set to 1 by memtrack once a call of the control points (preload_ctl.c, preload_dl.c)
	 * traps into its BPF side (futex woken); 0 while the link is still being made: the command
	 * runs meanwhile. A process then registers before it marks itself served (memtrack scans
	 * the registrations once the link is live), waits here before announcing a dlopen, and
	 * counts its refusal in `unserved` below instead of calling. */
	mt_u32 ctl_live;
	mt_u64 drops[MT_SHM_DROP_NR];
	/* TSC timestamps (src/preload/preload_clock.c): a TSC read and CLOCK_MONOTONIC taken
	 * together when memtrack created the file; 0 when the TSC cannot stand in for the clock
	 * (src/track/stamp_clock.h: the clocksource is neither tsc nor a TSC-stable kvm-clock,
	 * not x86-64, MEMTRACK_PRELOAD_TSC=0) */
	mt_u64 tsc_anchor, ns_anchor;
	/* the doorbell, on its own cache line (see above) */
	_Alignas(64) mt_u32 bell;
	mt_u32 bell_sleeping;
	/* processes that could not be served, told while ctl_live was 0 (drops.unserved) */
	mt_u32 unserved;
	mt_u32 pad;
	/* memtrack's pid namespace (the inode of its /proc/self/ns/pid; 0: unknown). A process in
	 * another one (the tree ran `unshare -p`) is not served: its getpid() is not the pid
	 * memtrack and the BPF side know it by (preload_ring.c, pl_other_pidns). */
	mt_u64 pidns_ino;
	/* Back-pressure (version 5): the times a producer slept on its full ring, and their
	 * total CLOCK_MONOTONIC ns (mechanisms.preload_waits, preload_wait_ms): the program
	 * waited for memtrack that long */
	mt_u64 waits, wait_ns;
	/* The seen-files table (version 8): where, and its entries (MT_SHM_SEEN_NR); and the
	 * dlopens the interposers judged by it, without a stop (mechanisms.dlopens_judged) */
	mt_u64 seen_off;
	mt_u32 seen_nr;
	mt_u32 dl_judged;
	/* The kept-files table: where, its entries (0: none), set before the command runs */
	mt_u64 kept_off;
	mt_u32 kept_nr;
	mt_u32 pad2;
};

/*
 * A file by what stat(2) says of it: device and inode, and size, modification and change
 * times (ns), so that a file rewritten since is another. In the seen table: a file memtrack
 * has inspected in this run, for which everything a dlopen stop would do is done (its allocator
 * sites attached or kept, its memtrack probes attached), whichever process mapped it first.
 * In the kept table: a file an earlier run found inert (no allocator entry point, no memtrack
 * probe), for which a stop has nothing to do. Filled by memtrack only, never emptied, and only
 * when no stop has more to do (not with --stacks, whose stops read the maps). Open addressing,
 * linear probing from mt_shm_seen_slot() (by device and inode: a file listed twice, changed in
 * between, takes two entries); an entry is free while its ino is 0: memtrack writes the other
 * fields, then ino (release); a reader loads ino (acquire) first.
 */
struct mt_shm_seen {
	mt_u64 dev;
	mt_u64 ino;
	mt_u64 size;
	mt_u64 mtime_ns;
	mt_u64 ctime_ns;
};

static inline mt_u32 mt_shm_seen_slot(mt_u64 dev, mt_u64 ino, mt_u32 nr)
{
	mt_u64 h = (ino ^ (dev << 32 | dev >> 32)) * 0x9e3779b97f4a7c15ull;

	return (mt_u32)(h >> 32) & (nr - 1);
}

/* Are a and b the same file, unchanged (every field)? */
static inline int mt_shm_seen_same(const struct mt_shm_seen *a, const struct mt_shm_seen *b)
{
	return a->ino == b->ino && a->dev == b->dev && a->size == b->size &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns;
}

/* Is f in table t (nr entries, a power of two)? At most nr probes: the table is written by
 * processes memtrack does not trust. */
static inline int mt_shm_seen_has(const struct mt_shm_seen *t, mt_u32 nr,
				  const struct mt_shm_seen *f)
{
	mt_u32 i = nr ? mt_shm_seen_slot(f->dev, f->ino, nr) : 0;

	for (mt_u32 k = 0; k < nr; k++, i = (i + 1) & (nr - 1)) {
		mt_u64 ino = __atomic_load_n(&t[i].ino, __ATOMIC_ACQUIRE);

		if (!ino)
			return 0;
		if (ino == f->ino && mt_shm_seen_same(&t[i], f))
			return 1;
	}
	return 0;
}

struct mt_shm_slot {
	/* producer's cache line */
	mt_u32 state; /* enum mt_slot_state */
	mt_s32 pid, tid;
	mt_u32 waiting; /* the producer sleeps on tail's low word */
	mt_u64 head; /* records published */
	mt_u64 claim_ns; /* CLOCK_MONOTONIC when the thread took the slot */
	uint8_t pad0[64 - 32];
	/* consumer's cache line */
	mt_u64 tail; /* records consumed; the futex word is its low half */
	uint8_t pad1[64 - 8];
};

_Static_assert(sizeof(struct mt_shm_slot) == 128, "two cache lines");
_Static_assert(sizeof(struct mt_event) == 48, "the record ABI");

#endif
