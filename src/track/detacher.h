/* SPDX-License-Identifier: MIT */
/* Detaching off the caller's clock: a child that outlives memtrack holding its BPF fds. */
#ifndef MEMTRACK_DETACHER_H
#define MEMTRACK_DETACHER_H

#include <sys/types.h>

/*
 * Starts the detacher: a child sharing memtrack's address space (CLONE_VM) with a copy of its
 * file table, hence of every BPF fd open now. It waits for memtrack's exit (PR_SET_PDEATHSIG)
 * and exits then, which closes the links (their RCU grace periods) and unmaps the address
 * space as its last user. After this, memtrack should exit without closing or freeing.
 * Returns the child's pid, or -errno (then nothing was started: detach in the foreground).
 */
pid_t detacher__start(void);

#endif
