// SPDX-License-Identifier: MIT
/*
 * `memtrack report`: the reader side. Decodes an artifact, runs the same accounting as the
 * tracker, and prints a summary, a JSON document or an SVG plot of heap and RSS over time.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "cli/cmd_report.h"
#include "common/log.h"
#include "report/heap.h"
#include "report/report.h"

#define REPORT_POINTS 1000 /* timeline samples kept, at most */

static const char report_usage[] =
	"Usage: memtrack report [OPTIONS] ARTIFACT\n"
	"\n"
	"Read a <pid>.MemtrackArtifact.msgpack (and the <pid>.memtrack.json beside it, if any)\n"
	"and summarise it: peak heap and RSS of the tree and per process, allocations, frees,\n"
	"leaks at exit, event counts.\n"
	"\n"
	"Options:\n"
	"      --json        print a JSON document instead (results, processes, counts and a\n"
	"                    timeline of tree heap and RSS, at most 1000 points)\n"
	"      --svg FILE    also write an SVG plot of heap and RSS over time\n"
	"  -h, --help        this text\n"
	"\n"
	"Exit status: 0 ok, 1 usage error, 2 unreadable or undecodable artifact (what could be\n"
	"read is still reported).\n";

struct point {
	uint64_t ts, heap, rss;
};

struct timeline {
	struct point p[REPORT_POINTS];
	size_t n;
	uint64_t step; /* keep one point per `step` events; doubles when full */
	uint64_t seen;
};

static void timeline__add(struct timeline *t, uint64_t ts, uint64_t heap, uint64_t rss)
{
	if (t->seen++ % t->step)
		return;
	if (t->n == REPORT_POINTS) {
		/* halve the resolution: keep every other point */
		for (size_t i = 0; i < REPORT_POINTS / 2; i++)
			t->p[i] = t->p[2 * i];
		t->n = REPORT_POINTS / 2;
		t->step *= 2;
	}
	t->p[t->n++] = (struct point){ts, heap, rss};
}

static int report__svg(const char *path, const struct timeline *t)
{
	const double w = 800, h = 300, l = 70, r = 20, top = 20, bot = 40;
	uint64_t t0 = t->n ? t->p[0].ts : 0, t1 = t->n ? t->p[t->n - 1].ts : 1, max = 1;
	char lab[32];
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	for (size_t i = 0; i < t->n; i++) {
		if (t->p[i].heap > max)
			max = t->p[i].heap;
		if (t->p[i].rss > max)
			max = t->p[i].rss;
	}
	if (t1 <= t0)
		t1 = t0 + 1;
	fprintf(f,
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"font-family=\"sans-serif\" font-size=\"12\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
		"<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n"
		"<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
		w, h, l, h - bot, w - r, h - bot, l, top, l, h - bot);
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%s</text>\n", l - 4, top + 4,
		report__bytes(max, lab, sizeof(lab)));
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">0</text>\n", l - 4, h - bot);
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.1f ms</text>\n", w - r,
		h - bot + 16, (t1 - t0) / 1e6);
	fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">time since first event</text>\n", l, h - 8);
	for (int s = 0; s < 2; s++) {
		fprintf(f, "<polyline id=\"%s\" fill=\"none\" stroke=\"%s\" points=\"",
			s ? "rss" : "heap", s ? "#1f77b4" : "#d62728");
		for (size_t i = 0; i < t->n; i++) {
			double x = l + (w - l - r) * (double)(t->p[i].ts - t0) / (double)(t1 - t0);
			double v = (double)(s ? t->p[i].rss : t->p[i].heap);

			fprintf(f, "%.1f,%.1f ", x, h - bot - (h - top - bot) * v / (double)max);
		}
		fprintf(f, "\"/>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", l + 10 + s * 120,
			top + 14, s ? "#1f77b4" : "#d62728", s ? "RSS (tree)" : "live heap (tree)");
	}
	fprintf(f, "</svg>\n");
	return fclose(f) ? -errno : 0;
}

static json_t *report__json(const struct manifest *m, const struct timeline *t, bool complete,
			    const char *error)
{
	json_t *root = json_object(), *res = json_object(), *procs = json_array();
	json_t *counts = json_object(), *tl = json_array();

	json_object_set_new(res, "peak_heap", json_integer((json_int_t)m->peak_heap));
	json_object_set_new(res, "peak_rss", json_integer((json_int_t)m->peak_rss));
	json_object_set_new(res, "allocs", json_integer((json_int_t)m->allocs));
	json_object_set_new(res, "frees", json_integer((json_int_t)m->frees));
	json_object_set_new(res, "leaked_bytes", json_integer((json_int_t)m->leaked_bytes));
	json_object_set_new(res, "leaked_count", json_integer((json_int_t)m->leaked_count));
	for (uint32_t i = 0; i < m->nr_procs; i++) {
		const struct manifest_proc *p = &m->procs[i];

		json_array_append_new(
			procs, json_pack("{s:i, s:i, s:I, s:I, s:I, s:I, s:I}", "pid", p->pid,
					 "ppid", p->ppid, "peak_heap", (json_int_t)p->peak_heap,
					 "peak_rss", (json_int_t)p->peak_rss, "allocs",
					 (json_int_t)p->allocs, "frees", (json_int_t)p->frees,
					 "leaked_bytes", (json_int_t)p->leaked_bytes));
	}
	for (uint32_t ty = 1; ty < MT_EV_TYPE_MAX; ty++)
		if (artifact__type_name(ty))
			json_object_set_new(counts, artifact__type_name(ty),
					    json_integer((json_int_t)m->counts[ty]));
	for (size_t i = 0; i < t->n; i++)
		json_array_append_new(tl, json_pack("[I, I, I]", (json_int_t)t->p[i].ts,
						    (json_int_t)t->p[i].heap,
						    (json_int_t)t->p[i].rss));
	json_object_set_new(root, "results", res);
	json_object_set_new(root, "processes", procs);
	json_object_set_new(root, "events", json_pack("{s:I, s:o}", "total",
						     (json_int_t)m->events_total, "by_type", counts));
	json_object_set_new(root, "timeline_columns", json_pack("[s, s, s]", "timestamp_ns",
								"heap_bytes", "rss_bytes"));
	json_object_set_new(root, "timeline", tl);
	json_object_set_new(root, "decoded_completely", json_boolean(complete));
	json_object_set_new(root, "decode_error", error ? json_string(error) : json_null());
	return root;
}

/* DIR/PID.MemtrackArtifact.msgpack -> DIR/PID.memtrack.json */
static void report__manifest_path(const char *artifact, char *out, size_t cap)
{
	size_t n = strlen(artifact), sl = strlen(ARTIFACT_SUFFIX);

	if (n > sl && !strcmp(artifact + n - sl, ARTIFACT_SUFFIX))
		snprintf(out, cap, "%.*s%s", (int)(n - sl), artifact, MANIFEST_SUFFIX);
	else
		out[0] = 0;
}

int cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"svg", required_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct timeline *tl = calloc(1, sizeof(*tl));
	struct artifact_reader *rd = NULL;
	struct heap_acct *acct = NULL;
	struct manifest m = {0}, saved = {0};
	const char *svg = NULL, *error = NULL;
	char mpath[4096];
	bool json = false, have_manifest = false;
	struct mt_event ev;
	int c, n, ret = 2;

	if (!tl)
		return 2;
	tl->step = 1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 's':
			svg = optarg;
			break;
		case 'h':
			fputs(report_usage, stdout);
			free(tl);
			return 0;
		default:
			fprintf(stderr, "Try 'memtrack report --help'.\n");
			free(tl);
			return 1;
		}
	}
	if (optind + 1 != argc) {
		log__error("report takes one artifact; see memtrack report --help");
		free(tl);
		return 1;
	}
	n = artifact_reader__open(&rd, argv[optind]);
	if (n) {
		log__error("cannot open '%s': %s", argv[optind], strerror(-n));
		goto cleanup;
	}
	if (heap_acct__new(&acct))
		goto cleanup;
	while ((n = artifact_reader__next(rd, &ev)) == 1) {
		heap_acct__event(acct, &ev);
		timeline__add(tl, ev.ts, heap_acct__live_heap(acct), heap_acct__live_rss(acct));
	}
	if (n < 0) {
		error = artifact_reader__error(rd);
		log__error("'%s': %s; reporting what was read before it", argv[optind],
			   error ? error : strerror(-n));
	}
	heap_acct__fill(acct, &m);
	report__manifest_path(argv[optind], mpath, sizeof(mpath));
	if (mpath[0] && manifest__read(&saved, mpath) == 0)
		have_manifest = true;
	if (have_manifest) {
		/* drops and the kernel's exact tree peak are only known to the tracker */
		memcpy(m.drops, saved.drops, sizeof(m.drops));
		m.consumer_drops = saved.consumer_drops;
		if (saved.peak_rss > m.peak_rss)
			m.peak_rss = saved.peak_rss;
	}
	if (json) {
		json_t *doc = report__json(&m, tl, n == 0, error);

		if (have_manifest) {
			json_object_set_new(doc, "command", saved.command ? json_string(saved.command)
									  : json_null());
			json_object_set_new(doc, "exit_status", json_integer(saved.exit_status));
			json_object_set_new(doc, "complete", json_boolean(saved.complete));
		}
		json_dumpf(doc, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
		json_decref(doc);
	} else {
		if (have_manifest)
			printf("command: %s (exit status %d)%s\n",
			       saved.command ? saved.command
					     : (saved.argv && saved.argv[0] ? saved.argv[0] : "?"),
			       saved.exit_status, saved.complete ? "" : ", INCOMPLETE: events lost");
		report__summary(stdout, &m);
	}
	if (svg) {
		int err = report__svg(svg, tl);

		if (err) {
			log__error("cannot write '%s': %s", svg, strerror(-err));
			goto cleanup;
		}
	}
	ret = n == 0 ? 0 : 2;
cleanup:
	artifact_reader__free(rd);
	heap_acct__free(acct);
	free(m.procs);
	if (have_manifest)
		manifest__free(&saved);
	free(tl);
	return ret;
}
