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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "artifact/artifact.h"
#include "artifact/frame_pipe.h"
#include "common/records.h"

/*
 * Worst case of one encoded event: Realloc with every integer in its widest form is 97 bytes
 * (map header 1, five common keys 28 + values 28, "Realloc" 8, size 5+9, old_addr 9+9).
 * artifact.h promises that 128 always suffices; the frame buffer is sized with this, and the
 * encoder's fixed-size copies (struct shape) never write past 128 bytes from an event's start.
 */
#define ARTIFACT_MAX_EVENT 128
/* Bytes of the frame buffer mapped ahead of the encoder at a time (frame_pipe__populate): ~40
 * us here, where the faults they replace cost ~0.35 ms; a short run's one frame pays for one. */
#define ARTIFACT_POP_AHEAD (128u << 10)

const char *artifact__type_name(uint32_t type)
{
	return records__name(type);
}

uint32_t artifact__type_from_name(const char *name, size_t len)
{
	return records__from_name(name, len);
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
 * A record type's row (src/common/records.c) compiled to bytes: everything between the addr
 * value and the first field's value is constant for a type ("\xa4type", the name as a fixstr,
 * and the first key when that field is never omitted), and so is each other key. They are
 * copied with fixed-size copies (plain vector stores): a copy may run past its piece, never
 * past ARTIFACT_MAX_EVENT from the event's start (compile_shape checks every row), and what it
 * leaves beyond the piece is overwritten by what follows or lies past the end. Realloc at its
 * widest: mid copied at offset 52 (52 + 32 = 84), old_addr's key at 79 (79 + 16 = 95), 97
 * bytes in all.
 */
#define MID_COPY 32
#define KEY_COPY 16
#define COMMON_MAX 52 /* map header, pid, tid, timestamp, addr at their widest: mid's offset */

struct shape {
	uint8_t mid[MID_COPY]; /* "\xa4type", fixstr name, fixstr of the first key if in mid */
	uint8_t key[RECORD_MAX_FIELDS][KEY_COPY]; /* fixstr of each key not in mid */
	uint8_t mid_len, key_len[RECORD_MAX_FIELDS]; /* key_len 0: the key is in mid */
	uint8_t nfields;
	uint8_t member[RECORD_MAX_FIELDS]; /* enum record_member */
	uint8_t enc[RECORD_MAX_FIELDS]; /* enum record_enc */
	bool optional[RECORD_MAX_FIELDS]; /* omitted (never nil) when 0 */
	bool valid; /* an artifact type */
	/* No field, or one that is always there, unsigned, read from size, its key in mid
	 * (Malloc, Free, Mmap, Fork, Exit...): encode skips the field loop */
	bool plain;
};

static struct shape shapes[MT_EV_TYPE_MAX];
static pthread_once_t shapes_once = PTHREAD_ONCE_INIT;

/* A fixstr (keys and variant names, all shorter than 32 bytes) into p, within cap bytes. */
static bool put_fixstr(uint8_t *p, size_t cap, uint8_t *len, const char *s, size_t n)
{
	if (n >= 32 || n + 1 > cap)
		return false;
	*p = (uint8_t)(0xa0 | n);
	memcpy(p + 1, s, n);
	*len = (uint8_t)(n + 1);
	return true;
}

/* One row; false when it does not fit the fixed-size copies (a row too long for the encoder). */
static bool compile_shape(const struct record_type *rt, struct shape *sh)
{
	size_t off;
	uint8_t n;

	if (!put_fixstr(sh->mid, MID_COPY, &sh->mid_len, "type", 4) ||
	    !put_fixstr(sh->mid + sh->mid_len, MID_COPY - sh->mid_len, &n, rt->name, rt->name_len))
		return false;
	sh->mid_len += n;
	off = COMMON_MAX + MID_COPY; /* where mid's copy ends, at the widest */
	if (off > ARTIFACT_MAX_EVENT)
		return false;
	off = COMMON_MAX + sh->mid_len;
	for (int i = 0; i < RECORD_MAX_FIELDS && rt->fields[i]; i++) {
		const struct record_field_desc *f = &records__fields[rt->fields[i]];

		if (i == 0 && !f->optional) {
			/* always present: its key is part of the constant run */
			if (!put_fixstr(sh->mid + sh->mid_len, MID_COPY - sh->mid_len, &n, f->key,
					f->key_len))
				return false;
			sh->mid_len += n;
			off += n;
		} else {
			if (!put_fixstr(sh->key[i], KEY_COPY, &sh->key_len[i], f->key, f->key_len) ||
			    off + KEY_COPY > ARTIFACT_MAX_EVENT)
				return false;
			off += sh->key_len[i];
		}
		off += 9; /* the widest integer */
		sh->member[i] = f->member;
		sh->enc[i] = f->enc;
		sh->optional[i] = f->optional;
		sh->nfields = (uint8_t)(i + 1);
	}
	sh->plain = !sh->nfields || (sh->nfields == 1 && !sh->optional[0] && !sh->key_len[0] &&
				     sh->member[0] == RM_SIZE && sh->enc[0] != RE_I64);
	return off <= ARTIFACT_MAX_EVENT && 5 + sh->nfields < 16; /* fixmap: < 16 entries */
}

static void compile_shapes(void)
{
	for (uint32_t t = 0; t < MT_EV_TYPE_MAX; t++) {
		if (!records__has(t, REC_ARTIFACT))
			continue;
		if (!compile_shape(&records__types[t], &shapes[t])) {
			/* a row of records.c this encoder cannot hold: a build defect, caught by
			 * the unit tests (every type is encoded there) */
			fprintf(stderr, "memtrack: record type %s does not fit the artifact encoder\n",
				records__types[t].name);
			abort();
		}
		shapes[t].valid = true;
	}
}

/* The value of a variant field, as its encoding reads it (enum record_member). */
static inline uint64_t field_value(const struct mt_event *ev, unsigned member)
{
	switch (member) {
	case RM_AUX:
		return ev->aux;
	case RM_OLD_ADDR:
		return ev->old_addr;
	default:
		return ev->size;
	}
}

/*
 * An event's bytes up to the timestamp's value (map header, "pid", pid, "tid", tid,
 * "timestamp") depend on pid and tid alone, and consecutive records mostly share them (a
 * thread's run in the ring). The writer keeps the last run's bytes and copies them whole
 * instead of encoding two integers: byte for byte the same (tests/unit/test_artifact.c checks
 * the writer against msgpack-c over runs of every record type). bytes[0] is a stale map header,
 * rewritten last as always.
 */
#define HEAD_COPY 32 /* map header 1, "\xa3pid" 4 + 5, "\xa3tid" 4 + 5, "\xa9timestamp" 10 */
_Static_assert(1 + 4 + 5 + 4 + 5 + 10 <= HEAD_COPY, "the widest head fits one copy");

struct head_cache {
	uint64_t key; /* pid << 32 | tid; meaningful when len is not 0 */
	uint8_t len;
	uint8_t bytes[HEAD_COPY];
};

/*
 * Encodes into buf, which has room for ARTIFACT_MAX_EVENT bytes (all of them may be written):
 * the five common keys, then the variant's fields in the order of its row in
 * src/common/records.c. Returns the encoded length, or -EINVAL for a control/unknown record.
 * compile_shapes has run. Always inlined: gcc calls it out of line otherwise, and
 * write_many's loop then keeps the head cache in memory and pays a call per record (the
 * replayed storm ran ~10% slower on one thread).
 */
static inline __attribute__((always_inline)) int encode(const struct mt_event *ev, uint8_t *buf,
							   struct head_cache *hc)
{
	uint64_t key = (uint64_t)(uint32_t)ev->pid << 32 | (uint32_t)ev->tid;
	const struct shape *sh;
	unsigned nfields = 0;
	uint8_t *p = buf;

	if (ev->type >= MT_EV_TYPE_MAX || !shapes[ev->type].valid)
		return -EINVAL;
	sh = &shapes[ev->type];
	if (hc->len && hc->key == key) {
		memcpy(p, hc->bytes, HEAD_COPY); /* within ARTIFACT_MAX_EVENT */
		p += hc->len;
	} else {
		memcpy(p + 1, "\xa3pid", 4); /* the map header last, once the fields are counted */
		p = put_int(p + 5, ev->pid);
		memcpy(p, "\xa3tid", 4);
		p = put_int(p + 4, ev->tid);
		memcpy(p, "\xa9timestamp", 10);
		p += 10;
		hc->key = key;
		hc->len = (uint8_t)(p - buf);
		memcpy(hc->bytes, buf, HEAD_COPY); /* what lies past len is never used */
	}
	p = put_uint(p, ev->ts);
	memcpy(p, "\xa4" "addr", 5);
	p = put_uint(p + 5, ev->addr);
	memcpy(p, sh->mid, MID_COPY);
	p += sh->mid_len;
	if (sh->plain) { /* the bulk of every run: no field to decide on */
		if (sh->nfields)
			p = put_uint(p, ev->size);
		*buf = (uint8_t)(0x80 | (5 + sh->nfields));
		return (int)(p - buf);
	}
	for (int i = 0; i < sh->nfields; i++) {
		uint64_t v = field_value(ev, sh->member[i]);

		if (sh->optional[i] && !v)
			continue; /* omitted, never nil */
		nfields++;
		if (sh->key_len[i]) { /* 0: the key is in mid */
			memcpy(p, sh->key[i], KEY_COPY);
			p += sh->key_len[i];
		}
		p = sh->enc[i] == RE_I64 ? put_int(p, (int64_t)v) : put_uint(p, v);
	}
	*buf = (uint8_t)(0x80 | (5 + nfields)); /* fixmap: compile_shape checked < 16 */
	return (int)(p - buf);
}

int artifact__encode(const struct mt_event *ev, void *buf, size_t cap)
{
	struct head_cache hc = {0}; /* one record: encoded in full */
	uint8_t tmp[ARTIFACT_MAX_EVENT];
	int n;

	pthread_once(&shapes_once, compile_shapes);
	n = encode(ev, tmp, &hc);

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
	unsigned workers; /* compressing threads asked for (set_workers); 0: the caller's thread */
	size_t cut_bytes; /* artifact_writer__cut's threshold: doubles at each cut */
	uint64_t frames; /* frames submitted to the pipe */
	uint64_t events; /* events accepted */
	struct head_cache head; /* the last record's pid and tid, encoded */
	uint8_t *buf; /* msgpack bytes of the current frame: the pipe's current buffer */
	size_t len, cap;
	size_t pop; /* bytes of buf mapped (frame_pipe__populate): len stays below it */
	struct frame_pipe *pipe; /* compresses and writes frames, in order */
};

/* Hands the current frame to the pipe, which gives the next buffer. last: the caller waits
 * for it (a flush): with no worker started yet, it is compressed here and none starts. */
static int flush_frame(struct artifact_writer *w, bool last)
{
	int rc;

	if (w->err)
		return w->err;
	rc = last ? frame_pipe__submit_last(w->pipe, w->fd, w->len, w->in_frame)
		  : frame_pipe__submit(w->pipe, w->fd, w->len, w->in_frame);
	w->frames++;
	w->buf = frame_pipe__buf(w->pipe);
	w->pop = frame_pipe__populate(w->pipe, 0);
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
	w->cut_bytes = ARTIFACT_CUT_BYTES;
	w->level = level;
	w->cap = (size_t)frame_events * ARTIFACT_MAX_EVENT;
	rc = frame_pipe__new(&w->pipe, level, w->cap, 0);
	if (rc)
		goto cleanup;
	w->buf = frame_pipe__buf(w->pipe);
	w->pop = frame_pipe__populate(w->pipe, 0);
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
	if (w->len + ARTIFACT_MAX_EVENT > w->pop)
		w->pop = frame_pipe__populate(w->pipe, w->len + ARTIFACT_POP_AHEAD);
	n = encode(ev, w->buf + w->len, &w->head);
	if (n < 0)
		return n; /* a rejected record does not poison the writer */
	w->len += (size_t)n;
	w->events++;
	if (++w->in_frame == w->frame_events)
		return flush_frame(w, false);
	return 0;
}

size_t artifact_writer__write_many(struct artifact_writer *w, const struct mt_event *ev,
				   size_t n, uint64_t *counts, int *err)
{
	struct head_cache hc = w->head; /* a local: the loop keeps it out of memory */
	size_t i = 0;

	*err = w->err;
	if (*err)
		return 0;
	while (i < n) {
		/* up to the end of the frame, then flush: the loop holds no per-record calls */
		size_t room = w->frame_events - w->in_frame, mapped, end;
		unsigned start = w->in_frame;

		/* and no further than the mapped part of the buffer holds for sure */
		if (w->pop - w->len < ARTIFACT_POP_AHEAD / 2 && w->pop < w->cap)
			w->pop = frame_pipe__populate(w->pipe, w->len + ARTIFACT_POP_AHEAD);
		mapped = (w->pop - w->len) / ARTIFACT_MAX_EVENT;
		if (mapped < room)
			room = mapped;
		end = i + (n - i < room ? n - i : room);

		for (; i < end; i++) {
			int len = encode(&ev[i], w->buf + w->len, &hc);

			if (len < 0) {
				*err = len;
				break;
			}
			w->len += (size_t)len;
			w->in_frame++;
			counts[ev[i].type]++; /* encode checked type < MT_EV_TYPE_MAX */
		}
		w->events += w->in_frame - start;
		if (w->in_frame == w->frame_events) {
			int rc = flush_frame(w, false);

			if (rc && !*err) {
				*err = rc;
				break; /* written, and lost with the frame: the sticky error says so */
			}
		}
		if (*err)
			break;
	}
	w->head = hc;
	return i;
}

uint64_t artifact_writer__frames(const struct artifact_writer *w)
{
	return w ? w->frames : 0;
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
	w->workers = workers;
	w->buf = frame_pipe__buf(p);
	return 0;
}

int artifact_writer__set_active_workers(struct artifact_writer *w, unsigned n)
{
	return frame_pipe__set_active(w->pipe, n);
}

unsigned artifact__run_workers(unsigned workers)
{
	/* The tracked program keeps a CPU: with the consumer's thread and every worker busy, a
	 * 2-CPU machine ran 4 threads on 2 CPUs, and the program that fills the shared memory
	 * waited its turn (a 2M-pair storm: 0.89-0.93x the wall with one worker of two, three
	 * sets of 11-15 rounds; sqlite3 and python3 unchanged within the noise). */
	return workers > 1 ? workers - 1 : workers;
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
		flush_frame(w, true);
	if (w->pipe) {
		rc = frame_pipe__sync(w->pipe);
		if (rc && !w->err)
			w->err = rc;
	}
	return w->err;
}

int artifact_writer__cut(struct artifact_writer *w)
{
	if (!w || !w->workers || w->err || w->len < w->cut_bytes || !frame_pipe__idle(w->pipe))
		return w ? w->err : 0;
	w->cut_bytes *= 2;
	return flush_frame(w, false);
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
