// SPDX-License-Identifier: MIT
/*
 * Root tests of --alloc-hooks auto: who serves each process. A tree of dynamically linked
 * programs is served by the interposer alone (no allocator uprobe on any library; glibc keeps
 * its dlopen stops, as in preload mode); what the interposer cannot serve goes to uprobes: a
 * static executable, a child exec'd with an empty environment, a set-group-id (secure-exec)
 * child, an executable defining malloc or with jemalloc linked in. A shared jemalloc,
 * mimalloc or tcmalloc is served as glibc is (no uprobe on it either) unless its process lost
 * the interposer. Each process's calls are counted exactly once: its last image's heap events
 * equal those of a uprobe-mode run (as multisets of type, size and old_addr present), and the
 * manifest names the mechanism. Processes the interposer cannot reach (another user, another
 * namespace, a sandbox, 32-bit programs): test_track_auto_reach.c; the dlopens of served
 * processes: test_track_auto_dlopen.c. Common checks: tests/lib/mt_auto.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <cmocka.h>
#include "../lib/mt_auto.h"
#include "../lib/mt_check.h"
#include "../lib/mt_modes.h"
#include "../lib/mt_tmpdir.h"
#include "bpf/probe_spec.h"
#include "track/alloc_table.h"
#include "track/deps.h"
#include "track/elf_syms.h"

/* A dynamically linked tree: every process served by the interposer, and no uprobe on any
 * shared library: memtrack's only uprobe_multi link is on the interposer's two control points
 * (preload mode has glibc's dlopen stops besides), checked in the kernel's own account of
 * memtrack's links while it runs; nothing attached in the manifest, and the allocator
 * programs never loaded. */
static void test_dynamic_tree_preload_only(void **state)
{
	struct mt_run *a = mt_new_run(state), p = {0}, u = {0};
	char dir[128], shell[2048], fa[192], fp[192], want[PATH_MAX + 8];
	const char *const names[] = {"alloc_each", "nested_cxx", "cxx_static", "threads", NULL};
	char *la, *lp;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_target("cxx_static"));
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "auto"), 0);
	snprintf(fa, sizeof(fa), "%s/auto", dir);
	snprintf(fp, sizeof(fp), "%s/preload", dir);
	/* the last file is replaced per run: memtrack's (the shell's parent's) links at the end;
	 * cxx_static has libstdc++ linked in (its operator new calls the served malloc) */
#define TREE                                                                                       \
	"'%s' && '%s' && '%s' && '%s' join && ls / > /dev/null && '%s' $PPID > '%s'"
	snprintf(shell, sizeof(shell), TREE, mt_target("alloc_each"), mt_target("nested_cxx"),
		 mt_target("cxx_static"), mt_target("threads"), mt_target("uprobe_links"), fa);
	mt_auto_run_ok(a, mt_hooks_auto, shell);
	snprintf(shell, sizeof(shell), TREE, mt_target("alloc_each"), mt_target("nested_cxx"),
		 mt_target("cxx_static"), mt_target("threads"), mt_target("uprobe_links"), fp);
	mt_auto_run_ok(&p, mt_hooks_preload, shell);
	snprintf(shell, sizeof(shell), TREE, mt_target("alloc_each"), mt_target("nested_cxx"),
		 mt_target("cxx_static"), mt_target("threads"), mt_target("uprobe_links"),
		 "/dev/null");
	mt_auto_run_ok(&u, mt_hooks_uprobe, shell);
#undef TREE
	la = mt_auto_links_of(fa);
	lp = mt_auto_links_of(fp);
	mt_tmpdir_remove(dir);
	/* the same control points in preload mode (unless not made yet), and glibc's dlopen
	 * sites there */
	if (mt_auto_only_control_points(a, la, want, sizeof(want)))
		MT_CHECK(&p,
			 (strstr(lp, want) ||
			  !strstr(lp, json_string_value(mt_json(&p, "mechanisms.preload_lib")))) &&
			     strstr(lp, "libc.so"),
			 "uprobe links in preload mode:\n%s", lp);
	MT_CHECK(a, !strcmp(json_string_value(mt_json(a, "mechanisms.alloc_hooks")), "auto"),
		 "mechanisms.alloc_hooks is not auto");
	{
		json_t *procs = json_object_get(a->manifest, "processes"), *pr;
		size_t i;

		json_array_foreach(procs, i, pr)
		{
			int32_t pid = (int32_t)json_integer_value(json_object_get(pr, "pid"));
			const char *h = mt_auto_hooks_of(a, pid, "libc"),
				   *hc = mt_auto_hooks_of(a, pid, "libstdc++");

			MT_CHECK(a, h && hc && !strcmp(h, "preload") && !strcmp(hc, "preload"),
				 "process %d (%s): libc %s, libstdc++ %s", pid,
				 mt_auto_comm_of(a, pid), h ? h : "-", hc ? hc : "-");
		}
	}
	mt_auto_same_events(&u, a, names, 4);
	free(la);
	free(lp);
	mt_run_free(&p);
	mt_run_free(&u);
}

static void test_children_each_once(void **state)
{
	struct mt_run *a = mt_new_run(state), u = {0};
	char dir[128], sg[192], shell[4096];
	const char *const names[] = {"alloc_each",	"alloc_static", "alloc_ownmalloc",
				     "forker",		"cxx_static",	NULL};

	MT_REQUIRE_ROOT();
	mt_need_file(mt_target("alloc_ownmalloc"));
	mt_need_file(mt_target("cxx_static"));
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "auto"), 0);
	assert_int_equal(mt_tmpdir_setgid_copy(dir, "alloc_each", sg, sizeof(sg)), 0);
	/* cxx_static served first (its operator new's sites kept back), then without the
	 * interposer (env -i): glibc's probes and its own go in before it runs */
	snprintf(shell, sizeof(shell),
		 "'%s' && env -i '%s' && '%s' && '%s' 20 && '%s' && '%s' && '%s' > /dev/null && "
		 "'%s' && env -i '%s'",
		 mt_target("alloc_each"), mt_target("alloc_each"), mt_target("alloc_static"),
		 mt_target("alloc_ownmalloc"), sg, mt_target("alloc_each"), mt_target("forker"),
		 mt_target("cxx_static"), mt_target("cxx_static"));
	mt_auto_run_ok(a, mt_hooks_auto, shell);
	mt_auto_run_ok(&u, mt_hooks_uprobe, shell);
	mt_tmpdir_remove(dir);
	/* alloc_each: the first and the last by the interposer; env -i and the set-gid copy by
	 * uprobes (their calls would be lost if the probes were not attached before they ran) */
	MT_CHECK(a,
		 mt_auto_count_hooks(a, "alloc_each", "preload") == 2 &&
		     mt_auto_count_hooks(a, "alloc_each", "uprobe") == 2,
		 "alloc_each: %zu served by preload, %zu by uprobe; want 2 and 2",
		 mt_auto_count_hooks(a, "alloc_each", "preload"),
		 mt_auto_count_hooks(a, "alloc_each", "uprobe"));
	MT_CHECK(a, mt_auto_count_hooks(a, "alloc_static", "uprobe") == 1,
		 "alloc_static not by uprobe");
	MT_CHECK(a, mt_auto_count_hooks(a, "alloc_ownmalloc", "uprobe") == 1,
		 "alloc_ownmalloc not by uprobe");
	/* forker (a child and a grandchild, no exec) after glibc's probes went in: each served,
	 * each once */
	MT_CHECK(a, mt_auto_count_hooks(a, "forker", "preload") == 3, "forker: %zu of 3 by preload",
		 mt_auto_count_hooks(a, "forker", "preload"));
	mt_auto_check_split(a, "cxx_static", 1, 1);
	mt_auto_same_events(&u, a, names, 11);
	mt_run_free(&u);
}

/*
 * An executable judged the interposer's at one exec is judged again by the BPF side at the next,
 * without a stop (src/bpf/exec_judge.bpf.c), only when nothing that decides the judgement has
 * changed. A copy X of alloc_each, in one tree each time:
 * - X three times: the first exec stops and is judged, the next two do not stop: exactly 2
 *   judged unstopped, all three served by the interposer, with uprobe mode's events.
 * - X, X again, `env -i` (no LD_PRELOAD), another LD_LIBRARY_PATH, another pid namespace
 *   (`unshare -p`), X again, then X made set-gid (a secure exec: the loader drops LD_PRELOAD;
 *   the same file, the same environment): the interposer serves four, uprobes three, each with
 *   uprobe mode's events, nothing dropped. How many execs are judged unstopped there depends
 *   on the helpers (busybox's env, chgrp and chmod are one file): 2 at least. Any check
 *   missing, an exec that needed uprobes runs unstopped and unrecorded (its events missing),
 *   or its interposer refuses (a drop).
 */
static void judged_run(void **state, const char *x, const char *shell, size_t served, size_t probed,
		       bool exact)
{
	struct mt_run *a = mt_new_run(state), u = {0};
	const char *const names[] = {"alloc_judged", NULL};
	uint64_t judged;

	mt_auto_run_ok(a, mt_hooks_auto, shell);
	/* the reference runs the same shell on the same file, made plain again first */
	assert_int_equal(chmod(x, 0755), 0);
	assert_int_equal(chown(x, 0, 0), 0);
	mt_auto_run_ok(&u, mt_hooks_uprobe, shell);
	judged = mt_need_u64(a, "mechanisms.execs_judged");
	MT_CHECK(a, exact ? judged == 2 : judged >= 2, "%llu execs judged without a stop, want %s2",
		 (unsigned long long)judged, exact ? "" : ">= ");
	MT_CHECK(a, mt_need_u64(a, "drops.total") == 0, "%llu drops, want 0",
		 (unsigned long long)mt_need_u64(a, "drops.total"));
	mt_auto_check_split(a, "alloc_judged", served, probed);
	mt_auto_same_events(&u, a, names, served + probed);
	mt_run_free(&u);
}

static void test_exec_judged_unstopped(void **state)
{
	char dir[128], x[192], shell[4096];

	MT_REQUIRE_ROOT();
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "judged"), 0);
	assert_int_equal(mt_tmpdir_copy(dir, "alloc_each", "alloc_judged", 0, 0755, x, sizeof(x)),
			 0);
	snprintf(shell, sizeof(shell), "'%1$s' && '%1$s' && '%1$s'", x);
	judged_run(state, x, shell, 3, 0, true);
	snprintf(
	    shell, sizeof(shell),
	    "'%1$s' && '%1$s' && env -i '%1$s' && LD_LIBRARY_PATH=/nonexistent '%1$s' && "
	    "unshare -p -f '%1$s' && '%1$s' && chgrp 65534 '%1$s' && chmod g+s '%1$s' && '%1$s'",
	    x);
	judged_run(state, x, shell, 4, 3, false);
	mt_tmpdir_remove(dir);
}

/*
 * A set-id root command (argv mode, no shell before it): whether its exec is secure is known
 * only once the exec is made, so the root stops at its exec and is judged there (AT_SECURE):
 * a set-user-id-root copy of alloc_each run as root is not secure (its uid stays 0) and is
 * served by the interposer, no uprobe attached; a set-group-id copy (group 65534) is secure,
 * the loader ignores LD_PRELOAD, and glibc's uprobes record it, complete. Both have the same
 * events as in uprobe mode. Until 7 December 2026 any set-id root made auto mode attach
 * glibc's uprobes before it ran (`memtrack track -- su ...`).
 */
static void test_setid_root(void **state)
{
	char dir[128], sg[192], su[192];
	const char *const names[] = {"alloc_each", "alloc_each_suid", NULL};
	struct {
		const char *exe;
		const char *hooks;
	} runs[] = {{su, "preload"}, {sg, "uprobe"}};

	MT_REQUIRE_ROOT();
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "setid"), 0);
	assert_int_equal(mt_tmpdir_setgid_copy(dir, "alloc_each", sg, sizeof(sg)), 0);
	assert_int_equal(
	    mt_tmpdir_copy(dir, "alloc_each", "alloc_each_suid", 0, 04755, su, sizeof(su)), 0);
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		struct mt_run *a = mt_new_run(state), u = {0};
		struct mt_run_opts ao = {.track_opts = mt_hooks_auto};
		const char *const argv[] = {runs[i].exe, NULL};
		const char *comm = strrchr(runs[i].exe, '/') + 1;
		char pre[PATH_MAX + 16];
		/* the uprobe run's environment holds the same two variables (mt_auto_run_ok) */
		const char *const env[] = {
		    pre, "MEMTRACK_PRELOAD_SHM=/dev/shm/memtrack-0-0000000000000000", NULL};
		struct mt_run_opts uo = {.track_opts = mt_hooks_uprobe, .env = env};

		snprintf(pre, sizeof(pre), "LD_PRELOAD=%s/build/libmemtrack-preload.so",
			 mt_repo_root());
		mt_track_ok(a, &ao, argv, 0);
		mt_track_ok(&u, &uo, argv, 0);
		MT_CHECK(a, mt_need_u64(a, "drops.total") == 0, "%s: %llu drops, want 0", comm,
			 (unsigned long long)mt_need_u64(a, "drops.total"));
		MT_CHECK(a, mt_auto_count_hooks(a, comm, runs[i].hooks) == 1,
			 "%s: not served by %s", comm, runs[i].hooks);
		MT_CHECK(a,
			 strcmp(runs[i].hooks, "preload") ||
			     json_array_size(mt_json(a, "libraries")) == 0,
			 "%s: %zu libraries attached for a root the interposer serves", comm,
			 json_array_size(mt_json(a, "libraries")));
		mt_auto_same_events(&u, a, names, 1);
		mt_run_free(&u);
	}
	mt_tmpdir_remove(dir);
}

/* Shared jemalloc, mimalloc and tcmalloc as the program's malloc: served by the interposer
 * (src/preload/preload_families.c), each call once, and, as for glibc, no uprobe on any
 * library: not on glibc's, not on the family's (checked while memtrack runs, as in
 * test_dynamic_tree_preload_only), nothing attached in the manifest. */
static void test_allocators_preload_only(void **state)
{
	struct mt_run *a = mt_new_run(state), u = {0};
	char dir[128], shell[4096], fa[192], want[PATH_MAX + 8];
	const char *const names[] = {"alloc_jemalloc", "alloc_mimalloc", "alloc_tcmalloc", NULL};
	const char *const fams[] = {"jemalloc", "mimalloc", "tcmalloc"};
	char *la;

	MT_REQUIRE_ROOT();
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "auto"), 0);
	snprintf(fa, sizeof(fa), "%s/auto", dir);
#define TREE "'%s' && '%s' && '%s' && '%s' $PPID > '%s'"
	snprintf(shell, sizeof(shell), TREE, mt_target("alloc_jemalloc"),
		 mt_target("alloc_mimalloc"), mt_target("alloc_tcmalloc"),
		 mt_target("uprobe_links"), fa);
	mt_auto_run_ok(a, mt_hooks_auto, shell);
	snprintf(shell, sizeof(shell), TREE, mt_target("alloc_jemalloc"),
		 mt_target("alloc_mimalloc"), mt_target("alloc_tcmalloc"),
		 mt_target("uprobe_links"), "/dev/null");
	mt_auto_run_ok(&u, mt_hooks_uprobe, shell);
#undef TREE
	la = mt_auto_links_of(fa);
	mt_tmpdir_remove(dir);
	for (size_t i = 0; names[i]; i++) {
		json_t *procs = json_object_get(a->manifest, "processes"), *pr;
		size_t j, n = 0;

		json_array_foreach(procs, j, pr)
		{
			int32_t pid = (int32_t)json_integer_value(json_object_get(pr, "pid"));
			const char *c = mt_auto_comm_of(a, pid),
				   *h = mt_auto_hooks_of(a, pid, "libc"),
				   *hf = mt_auto_hooks_of(a, pid, fams[i]);

			n += c && !strcmp(c, names[i]) && h && !strcmp(h, "preload") && hf &&
			     !strcmp(hf, "preload");
		}
		MT_CHECK(a, n == 1, "%s: %zu processes with libc and %s served by preload, want 1",
			 names[i], n, fams[i]);
	}
	mt_auto_only_control_points(a, la, want, sizeof(want));
	mt_auto_same_events(&u, a, names, 3);
	free(la);
	mt_run_free(&u);
}

/* What the interposer cannot serve among family programs it serves: a shared family library
 * under a cleared environment (its sites kept back at the first, served, exec of the same
 * library, whose process is gone by then), and jemalloc linked into the executable; uprobes
 * from their exec on, each call once. */
static void test_allocators_unserved(void **state)
{
	struct mt_run *a = mt_new_run(state), u = {0};
	char shell[4096];
	const char *const names[] = {"alloc_jemalloc", "alloc_mimalloc", "alloc_tcmalloc",
				     "alloc_jemalloc_", NULL}; /* comm: 15 characters */

	MT_REQUIRE_ROOT();
	mt_need_file(mt_target("alloc_jemalloc_exe"));
	snprintf(shell, sizeof(shell), "'%s' && '%s' && env -i '%s' && '%s' && env -i '%s' && '%s'",
		 mt_target("alloc_jemalloc"), mt_target("alloc_mimalloc"),
		 mt_target("alloc_jemalloc"), mt_target("alloc_tcmalloc"),
		 mt_target("alloc_mimalloc"), mt_target("alloc_jemalloc_exe"));
	mt_auto_run_ok(a, mt_hooks_auto, shell);
	mt_auto_run_ok(&u, mt_hooks_uprobe, shell);
	MT_CHECK(
	    a,
	    mt_auto_count_hooks(a, "alloc_jemalloc", "preload") == 1 &&
		mt_auto_count_hooks(a, "alloc_jemalloc", "uprobe") == 1 &&
		mt_auto_count_hooks(a, "alloc_mimalloc", "preload") == 1 &&
		mt_auto_count_hooks(a, "alloc_mimalloc", "uprobe") == 1 &&
		mt_auto_count_hooks(a, "alloc_tcmalloc", "preload") == 1 &&
		mt_auto_count_hooks(a, "alloc_jemalloc_", "uprobe") == 1,
	    "by preload/uprobe: alloc_jemalloc %zu/%zu, alloc_mimalloc %zu/%zu, alloc_tcmalloc "
	    "%zu/%zu, alloc_jemalloc_exe %zu/%zu; want 1/1, 1/1, 1/0, 0/1",
	    mt_auto_count_hooks(a, "alloc_jemalloc", "preload"),
	    mt_auto_count_hooks(a, "alloc_jemalloc", "uprobe"),
	    mt_auto_count_hooks(a, "alloc_mimalloc", "preload"),
	    mt_auto_count_hooks(a, "alloc_mimalloc", "uprobe"),
	    mt_auto_count_hooks(a, "alloc_tcmalloc", "preload"),
	    mt_auto_count_hooks(a, "alloc_tcmalloc", "uprobe"),
	    mt_auto_count_hooks(a, "alloc_jemalloc_", "preload"),
	    mt_auto_count_hooks(a, "alloc_jemalloc_", "uprobe"));
	/* and the family's own label says the same: the served ones `preload`, the first
	 * process under a cleared environment (judged at its exec stop) `uprobe`; the second
	 * one's executable is known by then and its exec does not stop once glibc's probes are
	 * attached, so its family goes unlabelled (README); no process gets a family it does
	 * not map; jemalloc linked into the executable is jemalloc served by uprobes */
	MT_CHECK(a,
		 mt_auto_count_family(a, "alloc_jemalloc", "jemalloc", "preload") == 1 &&
		     mt_auto_count_family(a, "alloc_jemalloc", "jemalloc", "uprobe") == 1 &&
		     mt_auto_count_family(a, "alloc_mimalloc", "mimalloc", "preload") == 1 &&
		     mt_auto_count_family(a, "alloc_tcmalloc", "tcmalloc", "preload") == 1 &&
		     mt_auto_count_family(a, "alloc_tcmalloc", "tcmalloc", "uprobe") == 0 &&
		     mt_auto_count_family(a, "alloc_jemalloc", "mimalloc", "uprobe") == 0 &&
		     mt_auto_count_family(a, "alloc_jemalloc_", "jemalloc", "uprobe") == 1,
		 "family labels, preload/uprobe: jemalloc %zu/%zu, mimalloc %zu/%zu, tcmalloc "
		 "%zu/%zu, jemalloc_exe 0/%zu; want 1/1, 1/(0 or 1), 1/0, 0/1",
		 mt_auto_count_family(a, "alloc_jemalloc", "jemalloc", "preload"),
		 mt_auto_count_family(a, "alloc_jemalloc", "jemalloc", "uprobe"),
		 mt_auto_count_family(a, "alloc_mimalloc", "mimalloc", "preload"),
		 mt_auto_count_family(a, "alloc_mimalloc", "mimalloc", "uprobe"),
		 mt_auto_count_family(a, "alloc_tcmalloc", "tcmalloc", "preload"),
		 mt_auto_count_family(a, "alloc_tcmalloc", "tcmalloc", "uprobe"),
		 mt_auto_count_family(a, "alloc_jemalloc_", "jemalloc", "uprobe"));
	mt_auto_same_events(&u, a, names, 6);
	mt_run_free(&u);
}

/* A family library preloaded ahead of the interposer (LD_PRELOAD="libtcmalloc.so.4 ..." as
 * launch scripts do with jemalloc): the interposer's malloc is not the program's, it passes
 * through, and memtrack must see that at the exec and give the process uprobes. Alone in its
 * tree: an unservable process before it would have attached them already. */
static void test_family_preloaded_first(void **state)
{
	struct mt_run *a = mt_new_run(state), u = {0};
	char shell[1024];
	const char *const names[] = {"alloc_tcmalloc", NULL};

	MT_REQUIRE_ROOT();
	snprintf(shell, sizeof(shell), "LD_PRELOAD=\"libtcmalloc.so.4 $LD_PRELOAD\" '%s'",
		 mt_target("alloc_tcmalloc"));
	mt_auto_run_ok(a, mt_hooks_auto, shell);
	mt_auto_run_ok(&u, mt_hooks_uprobe, shell);
	MT_CHECK(a, mt_auto_count_hooks(a, "alloc_tcmalloc", "uprobe") == 1,
		 "alloc_tcmalloc with tcmalloc preloaded first: %zu by uprobe, %zu by preload; "
		 "want 1/0",
		 mt_auto_count_hooks(a, "alloc_tcmalloc", "uprobe"),
		 mt_auto_count_hooks(a, "alloc_tcmalloc", "preload"));
	mt_auto_same_events(&u, a, names, 1);
	mt_run_free(&u);
}

/* A process's labels are its last image's: bash with jemalloc preloaded ahead of the
 * interposer (judged to need uprobes, jemalloc among its kinds) execs ls with the interposer
 * alone (served), in the same pid: ls is `preload` and has no jemalloc label. */
static void test_labels_last_image(void **state)
{
	struct mt_run *a = mt_new_run(state);
	char shell[1024];

	MT_REQUIRE_ROOT();
	snprintf(shell, sizeof(shell),
		 "LD_PRELOAD=\"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 $LD_PRELOAD\" exec bash -c "
		 "\"LD_PRELOAD=$LD_PRELOAD exec /usr/bin/ls / >/dev/null\"");
	mt_auto_run_ok(a, mt_hooks_auto, shell);
	MT_CHECK(a,
		 mt_auto_count_hooks(a, "ls", "preload") == 1 &&
		     mt_auto_count_family(a, "ls", "jemalloc", "uprobe") == 0 &&
		     mt_auto_count_family(a, "ls", "jemalloc", "preload") == 0,
		 "ls: libc by preload %zu (want 1), jemalloc labelled uprobe %zu / preload %zu "
		 "(want 0/0: its earlier image's)",
		 mt_auto_count_hooks(a, "ls", "preload"),
		 mt_auto_count_family(a, "ls", "jemalloc", "uprobe"),
		 mt_auto_count_family(a, "ls", "jemalloc", "preload"));
}

/* The environment chooses the mode, auto is the default, and uprobe mode stays available. */
static void test_mode_choice(void **state)
{
	struct mt_run *r = mt_new_run(state), e = {0};
	const char *const env[] = {"MEMTRACK_ALLOC_HOOKS=uprobe", NULL};
	struct mt_run_opts o = {.env = env};

	const char *given;
	char *saved;

	MT_REQUIRE_ROOT();
	/* the default is what memtrack picks with no MEMTRACK_ALLOC_HOOKS, whatever the suite's */
	given = getenv("MEMTRACK_ALLOC_HOOKS");
	saved = given ? strdup(given) : NULL;
	unsetenv("MEMTRACK_ALLOC_HOOKS");
	mt_track_ok(r, NULL, MT_TARGET_ARGV("alloc_each"), 0);
	if (saved)
		setenv("MEMTRACK_ALLOC_HOOKS", saved, 1);
	free(saved);
	MT_CHECK(r, !strcmp(json_string_value(mt_json(r, "mechanisms.alloc_hooks")), "auto"),
		 "the default is not auto");
	MT_CHECK(r, mt_auto_count_hooks(r, "alloc_each", "preload") == 1,
		 "alloc_each not served by preload");
	mt_track_ok(&e, &o, MT_TARGET_ARGV("alloc_each"), 0);
	MT_CHECK(&e, !strcmp(json_string_value(mt_json(&e, "mechanisms.alloc_hooks")), "uprobe"),
		 "MEMTRACK_ALLOC_HOOKS=uprobe is not uprobe mode");
	MT_CHECK(&e, mt_auto_count_hooks(&e, "alloc_each", "uprobe") == 1,
		 "alloc_each not by uprobe");
	mt_run_free(&e);
}

static long libc_sites_attached(const struct mt_run *r)
{
	json_t *libs = json_object_get(r->manifest, "libraries"), *e;
	size_t i;

	json_array_foreach(libs, i, e)
	{
		const char *path = json_string_value(json_object_get(e, "path"));

		if (path && strstr(path, "/libc.so.6"))
			return (long)json_integer_value(json_object_get(e, "sites"));
	}
	return 0;
}

/* How many of glibc's sites are its dlopen stop (MT_SPEC_DLOPEN), and all of them. */
static void libc_site_counts(long *dlopen, long *all)
{
	struct alloc_site sites[64];
	struct elf_info info;
	char path[PATH_MAX];
	int n;

	assert_int_equal(deps__ldcache_lookup("", "libc.so.6", path, sizeof(path)), 0);
	assert_int_equal(elf_info__load(path, &info), 0);
	n = alloc_table__sites(&info, ALLOC_LIBC, false, sites, 64);
	elf_info__free(&info);
	*all = n;
	*dlopen = 0;
	for (int i = 0; i < n; i++)
		*dlopen += (sites[i].spec & MT_SPEC_DLOPEN) != 0;
}

/*
 * An executable that defines malloc (alloc_jemalloc_exe: jemalloc linked in) needs uprobes,
 * its own; the loader binds every malloc of that process to it, so glibc's allocator entry
 * points are never reached there and only glibc's dlopen stop goes in
 * (libs__attach_glibc_dlopen): the served process after it traps nowhere. rustc is such a
 * program: `rustc -O hello.rs` tracked took 0.87 s with glibc's probes on for its linker
 * (rust-lld, served), 0.46 s without (bare 0.30 s). A process that needs glibc's probes after
 * it (a cleared environment) gets them all. Events as under uprobes, process by process.
 */
static void test_exe_malloc_dlopen_only(void **state)
{
	struct mt_run *a = mt_new_run(state), u = {0}, b = {0}, ub = {0};
	const char *const names[] = {"alloc_jemalloc_", "alloc_each", NULL}; /* comm: 15 chars */
	char shell[4096];
	long dlopen, all;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_target("alloc_jemalloc_exe"));
	libc_site_counts(&dlopen, &all);
	assert_true(dlopen > 0 && all > dlopen);
	snprintf(shell, sizeof(shell), "'%s' && '%s'", mt_target("alloc_jemalloc_exe"),
		 mt_target("alloc_each"));
	mt_auto_run_ok(a, mt_hooks_auto, shell);
	mt_auto_run_ok(&u, mt_hooks_uprobe, shell);
	MT_CHECK(a, libc_sites_attached(a) == dlopen,
		 "%ld of glibc's sites attached, want its %ld dlopen stop sites alone",
		 libc_sites_attached(a), dlopen);
	mt_auto_check_split(a, "alloc_each", 1, 0);
	MT_CHECK(a, mt_auto_count_family(a, "alloc_jemalloc_", "jemalloc", "uprobe") == 1,
		 "alloc_jemalloc_exe: its jemalloc not labelled uprobe");
	mt_auto_same_events(&u, a, names, 2);
	/* then a process that needs glibc's own probes: all of them go in */
	snprintf(shell, sizeof(shell), "'%s' && env -i '%s'", mt_target("alloc_jemalloc_exe"),
		 mt_target("alloc_each"));
	mt_auto_run_ok(&b, mt_hooks_auto, shell);
	mt_auto_run_ok(&ub, mt_hooks_uprobe, shell);
	MT_CHECK(&b, libc_sites_attached(&b) == all, "%ld of glibc's %ld sites attached",
		 libc_sites_attached(&b), all);
	mt_auto_check_split(&b, "alloc_each", 0, 1);
	mt_auto_same_events(&ub, &b, names, 2);
	mt_run_free(&u);
	mt_run_free(&b);
	mt_run_free(&ub);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_dynamic_tree_preload_only, mt_teardown),
	    cmocka_unit_test_teardown(test_children_each_once, mt_teardown),
	    cmocka_unit_test_teardown(test_allocators_preload_only, mt_teardown),
	    cmocka_unit_test_teardown(test_allocators_unserved, mt_teardown),
	    cmocka_unit_test_teardown(test_exe_malloc_dlopen_only, mt_teardown),
	    cmocka_unit_test_teardown(test_family_preloaded_first, mt_teardown),
	    cmocka_unit_test_teardown(test_labels_last_image, mt_teardown),
	    cmocka_unit_test_teardown(test_mode_choice, mt_teardown),
	    cmocka_unit_test_teardown(test_setid_root, mt_teardown),
	    cmocka_unit_test_teardown(test_exec_judged_unstopped, mt_teardown),
	};

	if (getenv("MT_TEST_FILTER")) /* one test by name (a glob), e.g. to repeat it */
		cmocka_set_test_filter(getenv("MT_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
