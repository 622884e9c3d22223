/* SPDX-License-Identifier: MIT */
/*
 * Results as JSON: hyperfine's --export-json shape ({"results": [{command, mean, stddev, median,
 * user, system, min, max, times, exit_codes}]}, seconds) so its scripts read our files, plus our
 * own keys (name, id, mode, rounds, q1, q3, iqr, outliers, cv, max_rss, conclude when the
 * benchmark has one, and "environment"). In memory mode a result also has "memory": one object
 * per bench_metrics key, {"values": [one per round], "median", "min", "max", "cv"}, and (for
 * format 1 readers) the medians of peak_heap, peak_rss and allocs at the top level.
 */
#ifndef BENCH_RESULTS_JSON_H
#define BENCH_RESULTS_JSON_H

#include <jansson.h>
#include "runner.h"

#define RESULTS_JSON_FORMAT 1 /* bump on incompatible changes; adding keys is compatible */

/* The document for res (failed benchmarks go to "failures", not "results"); NULL on ENOMEM. */
json_t *bench_json__build(const struct bench_results *res);
/* Writes it to path (path.tmp then rename, so a reader never sees half a file). */
int bench_json__write(const struct bench_results *res, const char *path);
/*
 * Reads ours or hyperfine's file for compare: name (else command), id, conclude, mode, times (then
 * stats from them) or else mean/median, and the memory figures. Returns -EPROTO (logged) for a file
 * without a results list.
 */
int bench_json__read(const char *path, struct bench_results *res);

#endif
