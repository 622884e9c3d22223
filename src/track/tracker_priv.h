/* SPDX-License-Identifier: MIT */
/*
 * The tracker's state, shared by its phases: load (tracker_load.c), run (tracker_run.c),
 * finish (tracker_finish.c); tracker.c sequences them and alone turns failures into exit
 * statuses. Every function here returns 0 or -errno and logs its own failure.
 */
#ifndef MEMTRACK_TRACKER_PRIV_H
#define MEMTRACK_TRACKER_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include "memtrack.skel.h"
#include "bpf/proc.h"
#include "acct/acct.h"
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "artifact/outdir.h"
#include "common/log.h"
#include "track/abi32.h"
#include "track/stop_relay.h"
#include "track/attach.h"
#include "track/btf_cache.h"
#include "track/consumer.h"
#include "track/early_links.h"
#include "track/libs.h"
#include "track/map_prep.h"
#include "track/pidns.h"
#include "track/preload_setup.h"
#include "track/prog_cache.h"
#include "track/rmap_backend.h"
#include "track/root_prep.h"
#include "track/sinks.h"
#include "track/spawn.h"
#include "stacks/ustack.h"
#include "track/stack_shm.h"
#include "track/tracker.h"
#include "track/watchdog.h"

/* The ring buffer map, then the big hash maps (map_prep.h), created on a thread from the run's
 * start (tracker_load.c) */
struct ring_prep {
	pthread_t thread;
	uint64_t bytes;
	int fd; /* or -errno */
	bool started;
	struct map_prep maps;
};

/* The maps and programs the run uses by fd, from the skeleton after a load or from the program
 * cache (prog_cache.h); -1: not loaded. tracker__fds_take fills them, by the object's names. */
struct tracker_fds {
	int events, procs, stop_ctl, known_exe, ustack_lost, global, drops, pidns;
	int on_fork, on_exec, on_exit, on_rss_stat, preload_ctl, mark_proc, pidns_probe;
};

struct tracker {
	const struct tracker_opts *o;
	struct stop_relay relay; /* parents that stopped themselves at our stops (stop_relay.h) */
	/* NULL after a load kept from an earlier run (pc.hit): fd alone then; only the
	 * uprobe_multi, non-rmap runs that the cache serves get there */
	struct memtrack_bpf *skel;
	bool loaded; /* skel or pc.hit: the programs are there */
	struct tracker_fds fd;
	struct pidns pidns; /* memtrack's pid namespace (pidns.h) */
	struct prog_cache pc;
	uint64_t cache_key;
	struct memtrack_bpf__rodata ro; /* the read-only values every instance is loaded with */
	/* the allocator programs, in skel (uprobe mode) or in alloc_skel, a second instance
	 * loaded on first need (tracker__alloc_ensure); NULL until loaded */
	struct memtrack_bpf *alloc_skel;
	/* the USDT marker program, a third instance loaded at the first library with memtrack's
	 * probes; NULL until then */
	struct memtrack_bpf *marker_skel;
	struct attach_prog alloc_entry, alloc_ret; /* fd -1 until loaded */
	/* the session program (alloc.bpf.c: mt_alloc_session), fd -1: none (attach.h) */
	struct attach_prog alloc_session;
	bool multi; /* uprobe_multi links, else perf-event uprobes */
	int8_t session; /* uprobe sessions: -1 not asked yet (tracker__session), 0, 1 */
	int tp_fds[8]; /* raw tracepoint links not made early, tp_nr of them */
	int tp_nr;
	/* the tracepoints and the interposer's control points, linked while the programs load;
	 * early_ok: every one of them serves (else tp_links and ctl_* do, attached after) */
	struct early_links early;
	bool early_ok;
	/* the interposer's control points (served.bpf.c): one uprobe_multi link, or two perf */
	int ctl_fd;
	/* the control points trap (the shm's ctl_live set) and, in auto mode, the registrations
	 * made before were scanned: glibc's uprobes may go in (tracker__ctl_ready) */
	bool ctl_ready;
	/* stop_ctl[15] - [16] and [17] - [14] when the command was released, the tree held: the
	 * counts of forks before and after their insertion into procs differ by this at rest
	 * (tracker__tree_alive, glibc__needed) */
	__u64 fork_drift, need_drift;
	uint64_t empty_since; /* tracker__tree_alive: the first of the empty looks in a row */
	uint32_t ctl_marked; /* processes that scan marked served */
	struct bpf_link *ctl_links[3]; /* one per MT_PRELOAD_CTL_* (bpf/proc.h) */
	struct bpf_link *rmap_links[RMAP_FN_NR + 1]; /* fentry rmap backend */
	struct rmap_choice rmap;
	struct btf_cache btf;
	struct attach_set *set;
	struct libs *libs;
	struct artifact_writer *writer;
	struct heap_acct *acct;
	struct consumer cons;
	struct ring_prep ring;
	struct record_sinks sinks; /* the writer and acct above, behind the consumer */
	struct spawn sp;
	struct watchdog wd; /* resumes the stopped tasks if we die (watchdog.c) */
	struct manifest m;
	struct outdir out; /* -o DIR: the artifact and the manifest are created in it */
	char manifest_name[32];
	int epfd, sigfd;
	uint64_t ring_lost_ns; /* CLOCK_MONOTONIC when the ring could no longer be read; 0 */
	uint64_t ctl_stops;
	uint64_t ctl_not_stopped; /* control records whose task the BPF side left running */
	uint64_t abi_unrecorded;  /* execs of 32-bit programs (drops.abi, control_inspect_exe) */
	/* preload mode: images the interposer cannot serve, lost (drops.unserved, tracker__judge)
	 */
	uint64_t preload_unserved;
	uint64_t late_probes;	  /* images run on while probed (drops.late_probes) */
	bool inspect_gone;	  /* the last exec inspection found its process gone */
	/* auto: processes marked as needing glibc's uprobes (tracker_glibc.c), the last look at
	 * the tree for them (CLOCK_MONOTONIC ns), and whether the root is one */
	uint64_t glibc_marks;
	uint64_t glibc_scan_ns;
	uint64_t glibc_exits; /* Exit records at that look */
	bool glibc_rescan;    /* an image judged not to need them since */
	pid_t glibc_closer;   /* the child closing the links taken out (tracker_glibc.c), 0 */
	void *glibc_stack;    /* its stack */
	struct attach_taken *glibc_taken; /* and its links */
	bool glibc_closing_untagged;	  /* some without a generation (libs__glibc_untagged) */
	bool root_glibc;
	bool glibc_dlopen_kept; /* an executable defining malloc judged while they were in */
	uint64_t drops_total; /* drops of every reason (BPF side, preload), by tracker__finish */
	bool handed_off; /* a detacher holds every BPF fd and our address space (detach below) */
	struct root_prep root;	  /* the root executable, inspected while the programs load */
	struct preload_setup pre; /* --alloc-hooks preload: the interposer's source */
	struct abi32 abi32;	  /* 32-bit programs through the i386 interposer (abi32.h) */
	bool pre_added;		  /* its source belongs to the consumer (destroyed with it) */
	uint64_t t_start; /* CLOCK_MONOTONIC ns at tracker__run's start: tracker__mark's zero */
	struct stack_sink *stk_sink; /* --stacks: the stacks file (tracker_stacks.c) */
	struct stack_shm *stk_shm;   /* --stacks with preload: the interposer's stack area */
	struct ustack *ustk;	     /* --stacks: the uprobe path's stacks (stacks/ustack.h) */
	size_t seen_next; /* files of libs listed in the seen-files table (tracker__seen_publish) */
};

static inline uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* -v: "<ms since the run began> <what>" on stderr, the phases' fine structure */
static inline void tracker__mark(const struct tracker *t, const char *what)
{
	if (log__level >= LOG_VERBOSE)
		log__debug(LOG_VERBOSE, "%7.2f ms %s", (now_ns(CLOCK_MONOTONIC) - t->t_start) / 1e6,
			   what);
}

/* Starts creating the ring buffer map (ring_bytes) and the big hash maps on a thread; the load
 * takes them. */
void tracker__ring_start(struct tracker *t);
/* Ends its thread and closes what the load did not take; idempotent. */
void tracker__ring_close(struct tracker *t);
/* Before the fork: the program cache's key and slot (prog_cache.h); then the ring's thread,
 * unless the slot holds a load. Never fails the run. */
void tracker__cache_open(struct tracker *t);
/* load: BTF, skeleton open and load (rmap backend fallback), the allocator attach set */
int tracker__load(struct tracker *t);
/* The read-only values of a load for rmap backend `backend`, and onto an instance's. */
void tracker__rodata(const struct tracker *t, struct memtrack_bpf__rodata *ro, int backend);
void tracker__rodata_apply(struct memtrack_bpf__rodata *dst, const struct memtrack_bpf__rodata *ro);
/* Whether the allocator programs load with the others (uprobe and preload modes). */
bool tracker__alloc_eager(const struct tracker *t);
bool tracker__session(struct tracker *t);

/* The kept load (tracker_kept.c, prog_cache.h) */
/* Fills t->fd from the skeleton or the slot; 0 or -ENOENT (*missing: the name). */
int tracker__fds_take(struct tracker *t, const char **missing);
/* After a fresh load: everything pinned into the run's slot, sealed; never fails the run. */
void tracker__cache_store(struct tracker *t);
/* Pins s's loaded programs into the slot (a later instance's too). */
void tracker__cache_programs(struct tracker *t, struct memtrack_bpf *s);
/* Takes the slot's load: 0, 1 (unusable: given up, load instead) or -ENOMEM. */
int tracker__load_kept(struct tracker *t);
/* The allocator programs from the slot, when a run pinned them: 0 or -ENOENT. */
int tracker__alloc_take_kept(struct tracker *t);
/* Closes the fentry links and the skeletons; idempotent. */
void tracker__unload(struct tracker *t);
/* Loads the allocator uprobe programs unless they are: call before attaching anything to a
 * library (t->set does, on its first attach). Idempotent; 0 or -errno (logged). */
int tracker__alloc_ensure(struct tracker *t);

/* control records (tracker_control.c): the consumer's handler of every control record (ctx:
 * the tracker); the stop controls (stop_ctl: every exec stops while auto mode judges each, and
 * what the BPF side judges them by); a mark in pid's procs entry unless its image began after
 * ts (enum mt_mark: 1 when marked, 0 when not, -errno) */
int tracker__control_record(void *ctx, const struct mt_event *ev);
/* The parent of pid if it is a process of the tree, else 0 (ctx: the tracker; stop_relay.h). */
pid_t tracker__tree_parent(void *ctx, pid_t pid);
/* Answers every stop whose record is written: the records read (stop_relay.h's settle). */
void tracker__settle(void *ctx);
int tracker__set_stops(struct tracker *t, bool on);
int tracker__set_stop_all(struct tracker *t, bool on);
uint64_t tracker__ctl_count(struct tracker *t, __u32 key);
uint64_t tracker__execs_judged(struct tracker *t);
/* Lists the files inspected since the last call in the interposers' seen-files table
 * (shm_abi.h): a served process's dlopen of those only goes on without a stop. Not with
 * --stacks: its dlopen stops also read the maps that stacks are unwound with. */
void tracker__seen_publish(struct tracker *t);
/* At the end: the files this run's dlopen stops found inert, into the cache of inert files
 * (inert_cache.h) when some are not in it yet. */
void tracker__inert_store(struct tracker *t);
int tracker__set_glibc_in(struct tracker *t);
/* Auto mode: glibc's uprobes go in (libs__attach_glibc), a generation of their own
 * (tracker_control.c). The libraries attached, or -errno. */
int tracker__glibc_attach(struct tracker *t);
/* tracker_glibc.c: marks pid (its image stamped ts) as needing glibc's uprobes or not */
void tracker__glibc_mark(struct tracker *t, pid_t pid, uint64_t ts, bool need);
/* From the loop: takes glibc's uprobes out once no process of the tree needs them. */
void tracker__glibc_tick(struct tracker *t);
/* Waits for the links taken out to be closed (before glibc's uprobes go in again while
 * some without a generation close, before glibc's dlopen stop alone, at the end). */
void tracker__glibc_wait(struct tracker *t);
/* At the end: leaves a close still running to finish on its own. */
void tracker__glibc_end(struct tracker *t);
int tracker__set_shm_owner(struct tracker *t);
/* what: an enum mt_mark, or MT_MARK_SERVED_AS(families) (proc.h) */
int tracker__mark_proc(struct tracker *t, int32_t pid, uint64_t ts, uint32_t what);

/* run: tracepoints, the root executable, the event loop, the command */
/* After the load: the loaded programs into the early links' slots (early_links.h); those
 * that could not be made are attached after (tracker__attach_*). 0 or -ENOMEM. */
int tracker__fill_early(struct tracker *t);
int tracker__attach_tracepoints(struct tracker *t);
int tracker__attach_root(struct tracker *t);
/* The interposer's registration probe (auto and preload modes); before the command runs. */
int tracker__attach_served(struct tracker *t);
/* Waits for the interposer's control link (made on its thread while the command runs) or
 * attaches it, then marks served the processes whose served call it may have missed (auto).
 * Before anything attaches glibc's uprobes; idempotent. 0 or -errno (logged). */
int tracker__ctl_ready(struct tracker *t);
/* tracker__ctl_ready for libs__set_pl_gate (ctx: the tracker) */
int tracker__pl_gate(void *ctx);
/* Adds the held command to the procs map: from then on the BPF side tracks it. */
int tracker__register_root(struct tracker *t);
int tracker__setup_loop(struct tracker *t);
void tracker__add_pidfd(struct tracker *t);
/* Returns the root's wait status, or -errno. */
int tracker__loop(struct tracker *t);

/* finish: the last drain, the manifest, detach */
int tracker__finish(struct tracker *t, int status, uint64_t t_run0, uint64_t t_start);
/* After a finished run: the summary, the artifact's name, the processes left running. */
void tracker__tell(struct tracker *t);
/* Entries 0..nr-1 of a per-CPU array of u64 counters, each summed over the CPUs, into sums;
 * returns their total. */
uint64_t tracker__percpu_sums(int fd, uint32_t nr, uint64_t *sums);
void tracker__destroy(struct tracker *t);

/* --stacks (tracker_stacks.c); each is a no-op without it */
int tracker__stacks_start(struct tracker *t);  /* before the fork: the stack area */
int tracker__stacks_open(struct tracker *t);   /* with the artifact: the file and its sink */
int tracker__stacks_finish(struct tracker *t); /* after the drain: close, manifest keys */
void tracker__stacks_destroy(struct tracker *t);

#endif
