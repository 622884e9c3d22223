// SPDX-License-Identifier: MIT
/*
 * The record and drop-reason tables drive every user: each artifact type round-trips through
 * the writer and reader with its fields, the consumer passes every artifact type and routes
 * every control type, and each drop reason has one spelling in the manifest, report --json, the
 * summary and the lost-events text (nest_overflow included).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "common/records.h"
#include "report/report.h"
#include "track/consumer.h"
#include "../lib/mt_tmpdir.h"

static void test_table_shape(void **state)
{
	unsigned artifact = 0, control = 0, companion = 0;

	(void)state;
	assert_null(records__type(MT_EV_NONE));
	assert_null(records__type(MT_EV_TYPE_MAX));
	for (uint32_t t = 0; t < MT_EV_TYPE_MAX; t++) {
		const struct record_type *r = records__type(t);

		if (!r)
			continue;
		/* a row is written, steers the consumer, or goes to the companion data: one of */
		assert_int_equal(!!(r->flags & REC_ARTIFACT) + !!(r->flags & REC_CONTROL) +
				     !!(r->flags & REC_COMPANION),
				 1);
		if (r->flags & REC_COMPANION) {
			companion++;
			assert_null(records__name(t));
			assert_false(r->flags & (REC_HEAP | REC_STOPS));
			continue;
		}
		if (r->flags & REC_ARTIFACT) {
			artifact++;
			assert_non_null(r->name);
			assert_int_equal(strlen(r->name), r->name_len);
			assert_int_equal(records__from_name(r->name, r->name_len), t);
		} else {
			control++;
			assert_null(records__name(t));
			assert_false(r->flags & REC_HEAP);
		}
	}
	assert_int_equal(artifact, 13);
	assert_int_equal(control, 4);
	assert_int_equal(companion, 2); /* MT_EV_MARKER, MT_EV_MARKER_NAME */
}

/* Control rows say what the tracker does (an action of its table) and whether the task waits
 * for a SIGCONT; only control rows do. The stops are the exec, dlopen and maps (--stacks) ones. */
static void test_control_rows(void **state)
{
	unsigned stops = 0;

	(void)state;
	for (uint32_t t = 0; t < MT_EV_TYPE_MAX; t++) {
		const struct record_type *r = records__type(t);

		if (!r)
			continue;
		if (!(r->flags & REC_CONTROL)) {
			assert_int_equal(records__action(t), RA_NONE);
			assert_false(r->flags & REC_STOPS);
			continue;
		}
		assert_true(records__action(t) > RA_NONE && records__action(t) < RA_NR);
		stops += !!(r->flags & REC_STOPS);
	}
	assert_int_equal(stops, 3);
	assert_true(records__has(MT_EV_CTL_EXEC_STOPPED, REC_STOPS));
	assert_true(records__has(MT_EV_CTL_DLOPEN_STOPPED, REC_STOPS));
	assert_true(records__has(MT_EV_CTL_MAPS_STOPPED, REC_STOPS));
	assert_int_equal(records__action(MT_EV_TYPE_MAX), RA_NONE);
}

/* Every artifact type with every field set: what comes back is what the row says it carries. */
static void test_every_type_round_trips(void **state)
{
	uint8_t buf[128 * MT_EV_TYPE_MAX];
	size_t len = 0;
	struct artifact_reader *r;
	struct artifact_writer *w;
	char dir[64], path[128];
	struct mt_event in[MT_EV_TYPE_MAX], out;
	unsigned nr = 0;

	(void)state;
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "records"), 0);
	snprintf(path, sizeof(path), "%s/a", dir);
	assert_int_equal(artifact_writer__open(&w, path, 3, 0), 0);
	for (uint32_t t = 0; t < MT_EV_TYPE_MAX; t++) {
		struct mt_event e = {.type = t, .pid = 7, .tid = 8, .ts = 9, .addr = 0x1000,
				     .size = (uint64_t)-3, .aux = 2, .old_addr = 0x2000};
		int n = artifact__encode(&e, buf + len, sizeof(buf) - len);

		if (!records__has(t, REC_ARTIFACT)) {
			assert_int_equal(n, -EINVAL);
			assert_int_equal(artifact_writer__write(w, &e), -EINVAL);
			continue;
		}
		assert_true(n > 0);
		len += (size_t)n;
		assert_int_equal(artifact_writer__write(w, &e), 0);
		in[nr++] = e;
	}
	assert_int_equal(artifact_writer__close(w), 0);
	assert_int_equal(artifact_reader__open(&r, path), 0);
	for (unsigned i = 0; i < nr; i++) {
		const struct record_type *rt = records__type(in[i].type);
		struct mt_event want = {.type = in[i].type, .pid = 7, .tid = 8, .ts = 9, .addr = 0x1000};

		assert_int_equal(artifact_reader__next(r, &out), 1);
		for (int f = 0; f < RECORD_MAX_FIELDS && rt->fields[f]; f++) {
			switch (records__fields[rt->fields[f]].member) {
			case RM_AUX: want.aux = in[i].aux; break;
			case RM_OLD_ADDR: want.old_addr = in[i].old_addr; break;
			default: want.size = in[i].size; break;
			}
		}
		assert_memory_equal(&out, &want, sizeof(want));
	}
	assert_int_equal(artifact_reader__next(r, &out), 0);
	artifact_reader__free(r);
	assert_int_equal(mt_tmpdir_remove(dir), 0);
}

static unsigned sunk, controlled;

static size_t count_sink(void *ctx, const struct mt_event *ev, size_t n)
{
	(void)ctx;
	(void)ev;
	sunk += (unsigned)n;
	return 0;
}

static int count_control(void *ctx, const struct mt_event *ev)
{
	(void)ctx;
	(void)ev;
	controlled++;
	return 0;
}

static void test_consumer_follows_table(void **state)
{
	struct mt_event ev[256];
	struct event_source *src;
	struct consumer c;
	unsigned want_sunk = 0, want_ctl = 0;

	(void)state;
	for (uint32_t t = 0; t < 256; t++) {
		ev[t] = (struct mt_event){.type = t, .pid = 1, .tid = 1};
		want_sunk += records__has(t, REC_ARTIFACT | REC_COMPANION); /* in order, to the sinks */
		want_ctl += records__has(t, REC_CONTROL);
	}
	consumer__init(&c);
	assert_int_equal(replay_source__new(&src, ev, 256, 0), 0);
	assert_int_equal(consumer__add_source(&c, src), 0);
	assert_int_equal(consumer__add_sink(&c, count_sink, NULL), 0);
	consumer__set_control(&c, count_control, NULL);
	assert_int_equal(consumer__drain(&c), 256);
	assert_int_equal(sunk, want_sunk);
	assert_int_equal(controlled, want_ctl);
	assert_int_equal(c.rejected, 256 - want_sunk - want_ctl);
	consumer__destroy(&c);
}

/* Each reason nonzero and distinct, the interposer's and the tracker's too: every key in the
 * manifest and in report --json, every label in the summary and in the lost-events text. */
static void test_drop_spellings(void **state)
{
	struct manifest m = {.complete = false};
	struct report_view v = {.m = &m, .have_manifest = true};
	char dir[64], path[128], text[4096], what[1024];
	json_t *root, *doc, *drops;
	json_error_t jerr;
	FILE *f;

	(void)state;
	for (int i = 0; i < DROP_NR; i++)
		m.drops[i] = 100 + (uint64_t)i;
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "records"), 0);
	snprintf(path, sizeof(path), "%s/m.json", dir);
	assert_int_equal(manifest__write(&m, path), 0);
	root = json_load_file(path, 0, &jerr);
	assert_non_null(root);
	doc = report__json(&v, NULL);
	assert_non_null(doc);
	drops = json_object_get(json_object_get(doc, "manifest"), "drops");
	f = fmemopen(text, sizeof(text), "w");
	assert_non_null(f);
	assert_int_equal(report__summary_view(f, &v), 0);
	fclose(f);
	records__drops_text(what, sizeof(what), m.drops, 0, true);
	for (int i = 0; i < DROP_NR; i++) {
		const struct drop_reason *d = &records__drops[i];
		char label[64];

		assert_int_equal(json_integer_value(json_object_get(
					 json_object_get(root, "drops"), d->key)), 100 + i);
		assert_int_equal(json_integer_value(json_object_get(drops, d->key)), 100 + i);
		snprintf(label, sizeof(label), "%s %d", d->label, 100 + i);
		assert_non_null(strstr(text, label));
		assert_non_null(strstr(what, label));
	}
	assert_non_null(strstr(what, "nesting overflow 104"));
	assert_non_null(json_object_get(drops, "nest_overflow"));
	assert_non_null(json_object_get(drops, "unmatched_return"));
	assert_null(json_object_get(drops, "unmatched_ret"));
	json_decref(root);
	json_decref(doc);
	assert_int_equal(mt_tmpdir_remove(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_shape),
		cmocka_unit_test(test_control_rows),
		cmocka_unit_test(test_every_type_round_trips),
		cmocka_unit_test(test_consumer_follows_table),
		cmocka_unit_test(test_drop_spellings),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
