// SPDX-License-Identifier: MIT
/* The results file: hyperfine's keys and types, ours beside them, and reading it back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../../bench/results_json.h"

static double times[] = {0.010, 0.012, 0.011};
static double user[] = {0.004, 0.005, 0.006};
static double sys_[] = {0.001, 0.002, 0.003};
static int codes[] = {0, 0, 0};
static double one_time[] = {0.5};
static int one_code[] = {0};

/* Two good benchmarks (one with a single round) and one failed; nothing heap-allocated. */
static void sample(struct bench_results *res, struct bench_result v[3])
{
	memset(res, 0, sizeof(*res));
	memset(v, 0, 3 * sizeof(*v));
	v[0] = (struct bench_result){.name = "ls",
				     .id = "ls-id",
				     .command = "ls -la",
				     .conclude = "rm -f out/*",
				     .nr_rounds = 3,
				     .warmup_rounds = 2,
				     .times = times,
				     .user = user,
				     .sys = sys_,
				     .exit_codes = codes,
				     .max_rss = 4 << 20,
				     .user_mean = 0.005,
				     .sys_mean = 0.002};
	bench_stats__compute(times, 3, &v[0].stats);
	v[1] = (struct bench_result){.name = "once",
				     .id = "once",
				     .command = "sleep 0.5",
				     .nr_rounds = 1,
				     .times = one_time,
				     .user = one_time,
				     .sys = one_time,
				     .exit_codes = one_code};
	bench_stats__compute(one_time, 1, &v[1].stats);
	v[2] = (struct bench_result){.name = "bad",
				     .id = "bad",
				     .command = "true",
				     .conclude = "false",
				     .failed = true,
				     .exit_code = 1};
	res->v = v;
	res->nr = 3;
	res->nr_failed = 1;
	res->config = "suite.yml";
	res->env = (struct bench_env){
	    .kernel = "6.1.0", .machine = "x86_64", .cpu = "Test CPU", .cpus = 2};
}

/* Writes res to a new temporary file (its name into path) and parses it back. */
static json_t *write_and_load(const struct bench_results *res, char *path)
{
	json_error_t jerr;
	json_t *root;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(bench_json__write(res, path), 0);
	root = json_load_file(path, 0, &jerr);
	assert_non_null(root);
	return root;
}

static void test_shape(void **state)
{
	static const char *const hyperfine_reals[] = {"mean",	"stddev", "median", "user",
						      "system", "min",	  "max"};
	struct bench_result v[3];
	struct bench_results res;
	char path[] = "/tmp/test_bench_json.XXXXXX";
	json_t *root, *results, *r, *env;

	(void)state;
	sample(&res, v);
	root = write_and_load(&res, path);

	results = json_object_get(root, "results");
	assert_true(json_is_array(results));
	assert_int_equal(json_array_size(results), 2); /* the failed one is not a result */
	r = json_array_get(results, 0);
	assert_string_equal(json_string_value(json_object_get(r, "command")), "ls -la");
	for (size_t i = 0; i < sizeof(hyperfine_reals) / sizeof(hyperfine_reals[0]); i++)
		if (!json_is_real(json_object_get(r, hyperfine_reals[i])))
			fail_msg("'%s' is not a real", hyperfine_reals[i]);
	assert_float_equal(json_real_value(json_object_get(r, "mean")), 0.011, 1e-12);
	assert_float_equal(json_real_value(json_object_get(r, "median")), 0.011, 1e-12);
	assert_float_equal(json_real_value(json_object_get(r, "min")), 0.010, 1e-12);
	assert_float_equal(json_real_value(json_object_get(r, "user")), 0.005, 1e-12);
	assert_int_equal(json_array_size(json_object_get(r, "times")), 3);
	assert_float_equal(json_real_value(json_array_get(json_object_get(r, "times"), 1)), 0.012,
			   1e-12);
	assert_int_equal(json_array_size(json_object_get(r, "exit_codes")), 3);
	assert_true(json_is_integer(json_array_get(json_object_get(r, "exit_codes"), 0)));
	/* ours */
	assert_string_equal(json_string_value(json_object_get(r, "name")), "ls");
	assert_string_equal(json_string_value(json_object_get(r, "id")), "ls-id");
	assert_string_equal(json_string_value(json_object_get(r, "mode")), "walltime");
	assert_string_equal(json_string_value(json_object_get(r, "conclude")), "rm -f out/*");
	/* no conclude, no key: hyperfine's readers see the same shape as before */
	assert_null(json_object_get(json_array_get(results, 1), "conclude"));
	assert_int_equal(json_integer_value(json_object_get(r, "rounds")), 3);
	assert_int_equal(json_integer_value(json_object_get(r, "warmup_rounds")), 2);
	assert_int_equal(json_integer_value(json_object_get(r, "max_rss")), 4 << 20);
	assert_true(json_is_real(json_object_get(r, "iqr")));
	assert_true(json_is_integer(json_object_get(r, "outliers")));
	/* one round: stddev undefined, written as null like hyperfine */
	assert_true(json_is_null(json_object_get(json_array_get(results, 1), "stddev")));

	assert_int_equal(json_array_size(json_object_get(root, "failures")), 1);
	assert_int_equal(json_integer_value(json_object_get(
			     json_array_get(json_object_get(root, "failures"), 0), "exit_code")),
			 1);
	/* the failure may have been the conclude's, so the entry names it */
	assert_string_equal(json_string_value(json_object_get(
				json_array_get(json_object_get(root, "failures"), 0), "conclude")),
			    "false");
	env = json_object_get(root, "environment");
	assert_string_equal(json_string_value(json_object_get(env, "kernel")), "6.1.0");
	assert_string_equal(json_string_value(json_object_get(env, "cpu")), "Test CPU");
	assert_true(json_is_null(json_object_get(env, "governor")));
	json_decref(root);
	unlink(path);
}

static void test_read_back(void **state)
{
	struct bench_result v[3];
	struct bench_results res, back;
	char path[] = "/tmp/test_bench_json.XXXXXX";
	int fd;

	(void)state;
	sample(&res, v);
	fd = mkstemp(path);
	close(fd);
	assert_int_equal(bench_json__write(&res, path), 0);
	assert_int_equal(bench_json__read(path, &back), 0);
	assert_int_equal(back.nr, 2);
	assert_string_equal(back.v[0].name, "ls");
	assert_string_equal(back.v[0].id, "ls-id");
	assert_int_equal(back.v[0].nr_rounds, 3);
	assert_float_equal(back.v[0].stats.median, 0.011, 1e-12);
	assert_int_equal(back.v[0].mode, BENCH_MODE_WALLTIME);
	assert_string_equal(back.v[0].conclude, "rm -f out/*");
	assert_null(back.v[1].conclude);
	bench_runner__free_results(&back);
	unlink(path);
}

/* bench_json__read of text written to a temporary file. */
static int read_text(const char *text, struct bench_results *back)
{
	char path[] = "/tmp/test_bench_json.XXXXXX";
	int fd = mkstemp(path), err;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	err = bench_json__read(path, back);
	unlink(path);
	return err;
}

static void test_read_hyperfine(void **state)
{
	/* what `hyperfine --export-json` writes: no name, the command is the identity */
	const char *text =
	    "{\"results\": [{\"command\": \"sleep 0.1\", \"mean\": 0.1, \"stddev\": "
	    "0.001, \"median\": 0.1, \"user\": 0.0, \"system\": 0.0, \"min\": 0.099, "
	    "\"max\": 0.102, \"times\": [0.1, 0.099, 0.102], \"exit_codes\": [0, 0, "
	    "0]}]}";
	struct bench_results back;

	(void)state;
	assert_int_equal(read_text(text, &back), 0);
	assert_int_equal(back.nr, 1);
	assert_string_equal(back.v[0].name, "sleep 0.1");
	assert_int_equal(back.v[0].nr_rounds, 3);
	assert_float_equal(back.v[0].stats.median, 0.1, 1e-12);
	bench_runner__free_results(&back);

	/* not a results file */
	assert_int_equal(read_text("{}", &back), -EPROTO);
	bench_runner__free_results(&back);
}

/* Memory mode, 4 rounds: peak RSS varies, the rest is the same every round. */
static double mem_values[BENCH_MEM_NR][4] = {
    [BENCH_MEM_PEAK_HEAP] = {2341599, 2341599, 2341599, 2341599},
    [BENCH_MEM_PEAK_RSS] = {17711104, 17207296, 17342464, 17289216},
    [BENCH_MEM_ALLOCATED] = {12028499, 12028499, 12028499, 12028499},
    [BENCH_MEM_ALLOCS] = {52221, 52221, 52221, 52221},
    [BENCH_MEM_LEAKED] = {0, 0, 0, 0},
};
static double mem_times[] = {0.6, 0.61, 0.62, 0.6};
static int mem_codes[] = {0, 0, 0, 0};

static void memory_sample(struct bench_results *res, struct bench_result *r)
{
	memset(res, 0, sizeof(*res));
	*r = (struct bench_result){.name = "py",
				   .id = "py",
				   .command = "python3 x.py",
				   .mode = BENCH_MODE_MEMORY,
				   .nr_rounds = 4,
				   .mem_rounds = 4,
				   .times = mem_times,
				   .user = mem_times,
				   .sys = mem_times,
				   .exit_codes = mem_codes};
	for (int m = 0; m < BENCH_MEM_NR; m++)
		r->mem[m] = mem_values[m];
	assert_int_equal(bench_stats__compute(mem_times, 4, &r->stats), 0);
	assert_int_equal(bench_memory__stats(r), 0);
	res->v = r;
	res->nr = 1;
	res->mode = BENCH_MODE_MEMORY;
	res->config = "mem.yml";
}

static void test_memory_shape(void **state)
{
	struct bench_result v;
	struct bench_results res;
	char path[] = "/tmp/test_bench_json.XXXXXX";
	json_t *root, *r, *mem, *m;

	(void)state;
	memory_sample(&res, &v);
	root = write_and_load(&res, path);
	r = json_array_get(json_object_get(root, "results"), 0);
	assert_string_equal(json_string_value(json_object_get(r, "mode")), "memory");
	assert_int_equal(json_integer_value(json_object_get(r, "rounds")), 4);
	mem = json_object_get(r, "memory");
	assert_true(json_is_object(mem));
	assert_int_equal(json_object_size(mem), BENCH_MEM_NR);
	for (int i = 0; i < BENCH_MEM_NR; i++) {
		const char *key = bench_metrics[i].key;
		json_t *values;

		m = json_object_get(mem, key);
		if (!json_is_object(m))
			fail_msg("memory.%s is not an object", key);
		assert_int_equal(json_object_size(m), 5); /* values, median, min, max, cv */
		values = json_object_get(m, "values");
		assert_int_equal(json_array_size(values), 4);
		for (size_t j = 0; j < 4; j++) {
			json_t *x = json_array_get(values, j);
			assert_true(json_is_integer(x)); /* bytes and counts stay whole */
			assert_int_equal(json_integer_value(x), (json_int_t)mem_values[i][j]);
		}
		assert_true(json_is_number(json_object_get(m, "median")));
		assert_true(json_is_number(json_object_get(m, "cv")));
	}
	m = json_object_get(mem, "peak_rss");
	/* sorted: 17207296 17289216 17342464 17711104 */
	assert_float_equal(json_number_value(json_object_get(m, "median")),
			   (17289216.0 + 17342464.0) / 2, 1e-6);
	assert_float_equal(json_number_value(json_object_get(m, "min")), 17207296, 1e-6);
	assert_float_equal(json_number_value(json_object_get(m, "max")), 17711104, 1e-6);
	assert_true(json_number_value(json_object_get(m, "cv")) > 0.005);
	/* identical rounds, zeros included, vary by exactly 0 */
	assert_float_equal(json_number_value(json_object_get(json_object_get(mem, "allocs"), "cv")),
			   0, 0);
	assert_float_equal(
	    json_number_value(json_object_get(json_object_get(mem, "leaked_bytes"), "cv")), 0, 0);
	/* format 1's single figures stay, as medians */
	assert_int_equal(json_integer_value(json_object_get(r, "peak_heap")), 2341599);
	assert_int_equal(json_integer_value(json_object_get(r, "allocs")), 52221);
	json_decref(root);

	/* and back */
	{
		struct bench_results back;

		assert_int_equal(bench_json__read(path, &back), 0);
		assert_int_equal(back.v[0].mode, BENCH_MODE_MEMORY);
		assert_int_equal(back.v[0].mem_rounds, 4);
		for (int i = 0; i < BENCH_MEM_NR; i++)
			for (size_t j = 0; j < 4; j++)
				assert_float_equal(back.v[0].mem[i][j], mem_values[i][j], 0);
		assert_float_equal(back.v[0].mem_stats[BENCH_MEM_PEAK_RSS].median,
				   v.mem_stats[BENCH_MEM_PEAK_RSS].median, 0);
		bench_runner__free_results(&back);
	}
	unlink(path);
}

/* A format-1 memory result: one round's figures at the top level, no "memory" object. */
static void test_memory_format1(void **state)
{
	const char *text = "{\"mode\": \"memory\", \"results\": [{\"name\": \"h\", "
			   "\"command\": \"h\", \"mode\": \"memory\", \"times\": [0.3], "
			   "\"peak_heap\": 1000, \"peak_rss\": 5000, \"allocs\": 10}]}";
	struct bench_results back;

	(void)state;
	assert_int_equal(read_text(text, &back), 0);
	assert_int_equal(back.v[0].mem_rounds, 1);
	assert_float_equal(back.v[0].mem[BENCH_MEM_PEAK_HEAP][0], 1000, 0);
	assert_float_equal(back.v[0].mem[BENCH_MEM_PEAK_RSS][0], 5000, 0);
	assert_float_equal(back.v[0].mem[BENCH_MEM_ALLOCS][0], 10, 0);
	assert_float_equal(back.v[0].mem[BENCH_MEM_ALLOCATED][0], 0, 0); /* absent */
	bench_runner__free_results(&back);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shape),	   cmocka_unit_test(test_read_back),
	    cmocka_unit_test(test_read_hyperfine), cmocka_unit_test(test_memory_shape),
	    cmocka_unit_test(test_memory_format1),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
