// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The USDT probes of include/memtrack.h (MEMTRACK_START, _STOP, _MARK): one uprobe per note
 * (src/track/usdt.c), its cookie the kind and, for MARK, where its string pointer is. Writes a
 * MT_EV_MARKER record, after the name's MT_EV_MARKER_NAME parts for MARK. Rare: a window is
 * opened a few times per run, so nothing here is tuned.
 */
#include "bpf/maps.bpf.h"

static __always_inline int mt_marker(struct pt_regs *ctx)
{
	__u64 id = mt_current_ids();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 kind = cookie & 0xff, off = (cookie >> 8) & 0xffff;
	char name[3 * MT_MARK_NAME_PART] = {};
	struct mt_event *e;
	long len = 0;

	if (!bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	if (kind == MT_MARK_MARK && off != MT_MARK_NO_ARG && off <= 8 * 33) {
		/* ctx as a plain number: the register's offset is only known at run time */
		__u64 regs = (__u64)ctx, ptr = 0;

		asm volatile("" : "+r"(regs));
		if (!bpf_probe_read_kernel(&ptr, sizeof(ptr), (void *)(regs + off)))
			len = bpf_probe_read_user_str(name, MT_MARK_NAME_MAX + 1, (void *)ptr);
		len = len > 0 ? len - 1 : 0; /* without its NUL */
	}
	for (__u32 i = 0; i < 3; i++) {
		if (i * MT_MARK_NAME_PART >= len)
			break;
		e = mt_reserve(MT_EV_MARKER_NAME, tgid, tid);
		if (!e)
			break;
		e->aux = i;
		__builtin_memcpy(&e->addr, name + i * MT_MARK_NAME_PART, MT_MARK_NAME_PART);
		mt_submit(e, false);
	}
	e = mt_reserve(MT_EV_MARKER, tgid, tid);
	if (!e)
		return 0;
	e->aux = kind;
	e->size = len;
	/* not urgent: a program calling START/STOP in a loop would pay a wake-up of memtrack
	 * per call (measured: ~8 us a call with it) */
	mt_submit(e, false);
	return 0;
}

/* As for the allocator programs: one copy for uprobe_multi links, one for perf uprobes. */
SEC("uprobe")
int mt_marker_multi(struct pt_regs *ctx)
{
	return mt_marker(ctx);
}

SEC("uprobe")
int mt_marker_perf(struct pt_regs *ctx)
{
	return mt_marker(ctx);
}
