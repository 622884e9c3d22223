// SPDX-License-Identifier: MIT
/*
 * The interposer -> memtrack control point. memtrack puts a uprobe on
 * __memtrack_preload_served (src/bpf/served.bpf.c): calling it tells the BPF side, in this
 * very thread and before anything else happens, that this image's glibc and C++ allocator
 * calls are recorded here, so the uprobes on glibc and libstdc++ (if a process that the
 * interposer cannot serve made memtrack attach them) skip this process. The interposer calls
 * it once per image, before its first call reaches the next malloc; a fork child inherits the
 * mark with its memory. No shared state, no waiting: the trap is the message.
 */
#include "preload/preload.h"

__attribute__((visibility("default"), noinline, used)) void __memtrack_preload_served(void)
{
	/* a body the compiler can neither drop nor merge with another function */
	__asm__ volatile("" ::: "memory");
}

/* The opposite message: the interposer was loaded in a tracked process (memtrack named its
 * shared memory in the environment) and cannot record there. memtrack counts it as a drop
 * (drops.unserved): a process is never left untracked silently. */
__attribute__((visibility("default"), noinline, used)) void __memtrack_preload_unserved(void)
{
	__asm__ volatile("" ::: "memory");
}

void pl_ctl_served(void)
{
	__memtrack_preload_served();
}

void pl_ctl_unserved(void)
{
	__memtrack_preload_unserved();
}
