/* SPDX-License-Identifier: MIT */
/*
 * A parent that stopped itself because memtrack stopped its child, resumed.
 *
 * memtrack's stops (exec, dlopen) are SIGSTOP, a job-control stop that the stopped task's
 * parent sees (waitpid with WUNTRACED, SIGCHLD). Wrappers that pass job control on (su,
 * runuser, sudo: "child stopped, so stop myself, and continue it once continued") then stop
 * themselves and wait for a SIGCONT from their own parent that never comes: `memtrack track --
 * runuser -u nobody -- ls` hung for ever. After memtrack answers a stop of a child, a parent of
 * the tree found stopped while that child runs is sent SIGCONT too (it then continues the
 * child, which runs already: nothing). The parent is looked at right after the records that
 * answered the child are read (it has usually stopped itself by then, within microseconds of
 * the child's stop, while the inspection takes milliseconds), and again at growing intervals
 * for a second, and longer while it has not run since (stop_relay.c). A parent resumed so has its
 * own parent watched in turn: wrappers nest (`sudo su - user -c prog`), and each passes the stop
 * up.
 *
 * A watched parent may also be stopped at one of memtrack's own stops (it exec'd, or dlopen'd,
 * while watched): that stop is its record's to answer, once its new image's probes are in.
 * Resumed here, the image ran before them and its first calls went unrecorded, silently
 * (check-vm, in 1 fresh guest of 12 to 30: `sh -c '... env -i alloc_mimalloc &&
 * alloc_jemalloc_exe'`, the last image's first malloc). The BPF side writes a stop's record
 * before the stop takes effect, so a parent seen stopped has its record in the ring: settle
 * (the consumer's drain) answers it before the parent is judged, and a parent whose own stop
 * was answered meanwhile is not resumed on that look.
 */
#ifndef MEMTRACK_STOP_RELAY_H
#define MEMTRACK_STOP_RELAY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define STOP_RELAY_MAX 64 /* parents watched at once; the oldest give way */

struct stop_relay {
	struct {
		pid_t parent, child;
		uint64_t due_ns, end_ns, max_ns, step_ns; /* CLOCK_MONOTONIC */
		bool own_answered; /* a stop of the parent's own was answered since the last look */
	} v[STOP_RELAY_MAX];
	unsigned n;
	uint64_t resumed; /* parents sent SIGCONT (the manifest's mechanisms.parents_resumed) */
	/* the parent of pid if it is a process of the tree, else 0 (NULL: none is watched) */
	pid_t (*tree_parent)(void *ctx, pid_t pid);
	/* answers every stop whose record is written (drains the records; NULL: none to answer).
	 * It may call stop_relay__answered. */
	void (*settle)(void *ctx);
	void *ctx;
};

/* child was just sent SIGCONT after one of memtrack's stops; parent is its parent if a process
 * of the tree, else 0. The parent is looked at from the next stop_relay__tick. */
void stop_relay__answered(struct stop_relay *r, pid_t child, pid_t parent);
/* Looks again at the parents that are due (call at every turn of the event loop). */
void stop_relay__tick(struct stop_relay *r);

#endif
