// SPDX-License-Identifier: MIT
/* Manifest tests: write -> read round trip, the JSON shape, version and error handling. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include "artifact/manifest.h"
#include "../lib/mt_tmpdir.h"

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	return mt_tmpdir_make(tmpdir, sizeof(tmpdir), "manifest");
}

static int teardown(void **state)
{
	(void)state;
	return mt_tmpdir_remove(tmpdir);
}

/* Returns one of 4 rotating static buffers, so a few paths can be alive at once. */
static const char *tpath(const char *name)
{
	static char p[4][256];
	static unsigned k;
	char *b = p[k++ % 4];

	snprintf(b, sizeof(p[0]), "%s/%s", tmpdir, name);
	return b;
}

static char *argv0[] = {"bash", "-c", "ls -l", NULL};
static struct manifest_library libs0[] = {
	{"/usr/lib/x86_64-linux-gnu/libc.so.6", "libc", 12},
	{"/usr/lib/libjemalloc.so.2", "jemalloc", 8},
};
static struct manifest_running running0[] = {{.pid = 101, .comm = "a-fifteen-char!"}};

static struct manifest_proc procs0[] = {
	{.pid = 100, .ppid = 0, .comm = "bash", .peak_heap = 1 << 20, .peak_rss = 5 << 20,
	 .allocs = 10, .frees = 9, .leaked_bytes = 64, .leaked_count = 1, .execs = 1},
	{.pid = 101, .ppid = 100, .comm = "a-fifteen-char!", .peak_heap = 123, .peak_rss = 456,
	 .allocs = 3, .frees = 3, .execs = 2},
};

static void *dup_mem(const void *p, size_t n)
{
	void *d = malloc(n);

	assert_non_null(d);
	return memcpy(d, p, n);
}

/* A caller-built manifest: like every manifest, it owns each block it points to (heap copies
 * of the tables above), and manifest__free frees them. */
static struct manifest sample(void)
{
	struct manifest m = {
		.root_pid = 100,
		.exit_status = 130,
		.term_signal = 2,
		.start_unix_ns = 1733140000123456789ll,
		.start_mono_ns = 98765432101ll,
		.nr_libraries = 2,
		.events_total = 1234567,
		.drops = {1, 2, 3, 4, 5},
		.consumer_drops = 6,
		.complete = false,
		.t_load = 12345678, /* 12.345678 ms */
		.t_attach = 1,
		.t_run = 3600000000000ull, /* an hour */
		.t_drain = 999999,
		.t_detach = 0,
		.t_total = 3600014345678ull,
		.peak_heap = 1 << 20,
		.peak_rss = 6 << 20,
		.allocs = 13,
		.allocated_bytes = 3 << 20,
		.frees = 12,
		.leaked_bytes = 64,
		.leaked_count = 1,
		.memtrack_max_rss = 12 << 20,
		.ringbuf_bytes = 64 << 20,
		.nr_procs = 2,
		.nr_running = 1,
	};

	assert_int_equal(manifest__set_str(&m.memtrack_version, "0.1.0") |
				 manifest__set_str(&m.command, "ls -l") |
				 manifest__set_argv(&m, argv0) |
				 manifest__set_str(&m.kernel_release, "6.1.0-test") |
				 manifest__set_str(&m.artifact, "100.MemtrackArtifact.msgpack") |
				 manifest__set_str(&m.uprobe_mechanism, "uprobe_multi") |
				 manifest__set_str(&m.tracepoint_mechanism, "raw_tracepoint") |
				 manifest__set_str(&m.rmap_backend, "off") |
				 manifest__set_str(&m.rmap_reason,
						   "kernel lacks fentry on rmap functions"),
			 0);
	m.libraries = dup_mem(libs0, sizeof(libs0));
	for (int i = 0; i < 2; i++) {
		m.libraries[i].path = strdup(libs0[i].path);
		m.libraries[i].kind = strdup(libs0[i].kind);
		assert_true(m.libraries[i].path && m.libraries[i].kind);
	}
	m.procs = dup_mem(procs0, sizeof(procs0));
	m.running = dup_mem(running0, sizeof(running0));
	m.counts[MT_EV_MALLOC] = 1000000;
	m.counts[MT_EV_FREE] = 234567;
	m.counts[MT_EV_RMAP] = 0;
	return m;
}

static void test_roundtrip(void **state)
{
	struct manifest in = sample(), out;
	const char *path = tpath("100" MANIFEST_SUFFIX);

	(void)state;
	assert_int_equal(manifest__write(&in, path), 0);
	assert_int_equal(access(tpath("100" MANIFEST_SUFFIX ".tmp"), F_OK), -1); /* renamed */
	assert_int_equal(manifest__read(&out, path), 0);

	assert_string_equal(out.memtrack_version, "0.1.0");
	assert_string_equal(out.command, "ls -l");
	for (int i = 0; i < 3; i++)
		assert_string_equal(out.argv[i], argv0[i]);
	assert_null(out.argv[3]);
	assert_int_equal(out.root_pid, 100);
	assert_int_equal(out.exit_status, 130);
	assert_int_equal(out.term_signal, 2);
	assert_string_equal(out.kernel_release, "6.1.0-test");
	assert_string_equal(out.artifact, "100.MemtrackArtifact.msgpack");
	assert_int_equal(out.start_unix_ns, in.start_unix_ns);
	assert_int_equal(out.start_mono_ns, in.start_mono_ns);
	assert_string_equal(out.uprobe_mechanism, "uprobe_multi");
	assert_string_equal(out.tracepoint_mechanism, "raw_tracepoint");
	assert_string_equal(out.rmap_backend, "off");
	assert_string_equal(out.rmap_reason, in.rmap_reason);
	assert_int_equal(out.nr_libraries, 2);
	for (int i = 0; i < 2; i++) {
		assert_string_equal(out.libraries[i].path, libs0[i].path);
		assert_string_equal(out.libraries[i].kind, libs0[i].kind);
		assert_int_equal(out.libraries[i].sites, libs0[i].sites);
	}
	assert_memory_equal(out.counts, in.counts, sizeof(in.counts));
	assert_int_equal(out.events_total, in.events_total);
	assert_memory_equal(out.drops, in.drops, sizeof(in.drops));
	assert_int_equal(out.consumer_drops, 6);
	assert_false(out.complete);
	/* ns -> float ms -> ns is exact */
	assert_int_equal(out.t_load, in.t_load);
	assert_int_equal(out.t_attach, in.t_attach);
	assert_int_equal(out.t_run, in.t_run);
	assert_int_equal(out.t_drain, in.t_drain);
	assert_int_equal(out.t_detach, in.t_detach);
	assert_int_equal(out.t_total, in.t_total);
	assert_int_equal(out.peak_heap, in.peak_heap);
	assert_int_equal(out.peak_rss, in.peak_rss);
	assert_int_equal(out.allocs, in.allocs);
	assert_int_equal(out.allocated_bytes, in.allocated_bytes);
	assert_int_equal(out.frees, in.frees);
	assert_int_equal(out.leaked_bytes, in.leaked_bytes);
	assert_int_equal(out.leaked_count, in.leaked_count);
	assert_int_equal(out.memtrack_max_rss, in.memtrack_max_rss);
	assert_int_equal(out.ringbuf_bytes, in.ringbuf_bytes);
	assert_int_equal(out.nr_procs, 2);
	assert_memory_equal(out.procs, procs0, sizeof(procs0));
	assert_int_equal(out.nr_running, 1);
	assert_memory_equal(out.running, running0, sizeof(running0));
	manifest__free(&out);
	assert_null(out.argv);
	manifest__free(&out); /* twice is harmless */
	manifest__free(NULL);

	/* a caller-built manifest is freed the same way: every block, then zeroed */
	manifest__free(&in);
	assert_null(in.argv);
	assert_null(in.libraries);
	assert_int_equal(in.nr_procs, 0);
}

static void test_json_shape(void **state)
{
	struct manifest in = sample(), out;
	const char *path = tpath("shape" MANIFEST_SUFFIX);
	static const char *const order[] = {
		"\"format_version\"", "\"memtrack_version\"", "\"command\"", "\"argv\"",
		"\"root_pid\"", "\"exit_status\"", "\"term_signal\"", "\"kernel_release\"",
		"\"artifact\"", "\"start_unix_ns\"", "\"start_mono_ns\"", "\"mechanisms\"",
		"\"libraries\"", "\"events\"", "\"drops\"", "\"complete\"", "\"timings_ms\"",
		"\"results\"", "\"memtrack_max_rss\"", "\"ringbuf_bytes\"", "\"processes\"",
	};
	json_error_t jerr;
	json_t *root, *o;
	char text[8192], *prev;
	FILE *f;
	size_t n;

	(void)state;
	assert_int_equal(manifest__set_str(&in.command, NULL), 0); /* --/argv form */
	assert_int_equal(manifest__set_str(&in.rmap_reason, NULL), 0);
	in.complete = true;
	assert_int_equal(manifest__write(&in, path), 0);

	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	assert_non_null(strstr(text, "{\n  \"format_version\": 1,\n")); /* indent 2 */
	assert_ptr_equal(strstr(text, "{\n  \"format_version\": 1,\n"), text);
	prev = text;
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		char *p = strstr(text, order[i]);

		assert_non_null(p);
		assert_true(p >= prev);
		prev = p;
	}

	root = json_loads(text, 0, &jerr);
	assert_non_null(root);
	assert_true(json_is_null(json_object_get(root, "command")));
	o = json_object_get(root, "mechanisms");
	assert_string_equal(json_string_value(json_object_get(o, "uprobe")), "uprobe_multi");
	assert_true(json_is_null(json_object_get(o, "rmap_reason")));
	o = json_object_get(json_object_get(root, "events"), "by_type");
	assert_int_equal(json_object_size(o), 13); /* artifact types only, no control records */
	assert_int_equal(json_integer_value(json_object_get(o, "Malloc")), 1000000);
	assert_int_equal(json_integer_value(json_object_get(o, "AlignedAlloc")), 0);
	o = json_object_get(root, "drops");
	assert_int_equal(json_integer_value(json_object_get(o, "unmatched_return")), 4);
	assert_int_equal(json_integer_value(json_object_get(o, "consumer")), 6);
	assert_int_equal(json_integer_value(json_object_get(o, "total")), 21);
	o = json_object_get(root, "timings_ms");
	assert_true(json_is_real(json_object_get(o, "load")));
	assert_float_equal(json_real_value(json_object_get(o, "load")), 12.345678, 1e-12);
	assert_true(json_is_true(json_object_get(root, "complete")));
	o = json_array_get(json_object_get(root, "processes"), 1);
	assert_string_equal(json_string_value(json_object_get(o, "comm")), "a-fifteen-char!");
	json_decref(root);

	assert_int_equal(manifest__read(&out, path), 0);
	assert_null(out.command);
	assert_null(out.rmap_reason);
	assert_true(out.complete);
	manifest__free(&out);
	manifest__free(&in);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* --stacks: outputs.stacks and the stacks object round-trip; without, neither key exists. */
static void test_stacks_keys(void **state)
{
	struct manifest in = sample(), out;
	const char *off = tpath("nostacks" MANIFEST_SUFFIX), *on = tpath("stacks" MANIFEST_SUFFIX);
	json_error_t jerr;
	json_t *root;

	(void)state;
	assert_int_equal(manifest__write(&in, off), 0);
	root = json_load_file(off, 0, &jerr);
	assert_non_null(root);
	assert_null(json_object_get(root, "outputs"));
	assert_null(json_object_get(root, "stacks"));
	json_decref(root);
	assert_int_equal(manifest__read(&out, off), 0);
	assert_null(out.stacks_file);
	manifest__free(&out);

	assert_int_equal(manifest__set_str(&in.stacks_file, "100.memtrack.stacks") |
				 manifest__set_str(&in.stacks_unwinder, "preload=libunwind,uprobe=none"),
			 0);
	in.stacks_allocs = 1000;
	in.stacks_with_stack = 990;
	in.stacks_distinct = 17;
	in.stacks_modules = 3;
	in.stacks_unwind_failed = 4;
	in.stacks_area_full = 5;
	in.stacks_bad_ref = 1;
	in.stacks_early = 2;
	in.stacks_uprobe = 6;
	in.stacks_file_bytes = 4242;
	assert_int_equal(manifest__write(&in, on), 0);
	root = json_load_file(on, 0, &jerr);
	assert_non_null(root);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(root, "outputs"), "stacks")),
		"100.memtrack.stacks");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(json_object_get(root, "stacks"), "without"), "area_full")),
			 5);
	json_decref(root);
	assert_int_equal(manifest__read(&out, on), 0);
	assert_string_equal(out.stacks_file, "100.memtrack.stacks");
	assert_string_equal(out.stacks_unwinder, "preload=libunwind,uprobe=none");
	assert_int_equal(out.stacks_allocs, 1000);
	assert_int_equal(out.stacks_with_stack, 990);
	assert_int_equal(out.stacks_distinct, 17);
	assert_int_equal(out.stacks_modules, 3);
	assert_int_equal(out.stacks_unwind_failed, 4);
	assert_int_equal(out.stacks_area_full, 5);
	assert_int_equal(out.stacks_bad_ref, 1);
	assert_int_equal(out.stacks_early, 2);
	assert_int_equal(out.stacks_uprobe, 6);
	assert_int_equal(out.stacks_file_bytes, 4242);
	manifest__free(&out);
	manifest__free(&in);
}

static void test_versions_and_errors(void **state)
{
	const char *path = tpath("v" MANIFEST_SUFFIX);
	struct manifest m;

	(void)state;
	write_text(path, "{\"format_version\": 2, \"root_pid\": 5}");
	assert_int_equal(manifest__read(&m, path), -EPROTO);
	assert_null(m.argv); /* left zeroed */
	assert_int_equal(m.root_pid, 0);

	/* an older/minimal manifest: missing keys read as zero, unknown keys are ignored */
	write_text(path, "{\"format_version\": 1, \"root_pid\": 5, \"future_key\": [1, 2],"
			 " \"argv\": [\"true\"]}");
	assert_int_equal(manifest__read(&m, path), 0);
	assert_int_equal(m.root_pid, 5);
	assert_string_equal(m.argv[0], "true");
	assert_null(m.argv[1]);
	assert_null(m.command);
	assert_int_equal(m.nr_procs, 0);
	manifest__free(&m);

	write_text(path, "{\"root_pid\": 5}");
	assert_int_equal(manifest__read(&m, path), -EBADMSG);
	write_text(path, "{\"format_version\": 1, \"root_pid\": \"five\"}");
	assert_int_equal(manifest__read(&m, path), -EBADMSG);
	write_text(path, "{\"format_version\": 1, \"argv\": [\"a\", 3]}");
	assert_int_equal(manifest__read(&m, path), -EBADMSG);
	write_text(path, "{\"format_version\": 1, ");
	assert_int_equal(manifest__read(&m, path), -EBADMSG);
	assert_int_equal(manifest__read(&m, tpath("missing.json")), -ENOENT);

	assert_int_equal(manifest__write(&m, "/nonexistent/dir/x.json"), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_json_shape),
		cmocka_unit_test(test_versions_and_errors),
		cmocka_unit_test(test_stacks_keys),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
