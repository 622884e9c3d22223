/* SPDX-License-Identifier: MIT */
/* Detaching off the caller's clock: a child that outlives memtrack holding its BPF fds. */
#ifndef MEMTRACK_DETACHER_H
#define MEMTRACK_DETACHER_H

#include <stdint.h>
#include <sys/types.h>

#define DETACHER_KEEP_MAX 8
#define DETACHER_MAPS_MAX 4
/* An offer of links (below): "<root>/ho-<tag>" holding "tp<i>" (the link of early_tp i,
 * early_links.h) and "map" (their program array); with the interposer's control link also
 * "ctl", its program array "cmap" and "lib" (what it was made on: early_priv.h, struct
 * early_lib_id). */
#define DETACHER_OFFER_PREFIX "ho-"
#define DETACHER_OFFER_MAP    "map"
#define DETACHER_OFFER_CTL    "ctl"
#define DETACHER_OFFER_CMAP   "cmap"
#define DETACHER_OFFER_LIB    "lib"
#define DETACHER_PATH_MAX     256
/* The program a slot tail-called directly holds while offered (detacher.c): returns 0. */
#define DETACHER_IDLE_NAME "mt_idle"

/*
 * The tracepoint links handed over to the next run. A raw tracepoint's first probe waits for
 * an RCU grace period when any tracepoint lost its last probe shortly before (the kernel's
 * 1->0->1 rule, tracepoint_add_func): the previous run's detach, in back-to-back runs
 * (~5 ms here, the longest wait of a run whose programs were kept). So the detacher keeps the
 * early links' trampolines (early_links.h) linked for linger_ms after everything else is
 * closed, their program array disarmed first (emptied; the slot a trampoline tail-calls directly
 * given an idle program): each hit then runs nothing of the run's,
 * and a run starting meanwhile adds its own probes to live tracepoints (1->2: no wait).
 */
struct detacher_plan {
	/* maps offered with the links; the program arrays among them are emptied first (slots
	 * 0..disarm_nr[i]-1; 0: not a program array). maps[0] is the tracepoints' array: without
	 * it (nmaps 0) nothing is offered */
	int maps[DETACHER_MAPS_MAX];
	uint32_t disarm_nr[DETACHER_MAPS_MAX];
	/* Among them, the slots a trampoline tail-calls directly (a jump patched into its text):
	 * given an idle program of type idle_type[i] (DETACHER_IDLE_NAME) instead of emptied.
	 * Emptying one unpatches the jump and waits for an RCU grace period
	 * (bpf_arch_poke_desc_update: 4-11 ms here), which held the offer back past the start of
	 * a run launched right after memtrack's exit; replacing a program patches the target
	 * only, and so does the next run's filling of the slot (one text patch, not two). */
	uint32_t idle_mask[DETACHER_MAPS_MAX];
	uint32_t idle_type[DETACHER_MAPS_MAX];
	int nmaps;
	int keep[DETACHER_KEEP_MAX]; /* the links kept until linger_ms has passed */
	int nkeep;
	/* closed last, once every other link is gone: the program cache slot's lock and owner
	 * map (prog_cache.h), whose detacher entry is cleared first; -1: none */
	int lock_fd, owner_fd;
	uint32_t owner_key;
	/* the links are kept until the counter of this map (prog_cache.h: the linger map) moves,
	 * a later run having linked its own, or linger_ms has passed; -1: not kept at all */
	int linger_fd;
	uint32_t linger_ms;
	/* the counter as this run left it (read by memtrack when it plans, ~0: unknown, no
	 * lingering): a move after it, even one before the detacher runs, ends the lingering */
	uint64_t linger_gen;
	/* MEMTRACK_TEST_DETACHER_LATE: the detacher starts its work only once memtrack is gone,
	 * as it does when a short command lets memtrack exit before it is scheduled */
	bool test_late;
	/* The offer (early_links.h): keep[i] pinned as offer_pin[0][i], maps[j] as
	 * offer_pin[0][nkeep + j], in the folder offer_dir[0], which is renamed offer_dir[1] (made
	 * visible whole); withdrawn by renaming it offer_dir[2], whose pins are offer_pin[2][].
	 * Paths made by detacher__plan_offer; offer_dir[1][0] == '\0': no offer. */
	char offer_dir[3][DETACHER_PATH_MAX];
	char offer_pin[3][DETACHER_KEEP_MAX + DETACHER_MAPS_MAX][DETACHER_PATH_MAX];
};

/* Fills plan's offer paths under root for links and maps named by `names` (nkeep links, then
 * nmaps maps), tagged tag; leaves no offer when they do not fit. */
void detacher__plan_offer(struct detacher_plan *plan, const char *root, const char *tag,
			  const char *const *names);

/*
 * Starts the detacher: a child sharing memtrack's address space (CLONE_VM) with a copy of its
 * file table, hence of every BPF fd open now. It waits for memtrack's exit (PR_SET_PDEATHSIG).
 * Without a plan (NULL) it exits then, which closes the links (their RCU grace periods) and
 * unmaps the address space as its last user. With one it empties plan's program arrays, offers
 * plan->keep and the maps (pinned: a run starting meanwhile takes them, early_links.h), closes
 * every other fd, its own of the offered links too (each link's grace period, in turn), clears
 * its owner entry, closes the lock and the owner map, waits until a later run has linked its
 * own tracepoints or taken these (at most plan->linger_ms), withdraws the offer if it is still
 * there, and exits. The plan is read at
 * memtrack's exit: it must stay valid until then (static or memtrack's heap, never freed).
 * After this, memtrack should exit without closing or freeing.
 * Returns the child's pid, or -errno (then nothing was started: detach in the foreground).
 */
pid_t detacher__start(const struct detacher_plan *plan);

#endif
