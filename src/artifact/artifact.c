// SPDX-License-Identifier: MIT
/*
 * Artifact encoding and writer. The writer is on the consumer's hot path (one call per ring
 * buffer record), so it never allocates after open: events are packed into a frame buffer sized
 * for frame_events worst-case events, and each full frame is compressed into a second buffer
 * sized by ZSTD_compressBound, then written with write(2).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <msgpack.h>
#include <zstd.h>
#include "artifact/artifact.h"

/*
 * Worst case of one encoded event: Realloc with every integer in its widest form is 97 bytes
 * (map header 1, five common keys 28 + values 28, "Realloc" 8, size 5+9, old_addr 9+9).
 * artifact.h promises that 128 always suffices; the frame buffer is sized with this.
 */
#define ARTIFACT_MAX_EVENT 128

/* Variant names, indexed by enum mt_event_type; NULL for holes and control records. The
 * length is kept so the hot path never calls strlen. */
#define NAME(s) {s, sizeof(s) - 1}
static const struct {
	const char *s;
	size_t len;
} type_names[] = {
	[MT_EV_MALLOC] = NAME("Malloc"), [MT_EV_CALLOC] = NAME("Calloc"),
	[MT_EV_REALLOC] = NAME("Realloc"), [MT_EV_ALIGNED_ALLOC] = NAME("AlignedAlloc"),
	[MT_EV_FREE] = NAME("Free"),	 [MT_EV_MMAP] = NAME("Mmap"),
	[MT_EV_MUNMAP] = NAME("Munmap"), [MT_EV_BRK] = NAME("Brk"),
	[MT_EV_FORK] = NAME("Fork"),	 [MT_EV_EXEC] = NAME("Exec"),
	[MT_EV_EXIT] = NAME("Exit"),	 [MT_EV_RSS] = NAME("Rss"),
	[MT_EV_RMAP] = NAME("Rmap"),
};
#define NR_TYPE_NAMES (sizeof(type_names) / sizeof(type_names[0]))

const char *artifact__type_name(uint32_t type)
{
	return type < NR_TYPE_NAMES ? type_names[type].s : NULL;
}

uint32_t artifact__type_from_name(const char *name, size_t len)
{
	for (uint32_t t = 0; t < NR_TYPE_NAMES; t++) {
		if (type_names[t].s && type_names[t].len == len &&
		    !memcmp(type_names[t].s, name, len))
			return t;
	}
	return MT_EV_NONE;
}

/* Bounded output cursor behind a msgpack_packer; all packing goes through pack_write. */
struct cursor {
	uint8_t *p, *end;
};

static inline int pack_write(void *data, const char *buf, size_t len)
{
	struct cursor *c = data;

	if ((size_t)(c->end - c->p) < len)
		return -1;
	memcpy(c->p, buf, len);
	c->p += len;
	return 0;
}

static inline int pack_key(msgpack_packer *pk, const char *key, size_t len)
{
	return msgpack_pack_str(pk, len) | msgpack_pack_str_body(pk, key, len);
}

#define PACK_KEY(pk, lit) pack_key(pk, lit, sizeof(lit) - 1)

/*
 * msgpack-c's msgpack_pack_int32/int64/uint32/uint64 all emit the smallest encoding (positive
 * values as fixint/uint8..64, negative ones as negative fixint/int8..64), which is what the
 * codspeed format requires; nothing here uses the msgpack_pack_fix_* forms.
 * flatten inlines msgpack-c's packers and pack_write into this one body, so each piece is a
 * direct bounded memcpy; without it GCC keeps an indirect call per piece (measured 48 -> 15-18
 * ns per event). Returns the encoded length, -EINVAL for a control/unknown record, -ENOSPC if
 * cap is short.
 */
static inline __attribute__((flatten)) int encode(const struct mt_event *ev, uint8_t *buf,
						  size_t cap)
{
	struct cursor c = {buf, buf + cap};
	msgpack_packer pk = {&c, pack_write};
	size_t nfields;
	int rc;

	if (ev->type >= NR_TYPE_NAMES || !type_names[ev->type].s)
		return -EINVAL;
	switch (ev->type) {
	case MT_EV_FREE:
	case MT_EV_EXEC:
	case MT_EV_EXIT:
		nfields = 0;
		break;
	case MT_EV_REALLOC:
		nfields = ev->old_addr ? 2 : 1; /* old_addr is optional: omitted, never nil */
		break;
	case MT_EV_RSS:
	case MT_EV_RMAP:
		nfields = 2;
		break;
	default:
		nfields = 1;
		break;
	}

	rc = msgpack_pack_map(&pk, 5 + nfields);
	rc |= PACK_KEY(&pk, "pid") | msgpack_pack_int32(&pk, ev->pid);
	rc |= PACK_KEY(&pk, "tid") | msgpack_pack_int32(&pk, ev->tid);
	rc |= PACK_KEY(&pk, "timestamp") | msgpack_pack_uint64(&pk, ev->ts);
	rc |= PACK_KEY(&pk, "addr") | msgpack_pack_uint64(&pk, ev->addr);
	rc |= PACK_KEY(&pk, "type");
	rc |= pack_key(&pk, type_names[ev->type].s, type_names[ev->type].len);

	switch (ev->type) {
	case MT_EV_FREE:
	case MT_EV_EXEC:
	case MT_EV_EXIT:
		break;
	case MT_EV_FORK:
		rc |= PACK_KEY(&pk, "parent_pid") | msgpack_pack_uint64(&pk, ev->size);
		break;
	case MT_EV_RSS:
		rc |= PACK_KEY(&pk, "member") | msgpack_pack_uint32(&pk, ev->aux);
		rc |= PACK_KEY(&pk, "size") | msgpack_pack_uint64(&pk, ev->size);
		break;
	case MT_EV_RMAP:
		/* pages, signed: the BPF side stores the delta two's-complement in size */
		rc |= PACK_KEY(&pk, "member") | msgpack_pack_uint32(&pk, ev->aux);
		rc |= PACK_KEY(&pk, "delta") | msgpack_pack_int64(&pk, (int64_t)ev->size);
		break;
	case MT_EV_REALLOC:
		rc |= PACK_KEY(&pk, "size") | msgpack_pack_uint64(&pk, ev->size);
		if (ev->old_addr)
			rc |= PACK_KEY(&pk, "old_addr") | msgpack_pack_uint64(&pk, ev->old_addr);
		break;
	default: /* Malloc, Calloc, AlignedAlloc, Mmap, Munmap, Brk */
		rc |= PACK_KEY(&pk, "size") | msgpack_pack_uint64(&pk, ev->size);
		break;
	}
	if (rc)
		return -ENOSPC;
	return (int)(c.p - buf);
}

int artifact__encode(const struct mt_event *ev, void *buf, size_t cap)
{
	return encode(ev, buf, cap);
}

struct artifact_writer {
	int fd;
	int err; /* first I/O or compression failure; sticky, reported by close */
	unsigned frame_events; /* events per zstd frame */
	unsigned in_frame; /* events in buf */
	uint64_t frames; /* frames written */
	uint64_t events; /* events accepted */
	uint64_t bytes; /* compressed bytes written to fd */
	uint8_t *buf; /* msgpack bytes of the current frame */
	size_t len, cap;
	uint8_t *zbuf; /* compressed frame, ZSTD_compressBound(cap) bytes */
	size_t zcap;
	ZSTD_CCtx *cctx;
};

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Compresses buf as one independent frame (content size included) and writes it. */
static int flush_frame(struct artifact_writer *w)
{
	size_t z;
	int rc;

	if (w->err)
		return w->err;
	z = ZSTD_compress2(w->cctx, w->zbuf, w->zcap, w->buf, w->len);
	if (ZSTD_isError(z)) {
		w->err = -EIO;
		return w->err;
	}
	rc = write_all(w->fd, w->zbuf, z);
	if (rc) {
		w->err = rc;
		return rc;
	}
	w->bytes += z;
	w->frames++;
	w->len = 0;
	w->in_frame = 0;
	return 0;
}

int artifact_writer__open(struct artifact_writer **wp, const char *path, int level,
			  unsigned frame_events)
{
	struct artifact_writer *w;
	size_t zr;
	int rc;

	if (!wp || !path)
		return -EINVAL;
	*wp = NULL;
	if (!frame_events)
		frame_events = ARTIFACT_DEFAULT_FRAME_EVENTS;
	/* The frame buffer is frame_events * 128 bytes; 1M events (128 MiB) is plenty. */
	if (frame_events > (1u << 20))
		return -EINVAL;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = -1;
	w->frame_events = frame_events;
	w->cap = (size_t)frame_events * ARTIFACT_MAX_EVENT;
	w->zcap = ZSTD_compressBound(w->cap);
	/* Untouched pages of these buffers cost no RSS: malloc maps them lazily. */
	w->buf = malloc(w->cap);
	w->zbuf = malloc(w->zcap);
	w->cctx = ZSTD_createCCtx();
	if (!w->buf || !w->zbuf || !w->cctx) {
		rc = -ENOMEM;
		goto cleanup;
	}
	zr = ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, level);
	if (ZSTD_isError(zr)) {
		rc = -EINVAL;
		goto cleanup;
	}
	w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (w->fd < 0) {
		rc = -errno;
		goto cleanup;
	}
	*wp = w;
	return 0;

cleanup:
	artifact_writer__close(w);
	return rc;
}

int artifact_writer__write(struct artifact_writer *w, const struct mt_event *ev)
{
	int n;

	if (w->err)
		return w->err;
	/* cap is frame_events worst-case events, so an artifact type always fits here. */
	n = encode(ev, w->buf + w->len, w->cap - w->len);
	if (n < 0)
		return n; /* a rejected record does not poison the writer */
	w->len += (size_t)n;
	w->events++;
	if (++w->in_frame == w->frame_events)
		return flush_frame(w);
	return 0;
}

uint64_t artifact_writer__events(const struct artifact_writer *w)
{
	return w ? w->events : 0;
}

uint64_t artifact_writer__bytes(const struct artifact_writer *w)
{
	return w ? w->bytes : 0;
}

int artifact_writer__close(struct artifact_writer *w)
{
	int rc;

	if (!w)
		return 0;
	/* The last partial frame; an empty artifact still gets one (empty) frame. */
	if (w->fd >= 0 && (w->in_frame || !w->frames))
		flush_frame(w);
	if (w->fd >= 0 && close(w->fd) && !w->err)
		w->err = -errno;
	rc = w->err;
	ZSTD_freeCCtx(w->cctx);
	free(w->zbuf);
	free(w->buf);
	free(w);
	return rc;
}
