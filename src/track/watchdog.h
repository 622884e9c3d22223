/* SPDX-License-Identifier: MIT */
/* The watchdog: resumes the tasks held at memtrack's stops once memtrack is gone (watchdog.c). */
#ifndef MEMTRACK_WATCHDOG_H
#define MEMTRACK_WATCHDOG_H

#include <sys/types.h>

struct watchdog {
	pid_t pid; /* 0 when not started */
	int sock;  /* memtrack's end of the socket; -1 when none */
};

/* Forks the watchdog; call while memtrack is small and single-threaded. 0 or -errno. */
int watchdog__start(struct watchdog *w);
/* Hands it the ring buffer map and the stop_ctl map, and hold_fd (-1: none), which it keeps
 * open until it exits (the program cache slot's locked folder, prog_cache.h). Until then it
 * guards nothing; enable the stops only after this returned 0. 0 or -errno. */
int watchdog__arm(struct watchdog *w, int ring_fd, int stop_ctl_fd, int hold_fd);
/* Tells it that the run ended cleanly: every stop answered and no more possible (the stops
 * ended, the tree gone). It exits at once instead of reading the ring at memtrack's exit. */
void watchdog__done(struct watchdog *w);
/* Closes memtrack's end: the watchdog then does its work and exits (for callers that outlive a
 * run; memtrack's exit does the same). NULL-safe, idempotent. */
void watchdog__close(struct watchdog *w);

#endif
