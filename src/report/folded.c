// SPDX-License-Identifier: MIT
/* Folded stacks (flamegraph.pl, inferno, speedscope): one line per stack, frames root first
 * joined by ';', a space, then the bytes allocated by that stack over the run. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include "report/profile.h"

/* A frame name as one field: ';' separates frames and a newline ends the line. */
static void put_frame(FILE *out, const char *f)
{
	for (; *f; f++)
		fputc(*f == ';' ? ':' : *f == '\n' || *f == '\r' ? ' ' : *f, out);
}

int report__folded(FILE *out, const struct profile *p)
{
	const char **frames = NULL;
	uint32_t cap = 0;

	for (uint32_t i = 0; i < p->nr_samples; i++) {
		const struct prof_sample *s = &p->samples[i];
		uint32_t d = profile__depth(s);

		if (!s->alloc_bytes)
			continue;
		if (d > cap) {
			const char **f = realloc(frames, d * sizeof(*f));

			if (!f) {
				free(frames);
				return -ENOMEM;
			}
			frames = f;
			cap = d;
		}
		profile__frames(s, frames);
		for (uint32_t j = 0; j < d; j++) {
			if (j)
				fputc(';', out);
			put_frame(out, frames[j]);
		}
		fprintf(out, " %" PRIu64 "\n", s->alloc_bytes);
	}
	free(frames);
	return ferror(out) ? -EIO : 0;
}
