// SPDX-License-Identifier: MIT
/*
 * memtrack report on generated and hostile inputs. Many processes: the streamed JSON document
 * is the one report__json builds, byte for byte; with a manifest, the k-th process record of a
 * pid takes the k-th manifest entry of that pid (pid reuse), through 20,000 processes (speed
 * is measured outside tests). A 0-byte artifact (what a killed run leaves) is bad input.
 * Sizes of 2^64 - 1 saturate the byte figures, flagged, instead of wrapping.
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
#include <sys/stat.h>
#include <cmocka.h>
#include <jansson.h>
#include "acct/acct.h"
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "cli/cmd_report.h"
#include "common/log.h"
#include "report/report.h"
#include "../lib/mt_tmpdir.h"

#define NR_PROCS 20000
#define REUSED 100 /* pids 1000..1099 appear twice: a process, its exit, a new one */

struct fix {
	char dir[64], art[128], man[128], out[128];
};

static int32_t pid_of(uint32_t i)
{
	return i < NR_PROCS - REUSED ? (int32_t)(1000 + i) : (int32_t)(1000 + i - (NR_PROCS - REUSED));
}

/* Fork, a 64-byte malloc, Exit for each process; the last REUSED reuse the first pids. */
static void write_inputs(struct fix *f)
{
	struct manifest_proc *procs = calloc(NR_PROCS, sizeof(*procs));
	struct manifest m = {.root_pid = 1000, .complete = true, .procs = procs,
			     .nr_procs = NR_PROCS};
	struct artifact_writer *w;
	uint64_t ts = 1;

	assert_non_null(procs);
	assert_int_equal(artifact_writer__open(&w, f->art, -5, 0), 0);
	for (uint32_t i = 0; i < NR_PROCS; i++) {
		int32_t pid = pid_of(i);
		struct mt_event fork = {.type = MT_EV_FORK, .pid = pid, .tid = pid, .ts = ts++,
					.size = 999};
		struct mt_event mal = {.type = MT_EV_MALLOC, .pid = pid, .tid = pid, .ts = ts++,
				       .addr = 0x1000, .size = 64};
		struct mt_event ex = {.type = MT_EV_EXIT, .pid = pid, .tid = pid, .ts = ts++};

		assert_int_equal(artifact_writer__write(w, &fork), 0);
		assert_int_equal(artifact_writer__write(w, &mal), 0);
		assert_int_equal(artifact_writer__write(w, &ex), 0);
		procs[i].pid = pid;
		procs[i].ppid = 999;
		snprintf(procs[i].comm, sizeof(procs[i].comm), "p%u", i);
	}
	assert_int_equal(artifact_writer__close(w), 0);
	assert_int_equal(manifest__write(&m, f->man), 0);
	free(procs);
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(mt_tmpdir_make(f->dir, sizeof(f->dir), "report-scale"), 0);
	snprintf(f->art, sizeof(f->art), "%s/1000%s", f->dir, ARTIFACT_SUFFIX);
	snprintf(f->man, sizeof(f->man), "%s/1000%s", f->dir, MANIFEST_SUFFIX);
	snprintf(f->out, sizeof(f->out), "%s/out.json", f->dir);
	write_inputs(f);
	log__level = LOG_QUIET;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	assert_int_equal(mt_tmpdir_remove(f->dir), 0);
	free(f);
	return 0;
}

static void test_json_many_procs(void **state)
{
	struct fix *f = *state;
	char *argv[] = {"report", "--json", "-o", f->out, f->art, NULL};
	json_error_t jerr;
	json_t *doc, *procs;

	assert_int_equal(cmd_report(5, argv), 0);
	doc = json_load_file(f->out, 0, &jerr);
	assert_non_null(doc);
	procs = json_object_get(doc, "processes");
	assert_int_equal(json_array_size(procs), NR_PROCS);
	for (uint32_t i = 0; i < NR_PROCS; i += 997) {
		json_t *p = json_array_get(procs, i);
		char comm[16];

		snprintf(comm, sizeof(comm), "p%u", i);
		assert_int_equal(json_integer_value(json_object_get(p, "pid")), pid_of(i));
		assert_string_equal(json_string_value(json_object_get(p, "comm")), comm);
		assert_int_equal(json_integer_value(json_object_get(p, "leaked_bytes")), 64);
	}
	/* the reused pids: the second process took the second entry */
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(procs, NR_PROCS - 1), "comm")),
			    "p19999");
	assert_string_equal(json_string_value(json_object_get(
				    json_array_get(procs, REUSED - 1), "comm")),
			    "p99");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "results"),
							    "leaked_count")),
			 NR_PROCS);
	json_decref(doc);
}

/* The streamed writer against the tree, for 0, 1, 2 and 3 processes. */
static void test_stream_equals_tree(void **state)
{
	struct manifest_proc procs[3] = {
		{.pid = 1, .comm = "a\"b\\c"}, {.pid = 2, .ppid = 1}, {.pid = 3, .comm = "x"}};
	char *argv[] = {"bash", NULL};
	struct manifest m = {.command = "x\n  \"processes\": null", .argv = argv, .procs = procs};
	struct report_view v = {.m = &m, .have_manifest = true};
	char a[8192], b[8192];

	(void)state;
	for (uint32_t n = 0; n <= 3; n++) {
		json_t *doc;
		FILE *fa = fmemopen(a, sizeof(a), "w"), *fb = fmemopen(b, sizeof(b), "w");

		m.nr_procs = n;
		doc = report__json(&v, NULL);
		assert_non_null(doc);
		assert_int_equal(json_dumpf(doc, fa, JSON_INDENT(2) | JSON_PRESERVE_ORDER), 0);
		fputc('\n', fa);
		json_decref(doc);
		assert_int_equal(report__json_write(fb, &v, NULL), 0);
		fclose(fa);
		fclose(fb);
		assert_string_equal(b, a);
	}
}

/* Runs cmd_report with stderr silenced (the expected error messages). */
static int report_quiet(int argc, char **argv)
{
	int err_fd = dup(2), null_fd = open("/dev/null", O_WRONLY), rc;

	dup2(null_fd, 2);
	rc = cmd_report(argc, argv);
	dup2(err_fd, 2);
	close(err_fd);
	close(null_fd);
	return rc;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 16);

	assert_non_null(f);
	assert_non_null(buf);
	assert_true(fread(buf, 1, (1 << 16) - 1, f) > 0);
	fclose(f);
	return buf;
}

static void test_empty_file_is_bad_input(void **state)
{
	struct fix *f = *state;
	char empty[160], *text;
	char *json_argv[] = {"report", "--json", "-o", f->out, empty, NULL};
	char *text_argv[] = {"report", "-o", f->out, empty, NULL};
	json_t *doc;
	int fd;

	snprintf(empty, sizeof(empty), "%s/killed.msgpack", f->dir);
	fd = open(empty, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(report_quiet(5, json_argv), 2);
	doc = json_load_file(f->out, 0, NULL);
	assert_non_null(doc);
	assert_true(json_is_false(json_object_get(doc, "decoded_completely")));
	assert_non_null(strstr(json_string_value(json_object_get(doc, "decode_error")), "empty"));
	json_decref(doc);
	assert_int_equal(report_quiet(4, text_argv), 2);
	text = slurp(f->out);
	assert_non_null(strstr(text, "ARTIFACT CUT SHORT after 0 events"));
	free(text);
}

/* A folder stands for the one artifact in it (`memtrack track -o DIR`, then `memtrack report
 * DIR`): the same report as the file's, its manifest beside it used alike. A folder with no
 * artifact, or with two, is a usage error (2) and writes nothing. */
static void test_folder_stands_for_its_artifact(void **state)
{
	struct fix *f = *state;
	char by_file[160], by_dir[160], other[160], empty[96], *a, *b;
	char *file_argv[] = {"report", "-o", by_file, f->art, NULL};
	char *dir_argv[] = {"report", "-o", by_dir, f->dir, NULL};
	char *empty_argv[] = {"report", "-o", by_dir, empty, NULL};
	int fd;

	snprintf(by_file, sizeof(by_file), "%s/by_file.txt", f->dir);
	snprintf(by_dir, sizeof(by_dir), "%s/by_dir.txt", f->dir);
	assert_int_equal(report_quiet(4, file_argv), 0);
	assert_int_equal(report_quiet(4, dir_argv), 0);
	a = slurp(by_file);
	b = slurp(by_dir);
	assert_non_null(strstr(a, "60000 events"));
	assert_string_equal(a, b);
	free(a);
	free(b);

	/* two artifacts: which one is the user's to say */
	unlink(by_dir);
	snprintf(other, sizeof(other), "%s/1001%s", f->dir, ARTIFACT_SUFFIX);
	fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(report_quiet(4, dir_argv), 2);
	assert_int_equal(access(by_dir, F_OK), -1);

	/* none */
	snprintf(empty, sizeof(empty), "%s/none", f->dir);
	assert_int_equal(mkdir(empty, 0755), 0);
	assert_int_equal(report_quiet(4, empty_argv), 2);
	assert_int_equal(access(by_dir, F_OK), -1);
}

/* 2^64 - 1 bytes and 11 bytes live at once: the peak would wrap to 10 bytes in 64 bits. */
static void test_huge_sizes_saturate(void **state)
{
	struct fix *f = *state;
	char path[160], *text;
	char *json_argv[] = {"report", "--json", "--no-manifest", "-o", f->out, path, NULL};
	char *text_argv[] = {"report", "--no-manifest", "-o", f->out, path, NULL};
	struct mt_event ev[] = {
		{.type = MT_EV_MALLOC, .pid = 5, .tid = 5, .ts = 1, .addr = 0x1000, .size = UINT64_MAX},
		{.type = MT_EV_MALLOC, .pid = 5, .tid = 5, .ts = 2, .addr = 0x2000, .size = 11},
		{.type = MT_EV_RSS, .pid = 5, .tid = 5, .ts = 3, .aux = MT_RSS_ANON, .size = UINT64_MAX},
		{.type = MT_EV_RSS, .pid = 5, .tid = 5, .ts = 4, .aux = MT_RSS_FILE, .size = 7},
		{.type = MT_EV_FREE, .pid = 5, .tid = 5, .ts = 5, .addr = 0x1000},
	};
	struct artifact_writer *w;
	struct heap_acct *a;
	struct heap_stats st;
	json_t *doc, *res;

	/* the accounting stays exact underneath: once the huge block is freed, 11 bytes live */
	assert_int_equal(heap_acct__new(&a), 0);
	heap_acct__events(a, ev, 2);
	assert_int_equal(heap_acct__live_heap(a), UINT64_MAX);
	heap_acct__events(a, ev + 2, 3);
	assert_int_equal(heap_acct__live_heap(a), 11);
	assert_int_equal(heap_acct__live_rss(a), UINT64_MAX);
	heap_acct__stats(a, &st);
	assert_true(st.saturated);
	heap_acct__free(a);

	snprintf(path, sizeof(path), "%s/huge.msgpack", f->dir);
	assert_int_equal(artifact_writer__open(&w, path, 3, 0), 0);
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		assert_int_equal(artifact_writer__write(w, &ev[i]), 0);
	assert_int_equal(artifact_writer__close(w), 0);

	assert_int_equal(report_quiet(6, json_argv), 0);
	doc = json_load_file(f->out, 0, NULL);
	assert_non_null(doc);
	res = json_object_get(doc, "results");
	assert_true(json_is_true(json_object_get(res, "saturated")));
	/* JSON integers are signed 64-bit: the largest one */
	assert_int_equal(json_integer_value(json_object_get(res, "peak_heap")), INT64_MAX);
	assert_int_equal(json_integer_value(json_object_get(res, "peak_rss")), INT64_MAX);
	assert_int_equal(json_integer_value(json_object_get(res, "leaked_bytes")), 11);
	json_decref(doc);
	assert_int_equal(report_quiet(5, text_argv), 0);
	text = slurp(f->out);
	assert_non_null(strstr(text, "SATURATED"));
	assert_null(strstr(text, "peak heap 10 B"));
	free(text);

	/* ordinary sizes: not flagged */
	ev[0].size = 1 << 20;
	ev[2].size = 1 << 20;
	assert_int_equal(heap_acct__new(&a), 0);
	heap_acct__events(a, ev, 5);
	heap_acct__stats(a, &st);
	assert_false(st.saturated);
	heap_acct__free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_json_many_procs, setup, teardown),
		cmocka_unit_test(test_stream_equals_tree),
		cmocka_unit_test_setup_teardown(test_empty_file_is_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_huge_sizes_saturate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_folder_stands_for_its_artifact, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
