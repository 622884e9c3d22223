// SPDX-License-Identifier: MIT
/* `memtrack report --top N`: allocation sites ranked five ways, as text and as JSON. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "report/profile.h"
#include "report/report.h"

#define TEXT_FRAMES 6 /* frames shown per site in the text summary (JSON has them all) */

enum rank { RANK_PEAK, RANK_BYTES, RANK_COUNT, RANK_LEAK, RANK_TEMP, RANK_NR };

static const struct {
	const char *key;   /* JSON */
	const char *title; /* text */
} ranks[RANK_NR] = {
    [RANK_PEAK] = {"peak_live", "by bytes live at the tree's heap peak"},
    [RANK_BYTES] = {"allocated_bytes", "by bytes allocated over the run"},
    [RANK_COUNT] = {"allocations", "by allocations over the run"},
    [RANK_LEAK] = {"leaked", "by bytes leaked (live at exit)"},
    [RANK_TEMP] = {"temporary", "by temporary allocations (freed as the thread's next heap "
				"call)"},
};

static uint64_t rank_key(const struct prof_sample *s, enum rank r)
{
	switch (r) {
	case RANK_PEAK:
		return s->inuse_bytes;
	case RANK_BYTES:
		return s->alloc_bytes;
	case RANK_COUNT:
		return s->alloc_count;
	case RANK_LEAK:
		return s->leak_bytes ? s->leak_bytes : s->leak_count;
	default:
		return s->temp_count;
	}
}

static const struct profile *sort_p;
static enum rank sort_r;

static int by_rank(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint64_t kx = rank_key(&sort_p->samples[x], sort_r),
		 ky = rank_key(&sort_p->samples[y], sort_r);

	if (kx != ky)
		return kx > ky ? -1 : 1;
	return x < y ? -1 : x > y; /* stable: the order sites appeared */
}

/* The indices of the top n samples for r with a nonzero key; their number. */
static uint32_t top_of(const struct profile *p, enum rank r, uint32_t n, uint32_t *idx)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < p->nr_samples; i++)
		if (rank_key(&p->samples[i], r))
			idx[k++] = i;
	sort_p = p;
	sort_r = r;
	qsort(idx, k, sizeof(*idx), by_rank);
	return k < n ? k : n;
}

static void text_frames(FILE *out, const struct prof_sample *s)
{
	uint32_t shown = 0, total = 0;

	for (uint32_t i = 0; i < s->nr_locs; i++)
		total += s->locs[i]->nr;
	total -= s->leaf_skip;
	if (!s->nr_locs)
		fprintf(out, "        %s\n", s->stack ? "[no frames]" : "[no stack]");
	for (uint32_t i = 0; i < s->nr_locs && shown < TEXT_FRAMES; i++) {
		const struct sym_loc *l = s->locs[i];

		for (uint32_t j = i ? 0 : s->leaf_skip; j < l->nr && shown < TEXT_FRAMES;
		     j++, shown++) {
			const struct sym_line *ln = &l->lines[j];

			fprintf(out, "        %s", ln->func);
			if (ln->file)
				fprintf(out, " at %s:%u", ln->file, ln->line);
			fputs(j + 1 < l->nr ? " (inlined)\n" : "\n", out);
		}
	}
	if (total > shown)
		fprintf(out, "        ... %u more frames%s\n", total - shown,
			s->truncated ? " (stack truncated)" : "");
	for (uint32_t i = 0; i < s->nr_root; i++)
		fprintf(out, "        in %s\n", s->root[i]);
}

/* Which modules had no symbols: their frames are offsets, and the user can install them. */
static void text_modules(FILE *out, const struct profile *p)
{
	uint32_t none = 0;

	for (uint32_t i = 0; p->module_source && i < p->nr_modules; i++) {
		if (!p->module_source[i] || strcmp(p->module_source[i], "none"))
			continue;
		if (!none++)
			fputs(
			    "\nNo symbols (frames show as module+0xADDR; is the file there, or its "
			    "debug file under /usr/lib/debug/.build-id?):\n",
			    out);
		fprintf(out, "    %s\n", p->modules[i].path ? p->modules[i].path : "?");
	}
}

int report__stacks_summary(FILE *out, const struct profile *p, uint32_t top)
{
	uint32_t *idx = malloc((p->nr_samples ? p->nr_samples : 1) * sizeof(*idx));
	char b1[32], b2[32];

	if (!idx)
		return -ENOMEM;
	text_modules(out, p);
	for (enum rank r = 0; r < RANK_NR; r++) {
		uint32_t n = top_of(p, r, top, idx);

		fprintf(out, "\nTop %u allocation sites %s:\n", top, ranks[r].title);
		if (!n)
			fputs("    none\n", out);
		for (uint32_t k = 0; k < n; k++) {
			const struct prof_sample *s = &p->samples[idx[k]];

			fprintf(out, "  %2u. ", k + 1);
			switch (r) {
			case RANK_PEAK:
				fprintf(out, "%s live in %" PRIu64 " blocks (%.1f%% of the peak)",
					report__bytes(s->inuse_bytes, b1, sizeof(b1)),
					s->inuse_count,
					p->peak_heap
					    ? 100.0 * (double)s->inuse_bytes / (double)p->peak_heap
					    : 0.0);
				break;
			case RANK_BYTES:
			case RANK_COUNT:
				fprintf(out, "%s in %" PRIu64 " allocations",
					report__bytes(s->alloc_bytes, b1, sizeof(b1)),
					s->alloc_count);
				break;
			case RANK_LEAK:
				fprintf(out, "%s leaked in %" PRIu64 " blocks",
					report__bytes(s->leak_bytes, b1, sizeof(b1)),
					s->leak_count);
				break;
			default:
				fprintf(out,
					"%" PRIu64 " temporary of %" PRIu64 " allocations (%s)",
					s->temp_count, s->alloc_count,
					report__bytes(s->temp_bytes, b2, sizeof(b2)));
			}
			fputc('\n', out);
			text_frames(out, s);
		}
	}
	free(idx);
	return ferror(out) ? -EIO : 0;
}

static json_t *json_site(const struct profile *p, const struct prof_sample *s, int *bad)
{
	json_t *o = json_object(), *frames = json_array(), *root = json_array();

	if (!o || !frames || !root) {
		*bad = 1;
		json_decref(frames);
		json_decref(root);
		return o;
	}
	report__json_set(o, "stack", json_integer(s->stack), bad);
	for (uint32_t i = 0; i < s->nr_root; i++)
		if (json_array_append_new(root, json_string(s->root[i])))
			*bad = 1;
	report__json_set(o, "root", root, bad);
	report__json_set(o, "peak_live_bytes", report__json_u64(s->inuse_bytes), bad);
	report__json_set(o, "peak_live_count", report__json_u64(s->inuse_count), bad);
	report__json_set(o, "allocated_bytes", report__json_u64(s->alloc_bytes), bad);
	report__json_set(o, "allocations", report__json_u64(s->alloc_count), bad);
	report__json_set(o, "leaked_bytes", report__json_u64(s->leak_bytes), bad);
	report__json_set(o, "leaked_count", report__json_u64(s->leak_count), bad);
	report__json_set(o, "temporary_bytes", report__json_u64(s->temp_bytes), bad);
	report__json_set(o, "temporary_count", report__json_u64(s->temp_count), bad);
	report__json_set(o, "truncated", json_boolean(s->truncated), bad);
	for (uint32_t i = 0; i < s->nr_locs; i++) {
		const struct sym_loc *l = s->locs[i];
		const struct stack_module *m =
		    l->module && l->module <= p->nr_modules ? &p->modules[l->module - 1] : NULL;

		for (uint32_t j = i ? 0 : s->leaf_skip; j < l->nr; j++) {
			json_t *f = json_object();

			if (!f || json_array_append_new(frames, f)) {
				*bad = 1;
				break;
			}
			report__json_set(f, "function", json_string(l->lines[j].func), bad);
			report__json_set(
			    f, "file",
			    l->lines[j].file ? json_string(l->lines[j].file) : json_null(), bad);
			report__json_set(f, "line", json_integer(l->lines[j].line), bad);
			report__json_set(f, "inlined", json_boolean(j + 1 < l->nr), bad);
			report__json_set(f, "module",
					 m && m->path ? json_string(m->path) : json_null(), bad);
			report__json_set(f, "vaddr", report__json_u64(l->vaddr), bad);
		}
	}
	report__json_set(o, "frames", frames, bad);
	return o;
}

/* [{path, build_id, symbols}]: symbols says where they came from ("file", "build-id debug
 * file", "none"; "untried" when no frame needed it) */
static json_t *json_modules(const struct profile *p, int *bad)
{
	json_t *a = json_array();

	for (uint32_t i = 0; a && i < p->nr_modules; i++) {
		const struct stack_module *m = &p->modules[i];
		json_t *o = json_object();
		char hex[2 * sizeof(m->build_id) + 1] = "";

		if (!o || json_array_append_new(a, o)) {
			*bad = 1;
			break;
		}
		for (uint8_t j = 0; j < m->build_id_len && j < sizeof(m->build_id); j++)
			sprintf(hex + 2 * j, "%02x", m->build_id[j]);
		report__json_set(o, "path", m->path ? json_string(m->path) : json_null(), bad);
		report__json_set(o, "build_id", json_string(hex), bad);
		report__json_set(o, "symbols",
				 p->module_source && p->module_source[i]
				     ? json_string(p->module_source[i])
				     : json_null(),
				 bad);
	}
	return a;
}

json_t *report__stacks_json(const struct profile *p, uint32_t top)
{
	uint32_t *idx = malloc((p->nr_samples ? p->nr_samples : 1) * sizeof(*idx));
	json_t *o = json_object(), *t = json_object();
	int bad = !idx || !o || !t;

	for (enum rank r = 0; !bad && r < RANK_NR; r++) {
		uint32_t n = top_of(p, r, top, idx);
		json_t *a = json_array();

		for (uint32_t k = 0; a && k < n; k++)
			if (json_array_append_new(a, json_site(p, &p->samples[idx[k]], &bad)))
				bad = 1;
		report__json_set(t, ranks[r].key, a, &bad);
	}
	report__json_set(o, "sites", json_integer(p->nr_samples), &bad);
	report__json_set(o, "modules", json_modules(p, &bad), &bad);
	report__json_set(o, "top", t, &bad);
	t = NULL;
	free(idx);
	if (bad) {
		json_decref(t);
		json_decref(o);
		return NULL;
	}
	return o;
}
