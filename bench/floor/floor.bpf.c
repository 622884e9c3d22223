// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * memtrack-floor's programs: the least a probe of memtrack's design can do. Attached to the
 * same sites as memtrack's alloc.bpf.c, they only count hits of the one process user space
 * names before load: no map lookup but the per-CPU counter's (inlined array access), no
 * cookie, no ring. No CO-RE either, so loading parses no vmlinux BTF.
 */
#include "vmlinux.h" /* types only: nothing here is relocated (CO-RE) */
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* The counted thread group; set before load. Children of it are not counted. */
const volatile __u32 floor_tgid = 0;

enum { FLOOR_ENTRY = 0, FLOOR_RETURN = 1, FLOOR_NR };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FLOOR_NR);
	__type(key, __u32);
	__type(value, __u64);
} floor_hits SEC(".maps");

static __always_inline int floor_count(__u32 slot)
{
	__u64 *n;

	if ((bpf_get_current_pid_tgid() >> 32) != floor_tgid)
		return 0;
	n = bpf_map_lookup_elem(&floor_hits, &slot);
	if (n)
		*n += 1; /* per-CPU slot: no atomic needed */
	return 0;
}

SEC("uprobe")
int floor_entry(void *ctx)
{
	return floor_count(FLOOR_ENTRY);
}

SEC("uretprobe")
int floor_return(void *ctx)
{
	return floor_count(FLOOR_RETURN);
}
