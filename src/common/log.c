// SPDX-License-Identifier: MIT
#include <stdio.h>
#include "common/log.h"

int log__level = LOG_NORMAL;
const char *log__prog = "memtrack";

static void log__vprint(const char *kind, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: %s", log__prog, kind);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void log__error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log__vprint("", fmt, ap);
	va_end(ap);
}

void log__warn(const char *fmt, ...)
{
	va_list ap;
	if (log__level < LOG_NORMAL)
		return;
	va_start(ap, fmt);
	log__vprint("warning: ", fmt, ap);
	va_end(ap);
}

void log__info(const char *fmt, ...)
{
	va_list ap;
	if (log__level < LOG_NORMAL)
		return;
	va_start(ap, fmt);
	log__vprint("", fmt, ap);
	va_end(ap);
}

void log__debug(int level, const char *fmt, ...)
{
	va_list ap;
	if (log__level < level)
		return;
	va_start(ap, fmt);
	log__vprint("", fmt, ap);
	va_end(ap);
}
