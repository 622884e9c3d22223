// SPDX-License-Identifier: MIT
/*
 * A flame graph as one self-contained SVG (no script, no external font or style): the stacks of
 * the profile merged into a tree, root at the bottom, each frame as wide as the bytes allocated
 * under it over the run. Siblings are ordered by name (as flamegraph.pl does), so the same
 * input gives the same picture. Names are cut to fit ("..") and every frame has a <title> with
 * its full name, bytes and share, which viewers show on hover.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "common/kvmap.h"
#include "report/profile.h"
#include "report/report.h"

#define FG_WIDTH 1200.0 /* px, the whole graph */
#define FG_PAD	 10.0
#define FG_ROW	 16.0 /* px per frame */
#define FG_TOP	 40.0 /* room for the title */
#define FG_CHAR	 6.6  /* px per character at 11px monospace */
#define FG_MIN	 0.1  /* px: narrower frames (and what is above them) are not drawn */

struct fnode {
	const char *name;
	uint64_t value;
	uint32_t parent, depth;
	uint32_t *kids, nr_kids, kids_cap;
};

struct ftree {
	struct fnode *n;
	uint32_t nr, cap, max_depth;
	struct kvmap ids; /* (parent, name hash) -> node + 1 */
};

static int64_t node_new(struct ftree *t, uint32_t parent, const char *name)
{
	struct fnode *p;

	if (t->nr == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;
		struct fnode *n = realloc(t->n, (size_t)cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->n = n;
		t->cap = cap;
	}
	t->n[t->nr] = (struct fnode){.name = name, .parent = parent};
	if (t->nr) {
		p = &t->n[parent];
		t->n[t->nr].depth = p->depth + 1;
		if (p->nr_kids == p->kids_cap) {
			uint32_t cap = p->kids_cap ? p->kids_cap * 2 : 4;
			uint32_t *k = realloc(p->kids, cap * sizeof(*k));

			if (!k)
				return -ENOMEM;
			p->kids = k;
			p->kids_cap = cap;
		}
		p->kids[p->nr_kids++] = t->nr;
	}
	return t->nr++;
}

/* The child of parent named name, made when missing. */
static int64_t child(struct ftree *t, uint32_t parent, const char *name)
{
	uint64_t h = kvmap__hash_str(name), *id;
	int64_t n;

	id = kvmap__find(&t->ids, parent, h);
	if (id && !strcmp(t->n[*id - 1].name, name))
		return (int64_t)*id - 1;
	/* a hash collision: the first name keeps the map, the other is found by a scan */
	for (uint32_t i = 0; id && i < t->n[parent].nr_kids; i++)
		if (!strcmp(t->n[t->n[parent].kids[i]].name, name))
			return t->n[parent].kids[i];
	n = node_new(t, parent, name);
	if (n < 0)
		return n;
	if (!id) {
		id = kvmap__get(&t->ids, parent, h, NULL);
		if (!id)
			return -ENOMEM;
		*id = (uint64_t)n + 1;
	}
	return n;
}

static const struct ftree *sort_tree;

static int by_name(const void *a, const void *b)
{
	return strcmp(sort_tree->n[*(const uint32_t *)a].name,
		      sort_tree->n[*(const uint32_t *)b].name);
}

static void put_xml(FILE *out, const char *s, size_t max)
{
	for (size_t i = 0; s[i] && i < max; i++) {
		switch (s[i]) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		default:
			/* control bytes are not allowed in XML 1.0 */
			fputc((unsigned char)s[i] < 0x20 ? ' ' : s[i], out);
		}
	}
}

/* A warm colour from the name: the same function has the same colour everywhere. */
static void colour(const char *name, unsigned *r, unsigned *g, unsigned *b)
{
	uint64_t h = kvmap__hash_str(name);

	*r = 200 + (unsigned)(h % 55);
	*g = 80 + (unsigned)((h >> 16) % 150);
	*b = (unsigned)((h >> 32) % 60);
}

static void draw(FILE *out, const struct ftree *t, uint32_t i, double x, double scale,
		 double height, uint64_t total)
{
	const struct fnode *n = &t->n[i];
	double w = (double)n->value * scale, y = height - FG_PAD - (n->depth + 1) * FG_ROW;
	char bytes[32];
	unsigned r, g, b;
	size_t fit, len;

	if (w < FG_MIN)
		return;
	colour(n->name, &r, &g, &b);
	fputs("<g><title>", out);
	put_xml(out, n->name, SIZE_MAX);
	fprintf(out, " (%s, %" PRIu64 " bytes, %.2f%%)</title>",
		report__bytes(n->value, bytes, sizeof(bytes)), n->value,
		total ? 100.0 * (double)n->value / (double)total : 0.0);
	fprintf(out,
		"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
		"fill=\"rgb(%u,%u,%u)\" rx=\"2\"/>",
		x, y, w, FG_ROW - 1, r, g, b);
	fit = w > 6 ? (size_t)((w - 6) / FG_CHAR) : 0;
	len = strlen(n->name);
	if (fit >= 3) {
		fprintf(out, "<text x=\"%.1f\" y=\"%.1f\">", x + 3, y + FG_ROW - 4.5);
		put_xml(out, n->name, len <= fit ? len : fit - 2);
		fputs(len <= fit ? "</text>" : "..</text>", out);
	}
	fputs("</g>\n", out);
	for (uint32_t k = 0; k < n->nr_kids; k++) {
		draw(out, t, n->kids[k], x, scale, height, total);
		x += (double)t->n[n->kids[k]].value * scale;
	}
}

static void ftree_free(struct ftree *t)
{
	for (uint32_t i = 0; i < t->nr; i++)
		free(t->n[i].kids);
	free(t->n);
	kvmap__free(&t->ids);
}

int report__flamegraph(FILE *out, const struct profile *p, const char *title)
{
	struct ftree t = {0};
	const char **frames = NULL;
	uint32_t cap = 0;
	double height;
	int err = -ENOMEM;

	if (node_new(&t, 0, "all") < 0)
		goto cleanup;
	for (uint32_t i = 0; i < p->nr_samples; i++) {
		const struct prof_sample *s = &p->samples[i];
		uint32_t at = 0;
		int64_t d;

		if (!s->alloc_bytes)
			continue;
		d = profile__frames(s, &frames, &cap);
		if (d < 0)
			goto cleanup;
		t.n[0].value += s->alloc_bytes;
		for (int64_t j = 0; j < d; j++) {
			int64_t c = child(&t, at, frames[j]);

			if (c < 0)
				goto cleanup;
			at = (uint32_t)c;
			t.n[at].value += s->alloc_bytes;
			if (t.n[at].depth > t.max_depth)
				t.max_depth = t.n[at].depth;
		}
	}
	sort_tree = &t;
	for (uint32_t i = 0; i < t.nr; i++)
		if (t.n[i].nr_kids > 1)
			qsort(t.n[i].kids, t.n[i].nr_kids, sizeof(uint32_t), by_name);
	height = FG_TOP + (t.max_depth + 1) * FG_ROW + 2 * FG_PAD;
	fprintf(out,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<style>text{font-family:monospace;font-size:11px;fill:#000}"
		"rect:hover{stroke:#000;stroke-width:0.5}</style>\n"
		"<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f8f8f0\"/>\n"
		"<text x=\"%.0f\" y=\"24\" text-anchor=\"middle\" style=\"font-size:15px\">",
		FG_WIDTH, height, FG_WIDTH, height, FG_WIDTH / 2);
	put_xml(out, title ? title : "Allocated bytes by call stack", SIZE_MAX);
	fputs("</text>\n", out);
	if (t.n[0].value)
		draw(out, &t, 0, FG_PAD, (FG_WIDTH - 2 * FG_PAD) / (double)t.n[0].value, height,
		     t.n[0].value);
	fputs("</svg>\n", out);
	err = ferror(out) ? -EIO : 0;
cleanup:
	free(frames);
	ftree_free(&t);
	return err;
}
