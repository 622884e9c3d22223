// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "../../bench/config.h"
#include "common/log.h"

/* Fixtures sit in tests/bench/, found from this file's path so any cwd above it works. */
static char *fixture(const char *name)
{
	static char path[4096];
	const char *slash = strrchr(__FILE__, '/');
	snprintf(path, sizeof(path), "%.*s/../bench/%s", (int)(slash - __FILE__), __FILE__, name);
	return path;
}

/* stderr captured in memory: the error messages are the behaviour under test. */
static int saved_stderr = -1, capture_fd = -1;
static char captured[8192];

static void capture_begin(void)
{
	fflush(stderr);
	capture_fd = memfd_create("stderr", 0);
	saved_stderr = dup(STDERR_FILENO);
	dup2(capture_fd, STDERR_FILENO);
}

static const char *capture_end(void)
{
	ssize_t n;

	fflush(stderr);
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	n = pread(capture_fd, captured, sizeof(captured) - 1, 0);
	captured[n > 0 ? n : 0] = '\0';
	close(capture_fd);
	return captured;
}

/* Parses text that must fail; returns what was logged. */
static const char *parse_error(const char *text)
{
	struct bench_config cfg;
	int err;

	capture_begin();
	err = bench_config__parse(&cfg, "x.yml", text, strlen(text));
	capture_end();
	bench_config__free(&cfg);
	if (err != -EINVAL)
		fail_msg("accepted:\n%s", text);
	return captured;
}

#define assert_logged(text, msg)                                                                   \
	do {                                                                                       \
		const char *_log = parse_error(text);                                              \
		if (!strstr(_log, msg))                                                            \
			fail_msg("expected '%s' in:\n%s", msg, _log);                              \
	} while (0)

static void test_good_file(void **state)
{
	struct bench_config cfg;
	struct bench_options o, cli = {0};

	(void)state;
	setenv("BENCH_TEST_DIR", "/tmp/bt dir", 1);
	assert_int_equal(bench_config__load(&cfg, fixture("good.yml")), 0);
	assert_int_equal(cfg.nr_benchmarks, 2);
	assert_int_equal(cfg.opts.warmup_ns, 500000000LL);
	assert_int_equal(cfg.opts.min_rounds, 3);
	assert_string_equal(cfg.opts.working_directory, "/tmp/bt dir/work");

	assert_string_equal(cfg.benchmarks[0].name, "list files");
	assert_string_equal(cfg.benchmarks[0].id, "ls");
	assert_string_equal(cfg.benchmarks[0].exec, "ls -la \"/tmp/bt dir\" > /dev/null");
	assert_int_equal(cfg.benchmarks[0].line, 11);
	/* id defaults to the name; $${ is a literal ${ for bash */
	assert_string_equal(cfg.benchmarks[1].id, "sleep");
	assert_string_equal(cfg.benchmarks[1].exec, "sleep 0.001 && echo ${HOME}");

	/* the benchmark's own options win over the top level, the rest is inherited */
	assert_int_equal(bench_config__resolve(&cfg, &cfg.benchmarks[1], &cli, &o), 0);
	assert_int_equal(o.max_time_ns, 60000000000LL);
	assert_int_equal(o.max_rounds, 7);
	assert_int_equal(o.min_rounds, 3);
	assert_int_equal(o.min_time_ns, 1000000000LL);
	assert_int_equal(o.warmup_ns, 500000000LL);
	assert_string_equal(o.working_directory, "/tmp/bt dir/work");
	bench_config__free(&cfg);
}

static void test_defaults_and_cli(void **state)
{
	const char *text = "options:\n  min-time: 2s\n  max-rounds: 5\n"
			   "benchmarks:\n  - name: t\n    exec: 'true'\n";
	struct bench_options o, cli = {0};
	struct bench_config cfg;

	(void)state;
	assert_int_equal(bench_config__parse(&cfg, "x.yml", text, strlen(text)), 0);
	assert_int_equal(bench_config__resolve(&cfg, &cfg.benchmarks[0], &cli, &o), 0);
	assert_int_equal(o.warmup_ns, BENCH_DEFAULT_WARMUP_NS);
	assert_int_equal(o.max_time_ns, BENCH_DEFAULT_MAX_TIME_NS);
	/* the file's max-rounds 5 beats the default min-rounds 10 */
	assert_int_equal(o.max_rounds, 5);
	assert_int_equal(o.min_rounds, 5);
	assert_null(o.working_directory);

	/* smoke overrides: a CLI max-time caps the file's min-time, a CLI min-rounds lifts the
	 * file's max-rounds */
	cli.set = BENCH_OPT_MAX_TIME | BENCH_OPT_WARMUP | BENCH_OPT_MIN_ROUNDS;
	cli.max_time_ns = 200000000;
	cli.warmup_ns = 0;
	cli.min_rounds = 8;
	assert_int_equal(bench_config__resolve(&cfg, &cfg.benchmarks[0], &cli, &o), 0);
	assert_int_equal(o.max_time_ns, 200000000);
	assert_int_equal(o.min_time_ns, 200000000);
	assert_int_equal(o.warmup_ns, 0);
	assert_int_equal(o.min_rounds, 8);
	assert_int_equal(o.max_rounds, 8);
	bench_config__free(&cfg);
}

static void test_bad_file_names_file_line_key(void **state)
{
	struct bench_config cfg;
	int err;

	(void)state;
	capture_begin();
	err = bench_config__load(&cfg, fixture("bad-key.yml"));
	capture_end();
	bench_config__free(&cfg);
	assert_int_equal(err, -EINVAL);
	/* "memtrack-bench: <path>/bad-key.yml:3: unknown key 'max_time' (did you mean ...)" */
	assert_non_null(strstr(captured, "bad-key.yml:3: unknown key 'max_time' "
					 "(did you mean 'max-time'?)"));
	assert_non_null(strstr(captured, fixture("bad-key.yml")));

	capture_begin();
	err = bench_config__load(&cfg, fixture("does-not-exist.yml"));
	capture_end();
	bench_config__free(&cfg);
	assert_int_equal(err, -ENOENT);
	assert_non_null(strstr(captured, "does-not-exist.yml"));
}

static void test_bad_values(void **state)
{
	(void)state;
	assert_logged("options:\n  warmup-time: 5 sec\nbenchmarks:\n  - {name: a, exec: x}\n",
		      "x.yml:2: 'warmup-time': bad duration '5 sec'");
	assert_logged("options:\n  max-time: 5\nbenchmarks:\n  - {name: a, exec: x}\n",
		      "x.yml:2: 'max-time': bad duration '5'");
	assert_logged("benchmarks:\n  - name: a\n    exec: x\n    options:\n      min-rounds: 0\n",
		      "x.yml:5: 'min-rounds': expected a whole number >= 1, got '0'");
	assert_logged(
	    "benchmarks:\n  - name: a\n    exec: x\n    options:\n      max-rounds: 2.5\n",
	    "x.yml:5: 'max-rounds'");
	assert_logged(
	    "options:\n  min-time: 10s\n  max-time: 1s\nbenchmarks:\n  - {name: a, exec: x}\n",
	    "x.yml:2: 'min-time' is longer than 'max-time'");
	assert_logged(
	    "options:\n  min-rounds: 9\n  max-rounds: 3\nbenchmarks:\n  - {name: a, exec: x}\n",
	    "'min-rounds' is larger than 'max-rounds'");
	assert_logged("benchmarks:\n  - name: a\n    exec: [1, 2]\n",
		      "x.yml:3: 'exec' must be a string");
	assert_logged("benchmarks:\n  - name: a\n    exec: ''\n",
		      "x.yml:3: 'exec' must not be empty");
}

static void test_bad_structure(void **state)
{
	(void)state;
	assert_logged("benchmark:\n  - {name: a, exec: x}\n",
		      "x.yml:1: unknown key 'benchmark' (did you mean 'benchmarks'?)");
	assert_logged("benchmarks:\n  - name: a\n    exec: x\n    exce: y\n",
		      "x.yml:4: unknown key 'exce' (did you mean 'exec'?)");
	assert_logged("benchmarks:\n  - name: a\n    exec: x\n    colour: red\n",
		      "x.yml:4: unknown key 'colour'\n");
	assert_logged("benchmarks:\n  - name: a\n    entrypoint: x\n",
		      "'entrypoint' is not supported");
	assert_logged("benchmarks:\n  - name: a\n", "x.yml:2: benchmark 'a' has no 'exec'");
	assert_logged("benchmarks:\n  - exec: x\n", "x.yml:2: benchmark has no 'name'");
	assert_logged("benchmarks:\n  - {name: a, exec: x}\n  - {name: a, exec: y}\n",
		      "x.yml:3: duplicate benchmark name 'a' (first at line 2)");
	assert_logged("benchmarks:\n  - {name: a, id: i, exec: x}\n  - {name: b, id: i, exec: y}\n",
		      "x.yml:3: duplicate benchmark id 'i'");
	assert_logged("benchmarks:\n  - {name: a, exec: x, name: b}\n", "duplicate key 'name'");
	assert_logged("benchmarks: []\n", "x.yml:1: 'benchmarks' is empty");
	assert_logged("benchmarks: nope\n", "x.yml:1: 'benchmarks' must be a list");
	assert_logged("options:\n  max-time: 1s\n", "no 'benchmarks' list");
	assert_logged("", "x.yml:1: empty file");
	assert_logged("- a\n- b\n", "the top level must be a mapping");
	assert_logged("benchmarks:\n  - {name: a, exec: x\n", "x.yml:");
	assert_logged("benchmarks:\n  - name: a\n    exec: \"${BENCH_SURELY_UNSET_VAR}\"\n",
		      "x.yml:3: 'exec': environment variable 'BENCH_SURELY_UNSET_VAR' is not set");
}

static void test_conclude(void **state)
{
	const char *text = "benchmarks:\n"
			   "  - name: with\n    exec: 'true'\n"
			   "    conclude: rm -f \"${BENCH_CONCLUDE_DIR}\"/out/* $${HOME}\n"
			   "  - name: without\n    exec: 'true'\n";
	struct bench_config cfg;

	(void)state;
	setenv("BENCH_CONCLUDE_DIR", "/tmp/c dir", 1);
	assert_int_equal(bench_config__parse(&cfg, "x.yml", text, strlen(text)), 0);
	/* expanded exactly like exec, escape included */
	assert_string_equal(cfg.benchmarks[0].conclude, "rm -f \"/tmp/c dir\"/out/* ${HOME}");
	assert_null(cfg.benchmarks[1].conclude);
	bench_config__free(&cfg);

	assert_logged("benchmarks:\n  - name: a\n    exec: x\n    conclude: [rm, x]\n",
		      "x.yml:4: 'conclude' must be a string");
	assert_logged("benchmarks:\n  - name: a\n    exec: x\n    conclude: {rm: x}\n",
		      "x.yml:4: 'conclude' must be a string");
	assert_logged("benchmarks:\n  - name: a\n    exec: x\n    conclude: ''\n",
		      "x.yml:4: 'conclude' must not be empty");
	assert_logged(
	    "benchmarks:\n  - name: a\n    exec: x\n    conclude: ${BENCH_SURELY_UNSET_VAR}\n",
	    "x.yml:4: 'conclude': environment variable 'BENCH_SURELY_UNSET_VAR' is not set");
	assert_logged("benchmarks:\n  - name: a\n    exec: x\n    conclud: y\n",
		      "x.yml:4: unknown key 'conclud' (did you mean 'conclude'?)");
	/* a benchmark key, not an option: strictness stays */
	assert_logged("options:\n  conclude: x\nbenchmarks:\n  - {name: a, exec: x}\n",
		      "x.yml:2: unknown key 'conclude'");
}

static void test_expand_env(void **state)
{
	char *out, *bad;

	(void)state;
	setenv("BENCH_A", "alpha", 1);
	setenv("BENCH_EMPTY", "", 1);
	assert_int_equal(bench_config__expand_env("x${BENCH_A}y${BENCH_EMPTY}z", &out, &bad), 0);
	assert_string_equal(out, "xalphayz");
	free(out);
	/* bash's own syntax passes through untouched; $$ stays bash's pid */
	assert_int_equal(
	    bench_config__expand_env("${X:-d} ${#A} $$ $BENCH_A $${BENCH_A}", &out, &bad), 0);
	assert_string_equal(out, "${X:-d} ${#A} $$ $BENCH_A ${BENCH_A}");
	free(out);
	assert_int_equal(bench_config__expand_env("a ${BENCH_NOT_SET_EVER} b", &out, &bad),
			 -EINVAL);
	assert_null(out);
	assert_string_equal(bad, "BENCH_NOT_SET_EVER");
	free(bad);
}

static const char one_bench[] = "benchmarks:\n  - name: t\n    exec: /bin/true\n";

/* A second document was silently ignored: now it is an error naming its line. */
static void test_second_document(void **state)
{
	char text[256];

	(void)state;
	snprintf(text, sizeof(text), "%s---\nbenchmarks:\n  - name: u\n    exec: /bin/false\n",
		 one_bench);
	assert_logged(text, "x.yml:4: a second YAML document");
	/* one document with explicit markers is still fine */
	{
		struct bench_config cfg;

		snprintf(text, sizeof(text), "---\n%s...\n", one_bench);
		assert_int_equal(bench_config__parse(&cfg, "x.yml", text, strlen(text)), 0);
		assert_int_equal(cfg.nr_benchmarks, 1);
		bench_config__free(&cfg);
	}
}

/* Nesting past the cap is refused (100,000 levels, in flow and in block style) before the
 * load, whose cost grows with the depth; at the cap, the config's own checks answer. */
static void test_nesting_capped(void **state)
{
	size_t n = 100000, len = 0;
	char *text = malloc(4 * n + 64), msg[64];

	(void)state;
	assert_non_null(text);
	len += (size_t)sprintf(text, "%sx: ", one_bench);
	for (size_t i = 0; i < n; i++)
		text[len++] = '[';
	for (size_t i = 0; i < n; i++)
		text[len++] = ']';
	text[len] = 0;
	snprintf(msg, sizeof(msg), "nested deeper than %d levels", BENCH_CONFIG_MAX_DEPTH);
	assert_logged(text, msg);

	/* block style: "- " indented one more each level */
	len = (size_t)sprintf(text, "%sx:\n", one_bench);
	for (size_t i = 0; i < 200 && len < 4 * n; i++)
		len += (size_t)sprintf(text + len, "%*s-\n", (int)i, "");
	assert_logged(text, msg);

	/* at the cap (the top mapping is level 1): the unknown key is what is reported */
	len = (size_t)sprintf(text, "%sx: ", one_bench);
	for (int i = 0; i < BENCH_CONFIG_MAX_DEPTH - 1; i++)
		text[len++] = '[';
	for (int i = 0; i < BENCH_CONFIG_MAX_DEPTH - 1; i++)
		text[len++] = ']';
	text[len] = 0;
	assert_logged(text, "unknown key 'x'");
	free(text);
}

/* `aslr: false` at either level, the benchmark's and then the CLI's winning. */
static void test_aslr(void **state)
{
	const char *text = "options:\n  aslr: false\n"
			   "benchmarks:\n  - {name: a, exec: 'true'}\n"
			   "  - {name: b, exec: 'true', options: {aslr: on}}\n";
	struct bench_options o, cli = {0};
	struct bench_config cfg;

	(void)state;
	assert_int_equal(bench_config__parse(&cfg, "x.yml", text, strlen(text)), 0);
	assert_int_equal(bench_config__resolve(&cfg, &cfg.benchmarks[0], &cli, &o), 0);
	assert_true(o.no_aslr);
	assert_int_equal(bench_config__resolve(&cfg, &cfg.benchmarks[1], &cli, &o), 0);
	assert_false(o.no_aslr);
	cli.set = BENCH_OPT_ASLR; /* --no-aslr */
	cli.no_aslr = true;
	assert_int_equal(bench_config__resolve(&cfg, &cfg.benchmarks[1], &cli, &o), 0);
	assert_true(o.no_aslr);
	bench_config__free(&cfg);
	/* the default: randomised, as the program would run */
	text = "benchmarks:\n  - {name: a, exec: 'true'}\n";
	memset(&cli, 0, sizeof(cli));
	assert_int_equal(bench_config__parse(&cfg, "x.yml", text, strlen(text)), 0);
	assert_int_equal(bench_config__resolve(&cfg, &cfg.benchmarks[0], &cli, &o), 0);
	assert_false(o.no_aslr);
	bench_config__free(&cfg);

	assert_logged("options:\n  aslr: maybe\nbenchmarks:\n  - {name: a, exec: 'true'}\n",
		      "x.yml:2: 'aslr': expected true or false, got 'maybe'");
	assert_logged("options:\n  alsr: false\nbenchmarks:\n  - {name: a, exec: 'true'}\n",
		      "unknown key 'alsr' (did you mean 'aslr'?)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good_file),
	    cmocka_unit_test(test_defaults_and_cli),
	    cmocka_unit_test(test_bad_file_names_file_line_key),
	    cmocka_unit_test(test_bad_values),
	    cmocka_unit_test(test_bad_structure),
	    cmocka_unit_test(test_conclude),
	    cmocka_unit_test(test_expand_env),
	    cmocka_unit_test(test_second_document),
	    cmocka_unit_test(test_nesting_capped),
	    cmocka_unit_test(test_aslr),
	};
	log__prog = "memtrack-bench";
	return cmocka_run_group_tests(tests, NULL, NULL);
}
