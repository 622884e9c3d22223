// SPDX-License-Identifier: MIT
/* memtrack report end to end: artifact + manifest in a temporary directory, outputs parsed back. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <jansson.h>
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "cli/cmd_report.h"
#include "common/log.h"
#include "report/report.h"
#include "../lib/mt_tmpdir.h"

#define MiB (1ULL << 20)
#define ROOT 4242
#define CHILD 4243

struct fix {
	char dir[64];
	char art[128], man[128], out[128], svg[128], trace[128];
	uint64_t nr_events;
};

static uint64_t ts0 = 1000000000ULL; /* 1 s after boot, ns */

static void ev_write(struct artifact_writer *w, struct fix *f, uint32_t type, int pid,
		     uint64_t ts, uint64_t addr, uint64_t size, uint32_t aux)
{
	struct mt_event e = {.type = type, .pid = pid, .tid = pid, .ts = ts0 + ts, .addr = addr,
			     .size = size, .aux = aux};

	assert_int_equal(artifact_writer__write(w, &e), 0);
	f->nr_events++;
}

/*
 * Root: 10 MiB block at 1 ms, forks at 2 ms; child: 6 MiB at 3 ms (tree heap 16 MiB: peak),
 * root frees its block at 4 ms, child exits at 5 ms leaking its 6 MiB; root RSS 20 MiB anon +
 * 4 MiB file, child 8 MiB anon. 200 small malloc/free pairs in the root in between.
 */
static void write_artifact(struct fix *f)
{
	struct artifact_writer *w;
	uint64_t ms = 1000000;

	assert_int_equal(artifact_writer__open(&w, f->art, 3, 64), 0);
	ev_write(w, f, MT_EV_RSS, ROOT, 0, 0, 4 * MiB, MT_RSS_FILE);
	ev_write(w, f, MT_EV_MALLOC, ROOT, 1 * ms, 0x10000, 10 * MiB, 0);
	ev_write(w, f, MT_EV_RSS, ROOT, 1 * ms + 1, 0, 20 * MiB, MT_RSS_ANON); /* tree 24 */
	ev_write(w, f, MT_EV_FORK, CHILD, 2 * ms, 0, ROOT, 0);
	for (int i = 0; i < 200; i++) {
		ev_write(w, f, MT_EV_MALLOC, ROOT, 2 * ms + 10 + 2 * i, 0x900000, 64, 0);
		ev_write(w, f, MT_EV_FREE, ROOT, 2 * ms + 11 + 2 * i, 0x900000, 0, 0);
	}
	ev_write(w, f, MT_EV_MALLOC, CHILD, 3 * ms, 0x10000, 6 * MiB, 0);
	ev_write(w, f, MT_EV_RSS, CHILD, 3 * ms + 1, 0, 8 * MiB, MT_RSS_ANON); /* tree 32 */
	ev_write(w, f, MT_EV_FREE, ROOT, 4 * ms, 0x10000, 0, 0);
	ev_write(w, f, MT_EV_RSS, CHILD, 5 * ms - 1, 0, 0, MT_RSS_ANON);
	ev_write(w, f, MT_EV_EXIT, CHILD, 5 * ms, 0, 0, 0);
	ev_write(w, f, MT_EV_EXIT, ROOT, 6 * ms, 0, 0, 0);
	assert_int_equal(artifact_writer__close(w), 0);
}

static void write_manifest(struct fix *f)
{
	char *argv[] = {"bash", "-c", "./work", NULL};
	struct manifest_proc procs[2] = {
		{.pid = ROOT, .ppid = 0, .comm = "bash", .peak_rss = 24 * MiB},
		/* the kernel saw more than the thresholded Rss records: 9 MiB */
		{.pid = CHILD, .ppid = ROOT, .comm = "work", .peak_rss = 9 * MiB},
	};
	struct manifest m = {
		.memtrack_version = "0.1.0", .command = "./work", .argv = argv, .root_pid = ROOT,
		.exit_status = 3, .artifact = "4242.MemtrackArtifact.msgpack",
		.procs = procs, .nr_procs = 2, .peak_rss = 33 * MiB, .complete = false,
	};

	m.drops[MT_DROP_RINGBUF] = 5;
	assert_int_equal(manifest__write(&m, f->man), 0);
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(mt_tmpdir_make(f->dir, sizeof(f->dir), "report"), 0);
	snprintf(f->art, sizeof(f->art), "%s/%d%s", f->dir, ROOT, ARTIFACT_SUFFIX);
	snprintf(f->man, sizeof(f->man), "%s/%d%s", f->dir, ROOT, MANIFEST_SUFFIX);
	snprintf(f->out, sizeof(f->out), "%s/out.txt", f->dir);
	snprintf(f->svg, sizeof(f->svg), "%s/plot.svg", f->dir);
	snprintf(f->trace, sizeof(f->trace), "%s/trace.json", f->dir);
	write_artifact(f);
	write_manifest(f);
	log__level = LOG_QUIET; /* the error paths below are expected */
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

static int report(int argc, char **argv)
{
	/* getopt permutes argv: give it a copy */
	char *copy[16];

	assert_true(argc < 16);
	memcpy(copy, argv, argc * sizeof(*argv));
	copy[argc] = NULL;
	return cmd_report(argc, copy);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, n, f), (size_t)n);
	fclose(f);
	return buf;
}

static json_int_t jint(json_t *o, const char *path)
{
	json_t *v = json_object_get(o, path);

	if (!json_is_integer(v))
		fail_msg("no integer '%s'", path);
	return json_integer_value(v);
}

static void test_json_svg_perfetto(void **state)
{
	struct fix *f = *state;
	char *argv[] = {"report", "--json", "-o", f->out, "--svg", f->svg, f->art,
			"--perfetto", f->trace};
	json_error_t jerr;
	json_t *doc, *res, *procs, *man, *pts, *tr;
	json_int_t max_heap = 0, max_rss = 0;
	char *svg;
	size_t i;

	assert_int_equal(report(9, argv), 0);
	doc = json_load_file(f->out, 0, &jerr);
	if (!doc)
		fail_msg("bad JSON: %s", jerr.text);
	assert_true(json_is_true(json_object_get(doc, "decoded_completely")));
	assert_int_equal(jint(doc, "events_read"), f->nr_events);
	assert_int_equal(jint(doc, "events_total"), f->nr_events);
	res = json_object_get(doc, "results");
	assert_int_equal(jint(res, "peak_heap"), 16 * MiB);
	assert_int_equal(jint(res, "peak_rss"), 33 * MiB); /* the manifest's, larger than 32 */
	assert_int_equal(jint(res, "allocs"), 202);
	assert_int_equal(jint(res, "frees"), 201);
	assert_int_equal(jint(res, "leaked_bytes"), 6 * MiB);
	assert_int_equal(jint(res, "leaked_count"), 1);
	assert_int_equal(jint(json_object_get(doc, "counts"), "Malloc"), 202);
	assert_int_equal(jint(json_object_get(doc, "counts"), "Fork"), 1);

	procs = json_object_get(doc, "processes");
	assert_int_equal(json_array_size(procs), 2);
	for (i = 0; i < 2; i++) {
		json_t *p = json_array_get(procs, i);

		if (jint(p, "pid") == CHILD) {
			assert_string_equal(json_string_value(json_object_get(p, "comm")), "work");
			assert_int_equal(jint(p, "ppid"), ROOT);
			assert_int_equal(jint(p, "peak_rss"), 9 * MiB);
			assert_int_equal(jint(p, "peak_heap"), 6 * MiB);
			assert_int_equal(jint(p, "leaked_bytes"), 6 * MiB);
		} else {
			assert_int_equal(jint(p, "pid"), ROOT);
			assert_string_equal(json_string_value(json_object_get(p, "comm")), "bash");
			assert_int_equal(jint(p, "peak_rss"), 24 * MiB);
		}
	}
	man = json_object_get(doc, "manifest");
	assert_string_equal(json_string_value(json_object_get(man, "command")), "./work");
	assert_int_equal(jint(man, "exit_status"), 3);
	assert_true(json_is_false(json_object_get(man, "complete")));
	assert_int_equal(jint(json_object_get(man, "drops"), "ringbuf"), 5);

	pts = json_object_get(json_object_get(doc, "timeline"), "points");
	assert_true(json_array_size(pts) > 10);
	assert_true(json_array_size(pts) <= REPORT_POINTS);
	for (i = 0; i < json_array_size(pts); i++) {
		json_t *p = json_array_get(pts, i);

		max_heap = jint(p, "heap") > max_heap ? jint(p, "heap") : max_heap;
		max_rss = jint(p, "rss") > max_rss ? jint(p, "rss") : max_rss;
	}
	assert_int_equal(max_heap, 16 * MiB); /* peaks survive downsampling */
	assert_int_equal(max_rss, 32 * MiB); /* the artifact's own tree peak */
	json_decref(doc);

	svg = slurp(f->svg);
	assert_non_null(strstr(svg, "<svg"));
	assert_non_null(strstr(svg, "id=\"heap\""));
	assert_non_null(strstr(svg, "id=\"rss\""));
	assert_non_null(strstr(svg, "memory (MiB)"));
	assert_non_null(strstr(svg, "time since the first event (ms)"));
	assert_non_null(strstr(svg, "</svg>"));
	free(svg);

	tr = json_load_file(f->trace, 0, &jerr);
	if (!tr)
		fail_msg("bad trace JSON: %s", jerr.text);
	pts = json_object_get(tr, "traceEvents");
	assert_true(json_array_size(pts) > 10);
	for (i = 0; i < json_array_size(pts); i++) {
		json_t *e = json_array_get(pts, i);
		const char *ph = json_string_value(json_object_get(e, "ph"));

		assert_non_null(ph);
		assert_true(!strcmp(ph, "C") || !strcmp(ph, "M"));
		assert_int_equal(jint(e, "pid"), ROOT);
	}
	json_decref(tr);
}

static void test_summary_text(void **state)
{
	struct fix *f = *state;
	char *argv[] = {"report", "-o", f->out, f->art};
	char *noman[] = {"report", "--no-manifest", "-o", f->out, f->art};
	char *txt;

	assert_int_equal(report(4, argv), 0);
	txt = slurp(f->out);
	assert_non_null(strstr(txt, "command: ./work (exit status 3)"));
	assert_non_null(strstr(txt, "peak heap 16.0 MiB, peak RSS 33.0 MiB (tree)"));
	assert_non_null(strstr(txt, "202 blocks allocated, 201 freed (reallocs count in both), "
				    "leaked at exit 6.0 MiB in 1"));
	assert_non_null(strstr(txt, "INCOMPLETE: 5 records lost (ring buffer 5)"));
	assert_non_null(strstr(txt, "2 processes"));
	assert_non_null(strstr(txt, "work"));
	free(txt);

	assert_int_equal(report(5, noman), 0);
	txt = slurp(f->out);
	assert_non_null(strstr(txt, "drops unknown"));
	assert_non_null(strstr(txt, "peak RSS 32.0 MiB"));
	assert_null(strstr(txt, "command:"));
	free(txt);
}

static void test_truncated(void **state)
{
	struct fix *f = *state;
	char cut[160];
	char *argv[] = {"report", "--json", "-o", f->out, cut};
	char *buf;
	struct stat st;
	json_t *doc;
	int fd;

	/* no manifest beside it: the name does not follow the convention */
	snprintf(cut, sizeof(cut), "%s/cut.msgpack", f->dir);
	assert_int_equal(stat(f->art, &st), 0);
	buf = malloc(st.st_size);
	fd = open(f->art, O_RDONLY);
	assert_int_equal(read(fd, buf, st.st_size), st.st_size);
	close(fd);
	fd = open(cut, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_int_equal(write(fd, buf, st.st_size - 7), st.st_size - 7);
	close(fd);
	free(buf);

	{
		int err_fd = dup(2), null_fd = open("/dev/null", O_WRONLY);

		dup2(null_fd, 2); /* the expected "truncated" message */
		assert_int_equal(report(5, argv), 2);
		dup2(err_fd, 2);
		close(err_fd);
		close(null_fd);
	}
	doc = json_load_file(f->out, 0, NULL);
	assert_non_null(doc);
	assert_true(json_is_false(json_object_get(doc, "decoded_completely")));
	assert_true(json_is_string(json_object_get(doc, "decode_error")));
	assert_true(jint(doc, "events_read") < (json_int_t)f->nr_events);
	assert_true(jint(doc, "events_read") >= 64); /* the first frames are whole */
	assert_true(json_is_null(json_object_get(doc, "manifest")));
	json_decref(doc);
}

static void test_usage_and_bad_input(void **state)
{
	struct fix *f = *state;
	char *none[] = {"report"};
	char *two[] = {"report", f->art, f->art};
	char *bad_opt[] = {"report", "--bogus", f->art};
	char *missing[] = {"report", "/nonexistent/1.MemtrackArtifact.msgpack"};
	char *bad_out[] = {"report", "-o", "/nonexistent/dir/out.json", f->art};
	char *both[] = {"report", "--manifest", f->man, "--no-manifest", f->art};
	int err_fd = dup(2), null_fd = open("/dev/null", O_WRONLY);

	/* getopt's complaints go to stderr: keep the test output clean */
	dup2(null_fd, 2);
	/* one convention in every command: usage errors exit 2 (issue 10, item 6) */
	assert_int_equal(report(1, none), 2);
	assert_int_equal(report(3, two), 2);
	assert_int_equal(report(3, bad_opt), 2);
	assert_int_equal(report(5, both), 2);
	assert_int_equal(report(2, missing), 2);
	assert_int_equal(report(4, bad_out), 2);
	dup2(err_fd, 2);
	close(err_fd);
	close(null_fd);
}

/* A long run: buckets keep a spike that lasted one event, and never exceed the cap. */
static void test_timeline_downsampling(void **state)
{
	struct timeline *t;
	const struct timeline_point *p;
	uint32_t n;
	uint64_t t0, width, max = 0;

	(void)state;
	assert_int_equal(timeline__new(&t, REPORT_POINTS), 0);
	for (uint64_t i = 0; i < 100000; i++) {
		uint64_t heap = i == 54321 ? 999 * MiB : 1 * MiB; /* 100 us spike at 5.4 s */

		timeline__add(t, 7000 + i * 100000, heap, 2 * MiB);
	}
	p = timeline__points(t, &n, &t0, &width);
	assert_true(n <= REPORT_POINTS);
	assert_true(n > REPORT_POINTS / 2);
	assert_int_equal(t0, 7000);
	for (uint32_t i = 0; i < n; i++) {
		max = p[i].heap > max ? p[i].heap : max;
		assert_int_equal(p[i].rss, 2 * MiB);
		assert_int_equal(p[i].t, (uint64_t)i * width);
	}
	assert_int_equal(max, 999 * MiB);
	/* only the bucket holding the spike and its neighbour at most show it */
	for (uint32_t i = 0, hits = 0; i < n; i++)
		if (p[i].heap == 999 * MiB)
			assert_true(++hits <= 2);
	timeline__free(t);
}

static void test_summary_many_procs(void **state)
{
	struct manifest_proc procs[12] = {0};
	struct manifest m = {.procs = procs, .nr_procs = 12, .complete = true};
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	char b[32];

	(void)state;
	for (int i = 0; i < 12; i++) {
		procs[i].pid = 100 + i;
		procs[i].peak_rss = (uint64_t)(i + 1) * MiB;
	}
	assert_int_equal(report__summary(out, &m), 0);
	fclose(out);
	assert_non_null(strstr(buf, "12 processes, top 10 by peak RSS"));
	assert_non_null(strstr(buf, "... 2 more"));
	assert_non_null(strstr(buf, "0 dropped"));
	assert_null(strstr(buf, "INCOMPLETE"));
	/* sorted: 111 (12 MiB) first, 100 and 101 left out */
	assert_true(strstr(buf, "  111 ") < strstr(buf, "  110 "));
	assert_null(strstr(buf, "  100 "));
	free(buf);

	assert_string_equal(report__bytes(0, b, sizeof(b)), "0 B");
	assert_string_equal(report__bytes(1023, b, sizeof(b)), "1023 B");
	assert_string_equal(report__bytes(1536, b, sizeof(b)), "1.5 KiB");
	assert_string_equal(report__bytes(MiB - 1, b, sizeof(b)), "1.0 MiB");
	assert_string_equal(report__bytes(3 * 1024 * MiB, b, sizeof(b)), "3.0 GiB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_svg_perfetto),
		cmocka_unit_test(test_summary_text),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_usage_and_bad_input),
		cmocka_unit_test(test_timeline_downsampling),
		cmocka_unit_test(test_summary_many_procs),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
