// SPDX-License-Identifier: MIT
/*
 * The measured window (include/memtrack.h) in the reports: one summary line, the JSON objects,
 * and `memtrack report --window`. The figures are the tracker's (the manifest's
 * results.window and markers): the artifact carries no marker.
 */
#include <errno.h>
#include <inttypes.h>
#include "report/report.h"

json_t *report__window_json(const struct manifest *m)
{
	const struct manifest_window *w = &m->window;
	json_t *o;

	if (!w->present)
		return json_null();
	o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "peak_heap",
		      (json_int_t)w->peak_heap, "allocs", (json_int_t)w->allocs, "allocated_bytes",
		      (json_int_t)w->allocated_bytes, "frees", (json_int_t)w->frees, "live_bytes",
		      (json_int_t)w->live_bytes, "live_count", (json_int_t)w->live_count, "starts",
		      (json_int_t)w->starts, "stops", (json_int_t)w->stops, "duration_ms",
		      (double)w->duration_ns / 1e6);
	return o;
}

/* t_ms: since the run's start when the manifest says it, else since the first marker */
json_t *report__markers_json(const struct manifest *m)
{
	json_t *a = json_array();
	uint64_t t0 = m->start_mono_ns > 0 ? (uint64_t)m->start_mono_ns
		      : m->nr_markers	   ? m->markers[0].ts_ns
					   : 0;

	for (uint32_t i = 0; a && i < m->nr_markers; i++) {
		const struct manifest_marker *k = &m->markers[i];
		json_t *e = json_pack(
		    "{s:s, s:s, s:i, s:i, s:f, s:I, s:I}", "kind", k->kind, "name", k->name, "pid",
		    k->pid, "tid", k->tid, "t_ms", (double)(int64_t)(k->ts_ns - t0) / 1e6, "heap",
		    (json_int_t)k->heap, "window_heap", (json_int_t)k->window_heap);

		if (!e || json_array_append_new(a, e)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

void report__window_line(FILE *out, const struct manifest *m)
{
	const struct manifest_window *w = &m->window;
	char a[32], b[32], c[32];

	if (!w->present)
		return;
	fprintf(out,
		"memtrack: window: peak heap %s, %" PRIu64 " blocks allocated (%s), %s still live; "
		"%" PRIu64 " START, %.1f ms\n",
		report__bytes(w->peak_heap, a, sizeof(a)), w->allocs,
		report__bytes(w->allocated_bytes, b, sizeof(b)),
		report__bytes(w->live_bytes, c, sizeof(c)), w->starts,
		(double)w->duration_ns / 1e6);
}

static int window_text(FILE *out, const struct manifest *m)
{
	uint64_t t0 = m->start_mono_ns > 0 ? (uint64_t)m->start_mono_ns
		      : m->nr_markers	   ? m->markers[0].ts_ns
					   : 0;
	char a[32], b[32];

	if (!m->window.present)
		fprintf(out,
			"memtrack: no window: the program never called MEMTRACK_START(); the "
			"whole run is measured (peak heap %s, %" PRIu64 " allocations)\n",
			report__bytes(m->peak_heap, a, sizeof(a)), m->allocs);
	else
		report__window_line(out, m);
	if (!m->nr_markers)
		return 0;
	fprintf(out, "  %10s %-7s %-7s %-6s %10s %10s  %s\n", "t (ms)", "pid", "tid", "kind",
		"heap", "window", "name");
	for (uint32_t i = 0; i < m->nr_markers; i++) {
		const struct manifest_marker *k = &m->markers[i];

		fprintf(out, "  %10.3f %-7d %-7d %-6s %10s %10s  %s\n",
			(double)(int64_t)(k->ts_ns - t0) / 1e6, k->pid, k->tid, k->kind,
			report__bytes(k->heap, a, sizeof(a)),
			report__bytes(k->window_heap, b, sizeof(b)), k->name);
	}
	if (m->markers_dropped)
		fprintf(out, "  ... %" PRIu64 " more markers not kept\n", m->markers_dropped);
	return 0;
}

int report__window(FILE *out, const struct report_view *v, bool json)
{
	const struct manifest *m = v->m;
	json_t *doc;
	int err = 0;

	if (!v->have_manifest)
		fprintf(stderr, "memtrack: no manifest beside the artifact: the window and the "
				"markers are kept there; pass --manifest FILE\n");
	if (!json) {
		window_text(out, m);
		return ferror(out) ? -EIO : 0;
	}
	doc = json_pack("{s:o?, s:o?, s:I, s:{s:I, s:I, s:I}}", "window", report__window_json(m),
			"markers", report__markers_json(m), "markers_dropped",
			(json_int_t)m->markers_dropped, "whole", "peak_heap",
			(json_int_t)m->peak_heap, "allocs", (json_int_t)m->allocs,
			"allocated_bytes", (json_int_t)m->allocated_bytes);
	if (!doc)
		return -ENOMEM;
	if (json_dumpf(doc, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) || fputc('\n', out) == EOF)
		err = -EIO;
	json_decref(doc);
	return err;
}
