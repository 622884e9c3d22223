// SPDX-License-Identifier: MIT
/*
 * pprof's profile.proto (github.com/google/pprof, proto/profile.proto), written as protobuf wire
 * format by hand: the message is small and only needs varints and length-delimited fields.
 * Sample types: alloc_objects/count, alloc_space/bytes (over the run), inuse_objects/count,
 * inuse_space/bytes (live at the tree's heap peak, the default). Functions, files and lines come
 * from our symbolisation (every mapping says has_functions, so pprof does not symbolise again);
 * inlined functions are extra Line entries of a Location, innermost first. Addresses: module m
 * is given the synthetic range [m << 40, (m + 1) << 40) and a frame the address
 * (m << 40) + vaddr, so that equal frames of different processes stay one location; the
 * mapping keeps the file name and build-id. Root frames (process, thread) and markers are
 * locations without a mapping.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "common/kvmap.h"
#include "report/profile.h"

#define MOD_SHIFT 40

struct pb {
	uint8_t *p;
	size_t len, cap;
	bool nomem;
};

static void pb_raw(struct pb *b, const void *d, size_t n)
{
	if (b->nomem)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->nomem = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void pb_varint(struct pb *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;

	do {
		t[n++] = (uint8_t)(v & 0x7f) | (v > 0x7f ? 0x80 : 0);
		v >>= 7;
	} while (v);
	pb_raw(b, t, n);
}

/* A varint field; zero values are the default and omitted (proto3). */
static void pb_uint(struct pb *b, uint32_t field, uint64_t v)
{
	if (!v)
		return;
	pb_varint(b, (uint64_t)field << 3);
	pb_varint(b, v);
}

static void pb_bytes(struct pb *b, uint32_t field, const void *d, size_t n)
{
	pb_varint(b, (uint64_t)field << 3 | 2);
	pb_varint(b, n);
	pb_raw(b, d, n);
}

/* A sub-message from a scratch buffer, which is emptied for the next one. */
static void pb_msg(struct pb *b, uint32_t field, struct pb *sub)
{
	if (sub->nomem)
		b->nomem = true;
	pb_bytes(b, field, sub->p, sub->len);
	sub->len = 0;
}

static void pb_packed(struct pb *b, uint32_t field, const uint64_t *v, size_t n, struct pb *tmp)
{
	for (size_t i = 0; i < n; i++)
		pb_varint(tmp, v[i]);
	pb_msg(b, field, tmp);
}

struct enc {
	const struct profile *p;
	struct pb samples, mappings, locations, functions, strings, tmp, tmp2;
	struct kvmap str_ids, loc_ids, func_ids;
	const char **strs; /* string table, by index */
	size_t nr_strs, strs_cap;
	char **owned; /* strings made here (build-id hex) */
	size_t nr_owned;
	uint64_t nr_locs, nr_funcs;
	uint8_t *mod_lines; /* per module: 1 when some frame had a file and line */
	bool nomem;
};

/* The string table index of s (interned). */
static uint64_t str_id(struct enc *e, const char *s)
{
	uint64_t h = kvmap__hash_str(s), *id;
	bool added;

	if (!*s)
		return 0;
	/* a hash collision between two strings probes on with the next b */
	for (uint64_t b = 0;; b++) {
		id = kvmap__get(&e->str_ids, h, b, &added);
		if (!id) {
			e->nomem = true;
			return 0;
		}
		if (added || !strcmp(e->strs[*id], s))
			break;
	}
	if (!added)
		return *id;
	if (e->nr_strs == e->strs_cap) {
		size_t cap = e->strs_cap * 2;
		const char **strs = realloc(e->strs, cap * sizeof(*strs));

		if (!strs) {
			e->nomem = true;
			return 0;
		}
		e->strs = strs;
		e->strs_cap = cap;
	}
	e->strs[e->nr_strs] = s;
	*id = e->nr_strs++;
	return *id;
}

static uint64_t func_id(struct enc *e, const char *name, const char *file)
{
	uint64_t n = str_id(e, name), f = file ? str_id(e, file) : 0, *id;
	bool added;

	id = kvmap__get(&e->func_ids, n, f, &added);
	if (!id) {
		e->nomem = true;
		return 0;
	}
	if (added) {
		*id = ++e->nr_funcs;
		pb_uint(&e->tmp2, 1, *id);
		pb_uint(&e->tmp2, 2, n);
		pb_uint(&e->tmp2, 3, n);
		pb_uint(&e->tmp2, 4, f);
		pb_msg(&e->functions, 5, &e->tmp2);
	}
	return *id;
}

/* A location of one frame; its lines (inlined functions) innermost first, the first skip of
 * them left out (a leaf's inlined allocator wrappers: a location of its own then). */
static uint64_t loc_id(struct enc *e, const struct sym_loc *l, uint32_t skip)
{
	bool known = l->module && l->module <= e->p->nr_modules;
	uint64_t *id = kvmap__get(&e->loc_ids, (uint64_t)skip << 32 | (known ? l->module : 0),
				  l->vaddr, NULL);

	if (!id) {
		e->nomem = true;
		return 0;
	}
	if (*id)
		return *id;
	*id = ++e->nr_locs;
	for (uint32_t i = skip; i < l->nr; i++) {
		struct pb line = {0};

		pb_uint(&line, 1, func_id(e, l->lines[i].func, l->lines[i].file));
		pb_uint(&line, 2, l->lines[i].line);
		pb_msg(&e->tmp, 4, &line);
		free(line.p);
		if (known && l->lines[i].line)
			e->mod_lines[l->module] = 1;
	}
	/* the lines went into tmp first: the fields before them are written after; any order is
	 * valid protobuf, and this one is fixed */
	{
		struct pb head = {0};

		pb_uint(&head, 1, *id);
		if (known) {
			pb_uint(&head, 2, l->module);
			pb_uint(&head, 3,
				((uint64_t)l->module << MOD_SHIFT) +
				    (l->vaddr & ((1ULL << MOD_SHIFT) - 1)));
		} else {
			pb_uint(&head, 3, l->vaddr);
		}
		pb_raw(&head, e->tmp.p, e->tmp.len);
		e->tmp.len = 0;
		pb_msg(&e->locations, 4, &head);
		free(head.p);
	}
	return *id;
}

/* A location for a frame that is only a name (root frames, markers). */
static uint64_t name_loc_id(struct enc *e, const char *name)
{
	uint64_t s = str_id(e, name), *id = kvmap__get(&e->loc_ids, UINT64_MAX, s, NULL);
	struct pb line = {0};

	if (!id) {
		e->nomem = true;
		return 0;
	}
	if (*id)
		return *id;
	*id = ++e->nr_locs;
	pb_uint(&e->tmp, 1, *id);
	pb_uint(&line, 1, func_id(e, name, NULL));
	pb_msg(&e->tmp, 4, &line);
	free(line.p);
	pb_msg(&e->locations, 4, &e->tmp);
	return *id;
}

static void value_type(struct enc *e, struct pb *out, uint32_t field, const char *type,
		       const char *unit)
{
	struct pb vt = {0};

	pb_uint(&vt, 1, str_id(e, type));
	pb_uint(&vt, 2, str_id(e, unit));
	pb_msg(out, field, &vt);
	free(vt.p);
}

static void encode_sample(struct enc *e, const struct prof_sample *s, uint64_t *ids)
{
	uint32_t n = 0;
	uint64_t vals[4] = {s->alloc_count, s->alloc_bytes, s->inuse_count, s->inuse_bytes};
	struct pb sm = {0};

	for (uint32_t i = 0; i < s->nr_locs; i++)
		ids[n++] = loc_id(e, s->locs[i], i ? 0 : s->leaf_skip);
	if (!s->nr_locs)
		ids[n++] = name_loc_id(e, s->stack ? "[no frames]" : "[no stack]");
	if (s->truncated)
		ids[n++] = name_loc_id(e, "[truncated]");
	for (uint32_t i = s->nr_root; i-- > 0;)
		ids[n++] = name_loc_id(e, s->root[i]);
	pb_packed(&sm, 1, ids, n, &e->tmp);
	pb_packed(&sm, 2, vals, 4, &e->tmp);
	pb_msg(&e->samples, 2, &sm);
	free(sm.p);
}

static void encode_mappings(struct enc *e)
{
	for (uint32_t i = 0; i < e->p->nr_modules; i++) {
		const struct stack_module *m = &e->p->modules[i];
		uint64_t id = i + 1;
		char *hex = NULL;

		pb_uint(&e->tmp, 1, id);
		pb_uint(&e->tmp, 2, id << MOD_SHIFT);
		pb_uint(&e->tmp, 3, (id + 1) << MOD_SHIFT);
		pb_uint(&e->tmp, 5, str_id(e, m->path ? m->path : ""));
		if (m->build_id_len && (hex = malloc(2 * (size_t)m->build_id_len + 1))) {
			for (uint8_t j = 0; j < m->build_id_len; j++)
				sprintf(hex + 2 * j, "%02x", m->build_id[j]);
			e->owned[e->nr_owned++] = hex;
			pb_uint(&e->tmp, 6, str_id(e, hex));
		} else if (m->build_id_len) {
			e->nomem = true;
		}
		pb_uint(&e->tmp, 7, 1); /* has_functions: we symbolised */
		pb_uint(&e->tmp, 8, e->mod_lines[id]);
		pb_uint(&e->tmp, 9, e->mod_lines[id]);
		pb_uint(&e->tmp, 10, 1); /* has_inline_frames */
		pb_msg(&e->mappings, 3, &e->tmp);
	}
}

static void enc_free(struct enc *e)
{
	struct pb *bufs[] = {&e->samples, &e->mappings, &e->locations, &e->functions,
			     &e->strings, &e->tmp,	&e->tmp2};

	for (size_t i = 0; i < sizeof(bufs) / sizeof(*bufs); i++)
		free(bufs[i]->p);
	kvmap__free(&e->str_ids);
	kvmap__free(&e->loc_ids);
	kvmap__free(&e->func_ids);
	for (size_t i = 0; i < e->nr_owned; i++)
		free(e->owned[i]);
	free(e->owned);
	free(e->strs);
	free(e->mod_lines);
}

int report__pprof_encode(const struct profile *p, uint8_t **buf, size_t *len)
{
	struct enc e = {.p = p};
	struct pb out = {0};
	uint64_t *ids = NULL;
	uint32_t max = 0;
	int err = -ENOMEM;

	*buf = NULL;
	*len = 0;
	e.strs_cap = 64;
	e.strs = malloc(e.strs_cap * sizeof(*e.strs));
	e.owned = calloc(p->nr_modules + 1, sizeof(*e.owned));
	e.mod_lines = calloc(p->nr_modules + 1, 1);
	if (!e.strs || !e.owned || !e.mod_lines)
		goto cleanup;
	e.strs[e.nr_strs++] = ""; /* index 0 is the empty string */
	for (uint32_t i = 0; i < p->nr_samples; i++) {
		uint32_t n = p->samples[i].nr_locs + p->samples[i].nr_root + 2;

		max = n > max ? n : max;
	}
	ids = malloc((max ? max : 1) * sizeof(*ids));
	if (!ids)
		goto cleanup;
	value_type(&e, &out, 1, "alloc_objects", "count");
	value_type(&e, &out, 1, "alloc_space", "bytes");
	value_type(&e, &out, 1, "inuse_objects", "count");
	value_type(&e, &out, 1, "inuse_space", "bytes");
	for (uint32_t i = 0; i < p->nr_samples; i++)
		if (p->samples[i].alloc_count || p->samples[i].inuse_count)
			encode_sample(&e, &p->samples[i], ids);
	encode_mappings(&e);
	pb_raw(&out, e.samples.p, e.samples.len);
	pb_raw(&out, e.mappings.p, e.mappings.len);
	pb_raw(&out, e.locations.p, e.locations.len);
	pb_raw(&out, e.functions.p, e.functions.len);
	/* strings interned up to here; the ones below are added first, then the table goes out */
	{
		uint64_t space = str_id(&e, "space"), bytes = str_id(&e, "bytes");
		uint64_t comment = str_id(&e, "memtrack: inuse = live at the tree's heap peak; "
					      "alloc = over the whole run");
		uint64_t dflt = str_id(&e, "inuse_space");

		for (size_t i = 0; i < e.nr_strs; i++)
			pb_bytes(&out, 6, e.strs[i], strlen(e.strs[i]));
		pb_uint(&out, 9, p->time_nanos);
		pb_uint(&out, 10, p->duration_nanos);
		pb_varint(&e.tmp, 1 << 3);
		pb_varint(&e.tmp, space);
		pb_varint(&e.tmp, 2 << 3);
		pb_varint(&e.tmp, bytes);
		pb_msg(&out, 11, &e.tmp);
		pb_uint(&out, 12, 1); /* every allocation is recorded: period 1 */
		pb_uint(&out, 13, comment);
		pb_uint(&out, 14, dflt);
	}
	if (e.nomem || out.nomem || e.samples.nomem || e.mappings.nomem || e.locations.nomem ||
	    e.functions.nomem || e.tmp.nomem || e.tmp2.nomem)
		goto cleanup;
	*buf = out.p;
	*len = out.len;
	out.p = NULL;
	err = 0;
cleanup:
	free(out.p);
	free(ids);
	enc_free(&e);
	return err;
}

int report__pprof(FILE *out, const struct profile *p)
{
	uint8_t *raw, chunk[16384];
	z_stream z = {0};
	size_t len;
	int err = report__pprof_encode(p, &raw, &len), zr;

	if (err)
		return err;
	/* windowBits 15 + 16: a gzip wrapper (no name, mtime 0: the same input, the same bytes) */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY)) {
		free(raw);
		return -ENOMEM;
	}
	z.next_in = raw;
	z.avail_in = (uInt)len;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		zr = deflate(&z, Z_FINISH);
		fwrite(chunk, 1, sizeof(chunk) - z.avail_out, out);
	} while (zr == Z_OK);
	deflateEnd(&z);
	free(raw);
	if (zr != Z_STREAM_END)
		return -EIO;
	return ferror(out) ? -EIO : 0;
}
