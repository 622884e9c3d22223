// SPDX-License-Identifier: MIT
/* Wall-time runner: warm-up, then measured rounds within the time and round budgets. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common/log.h"
#include "runner.h"

#define RUNNER_NOISY_CV	      0.10	  /* past this coefficient of variation, warn */
#define RUNNER_STDERR_TAIL    2048	  /* bytes of a failing command's stderr we show */
#define RUNNER_PROGRESS_EVERY 100000000LL /* ns between progress line updates */

static int64_t bench_runner__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static double bench_runner__tv(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

int bench_runner__round(char *const argv[], const struct bench_launch *l, struct bench_round *r)
{
	const char *workdir = l->workdir;
	bool show_output = l->show_output;
	int errfd = l->errfd;
	struct rusage ru;
	int64_t t0, t1;
	int status, devnull, err = 0;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0)
		return -errno;
	if (errfd >= 0 && (ftruncate(errfd, 0) || lseek(errfd, 0, SEEK_SET) < 0)) {
		err = -errno;
		goto cleanup;
	}
	/* The clock brackets fork..reap: what a user waits for, fork and exec included. */
	t0 = bench_runner__now();
	pid = fork();
	if (pid < 0) {
		err = -errno;
		goto cleanup;
	}
	if (pid == 0) {
		int efd = errfd >= 0 ? errfd : devnull;
		dup2(devnull, STDIN_FILENO);
		if (!show_output) {
			dup2(devnull, STDOUT_FILENO);
			dup2(efd, STDERR_FILENO);
		}
		if (workdir && chdir(workdir)) {
			dprintf(STDERR_FILENO, "memtrack-bench: cd %s: %s\n", workdir,
				strerror(errno));
			_exit(127);
		}
		/* query first: keep the persona's other flags */
		if (l->no_aslr && personality(personality(0xffffffff) | ADDR_NO_RANDOMIZE) < 0) {
			dprintf(STDERR_FILENO,
				"memtrack-bench: cannot turn address-space randomisation off: %s\n",
				strerror(errno));
			_exit(127);
		}
		execvpe(argv[0], argv, l->envp ? l->envp : environ);
		dprintf(STDERR_FILENO, "memtrack-bench: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (wait4(pid, &status, 0, &ru) < 0) {
		if (errno != EINTR) {
			err = -errno;
			goto cleanup;
		}
	}
	t1 = bench_runner__now();
	r->wall = (double)(t1 - t0) / 1e9;
	r->user = bench_runner__tv(&ru.ru_utime);
	r->sys = bench_runner__tv(&ru.ru_stime);
	r->max_rss = (uint64_t)ru.ru_maxrss * 1024; /* KiB on Linux */
	r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
cleanup:
	close(devnull);
	return err;
}

/* Prints what a failed command left on stderr, so a CI log says why. */
static void bench_runner__show_stderr(int errfd)
{
	char buf[RUNNER_STDERR_TAIL + 1];
	struct stat st;
	off_t from;
	ssize_t n;

	if (errfd < 0 || fstat(errfd, &st) || st.st_size == 0)
		return;
	from = st.st_size > RUNNER_STDERR_TAIL ? st.st_size - RUNNER_STDERR_TAIL : 0;
	n = pread(errfd, buf, RUNNER_STDERR_TAIL, from);
	if (n <= 0)
		return;
	buf[n] = '\0';
	fprintf(stderr, "--- stderr%s ---\n%s%s--- end ---\n", from ? " (tail)" : "", buf,
		buf[n - 1] == '\n' ? "" : "\n");
}

struct runner_state {
	const struct runner_opts *o;
	char **envp;	     /* ours, padded to LAYOUT_ENV_BUCKET bytes */
	size_t index, total; /* for the progress line */
	int64_t last_progress;
	int errfd;
	char *memdir; /* BENCH_MODE_MEMORY: memtrack's output folder for this benchmark */
};

static void bench_runner__progress(struct runner_state *st, const struct bench_result *r,
				   const char *phase, size_t rounds, int64_t elapsed,
				   int64_t budget)
{
	int64_t now = bench_runner__now();

	if (!st->o->progress || now - st->last_progress < RUNNER_PROGRESS_EVERY)
		return;
	st->last_progress = now;
	fprintf(stderr, "\r\033[K[%zu/%zu] %s: %s, %zu rounds, %.1f/%.1f s", st->index + 1,
		st->total, r->name, phase, rounds, (double)elapsed / 1e9, (double)budget / 1e9);
	fflush(stderr);
}

static void bench_runner__progress_clear(struct runner_state *st)
{
	if (st->o->progress) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	st->last_progress = 0;
}

/* Appends a measured round; mem (memory mode: that round's metrics) may be NULL. */
static int bench_runner__push(struct bench_result *r, const struct bench_round *round,
			      const double *mem, size_t *cap)
{
	if (r->nr_rounds == *cap) {
		size_t n = *cap ? *cap * 2 : 64;
		bool mem_ok = true;

		for (int i = 0; mem && i < BENCH_MEM_NR; i++) {
			double *m = realloc(r->mem[i], n * sizeof(double));
			if (m)
				r->mem[i] = m;
			mem_ok &= m != NULL;
		}
		double *t = realloc(r->times, n * sizeof(double));
		if (t)
			r->times = t;
		double *u = realloc(r->user, n * sizeof(double));
		if (u)
			r->user = u;
		double *s = realloc(r->sys, n * sizeof(double));
		if (s)
			r->sys = s;
		int *e = realloc(r->exit_codes, n * sizeof(int));
		if (e)
			r->exit_codes = e;
		if (!t || !u || !s || !e || !mem_ok)
			return -ENOMEM;
		*cap = n;
	}
	r->times[r->nr_rounds] = round->wall;
	r->user[r->nr_rounds] = round->user;
	r->sys[r->nr_rounds] = round->sys;
	r->exit_codes[r->nr_rounds] = round->exit_code;
	for (int i = 0; mem && i < BENCH_MEM_NR; i++)
		r->mem[i][r->nr_rounds] = mem[i];
	r->nr_rounds++;
	if (mem)
		r->mem_rounds = r->nr_rounds;
	if (round->max_rss > r->max_rss)
		r->max_rss = round->max_rss;
	return 0;
}

/*
 * Runs argv for benchmark b (its round, or its conclude command when `conclude`); a command that
 * cannot be started is an error, a bad exit is logged with its stderr tail and marks r failed.
 */
static int bench_runner__command(struct runner_state *st, const struct bench_entry *b,
				 const struct bench_options *opts, struct bench_result *r,
				 char *const argv[], bool conclude, struct bench_round *round)
{
	const char *cmd = conclude ? b->conclude : b->exec;
	int err;

	struct bench_launch l = {
	    .workdir = opts->working_directory,
	    .envp = st->envp,
	    .show_output = st->o->show_output,
	    .no_aslr = opts->no_aslr,
	    .errfd = st->errfd,
	};

	err = bench_runner__round(argv, &l, round);
	if (err) {
		log__error("cannot start %s '%s': %s", conclude ? "the conclude command of" : "benchmark",
			   b->name, strerror(-err));
		return err;
	}
	if (round->exit_code == 0)
		return 0;
	bench_runner__progress_clear(st);
	if (round->exit_code > 128)
		log__error("benchmark '%s' failed: %skilled by signal %d: %s", b->name,
			   conclude ? "its conclude command was " : "", round->exit_code - 128,
			   cmd);
	else
		log__error("benchmark '%s' failed: %s %d: %s", b->name,
			   conclude ? "its conclude command exited with status" : "exit status",
			   round->exit_code, cmd);
	bench_runner__show_stderr(st->errfd);
	r->failed = true;
	r->exit_code = round->exit_code;
	return 0;
}

/*
 * One round of the benchmark in the current mode, then (in memory mode) its manifest, then its
 * conclude command. The conclude's figures go nowhere: clean-up must not count as the benchmark.
 * Marks r failed (logged) on a bad exit or a missing manifest.
 */
static int bench_runner__one(struct runner_state *st, const struct bench_entry *b,
			     const struct bench_options *opts, struct bench_result *r,
			     struct bench_round *round, double mem[BENCH_MEM_NR])
{
	const struct runner_opts *o = st->o;
	char *bash_argv[] = {"bash", "-c", b->exec, NULL};
	char *mem_argv[] = {(char *)o->memtrack, "track", "-o", st->memdir, "-q", b->exec, NULL};
	char *conclude_argv[] = {"bash", "-c", b->conclude, NULL};
	struct bench_round concluded;
	int err;

	err = bench_runner__command(
	    st, b, opts, r, o->mode == BENCH_MODE_MEMORY ? mem_argv : bash_argv, false, round);
	if (err || r->failed)
		return err;
	if (o->mode == BENCH_MODE_MEMORY) {
		bool windowed = false;

		err = bench_runner__read_manifest(st->memdir, mem, &windowed);
		r->window_rounds += windowed;
		if (err) {
			log__error("benchmark '%s': no memtrack manifest in %s: %s", b->name,
				   st->memdir, strerror(-err));
			r->failed = true;
			return 0;
		}
	}
	if (!b->conclude)
		return 0;
	return bench_runner__command(st, b, opts, r, conclude_argv, true, &concluded);
}

/*
 * A program whose allocations differ between rounds has a reason (hash seeds, threads, random
 * data, addresses): say so once, since its changes then need the rounds to agree instead of
 * being exact.
 */
static void bench_runner__memory_hint(const struct bench_result *r)
{
	const struct bench_stats *s = &r->mem_stats[BENCH_MEM_ALLOCS];

	if (r->mem_rounds < 2 || s->min == s->max)
		return;
	log__warn("'%s': allocations differ between rounds (%.0f to %.0f): hash seeds, threads, "
		  "random data or addresses (try --no-aslr); see \"Reading memory numbers\" in "
		  "the README",
		  r->name, s->min, s->max);
}

static int bench_runner__benchmark(struct runner_state *st, const struct bench_config *cfg,
				   const struct bench_entry *b, struct bench_result *r)
{
	const struct runner_opts *o = st->o;
	struct bench_options opts;
	struct bench_round round;
	double mem[BENCH_MEM_NR], wall_sum = 0;
	bool memory = o->mode == BENCH_MODE_MEMORY;
	size_t cap = 0;
	int64_t t0;
	int err;

	r->mode = o->mode;
	r->name = strdup(b->name);
	r->id = strdup(b->id);
	r->command = strdup(b->exec);
	r->conclude = b->conclude ? strdup(b->conclude) : NULL;
	if (!r->name || !r->id || !r->command || (b->conclude && !r->conclude))
		return -ENOMEM;
	err = bench_config__resolve(cfg, b, &o->cli, &opts);
	if (err)
		return err;
	r->no_aslr = opts.no_aslr;
	if (memory) {
		/* Several rounds: only they tell a deterministic figure from a noisy one (RSS,
		 * GC'd runtimes). A tracked round costs memtrack's set-up, so fewer than for wall
		 * time, and no warm-up unless asked for. */
		if (!(opts.set & BENCH_OPT_MIN_ROUNDS))
			opts.min_rounds = BENCH_MEMORY_MIN_ROUNDS;
		if (opts.max_rounds && opts.min_rounds > opts.max_rounds)
			opts.min_rounds = opts.max_rounds;
		if (!(opts.set & BENCH_OPT_WARMUP))
			opts.warmup_ns = 0;
	}

	t0 = bench_runner__now();
	while (opts.warmup_ns > 0 && bench_runner__now() - t0 < opts.warmup_ns) {
		err = bench_runner__one(st, b, &opts, r, &round, mem);
		if (err || r->failed)
			goto cleanup;
		r->warmup_rounds++;
		bench_runner__progress(st, r, "warm-up", r->warmup_rounds, bench_runner__now() - t0,
				       opts.warmup_ns);
	}

	t0 = bench_runner__now();
	for (;;) {
		int64_t elapsed = bench_runner__now() - t0;

		if (opts.max_rounds && (int64_t)r->nr_rounds >= opts.max_rounds)
			break;
		/* Past both floors, stop before a round expected to end beyond max-time. */
		if ((int64_t)r->nr_rounds >= opts.min_rounds && elapsed >= opts.min_time_ns &&
		    elapsed + (int64_t)(wall_sum / (double)r->nr_rounds * 1e9) > opts.max_time_ns)
			break;
		err = bench_runner__one(st, b, &opts, r, &round, mem);
		if (err || r->failed)
			goto cleanup;
		err = bench_runner__push(r, &round, memory ? mem : NULL, &cap);
		if (err)
			goto cleanup;
		wall_sum += round.wall;
		bench_runner__progress(st, r, "measuring", r->nr_rounds, bench_runner__now() - t0,
				       opts.max_time_ns);
	}

	r->window = memory && r->window_rounds;
	if (r->window && r->window_rounds != r->nr_rounds + r->warmup_rounds)
		log__warn("'%s': only %zu of %zu rounds reached MEMTRACK_START(): their figures mix "
			  "the window's and the whole run's",
			  r->name, r->window_rounds, r->nr_rounds + r->warmup_rounds);
	err = bench_stats__compute(r->times, r->nr_rounds, &r->stats);
	if (!err && memory)
		err = bench_memory__stats(r);
	if (err)
		goto cleanup;
	for (size_t i = 0; i < r->nr_rounds; i++) {
		r->user_mean += r->user[i] / (double)r->nr_rounds;
		r->sys_mean += r->sys[i] / (double)r->nr_rounds;
	}
	bench_runner__progress_clear(st);
	if (memory)
		bench_runner__memory_hint(r);
	if (o->mode == BENCH_MODE_WALLTIME && r->stats.cv > RUNNER_NOISY_CV)
		log__warn("'%s' is too noisy to trust: CV %.1f%% > %.0f%%, %zu outliers in %zu "
			  "rounds; quiet the machine or raise max-time",
			  b->name, r->stats.cv * 100, RUNNER_NOISY_CV * 100, r->stats.outliers,
			  r->nr_rounds);
cleanup:
	bench_runner__progress_clear(st);
	return err;
}

static bool bench_runner__matches(const char *const *ids, size_t n, const struct bench_entry *b)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ids[i], b->id) == 0 || strcmp(ids[i], b->name) == 0)
			return true;
	return false;
}

static bool bench_runner__selected(const struct runner_opts *o, const struct bench_entry *b)
{
	return (o->nr_only == 0 || bench_runner__matches(o->only, o->nr_only, b)) &&
	       !bench_runner__matches(o->skip, o->nr_skip, b);
}

/* A --bench or --skip naming nothing is a typo that would silently change the suite. */
static int bench_runner__check_ids(const struct bench_config *cfg, const char *const *ids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool found = false;
		for (size_t j = 0; j < cfg->nr_benchmarks && !found; j++)
			found = bench_runner__matches(&ids[i], 1, &cfg->benchmarks[j]);
		if (!found) {
			log__error("%s: no benchmark with id or name '%s'", cfg->path, ids[i]);
			return -ENOENT;
		}
	}
	return 0;
}

int bench_runner__run(const struct bench_config *cfg, const struct runner_opts *o,
		      struct bench_results *out)
{
	struct runner_state st = {.o = o, .errfd = -1};
	int err = 0;

	memset(out, 0, sizeof(*out));
	out->mode = o->mode;
	bench_env__detect(&out->env);
	out->config = strdup(cfg->path ? cfg->path : "");
	err = bench_runner__check_ids(cfg, o->only, o->nr_only);
	if (!err)
		err = bench_runner__check_ids(cfg, o->skip, o->nr_skip);
	if (err)
		return err;
	for (size_t j = 0; j < cfg->nr_benchmarks; j++)
		st.total += bench_runner__selected(o, &cfg->benchmarks[j]);
	out->v = calloc(st.total ? st.total : 1, sizeof(*out->v));
	if (!out->config || !out->v)
		return -ENOMEM;
	err = bench_layout__env(environ, LAYOUT_ENV_BUCKET, &st.envp);
	if (err)
		goto cleanup;
	out->env.command_env_bytes = bench_layout__env_bytes(st.envp);
	/* stderr of the commands goes to memory so a failure can show its tail */
	st.errfd = memfd_create("memtrack-bench-stderr", MFD_CLOEXEC);
	if (st.errfd < 0) {
		err = -errno;
		goto cleanup;
	}
	if (o->mode == BENCH_MODE_MEMORY) {
		const char *tmp = getenv("TMPDIR");
		if (asprintf(&st.memdir, "%s/memtrack-bench.XXXXXX", tmp && *tmp ? tmp : "/tmp") <
		    0) {
			st.memdir = NULL;
			err = -ENOMEM;
			goto cleanup;
		}
		if (!mkdtemp(st.memdir)) {
			err = -errno;
			log__error("cannot create '%s': %s", st.memdir, strerror(errno));
			goto cleanup;
		}
	}

	for (size_t j = 0; j < cfg->nr_benchmarks; j++) {
		const struct bench_entry *b = &cfg->benchmarks[j];
		struct bench_result *r;

		if (!bench_runner__selected(o, b))
			continue;
		r = &out->v[out->nr++];
		err = bench_runner__benchmark(&st, cfg, b, r);
		if (err)
			goto cleanup;
		out->nr_failed += r->failed;
		st.index++;
	}
cleanup:
	bench_layout__env_free(st.envp);
	if (st.errfd >= 0)
		close(st.errfd);
	if (st.memdir) {
		rmdir(st.memdir); /* bench_runner__read_manifest empties it after each round */
		free(st.memdir);
	}
	return err;
}

void bench_runner__free_results(struct bench_results *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->nr; i++) {
		struct bench_result *r = &res->v[i];
		free(r->name);
		free(r->id);
		free(r->command);
		free(r->conclude);
		free(r->times);
		free(r->user);
		free(r->sys);
		free(r->exit_codes);
		for (int m = 0; m < BENCH_MEM_NR; m++)
			free(r->mem[m]);
	}
	free(res->v);
	free(res->config);
	bench_env__free(&res->env);
	memset(res, 0, sizeof(*res));
}
