/* SPDX-License-Identifier: MIT */
/*
 * The benchmark config: a codspeed.yml-style YAML file.
 *
 *   options: { warmup-time, max-time, min-time, min-rounds, max-rounds, working-directory,
 *              aslr }
 *   benchmarks:
 *     - { name, id, exec, conclude, options: { ...same keys, override the top level... } }
 *
 * `conclude` (optional) is hyperfine's --conclude: a command run through `bash -c` after every
 * round, warm-up rounds included, in the benchmark's working directory and untimed, for
 * clean-up that must not count (deleting a round's output files, say).
 *
 * ${NAME} in `exec`, `conclude` and `working-directory` is replaced by the environment variable
 * NAME when the file is loaded (unset is an error); `$${` stands for a literal `${` handed to
 * bash.
 */
#ifndef BENCH_CONFIG_H
#define BENCH_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Which fields of struct bench_options hold a value. */
enum {
	BENCH_OPT_WARMUP = 1 << 0,
	BENCH_OPT_MAX_TIME = 1 << 1,
	BENCH_OPT_MIN_TIME = 1 << 2,
	BENCH_OPT_MIN_ROUNDS = 1 << 3,
	BENCH_OPT_MAX_ROUNDS = 1 << 4,
	BENCH_OPT_WORKDIR = 1 << 5,
	BENCH_OPT_ASLR = 1 << 6,
};

/* Defaults, after CodSpeed's wall-time mode (times) and hyperfine (rounds). */
#define BENCH_DEFAULT_WARMUP_NS	  1000000000LL
#define BENCH_DEFAULT_MAX_TIME_NS 3000000000LL
#define BENCH_DEFAULT_MIN_ROUNDS  10

struct bench_options {
	unsigned set; /* BENCH_OPT_* bits */
	int64_t warmup_ns, max_time_ns, min_time_ns;
	int64_t min_rounds, max_rounds; /* max_rounds 0 = no cap (only once resolved) */
	char *working_directory;	/* owned; NULL = the current directory */
	bool no_aslr; /* `aslr: false`: the command runs with personality(ADDR_NO_RANDOMIZE) */
	int line;     /* where the mapping starts, for errors about combinations */
};

struct bench_entry {
	char *name;
	char *id;	/* defaults to name */
	char *exec;	/* environment already expanded */
	char *conclude; /* expanded like exec; NULL when absent */
	struct bench_options opts;
	int line;
};

struct bench_config {
	char *path; /* as given, for messages */
	struct bench_options opts;
	struct bench_entry *benchmarks;
	size_t nr_benchmarks;
};

/* Mappings and sequences nested deeper than this are refused (a config uses 4). */
#define BENCH_CONFIG_MAX_DEPTH 64

/* Loads and validates a config (one YAML document); every error is logged as "FILE:LINE: ..." and returns -EINVAL
 * (or -errno when the file cannot be read). Free with bench_config__free even on failure. */
int bench_config__load(struct bench_config *cfg, const char *path);
/* Same from memory; `path` is only used in messages. */
int bench_config__parse(struct bench_config *cfg, const char *path, const char *text, size_t len);
void bench_config__free(struct bench_config *cfg);

/*
 * The options one benchmark runs with: CLI overrides over the benchmark's own over the top
 * level over the defaults. A CLI max-time also caps min-time, and a CLI min-rounds raises a
 * lower max-rounds, so short smoke runs never contradict the file. Returns -EINVAL (logged)
 * when the result contradicts itself. `out->working_directory` is borrowed.
 */
int bench_config__resolve(const struct bench_config *cfg, const struct bench_entry *b,
			  const struct bench_options *cli, struct bench_options *out);

/* Expands ${NAME}; on an unset or malformed reference returns -EINVAL with *bad_name set to a
 * malloc'ed copy of the name (or NULL when malformed). */
int bench_config__expand_env(const char *in, char **out, char **bad_name);

#endif
