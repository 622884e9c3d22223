// SPDX-License-Identifier: MIT
/*
 * Detaching costs an RCU grace period per uprobe link (25-100 ms), paid after the artifact is
 * complete. The detacher pays it instead. CLONE_VM rather than fork: no page tables copied,
 * no copy-on-write faults on memtrack's side while it writes the manifest, and memtrack's own
 * exit unmaps nothing (the detacher is the address space's last user). It holds no stdio (a
 * caller reading memtrack's output sees EOF at memtrack's exit) and tracks nothing: the probes
 * only filter other processes out until it is done. It shares memtrack's memory and TLS, so it
 * runs only raw system calls, on a stack of its own.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "track/detacher.h"

static char detacher_stack[16 * 1024] __attribute__((aligned(64)));

static int detacher__main(void *arg)
{
	pid_t parent = (pid_t)(intptr_t)arg;

	syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (syscall(SYS_getppid) != parent)
		return 0; /* memtrack is gone already: exiting detaches */
	syscall(SYS_setsid);
	for (int fd = 0; fd < 3; fd++)
		syscall(SYS_close, fd);
	for (;;)
		syscall(SYS_pause);
	return 0;
}

pid_t detacher__start(void)
{
	/* exit signal 0: memtrack never waits for it; whoever adopts it at memtrack's exit
	 * reaps it */
	pid_t pid = clone(detacher__main, detacher_stack + sizeof(detacher_stack), CLONE_VM,
			  (void *)(intptr_t)getpid());

	return pid < 0 ? -errno : pid;
}
