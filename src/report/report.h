/* SPDX-License-Identifier: MIT */
/* Human and machine views of a run: the end-of-run summary, JSON and SVG exports. */
#ifndef MEMTRACK_REPORT_H
#define MEMTRACK_REPORT_H

#include <stdio.h>
#include "artifact/manifest.h"

/* "12.3 MiB" into buf; returns buf. */
const char *report__bytes(uint64_t v, char *buf, size_t cap);
/* The short summary memtrack track prints on stderr: peaks, counts, leaks, events, drops. */
int report__summary(FILE *out, const struct manifest *m);

#endif
