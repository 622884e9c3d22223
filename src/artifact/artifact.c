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
#include <zstd.h>
#include "artifact/artifact.h"
#include "common/log.h"

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

/*
 * The msgpack pieces, written directly: this is the consumer's per-record cost after zstd, and
 * msgpack-c's packers go through a write callback per piece (one bounds check and memcpy each,
 * 15-18 ns per event even inlined). The encodings are msgpack-c's smallest ones, byte for byte
 * (tests/unit/test_artifact.c checks against msgpack-c): positive fixint < 0x80, then
 * uint8/16/32/64 (0xcc..0xcf); negative fixint >= -32, then int8/16/32/64 (0xd0..0xd3); all
 * big-endian. Every writer below assumes room for its widest form (9 bytes for an integer).
 */
static inline uint8_t *put_be16(uint8_t *p, uint8_t tag, uint16_t v)
{
	v = __builtin_bswap16(v);
	p[0] = tag;
	memcpy(p + 1, &v, 2);
	return p + 3;
}

static inline uint8_t *put_be32(uint8_t *p, uint8_t tag, uint32_t v)
{
	v = __builtin_bswap32(v);
	p[0] = tag;
	memcpy(p + 1, &v, 4);
	return p + 5;
}

static inline uint8_t *put_be64(uint8_t *p, uint8_t tag, uint64_t v)
{
	v = __builtin_bswap64(v);
	p[0] = tag;
	memcpy(p + 1, &v, 8);
	return p + 9;
}

static inline uint8_t *put_uint(uint8_t *p, uint64_t v)
{
	if (v < 0x80) {
		*p = (uint8_t)v;
		return p + 1;
	}
	if (v < 0x100) {
		p[0] = 0xcc;
		p[1] = (uint8_t)v;
		return p + 2;
	}
	if (v < 0x10000)
		return put_be16(p, 0xcd, (uint16_t)v);
	if (v < 0x100000000ull)
		return put_be32(p, 0xce, (uint32_t)v);
	return put_be64(p, 0xcf, v);
}

static inline uint8_t *put_int(uint8_t *p, int64_t v)
{
	if (v >= -32)
		return v < 0 ? (*p = (uint8_t)v, p + 1) : put_uint(p, (uint64_t)v);
	if (v >= -128) {
		p[0] = 0xd0;
		p[1] = (uint8_t)v;
		return p + 2;
	}
	if (v >= -32768)
		return put_be16(p, 0xd1, (uint16_t)v);
	if (v >= INT32_MIN)
		return put_be32(p, 0xd2, (uint32_t)v);
	return put_be64(p, 0xd3, (uint64_t)v);
}

/* A fixstr (keys and variant names, all shorter than 32 bytes): header byte, then the text. */
static inline uint8_t *put_fixstr(uint8_t *p, const char *s, size_t len)
{
	*p = (uint8_t)(0xa0 | len);
	memcpy(p + 1, s, len); /* a constant length for the keys: inlined as plain stores */
	return p + 1 + len;
}

#define PUT_KEY(p, lit) put_fixstr(p, lit, sizeof(lit) - 1)

/*
 * Encodes into buf, which has room for ARTIFACT_MAX_EVENT bytes. Returns the encoded length,
 * or -EINVAL for a control/unknown record.
 */
static inline int encode(const struct mt_event *ev, uint8_t *buf)
{
	uint8_t *p = buf;
	size_t nfields;

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

	*p++ = (uint8_t)(0x80 | (5 + nfields)); /* fixmap: at most 7 entries */
	p = PUT_KEY(p, "pid");
	p = put_int(p, ev->pid);
	p = PUT_KEY(p, "tid");
	p = put_int(p, ev->tid);
	p = PUT_KEY(p, "timestamp");
	p = put_uint(p, ev->ts);
	p = PUT_KEY(p, "addr");
	p = put_uint(p, ev->addr);
	p = PUT_KEY(p, "type");
	p = put_fixstr(p, type_names[ev->type].s, type_names[ev->type].len);

	switch (ev->type) {
	case MT_EV_FREE:
	case MT_EV_EXEC:
	case MT_EV_EXIT:
		break;
	case MT_EV_FORK:
		p = PUT_KEY(p, "parent_pid");
		p = put_uint(p, ev->size);
		break;
	case MT_EV_RSS:
		p = PUT_KEY(p, "member");
		p = put_uint(p, ev->aux);
		p = PUT_KEY(p, "size");
		p = put_uint(p, ev->size);
		break;
	case MT_EV_RMAP:
		/* pages, signed: the BPF side stores the delta two's-complement in size */
		p = PUT_KEY(p, "member");
		p = put_uint(p, ev->aux);
		p = PUT_KEY(p, "delta");
		p = put_int(p, (int64_t)ev->size);
		break;
	case MT_EV_REALLOC:
		p = PUT_KEY(p, "size");
		p = put_uint(p, ev->size);
		if (ev->old_addr) {
			p = PUT_KEY(p, "old_addr");
			p = put_uint(p, ev->old_addr);
		}
		break;
	default: /* Malloc, Calloc, AlignedAlloc, Mmap, Munmap, Brk */
		p = PUT_KEY(p, "size");
		p = put_uint(p, ev->size);
		break;
	}
	return (int)(p - buf);
}

int artifact__encode(const struct mt_event *ev, void *buf, size_t cap)
{
	uint8_t tmp[ARTIFACT_MAX_EVENT];
	int n = encode(ev, tmp);

	if (n < 0)
		return n;
	if ((size_t)n > cap)
		return -ENOSPC;
	memcpy(buf, tmp, (size_t)n);
	return n;
}

struct artifact_writer {
	int fd;
	int err; /* first I/O or compression failure; sticky, reported by close */
	unsigned frame_events; /* events per zstd frame */
	unsigned in_frame; /* events in buf */
	uint64_t frames; /* frames written */
	uint64_t events; /* events accepted */
	uint64_t events_written; /* events in the frames written whole */
	uint64_t bytes; /* compressed bytes written to fd: whole frames only */
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
		/* A full disk: cut the partial frame off, so that the file holds whole frames,
		 * all readable, and events_written says how many events (shrinking needs no
		 * space; a file that cannot shrink, /dev/full, keeps its bytes). */
		if (ftruncate(w->fd, (off_t)w->bytes))
			log__debug(2, "artifact: cannot cut the partial frame: %s", strerror(errno));
		w->err = rc;
		return rc;
	}
	w->bytes += z;
	w->events_written += w->in_frame;
	w->frames++;
	w->len = 0;
	w->in_frame = 0;
	return 0;
}

int artifact_writer__open_fd(struct artifact_writer **wp, int fd, int level,
			     unsigned frame_events)
{
	struct artifact_writer *w;
	size_t zr;
	int rc;

	if (!wp || fd < 0) {
		if (fd >= 0)
			close(fd);
		return -EINVAL;
	}
	*wp = NULL;
	if (!frame_events)
		frame_events = ARTIFACT_DEFAULT_FRAME_EVENTS;
	/* The frame buffer is frame_events * 128 bytes; 1M events (128 MiB) is plenty. */
	w = frame_events <= (1u << 20) ? calloc(1, sizeof(*w)) : NULL;
	if (!w) {
		close(fd);
		return frame_events > (1u << 20) ? -EINVAL : -ENOMEM;
	}
	w->fd = fd;
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
	*wp = w;
	return 0;

cleanup:
	w->err = rc; /* nothing to flush: close only closes */
	artifact_writer__close(w);
	return rc;
}

int artifact_writer__open(struct artifact_writer **wp, const char *path, int level,
			  unsigned frame_events)
{
	int fd;

	if (!wp || !path)
		return -EINVAL;
	*wp = NULL;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	return artifact_writer__open_fd(wp, fd, level, frame_events);
}

int artifact_writer__write(struct artifact_writer *w, const struct mt_event *ev)
{
	int n;

	if (w->err)
		return w->err;
	/* cap is frame_events worst-case events: ARTIFACT_MAX_EVENT bytes are always free here,
	 * since the frame is flushed when its last event is in. */
	n = encode(ev, w->buf + w->len);
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

uint64_t artifact_writer__events_written(const struct artifact_writer *w)
{
	return w ? w->events_written : 0;
}

uint64_t artifact_writer__bytes(const struct artifact_writer *w)
{
	return w ? w->bytes : 0;
}

int artifact_writer__flush(struct artifact_writer *w)
{
	/* The last partial frame; an empty artifact still gets one (empty) frame. */
	if (w->fd >= 0 && (w->in_frame || !w->frames))
		return flush_frame(w);
	return w->err;
}

int artifact_writer__close(struct artifact_writer *w)
{
	int rc;

	if (!w)
		return 0;
	artifact_writer__flush(w);
	if (w->fd >= 0 && close(w->fd) && !w->err)
		w->err = -errno;
	rc = w->err;
	ZSTD_freeCCtx(w->cctx);
	free(w->zbuf);
	free(w->buf);
	free(w);
	return rc;
}
