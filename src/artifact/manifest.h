/* SPDX-License-Identifier: MIT */
/*
 * `<root_pid>.memtrack.json`: the versioned metadata the artifact format has no room for.
 * Bump MANIFEST_FORMAT_VERSION on any incompatible change; adding keys is compatible.
 */
#ifndef MEMTRACK_MANIFEST_H
#define MEMTRACK_MANIFEST_H

#include <stdbool.h>
#include <stdint.h>
#include "bpf/events.h"
#include "common/records.h"

#define MANIFEST_FORMAT_VERSION 1
#define MANIFEST_SUFFIX ".memtrack.json"

/* processes[].alloc_hooks values, spelled by manifest__hooks_name() */
enum manifest_hooks {
	MANIFEST_HOOKS_UNSET = 0,
	MANIFEST_HOOKS_PRELOAD, /* "preload" */
	MANIFEST_HOOKS_UPROBE, /* "uprobe" */
	MANIFEST_HOOKS_NONE, /* "none" */
	MANIFEST_HOOKS_NR,
};

struct manifest_proc {
	int32_t pid;
	int32_t ppid; /* 0 for the root */
	char comm[16]; /* last exec'd name, from the kernel */
	uint64_t peak_heap; /* bytes, live heap maximum over the process' life */
	uint64_t peak_rss; /* bytes, max of file+anon+shmem */
	uint64_t allocs, frees;
	uint64_t leaked_bytes, leaked_count; /* still live at exit */
	uint64_t execs;
	/* which mechanism recorded its allocator calls, per family (enum manifest_hooks;
	 * MANIFEST_HOOKS_UNSET: not written) */
	uint8_t hooks_libc, hooks_cxx;
	/* a shared jemalloc, mimalloc or tcmalloc the interposer served (its own entry points);
	 * written only when set */
	uint8_t hooks_jemalloc, hooks_mimalloc, hooks_tcmalloc;
};

/* A process of the tree still running when memtrack stopped waiting for the tree (a signal
 * after the root exited): its records end there, with no Exit. */
struct manifest_running {
	int32_t pid;
	char comm[16];
};

struct manifest_library {
	char *path;
	char *kind; /* "libc", "libstdc++", "jemalloc", "mimalloc", "tcmalloc", "static" */
	uint32_t sites; /* probes attached in it (entry + return) */
};

/* results.window: the measured window (include/memtrack.h; semantics in src/acct/window.h) */
struct manifest_window {
	bool present; /* the program called MEMTRACK_START(): null in the JSON otherwise */
	uint64_t peak_heap; /* bytes, peak of window blocks live together */
	uint64_t allocs, allocated_bytes, frees; /* window blocks: made, their bytes, freed */
	uint64_t live_bytes, live_count; /* window blocks never freed (live at exit or at the end) */
	uint64_t starts, stops; /* START and STOP that opened and closed a process' window */
	uint64_t duration_ns; /* time during which some process' window was open */
};

/* markers[]: START, STOP and MARK calls in order */
struct manifest_marker {
	char kind[16]; /* "start", "stop", "mark" (16: read and written as a comm) */
	char name[MT_MARK_NAME_MAX + 1]; /* MARK's string, NUL-terminated; "" for the others */
	int32_t pid, tid;
	uint64_t ts_ns; /* CLOCK_MONOTONIC, as start_mono_ns */
	uint64_t heap; /* bytes, tree live heap then */
	uint64_t window_heap; /* bytes, window live then */
};

/*
 * Ownership, one rule: every pointer of a struct manifest (strings, argv and its strings,
 * libraries and their strings, running, procs, markers) is a heap block the manifest owns, and
 * manifest__free frees them all, whoever filled them (manifest__read, the tracker, the
 * accounting, a test). Fill strings with manifest__set_str / manifest__set_argv; to hand a
 * block to another manifest, move it (set the source's pointer to NULL).
 */
struct manifest {
	/* identity */
	char *memtrack_version;
	char *command; /* the shell string; with --, argv shell-quoted (older manifests: NULL) */
	char **argv; /* NULL-terminated, what was exec'd (bash -c CMD, or PROG ARGS) */
	int32_t root_pid;
	int exit_status; /* what memtrack exits with for the command: status, 128+sig, 127 */
	int term_signal; /* 0 unless a signal killed the command */
	char *kernel_release;
	char *artifact; /* file name of the artifact, relative to the manifest */
	int64_t start_unix_ns; /* CLOCK_REALTIME at start; timestamps in the artifact are MONOTONIC */
	int64_t start_mono_ns;

	/* mechanisms: "uprobe_multi" | "perf_uprobe"; "raw_tracepoint" | "tracepoint"; rmap:
	 * "off" | "fentry" | "tracepoint" with a reason */
	char *uprobe_mechanism;
	char *tracepoint_mechanism;
	char *rmap_backend;
	char *rmap_reason;
	/* when the allocator uprobe programs were loaded: "at load" (with the others: uprobe and
	 * preload modes), "at first attach" (auto: a library needed them), "not loaded" */
	char *alloc_programs;
	/* how the allocator sites' returns are caught: "session" (a uprobe session, 6.13+: a
	 * return prepared only for the calls of the tree's processes that need it),
	 * "return_probes" (every call's, by any process of the machine); NULL: none loaded */
	char *uprobe_returns;
	/* when the tracepoints and the interposer's control points were linked: "while loading"
	 * (on a thread, through tail-call trampolines, src/track/early_links.h), "taken from a
	 * finished run" (the tracepoints' trampolines its detacher offered, src/track/detacher.h)
	 * or "after loading" (the fallback) */
	char *hook_links;
	/* how the interposer's control link came (NULL: no interposer): "while loading" (on its
	 * own thread from the run's start), "taken from a finished run" (with the tracepoints'
	 * links, when the interposer is the file it was made on, src/track/early_links.c) or
	 * "after loading" (the fallback) */
	char *control_link;
	/* where the BPF programs came from: "kept <slot>" (a load an earlier run kept,
	 * src/track/prog_cache.h), "loaded, kept <slot>" (loaded and kept for later runs),
	 * "loaded (no cache: <why>)" */
	char *bpf_programs;
	/* kernel BTF used for CO-RE: "cache" or "generated" (a minimal BTF, see
	 * src/track/btf_cache.h), "vmlinux" (the whole kernel BTF), "kept" (no load: above) */
	char *btf_source;
	/* --alloc-hooks: "uprobe" or "preload"; the interposer's path (its drops are rows of
	 * drops[], from DROP_PRELOAD) */
	char *alloc_hooks;
	char *preload_lib;
	/* how the interposer stamps records: "tsc" (the TSC scaled to CLOCK_MONOTONIC) or
	 * "clock_gettime", and why not the TSC (src/track/stamp_clock.h); unset without it */
	char *preload_clock;
	char *preload_clock_reason;
	/* back-pressure: the times the interposer's threads slept on a full ring (the program
	 * waited for memtrack), and their total ns; 0 without the interposer */
	uint64_t preload_waits, preload_wait_ns;
	/* parents of the tree that stopped themselves when memtrack stopped their child (su,
	 * runuser, sudo) and that memtrack resumed (src/track/stop_relay.h) */
	uint64_t parents_resumed;
	/* the tree's stops memtrack answered (exec, dlopen, --stacks maps): each holds a process
	 * for the inspection's length */
	uint64_t stops;
	/* the tree's tasks that would have stopped but ran on, inspected while running: traced
	 * (ptrace), or a parent that takes SIGCHLD from a queue (src/bpf/maps.bpf.h). What they
	 * call through a library found there, before its uprobes attach, can be missing. */
	uint64_t not_stopped;
	/* auto: the tree's execs judged the interposer's by the BPF side, run on without a stop
	 * (src/bpf/exec_judge.bpf.c) */
	uint64_t execs_judged;
	/* served processes' dlopens that brought only files memtrack had inspected, run on
	 * without a stop (src/preload/preload_dl.c) */
	uint64_t dlopens_judged;
	/* shared files memtrack handed to processes of the tree that could not open them by
	 * their path (another user's, another /dev/shm: src/track/handoff.h) */
	uint64_t handoffs;
	/* auto: times glibc's uprobes were taken out, no process of the tree needing them any
	 * more (src/track/tracker_glibc.c) */
	uint64_t glibc_detaches;
	struct manifest_library *libraries;
	uint32_t nr_libraries;
	/* --stacks (stacks_file NULL: off, and neither key is written): outputs.stacks names the
	 * stacks file (docs/stacks.md); the `stacks` object says how stacks were taken per event
	 * path ("preload=libunwind") and counts allocation records with and without one */
	char *stacks_file;
	char *stacks_unwinder;
	uint64_t stacks_allocs, stacks_with_stack, stacks_distinct, stacks_modules;
	/* ... without one: unwinder failed, area full, bad ref, made before the process's unwinder
	 * was set up (libraries' constructors), recorded by uprobes (no stack on that path yet) */
	uint64_t stacks_unwind_failed, stacks_area_full, stacks_bad_ref, stacks_early, stacks_uprobe;
	/* allocations whose stack the interposer cut at a uretprobe's trampoline (stack_abi.h) */
	uint64_t stacks_cut_by_uretprobe;
	uint64_t stacks_file_bytes;
	/* the uprobe path: stacks the BPF side could not copy (ring full, sp unmapped), unwound
	 * in part, the ring bytes of the records that carried one, the time spent unwinding */
	uint64_t stacks_not_copied, stacks_truncated, stacks_ring_bytes, stacks_unwind_ns;

	/* accounting */
	uint64_t counts[MT_EV_TYPE_MAX]; /* per event type written to the artifact */
	uint64_t events_total;
	uint64_t drops[DROP_NR]; /* by reason (records__drops): BPF side, then preload */
	uint64_t consumer_drops; /* user side: records rejected (bad type, write failure) */
	bool complete; /* no drop anywhere, no process still running */
	struct manifest_running *running; /* "still_running" */
	uint32_t nr_running;

	/* phase timings, ns */
	uint64_t t_load, t_attach, t_run, t_drain, t_detach, t_total;

	/* results */
	uint64_t peak_heap; /* bytes, tree-wide live heap maximum */
	uint64_t peak_rss; /* bytes, tree-wide resident maximum (sum of processes) */
	uint64_t allocs, frees, leaked_bytes, leaked_count;
	uint64_t allocated_bytes; /* sum of the sizes of every allocation (realloc: its new size) */
	uint64_t memtrack_max_rss; /* memtrack's own ru_maxrss, bytes */
	uint64_t ringbuf_bytes;
	struct manifest_proc *procs;
	uint32_t nr_procs;
	struct manifest_window window;
	struct manifest_marker *markers;
	uint32_t nr_markers;
	uint64_t markers_dropped; /* past the markers kept (src/acct/window.h) */

	/* private: set by manifest__read, whose every non-NULL pointer above (the const strings
	 * included) is then a heap copy; manifest__free frees only when it is set, so a
	 * caller-built manifest (pointing at argv, literals...) is never freed by it. */
	bool read_allocated;
};

struct outdir;
/* Writes the JSON as d/name in one step (a new hidden file, then renamed), never replacing or
 * following anything already named name there (-EEXIST). Failures are logged. */
int manifest__write_new(const struct manifest *m, const struct outdir *d, const char *name);
/* The same at path, replacing a file (or link: not followed) already there. */
int manifest__write(const struct manifest *m, const char *path);
/* Parses a manifest written by manifest__write (any version <= ours); allocates strings and
 * arrays; free with manifest__free. Returns -EPROTO for a newer format version. */
int manifest__read(struct manifest *m, const char *path);
/* Frees every block m points to and zeroes it; NULL-safe, and harmless twice. */
void manifest__free(struct manifest *m);
/* *field = a copy of s (NULL for NULL), freeing what it held. 0 or -ENOMEM. */
int manifest__set_str(char **field, const char *s);
/* m->argv = a copy of the NULL-terminated argv (NULL for NULL), freeing what it held. 0 or
 * -ENOMEM. */
int manifest__set_argv(struct manifest *m, char *const *argv);
/* "preload", "uprobe", "none"; NULL for MANIFEST_HOOKS_UNSET and unknown values */
const char *manifest__hooks_name(unsigned hooks);

#endif
