// SPDX-License-Identifier: MIT
/*
 * Root tests: when the allocator uprobe programs are loaded (tracker_load.c). In uprobe mode
 * they load with the others; in auto mode only at the first attach to a library, as a second
 * instance of the object on the first one's maps (tracker__alloc_ensure). The lazily loaded
 * programs must record exactly what the eager ones do, and be loaded once per run however many
 * libraries are attached. The manifest says which happened (mechanisms.alloc_programs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

/* mechanisms.alloc_programs must be want */
static void check_when(struct mt_run *r, const char *want)
{
	const char *got =
	    json_string_value(json_object_get(mt_json(r, "mechanisms"), "alloc_programs"));

	MT_CHECK(r, got && !strcmp(got, want), "mechanisms.alloc_programs \"%s\", not \"%s\"",
		 got ? got : "(none)", want);
}

/* Tracks target with these options; the window's events exact, each operation once. */
static struct mt_run *track_target(void **state, const char *const *opts, const char *target)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = opts};
	const struct mt_expect *b;

	mt_need_file(mt_target(target));
	mt_track_ok(r, &o, MT_TARGET_ARGV(target), 0);
	b = mt_need_expect(r, "begin", 0, 0);
	mt_window_ok(r, b->tid, 0);
	mt_each_op_once(r);
	return r;
}

/* A static executable in auto mode: the interposer cannot serve it, its own glibc gets uprobes
 * through the lazily loaded programs. */
static void test_auto_static(void **state)
{
	static const char *const opts[] = {"--alloc-hooks", "auto", NULL};

	MT_REQUIRE_ROOT();
	check_when(track_target(state, opts, "alloc_static"), "at first attach");
}

/* libstdc++ linked into the executable (operator new defined there, malloc glibc's), in auto
 * mode: the interposer serves it all, so nothing is attached and the programs never load (its
 * operator new's sites wait for a process the interposer does not serve). */
static void test_auto_static_cxx(void **state)
{
	static const char *const opts[] = {"--alloc-hooks", "auto", NULL};
	struct mt_run *r;

	MT_REQUIRE_ROOT();
	r = track_target(state, opts, "cxx_static");
	check_when(r, "not loaded");
	MT_CHECK(r, json_array_size(mt_json(r, "libraries")) == 0, "%zu libraries attached",
		 json_array_size(mt_json(r, "libraries")));
}

/* jemalloc dlopen'ed at run time in auto mode: the interposer announces the new library at the
 * next dlsym (no probe on libc: jemalloc is the only library attached), and its attach loads
 * the programs. */
static void test_auto_dlopen(void **state)
{
	static const char *const opts[] = {"--alloc-hooks", "auto", NULL};
	struct mt_run *r;
	json_t *libs, *l;
	size_t i;

	MT_REQUIRE_ROOT();
	r = track_target(state, opts, "alloc_dlopen");
	check_when(r, "at first attach");
	libs = mt_json(r, "libraries");
	MT_CHECK(r, json_array_size(libs) == 1, "%zu libraries attached, not jemalloc alone",
		 json_array_size(libs));
	json_array_foreach(libs, i, l)
	{
		const char *kind = json_string_value(json_object_get(l, "kind"));

		MT_CHECK(r, kind && !strcmp(kind, "jemalloc"), "a %s library attached",
			 kind ? kind : "(no kind)");
	}
}

/* uprobe mode: loaded with the others (no second instance), the same exact events. */
static void test_uprobe_eager(void **state)
{
	static const char *const opts[] = {"--alloc-hooks", "uprobe", NULL};

	MT_REQUIRE_ROOT();
	check_when(track_target(state, opts, "alloc_static"), "at load");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_auto_static, mt_teardown),
		cmocka_unit_test_teardown(test_auto_static_cxx, mt_teardown),
		cmocka_unit_test_teardown(test_auto_dlopen, mt_teardown),
		cmocka_unit_test_teardown(test_uprobe_eager, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
