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
		return r->mem_rounds ? r->mem_stats[BENCH_MEM_PEAK_HEAP].median : NAN;
	return r->stats.median;
}

static double bench_compare__change(double base, double head)
{
	if (isnan(base) || isnan(head))
		return NAN;
	if (base == 0)
		return head == 0 ? 0 : INFINITY; /* a leak appearing: past any threshold */
	return (head - base) / base;
}

void bench_compare__metric(const struct bench_result *b, const struct bench_result *h,
			   enum bench_metric m, const struct compare_opts *o,
			   struct compare_metric *out)
{
	const struct bench_stats *bs = &b->mem_stats[m], *hs = &h->mem_stats[m];
	bool tested = b->mem_rounds >= 2 && h->mem_rounds >= 2;

	memset(out, 0, sizeof(*out));
	out->p = NAN;
	out->status = COMPARE_UNTOUCHED;
	if (!b->mem_rounds || !h->mem_rounds) {
		out->base = out->head = out->change = NAN;
		return;
	}
	out->base = bs->median;
	out->head = hs->median;
	out->change = bench_compare__change(out->base, out->head);
	/* One round cannot show a figure is deterministic: it proves nothing either way. */
	out->deterministic = tested && bs->min == bs->max && hs->min == hs->max;
	if (out->deterministic) {
		out->real = out->base != out->head;
	} else if (tested) {
		if (bench_stats__mann_whitney(b->mem[m], b->mem_rounds, h->mem[m], h->mem_rounds,
					      &out->p))
			out->p = NAN;
		out->real = !isnan(out->p) && out->p < o->alpha;
	}
	if (out->base == out->head ||
	    fabs(out->change) <= (m == BENCH_MEM_PEAK_RSS && !isnan(o->rss_threshold)
				      ? o->rss_threshold
				      : o->threshold))
		return;
	if (!out->real) {
		out->noisy = true;
		return;
	}
	out->status = out->change > 0 ? COMPARE_REGRESSED : COMPARE_IMPROVED;
}

/* Memory rows: a verdict per metric; the row takes the worst. */
static void bench_compare__memory(const struct bench_result *b, const struct bench_result *h,
				  const struct compare_opts *o, struct compare_row *row)
{
	row->has_mem = true;
	row->window_changed = b->window != h->window;
	row->head_window = h->window;
	for (int m = 0; m < BENCH_MEM_NR; m++) {
		struct compare_metric *c = &row->mem[m];

		bench_compare__metric(b, h, m, o, c);
		row->noisy |= c->noisy;
		if (c->status == COMPARE_REGRESSED)
			row->status = COMPARE_REGRESSED;
		else if (c->status == COMPARE_IMPROVED && row->status == COMPARE_UNTOUCHED)
			row->status = COMPARE_IMPROVED;
	}
	if (!isnan(row->mem[BENCH_MEM_PEAK_HEAP].p))
		row->p = row->mem[BENCH_MEM_PEAK_HEAP].p;
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
	if (b->mode == BENCH_MODE_MEMORY) {
		bench_compare__memory(b, h, o, row);
		return;
	}
	if (isnan(row->change) || fabs(row->change) <= o->threshold)
		return;
	/* Times need the samples to differ (a file without times has only its median). */
	if (b->nr_rounds >= 2 && h->nr_rounds >= 2) {
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

/* The headline's "up to": finite changes only (a leak from 0 B has no percentage). */
static void bench_compare__extremes(struct compare_report *rep, enum compare_status status,
				    double change)
{
	if (!isfinite(change))
		return;
	if (status == COMPARE_REGRESSED && change > rep->worst_regression)
		rep->worst_regression = change;
	if (status == COMPARE_IMPROVED && -change > rep->best_improvement)
		rep->best_improvement = -change;
}

int bench_compare__run(const struct bench_results *base, const struct bench_results *head,
		       const struct compare_opts *o, struct compare_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->threshold = o->threshold;
	rep->rss_threshold = isnan(o->rss_threshold) ? o->threshold : o->rss_threshold;
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
		bench_compare__extremes(rep, row->status, row->change);
		for (int m = 0; row->has_mem && m < BENCH_MEM_NR; m++)
			bench_compare__extremes(rep, row->mem[m].status, row->mem[m].change);
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

const char *bench_compare__exact(enum bench_metric m, double delta, char *buf, size_t size)
{
	const char *unit = bench_metrics[m].unit;
	char sign = delta < 0 ? '-' : '+';
	double a = fabs(delta);

	if (unit)
		snprintf(buf, size, "%c%.0f %s%s", sign, a, unit, a == 1 ? "" : "s");
	else if (a >= 1 << 20 && fmod(a, 1 << 20) == 0)
		snprintf(buf, size, "%c%.0f MiB", sign, a / (1 << 20));
	else if (a >= 1024 && fmod(a, 1024) == 0)
		snprintf(buf, size, "%c%.0f KiB", sign, a / 1024);
	else
		snprintf(buf, size, "%c%.0f B", sign, a);
	return buf;
}

static void bench_compare__pct(FILE *f, double change)
{
	if (isnan(change))
		fprintf(f, "-");
	else if (isinf(change))
		fprintf(f, "from 0");
	else
		fprintf(f, "%+.1f%%", change * 100);
}

/* The memory metrics that moved (really, or past the threshold by noise), one line each. */
static void bench_compare__memory_moves(FILE *f, const struct compare_report *rep)
{
	char a[32], b[32], d[48];
	size_t shown = 0;

	fprintf(f, "\n### Memory metrics that moved\n\n");
	for (size_t i = 0; i < rep->nr; i++) {
		const struct compare_row *row = &rep->rows[i];

		for (int m = 0; row->has_mem && m < BENCH_MEM_NR; m++) {
			const struct compare_metric *c = &row->mem[m];

			if (!c->real && !c->noisy)
				continue;
			if (!shown++)
				fprintf(f,
					"| Benchmark | Metric | BASE | HEAD | Change | Verdict |\n"
					"|---|---|---:|---:|---:|---|\n");
			fprintf(f, "| ");
			bench_compare__cell(f, row->name);
			fprintf(f, " | %s | %s | %s | ", bench_metrics[m].title,
				bench_table__metric(m, c->base, a, sizeof(a)),
				bench_table__metric(m, c->head, b, sizeof(b)));
			if (c->deterministic)
				fprintf(f, "%s, ",
					bench_compare__exact(m, c->head - c->base, d, sizeof(d)));
			bench_compare__pct(f, c->change);
			fprintf(f, " | %s: ",
				c->status == COMPARE_UNTOUCHED
				    ? c->real ? "within the threshold" : "noise"
				    : bench_compare__status_name(c->status));
			if (c->deterministic)
				fprintf(f, "identical in every round |\n");
			else if (isnan(c->p))
				fprintf(f, "too few rounds to tell |\n");
			else
				fprintf(f, "p = %.2g |\n", c->p);
		}
	}
	if (!shown)
		fprintf(f, "None: every metric is within its rounds' noise.\n");
}

/* "regressed (peak heap, allocated)": which metrics gave a memory row its status. */
static void bench_compare__status_cell(FILE *f, const struct compare_row *row)
{
	const char *sep = " (";

	fprintf(f, "%s", bench_compare__status_name(row->status));
	if (row->has_mem && row->status != COMPARE_UNTOUCHED) {
		for (int m = 0; m < BENCH_MEM_NR; m++) {
			if (row->mem[m].status != row->status)
				continue;
			fprintf(f, "%s%s", sep, bench_metrics[m].title);
			sep = ", ";
		}
		fprintf(f, ")");
	} else if (row->noisy && !isnan(row->p)) {
		fprintf(f, " (noisy: p = %.2f)", row->p);
	} else if (row->noisy) {
		fprintf(f, " (noisy)");
	}
}

void bench_compare__markdown(FILE *f, const struct compare_report *rep)
{
	const size_t *c = rep->counts;
	char a[32], b[32];
	bool memory = false;

	for (size_t i = 0; i < rep->nr; i++)
		memory |= rep->rows[i].mode == BENCH_MODE_MEMORY;
	if (c[COMPARE_REGRESSED] && rep->worst_regression > 0)
		fprintf(f, "## This change will degrade performance by up to %.1f%%\n\n",
			rep->worst_regression * 100);
	else if (c[COMPARE_REGRESSED])
		fprintf(f, "## This change will degrade performance\n\n");
	else if (c[COMPARE_IMPROVED])
		fprintf(f, "## This change will improve performance by up to %.1f%%\n\n",
			rep->best_improvement * 100);
	else
		fprintf(f, "## This change will not alter performance\n\n");
	fprintf(f,
		"%zu regressed, %zu improved, %zu untouched, %zu new, %zu removed "
		"(a change counts past %.1f%% when a Mann-Whitney U test on the rounds "
		"gives p < %.2g%s)\n\n",
		c[COMPARE_REGRESSED], c[COMPARE_IMPROVED], c[COMPARE_UNTOUCHED], c[COMPARE_NEW],
		c[COMPARE_REMOVED], rep->threshold * 100, rep->alpha,
		memory ? ", or when a memory metric identical in every round on both sides differs"
		       : "");
	if (memory && rep->rss_threshold != rep->threshold)
		fprintf(f, "Peak RSS counts past %.1f%%.\n\n", rep->rss_threshold * 100);
	fprintf(f, "| Mode | Benchmark | BASE | HEAD | Change | |\n");
	fprintf(f, "|---|---|---:|---:|---:|---|\n");
	for (size_t i = 0; i < rep->nr; i++) {
		const struct compare_row *row = &rep->rows[i];

		fprintf(f, "| %s | ", row->mode == BENCH_MODE_MEMORY ? "Memory" : "WallTime");
		bench_compare__cell(f, row->name);
		fprintf(f, " | %s | %s | ", bench_compare__fmt(row, row->base, a, sizeof(a)),
			bench_compare__fmt(row, row->head, b, sizeof(b)));
		bench_compare__pct(f, row->change);
		fprintf(f, " | ");
		bench_compare__status_cell(f, row);
		fprintf(f, " |\n");
	}
	if (memory)
		bench_compare__memory_moves(f, rep);
	for (size_t i = 0; i < rep->nr; i++)
		if (rep->rows[i].window_changed)
			fprintf(f,
				"\n> **%s**: %s measured the program's window (MEMTRACK_START), %s "
				"the whole run: heap figures cover different things.\n",
				rep->rows[i].name, rep->rows[i].head_window ? "HEAD" : "BASE",
				rep->rows[i].head_window ? "BASE" : "HEAD");
	fflush(f);
}

void bench_compare__free(struct compare_report *rep)
{
	if (!rep)
		return;
	free(rep->rows);
	memset(rep, 0, sizeof(*rep));
}
