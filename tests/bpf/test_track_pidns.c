// SPDX-License-Identifier: MIT
/*
 * Root tests: memtrack inside a pid namespace (a container, `unshare -p -f --mount-proc`),
 * where it is pid 1 and its command pid 2. The BPF programs number processes as that
 * namespace does (src/track/pidns.c), so the command registered by its pid there is followed,
 * with its children, in both --alloc-hooks modes; the run ends when the tree does (it used to
 * wait for a signal, having tracked nothing).
 * - forker's calls, Forks and Exits are recorded once each, under the pids the processes
 *   themselves reported (the side channel), and the manifest names pid 2 as the root;
 * - two memtracks in two sibling namespaces at once, both with a pid 2 of their own: each
 *   records its own tree's calls only (a check of the depth without the namespace's identity
 *   would mix them);
 * - as pid 1, memtrack reaps the orphans the tree leaves it, as an init does (they stayed
 *   zombies until it exited);
 * - a /proc of another namespace (`unshare -p -f` without --mount-proc) is refused before the
 *   command runs, saying what to do;
 * - memtrack on the host, its tree entering a namespace of its own: the interposer leaves such
 *   processes (its getpid() is not their pid here), so in auto mode an exec there goes to the
 *   uprobes and its calls carry the pid its Fork gave; a fork child that enters one without
 *   exec'ing is counted (drops.unserved), never recorded under a pid of that namespace.
 */
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
#include "../lib/mt_check.h"
#include "../lib/mt_tmpdir.h"

#define UNSHARE "/usr/bin/unshare"

static const char *const in_pid_ns[] = {UNSHARE, "-p", "-f", "--mount-proc", NULL};
static const char *const uprobe_opts[] = {"--alloc-hooks", "uprobe", NULL};
static const char *const preload_opts[] = {"--alloc-hooks", "preload", NULL};

static void check_forker(void **state, const char *const *track_opts)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = track_opts, .wrap = in_pid_ns};
	const struct mt_expect *fk, *gk;
	int32_t child, grandchild;

	MT_REQUIRE_ROOT();
	mt_need_file(UNSHARE);
	mt_track_ok(r, &o, MT_TARGET_ARGV("forker"), 0);
	MT_CHECK(r, r->root_pid == 2, "artifact named for pid %d, want 2 (memtrack is pid 1)",
		 r->root_pid);
	MT_CHECK(r, mt_need_u64(r, "root_pid") == 2, "manifest root_pid %llu, want 2",
		 (unsigned long long)mt_need_u64(r, "root_pid"));
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "manifest complete is not true");
	fk = mt_need_expect(r, "fork", r->root_pid, 0);
	child = (int32_t)fk->size;
	gk = mt_need_expect(r, "fork", child, 0);
	grandchild = (int32_t)gk->size;
	/* the pids the processes reported are the artifact's */
	mt_window_ok(r, child, 0);
	mt_window_ok(r, grandchild, 0);
	mt_each_op_once(r);
	for (int i = 0; i < 3; i++) {
		int32_t pid = i == 0 ? r->root_pid : i == 1 ? child : grandchild;
		struct mt_filter f = {.type = MT_EV_EXIT, .pid = pid};
		struct mt_filter k = {.type = MT_EV_FORK, .pid = pid};

		MT_CHECK(r, mt_count(r, &f) == 1, "%zu Exit events for pid %d, want 1",
			 mt_count(r, &f), pid);
		MT_CHECK(r, i == 0 || mt_count(r, &k) == 1, "%zu Fork events for pid %d, want 1",
			 mt_count(r, &k), pid);
	}
}

static void test_forker_uprobe(void **state)
{
	check_forker(state, uprobe_opts);
}

static void test_forker_preload(void **state)
{
	check_forker(state, preload_opts);
}

/*
 * Two trees at once, each in its own namespace at the same depth: both roots are pid 2, and
 * their children get the same small pids. B allocates 22222-byte blocks while A's tree is
 * alive (the flags order it: A starts, B allocates, then A allocates), with every allocator
 * call trapping in both memtracks' uprobes.
 */
static void test_sibling_namespaces(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = uprobe_opts, .wrap = in_pid_ns};
	char dir[64], out_b[96], cmd_a[512], cmd_b[512];
	struct mt_filter own = {.type = MT_EV_MALLOC, .by_size = true, .size = 11111};
	struct mt_filter other = {.type = MT_EV_MALLOC, .by_size = true, .size = 22222};
	struct mt_proc b;
	size_t n_own, n_other;
	int err;

	MT_REQUIRE_ROOT();
	mt_need_file(UNSHARE);
	mt_need_file(mt_memtrack());
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "pidns"), 0);
	snprintf(out_b, sizeof(out_b), "%s/out_b", dir);
	/* each wait gives up after 30 s, so a broken run cannot hang the other */
	snprintf(cmd_b, sizeof(cmd_b),
		 "for i in $(seq 3000); do [ -e %s/a_up ] && break; sleep 0.01; done; "
		 "%s 64 22222; touch %s/b_done",
		 dir, mt_target("alloc_fixed"), dir);
	snprintf(cmd_a, sizeof(cmd_a),
		 "touch %s/a_up; for i in $(seq 3000); do [ -e %s/b_done ] && break; sleep 0.01; "
		 "done; [ -e %s/b_done ] && %s 64 11111",
		 dir, dir, dir, mt_target("alloc_fixed"));
	{
		const char *argv_b[] = {"/usr/bin/timeout", "-s", "KILL", "90", UNSHARE,
					"-p", "-f", "--mount-proc", mt_memtrack(), "track",
					"-q", "--alloc-hooks", "uprobe", "-o", out_b,
					cmd_b, NULL};

		assert_int_equal(mt_proc_start(&b, argv_b), 0);
	}
	o.shell = cmd_a;
	o.no_expect_fd = true;
	err = mt_track(r, &o, NULL);
	assert_int_equal(mt_proc_wait(&b, 90), 0);
	mt_proc_free(&b);
	mt_tmpdir_remove(dir);
	MT_CHECK(r, err == 0, "harness could not run memtrack: %s", strerror(-err));
	MT_CHECK(r, r->status == 0, "memtrack A exited %d, want 0 (B first: its flag?)", r->status);
	MT_CHECK(r, b.status == 0, "memtrack B exited %d, want 0", b.status);
	n_own = mt_count(r, &own);
	n_other = mt_count(r, &other);
	MT_CHECK(r, n_own == 64, "%zu Mallocs of 11111 bytes from A's own tree, want 64", n_own);
	MT_CHECK(r, n_other == 0, "%zu Mallocs of 22222 bytes, B's, in A's artifact, want 0",
		 n_other);
}

/* Two orphans (their subshells exit at once) end under memtrack, pid 1; the command waits up
 * to 10 s for their /proc entries to go, which only their reaping does (a zombie keeps its
 * entry), and says by its status whether they went. */
static void test_orphans_reaped(void **state)
{
	struct mt_run *r = mt_new_run(state);
	static const char cmd[] =
	    "d=$(mktemp -d); (sleep 0.1 & echo $! > $d/a); (sleep 0.1 & echo $! > $d/b); "
	    "a=$(cat $d/a); b=$(cat $d/b); rm -rf $d; "
	    "for i in $(seq 1000); do [ -d /proc/$a ] || [ -d /proc/$b ] || exit 0; sleep 0.01; "
	    "done; exit 1";
	struct mt_run_opts o = {.wrap = in_pid_ns, .shell = cmd, .no_expect_fd = true};

	MT_REQUIRE_ROOT();
	mt_need_file(UNSHARE);
	mt_track_ok(r, &o, NULL, 0); /* 1: an orphan stayed a zombie */
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "manifest complete is not true");
}

/* `unshare -p -f` alone leaves the host's /proc: memtrack would read other processes there. */
static void test_foreign_proc_refused(void **state)
{
	struct mt_run *r = mt_new_run(state);
	static const char *const no_mount[] = {UNSHARE, "-p", "-f", NULL};
	char cmd[256], marker[96];
	struct mt_run_opts o = {.wrap = no_mount, .shell = cmd, .no_expect_fd = true};

	MT_REQUIRE_ROOT();
	mt_need_file(UNSHARE);
	snprintf(marker, sizeof(marker), "/tmp/mt_pidns_ran.%d", (int)getpid());
	unlink(marker);
	snprintf(cmd, sizeof(cmd), "touch %s", marker);
	assert_int_equal(mt_track(r, &o, NULL), 0);
	MT_CHECK(r, r->status == 125, "memtrack exited %d, want 125", r->status);
	MT_CHECK(r, r->log && strstr(r->log, "/proc belongs to another pid namespace") &&
			strstr(r->log, "--mount-proc"),
		 "no refusal naming the remedy in memtrack's output");
	MT_CHECK(r, access(marker, F_OK) == -1, "the command ran");
	MT_CHECK(r, r->nr_artifacts == 0, "%zu artifacts written, want none", r->nr_artifacts);
	unlink(marker);
}

/* The manifest's entry for the process named comm (the first); its pid, 0 if none. */
static int32_t pid_of(struct mt_run *r, const char *comm, size_t nth, const char **hooks)
{
	json_t *procs = mt_json(r, "processes"), *p;
	size_t i;

	json_array_foreach(procs, i, p) {
		if (strcmp(json_string_value(json_object_get(p, "comm")) ?: "", comm) || nth--)
			continue;
		if (hooks)
			*hooks = json_string_value(
			    json_object_get(json_object_get(p, "alloc_hooks"), "libc"));
		return (int32_t)json_integer_value(json_object_get(p, "pid"));
	}
	return 0;
}

/* Every heap event's process has a Fork or is the root: none under a pid of another namespace */
static void check_heap_pids_known(struct mt_run *r)
{
	for (size_t i = 0; i < r->nr_ev; i++) {
		struct mt_filter f = {.type = MT_EV_FORK, .pid = r->ev[i].pid};

		if (!mt_is_heap_type(r->ev[i].type) || r->ev[i].pid == r->root_pid)
			continue;
		MT_CHECK(r, mt_count(r, &f) == 1, "a %s under pid %d, which has no Fork",
			 mt_type_name(r->ev[i].type), r->ev[i].pid);
	}
}

static void check_tree_enters_namespace(void **state, const char *const *env)
{
	struct mt_run *r = mt_new_run(state);
	static const char *const auto_opts[] = {"--alloc-hooks", "auto", NULL};
	struct mt_run_opts o = {.track_opts = auto_opts, .no_expect_fd = true, .env = env};
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 12345};
	const char *hooks = NULL;
	int32_t pid;

	MT_REQUIRE_ROOT();
	mt_need_file(UNSHARE);
	mt_track_ok(r, &o,
		    (const char *const[]){UNSHARE, "-p", "-f", "--mount-proc",
					  mt_target("alloc_fixed"), "64", "12345", NULL},
		    0);
	pid = pid_of(r, "alloc_fixed", 0, &hooks);
	MT_CHECK(r, pid > 0, "no alloc_fixed in the manifest's processes");
	MT_CHECK(r, hooks && !strcmp(hooks, "uprobe"), "alloc_fixed's glibc served by %s, want uprobe",
		 hooks ? hooks : "nothing");
	f.pid = pid;
	MT_CHECK(r, mt_count(r, &f) == 64, "%zu Mallocs of 12345 bytes under its pid %d, want 64",
		 mt_count(r, &f), pid);
	check_heap_pids_known(r);
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "manifest complete is not true");
	if (env) /* made late, not taken from a finished run (live from the start) */
		MT_CHECK(r,
			 strcmp(json_string_value(mt_json(r, "mechanisms.control_link")) ?: "",
				"taken from a finished run"),
			 "control_link %s: the late link was not tested",
			 json_string_value(mt_json(r, "mechanisms.control_link")) ?: "-");
}

static void test_tree_enters_namespace_auto(void **state)
{
	check_tree_enters_namespace(state, NULL);
}

/* The same with memtrack's control link made 300 ms late (as it can be, one RCU grace period
 * after the start): unshare's parent calls before it, so its fork child re-registers at the
 * fork (preload_ctl.c), where this one, in a pid namespace of its own, must not count itself
 * lost: it makes no call before its exec. Deterministic where the plain case is a race. */
static void test_tree_enters_namespace_late_link(void **state)
{
	static const char *const late_env[] = {"MEMTRACK_TEST_CTL_DELAY_MS=300", NULL};

	check_tree_enters_namespace(state, late_env);
}

/* A run of preload_edges ARG (pidns_fork, pidns_vfork): the parent's 8 Mallocs of 13132
 * bytes recorded; those of each size in sizes (n[i] of them, by a process in the new
 * namespace) recorded only in uprobe mode, and in auto each such process counted unserved. */
static void check_into_namespace(void **state, const char *mode, const char *arg,
				 const size_t *sizes, const size_t *n, size_t nr)
{
	struct mt_run *r = mt_new_run(state);
	const char *const opts[] = {"--alloc-hooks", mode, NULL};
	struct mt_run_opts o = {.track_opts = opts, .no_expect_fd = true};
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 13132};
	bool uprobe = !strcmp(mode, "uprobe");
	int32_t child;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("preload_edges", arg), uprobe ? 0 : 123);
	child = pid_of(r, "preload_edges", 1, NULL);
	MT_CHECK(r, child > 0 && child != r->root_pid, "the child is not in the manifest");
	f.pid = r->root_pid;
	MT_CHECK(r, mt_count(r, &f) == 8, "%zu Mallocs of 13132 bytes by the parent, want 8",
		 mt_count(r, &f));
	f.pid = 0;
	for (size_t i = 0; i < nr; i++) {
		f.size = sizes[i];
		MT_CHECK(r, mt_count(r, &f) == (uprobe ? n[i] : 0),
			 "%s: %zu Mallocs of %zu bytes in all, want %zu", arg, mt_count(r, &f),
			 sizes[i], uprobe ? n[i] : 0);
	}
	/* the first child's, under its pid as memtrack knows it */
	f.size = sizes[0];
	f.pid = child;
	MT_CHECK(r, mt_count(r, &f) == (uprobe ? n[0] : 0),
		 "%zu Mallocs of %zu bytes under the child's pid %d, want %zu", mt_count(r, &f),
		 sizes[0], child, uprobe ? n[0] : 0);
	MT_CHECK(r, mt_need_u64(r, "drops.unserved") == (uprobe ? 0 : nr),
		 "drops.unserved %llu, want %zu",
		 (unsigned long long)mt_need_u64(r, "drops.unserved"), uprobe ? 0 : nr);
	check_heap_pids_known(r);
}

/* The child, in the new namespace, first forks a grandchild before either makes a call: in
 * the child's namespace, which its fork handler must not take for memtrack's
 * (preload_ring.c). */
static void check_fork_into_namespace(void **state, const char *mode)
{
	static const size_t sizes[] = {13131, 13133}, n[] = {8, 8};

	check_into_namespace(state, mode, "pidns_fork", sizes, n, 2);
}

/* The same with vfork: the child runs on its parent's memory, where the parent's answer to
 * "which namespace" is kept (its calls were recorded under its pid inside, 1, until 7
 * December 2026). */
static void check_vfork_into_namespace(void **state, const char *mode)
{
	static const size_t sizes[] = {13135}, n[] = {4};

	check_into_namespace(state, mode, "pidns_vfork", sizes, n, 1);
}

static void test_vfork_into_namespace_auto(void **state)
{
	check_vfork_into_namespace(state, "auto");
}

static void test_vfork_into_namespace_uprobe(void **state)
{
	check_vfork_into_namespace(state, "uprobe");
}

static void test_fork_into_namespace_auto(void **state)
{
	check_fork_into_namespace(state, "auto");
}

static void test_fork_into_namespace_uprobe(void **state)
{
	check_fork_into_namespace(state, "uprobe");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_forker_uprobe, mt_teardown),
	    cmocka_unit_test_teardown(test_forker_preload, mt_teardown),
	    cmocka_unit_test_teardown(test_sibling_namespaces, mt_teardown),
	    cmocka_unit_test_teardown(test_foreign_proc_refused, mt_teardown),
	    cmocka_unit_test_teardown(test_orphans_reaped, mt_teardown),
	    cmocka_unit_test_teardown(test_tree_enters_namespace_auto, mt_teardown),
	    cmocka_unit_test_teardown(test_tree_enters_namespace_late_link, mt_teardown),
	    cmocka_unit_test_teardown(test_fork_into_namespace_auto, mt_teardown),
	    cmocka_unit_test_teardown(test_fork_into_namespace_uprobe, mt_teardown),
	    cmocka_unit_test_teardown(test_vfork_into_namespace_auto, mt_teardown),
	    cmocka_unit_test_teardown(test_vfork_into_namespace_uprobe, mt_teardown),
	};

	if (getenv("MT_TEST_FILTER")) /* one test by name (a glob), e.g. to repeat it */
		cmocka_set_test_filter(getenv("MT_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
