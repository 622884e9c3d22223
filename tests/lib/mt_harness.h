/* SPDX-License-Identifier: MIT */
/*
 * Harness for the root tests: run `build/memtrack track` on a target from build/targets with a
 * fresh output directory and a pipe as $MT_EXPECT_FD, then hand back what the target said it
 * did (the side channel, see tests/targets/expect.h), the decoded artifact and the manifest.
 * Paths are relative to the repository root: the cwd when it has build/memtrack, else two
 * levels above the test binary (build/tests/X), else $MT_REPO_ROOT.
 * No cmocka in the .c: the unit-test binaries link this object too.
 */
#ifndef MT_TEST_HARNESS_H
#define MT_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>
#include <jansson.h>
#include "bpf/events.h"

/* Skip (cmocka) unless we can load BPF programs. Use inside a test function. */
#define MT_REQUIRE_ROOT()                                                                          \
	do {                                                                                       \
		if (geteuid() != 0) {                                                              \
			print_message("[ SKIP     ] needs root (CAP_BPF, CAP_PERFMON)\n");         \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

/* One side-channel line: OP PID TID TS ADDR OLD SIZE. */
struct mt_expect {
	char op[24];
	int32_t pid, tid;
	uint64_t ts, addr, old, size;
};

struct mt_run_opts {
	const char *const *track_opts; /* extra `memtrack track` options, NULL-terminated */
	const char *shell;	/* shell-command mode: run this string instead of `-- argv` */
	const char *const *env; /* extra "K=V" for memtrack (and so the command), NULL-terminated */
	const char *const *wrap; /* a command memtrack runs under (argv[0] a path), NULL-terminated:
				  * `unshare -p -f --mount-proc` */
	int timeout_s;		/* kill memtrack after this long; 0 = 120 s */
	bool no_expect_fd;	/* do not pass the side channel */
	int signal;		/* send this signal to memtrack itself ... */
	int signal_after_ms;	/* ... this long after starting it, */
	/* ... or after the command's side-channel line with this op arrived: how long memtrack
	 * takes to start (BPF load, attach) varies tenfold between a host and an emulated guest */
	const char *signal_after_line;
};

struct mt_run {
	char base[64]; /* temp dir: out/ and memtrack.log inside */
	char out[96];  /* the fresh -o DIR */
	int status; /* memtrack's exit status, 128+N if it was killed by N, -1 on harness error */
	bool timed_out;
	size_t nr_artifacts; /* *.MemtrackArtifact.msgpack files found in out/ */
	size_t nr_manifests; /* *.memtrack.json files found in out/ */
	int32_t root_pid;    /* from the artifact's file name; 0 if none */
	char artifact_path[192], manifest_path[192];
	struct mt_event *ev; /* artifact order */
	size_t nr_ev;
	int read_rc; /* 0 or the reader's error (-EBADMSG...) */
	char read_err[192];
	json_t *manifest;      /* NULL if missing or unparsable */
	struct mt_expect *exp; /* side channel, in the order the lines arrived */
	size_t nr_exp;
	char *log; /* memtrack's stderr (and stdout) */
};

/* Absolute path of build/targets/NAME and build/memtrack (rotating static buffers). */
const char *mt_target(const char *name);
const char *mt_memtrack(void);
const char *mt_repo_root(void);

/*
 * Runs `memtrack track -q -o OUT [track_opts] -- argv...` (or `... "shell"`) and collects
 * everything. argv[0] is a path (use mt_target()). Returns 0 when the run could be made and
 * its outputs looked at (whatever memtrack's status), -errno on harness failures.
 */
int mt_track(struct mt_run *r, const struct mt_run_opts *o, const char *const argv[]);
/* Frees, and removes the temp dir unless $MT_TEST_KEEP is set. NULL-safe, idempotent. */
void mt_run_free(struct mt_run *r);
/* Prints memtrack's log, the side channel and an event summary to stderr. */
void mt_run_dump(const struct mt_run *r);

/* A process started outside memtrack, with its own side channel. */
struct mt_proc {
	pid_t pid;
	int rfd;
	int status;
	struct mt_expect *exp;
	size_t nr_exp;
};
int mt_proc_start(struct mt_proc *p, const char *const argv[]);
/* Waits for it (after `timeout_s`, kills it) and reads its side channel. */
int mt_proc_wait(struct mt_proc *p, int timeout_s);
void mt_proc_free(struct mt_proc *p);

/* "malloc" -> MT_EV_MALLOC, "calloc", "realloc", "aligned" -> MT_EV_ALIGNED_ALLOC, "free";
 * MT_EV_NONE for markers and facts. */
uint32_t mt_op_type(const char *op);
/* Malloc, Calloc, Realloc, AlignedAlloc, Free */
bool mt_is_heap_type(uint32_t type);
const char *mt_type_name(uint32_t type);

/* The nth (0-based) side-channel line with this op (and tid, 0 = any); NULL if none. */
const struct mt_expect *mt_expect_find(const struct mt_expect *exp, size_t nr, const char *op,
				       int32_t tid, size_t nth);
size_t mt_expect_count(const struct mt_expect *exp, size_t nr, const char *op, int32_t tid);

/* Event selection; zero fields match anything (type 0 = any; t1 0 = no upper bound). */
struct mt_filter {
	uint32_t type;
	int32_t pid, tid;
	bool by_addr, by_size, heap_only;
	uint64_t addr, size;
	uint64_t t0, t1;
};
size_t mt_count(const struct mt_run *r, const struct mt_filter *f);
/* The matching events in timestamp order (stable), malloc'd array of pointers into r->ev. */
size_t mt_select(const struct mt_run *r, const struct mt_filter *f, const struct mt_event ***out);
const struct mt_event *mt_first(const struct mt_run *r, const struct mt_filter *f);

/* Does ev record what the expectation says (type, pid, tid, addr, size, old_addr)? */
bool mt_event_matches(const struct mt_event *ev, const struct mt_expect *e);
/* Events that record e; 1 is right. */
size_t mt_count_matching(const struct mt_run *r, const struct mt_expect *e);

/*
 * The strict check: between tid's "begin" and "end" lines (the nth such window of the tid),
 * the heap events of that tid in the artifact must be exactly the reported operations, in
 * order, with the same addresses and sizes. Returns 0, or -1 and a description in msg (the
 * full comparison also goes to stderr).
 */
int mt_check_window(const struct mt_run *r, int32_t tid, size_t nth, char *msg, size_t len);
/* Same over a separate expectation list (for targets whose side channel is elsewhere). */
int mt_check_window_exp(const struct mt_run *r, const struct mt_expect *exp, size_t nr, int32_t tid,
			size_t nth, char *msg, size_t len);

/* Peak over time of the sum of file+anon+shmem Rss over the tree (pid = 0) or one process,
 * from the artifact's Rss events (a process stops counting at its Exit). */
uint64_t mt_rss_peak(const struct mt_run *r, int32_t pid);

/* `memtrack report ARTIFACT` (the summary) on the run's artifact, stdout and stderr into buf
 * (NUL-terminated, cut at cap); its wait status (pclose), -1 when it cannot be run. */
int mt_report_summary(const struct mt_run *r, char *buf, size_t cap);

/* Manifest access by dotted path ("results.peak_rss", "drops.total"); NULL if absent. */
json_t *mt_json(const struct mt_run *r, const char *path);
/* 0 and *out when the value is a non-negative integer; -ENOENT / -EINVAL otherwise. */
int mt_json_u64(const struct mt_run *r, const char *path, uint64_t *out);

#endif
