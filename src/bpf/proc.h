/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Map layouts and keys that both sides use: the procs map's value (user space registers the
 * root process, reads nothing else) and the known_exe map's key. Included
 * after events.h's types: vmlinux.h on the BPF side, <stdint.h> in user space.
 */
#ifndef MEMTRACK_PROC_H
#define MEMTRACK_PROC_H

#include "bpf/events.h"

/* Entries of the per-process maps (procs, mm_owner, rss_shadow); user space creates them
 * ahead of the load with this size (src/track/map_prep.c). */
#define MT_MAX_PROCS 16384

/*
 * memtrack's pid namespace, the pidns map's one entry (set by user space, src/track/pidns.c,
 * before the root is registered). ino 0: the initial namespace, where the programs take the
 * kernel's ids as they are. Otherwise every id the programs record or look up is the task's
 * pid number at `level`, checked to be namespace `ino`'s: the numbers memtrack, /proc, the
 * command and the interposer's getpid() see. A task with no number there (outside memtrack's
 * namespace) gets 0, a tgid never tracked.
 */
struct mt_pidns {
	mt_u64 ino;   /* inode of memtrack's /proc/self/ns/pid */
	mt_u32 level; /* its depth: 0 for the initial namespace */
	mt_u32 pad;
};

/* mt_proc.served: the interposer serves the glibc family, and (bits 4-6, the interposer's
 * MT_SHM_PROC_JEMALLOC/MIMALLOC/TCMALLOC flags: the same bits) a shared jemalloc, mimalloc or
 * tcmalloc as the process's malloc; MT_SERVED_FAM_BIT of a site's MT_SPEC_FAM (1-3). */
#define MT_SERVED_LIBC	       1u
#define MT_SERVED_FAMILIES     0x70u
#define MT_SERVED_FAM_BIT(fam) (0x8u << (fam))

/* One tracked thread group, the procs map's value (key: tgid). Written by process.bpf.c
 * (fork/exec/exit), rss.bpf.c and served.bpf.c; user space registers the root with
 * everything zero but no_stop. */
struct mt_proc {
	mt_u64 mm; /* the mm_struct this process owns now; RSS of another mm is never ours */
	mt_s64 rss[MT_RSS_NR]; /* bytes, last exact value per member */
	mt_s64 emitted[MT_RSS_NR]; /* bytes, last value written to the ring */
	mt_s64 top[MT_RSS_NR]; /* bytes, highest value since the last emission (peak keeping) */
	mt_u64 top_ts[MT_RSS_NR];
	mt_u64 peak_rss; /* bytes, max of file + anon + shmem */
	mt_s32 ppid;
	mt_u32 execs;
	mt_u64 lock; /* 1 while a program changes rss[] and writes its records (mt_proc_lock);
		      * 64 bits: clang 14 makes 32-bit atomics only with -mcpu=v3 */
	/* Nonzero while the preload interposer serves this image's glibc and C++ allocator calls:
	 * set by its registration (served.bpf.c) before its first call reaches glibc's malloc,
	 * inherited at fork, cleared at exec. The uprobes on glibc and libstdc++ (MT_SPEC_PL)
	 * then write nothing for it: no call is counted by both mechanisms. MT_SERVED_LIBC, and
	 * the family whose shared library is its malloc, served too (MT_SERVED_FAM_BIT): that
	 * library's sites skip it, not those of another family library it calls. */
	mt_u32 served;
	/* 1: this image's credentials cannot open the interposer's shared memory (another user:
	 * `runuser -u nobody`, su; mt_shm_denied in maps.bpf.h), or its mount namespace has
	 * another /dev/shm (set by user space at the exec stop, mt_mark_proc): its exec stopped
	 * and user space attached glibc's uprobes, which record it, so its interposer's refusal is
	 * no drop. Set at exec, inherited at fork. */
	mt_u32 shm_denied;
	/* 1: the next exec of a known executable does not stop even when every exec stops
	 * (stop_ctl[1]): the root's, judged by user space before it ran. Cleared at exec. */
	mt_u32 no_stop;
	/* Auto mode: 1 while this process needs glibc's and libstdc++'s uprobes (judged so at its
	 * exec stop, or the root before it ran; mt_mark_proc MT_MARK_GLIBC). Inherited at fork,
	 * kept through exec until user space judges the new image (MT_MARK_GLIBC_OFF): memtrack
	 * takes those uprobes out once no process of the tree has it (tracker_glibc.c). */
	mt_u32 glibc_need;
	/* CLOCK_MONOTONIC ns when this image began (its exec, or its fork: a fork child runs a
	 * copy); 0 for the root until its exec. A registration the interposer wrote before the
	 * control link was live is this image's only if stamped later (mt_mark_proc). */
	mt_u64 image_ts;
	/* --stacks: nonzero once this image asked user space to read its maps (at its first
	 * allocation with a stack, alloc.bpf.c). Cleared at exec; a fork child inherits it with
	 * the parent's maps, which user space copies. 64 bits: atomic fetch-add. */
	mt_u64 maps_stop;
	/* The fast read of the rss counters since 6.2 (src/bpf/rss.bpf.h, mt_rss_read_fast),
	 * under lock: per member, the counter's shared count (pages) as last seen and the
	 * counter's value (pages, not clamped at 0) as rss_count + the sum of the process's
	 * per-CPU shadows; bit m of rss_synced: member m's shadows were set by a walk since the
	 * mm was taken. rss_resync: 1 when a hit gave up on the lock (the next walks re-sync);
	 * 64 bits: set with an exchange, outside the lock. rss_inflight: rss_stat hits of this
	 * process between their start and their end (atomic adds, outside the lock): the fast
	 * read is taken only by a hit that is alone in flight. */
	mt_s64 rss_count[MT_RSS_NR];
	mt_s64 rss_sum[MT_RSS_NR];
	mt_u64 rss_counters[MT_RSS_NR]; /* each counter's __percpu pointer, as the walk read it */
	mt_u64 rss_resync;
	mt_u64 rss_inflight;
	mt_u32 rss_synced;
	mt_u32 rss_pad;
	/* Fentry rmap backend: per member, the sum (pages) of the Rmap records written for this
	 * process so far (atomic adds: the rmap functions run outside the lock). The exit's
	 * close-out takes it back to 0: the records of a teardown lead the counter, which the
	 * kernel moves once per page table (see mt_rss_set). */
	mt_s64 rmap_sum[MT_RSS_NR];
};

/* The nanoseconds of an inode's change time: below 10^9, so 30 bits; since 6.13 the kernel
 * keeps a flag in the top bit of i_ctime_nsec (multigrain timestamps) */
#define MT_CTIME_NSEC_MASK ((1u << 30) - 1)

/*
 * The known_exe map's key of an executable: its file system's dev_t as the kernel encodes it
 * (s_dev: 12-bit major, 20-bit minor) above, the inode number xor'ed in, and its change time
 * (ns since the epoch) mixed in: a file rewritten in place, or a new file given the inode
 * number of a deleted one (ext4 reuses them at once), is another executable, with a verdict
 * of its own (until 7 December 2026 it took the old file's: its calls went unrecorded). Its
 * size too: without multigrain timestamps (before 6.13) a change time has the resolution of
 * a clock tick, and a rewrite within the same tick keeps it. The BPF side computes it at
 * exec from the inode; user space from stat(), with mt_kernel_dev.
 */
static inline mt_u64 mt_exe_key(mt_u32 s_dev, mt_u64 ino, mt_u64 ctime_ns, mt_u64 size)
{
	return (((mt_u64)s_dev << 32) ^ ino) ^
	       ((ctime_ns + size * 0xff51afd7ed558ccdull) * 0x9e3779b97f4a7c15ull);
}

/*
 * What an exec's loader maps depends on the file and on its environment: LD_PRELOAD adds
 * objects (`LD_PRELOAD=libjemalloc.so.2 prog`: another allocator), LD_LIBRARY_PATH finds others.
 * So known_exe's key is the file's (mt_exe_key) with those two variables' values mixed in:
 * pre and lib as mt_env_value gives them (0: unset). Until 7 December 2026 it was the file's
 * alone, and an executable known from one exec went unstopped at the next with another
 * allocator preloaded, whose calls went unrecorded. MT_ENV_MIX_UNKNOWN: the environment could
 * not be read (larger than MT_ENV_MAX, or a variable set twice): never marked, it stops.
 */
#define MT_ENV_MIX_UNKNOWN 0xffffffffffffffffULL

static inline mt_u64 mt_env_mix(mt_u64 pre, mt_u64 lib)
{
	mt_u64 m = (pre * 0xbf58476d1ce4e5b9ULL) ^ (lib * 0x94d049bb133111ebULL);

	/* never 0 (the BPF side's "not walked") nor MT_ENV_MIX_UNKNOWN */
	return m == 0 || m == MT_ENV_MIX_UNKNOWN ? 1 : m;
}

static inline mt_u64 mt_known_key(mt_u64 exe_key, mt_u64 env_mix)
{
	return exe_key ^ (env_mix + 0x9e3779b97f4a7c15ULL);
}

/* The known_exe map's value: bits. */
#define MT_EXE_KNOWN 1 /* inspected: what it maps is attached where needed */
/* auto mode: judged the interposer's (no uprobe needed) in an environment whose LD_PRELOAD,
 * MEMTRACK_PRELOAD_SHM and LD_LIBRARY_PATH were the root's: an exec of it in such an
 * environment is judged without a stop (src/bpf/exec_judge.bpf.c) */
#define MT_EXE_SERVED 2

/*
 * The environment the BPF side judges an exec by (exec_judge.bpf.c) and user space sets
 * (stop_ctl[8..10], src/track/preload_setup.c): per variable, 0 when it is absent, else the
 * FNV-1a hash of its value (1 if that is 0). A variable set twice is never judged so.
 */
enum mt_env_var {
	MT_ENV_LD_PRELOAD = 0,
	MT_ENV_SHM = 1, /* MEMTRACK_PRELOAD_SHM (shm_abi.h's MT_SHM_ENV) */
	MT_ENV_LD_LIBRARY_PATH = 2,
	MT_ENV_NR,
};
/* bytes of environment the BPF side reads (a larger one stops): a per-CPU value is at most 32
 * KiB, with the walk's state and 64 bytes of slack (exec_judge.bpf.c) */
#define MT_ENV_MAX   (32768 - 128)
#define MT_FNV_INIT  0xcbf29ce484222325ULL
#define MT_FNV_PRIME 0x100000001b3ULL

/* stop_ctl's entry for a variable whose value is v (NULL: absent): what exec_judge.bpf.c
 * computes from the environment, byte by byte. */
static inline mt_u64 mt_env_value(const char *v)
{
	mt_u64 h = MT_FNV_INIT;

	if (!v)
		return 0;
	for (; *v; v++)
		h = (h ^ (unsigned char)*v) * MT_FNV_PRIME;
	return h ? h : 1;
}

/* The kernel's internal dev_t (MKDEV) of a major and minor number, as user space sees them. */
static inline mt_u32 mt_kernel_dev(mt_u32 major, mt_u32 minor)
{
	return major << 20 | minor;
}

/* The cookie of each of the interposer's control points (src/bpf/served.bpf.c). */
enum mt_preload_ctl {
	MT_PRELOAD_CTL_SERVED = 0, /* __memtrack_preload_served: mark the process served */
	MT_PRELOAD_CTL_DLOPEN = 1, /* __memtrack_preload_dlopen: objects were added, stop */
	/* __memtrack_preload_unserved: loaded in a tracked process, cannot record there: counted
	 * (drops.unserved, the run incomplete), never a silent loss */
	MT_PRELOAD_CTL_UNSERVED = 2,
	MT_PRELOAD_CTL_NR,
};
/* A symbol only memtrack's interposer defines (any build of it: a nested memtrack's too): how
 * the tracker tells it from an allocator library (alloc_table__classify) */
#define MT_PRELOAD_MARK "__memtrack_preload_served"

/* What memtrack marks in a process with mt_mark_proc (src/bpf/served.bpf.c): its third arg. */
enum mt_mark {
	MT_MARK_SERVED = 0,	/* a registration the control link did not see: mt_proc.served */
	MT_MARK_SHM_DENIED = 1, /* its /dev/shm lacks the shared memory: mt_proc.shm_denied */
	MT_MARK_GLIBC = 2,	/* it needs glibc's uprobes: mt_proc.glibc_need */
	MT_MARK_GLIBC_OFF = 3,	/* its new image does not: mt_proc.glibc_need cleared */
};
/* MT_MARK_SERVED with the families the registration says the interposer serves as malloc */
#define MT_MARK_SERVED_AS(fam) (MT_MARK_SERVED | ((fam)&MT_SERVED_FAMILIES) << 8)

#endif
