// SPDX-License-Identifier: MIT
/*
 * Auto mode: glibc's and libstdc++'s uprobes only while a process of the tree needs them.
 *
 * A process the interposer cannot serve (a cleared environment, sudo's or su's child, a secure
 * exec, another pid namespace) needs them. While they are in, every call of glibc's malloc by
 * any process of the machine traps, the tree's served processes included (the program skips
 * them, the trap is paid): `sh -c 'env -i true; storm'` ran its storm 5x slower than without
 * the `env -i true` before it, for the rest of the run. So each process judged to need them is
 * marked (mt_proc.glibc_need: set at its exec stop, inherited by its fork children, cleared
 * when a later image of it is judged not to need them), and once no process of the tree has
 * the mark, the probes come out. The next process that needs them is stopped at its exec and
 * gets them back before it runs: the execs go on stopping to be judged while the probes are in
 * (a fork child of a served process may exec an image that needs them), but those of a marked
 * process (stop_ctl[6]: its new image keeps the mark unjudged, and the probes record it).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include "bpf/proc.h"
#include "common/log.h"
#include "track/attach.h"
#include "track/tracker_priv.h"

/* While the probes are in, the tree is looked at (two system calls a process, until one that
 * needs them) after a process exited or an image was judged not to need them, at most every
 * GLIBC_SCAN_NS, and every GLIBC_IDLE_SCAN_NS anyway (an Exit record lost to a full ring) */
#define GLIBC_SCAN_NS	   10000000ull
#define GLIBC_IDLE_SCAN_NS 200000000ull

void tracker__glibc_mark(struct tracker *t, pid_t pid, uint64_t ts, bool need)
{
	int m;

	if (!t->pre.autom || (!need && !t->glibc_marks))
		return; /* nothing marked yet: nothing to clear */
	m = tracker__mark_proc(t, pid, ts, need ? MT_MARK_GLIBC : MT_MARK_GLIBC_OFF);
	if (m < 0)
		log__warn("process %d: cannot mark whether it needs glibc's uprobes: %s", pid,
			  strerror(-m));
	t->glibc_marks += need && m > 0;
	t->glibc_rescan |= !need && m > 0;
}

/*
 * Does a process of the tree need glibc's probes? Errs on their side. The walk is no snapshot:
 * a key added to a bucket it has passed is not seen, and a process that needs them can fork
 * and exit during it, its child (marked by inheritance) never seen. So the forks of marked
 * processes are counted, after their insertion (stop_ctl[14], read before the walk) and before
 * it ([17], read after): any that overlapped the walk makes them differ by more than when the
 * command was released (t->need_drift, as tracker__tree_alive), and means yes: looked at again
 * at the next scan. Until 7 December 2026 a fork-and-exit chain of an `env -i`
 * program in a tree of 200 processes had the probes taken out under its last child (4 runs
 * in 5), whose calls went unrecorded, uncounted; until 8 December one count, read on both
 * sides, left an insertion whose count came after the walk unseen.
 */
static bool glibc__needed(struct tracker *t)
{
	__u64 added = tracker__ctl_count(t, 14);
	struct mt_proc p;
	__u32 key, next;
	int err;

	for (err = bpf_map_get_next_key(t->fd.procs, NULL, &key); !err;
	     err = bpf_map_get_next_key(t->fd.procs, &key, &next), key = next)
		if (!bpf_map_lookup_elem(t->fd.procs, &key, &p) && p.glibc_need)
			return true;
	return errno != ENOENT || tracker__ctl_count(t, 17) - added != t->need_drift;
}

/*
 * The links' closing waits for the kernel's grace period (~25-40 ms a link here): not on the
 * loop. A link's breakpoints leave every process as its close begins. Closed by a child
 * sharing our memory and file table (clone CLONE_VM | CLONE_FILES), not a thread: a thread
 * closing while memtrack exits is killed with it, and the kernel, its removal of the
 * breakpoints cut short by the fatal signal, leaves them in ("failed to unregister, leaking
 * uprobe", seen on 6.12). The child outlives us if need be; it only calls close(2) (it shares
 * our thread's TLS: no errno, no allocation) and has every signal blocked.
 */
#define GLIBC_CLOSER_STACK (64 << 10)

static int glibc__closer(void *arg)
{
	attach_taken__close_fds(arg);
	return 0;
}

/* Starts the closing of taken; closes it here when no child can be made. */
static void glibc__close_off(struct tracker *t, struct attach_taken *taken)
{
	char *stack = malloc(GLIBC_CLOSER_STACK);
	sigset_t all, old;
	pid_t pid = -1;

	if (stack) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		/* exit signal 0: waited for with __WCLONE; SIGCHLD once reparented */
		pid =
		    clone(glibc__closer, stack + GLIBC_CLOSER_STACK, CLONE_VM | CLONE_FILES, taken);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (pid < 0) {
		free(stack);
		attach_taken__close(taken);
		return;
	}
	t->glibc_closer = pid;
	t->glibc_stack = stack;
	t->glibc_taken = taken;
}

/* Reaps the closer if it is done (or, with block, once it is): true when none is left. */
static bool glibc__reap(struct tracker *t, bool block)
{
	pid_t r;

	if (t->glibc_closer <= 0)
		return true;
	do
		r = waitpid(t->glibc_closer, NULL, __WCLONE | (block ? 0 : WNOHANG));
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return false;
	free(t->glibc_stack);
	attach_taken__free(t->glibc_taken);
	t->glibc_closing_untagged = false;
	t->glibc_closer = 0;
	t->glibc_stack = NULL;
	t->glibc_taken = NULL;
	return true;
}

void tracker__glibc_wait(struct tracker *t)
{
	/* Old links and new ones on the same sites would both run for a call: two entries, one
	 * return when the old return's breakpoints left first (its depth never back to 0: every
	 * later call of the thread nested, lost), a free written twice. glibc's links carry their
	 * generation, and the old ones do nothing once the next are in (tracker__glibc_attach):
	 * only links without one (a shared family's, libs__glibc_untagged) make the next process
	 * that needs them wait, stopped at its exec. Until 7 December 2026 every such process
	 * within ~0.1 s of their going out waited (~30 ms). */
	glibc__reap(t, true);
}

void tracker__glibc_end(struct tracker *t)
{
	/* a closer still running goes on alone: its stack and list are in memory it shares */
	glibc__reap(t, false);
	t->glibc_closer = 0;
}

/*
 * Perf uprobes (kernels before 6.6, no uprobe_multi) are not taken out: each takes ~90 ms to
 * close, so glibc's ~22 took seconds, and a process needing them again meanwhile would wait
 * that long; they stay in for the rest of the run, as before.
 */
void tracker__glibc_tick(struct tracker *t)
{
	struct attach_taken *taken;
	bool untagged;
	uint64_t now;
	int n;

	if (!glibc__reap(t, false) || !t->pre.autom || !t->multi || !libs__glibc_attached(t->libs))
		return;
	now = now_ns(CLOCK_MONOTONIC);
	if (now - t->glibc_scan_ns < GLIBC_SCAN_NS ||
	    (t->sinks.counts[MT_EV_EXIT] == t->glibc_exits && !t->glibc_rescan &&
	     now - t->glibc_scan_ns < GLIBC_IDLE_SCAN_NS))
		return;
	t->glibc_scan_ns = now;
	t->glibc_exits = t->sinks.counts[MT_EV_EXIT];
	t->glibc_rescan = false;
	if (glibc__needed(t))
		return;
	tracker__glibc_wait(t); /* one close at a time (the last one is long done by now) */
	untagged = libs__glibc_untagged(t->libs);
	n = libs__detach_glibc(t->libs, &taken);
	if (n < 0) {
		log__warn("cannot take glibc's uprobes out: %s", strerror(-n));
		return;
	}
	/* no process needs them: none can exec unstopped on that account meanwhile */
	if (tracker__set_glibc_in(t))
		log__warn("cannot tell the exec stops that glibc's uprobes are out");
	/* a process whose executable defines malloc came while they were in: glibc's dlopen stop
	 * stays in for it (for a moment beside the closing one: a dlopen may stop twice) */
	if (t->glibc_dlopen_kept && libs__attach_glibc_dlopen(t->libs) < 0)
		log__warn("cannot keep glibc's dlopen stop in");
	t->glibc_dlopen_kept = false;
	t->m.glibc_detaches++;
	log__debug(LOG_VERBOSE,
		   "%7.2f ms no process of the tree needs glibc's uprobes: %d links taken out",
		   ((double)now - (double)t->t_start) / 1e6, n);
	glibc__close_off(t, taken);
	t->glibc_closing_untagged = untagged && t->glibc_closer > 0;
}
