/* SPDX-License-Identifier: MIT */
/* Human and machine views of a run: the end-of-run summary, JSON, SVG and Perfetto exports. */
#ifndef MEMTRACK_REPORT_H
#define MEMTRACK_REPORT_H

#include <stdbool.h>
#include <stdio.h>
#include <jansson.h>
#include "artifact/manifest.h"
#include "acct/acct.h"

struct profile;

#define REPORT_POINTS 1000 /* JSON and SVG timeline: at most this many points */
#define REPORT_TRACE_POINTS 20000 /* Perfetto counters: finer, the UI zooms */

/* "12.3 MiB" (1 decimal, binary units; plain "N B" under 1 KiB) into buf; returns buf. */
const char *report__bytes(uint64_t v, char *buf, size_t cap);

/* Tree heap and RSS over time, downsampled into at most max_points buckets of equal width: a
 * bucket holds the maximum reached in it (peaks survive downsampling); a bucket without events
 * holds the level the previous one ended with. Widths double as the run gets longer. */
struct timeline;
struct timeline_point {
	uint64_t t; /* ns since the first sample: bucket start */
	uint64_t heap, rss; /* bytes, maxima over the bucket */
};
int timeline__new(struct timeline **t, uint32_t max_points);
void timeline__free(struct timeline *t); /* NULL-safe */
/* ts: ns, CLOCK_MONOTONIC; heap, rss: tree values right after the event at ts. */
void timeline__add(struct timeline *t, uint64_t ts, uint64_t heap, uint64_t rss);
/* The points (valid until the next add), their count, first timestamp and bucket width (ns). */
const struct timeline_point *timeline__points(struct timeline *t, uint32_t *n, uint64_t *t0,
					       uint64_t *bucket_ns);

/* Everything a view may show. Only m is required. */
struct report_view {
	const struct manifest *m; /* results (heap_acct__fill); identity and drops if have_manifest */
	bool have_manifest; /* m also carries what the tracker recorded: command, exit, drops */
	const struct heap_stats *stats;
	const struct heap_acct *acct; /* per-process lost-at-exec figures; procs[] in its order */
	const char *artifact; /* path, for titles */
	const char *decode_error; /* the artifact stopped early: figures cover what was read */
	uint64_t events_read; /* records decoded from the artifact */
	const struct profile *profile; /* allocation sites (report/profile.h): JSON "stacks" */
	uint32_t top; /* sites per ranking */
};

/* JSON helpers of the views: an unsigned value (saturated to the signed 64-bit jansson keeps),
 * and json_object_set_new remembering a failure (NULL value or no memory) in *bad. */
json_t *report__json_u64(uint64_t v);
void report__json_set(json_t *o, const char *key, json_t *v, int *bad);

/* The short summary memtrack track prints on stderr: peaks, counts, leaks, events, drops, and
 * one line per process (top 10 by peak RSS) when there are several. Returns 0 or -errno. */
int report__summary(FILE *out, const struct manifest *m);
/* Same, with what `memtrack report` knows on top: no manifest, a truncated artifact. */
int report__summary_view(FILE *out, const struct report_view *v);
/* The JSON document of `memtrack report --json`; NULL on allocation failure. tl may be NULL. */
json_t *report__json(const struct report_view *v, struct timeline *tl);
/* The same document written to out (with a final newline), its processes streamed: memory and
 * time linear in the number of processes. 0, -ENOMEM (logged by the caller) or -EIO. */
int report__json_write(FILE *out, const struct report_view *v, struct timeline *tl);
/* Hand-written SVG plot of tree heap and RSS over time. Returns 0 or -errno. */
int report__svg(FILE *out, const struct report_view *v, struct timeline *tl);
/* Chrome trace-event JSON ("ph":"C" counters), loadable in ui.perfetto.dev. 0 or -errno. */
int report__perfetto(FILE *out, const struct report_view *v, struct timeline *tl);

/* The measured window (src/report/window.c): results.window's object (null without a window),
 * the markers array (NULL on allocation failure), the summary line (nothing without a window),
 * and `memtrack report --window`'s view, text or JSON. 0 or -errno. */
json_t *report__window_json(const struct manifest *m);
json_t *report__markers_json(const struct manifest *m);
void report__window_line(FILE *out, const struct manifest *m);
int report__window(FILE *out, const struct report_view *v, bool json);

#endif
