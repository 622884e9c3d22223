// SPDX-License-Identifier: MIT
/*
 * Artifact reader: zstd frames are decompressed as one stream (ZSTD_decompressStream moves on
 * to the next frame by itself) into a buffer that msgpack_unpack_next() walks value by value.
 * Unlike codspeed's reader, which stops silently at the first undecodable value, this one
 * reports a truncated tail or an unknown variant as -EBADMSG, after every complete event.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <msgpack.h>
#include <zstd.h>
#include "artifact/artifact.h"
#include "common/records.h"

/* One decoded value (a map) must fit in the buffer; growing past this means garbage. */
#define MAX_VALUE_BYTES (64u << 20)
/* Keep at least this much free space in dbuf before each decompression call. */
#define MIN_FREE 4096

struct artifact_reader {
	int fd; /* -1 when reading from mem */
	uint8_t *mem; /* open_mem: owned copy of the file */
	size_t mem_len;
	uint8_t *in; /* compressed input; for mem readers this aliases mem */
	ZSTD_inBuffer zin;
	bool eof; /* no more compressed input after zin */
	bool in_frame; /* the last ZSTD_decompressStream call ended inside a frame */
	ZSTD_DStream *ds;
	uint8_t *dbuf; /* decompressed msgpack; [off, len) not yet decoded */
	size_t off, len, cap;
	msgpack_unpacked res;
	uint64_t frames; /* complete frames decompressed */
	uint64_t events; /* events returned, for error texts */
	int err; /* sticky: once an error is returned, next() keeps returning it */
	char errbuf[160];
};

static int fail(struct artifact_reader *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct artifact_reader *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->errbuf, sizeof(r->errbuf), fmt, ap);
	va_end(ap);
	r->err = err;
	return err;
}

static int reader_new(struct artifact_reader **rp)
{
	struct artifact_reader *r;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fd = -1;
	r->cap = 2 * ZSTD_DStreamOutSize();
	r->dbuf = malloc(r->cap);
	r->ds = ZSTD_createDStream();
	msgpack_unpacked_init(&r->res);
	if (!r->dbuf || !r->ds) {
		artifact_reader__free(r);
		return -ENOMEM;
	}
	ZSTD_initDStream(r->ds);
	*rp = r;
	return 0;
}

int artifact_reader__open(struct artifact_reader **rp, const char *path)
{
	struct artifact_reader *r = NULL;
	int rc;

	if (!rp || !path)
		return -EINVAL;
	*rp = NULL;
	rc = reader_new(&r);
	if (rc)
		return rc;
	r->in = malloc(ZSTD_DStreamInSize());
	if (!r->in) {
		rc = -ENOMEM;
		goto cleanup;
	}
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		rc = -errno;
		goto cleanup;
	}
	r->zin.src = r->in;
	*rp = r;
	return 0;

cleanup:
	artifact_reader__free(r);
	return rc;
}

int artifact_reader__open_mem(struct artifact_reader **rp, const void *data, size_t len)
{
	struct artifact_reader *r = NULL;
	int rc;

	if (!rp || (!data && len))
		return -EINVAL;
	*rp = NULL;
	rc = reader_new(&r);
	if (rc)
		return rc;
	r->mem = malloc(len ? len : 1);
	if (!r->mem) {
		artifact_reader__free(r);
		return -ENOMEM;
	}
	if (len)
		memcpy(r->mem, data, len);
	r->mem_len = len;
	r->in = r->mem;
	r->zin = (ZSTD_inBuffer){r->mem, len, 0};
	r->eof = true; /* all input is in zin already */
	*rp = r;
	return 0;
}

/* Refills zin from the file; sets eof at end of file. */
static int read_input(struct artifact_reader *r)
{
	ssize_t n;

	do {
		n = read(r->fd, r->in, ZSTD_DStreamInSize());
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return fail(r, -errno, "read: %s", strerror(errno));
	r->zin = (ZSTD_inBuffer){r->in, (size_t)n, 0};
	if (!n)
		r->eof = true;
	return 0;
}

/*
 * Appends decompressed bytes to dbuf. Returns 1 when some were added, 0 at a clean end of the
 * compressed stream, -errno on failure (a stream that ends inside a frame is truncated).
 */
static int pump(struct artifact_reader *r)
{
	/* Move the undecoded tail (at most one partial value) to the front. */
	if (r->off) {
		memmove(r->dbuf, r->dbuf + r->off, r->len - r->off);
		r->len -= r->off;
		r->off = 0;
	}
	if (r->cap - r->len < MIN_FREE) {
		size_t ncap = r->cap * 2;
		uint8_t *p;

		if (ncap > MAX_VALUE_BYTES)
			return fail(r, -EBADMSG,
				    "msgpack value larger than %u bytes after event %llu",
				    MAX_VALUE_BYTES, (unsigned long long)r->events);
		p = realloc(r->dbuf, ncap);
		if (!p)
			return fail(r, -ENOMEM, "out of memory");
		r->dbuf = p;
		r->cap = ncap;
	}

	for (;;) {
		ZSTD_outBuffer out = {r->dbuf + r->len, r->cap - r->len, 0};
		size_t ret;
		int rc;

		if (r->zin.pos == r->zin.size && !r->eof) {
			rc = read_input(r);
			if (rc)
				return rc;
		}
		/* With no input left, only a frame in progress may still hold output. */
		if (r->zin.pos == r->zin.size && r->eof && !r->in_frame)
			return 0;
		ret = ZSTD_decompressStream(r->ds, &out, &r->zin);
		if (ZSTD_isError(ret))
			return fail(r, -EBADMSG, "zstd: %s (after frame %llu)",
				    ZSTD_getErrorName(ret), (unsigned long long)r->frames);
		if (ret == 0)
			r->frames++;
		r->in_frame = ret != 0;
		r->len += out.pos;
		if (out.pos)
			return 1;
		if (r->zin.pos == r->zin.size && r->eof && r->in_frame)
			return fail(r, -EBADMSG,
				    "truncated zstd frame after %llu frames, %llu events",
				    (unsigned long long)r->frames, (unsigned long long)r->events);
	}
}

/*
 * Keys of a map: the five common ones, then the variant fields of src/common/records.c, key
 * index k at bit k. Values are kept by key index.
 */
enum { K_PID, K_TID, K_TS, K_ADDR, K_TYPE, K_FIELD0 };
#define NR_KEYS (K_FIELD0 + RF_NR - 1)
#define F_COMMON ((1u << K_FIELD0) - 1)

static const char *const common_keys[K_FIELD0] = {"pid", "tid", "timestamp", "addr", "type"};

static inline unsigned field_key(unsigned rf)
{
	return K_FIELD0 + rf - 1;
}

static const char *key_name(unsigned k)
{
	return k < K_FIELD0 ? common_keys[k] : records__fields[k - K_FIELD0 + 1].key;
}

/* The key's index, or -1 for a key we do not know */
static int key_index(const msgpack_object *k)
{
	if (k->type != MSGPACK_OBJECT_STR)
		return -1;
	for (unsigned i = 0; i < NR_KEYS; i++) {
		const char *name = key_name(i);

		if (strlen(name) == k->via.str.size && !memcmp(name, k->via.str.ptr, k->via.str.size))
			return (int)i;
	}
	return -1; /* unknown keys are ignored: newer writers may add fields */
}

/* Integer value as int64 two's complement bits; false for a non-integer. */
static bool get_int(const msgpack_object *v, uint64_t *out, bool *neg)
{
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		*out = v->via.u64;
		*neg = false;
		return true;
	}
	if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*out = (uint64_t)v->via.i64;
		*neg = true;
		return true;
	}
	return false;
}

/* pid/tid are i32, the variant fields as their row says (member u32, delta i64), the rest u64. */
static bool in_range(unsigned k, uint64_t v, bool neg)
{
	if (k == K_PID || k == K_TID)
		return (int64_t)v == (int32_t)v;
	if (k < K_FIELD0)
		return !neg;
	switch (records__fields[k - K_FIELD0 + 1].enc) {
	case RE_I64:
		return neg || v <= INT64_MAX;
	case RE_U32:
		return !neg && v <= UINT32_MAX;
	default:
		return !neg;
	}
}

static unsigned variant_fields(const struct record_type *rt)
{
	unsigned need = 0;

	for (int i = 0; i < RECORD_MAX_FIELDS && rt->fields[i]; i++)
		if (!records__fields[rt->fields[i]].optional)
			need |= 1u << field_key(rt->fields[i]);
	return need;
}

static int decode(struct artifact_reader *r, const msgpack_object *o, struct mt_event *ev)
{
	uint64_t v[NR_KEYS] = {0};
	const msgpack_object *tname = NULL;
	const struct record_type *rt;
	unsigned seen = 0, need;
	uint64_t n = r->events;

	if (o->type != MSGPACK_OBJECT_MAP)
		return fail(r, -EBADMSG, "event %llu: not a map (msgpack type %d)",
			    (unsigned long long)n, o->type);
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];
		int k = key_index(&kv->key);
		bool neg;

		if (k < 0)
			continue;
		seen |= 1u << k;
		if (k == K_TYPE) {
			if (kv->val.type != MSGPACK_OBJECT_STR)
				return fail(r, -EBADMSG, "event %llu: type is not a string",
					    (unsigned long long)n);
			tname = &kv->val;
			continue;
		}
		if (!get_int(&kv->val, &v[k], &neg))
			return fail(r, -EBADMSG, "event %llu: %s is not an integer",
				    (unsigned long long)n, key_name((unsigned)k));
		if (!in_range((unsigned)k, v[k], neg))
			return fail(r, -EBADMSG, "event %llu: %s out of range",
				    (unsigned long long)n, key_name((unsigned)k));
	}
	if (!tname)
		return fail(r, -EBADMSG, "event %llu: no type", (unsigned long long)n);
	memset(ev, 0, sizeof(*ev));
	ev->type = records__from_name(tname->via.str.ptr, tname->via.str.size);
	if (ev->type == MT_EV_NONE)
		return fail(r, -EBADMSG, "event %llu: unknown variant '%.*s'",
			    (unsigned long long)n,
			    (int)(tname->via.str.size > 32 ? 32 : tname->via.str.size),
			    tname->via.str.ptr);
	rt = &records__types[ev->type];
	need = F_COMMON | variant_fields(rt);
	if ((seen & need) != need)
		return fail(r, -EBADMSG, "event %llu: %s lacks a field (have 0x%x, need 0x%x)",
			    (unsigned long long)n, rt->name, seen, need);

	ev->pid = (int32_t)v[K_PID];
	ev->tid = (int32_t)v[K_TID];
	ev->ts = v[K_TS];
	ev->addr = v[K_ADDR];
	for (int i = 0; i < RECORD_MAX_FIELDS && rt->fields[i]; i++) {
		const struct record_field_desc *f = &records__fields[rt->fields[i]];
		uint64_t val = v[field_key(rt->fields[i])];

		if (f->member == RM_AUX)
			ev->aux = (uint32_t)val;
		else if (f->member == RM_OLD_ADDR)
			ev->old_addr = val;
		else
			ev->size = val;
	}
	r->events++;
	return 1;
}

int artifact_reader__next(struct artifact_reader *r, struct mt_event *ev)
{
	if (!r || !ev)
		return -EINVAL;
	if (r->err)
		return r->err;
	for (;;) {
		int rc;

		if (r->off < r->len) {
			size_t start = r->off;
			msgpack_unpack_return ur;

			ur = msgpack_unpack_next(&r->res, (const char *)r->dbuf, r->len, &r->off);
			if (ur == MSGPACK_UNPACK_SUCCESS || ur == MSGPACK_UNPACK_EXTRA_BYTES)
				return decode(r, &r->res.data, ev);
			if (ur == MSGPACK_UNPACK_PARSE_ERROR)
				return fail(r, -EBADMSG, "malformed msgpack after event %llu",
					    (unsigned long long)r->events);
			if (ur == MSGPACK_UNPACK_NOMEM_ERROR)
				return fail(r, -ENOMEM, "out of memory");
			/* CONTINUE: the value goes on past len. msgpack-c 4.0 moves off over the
			 * partial value anyway; rewind so it is parsed again once complete. */
			r->off = start;
		}
		rc = pump(r);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			if (r->off < r->len)
				return fail(r, -EBADMSG,
					    "truncated msgpack value (%zu bytes) after event %llu",
					    r->len - r->off, (unsigned long long)r->events);
			return 0;
		}
	}
}

const char *artifact_reader__error(const struct artifact_reader *r)
{
	if (!r)
		return "no reader";
	return r->err ? r->errbuf : "";
}

uint64_t artifact_reader__frames(const struct artifact_reader *r)
{
	return r ? r->frames : 0;
}

void artifact_reader__free(struct artifact_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	if (r->in != r->mem)
		free(r->in);
	free(r->mem);
	msgpack_unpacked_destroy(&r->res);
	ZSTD_freeDStream(r->ds);
	free(r->dbuf);
	free(r);
}
