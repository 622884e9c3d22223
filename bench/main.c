// SPDX-License-Identifier: MIT
/* memtrack-bench: run benchmark suites and compare their results. See docs/memtrack-bench.1. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/log.h"
#include "compare.h"
#include "config.h"
#include "duration.h"
#include "report.h"
#include "results_json.h"
#include "runner.h"

#ifndef MEMTRACK_VERSION
#define MEMTRACK_VERSION "dev"
#endif

/* Exit statuses, diff(1)-like: 1 = the answer is "bad", 2 = could not answer. */
#define EXIT_BAD   1
#define EXIT_USAGE 2

static const char usage[] =
    "usage: memtrack-bench run CONFIG [--json FILE] [--bench ID]... [--skip ID]...\n"
    "                          [--mode walltime|memory] [--no-aslr]\n"
    "                          [--show-output] [--no-progress] [--warmup-time D] [--max-time D]\n"
    "                          [--min-time D] [--min-rounds N] [--max-rounds N]\n"
    "       memtrack-bench compare BASE.json HEAD.json [--threshold 10%] [--rss-threshold P]\n"
    "                          [--fail-on-regression] [--markdown FILE]\n"
    "       memtrack-bench --version | --help\n"
    "See memtrack-bench(1).\n";

enum {
	OPT_JSON = 256,
	OPT_BENCH,
	OPT_SKIP,
	OPT_MODE,
	OPT_SHOW_OUTPUT,
	OPT_NO_PROGRESS,
	OPT_WARMUP,
	OPT_MAX_TIME,
	OPT_MIN_TIME,
	OPT_MIN_ROUNDS,
	OPT_MAX_ROUNDS,
	OPT_THRESHOLD,
	OPT_FAIL,
	OPT_MARKDOWN,
	OPT_NO_ASLR,
	OPT_RSS_THRESHOLD,
};

static int main__duration(const char *opt, const char *arg, int64_t *ns)
{
	if (bench_duration__parse(arg, ns)) {
		log__error("--%s: bad duration '%s' (expected 500ms, 5s, 1m or 0)", opt, arg);
		return -EINVAL;
	}
	return 0;
}

static int main__rounds(const char *opt, const char *arg, int64_t *n)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(arg, &end, 10);
	if (errno || end == arg || *end || v < 1 || v > 1000000000LL) {
		log__error("--%s: expected a whole number >= 1, got '%s'", opt, arg);
		return -EINVAL;
	}
	*n = v;
	return 0;
}

static int main__run(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", required_argument, NULL, OPT_JSON},
	    {"bench", required_argument, NULL, OPT_BENCH},
	    {"skip", required_argument, NULL, OPT_SKIP},
	    {"mode", required_argument, NULL, OPT_MODE},
	    {"show-output", no_argument, NULL, OPT_SHOW_OUTPUT},
	    {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
	    {"warmup-time", required_argument, NULL, OPT_WARMUP},
	    {"max-time", required_argument, NULL, OPT_MAX_TIME},
	    {"min-time", required_argument, NULL, OPT_MIN_TIME},
	    {"min-rounds", required_argument, NULL, OPT_MIN_ROUNDS},
	    {"max-rounds", required_argument, NULL, OPT_MAX_ROUNDS},
	    {"no-aslr", no_argument, NULL, OPT_NO_ASLR},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct runner_opts o = {.mode = BENCH_MODE_WALLTIME};
	struct bench_config cfg = {0};
	struct bench_results res = {0};
	const char *json = NULL, **only = NULL, **skip = NULL;
	char *memtrack = NULL;
	bool no_progress = false;
	int c, err = 0, status = EXIT_USAGE;

	only = calloc((size_t)argc, sizeof(*only));
	skip = calloc((size_t)argc, sizeof(*skip));
	if (!only || !skip)
		goto cleanup;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_JSON:
			json = optarg;
			break;
		case OPT_BENCH:
			only[o.nr_only++] = optarg;
			break;
		case OPT_SKIP:
			skip[o.nr_skip++] = optarg;
			break;
		case OPT_MODE:
			if (strcmp(optarg, "walltime") == 0) {
				o.mode = BENCH_MODE_WALLTIME;
			} else if (strcmp(optarg, "memory") == 0) {
				o.mode = BENCH_MODE_MEMORY;
			} else {
				log__error("--mode: expected walltime or memory, got '%s'", optarg);
				goto cleanup;
			}
			break;
		case OPT_SHOW_OUTPUT:
			o.show_output = true;
			break;
		case OPT_NO_PROGRESS:
			no_progress = true;
			break;
		case OPT_WARMUP:
			err = main__duration("warmup-time", optarg, &o.cli.warmup_ns);
			o.cli.set |= BENCH_OPT_WARMUP;
			break;
		case OPT_MAX_TIME:
			err = main__duration("max-time", optarg, &o.cli.max_time_ns);
			o.cli.set |= BENCH_OPT_MAX_TIME;
			break;
		case OPT_MIN_TIME:
			err = main__duration("min-time", optarg, &o.cli.min_time_ns);
			o.cli.set |= BENCH_OPT_MIN_TIME;
			break;
		case OPT_MIN_ROUNDS:
			err = main__rounds("min-rounds", optarg, &o.cli.min_rounds);
			o.cli.set |= BENCH_OPT_MIN_ROUNDS;
			break;
		case OPT_MAX_ROUNDS:
			err = main__rounds("max-rounds", optarg, &o.cli.max_rounds);
			o.cli.set |= BENCH_OPT_MAX_ROUNDS;
			break;
		case OPT_NO_ASLR:
			o.cli.no_aslr = true;
			o.cli.set |= BENCH_OPT_ASLR;
			break;
		case 'h':
			fputs(usage, stdout);
			status = 0;
			goto cleanup;
		default:
			fputs(usage, stderr);
			goto cleanup;
		}
		if (err)
			goto cleanup;
	}
	if (optind + 1 != argc) {
		log__error("run: expected one CONFIG file");
		fputs(usage, stderr);
		goto cleanup;
	}
	/* The lower-priority contradiction rules of bench_config__resolve do not apply to two
	 * flags. */
	if ((o.cli.set & BENCH_OPT_MIN_ROUNDS) && (o.cli.set & BENCH_OPT_MAX_ROUNDS) &&
	    o.cli.min_rounds > o.cli.max_rounds) {
		log__error("--min-rounds is larger than --max-rounds");
		goto cleanup;
	}
	if ((o.cli.set & BENCH_OPT_MIN_TIME) && (o.cli.set & BENCH_OPT_MAX_TIME) &&
	    o.cli.min_time_ns > o.cli.max_time_ns) {
		log__error("--min-time is longer than --max-time");
		goto cleanup;
	}
	o.only = only;
	o.skip = skip;
	o.progress = !no_progress && !o.show_output && isatty(STDERR_FILENO);

	/* ${MEMTRACK} in configs works without the wrapper script when memtrack sits beside us. */
	memtrack = bench_runner__find_memtrack();
	if (memtrack && !getenv("MEMTRACK"))
		setenv("MEMTRACK", memtrack, 0);
	if (o.mode == BENCH_MODE_MEMORY) {
		if (!memtrack) {
			log__error("--mode memory: no memtrack binary; set MEMTRACK or install it "
				   "beside memtrack-bench");
			goto cleanup;
		}
		o.memtrack = memtrack;
	}

	if (bench_config__load(&cfg, argv[optind]))
		goto cleanup;
	err = bench_runner__run(&cfg, &o, &res);
	if (err)
		goto cleanup;
	bench_table__table(stdout, &res);
	if (json && bench_json__write(&res, json))
		goto cleanup;
	status = res.nr_failed ? EXIT_BAD : 0;
	if (res.nr_failed)
		log__error("%zu of %zu benchmarks failed", res.nr_failed, res.nr);
cleanup:
	bench_runner__free_results(&res);
	bench_config__free(&cfg);
	free(memtrack);
	free(only);
	free(skip);
	return status;
}

static int main__compare(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"threshold", required_argument, NULL, OPT_THRESHOLD},
	    {"rss-threshold", required_argument, NULL, OPT_RSS_THRESHOLD},
	    {"fail-on-regression", no_argument, NULL, OPT_FAIL},
	    {"markdown", required_argument, NULL, OPT_MARKDOWN},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct compare_opts o = {.threshold = 0.10, .rss_threshold = NAN, .alpha = 0.05};
	struct bench_results base = {0}, head = {0};
	struct compare_report rep = {0};
	const char *markdown = NULL;
	bool fail_on_regression = false;
	int c, status = EXIT_USAGE;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_THRESHOLD:
			if (bench_compare__parse_threshold(optarg, &o.threshold)) {
				log__error("--threshold: expected a percentage like 10%%, got '%s'",
					   optarg);
				goto cleanup;
			}
			break;
		case OPT_RSS_THRESHOLD:
			if (bench_compare__parse_threshold(optarg, &o.rss_threshold)) {
				log__error(
				    "--rss-threshold: expected a percentage like 5%%, got '%s'",
				    optarg);
				goto cleanup;
			}
			break;
		case OPT_FAIL:
			fail_on_regression = true;
			break;
		case OPT_MARKDOWN:
			markdown = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			status = 0;
			goto cleanup;
		default:
			fputs(usage, stderr);
			goto cleanup;
		}
	}
	if (optind + 2 != argc) {
		log__error("compare: expected BASE.json and HEAD.json");
		fputs(usage, stderr);
		goto cleanup;
	}
	if (bench_json__read(argv[optind], &base) || bench_json__read(argv[optind + 1], &head))
		goto cleanup;
	if (bench_compare__run(&base, &head, &o, &rep))
		goto cleanup;
	bench_compare__markdown(stdout, &rep);
	if (markdown) {
		FILE *f = fopen(markdown, "w");
		if (!f) {
			log__error("cannot write '%s': %s", markdown, strerror(errno));
			goto cleanup;
		}
		bench_compare__markdown(f, &rep);
		if (fclose(f)) {
			log__error("cannot write '%s': %s", markdown, strerror(errno));
			goto cleanup;
		}
	}
	status = fail_on_regression && rep.counts[COMPARE_REGRESSED] ? EXIT_BAD : 0;
cleanup:
	bench_compare__free(&rep);
	bench_runner__free_results(&base);
	bench_runner__free_results(&head);
	return status;
}

int main(int argc, char **argv)
{
	log__prog = "memtrack-bench";
	if (argc < 2) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "run") == 0)
		return main__run(argc - 1, argv + 1);
	if (strcmp(argv[1], "compare") == 0)
		return main__compare(argc - 1, argv + 1);
	if (strcmp(argv[1], "--version") == 0) {
		printf("memtrack-bench %s\n", MEMTRACK_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage, stdout);
		return 0;
	}
	log__error("unknown command '%s'", argv[1]);
	fputs(usage, stderr);
	return EXIT_USAGE;
}
