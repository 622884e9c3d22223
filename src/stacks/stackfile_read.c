// SPDX-License-Identifier: MIT
/*
 * The stacks file reader (format: docs/stacks.md): the zstd stream is decompressed straight
 * into msgpack-c's streaming unpacker, record by record. Kinds and keys it does not know are
 * skipped; ids must come in order and refer only to what precedes them, else the file is not
 * ours (-EPROTO). A stream that ends inside a zstd frame or inside a record is truncated
 * (-EPROTO too: a killed run's file is reported, not silently shortened).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <msgpack.h>
#include <zstd.h>
#include "common/log.h"
#include "stacks/stackfile.h"
#include "stacks/stackfile_priv.h"

struct reader {
	const char *path;
	struct stackfile *sf;
	bool have_header;
	bool have_end;
	uint64_t cap_modules, cap_stacks, cap_loads, cap_allocs;
};

static int bad(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(struct reader *r, const char *fmt, ...)
{
	char msg[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log__error("'%s' is not a readable stacks file: %s", r->path, msg);
	return -EPROTO;
}

static bool key_is(const msgpack_object *k, const char *s)
{
	size_t n = strlen(s);

	return k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
	       !memcmp(k->via.str.ptr, s, n);
}

static bool get_u64(const msgpack_object *o, uint64_t *v)
{
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return false;
	*v = o->via.u64;
	return true;
}

static bool get_u32(const msgpack_object *o, uint32_t *v)
{
	uint64_t u;

	if (!get_u64(o, &u) || u > UINT32_MAX)
		return false;
	*v = (uint32_t)u;
	return true;
}

static char *dup_str(const msgpack_object *o)
{
	char *s;

	if (o->type != MSGPACK_OBJECT_STR)
		return NULL;
	s = malloc(o->via.str.size + 1);
	if (s) {
		memcpy(s, o->via.str.ptr, o->via.str.size);
		s[o->via.str.size] = '\0';
	}
	return s;
}

static int read_header(struct reader *r, const msgpack_object_map *m)
{
	struct stackfile *sf = r->sf;
	bool format_ok = false;

	sf->version = 0;
	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;

		if (key_is(k, "format"))
			format_ok = v->type == MSGPACK_OBJECT_STR && v->via.str.size == 15 &&
				    !memcmp(v->via.str.ptr, "memtrack-stacks", 15);
		else if (key_is(k, "version") && !get_u32(v, &sf->version))
			return bad(r, "bad version");
		else if (key_is(k, "artifact") && !sf->artifact && !(sf->artifact = dup_str(v)))
			return bad(r, "bad artifact name");
		else if (key_is(k, "unwinder") && !sf->unwinder && !(sf->unwinder = dup_str(v)))
			return bad(r, "bad unwinder");
	}
	if (!format_ok || !sf->version)
		return bad(r, "no memtrack-stacks header");
	if (sf->version > STACKFILE_VERSION) {
		log__error("'%s' is a stacks file of version %u; this memtrack reads up to version "
			   "%u: use a newer memtrack",
			   r->path, sf->version, STACKFILE_VERSION);
		return -ENOTSUP;
	}
	r->have_header = true;
	return 0;
}

static int read_module(struct reader *r, const msgpack_object_map *m)
{
	struct stackfile *sf = r->sf;
	struct stack_module mod = {0};
	bool have_id = false;

	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;

		if (key_is(k, "id")) {
			have_id = get_u32(v, &mod.id);
		} else if (key_is(k, "path") && !mod.path) {
			mod.path = dup_str(v);
			if (!mod.path)
				goto bad_module;
		} else if (key_is(k, "build_id")) {
			if (v->type != MSGPACK_OBJECT_BIN || v->via.bin.size > sizeof(mod.build_id))
				goto bad_module;
			mod.build_id_len = (uint8_t)v->via.bin.size;
			memcpy(mod.build_id, v->via.bin.ptr, v->via.bin.size);
		}
	}
	if (!have_id || mod.id != sf->nr_modules + 1 || !mod.path)
		goto bad_module;
	if (stackfile__grow((void **)&sf->modules, &r->cap_modules, sf->nr_modules + 1ull,
			    sizeof(*sf->modules))) {
		free(mod.path);
		return -ENOMEM;
	}
	sf->modules[sf->nr_modules++] = mod;
	return 0;
bad_module:
	free(mod.path);
	return bad(r, "bad module record after module %u", sf->nr_modules);
}

static int read_load(struct reader *r, const msgpack_object_map *m)
{
	struct stackfile *sf = r->sf;
	struct stack_load l = {0};

	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;

		if (key_is(k, "pid") && (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
					 v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER))
			l.pid = (int32_t)v->via.i64;
		else if (key_is(k, "module") && !get_u32(v, &l.module))
			l.module = 0;
		else if (key_is(k, "bias"))
			get_u64(v, &l.bias);
	}
	if (!l.module || l.module > sf->nr_modules)
		return bad(r, "load record of an unknown module");
	if (stackfile__grow((void **)&sf->loads, &r->cap_loads, sf->nr_loads + 1ull,
			    sizeof(*sf->loads)))
		return -ENOMEM;
	sf->loads[sf->nr_loads++] = l;
	return 0;
}

static int read_stack(struct reader *r, const msgpack_object_map *m)
{
	struct stackfile *sf = r->sf;
	struct stack_trace st = {0};
	const msgpack_object_array *fr = NULL;
	bool have_id = false;

	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;

		if (key_is(k, "id"))
			have_id = get_u32(v, &st.id);
		else if (key_is(k, "frames") && v->type == MSGPACK_OBJECT_ARRAY)
			fr = &v->via.array;
		else if (key_is(k, "truncated") && v->type == MSGPACK_OBJECT_BOOLEAN)
			st.truncated = v->via.boolean;
	}
	if (!have_id || st.id != sf->nr_stacks + 1 || !fr || fr->size % 2 ||
	    fr->size / 2 > STACKFILE_MAX_FRAMES)
		return bad(r, "bad stack record after stack %u", sf->nr_stacks);
	st.nr = fr->size / 2;
	st.frames = calloc(st.nr ? st.nr : 1, sizeof(*st.frames));
	if (!st.frames)
		return -ENOMEM;
	for (uint32_t i = 0; i < st.nr; i++) {
		if (!get_u32(&fr->ptr[2 * i], &st.frames[i].module) ||
		    st.frames[i].module > sf->nr_modules ||
		    !get_u64(&fr->ptr[2 * i + 1], &st.frames[i].vaddr)) {
			free(st.frames);
			return bad(r, "bad frame in stack %u", st.id);
		}
	}
	if (stackfile__grow((void **)&sf->stacks, &r->cap_stacks, sf->nr_stacks + 1ull,
			    sizeof(*sf->stacks))) {
		free(st.frames);
		return -ENOMEM;
	}
	sf->stacks[sf->nr_stacks++] = st;
	return 0;
}

static int read_allocs(struct reader *r, const msgpack_object_map *m)
{
	struct stackfile *sf = r->sf;

	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
		uint32_t n;

		if (!key_is(k, "ids"))
			continue;
		if (v->type != MSGPACK_OBJECT_BIN || v->via.bin.size % 4)
			return bad(r, "bad allocs record");
		n = v->via.bin.size / 4;
		if (stackfile__grow((void **)&sf->allocs, &r->cap_allocs, sf->nr_allocs + n,
				    sizeof(*sf->allocs)))
			return -ENOMEM;
		for (uint32_t j = 0; j < n; j++) {
			uint32_t id;

			memcpy(&id, v->via.bin.ptr + 4 * j, 4);
			id = le32toh(id);
			if (id > sf->nr_stacks)
				return bad(r, "allocation %llu names stack %u before it is defined",
					   (unsigned long long)(sf->nr_allocs + j), id);
			sf->allocs[sf->nr_allocs + j] = id;
		}
		sf->nr_allocs += n;
	}
	return 0;
}

/* The trailer: its counts must match what was read. */
static int read_end(struct reader *r, const msgpack_object_map *m)
{
	struct stackfile *sf = r->sf;
	uint64_t allocs = UINT64_MAX, modules = UINT64_MAX, stacks = UINT64_MAX;

	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;

		if (key_is(k, "allocs"))
			get_u64(v, &allocs);
		else if (key_is(k, "modules"))
			get_u64(v, &modules);
		else if (key_is(k, "stacks"))
			get_u64(v, &stacks);
	}
	if (allocs != sf->nr_allocs || modules != sf->nr_modules || stacks != sf->nr_stacks)
		return bad(r,
			   "the end record counts %llu allocations, %llu stacks, %llu modules; "
			   "the file holds %llu, %u, %u",
			   (unsigned long long)allocs, (unsigned long long)stacks,
			   (unsigned long long)modules, (unsigned long long)sf->nr_allocs,
			   sf->nr_stacks, sf->nr_modules);
	r->have_end = true;
	return 0;
}

static const struct {
	const char *kind;
	int (*read)(struct reader *r, const msgpack_object_map *m);
} kinds[] = {
    {"header", read_header}, {"module", read_module}, {"load", read_load},
    {"stack", read_stack},   {"allocs", read_allocs}, {"end", read_end},
};

static int read_record(struct reader *r, const msgpack_object *o)
{
	const msgpack_object_map *m = &o->via.map;
	const msgpack_object *kind = NULL;

	if (o->type != MSGPACK_OBJECT_MAP)
		return bad(r, "a value that is not a map");
	for (uint32_t i = 0; i < m->size && !kind; i++)
		if (key_is(&m->ptr[i].key, "t") && m->ptr[i].val.type == MSGPACK_OBJECT_STR)
			kind = &m->ptr[i].val;
	if (!kind)
		return bad(r, "a record without a kind");
	if (!r->have_header && !key_is(kind, "header"))
		return bad(r, "no memtrack-stacks header");
	if (r->have_end)
		return bad(r, "records after the end record");
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (key_is(kind, kinds[i].kind))
			return r->have_header && i == 0 ? bad(r, "a second header")
							: kinds[i].read(r, m);
	return 0; /* a kind from a newer writer */
}

/* Decodes every complete record in the unpacker's buffer. */
static int drain(struct reader *r, msgpack_unpacker *up, msgpack_unpacked *res)
{
	for (;;) {
		msgpack_unpack_return ur = msgpack_unpacker_next(up, res);
		int rc;

		if (ur == MSGPACK_UNPACK_CONTINUE)
			return 0;
		if (ur != MSGPACK_UNPACK_SUCCESS)
			return ur == MSGPACK_UNPACK_NOMEM_ERROR ? -ENOMEM : bad(r, "bad msgpack");
		rc = read_record(r, &res->data);
		if (rc)
			return rc;
	}
}

/* Decompresses what zin holds (and, with zin empty, what the frame in progress still holds)
 * into the unpacker, decoding every complete record. *in_frame: the stream stopped inside a
 * frame. 0 or -errno. */
static int pump(struct reader *r, ZSTD_DStream *ds, ZSTD_inBuffer *zin, msgpack_unpacker *up,
		msgpack_unpacked *res, bool *in_frame)
{
	size_t cap = ZSTD_DStreamOutSize();

	do {
		ZSTD_outBuffer out;
		size_t ret;
		int rc;

		if (!msgpack_unpacker_reserve_buffer(up, cap))
			return -ENOMEM;
		out = (ZSTD_outBuffer){msgpack_unpacker_buffer(up),
				       msgpack_unpacker_buffer_capacity(up), 0};
		ret = ZSTD_decompressStream(ds, &out, zin);
		if (ZSTD_isError(ret))
			return bad(r, "zstd: %s", ZSTD_getErrorName(ret));
		*in_frame = ret != 0;
		msgpack_unpacker_buffer_consumed(up, out.pos);
		rc = drain(r, up, res);
		if (rc)
			return rc;
		if (zin->size == 0 && !out.pos)
			return 0; /* all input in: nothing more comes out of a cut frame */
	} while (zin->pos < zin->size || (zin->size == 0 && *in_frame));
	return 0;
}

static int read_stream(struct reader *r, int fd)
{
	size_t in_cap = ZSTD_DStreamInSize();
	ZSTD_DStream *ds = ZSTD_createDStream();
	uint8_t *in = malloc(in_cap);
	msgpack_unpacker up;
	msgpack_unpacked res;
	bool in_frame = false;
	int rc = 0;

	msgpack_unpacked_init(&res);
	if (!msgpack_unpacker_init(&up, ZSTD_DStreamOutSize())) {
		free(in);
		ZSTD_freeDStream(ds);
		return -ENOMEM;
	}
	if (!ds || !in) {
		rc = -ENOMEM;
		goto cleanup;
	}
	for (;;) {
		ssize_t n = read(fd, in, in_cap);
		ZSTD_inBuffer zin = {in, n > 0 ? (size_t)n : 0, 0};

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto cleanup;
		}
		/* at the end (n == 0) a frame may still hold output: its last block */
		if (n || in_frame)
			rc = pump(r, ds, &zin, &up, &res, &in_frame);
		if (rc || !n)
			break;
	}
	if (rc)
		goto cleanup;
	if (in_frame || up.used > up.off) /* bytes of a record not complete */
		rc = bad(r, "truncated after %u stacks and %llu allocations", r->sf->nr_stacks,
			 (unsigned long long)r->sf->nr_allocs);
	else if (!r->have_header)
		rc = bad(r, "empty");
	else if (!r->have_end)
		rc = bad(r,
			 "truncated after %u stacks and %llu allocations (no end record: was "
			 "memtrack killed?)",
			 r->sf->nr_stacks, (unsigned long long)r->sf->nr_allocs);
cleanup:
	msgpack_unpacked_destroy(&res);
	msgpack_unpacker_destroy(&up);
	free(in);
	ZSTD_freeDStream(ds);
	return rc;
}

int stackfile__read(const char *path, struct stackfile *sf)
{
	struct reader r = {.path = path, .sf = sf};
	int fd, rc;

	if (!path || !sf)
		return -EINVAL;
	memset(sf, 0, sizeof(*sf));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = read_stream(&r, fd);
	close(fd);
	if (rc)
		stackfile__free(sf);
	return rc;
}

void stackfile__free(struct stackfile *sf)
{
	if (!sf)
		return;
	free(sf->artifact);
	free(sf->unwinder);
	for (uint32_t i = 0; i < sf->nr_modules; i++)
		free(sf->modules[i].path);
	free(sf->modules);
	for (uint32_t i = 0; i < sf->nr_stacks; i++)
		free(sf->stacks[i].frames);
	free(sf->stacks);
	free(sf->loads);
	free(sf->allocs);
	memset(sf, 0, sizeof(*sf));
}
