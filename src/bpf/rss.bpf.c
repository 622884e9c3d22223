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
	/* In flight from here to its end (mt_rebase_finish, or below when it writes nothing):
	 * a hit that sees another one in flight does not take the fast read (rss.bpf.h). Before
	 * the lock: a hit waiting for it is counted by the holder. */
	__sync_fetch_and_add(&p->rss_inflight, 1);
	/* Read and written under p->lock (rss.bpf.h): reads are then in time order, each
	 * record's change is the counter's move between two reads, and the records reach the
	 * ring in that order. Not locked (the holder stalled) or no consistent read: nothing is
	 * written now, the next change of this counter writes the move. The mm is checked again
	 * under the lock: exec and exit switch it (and write their Exec or Exit) holding it. */
	if (!mt_proc_trylock(p) && !mt_proc_lock(tgid)) {
		/* this change is taken by the next walk: every hit walks until then */
		__sync_lock_test_and_set(&p->rss_resync, 1);
		__sync_fetch_and_add(&p->rss_inflight, -1);
		return 0;
	}
	if (p->mm != mm)
		goto out;
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
out:
	__sync_fetch_and_add(&p->rss_inflight, -1);
	mt_proc_unlock(p);
	return 0;
}

/* One CPU's pending batch of a percpu_counter, for bpf_loop: that CPU's copy of pcpu_probe
 * gives the CPU's per-CPU base (its address minus the map's own per-CPU pointer). */
struct mt_pcpu_sum {
	__u64 counters; /* the counter's __percpu s32 pointer */
	__u64 pptr; /* pcpu_probe's __percpu pointer */
	__s64 sum;
	__u32 tgid; /* non-zero: also set each CPU's shadow of this process (rss_shadow) */
	__u32 member;
};

static long mt_pcpu_add(__u64 cpu, void *arg)
{
	struct mt_pcpu_sum *c = arg;
	__u32 zero = 0, m = c->member;
	void *here = bpf_map_lookup_percpu_elem(&pcpu_probe, &zero, (__u32)cpu);
	struct mt_rss_shadow *s;
	__s32 v = 0;

	if (!here)
		return 1; /* past the last possible CPU: stop */
	bpf_probe_read_kernel(&v, sizeof(v), (void *)(c->counters + (mt_ptr_value(here) - c->pptr)));
	c->sum += v;
	if (c->tgid && m < MT_RSS_NR) {
		/* found for every possible CPU: the caller made the entry, and exit deletes it
		 * only after the process lets go of its mm under the lock the caller holds */
		s = bpf_map_lookup_percpu_elem(&rss_shadow, &c->tgid, (__u32)cpu);
		if (s)
			s->pend[m] = v;
	}
	return 0;
}

static long mt_pcpu_try(__u64 i, void *arg)
{
	struct mt_pcpu_read *r = arg;
	struct percpu_counter *pc = (void *)r->pc;
	struct mt_pcpu_sum c = {
	    .counters = r->counters, .pptr = r->pptr, .tgid = r->tgid, .member = r->member};
	__u32 nr = mt_nr_cpus < MT_MAX_CPUS ? mt_nr_cpus : MT_MAX_CPUS;
	__s64 before = BPF_CORE_READ(pc, count), after;
	__u32 lock = 0;

	/* the first word of raw_spinlock_t: the qspinlock, non-zero while held or wanted */
	bpf_probe_read_kernel(&lock, sizeof(lock), &pc->lock);
	bpf_loop(nr, mt_pcpu_add, &c, 0);
	after = BPF_CORE_READ(pc, count);
	if (lock || before != after)
		return 0; /* raced with a fold: try again */
	r->value = before + c.sum;
	r->count = before;
	r->got = 1;
	return 1;
}

__noinline int mt_rss_read_pcpu(__u64 mm, struct mt_pcpu_read *out)
{
	struct mt_pcpu_read r = {};
	struct percpu_counter *pc;
	__u64 m;

	if (!out || !mm)
		return 1;
	m = out->member;
	barrier_var(m);
	if (m >= MT_RSS_NR)
		return 1;
	if (bpf_core_type_exists(struct mm_rss_stat___old))
		return 1; /* 6.1: atomics, no walk (the code below is poisoned there) */
	pc = (void *)mt_rss_counter(mm, m);
	if (!pc)
		return 1;
	r.pc = (__u64)pc;
	r.member = m;
	r.tgid = out->tgid;
	r.counters = (__u64)BPF_CORE_READ(pc, counters);
	bpf_probe_read_kernel(&r.pptr, sizeof(r.pptr),
			      (void *)(mt_ptr_value(&pcpu_probe) +
				       bpf_core_field_offset(struct bpf_array, pptrs)));
	if (!r.counters || !r.pptr)
		return 1; /* not a live counter */
	bpf_loop(MT_RSS_READ_TRIES, mt_pcpu_try, &r, 0);
	if (!r.got)
		return 1;
	out->value = r.value;
	out->count = r.count;
	out->counters = r.counters;
	return 0;
}

/*
 * The exact value of counter `member` of mm, process p's (the one rebase_req names), in
 * *bytes: the atomic before 6.2; since, the fast read (mt_rss_read_fast) unless forced (fork,
 * exec), else the walk of every CPU, which also sets the fast read's state when the request
 * holds p's lock; mm 0 (exit): 0. Returns 0, or 1 when no consistent read (*bytes untouched).
 * A global function: checked once, whatever its callers' states.
 */
__noinline int mt_rss_read_once(struct mt_proc *p, __u64 mm, __u32 member, __s64 *bytes,
				__u32 force)
{
	static const struct mt_rss_shadow none;
	struct mt_pcpu_read r = {};
	struct mt_rebase_req *req;
	__u32 zero = 0, bit, tgid;
	__s64 pages = 0;
	__u64 m = member;
	bool locked;

	barrier_var(m);
	if (!p || !bytes || m >= MT_RSS_NR)
		return 1;
	if (!mm)
		goto out; /* exit: 0 */
	if (bpf_core_type_exists(struct mm_rss_stat___old)) {
		pages = mt_rss_read_old((struct mm_struct *)mm, m);
		goto out;
	}
	/* the request being served (mt_rebase is the only caller): the process, and whether
	 * its lock is held */
	req = bpf_map_lookup_elem(&rebase_req, &zero);
	if (!req)
		return 1;
	tgid = req->tgid;
	locked = req->locked;
	bit = 1u << m;
	r.member = m;
	if (locked) {
		if (p->rss_resync) {
			__sync_lock_test_and_set(&p->rss_resync, 0);
			p->rss_synced = 0;
		}
		if (!force && !mt_rss_read_fast(p, tgid, (struct mm_struct *)mm, m, &pages))
			goto out;
		p->rss_synced &= ~bit;
		/* the walk sets the shadows; without an entry (out of memory) no fast read */
		if (!bpf_map_lookup_elem(&rss_shadow, &tgid)) {
			bpf_map_update_elem(&rss_shadow, &tgid, &none, BPF_NOEXIST);
			/* Exit deletes the entry after letting go of the mm (mt_rebase_finish),
			 * under the lock, or without it when its wait ran out: then it may have
			 * done so before this entry was made, which would be no one's. An atomic
			 * read, a full barrier after the entry's making: the mm still ours here
			 * means the exit's deletion is still to come. */
			if (__sync_fetch_and_add(&p->mm, 0) != mm) {
				bpf_map_delete_elem(&rss_shadow, &tgid);
				return 1;
			}
		}
		r.tgid = tgid;
	} else {
		/* another program may hold the lock and use the state: the walk leaves the
		 * shadows alone, and the next holder walks (exec and fork change the mm here) */
		__sync_lock_test_and_set(&p->rss_resync, 1);
	}
	if (mt_rss_read_pcpu(mm, &r))
		return 1;
	pages = r.value;
	if (locked) {
		p->rss_count[m] = r.count;
		p->rss_counters[m] = r.counters;
		p->rss_sum[m] = pages;
		p->rss_synced |= bit;
	}
out:
	if (pages < 0)
		pages = 0;
	*bytes = pages << mt_page_shift;
	return 0;
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
	/* mm 0 (exit) too: val unknown here on every path, one walk of mt_rss_set for the
	 * verifier (with val a known 0 on the exit's path it walked it twice) */
	if (!mt_rss_read_once(p, mm, m, &val, force))
		mt_rss_set(p, tgid, tid, m, val, force != 0, !mm);
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
