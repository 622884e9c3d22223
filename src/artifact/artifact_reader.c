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

/* Field bits seen in a map, to check that a variant has what it needs. */
enum {
	F_PID = 1 << 0,
	F_TID = 1 << 1,
	F_TS = 1 << 2,
	F_ADDR = 1 << 3,
	F_TYPE = 1 << 4,
	F_SIZE = 1 << 5,
	F_OLD_ADDR = 1 << 6,
	F_PARENT = 1 << 7,
	F_MEMBER = 1 << 8,
	F_DELTA = 1 << 9,
	F_COMMON = F_PID | F_TID | F_TS | F_ADDR | F_TYPE,
};

static const struct {
	const char *name;
	unsigned bit;
} keys[] = {
	{"pid", F_PID},		 {"tid", F_TID},	 {"timestamp", F_TS},
	{"addr", F_ADDR},	 {"type", F_TYPE},	 {"size", F_SIZE},
	{"old_addr", F_OLD_ADDR}, {"parent_pid", F_PARENT}, {"member", F_MEMBER},
	{"delta", F_DELTA},
};

static unsigned key_bit(const msgpack_object *k)
{
	if (k->type != MSGPACK_OBJECT_STR)
		return 0;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strlen(keys[i].name) == k->via.str.size &&
		    !memcmp(keys[i].name, k->via.str.ptr, k->via.str.size))
			return keys[i].bit;
	}
	return 0; /* unknown keys are ignored: newer writers may add fields */
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

/* pid/tid are i32, delta is i64, member is u32 (an MM_* index), the rest are u64. */
static bool in_range(unsigned bit, uint64_t v, bool neg)
{
	switch (bit) {
	case F_PID:
	case F_TID:
		return (int64_t)v == (int32_t)v;
	case F_DELTA:
		return neg || v <= INT64_MAX;
	case F_MEMBER:
		return !neg && v <= UINT32_MAX;
	default:
		return !neg;
	}
}

static unsigned variant_fields(uint32_t type)
{
	switch (type) {
	case MT_EV_FREE:
	case MT_EV_EXEC:
	case MT_EV_EXIT:
		return 0;
	case MT_EV_FORK:
		return F_PARENT;
	case MT_EV_RSS:
		return F_MEMBER | F_SIZE;
	case MT_EV_RMAP:
		return F_MEMBER | F_DELTA;
	default:
		return F_SIZE; /* Realloc's old_addr is optional */
	}
}

static int decode(struct artifact_reader *r, const msgpack_object *o, struct mt_event *ev)
{
	uint64_t v[10] = {0}; /* by bit index */
	const msgpack_object *tname = NULL;
	unsigned seen = 0, need;
	uint64_t n = r->events;

	if (o->type != MSGPACK_OBJECT_MAP)
		return fail(r, -EBADMSG, "event %llu: not a map (msgpack type %d)",
			    (unsigned long long)n, o->type);
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object_kv *kv = &o->via.map.ptr[i];
		unsigned bit = key_bit(&kv->key);
		int idx = __builtin_ctz(bit | (1u << 31));
		bool neg;

		if (!bit)
			continue;
		seen |= bit;
		if (bit == F_TYPE) {
			if (kv->val.type != MSGPACK_OBJECT_STR)
				return fail(r, -EBADMSG, "event %llu: type is not a string",
					    (unsigned long long)n);
			tname = &kv->val;
			continue;
		}
		if (!get_int(&kv->val, &v[idx], &neg))
			return fail(r, -EBADMSG, "event %llu: %s is not an integer",
				    (unsigned long long)n, keys[idx].name);
		if (!in_range(bit, v[idx], neg))
			return fail(r, -EBADMSG, "event %llu: %s out of range",
				    (unsigned long long)n, keys[idx].name);
	}
	if (!tname)
		return fail(r, -EBADMSG, "event %llu: no type", (unsigned long long)n);
	memset(ev, 0, sizeof(*ev));
	ev->type = artifact__type_from_name(tname->via.str.ptr, tname->via.str.size);
	if (ev->type == MT_EV_NONE)
		return fail(r, -EBADMSG, "event %llu: unknown variant '%.*s'",
			    (unsigned long long)n,
			    (int)(tname->via.str.size > 32 ? 32 : tname->via.str.size),
			    tname->via.str.ptr);
	need = F_COMMON | variant_fields(ev->type);
	if ((seen & need) != need)
		return fail(r, -EBADMSG, "event %llu: %s lacks a field (have 0x%x, need 0x%x)",
			    (unsigned long long)n, artifact__type_name(ev->type), seen, need);

	ev->pid = (int32_t)v[0];
	ev->tid = (int32_t)v[1];
	ev->ts = v[2];
	ev->addr = v[3];
	switch (ev->type) {
	case MT_EV_FORK:
		ev->size = v[7];
		break;
	case MT_EV_RSS:
		ev->aux = (uint32_t)v[8];
		ev->size = v[5];
		break;
	case MT_EV_RMAP:
		ev->aux = (uint32_t)v[8];
		ev->size = v[9];
		break;
	case MT_EV_REALLOC:
		ev->size = v[5];
		ev->old_addr = v[6];
		break;
	default:
		if (variant_fields(ev->type))
			ev->size = v[5];
		break;
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
