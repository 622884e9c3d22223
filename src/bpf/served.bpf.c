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

/*
 * The interposer's dlopen announcement (src/preload/preload_dl.c): a dlsym found objects added
 * since it last looked. As at the return of glibc's dlopen in the uprobe path (alloc.bpf.c),
 * the process stops here until memtrack has inspected its mappings. Only processes that load
 * the interposer reach this uprobe, and only when their set of objects grew.
 */
SEC("uprobe")
int mt_preload_dlopen(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct mt_event *e;

	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	e = mt_reserve(MT_EV_CTL_DLOPEN_STOPPED, tgid, (__u32)id);
	if (e) {
		mt_stop_submit(e);
	}
	return 0;
}
