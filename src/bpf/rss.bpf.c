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
		r->tid = (__u32)mt_current_ids();
		r->locked = 1;
		r->exit = 0;
		r->one = 1;
		r->member = member;
		mt_rebase_tail(ctx, r);
	}
out:
	__sync_fetch_and_add(&p->rss_inflight, -1);
	mt_proc_unlock(p);
	return 0;
}

/*
 * One step of the walk (mt_rss_read_pcpu), for bpf_loop: step i reads CPU i % r->nr of try
 * i / r->nr. The tries and the CPUs are one flat loop, where they were a bpf_loop of tries each
 * running a bpf_loop of CPUs: the verifier checks a callback until its states converge, a
 * nested one again within every pass over its caller (the two took 408 of mt_rebase's ~1,500
 * verified instructions), and each callback is one more function to JIT.
 * A try's first step reads the count and the lock word, its last one (CPU r->nr - 1, whether
 * the kernel has it or not) the count again: consistent, the walk is done (returns 1, and
 * bpf_loop stops early), else the next step starts the next try. The step after the last try
 * only stops the loop: bpf_loop then returns the whole count, the caller's sign of failure.
 * The verifier walks a callback again while the stack it writes is not within what it saw
 * before (ranges, not just precise values): so the CPU comes from the index (a counter kept
 * in r would be a new known constant at each step) and every field written here is a whole
 * 8-byte slot (4 bytes written into one turn it into a different kind of slot).
 */
static long mt_pcpu_step(__u64 i, void *arg)
{
	struct mt_pcpu_read *r = arg;
	struct percpu_counter *pc = (void *)r->pc;
	__u64 cpu = i % r->nr, m = r->member;
	struct mt_rss_shadow *s;
	__u32 zero = 0, lock = 0, key = r->tgid;
	void *here;
	__s32 v = 0;

	if (!cpu) {
		if (i >= r->last)
			return 1; /* every try raced with a fold */
		r->before = BPF_CORE_READ(pc, count);
		r->sum = 0;
		/* the first word of raw_spinlock_t: the qspinlock, non-zero while held or wanted */
		bpf_probe_read_kernel(&lock, sizeof(lock), &pc->lock);
		r->lock = lock;
	}
	/* NULL past the kernel's possible CPUs (mt_nr_cpus may be raised for tests) */
	here = bpf_map_lookup_percpu_elem(&pcpu_probe, &zero, (__u32)cpu);
	if (here) {
		/* that CPU's copy of pcpu_probe gives its per-CPU base (its address minus the
		 * map's own per-CPU pointer) */
		bpf_probe_read_kernel(&v, sizeof(v),
				      (void *)(r->counters + (mt_ptr_value(here) - r->pptr)));
		r->sum += v;
		/* Found for every possible CPU when the caller holds the lock: it made the entry,
		 * and exit deletes it only after the process lets go of its mm under that lock.
		 * Otherwise r->tgid is 0, which has no entry (no tracked process has tgid 0): one
		 * branch fewer for the verifier than a test of r->tgid. */
		s = bpf_map_lookup_percpu_elem(&rss_shadow, &key, (__u32)cpu);
		if (s && m < MT_RSS_NR)
			s->pend[m] = v;
	}
	if (cpu + 1 < r->nr)
		return 0;
	/* the try's end: consistent when no fold ran (or was pending) meanwhile */
	return !r->lock && BPF_CORE_READ(pc, count) == r->before;
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
	r.nr = mt_nr_cpus < MT_MAX_CPUS ? mt_nr_cpus : MT_MAX_CPUS;
	r.last = MT_RSS_READ_TRIES * r.nr;
	r.counters = (__u64)BPF_CORE_READ(pc, counters);
	bpf_probe_read_kernel(&r.pptr, sizeof(r.pptr),
			      (void *)(mt_ptr_value(&pcpu_probe) +
				       bpf_core_field_offset(struct bpf_array, pptrs)));
	if (!r.nr || !r.counters || !r.pptr)
		return 1; /* not a live counter */
	/* fewer steps than r.last + 1 only when a try ended consistent (a success flag written
	 * in r would be one more state for the verifier) */
	if (bpf_loop(r.last + 1, mt_pcpu_step, &r, 0) > r.last)
		return 1;
	out->value = r.before + r.sum;
	out->count = r.before;
	out->counters = r.counters;
	return 0;
}

/*
 * The exact value of counter `member` of mm, process p's (the one rebase_req names), in
 * *bytes: the atomic before 6.2; since, the fast read (mt_rss_read_fast) unless forced (fork,
 * exec), else the walk of every CPU, which also sets the fast read's state when the request
 * holds p's lock; mm 0 (exit): 0. Returns 0, or 1 when no consistent read (*bytes untouched).
 * Inlined into mt_rss_rebase, its only caller, whose global function already bounds what the
 * verifier walks (a caller's state does not reach in); as a global function of its own it
 * cost one more function to JIT (each ~70 us of mt_rebase's verification time here, more than
 * the ~160 instructions the verifier now walks in mt_rss_rebase's states).
 */
static __always_inline int mt_rss_read_once(struct mt_proc *p, __u64 mm, __u32 member, __s64 *bytes,
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
	/* mm 0 (exit): val is a known 0 on that path, where mt_rss_set is walked once more (an
	 * opaque 0 saved 18 of the program's ~1,650 verified instructions: not worth it) */
	if (!mt_rss_read_once(p, mm, m, &val, force))
		mt_rss_set(p, tgid, tid, m, val, force != 0, !mm);
	return 0;
}

__noinline int mt_rss_emit(__u32 tgid, __u32 tid, __u32 member, __s64 bytes, __u64 ts)
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
