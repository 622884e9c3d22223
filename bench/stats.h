/* SPDX-License-Identifier: MIT */
/* Summary statistics of round times, and the significance test compare relies on. */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stddef.h>

struct bench_stats {
	size_t n;
	double mean, median, stddev; /* stddev: sample (n - 1); NAN when n < 2 */
	double min, max;
	double q1, q3, iqr; /* quartiles by linear interpolation between order statistics */
	size_t outliers;    /* samples outside [q1 - 1.5 IQR, q3 + 1.5 IQR] */
	double cv;	    /* stddev / mean; 0 when every sample is equal; NAN when undefined */
};

/* Fills *s from n samples (n >= 1); x is not modified. Returns 0 or -EINVAL / -ENOMEM. */
int bench_stats__compute(const double *x, size_t n, struct bench_stats *s);

/* The q-quantile (0..1) of n sorted samples, interpolating like numpy's default ("type 7"). */
double bench_stats__quantile(const double *sorted, size_t n, double q);

/*
 * Two-sided Mann-Whitney U test (normal approximation with tie and continuity corrections).
 * Sets *p to the p-value; returns -EINVAL when either sample has fewer than 2 values. With fewer
 * than ~5 values a side no difference can reach p < 0.05, which is the intended caution.
 */
int bench_stats__mann_whitney(const double *a, size_t na, const double *b, size_t nb, double *p);

#endif
