// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "common/shquote.h"

/* Characters no POSIX shell treats specially anywhere in a word. */
static bool shquote__plain(const char *w)
{
	if (!*w)
		return false; /* an empty word must be quoted to exist */
	for (; *w; w++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			    "@%+=:,./-_",
			    *w))
			return false;
	return true;
}

/* Appends w, quoted if needed, at p; returns the new end. Room: 4 * strlen(w) + 2. */
static char *shquote__word(char *p, const char *w)
{
	if (shquote__plain(w)) {
		size_t n = strlen(w);

		memcpy(p, w, n);
		return p + n;
	}
	/* single quotes keep everything but a single quote, written as '\'' */
	*p++ = '\'';
	for (; *w; w++) {
		if (*w == '\'') {
			memcpy(p, "'\\''", 4);
			p += 4;
		} else {
			*p++ = *w;
		}
	}
	*p++ = '\'';
	return p;
}

char *shquote__argv(char *const argv[])
{
	size_t cap = 1;
	char *s, *p;

	for (int i = 0; argv && argv[i]; i++)
		cap += 4 * strlen(argv[i]) + 3;
	s = p = malloc(cap);
	if (!s)
		return NULL;
	for (int i = 0; argv && argv[i]; i++) {
		if (i)
			*p++ = ' ';
		p = shquote__word(p, argv[i]);
	}
	*p = 0;
	return s;
}
