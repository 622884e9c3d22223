// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The preload interposer's registration: a uprobe on its function __memtrack_preload_served
 * (src/preload/preload_ring.c), which it calls once it has decided to record this image's
 * glibc and C++ allocator calls, before the first of them reaches glibc. Only processes that
 * load the interposer trap here, once per image: no cost to any other process.
 */
#include "bpf/maps.bpf.h"

SEC("uprobe")
int mt_preload_served(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct mt_proc *p = bpf_map_lookup_elem(&procs, &tgid);

	if (p)
		p->served = 1;
	return 0;
}

/* The interposer's failure (__memtrack_preload_unserved): it was loaded into a tracked process
 * and could not record there. Counted, so the run says it is incomplete: never a silent loss
 * (glibc's uprobes, when attached, still record the process, which is not marked served). */
SEC("uprobe")
int mt_preload_unserved(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (bpf_map_lookup_elem(&procs, &tgid))
		mt_drop(MT_DROP_UNSERVED);
	return 0;
}
