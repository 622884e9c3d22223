// SPDX-License-Identifier: MIT
/*
 * The frame pipe (src/artifact/frame_pipe.c): frames come out in the order they went in,
 * whatever the number of compressing workers and whichever finishes first; a failed write is
 * reported (never a silent drop) and leaves the file a whole-frame prefix of the stream.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <cmocka.h>
#include <zstd.h>
#include "artifact/artifact.h"
#include "artifact/frame_pipe.h"

static char path[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/test_frame_pipe.XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return unlink(path);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Frame k's content: its length and bytes follow from k alone. Every third frame is random
 * (incompressible), the others repeat a pattern; some are empty. */
static size_t frame_len(unsigned k, size_t cap)
{
	uint64_t s = 0x9e3779b97f4a7c15ull * (k + 1);

	return k % 7 == 3 ? 0 : (size_t)(xorshift(&s) % cap);
}

static void frame_fill(unsigned k, uint8_t *buf, size_t len)
{
	uint64_t s = 0x2545f4914f6cdd1dull * (k + 1);

	for (size_t i = 0; i < len; i++)
		buf[i] = k % 3 == 0 ? (uint8_t)xorshift(&s) : (uint8_t)("frame"[i % 5] + k);
}

/* The whole file, mapped private (munmap with its length). */
static uint8_t *map_file(size_t *len)
{
	struct stat st;
	void *m;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	*len = (size_t)st.st_size;
	m = mmap(NULL, *len ? *len : 1, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(m != MAP_FAILED);
	close(fd);
	return m;
}

/* The file must be exactly frames 0..n-1, each one zstd frame holding frame k's content, of
 * lens[k] bytes (lens NULL: frame_len). */
static void check_lens(unsigned n, size_t cap, const size_t *lens)
{
	size_t len, off = 0;
	uint8_t *file = map_file(&len), *want = malloc(cap + 1), *got = malloc(cap + 1);

	assert_non_null(want);
	assert_non_null(got);
	for (unsigned k = 0; k < n; k++) {
		size_t fs = ZSTD_findFrameCompressedSize(file + off, len - off);
		size_t wl = lens ? lens[k] : frame_len(k, cap), gl;

		assert_false(ZSTD_isError(fs));
		assert_int_equal(ZSTD_getFrameContentSize(file + off, fs), wl);
		gl = ZSTD_decompress(got, cap + 1, file + off, fs);
		assert_int_equal(gl, wl);
		frame_fill(k, want, wl);
		if (memcmp(got, want, wl))
			fail_msg("frame %u: content differs (out of order?)", k);
		off += fs;
	}
	assert_int_equal(off, len);
	free(got);
	free(want);
	munmap(file, len ? len : 1);
}

static void check_file(unsigned n, size_t cap)
{
	check_lens(n, cap, NULL);
}

static void run_frames(unsigned workers, unsigned n, size_t cap, int level,
		       struct frame_pipe_stats *st)
{
	struct frame_pipe *p;
	int fd = open(path, O_WRONLY | O_TRUNC);
	uint64_t events = 0;

	assert_true(fd >= 0);
	assert_int_equal(frame_pipe__new(&p, level, cap, workers), 0);
	for (unsigned k = 0; k < n; k++) {
		size_t l = frame_len(k, cap);

		frame_fill(k, frame_pipe__buf(p), l);
		assert_int_equal(frame_pipe__submit(p, fd, l, k + 1), 0);
		events += k + 1;
	}
	assert_int_equal(frame_pipe__finish(p), 0);
	frame_pipe__stats(p, st);
	assert_int_equal(st->frames, n);
	assert_int_equal(st->events_written, events);
	assert_int_equal(frame_pipe__bytes(p), st->bytes);
	frame_pipe__free(p);
	close(fd);
}

static void test_order(void **state)
{
	static const unsigned workers[] = {0, 1, 2, 3, 8};
	struct frame_pipe_stats st;

	(void)state;
	for (size_t i = 0; i < sizeof(workers) / sizeof(workers[0]); i++) {
		run_frames(workers[i], 300, 64 << 10, ARTIFACT_DEFAULT_LEVEL, &st);
		check_file(300, 64 << 10);
		print_message("%u workers: %" PRIu64 " of 300 frames done after a later one, "
			      "%" PRIu64 " waits for a buffer\n",
			      workers[i], st.reordered, st.waits);
	}
}

/*
 * Frames finishing out of order must still be written in order. Even frames are 8 MiB of
 * random bytes at level 6 (tens of ms each), odd ones are empty (microseconds): with two
 * workers, the empty frame started second is done long before the big one started first.
 * The test asserts that this happened at least once, so that it checks what it says.
 */
static void test_reorder(void **state)
{
	const size_t cap = 8 << 20;
	struct frame_pipe *p;
	struct frame_pipe_stats st;
	uint8_t *rnd = malloc(cap), *got = malloc(cap), *file;
	uint64_t s = 42;
	size_t len, off = 0;
	int fd = open(path, O_WRONLY | O_TRUNC);

	(void)state;
	assert_true(fd >= 0);
	assert_non_null(rnd);
	assert_non_null(got);
	for (size_t i = 0; i < cap; i += 8) {
		uint64_t v = xorshift(&s);

		memcpy(rnd + i, &v, 8);
	}
	assert_int_equal(frame_pipe__new(&p, 6, cap, 2), 0);
	for (unsigned k = 0; k < 16; k++) {
		size_t l = k % 2 ? 0 : cap;
		uint8_t *b = frame_pipe__buf(p);

		memcpy(b, rnd, l);
		if (l)
			b[0] = (uint8_t)k; /* tells the big frames apart */
		assert_int_equal(frame_pipe__submit(p, fd, l, k), 0);
	}
	assert_int_equal(frame_pipe__finish(p), 0);
	frame_pipe__stats(p, &st);
	frame_pipe__free(p);
	close(fd);
	print_message("%" PRIu64 " of 16 frames done after a later one\n", st.reordered);
	assert_true(st.reordered >= 1);

	file = map_file(&len);
	for (unsigned k = 0; k < 16; k++) {
		size_t fs = ZSTD_findFrameCompressedSize(file + off, len - off);
		size_t l = k % 2 ? 0 : cap;

		assert_false(ZSTD_isError(fs));
		assert_int_equal(ZSTD_decompress(got, cap, file + off, fs), l);
		if (l) {
			assert_int_equal(got[0], k);
			assert_memory_equal(got + 1, rnd + 1, l - 1);
		}
		off += fs;
	}
	assert_int_equal(off, len);
	munmap(file, len ? len : 1);
	free(got);
	free(rnd);
}

/* Every write fails: the error comes back from submit (sooner or later) and from finish, for
 * every number of workers; nothing is counted as written. */
static void test_enospc(void **state)
{
	(void)state;
	if (access("/dev/full", W_OK))
		skip();
	for (unsigned workers = 0; workers <= 3; workers++) {
		struct frame_pipe_stats st;
		struct frame_pipe *p;
		int fd = open("/dev/full", O_WRONLY), seen = 0;

		assert_true(fd >= 0);
		assert_int_equal(frame_pipe__new(&p, ARTIFACT_DEFAULT_LEVEL, 4096, workers), 0);
		for (unsigned k = 0; k < 50; k++) {
			int rc;

			frame_fill(k, frame_pipe__buf(p), frame_len(k, 4096));
			rc = frame_pipe__submit(p, fd, frame_len(k, 4096), 1);
			if (rc) {
				assert_int_equal(rc, -ENOSPC);
				seen = 1;
			} else {
				assert_false(seen); /* sticky: once reported, always reported */
			}
		}
		assert_int_equal(frame_pipe__finish(p), -ENOSPC);
		assert_int_equal(frame_pipe__finish(p), -ENOSPC);
		frame_pipe__stats(p, &st);
		assert_int_equal(st.frames, 0);
		assert_int_equal(st.events_written, 0);
		assert_int_equal(st.bytes, 0);
		frame_pipe__free(p);
		close(fd);
	}
}

/*
 * A file that stops growing midway (RLIMIT_FSIZE: EFBIG, as a full disk gives ENOSPC): the
 * writer reports the error at close, and the file holds whole frames only, each event in
 * order; the events past them are lost and said to be, not silently.
 */
static void test_writer_short_file(void **state)
{
	struct rlimit old, lim;
	void (*old_handler)(int);

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	old_handler = signal(SIGXFSZ, SIG_IGN);
	for (unsigned workers = 0; workers <= 2; workers++) {
		struct artifact_writer *w;
		struct artifact_reader *r;
		struct mt_event ev;
		unsigned n = 20000, got = 0, refused = 0;
		uint64_t written;
		struct stat st;
		int rc;

		assert_int_equal(artifact_writer__open(&w, path, ARTIFACT_DEFAULT_LEVEL, 256), 0);
		assert_int_equal(artifact_writer__set_workers(w, workers), 0);
		lim = old;
		lim.rlim_cur = 40000; /* bytes: a few frames of 256 events, then EFBIG */
		assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
		for (unsigned i = 0; i < n; i++) {
			ev = (struct mt_event){.type = MT_EV_MALLOC, .pid = 7, .tid = 8,
					       .ts = 1000000ull + i * 7919ull,
					       .addr = 0x7f0000000000ull + i * 48ull, .size = i};
			rc = artifact_writer__write(w, &ev);
			if (rc) {
				assert_int_equal(rc, -EFBIG);
				refused++;
			}
		}
		assert_int_equal(artifact_writer__flush(w), -EFBIG);
		written = artifact_writer__events_written(w);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal((uint64_t)st.st_size, artifact_writer__bytes(w));
		assert_int_equal(artifact_writer__close(w), -EFBIG);
		assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
		assert_true(refused > 0); /* the writer said so before close, too */

		assert_int_equal(artifact_reader__open(&r, path), 0);
		while ((rc = artifact_reader__next(r, &ev)) == 1) {
			assert_int_equal(ev.size, got);
			assert_int_equal(ev.addr, 0x7f0000000000ull + got * 48ull);
			got++;
		}
		assert_int_equal(rc, 0); /* ends cleanly: no partial frame */
		assert_int_equal(got % 256, 0);
		assert_int_equal(got, written); /* what the writer says the file holds */
		assert_true(got > 0 && got < n);
		print_message("%u workers: %u of %u events in whole frames before EFBIG\n",
			      workers, got, n);
		artifact_reader__free(r);
	}
	signal(SIGXFSZ, old_handler);
}

/* Threads of this process, as the kernel lists them (not the pipe's own count). */
static unsigned nthreads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/*
 * Waits until the kernel lists n threads, then checks it. pthread_join returns when the
 * kernel clears the thread's tid (mm_release, early in exit); the task leaves
 * /proc/self/task only later, when exit_notify releases it. So after a join the listing can
 * still hold the joined threads for a moment (a third of the runs on 2 loaded cores): wait
 * for it. A thread that never exits still fails here, after 10 s.
 */
static void expect_threads(unsigned n)
{
	for (int ms = 0; ms < 10000 && nthreads() > n; ms++)
		usleep(1000);
	assert_int_equal(nthreads(), n);
}

static size_t lazy_lens[40];

/* Submits frame k (frame_fill's content) with length l (last: submit_last). */
static void submit_k(struct frame_pipe *p, int fd, unsigned k, size_t l, bool last)
{
	lazy_lens[k] = l;
	frame_fill(k, frame_pipe__buf(p), l);
	if (last)
		assert_int_equal(frame_pipe__submit_last(p, fd, l, 1), 0);
	else
		assert_int_equal(frame_pipe__submit(p, fd, l, 1), 0);
}

#define LAZY_CAP (4 * FRAME_PIPE_INLINE_MAX)

/* A pipe of LAZY_CAP frames on the test file; no thread starts. Returns the file's fd. */
static int lazy_open(struct frame_pipe **p, unsigned workers, unsigned base)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	assert_true(fd >= 0);
	assert_int_equal(frame_pipe__new(p, ARTIFACT_DEFAULT_LEVEL, LAZY_CAP, workers), 0);
	assert_int_equal(nthreads(), base);
	return fd;
}

/* Finishes and frees p: n frames written, no thread left, each frame as submitted. */
static void lazy_close(struct frame_pipe *p, int fd, unsigned n, unsigned base)
{
	struct frame_pipe_stats st;

	assert_int_equal(frame_pipe__finish(p), 0);
	expect_threads(base);
	frame_pipe__stats(p, &st);
	assert_int_equal(st.frames, n);
	frame_pipe__free(p);
	close(fd);
	check_lens(n, LAZY_CAP, lazy_lens);
}

/*
 * The workers start lazily: not at new, not for a frame the caller waits for (submit_last),
 * not for a small first frame; a big first frame or a second frame starts all of them. The
 * frames compressed on the caller's thread and those handed off come out in order.
 */
static void test_lazy_start(void **state)
{
	unsigned base = 1; /* this process's main thread: earlier tests' workers are gone */
	struct frame_pipe *p;
	int fd;

	(void)state;
	expect_threads(base);
	/* a short run: one frame, at close */
	fd = lazy_open(&p, 3, base);
	submit_k(p, fd, 0, LAZY_CAP, true);
	assert_int_equal(nthreads(), base);
	assert_int_equal(frame_pipe__sync(p), 0);
	lazy_close(p, fd, 1, base);

	/* a small first frame stays here; the second starts the workers; the last goes to them */
	fd = lazy_open(&p, 3, base);
	submit_k(p, fd, 0, FRAME_PIPE_INLINE_MAX - 1, false);
	assert_int_equal(nthreads(), base);
	submit_k(p, fd, 1, 10, false);
	assert_int_equal(nthreads(), base + 3);
	for (unsigned k = 2; k < 40; k++)
		submit_k(p, fd, k, k * 997 % LAZY_CAP, k == 39);
	lazy_close(p, fd, 40, base);

	/* a big first frame starts them at once */
	fd = lazy_open(&p, 2, base);
	submit_k(p, fd, 0, FRAME_PIPE_INLINE_MAX, false);
	assert_int_equal(nthreads(), base + 2);
	lazy_close(p, fd, 1, base);

	/* the writer: a run shorter than one frame starts no thread, its events are all there */
	{
		struct artifact_writer *w;
		struct artifact_reader *r;
		struct mt_event ev = {.type = MT_EV_MALLOC, .pid = 1, .tid = 1, .size = 8};
		unsigned got = 0;

		assert_int_equal(artifact_writer__open(&w, path, ARTIFACT_DEFAULT_LEVEL, 0), 0);
		assert_int_equal(artifact_writer__set_workers(w, 2), 0);
		for (unsigned i = 0; i < 500; i++) {
			ev.ts = ev.addr = 1000 + i;
			assert_int_equal(artifact_writer__write(w, &ev), 0);
		}
		assert_int_equal(artifact_writer__flush(w), 0);
		assert_int_equal(nthreads(), base);
		assert_int_equal(artifact_writer__events_written(w), 500);
		assert_int_equal(artifact_writer__close(w), 0);
		assert_int_equal(artifact_reader__open(&r, path), 0);
		while (artifact_reader__next(r, &ev) == 1)
			assert_int_equal(ev.ts, 1000 + got++);
		assert_int_equal(got, 500);
		assert_int_equal(artifact_reader__frames(r), 1);
		artifact_reader__free(r);
	}
}

/*
 * A limit on the workers that compress (frame_pipe__set_active, what memtrack track sets while
 * the tree runs): no more threads start than allowed, one alone compresses in order; raising
 * the limit starts the others at once and the frames queued before and after come out in order.
 */
static void test_active(void **state)
{
	unsigned base = 1;
	struct frame_pipe_stats st;
	struct frame_pipe *p;
	int fd;

	(void)state;
	expect_threads(base);
	fd = lazy_open(&p, 3, base);
	assert_int_equal(frame_pipe__set_active(p, 0), -EINVAL);
	assert_int_equal(frame_pipe__set_active(p, 1), 0);
	submit_k(p, fd, 0, FRAME_PIPE_INLINE_MAX, false); /* big: starts the workers allowed */
	assert_int_equal(nthreads(), base + 1);
	for (unsigned k = 1; k < 20; k++)
		submit_k(p, fd, k, k * 1237 % LAZY_CAP, false);
	assert_int_equal(frame_pipe__sync(p), 0);
	frame_pipe__stats(p, &st);
	assert_int_equal(st.threads, 1);
	assert_int_equal(st.frames, 20);
	assert_int_equal(st.reordered, 0); /* one worker takes the oldest frame first */
	assert_int_equal(nthreads(), base + 1);

	assert_int_equal(frame_pipe__set_active(p, 2), 0); /* running: the second starts now */
	assert_int_equal(nthreads(), base + 2);
	assert_int_equal(frame_pipe__set_active(p, 1), -EBUSY);
	assert_int_equal(frame_pipe__set_active(p, 64), 0); /* more than there are: all three */
	assert_int_equal(nthreads(), base + 3);
	for (unsigned k = 20; k < 40; k++)
		submit_k(p, fd, k, k * 1237 % LAZY_CAP, k == 39);
	frame_pipe__stats(p, &st);
	assert_int_equal(st.threads, 3);
	lazy_close(p, fd, 40, base);

	/* a limit set before the start holds for the first start too; none on a pipe without
	 * workers, where the caller compresses */
	fd = lazy_open(&p, 3, base);
	assert_int_equal(frame_pipe__set_active(p, 2), 0);
	submit_k(p, fd, 0, 10, false);
	submit_k(p, fd, 1, 10, false); /* a second frame starts them */
	assert_int_equal(nthreads(), base + 2);
	lazy_close(p, fd, 2, base);
	fd = lazy_open(&p, 0, base);
	assert_int_equal(frame_pipe__set_active(p, 5), 0);
	submit_k(p, fd, 0, LAZY_CAP, false);
	assert_int_equal(nthreads(), base);
	lazy_close(p, fd, 1, base);

	/* the policy: one CPU left to the program, at least one worker */
	assert_int_equal(artifact__run_workers(0), 0);
	assert_int_equal(artifact__run_workers(1), 1);
	assert_int_equal(artifact__run_workers(2), 1);
	assert_int_equal(artifact__run_workers(8), 7);
}

/* Pages [first, last) of buf that are resident, per mincore (anonymous: mapped). */
static unsigned resident(const uint8_t *buf, size_t from, size_t to)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uintptr_t a = ((uintptr_t)buf + from + pg - 1) & ~(pg - 1), b = ((uintptr_t)buf + to) & ~(pg - 1);
	unsigned char vec[1024];
	unsigned n = 0;

	assert_true(b >= a && (b - a) / pg <= sizeof(vec));
	if (b == a)
		return 0;
	assert_int_equal(mincore((void *)a, b - a, vec), 0);
	for (size_t i = 0; i < (b - a) / pg; i++)
		n += vec[i] & 1;
	return n;
}

/* Whole pages in [buf, buf + n): what resident() looks at (buf is rarely page-aligned) */
static unsigned whole(const uint8_t *buf, size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (unsigned)(((((uintptr_t)buf + n) & ~(pg - 1)) -
			   (((uintptr_t)buf + pg - 1) & ~(pg - 1))) /
			  pg);
}

/*
 * The frame buffers are mapped ahead of the encoder (frame_pipe__populate): what was asked is
 * resident after the call and nothing past it; the extent stays with the buffer; the writer
 * keeps it ahead of what it encodes, and the frames are as without it.
 */
static void test_populate(void **state)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), cap = 2u << 20;
	struct frame_pipe *p;
	uint8_t *buf;

	(void)state;
	assert_int_equal(frame_pipe__new(&p, ARTIFACT_DEFAULT_LEVEL, cap, 0), 0);
	buf = frame_pipe__buf(p);
	{
		/* malloc may hand back memory an earlier test touched (its mmap threshold grows
		 * with frees): its whole pages dropped, as in a fresh mapping */
		uintptr_t a = ((uintptr_t)buf + pg - 1) & ~(pg - 1);

		assert_int_equal(madvise((void *)a, (((uintptr_t)buf + cap) & ~(pg - 1)) - a,
					 MADV_DONTNEED),
				 0);
	}
	assert_int_equal(resident(buf, 0, cap), 0);
	assert_int_equal(frame_pipe__populate(p, 0), 0);
	assert_int_equal(frame_pipe__populate(p, 64 * pg), 64 * pg);
	assert_int_equal(resident(buf, 0, 64 * pg), whole(buf, 64 * pg));
	assert_int_equal(resident(buf, 64 * pg, cap), 0);
	assert_int_equal(frame_pipe__populate(p, 10), 64 * pg); /* already */
	assert_int_equal(frame_pipe__populate(p, 2 * cap), cap);
	assert_int_equal(resident(buf, 0, cap), whole(buf, cap));
	frame_pipe__free(p);

	/* the writer: a frame's worth of events, the buffer mapped ahead, the events all there */
	{
		struct artifact_writer *w;
		struct artifact_reader *r;
		struct mt_event ev[256] = {0};
		uint64_t counts[MT_EV_TYPE_MAX] = {0};
		unsigned got = 0;
		int err;

		for (unsigned i = 0; i < 256; i++)
			ev[i] = (struct mt_event){.type = MT_EV_MALLOC, .pid = 1, .tid = 1, .size = i};
		assert_int_equal(artifact_writer__open(&w, path, ARTIFACT_DEFAULT_LEVEL, 4096), 0);
		for (unsigned k = 0; k < 40; k++) {
			for (unsigned i = 0; i < 256; i++)
				ev[i].ts = ev[i].addr = 1 + k * 256 + i;
			assert_int_equal(artifact_writer__write_many(w, ev, 256, counts, &err), 256);
			assert_int_equal(err, 0);
		}
		assert_int_equal(artifact_writer__close(w), 0);
		assert_int_equal(counts[MT_EV_MALLOC], 40 * 256);
		assert_int_equal(artifact_reader__open(&r, path), 0);
		while (artifact_reader__next(r, &ev[0]) == 1)
			assert_int_equal(ev[0].ts, 1 + got++);
		assert_int_equal(got, 40 * 256);
		artifact_reader__free(r);
	}
}

static void check_empty_frame(void)
{
	size_t len;
	uint8_t *file = map_file(&len);

	assert_true(len > 0);
	assert_int_equal(ZSTD_findFrameCompressedSize(file, len), len);
	assert_int_equal(ZSTD_getFrameContentSize(file, len), 0);
	munmap(file, len ? len : 1);
}

static void test_set_workers(void **state)
{
	struct artifact_writer *w;
	struct mt_event ev = {.type = MT_EV_FREE, .pid = 1, .tid = 1, .ts = 1, .addr = 1};

	(void)state;
	assert_int_equal(artifact_writer__open(&w, path, ARTIFACT_DEFAULT_LEVEL, 0), 0);
	assert_int_equal(artifact_writer__set_workers(w, 2), 0);
	assert_int_equal(artifact_writer__set_workers(w, 0), 0);
	assert_int_equal(artifact_writer__set_workers(w, FRAME_PIPE_MAX_WORKERS + 1), -EINVAL);
	assert_int_equal(artifact_writer__set_workers(w, 1), 0);
	assert_int_equal(artifact_writer__write(w, &ev), 0);
	assert_int_equal(artifact_writer__set_workers(w, 2), -EBUSY);
	assert_int_equal(artifact_writer__close(w), 0);
	/* an empty artifact with workers still gets its one empty frame */
	assert_int_equal(artifact_writer__open(&w, path, ARTIFACT_DEFAULT_LEVEL, 0), 0);
	assert_int_equal(artifact_writer__set_workers(w, 2), 0);
	assert_int_equal(artifact_writer__close(w), 0);
	check_empty_frame();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_reorder),
		cmocka_unit_test(test_enospc),
		cmocka_unit_test(test_writer_short_file),
		cmocka_unit_test(test_set_workers),
		cmocka_unit_test(test_lazy_start),
		cmocka_unit_test(test_active),
		cmocka_unit_test(test_populate),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
