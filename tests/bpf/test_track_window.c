// SPDX-License-Identifier: MIT
/*
 * Root test of the measured window (include/memtrack.h) end to end: tests/targets/windowed
 * allocates 50 MiB before MEMTRACK_START(), 1 + 2 MiB live together inside, 30 MiB after
 * MEMTRACK_STOP(). The window's peak heap must be exactly 3 MiB and its allocations 2, in every
 * event path memtrack has (--alloc-hooks uprobe, preload, and auto where it exists); the
 * window is the tree's (a child forked inside counts); the markers arrive with their names; the
 * artifact holds no marker record (its readers know none); `memtrack report --window --json`
 * says the same as the manifest; a run without START has no window.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"
#include "common/records.h"

#define MIB (1024ull * 1024)

/* The event paths this memtrack has: `auto` only once `memtrack track --help` names it. */
static bool has_hooks(const char *mode)
{
	char cmd[512], line[512];
	bool found = false;
	FILE *p;

	if (strcmp(mode, "auto"))
		return true;
	snprintf(cmd, sizeof(cmd), "%s track --help 2>&1", mt_memtrack());
	p = popen(cmd, "r");
	if (!p)
		return false;
	while (fgets(line, sizeof(line), p)) /* the help lists each mode as "MODE:" */
		found |= strstr(line, " auto:") || strstr(line, " auto (default):");
	pclose(p);
	return found;
}

static json_t *jpath(json_t *o, const char *a, const char *b)
{
	o = json_object_get(o, a);
	return b ? json_object_get(o, b) : o;
}

static uint64_t ju(struct mt_run *r, json_t *o, const char *a, const char *b)
{
	json_t *v = jpath(o, a, b);

	MT_CHECK(r, json_is_integer(v), "%s.%s is not an integer", a, b ? b : "");
	return (uint64_t)json_integer_value(v);
}

/* One run of windowed ARG under hooks; checks what every run must hold. */
static void window_run(void **state, const char *hooks, const char *arg)
{
	const char *const opts[] = {"--alloc-hooks", hooks, NULL};
	struct mt_run_opts o = {.track_opts = opts, .no_expect_fd = true};
	struct mt_run *r = mt_new_run(state);

	mt_track_ok(r, &o, MT_TARGET_ARGV("windowed", arg), 0);
	/* the artifact: artifact records only, every one counted in the manifest */
	for (size_t i = 0; i < r->nr_ev; i++)
		MT_CHECK(r, records__has(r->ev[i].type, REC_ARTIFACT),
			 "artifact record %zu has type %u, not an artifact type", i, r->ev[i].type);
	MT_CHECK(r, ju(r, r->manifest, "events", "total") == r->nr_ev,
		 "manifest events.total vs %zu artifact records", r->nr_ev);
	MT_CHECK(r, json_is_true(json_object_get(r->manifest, "complete")), "run not complete");
	/* the whole run's figures stay the whole run's */
	MT_CHECK(
	    r, ju(r, r->manifest, "results", "peak_heap") == 80 * MIB || !strcmp(arg, "free-old"),
	    "%s '%s': whole peak heap %llu, want 80 MiB (libc served by %s)", hooks, arg,
	    (unsigned long long)ju(r, r->manifest, "results", "peak_heap"),
	    json_string_value(jpath(json_array_get(json_object_get(r->manifest, "processes"), 0),
				    "alloc_hooks", "libc")));
}

static json_t *window(struct mt_run *r)
{
	json_t *w = jpath(r->manifest, "results", "window");

	MT_CHECK(r, json_is_object(w), "results.window is not an object");
	return w;
}

static void check_markers(struct mt_run *r, const char *const *kinds, size_t n)
{
	json_t *m = json_object_get(r->manifest, "markers");

	MT_CHECK(r, json_array_size(m) == n, "%zu markers, want %zu", json_array_size(m), n);
	for (size_t i = 0; i < n; i++) {
		json_t *k = json_array_get(m, i);
		const char *kind = json_string_value(json_object_get(k, "kind"));
		const char *name = json_string_value(json_object_get(k, "name"));

		MT_CHECK(r, kind && !strcmp(kind, kinds[i]), "marker %zu is %s, want %s", i,
			 kind ? kind : "?", kinds[i]);
		MT_CHECK(r, json_integer_value(json_object_get(k, "pid")) == r->root_pid,
			 "marker %zu of another process", i);
		if (!strcmp(kinds[i], "mark")) {
			MT_CHECK(r, name && !strcmp(name, "one MiB live"), "mark named '%s'",
				 name ? name : "(null)");
			MT_CHECK(r, ju(r, k, "window_heap", NULL) == 1 * MIB,
				 "window heap at the mark %llu, want 1 MiB",
				 (unsigned long long)ju(r, k, "window_heap", NULL));
			MT_CHECK(r, ju(r, k, "heap", NULL) == 51 * MIB, "heap at the mark");
		}
	}
}

/* `memtrack report --window --json` on the run: the manifest's window, as it is. */
static void check_report(struct mt_run *r)
{
	char cmd[1024];
	json_error_t jerr;
	json_t *doc;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s report --window --json '%s'", mt_memtrack(),
		 r->artifact_path);
	p = popen(cmd, "r");
	assert_non_null(p);
	doc = json_loadf(p, 0, &jerr);
	MT_CHECK(r, pclose(p) == 0 && doc, "report --window --json failed: %s", jerr.text);
	MT_CHECK(
	    r,
	    json_equal(json_object_get(doc, "window") ? jpath(doc, "window", "peak_heap") : NULL,
		       jpath(window(r), "peak_heap", NULL)),
	    "report --window's peak heap differs from the manifest's");
	MT_CHECK(r,
		 json_array_size(json_object_get(doc, "markers")) ==
		     json_array_size(json_object_get(r->manifest, "markers")),
		 "report --window's markers differ from the manifest's");
	json_decref(doc);
}

/* windowed's modes and the window each must give */
static const struct window_case {
	const char *arg;
	uint64_t peak, allocs, frees, starts;
} cases[] = {
    {"", 3 * MIB, 2, 2, 1},
    {"free-old", 3 * MIB, 2, 2, 1}, /* frees of older blocks change nothing of the window's */
    {"twice", 4 * MIB, 3, 3, 2},    /* a second pair: one window, their union */
    {"fork", 6 * MIB, 3, 3, 1},	    /* a child forked inside: its 5 MiB with the 1 MiB */
};

static void proof(void **state, const char *hooks)
{
	static const char *const kinds[] = {"start", "mark", "stop"};
	struct mt_run *r;

	MT_REQUIRE_ROOT();
	if (!has_hooks(hooks)) {
		print_message("[ SKIP     ] this memtrack has no --alloc-hooks %s\n", hooks);
		skip();
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct window_case *c = &cases[i];
		json_t *w;

		window_run(state, hooks, c->arg);
		r = *state;
		w = window(r);
		MT_CHECK(r,
			 ju(r, w, "peak_heap", NULL) == c->peak &&
			     ju(r, w, "allocs", NULL) == c->allocs &&
			     ju(r, w, "frees", NULL) == c->frees &&
			     ju(r, w, "starts", NULL) == c->starts &&
			     ju(r, w, "stops", NULL) == c->starts &&
			     ju(r, w, "live_bytes", NULL) == 0,
			 "%s '%s': window peak %llu B, %llu allocs, %llu frees, %llu starts; want "
			 "%llu B, %llu, %llu, %llu",
			 hooks, c->arg, (unsigned long long)ju(r, w, "peak_heap", NULL),
			 (unsigned long long)ju(r, w, "allocs", NULL),
			 (unsigned long long)ju(r, w, "frees", NULL),
			 (unsigned long long)ju(r, w, "starts", NULL), (unsigned long long)c->peak,
			 (unsigned long long)c->allocs, (unsigned long long)c->frees,
			 (unsigned long long)c->starts);
		if (i == 0) {
			check_markers(r, kinds, 3);
			check_report(r);
		}
	}

	/* no START: no window, the whole run measured */
	window_run(state, hooks, "none");
	r = *state;
	MT_CHECK(r, json_is_null(jpath(r->manifest, "results", "window")),
		 "results.window should be null without START");
}

static void test_window_uprobe(void **state)
{
	proof(state, "uprobe");
}

static void test_window_preload(void **state)
{
	proof(state, "preload");
}

static void test_window_auto(void **state)
{
	proof(state, "auto");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_window_uprobe, mt_teardown),
	    cmocka_unit_test_teardown(test_window_preload, mt_teardown),
	    cmocka_unit_test_teardown(test_window_auto, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
