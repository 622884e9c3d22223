/* SPDX-License-Identifier: MIT */
/* Running benchmarks: rounds through `bash -c`, timed from fork to reap. */
#ifndef BENCH_RUNNER_H
#define BENCH_RUNNER_H

#include <stdbool.h>
#include <stdint.h>
#include "config.h"
#include "stats.h"

enum bench_mode {
	BENCH_MODE_WALLTIME,
	BENCH_MODE_MEMORY, /* rounds under memtrack; figures from each round's manifest */
};

/* Memory mode's per-round figures, in the order tables and reports show them. */
enum bench_metric {
	BENCH_MEM_PEAK_HEAP,
	BENCH_MEM_PEAK_RSS,
	BENCH_MEM_ALLOCATED,
	BENCH_MEM_ALLOCS,
	BENCH_MEM_LEAKED,
	BENCH_MEM_NR,
};

struct bench_metric_info {
	const char *key;   /* manifest results key = our JSON key */
	const char *title; /* for tables: "Peak heap" */
	const char *unit;  /* NULL for bytes; else the counted thing, singular: "allocation" */
	bool required;	   /* a manifest without it is an error (allocated_bytes is newer) */
};

extern const struct bench_metric_info bench_metrics[BENCH_MEM_NR];

/* Rounds memory mode runs when neither the config nor the command line sets min-rounds. */
#define BENCH_MEMORY_MIN_ROUNDS 5

/* Where the numbers were taken. Strings owned; NULL when unknown. */
struct bench_env {
	char *kernel, *machine, *cpu, *governor;
	long cpus;
	uint64_t self_max_rss; /* bytes: memtrack-bench's own peak at start, the ru_maxrss floor */
	size_t command_env_bytes; /* the environment rounds get, padded (bench_layout__env) */
};

/* One measured round. */
struct bench_round {
	double wall, user, sys; /* seconds */
	uint64_t max_rss; /* bytes, ru_maxrss of the reaped child (and its reaped descendants) */
	int exit_code;	  /* 128 + signal when killed */
};

struct bench_result {
	char *name, *id, *command;
	char *conclude; /* the benchmark's untimed after-round command; NULL when none */
	enum bench_mode mode;
	size_t nr_rounds, warmup_rounds;
	double *times, *user, *sys; /* seconds, one per measured round */
	int *exit_codes;
	uint64_t max_rss;	  /* bytes, max over the measured rounds */
	struct bench_stats stats; /* of times */
	double user_mean, sys_mean;
	/* --mode memory: each metric's value per measured round (bytes or counts, exact in a
	 * double up to 2^53), and their statistics */
	double *mem[BENCH_MEM_NR];
	size_t mem_rounds; /* values in each mem[]: nr_rounds when measured here */
	struct bench_stats mem_stats[BENCH_MEM_NR];
	bool no_aslr; /* the rounds ran with ADDR_NO_RANDOMIZE */
	/* --mode memory: the heap metrics are the program's measured window's (MEMTRACK_START);
	 * window_rounds: rounds that had one, of those run here */
	bool window;
	size_t window_rounds;
	bool failed;
	int exit_code; /* of the failing round */
};

struct bench_results {
	struct bench_result *v;
	size_t nr, nr_failed;
	enum bench_mode mode;
	char *config; /* path of the config, for the JSON */
	struct bench_env env;
};

struct runner_opts {
	struct bench_options cli; /* overrides from the command line (their `set` bits) */
	const char *const *only;  /* --bench IDs; nr_only == 0 runs everything */
	size_t nr_only;
	const char *const *skip; /* --skip IDs, applied after --bench */
	size_t nr_skip;
	bool show_output; /* leave the commands' stdout/stderr on ours */
	bool progress;	  /* a progress line on stderr (the caller checks isatty) */
	enum bench_mode mode;
	const char *memtrack; /* the memtrack binary, for BENCH_MODE_MEMORY */
};

/*
 * Runs the selected benchmarks in file order into *out (free with bench_runner__free_results). A
 * benchmark's conclude command runs after each of its rounds, warm-up included, untimed. A
 * benchmark whose command or conclude command exits non-zero is logged, marked failed and
 * counted in nr_failed; the others still run. Returns 0, or -errno when nothing sensible could be
 * run (bad --bench ID, no memtrack binary, resources).
 */
int bench_runner__run(const struct bench_config *cfg, const struct runner_opts *o,
		      struct bench_results *out);

/* How a round's command starts. */
struct bench_launch {
	const char *workdir; /* NULL: ours */
	char *const *envp;   /* NULL: ours */
	bool show_output;    /* else stdout to /dev/null, stderr to errfd */
	bool no_aslr;	     /* personality(ADDR_NO_RANDOMIZE): inherited through memtrack's fork */
	int errfd;	     /* -1: /dev/null */
};

/* One round of argv (NULL-terminated, argv[0] looked up in PATH) with stdin from /dev/null.
 * Returns 0 when the child ran (whatever its status) or -errno when it could not be started. */
int bench_runner__round(char *const argv[], const struct bench_launch *l, struct bench_round *r);

/* The memtrack binary: $MEMTRACK, else "memtrack" beside /proc/self/exe. Malloc'ed, or NULL. */
char *bench_runner__find_memtrack(void);

/* Reads every bench_metrics key of results from the one *.memtrack.json in dir into
 * values[BENCH_MEM_NR] (the window's figures when the program has one: *windowed), then
 * empties dir. */
int bench_runner__read_manifest(const char *dir, double values[BENCH_MEM_NR], bool *windowed);

/* Fills r->mem_stats from r->mem over r->mem_rounds. 0, or -EINVAL (no rounds) / -ENOMEM. */
int bench_memory__stats(struct bench_result *r);

/* The command's environment, padded with LAYOUT_ENV_PAD=xxx... so the bytes execve copies
 * (strings and NULs) are a multiple of bucket; an inherited pad is replaced. *out borrows env's
 * strings; free it with bench_layout__env_free. 0, -EINVAL (bucket 0) or -ENOMEM. */
#define LAYOUT_ENV_PAD	  "MEMTRACK_BENCH_PAD"
#define LAYOUT_ENV_BUCKET 4096
int bench_layout__env(char *const *env, size_t bucket, char ***out);
void bench_layout__env_free(char **env);
size_t bench_layout__env_bytes(char *const *env);

void bench_env__detect(struct bench_env *env);
void bench_env__free(struct bench_env *env);

void bench_runner__free_results(struct bench_results *res);

#endif
