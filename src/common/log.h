/* SPDX-License-Identifier: MIT */
/* Diagnostics: every message is one line on stderr, prefixed "memtrack: ". */
#ifndef MEMTRACK_LOG_H
#define MEMTRACK_LOG_H

#include <stdarg.h>

/* 0 = quiet (errors only), 1 = normal, 2.. = -v, -vv, -vvv */
extern int log__level;
extern const char *log__prog; /* "memtrack" by default */

void log__error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log__warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log__info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed when log__level >= level (2 for -v). */
void log__debug(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
