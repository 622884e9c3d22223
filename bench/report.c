// SPDX-License-Identifier: MIT
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "duration.h"
#include "report.h"

#define REPORT_NAME_MAX 48 /* longer names are cut so the numbers stay aligned */

const char *bench_table__bytes(uint64_t bytes, char *buf, size_t size)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	size_t i = 0;

	while (v >= 1024 && i + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, size, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, size, "%.*f %s", v >= 100 ? 0 : v >= 10 ? 1 : 2, v, units[i]);
	return buf;
}

static int bench_table__name_width(const struct bench_results *res)
{
	int w = (int)strlen("Benchmark");

	for (size_t i = 0; i < res->nr; i++) {
		int n = (int)strlen(res->v[i].name);
		if (n > w)
			w = n;
	}
	return w > REPORT_NAME_MAX ? REPORT_NAME_MAX : w;
}

static void bench_table__walltime(FILE *f, const struct bench_results *res, int w)
{
	char a[32], b[32], c[32], d[32], e[32], g[32], h[32], cv[16];

	fprintf(f, "%-*s %6s %10s %10s %10s %10s %10s %10s %8s %6s %10s\n", w, "Benchmark",
		"Rounds", "Mean", "Median", "Stddev", "Min", "Max", "IQR", "Outliers", "CV",
		"Max RSS");
	for (size_t i = 0; i < res->nr; i++) {
		const struct bench_result *r = &res->v[i];
		const struct bench_stats *s = &r->stats;

		if (r->failed) {
			fprintf(f, "%-*.*s FAILED (exit status %d)\n", w, w, r->name, r->exit_code);
			continue;
		}
		if (isnan(s->cv))
			snprintf(cv, sizeof(cv), "-");
		else
			snprintf(cv, sizeof(cv), "%.1f%%", s->cv * 100);
		fprintf(f, "%-*.*s %6zu %10s %10s %10s %10s %10s %10s %8zu %6s %10s\n", w, w,
			r->name, r->nr_rounds, bench_duration__format(s->mean, a, sizeof(a)),
			bench_duration__format(s->median, b, sizeof(b)),
			bench_duration__format(s->stddev, c, sizeof(c)),
			bench_duration__format(s->min, d, sizeof(d)),
			bench_duration__format(s->max, e, sizeof(e)),
			bench_duration__format(s->iqr, g, sizeof(g)), s->outliers, cv,
			bench_table__bytes(r->max_rss, h, sizeof(h)));
	}
}

/* A metric's value: bytes in binary units, counts as integers. */
const char *bench_table__metric(enum bench_metric m, double v, char *buf, size_t size)
{
	if (isnan(v))
		return "-";
	if (bench_metrics[m].unit)
		snprintf(buf, size, "%.0f", v);
	else
		bench_table__bytes((uint64_t)v, buf, size);
	return buf;
}

/* "2.23 MiB =" when every round agrees, else "16.4 MiB ±0.8%": half the range over the median. */
static const char *bench_table__spread(enum bench_metric m, const struct bench_stats *s, char *buf,
				       size_t size)
{
	char v[32];

	bench_table__metric(m, s->median, v, sizeof(v));
	if (s->min == s->max)
		snprintf(buf, size, "%s =", v);
	else if (s->median > 0)
		snprintf(buf, size, "%s ±%.1f%%", v, (s->max - s->min) / 2 / s->median * 100);
	else
		snprintf(buf, size, "%s ±?", v);
	return buf;
}

static void bench_table__memory(FILE *f, const struct bench_results *res, int w)
{
	char cell[48], t[32];

	fprintf(f, "%-*s %6s", w, "Benchmark", "Rounds");
	for (int m = 0; m < BENCH_MEM_NR; m++)
		fprintf(f, " %17s", bench_metrics[m].title);
	fprintf(f, " %12s\n", "Tracked wall");
	for (size_t i = 0; i < res->nr; i++) {
		const struct bench_result *r = &res->v[i];

		if (r->failed) {
			fprintf(f, "%-*.*s FAILED (exit status %d)\n", w, w, r->name, r->exit_code);
			continue;
		}
		fprintf(f, "%-*.*s%c%6zu", w, w, r->name, r->window ? '*' : ' ', r->mem_rounds);
		for (int m = 0; m < BENCH_MEM_NR; m++) {
			bench_table__spread(m, &r->mem_stats[m], cell, sizeof(cell));
			/* printf pads bytes: the two-byte '±' shows as one column */
			fprintf(f, " %*s", 17 + (strstr(cell, "±") != NULL), cell);
		}
		fprintf(f, " %12s\n", bench_duration__format(r->stats.median, t, sizeof(t)));
	}
	fprintf(f, "(medians over the rounds; = every round gave the same value, ±: half the range "
		   "over the median)\n");
	for (size_t i = 0; i < res->nr; i++)
		if (res->v[i].window) {
			fprintf(f, "(*: over the program's measured window, MEMTRACK_START() to "
				   "MEMTRACK_STOP(); peak RSS is the whole run's)\n");
			break;
		}
}

void bench_table__table(FILE *f, const struct bench_results *res)
{
	int w = bench_table__name_width(res);

	if (res->mode == BENCH_MODE_MEMORY)
		bench_table__memory(f, res, w);
	else
		bench_table__walltime(f, res, w);
	fflush(f);
}
