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
	double threshold;     /* fraction: 0.10 = a change must pass 10% */
	double rss_threshold; /* the same for memory mode's peak RSS; NAN: threshold */
	double alpha;	      /* significance level of the Mann-Whitney U test */
};

/*
 * One memory metric of a matched pair. Like wall time, a change counts past the threshold and
 * only when the rounds say it is real: the metric was identical in every round on both sides
 * (deterministic: any difference is real, and exact), or a Mann-Whitney U test on the two sides'
 * rounds gives p < alpha.
 */
struct compare_metric {
	double base, head;  /* medians */
	double change;	    /* (head - base) / base; +INFINITY from 0 to more; NAN if absent */
	double p;	    /* NAN when not tested (deterministic, or under 2 rounds a side) */
	bool deterministic; /* every round on both sides (at least 2 each) gave one value */
	bool real;	    /* deterministic and different, or p < alpha: whatever the size */
	bool noisy;	    /* past the threshold, but the rounds do not say it is real */
	enum compare_status status; /* COMPARE_UNTOUCHED, _IMPROVED or _REGRESSED */
};

struct compare_row {
	const char *name; /* borrowed from the results */
	enum bench_mode mode;
	double base, head; /* median seconds, or peak heap bytes in memory mode; NAN if absent */
	double change;	   /* (head - base) / base; NAN when not comparable */
	double p;	   /* two-sided p-value; NAN when not tested (memory mode, no samples) */
	enum compare_status status;
	bool noisy; /* past the threshold, but the samples do not really differ */
	/* memory mode, matched pairs: every metric; the row regressed when one did, else
	 * improved when one did */
	struct compare_metric mem[BENCH_MEM_NR];
	bool has_mem;
	/* memory mode: one side measured the program's window (MEMTRACK_START), the other the
	 * whole run: its heap figures differ by what they cover */
	bool window_changed;
	bool head_window;
};

struct compare_report {
	struct compare_row *rows;
	size_t nr;
	size_t counts[COMPARE_NR];
	double threshold, rss_threshold, alpha;	   /* rss_threshold resolved: never NAN */
	double worst_regression, best_improvement; /* fractions, 0 when none */
};

/* Matches benchmarks by name (and mode): HEAD's order, then what only BASE had. */
int bench_compare__run(const struct bench_results *base, const struct bench_results *head,
		       const struct compare_opts *o, struct compare_report *rep);
void bench_compare__markdown(FILE *f, const struct compare_report *rep);
void bench_compare__free(struct compare_report *rep);
/* One memory metric of b against h (both memory-mode results). */
void bench_compare__metric(const struct bench_result *b, const struct bench_result *h,
			   enum bench_metric m, const struct compare_opts *o,
			   struct compare_metric *out);
/* A deterministic metric's difference, exact: "+1 allocation", "-320 KiB", "+1000 B". */
const char *bench_compare__exact(enum bench_metric m, double delta, char *buf, size_t size);
/* "10%", "10" (both percent) or "2.5%" into a fraction; -EINVAL otherwise. */
int bench_compare__parse_threshold(const char *s, double *fraction);
const char *bench_compare__status_name(enum compare_status s);

#endif
