/* SPDX-License-Identifier: MIT */
#ifndef MEMTRACK_FDS_H
#define MEMTRACK_FDS_H

/* Closes every fd from `from` up but those of keep[0..n) (n small; keep is sorted here). Raw
 * close_range system calls only: safe in a child forked from a process with threads, or one
 * sharing our memory (the detacher). */
void fds__close_all_but(unsigned from, int *keep, int n);

#endif
