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
	__u64 id = mt_current_ids();
	__u32 tgid = id >> 32;
	struct mt_proc *p = bpf_map_lookup_elem(&procs, &tgid);
	struct mt_event *e;

	if (!p)
		return 0;
	if (bpf_get_attach_cookie(ctx) == MT_PRELOAD_CTL_SERVED) {
		/* its argument: the interposer's flags, with the family it serves as malloc */
		p->served = MT_SERVED_LIBC | ((__u32)PT_REGS_PARM1(ctx) & MT_SERVED_FAMILIES);
		return 0;
	}
	if (bpf_get_attach_cookie(ctx) == MT_PRELOAD_CTL_UNSERVED) {
		/* glibc's uprobes, if attached, still record it: a fork child that left memtrack's
		 * pid namespace drops the served mark it inherited (preload_ring.c). Another
		 * user's image was judged at its exec stop: the uprobes record it, no loss. */
		if (!p->shm_denied)
			mt_drop(MT_DROP_UNSERVED);
		p->served = 0;
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

/*
 * Run by memtrack (BPF_PROG_TEST_RUN, args: pid, a CLOCK_MONOTONIC stamp, MT_MARK_* in the low
 * byte, for MT_MARK_SERVED with the registration's MT_SERVED_FAMILIES bits above it):
 * - MT_MARK_SERVED, for each image the interposer registered as served while its control link
 *   was not live yet (the registration is written before the served call: whichever of the
 *   two the link missed, memtrack's scan after the link went live sees the registration),
 *   stamped with the registration;
 * - MT_MARK_SHM_DENIED, at the exec stop of an image in another mount namespace whose /dev/shm
 *   does not hold the shared memory (MT_EXEC_OTHER_MNTNS): uprobes record it, and its
 *   interposer's refusal is no loss (mt_preload_ctl); stamped with the stop's record.
 * - MT_MARK_GLIBC / MT_MARK_GLIBC_OFF, at the exec stop of an image that needs glibc's uprobes
 *   (or not), auto mode: mt_proc.glibc_need, which memtrack reads to take those uprobes out
 *   once no process of the tree needs them (tracker_glibc.c).
 * Marks the process unless it has exec'd since, or is another process reusing the pid: its
 * image began after the stamp. Against an exec on another CPU: the mark is set first, then
 * image_ts read by an atomic (a full barrier), while the exec sets image_ts by an exchange
 * before clearing both marks (process.bpf.c): either this sees the exec's stamp and undoes the
 * mark, or the exec's clearing comes after the mark. Returns 1 when marked.
 * MT_MARK_GLIBC is set even on a later image: the exec keeps glibc_need until that image is
 * judged, and a need kept too long only keeps the uprobes in longer.
 */
SEC("raw_tp")
int mt_mark_proc(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 pid = (__u32)ctx->args[0];
	/* args[2]: the mark, and for MT_MARK_SERVED the families served (MT_SERVED_FAMILIES)
	 * shifted by 8 */
	__u64 ts = ctx->args[1], what = ctx->args[2] & 0xff;
	__u32 fam = (__u32)(ctx->args[2] >> 8) & MT_SERVED_FAMILIES;
	bool denied = what == MT_MARK_SHM_DENIED;
	struct mt_proc *p = bpf_map_lookup_elem(&procs, &pid);

	if (p && what == MT_MARK_GLIBC) {
		p->glibc_need = 1;
		return 1;
	}
	if (!p || p->image_ts > ts)
		return 0;
	if (what == MT_MARK_GLIBC_OFF) {
		p->glibc_need = 0;
		if (__sync_fetch_and_add(&p->image_ts, 0) > ts) {
			p->glibc_need = 1; /* a later image, not judged yet: kept */
			return 0;
		}
		return 1;
	}
	if (denied)
		p->shm_denied = 1;
	else
		p->served = MT_SERVED_LIBC | fam;
	if (__sync_fetch_and_add(&p->image_ts, 0) > ts) {
		if (denied)
			p->shm_denied = 0;
		else
			p->served = 0;
		return 0;
	}
	return 1;
}
