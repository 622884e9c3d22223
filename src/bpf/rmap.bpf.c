// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * rmap mode, tracepoint backend (kernels that refuse fentry, like this one): the page-level
 * changes are the rss_stat changes (rss.bpf.h writes an Rmap record for each); these programs
 * only supply addresses: the last fault of each tracked thread on a user address (from user
 * mode, or from kernel mode: read(2) into a fresh buffer faults in copy_to_user), and the range
 * of the address-space syscall in progress. Attached only with --rmap: sys_enter/sys_exit fire
 * for every syscall of the machine.
 */
#include "bpf/maps.bpf.h"

/* x86-64 syscall numbers: another architecture has its own table (arm64's asm-generic numbers
 * differ for all of these), so building for it must stop here rather than watch the wrong
 * syscalls. */
#if !defined(__TARGET_ARCH_x86)
#error "rmap.bpf.c: MT_NR_* are x86-64 syscall numbers; add this architecture's"
#endif
#define MT_NR_MMAP	       9
#define MT_NR_MUNMAP	       11
#define MT_NR_BRK	       12
#define MT_NR_MREMAP	       25
#define MT_NR_MADVISE	       28
#define MT_NR_SHMDT	       67
#define MT_NR_MLOCK	       149
#define MT_NR_MLOCKALL	       151
#define MT_NR_MLOCK2	       325

#define MT_MAP_FIXED	       0x10
#define MT_MAP_FIXED_NOREPLACE 0x100000
#define MT_MREMAP_FIXED	       2

extern const volatile __u32 mt_page_shift;

/* The current thread's state if it belongs to a tracked process, created when missing. */
static __always_inline struct mt_thread *mt_rmap_thread(void)
{
	__u32 tgid = mt_current_ids() >> 32;

	if (!bpf_map_lookup_elem(&procs, &tgid))
		return NULL;
	return mt_thread_create();
}

static __always_inline void mt_rmap_fault(__u64 address)
{
	struct mt_thread *t = mt_rmap_thread();

	if (t)
		t->fault_addr = address & ~((1ull << mt_page_shift) - 1);
}

/* exceptions:page_fault_user(address, regs, error_code) */
SEC("raw_tp/page_fault_user")
int mt_on_page_fault_user(struct bpf_raw_tracepoint_args *ctx)
{
	mt_rmap_fault(ctx->args[0]);
	return 0;
}

/* exceptions:page_fault_kernel(address, regs, error_code): the kernel touching user memory
 * for the task (copy_to_user of read(2), futexes...). Kernel addresses are not pages of ours. */
SEC("raw_tp/page_fault_kernel")
int mt_on_page_fault_kernel(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 address = ctx->args[0];

	if ((__s64)address > 0) /* the user half of the address space */
		mt_rmap_fault(address);
	return 0;
}

/*
 * Where the syscall will change pages first; it changes them in address order from there.
 * 0 when that is not known at entry (mmap without MAP_FIXED: the range is its result;
 * mlockall; mremap growing or moving without MREMAP_FIXED).
 */
static __always_inline __u64 mt_sys_range_start(long id, struct pt_regs *regs)
{
	__u64 page_mask = ~((1ull << mt_page_shift) - 1);
	__u64 a0 = PT_REGS_PARM1_CORE_SYSCALL(regs);

	switch (id) {
	case MT_NR_MUNMAP:
	case MT_NR_MADVISE:
	case MT_NR_MLOCK:
	case MT_NR_MLOCK2:
	case MT_NR_SHMDT:
		return a0 & page_mask;
	case MT_NR_BRK: /* lowering: the pages from the new break, rounded up, go */
		return (a0 + ~page_mask) & page_mask;
	case MT_NR_MMAP: /* MAP_FIXED over a mapping unmaps what was there first */
		if (PT_REGS_PARM4_CORE_SYSCALL(regs) & (MT_MAP_FIXED | MT_MAP_FIXED_NOREPLACE))
			return a0 & page_mask;
		return 0;
	case MT_NR_MREMAP: {
		__u64 old_len = (PT_REGS_PARM2_CORE_SYSCALL(regs) + ~page_mask) & page_mask;
		__u64 new_len = (PT_REGS_PARM3_CORE_SYSCALL(regs) + ~page_mask) & page_mask;

		if (new_len < old_len) /* shrinking: the tail goes */
			return (a0 & page_mask) + new_len;
		if (PT_REGS_PARM4_CORE_SYSCALL(regs) & MT_MREMAP_FIXED) /* target unmapped first */
			return PT_REGS_PARM5_CORE_SYSCALL(regs) & page_mask;
		return 0;
	}
	default:
		return 0;
	}
}

/* The syscalls that change pages of the caller's mm in an address range. */
static __always_inline bool mt_sys_ranged(long id)
{
	return id == MT_NR_MUNMAP || id == MT_NR_MADVISE || id == MT_NR_MREMAP || id == MT_NR_BRK ||
	       id == MT_NR_MMAP || id == MT_NR_MLOCK || id == MT_NR_MLOCK2 ||
	       id == MT_NR_MLOCKALL || id == MT_NR_SHMDT;
}

/* raw_syscalls:sys_enter(regs, id) */
SEC("raw_tp/sys_enter")
int mt_on_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	long id = (long)ctx->args[1];
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
	struct mt_thread *t;

	if (!mt_sys_ranged(id))
		return 0;
	t = mt_rmap_thread();
	if (!t)
		return 0;
	t->range_start = mt_sys_range_start(id, regs);
	t->range_done = 0;
	t->in_sys = 1;
	return 0;
}

/* raw_syscalls:sys_exit(regs, ret) */
SEC("raw_tp/sys_exit")
int mt_on_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
	struct mt_thread *t;

	/* every syscall of the machine comes here: filter before the storage lookup (orig_ax
	 * keeps the syscall number on x86-64, like the MT_NR_* numbers) */
	if (!mt_sys_ranged((long)BPF_CORE_READ(regs, orig_ax)))
		return 0;
	t = mt_thread_get();
	if (t) {
		t->range_start = 0;
		t->in_sys = 0;
	}
	return 0;
}
