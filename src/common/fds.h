/* SPDX-License-Identifier: MIT */
#ifndef MEMTRACK_FDS_H
#define MEMTRACK_FDS_H

/* Closes every fd from `from` up but those of keep[0..n) (n small; keep is sorted here). Raw
 * close_range system calls only: safe in a child forked from a process with threads, or one
 * sharing our memory (the detacher). */
void fds__close_all_but(unsigned from, int *keep, int n);
/* Sends one byte over a unix socket and, with fd >= 0, a copy of fd with it (SCM_RIGHTS),
 * retried on EINTR, never SIGPIPE. 0 or -errno. */
int fds__send(int sock, unsigned char byte, int fd);

#endif
