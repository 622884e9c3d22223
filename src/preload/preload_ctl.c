// SPDX-License-Identifier: MIT
/*
 * The interposer -> memtrack control points. memtrack puts a uprobe on each (one
 * uprobe_multi link, src/bpf/served.bpf.c): a call of __memtrack_preload_served tells the BPF
 * side, in this very thread and before anything else happens, that this image's glibc and C++
 * allocator calls are recorded here (and which family library, if any, is its malloc, served
 * too: its argument), so the uprobes on glibc and libstdc++ (if a process that
 * the interposer cannot serve made memtrack attach them) skip this process. The interposer
 * calls it once per image, before its first call reaches the next malloc; a fork child
 * inherits the mark with its memory.
 *
 * The link is made while the command already runs (it waits out an RCU grace period in the
 * kernel, ~10 ms): until memtrack sets the header's ctl_live, a call may not trap. So:
 * - served: the image registers in the shared memory first (preload_ring.c); memtrack scans
 *   the registrations once the link is live, and attaches glibc's uprobes only after that
 *   scan: whichever the link missed, the call or nothing, the scan finds the registration.
 *   A fork child of an image whose call may have been missed registers and calls again at the
 *   fork (the BPF side copied an unmarked parent's state).
 * - unserved: counted in the header (memtrack adds it to drops.unserved) instead of calling.
 * - dlopen (preload_dl.c): waits for ctl_live first (pl_ctl_wait_live).
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "preload/preload.h"

/* flags: this image's MT_SHM_PROC_* (the BPF side keeps the families it serves as malloc) */
__attribute__((visibility("default"), noinline, used)) void
__memtrack_preload_served(uint32_t flags)
{
	/* a body the compiler can neither drop nor merge with another function */
	__asm__ volatile(PL_CTL_FIRST ::"r"(flags) : "memory");
}

/* The opposite message: the interposer was loaded in a tracked process (memtrack named its
 * shared memory in the environment) and cannot record there. memtrack counts it as a drop
 * (drops.unserved): a process is never left untracked silently. */
__attribute__((visibility("default"), noinline, used)) void __memtrack_preload_unserved(void)
{
	__asm__ volatile(PL_CTL_FIRST ::: "memory");
}

static int pl_ctl_live(void)
{
	return __atomic_load_n(&pl.hdr->ctl_live, __ATOMIC_ACQUIRE);
}

/* After the registration (pl.hdr mapped). */
void pl_ctl_served(void)
{
	/* the registration's stores are visible before ctl_live is read: a 0 read means the
	 * call below may come before the link, and memtrack's scan after it sees them */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&pl.ctl_unseen, !pl_ctl_live(), __ATOMIC_RELAXED);
	__memtrack_preload_served(pl.flags);
}

/* Without the shared memory (it could not be mapped) only the call can tell: memtrack makes
 * sure it traps when it can see this coming (an exec whose environment does not reach its
 * shared memory waits for the link: tracker_run.c, control_inspect_exe). */
void pl_ctl_unserved(void)
{
	/* the i386 interposer's control points carry no uprobe (memtrack links the 64-bit file's
	 * only): the header is its only way to tell */
	if (pl.hdr && (PL_I386 || !pl_ctl_live())) {
		__atomic_fetch_add(&pl.hdr->unserved, 1, __ATOMIC_RELAXED);
		return;
	}
	__memtrack_preload_unserved();
}

/* Waits until a control point traps (ctl_live), or memtrack is gone: never hangs. */
void pl_ctl_wait_live(void)
{
	int saved = errno;

	while (!pl_ctl_live() && !pl_consumer_gone()) {
		struct timespec to = {0, 10 * 1000 * 1000};

		syscall(SYS_futex, &pl.hdr->ctl_live, FUTEX_WAIT, 0, &to, NULL, 0);
	}
	errno = saved;
}

/* fork's child handler (pthread_atfork, from the constructor): the parent's served call may
 * have come before the link, and the BPF side gave this child the parent's unmarked state:
 * register and call again, before the child's first call reaches glibc. Not a child in a pid
 * namespace of its own (unshare -pf): it is left to its first call, which counts it
 * (pl_refork) when it makes one before its exec; here no call is lost, and counting it would
 * make a run whose tree lost nothing incomplete. */
static void pl_ctl_child(void)
{
	if (__atomic_load_n(&pl.state, __ATOMIC_ACQUIRE) != PL_ON)
		return;
	pl_ns_child(); /* first: the question below, and the child's first record, ask it */
	if (!__atomic_load_n(&pl.ctl_unseen, __ATOMIC_RELAXED) || pl_other_pidns())
		return;
	pl_refork(); /* registers and calls again */
}

__attribute__((constructor)) static void pl_ctl_ctor(void)
{
	pthread_atfork(pl_ns_prepare, NULL, pl_ctl_child);
}
