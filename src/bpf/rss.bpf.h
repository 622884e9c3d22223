/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/* Reading an mm's resident-memory counters exactly, and turning updates into Rss records. */
#ifndef MEMTRACK_RSS_BPF_H
#define MEMTRACK_RSS_BPF_H

#include "bpf/maps.bpf.h"

/* Set by user space before load. */
extern const volatile __u32 mt_nr_cpus;
extern const volatile __u32 mt_page_shift;
extern const volatile __s64 mt_rss_step; /* bytes; 0 = emit every change */
extern const volatile __u32 mt_rmap; /* enum mt_rmap_backend */

/*
 * Per-CPU base offsets without /proc/kallsyms (this kernel's kallsyms lists no data symbols, so
 * typed ksyms such as this_cpu_off cannot load). A per-CPU array knows both halves of the
 * sum: its element's __percpu pointer (bpf_array.pptrs[0]) and, through
 * bpf_map_lookup_percpu_elem(), that element's address on any CPU. Their difference is the
 * CPU's offset, which applies to every __percpu pointer, the rss counters' included. The
 * element's value is that __percpu pointer once the fast read has read it on that CPU (0
 * before): the address is all the walk uses of the element.
 */
struct mt_pcpu_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
};
extern struct mt_pcpu_map pcpu_probe SEC(".maps");

/* Linux < 6.2: atomic counters, and the tracepoint passes the value (pages) itself. */
struct mm_rss_stat___old {
	atomic_long_t count[4];
} __attribute__((preserve_access_index));

#define MT_MAX_CPUS 8192 /* NR_CPUS at most; bpf_loop makes the count free to verify */

/* A pointer's value as a plain number, read back through the stack: the verifier refuses
 * arithmetic on map and map-value pointers, and we only want their numeric difference. */
static __always_inline __u64 mt_ptr_value(void *p)
{
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), &p);
	return v;
}

/* Linux < 6.2: mm->rss_stat.count[], atomic counters in pages; the rss_stat tracepoint
 * reports exactly this value (the per-task cached deltas are not in it either). */
struct mm_struct___old {
	struct mm_rss_stat___old rss_stat;
} __attribute__((preserve_access_index));

/*
 * The two layouts are read in separate non-inlined functions: each one's CO-RE relocations fail
 * on the other kernel, and libbpf then poisons those instructions, which the verifier accepts
 * only where it can prove them unreachable. Inlined, clang hoists the loop-invariant field
 * offset above the bpf_core_type_exists() test (mt_rss_seed's loop), and the 6.1 kernel
 * refused the whole object ("invalid CO-RE relocation ... mm_struct.rss_stat").
 */
static __noinline __attribute__((unused)) __s64 mt_rss_read_old(struct mm_struct *mm, __u32 member)
{
	struct mm_struct___old *om = (void *)mm;
	long v = 0;

	if (member < MT_RSS_NR)
		bpf_core_read(&v, sizeof(v), &om->rss_stat.count[member].counter);
	return v;
}

/*
 * &mm->rss_stat[member] since 6.2 (0 for a bad member). Not inlined, and called only once
 * bpf_core_type_exists() said the kernel is 6.2+: its relocation fails on 6.1 (mm_struct's
 * rss_stat is a struct of atomics there), libbpf poisons the instruction, and the verifier
 * accepts it only where it can prove it unreachable; the global functions that read the
 * counter are checked whatever their callers, inlined code may be hoisted above the test.
 */
static __noinline __attribute__((unused)) __u64 mt_rss_counter(__u64 mm, __u64 member)
{
	if (member >= MT_RSS_NR)
		return 0;
	return (__u64) & ((struct mm_struct *)mm)->rss_stat[member];
}

/*
 * The fast read (mt_rss_read_fast, since 6.2): per process and CPU, each counter's pending
 * batch on that CPU as the process last saw it (pages). Per-CPU values of a hash keyed by
 * tgid: an entry takes 16 bytes per possible CPU, made at the process's first walk (not
 * preallocated: 16,384 x CPUs would be paid at every start), deleted at its exit.
 */
struct mt_rss_shadow {
	__s32 pend[MT_RSS_NR];
};

struct mt_rss_shadow_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, MT_MAX_PROCS);
	__type(key, __u32); /* tgid */
	__type(value, struct mt_rss_shadow);
};
extern struct mt_rss_shadow_map rss_shadow SEC(".maps");

/*
 * Since 6.2, as the kernel's percpu_counter_sum_positive() computes it: the shared count plus
 * every CPU's pending batch. Pages. The CPUs are walked with bpf_loop (5.17+; this path runs on
 * 6.2+ only), whose body the verifier checks once: a bounded loop is checked once per CPU at
 * every call site, which made loading cost grow with the possible CPU count (here: 22 ms of
 * load with 2 CPUs, 36 ms with 64, 56 ms with 256, 90-146 ms with 512).
 *
 * The kernel sums under the counter's lock; we cannot take it, and a CPU folding its batch
 * into the shared count meanwhile (percpu_counter_add_batch: under that lock, `count +=
 * batch`, then the CPU's own copy back to 0; every 32 pages or so per CPU) would be seen
 * half done: the batch counted twice or not at all, one page looking like +-32 (seen as
 * -30/+32 record pairs with two threads faulting). So the read is count, lock word, every
 * CPU, count again, and it is retried when the count moved (the fold's first half happened
 * during the walk) or the lock was held (the fold's halves straddle the walk's start: the
 * lock is held from before the count store to after the CPU's store). Consistent reads are
 * the counter's value at one instant of the walk. Most hits do not walk: mt_rss_read_fast.
 */
#define MT_RSS_READ_TRIES 8

/* The walk's state, for bpf_loop (mt_pcpu_step): the verifier checks a callback's body until
 * its states converge, where a bounded loop of MT_RSS_READ_TRIES was checked once per try,
 * every CPU walk included (~3,000 of the ~3,800 instructions a re-base took to verify). */
struct mt_pcpu_read {
	__u64 pc;	/* struct percpu_counter * */
	__u64 counters; /* its __percpu s32 pointer */
	__u64 pptr;	/* pcpu_probe's __percpu pointer */
	__s64 value;	/* pages, once got */
	__s64 count;	/* the shared count that value was read with */
	/* the rest 8 bytes each, for mt_pcpu_step (see there) */
	__u64 member; /* < MT_RSS_NR, a bound the verifier keeps in an 8-byte slot */
	__u64 tgid;   /* non-zero: also set each CPU's shadow of this process (rss_shadow) */
	__u64 nr;     /* the CPUs a try walks */
	__u64 last;   /* the steps of MT_RSS_READ_TRIES tries */
	__u64 lock;   /* the current try's: the counter's lock word at its start */
	__s64 before; /* the current try's: the count at its start */
	__s64 sum;    /* the current try's: the batches of the CPUs walked so far */
};

/* The walk of r->member: r->value = the counter's value at one instant of it (pages),
 * r->count = the shared count then; with r->tgid, every CPU's shadow set to what the walk
 * read. Returns 0, or 1 when MT_RSS_READ_TRIES reads all raced with folds. A global function
 * (rss.bpf.c): checked once, where as a static one it was checked again for every state of
 * its caller reaching it (inlined, the callback's passes doubled: 1,487 -> 2,140 verified
 * instructions in mt_rebase on 6.18). */
int mt_rss_read_pcpu(__u64 mm, struct mt_pcpu_read *r);

/*
 * The fast read, since 6.2: the counter's new value from the shared count and this CPU's
 * pending batch only, where the walk reads every CPU's (several microseconds per page fault
 * with 64 CPUs). Since 6.2 every change of an mm counter is percpu_counter_add() on the CPU
 * that makes it, followed at once by this tracepoint (add_mm_counter()), practically always
 * under a page-table lock: on that CPU. (A change traced on another CPU is taken at its CPU's
 * next hit or at the next walk: late, never lost or counted twice.) Under p->lock the process
 * keeps, per member, the shared count as last seen (rss_count), every CPU's pending batch as
 * last seen (the shadows) and their sum (rss_sum): rss_sum == rss_count + sum of shadows,
 * always, as every value in it was read. While the count has not moved, the counter moved by
 * this CPU's pending minus its shadow: this CPU's changes since its last hit (one change, or
 * more when a hit gave up). Other CPUs' changes are taken at their own hits.
 * That is the counter's real value only when no other CPU's change is pending: a change
 * made elsewhere, whose hit is on its way to this lock, is in the counter but not in this
 * sum. Taking the hits' order for the changes' order then writes values the counter never
 * held (a fault here, a zap there: x+1 in truth, x-1 written, and a peak missed; with two
 * threads faulting and zapping, thousands of such values per 100k hits). So a hit takes the
 * fast read only when it is alone in flight (p->rss_inflight, counted from the program's
 * start, before the lock); otherwise it walks, which reads every CPU's batch: the value at
 * one instant. What remains: changes whose hit has not yet counted itself in flight (from
 * percpu_counter_add() to the program's first instructions; longer if the task is preempted
 * in between, or on a weakly ordered CPU until the count's add is visible): per other CPU,
 * its pending batch minus its shadow (under twice the batch: a larger move folds, and the
 * count moved), missing from a value written then, and taken at a later hit there.
 * The walk is needed when that order cannot be known from two words:
 *  - the count moved: some CPU folded its batch into it (percpu_counter_add_batch: under the
 *    counter's lock, count += batch + amount, then that CPU's pending to 0), every ~32 pages
 *    per CPU. A fold on another CPU whose count store is not visible yet is no exception: its
 *    pending is not read here, its own hit finds the count moved;
 *  - this CPU's pending is 0: a fold here may have moved the batch into a count that another
 *    CPU's opposite fold brought back to the value seen (the count alone cannot tell; 0 is
 *    where every fold leaves the pending, in both the locked and the lockless variants).
 *    Without this check, one thread faulting pages in and one zapping them, one page per
 *    change, gave -31/+31 record pairs (test_track_rss_folds);
 *  - the shadows are not set (fork, exec, a walk that raced with folds MT_RSS_READ_TRIES
 *    times, a hit that gave up on the lock: rss_resync);
 *  - another hit of the process is in flight (above).
 * The walk sets every shadow from the values it read, with the count it read them with.
 * Returns 0 with *pages set, or 1: walk.
 */
static __always_inline int mt_rss_read_fast(struct mt_proc *p, __u32 tgid, struct mm_struct *mm,
					    __u32 member, __s64 *pages)
{
	struct percpu_counter *pc;
	struct mt_rss_shadow *s;
	__u64 counters, *here;
	__u32 zero = 0;
	__s32 pend = 0;

	if (member >= MT_RSS_NR || !(p->rss_synced & (1u << member)))
		return 1;
	/* Alone in flight, and no hit gave up on the lock since rss_resync was read: one that
	 * counted itself, set rss_resync and uncounted itself between that read and this one
	 * left a change this sum would miss. It sets rss_resync before it uncounts itself, so
	 * the count read with a full barrier (a fetching atomic) and rss_resync after it. */
	if (__sync_fetch_and_add(&p->rss_inflight, 0) != 1 || *(volatile __u64 *)&p->rss_resync)
		return 1;
	pc = (void *)mt_rss_counter((__u64)mm, member);
	if (!pc || BPF_CORE_READ(pc, count) != p->rss_count[member])
		return 1;
	s = bpf_map_lookup_elem(&rss_shadow, &tgid);
	here = bpf_map_lookup_elem(&pcpu_probe, &zero);
	/* the walk's, fixed for the mm's life: the one this mm has, or the state is another
	 * mm's (an exec that could not take the lock switched p->mm under a holder's feet) */
	counters = p->rss_counters[member];
	if (!s || !here || !counters || (__u64)BPF_CORE_READ(pc, counters) != counters)
		return 1;
	/* this CPU's copy of pcpu_probe caches the map's __percpu pointer (see pcpu_probe) */
	if (!*here) {
		bpf_probe_read_kernel(here, sizeof(*here),
				      (void *)(mt_ptr_value(&pcpu_probe) +
					       bpf_core_field_offset(struct bpf_array, pptrs)));
		if (!*here)
			return 1;
	}
	/* this CPU's copy: no other CPU writes it, and this one runs this program */
	bpf_probe_read_kernel(&pend, sizeof(pend),
			      (void *)(counters + (mt_ptr_value(here) - *here)));
	if (!pend)
		return 1;
	p->rss_sum[member] += pend - s->pend[member];
	s->pend[member] = pend;
	*pages = p->rss_sum[member];
	return 0;
}

/*
 * One writer at a time per process: the exchange of a counter's value and the reservation of
 * its Rmap and Rss records happen under p->lock, so the ring holds a process's records in the
 * order its counters took their values, and every Rss record equals the Rmap running sum
 * before it, threads racing or not. (Without it, thread B's record could reach the ring before
 * thread A's although A exchanged first: an Rss record 2 pages off the running sum.)
 * A plain word with compare-and-swap, not bpf_spin_lock: the section calls helpers (the
 * ring). It cannot deadlock: its holders are tracepoint programs (rss_stat, fork, exec,
 * exit), which run with preemption disabled and never in interrupt context, so a holder is
 * never interrupted by another holder on its CPU; a waiter spins while the holder, on another
 * CPU, writes two records (a microsecond). The spin is bounded (MT_LOCK_SPINS rounds, some
 * milliseconds: a holder's virtual CPU descheduled by the host); false when it runs out.
 */
#define MT_LOCK_SPINS (1u << 20)

struct mt_lock_try {
	__u32 tgid;
	__u32 got;
};

static long mt_lock_spin(__u64 i, void *arg)
{
	struct mt_lock_try *c = arg;
	struct mt_proc *p = bpf_map_lookup_elem(&procs, &c->tgid);

	if (!p)
		return 1;
	if (__sync_val_compare_and_swap(&p->lock, 0, 1) == 0) {
		c->got = 1;
		return 1;
	}
	return 0;
}

static __always_inline bool mt_proc_lock(__u32 tgid)
{
	struct mt_lock_try c = {.tgid = tgid};

	bpf_loop(MT_LOCK_SPINS, mt_lock_spin, &c, 0);
	return c.got;
}

/* One try without the loop: most rss_stat hits find the lock free (a bpf_loop call and a procs
 * lookup saved per hit). */
static __always_inline bool mt_proc_trylock(struct mt_proc *p)
{
	return __sync_val_compare_and_swap(&p->lock, 0, 1) == 0;
}

static __always_inline void mt_proc_unlock(struct mt_proc *p)
{
	__sync_lock_test_and_set(&p->lock, 0); /* an exchange: a full barrier on x86-64 */
}

static __always_inline void mt_tree_add(__s64 delta)
{
	__u32 zero = 0;
	struct mt_global *g = bpf_map_lookup_elem(&global, &zero);
	__s64 now;

	if (!g || !delta)
		return;
	now = __sync_fetch_and_add(&g->tree_rss, delta) + delta;
	/* Racy max: two CPUs raising the peak at once can lose one page of peak, never more. */
	if (now > g->tree_peak_rss)
		g->tree_peak_rss = now;
}

/* An Rss record (ts 0: now). Returns 0. A global function (rss.bpf.c), never inlined: its only
 * caller is mt_rss_set (in mt_rss_rebase), three times, and inlined there the ring reservation's
 * branches were walked again in every path of the peak keeping (Linux 6.18: 925 verified
 * instructions in mt_rss_rebase, 342 + 64 with the calls; mt_rebase 2.34 -> 2.13 ms of
 * verification, median of 45 loads, though one more function to JIT). */
int mt_rss_emit(__u32 tgid, __u32 tid, __u32 member, __s64 bytes, __u64 ts);

/*
 * rmap, tracepoint backend: a counter change of `delta` bytes becomes an Rmap record of
 * delta pages. Its address, when the owner itself did it:
 *  - inside munmap/madvise/mremap/brk/mmap/mlock/shmdt: the syscall's first page advanced by
 *    what it changed so far (pages are zapped and populated in address order), 0 when that
 *    syscall's range is not known at entry;
 *  - otherwise, for an increase, the page of the thread's last fault on a user address, used
 *    once (a fault maps once: a later increase without a fault of its own gets 0, not a
 *    stale page);
 * 0 for everything else: fork seeds, exec re-bases and exit (`rebase`), changes made by
 * another task (reclaim, process_madvise), decreases outside those syscalls.
 */
static __always_inline void mt_rmap_emit(__u32 tgid, __u32 tid, __u32 member, __s64 delta,
					 bool rebase)
{
	struct mt_thread *t = NULL;
	struct mt_event *e;
	__u64 addr = 0;

	/* Only the owner's own changes use its state; then the current task is thread `tid`
	 * (rss_stat passes the current tid; the re-bases are the only other callers). */
	if (!rebase && (__u32)(mt_current_ids() >> 32) == tgid)
		t = mt_thread_get();
	if (t) {
		if (t->in_sys) {
			if (t->range_start) {
				addr = t->range_start + t->range_done;
				t->range_done += delta < 0 ? -delta : delta;
			}
		} else if (delta > 0) {
			addr = t->fault_addr;
			t->fault_addr = 0;
		}
	}
	e = mt_reserve(MT_EV_RMAP, tgid, tid);
	if (!e)
		return;
	e->aux = member;
	e->addr = addr;
	e->size = (__u64)(delta >> mt_page_shift);
	mt_submit(e, false);
}

/*
 * A counter of process `p` is now `val` bytes. Keeps the exact per-process and tree peaks in
 * the maps, and writes a record when the value moved by mt_rss_step since the last one. Peaks
 * survive the decimation: when a rise turns into a fall, the top is written first (with the
 * time it was reached), so every local maximum of every member is in the artifact.
 */
static __always_inline void mt_rss_set(struct mt_proc *p, __u32 tgid, __u32 tid, __u32 member,
				       __s64 val, bool force, bool closing)
{
	__s64 old, total, diff, pages;

	if (member >= MT_RSS_NR)
		return;
	old = __sync_lock_test_and_set(&p->rss[member], val);
	/* Tracepoint backend: every counter change is an Rmap record. Fentry backend: only the
	 * forced re-bases (fork seed, exec seed, exit), which carry the pages the rmap functions
	 * cannot show: inherited at fork, mapped by exec before the mm was ours, torn down after
	 * the exit tracepoint (6.16+). The exit's close-out is the records' own sum, not the
	 * counter's last value: another thread's teardown may be under way at the Exit (the
	 * last thread to leave is not always the one that frees the mm), its records written
	 * page by page while the kernel moves the counter once per page table; the counter's
	 * -old left up to a page table's pages (seen: -1 file page, -156 anon) at the Exit. */
	if (mt_rmap == MT_RMAP_FENTRY && force) {
		if (closing)
			pages = -__sync_lock_test_and_set(&p->rmap_sum[member], 0);
		else
			pages = (val - old) >> mt_page_shift;
		if (!closing && pages)
			__sync_fetch_and_add(&p->rmap_sum[member], pages);
		if (pages)
			mt_rmap_emit(tgid, tid, member, (__s64)((__u64)pages << mt_page_shift), force);
	} else if (val != old && mt_rmap == MT_RMAP_TRACEPOINT) {
		mt_rmap_emit(tgid, tid, member, val - old, force);
	}
	if (member != MT_RSS_SWAP) {
		mt_tree_add(val - old);
		total = p->rss[MT_RSS_FILE] + p->rss[MT_RSS_ANON] + p->rss[MT_RSS_SHMEM];
		if (total > (__s64)p->peak_rss)
			p->peak_rss = total;
	}
	diff = val - p->emitted[member];
	if (diff < 0)
		diff = -diff;
	if (force || diff >= mt_rss_step || val == 0) {
		/* a fall big enough to be written (munmap of 2 MiB, exit, exec) from a top not
		 * written yet: the top first, at the time it was reached, or that peak is lost */
		if (val < old && old == p->top[member] && p->top[member] > p->emitted[member]) {
			mt_rss_emit(tgid, tid, member, p->top[member], p->top_ts[member]);
			p->emitted[member] = p->top[member]; /* so the fall itself is written */
		}
		if (val != p->emitted[member] || (force && val)) {
			p->emitted[member] = val;
			p->top[member] = val;
			mt_rss_emit(tgid, tid, member, val, 0);
		}
		return;
	}
	if (val > p->top[member]) {
		p->top[member] = val;
		p->top_ts[member] = bpf_ktime_get_ns(); /* only here: a clock read per hit saved */
	} else if (val < old && old == p->top[member] && p->top[member] > p->emitted[member]) {
		/* falling from an unwritten top: write the top at the time it was reached */
		mt_rss_emit(tgid, tid, member, p->top[member], p->top_ts[member]);
		p->emitted[member] = p->top[member];
		p->top[member] = val;
	}
}

/*
 * Re-bases one counter of process tgid: writes mm's exact value, or 0 when mm is 0 (exit), as a
 * forced record (fork seed, exec baseline, exit). The caller holds the process's lock (or its
 * wait ran out: a re-base must not be lost). A counter that kept racing with folds keeps its
 * previous value: its next change brings the exact one. Returns 0.
 *
 * A global function (rss.bpf.c): the verifier checks its body once per program, with unknown
 * arguments, instead of once per call site in the caller's state. Inlined four times into fork
 * and exec (every member), the read's retries and the peak keeping's branches multiplied into
 * ~29,000 instructions and 40-50 ms of verification per program, at every run's start.
 */
int mt_rss_rebase(__u32 tgid, __u32 tid, __u32 member, __u64 mm, __u32 force);

/* Every counter of mm (0: every counter to 0), see mt_rss_rebase. */
static __always_inline void mt_rss_seed(__u32 tgid, __u32 tid, __u64 mm)
{
	for (__u32 m = 0; m < MT_RSS_NR; m++)
		mt_rss_rebase(tgid, tid, m, mm, 1);
}

/* What fork, exec, exit and rss_stat ask of mt_rebase (process.bpf.c), which they tail-call. */
struct mt_rebase_req {
	__u64 mm; /* the mm whose counters are read; 0: every counter to 0 (exit) */
	__u32 tgid, tid;
	__u32 locked; /* the caller holds the process's lock */
	__u32 exit;
	__u32 one;    /* 1: counter `member` only, not forced (rss_stat); 0: all, forced */
	__u32 member;
	__u32 slot; /* rebase_prog's slot, 0: see mt_rebase_tail */
};

struct mt_rebase_req_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_rebase_req);
};
extern struct mt_rebase_req_map rebase_req SEC(".maps");

struct mt_rebase_prog_map {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
};
extern struct mt_rebase_prog_map rebase_prog SEC(".maps");

/*
 * Tail call into mt_rebase with request `r`; returns only if the slot is empty. The slot is read
 * back from map memory, which the verifier does not know: to it the key is not a constant, so
 * the call is indirect. With a constant key the JIT makes a direct jump, and filling the slot
 * patches it into every caller's text (text_poke: three rounds of IPIs to every CPU, ~1.3 ms
 * for the four callers on this 2-vCPU VM, between the load and the command's release).
 * Indirect costs a bounds check and a retpoline per call.
 */
static __always_inline void mt_rebase_tail(void *ctx, struct mt_rebase_req *r)
{
	r->slot = 0;
	bpf_tail_call(ctx, &rebase_prog, *(volatile __u32 *)&r->slot);
}

#endif
