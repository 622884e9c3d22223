// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Allocator calls, from uprobes on every allocator entry point of the libraries the tracked
 * tree maps. The cookie of each site (probe_spec.h) says what the call means, so two programs
 * serve all sites. Nesting: a per-thread depth counts hooked calls in progress; only the
 * outermost call is written (operator new -> malloc, realloc(NULL, n) -> malloc, mimalloc's
 * malloc -> mi_malloc), so every user-visible allocation gives exactly one record.
 */
#include "bpf/maps.bpf.h"
#include "bpf/probe_spec.h"

/*
 * --stacks: bytes of user stack to copy with each allocation record, 0 = no stacks (the
 * records stay 48 bytes). Set by user space before load; at most MT_USTACK_MAX.
 */
const volatile __u32 mt_ustack_bytes = 0;

/* A record with its stack is built here, then copied into the ring with its real length:
 * bpf_ringbuf_reserve wants a constant size, bpf_ringbuf_output does not. */
struct mt_ustack_rec {
	struct mt_event ev;
	struct mt_ustack us;
	__u8 data[MT_USTACK_MAX + 4096]; /* + a page of slack: the verifier sees every copy fit */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_ustack_rec);
} ustack_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MT_USTACK_LOST_NR);
	__type(key, __u32);
	__type(value, __u64);
} ustack_lost SEC(".maps");

static __always_inline void mt_ustack_lost(__u32 why)
{
	__u64 *n = bpf_map_lookup_elem(&ustack_lost, &why);

	if (n)
		*n += 1;
}

/*
 * Copies the stack from sp upwards, a page at a time: a read that crosses into an unmapped page
 * fails whole, and the top of a stack is the end of its mapping. Returns the bytes copied.
 */
static __always_inline __u32 mt_ustack_copy(struct mt_ustack_rec *r, __u64 sp, __u64 want)
{
	__u64 done = 0;

	for (int i = 0; i < MT_USTACK_MAX / 4096 + 1; i++) {
		__u64 n = 4096 - ((sp + done) & 4095), rest;

		if (done >= want || done > MT_USTACK_MAX)
			break;
		/*
		 * For 6.1's verifier (6.12's needs none of this): it keeps a spilled scalar's
		 * state, and so what a later test learns about it, only when the scalar has
		 * some bound (unbounded ones are spilled as plain bytes until 6.8), and the
		 * compiler spills n before testing it, then reloads it for the call: the read
		 * was refused ("R2 min value is negative"). rest <= want <= MT_USTACK_MAX, so
		 * the mask changes nothing but gives rest, and n, a bound; the barriers stop the
		 * compiler from dropping the mask and the n > 4096 test, which it knows hold.
		 */
		rest = want - done;
		barrier_var(rest);
		rest &= 2 * MT_USTACK_MAX - 1;
		if (n > rest)
			n = rest;
		if (n == 0)
			break;
		barrier_var(n);
		if (n > 4096)
			break;
		if (bpf_probe_read_user(&r->data[done], n, (void *)(sp + done)))
			break;
		done += n;
	}
	return done;
}

/*
 * The return addresses above sp that uretprobes replaced with the trampoline: the kernel keeps
 * the originals in the task's return instances, newest first. The newest is the allocator's own
 * (its slot is below sp); the others are probed functions in progress further up (dlopen).
 */
static __always_inline void mt_ustack_rets(struct mt_ustack_rec *r, __u64 sp)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct return_instance *ri = BPF_CORE_READ(task, utask, return_instances);
	__u32 n = 0;

	for (int i = 0; i < 8 && ri && n < MT_USTACK_RETS; i++) {
		__u64 slot = BPF_CORE_READ(ri, stack);

		if (slot >= sp) {
			r->us.rets[n][0] = slot;
			r->us.rets[n][1] = BPF_CORE_READ(ri, orig_ret_vaddr);
			n++;
		}
		ri = BPF_CORE_READ(ri, next);
	}
	r->us.nr_rets = n;
	r->us.pad = 0;
}

/*
 * --stacks: stops the process at its image's first allocation with a stack, so that user space
 * reads its maps while it is alive (MT_EV_CTL_MAPS_STOPPED): the stacks are unwound when their
 * records are consumed, and a short-lived process is gone by then. Its linked libraries are
 * mapped by now (the loader's own allocator is not the one probed); later ones come with a
 * dlopen stop. One stop per image: the first thread to get here takes it. A stop that cannot
 * be written is tried again at the next allocation.
 */
static __always_inline void mt_maps_stop(struct mt_proc *p, __u32 tgid, __u32 tid)
{
	struct mt_event *e;

	if (p->maps_stop || __sync_fetch_and_add(&p->maps_stop, 1))
		return;
	e = mt_reserve(MT_EV_CTL_MAPS_STOPPED, tgid, tid);
	if (!e) {
		p->maps_stop = 0;
		return;
	}
	mt_stop_submit(e);
}

/*
 * Writes an allocation record, with the caller's stack when --stacks asked for one. Called at
 * the return of the outermost call: ip is the return address into the caller (the kernel puts
 * it back before the return probes run), sp points just above it, and the callee-saved
 * registers are the caller's again, which is what unwinding from the caller's frame needs. A
 * stack taken here cannot belong to another record: it is written with its own.
 */
static __always_inline void mt_emit_alloc(struct pt_regs *ctx, struct mt_proc *p, __u32 type,
					  __u32 tgid, __u32 tid, __u64 addr, __u64 size,
					  __u64 old_addr)
{
	struct mt_ustack_rec *r;
	__u32 zero = 0, got;
	__u64 sp, top, len, pending, want = mt_ustack_bytes, flags = BPF_RB_NO_WAKEUP;

	if (!want || !(r = bpf_map_lookup_elem(&ustack_scratch, &zero))) {
		mt_emit(type, tgid, tid, addr, size, old_addr);
		return;
	}
	mt_maps_stop(p, tgid, tid);
	sp = PT_REGS_SP(ctx);
	/* The main thread's outermost frame (_start) is just below where the kernel put argc:
	 * what lies above (argv, the environment, the auxiliary vector) is no frame's, and
	 * copying it cost more than the frames themselves in a shallow program. */
	if (tgid == tid) {
		top = BPF_CORE_READ(bpf_get_current_task_btf(), mm, start_stack);
		if (top > sp && top - sp + 16 < want)
			want = (top - sp + 16 + 7) & ~7ull;
	}
	got = mt_ustack_copy(r, sp, want);
	if (!got) {
		mt_ustack_lost(MT_USTACK_LOST_COPY);
		mt_emit(type, tgid, tid, addr, size, old_addr);
		return;
	}
	r->ev.type = type;
	r->ev.pid = tgid;
	r->ev.tid = tid;
	r->ev.aux = 0;
	r->ev.ts = bpf_ktime_get_ns();
	r->ev.addr = addr;
	r->ev.size = size;
	r->ev.old_addr = old_addr;
	r->us.regs[MT_UREG_IP] = PT_REGS_IP(ctx);
	r->us.regs[MT_UREG_SP] = sp;
	r->us.regs[MT_UREG_BP] = PT_REGS_FP(ctx);
	r->us.regs[MT_UREG_BX] = ctx->bx;
	r->us.regs[MT_UREG_R12] = ctx->r12;
	r->us.regs[MT_UREG_R13] = ctx->r13;
	r->us.regs[MT_UREG_R14] = ctx->r14;
	r->us.regs[MT_UREG_R15] = ctx->r15;
	r->us.size = got;
	r->us.flags = got == want ? MT_USTACK_CUT : 0;
	mt_ustack_rets(r, sp);
	len = sizeof(r->ev) + sizeof(r->us) + got;
	if (len > sizeof(*r))
		return; /* cannot happen: the copy is bounded; the verifier wants it said */
	pending = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	/* Stacks go first when the consumer falls behind: past half the ring, records are written
	 * without one, so that the ring's other half still takes every record. */
	if (pending + len > bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 2) {
		mt_ustack_lost(MT_USTACK_LOST_RING);
		mt_emit(type, tgid, tid, addr, size, old_addr);
		return;
	}
	if (pending + len >= mt_wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&events, r, len, flags)) {
		/* no room for the stack: the record alone still may fit */
		mt_ustack_lost(MT_USTACK_LOST_RING);
		mt_emit(type, tgid, tid, addr, size, old_addr);
	}
}

/* The first four arguments, read once: an index into ctx computed at run time is refused. */
struct mt_args {
	__u64 a[4];
};

static __always_inline void mt_args_read(struct pt_regs *ctx, struct mt_args *r)
{
	r->a[0] = PT_REGS_PARM1(ctx);
	r->a[1] = PT_REGS_PARM2(ctx);
	r->a[2] = PT_REGS_PARM3(ctx);
	r->a[3] = PT_REGS_PARM4(ctx);
}

/*
 * Is this call a direct one (call rel32) from the probed file's own code to the function's
 * entry? Those are the library's internal business (glibc: the tcache flush at thread exit
 * calls __libc_free, the address of free); an LD_PRELOAD interposer never sees them, since it
 * only replaces what goes through symbol lookup: the PLT, the GOT, dlsym. At the entry probe,
 * before or after flag-only instructions (probe_place.h), [rsp] is still the return address;
 * the five bytes before it are the call. The target must be this very entry: a call to a PLT
 * stub, an indirect call or one into another function that then jumps here never matches, and
 * no other instruction that ends at a return address has a displacement that lands on it.
 * Costs two reads of user memory, both on pages the call just touched.
 */
static __always_inline bool mt_direct_self_call(struct pt_regs *ctx, __u32 spec)
{
	__u64 ret, entry = PT_REGS_IP(ctx) - MT_SPEC_AT(spec);
	__u8 call[5];
	__s32 rel;

	if (bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx)) ||
	    bpf_probe_read_user(call, sizeof(call), (void *)(ret - 5)) || call[0] != 0xe8)
		return false;
	__builtin_memcpy(&rel, &call[1], sizeof(rel));
	return ret + (__s64)rel == entry;
}

static __always_inline int mt_alloc_entry(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct mt_thread *t;
	struct mt_args args;
	struct mt_proc *p;
	bool outer, internal;
	__u32 spec;

	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return 0;
	spec = (__u32)bpf_get_attach_cookie(ctx);
	if (spec & MT_SPEC_DLOPEN)
		return 0; /* not an allocator: what it allocates inside is the program's own */
	if ((spec & MT_SPEC_PL) && p->served)
		return 0; /* the interposer records it (proc.h); its return is skipped alike */
	mt_args_read(ctx, &args);
	t = mt_thread_get();
	outer = !t || t->depth == 0;
	/* an internal call is not the user's, nor is anything it calls: it is tracked like an
	 * outermost call (depth, so its return probe is matched) but writes nothing */
	internal = outer && (spec & MT_SPEC_SELF) && mt_direct_self_call(ctx, spec);
	if (spec & MT_SPEC_FREE) {
		__u64 ptr = args.a[MT_SPEC_PTR(spec)];

		/* free(NULL) is a no-op for every allocator: not an event */
		if (outer && !internal && ptr)
			mt_emit(MT_EV_FREE, tgid, tid, ptr, 0, 0);
		if (spec & MT_SPEC_LEAF)
			return 0;
	}
	if (!t) {
		/* a thread's first call that needs state (a leaf free needs none) */
		t = mt_thread_create();
		if (!t)
			return 0;
	}
	if (t->depth > MT_MAX_DEPTH) {
		/* Returns went missing (longjmp out of an allocator, a probe lost): start over
		 * rather than silence this thread forever. */
		mt_drop(MT_DROP_NEST_OVERFLOW);
		t->depth = 0;
	}
	if (t->depth++ == 0) {
		__u64 size = 0;

		if (internal) {
			t->spec = MT_SPEC_FREE; /* its return writes nothing */
			return 0;
		}
		if (spec & MT_SPEC_HAS_SIZE)
			size = args.a[MT_SPEC_SIZE(spec)];
		if (spec & MT_SPEC_PRODUCT)
			size *= args.a[MT_SPEC_NMEMB(spec)];
		t->spec = spec;
		t->a0 = (spec & (MT_SPEC_OLD | MT_SPEC_MEMPTR)) ? args.a[MT_SPEC_PTR(spec)] : 0;
		t->a1 = size;
	}
	return 0;
}

static __always_inline int mt_alloc_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct mt_thread *t;
	struct mt_proc *p;
	__u64 ret, addr;
	__u32 spec;

	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return 0;
	spec = (__u32)bpf_get_attach_cookie(ctx);
	if (spec & MT_SPEC_DLOPEN) {
		/* A library may have been loaded: stop before the caller can use it, and let
		 * user space attach to it first (its constructors have run already). */
		struct mt_event *e = mt_reserve(MT_EV_CTL_DLOPEN_STOPPED, tgid, tid);

		if (e) {
			e->addr = PT_REGS_RC(ctx);
			mt_stop_submit(e);
		}
		return 0;
	}
	/* served is set only by the image itself, before its first call here, and cleared at
	 * exec: it cannot change between a call's entry and its return */
	if ((spec & MT_SPEC_PL) && p->served)
		return 0;
	t = mt_thread_get();
	if (!t || t->depth == 0) {
		mt_drop(MT_DROP_UNMATCHED_RET);
		return 0;
	}
	if (--t->depth)
		return 0;
	spec = t->spec;
	if (spec & MT_SPEC_FREE)
		return 0;
	ret = PT_REGS_RC(ctx);
	if (spec & MT_SPEC_MEMPTR) {
		/* posix_memalign: 0 on success, and only then is *memptr the block */
		if ((int)ret != 0 || bpf_probe_read_user(&addr, sizeof(addr), (void *)t->a0) || !addr)
			return 0;
		mt_emit_alloc(ctx, p, MT_SPEC_TYPE(spec), tgid, tid, addr, t->a1, 0);
		return 0;
	}
	if (spec & MT_SPEC_OLD) {
		if (!ret) {
			/* realloc(p, 0) freed p (glibc); any other NULL is a failure: p lives on */
			if (t->a1 == 0 && t->a0)
				mt_emit(MT_EV_FREE, tgid, tid, t->a0, 0, 0);
			return 0;
		}
		mt_emit_alloc(ctx, p, MT_EV_REALLOC, tgid, tid, ret, t->a1, t->a0);
		return 0;
	}
	if (ret)
		mt_emit_alloc(ctx, p, MT_SPEC_TYPE(spec), tgid, tid, ret, t->a1, 0);
	return 0;
}

/* Two copies of each: one loaded for uprobe_multi links (expected attach type set by user space
 * before load), one for perf-event uprobes; only the pair in use is loaded. */
SEC("uprobe")
int mt_alloc_entry_multi(struct pt_regs *ctx)
{
	return mt_alloc_entry(ctx);
}

SEC("uretprobe")
int mt_alloc_return_multi(struct pt_regs *ctx)
{
	return mt_alloc_return(ctx);
}

SEC("uprobe")
int mt_alloc_entry_perf(struct pt_regs *ctx)
{
	return mt_alloc_entry(ctx);
}

SEC("uretprobe")
int mt_alloc_return_perf(struct pt_regs *ctx)
{
	return mt_alloc_return(ctx);
}
