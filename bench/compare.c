// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "compare.h"
#include "duration.h"
#include "report.h"

const char *bench_compare__status_name(enum compare_status s)
{
	static const char *const names[COMPARE_NR] = {
	    [COMPARE_UNTOUCHED] = "untouched", [COMPARE_NEW] = "new",
	    [COMPARE_REMOVED] = "removed",     [COMPARE_IMPROVED] = "improved",
	    [COMPARE_REGRESSED] = "regressed",
	};
	return s < COMPARE_NR ? names[s] : "?";
}

int bench_compare__parse_threshold(const char *s, double *fraction)
{
	char *end;
	double v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !isfinite(v) || v < 0 || (*end && strcmp(end, "%") != 0))
		return -EINVAL;
	*fraction = v / 100.0;
	return 0;
}

static const struct bench_result *bench_compare__find(const struct bench_results *res,
						      const struct bench_result *want)
{
	for (size_t i = 0; i < res->nr; i++)
		if (!res->v[i].failed && res->v[i].mode == want->mode &&
		    strcmp(res->v[i].name, want->name) == 0)
			return &res->v[i];
	return NULL;
}

static double bench_compare__value(const struct bench_result *r)
{
	if (r->mode == BENCH_MODE_MEMORY)
		return (double)r->peak_heap;
	return r->stats.median;
}

/* Classifies one matched pair: a change counts past the threshold *and* when significant. */
static void bench_compare__classify(const struct bench_result *b, const struct bench_result *h,
				    const struct compare_opts *o, struct compare_row *row)
{
	bool significant = true;

	row->base = bench_compare__value(b);
	row->head = bench_compare__value(h);
	row->p = NAN;
	row->change = row->base > 0 ? (row->head - row->base) / row->base : NAN;
	row->status = COMPARE_UNTOUCHED;
	if (isnan(row->change) || fabs(row->change) <= o->threshold)
		return;
	/* Memory figures are one deterministic number; times need the samples to differ. */
	if (b->mode == BENCH_MODE_WALLTIME && b->nr_rounds >= 2 && h->nr_rounds >= 2) {
		if (bench_stats__mann_whitney(b->times, b->nr_rounds, h->times, h->nr_rounds,
					      &row->p))
			row->p = NAN;
		significant = !isnan(row->p) && row->p < o->alpha;
	}
	if (!significant) {
		row->noisy = true;
		return;
	}
	row->status = row->change > 0 ? COMPARE_REGRESSED : COMPARE_IMPROVED;
}

int bench_compare__run(const struct bench_results *base, const struct bench_results *head,
		       const struct compare_opts *o, struct compare_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->threshold = o->threshold;
	rep->alpha = o->alpha;
	rep->rows = calloc(base->nr + head->nr + 1, sizeof(*rep->rows));
	if (!rep->rows)
		return -ENOMEM;
	for (size_t i = 0; i < head->nr; i++) {
		const struct bench_result *h = &head->v[i], *b;
		struct compare_row *row;

		if (h->failed)
			continue;
		b = bench_compare__find(base, h);
		row = &rep->rows[rep->nr++];
		row->name = h->name;
		row->mode = h->mode;
		if (b) {
			bench_compare__classify(b, h, o, row);
		} else {
			row->status = COMPARE_NEW;
			row->base = row->change = row->p = NAN;
			row->head = bench_compare__value(h);
		}
	}
	for (size_t i = 0; i < base->nr; i++) {
		const struct bench_result *b = &base->v[i];
		struct compare_row *row;

		if (b->failed || bench_compare__find(head, b))
			continue;
		row = &rep->rows[rep->nr++];
		row->name = b->name;
		row->mode = b->mode;
		row->status = COMPARE_REMOVED;
		row->base = bench_compare__value(b);
		row->head = row->change = row->p = NAN;
	}
	for (size_t i = 0; i < rep->nr; i++) {
		const struct compare_row *row = &rep->rows[i];
		rep->counts[row->status]++;
		if (row->status == COMPARE_REGRESSED && row->change > rep->worst_regression)
			rep->worst_regression = row->change;
		if (row->status == COMPARE_IMPROVED && -row->change > rep->best_improvement)
			rep->best_improvement = -row->change;
	}
	return 0;
}

static const char *bench_compare__fmt(const struct compare_row *row, double v, char *buf,
				      size_t size)
{
	if (isnan(v))
		return "-";
	if (row->mode == BENCH_MODE_MEMORY)
		return bench_table__bytes((uint64_t)v, buf, size);
	return bench_duration__format(v, buf, size);
}

/* Table cells cannot hold a bare '|'. */
static void bench_compare__cell(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', f);
		fputc(*s == '\n' ? ' ' : *s, f);
	}
}

void bench_compare__markdown(FILE *f, const struct compare_report *rep)
{
	const size_t *c = rep->counts;
	char a[32], b[32];

	if (c[COMPARE_REGRESSED])
		fprintf(f, "## This change will degrade performance by up to %.1f%%\n\n",
			rep->worst_regression * 100);
	else if (c[COMPARE_IMPROVED])
		fprintf(f, "## This change will improve performance by up to %.1f%%\n\n",
			rep->best_improvement * 100);
	else
		fprintf(f, "## This change will not alter performance\n\n");
	fprintf(f,
		"%zu regressed, %zu improved, %zu untouched, %zu new, %zu removed "
		"(a change counts past %.1f%% when a Mann-Whitney U test on the round times "
		"gives p < %.2g)\n\n",
		c[COMPARE_REGRESSED], c[COMPARE_IMPROVED], c[COMPARE_UNTOUCHED], c[COMPARE_NEW],
		c[COMPARE_REMOVED], rep->threshold * 100, rep->alpha);
	fprintf(f, "| Mode | Benchmark | BASE | HEAD | Change | |\n");
	fprintf(f, "|---|---|---:|---:|---:|---|\n");
	for (size_t i = 0; i < rep->nr; i++) {
		const struct compare_row *row = &rep->rows[i];

		fprintf(f, "| %s | ", row->mode == BENCH_MODE_MEMORY ? "Memory" : "WallTime");
		bench_compare__cell(f, row->name);
		fprintf(f, " | %s | %s | ", bench_compare__fmt(row, row->base, a, sizeof(a)),
			bench_compare__fmt(row, row->head, b, sizeof(b)));
		if (isnan(row->change))
			fprintf(f, "-");
		else
			fprintf(f, "%+.1f%%", row->change * 100);
		fprintf(f, " | %s", bench_compare__status_name(row->status));
		if (row->noisy && !isnan(row->p))
			fprintf(f, " (noisy: p = %.2f)", row->p);
		fprintf(f, " |\n");
	}
	fflush(f);
}

void bench_compare__free(struct compare_report *rep)
{
	if (!rep)
		return;
	free(rep->rows);
	memset(rep, 0, sizeof(*rep));
}
