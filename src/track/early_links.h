/* SPDX-License-Identifier: MIT */
/*
 * Links made while the programs are still being verified. Creating a link waits for the
 * kernel, not for a CPU: a uprobe_multi link an RCU grace period (dup_mmap_sem, 5-17 ms here),
 * a raw tracepoint up to one after another run's detach (tracepoint_add_func's 1->0->1 sync).
 * So each hook first gets a two-instruction program that tail-calls one slot of a program
 * array, attached on a thread at the run's start; the real programs go into the slots once
 * loaded (early_links__fill). Until then a hit runs an empty slot: nothing, for any process
 * (and no process of the tree runs before the fill: the root is released after it).
 *
 * The interposer's control link alone is not waited for: its slot is filled with the
 * tracepoints', the command is released, and the link goes on in a child process (its grace
 * period decided the release in most runs, 10-35 ms; in a thread it would also hold our exit,
 * which waits for every thread to leave the kernel): a tree that ends first does not wait for
 * it (early_links__ctl_abandon). Once it is made and filled, the shared memory's ctl_live is
 * set (early_links__publish); what the interposer does until then, and
 * what memtrack does before attaching glibc's uprobes, is in src/preload/preload_ctl.c.
 *
 * Between runs: a finished run's detacher offers its tracepoint links and the control link,
 * their slots emptied, for a while (track/detacher.h); a run that finds such an offer takes it
 * instead of linking (early__adopt): no trampoline to load, no tracepoint to patch or wait
 * for, no symbol to look up, only the slots to fill. The control link is taken only when the
 * interposer is the very file it was made on, unchanged.
 */
#ifndef MEMTRACK_EARLY_LINKS_H
#define MEMTRACK_EARLY_LINKS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

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
	/* The control points' link is made by a child process (early_ctl.c, early__ctl_fork), not a
	 * thread: its grace period then never holds memtrack's exit (a thread in the kernel's
	 * uprobe registration would). The link comes back over ctl_sock (SCM_RIGHTS). */
	pid_t ctl_pid;
	int ctl_sock;	  /* memtrack's end; -1 once the answer came or it was given up */
	int ctl_slot;	  /* a placeholder fd the link is moved onto (the fds' order) */
	bool ctl_started; /* the child was started, its answer not read yet */
	bool ctl_linked;  /* ctl_link holds the link (made here, or taken) */
	/* shared with the child (MAP_SHARED): linked, filled (the slot), published (ctl_live
	 * set, by whichever side came second), its failure and end time */
	struct early_ctl_shared *sh;
	int ctl_err; /* its failure, -errno */
	uint32_t *live; /* the shared memory's ctl_live, or NULL */
	uint64_t ctl_offs[3], ctl_cookies[3]; /* by MT_PRELOAD_CTL_* */
	unsigned long long ctl_end_ns; /* CLOCK_MONOTONIC when the link was made or failed */
	bool multi;	 /* uprobe_multi links: the interposer's control points too */
	const char *lib; /* the interposer, or NULL */
	int tp_map, ctl_map; /* program arrays (raw_tp, uprobe_multi) */
	const char *adopt_root; /* where finished runs offer their tracepoint links, or NULL */
	bool adopted;		/* tp_link and tp_map were taken from such an offer */
	int tp_prog[EARLY_TP_NR], tp_link[EARLY_TP_NR];
	int ctl_prog, ctl_link;
	int ctl_lib_map;  /* what the control link was made on (early_priv.h), offered with it */
	bool ctl_adopted; /* ctl_link and ctl_map were taken from a finished run's offer */
	/* An offered control link made on another interposer file (another build), with its
	 * array and identity: not ours to use, closed only at the end (early_links__close, or
	 * the detacher's closing), since closing the link waits out its uprobes' grace period
	 * (15-17 ms here, on the way to the command's release when it was closed at once). */
	int ctl_stale[3];
	int err; /* the thread's first failure, -errno */
	const char *failed; /* what failed */
	unsigned long long wait_ns; /* the thread's time, for -v */
};

/*
 * Starts attaching on a thread: the four raw tracepoints and, with multi and lib, one
 * uprobe_multi link on the interposer's control points (cookies MT_PRELOAD_CTL_*), made by a
 * child process that thread forks, whose making sets *live (the shared memory's ctl_live)
 * once its slot is filled. Never fails: a
 * failure is reported by early_links__fill (or early_links__ctl_wait for the control link),
 * and the caller then attaches as before.
 */
void early_links__start(struct early_links *e, const char *lib, bool multi, uint32_t *live,
			const char *adopt_root);

/*
 * Waits for the tracepoints' links (not the control link's), then puts the programs into the
 * slots: tp[] by enum early_tp, ctl the interposer's program (ignored when no control link was
 * asked for). 0 when every tracepoint is served from now on and the control link is made or
 * being made; -errno (what failed is logged at -v) after closing everything made.
 */
int early_links__fill(struct early_links *e, const int tp[EARLY_TP_NR], int ctl);
/* Is the interposer's control link made, or being made, here? */
bool early_links__has_ctl(const struct early_links *e);
/* Is it still being made? (Takes it if it came meanwhile.) */
bool early_links__ctl_pending(struct early_links *e);
/* Waits until it is made: 0, or -errno when it failed (then closed: attach it otherwise). */
int early_links__ctl_wait(struct early_links *e);
/* Gives up on a control link still being made (the tree is over: nothing needs it): its
 * child closes it once made. True when one was given up. */
bool early_links__ctl_abandon(struct early_links *e);
/* Sets *live (shm_abi.h: ctl_live) and wakes the interposers waiting on it; NULL: nothing. */
void early_links__publish(uint32_t *live);
/* Closes every link, program and array (detaches); idempotent, waits for the thread (not for
 * the control link's child: a link still being made is given up). */
void early_links__close(struct early_links *e);

#endif
