// SPDX-License-Identifier: MIT
/* The `memtrack report --json` document. Sizes in bytes, times in ns, as integers. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "artifact/artifact.h"
#include "common/records.h"
#include "report/profile.h"
#include "report/report.h"

/* jansson integers are signed 64-bit: saturate rather than wrap */
static json_t *u64(uint64_t v)
{
	return json_integer(v > INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* json_object_set_new, but remembering a failure (NULL value or no memory) */
static void set(json_t *o, const char *key, json_t *v, int *bad)
{
	if (!v || json_object_set_new(o, key, v))
		*bad = 1;
}

json_t *report__json_u64(uint64_t v)
{
	return u64(v);
}

void report__json_set(json_t *o, const char *key, json_t *v, int *bad)
{
	set(o, key, v, bad);
}

/* [{pid, comm}] of the processes still running when memtrack stopped waiting */
static json_t *json__running(const struct manifest *m, int *bad)
{
	json_t *a = json_array();

	for (uint32_t i = 0; a && i < m->nr_running; i++) {
		json_t *p = json_object();

		if (!p || json_array_append_new(a, p)) {
			*bad = 1;
			break;
		}
		set(p, "pid", json_integer(m->running[i].pid), bad);
		set(p, "comm", json_string(m->running[i].comm), bad);
	}
	return a;
}

static json_t *json__manifest(const struct manifest *m, int *bad)
{
	json_t *o = json_object(), *drops = json_object(), *argv = json_array();

	if (!o || !drops || !argv) {
		*bad = 1;
		json_decref(o);
		json_decref(drops);
		json_decref(argv);
		return NULL;
	}
	for (char **a = m->argv; a && *a; a++)
		if (json_array_append_new(argv, json_string(*a)))
			*bad = 1;
	for (int i = 0; i < DROP_NR; i++)
		set(drops, records__drops[i].key, u64(m->drops[i]), bad);
	set(o, "command", m->command ? json_string(m->command) : json_null(), bad);
	set(o, "argv", argv, bad);
	set(o, "root_pid", json_integer(m->root_pid), bad);
	set(o, "exit_status", json_integer(m->exit_status), bad);
	set(o, "term_signal", json_integer(m->term_signal), bad);
	set(o, "complete", json_boolean(m->complete), bad);
	set(o, "still_running", json__running(m, bad), bad);
	set(o, "drops", drops, bad);
	set(o, "consumer_drops", u64(m->consumer_drops), bad);
	set(o, "memtrack_version",
	    m->memtrack_version ? json_string(m->memtrack_version) : json_null(), bad);
	set(o, "kernel_release", m->kernel_release ? json_string(m->kernel_release) : json_null(),
	    bad);
	return o;
}

/* The keys of one process object, in order; json__proc_set fills them. */
static void json__proc_set(json_t *o, const struct report_view *v, uint32_t i, int *bad)
{
	const struct manifest_proc *p = &v->m->procs[i];
	uint64_t lost_bytes = 0, lost_count = 0;

	if (v->acct)
		heap_acct__proc_lost(v->acct, i, &lost_bytes, &lost_count);
	set(o, "pid", json_integer(p->pid), bad);
	set(o, "ppid", json_integer(p->ppid), bad);
	set(o, "comm", json_string(p->comm[0] ? p->comm : ""), bad);
	set(o, "peak_heap", u64(p->peak_heap), bad);
	set(o, "peak_rss", u64(p->peak_rss), bad);
	set(o, "allocs", u64(p->allocs), bad);
	set(o, "frees", u64(p->frees), bad);
	set(o, "leaked_bytes", u64(p->leaked_bytes), bad);
	set(o, "leaked_count", u64(p->leaked_count), bad);
	set(o, "lost_at_exec_bytes", u64(lost_bytes), bad);
	set(o, "lost_at_exec_count", u64(lost_count), bad);
	set(o, "execs", u64(p->execs), bad);
}

static json_t *json__procs(const struct report_view *v, int *bad)
{
	json_t *a = json_array();

	if (!a) {
		*bad = 1;
		return NULL;
	}
	for (uint32_t i = 0; i < v->m->nr_procs; i++) {
		json_t *o = json_object();

		if (!o || json_array_append_new(a, o)) {
			*bad = 1;
			break;
		}
		json__proc_set(o, v, i, bad);
	}
	return a;
}

static json_t *json__timeline(struct timeline *tl, int *bad)
{
	const struct timeline_point *p = NULL;
	uint64_t t0 = 0, width = 0;
	uint32_t n = 0;
	json_t *o = json_object(), *pts = json_array();

	if (!o || !pts) {
		*bad = 1;
		json_decref(o);
		json_decref(pts);
		return NULL;
	}
	if (tl)
		p = timeline__points(tl, &n, &t0, &width);
	for (uint32_t i = 0; i < n; i++) {
		json_t *pt = json_object();

		if (!pt || json_array_append_new(pts, pt)) {
			*bad = 1;
			break;
		}
		set(pt, "t", u64(p[i].t), bad);
		set(pt, "heap", u64(p[i].heap), bad);
		set(pt, "rss", u64(p[i].rss), bad);
	}
	set(o, "start_ns", u64(t0), bad);
	set(o, "bucket_ns", u64(width), bad);
	set(o, "note", json_string("t: ns since start_ns (CLOCK_MONOTONIC); heap, rss: bytes, "
				   "tree-wide maxima over [t, t + bucket_ns)"), bad);
	set(o, "points", pts, bad);
	return o;
}

static json_t *report__json_doc(const struct report_view *v, struct timeline *tl, bool procs)
{
	const struct manifest *m = v->m;
	json_t *root = json_object(), *res = json_object(), *counts = json_object();
	int bad = !root || !res || !counts;

	if (bad)
		goto cleanup;
	set(root, "artifact", v->artifact ? json_string(v->artifact) : json_null(), &bad);
	set(root, "decoded_completely", json_boolean(!v->decode_error), &bad);
	set(root, "decode_error", v->decode_error ? json_string(v->decode_error) : json_null(),
	    &bad);
	set(root, "events_read", u64(v->events_read), &bad);
	set(root, "manifest", v->have_manifest ? json__manifest(m, &bad) : json_null(), &bad);

	set(res, "peak_heap", u64(m->peak_heap), &bad);
	set(res, "peak_rss", u64(m->peak_rss), &bad);
	set(res, "allocs", u64(m->allocs), &bad);
	set(res, "allocated_bytes", u64(m->allocated_bytes), &bad);
	set(res, "frees", u64(m->frees), &bad);
	set(res, "leaked_bytes", u64(m->leaked_bytes), &bad);
	set(res, "leaked_count", u64(m->leaked_count), &bad);
	if (v->stats) {
		set(res, "unmatched_frees", u64(v->stats->unmatched_frees), &bad);
		set(res, "replaced_allocs", u64(v->stats->replaced_allocs), &bad);
		set(res, "lost_at_exec_bytes", u64(v->stats->lost_at_exec_bytes), &bad);
		set(res, "lost_at_exec_count", u64(v->stats->lost_at_exec_count), &bad);
		set(res, "duration_ns", u64(v->stats->last_ts - v->stats->first_ts), &bad);
		set(res, "saturated", json_boolean(v->stats->saturated), &bad);
	}
	set(res, "window", report__window_json(m), &bad);
	set(root, "results", res, &bad);
	res = NULL;
	set(root, "markers", report__markers_json(m), &bad);

	for (uint32_t ty = 1; ty < MT_EV_TYPE_MAX; ty++) {
		const char *name = artifact__type_name(ty);

		if (name)
			set(counts, name, u64(m->counts[ty]), &bad);
	}
	set(root, "counts", counts, &bad);
	counts = NULL;
	set(root, "events_total", u64(m->events_total), &bad);
	set(root, "processes", procs ? json__procs(v, &bad) : json_null(), &bad);
	set(root, "timeline", json__timeline(tl, &bad), &bad);
	if (v->profile)
		set(root, "stacks", report__stacks_json(v->profile, v->top), &bad);
cleanup:
	json_decref(res);
	json_decref(counts);
	if (bad) {
		json_decref(root);
		return NULL;
	}
	return root;
}

json_t *report__json(const struct report_view *v, struct timeline *tl)
{
	return report__json_doc(v, tl, true);
}

#define JSON_FLAGS (JSON_INDENT(2) | JSON_PRESERVE_ORDER)
/* Where the document's "processes" value goes: a top-level key is the only place a newline
 * and two spaces precede a quote (strings hold no raw newline). */
#define PROCS_HOLE "\n  \"processes\": null"
#define PROC_INDENT "    " /* an element of a top-level array */

/* Writes text with PROC_INDENT after each newline: a dumped object, nested two levels. */
static void put_indented(FILE *out, const char *text, size_t len)
{
	for (const char *nl; (nl = memchr(text, '\n', len)); len -= (size_t)(nl + 1 - text),
							       text = nl + 1) {
		fwrite(text, 1, (size_t)(nl + 1 - text), out);
		fputs(PROC_INDENT, out);
	}
	fwrite(text, 1, len, out);
}

/*
 * The document with its processes streamed: the rest is built as a tree (small: the timeline
 * has at most REPORT_POINTS points), the processes are one reused object, refilled and dumped
 * in turn. Memory stays flat in the number of processes and the bytes are the ones
 * json_dumpf(report__json()) gives.
 */
int report__json_write(FILE *out, const struct report_view *v, struct timeline *tl)
{
	json_t *doc = report__json_doc(v, tl, false), *o = json_object();
	char *text = NULL, *hole, *buf = NULL;
	size_t cap = 0;
	int bad = !doc || !o, err = -ENOMEM;

	if (!bad)
		text = json_dumps(doc, JSON_FLAGS);
	hole = text ? strstr(text, PROCS_HOLE) : NULL;
	if (!hole)
		goto cleanup;
	fwrite(text, 1, (size_t)(hole - text), out);
	fputs("\n  \"processes\": ", out);
	if (!v->m->nr_procs)
		fputs("[]", out);
	for (uint32_t i = 0; i < v->m->nr_procs; i++) {
		size_t n;

		json__proc_set(o, v, i, &bad);
		if (bad)
			goto cleanup;
		n = json_dumpb(o, buf, cap, JSON_FLAGS);
		if (n > cap) {
			free(buf);
			cap = n * 2;
			buf = malloc(cap);
			if (!buf)
				goto cleanup;
			n = json_dumpb(o, buf, cap, JSON_FLAGS);
		}
		fputs(i ? ",\n" PROC_INDENT : "[\n" PROC_INDENT, out);
		put_indented(out, buf, n);
	}
	if (v->m->nr_procs)
		fputs("\n  ]", out);
	fputs(hole + strlen(PROCS_HOLE), out);
	fputc('\n', out);
	err = ferror(out) ? -EIO : 0;
cleanup:
	free(buf);
	free(text);
	json_decref(o);
	json_decref(doc);
	return err;
}
