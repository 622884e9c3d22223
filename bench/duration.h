/* SPDX-License-Identifier: MIT */
/* Durations as written in benchmark configs and on the command line: "500ms", "5s", "1m30s". */
#ifndef BENCH_DURATION_H
#define BENCH_DURATION_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parses one or more <number><unit> pairs (units ns, us, ms, s, m, h; the number may have a
 * fraction) into nanoseconds. A lone "0" is accepted without a unit. Returns 0, -EINVAL for a
 * malformed string or -ERANGE past INT64_MAX ns (about 292 years).
 */
int bench_duration__parse(const char *s, int64_t *ns);

/* Formats seconds with three significant digits and the best unit ("812 us", "1.23 s"). */
const char *bench_duration__format(double seconds, char *buf, size_t size);

#endif
