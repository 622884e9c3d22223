// SPDX-License-Identifier: MIT
/*
 * memtrack report on a real --stacks run (root): build/targets/stacks (-O2 -fomit-frame-pointer,
 * known call paths, a thread, a linked and a dlopen'ed library) tracked, then reported as
 * folded stacks, pprof and JSON top sites. Per path exactly one folded line with its exact bytes
 * (the frames up to main come from libc and may vary: only what is below is asserted); the folded
 * bytes add up to the run's allocated bytes; the top site by bytes is c() at its malloc's line
 * in stacks.c; the pprof reads back with file:line. One test per event path.
 */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include "../lib/mt_check.h"
#include "../lib/mt_pprof.h"
#include "cli/cmd_report.h"
#include "stacks/stackfile.h"

/* The paths of stacks.c: the end of the folded line, after the frames above main (or above
 * the thread's start routine). */
static const char *const want_lines[] = {
    ";main;a;b 102400",	     ";main;c 655360",	    ";thread_main;d 28672",
    ";main;lib_alloc 10240", ";main;dl_alloc 1536",
};

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);

	return n >= k && !memcmp(s + n - k, suffix, k);
}

/* The line of stacks.c that holds text (1-based), 0 when absent. */
static uint32_t source_line(const char *text)
{
	char path[PATH_MAX], buf[512];
	uint32_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/targets/stacks.c", mt_repo_root());
	f = fopen(path, "r");
	while (f && fgets(buf, sizeof(buf), f)) {
		n++;
		if (strstr(buf, text)) {
			fclose(f);
			return n;
		}
	}
	if (f)
		fclose(f);
	return 0;
}

/*
 * Reports run r as folded stacks (and pprof, JSON top sites into the run's directory): each of
 * the n lines of want (the end of a folded line, after the frames above main or a thread's start
 * routine) appears exactly once, and the folded bytes add up to the run's allocated bytes. Returns
 * the report's JSON (the caller frees it).
 */
static json_t *report_folded(struct mt_run *r, const char *const *want, size_t n)
{
	char folded[PATH_MAX], pp[PATH_MAX], js[PATH_MAX], line[8192];
	size_t found[8] = {0};
	uint64_t sum = 0, allocated;
	json_t *doc;
	FILE *f;

	assert_true(n <= sizeof(found) / sizeof(*found));
	snprintf(folded, sizeof(folded), "%s/out.folded", r->base);
	snprintf(pp, sizeof(pp), "%s/out.pb.gz", r->base);
	snprintf(js, sizeof(js), "%s/out.json", r->base);
	{
		char *argv[] = {"report", "--folded", folded, "--pprof",	pp,  "--top", "3",
				"--json", "-o",	      js,     r->artifact_path, NULL};

		MT_CHECK(r, cmd_report(11, argv) == 0, "memtrack report failed");
	}

	f = fopen(folded, "r");
	MT_CHECK(r, f != NULL, "no %s", folded);
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		char *sp;

		MT_CHECK(r, len && line[len - 1] == '\n', "folded line too long or cut: %s", line);
		line[--len] = 0;
		sp = strrchr(line, ' ');
		MT_CHECK(r, sp != NULL, "folded line without bytes: %s", line);
		sum += strtoull(sp + 1, NULL, 10);
		for (size_t i = 0; i < n; i++)
			found[i] += ends_with(line, len, want[i]);
	}
	fclose(f);
	for (size_t i = 0; i < n; i++)
		MT_CHECK(r, found[i] == 1, "%zu folded lines end with '%s', want 1", found[i],
			 want[i]);

	doc = json_load_file(js, 0, NULL);
	MT_CHECK(r, doc != NULL, "%s is not JSON", js);
	allocated = (uint64_t)json_integer_value(
	    json_object_get(json_object_get(doc, "results"), "allocated_bytes"));
	MT_CHECK(r, sum == allocated, "folded bytes add up to %llu, the run allocated %llu",
		 (unsigned long long)sum, (unsigned long long)allocated);
	return doc;
}

static void report_stacks(void **state, const char *hooks)
{
	const char *const opts[] = {"--alloc-hooks", hooks, "--stacks", NULL};
	struct mt_run_opts o = {.track_opts = opts};
	char pp[PATH_MAX], stk[PATH_MAX];
	struct stackfile sf;
	struct mt_run *r;
	json_t *doc, *site, *f0;
	char *text;
	int rc;

	MT_REQUIRE_ROOT();
	r = mt_new_run(state);
	mt_track_ok(r, &o, MT_TARGET_ARGV("stacks"), 0);
	snprintf(stk, sizeof(stk), "%s/%d%s", r->out, r->root_pid, STACKFILE_SUFFIX);
	rc = stackfile__read(stk, &sf);
	MT_CHECK(r, rc == 0, "cannot read %s: %s", stk, strerror(-rc));
	stackfile__free(&sf);

	doc = report_folded(r, want_lines, sizeof(want_lines) / sizeof(*want_lines));
	snprintf(pp, sizeof(pp), "%s/out.pb.gz", r->base);
	site =
	    json_array_get(json_object_get(json_object_get(json_object_get(doc, "stacks"), "top"),
					   "allocated_bytes"),
			   0);
	f0 = json_array_get(json_object_get(site, "frames"), 0);
	MT_CHECK(r, !strcmp(json_string_value(json_object_get(f0, "function")), "c"),
		 "top site by bytes in %s, want c",
		 json_string_value(json_object_get(f0, "function")));
	MT_CHECK(r, json_integer_value(json_object_get(f0, "line")) == source_line("malloc(65536)"),
		 "c's allocation at line %lld, want %u",
		 (long long)json_integer_value(json_object_get(f0, "line")),
		 source_line("malloc(65536)"));
	MT_CHECK(r, json_integer_value(json_object_get(site, "allocated_bytes")) == 655360,
		 "c allocated %lld",
		 (long long)json_integer_value(json_object_get(site, "allocated_bytes")));
	json_decref(doc);

	if (mt_pprof_decoder()) {
		char want[64];

		text = mt_pprof_decode(pp);
		MT_CHECK(r, text != NULL, "the pprof does not decode");
		snprintf(want, sizeof(want), "tests/targets/stacks.c:%u 10 655360 10 655360\n",
			 source_line("malloc(65536)"));
		MT_CHECK(r, strstr(text, want) != NULL, "no pprof sample ending '%s' in:\n%s", want,
			 text);
		free(text);
	}
}

static void test_report_stacks_preload(void **state)
{
	report_stacks(state, "preload");
}

static void test_report_stacks_uprobe(void **state)
{
	report_stacks(state, "uprobe");
}

/*
 * Short-lived processes in the uprobe path: stacks_short's ten children are reaped before
 * memtrack consumes their records; each image was stopped at its first allocation for its maps
 * to be read (MT_EV_CTL_MAPS_STOPPED), and each fork child allocates with its parent's maps
 * before it execs, so every stack unwinds with its own image's maps, to the exact folded lines.
 */
static void test_report_stacks_short_lived(void **state)
{
	static const char *const opts[] = {"--alloc-hooks", "uprobe", "--stacks", NULL};
	static const char *const want[] = {";main;sa;sb 40000", ";main;sc 60000", ";main;sp 200",
					   ";main;sf 7000"};
	struct mt_run_opts o = {.track_opts = opts};
	struct mt_run *r;

	MT_REQUIRE_ROOT();
	r = mt_new_run(state);
	mt_track_ok(r, &o, MT_TARGET_ARGV("stacks_short"), 0);
	MT_CHECK(r, mt_need_u64(r, "stacks.without.unwind_failed") == 0,
		 "%llu allocations of short-lived processes could not be unwound",
		 (unsigned long long)mt_need_u64(r, "stacks.without.unwind_failed"));
	MT_CHECK(r, mt_need_u64(r, "stacks.with_stack") == mt_need_u64(r, "stacks.allocs"),
		 "%llu of %llu allocations with a stack",
		 (unsigned long long)mt_need_u64(r, "stacks.with_stack"),
		 (unsigned long long)mt_need_u64(r, "stacks.allocs"));
	json_decref(report_folded(r, want, sizeof(want) / sizeof(*want)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_report_stacks_preload, mt_teardown),
	    cmocka_unit_test_teardown(test_report_stacks_uprobe, mt_teardown),
	    cmocka_unit_test_teardown(test_report_stacks_short_lived, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
