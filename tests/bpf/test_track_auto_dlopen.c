// SPDX-License-Identifier: MIT
/*
 * Root tests of --alloc-hooks auto: the dlopens of a served process. The interposer announces
 * a load at the next dlsym (src/preload/preload_dl.c) and memtrack inspects what it mapped
 * before dlsym returns; a load that brings only files memtrack inspected already goes on
 * without that stop (mechanisms.dlopens_judged). Either way, every allocator call into the
 * new library is recorded: the heap events equal a uprobe-mode run's, process by process.
 * Who serves a tree: test_track_auto.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "../lib/mt_auto.h"
#include "../lib/mt_check.h"
#include "../lib/mt_modes.h"
#include "../lib/mt_tmpdir.h"
#include "track/attach.h"
#include "track/deps.h"

/* The interposer's dlsym leaves glibc's idea of the caller alone (RTLD_NEXT), before and after
 * the dlopen it announces (tests/targets/dlsym_caller.c exits 0 only then). */
static void test_dlsym_caller(void **state)
{
	struct mt_run *a = mt_new_run(state);
	char shell[PATH_MAX + 8];

	MT_REQUIRE_ROOT();
	snprintf(shell, sizeof(shell), "'%s'", mt_target("dlsym_caller"));
	mt_auto_run_ok(a, mt_hooks_auto, shell);
}

/* A served process stops for memtrack once per dlopen it announces, at its next dlsym, and not
 * at a dlsym with no load before it: dlsym_caller calls dlsym before and after its one dlopen,
 * and is the tree's only process (the root's exec does not stop: mechanisms.stops 1). The
 * loader's count of objects added is read at start: without that, the first dlsym of every
 * program stopped it (~0.5-1 ms). */
static void test_dlsym_stops_once(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = mt_hooks_auto};

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("dlsym_caller"), 0);
	MT_CHECK(r, mt_need_u64(r, "mechanisms.stops") == 1, "%llu stops, want 1 (one dlopen)",
		 (unsigned long long)mt_need_u64(r, "mechanisms.stops"));
}

/*
 * A load that brings only files memtrack inspected needs no stop. dlopen_family loads
 * libmimalloc (RTLD_LOCAL, not the process's malloc: uprobes record it) and calls it at once;
 * dlsym_caller loads libz. Each runs twice in one tree: the first load of each stops, memtrack
 * attaches mimalloc's sites and lists both files; the second brings listed files only and is
 * judged by the interposer (exactly 2 judged). The four processes' heap events equal uprobe
 * mode's: mimalloc's calls right after the unannounced load are recorded by the uprobes the
 * first one put on the file. A walk that took the wrong objects for the new ones (the
 * program's, which are listed) leaves the first mimalloc load unannounced and its calls
 * unrecorded. With --stacks nothing is listed (a dlopen stop reads the maps that stacks are
 * unwound with): 0 judged.
 */
static void test_dlopen_judged_listed(void **state)
{
	const char *const stacks[] = {"--alloc-hooks", "auto", "--stacks", NULL};
	const char *const names[] = {"dlopen_family", "dlsym_caller", NULL};
	struct mt_run *a = mt_new_run(state), u = {0}, s = {0};
	char shell[4 * PATH_MAX + 64];
	uint64_t judged;
	size_t calls = 0;

	MT_REQUIRE_ROOT();
	snprintf(shell, sizeof(shell), "'%s' && '%s' && '%s' && '%s'", mt_target("dlopen_family"),
		 mt_target("dlopen_family"), mt_target("dlsym_caller"), mt_target("dlsym_caller"));
	mt_auto_run_ok(a, mt_hooks_auto, shell);
	mt_auto_run_ok(&u, mt_hooks_uprobe, shell);
	MT_CHECK(a, mt_need_u64(a, "drops.total") == 0, "%llu drops, want 0",
		 (unsigned long long)mt_need_u64(a, "drops.total"));
	mt_auto_same_events(&u, a, names, 4);
	/* and mimalloc's calls are there (not missing from both runs alike) */
	for (size_t i = 0; i < a->nr_exp; i++)
		if (mt_op_type(a->exp[i].op) != MT_EV_NONE) {
			calls++;
			MT_CHECK(a, mt_count_matching(a, &a->exp[i]) == 1,
				 "process %d: its %s of %llu bytes recorded %zu times, want 1",
				 a->exp[i].pid, a->exp[i].op, (unsigned long long)a->exp[i].size,
				 mt_count_matching(a, &a->exp[i]));
		}
	MT_CHECK(a, calls == 8, "%zu mimalloc calls reported, want 8 (2 processes)", calls);
	judged = mt_need_u64(a, "mechanisms.dlopens_judged");
	MT_CHECK(a, judged == 2, "%llu dlopens judged without a stop, want 2",
		 (unsigned long long)judged);
	mt_auto_run_ok(&s, stacks, shell);
	judged = mt_need_u64(&s, "mechanisms.dlopens_judged");
	MT_CHECK(&s, judged == 0, "%llu dlopens judged with --stacks, want 0",
		 (unsigned long long)judged);
	mt_auto_same_events(&u, &s, names, 4);
	mt_run_free(&u);
	mt_run_free(&s);
}

/*
 * A shared jemalloc that is one process's malloc (alloc_jemalloc, linked with it: the
 * interposer serves it there) and that another process dlopen's RTLD_LOCAL and calls through
 * dlsym (alloc_dlopen, whose malloc is glibc's: only uprobes see those calls). Each order in
 * one tree, then with glibc's uprobes in meanwhile (an `env -i` late_work needs them: the
 * jemalloc kept back with them goes in too) and a last alloc_dlopen once they are out again.
 * Each process's heap events equal uprobe mode's. Until 7 December 2026 the first order lost
 * every call of alloc_dlopen's (the file was kept back for the served process: the dlopen
 * attached nothing) and the second counted alloc_jemalloc's twice (attached at the dlopen for
 * every process, the interposer recording them as well); both runs said complete. The site's
 * family (MT_SPEC_FAM) skips only a process served with that family as its malloc
 * (mt_proc.served); a kept-back family file brought by a dlopen goes in for good
 * (libs__family_dlopened), its own link group kept when glibc's go out.
 */
static void test_family_dlopened_and_served(void **state)
{
	const char *const names[] = {"alloc_jemalloc", "alloc_dlopen", NULL};
	const char *j = mt_target("alloc_jemalloc"), *d = mt_target("alloc_dlopen");
	char shell[3][4 * PATH_MAX + 256];
	size_t want[3] = {2, 2, 3};

	MT_REQUIRE_ROOT();
	/* the static TLS alloc_dlopen's jemalloc needs, given at once: it re-execs itself
	 * through /proc/self/exe for it otherwise, and is then named "exe" */
#define TLS "export GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536; "
	snprintf(shell[0], sizeof(shell[0]), TLS "'%s' > /dev/null && '%s'", j, d);
	snprintf(shell[1], sizeof(shell[1]), TLS "'%s' && '%s' > /dev/null", d, j);
	snprintf(shell[2], sizeof(shell[2]),
		 TLS "env -i MT_EXPECT_FD=$MT_EXPECT_FD '%s' 600 & sleep 0.2; '%s' > /dev/null && "
		     "'%s'; wait; sleep 0.3; '%s'",
		 mt_target("late_work"), j, d, d);
#undef TLS
	for (int i = 0; i < 3; i++) {
		struct mt_run *a = mt_new_run(state), u = {0};

		mt_auto_run_ok(a, mt_hooks_auto, shell[i]);
		mt_auto_run_ok(&u, mt_hooks_uprobe, shell[i]);
		MT_CHECK(a, mt_need_u64(a, "drops.total") == 0, "%llu drops, want 0",
			 (unsigned long long)mt_need_u64(a, "drops.total"));
		mt_auto_same_events(&u, a, names, want[i]);
		/* the last alloc_dlopen came after glibc's uprobes went out (uprobe_multi: taken
		 * out; perf uprobes stay in) */
		if (i == 2 && attach__probe_uprobe_multi())
			MT_CHECK(
			    a, mt_need_u64(a, "mechanisms.glibc_detaches") >= 1,
			    "glibc's uprobes never taken out: the last dlopen checked nothing");
		mt_run_free(&u);
	}
}

/* One run of argv with the inert-file cache at cache (auto mode), exit 0; its dlopens judged. */
static uint64_t kept_run(struct mt_run *r, const char *cache, const char *ld_path,
			 const char *const *argv)
{
	char env_cache[PATH_MAX + 32], env_lp[PATH_MAX + 32];
	const char *env[3] = {env_cache, NULL, NULL};
	struct mt_run_opts o = {.track_opts = mt_hooks_auto, .env = env};

	snprintf(env_cache, sizeof(env_cache), "MEMTRACK_INERT_CACHE=%s", cache);
	if (ld_path) {
		snprintf(env_lp, sizeof(env_lp), "LD_LIBRARY_PATH=%s", ld_path);
		env[1] = env_lp;
	}
	mt_track_ok(r, &o, argv, 0);
	MT_CHECK(r, mt_need_u64(r, "drops.total") == 0, "%llu drops, want 0",
		 (unsigned long long)mt_need_u64(r, "drops.total"));
	return mt_need_u64(r, "mechanisms.dlopens_judged");
}

/*
 * The inert files of earlier runs (src/track/inert_cache.h). dlsym_caller loads libz (a copy
 * in a folder of the test's, found through LD_LIBRARY_PATH): the first run stops there and
 * keeps the file; the next is judged without a stop (no stop at all: the root's exec does not
 * stop). The copy touched (a new change time: another file) stops again, and is kept again.
 * A cache file others may write is not read. libmimalloc, which holds an allocator, is never
 * kept: dlopen_family's second run stops too, and each of its mimalloc calls is recorded.
 * Made to compare device and inode only, the touched copy is judged: the test fails.
 */
static void test_dlopen_inert_kept(void **state)
{
	struct mt_run *r = mt_new_run(state);
	char dir[128], cache[PATH_MAX], z[PATH_MAX], cmd[2 * PATH_MAX], c[PATH_MAX], f[PATH_MAX];
	const char *const caller[] = {c, NULL}, *const family[] = {f, NULL};
	size_t calls = 0;

	MT_REQUIRE_ROOT();
	/* mt_target's buffers rotate: copied */
	snprintf(c, sizeof(c), "%s", mt_target("dlsym_caller"));
	snprintf(f, sizeof(f), "%s", mt_target("dlopen_family"));
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "inert"), 0);
	snprintf(cache, sizeof(cache), "%s/inert-files", dir);
	assert_int_equal(deps__ldcache_lookup("", "libz.so.1", z, sizeof(z)), 0);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s/libz.so.1'", z, dir);
	assert_int_equal(system(cmd), 0);
	MT_CHECK(r, kept_run(r, cache, dir, caller) == 0, "first run: its dlopen judged");
	MT_CHECK(r, access(cache, F_OK) == 0, "no cache written at %s", cache);
	MT_CHECK(r, kept_run(r, cache, dir, caller) == 1, "second run: its dlopen not judged");
	MT_CHECK(r, mt_need_u64(r, "mechanisms.stops") == 0, "second run: %llu stops, want 0",
		 (unsigned long long)mt_need_u64(r, "mechanisms.stops"));
	snprintf(cmd, sizeof(cmd), "%s/libz.so.1", dir);
	assert_int_equal(utimensat(AT_FDCWD, cmd, NULL, 0), 0);
	MT_CHECK(r, kept_run(r, cache, dir, caller) == 0, "touched: its dlopen judged");
	MT_CHECK(r, kept_run(r, cache, dir, caller) == 1, "touched, kept again: not judged");
	assert_int_equal(chmod(cache, 0666), 0);
	MT_CHECK(r, kept_run(r, cache, dir, caller) == 0, "a cache others may write was read");
	assert_int_equal(unlink(cache), 0);
	for (int i = 0; i < 2; i++)
		MT_CHECK(r, kept_run(r, cache, NULL, family) == 0,
			 "run %d: the dlopen of libmimalloc judged", i + 1);
	for (size_t i = 0; i < r->nr_exp; i++)
		if (mt_op_type(r->exp[i].op) != MT_EV_NONE) {
			calls++;
			MT_CHECK(r, mt_count_matching(r, &r->exp[i]) == 1,
				 "its %s of %llu bytes recorded %zu times, want 1", r->exp[i].op,
				 (unsigned long long)r->exp[i].size,
				 mt_count_matching(r, &r->exp[i]));
		}
	MT_CHECK(r, calls == 4, "%zu mimalloc calls reported, want 4", calls);
	mt_tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_dlsym_caller, mt_teardown),
	    cmocka_unit_test_teardown(test_dlsym_stops_once, mt_teardown),
	    cmocka_unit_test_teardown(test_dlopen_judged_listed, mt_teardown),
	    cmocka_unit_test_teardown(test_family_dlopened_and_served, mt_teardown),
	    cmocka_unit_test_teardown(test_dlopen_inert_kept, mt_teardown),
	};

	if (getenv("MT_TEST_FILTER")) /* one test by name (a glob), e.g. to repeat it */
		cmocka_set_test_filter(getenv("MT_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
