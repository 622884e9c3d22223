// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * rmap mode, tracepoint backend (kernels that refuse fentry, like this one): the page-level
 * changes are the rss_stat changes (rss.bpf.h writes an Rmap record for each); these programs
 * only supply addresses: the last user page fault of each tracked thread, and the range of the
 * address-space syscall in progress. Attached only with --rmap: sys_enter/sys_exit fire for
 * every syscall of the machine.
 */
#include "bpf/maps.bpf.h"

#define MT_NR_BRK	       12
#define MT_NR_MUNMAP	       11
#define MT_NR_MREMAP	       25
#define MT_NR_MADVISE	       28

extern const volatile __u32 mt_page_shift;

static __always_inline struct mt_thread *mt_rmap_thread(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct mt_thread zero = {}, *t;

	if (!bpf_map_lookup_elem(&procs, &tgid))
		return NULL;
	t = bpf_map_lookup_elem(&threads, &tid);
	if (t)
		return t;
	if (bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&threads, &tid)) {
		mt_drop(MT_DROP_THREAD_MAP);
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

/* exceptions:page_fault_user(address, regs, error_code) */
SEC("raw_tp/page_fault_user")
int mt_on_page_fault_user(struct bpf_raw_tracepoint_args *ctx)
{
	struct mt_thread *t = mt_rmap_thread();

	if (t)
		t->fault_addr = ctx->args[0] & ~((1ull << mt_page_shift) - 1);
	return 0;
}

/* raw_syscalls:sys_enter(regs, id) */
SEC("raw_tp/sys_enter")
int mt_on_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	long id = (long)ctx->args[1];
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
	struct mt_thread *t;

	if (id != MT_NR_MUNMAP && id != MT_NR_MADVISE && id != MT_NR_MREMAP && id != MT_NR_BRK)
		return 0;
	t = mt_rmap_thread();
	if (!t)
		return 0;
	t->range_start = PT_REGS_PARM1_CORE_SYSCALL(regs);
	t->range_done = 0;
	return 0;
}

/* raw_syscalls:sys_exit(regs, ret) */
SEC("raw_tp/sys_exit")
int mt_on_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct mt_thread *t = bpf_map_lookup_elem(&threads, &tid);

	(void)ctx;
	if (t)
		t->range_start = 0;
	return 0;
}
