// SPDX-License-Identifier: MIT
/* Plots and traces: SVG written by hand, Chrome trace-event JSON for ui.perfetto.dev. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include "report/report.h"

/* SVG geometry, px */
#define SVG_W 960
#define SVG_H 480
#define SVG_L 90 /* left margin: y tick labels */
#define SVG_R 30
#define SVG_T 50 /* title and legend */
#define SVG_B 60 /* x tick labels and axis title */
#define SVG_TICKS 6 /* aimed at, per axis */

#define COLOR_HEAP "#d62728"
#define COLOR_RSS "#1f77b4"

static void xml_escaped(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '&': fputs("&amp;", out); break;
		case '"': fputs("&quot;", out); break;
		default:
			/* control bytes are not allowed in XML 1.0 */
			fputc((unsigned char)*s < 0x20 ? ' ' : *s, out);
		}
	}
}

/* A 1-2-5 step giving about SVG_TICKS ticks over [0, span]. */
static double nice_step(double span)
{
	double raw = span / SVG_TICKS, mag, f;

	if (raw <= 0)
		return 1;
	mag = pow(10, floor(log10(raw)));
	f = raw / mag;
	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

struct axis_unit {
	const char *name;
	double div;
};

static struct axis_unit bytes_unit(uint64_t max)
{
	static const struct axis_unit u[] = {
		{"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
		{"TiB", 1099511627776.0},
	};
	int i = 0;

	while (i < 4 && (double)max >= u[i + 1].div)
		i++;
	return u[i];
}

static struct axis_unit time_unit(uint64_t span_ns)
{
	if (span_ns >= 2000000000ULL)
		return (struct axis_unit){"s", 1e9};
	if (span_ns >= 2000000ULL)
		return (struct axis_unit){"ms", 1e6};
	if (span_ns >= 2000ULL)
		return (struct axis_unit){"\xc2\xb5s", 1e3};
	return (struct axis_unit){"ns", 1};
}

static void svg__series(FILE *out, const struct timeline_point *p, uint32_t n, int rss,
			double xscale, double yscale)
{
	fprintf(out, "<polyline id=\"%s\" class=\"series\" fill=\"none\" stroke=\"%s\" "
		"stroke-width=\"1.5\" points=\"", rss ? "rss" : "heap", rss ? COLOR_RSS : COLOR_HEAP);
	for (uint32_t i = 0; i < n; i++) {
		double v = (double)(rss ? p[i].rss : p[i].heap);

		fprintf(out, "%s%.1f,%.1f", i ? " " : "", SVG_L + (double)p[i].t * xscale,
			SVG_H - SVG_B - v * yscale);
	}
	fputs("\"/>\n", out);
}

int report__svg(FILE *out, const struct report_view *v, struct timeline *tl)
{
	const double pw = SVG_W - SVG_L - SVG_R, ph = SVG_H - SVG_T - SVG_B;
	const struct timeline_point *p = NULL;
	uint64_t span = 0, max = 0, bucket = 0;
	struct axis_unit yu, xu;
	double ystep, xstep, ymax, xmax, yscale, xscale;
	uint32_t n = 0;
	char a[32], b[32];

	if (tl)
		p = timeline__points(tl, &n, NULL, &bucket);
	for (uint32_t i = 0; i < n; i++) {
		max = p[i].heap > max ? p[i].heap : max;
		max = p[i].rss > max ? p[i].rss : max;
	}
	span = n ? p[n - 1].t + bucket : 1;
	yu = bytes_unit(max);
	xu = time_unit(span);
	ystep = nice_step((double)(max ? max : 1) / yu.div);
	ymax = ceil((double)(max ? max : 1) / yu.div / ystep) * ystep;
	xstep = nice_step((double)span / xu.div);
	xmax = (double)span / xu.div;
	yscale = ph / (ymax * yu.div);
	xscale = pw / (double)span;

	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		SVG_W, SVG_H, SVG_W, SVG_H);
	fputs("<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">memtrack: ", out);
	if (v->have_manifest && v->m->command)
		xml_escaped(out, v->m->command);
	else if (v->have_manifest && v->m->argv && v->m->argv[0])
		xml_escaped(out, v->m->argv[0]);
	else
		xml_escaped(out, v->artifact ? v->artifact : "process tree");
	fprintf(out, " (tree: peak heap %s, peak RSS %s)</text>\n",
		report__bytes(v->m->peak_heap, a, sizeof(a)),
		report__bytes(v->m->peak_rss, b, sizeof(b)));

	/* grid and tick labels */
	fputs("<g id=\"y-axis\" stroke=\"#ddd\">\n", out);
	for (double y = 0; y <= ymax + ystep / 1e6; y += ystep) {
		double py = SVG_H - SVG_B - y * yu.div * yscale;

		fprintf(out, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>"
			"<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" stroke=\"none\">%g</text>\n",
			SVG_L, py, SVG_W - SVG_R, py, SVG_L - 6, py + 4, y);
	}
	fputs("</g>\n<g id=\"x-axis\" stroke=\"#ddd\">\n", out);
	for (double x = 0; x <= xmax + xstep / 1e6; x += xstep) {
		double px = SVG_L + x * xu.div * xscale;

		fprintf(out, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>"
			"<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" stroke=\"none\">%g</text>\n",
			px, SVG_T, px, SVG_H - SVG_B, px, SVG_H - SVG_B + 16, x);
	}
	fputs("</g>\n", out);
	fprintf(out, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" "
		"stroke=\"black\"/>\n", SVG_L, SVG_T, pw, ph);
	fprintf(out, "<text x=\"%.0f\" y=\"%d\" text-anchor=\"middle\">time since the first event "
		"(%s)</text>\n", SVG_L + pw / 2, SVG_H - 16, xu.name);
	fprintf(out, "<text transform=\"translate(18 %.0f) rotate(-90)\" text-anchor=\"middle\">"
		"memory (%s)</text>\n", SVG_T + ph / 2, yu.name);

	if (n) {
		svg__series(out, p, n, 0, xscale, yscale);
		svg__series(out, p, n, 1, xscale, yscale);
	} else {
		fprintf(out, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">no events</text>\n",
			SVG_L + pw / 2, SVG_T + ph / 2);
	}
	/* legend */
	fprintf(out, "<g id=\"legend\">\n"
		"<line x1=\"%d\" y1=\"38\" x2=\"%d\" y2=\"38\" stroke=\"%s\" stroke-width=\"3\"/>"
		"<text x=\"%d\" y=\"42\">live heap (tree)</text>\n"
		"<line x1=\"%d\" y1=\"38\" x2=\"%d\" y2=\"38\" stroke=\"%s\" stroke-width=\"3\"/>"
		"<text x=\"%d\" y=\"42\">RSS: file + anon + shmem (tree)</text>\n</g>\n",
		SVG_L, SVG_L + 20, COLOR_HEAP, SVG_L + 26, SVG_L + 160, SVG_L + 180, COLOR_RSS,
		SVG_L + 186);
	fputs("</svg>\n", out);
	return ferror(out) ? -EIO : 0;
}

/*
 * Trace-event format: {"traceEvents": [...]}; "ts" in microseconds (fractions allowed). A "C"
 * event's args become counter tracks named "<name> <arg>" under the process `pid`.
 */
int report__perfetto(FILE *out, const struct report_view *v, struct timeline *tl)
{
	const struct timeline_point *p = NULL;
	int32_t pid = v->m->root_pid;
	uint32_t n = 0;

	if (!pid && v->m->nr_procs)
		pid = v->m->procs[0].pid;
	if (tl)
		p = timeline__points(tl, &n, NULL, NULL);
	fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", out);
	fprintf(out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
		"\"args\":{\"name\":\"memtrack tree (root %d)\"}}", pid, pid);
	for (uint32_t i = 0; i < n; i++) {
		double us = (double)p[i].t / 1e3;

		fprintf(out, ",\n{\"name\":\"heap\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,\"tid\":0,"
			"\"args\":{\"live bytes\":%" PRIu64 "}}", us, pid, p[i].heap);
		fprintf(out, ",\n{\"name\":\"rss\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,\"tid\":0,"
			"\"args\":{\"resident bytes\":%" PRIu64 "}}", us, pid, p[i].rss);
	}
	fputs("\n]}\n", out);
	return ferror(out) ? -EIO : 0;
}
