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
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "artifact/artifact.h"
#include "artifact/frame_pipe.h"

/*
 * Worst case of one encoded event: Realloc with every integer in its widest form is 97 bytes
 * (map header 1, five common keys 28 + values 28, "Realloc" 8, size 5+9, old_addr 9+9).
 * artifact.h promises that 128 always suffices; the frame buffer is sized with this, and the
 * encoder's fixed-size copies (struct shape) never write past 128 bytes from an event's start.
 */
#define ARTIFACT_MAX_EVENT 128

/*
 * The artifact's record types, one row each, indexed by enum mt_event_type (NULL name: a hole
 * or a control record, never written): the variant name, then the keys that follow the five
 * common ones (pid, tid, timestamp, addr, type), in order, and where each value comes from.
 * The encoder runs on shapes compiled from these rows (compile_shapes).
 */
enum field_src {
	SRC_SIZE, /* u64 in size */
	SRC_DELTA, /* i64 in size, two's complement */
	SRC_AUX, /* u32 in aux */
	SRC_OLD_ADDR, /* u64 in old_addr; the key is omitted (never nil) when it is 0 */
};

static const struct variant {
	const char *name;
	struct {
		const char *key;
		enum field_src src;
	} fields[2];
	unsigned nfields;
} variants[] = {
	[MT_EV_MALLOC] = {"Malloc", {{"size", SRC_SIZE}}, 1},
	[MT_EV_CALLOC] = {"Calloc", {{"size", SRC_SIZE}}, 1},
	[MT_EV_REALLOC] = {"Realloc", {{"size", SRC_SIZE}, {"old_addr", SRC_OLD_ADDR}}, 2},
	[MT_EV_ALIGNED_ALLOC] = {"AlignedAlloc", {{"size", SRC_SIZE}}, 1},
	[MT_EV_FREE] = {"Free", {{0}}, 0},
	[MT_EV_MMAP] = {"Mmap", {{"size", SRC_SIZE}}, 1},
	[MT_EV_MUNMAP] = {"Munmap", {{"size", SRC_SIZE}}, 1},
	[MT_EV_BRK] = {"Brk", {{"size", SRC_SIZE}}, 1},
	[MT_EV_FORK] = {"Fork", {{"parent_pid", SRC_SIZE}}, 1},
	[MT_EV_EXEC] = {"Exec", {{0}}, 0},
	[MT_EV_EXIT] = {"Exit", {{0}}, 0},
	[MT_EV_RSS] = {"Rss", {{"member", SRC_AUX}, {"size", SRC_SIZE}}, 2},
	[MT_EV_RMAP] = {"Rmap", {{"member", SRC_AUX}, {"delta", SRC_DELTA}}, 2},
};
#define NR_VARIANTS (sizeof(variants) / sizeof(variants[0]))

const char *artifact__type_name(uint32_t type)
{
	return type < NR_VARIANTS ? variants[type].name : NULL;
}

uint32_t artifact__type_from_name(const char *name, size_t len)
{
	for (uint32_t t = 0; t < NR_VARIANTS; t++) {
		if (variants[t].name && strlen(variants[t].name) == len &&
		    !memcmp(variants[t].name, name, len))
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

/*
 * A row compiled to bytes: everything between the addr value and the first field's value is
 * constant for a type ("\xa4type", the name as a fixstr, the first key), and so is the second
 * key. They are copied with fixed-size copies (plain vector stores): the copy may run past the
 * piece, never past ARTIFACT_MAX_EVENT from the event's start, and what it leaves beyond the
 * piece is overwritten by what follows or lies past the end. Bounds, Realloc at its widest:
 * mid copied at offset <= 52 (52 + 32 = 84), key2 at <= 79 (79 + 16 = 95), 97 bytes in all.
 */
#define MID_COPY 32
#define KEY2_COPY 16

struct shape {
	uint8_t mid[MID_COPY]; /* "\xa4type", fixstr name, fixstr of the first key */
	uint8_t key2[KEY2_COPY]; /* fixstr of the second key */
	uint8_t mid_len, key2_len;
	uint8_t map; /* fixmap header with every key present */
	uint8_t nfields;
	uint8_t src[2]; /* enum field_src */
	bool valid; /* an artifact type */
};

static struct shape shapes[NR_VARIANTS];
static pthread_once_t shapes_once = PTHREAD_ONCE_INIT;

static size_t fixstr(uint8_t *p, const char *s)
{
	size_t n = strlen(s);

	/* keys and names are all shorter than 32 bytes: fixstr */
	*p = (uint8_t)(0xa0 | n);
	memcpy(p + 1, s, n);
	return n + 1;
}

static void compile_shapes(void)
{
	for (size_t t = 0; t < NR_VARIANTS; t++) {
		const struct variant *v = &variants[t];
		struct shape *sh = &shapes[t];

		if (!v->name)
			continue;
		sh->mid_len = (uint8_t)fixstr(sh->mid, "type");
		sh->mid_len += (uint8_t)fixstr(sh->mid + sh->mid_len, v->name);
		if (v->nfields)
			sh->mid_len += (uint8_t)fixstr(sh->mid + sh->mid_len, v->fields[0].key);
		if (v->nfields > 1)
			sh->key2_len = (uint8_t)fixstr(sh->key2, v->fields[1].key);
		for (unsigned i = 0; i < v->nfields; i++)
			sh->src[i] = (uint8_t)v->fields[i].src;
		sh->nfields = (uint8_t)v->nfields;
		sh->map = (uint8_t)(0x80 | (5 + v->nfields)); /* fixmap: at most 7 entries */
		sh->valid = true;
	}
}

static inline uint8_t *put_field(uint8_t *p, const struct mt_event *ev, unsigned src)
{
	switch (src) {
	case SRC_DELTA:
		return put_int(p, (int64_t)ev->size);
	case SRC_AUX:
		return put_uint(p, ev->aux);
	case SRC_OLD_ADDR:
		return put_uint(p, ev->old_addr);
	default:
		return put_uint(p, ev->size);
	}
}

/*
 * Encodes into buf, which has room for ARTIFACT_MAX_EVENT bytes (all of them may be written).
 * Returns the encoded length, or -EINVAL for a control/unknown record. compile_shapes has run.
 */
static inline int encode(const struct mt_event *ev, uint8_t *buf)
{
	const struct shape *sh;
	uint8_t *p = buf;
	bool second;

	if (ev->type >= NR_VARIANTS || !shapes[ev->type].valid)
		return -EINVAL;
	sh = &shapes[ev->type];
	/* old_addr is the only optional field, and always the last one */
	second = sh->nfields > 1 && (sh->src[1] != SRC_OLD_ADDR || ev->old_addr);
	*p = (uint8_t)(sh->map - (sh->nfields > 1 && !second));
	memcpy(p + 1, "\xa3pid", 4);
	p = put_int(p + 5, ev->pid);
	memcpy(p, "\xa3tid", 4);
	p = put_int(p + 4, ev->tid);
	memcpy(p, "\xa9timestamp", 10);
	p = put_uint(p + 10, ev->ts);
	memcpy(p, "\xa4" "addr", 5);
	p = put_uint(p + 5, ev->addr);
	memcpy(p, sh->mid, MID_COPY);
	p += sh->mid_len;
	if (sh->nfields)
		p = put_field(p, ev, sh->src[0]);
	if (second) {
		memcpy(p, sh->key2, KEY2_COPY);
		p = put_field(p + sh->key2_len, ev, sh->src[1]);
	}
	return (int)(p - buf);
}

int artifact__encode(const struct mt_event *ev, void *buf, size_t cap)
{
	uint8_t tmp[ARTIFACT_MAX_EVENT];
	int n;

	pthread_once(&shapes_once, compile_shapes);
	n = encode(ev, tmp);

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

int artifact_writer__open_fd(struct artifact_writer **wp, int fd, int level,
			     unsigned frame_events)
{
	struct artifact_writer *w;
	int rc;

	if (!wp || fd < 0) {
		if (fd >= 0)
			close(fd);
		return -EINVAL;
	}
	*wp = NULL;
	if (!frame_events)
		frame_events = ARTIFACT_DEFAULT_FRAME_EVENTS;
	pthread_once(&shapes_once, compile_shapes);
	/* The frame buffer is frame_events * 128 bytes; 1M events (128 MiB) is plenty. */
	w = frame_events <= (1u << 20) ? calloc(1, sizeof(*w)) : NULL;
	if (!w) {
		close(fd);
		return frame_events > (1u << 20) ? -EINVAL : -ENOMEM;
	}
	w->fd = fd;
	w->frame_events = frame_events;
	w->level = level;
	w->cap = (size_t)frame_events * ARTIFACT_MAX_EVENT;
	rc = frame_pipe__new(&w->pipe, level, w->cap, 0);
	if (rc)
		goto cleanup;
	w->buf = frame_pipe__buf(w->pipe);
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

size_t artifact_writer__write_many(struct artifact_writer *w, const struct mt_event *ev,
				   size_t n, int *err)
{
	size_t i = 0;

	*err = w->err;
	if (*err)
		return 0;
	while (i < n) {
		/* up to the end of the frame, then flush: the loop holds no per-record calls */
		size_t room = w->frame_events - w->in_frame, end = i + (n - i < room ? n - i : room);
		unsigned start = w->in_frame;

		for (; i < end; i++) {
			int len = encode(&ev[i], w->buf + w->len);

			if (len < 0) {
				*err = len;
				break;
			}
			w->len += (size_t)len;
			w->in_frame++;
		}
		w->events += w->in_frame - start;
		if (w->in_frame == w->frame_events) {
			int rc = flush_frame(w);

			if (rc && !*err) {
				*err = rc;
				return i; /* written, and lost with the frame: the sticky error says so */
			}
		}
		if (*err)
			break;
	}
	return i;
}

uint64_t artifact_writer__events(const struct artifact_writer *w)
{
	return w ? w->events : 0;
}

uint64_t artifact_writer__events_written(const struct artifact_writer *w)
{
	struct frame_pipe_stats st = {0};

	if (w && w->pipe)
		frame_pipe__stats(w->pipe, &st);
	return st.events_written;
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

int artifact_writer__flush(struct artifact_writer *w)
{
	int rc;

	/* The last partial frame; an empty artifact still gets one (empty) frame. Then every
	 * frame in flight is written: events_written and bytes are final. */
	if (w->fd >= 0 && (w->in_frame || !w->frames))
		flush_frame(w);
	if (w->pipe) {
		rc = frame_pipe__sync(w->pipe);
		if (rc && !w->err)
			w->err = rc;
	}
	return w->err;
}

int artifact_writer__close(struct artifact_writer *w)
{
	int rc;

	if (!w)
		return 0;
	artifact_writer__flush(w);
	if (w->pipe) {
		rc = frame_pipe__finish(w->pipe); /* the workers stop */
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
