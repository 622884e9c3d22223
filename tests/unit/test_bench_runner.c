// SPDX-License-Identifier: MIT
/* Real runs of tiny configs through bench_runner__run. Asserts counts and statuses; timings only
 * with a wide margin (a conclude that sleeps 0.5 s must not show in a round of `true`). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../../bench/config.h"
#include "../../bench/runner.h"
#include "../lib/mt_tmpdir.h"

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	if (mt_tmpdir_make(tmpdir, sizeof(tmpdir), "bench-runner"))
		return -1;
	setenv("BENCH_TMP", tmpdir, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	mt_tmpdir_remove(tmpdir); /* a failure leaves only a temp dir */
	return 0;
}

static int run(const char *text, const struct runner_opts *o, struct bench_results *res)
{
	struct bench_config cfg;
	int err = bench_config__parse(&cfg, "tiny.yml", text, strlen(text));

	assert_int_equal(err, 0);
	err = bench_runner__run(&cfg, o, res);
	bench_config__free(&cfg);
	return err;
}

/* The same, with stderr kept in log: what a failure says is part of the behaviour. */
static int run_logged(const char *text, const struct runner_opts *o, struct bench_results *res,
		      char *log, size_t size)
{
	int saved, fd = open(tmpdir, O_TMPFILE | O_RDWR, 0600), err;
	ssize_t n;

	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	err = run(text, o, res);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, log, size - 1, 0);
	log[n > 0 ? n : 0] = '\0';
	close(fd);
	return err;
}

/* Lines in tmpdir/name, or -1 when it does not exist. */
static long count_lines(const char *name)
{
	char *path;
	long n = 0;
	FILE *f;
	int c;

	assert_true(asprintf(&path, "%s/%s", tmpdir, name) > 0);
	f = fopen(path, "r");
	free(path);
	if (!f)
		return -1;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

static void test_tiny_suite(void **state)
{
	const char *text =
	    "options:\n  warmup-time: 0\n  max-rounds: 3\n"
	    "benchmarks:\n"
	    "  - name: true\n    exec: 'true'\n"
	    "  - name: in workdir\n    exec: test -f marker && echo hidden\n"
	    "    options:\n      working-directory: ${BENCH_TMP}\n"
	    "  - name: floors beat max-time\n    exec: 'true'\n"
	    "    options:\n      max-time: '0'\n      min-rounds: 4\n      max-rounds: 9\n";
	struct runner_opts o = {.mode = BENCH_MODE_WALLTIME};
	struct bench_results res;
	char *marker;
	FILE *f;

	(void)state;
	assert_true(asprintf(&marker, "%s/marker", tmpdir) > 0);
	f = fopen(marker, "w");
	assert_non_null(f);
	fclose(f);
	free(marker);

	assert_int_equal(run(text, &o, &res), 0);
	assert_int_equal(res.nr, 3);
	assert_int_equal(res.nr_failed, 0);
	for (size_t i = 0; i < res.nr; i++) {
		const struct bench_result *r = &res.v[i];
		assert_false(r->failed);
		assert_int_equal(r->warmup_rounds, 0);
		assert_int_equal(r->stats.n, r->nr_rounds);
		for (size_t k = 0; k < r->nr_rounds; k++) {
			assert_int_equal(r->exit_codes[k], 0);
			assert_true(r->times[k] > 0);
		}
		assert_true(r->stats.min <= r->stats.median && r->stats.median <= r->stats.max);
		assert_true(r->max_rss > 0);
	}
	assert_string_equal(res.v[0].name, "true");
	assert_int_equal(res.v[0].nr_rounds, 3); /* max-rounds caps (3 rounds of true fit in 3 s) */
	assert_int_equal(res.v[1].nr_rounds, 3);
	assert_int_equal(res.v[2].nr_rounds, 4); /* max-time 0, so exactly the min-rounds floor */
	assert_non_null(res.env.kernel);
	assert_true(res.env.cpus >= 1);
	bench_runner__free_results(&res);
}

static void test_failure_is_loud_and_isolated(void **state)
{
	const char *text = "options:\n  warmup-time: 0\n  max-rounds: 2\n"
			   "benchmarks:\n"
			   "  - name: fails\n    exec: echo boom >&2; exit 3\n"
			   "  - name: killed\n    exec: kill -TERM $$\n"
			   "  - name: still runs\n    exec: 'true'\n";
	struct runner_opts o = {.mode = BENCH_MODE_WALLTIME};
	struct bench_results res;

	(void)state;
	assert_int_equal(run(text, &o, &res), 0);
	assert_int_equal(res.nr, 3);
	assert_int_equal(res.nr_failed, 2);
	assert_true(res.v[0].failed);
	assert_int_equal(res.v[0].exit_code, 3);
	assert_true(res.v[1].failed);
	assert_int_equal(res.v[1].exit_code, 128 + 15);
	assert_false(res.v[2].failed);
	assert_int_equal(res.v[2].nr_rounds, 2);
	bench_runner__free_results(&res);
}

static void test_select(void **state)
{
	const char *text = "options:\n  warmup-time: 0\n  max-rounds: 1\n  min-rounds: 1\n"
			   "benchmarks:\n"
			   "  - {name: one, id: a, exec: 'true'}\n"
			   "  - {name: two, id: b, exec: 'false'}\n";
	const char *only_a[] = {"a"}, *only_x[] = {"x"};
	struct runner_opts o = {.mode = BENCH_MODE_WALLTIME, .only = only_a, .nr_only = 1};
	struct bench_results res;

	(void)state;
	assert_int_equal(run(text, &o, &res), 0);
	assert_int_equal(res.nr, 1);
	assert_string_equal(res.v[0].id, "a");
	assert_int_equal(res.nr_failed, 0);
	bench_runner__free_results(&res);

	o.only = only_x;
	assert_int_equal(run(text, &o, &res), -ENOENT);
	bench_runner__free_results(&res);
}

static void test_cli_overrides(void **state)
{
	const char *text = "options:\n  warmup-time: 10s\n  max-time: 60s\n  max-rounds: 1000\n"
			   "benchmarks:\n  - {name: t, exec: 'true'}\n";
	struct runner_opts o = {.mode = BENCH_MODE_WALLTIME};
	struct bench_results res;

	(void)state;
	/* the smoke flags: --warmup-time 0 --max-time 0 --min-rounds 2 */
	o.cli.set = BENCH_OPT_WARMUP | BENCH_OPT_MAX_TIME | BENCH_OPT_MIN_ROUNDS;
	o.cli.warmup_ns = 0;
	o.cli.max_time_ns = 0;
	o.cli.min_rounds = 2;
	assert_int_equal(run(text, &o, &res), 0);
	assert_int_equal(res.v[0].warmup_rounds, 0);
	assert_int_equal(res.v[0].nr_rounds, 2);
	bench_runner__free_results(&res);
}

/* hyperfine's --conclude: after every round, warm-up included, in the working directory. */
static void test_conclude_every_round(void **state)
{
	const char *text = "benchmarks:\n"
			   "  - name: t\n    exec: 'true'\n    conclude: echo x >> concluded\n"
			   "    options:\n      working-directory: ${BENCH_TMP}\n"
			   "      warmup-time: 200ms\n      min-rounds: 3\n      max-rounds: 3\n";
	struct runner_opts o = {.mode = BENCH_MODE_WALLTIME};
	struct bench_results res;

	(void)state;
	assert_int_equal(run(text, &o, &res), 0);
	assert_int_equal(res.nr_failed, 0);
	assert_true(res.v[0].warmup_rounds > 0);
	assert_int_equal(res.v[0].nr_rounds, 3);
	assert_int_equal(count_lines("concluded"),
			 (long)(res.v[0].warmup_rounds + res.v[0].nr_rounds));
	assert_string_equal(res.v[0].conclude, "echo x >> concluded");
	bench_runner__free_results(&res);
}

/*
 * A conclude that takes 0.5 s leaves rounds of `true` far below it: the clean-up is untimed. The
 * bar is half the sleep (a timed conclude puts every round above 0.5 s), some 10x what `bash -c
 * true` takes even on a busy machine, so load cannot fail it.
 */
static void test_conclude_untimed(void **state)
{
	const char *text = "options:\n  warmup-time: 0\n  min-rounds: 3\n  max-rounds: 3\n"
			   "benchmarks:\n  - {name: t, exec: 'true', conclude: sleep 0.5}\n";
	struct runner_opts o = {.mode = BENCH_MODE_WALLTIME};
	struct bench_results res;

	(void)state;
	assert_int_equal(run(text, &o, &res), 0);
	assert_int_equal(res.nr_failed, 0);
	assert_int_equal(res.v[0].nr_rounds, 3);
	for (size_t k = 0; k < res.v[0].nr_rounds; k++)
		if (res.v[0].times[k] >= 0.25)
			fail_msg("round %zu took %.3f s: the conclude was timed", k,
				 res.v[0].times[k]);
	bench_runner__free_results(&res);
}

static void test_conclude_failure(void **state)
{
	const char *text = "options:\n  warmup-time: 0\n  max-rounds: 2\n"
			   "benchmarks:\n"
			   "  - name: bad conclude\n    exec: 'true'\n"
			   "    conclude: echo cleanup broke >&2; exit 4\n"
			   "  - name: still runs\n    exec: 'true'\n    conclude: 'true'\n";
	struct runner_opts o = {.mode = BENCH_MODE_WALLTIME};
	struct bench_results res;
	char log[4096];

	(void)state;
	assert_int_equal(run_logged(text, &o, &res, log, sizeof(log)), 0);
	assert_int_equal(res.nr, 2);
	assert_int_equal(res.nr_failed, 1);
	assert_true(res.v[0].failed);
	assert_int_equal(res.v[0].exit_code, 4);
	assert_false(res.v[1].failed);
	assert_int_equal(res.v[1].nr_rounds, 2);
	if (!strstr(log, "benchmark 'bad conclude' failed: its conclude command exited with "
			 "status 4: echo cleanup broke >&2; exit 4") ||
	    !strstr(log, "cleanup broke\n--- end ---"))
		fail_msg("unexpected log:\n%s", log);
	bench_runner__free_results(&res);
}

/*
 * A stand-in for `memtrack track -o DIR -q CMD` that writes a manifest like memtrack's: peak RSS
 * grows by a page each round (a counter in BENCH_TMP), the rest is the same every round.
 */
static char *fake_memtrack(void)
{
	char *fake;
	FILE *f;

	assert_true(asprintf(&fake, "%s/fake-memtrack", tmpdir) > 0);
	f = fopen(fake, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\n"
	      "[ \"$1 $2 $4\" = 'track -o -q' ] || exit 9\n"
	      "bash -c \"$5\" || exit $?\n"
	      "echo \"$3\" > \"$BENCH_TMP/memdir\"\n"
	      "n=$(cat \"$BENCH_TMP/fake-rounds\" 2>/dev/null || echo 0); n=$((n + 1))\n"
	      "echo $n > \"$BENCH_TMP/fake-rounds\"\n"
	      "a=7; [ -n \"$FAKE_ALLOCS_VARY\" ] && a=$((7 + n % 2))\n"
	      "echo \"{\\\"results\\\": {\\\"peak_heap\\\": 4096, \\\"peak_rss\\\": $((1048576 + n "
	      "* 4096)),"
	      " \\\"allocs\\\": $a, \\\"allocated_bytes\\\": 9000, \\\"leaked_bytes\\\": 64}}\""
	      " > \"$3/4242.memtrack.json\"\n"
	      "echo artifact > \"$3/4242.MemtrackArtifact.msgpack\"\n",
	      f);
	fclose(f);
	assert_int_equal(chmod(fake, 0755), 0);
	return fake;
}

static void test_memory_mode(void **state)
{
	/* the conclude proves it runs after the manifest was read, which removes it */
	const char *text =
	    "benchmarks:\n  - name: m\n    exec: 'true'\n"
	    "    conclude: d=$(cat ${BENCH_TMP}/memdir) && [ -d \"$d\" ] &&"
	    " ! [ -e \"$d/4242.memtrack.json\" ] && echo ok >> ${BENCH_TMP}/mem-concluded\n";
	struct runner_opts o = {.mode = BENCH_MODE_MEMORY};
	struct bench_results res;
	const struct bench_result *r;
	char *fake = fake_memtrack(), log[8192];

	(void)state;
	o.memtrack = fake;
	/* no time to spare: the default floor of rounds alone decides */
	o.cli.set = BENCH_OPT_MAX_TIME;
	o.cli.max_time_ns = 0;
	assert_int_equal(run_logged(text, &o, &res, log, sizeof(log)), 0);
	assert_null(strstr(log, "allocations differ")); /* RSS may vary, allocations did not */
	assert_int_equal(res.nr_failed, 0);
	r = &res.v[0];
	assert_int_equal(r->nr_rounds, BENCH_MEMORY_MIN_ROUNDS);
	assert_int_equal(r->mem_rounds, BENCH_MEMORY_MIN_ROUNDS);
	assert_int_equal(r->warmup_rounds, 0);
	for (size_t i = 0; i < r->mem_rounds; i++) {
		assert_float_equal(r->mem[BENCH_MEM_PEAK_HEAP][i], 4096, 0);
		assert_float_equal(r->mem[BENCH_MEM_PEAK_RSS][i], 1048576 + (i + 1) * 4096.0, 0);
		assert_float_equal(r->mem[BENCH_MEM_ALLOCS][i], 7, 0);
		assert_float_equal(r->mem[BENCH_MEM_ALLOCATED][i], 9000, 0);
		assert_float_equal(r->mem[BENCH_MEM_LEAKED][i], 64, 0);
	}
	assert_float_equal(r->mem_stats[BENCH_MEM_PEAK_RSS].median, 1048576 + 3 * 4096.0, 0);
	assert_float_equal(r->mem_stats[BENCH_MEM_PEAK_HEAP].cv, 0, 0);
	assert_true(r->mem_stats[BENCH_MEM_PEAK_RSS].cv > 0);
	assert_int_equal(count_lines("mem-concluded"), BENCH_MEMORY_MIN_ROUNDS);
	bench_runner__free_results(&res);

	/* min-rounds and max-rounds apply */
	o.cli.set = BENCH_OPT_MAX_TIME | BENCH_OPT_MIN_ROUNDS;
	o.cli.min_rounds = 7;
	assert_int_equal(run(text, &o, &res), 0);
	assert_int_equal(res.v[0].mem_rounds, 7);
	bench_runner__free_results(&res);
	o.cli.set = BENCH_OPT_MAX_ROUNDS;
	o.cli.max_rounds = 2;
	assert_int_equal(run(text, &o, &res), 0);
	assert_int_equal(res.v[0].mem_rounds, 2);
	bench_runner__free_results(&res);

	/* allocations that differ between rounds get a hint */
	setenv("FAKE_ALLOCS_VARY", "1", 1);
	assert_int_equal(run_logged(text, &o, &res, log, sizeof(log)), 0);
	unsetenv("FAKE_ALLOCS_VARY");
	if (!strstr(log, "warning: 'm': allocations differ between rounds (7 to 8)"))
		fail_msg("unexpected log:\n%s", log);
	bench_runner__free_results(&res);
	free(fake);
}

/* A manifest without a metric memory mode needs fails the benchmark, and says which key. */
static void test_memory_bad_manifest(void **state)
{
	const char *text = "benchmarks:\n  - name: m\n    exec: 'true'\n";
	struct runner_opts o = {.mode = BENCH_MODE_MEMORY};
	struct bench_results res;
	char *fake, log[4096];
	FILE *f;

	(void)state;
	assert_true(asprintf(&fake, "%s/fake-memtrack-bad", tmpdir) > 0);
	f = fopen(fake, "w");
	assert_non_null(f);
	fputs("#!/bin/sh\necho '{\"results\": {\"peak_heap\": 1}}' > \"$3/1.memtrack.json\"\n", f);
	fclose(f);
	assert_int_equal(chmod(fake, 0755), 0);
	o.memtrack = fake;
	assert_int_equal(run_logged(text, &o, &res, log, sizeof(log)), 0);
	assert_int_equal(res.nr_failed, 1);
	if (!strstr(log, "results.peak_rss must be an integer"))
		fail_msg("unexpected log:\n%s", log);
	bench_runner__free_results(&res);
	free(fake);
}

/* What the command starts with: a padded environment, and no randomisation when asked. */
static void test_layout(void **state)
{
	const char *text = "benchmarks:\n  - name: l\n    exec: wc -c < /proc/$$/environ >> "
			   "${BENCH_TMP}/env-bytes;"
			   " cat /proc/self/personality >> ${BENCH_TMP}/persona\n";
	struct runner_opts o = {.mode = BENCH_MODE_WALLTIME};
	struct bench_results res;
	char *path, line[64];
	FILE *f;

	(void)state;
	o.cli.set = BENCH_OPT_WARMUP | BENCH_OPT_MAX_ROUNDS | BENCH_OPT_MIN_ROUNDS | BENCH_OPT_ASLR;
	o.cli.max_rounds = o.cli.min_rounds = 2;
	o.cli.no_aslr = true;
	setenv("BENCH_LAYOUT_VAR", "one", 1);
	assert_int_equal(run(text, &o, &res), 0);
	assert_int_equal(res.env.command_env_bytes % LAYOUT_ENV_BUCKET, 0);
	assert_true(res.v[0].no_aslr);
	bench_runner__free_results(&res);
	/* a longer variable, the same size: the pad took the difference */
	setenv("BENCH_LAYOUT_VAR", "one two three", 1);
	o.cli.no_aslr = false;
	assert_int_equal(run(text, &o, &res), 0);
	bench_runner__free_results(&res);
	unsetenv("BENCH_LAYOUT_VAR");

	assert_true(asprintf(&path, "%s/env-bytes", tmpdir) > 0);
	f = fopen(path, "r");
	assert_non_null(f);
	for (int i = 0; i < 4; i++) {
		assert_non_null(fgets(line, sizeof(line), f));
		if (atol(line) % LAYOUT_ENV_BUCKET)
			fail_msg("round %d: the command's environment is %ld bytes", i, atol(line));
	}
	fclose(f);
	free(path);
	assert_true(asprintf(&path, "%s/persona", tmpdir) > 0);
	f = fopen(path, "r");
	assert_non_null(f);
	for (int i = 0; i < 4; i++) {
		assert_non_null(fgets(line, sizeof(line), f));
		/* ADDR_NO_RANDOMIZE (0x0040000) in the first two rounds only */
		assert_int_equal((strtoul(line, NULL, 16) & 0x0040000) != 0, i < 2);
	}
	fclose(f);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tiny_suite),
	    cmocka_unit_test(test_failure_is_loud_and_isolated),
	    cmocka_unit_test(test_select),
	    cmocka_unit_test(test_cli_overrides),
	    cmocka_unit_test(test_conclude_every_round),
	    cmocka_unit_test(test_conclude_untimed),
	    cmocka_unit_test(test_conclude_failure),
	    cmocka_unit_test(test_memory_mode),
	    cmocka_unit_test(test_memory_bad_manifest),
	    cmocka_unit_test(test_layout),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
