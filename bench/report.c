// SPDX-License-Identifier: MIT
#include <math.h>
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

static void bench_table__memory(FILE *f, const struct bench_results *res, int w)
{
	char a[32], b[32], c[32];

	fprintf(f, "%-*s %12s %12s %12s %12s\n", w, "Benchmark", "Peak heap", "Peak RSS", "Allocs",
		"Tracked wall");
	for (size_t i = 0; i < res->nr; i++) {
		const struct bench_result *r = &res->v[i];

		if (r->failed) {
			fprintf(f, "%-*.*s FAILED (exit status %d)\n", w, w, r->name, r->exit_code);
			continue;
		}
		fprintf(f, "%-*.*s %12s %12s %12llu %12s\n", w, w, r->name,
			bench_table__bytes(r->peak_heap, a, sizeof(a)),
			bench_table__bytes(r->peak_rss, b, sizeof(b)),
			(unsigned long long)r->allocs,
			bench_duration__format(r->stats.mean, c, sizeof(c)));
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
