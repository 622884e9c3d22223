// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "stats.h"

static int bench_stats__cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_stats__quantile(const double *sorted, size_t n, double q)
{
	double pos = q * (double)(n - 1);
	size_t lo = (size_t)floor(pos);

	if (lo + 1 >= n)
		return sorted[n - 1];
	return sorted[lo] + (pos - (double)lo) * (sorted[lo + 1] - sorted[lo]);
}

int bench_stats__compute(const double *x, size_t n, struct bench_stats *s)
{
	double *v = NULL, sum = 0, sq = 0, lo_fence, hi_fence;
	int err = 0;

	memset(s, 0, sizeof(*s));
	if (!x || n == 0)
		return -EINVAL;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	memcpy(v, x, n * sizeof(*v));
	qsort(v, n, sizeof(*v), bench_stats__cmp);

	for (size_t i = 0; i < n; i++)
		sum += v[i];
	s->n = n;
	s->mean = sum / (double)n;
	/* Two passes: the one-pass formula loses digits when rounds differ by microseconds. */
	for (size_t i = 0; i < n; i++)
		sq += (v[i] - s->mean) * (v[i] - s->mean);
	s->stddev = n > 1 ? sqrt(sq / (double)(n - 1)) : NAN;
	/* every sample equal (a deterministic memory figure, zeros included) varies by 0 */
	s->cv = n > 1 && sq == 0 ? 0 : n > 1 && s->mean > 0 ? s->stddev / s->mean : NAN;
	s->min = v[0];
	s->max = v[n - 1];
	s->median = bench_stats__quantile(v, n, 0.5);
	s->q1 = bench_stats__quantile(v, n, 0.25);
	s->q3 = bench_stats__quantile(v, n, 0.75);
	s->iqr = s->q3 - s->q1;
	lo_fence = s->q1 - 1.5 * s->iqr;
	hi_fence = s->q3 + 1.5 * s->iqr;
	for (size_t i = 0; i < n; i++)
		s->outliers += v[i] < lo_fence || v[i] > hi_fence;
	free(v);
	return err;
}

struct bench_stats__ranked {
	double value;
	int group; /* 0 = a, 1 = b */
};

static int bench_stats__cmp_ranked(const void *a, const void *b)
{
	return bench_stats__cmp(&((const struct bench_stats__ranked *)a)->value,
				&((const struct bench_stats__ranked *)b)->value);
}

int bench_stats__mann_whitney(const double *a, size_t na, const double *b, size_t nb, double *p)
{
	struct bench_stats__ranked *all = NULL;
	size_t n = na + nb;
	double rank_a = 0, ties = 0, u, mu, sigma, z;
	int err = 0;

	if (na < 2 || nb < 2)
		return -EINVAL;
	all = malloc(n * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (size_t i = 0; i < na; i++)
		all[i] = (struct bench_stats__ranked){a[i], 0};
	for (size_t i = 0; i < nb; i++)
		all[na + i] = (struct bench_stats__ranked){b[i], 1};
	qsort(all, n, sizeof(*all), bench_stats__cmp_ranked);

	/* Ranks from 1; a run of equal values shares the mean of its ranks. */
	for (size_t i = 0; i < n;) {
		size_t j = i;
		while (j + 1 < n && all[j + 1].value == all[i].value)
			j++;
		double rank = (double)(i + j + 2) / 2.0, t = (double)(j - i + 1);
		for (size_t k = i; k <= j; k++)
			if (all[k].group == 0)
				rank_a += rank;
		ties += t * t * t - t;
		i = j + 1;
	}
	u = rank_a - (double)na * (double)(na + 1) / 2.0;
	mu = (double)na * (double)nb / 2.0;
	sigma = sqrt((double)na * (double)nb / 12.0 *
		     ((double)(n + 1) - ties / ((double)n * (double)(n - 1))));
	if (sigma == 0) {
		*p = 1.0; /* every value equal: nothing to tell apart */
		goto cleanup;
	}
	z = (fabs(u - mu) - 0.5) / sigma;
	if (z < 0)
		z = 0;
	*p = erfc(z / sqrt(2.0)); /* two-sided: 2 * (1 - Phi(z)) */
cleanup:
	free(all);
	return err;
}
