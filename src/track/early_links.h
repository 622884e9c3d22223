/* SPDX-License-Identifier: MIT */
/*
 * Links made while the programs are still being verified. Creating a link waits for the
 * kernel, not for a CPU: a uprobe_multi link an RCU grace period (dup_mmap_sem, 5-17 ms here),
 * a raw tracepoint up to one after another run's detach (tracepoint_add_func's 1->0->1 sync).
 * So each hook first gets a two-instruction program that tail-calls one slot of a program
 * array, attached on a thread at the run's start; the real programs go into the slots once
 * loaded (early_links__fill). Until then a hit runs an empty slot: nothing, for any process
 * (and no process of the tree runs before the fill: the root is released after it).
 */
#ifndef MEMTRACK_EARLY_LINKS_H
#define MEMTRACK_EARLY_LINKS_H

#include <pthread.h>
#include <stdbool.h>

/* The raw tracepoints every run attaches, in slot order. */
enum early_tp {
	EARLY_FORK,
	EARLY_EXEC,
	EARLY_EXIT,
	EARLY_RSS_STAT,
	EARLY_TP_NR,
};

/* The interposer's control points, by cookie (MT_PRELOAD_CTL_*, bpf/proc.h; served.bpf.c) */
extern const char *const early_ctl_fns[];

struct early_links {
	pthread_t thread;
	bool inited;  /* by early_links__start: the fds below are valid or -1 */
	bool started; /* the thread runs or has not been joined */
	pthread_t ctl_thread; /* the control points' link, joined by the thread above */
	bool ctl_started;
	bool multi;	 /* uprobe_multi links: the interposer's control points too */
	const char *lib; /* the interposer, or NULL */
	int tp_map, ctl_map; /* program arrays (raw_tp, uprobe_multi) */
	int tp_prog[EARLY_TP_NR], tp_link[EARLY_TP_NR];
	int ctl_prog, ctl_link;
	int err; /* the thread's first failure, -errno */
	const char *failed; /* what failed */
	unsigned long long wait_ns; /* the thread's time, for -v */
};

/*
 * Starts attaching on a thread: the four raw tracepoints and, with multi and lib, one
 * uprobe_multi link on the interposer's control points (cookies MT_PRELOAD_CTL_*). Never fails:
 * a failure is reported by early_links__fill, and the caller then attaches as before.
 */
void early_links__start(struct early_links *e, const char *lib, bool multi);
/*
 * Waits for the thread, then puts the programs into the slots: tp[] by enum early_tp, ctl the
 * interposer's program (ignored when no control link was asked for). 0 when every hook is
 * served from now on; -errno (what failed is logged at -v) after closing everything made.
 */
int early_links__fill(struct early_links *e, const int tp[EARLY_TP_NR], int ctl);
/* Did early_links__fill make the interposer's control link? */
bool early_links__has_ctl(const struct early_links *e);
/* Closes every link, program and array (detaches); idempotent, waits for the thread. */
void early_links__close(struct early_links *e);

#endif
