/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Maps and helpers shared by the BPF files. The maps are defined once, in process.bpf.c; the
 * other files see them through these extern declarations and `bpftool gen object` links them.
 */
#ifndef MEMTRACK_MAPS_BPF_H
#define MEMTRACK_MAPS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "bpf/events.h"
#include "bpf/proc.h" /* struct mt_proc, MT_MAX_PROCS: shared with user space */

/* Per-thread allocator call state: nesting depth and the outermost call's arguments. Kept in
 * task-local storage (the threads map): it belongs to the task_struct, not to a tid. */
struct mt_thread {
	__u32 depth;
	__u32 spec; /* cookie of the outermost call */
	__u64 a0, a1; /* its saved arguments (sizes, old address, memptr) */
	/* rmap mode (tracepoint backend) */
	__u64 fault_addr; /* page of this thread's last fault on a user address not yet matched
			   * to an increase (one fault, one increase), 0 when none */
	__u64 range_start; /* page where the address-space syscall in progress changes pages
			    * first, 0 when unknown */
	__u64 range_done; /* bytes changed so far inside that range (either sign) */
	__u32 in_sys; /* 1 while such a syscall runs: its changes are not faults */
	/* 1 while the outermost call is internal (alloc.bpf.c): a free it makes through its PLT
	 * is the next outermost one */
	__u32 internal;
};

/* Process-wide, tree-level figures kept exactly in the kernel. */
struct mt_global {
	__s64 tree_rss; /* bytes, sum over live tracked processes */
	__s64 tree_peak_rss;
};

/*
 * Hash maps are not preallocated: entries are added once per process, not per event (lookups
 * cost the same either way), and preallocation would be paid at every run's start-up.
 */
struct mt_procs_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_PROCS);
	__type(key, __u32); /* tgid */
	__type(value, struct mt_proc);
};
extern struct mt_procs_map procs SEC(".maps");

struct mt_mm_owner_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_PROCS);
	__type(key, __u64); /* mm_struct address */
	__type(value, __u32); /* owning tgid */
};
extern struct mt_mm_owner_map mm_owner SEC(".maps");

/*
 * Per-thread call state as task-local storage rather than a tid-keyed hash: creating the old
 * 65,536-entry hash cost 2.5-3.3 ms of every run's start-up (its bucket array), capped the tree
 * at that many live threads, and each thread exit paid a delete. Storage is created on a
 * thread's first tracked call, follows the task_struct (exec from a non-leader thread changes
 * the tid, not the task) and is freed with it. BPF_F_NO_PREALLOC is mandatory for this type.
 */
struct mt_threads_map {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mt_thread);
};
extern struct mt_threads_map threads SEC(".maps");

struct mt_events_map {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 24); /* resized by user space before load */
};
extern struct mt_events_map events SEC(".maps");

struct mt_drops_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MT_DROP_NR);
	__type(key, __u32);
	__type(value, __u64);
};
extern struct mt_drops_map drops SEC(".maps");

struct mt_global_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_global);
};
extern struct mt_global_map global SEC(".maps");

struct mt_pidns_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_pidns); /* proc.h */
};
extern struct mt_pidns_map pidns SEC(".maps");

/* Where pid p's number at namespace depth `level` is (p->numbers[level], a flexible array) */
static __always_inline struct upid *mt_upid(struct pid *p, __u32 level)
{
	return (struct upid *)((char *)p + bpf_core_field_offset(struct pid, numbers) +
			       (__u64)level * bpf_core_type_size(struct upid));
}

/* The number of pid p in memtrack's namespace (ns: level and inode), 0 when it has none there:
 * a task of another namespace at the same depth has its own namespace at that level. */
static __always_inline __u32 mt_pid_nr(struct pid *p, const struct mt_pidns *ns)
{
	struct pid_namespace *pns;
	struct upid *u;

	if (!p || BPF_CORE_READ(p, level) < ns->level)
		return 0;
	u = mt_upid(p, ns->level);
	pns = BPF_CORE_READ(u, ns);
	if (!pns || BPF_CORE_READ(pns, ns.inum) != ns->ino)
		return 0;
	return (__u32)BPF_CORE_READ(u, nr);
}

/* tgid << 32 | pid of task as memtrack's namespace numbers it (struct mt_pidns) */
static __always_inline __u64 mt_task_ids(struct task_struct *task)
{
	__u32 zero = 0;
	const struct mt_pidns *ns = bpf_map_lookup_elem(&pidns, &zero);

	if (!ns || !ns->ino)
		return (__u64)BPF_CORE_READ(task, tgid) << 32 | (__u32)BPF_CORE_READ(task, pid);
	return (__u64)mt_pid_nr(BPF_CORE_READ(task, group_leader, thread_pid), ns) << 32 |
	       mt_pid_nr(BPF_CORE_READ(task, thread_pid), ns);
}

/* bpf_get_current_pid_tgid() in memtrack's namespace: the helper itself in the initial one */
static __always_inline __u64 mt_current_ids(void)
{
	__u32 zero = 0;
	const struct mt_pidns *ns = bpf_map_lookup_elem(&pidns, &zero);

	if (!ns || !ns->ino)
		return bpf_get_current_pid_tgid();
	return mt_task_ids((struct task_struct *)bpf_get_current_task());
}

/*
 * Whether the programs may stop a tracked task (exec of a new executable, return of dlopen):
 * entry 0 is 1 while a consumer answers the stops. tracker_run.c sets it after the load,
 * tracker_finish.c clears it before its last drain; the watchdog (src/track/watchdog.c) clears
 * it when memtrack is gone, SIGKILL included, then resumes every stop whose record is still in
 * the ring.
 */
struct mt_stop_ctl_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	/* [1]: stop at every exec, known executables too (process.bpf.c); [2]: auto mode, 1 + the
	 * uid owning the interposer's shared memory (0: not checked, mt_shm_denied); [3]: 1 + the
	 * root's seccomp filter (a kernel address, 0 without), taken at the tree's first exec
	 * (the root's; user space resets it to 0 before); [4]: auto mode, 1 + the inode of
	 * memtrack's mount namespace (0: not checked, mt_other_mntns); [5]: 1 + the inode of the
	 * network namespace whose processes can ask memtrack for the shared memory (0: none,
	 * mt_shm_denied; src/track/handoff.h); [6]: 1 while glibc's uprobes are in (auto mode,
	 * src/track/tracker_glibc.c): a process that needs them execs a known executable
	 * unstopped, keeping its need (mt_proc.glibc_need) unjudged; [7]: 1 while an exec may be
	 * judged the interposer's without a stop (auto mode, exec_judge.bpf.c); [8], [9], [10]:
	 * the root's environment there (enum mt_env_var, proc.h); [11]: 1 + the root's file
	 * system root (a struct dentry address), taken at the tree's first exec like [3]; [12]:
	 * the execs judged so (mechanisms.execs_judged); [13]: the generation of glibc's links
	 * now in (auto mode; probe_spec.h, MT_COOKIE_GEN); [14]: the forks of processes that
	 * need them (mt_on_fork), counted after each is added to procs, which user space reads
	 * around its walk of the tree (tracker_glibc.c: a child added during the walk may be
	 * missed by it); [15], [16]: the forks of the tree, counted before and after each is added
	 * to procs (tracker__tree_alive); [17]: [14]'s count before */
	__uint(max_entries, 18);
	__type(key, __u32);
	__type(value, __u64); /* 64 bits: the only width of atomic fetch-add before -mcpu=v3 */
};
extern struct mt_stop_ctl_map stop_ctl SEC(".maps");

/* Executables user space has inspected: key = mt_exe_key (proc.h), value MT_EXE_* bits. */
struct mt_known_exe_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
};
extern struct mt_known_exe_map known_exe SEC(".maps");

/* struct inode's change time across kernels: i_ctime_sec and i_ctime_nsec since 6.11 (since
 * 6.13 the nanoseconds' top bits may hold the "queried" flag of multigrain timestamps),
 * __i_ctime in 6.6-6.10, i_ctime before. */
struct inode___ctime_split {
	time64_t i_ctime_sec;
	u32 i_ctime_nsec;
} __attribute__((preserve_access_index));
struct inode___ctime_hidden {
	struct timespec64 __i_ctime;
} __attribute__((preserve_access_index));
struct inode___ctime_ts {
	struct timespec64 i_ctime;
} __attribute__((preserve_access_index));

/* One reader per layout, not inlined and called only where bpf_core_field_exists() says its
 * layout is this kernel's: the others' relocations fail, libbpf poisons their instructions,
 * and the verifier accepts those only where it can prove them unreachable (inlined, clang may
 * hoist a field offset above the test: rss.bpf.h, mt_rss_read_old). */
static __noinline __u64 mt_ctime_split(struct inode *ino)
{
	struct inode___ctime_split *i = (void *)ino;

	return (__u64)BPF_CORE_READ(i, i_ctime_sec) * 1000000000ull +
	       (BPF_CORE_READ(i, i_ctime_nsec) & MT_CTIME_NSEC_MASK);
}

static __noinline __u64 mt_ctime_hidden(struct inode *ino)
{
	struct inode___ctime_hidden *i = (void *)ino;

	return (__u64)BPF_CORE_READ(i, __i_ctime.tv_sec) * 1000000000ull +
	       (__u64)BPF_CORE_READ(i, __i_ctime.tv_nsec);
}

static __noinline __u64 mt_ctime_ts(struct inode *ino)
{
	struct inode___ctime_ts *i = (void *)ino;

	return (__u64)BPF_CORE_READ(i, i_ctime.tv_sec) * 1000000000ull +
	       (__u64)BPF_CORE_READ(i, i_ctime.tv_nsec);
}

/* The inode's change time, ns since the epoch, as stat(2) shows it (st_ctim). */
static __always_inline __u64 mt_inode_ctime_ns(struct inode *ino)
{
	if (bpf_core_field_exists(struct inode___ctime_split, i_ctime_sec))
		return mt_ctime_split(ino);
	if (bpf_core_field_exists(struct inode___ctime_hidden, __i_ctime))
		return mt_ctime_hidden(ino);
	return mt_ctime_ts(ino);
}

/* The known_exe key (mt_exe_key) of the executable an exec runs (its struct linux_binprm). */
static __always_inline __u64 mt_bprm_exe_key(__u64 bprm)
{
	struct inode *ino = BPF_CORE_READ((struct linux_binprm *)bprm, file, f_inode);

	return mt_exe_key(BPF_CORE_READ(ino, i_sb, s_dev), BPF_CORE_READ(ino, i_ino),
			  mt_inode_ctime_ns(ino), (__u64)BPF_CORE_READ(ino, i_size));
}

/* 1 when the current task's exec (bprm) may go on unstopped in auto mode: exec_judge.bpf.c. */
int mt_exec_served(__u64 bprm, __u64 env_mix);
/* exec_judge.bpf.c: the current task's LD_PRELOAD and LD_LIBRARY_PATH, mixed (proc.h) */
__u64 mt_exec_env_mix(void);

static __always_inline bool mt_stop_all(void)
{
	__u32 key = 1;
	__u64 *all = bpf_map_lookup_elem(&stop_ctl, &key);

	return all && *all;
}

/* stop_ctl[key] += 1 */
static __always_inline void mt_ctl_add(__u32 key)
{
	__u64 *n = bpf_map_lookup_elem(&stop_ctl, &key);

	if (n)
		__sync_fetch_and_add(n, 1);
}

/* stop_ctl[6] (above) */
static __always_inline bool mt_glibc_in(void)
{
	__u32 key = 6;
	__u64 *in = bpf_map_lookup_elem(&stop_ctl, &key);

	return in && *in;
}

static __always_inline __u64 mt_seccomp_filter(struct task_struct *task)
{
	return (__u64)BPF_CORE_READ(task, seccomp.filter);
}

/* Records the root's seccomp filter at the tree's first exec (stop_ctl[3]); a filter of its own
 * below that one (man-db's sandbox) may refuse the interposer its shared memory. And its file
 * system root (stop_ctl[11]): a chroot'ed process may not see the interposer's file. */
static __always_inline void mt_note_root(void)
{
	__u32 key = 3;
	__u64 *ref = bpf_map_lookup_elem(&stop_ctl, &key);

	if (ref && !*ref)
		*ref = mt_seccomp_filter((struct task_struct *)bpf_get_current_task()) + 1;
	key = 11; /* and its file system root (mt_exec_served) */
	ref = bpf_map_lookup_elem(&stop_ctl, &key);
	if (ref && !*ref)
		*ref = (__u64)BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), fs,
					    root.dentry) +
		       1;
}

/* Is task in memtrack's pid namespace? The interposer serves no other (src/preload/preload_ring.c),
 * nor believes a handoff there: memtrack's pid is not seen from it (preload_handoff.c). */
static __always_inline bool mt_in_our_pidns(struct task_struct *task)
{
	__u32 zero = 0;
	const struct mt_pidns *ns = bpf_map_lookup_elem(&pidns, &zero);
	struct pid *p = BPF_CORE_READ(task, thread_pid);
	__u32 level = BPF_CORE_READ(p, level);

	if (!ns || !ns->ino)
		return level == 0;
	return level == ns->level && mt_pid_nr(p, ns) != 0;
}

/*
 * Auto mode: can the current task not open the interposer's shared memory? A seccomp filter
 * the root did not have may refuse it (what it allows is not known here). Or its credentials
 * cannot (mode 0600, owned by the uid in stop_ctl[2]): its fsuid is another user's and it lacks
 * CAP_DAC_OVERRIDE in the initial user namespace (what the kernel checks against the file; in
 * another user namespace it is judged denied: at worst the interposer opens the file anyway,
 * registers, and its registration makes the uprobes skip it), and it cannot ask memtrack for
 * the file either: memtrack's handoff socket is not in its network namespace (stop_ctl[5]), or
 * memtrack is not in its pid namespace (mt_in_our_pidns).
 * kernel_cap_t is 64 bits on every kernel (u32 cap[2] before 6.3, u64 val since): bit 1 is
 * CAP_DAC_OVERRIDE in both.
 */
static __always_inline bool mt_shm_denied(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u32 key = 2, rkey = 3, nkey = 5;
	__u64 *owner = bpf_map_lookup_elem(&stop_ctl, &key), caps = 0;
	__u64 *ref = bpf_map_lookup_elem(&stop_ctl, &rkey);
	__u64 *net = bpf_map_lookup_elem(&stop_ctl, &nkey);
	const struct cred *c;

	if (!owner || !*owner)
		return false;
	if (ref && *ref && mt_seccomp_filter(task) + 1 != *ref)
		return true;
	c = BPF_CORE_READ(task, cred);
	if (BPF_CORE_READ(c, fsuid.val) == (__u32)(*owner - 1))
		return false;
	/* the interposer asks memtrack for the file (src/preload/preload_handoff.c) */
	if (net && *net && (__u64)BPF_CORE_READ(task, nsproxy, net_ns, ns.inum) + 1 == *net &&
	    mt_in_our_pidns(task))
		return false;
	bpf_core_read(&caps, sizeof(caps), &c->cap_effective);
	return !(caps & 1 << 1 /* CAP_DAC_OVERRIDE */) || BPF_CORE_READ(c, user_ns, level) != 0;
}

/*
 * Auto mode: is the current task in a mount namespace other than memtrack's? Its /dev/shm may
 * not hold the interposer's shared memory (another tmpfs there: a sandbox, a container), or may
 * (`unshare -m` alone): its exec stops and user space looks (MT_EXEC_OTHER_MNTNS).
 */
static __always_inline bool mt_other_mntns(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u32 key = 4;
	__u64 *ns = bpf_map_lookup_elem(&stop_ctl, &key);

	return ns && *ns && (__u64)BPF_CORE_READ(task, nsproxy, mnt_ns, ns.inum) + 1 != *ns;
}

static __always_inline void mt_drop(__u32 reason)
{
	__u64 *n = bpf_map_lookup_elem(&drops, &reason);

	if (n)
		*n += 1; /* per-CPU slot: no atomic needed */
}

/* The current thread's call state, NULL when it has none (yet). Non-NULL only for threads
 * that made a tracked call: user space never creates or reads these entries. */
static __always_inline struct mt_thread *mt_thread_get(void)
{
	return bpf_task_storage_get(&threads, bpf_get_current_task_btf(), NULL, 0);
}

/* The current thread's call state, created zeroed when missing. NULL (counted) when it cannot
 * be: out of memory, or the storage busy (tracing programs on 6.2+, every program on <= 6.1,
 * when a task-storage call on this CPU is interrupted by another). */
static __always_inline struct mt_thread *mt_thread_create(void)
{
	struct mt_thread *t = bpf_task_storage_get(&threads, bpf_get_current_task_btf(), NULL,
						   BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!t)
		mt_drop(MT_DROP_THREAD_MAP);
	return t;
}

/* Wake the consumer only when enough data is pending; it also polls on a short timer.
 * User space sets this below the ring's size (tracker_load.c): a threshold the ring can never
 * hold (256 KiB in a 256 KiB ring) would leave only the timer, and a storm filling the ring
 * faster than that lost records. */
extern const volatile __u64 mt_wakeup_bytes;

static __always_inline void mt_submit(struct mt_event *e, bool urgent)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (urgent || bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= mt_wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(e, flags);
}

static __always_inline struct mt_event *mt_reserve(__u32 type, __u32 pid, __u32 tid)
{
	struct mt_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		mt_drop(MT_DROP_RINGBUF);
		return NULL;
	}
	e->type = type;
	e->pid = pid;
	e->tid = tid;
	e->aux = 0;
	e->ts = bpf_ktime_get_ns();
	e->addr = 0;
	e->size = 0;
	e->old_addr = 0;
	return e;
}

#define MT_SIGCHLD      17 /* x86-64's numbers; vmlinux.h has no macros */
#define MT_SA_NOCLDSTOP 1
#define MT_WNOHANG	1
#define MT_WUNTRACED	2
#define MT_STOP_CHAIN	4 /* parents looked at, the stop passed on from one to the next */

/*
 * The flags of a blocking wait for a child (wait4 or waitid without WNOHANG) a thread of par
 * sleeps in, or -1: do_wait queues a wait_opts, whose child_wait entry is on the group's
 * wait_chldexit, for the whole call. The list is read without its lock: an entry leaving
 * meanwhile reads as another's flags at worst, and the first four are enough (one waiting
 * thread is the rule). -1 on a kernel whose BTF lacks wait_opts.
 */
static __always_inline int mt_task_wait(struct task_struct *par)
{
	struct signal_struct *sig = BPF_CORE_READ(par, signal);
	struct list_head *head, *pos;

	if (!bpf_core_type_exists(struct wait_opts) || !sig)
		return -1;
	head = __builtin_preserve_access_index(&sig->wait_chldexit.head);
	pos = BPF_CORE_READ(head, next);
	for (int i = 0; i < 4 && pos && pos != head; i++) {
		struct wait_queue_entry *we =
		    (void *)((char *)pos - bpf_core_field_offset(struct wait_queue_entry, entry));
		struct wait_opts *wo =
		    (void *)((char *)we - bpf_core_field_offset(struct wait_opts, child_wait));
		int flags = BPF_CORE_READ(wo, wo_flags);

		if (!(flags & MT_WNOHANG))
			return flags;
		pos = BPF_CORE_READ(pos, next);
	}
	return -1;
}

/*
 * Whether a stop of the current task would reach a parent of the tree that takes SIGCHLD from
 * a queue: blocked, with the default action and without SA_NOCLDSTOP (a signalfd or
 * sigwaitinfo, as script(1) does), and not asleep in a wait. Our stop would queue a
 * CLD_STOPPED there and our SIGCONT a CLD_CONTINUED, and a standard signal already pending
 * absorbs the next one: a child that exits before its parent reads the queue loses its
 * CLD_EXITED, and script, which reaps on that code alone, waited for ever. Such a task is not
 * stopped (MT_CTL_NOT_STOPPED_PARENT).
 * A parent asleep in a blocking wait reaps with wait, whatever its mask (su and runuser block
 * every signal, then waitpid). With WUNTRACED it may pass the stop on, stopping itself (su,
 * runuser, sudo), which its own parent sees in turn: looked at the same way, up to
 * MT_STOP_CHAIN parents (`script -qc "su - user -c prog"`: script would take su's stop from
 * its queue). A parent not yet in its wait when its child execs is judged by its mask alone.
 * memtrack itself (the root's parent) takes SIGCHLD from a signalfd too, but reaps at every
 * notice: it ends the walk, as any task outside the tree. A global function (process.bpf.c):
 * verified once, not at each caller (~1.4 ms of a cold load).
 */
int mt_stop_reaches_queue(void); /* process.bpf.c */

/*
 * Stops the current thread group (SIGSTOP, taken on the way back to user space) and submits its
 * control record e, or discards e when stops are not allowed. The record is reserved before the
 * flag is read, with a full barrier between (an atomic read-modify-write): a watchdog that
 * clears the flag, then reads the ring's producer position, either makes this program see 0 or
 * sees this record (busy until it is submitted), so no stop is ever sent that nobody resumes.
 */
static __always_inline void mt_stop_submit(struct mt_event *e)
{
	__u32 key = 0;
	__u64 *on = bpf_map_lookup_elem(&stop_ctl, &key), nothing = 0;

	/* an opaque 0: the compiler would turn the fetch-add of a constant 0 into an atomic or,
	 * which needs -mcpu=v3 */
	asm volatile("" : "+r"(nothing));
	if (!on || !__sync_fetch_and_add(on, nothing)) {
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
		return;
	}
	if (BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), ptrace)) {
		e->aux = MT_CTL_NOT_STOPPED; /* traced: see MT_CTL_NOT_STOPPED */
		mt_submit(e, true);
		return;
	}
	if (mt_stop_reaches_queue()) {
		e->aux = MT_CTL_NOT_STOPPED_PARENT;
		mt_submit(e, true);
		return;
	}
	bpf_send_signal(19 /* SIGSTOP */);
	mt_submit(e, true);
}

static __always_inline int mt_emit(__u32 type, __u32 pid, __u32 tid, __u64 addr, __u64 size,
				   __u64 old_addr)
{
	struct mt_event *e = mt_reserve(type, pid, tid);

	if (!e)
		return -1;
	e->addr = addr;
	e->size = size;
	e->old_addr = old_addr;
	mt_submit(e, false);
	return 0;
}

#endif
