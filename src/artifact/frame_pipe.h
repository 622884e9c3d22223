/* SPDX-License-Identifier: MIT */
/*
 * The artifact writer's back end: msgpack frames in, independent zstd frames out to a file, in
 * the order they came in. With no workers each frame is compressed and written on the caller's
 * thread when it is submitted (the writer's historical behaviour). With N workers, frames are
 * compressed by N threads at once (each its own ZSTD_CCtx, reused) while the caller fills the
 * next buffer; a frame is written only after every frame submitted before it, by whichever
 * worker finishes the frame that is next in line. The threads start at the first frame worth
 * handing off (a big one, or a second one): before that, and for a short run's only frame,
 * the caller compresses, as with no workers. The caller waits for a free buffer when all
 * are in flight (back-pressure), it never drops one.
 *
 * Errors are sticky: after the first failed compression or write, nothing more is written (the
 * file stays a prefix of the stream, frame-aligned) and every later call returns the error.
 */
#ifndef MEMTRACK_FRAME_PIPE_H
#define MEMTRACK_FRAME_PIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FRAME_PIPE_MAX_WORKERS 64
/* Bytes of a first frame compressed on the caller's thread rather than starting the workers:
 * 64 KiB of msgpack is ~0.1 ms of zstd -3 here, about a thread start and two hand-offs on an
 * idle machine (more under load). */
#define FRAME_PIPE_INLINE_MAX (64u << 10)

struct frame_pipe;

struct frame_pipe_stats {
	uint64_t frames;	 /* frames written */
	uint64_t bytes;		 /* compressed bytes written */
	uint64_t events_written; /* events in the frames written */
	uint64_t waits;		 /* submits that waited for a free buffer */
	uint64_t reordered;	 /* frames done compressing after a later frame was */
	unsigned threads;	 /* workers started so far */
};

/* frame_cap: bytes of one uncompressed frame. level: zstd level (-EINVAL if zstd refuses it).
 * workers: compressing threads; 0 compresses on the caller's thread. No thread starts here:
 * the workers start at the first frame handed off (frame_pipe__submit says when). */
int frame_pipe__new(struct frame_pipe **pp, int level, size_t frame_cap, unsigned workers);
/* At most n (1..workers; more is workers) of the workers compress at once, from now on: the
 * others do not start. Raising n starts them if the first ones run already; lowering it below
 * the number running is -EBUSY. Only on the thread that submits. 0 (no workers: a no-op) or
 * -errno. */
int frame_pipe__set_active(struct frame_pipe *p, unsigned n);
/* The buffer to fill (frame_cap bytes); valid until the next submit. */
uint8_t *frame_pipe__buf(const struct frame_pipe *p);
/* Maps the buffer's first `upto` bytes (at most frame_cap) in one system call (why:
 * common/populate.h; a frame of msgpack touches ~1,000 pages), and returns how many are mapped
 * now (frame_cap when the kernel cannot: pages then fault in one by one). The buffers are kept
 * and reused, and so is what was mapped of them. upto 0: what is mapped already. */
size_t frame_pipe__populate(struct frame_pipe *p, size_t upto);
/* Hands the buffer over as one frame of `events` events and `len` bytes (len may be 0: an
 * empty frame), to be written to fd (borrowed: open until finish). Returns 0 or the sticky
 * error, -errno, which may be an earlier frame's. frame_pipe__buf is then the next frame's
 * buffer (the same one when this frame was compressed on the caller's thread). The workers
 * start here unless none was asked for, or this is the first frame and it is smaller than
 * FRAME_PIPE_INLINE_MAX; if not one thread can start, the caller compresses. */
int frame_pipe__submit(struct frame_pipe *p, int fd, size_t len, unsigned events);
/* The same for a frame the caller is about to wait for (frame_pipe__sync follows): while no
 * worker runs it is compressed and written here, and none starts for it. */
int frame_pipe__submit_last(struct frame_pipe *p, int fd, size_t len, unsigned events);
/* Waits until every submitted frame is written (or dropped after an error). 0 or the error. */
int frame_pipe__sync(struct frame_pipe *p);
/* frame_pipe__sync, then stops the workers. Returns 0 or the first error. Submitting after
 * this is not allowed. */
int frame_pipe__finish(struct frame_pipe *p);
/* Every frame submitted is written: none waits for a worker or is being compressed. */
bool frame_pipe__idle(struct frame_pipe *p);
/* A consistent snapshot; safe while workers run. */
void frame_pipe__stats(struct frame_pipe *p, struct frame_pipe_stats *st);
/* Bytes written so far, without taking the lock (may lag a frame behind). */
uint64_t frame_pipe__bytes(const struct frame_pipe *p);
/* Finishes if needed, then frees. NULL-safe. */
void frame_pipe__free(struct frame_pipe *p);

#endif
