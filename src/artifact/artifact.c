// SPDX-License-Identifier: MIT
/*
 * Artifact encoding and writer. The writer is on the consumer's hot path (one call per ring
 * buffer record), so it never allocates after open: events are packed into a frame buffer sized
 * for frame_events worst-case events, and each full frame goes to the frame pipe
 * (frame_pipe.h), which compresses it (on the caller's thread, or on worker threads) and
 * writes it with write(2), frames in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "artifact/artifact.h"
#include "artifact/frame_pipe.h"

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
	int level; /* zstd level, kept for artifact_writer__set_workers */
	uint64_t frames; /* frames submitted to the pipe */
	uint64_t events; /* events accepted */
	uint8_t *buf; /* msgpack bytes of the current frame: the pipe's current buffer */
	size_t len, cap;
	struct frame_pipe *pipe; /* compresses and writes frames, in order */
};

/* Hands the current frame to the pipe, which gives the next buffer. */
static int flush_frame(struct artifact_writer *w)
{
	int rc;

	if (w->err)
		return w->err;
	rc = frame_pipe__submit(w->pipe, w->fd, w->len, w->in_frame);
	w->frames++;
	w->buf = frame_pipe__buf(w->pipe);
	w->len = 0;
	w->in_frame = 0;
	if (rc)
		w->err = rc;
	return rc;
}

int artifact_writer__open(struct artifact_writer **wp, const char *path, int level,
			  unsigned frame_events)
{
	struct artifact_writer *w;
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
	w->level = level;
	w->cap = (size_t)frame_events * ARTIFACT_MAX_EVENT;
	rc = frame_pipe__new(&w->pipe, level, w->cap, 0);
	if (rc)
		goto cleanup;
	w->buf = frame_pipe__buf(w->pipe);
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

uint64_t artifact_writer__bytes(const struct artifact_writer *w)
{
	return w && w->pipe ? frame_pipe__bytes(w->pipe) : 0;
}

int artifact_writer__set_workers(struct artifact_writer *w, unsigned workers)
{
	struct frame_pipe *p;
	int rc;

	if (w->events || w->frames)
		return -EBUSY;
	rc = frame_pipe__new(&p, w->level, w->cap, workers);
	if (rc)
		return rc;
	frame_pipe__free(w->pipe);
	w->pipe = p;
	w->buf = frame_pipe__buf(p);
	return 0;
}

unsigned artifact__default_workers(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	/* the consumer's thread encodes; with one CPU a worker would only add switches */
	if (n <= 1)
		return 0;
	return n > FRAME_PIPE_MAX_WORKERS ? FRAME_PIPE_MAX_WORKERS : (unsigned)n;
}

int artifact_writer__close(struct artifact_writer *w)
{
	int rc;

	if (!w)
		return 0;
	/* The last partial frame; an empty artifact still gets one (empty) frame. Then every
	 * frame in flight is written before the file is closed. */
	if (w->fd >= 0 && (w->in_frame || !w->frames))
		flush_frame(w);
	if (w->pipe) {
		rc = frame_pipe__finish(w->pipe);
		if (rc && !w->err)
			w->err = rc;
	}
	if (w->fd >= 0 && close(w->fd) && !w->err)
		w->err = -errno;
	rc = w->err;
	frame_pipe__free(w->pipe);
	free(w);
	return rc;
}
