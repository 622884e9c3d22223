// SPDX-License-Identifier: MIT
/*
 * vfork: the child runs on its parent's memory, this thread's interposer state included, until
 * it execs or exits, while the parent waits. Its records went into the parent's ring with the
 * parent's pid: dash runs commands through vfork and allocates its path search before the exec,
 * so per-process counts moved to the parent, as blocks it seemed to leak.
 *
 * So the interposer defines vfork: it keeps the calling thread's ring state (pl_thread.vf) and
 * sets the thread's generation to PL_GEN_VFORK, which no process has, nor a fork child's wiped
 * page (0: preload_ring.c), then jumps to the next vfork (glibc's), leaving no frame of its
 * own: the child returns straight to the caller, as vfork requires. The next record of any
 * side takes the slow path (pl_thread_prepare), which asks the kernel which side runs
 * (pl_vfork_side): the child takes a slot of its own, with its pid and tid (the consumer frees
 * it after the child's Exec or Exit, as any process'), and the generation stays PL_GEN_VFORK
 * so that each of its records asks again; the parent, back, takes its saved state; a fork
 * child of either (its page wiped: the parent forked again before any record) takes a new
 * generation and a slot of its own. A getpid per record: the child's few before its exec, the
 * parent's first. A vfork made before the last one was settled settles it first.
 * posix_spawn (what system() and most runtimes use) clones without this symbol; its child
 * allocates nothing before its exec. x86-64 only: elsewhere vfork is not interposed.
 */
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "preload/preload.h"
#include "preload/preload_sys.h"

/* Called by vfork below, before glibc's: returns what to jump to. */
PL_HIDDEN __attribute__((used)) void *pl_vfork_prepare(void)
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
	/* an earlier vfork not settled yet (no record since): whose state this is first */
	if (t->vfork_on)
		pl_vfork_settle(t, (int32_t)pl_sys_getpid());
	/* a fork child that has not recorded yet takes its generation first, and a slot of its
	 * own at its next record: its parent's is not its own */
	if (__atomic_load_n(&pl.state, __ATOMIC_ACQUIRE) == PL_ON && !t->vfork_on &&
	    !__atomic_load_n(&pl.wipe[PL_WIPE_GEN], __ATOMIC_ACQUIRE) &&
	    !pl_other_pidns()) /* there the refork gives up on the process: let a record do it */
		pl_refork();
	if (__atomic_load_n(&pl.state, __ATOMIC_ACQUIRE) == PL_ON && !t->vfork_on) {
		t->vf = (struct pl_vfork_saved){.slot = t->slot,
						.ring = t->ring,
						.head = t->head,
						.tail = t->tail,
						.check = t->check,
						.pop = t->pop,
						.pop_end = t->pop_end,
						.gen = t->gen,
						.pid = (int32_t)pl_sys_getpid(),
						.tid = t->tid};
		t->vfork_on = 1;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		t->gen = PL_GEN_VFORK; /* the next record of either side takes the slow path */
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

/* The vforking thread's own ring state back, if it is that thread's process (pid). 1 if so. */
int pl_vfork_restore(struct pl_thread *t, int32_t pid)
{
	if (pid != t->vf.pid)
		return 0;
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
	return 1;
}

/* A fork child of either side (its page wiped): the saved state is not its own, and its
 * generation is taken at its next record. The parent, back: its own ring again. 1 when the
 * vfork is over for this thread. */
int pl_vfork_settle(struct pl_thread *t, int32_t pid)
{
	if (!__atomic_load_n(pl.wipe, __ATOMIC_ACQUIRE)) {
		t->vfork_on = 0;
		t->slot = NULL;
		return 1;
	}
	return pl_vfork_restore(t, pid);
}

int pl_vfork_side(struct pl_thread *t)
{
	int32_t pid = (int32_t)pl_sys_getpid();

	if (pl_vfork_settle(t, pid)) {
		if (!t->slot || t->gen != __atomic_load_n(pl.wipe, __ATOMIC_RELAXED))
			return pl_thread_prepare(t);
		return 0;
	}
	/* the child (or a child's own vfork child): a slot of its own at its first record */
	if (pid != t->pid || !t->slot) {
		/* unless it is in a pid namespace of its own (its parent ran
		 * unshare(CLONE_NEWPID)): its pid is not the one memtrack knows (pl_other_pidns),
		 * and it sees no parent. It runs on its parent's memory, where no state of its own
		 * can say "pass": counted once, each of its records dropped */
		if (pl_sys_getppid() == 0) {
			if (t->vf_foreign != pid) {
				t->vf_foreign = pid;
				pl_ctl_unserved();
			}
			t->gen = PL_GEN_VFORK;
			return -1;
		}
		if (pl_claim(t, __atomic_load_n(pl.wipe, __ATOMIC_RELAXED)))
			return -1;
		pl_register(); /* as a fork child is: the manifest's mechanism for its pid */
		if (__atomic_load_n(&pl.ctl_unseen, __ATOMIC_RELAXED))
			pl_ctl_served(); /* the BPF side copied the parent's unmarked state */
	}
	t->gen = PL_GEN_VFORK; /* ask again at the next record: the parent may be back */
	return 0;
}
