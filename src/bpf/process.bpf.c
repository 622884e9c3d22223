// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The tracked process tree: fork adds children of tracked processes, exec re-bases them, the
 * exit of a whole thread group removes them. Raw tracepoints: no tracefs needed, ~0.3 ms detach.
 * This file also owns the definitions of every shared map (see maps.bpf.h).
 */
#include "bpf/maps.bpf.h"
#include "bpf/rss.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile __u32 mt_abi_version = MT_ABI_VERSION;
const volatile __u32 mt_nr_cpus = 1;
const volatile __u32 mt_page_shift = 12;
const volatile __s64 mt_rss_step = 64 * 1024;
const volatile __u32 mt_rmap = MT_RMAP_OFF;
const volatile __u64 mt_wakeup_bytes = 256 * 1024; /* see mt_submit */
/* Stop a tracked task at exec of a binary user space has not inspected yet, so the consumer can
 * attach to the libraries it will load before any of its code runs. */
const volatile bool mt_stop_on_exec = true;

struct mt_procs_map procs SEC(".maps");

struct mt_mm_owner_map mm_owner SEC(".maps");

struct mt_threads_map threads SEC(".maps");

struct mt_events_map events SEC(".maps");

struct mt_drops_map drops SEC(".maps");

struct mt_global_map global SEC(".maps");

struct mt_stop_ctl_map stop_ctl SEC(".maps");

struct mt_pidns_map pidns SEC(".maps");

/*
 * Run once by user space through BPF_PROG_TEST_RUN, in memtrack's own context, when memtrack
 * is not in the initial pid namespace (src/track/pidns.c): writes its namespace's depth and
 * inode, read through the same fields as mt_pid_nr, into pidns[0]. User space checks the
 * inode against its /proc/self/ns/pid and then sets the entry the programs use.
 */
SEC("raw_tp")
int mt_pidns_probe(void *ctx)
{
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
	struct pid *p = BPF_CORE_READ(cur, thread_pid);
	struct pid_namespace *pns;
	struct mt_pidns *ns;
	struct upid *u;
	__u32 zero = 0;

	ns = bpf_map_lookup_elem(&pidns, &zero);
	if (!ns || !p)
		return 0;
	/* the active namespace: the one of the task's own level */
	ns->level = BPF_CORE_READ(p, level);
	u = mt_upid(p, ns->level);
	pns = BPF_CORE_READ(u, ns);
	ns->ino = pns ? BPF_CORE_READ(pns, ns.inum) : 0;
	ns->pad = (__u32)BPF_CORE_READ(u, nr); /* memtrack's pid there, checked by user space */
	return 0;
}

struct mt_pcpu_map pcpu_probe SEC(".maps");

struct mt_rss_shadow_map rss_shadow SEC(".maps");

struct mt_known_exe_map known_exe SEC(".maps");

static __always_inline void mt_own_mm(__u64 mm, __u32 tgid)
{
	if (mm)
		bpf_map_update_elem(&mm_owner, &mm, &tgid, BPF_ANY);
}

static __always_inline void mt_disown_mm(__u64 mm, __u32 tgid)
{
	__u32 *owner = bpf_map_lookup_elem(&mm_owner, &mm);

	if (owner && *owner == tgid)
		bpf_map_delete_elem(&mm_owner, &mm);
}

/*
 * The end of fork, exec and exit, and of every rss_stat update, in a program of its own that
 * they tail-call: re-base every counter of the process, or update the one rss_stat names
 * (rss.bpf.h), then release its lock; exit also writes the Exit and forgets the process. The
 * verifier checks the counters' read and write once (~1,100 instructions), where inlined in
 * the four it was checked four times. Per-CPU request (rss.bpf.h): tracepoint programs run
 * with preemption disabled, never in interrupt context, and the tail call follows the
 * request's writing at once.
 */
struct mt_rebase_req_map rebase_req SEC(".maps");

/* [0]: mt_rebase, set by user space after the load (tracker_load.c) */
struct mt_rebase_prog_map rebase_prog SEC(".maps");

static __always_inline void mt_rebase_finish(const struct mt_rebase_req *r)
{
	__u32 tgid = r->tgid;
	struct mt_proc *p = bpf_map_lookup_elem(&procs, &tgid);

	if (!p)
		return;
	if (r->exit) {
		mt_emit(MT_EV_EXIT, tgid, r->tid, 0, 0, 0);
		mt_disown_mm(p->mm, tgid);
		p->mm = 0;
	}
	if (r->one) /* rss_stat's hit ends (rss.bpf.c) */
		__sync_fetch_and_add(&p->rss_inflight, -1);
	if (r->locked)
		mt_proc_unlock(p);
	if (r->exit) {
		bpf_map_delete_elem(&procs, &tgid);
		bpf_map_delete_elem(&rss_shadow, &tgid);
	}
}

SEC("raw_tp")
int mt_rebase(void *ctx)
{
	__u32 zero = 0;
	struct mt_rebase_req *r = bpf_map_lookup_elem(&rebase_req, &zero);

	if (!r)
		return 0;
	if (r->one) /* rss_stat: the counter it names, not forced */
		mt_rss_rebase(r->tgid, r->tid, r->member, r->mm, 0);
	else
		mt_rss_seed(r->tgid, r->tid, r->mm);
	mt_rebase_finish(r);
	return 0;
}

/* Re-bases and finishes through mt_rebase. The tail call fails only once the program array
 * is emptied, when memtrack's descriptors are being closed: then the process is only
 * unlocked, and forgotten at its exit. */
static __always_inline void mt_rebase_call(void *ctx, __u32 tgid, __u32 tid, __u64 mm, bool locked,
					   bool exit)
{
	__u32 zero = 0;
	struct mt_rebase_req *r = bpf_map_lookup_elem(&rebase_req, &zero);

	if (!r)
		return;
	r->mm = mm;
	r->tgid = tgid;
	r->tid = tid;
	r->locked = locked;
	r->exit = exit;
	r->one = 0;
	mt_rebase_tail(ctx, r);
	if (locked) {
		struct mt_proc *p = bpf_map_lookup_elem(&procs, &tgid);

		if (p)
			mt_proc_unlock(p);
	}
	if (exit) {
		bpf_map_delete_elem(&procs, &tgid);
		bpf_map_delete_elem(&rss_shadow, &tgid);
	}
}

/* A process' name, after its Fork or Exec record (MT_EV_CTL_COMM): task's comm (fork), or the
 * current task's (task 0: exec, which sets it). Lost names are counted as ring drops. A global
 * function, checked once per program. Returns 0. */
__noinline int mt_emit_comm(__u32 pid, __u32 tid, __u64 task)
{
	struct mt_event *e = mt_reserve(MT_EV_CTL_COMM, pid, tid);

	if (!e)
		return 0;
	/* addr and size, 16 contiguous bytes, zeroed by mt_reserve */
	if (task)
		bpf_core_read_str(&e->addr, 16, &((struct task_struct *)task)->comm);
	else
		bpf_get_current_comm(&e->addr, 16);
	mt_submit(e, false);
	return 0;
}

/* maps.bpf.h says what and why */
__noinline int mt_stop_reaches_queue(void)
{
	struct task_struct *par =
	    BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), real_parent);

	for (int i = 0; i < MT_STOP_CHAIN; i++) {
		unsigned long blocked = BPF_CORE_READ(par, blocked.sig[0]);
		__u32 ptgid = mt_task_ids(par) >> 32;
		int wait;

		if (!ptgid || !bpf_map_lookup_elem(&procs, &ptgid))
			return 0;
		wait = mt_task_wait(par);
		if (wait < 0)
			return (blocked & 1ul << (MT_SIGCHLD - 1)) &&
			       !BPF_CORE_READ(par, sighand, action[MT_SIGCHLD - 1].sa.sa_handler) &&
			       !(BPF_CORE_READ(par, sighand, action[MT_SIGCHLD - 1].sa.sa_flags) &
				 MT_SA_NOCLDSTOP);
		if (!(wait & MT_WUNTRACED))
			return 0; /* it never sees the stop */
		par = BPF_CORE_READ(par, real_parent);
	}
	return 1; /* wrappers beyond the walk: left running, and said */
}

/*
 * Stops the task if the new executable was not inspected yet (mt_stop_on_exec). Returns 0.
 * A global function: checked once, not once per path of mt_on_exec that reaches it (the
 * lock's and the records' outcomes multiply them).
 */
__noinline int mt_exec_stop(__u64 bprm, bool no_stop, __u64 judge, __u64 env_mix)
{
	__u64 id = mt_current_ids(), key, kkey;
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct mt_event *e;

	if (!mt_stop_on_exec)
		return 0;
	/* known_exe: the file (mt_exe_key) inspected at all, then the file in this environment
	 * (mt_known_key, proc.h); env_mix 0 from the caller: not walked (the file unknown) */
	key = mt_bprm_exe_key(bprm);
	if (!env_mix)
		env_mix = mt_exec_env_mix();
	kkey = mt_known_key(key, env_mix);
	/* stop_ctl[1]: every exec stops, known executables too (--alloc-hooks auto: tracker_run.c
	 * judges whether the process needs glibc's probes); no_stop: the root's, judged before it
	 * ran, or one that keeps its need (mt_on_exec); judge (MT_EXEC_SHM_DENIED,
	 * MT_EXEC_OTHER_MNTNS): stops, known or not, so that user space attaches glibc's probes
	 * before the new image runs */
	if (env_mix != MT_ENV_MIX_UNKNOWN && bpf_map_lookup_elem(&known_exe, &kkey) &&
	    (no_stop || !mt_stop_all()) && !judge)
		return 0;
	e = mt_reserve(MT_EV_CTL_EXEC_STOPPED, tgid, tid);
	if (!e)
		return 0; /* counted as a ring drop; the task runs on unstopped */
	e->addr = key;
	e->size = judge;
	e->old_addr = env_mix; /* what user space marks known: this file in this environment */
	/* SIGSTOP is taken on the way back to user space: no instruction of the new image runs
	 * before the consumer answers with SIGCONT. */
	mt_stop_submit(e);
	return 0;
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(mt_on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid, ctgid, cpid;
	struct mt_proc *pp, init = {}, *cp;
	struct mm_struct *cmm;
	bool locked;
	__u64 cids;
	long err;

	/* a new thread: same group, nothing to track */
	if (BPF_CORE_READ(child, pid) != BPF_CORE_READ(child, tgid))
		return 0;
	ptgid = mt_task_ids(parent) >> 32;
	cids = mt_task_ids(child); /* in memtrack's pid namespace (maps.bpf.h) */
	ctgid = cids >> 32;
	cpid = (__u32)cids;
	pp = ctgid ? bpf_map_lookup_elem(&procs, &ptgid) : NULL;
	if (!pp)
		return 0;
	cmm = BPF_CORE_READ(child, mm);
	init.mm = (__u64)cmm;
	init.ppid = ptgid;
	init.served = pp->served; /* the interposer's state is copied with the memory */
	init.shm_denied = pp->shm_denied; /* and the credentials */
	init.glibc_need = pp->glibc_need; /* the same image, its needs */
	init.image_ts = bpf_ktime_get_ns();
	init.maps_stop = pp->maps_stop; /* so are the maps user space read (--stacks) */
	/* Each insertion is bracketed by a count before and one after (stop_ctl[15], [16]; for a
	 * process needing glibc's probes also [17], [14]), both on every path: user space's walks
	 * of the map are no snapshot, and a walk that read "after" before it and "before" after
	 * it, the two apart by no more than at rest, overlapped no insertion
	 * (tracker__tree_alive, glibc__needed). */
	mt_ctl_add(15);
	if (init.glibc_need)
		mt_ctl_add(17);
	err = bpf_map_update_elem(&procs, &ctgid, &init, BPF_NOEXIST);
	mt_ctl_add(16);
	if (init.glibc_need)
		mt_ctl_add(14);
	if (err) {
		mt_drop(MT_DROP_PROC_MAP);
		return 0;
	}
	cp = bpf_map_lookup_elem(&procs, &ctgid);
	if (!cp)
		return 0;
	mt_emit(MT_EV_FORK, ctgid, cpid, 0, ptgid, 0);
	mt_emit_comm(ctgid, cpid, (__u64)child);
	/* The parent copied the counters into the child's fresh mm in its own context, before this
	 * tracepoint: seed the child from them. A CLONE_VM child (vfork) shares the parent's mm,
	 * which stays the parent's until the child execs. */
	if ((__u64)cmm == pp->mm)
		return 0;
	locked = mt_proc_lock(ctgid); /* kswapd may already reclaim from cmm */
	mt_own_mm((__u64)cmm, ctgid);
	mt_rebase_call(ctx, ctgid, cpid, (__u64)cmm, locked, false);
	return 0;
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(mt_on_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	__u64 id = mt_current_ids();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct mt_proc *p = bpf_map_lookup_elem(&procs, &tgid);
	struct mm_struct *mm;
	struct mt_thread *t;
	bool locked, no_stop, denied, served;
	__u64 judge, exe_key, env_mix = 0;

	if (!p)
		return 0;
	mm = BPF_CORE_READ(task, mm);
	mt_note_root();
	denied = mt_shm_denied(); /* the new image's credentials, committed by now */
	judge = (denied ? MT_EXEC_SHM_DENIED : 0) | (mt_other_mntns() ? MT_EXEC_OTHER_MNTNS : 0);
	/* auto mode, an executable judged the interposer's before: judged here, no stop
	 * (exec_judge.bpf.c); before the lock, the environment's walk is this exec's longest
	 * part. Not a process that needs glibc's uprobes: user space judges its new image. */
	/* the environment is walked only for a file inspected before (an unknown one stops) */
	exe_key = mt_bprm_exe_key((__u64)bprm);
	if (bpf_map_lookup_elem(&known_exe, &exe_key))
		env_mix = mt_exec_env_mix();
	served = !judge && !p->glibc_need && env_mix && mt_exec_served((__u64)bprm, env_mix);
	/* under p->lock: a reclaimer's record of the old mm cannot follow the Exec (rss.bpf.c
	 * checks p->mm under the lock) */
	locked = mt_proc_lock(tgid);
	mt_emit(MT_EV_EXEC, tgid, tid, 0, 0, 0);
	mt_emit_comm(tgid, tid, 0); /* exec renamed it */
	mt_disown_mm(p->mm, tgid);
	p->mm = (__u64)mm;
	p->execs++;
	/* an exchange, a full barrier, before the marks are cleared: mt_mark_proc (served.bpf.c)
	 * sets a mark, then reads image_ts: it sees this exec, or this clears its mark */
	__sync_lock_test_and_set(&p->image_ts, bpf_ktime_get_ns());
	p->served = 0; /* the new image registers again if the interposer serves it */
	p->shm_denied = denied;
	p->maps_stop = 0; /* the new image's maps are read at its first stack (alloc.bpf.c) */
	/* the root's, judged before it ran; or a process that needs glibc's uprobes while they
	 * are in: its new image is recorded by them whatever it needs, and its need, kept, keeps
	 * them in while it runs (judging it could only take them out sooner: 0.3 ms an exec) */
	no_stop = p->no_stop || (p->glibc_need && mt_glibc_in()) || served;
	p->no_stop = 0;
	/* the old image's calls are over: a depth one of them left (its return never seen: a
	 * probe taken out during the call, tracker_glibc.c; a longjmp) would make every call of
	 * the new image nested, unrecorded */
	t = mt_thread_get();
	if (t) {
		t->depth = 0;
		t->internal = 0;
	}
	mt_own_mm((__u64)mm, tgid);
	/* before the re-base (the tail call does not return): the stop is taken on the way back
	 * to user space, after all of this */
	mt_exec_stop((__u64)bprm, no_stop, judge, env_mix);
	/* The old image's memory is gone: the new mm starts from what exec mapped. */
	mt_rebase_call(ctx, tgid, tid, (__u64)mm, locked, false);
	return 0;
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(mt_on_exit, struct task_struct *task)
{
	__u64 id = mt_current_ids();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct task_struct *cur = (struct task_struct *)bpf_get_current_task();
	bool locked;

	/* the thread's call state (task storage) is freed with its task_struct: nothing to do */
	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	/* signal->live is decremented before this tracepoint on every kernel: 0 means this is the
	 * last thread of the group (a leader that called pthread_exit earlier is not). */
	if (BPF_CORE_READ(cur, signal, live.counter) != 0)
		return 0;
	/* Every counter to 0, forced: with the fentry rmap backend, what the mm still holds here
	 * is torn down after this tracepoint (6.16+), where the owner is gone; the close-out
	 * carries it. Then the Exit, the mm released, the process forgotten (mt_rebase_finish).
	 * Under p->lock up to the mm's release: a reclaimer still changing the mm (rss.bpf.c)
	 * writes nothing after the Exit. */
	locked = mt_proc_lock(tgid);
	mt_rebase_call(ctx, tgid, tid, 0, locked, true);
	return 0;
}
