/* SPDX-License-Identifier: MIT */
/* `compare BASE.json HEAD.json`: which benchmarks changed, as a Markdown report. */
#ifndef BENCH_COMPARE_H
#define BENCH_COMPARE_H

#include <stdio.h>
#include "runner.h"

enum compare_status {
	COMPARE_UNTOUCHED,
	COMPARE_NEW,	 /* only in HEAD */
	COMPARE_REMOVED, /* only in BASE */
	COMPARE_IMPROVED,
	COMPARE_REGRESSED,
	COMPARE_NR,
};

struct compare_opts {
	double threshold; /* fraction: 0.10 = a change must pass 10% */
	double alpha;	  /* significance level of the Mann-Whitney U test */
};

struct compare_row {
	const char *name; /* borrowed from the results */
	enum bench_mode mode;
	double base, head; /* median seconds, or peak heap bytes in memory mode; NAN if absent */
	double change;	   /* (head - base) / base; NAN when not comparable */
	double p;	   /* two-sided p-value; NAN when not tested (memory mode, no samples) */
	enum compare_status status;
	bool noisy; /* past the threshold, but the samples do not really differ */
};

struct compare_report {
	struct compare_row *rows;
	size_t nr;
	size_t counts[COMPARE_NR];
	double threshold, alpha;
	double worst_regression, best_improvement; /* fractions, 0 when none */
};

/* Matches benchmarks by name (and mode): HEAD's order, then what only BASE had. */
int bench_compare__run(const struct bench_results *base, const struct bench_results *head,
		       const struct compare_opts *o, struct compare_report *rep);
void bench_compare__markdown(FILE *f, const struct compare_report *rep);
void bench_compare__free(struct compare_report *rep);
/* "10%", "10" (both percent) or "2.5%" into a fraction; -EINVAL otherwise. */
int bench_compare__parse_threshold(const char *s, double *fraction);
const char *bench_compare__status_name(enum compare_status s);

#endif
