/* SPDX-License-Identifier: MIT */
/* The table `run` prints on stdout. */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include <stdio.h>
#include "runner.h"

void bench_table__table(FILE *f, const struct bench_results *res);
/* "812 KiB", "1.50 MiB" */
const char *bench_table__bytes(uint64_t bytes, char *buf, size_t size);
/* A memory metric's value: bytes as above, counts as integers; "-" for NAN. */
const char *bench_table__metric(enum bench_metric m, double v, char *buf, size_t size);

#endif
