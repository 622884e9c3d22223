// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kmem:rss_stat, as a raw tracepoint: (mm, member) since 6.2, (mm, member, count) before.
 * It fires about once per 4 KiB page, in whatever task changed the counter: the owner itself,
 * kswapd, a process_madvise() caller, the parent copying page tables at fork, or the exit path.
 * Ownership comes from the mm, never from the current task, and is checked against the mm the
 * tracked process holds now, so a freed and recycled mm_struct can neither add nor erase a peak.
 */
#include "bpf/maps.bpf.h"
#include "bpf/rss.bpf.h"

SEC("raw_tp/rss_stat")
int mt_on_rss_stat(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 mm = ctx->args[0];
	__u32 member = (__u32)ctx->args[1];
	__u32 *owner = bpf_map_lookup_elem(&mm_owner, &mm);
	struct mt_rebase_req *r;
	struct mt_proc *p;
	__u32 tgid, zero = 0;

	if (!owner)
		return 0;
	tgid = *owner;
	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p || p->mm != mm || member >= MT_RSS_NR)
		return 0;
	/* Read and written under p->lock (rss.bpf.h): reads are then in time order, each
	 * record's change is the counter's move between two reads, and the records reach the
	 * ring in that order. Not locked (the holder stalled) or no consistent read: nothing is
	 * written now, the next change of this counter writes the move. The mm is checked again
	 * under the lock: exec and exit switch it (and write their Exec or Exit) holding it. */
	if (!mt_proc_lock(tgid))
		return 0;
	if (p->mm != mm) {
		mt_proc_unlock(p);
		return 0;
	}
	/* Before 6.2 the tracepoint also passes the atomic's value after the change, but two
	 * CPUs' values may take the lock in the other order (a bogus -1 then +1): the atomic is
	 * read instead, under the lock, by mt_rebase (process.bpf.c), which also unlocks: the
	 * read and write of a counter are verified there once, not here again. The tail call
	 * fails only once memtrack empties the program array: then nothing is written. */
	r = bpf_map_lookup_elem(&rebase_req, &zero);
	if (r) {
		r->mm = mm;
		r->tgid = tgid;
		r->tid = (__u32)bpf_get_current_pid_tgid();
		r->locked = 1;
		r->exit = 0;
		r->one = 1;
		r->member = member;
		bpf_tail_call(ctx, &rebase_prog, 0);
	}
	mt_proc_unlock(p);
	return 0;
}

/* The exact value of counter `member` of mm in *bytes (mt_rss_read); 0, or 1 when no
 * consistent read. A global function: checked once, whatever its callers' states. */
__noinline int mt_rss_read_once(__u64 mm, __u32 member, __s64 *bytes)
{
	__u64 m = member;

	barrier_var(m);
	if (!bytes || !mm || m >= MT_RSS_NR)
		return 1;
	return mt_rss_read((struct mm_struct *)mm, m, bytes);
}

__noinline int mt_rss_rebase(__u32 tgid, __u32 tid, __u32 member, __u64 mm, __u32 force)
{
	struct mt_proc *p = bpf_map_lookup_elem(&procs, &tgid);
	__s64 val = 0;

	/* a 64-bit copy: the bound survives the compiler's spills of it (a 32-bit fill loses it) */
	__u64 m = member;

	barrier_var(m);
	if (!p || m >= MT_RSS_NR)
		return 0;
	if (!mm || !mt_rss_read_once(mm, m, &val))
		mt_rss_set(p, tgid, tid, m, val, force != 0);
	return 0;
}

int mt_rss_emit(__u32 tgid, __u32 tid, __u32 member, __s64 bytes, __u64 ts)
{
	struct mt_event *e = mt_reserve(MT_EV_RSS, tgid, tid);

	if (!e)
		return 0;
	if (ts)
		e->ts = ts;
	e->aux = member;
	e->size = bytes;
	mt_submit(e, false);
	return 0;
}
