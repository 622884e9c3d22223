// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The preload interposer's registration: a uprobe on its function __memtrack_preload_served
 * (src/preload/preload_ring.c), which it calls once it has decided to record this image's
 * glibc and C++ allocator calls, before the first of them reaches glibc. Only processes that
 * load the interposer trap here, once per image: no cost to any other process.
 */
#include "bpf/maps.bpf.h"

/*
 * The interposer's two control points (src/preload/preload_ctl.c, preload_dl.c), told apart by
 * the cookie (MT_PRELOAD_CTL_*, proc.h). Registration: the interposer calls
 * __memtrack_preload_served once it has decided to record this image's glibc and C++
 * allocator calls, before the first of them reaches glibc. dlopen announcement: a dlsym found
 * objects added since it last looked; as at the return of glibc's dlopen in the uprobe path
 * (alloc.bpf.c), the process stops here until memtrack has inspected its mappings. Only
 * processes that load the interposer trap here, once per image or per dlsym after a load: no
 * cost to any other process.
 */
static __always_inline int mt_preload_ctl(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	struct mt_proc *p = bpf_map_lookup_elem(&procs, &tgid);
	struct mt_event *e;

	if (!p)
		return 0;
	if (bpf_get_attach_cookie(ctx) == MT_PRELOAD_CTL_SERVED) {
		p->served = 1;
		return 0;
	}
	if (bpf_get_attach_cookie(ctx) == MT_PRELOAD_CTL_UNSERVED) {
		mt_drop(MT_DROP_UNSERVED); /* glibc's uprobes, if attached, still record it */
		return 0;
	}
	e = mt_reserve(MT_EV_CTL_DLOPEN_STOPPED, tgid, (__u32)id);
	if (e)
		mt_stop_submit(e);
	return 0;
}

/* One link for both points where the kernel has uprobe_multi (one detach), else two perf
 * uprobes; only the program in use is loaded. */
SEC("uprobe")
int mt_preload_ctl_multi(struct pt_regs *ctx)
{
	return mt_preload_ctl(ctx);
}

SEC("uprobe")
int mt_preload_ctl_perf(struct pt_regs *ctx)
{
	return mt_preload_ctl(ctx);
}
