/* SPDX-License-Identifier: MIT */
/*
 * The codspeed-memtrack artifact: `<root_pid>.MemtrackArtifact.msgpack`.
 * Independent zstd frames written back to back; each frame decompresses to msgpack maps back to
 * back (no header, no count). Map keys, in order: pid, tid, timestamp, addr, type, then the
 * variant's fields; integers in their smallest encoding; optional fields omitted.
 * No libbpf in here: the writer takes `struct mt_event` records, the reader gives them back.
 */
#ifndef MEMTRACK_ARTIFACT_H
#define MEMTRACK_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/events.h"

#define ARTIFACT_SUFFIX ".MemtrackArtifact.msgpack"
/* zstd level. Their writer uses -5; any level decodes the same (independent frames). -3 costs
 * the same CPU per byte here (within +-10% on a storm's, sqlite3's and python3's records) and
 * writes 30-37% fewer bytes (README: "The user side alone"). */
#define ARTIFACT_DEFAULT_LEVEL (-3)
#define ARTIFACT_DEFAULT_FRAME_EVENTS 65536
/* artifact_writer__cut's first threshold, bytes of msgpack (~2,000 records): a frame worth a
 * hand-off (more than frame_pipe.h's FRAME_PIPE_INLINE_MAX). */
#define ARTIFACT_CUT_BYTES (128u << 10)

/* "Malloc", "Rss", ...; NULL for control records and unknown types. */
const char *artifact__type_name(uint32_t type);
/* Inverse of artifact__type_name; MT_EV_NONE when unknown. */
uint32_t artifact__type_from_name(const char *name, size_t len);

/* Encode one event as a msgpack map into buf; returns bytes written, or -ENOSPC / -EINVAL
 * (control record). 128 bytes always suffice. */
int artifact__encode(const struct mt_event *ev, void *buf, size_t cap);

struct artifact_writer;
/* Creates (truncates) path. level: zstd level; frame_events: events per frame (0 = default). */
int artifact_writer__open(struct artifact_writer **w, const char *path, int level,
			  unsigned frame_events);
/* The same on a file the caller created (outdir__create); the writer owns fd, even on error. */
int artifact_writer__open_fd(struct artifact_writer **w, int fd, int level,
			     unsigned frame_events);
/* 0, -EINVAL for a control/unknown record (the writer goes on), or the sticky -errno of a
 * failed compression or write (with workers: maybe an earlier frame's). */
int artifact_writer__write(struct artifact_writer *w, const struct mt_event *ev);
/* artifact_writer__write over ev[0..n), stopping at the first refused record: returns how
 * many were accepted, and *err is the refusal (0 when none). counts: MT_EV_TYPE_MAX counters;
 * each record accepted adds one to its type's (counted in the encoding loop: no second pass). */
size_t artifact_writer__write_many(struct artifact_writer *w, const struct mt_event *ev,
				   size_t n, uint64_t *counts, int *err);
/* Compress frames on `workers` threads while the caller encodes the next one (0: on the
 * caller's thread, the default). Frames are written in order either way; the caller waits when
 * workers + 1 frames are in flight. The threads start at the first full frame (frame_pipe.h):
 * a run that never fills one (events < frame_events) starts none, its one frame is compressed
 * at close on the caller's thread. Only before the first write; -EBUSY after. */
int artifact_writer__set_workers(struct artifact_writer *w, unsigned workers);
/* At most n of those workers compress at once from now on (frame_pipe__set_active): raising n
 * later starts the others. Only on the writing thread; 0 or -errno (-EBUSY: lower than the
 * number running). */
int artifact_writer__set_active_workers(struct artifact_writer *w, unsigned n);
/* What `memtrack track` gives set_workers: one per online CPU (0 on a single CPU). */
unsigned artifact__default_workers(void);
/* Of `workers`, how many compress while the tracked tree runs: one CPU is left to the program
 * (one less, but at least one). All of them compress once the tree has exited. */
unsigned artifact__run_workers(unsigned workers);
/* Frames handed to compression so far (written or in flight). */
uint64_t artifact_writer__frames(const struct artifact_writer *w);
/* Bytes written so far and events accepted. */
uint64_t artifact_writer__events(const struct artifact_writer *w);
uint64_t artifact_writer__bytes(const struct artifact_writer *w);
/* Events in the frames written whole: what the file holds. After a write failure (a full disk)
 * the partial frame is cut off, so this is less than artifact_writer__events(). With workers,
 * it lags behind until a flush. */
uint64_t artifact_writer__events_written(const struct artifact_writer *w);
/* Writes the events not yet written as a last frame (an empty artifact still gets one frame),
 * and waits until every frame in flight is written; later writes start a new frame. Returns 0
 * or the first failure's -errno. */
int artifact_writer__flush(struct artifact_writer *w);
/* For a caller with time to spare while the records' source goes on (memtrack's event loop,
 * after a drain): with workers (set_workers) and none busy, hands the frame being filled to
 * them as a frame of its own once it holds ARTIFACT_CUT_BYTES, a threshold that doubles at each
 * cut. A short run's records are then compressed while it runs, not after it exited (ls -la
 * of a big folder: ~400 KiB of msgpack, ~1 ms of zstd on the path to memtrack's exit), and a
 * long run gets at most log2(frame bytes / ARTIFACT_CUT_BYTES) = 6 frames more (their size
 * costs: the same artifact size within 1% on sqlite3's records). Without workers, or below the
 * threshold, nothing. NULL-safe; 0 or the sticky -errno. */
int artifact_writer__cut(struct artifact_writer *w);
/* Flushes, stops the workers, fsyncs nothing, closes. NULL-safe. Returns 0 or -errno of the
 * first failure seen since open: after one, no later frame is written. */
int artifact_writer__close(struct artifact_writer *w);

struct artifact_reader;
int artifact_reader__open(struct artifact_reader **r, const char *path);
/* Open over an in-memory copy of a whole file (tests, fuzzing). The buffer is copied. */
int artifact_reader__open_mem(struct artifact_reader **r, const void *data, size_t len);
/* 1: *ev filled; 0: clean end of stream; -EBADMSG: undecodable value (stream truncated or
 * unknown variant; artifact_reader__error() says which); other -errno on I/O errors. */
int artifact_reader__next(struct artifact_reader *r, struct mt_event *ev);
const char *artifact_reader__error(const struct artifact_reader *r);
uint64_t artifact_reader__frames(const struct artifact_reader *r);
void artifact_reader__free(struct artifact_reader *r);

#endif
