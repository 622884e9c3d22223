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

/*
 * A record with its stack is written straight into the ring: the stack is read into the reserved
 * record itself, not into a buffer first and then copied (bpf_ringbuf_output). Since
 * bpf_ringbuf_reserve wants a size the verifier knows, a record's stack part comes in classes:
 * the smallest multiple of MT_USTACK_STEP that holds the bytes wanted, each class its own
 * reservation (mt_ustack_class); the record's struct mt_ustack says how many of them were
 * copied. 1 KiB steps: ~512 B per record of slack on average (sqlite3's stacks are ~7 KiB).
 */
#define MT_USTACK_STEP 1024
#define MT_USTACK_CHUNK 4096 /* bytes per read */

struct mt_ustack_hdr {
	struct mt_event ev;
	struct mt_ustack us;
};

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
 * Copies want bytes of stack from sp into data, which holds cap (a constant: the class), in
 * chunks at constant offsets (the verifier then sees each read fit). Every byte of [sp, sp +
 * want) must be mapped (mt_ustack_want): a read that crosses into an unmapped page fails whole.
 * Returns the bytes copied, fewer only when a page was not present.
 */
static __always_inline __u32 mt_ustack_copy(__u8 *data, const __u32 cap, __u64 sp, __u64 want)
{
	__u32 done = 0;

	/* not unrolled (the classes would multiply the code): the verifier follows each pass with
	 * off and cap known */
	for (__u32 off = 0; off < cap; off += MT_USTACK_CHUNK) {
		__u64 n;

		if (off >= want)
			break;
		n = want - off;
		if (n > MT_USTACK_CHUNK)
			n = MT_USTACK_CHUNK;
		if (n > cap - off)
			n = cap - off;
		barrier_var(n);
		if (n > MT_USTACK_CHUNK || bpf_probe_read_user(data + off, n, (void *)(sp + off)))
			break;
		done = off + (__u32)n;
	}
	return done;
}

/*
 * The bytes of stack to copy from sp: mt_ustack_bytes, no further than the stack's mapping goes.
 * The main thread's outermost frame (_start) is just below where the kernel put argc: what lies
 * above (argv, the environment, the auxiliary vector) is no frame's, and copying it cost more
 * than the frames themselves in a shallow program. Elsewhere (another thread's stack, a
 * signal stack) the stack ends where its mapping does: at the first page above sp that cannot
 * be read (a byte read per page).
 */
static __always_inline __u64 mt_ustack_want(__u32 tgid, __u32 tid, __u64 sp)
{
	__u64 want = mt_ustack_bytes, top, page = sp & ~4095ull;
	__u8 b;

	if (tgid == tid) {
		top = BPF_CORE_READ(bpf_get_current_task_btf(), mm, start_stack);
		if (top > sp && top - sp + 16 < want)
			return (top - sp + 16 + 7) & ~7ull;
	}
#pragma unroll
	for (__u64 i = 1; i <= MT_USTACK_MAX / 4096; i++) {
		__u64 at = page + i * 4096;

		if (at >= sp + want)
			break;
		if (bpf_probe_read_user(&b, 1, (void *)at))
			return at - sp;
	}
	return want;
}

/*
 * Reserves a record of stack class cap (a constant) and copies the stack into it; NULL when the
 * ring has no room. *got: the bytes copied.
 */
static __always_inline struct mt_ustack_hdr *mt_ustack_class(const __u32 cap, __u64 sp,
							     __u64 want, __u32 *got)
{
	struct mt_ustack_hdr *h = bpf_ringbuf_reserve(&events, sizeof(*h) + cap, 0);

	if (h)
		*got = mt_ustack_copy((__u8 *)(h + 1), cap, sp, want);
	return h;
}

/*
 * The return addresses above sp that uretprobes replaced with the trampoline: the kernel keeps
 * the originals in the task's return instances, newest first. The newest is the allocator's own
 * (its slot is below sp); the others are probed functions in progress further up (dlopen).
 */
static __always_inline void mt_ustack_rets(struct mt_ustack *us, __u64 sp)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct return_instance *ri = BPF_CORE_READ(task, utask, return_instances);
	__u32 n = 0;

	for (int i = 0; i < 8 && ri && n < MT_USTACK_RETS; i++) {
		__u64 slot = BPF_CORE_READ(ri, stack);

		if (slot >= sp) {
			us->rets[n][0] = slot;
			us->rets[n][1] = BPF_CORE_READ(ri, orig_ret_vaddr);
			n++;
		}
		ri = BPF_CORE_READ(ri, next);
	}
	us->nr_rets = n;
	us->pad = 0;
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
 * Whether a record with a stack, which took the pending data from before to after, wakes the
 * consumer: past mt_wakeup_bytes, at each crossing of a sixteenth of it, not with every record
 * as mt_submit does. Each forced wake-up is an irq_work and an IPI, for nothing while the
 * consumer is already awake or waiting for a CPU (3% of sqlite3's time with --stacks, at 7 KiB
 * a record); a wake-up only at each multiple of mt_wakeup_bytes let the consumer fall behind
 * under load (the storm's records lost their stacks: 13-60k of 200k, against 0-6k).
 */
static __always_inline __u64 mt_ustack_wakeup(__u64 before, __u64 after)
{
	__u64 step = mt_wakeup_bytes / 16 + 1;

	if (after < mt_wakeup_bytes)
		return BPF_RB_NO_WAKEUP;
	return before < mt_wakeup_bytes || before / step != after / step ? BPF_RB_FORCE_WAKEUP
									 : BPF_RB_NO_WAKEUP;
}

/*
 * Writes an allocation record with the caller's stack (--stacks). Called at the return of the
 * outermost call: ip is the return address into the caller (the kernel puts it back before the
 * return probes run), sp points just above it, and the callee-saved registers are the caller's
 * again, which is what unwinding from the caller's frame needs. A stack taken here cannot
 * belong to another record: it is written with its own. The header is built on the BPF stack
 * first, so that what each class's path does after its reservation is one copy of it. A global
 * function: checked once, not once per call site (each multiplied by the classes). Returns 0.
 */
__noinline int mt_emit_ustack(struct pt_regs *ctx, __u32 type, __u64 addr, __u64 size,
			      __u64 old_addr)
{
	__u64 id = mt_current_ids(), sp = PT_REGS_SP(ctx), want, len, pending;
	__u32 tgid = id >> 32, tid = (__u32)id, got = 0;
	struct mt_ustack_hdr hdr, *h = NULL;

	want = mt_ustack_want(tgid, tid, sp);
	if (want > MT_USTACK_MAX)
		want = MT_USTACK_MAX;
	len = sizeof(hdr) + ((want + MT_USTACK_STEP - 1) & ~(__u64)(MT_USTACK_STEP - 1));
	pending = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	/* Stacks go first when the consumer falls behind: past half the ring, records are written
	 * without one, so that the ring's other half still takes every record. */
	if (pending + len > bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) / 2) {
		mt_ustack_lost(MT_USTACK_LOST_RING);
		mt_emit(type, tgid, tid, addr, size, old_addr);
		return 0;
	}
	hdr.ev.type = type;
	hdr.ev.pid = tgid;
	hdr.ev.tid = tid;
	hdr.ev.aux = 0;
	hdr.ev.ts = bpf_ktime_get_ns();
	hdr.ev.addr = addr;
	hdr.ev.size = size;
	hdr.ev.old_addr = old_addr;
	hdr.us.regs[MT_UREG_IP] = PT_REGS_IP(ctx);
	hdr.us.regs[MT_UREG_SP] = sp;
	hdr.us.regs[MT_UREG_BP] = PT_REGS_FP(ctx);
	hdr.us.regs[MT_UREG_BX] = ctx->bx;
	hdr.us.regs[MT_UREG_R12] = ctx->r12;
	hdr.us.regs[MT_UREG_R13] = ctx->r13;
	hdr.us.regs[MT_UREG_R14] = ctx->r14;
	hdr.us.regs[MT_UREG_R15] = ctx->r15;
	mt_ustack_rets(&hdr.us, sp);
	switch ((want + MT_USTACK_STEP - 1) / MT_USTACK_STEP) {
#define MT_USTACK_CLASS(k)                                                                         \
	case k:                                                                                    \
		h = mt_ustack_class((k) * MT_USTACK_STEP, sp, want, &got);                         \
		break;
		MT_USTACK_CLASS(1) MT_USTACK_CLASS(2) MT_USTACK_CLASS(3) MT_USTACK_CLASS(4)
		MT_USTACK_CLASS(5) MT_USTACK_CLASS(6) MT_USTACK_CLASS(7) MT_USTACK_CLASS(8)
		MT_USTACK_CLASS(9) MT_USTACK_CLASS(10) MT_USTACK_CLASS(11) MT_USTACK_CLASS(12)
		MT_USTACK_CLASS(13) MT_USTACK_CLASS(14) MT_USTACK_CLASS(15) MT_USTACK_CLASS(16)
#undef MT_USTACK_CLASS
	}
	_Static_assert(MT_USTACK_MAX == 16 * MT_USTACK_STEP, "a class per step up to the most");
	if (!h || !got) {
		/* no room for the stack (the record alone still may fit), or it could not be read */
		if (h)
			bpf_ringbuf_discard(h, BPF_RB_NO_WAKEUP);
		mt_ustack_lost(h ? MT_USTACK_LOST_COPY : MT_USTACK_LOST_RING);
		mt_emit(type, tgid, tid, addr, size, old_addr);
		return 0;
	}
	hdr.us.size = got;
	hdr.us.flags = got == mt_ustack_bytes ? MT_USTACK_CUT : 0;
	__builtin_memcpy(h, &hdr, sizeof(hdr));
	bpf_ringbuf_submit(h, mt_ustack_wakeup(pending, pending + len));
	return 0;
}

/* Writes an allocation record, with the caller's stack when --stacks asked for one. */
static __always_inline void mt_emit_alloc(struct pt_regs *ctx, struct mt_proc *p, __u32 type,
					  __u32 tgid, __u32 tid, __u64 addr, __u64 size,
					  __u64 old_addr)
{
	if (!mt_ustack_bytes) {
		mt_emit(type, tgid, tid, addr, size, old_addr);
		return;
	}
	mt_maps_stop(p, tgid, tid);
	mt_emit_ustack(ctx, type, addr, size, old_addr);
}

/* The first four arguments, read once: an index into ctx computed at run time is refused. */
struct mt_args {
	__u64 a[4];
};

/* Does the interposer record this site's calls for process p (MT_SPEC_PL, mt_proc.served)?
 * glibc's and libstdc++'s for any process it serves; a family library's only for the one
 * whose malloc that family is. */
static __always_inline bool mt_pl_skip(__u32 spec, const struct mt_proc *p)
{
	__u32 fam = MT_SPEC_FAM(spec);

	if (!(spec & MT_SPEC_PL) || !p->served)
		return false;
	return !fam || (p->served & MT_SERVED_FAM_BIT(fam));
}

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
 * at the function's start or past instructions that write neither memory nor %rsp
 * (probe_place.h; MT_SPEC_AT bytes on), [rsp] is still the return address;
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

/* A site of glibc's links of another generation than the one in now (taken out, still
 * closing): it does nothing (probe_spec.h, MT_COOKIE_GEN). */
static __always_inline bool mt_site_stale(__u64 cookie)
{
	__u32 key = 13, gen = MT_COOKIE_GEN(cookie);
	__u64 *now;

	if (!gen)
		return false;
	now = bpf_map_lookup_elem(&stop_ctl, &key);
	return !now || *now != gen;
}

/* What the entry tells a session's kernel (the session programs below): its return has nothing
 * to do, do not prepare it (UPROBE_HANDLER_IGNORE), or run it. */
#define MT_RETURN_SKIP 1
#define MT_RETURN_RUN  0

/* a * b, or ~0 when it does not fit in 64 bits. In halves: clang turns the usual overflow
 * tests into a 128-bit multiplication, which BPF has not. */
static __always_inline __u64 mt_mul_sat(__u64 a, __u64 b)
{
	__u64 hi, lo;

	if (!(a >> 32) && !(b >> 32))
		return a * b;
	if ((a >> 32) && (b >> 32))
		return ~0ull;
	if (a >> 32) { /* a: the factor below 2^32 */
		hi = a;
		a = b;
		b = hi;
	}
	hi = a * (b >> 32);
	if (hi >> 32)
		return ~0ull;
	lo = a * (b & 0xffffffffull);
	return lo + (hi << 32) < lo ? ~0ull : lo + (hi << 32);
}

/* A call's entry. MT_RETURN_SKIP when its return would do nothing: a process outside the tree,
 * or one the interposer records (the return checks the same). */
static __always_inline int mt_alloc_entry(struct pt_regs *ctx)
{
	__u64 id = mt_current_ids();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct mt_thread *t;
	struct mt_args args;
	struct mt_proc *p;
	bool outer, internal;
	__u64 cookie;
	__u32 spec;

	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return MT_RETURN_SKIP;
	cookie = bpf_get_attach_cookie(ctx);
	if (mt_site_stale(cookie))
		return MT_RETURN_SKIP;
	spec = (__u32)cookie;
	/* not an allocator: its return stops (library discovery), but for a process the
	 * interposer serves, which announces its dlopens itself (src/preload/preload_dl.c) */
	if (spec & MT_SPEC_DLOPEN)
		return p->served ? MT_RETURN_SKIP : MT_RETURN_RUN;
	if (mt_pl_skip(spec, p))
		return MT_RETURN_SKIP; /* the interposer records it (proc.h); its return skips too
					*/
	mt_args_read(ctx, &args);
	t = mt_thread_get();
	outer = !t || t->depth == 0;
	/* Under an internal call, a free it makes through its PLT is what an interposer sees of
	 * it: libLLVM's operator delete, called directly from LLVM's own code (internal), is
	 * `jmp free@plt`. Counted as nested, those frees were lost: rustc (an executable with
	 * jemalloc, on uprobes) lost half of its frees. */
	if (!outer && (spec & MT_SPEC_FREE) && t->depth == 1 && t->internal)
		outer = true;
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

		t->internal = internal;
		if (internal) {
			t->spec = MT_SPEC_FREE; /* its return writes nothing */
			return 0;
		}
		if (spec & MT_SPEC_HAS_SIZE)
			size = args.a[MT_SPEC_SIZE(spec)];
		/* saturated: a wrapped product of 0 would make a failed reallocarray's NULL
		 * read as realloc(p, 0)'s free (the interposer's pl_product) */
		if (spec & MT_SPEC_PRODUCT)
			size = mt_mul_sat(size, args.a[MT_SPEC_NMEMB(spec)]);
		t->spec = spec;
		t->a0 = (spec & (MT_SPEC_OLD | MT_SPEC_MEMPTR)) ? args.a[MT_SPEC_PTR(spec)] : 0;
		t->a1 = size;
	}
	return 0;
}

static __always_inline int mt_alloc_return(struct pt_regs *ctx)
{
	__u64 id = mt_current_ids();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct mt_thread *t;
	struct mt_proc *p;
	__u64 ret, addr, cookie;
	__u32 spec;

	p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return 0;
	cookie = bpf_get_attach_cookie(ctx);
	if (mt_site_stale(cookie))
		return 0;
	spec = (__u32)cookie;
	if (spec & MT_SPEC_DLOPEN) {
		/* A library may have been loaded: stop before the caller can use it, and let
		 * user space attach to it first (its constructors have run already). A process
		 * the interposer serves announces it at its next dlsym instead (preload_dl.c);
		 * until it is marked served it stops here. */
		struct mt_event *e;

		if (p->served)
			return 0;
		e = mt_reserve(MT_EV_CTL_DLOPEN_STOPPED, tgid, tid);

		if (e) {
			e->addr = PT_REGS_RC(ctx);
			mt_stop_submit(e);
		}
		return 0;
	}
	/* served is set only by the image itself, before its first call here, and cleared at
	 * exec: it cannot change between a call's entry and its return */
	if (mt_pl_skip(spec, p))
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
 * before load), one for perf-event uprobes; only the pair in use is loaded. A plain uprobe's
 * return value is not ours to set (a perf uprobe's non-zero also writes a perf sample). */
SEC("uprobe")
int mt_alloc_entry_multi(struct pt_regs *ctx)
{
	mt_alloc_entry(ctx);
	return 0;
}

SEC("uretprobe")
int mt_alloc_return_multi(struct pt_regs *ctx)
{
	return mt_alloc_return(ctx);
}

SEC("uprobe")
int mt_alloc_entry_perf(struct pt_regs *ctx)
{
	mt_alloc_entry(ctx);
	return 0;
}

/*
 * A uprobe session (Linux 6.13+; loaded with BPF_TRACE_UPROBE_SESSION, linked by
 * attach_set__multi): one link per library for every site with a return probe, this program
 * run at the entry and at the return. Separate return probes make the kernel replace the return
 * address of every call, by any process of the machine, and trap again at the return; here the
 * entry's MT_RETURN_SKIP tells it not to: a process outside the tree, or one the interposer
 * serves, pays one trap per call, not two, and its stack keeps its return addresses (an unwinder
 * in process, the interposer's, stopped at the replaced one: "[uprobes]"). A call that began
 * before the link was made has no return prepared either: no unmatched return.
 *
 * Entry or return: not by the kfunc bpf_session_is_return, whose resolution makes libbpf parse
 * the whole kernel BTF at each load (+15 ms here, where the programs relocate against a small
 * cached one), but by the registers: at the entry the ip is the probed first instruction (the
 * function's, bpf_get_func_ip; or the byte after the breakpoint), at the return the caller's
 * return address, which cannot lie there.
 */
SEC("uprobe")
int mt_alloc_session(struct pt_regs *ctx)
{
	if (PT_REGS_IP(ctx) - bpf_get_func_ip(ctx) > 1)
		return mt_alloc_return(ctx);
	return mt_alloc_entry(ctx);
}

SEC("uretprobe")
int mt_alloc_return_perf(struct pt_regs *ctx)
{
	return mt_alloc_return(ctx);
}
