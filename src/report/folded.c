// SPDX-License-Identifier: MIT
/* Folded stacks (flamegraph.pl, inferno, speedscope): one line per distinct frame list, frames
 * root first joined by ';', a space, then the bytes allocated under it over the run. Stacks
 * that differ only in addresses within the same functions name the same frames: their bytes
 * are summed into one line. Lines are sorted (byte order), so the same input gives the same
 * file. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "report/profile.h"

struct fline {
	char *text;
	uint64_t bytes;
};

/* A frame name as one field: ';' separates frames and a newline ends the line. */
static void put_frame(FILE *out, const char *f)
{
	for (; *f; f++)
		fputc(*f == ';' ? ':' : *f == '\n' || *f == '\r' ? ' ' : *f, out);
}

/* The frames of s joined, in a malloc'd string; NULL when out of memory. */
static char *join(const struct prof_sample *s, const char ***frames, uint32_t *cap)
{
	int64_t d = profile__frames(s, frames, cap);
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	if (d < 0 || !(f = open_memstream(&text, &len)))
		return NULL;
	for (int64_t j = 0; j < d; j++) {
		if (j)
			fputc(';', f);
		put_frame(f, (*frames)[j]);
	}
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	return text;
}

static int by_text(const void *a, const void *b)
{
	return strcmp(((const struct fline *)a)->text, ((const struct fline *)b)->text);
}

int report__folded(FILE *out, const struct profile *p)
{
	struct fline *lines = calloc(p->nr_samples ? p->nr_samples : 1, sizeof(*lines));
	const char **frames = NULL;
	uint32_t cap = 0, n = 0;
	int err = -ENOMEM;

	if (!lines)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->nr_samples; i++) {
		const struct prof_sample *s = &p->samples[i];

		if (!s->alloc_bytes)
			continue;
		lines[n].text = join(s, &frames, &cap);
		if (!lines[n].text)
			goto cleanup;
		lines[n++].bytes = s->alloc_bytes;
	}
	qsort(lines, n, sizeof(*lines), by_text);
	for (uint32_t i = 0; i < n;) {
		uint64_t bytes = 0;
		uint32_t j = i;

		for (; j < n && !strcmp(lines[j].text, lines[i].text); j++)
			bytes += lines[j].bytes;
		fprintf(out, "%s %" PRIu64 "\n", lines[i].text, bytes);
		i = j;
	}
	err = ferror(out) ? -EIO : 0;
cleanup:
	for (uint32_t i = 0; i < n; i++)
		free(lines[i].text);
	free(lines);
	free(frames);
	return err;
}
