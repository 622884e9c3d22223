// SPDX-License-Identifier: MIT
/* compare on crafted BASE/HEAD files (tests/bench/base.json, head.json). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../../bench/compare.h"
#include "../../bench/results_json.h"

static char *fixture(const char *name)
{
	static char path[2][4096];
	static int which;
	const char *slash = strrchr(__FILE__, '/');
	char *p = path[which++ % 2];
	snprintf(p, sizeof(path[0]), "%.*s/../bench/%s", (int)(slash - __FILE__), __FILE__, name);
	return p;
}

struct fixture {
	struct bench_results base, head;
	struct compare_report rep;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct compare_opts o = {.threshold = 0.10, .rss_threshold = NAN, .alpha = 0.05};

	if (!f || bench_json__read(fixture("base.json"), &f->base) ||
	    bench_json__read(fixture("head.json"), &f->head) ||
	    bench_compare__run(&f->base, &f->head, &o, &f->rep))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	bench_compare__free(&f->rep);
	bench_runner__free_results(&f->base);
	bench_runner__free_results(&f->head);
	free(f);
	return 0;
}

static const struct compare_row *row(const struct compare_report *rep, const char *name)
{
	for (size_t i = 0; i < rep->nr; i++)
		if (strcmp(rep->rows[i].name, name) == 0)
			return &rep->rows[i];
	fail_msg("no row '%s'", name);
	return NULL;
}

static void test_statuses(void **state)
{
	struct fixture *f = *state;
	const struct compare_report *rep = &f->rep;

	assert_int_equal(row(rep, "same")->status, COMPARE_UNTOUCHED);
	assert_int_equal(row(rep, "faster")->status, COMPARE_IMPROVED);
	assert_float_equal(row(rep, "faster")->change, -0.20, 1e-9);
	assert_int_equal(row(rep, "slower")->status, COMPARE_REGRESSED);
	assert_float_equal(row(rep, "slower")->change, 0.30, 1e-9);
	assert_true(row(rep, "slower")->p < 0.05);
	/* significant but within the threshold */
	assert_int_equal(row(rep, "small change")->status, COMPARE_UNTOUCHED);
	assert_false(row(rep, "small change")->noisy);
	assert_int_equal(row(rep, "new")->status, COMPARE_NEW);
	assert_int_equal(row(rep, "gone")->status, COMPARE_REMOVED);
	assert_int_equal(row(rep, "heap")->status, COMPARE_REGRESSED);
	assert_int_equal(row(rep, "heap")->mode, BENCH_MODE_MEMORY);
	assert_float_equal(row(rep, "heap")->change, 0.50, 1e-9);

	assert_int_equal(rep->nr, 12);
	assert_int_equal(rep->counts[COMPARE_REGRESSED], 4); /* slower, heap, rss real, leak */
	assert_int_equal(rep->counts[COMPARE_IMPROVED], 1);
	assert_int_equal(rep->counts[COMPARE_UNTOUCHED], 5);
	assert_int_equal(rep->counts[COMPARE_NEW], 1);
	assert_int_equal(rep->counts[COMPARE_REMOVED], 1);
	assert_float_equal(rep->worst_regression, 0.50, 1e-9);
}

/* Memory: a verdict per metric, deterministic ones exact, noisy ones by their rounds. */
static void test_memory_metrics(void **state)
{
	struct fixture *f = *state;
	const struct compare_row *r = row(&f->rep, "heap");
	const struct compare_metric *m;

	assert_true(r->has_mem);
	/* identical in every round on both sides: deterministic, the change is real */
	m = &r->mem[BENCH_MEM_PEAK_HEAP];
	assert_true(m->deterministic);
	assert_true(m->real);
	assert_true(isnan(m->p));
	assert_int_equal(m->status, COMPARE_REGRESSED);
	/* +1 allocation is real too, but not past the threshold (exactly 10%) */
	m = &r->mem[BENCH_MEM_ALLOCS];
	assert_true(m->deterministic && m->real);
	assert_float_equal(m->head - m->base, 1, 0);
	assert_int_equal(m->status, COMPARE_UNTOUCHED);
	assert_false(m->noisy);
	/* RSS varies round to round, same median: nothing */
	m = &r->mem[BENCH_MEM_PEAK_RSS];
	assert_false(m->deterministic);
	assert_false(m->real);
	assert_int_equal(m->status, COMPARE_UNTOUCHED);
	assert_int_equal(r->mem[BENCH_MEM_LEAKED].status, COMPARE_UNTOUCHED);
	assert_false(r->mem[BENCH_MEM_LEAKED].real);

	/* +25% in the medians, but the rounds overlap: noise */
	r = row(&f->rep, "rss noise");
	m = &r->mem[BENCH_MEM_PEAK_RSS];
	assert_float_equal(m->change, 0.25, 1e-9);
	assert_true(m->p > 0.05);
	assert_true(m->noisy);
	assert_int_equal(r->status, COMPARE_UNTOUCHED);
	assert_true(r->noisy);

	/* +20% and every HEAD round above every BASE round: p = 0.012 with 5 a side */
	r = row(&f->rep, "rss real");
	m = &r->mem[BENCH_MEM_PEAK_RSS];
	assert_false(m->deterministic);
	assert_true(m->p < 0.05);
	assert_int_equal(m->status, COMPARE_REGRESSED);
	assert_int_equal(r->status, COMPARE_REGRESSED);
	assert_int_equal(r->mem[BENCH_MEM_PEAK_HEAP].status, COMPARE_UNTOUCHED);

	/* a leak from nothing: no percentage, but real and past any threshold */
	r = row(&f->rep, "leak");
	m = &r->mem[BENCH_MEM_LEAKED];
	assert_true(isinf(m->change));
	assert_int_equal(m->status, COMPARE_REGRESSED);

	/* one round a side (format 1): +50% proves nothing */
	r = row(&f->rep, "once");
	m = &r->mem[BENCH_MEM_PEAK_HEAP];
	assert_false(m->deterministic);
	assert_false(m->real);
	assert_true(m->noisy);
	assert_int_equal(r->status, COMPARE_UNTOUCHED);
	assert_float_equal(f->rep.worst_regression, 0.50,
			   1e-9); /* the leak's infinity is no figure */
}

static void test_exact(void **state)
{
	char b[48];

	(void)state;
	assert_string_equal(bench_compare__exact(BENCH_MEM_ALLOCS, 1, b, sizeof(b)),
			    "+1 allocation");
	assert_string_equal(bench_compare__exact(BENCH_MEM_ALLOCS, -3, b, sizeof(b)),
			    "-3 allocations");
	assert_string_equal(bench_compare__exact(BENCH_MEM_PEAK_HEAP, 320 * 1024, b, sizeof(b)),
			    "+320 KiB");
	assert_string_equal(bench_compare__exact(BENCH_MEM_LEAKED, -(2 << 20), b, sizeof(b)),
			    "-2 MiB");
	/* not a whole KiB: bytes, so nothing is rounded away */
	assert_string_equal(bench_compare__exact(BENCH_MEM_ALLOCATED, 1000, b, sizeof(b)),
			    "+1000 B");
	assert_string_equal(bench_compare__exact(BENCH_MEM_ALLOCATED, 1025, b, sizeof(b)),
			    "+1025 B");
}

static void test_noisy_is_untouched(void **state)
{
	struct fixture *f = *state;
	const struct compare_row *r = row(&f->rep, "noisy");

	/* medians 1.225 -> 1.475: +20%, past the threshold, but the samples overlap */
	assert_float_equal(r->change, 1.475 / 1.225 - 1, 1e-9);
	assert_int_equal(r->status, COMPARE_UNTOUCHED);
	assert_true(r->noisy);
	assert_true(r->p >= 0.05);
}

static char *markdown(const struct compare_report *rep)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	bench_compare__markdown(m, rep);
	fclose(m);
	return buf;
}

static void test_markdown(void **state)
{
	struct fixture *f = *state;
	char *md = markdown(&f->rep);

	assert_non_null(strstr(md, "## This change will degrade performance by up to 50.0%"));
	assert_non_null(strstr(md, "| Mode | Benchmark | BASE | HEAD | Change | |"));
	assert_non_null(strstr(md, "| WallTime | slower | 1.00 s | 1.30 s | +30.0% | regressed |"));
	assert_non_null(strstr(md, "| WallTime | faster | 1.00 s | 800 ms | -20.0% | improved |"));
	assert_non_null(strstr(md, "| WallTime | new | - | 2.00 s | - | new |"));
	assert_non_null(
	    strstr(md, "| Memory | heap | 977 KiB | 1.43 MiB | +50.0% | regressed (Peak heap) |"));
	assert_non_null(strstr(md, "| Memory | rss real | 195 KiB | 195 KiB | +0.0% | regressed "
				   "(Peak RSS) |"));
	assert_non_null(strstr(md, "untouched (noisy: p = "));
	/* which metrics moved, deterministic ones exactly */
	assert_non_null(strstr(md, "### Memory metrics that moved"));
	assert_non_null(strstr(md, "| heap | Peak heap | 977 KiB | 1.43 MiB | +500000 B, +50.0% | "
				   "regressed: identical in every round |"));
	assert_non_null(strstr(md, "| heap | Allocs | 10 | 11 | +1 allocation, +10.0% | within "
				   "the threshold: identical in every round |"));
	assert_non_null(strstr(md, "| leak | Leaked | 0 B | 4.00 KiB | +4 KiB, from 0 | regressed: "
				   "identical in every round |"));
	assert_non_null(
	    strstr(md, "| rss noise | Peak RSS | 977 KiB | 1.19 MiB | +25.0% | noise: p = "));
	assert_non_null(strstr(md,
			       "| once | Peak heap | 977 KiB | 1.43 MiB | +50.0% | noise: too few "
			       "rounds to tell |"));
	/* what did not move is not listed */
	assert_null(strstr(md, "| heap | Peak RSS"));
	free(md);
}

static void test_no_change_headline(void **state)
{
	struct fixture *f = *state;
	struct compare_opts o = {.threshold = 0.10, .rss_threshold = NAN, .alpha = 0.05};
	struct compare_report rep;
	char *md;

	(void)state;
	/* BASE against itself */
	assert_int_equal(bench_compare__run(&f->base, &f->base, &o, &rep), 0);
	assert_int_equal(rep.counts[COMPARE_UNTOUCHED], rep.nr);
	md = markdown(&rep);
	assert_non_null(strstr(md, "## This change will not alter performance"));
	free(md);
	bench_compare__free(&rep);
}

static void test_threshold(void **state)
{
	double t;

	(void)state;
	assert_int_equal(bench_compare__parse_threshold("10%", &t), 0);
	assert_float_equal(t, 0.10, 1e-12);
	assert_int_equal(bench_compare__parse_threshold("2.5", &t), 0);
	assert_float_equal(t, 0.025, 1e-12);
	assert_int_equal(bench_compare__parse_threshold("ten", &t), -EINVAL);
	assert_int_equal(bench_compare__parse_threshold("-5%", &t), -EINVAL);
	assert_int_equal(bench_compare__parse_threshold("5%%", &t), -EINVAL);
	assert_int_equal(bench_compare__parse_threshold("", &t), -EINVAL);
}

/* --rss-threshold: peak RSS has its own bar; the other metrics keep --threshold. */
static void test_rss_threshold(void **state)
{
	struct fixture *f = *state;
	struct compare_opts o = {.threshold = 0.10, .rss_threshold = 0.25, .alpha = 0.05};
	struct compare_report rep;
	const struct compare_row *r;
	char *md;

	assert_int_equal(bench_compare__run(&f->base, &f->head, &o, &rep), 0);
	r = row(&rep, "rss real"); /* +20%, real: under a 25% bar */
	assert_int_equal(r->mem[BENCH_MEM_PEAK_RSS].status, COMPARE_UNTOUCHED);
	assert_true(r->mem[BENCH_MEM_PEAK_RSS].real);
	assert_int_equal(r->status, COMPARE_UNTOUCHED);
	assert_int_equal(row(&rep, "heap")->status, COMPARE_REGRESSED); /* +50% heap, 10% bar */
	md = markdown(&rep);
	assert_non_null(strstr(md, "Peak RSS counts past 25.0%."));
	free(md);
	bench_compare__free(&rep);

	o.rss_threshold = NAN; /* unset: --threshold for every metric */
	assert_int_equal(bench_compare__run(&f->base, &f->head, &o, &rep), 0);
	assert_int_equal(row(&rep, "rss real")->status, COMPARE_REGRESSED);
	assert_float_equal(rep.rss_threshold, 0.10, 0);
	bench_compare__free(&rep);
}

/* One side measured over the program's window, the other over the whole run: said, since the
 * heap figures cover different things; nothing said when both sides agree. */
static void test_window_sides(void **state)
{
	struct fixture *f = *state;
	struct compare_opts o = {.threshold = 0.10, .rss_threshold = NAN, .alpha = 0.05};
	struct compare_report rep;
	struct bench_result *h = NULL, *b = NULL;
	char *md;

	for (size_t i = 0; i < f->head.nr; i++)
		if (!strcmp(f->head.v[i].name, "heap"))
			h = &f->head.v[i];
	for (size_t i = 0; i < f->base.nr; i++)
		if (!strcmp(f->base.v[i].name, "heap"))
			b = &f->base.v[i];
	assert_non_null(h);
	assert_non_null(b);
	h->window = true;
	assert_int_equal(bench_compare__run(&f->base, &f->head, &o, &rep), 0);
	assert_true(row(&rep, "heap")->window_changed);
	md = markdown(&rep);
	assert_non_null(strstr(md, "> **heap**: HEAD measured the program's window (MEMTRACK_START), "
				   "BASE the whole run"));
	free(md);
	bench_compare__free(&rep);
	b->window = true;
	assert_int_equal(bench_compare__run(&f->base, &f->head, &o, &rep), 0);
	assert_false(row(&rep, "heap")->window_changed);
	md = markdown(&rep);
	assert_null(strstr(md, "measured the program's window"));
	free(md);
	bench_compare__free(&rep);
	h->window = b->window = false;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_statuses),  cmocka_unit_test(test_noisy_is_untouched),
	    cmocka_unit_test(test_markdown),  cmocka_unit_test(test_no_change_headline),
	    cmocka_unit_test(test_threshold), cmocka_unit_test(test_memory_metrics),
	    cmocka_unit_test(test_exact),     cmocka_unit_test(test_rss_threshold),
	    cmocka_unit_test(test_window_sides),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
