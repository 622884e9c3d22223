/* SPDX-License-Identifier: MIT */
/* Diagnostics: every message is one line on stderr, prefixed "memtrack: ". */
#ifndef MEMTRACK_LOG_H
#define MEMTRACK_LOG_H

#include <stdarg.h>

enum log_level {
	LOG_QUIET = 0, /* errors only (-q) */
	LOG_NORMAL = 1, /* warnings and information too (the default) */
	LOG_VERBOSE = 2, /* -v: phases and their times; libbpf's warnings */
	LOG_DEBUG = 3, /* -vv: per-site details; libbpf's information */
	LOG_TRACE = 4, /* -vvv: libbpf's debug output */
};

extern int log__level; /* enum log_level; -v adds one */
extern const char *log__prog; /* "memtrack" by default */

void log__error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log__warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log__info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Printed when log__level >= level (enum log_level). */
void log__debug(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
