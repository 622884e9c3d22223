/* SPDX-License-Identifier: MIT */
/*
 * The handoff (src/preload/shm_abi.h): memtrack's side. A process of the tree that cannot open
 * one of the interposer's shared files by its path (mode 0600, the invoking user's: `su
 * nobody -c`, `runuser -u postgres`, setpriv; or a sandbox's own /dev/shm) asks for it over a
 * unix socket in the abstract namespace, and a thread of ours sends a descriptor. Such a
 * process is then served by the interposer like any other: no uprobes on glibc for it, and
 * none of its calls missed while they would go in (its parent may leave it running: su and
 * runuser read SIGCHLD from a queue, tracker_control.c). The files stay unreachable to
 * everyone else: only processes of the tree (their pid in the BPF procs map, as SO_PEERCRED
 * tells it) get an answer, and only for files named here.
 *
 * One per run (static state). Listening from handoff__open (before the command is released:
 * early connections wait in the backlog) and answering from handoff__start (a thread, started
 * after the command like the doorbell's: in a new pid namespace the command is pid 2);
 * handoff__stop shuts the socket down: from then a connection is refused at once, so a
 * process left behind after memtrack never waits for it.
 */
#ifndef MEMTRACK_HANDOFF_H
#define MEMTRACK_HANDOFF_H

#include <stdbool.h>
#include <stdint.h>

/* Listens on the socket named after rings (the path in $MEMTRACK_PRELOAD_SHM, fd its open
 * file). 0 or -errno. */
int handoff__open(const char *rings, int fd);
/* Allows path, one of memtrack's shared files open as fd, to be handed out (a copy of fd, never
 * the file opened again by its name: /dev/shm is everyone's); at most 4. 0 or -errno. */
int handoff__allow(const char *path, int fd);
/* Starts answering, for the processes in procs (the BPF map's fd, duplicated). 0 or -errno. */
int handoff__start(int procs);
/* Refuses every connection from now on; the thread ends by itself (not waited for). */
void handoff__stop(void);
/* Descriptors handed out, and requests refused (a process outside the tree, an unknown file) */
uint64_t handoff__handed(void);
uint64_t handoff__refused(void);
/* The network namespace whose processes can reach the socket (its inode; 0 when not listening) */
uint64_t handoff__netns(void);

#endif
