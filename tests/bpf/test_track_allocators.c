// SPDX-License-Identifier: MIT
/*
 * Root tests: allocators other than a shared glibc. Each target (build/targets/alloc_*) calls
 * its allocator's standard and native entry points between begin/end; the artifact must have
 * exactly those calls, one event each (compat layers calling their own entry points must not
 * double count), and the manifest must name the allocator library (or, in preload mode, the
 * process the interposer served it in).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

static void check_allocator(void **state, const char *target, const char *kind)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = mt_mode_opts};
	const struct mt_expect *b;
	json_t *libs = NULL, *l;
	bool named = false;
	size_t k;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV(target), 0);
	b = mt_need_expect(r, "begin", 0, 0);
	mt_window_ok(r, b->tid, 0);
	mt_each_op_once(r);
	if (!kind)
		return;
	libs = mt_json(r, "libraries");
	MT_CHECK(r, json_is_array(libs), "manifest: no libraries[]");
	for (k = 0; k < json_array_size(libs) && (l = json_array_get(libs, k)); k++) {
		const char *s = json_string_value(json_object_get(l, "kind"));

		named |= s && !strcmp(s, kind);
	}
	/* preload mode (MEMTRACK_ALLOC_HOOKS=preload): a shared jemalloc, mimalloc or tcmalloc is
	 * served by the interposer, not probed; the process says so */
	libs = mt_json(r, "processes");
	for (k = 0; k < json_array_size(libs) && (l = json_array_get(libs, k)); k++) {
		const char *h = json_string_value(
		    json_object_get(json_object_get(l, "alloc_hooks"), kind));

		named |= h && !strcmp(h, "preload");
	}
	MT_CHECK(r, named, "manifest: no library of kind \"%s\", nor a process it served", kind);
}

static void test_jemalloc(void **state)
{
	check_allocator(state, "alloc_jemalloc", "jemalloc");
}

static void test_mimalloc(void **state)
{
	check_allocator(state, "alloc_mimalloc", "mimalloc");
}

static void test_tcmalloc(void **state)
{
	check_allocator(state, "alloc_tcmalloc", "tcmalloc");
}

/* glibc's malloc inside a -static executable */
static void test_static(void **state)
{
	check_allocator(state, "alloc_static", "static");
}

/* jemalloc dlopen'ed at run time (RTLD_LOCAL) and called through dlsym */
static void test_dlopen(void **state)
{
	check_allocator(state, "alloc_dlopen", "jemalloc");
}

/*
 * The allocator appears only at an exec: bash (glibc) execs the target in place, so the
 * tracker must look at the new image's libraries (or executable) before it runs.
 */
static void check_after_exec(void **state, const char *target)
{
	struct mt_run *r = mt_new_run(state);
	char cmd[512];
	struct mt_run_opts o = {.shell = cmd, .track_opts = mt_mode_opts};
	const struct mt_expect *b;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_target(target));
	snprintf(cmd, sizeof(cmd), "exec %s", mt_target(target));
	mt_track_ok(r, &o, NULL, 0);
	b = mt_need_expect(r, "begin", 0, 0);
	MT_CHECK(r, b->pid == r->root_pid, "target did not replace the shell");
	mt_window_ok(r, b->tid, 0);
}

static void test_jemalloc_after_exec(void **state)
{
	check_after_exec(state, "alloc_jemalloc");
}

static void test_static_after_exec(void **state)
{
	check_after_exec(state, "alloc_static");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_jemalloc, mt_teardown),
		cmocka_unit_test_teardown(test_mimalloc, mt_teardown),
		cmocka_unit_test_teardown(test_tcmalloc, mt_teardown),
		cmocka_unit_test_teardown(test_static, mt_teardown),
		cmocka_unit_test_teardown(test_dlopen, mt_teardown),
		cmocka_unit_test_teardown(test_jemalloc_after_exec, mt_teardown),
		cmocka_unit_test_teardown(test_static_after_exec, mt_teardown),
	};

	/* each in the default mode (a shared family: the interposer), then under uprobes (the
	 * family's own probes, moved past its first instructions: probe_place.h) */
	return MT_RUN_IN_BOTH_MODES(tests);
}
