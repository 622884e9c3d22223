// SPDX-License-Identifier: MIT
/*
 * vfork: the child runs on its parent's memory, this thread's interposer state included, until
 * it execs or exits, while the parent waits. Its records went into the parent's ring with the
 * parent's pid: dash runs commands through vfork and allocates its path search before the exec,
 * so per-process counts moved to the parent, as blocks it seemed to leak.
 *
 * So the interposer defines vfork: it keeps the calling thread's ring state (pl_thread.vf) and
 * sets the thread's generation to 0, which no process has (preload_ring.c), then jumps to the
 * next vfork (glibc's), leaving no frame of its own: the child returns straight to the caller,
 * as vfork requires. The next record of either side takes the slow path (pl_thread_prepare),
 * which asks the kernel which side runs (pl_vfork_side): the child takes a slot of its own,
 * with its pid and tid (the consumer frees it after the child's Exec or Exit, as any process'),
 * and the generation stays 0 so that each of its records asks again; the parent, back, takes
 * its saved state. A getpid per record: the child's few before its exec, the parent's first.
 * posix_spawn (what system() and most runtimes use) clones without this symbol; its child
 * allocates nothing before its exec. x86-64 only: elsewhere vfork is not interposed.
 */
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "preload/preload.h"

/* Called by vfork below, before glibc's: returns what to jump to. */
PL_HIDDEN void *pl_vfork_prepare(void)
{
	static void *next;
	struct pl_thread *t = &pl_t;
	void *n = __atomic_load_n(&next, __ATOMIC_ACQUIRE);

	if (!n) {
		n = dlsym(RTLD_NEXT, "vfork");
		if (!n)
			n = (void *)fork; /* POSIX allows vfork to be fork */
		__atomic_store_n(&next, n, __ATOMIC_RELEASE);
	}
	if (__atomic_load_n(&pl.state, __ATOMIC_ACQUIRE) == PL_ON && !t->vfork_on) {
		t->vf = (struct pl_vfork_saved){.slot = t->slot,
						.ring = t->ring,
						.head = t->head,
						.tail = t->tail,
						.check = t->check,
						.pop = t->pop,
						.pop_end = t->pop_end,
						.gen = t->gen,
						.pid = (int32_t)syscall(SYS_getpid),
						.tid = t->tid};
		t->vfork_on = 1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t->gen = 0;
	}
	return n;
}

#if defined(__x86_64__)
/* The stack is aligned for the call (entered with rsp = 8 mod 16) and given back before the
 * jump: glibc's vfork finds the caller's return address on top, as if called directly. */
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
#ifdef __CET__
	"	endbr64\n"
#endif
	"	sub $8, %rsp\n"
	"	call pl_vfork_prepare\n"
	"	add $8, %rsp\n"
	"	jmp *%rax\n"
	".size vfork, .-vfork\n");
#endif

int pl_vfork_side(struct pl_thread *t)
{
	int32_t pid = (int32_t)syscall(SYS_getpid);

	if (pid == t->vf.pid) { /* the parent, back: its own ring again */
		t->slot = t->vf.slot;
		t->ring = t->vf.ring;
		t->head = t->vf.head;
		t->tail = t->vf.tail;
		t->check = t->vf.check;
		t->pop = t->vf.pop;
		t->pop_end = t->vf.pop_end;
		t->pid = t->vf.pid;
		t->tid = t->vf.tid;
		t->gen = t->vf.gen;
		t->vfork_on = 0;
		if (t->slot)
			pl_set_slot_key(t->slot);
		if (!t->slot || t->gen != __atomic_load_n(pl.wipe, __ATOMIC_RELAXED))
			return pl_thread_prepare(t);
		return 0;
	}
	/* the child (or a child's own vfork child): a slot of its own at its first record */
	if (pid != t->pid || !t->slot || t->slot == t->vf.slot) {
		if (pl_claim(t, __atomic_load_n(pl.wipe, __ATOMIC_RELAXED)))
			return -1;
		pl_register(); /* as a fork child is: the manifest's mechanism for its pid */
		if (__atomic_load_n(&pl.ctl_unseen, __ATOMIC_RELAXED))
			pl_ctl_served(); /* the BPF side copied the parent's unmarked state */
	}
	t->gen = 0; /* ask again at the next record: the parent may be back */
	return 0;
}
