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
		mt_emit(MT_SPEC_TYPE(spec), tgid, tid, addr, t->a1, 0);
		return 0;
	}
	if (spec & MT_SPEC_OLD) {
		if (!ret) {
			/* realloc(p, 0) freed p (glibc); any other NULL is a failure: p lives on */
			if (t->a1 == 0 && t->a0)
				mt_emit(MT_EV_FREE, tgid, tid, t->a0, 0, 0);
			return 0;
		}
		mt_emit(MT_EV_REALLOC, tgid, tid, ret, t->a1, t->a0);
		return 0;
	}
	if (ret)
		mt_emit(MT_SPEC_TYPE(spec), tgid, tid, ret, t->a1, 0);
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
