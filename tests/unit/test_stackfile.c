// SPDX-License-Identifier: MIT
/*
 * The stacks file (src/stacks/stackfile.h, docs/stacks.md): write -> read round trip with
 * interning, unknown kinds and keys skipped, truncation and foreign files refused (-EPROTO), a
 * newer version refused (-ENOTSUP). Files that the writer cannot produce are packed here with
 * msgpack-c and compressed with zstd directly.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <msgpack.h>
#include <zstd.h>
#include "stacks/stack_sink.h"
#include "stacks/stackfile.h"
#include "../lib/mt_tmpdir.h"

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	return mt_tmpdir_make(tmpdir, sizeof(tmpdir), "stackfile");
}

static int teardown(void **state)
{
	(void)state;
	return mt_tmpdir_remove(tmpdir);
}

static const char *tpath(const char *name)
{
	static char p[4][256];
	static unsigned k;
	char *b = p[k++ % 4];

	snprintf(b, sizeof(p[0]), "%s/%s", tmpdir, name);
	return b;
}

static int create(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	return fd;
}

static const uint8_t bid_a[20] = {0xde, 0xad, 0xbe, 0xef, 1,  2,  3,  4,  5,  6,
				  7,	8,    9,    10,	  11, 12, 13, 14, 15, 16};
static const uint8_t bid_b[8] = {1, 2, 3, 4, 5, 6, 7, 8};

/* Stack k of the synthetic run: depth 1 + k % 40, frames from both modules and "unknown". */
static uint32_t synth_stack(uint32_t k, const uint32_t *mods, struct stack_frame *f)
{
	uint32_t nr = 1 + k % 40;

	for (uint32_t i = 0; i < nr; i++) {
		f[i].module = i == 3 ? 0 : mods[(k + i) % 2];
		f[i].vaddr =
		    0x1000 + (uint64_t)k * 0x40 + i * 7 + (f[i].module ? 0 : 0x7f0000000000ull);
	}
	return nr;
}

#define NR_STACKS 5000
#define NR_ALLOCS 200000 /* several `allocs` chunks and zstd frames */

static void test_round_trip(void **state)
{
	struct stack_frame f[STACKFILE_MAX_FRAMES];
	struct stackfile_writer *w;
	struct stackfile sf;
	uint32_t mods[2], id, again;
	uint32_t *ids = calloc(NR_STACKS + 1, sizeof(*ids));
	struct stack_load l = {.pid = 42, .bias = 0x555555554000ull};
	(void)state;

	assert_non_null(ids);
	assert_int_equal(stackfile_writer__open(&w, create(tpath("a.stacks")),
						"42.Memtrack.msgpack", "preload=libunwind"),
			 0);
	assert_int_equal(stackfile_writer__module(w, "/usr/bin/x", bid_a, 20, &mods[0]), 0);
	assert_int_equal(stackfile_writer__module(w, "/lib/libc.so.6", bid_b, 8, &mods[1]), 0);
	assert_int_equal(mods[0], 1);
	assert_int_equal(mods[1], 2);
	/* interned: same path and build-id -> same id; another build-id -> another module */
	assert_int_equal(stackfile_writer__module(w, "/usr/bin/x", bid_a, 20, &id), 0);
	assert_int_equal(id, 1);
	assert_int_equal(stackfile_writer__module(w, "/usr/bin/x", bid_b, 8, &id), 0);
	assert_int_equal(id, 3);
	assert_int_equal(stackfile_writer__module(w, "/usr/bin/y", NULL, 0, &id), 0);
	assert_int_equal(id, 4);
	l.module = mods[0];
	assert_int_equal(stackfile_writer__load(w, &l), 0);
	/* a frame in a module that was never announced */
	f[0] = (struct stack_frame){.module = 9, .vaddr = 1};
	assert_int_equal(stackfile_writer__stack(w, f, 1, false, &id), -EINVAL);

	for (uint32_t k = 0; k < NR_ALLOCS; k++) {
		uint32_t s = (k * 2654435761u) % (NR_STACKS + 1); /* 0: no stack */

		if (s && !ids[s]) {
			uint32_t nr = synth_stack(s, mods, f);

			assert_int_equal(stackfile_writer__stack(w, f, nr, s % 7 == 0, &ids[s]), 0);
			assert_int_equal(stackfile_writer__stack(w, f, nr, s % 7 == 0, &again), 0);
			assert_int_equal(again, ids[s]);
		}
		assert_int_equal(stackfile_writer__alloc(w, ids[s]), 0);
	}
	/* the truncated flag is part of a stack's identity */
	synth_stack(7, mods, f);
	assert_int_equal(stackfile_writer__stack(w, f, synth_stack(7, mods, f), false, &id), 0);
	assert_int_not_equal(id, ids[7]);
	assert_int_equal(stackfile_writer__alloc(w, id + 1), -EINVAL); /* not defined yet */
	assert_int_equal(stackfile_writer__close(w), 0);

	assert_int_equal(stackfile__read(tpath("a.stacks"), &sf), 0);
	assert_int_equal(sf.version, STACKFILE_VERSION);
	assert_string_equal(sf.artifact, "42.Memtrack.msgpack");
	assert_string_equal(sf.unwinder, "preload=libunwind");
	assert_int_equal(sf.nr_modules, 4);
	assert_string_equal(stackfile__module(&sf, 1)->path, "/usr/bin/x");
	assert_int_equal(stackfile__module(&sf, 1)->build_id_len, 20);
	assert_memory_equal(stackfile__module(&sf, 1)->build_id, bid_a, 20);
	assert_int_equal(stackfile__module(&sf, 3)->build_id_len, 8);
	assert_int_equal(stackfile__module(&sf, 4)->build_id_len, 0);
	assert_null(stackfile__module(&sf, 5));
	assert_int_equal(sf.nr_loads, 1);
	assert_int_equal(sf.loads[0].pid, 42);
	assert_int_equal(sf.loads[0].module, 1);
	assert_int_equal(sf.loads[0].bias, 0x555555554000ull);
	assert_int_equal(sf.nr_stacks, NR_STACKS + 1);
	assert_int_equal(sf.nr_allocs, NR_ALLOCS);
	for (uint32_t k = 0; k < NR_ALLOCS; k++) {
		uint32_t s = (k * 2654435761u) % (NR_STACKS + 1);
		const struct stack_trace *st = stackfile__stack(&sf, sf.allocs[k]);
		uint32_t nr;

		assert_int_equal(sf.allocs[k], ids[s]);
		if (!s) {
			assert_null(st);
			continue;
		}
		nr = synth_stack(s, mods, f);
		assert_non_null(st);
		assert_int_equal(st->id, ids[s]);
		assert_int_equal(st->nr, nr);
		assert_int_equal(st->truncated, s % 7 == 0);
		for (uint32_t i = 0; i < nr; i++) {
			assert_int_equal(st->frames[i].module, f[i].module);
			assert_int_equal(st->frames[i].vaddr, f[i].vaddr);
		}
	}
	assert_false(stackfile__stack(&sf, id)->truncated);
	assert_null(stackfile__stack(&sf, 0));
	stackfile__free(&sf);
	stackfile__free(NULL);
	free(ids);
}

/* --- hand-made files ---------------------------------------------------------------------- */

static void pk_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str(pk, strlen(s));
	msgpack_pack_str_body(pk, s, strlen(s));
}

static void pk_kv_uint(msgpack_packer *pk, const char *k, uint64_t v)
{
	pk_str(pk, k);
	msgpack_pack_uint64(pk, v);
}

static void pk_header(msgpack_packer *pk, uint32_t version, bool extra)
{
	msgpack_pack_map(pk, extra ? 6 : 5);
	pk_str(pk, "t");
	pk_str(pk, "header");
	if (extra) {
		pk_str(pk, "host"); /* a key from a newer writer, of a nested type */
		msgpack_pack_array(pk, 2);
		msgpack_pack_nil(pk);
		pk_str(pk, "x");
	}
	pk_str(pk, "format");
	pk_str(pk, "memtrack-stacks");
	pk_kv_uint(pk, "version", version);
	pk_str(pk, "artifact");
	pk_str(pk, "1.MemtrackArtifact.msgpack");
	pk_str(pk, "unwinder");
	pk_str(pk, "test");
}

static void pk_end(msgpack_packer *pk, uint64_t modules, uint64_t stacks, uint64_t allocs)
{
	msgpack_pack_map(pk, 4);
	pk_str(pk, "t");
	pk_str(pk, "end");
	pk_kv_uint(pk, "modules", modules);
	pk_kv_uint(pk, "stacks", stacks);
	pk_kv_uint(pk, "allocs", allocs);
}

static void pk_allocs(msgpack_packer *pk, const uint32_t *ids, uint32_t n)
{
	msgpack_pack_map(pk, 2);
	pk_str(pk, "t");
	pk_str(pk, "allocs");
	pk_str(pk, "ids");
	msgpack_pack_bin(pk, n * 4); /* little-endian host */
	msgpack_pack_bin_body(pk, ids, n * 4);
}

/* Compresses sb as one zstd frame into path. */
static void write_zst(const char *path, const msgpack_sbuffer *sb)
{
	size_t cap = ZSTD_compressBound(sb->size), n;
	void *z = malloc(cap);
	int fd = create(path);

	n = ZSTD_compress(z, cap, sb->data, sb->size, 1);
	assert_false(ZSTD_isError(n));
	assert_int_equal(write(fd, z, n), (ssize_t)n);
	close(fd);
	free(z);
}

static void test_unknown_skipped(void **state)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	struct stackfile sf;
	uint32_t ids[3] = {1, 0, 1};
	(void)state;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pk_header(&pk, STACKFILE_VERSION, true);
	msgpack_pack_map(&pk, 3); /* an unknown kind, with a map inside */
	pk_str(&pk, "t");
	pk_str(&pk, "thread_names");
	pk_kv_uint(&pk, "tid", 5);
	pk_str(&pk, "more");
	msgpack_pack_map(&pk, 1);
	pk_kv_uint(&pk, "id", 77);
	msgpack_pack_map(&pk,
			 5); /* a module with a key this reader does not know, kind not first */
	pk_kv_uint(&pk, "id", 1);
	pk_str(&pk, "t");
	pk_str(&pk, "module");
	pk_str(&pk, "path");
	pk_str(&pk, "/bin/z");
	pk_kv_uint(&pk, "mtime", 123456);
	pk_str(&pk, "build_id");
	msgpack_pack_bin(&pk, 0);
	msgpack_pack_map(&pk, 4);
	pk_str(&pk, "t");
	pk_str(&pk, "stack");
	pk_kv_uint(&pk, "id", 1);
	pk_str(&pk, "inlined");
	msgpack_pack_true(&pk);
	pk_str(&pk, "frames");
	msgpack_pack_array(&pk, 4);
	msgpack_pack_uint32(&pk, 1);
	msgpack_pack_uint64(&pk, 0x1234);
	msgpack_pack_uint32(&pk, 0);
	msgpack_pack_uint64(&pk, 0x7fff00001234ull);
	pk_allocs(&pk, ids, 3);
	pk_end(&pk, 1, 1, 3);
	write_zst(tpath("u.stacks"), &sb);
	msgpack_sbuffer_destroy(&sb);

	assert_int_equal(stackfile__read(tpath("u.stacks"), &sf), 0);
	assert_int_equal(sf.nr_modules, 1);
	assert_string_equal(sf.modules[0].path, "/bin/z");
	assert_int_equal(sf.nr_stacks, 1);
	assert_int_equal(sf.stacks[0].nr, 2);
	assert_int_equal(sf.stacks[0].frames[0].module, 1);
	assert_int_equal(sf.stacks[0].frames[0].vaddr, 0x1234);
	assert_int_equal(sf.stacks[0].frames[1].module, 0);
	assert_int_equal(sf.stacks[0].frames[1].vaddr, 0x7fff00001234ull);
	assert_int_equal(sf.nr_allocs, 3);
	assert_int_equal(sf.allocs[0], 1);
	assert_int_equal(sf.allocs[1], 0);
	stackfile__free(&sf);
}

static void test_newer_version(void **state)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	struct stackfile sf;
	(void)state;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pk_header(&pk, STACKFILE_VERSION + 1, false);
	pk_end(&pk, 0, 0, 0);
	write_zst(tpath("v.stacks"), &sb);
	msgpack_sbuffer_destroy(&sb);
	assert_int_equal(stackfile__read(tpath("v.stacks"), &sf), -ENOTSUP);
	assert_null(sf.allocs);
}

/* Each file is valid msgpack and zstd but breaks one rule of the format. */
static void test_bad_files(void **state)
{
	enum {
		NO_HEADER,
		FOREIGN,
		BAD_REF,
		ID_GAP,
		ODD_FRAMES,
		BAD_ALLOC,
		BAD_END,
		AFTER_END,
		NOT_MAP,
		N
	};
	struct stackfile sf;
	(void)state;

	for (int c = 0; c < N; c++) {
		msgpack_sbuffer sb;
		msgpack_packer pk;
		uint32_t alloc = c == BAD_ALLOC ? 2 : 1; /* stack 2 is never defined */

		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		if (c == FOREIGN) { /* an artifact event */
			msgpack_pack_map(&pk, 2);
			pk_kv_uint(&pk, "pid", 1);
			pk_str(&pk, "type");
			pk_str(&pk, "Malloc");
		} else if (c != NO_HEADER) {
			pk_header(&pk, STACKFILE_VERSION, false);
		}
		msgpack_pack_map(&pk, 3);
		pk_str(&pk, "t");
		pk_str(&pk, "stack");
		pk_kv_uint(&pk, "id", c == ID_GAP ? 2 : 1);
		pk_str(&pk, "frames");
		msgpack_pack_array(&pk, c == ODD_FRAMES ? 1 : 2);
		msgpack_pack_uint32(&pk, c == BAD_REF ? 1 : 0); /* no module 1 */
		if (c != ODD_FRAMES)
			msgpack_pack_uint64(&pk, 0x1000);
		if (c == NOT_MAP)
			msgpack_pack_uint32(&pk, 5);
		pk_allocs(&pk, &alloc, 1);
		pk_end(&pk, 0, 1, c == BAD_END ? 2 : 1);
		if (c == AFTER_END)
			pk_end(&pk, 0, 1, 1);
		write_zst(tpath("b.stacks"), &sb);
		msgpack_sbuffer_destroy(&sb);
		assert_int_equal(stackfile__read(tpath("b.stacks"), &sf), -EPROTO);
	}
	assert_int_equal(stackfile__read(tpath("missing.stacks"), &sf), -ENOENT);
}

/* Every cut of a real file (several frames) is refused, never read as a shorter run. */
static void test_truncated(void **state)
{
	struct stack_frame f[2] = {{.module = 1, .vaddr = 0x10}, {.module = 0, .vaddr = 0x20}};
	struct stackfile_writer *w;
	struct stackfile sf;
	uint32_t mod, id;
	char *buf;
	off_t size;
	int fd;
	(void)state;

	assert_int_equal(stackfile_writer__open(&w, create(tpath("t.stacks")), "a", "b"), 0);
	assert_int_equal(stackfile_writer__module(w, "/m", NULL, 0, &mod), 0);
	for (uint32_t k = 0; k < 20000; k++) {
		f[1].vaddr = k;
		assert_int_equal(stackfile_writer__stack(w, f, 2, false, &id), 0);
		assert_int_equal(stackfile_writer__alloc(w, id), 0);
	}
	assert_int_equal(stackfile_writer__close(w), 0);
	assert_int_equal(stackfile__read(tpath("t.stacks"), &sf), 0);
	assert_int_equal(sf.nr_allocs, 20000);
	stackfile__free(&sf);

	fd = open(tpath("t.stacks"), O_RDONLY);
	size = lseek(fd, 0, SEEK_END);
	assert_true(size > 0);
	buf = malloc((size_t)size);
	assert_int_equal(pread(fd, buf, (size_t)size, 0), size);
	close(fd);
	/* every cut in the first and last 64 bytes (header, end record, last frame's checksum),
	 * and 64 spread between (inside frames and at their boundaries) */
	for (off_t cut = 0; cut < size; cut += cut < 64 || cut >= size - 64 ? 1 : size / 64 + 1) {
		unlink(tpath(
		    "cut.stacks")); /* not O_TRUNC: ext4 flushes a file truncated and rewritten */
		fd = create(tpath("cut.stacks"));
		assert_int_equal(write(fd, buf, (size_t)cut), cut);
		close(fd);
		assert_int_equal(stackfile__read(tpath("cut.stacks"), &sf), -EPROTO);
		assert_null(sf.stacks);
	}
	free(buf);
}

/* The sink: modules interned across processes, a load per (pid, module, bias), ids a source
 * never got stored as 0, counts. */
static void test_sink(void **state)
{
	struct stack_frame f[2];
	struct stack_sink_stats st;
	struct stack_sink *s;
	struct stackfile sf;
	uint32_t m1, m2, id;
	(void)state;

	assert_int_equal(stack_sink__open(&s, create(tpath("s.stacks")), "7.a", "preload=x"), 0);
	assert_int_equal(stack_sink__module(s, 7, "/bin/x", bid_a, 20, 0x1000, &m1), 0);
	assert_int_equal(stack_sink__module(s, 7, "/bin/x", bid_a, 20, 0x1000, &m2), 0);
	assert_int_equal(m1, m2);
	assert_int_equal(stack_sink__module(s, 8, "/bin/x", bid_a, 20, 0x2000, &m2), 0);
	assert_int_equal(m1, m2); /* same file in another process: one module, two loads */
	assert_int_equal(stack_sink__module(s, 9, "/bin/x", bid_a, 20, STACK_SINK_NO_BIAS, &m2), 0);
	assert_int_equal(m1, m2); /* no third load */
	f[0] = (struct stack_frame){.module = m1, .vaddr = 0x1234};
	f[1] = (struct stack_frame){.module = 0, .vaddr = 0x7fff0000};
	assert_int_equal(stack_sink__stack(s, f, 2, false, &id), 0);
	assert_int_equal(stack_sink__alloc(s, id), 0);
	assert_int_equal(stack_sink__alloc(s, 0), 0);
	assert_int_equal(stack_sink__alloc(s, id + 5), 0); /* never given: stored as none */
	stack_sink__stats(s, &st);
	assert_int_equal(st.allocs, 3);
	assert_int_equal(st.with_stack, 1);
	assert_int_equal(st.stacks, 1);
	assert_int_equal(st.modules, 1);
	assert_int_equal(stack_sink__close(s), 0);
	assert_int_equal(stack_sink__close(NULL), 0);

	assert_int_equal(stackfile__read(tpath("s.stacks"), &sf), 0);
	assert_int_equal(sf.nr_loads, 2);
	assert_int_equal(sf.loads[0].pid, 7);
	assert_int_equal(sf.loads[1].pid, 8);
	assert_int_equal(sf.loads[1].bias, 0x2000);
	assert_int_equal(sf.nr_allocs, 3);
	assert_int_equal(sf.allocs[0], id);
	assert_int_equal(sf.allocs[2], 0);
	stackfile__free(&sf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),	  cmocka_unit_test(test_unknown_skipped),
	    cmocka_unit_test(test_newer_version), cmocka_unit_test(test_bad_files),
	    cmocka_unit_test(test_truncated),	  cmocka_unit_test(test_sink),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
