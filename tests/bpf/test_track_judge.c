// SPDX-License-Identifier: MIT
/*
 * Root tests: a verdict on an executable (what serves it, what is attached for it) belongs to
 * that file as it is, where the process sees it. Each case lost a process's calls silently
 * until 7 December 2026 (status 0, nothing dropped):
 * - an executable rewritten in place took the old file's verdict: known_exe (the BPF side's
 *   mark, which lets the next exec go unstopped), the files inspected and the memo of
 *   inspections knew a file by device and inode only (test_exe_rewritten);
 * - the memo did not know the mount namespace: a second namespace whose libc is another file
 *   (a bind mount) took the first's verdict, and glibc's uprobes went on the first's libc
 *   (test_memo_other_mount_ns).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "../lib/mt_check.h"
#include "../lib/mt_tmpdir.h"

static const char *const auto_opts[] = {"--alloc-hooks", "auto", NULL};
static const char *const uprobe_opts[] = {"--alloc-hooks", "uprobe", NULL};
static const char *const preload_opts[] = {"--alloc-hooks", "preload", NULL};

/* The root process's Mallocs of size bytes after its last Exec (the image it ended in). */
static size_t root_mallocs_last_image(const struct mt_run *r, uint64_t size)
{
	struct mt_filter f = {.type = MT_EV_EXEC, .pid = r->root_pid};
	const struct mt_event **ev = NULL;
	size_t n = mt_select(r, &f, &ev);
	uint64_t t0 = n ? ev[n - 1]->ts : 0;

	free(ev);
	f = (struct mt_filter){
	    .type = MT_EV_MALLOC, .pid = r->root_pid, .by_size = true, .size = size, .t0 = t0};
	return mt_count(r, &f);
}

/*
 * alloc_fixed copied to a file and run (judged: the interposer's in auto and preload mode,
 * nothing to attach in uprobe mode), then the same file rewritten in place with
 * alloc_ownmalloc, whose executable defines malloc (uprobes on the executable record it in
 * every mode), and run again as the root's last image: its 64 Mallocs of 100 + i bytes are
 * each recorded once. Its size differs from alloc_fixed's and the 20 ms pause puts the rewrite
 * in another clock tick than the copy (a change time has a tick's resolution before Linux
 * 6.13): either alone tells the files apart. A file of its own per mode: the last run's
 * uprobes on a file stay until its detacher has closed them, and a file rewritten in place
 * meanwhile gets breakpoints at the old file's offsets (README, "A file rewritten in place
 * while memtrack's uprobes are on it").
 */
static void test_exe_rewritten(void **state)
{
	const char *const *modes[] = {auto_opts, uprobe_opts, preload_opts};
	char dir[128], cmd[2048];

	MT_REQUIRE_ROOT();
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "judge"), 0);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct mt_run *r = mt_new_run(state);
		const char *fixed = mt_target("alloc_fixed"), *own = mt_target("alloc_ownmalloc");

		snprintf(cmd, sizeof(cmd),
			 "cp '%s' '%s/p%zu' && '%s/p%zu' 64 12345 && sleep 0.02 && "
			 "cat '%s' > '%s/p%zu' && exec '%s/p%zu' 64",
			 fixed, dir, m, dir, m, own, dir, m, dir, m);
		struct mt_run_opts o = {.track_opts = modes[m], .shell = cmd, .no_expect_fd = true};
		struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 12345};

		mt_track_ok(r, &o, NULL, 0);
		MT_CHECK(r, mt_count(r, &f) == 64, "%s: %zu Mallocs of 12345 bytes, want 64",
			 modes[m][1], mt_count(r, &f));
		for (uint64_t i = 0; i < 64; i++)
			MT_CHECK(r, root_mallocs_last_image(r, 100 + i) == 1,
				 "%s: the rewritten file's Mallocs of %llu bytes: %zu, want 1",
				 modes[m][1], (unsigned long long)(100 + i),
				 root_mallocs_last_image(r, 100 + i));
	}
	mt_tmpdir_remove(dir);
}

/*
 * An `env -i` alloc_fixed (glibc's uprobes record it), then the same in a mount namespace of
 * its own where libc.so.6 is a copy bind-mounted over the original: the root, executable and
 * environment are the same, the libc is another file, which gets glibc's uprobes too. Each
 * run's 64 Mallocs of 12345 bytes are recorded: 128.
 */
static void test_memo_other_mount_ns(void **state)
{
	static const char libc[] = "/lib/x86_64-linux-gnu/libc.so.6";
	struct mt_run *r = mt_new_run(state);
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 12345};
	struct mt_run_opts o = {.track_opts = auto_opts, .no_expect_fd = true};
	const char *af = mt_target("alloc_fixed");
	char dir[128], cmd[4096];

	MT_REQUIRE_ROOT();
	if (access(libc, R_OK) || access("/usr/bin/unshare", X_OK))
		skip(); /* not Debian's x86-64 layout, or no util-linux */
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "judge-mnt"), 0);
	snprintf(cmd, sizeof(cmd),
		 "cp '%s' '%s/libc.so.6' && env -i '%s' 64 12345 && "
		 "unshare -m --propagation private sh -c \"mount --bind '%s/libc.so.6' '%s' && "
		 "exec env -i '%s' 64 12345\"",
		 libc, dir, af, dir, libc, af);
	o.shell = cmd;
	mt_track_ok(r, &o, NULL, 0);
	MT_CHECK(r, mt_count(r, &f) == 128, "%zu Mallocs of 12345 bytes, want 128 (64 a run)",
		 mt_count(r, &f));
	mt_tmpdir_remove(dir);
}

/*
 * The loader run as a program (`ld.so PROGRAM`): /proc/PID/exe is the loader, whose file holds
 * no allocator and no glibc; the program it maps is judged, and the loader's file is never
 * marked (each of its execs runs another program). `env -i ld.so alloc_fixed` (glibc's
 * uprobes), `ld.so alloc_fixed` (the interposer, or uprobes), then `ld.so alloc_ownmalloc` as
 * the root's last image (uprobes on that executable): 128 Mallocs of 12345 bytes, and the last
 * image's 64 Mallocs of 100 + i bytes each once. Preload mode serves no `env -i` process: the
 * first is left out there. Until 7 December 2026 the first and the last went unrecorded
 * (judged by the loader's file: "no glibc", nothing to attach) and the exec of the last was
 * not even stopped in uprobe mode (the loader's file was known).
 */
static void test_loader_run_directly(void **state)
{
	static const char ld[] = "/lib64/ld-linux-x86-64.so.2";
	const char *const *modes[] = {auto_opts, uprobe_opts, preload_opts};
	const char *fixed = mt_target("alloc_fixed"), *own = mt_target("alloc_ownmalloc");

	MT_REQUIRE_ROOT();
	if (access(ld, X_OK))
		skip(); /* not x86-64 glibc's loader path */
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct mt_run *r = mt_new_run(state);
		struct mt_run_opts o = {.track_opts = modes[m], .no_expect_fd = true};
		struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 12345};
		bool with_env_i = modes[m] != preload_opts;
		char first[1024] = "", cmd[2048];

		if (with_env_i)
			snprintf(first, sizeof(first), "env -i %s '%s' 64 12345 && ", ld, fixed);
		snprintf(cmd, sizeof(cmd), "%s%s '%s' 64 12345 && exec %s '%s' 64", first, ld,
			 fixed, ld, own);
		o.shell = cmd;
		mt_track_ok(r, &o, NULL, 0);
		MT_CHECK(r, mt_count(r, &f) == (with_env_i ? 128u : 64u),
			 "%s: %zu Mallocs of 12345 bytes, want %d", modes[m][1], mt_count(r, &f),
			 with_env_i ? 128 : 64);
		for (uint64_t i = 0; i < 64; i++)
			MT_CHECK(r, root_mallocs_last_image(r, 100 + i) == 1,
				 "%s: alloc_ownmalloc's Mallocs of %llu bytes: %zu, want 1",
				 modes[m][1], (unsigned long long)(100 + i),
				 root_mallocs_last_image(r, 100 + i));
	}
}

/*
 * What an executable maps depends on its environment too: alloc_fixed run once, then with
 * LD_PRELOAD=libjemalloc.so.2 (jemalloc its malloc), whose 64 Mallocs of 1000 bytes go to
 * jemalloc: recorded in every mode, nothing counted lost. The second exec must stop (the
 * file known, in another environment: known_exe's key mixes LD_PRELOAD and LD_LIBRARY_PATH
 * in) so that jemalloc is inspected and attached. Until 7 December 2026 uprobe mode, and auto
 * mode under `env -i` (a process needing glibc's uprobes execs known files unstopped), let it
 * run unstopped: 0 of the 64 recorded, status 0.
 */
static void test_exe_other_preload(void **state)
{
	static const char je[] = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
	static const char *const shells[] = {"bash -c", "env -i /bin/bash -c", "bash -c"};
	const char *const *modes[] = {uprobe_opts, auto_opts, preload_opts};
	const char *fixed = mt_target("alloc_fixed");

	MT_REQUIRE_ROOT();
	if (access(je, R_OK))
		skip(); /* Debian's libjemalloc2 is not installed */
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct mt_run *r = mt_new_run(state);
		struct mt_run_opts o = {.track_opts = modes[m], .no_expect_fd = true};
		struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 1000};
		char cmd[2048];

		snprintf(cmd, sizeof(cmd), "%s \"'%s' 1 1; LD_PRELOAD=%s '%s' 64 1000; true\"",
			 shells[m], fixed, je, fixed);
		o.shell = cmd;
		mt_track_ok(r, &o, NULL, 0);
		MT_CHECK(r, mt_count(r, &f) == 64, "%s (%s): %zu Mallocs of 1000 bytes, want 64",
			 modes[m][1], shells[m], mt_count(r, &f));
	}
}

/*
 * A program whose RUNPATH is $ORIGIN/lib, beside its own copy of libjemalloc.so.2 there (as
 * bundled applications ship): the loader maps that copy, and memtrack, which opens the
 * executable through /proc/PID/exe, must take $ORIGIN from where the executable is. Its 64
 * Mallocs of 3333 bytes (jemalloc its malloc) are recorded in uprobe mode, in auto mode under
 * `env -i` (uprobes) and served, and run through the loader by a relative path. Until 7
 * December 2026 $ORIGIN was /proc/PID, the system's libjemalloc was attached instead: 0 of
 * the 64, status 0.
 */
static void test_exe_origin_runpath(void **state)
{
	static const char je[] = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
	static const char *const shells[] = {"env", "env -i", "env",
					     "cd %s && env -i /lib64/ld-linux-x86-64.so.2 ./p"};
	const char *const *modes[] = {uprobe_opts, auto_opts, auto_opts, auto_opts};
	char dir[128], cmd[2048];

	MT_REQUIRE_ROOT();
	if (access(je, R_OK))
		skip(); /* Debian's libjemalloc2 is not installed */
	/* the program is built here, by its own path: not in the test kernels' guests, which
	 * have no compiler (and what is tested is user space's, the same on every kernel) */
	if (system("command -v cc >/dev/null 2>&1"))
		skip();
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "origin"), 0);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && mkdir lib && cp %s lib/ && printf '#include <stdlib.h>\n"
		 "void *volatile s[64];\nint main(void) { for (int i = 0; i < 64; i++) s[i] = "
		 "malloc(3333); for (int i = 0; i < 64; i++) free(s[i]); return 0; }\n' > p.c && "
		 "cc -o p p.c lib/libjemalloc.so.2 -Wl,--enable-new-dtags,-rpath,'$ORIGIN/lib'",
		 dir, je);
	assert_int_equal(system(cmd), 0);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct mt_run *r = mt_new_run(state);
		struct mt_run_opts o = {.track_opts = modes[m], .no_expect_fd = true, .shell = cmd};
		struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 3333};

		if (m == 3)
			snprintf(cmd, sizeof(cmd), shells[m], dir);
		else
			snprintf(cmd, sizeof(cmd), "%s %s/p", shells[m], dir);
		mt_track_ok(r, &o, NULL, 0);
		MT_CHECK(r, mt_count(r, &f) == 64, "%s (%s): %zu Mallocs of 3333 bytes, want 64",
			 modes[m][1], cmd, mt_count(r, &f));
	}
	mt_tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_exe_rewritten, mt_teardown),
	    cmocka_unit_test_teardown(test_memo_other_mount_ns, mt_teardown),
	    cmocka_unit_test_teardown(test_loader_run_directly, mt_teardown),
	    cmocka_unit_test_teardown(test_exe_other_preload, mt_teardown),
	    cmocka_unit_test_teardown(test_exe_origin_runpath, mt_teardown),
	};

	if (getenv("MT_TEST_FILTER")) /* one test by name (a glob), e.g. to repeat it */
		cmocka_set_test_filter(getenv("MT_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
