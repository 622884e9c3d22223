// SPDX-License-Identifier: MIT
/*
 * Artifact format tests. Expected bytes are derived by hand from the msgpack spec: map header
 * 0x80|n, fixstr 0xa0|len, positive fixint < 0x80, uint8 0xcc, uint16 0xcd, uint32 0xce,
 * uint64 0xcf, negative fixint 0xe0..0xff, int8 0xd0, int16 0xd1, int32 0xd2, int64 0xd3.
 * Literals are split ("\xa4" "addr") so hex escapes never swallow a following letter.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <msgpack.h>
#include <zstd.h>
#include "artifact/artifact.h"
#include "../lib/mt_tmpdir.h"

#define FIXTURE "../shared/testdata/realloc.MemtrackArtifact.msgpack"

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	return mt_tmpdir_make(tmpdir, sizeof(tmpdir), "artifact");
}

static int teardown(void **state)
{
	(void)state;
	return mt_tmpdir_remove(tmpdir);
}

static const char *tpath(const char *name)
{
	static char p[256];

	snprintf(p, sizeof(p), "%s/%s", tmpdir, name);
	return p;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc(st.st_size + 1);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, st.st_size), st.st_size);
	close(fd);
	*len = st.st_size;
	return buf;
}

static void spit(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

/* Common head of an event with pid 1, tid 2, timestamp 3, addr 4 (after the map header). */
#define HEAD \
	"\xa3" "pid" "\x01" "\xa3" "tid" "\x02" "\xa9" "timestamp" "\x03" \
	"\xa4" "addr" "\x04" "\xa4" "type"

static struct mt_event mk(uint32_t type, uint64_t size)
{
	return (struct mt_event){
		.type = type, .pid = 1, .tid = 2, .ts = 3, .addr = 4, .size = size};
}

static void check_bytes(const struct mt_event *ev, const char *want, size_t wlen)
{
	uint8_t buf[128];
	int n = artifact__encode(ev, buf, sizeof(buf));

	assert_int_equal(n, (int)wlen);
	assert_memory_equal(buf, want, wlen);
}

#define CHECK(ev, lit) check_bytes(&(ev), lit, sizeof(lit) - 1)

static void test_golden_variants(void **state)
{
	struct mt_event ev;

	(void)state;
	ev = mk(MT_EV_MALLOC, 42);
	CHECK(ev, "\x86" HEAD "\xa6" "Malloc" "\xa4" "size" "\x2a");
	ev = mk(MT_EV_CALLOC, 127); /* largest positive fixint */
	CHECK(ev, "\x86" HEAD "\xa6" "Calloc" "\xa4" "size" "\x7f");
	ev = mk(MT_EV_ALIGNED_ALLOC, 128); /* smallest uint8 */
	CHECK(ev, "\x86" HEAD "\xac" "AlignedAlloc" "\xa4" "size" "\xcc\x80");
	ev = mk(MT_EV_MMAP, 255);
	CHECK(ev, "\x86" HEAD "\xa4" "Mmap" "\xa4" "size" "\xcc\xff");
	ev = mk(MT_EV_MUNMAP, 256); /* smallest uint16 */
	CHECK(ev, "\x86" HEAD "\xa6" "Munmap" "\xa4" "size" "\xcd\x01\x00");
	ev = mk(MT_EV_BRK, 65535);
	CHECK(ev, "\x86" HEAD "\xa3" "Brk" "\xa4" "size" "\xcd\xff\xff");
	ev = mk(MT_EV_MALLOC, 65536); /* smallest uint32 */
	CHECK(ev, "\x86" HEAD "\xa6" "Malloc" "\xa4" "size" "\xce\x00\x01\x00\x00");
	ev = mk(MT_EV_MALLOC, 0xffffffffull);
	CHECK(ev, "\x86" HEAD "\xa6" "Malloc" "\xa4" "size" "\xce\xff\xff\xff\xff");
	ev = mk(MT_EV_MALLOC, 1ull << 32); /* smallest uint64 */
	CHECK(ev, "\x86" HEAD "\xa6" "Malloc" "\xa4" "size" "\xcf\x00\x00\x00\x01\x00\x00\x00\x00");
	ev = mk(MT_EV_MALLOC, 0);
	CHECK(ev, "\x86" HEAD "\xa6" "Malloc" "\xa4" "size" "\x00");

	ev = mk(MT_EV_REALLOC, 42); /* old_addr 0: omitted, five keys + size */
	CHECK(ev, "\x86" HEAD "\xa7" "Realloc" "\xa4" "size" "\x2a");
	ev.old_addr = 0x1000;
	CHECK(ev, "\x87" HEAD "\xa7" "Realloc" "\xa4" "size" "\x2a" "\xa8" "old_addr"
		  "\xcd\x10\x00");

	ev = mk(MT_EV_FREE, 99); /* unit variants ignore size */
	CHECK(ev, "\x85" HEAD "\xa4" "Free");
	ev = mk(MT_EV_EXEC, 0);
	CHECK(ev, "\x85" HEAD "\xa4" "Exec");
	ev = mk(MT_EV_EXIT, 0);
	CHECK(ev, "\x85" HEAD "\xa4" "Exit");

	ev = mk(MT_EV_FORK, 1234);
	CHECK(ev, "\x86" HEAD "\xa4" "Fork" "\xaa" "parent_pid" "\xcd\x04\xd2");

	ev = mk(MT_EV_RSS, 4096);
	ev.aux = MT_RSS_ANON;
	CHECK(ev, "\x87" HEAD "\xa3" "Rss" "\xa6" "member" "\x01" "\xa4" "size" "\xcd\x10\x00");
}

static void test_golden_rmap_delta(void **state)
{
	static const struct {
		int64_t delta;
		const char *enc;
		size_t len;
	} cases[] = {
		{5, "\x05", 1},
		{-1, "\xff", 1},
		{-32, "\xe0", 1}, /* smallest negative fixint */
		{-33, "\xd0\xdf", 2},
		{-128, "\xd0\x80", 2},
		{-129, "\xd1\xff\x7f", 3},
		{-32768, "\xd1\x80\x00", 3},
		{-32769, "\xd2\xff\xff\x7f\xff", 5},
		{-2147483649ll, "\xd3\xff\xff\xff\xff\x7f\xff\xff\xff", 9},
		{200, "\xcc\xc8", 2}, /* positive delta: unsigned forms */
	};
	const char head[] = "\x87" HEAD "\xa4" "Rmap" "\xa6" "member" "\x03" "\xa5" "delta";

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct mt_event ev = mk(MT_EV_RMAP, (uint64_t)cases[i].delta);
		char want[128];

		ev.aux = MT_RSS_SHMEM;
		memcpy(want, head, sizeof(head) - 1);
		memcpy(want + sizeof(head) - 1, cases[i].enc, cases[i].len);
		check_bytes(&ev, want, sizeof(head) - 1 + cases[i].len);
	}
}

static void test_golden_common_fields(void **state)
{
	struct mt_event ev = {.type = MT_EV_FREE,
			      .pid = -1,
			      .tid = 200,
			      .ts = UINT64_MAX,
			      .addr = 0x7fff12345678ull};

	(void)state;
	CHECK(ev, "\x85" "\xa3" "pid" "\xff" "\xa3" "tid" "\xcc\xc8" "\xa9" "timestamp"
		  "\xcf\xff\xff\xff\xff\xff\xff\xff\xff" "\xa4" "addr"
		  "\xcf\x00\x00\x7f\xff\x12\x34\x56\x78" "\xa4" "type" "\xa4" "Free");
	ev.pid = INT32_MAX;
	ev.tid = INT32_MIN;
	ev.ts = 65536;
	ev.addr = 0;
	CHECK(ev, "\x85" "\xa3" "pid" "\xce\x7f\xff\xff\xff" "\xa3" "tid" "\xd2\x80\x00\x00\x00"
		  "\xa9" "timestamp" "\xce\x00\x01\x00\x00" "\xa4" "addr" "\x00" "\xa4" "type"
		  "\xa4" "Free");
}

static void test_encode_limits(void **state)
{
	struct mt_event ev = {.type = MT_EV_REALLOC,
			      .pid = INT32_MIN,
			      .tid = INT32_MIN,
			      .ts = UINT64_MAX,
			      .addr = UINT64_MAX,
			      .size = UINT64_MAX,
			      .old_addr = UINT64_MAX};
	uint8_t buf[256];

	(void)state;
	/* the worst case the writer's frame buffer is sized for */
	assert_int_equal(artifact__encode(&ev, buf, sizeof(buf)), 97);
	assert_int_equal(artifact__encode(&ev, buf, 96), -ENOSPC);
	assert_int_equal(artifact__encode(&ev, buf, 0), -ENOSPC);
	ev.type = MT_EV_CTL_EXEC_STOPPED;
	assert_int_equal(artifact__encode(&ev, buf, sizeof(buf)), -EINVAL);
	ev.type = MT_EV_NONE;
	assert_int_equal(artifact__encode(&ev, buf, sizeof(buf)), -EINVAL);
	ev.type = 14;
	assert_int_equal(artifact__encode(&ev, buf, sizeof(buf)), -EINVAL);
	ev.type = 1000;
	assert_int_equal(artifact__encode(&ev, buf, sizeof(buf)), -EINVAL);
}

/* The reference: the same map through msgpack-c's packers (smallest encodings). */
static size_t ref_encode(const struct mt_event *ev, msgpack_sbuffer *sb)
{
	const char *name = artifact__type_name(ev->type);
	msgpack_packer pk;
	size_t n = 5;

#define KEY(k) (msgpack_pack_str(&pk, strlen(k)), msgpack_pack_str_body(&pk, k, strlen(k)))
	msgpack_sbuffer_clear(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	if (ev->type == MT_EV_RSS || ev->type == MT_EV_RMAP ||
	    (ev->type == MT_EV_REALLOC && ev->old_addr))
		n = 7;
	else if (ev->type != MT_EV_FREE && ev->type != MT_EV_EXEC && ev->type != MT_EV_EXIT)
		n = 6;
	msgpack_pack_map(&pk, n);
	KEY("pid"), msgpack_pack_int32(&pk, ev->pid);
	KEY("tid"), msgpack_pack_int32(&pk, ev->tid);
	KEY("timestamp"), msgpack_pack_uint64(&pk, ev->ts);
	KEY("addr"), msgpack_pack_uint64(&pk, ev->addr);
	KEY("type"), KEY(name);
	if (ev->type == MT_EV_FORK) {
		KEY("parent_pid"), msgpack_pack_uint64(&pk, ev->size);
	} else if (ev->type == MT_EV_RSS) {
		KEY("member"), msgpack_pack_uint32(&pk, ev->aux);
		KEY("size"), msgpack_pack_uint64(&pk, ev->size);
	} else if (ev->type == MT_EV_RMAP) {
		KEY("member"), msgpack_pack_uint32(&pk, ev->aux);
		KEY("delta"), msgpack_pack_int64(&pk, (int64_t)ev->size);
	} else if (n > 5) {
		KEY("size"), msgpack_pack_uint64(&pk, ev->size);
		if (ev->type == MT_EV_REALLOC && ev->old_addr)
			KEY("old_addr"), msgpack_pack_uint64(&pk, ev->old_addr);
	}
#undef KEY
	return sb->size;
}

/* Every integer width boundary, both signs, in every field of every variant: byte for byte
 * what msgpack-c packs. */
static void test_encode_matches_msgpack_c(void **state)
{
	static const int64_t vals[] = {
		0, 1, 31, 32, 127, 128, 255, 256, 65535, 65536, 0xffffffffLL, 0x100000000LL,
		INT64_MAX, -1, -31, -32, -33, -127, -128, -129, -32767, -32768, -32769,
		INT32_MIN + 1LL, INT32_MIN, INT32_MIN - 1LL, INT64_MIN, 0x55555555a2a0LL,
	};
	const size_t nv = sizeof(vals) / sizeof(vals[0]);
	msgpack_sbuffer sb;
	uint8_t buf[128];

	(void)state;
	msgpack_sbuffer_init(&sb);
	for (uint32_t t = MT_EV_MALLOC; t <= MT_EV_RMAP; t++) {
		for (size_t i = 0; i < nv * nv; i++) {
			int64_t a = vals[i % nv], b = vals[i / nv];
			struct mt_event ev = {.type = t, .pid = (int32_t)a, .tid = (int32_t)b,
					      .aux = (uint32_t)b, .ts = (uint64_t)a,
					      .addr = (uint64_t)b, .size = (uint64_t)a,
					      .old_addr = (uint64_t)b};
			size_t want = ref_encode(&ev, &sb);
			int n = artifact__encode(&ev, buf, sizeof(buf));

			assert_int_equal(n, (int)want);
			assert_memory_equal(buf, sb.data, want);
		}
	}
	msgpack_sbuffer_destroy(&sb);
}

static void test_type_names(void **state)
{
	(void)state;
	for (uint32_t t = MT_EV_MALLOC; t <= MT_EV_RMAP; t++) {
		const char *n = artifact__type_name(t);

		assert_non_null(n);
		assert_int_equal(artifact__type_from_name(n, strlen(n)), t);
	}
	assert_string_equal(artifact__type_name(MT_EV_ALIGNED_ALLOC), "AlignedAlloc");
	assert_null(artifact__type_name(MT_EV_NONE));
	assert_null(artifact__type_name(MT_EV_CTL_EXEC_STOPPED));
	assert_int_equal(artifact__type_from_name("Mall", 4), MT_EV_NONE);
	assert_int_equal(artifact__type_from_name("Mallocx", 7), MT_EV_NONE);
	assert_int_equal(artifact__type_from_name("Malloc", 6), MT_EV_MALLOC);
}

/* Deterministic mix of every variant, with values crossing encoding boundaries. */
static struct mt_event synth(uint32_t i)
{
	static const uint32_t types[] = {MT_EV_MALLOC, MT_EV_CALLOC, MT_EV_REALLOC,
					 MT_EV_ALIGNED_ALLOC, MT_EV_FREE, MT_EV_MMAP,
					 MT_EV_MUNMAP, MT_EV_BRK, MT_EV_FORK, MT_EV_EXEC,
					 MT_EV_EXIT, MT_EV_RSS, MT_EV_RMAP};
	struct mt_event ev = {
		.type = types[i % 13],
		.pid = (int32_t)(1000 + i % 7),
		.tid = (int32_t)(1000 + i % 11),
		.ts = 1000000000ull + i * 997ull,
		.addr = 0x7f0000000000ull + i * 48ull,
	};

	switch (ev.type) {
	case MT_EV_FREE:
	case MT_EV_EXEC:
	case MT_EV_EXIT:
		break;
	case MT_EV_REALLOC:
		ev.size = i * 3;
		ev.old_addr = (i & 1) ? ev.addr - 4096 : 0;
		break;
	case MT_EV_RSS:
		ev.aux = i % MT_RSS_NR;
		ev.size = (uint64_t)i << 12;
		break;
	case MT_EV_RMAP:
		ev.aux = i % MT_RSS_NR;
		ev.size = (uint64_t)((int64_t)(i % 300) - 150);
		break;
	default:
		ev.size = (uint64_t)i * i;
		break;
	}
	return ev;
}

static void assert_event_equal(const struct mt_event *a, const struct mt_event *b)
{
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->pid, b->pid);
	assert_int_equal(a->tid, b->tid);
	assert_int_equal(a->aux, b->aux);
	assert_int_equal(a->ts, b->ts);
	assert_int_equal(a->addr, b->addr);
	assert_int_equal(a->size, b->size);
	assert_int_equal(a->old_addr, b->old_addr);
}

static void write_n(const char *path, uint32_t n, unsigned frame_events)
{
	struct artifact_writer *w;

	assert_int_equal(artifact_writer__open(&w, path, ARTIFACT_DEFAULT_LEVEL, frame_events), 0);
	for (uint32_t i = 0; i < n; i++) {
		struct mt_event ev = synth(i);

		assert_int_equal(artifact_writer__write(w, &ev), 0);
	}
	assert_int_equal(artifact_writer__events(w), n);
	assert_int_equal(artifact_writer__close(w), 0);
}

/* Reads path back: exactly n events, synth(0..n) in order, then a clean end; returns the frames
 * read. */
static uint64_t read_synth(const char *path, uint32_t n)
{
	struct artifact_reader *r;
	struct mt_event ev, want;
	uint64_t frames;
	uint32_t i = 0;
	int rc;

	assert_int_equal(artifact_reader__open(&r, path), 0);
	while ((rc = artifact_reader__next(r, &ev)) == 1) {
		want = synth(i++);
		assert_event_equal(&ev, &want);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(i, n);
	frames = artifact_reader__frames(r);
	assert_int_equal(artifact_reader__next(r, &ev), 0); /* end stays end */
	artifact_reader__free(r);
	return frames;
}

/* Counts the frames of a file and checks each one decompresses on its own. */
static unsigned count_frames(const uint8_t *buf, size_t len)
{
	unsigned frames = 0;

	while (len) {
		size_t fs = ZSTD_findFrameCompressedSize(buf, len);
		unsigned long long cs;
		void *out;

		assert_false(ZSTD_isError(fs));
		cs = ZSTD_getFrameContentSize(buf, fs);
		assert_true(cs != ZSTD_CONTENTSIZE_ERROR && cs != ZSTD_CONTENTSIZE_UNKNOWN);
		out = malloc(cs + 1);
		assert_int_equal(ZSTD_decompress(out, cs + 1, buf, fs), cs);
		free(out);
		buf += fs;
		len -= fs;
		frames++;
	}
	return frames;
}

static void test_roundtrip_frames(void **state)
{
	const char *path = tpath("rt" ARTIFACT_SUFFIX);
	uint8_t *buf;
	size_t len;

	(void)state;
	write_n(path, 1000, 64);
	buf = slurp(path, &len);
	assert_int_equal(count_frames(buf, len), 16); /* ceil(1000 / 64) */
	free(buf);
	assert_int_equal(read_synth(path, 1000), 16);

	/* an exact multiple of frame_events adds no trailing empty frame */
	write_n(path, 128, 64);
	buf = slurp(path, &len);
	assert_int_equal(count_frames(buf, len), 2);
	free(buf);
}

static void test_roundtrip_large(void **state)
{
	const char *path = tpath("big" ARTIFACT_SUFFIX);
	struct artifact_writer *w;
	struct mt_event ev;
	uint32_t n = 200000;

	(void)state;
	/* default frame size: several frames, and many read(2) refills of the input buffer */
	write_n(path, n, 0);
	assert_int_equal(read_synth(path, n), 4); /* 3 full + 1 partial */

	assert_int_equal(artifact_writer__open(&w, path, 3, 0), 0);
	ev = synth(1);
	assert_int_equal(artifact_writer__write(w, &ev), 0);
	assert_int_equal(artifact_writer__bytes(w), 0); /* nothing flushed before close */
	assert_int_equal(artifact_writer__close(w), 0);
}

static void test_empty_artifact(void **state)
{
	const char *path = tpath("empty" ARTIFACT_SUFFIX);
	struct artifact_reader *r;
	struct mt_event ev;
	uint8_t *buf;
	size_t len;

	(void)state;
	write_n(path, 0, 0);
	buf = slurp(path, &len);
	assert_true(len > 0);
	assert_int_equal(ZSTD_findFrameCompressedSize(buf, len), len); /* exactly one frame */
	assert_int_equal(ZSTD_getFrameContentSize(buf, len), 0);
	assert_int_equal(artifact_reader__open_mem(&r, buf, len), 0);
	free(buf);
	assert_int_equal(artifact_reader__next(r, &ev), 0);
	assert_int_equal(artifact_reader__frames(r), 1);
	artifact_reader__free(r);
}

static void test_writer_errors(void **state)
{
	const char *path = tpath("ctl" ARTIFACT_SUFFIX);
	struct mt_event ev = mk(MT_EV_CTL_EXEC_STOPPED, 0);
	struct artifact_writer *w = (void *)1;
	struct artifact_reader *r;

	(void)state;
	assert_int_equal(artifact_writer__close(NULL), 0);
	artifact_reader__free(NULL);
	assert_int_equal(artifact_writer__open(&w, "/nonexistent/dir/x", -5, 0), -ENOENT);
	assert_null(w);
	assert_int_equal(artifact_reader__open(&r, "/nonexistent/dir/x"), -ENOENT);

	assert_int_equal(artifact_writer__open(&w, path, -5, 0), 0);
	assert_int_equal(artifact_writer__write(w, &ev), -EINVAL);
	ev.type = MT_EV_NONE;
	assert_int_equal(artifact_writer__write(w, &ev), -EINVAL);
	assert_int_equal(artifact_writer__events(w), 0);
	ev = mk(MT_EV_MALLOC, 7); /* a rejected record does not stop the writer */
	assert_int_equal(artifact_writer__write(w, &ev), 0);
	assert_int_equal(artifact_writer__events(w), 1);
	assert_int_equal(artifact_writer__close(w), 0);
}

static void test_writer_io_error(void **state)
{
	struct artifact_writer *w;
	struct mt_event ev = mk(MT_EV_MALLOC, 1);

	(void)state;
	if (access("/dev/full", W_OK))
		skip();
	/* every frame write fails with ENOSPC; the first failure sticks and close reports it */
	assert_int_equal(artifact_writer__open(&w, "/dev/full", -5, 2), 0);
	assert_int_equal(artifact_writer__write(w, &ev), 0);
	assert_int_equal(artifact_writer__write(w, &ev), -ENOSPC);
	assert_int_equal(artifact_writer__write(w, &ev), -ENOSPC);
	assert_int_equal(artifact_writer__close(w), -ENOSPC);
}

/* A write that fails partway (a full disk; here the file size limit, which needs no root):
 * the partial frame is cut off, the file decodes cleanly, to exactly events_written events. */
static void test_writer_cut_at_frame(void **state)
{
	const char *path = tpath("cut" ARTIFACT_SUFFIX);
	struct rlimit old, lim = {.rlim_cur = 6000, .rlim_max = RLIM_INFINITY};
	struct artifact_writer *w;
	struct artifact_reader *r;
	struct mt_event ev;
	uint64_t written, n = 0;
	struct stat st;
	int rc = 0;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim.rlim_max = old.rlim_max;
	signal(SIGXFSZ, SIG_IGN); /* EFBIG instead of the signal */
	assert_int_equal(artifact_writer__open(&w, path, -5, 64), 0);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	/* varied addresses and sizes: frames of 64 events compress to a few hundred bytes */
	for (uint64_t i = 0; i < 20000 && !rc; i++) {
		ev = mk(MT_EV_MALLOC, i);
		ev.addr = 0x7f0000000000ull + i * 0x1234567;
		ev.size = i * 2654435761u % 100000;
		rc = artifact_writer__write(w, &ev);
	}
	assert_int_equal(rc, -EFBIG);
	assert_int_equal(artifact_writer__flush(w), -EFBIG);
	written = artifact_writer__events_written(w);
	assert_true(written > 0 && written % 64 == 0);
	assert_true(written < artifact_writer__events(w));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal((uint64_t)st.st_size, artifact_writer__bytes(w)); /* whole frames only */
	assert_int_equal(artifact_writer__close(w), -EFBIG);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(artifact_reader__open(&r, path), 0);
	while ((rc = artifact_reader__next(r, &ev)) == 1)
		n++;
	assert_int_equal(rc, 0);
	assert_int_equal(n, written);
	artifact_reader__free(r);
}

/* Writes n synth() events, offering a cut after each as memtrack's loop does after a drain,
 * and after a cut waits until the worker has written it (so the next cut is not put off by a
 * busy worker); returns the file's frames' decompressed sizes in sizes[] (at most max), their
 * count. */
static unsigned write_cut(const char *path, uint32_t n, unsigned workers, uint64_t *sizes,
			  unsigned max)
{
	struct artifact_writer *w;
	unsigned frames = 0;
	uint8_t *buf, *p;
	size_t len;

	assert_int_equal(artifact_writer__open(&w, path, ARTIFACT_DEFAULT_LEVEL, 0), 0);
	if (workers)
		assert_int_equal(artifact_writer__set_workers(w, workers), 0);
	for (uint32_t i = 0; i < n; i++) {
		struct mt_event ev = synth(i);

		uint64_t before = artifact_writer__frames(w);

		assert_int_equal(artifact_writer__write(w, &ev), 0);
		assert_int_equal(artifact_writer__cut(w), 0);
		/* a cut leaves nothing in the frame being filled: written, all are */
		while (artifact_writer__frames(w) != before &&
		       artifact_writer__events_written(w) < artifact_writer__events(w))
			usleep(100);
	}
	assert_int_equal(artifact_writer__close(w), 0);
	p = buf = slurp(path, &len);
	for (; len && frames < max; frames++) {
		size_t fs = ZSTD_findFrameCompressedSize(p, len);

		assert_false(ZSTD_isError(fs));
		sizes[frames] = ZSTD_getFrameContentSize(p, fs);
		p += fs;
		len -= fs;
	}
	assert_int_equal(len, 0);
	free(buf);
	return frames;
}

/* A cut gives the workers the frame so far once it holds ARTIFACT_CUT_BYTES, then twice that,
 * and so on; the events are the same, in order; without workers there is no cut. */
static void test_writer_cut_early(void **state)
{
	const char *path = tpath("early" ARTIFACT_SUFFIX);
	uint64_t sizes[64], need = ARTIFACT_CUT_BYTES;
	unsigned frames;

	(void)state;
	assert_int_equal(artifact_writer__cut(NULL), 0);
	/* ~1.1 MiB of msgpack: under one default frame (65536 events) */
	frames = write_cut(path, 20000, 0, sizes, 64);
	assert_int_equal(frames, 1);
	frames = write_cut(path, 20000, 1, sizes, 64);
	/* 128 KiB, 256 KiB, 512 KiB, the rest (~230 KiB): each cut at its threshold, the event
	 * that crossed it the frame's last (an event is at most 128 bytes) */
	assert_int_equal(frames, 4);
	for (unsigned f = 0; f + 1 < frames; f++, need *= 2)
		assert_true(sizes[f] >= need && sizes[f] < need + 128);
	assert_true(sizes[3] < 1024u << 10);
	assert_int_equal(read_synth(path, 20000), frames);
}

/* Compresses raw msgpack bytes into one frame appended to out. */
static size_t add_frame(uint8_t *out, size_t off, const void *raw, size_t len)
{
	size_t z = ZSTD_compress(out + off, ZSTD_compressBound(len), raw, len, 1);

	assert_false(ZSTD_isError(z));
	return off + z;
}

static void test_truncated(void **state)
{
	const char *path = tpath("trunc" ARTIFACT_SUFFIX);
	struct artifact_reader *r;
	struct mt_event ev;
	uint8_t *buf, raw[512], z[1024];
	size_t len, n = 0, zl;
	int rc, got = 0;

	(void)state;
	/* zstd-level truncation: two frames of 50, the second one missing its last byte */
	write_n(path, 100, 50);
	buf = slurp(path, &len);
	spit(path, buf, len - 1);
	free(buf);
	assert_int_equal(artifact_reader__open(&r, path), 0);
	while ((rc = artifact_reader__next(r, &ev)) == 1)
		got++;
	assert_int_equal(rc, -EBADMSG);
	assert_int_equal(got, 50); /* every event of the complete frame */
	assert_non_null(strstr(artifact_reader__error(r), "truncated"));
	assert_int_equal(artifact_reader__next(r, &ev), -EBADMSG); /* sticky */
	artifact_reader__free(r);

	/* msgpack-level truncation: a complete frame whose last map is cut in half */
	for (int i = 0; i < 3; i++) {
		ev = synth((uint32_t)i);
		n += (size_t)artifact__encode(&ev, raw + n, sizeof(raw) - n);
	}
	zl = add_frame(z, 0, raw, n - 10);
	assert_int_equal(artifact_reader__open_mem(&r, z, zl), 0);
	for (int i = 0; i < 2; i++) {
		struct mt_event want = synth((uint32_t)i);

		assert_int_equal(artifact_reader__next(r, &ev), 1);
		assert_event_equal(&ev, &want);
	}
	assert_int_equal(artifact_reader__next(r, &ev), -EBADMSG);
	assert_non_null(strstr(artifact_reader__error(r), "truncated"));
	assert_int_equal(artifact_reader__frames(r), 1);
	artifact_reader__free(r);
}

/* Packs a map the way another writer might: keys shuffled, extra keys, given type name. */
static void pack_foreign(msgpack_packer *pk, const char *type, bool with_size)
{
	msgpack_pack_map(pk, with_size ? 7 : 6);
	msgpack_pack_str_with_body(pk, "type", 4);
	msgpack_pack_str_with_body(pk, type, strlen(type));
	msgpack_pack_str_with_body(pk, "future", 6);
	msgpack_pack_array(pk, 2);
	msgpack_pack_nil(pk);
	msgpack_pack_str_with_body(pk, "x", 1);
	if (with_size) {
		msgpack_pack_str_with_body(pk, "size", 4);
		msgpack_pack_uint64(pk, 300);
	}
	msgpack_pack_str_with_body(pk, "addr", 4);
	msgpack_pack_uint64(pk, 0xdead0);
	msgpack_pack_str_with_body(pk, "timestamp", 9);
	msgpack_pack_uint64(pk, 77);
	msgpack_pack_str_with_body(pk, "tid", 3);
	msgpack_pack_int32(pk, -5);
	msgpack_pack_str_with_body(pk, "pid", 3);
	msgpack_pack_int32(pk, 9);
}

static void test_foreign_maps(void **state)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	struct artifact_reader *r;
	struct mt_event ev;
	uint8_t z[4096];
	size_t zl;

	(void)state;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pack_foreign(&pk, "Malloc", true);
	pack_foreign(&pk, "Bogus", true); /* an unknown variant in the middle */
	pack_foreign(&pk, "Free", false);
	zl = add_frame(z, 0, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);

	assert_int_equal(artifact_reader__open_mem(&r, z, zl), 0);
	assert_int_equal(artifact_reader__next(r, &ev), 1);
	assert_int_equal(ev.type, MT_EV_MALLOC);
	assert_int_equal(ev.pid, 9);
	assert_int_equal(ev.tid, -5);
	assert_int_equal(ev.ts, 77);
	assert_int_equal(ev.addr, 0xdead0);
	assert_int_equal(ev.size, 300);
	assert_int_equal(artifact_reader__next(r, &ev), -EBADMSG);
	assert_non_null(strstr(artifact_reader__error(r), "unknown variant 'Bogus'"));
	assert_int_equal(artifact_reader__next(r, &ev), -EBADMSG);
	artifact_reader__free(r);

	/* a variant missing its field, and a value that is not a map */
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pack_foreign(&pk, "Malloc", false);
	zl = add_frame(z, 0, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
	assert_int_equal(artifact_reader__open_mem(&r, z, zl), 0);
	assert_int_equal(artifact_reader__next(r, &ev), -EBADMSG);
	artifact_reader__free(r);

	zl = add_frame(z, 0, "\x93\x01\x02\x03", 4);
	assert_int_equal(artifact_reader__open_mem(&r, z, zl), 0);
	assert_int_equal(artifact_reader__next(r, &ev), -EBADMSG);
	assert_non_null(strstr(artifact_reader__error(r), "not a map"));
	artifact_reader__free(r);

	/* not zstd at all */
	assert_int_equal(artifact_reader__open_mem(&r, "garbage!", 8), 0);
	assert_int_equal(artifact_reader__next(r, &ev), -EBADMSG);
	assert_non_null(strstr(artifact_reader__error(r), "zstd"));
	artifact_reader__free(r);

	/* zero bytes: no frame, no event */
	assert_int_equal(artifact_reader__open_mem(&r, NULL, 0), 0);
	assert_int_equal(artifact_reader__next(r, &ev), 0);
	artifact_reader__free(r);
}

static void test_fixture(void **state)
{
	static const char want[] = "\x86" "\xa3" "pid" "\x01" "\xa3" "tid" "\x0b" "\xa9"
				   "timestamp" "\x64" "\xa4" "addr" "\x10" "\xa4" "type" "\xa7"
				   "Realloc" "\xa4" "size" "\x2a";
	struct mt_event ev, fx = {.type = MT_EV_REALLOC, .pid = 1, .tid = 11, .ts = 100,
				  .addr = 16, .size = 42};
	struct artifact_reader *r;
	uint8_t buf[128];

	(void)state;
	if (access(FIXTURE, R_OK)) {
		print_message("fixture %s not found (cwd must be the repo root): skipped\n",
			      FIXTURE);
		skip();
	}
	assert_int_equal(artifact_reader__open(&r, FIXTURE), 0);
	assert_int_equal(artifact_reader__next(r, &ev), 1);
	assert_event_equal(&ev, &fx);
	assert_int_equal(artifact_reader__next(r, &ev), 0);
	assert_int_equal(artifact_reader__frames(r), 1);
	artifact_reader__free(r);

	/* and our encoder produces the exact msgpack inside the fixture's frame */
	assert_int_equal(artifact__encode(&fx, buf, sizeof(buf)), sizeof(want) - 1);
	assert_memory_equal(buf, want, sizeof(want) - 1);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A value of a random width (0..64 bits), so every encoding form comes up often. */
static uint64_t rnd_width(uint64_t *s)
{
	unsigned bits = (unsigned)(xorshift(s) % 65);

	return bits ? xorshift(s) >> (64 - bits) : 0;
}

/* A random record of a random artifact type; signed fields negative half of the time. */
static struct mt_event rnd_event(uint64_t *s)
{
	struct mt_event ev = {
		.type = MT_EV_MALLOC + (uint32_t)(xorshift(s) % (MT_EV_RMAP - MT_EV_MALLOC + 1)),
		.pid = (int32_t)rnd_width(s),
		.tid = (int32_t)rnd_width(s),
		.aux = (uint32_t)rnd_width(s),
		.ts = rnd_width(s),
		.addr = rnd_width(s),
		.size = rnd_width(s),
		.old_addr = xorshift(s) % 3 ? rnd_width(s) : 0,
	};

	if (xorshift(s) & 1)
		ev.pid = -ev.pid;
	if (xorshift(s) & 1)
		ev.tid = -ev.tid;
	if (ev.type == MT_EV_RMAP && (xorshift(s) & 1))
		ev.size = -ev.size;
	return ev;
}

/* The artifact at path decompresses to exactly want's bytes (every frame, back to back; one
 * byte of room more shows a longer stream). Returns its frame count. */
static unsigned check_file_is(const char *path, const msgpack_sbuffer *want, unsigned workers)
{
	size_t len;
	uint8_t *file = slurp(path, &len), *raw = malloc(want->size + 1);
	unsigned frames = count_frames(file, len);

	assert_non_null(raw);
	assert_int_equal(ZSTD_decompress(raw, want->size + 1, file, len), want->size);
	if (memcmp(raw, want->data, want->size))
		fail_msg("%u workers: the artifact's msgpack differs from msgpack-c's", workers);
	free(raw);
	free(file);
	return frames;
}

/*
 * Property: random records, through artifact__encode and through the writer (frames of 61
 * events compressed by 0, 1 and 3 workers), give exactly msgpack-c's bytes, in order.
 */
static void test_random_vs_msgpack_c(void **state)
{
	const char *path = tpath("rnd" ARTIFACT_SUFFIX);
	const unsigned n = 200000;
	uint64_t seed = 0x5eed0001;
	msgpack_sbuffer sb, all;
	uint8_t buf[128];

	(void)state;
	msgpack_sbuffer_init(&sb);
	msgpack_sbuffer_init(&all);
	for (unsigned i = 0; i < n; i++) {
		struct mt_event ev = rnd_event(&seed);
		size_t want = ref_encode(&ev, &sb);
		int got = artifact__encode(&ev, buf, sizeof(buf));

		if (got != (int)want || memcmp(buf, sb.data, want))
			fail_msg("record %u (type %u) encodes differently from msgpack-c", i,
				 ev.type);
		msgpack_sbuffer_write(&all, sb.data, sb.size);
	}
	for (unsigned workers = 0; workers <= 3; workers += workers ? 2 : 1) {
		struct artifact_writer *w;

		seed = 0x5eed0001;
		assert_int_equal(artifact_writer__open(&w, path, ARTIFACT_DEFAULT_LEVEL, 61), 0);
		assert_int_equal(artifact_writer__set_workers(w, workers), 0);
		for (unsigned i = 0; i < n; i++) {
			struct mt_event ev = rnd_event(&seed);

			assert_int_equal(artifact_writer__write(w, &ev), 0);
		}
		assert_int_equal(artifact_writer__close(w), 0);
		assert_int_equal(check_file_is(path, &all, workers), (n + 60) / 61);
	}
	msgpack_sbuffer_destroy(&all);
	msgpack_sbuffer_destroy(&sb);
}

/*
 * The writer copies the encoded pid and tid of the record before when they repeat (a thread's
 * run): runs of every record type from a few threads, whose pids and tids share values and
 * widths (so a key that mixed them up would show), through write and write_many in random
 * batches, across frame boundaries, give exactly msgpack-c's bytes; write_many counts what it
 * wrote by type.
 */
static void test_writer_runs_vs_msgpack_c(void **state)
{
	static const int32_t ids[][2] = {
		{1, 1}, {1, 2}, {2, 1}, {0x367f, 0x367f}, {0x367f, 0x3680}, {0x3680, 0x367f},
		{-1, 5}, {5, -1}, {INT32_MAX, INT32_MIN}, {200, 70000}, {127, 128}, {-33, -32},
	};
	const unsigned nids = sizeof(ids) / sizeof(ids[0]), n = 100000;
	const char *path = tpath("runs" ARTIFACT_SUFFIX);
	uint64_t seed = 0x5eed0002, counts[MT_EV_TYPE_MAX], want[MT_EV_TYPE_MAX];
	struct mt_event *evs = calloc(n, sizeof(*evs));
	msgpack_sbuffer sb, all;

	(void)state;
	assert_non_null(evs);
	msgpack_sbuffer_init(&sb);
	msgpack_sbuffer_init(&all);
	for (unsigned i = 0, run = 0, who = 0; i < n; i++, run--) {
		if (!run) { /* the next thread's run, 1..16 records */
			who = (unsigned)(xorshift(&seed) % nids);
			run = 1 + (unsigned)(xorshift(&seed) % 16);
		}
		evs[i] = rnd_event(&seed);
		evs[i].pid = ids[who][0];
		evs[i].tid = ids[who][1];
		ref_encode(&evs[i], &sb);
		msgpack_sbuffer_write(&all, sb.data, sb.size);
	}
	for (unsigned workers = 0; workers <= 2; workers += 2) {
		struct artifact_writer *w;
		int err;

		assert_int_equal(artifact_writer__open(&w, path, ARTIFACT_DEFAULT_LEVEL, 997), 0);
		assert_int_equal(artifact_writer__set_workers(w, workers), 0);
		memset(counts, 0, sizeof(counts));
		memset(want, 0, sizeof(want));
		for (unsigned i = 0; i < n;) {
			size_t k = 1 + xorshift(&seed) % 200;

			if (k > n - i)
				k = n - i;
			if (xorshift(&seed) & 1) {
				assert_int_equal(
				    artifact_writer__write_many(w, evs + i, k, counts, &err), k);
				assert_int_equal(err, 0);
				for (size_t j = 0; j < k; j++)
					want[evs[i + j].type]++;
			} else {
				for (size_t j = 0; j < k; j++)
					assert_int_equal(artifact_writer__write(w, &evs[i + j]), 0);
			}
			i += (unsigned)k;
		}
		assert_int_equal(artifact_writer__close(w), 0);
		assert_memory_equal(counts, want, sizeof(want)); /* write_many's, by type */
		check_file_is(path, &all, workers);
	}
	msgpack_sbuffer_destroy(&all);
	msgpack_sbuffer_destroy(&sb);
	free(evs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_golden_variants),
	    cmocka_unit_test(test_golden_rmap_delta),
	    cmocka_unit_test(test_golden_common_fields),
	    cmocka_unit_test(test_encode_limits),
	    cmocka_unit_test(test_encode_matches_msgpack_c),
	    cmocka_unit_test(test_type_names),
	    cmocka_unit_test(test_roundtrip_frames),
	    cmocka_unit_test(test_roundtrip_large),
	    cmocka_unit_test(test_empty_artifact),
	    cmocka_unit_test(test_writer_errors),
	    cmocka_unit_test(test_writer_io_error),
	    cmocka_unit_test(test_writer_cut_at_frame),
	    cmocka_unit_test(test_writer_cut_early),
	    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_foreign_maps),
	    cmocka_unit_test(test_fixture),
	    cmocka_unit_test(test_random_vs_msgpack_c),
	    cmocka_unit_test(test_writer_runs_vs_msgpack_c),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
