// SPDX-License-Identifier: MIT
/*
 * Root tests of --alloc-hooks preload (src/preload/, src/track/shm_source.c): the event-by-event
 * targets give the same heap events per process under the interposer as under uprobes (type,
 * size, old_addr present or not; pids differ between runs, so the per-process multisets are
 * compared as a multiset), the manifest says which mechanism served each process, the ordering
 * guarantees hold (a process's records before its Exit, the old image's before Exec, a child's
 * after its Fork), the shared memory is private to the user and removed, a crash keeps what
 * was written before it, and a command outlives a killed memtrack.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <bpf/btf.h>
#include "../lib/mt_check.h"
#include "../lib/mt_modes.h"
#include "../lib/mt_tmpdir.h"
#include "track/stamp_clock.h"

static const char *const uprobe_opts[] = {"--alloc-hooks", "uprobe", NULL};
static const char *const preload_opts[] = {"--alloc-hooks", "preload", NULL};

/* Every heap event of a process lies between its first record (Fork, or the root's Exec) and
 * its Exit, and none of an image before its Exec lies after it: checked in artifact order. */
static void check_order(struct mt_run *r)
{
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *e = &r->ev[i];

		if (e->type != MT_EV_EXIT && e->type != MT_EV_EXEC)
			continue;
		for (size_t j = i + 1; j < r->nr_ev; j++) {
			const struct mt_event *x = &r->ev[j];

			if (e->type == MT_EV_EXIT)
				MT_CHECK(r, x->pid != e->pid || !mt_is_heap_type(x->type),
					 "a %s of pid %d (ts %llu) after its Exit (ts %llu)",
					 mt_type_name(x->type), x->pid, (unsigned long long)x->ts,
					 (unsigned long long)e->ts);
			else
				MT_CHECK(r, x->pid != e->pid || x->ts >= e->ts ||
						    !mt_is_heap_type(x->type),
					 "a %s of pid %d's old image (ts %llu) after its Exec "
					 "(ts %llu)",
					 mt_type_name(x->type), x->pid, (unsigned long long)x->ts,
					 (unsigned long long)e->ts);
		}
		for (size_t j = 0; e->type == MT_EV_EXEC && j < i; j++)
			MT_CHECK(r, r->ev[j].pid != e->pid || r->ev[j].ts <= e->ts ||
					    !mt_is_heap_type(r->ev[j].type),
				 "a record of pid %d's new image before its Exec", e->pid);
	}
	for (size_t i = 0; i < r->nr_ev; i++) {
		if (r->ev[i].type != MT_EV_FORK)
			continue;
		for (size_t j = 0; j < i; j++)
			MT_CHECK(r, r->ev[j].pid != r->ev[i].pid || !mt_is_heap_type(r->ev[j].type),
				 "pid %d allocates before its Fork", r->ev[i].pid);
	}
}

/* Each process's manifest entry says which mechanism served it. */
static void check_hooks(struct mt_run *r, const char *want)
{
	json_t *procs = json_object_get(r->manifest, "processes"), *p;
	size_t i;

	MT_CHECK(r, json_is_array(procs) && json_array_size(procs) > 0, "no processes");
	json_array_foreach(procs, i, p) {
		json_t *h = json_object_get(p, "alloc_hooks");
		const char *libc = json_string_value(json_object_get(h, "libc"));

		MT_CHECK(r, libc && !strcmp(libc, want), "process %lld: alloc_hooks.libc %s, want %s",
			 (long long)json_integer_value(json_object_get(p, "pid")),
			 libc ? libc : "(none)", want);
	}
}

/* Each process's alloc_hooks.<family> (jemalloc, mimalloc, tcmalloc) is want (NULL: absent). */
static void check_family(struct mt_run *r, const char *family, const char *want)
{
	json_t *procs = json_object_get(r->manifest, "processes"), *p;
	size_t i;

	json_array_foreach(procs, i, p)
	{
		const char *v =
		    json_string_value(json_object_get(json_object_get(p, "alloc_hooks"), family));

		MT_CHECK(r, want ? v && !strcmp(v, want) : !v,
			 "process %lld: alloc_hooks.%s %s, want %s",
			 (long long)json_integer_value(json_object_get(p, "pid")), family,
			 v ? v : "(none)", want ? want : "(none)");
	}
}

/* Both modes give the same heap events per process. In the preload run alloc_hooks.libc is
 * libc_want and, when family is set, alloc_hooks.<family> is fam_want (NULL: absent). */
static void compare_modes_as(void **state, const char *const argv[], const char *const *env,
			     const char *libc_want, const char *family, const char *fam_want)
{
	struct mt_run *u = mt_new_run(state), p = {0};
	struct mt_run_opts uo = {.track_opts = uprobe_opts, .env = env},
			   po = {.track_opts = preload_opts, .env = env};
	struct mt_proc_ms *a, *b;
	size_t na, nb;

	MT_REQUIRE_ROOT();
	mt_track_ok(u, &uo, argv, 0);
	assert_int_equal(mt_track(&p, &po, argv), 0);
	if (p.status != 0 || p.read_rc) {
		mt_run_dump(&p);
		fail_msg("preload run: status %d, read %d", p.status, p.read_rc);
	}
	check_hooks(u, "uprobe");
	check_hooks(&p, libc_want);
	if (family)
		check_family(&p, family, fam_want);
	check_order(&p);
	na = mt_modes_per_process(u, NULL, NULL, &a);
	nb = mt_modes_per_process(&p, NULL, NULL, &b);
	if (na != nb)
		mt_run_dump(&p);
	assert_int_equal(na, nb);
	for (size_t i = 0; i < na; i++) {
		if (!mt_modes_same(a[i].s, b[i].s)) {
			mt_run_dump(&p);
			fail_msg("process %zu of %zu differs:\n uprobe  (%zu): %.600s\n preload (%zu): "
				 "%.600s",
				 i, na, a[i].n, a[i].s, b[i].n, b[i].s);
		}
	}
	mt_modes_free(a, na);
	mt_modes_free(b, nb);
	mt_run_free(&p);
}

static void compare_modes(void **state, const char *const argv[])
{
	compare_modes_as(state, argv, NULL, "preload", NULL, NULL);
}

static void test_same_alloc_each(void **s) { compare_modes(s, MT_TARGET_ARGV("alloc_each")); }
static void test_same_nested_cxx(void **s) { compare_modes(s, MT_TARGET_ARGV("nested_cxx")); }
/* libstdc++ linked into the executable: its operator new calls the served malloc */
static void test_same_cxx_static(void **s) { compare_modes(s, MT_TARGET_ARGV("cxx_static")); }
/* libstdc++ loaded by dlopen(RTLD_LOCAL), outside the global scope (cxx_dlopen.c): the
 * interposer's operators forward to it all the same (it used to abort there) */
static void test_same_cxx_dlopen(void **s)
{
	compare_modes(s, MT_TARGET_ARGV("cxx_dlopen"));
}

/* The root's AlignedAlloc sizes, in order, into got (up to cap); returns how many. */
static size_t aligned_sizes(const struct mt_run *r, uint64_t *got, size_t cap)
{
	size_t n = 0;

	for (size_t k = 0; k < r->nr_ev; k++)
		if (r->ev[k].type == MT_EV_ALIGNED_ALLOC && r->ev[k].pid == r->root_pid && n < cap)
			got[n++] = r->ev[k].size;
	return n;
}

/* The listed difference (README, "Known differences"): an executable with libstdc++ linked in
 * rounds an aligned new's size up to the alignment before its aligned_alloc, the one call the
 * interposer sees; uprobes on the executable's operator record the size asked for. One event
 * each way: new(333, align 64) and new[](555, align 128). */
static void test_cxx_static_aligned(void **state)
{
	struct mt_run *u = mt_new_run(state), p = {0};
	struct mt_run_opts uo = {.track_opts = uprobe_opts}, po = {.track_opts = preload_opts};
	uint64_t a[4], b[4];
	size_t na, nb;

	MT_REQUIRE_ROOT();
	mt_track_ok(u, &uo, MT_TARGET_ARGV("cxx_static", "aligned"), 0);
	assert_int_equal(mt_track(&p, &po, MT_TARGET_ARGV("cxx_static", "aligned")), 0);
	na = aligned_sizes(u, a, 4);
	nb = aligned_sizes(&p, b, 4);
	MT_CHECK(u, na == 2 && a[0] == 333 && a[1] == 555, "uprobe: %zu aligned, %llu %llu", na,
		 (unsigned long long)a[0], (unsigned long long)(na > 1 ? a[1] : 0));
	if (!(nb == 2 && b[0] == 384 && b[1] == 640))
		mt_run_dump(&p);
	MT_CHECK(u, nb == 2 && b[0] == 384 && b[1] == 640, "preload: %zu aligned, %llu %llu", nb,
		 (unsigned long long)(nb ? b[0] : 0), (unsigned long long)(nb > 1 ? b[1] : 0));
	mt_run_free(&p);
}
static void test_same_forker(void **s) { compare_modes(s, MT_TARGET_ARGV("forker")); }
static void test_same_forker_50(void **s) { compare_modes(s, MT_TARGET_ARGV("forker", "50")); }
static void test_same_threads(void **s) { compare_modes(s, MT_TARGET_ARGV("threads", "join")); }
static void test_same_leader_exit(void **s)
{
	compare_modes(s, MT_TARGET_ARGV("threads", "leader-exit"));
}
static void test_same_exec_chain(void **s) { compare_modes(s, MT_TARGET_ARGV("exec_chain", "3")); }
static void test_same_exec_thread(void **s)
{
	compare_modes(s, MT_TARGET_ARGV("exec_chain", "3", "thread"));
}
static void test_same_storm_2x2(void **s)
{
	compare_modes(s, MT_TARGET_ARGV("alloc_storm", "-n", "20000", "-t", "2", "-p", "2"));
}
static void test_same_edges(void **s) { compare_modes(s, MT_TARGET_ARGV("preload_edges")); }

/* jemalloc, mimalloc and tcmalloc as shared libraries (linked, or preloaded by the user): the
 * interposer serves them (preload_families.c), their own entry points included; jemalloc
 * linked into the executable stays on uprobes (the interposer passes through: "none"). */
static void test_same_jemalloc(void **s)
{
	compare_modes_as(s, MT_TARGET_ARGV("alloc_jemalloc"), NULL, "preload", "jemalloc",
			 "preload");
}
static void test_same_mimalloc(void **s)
{
	compare_modes_as(s, MT_TARGET_ARGV("alloc_mimalloc"), NULL, "preload", "mimalloc",
			 "preload");
}
static void test_same_tcmalloc(void **s)
{
	compare_modes_as(s, MT_TARGET_ARGV("alloc_tcmalloc"), NULL, "preload", "tcmalloc",
			 "preload");
}
static void test_same_mimalloc_preloaded(void **s)
{
	static const char *const env[] = {"LD_PRELOAD=libmimalloc.so.2", NULL};

	compare_modes_as(s, MT_TARGET_ARGV("forker"), env, "preload", "mimalloc", "preload");
}
static void test_same_jemalloc_in_exe(void **s)
{
	compare_modes_as(s, MT_TARGET_ARGV("alloc_jemalloc_exe"), NULL, "none", "jemalloc", NULL);
}

/* Under the interposer, each family target's calls (the standard names and mi_malloc, mallocx,
 * tc_malloc, tc_new ...) are each in the artifact exactly once, and the process says the
 * interposer served that family (its library's uprobes, MT_SPEC_PL, skip served processes). */
static void check_family_calls(void **state, const char *target)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts};
	const struct mt_expect *b;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV(target), 0);
	b = mt_need_expect(r, "begin", 0, 0);
	mt_window_ok(r, b->tid, 0);
	mt_each_op_once(r);
	check_family(r, target + strlen("alloc_"), "preload");
}
/* A library with its own operator new and delete, -Bsymbolic-functions as libLLVM
 * (cxx_own_ops.c): its code calls delete directly (internal to the library), and delete frees
 * through the PLT. Under uprobes that free is the user-visible call; it was taken as nested in
 * the internal one and lost (rustc lost half of its frees). Every call once, in both modes. */
static void check_own_ops(void **state, const char *const *opts)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = opts};
	const struct mt_expect *b;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("cxx_own_ops"), 0);
	b = mt_need_expect(r, "begin", 0, 0);
	mt_window_ok(r, b->tid, 0);
	mt_each_op_once(r);
}
static void test_own_ops_each_call_uprobe(void **s)
{
	check_own_ops(s, uprobe_opts);
}
static void test_own_ops_each_call_preload(void **s)
{
	check_own_ops(s, preload_opts);
}

/* The same library's calls under the interposer: each reported operator is in the artifact
 * exactly once (in its window), and so are its constructor's new, made inside dlopen, and the
 * delete of that block. */
static void test_cxx_dlopen_each_call(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts};
	const struct mt_expect *b;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("cxx_dlopen"), 0);
	b = mt_need_expect(r, "begin", 0, 0);
	mt_window_ok(r, b->tid, 0);
	mt_need_expect(r, "malloc", 0, 0);
	mt_each_op_once(r);
	check_hooks(r, "preload");
}
static void test_jemalloc_each_call(void **s)
{
	check_family_calls(s, "alloc_jemalloc");
}
static void test_mimalloc_each_call(void **s)
{
	check_family_calls(s, "alloc_mimalloc");
}
static void test_tcmalloc_each_call(void **s)
{
	check_family_calls(s, "alloc_tcmalloc");
}

/* The edge target's own account: every call it reported is in the artifact, attributed to the
 * process that made it (raw clone child, signal handler, the records before abort()). */
static void test_edges_each_call(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts};

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("preload_edges"), 0);
	for (size_t i = 0; i < r->nr_exp; i++) {
		const struct mt_expect *x = &r->exp[i];
		struct mt_filter f = {.type = mt_op_type(x->op), .pid = x->pid, .by_addr = true,
				      .addr = x->addr};

		if (f.type == MT_EV_NONE)
			continue;
		MT_CHECK(r, mt_count(r, &f) == 1, "%s of %#llx by pid %d: %zu events, want 1",
			 x->op, (unsigned long long)x->addr, x->pid, mt_count(r, &f));
	}
}

/* The record of a heap call of pid at addr whose time lies in [lo, hi], or NULL. */
static const struct mt_event *heap_event(const struct mt_run *r, uint32_t type, int32_t pid,
					 uint64_t addr, uint64_t lo, uint64_t hi)
{
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *e = &r->ev[i];

		if (e->type == type && e->pid == pid && e->addr == addr && e->ts >= lo &&
		    e->ts <= hi)
			return e;
	}
	return NULL;
}

/*
 * Whether this kernel keeps a task's own counter changes in the task (SPLIT_RSS_COUNTING,
 * Linux < 6.2: struct task_rss_stat in task_struct). A fault then adds to task->rss_stat, not
 * to the mm, and no rss_stat event fires; the task folds its cache into the mm (and the event
 * fires) at its 64th fault event since the last fold, or at exit. The last pages a touch
 * faulted can thus reach the mm at any later fault of the task: after the free that unmapped
 * them (whose zap counts on the mm at once), or before the next round's malloc.
 */
static bool task_rss_cache(void)
{
	struct btf *btf = btf__load_vmlinux_btf();
	bool yes = btf && btf__find_by_name_kind(btf, "task_rss_stat", BTF_KIND_STRUCT) > 0;

	btf__free(btf);
	return yes;
}

/*
 * The manifest says how the interposer stamped: clock_gettime with MEMTRACK_PRELOAD_TSC=0; else
 * the TSC wherever the clocksource is tsc, or kvm-clock with a pvclock page that says its TSC
 * is stable (read here as in stamp_clock.c: this machine and CI's Firecracker guests), and a
 * reason whenever it is not the TSC.
 */
static void check_stamp_clock(struct mt_run *r, bool tsc)
{
	json_t *mech = json_object_get(r->manifest, "mechanisms");
	const char *clock = json_string_value(json_object_get(mech, "preload_clock"));
	const char *why = json_string_value(json_object_get(mech, "preload_clock_reason"));
	char cs[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
	bool want_tsc;

	if (f) {
		if (!fgets(cs, sizeof(cs), f))
			cs[0] = 0;
		fclose(f);
	}
	cs[strcspn(cs, "\n")] = 0;
	want_tsc = tsc && (!strcmp(cs, "tsc") ||
			   (!strcmp(cs, "kvm-clock") &&
			    (stamp_clock__pvclock_flags() & STAMP_PVCLOCK_TSC_STABLE) > 0));
#if !defined(__x86_64__)
	want_tsc = false;
#endif
	MT_CHECK(r, clock && !strcmp(clock, want_tsc ? "tsc" : "clock_gettime"),
		 "mechanisms.preload_clock %s (reason %s), want %s (clocksource %s)",
		 clock ? clock : "missing", why ? why : "null", want_tsc ? "tsc" : "clock_gettime",
		 cs);
	MT_CHECK(r, want_tsc == !why, "preload_clock_reason %s with preload_clock %s",
		 why ? why : "null", clock ? clock : "missing");
}

/*
 * The interposer's stamps against the kernel's clock, in one thread (target interleave): each
 * Malloc and Free lies within the target's own clock reads around the call, the Rss rises the
 * touch causes (written by BPF) between that Malloc and Free, the fall (munmap inside free)
 * after the Free (in time and in artifact order); a forked child's Malloc after its Fork and
 * before its Exit. Gaps of >= 5 us against a stamp error under 0.4 us
 * (src/preload/preload_clock.c): exact, not a tolerance. Where the kernel caches a task's
 * counter changes (task_rss_cache: 6.1), an Rss rise is the fold of that cache, written at
 * whichever fault of the task folds it, so its time says nothing about the touch: rises are
 * then only counted, their times not checked (falls, the zap inside free, count at once).
 * `tsc`: the TSC path (the default where the clocksource is tsc or a TSC-stable kvm-clock, as
 * here and in CI; the manifest's mechanisms.preload_clock says which ran) or clock_gettime
 * (MEMTRACK_PRELOAD_TSC=0).
 */
static void check_interleave(void **state, bool tsc)
{
	static const char *const no_tsc[] = {"MEMTRACK_PRELOAD_TSC=0", NULL};
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts, .env = tsc ? NULL : no_tsc};
	const struct mt_expect *fk;
	const struct mt_event *fork_ev = NULL, *exit_ev = NULL, *m;
	int32_t pid, kid;
	size_t rounds;
	bool rise_times;

	MT_REQUIRE_ROOT();
	rise_times = !task_rss_cache();
	mt_track_ok(r, &o, MT_TARGET_ARGV("interleave", "20"), 0);
	check_order(r);
	check_stamp_clock(r, tsc);
	rounds = mt_expect_count(r->exp, r->nr_exp, "t0", 0);
	MT_CHECK(r, rounds == 20, "%zu rounds on the side channel, want 20", rounds);
	pid = mt_need_expect(r, "t0", 0, 0)->pid;
	for (size_t k = 0; k < rounds; k++) {
		uint64_t t[4], addr = mt_need_expect(r, "malloc", 0, k)->addr, prev = 0;
		const struct mt_event *mal, *fr;
		size_t rises = 0, falls = 0;

		for (int j = 0; j < 4; j++) {
			char op[3] = {'t', (char)('0' + j), 0};

			t[j] = mt_need_expect(r, op, 0, k)->size;
		}
		mal = heap_event(r, MT_EV_MALLOC, pid, addr, t[0], t[1]);
		fr = heap_event(r, MT_EV_FREE, pid, addr, t[2], t[3]);
		MT_CHECK(r, mal, "round %zu: no Malloc of %#llx within [t0 %llu, t1 %llu]", k,
			 (unsigned long long)addr, (unsigned long long)t[0],
			 (unsigned long long)t[1]);
		MT_CHECK(r, fr, "round %zu: no Free of %#llx within [t2 %llu, t3 %llu]", k,
			 (unsigned long long)addr, (unsigned long long)t[2],
			 (unsigned long long)t[3]);
		for (size_t i = 0; i < r->nr_ev; i++) {
			const struct mt_event *e = &r->ev[i];

			if (e->type != MT_EV_RSS || e->pid != pid || e->aux != MT_RSS_ANON)
				continue;
			if (e->ts < t[0]) {
				prev = e->size; /* BPF writes a process's Rss in time order */
				continue;
			}
			if (e->ts > t[3])
				break;
			if (e->size > prev && !rise_times) {
				rises++;
			} else if (e->size > prev) {
				rises++;
				MT_CHECK(
				    r, e->ts > mal->ts && e->ts < fr->ts,
				    "round %zu: Rss rise at %llu outside Malloc %llu .. Free %llu",
				    k, (unsigned long long)e->ts, (unsigned long long)mal->ts,
				    (unsigned long long)fr->ts);
				/* and after it in the artifact (the consumer's order hook); not
				 * before the Free: the last top is written at the fall, inside
				 * free, with the time it was reached */
				MT_CHECK(r, e > mal, "round %zu: Rss rise #%zu before Malloc #%zu in the artifact",
					 k, (size_t)(e - r->ev), (size_t)(mal - r->ev));
			} else if (e->size < prev) {
				falls++;
				MT_CHECK(r, e->ts > fr->ts,
					 "round %zu: Rss fall at %llu before Free %llu", k,
					 (unsigned long long)e->ts, (unsigned long long)fr->ts);
				MT_CHECK(r, e > fr, "round %zu: Rss fall #%zu before Free #%zu in the artifact",
					 k, (size_t)(e - r->ev), (size_t)(fr - r->ev));
			}
			prev = e->size;
		}
		/* 1 MiB touched and unmapped, Rss written every 64 KiB: the check had material */
		MT_CHECK(r, rises > 0 && falls > 0, "round %zu: %zu Rss rises, %zu falls", k, rises,
			 falls);
	}
	fk = mt_need_expect(r, "fork", 0, 0);
	kid = (int32_t)fk->size;
	for (size_t i = 0; i < r->nr_ev; i++) {
		if (r->ev[i].pid == kid && r->ev[i].type == MT_EV_FORK)
			fork_ev = &r->ev[i];
		if (r->ev[i].pid == kid && r->ev[i].type == MT_EV_EXIT)
			exit_ev = &r->ev[i];
	}
	MT_CHECK(r, fork_ev && exit_ev, "child %d: Fork or Exit missing", kid);
	m = heap_event(r, MT_EV_MALLOC, kid, mt_need_expect(r, "malloc", 0, rounds)->addr, 0,
		       UINT64_MAX);
	MT_CHECK(r, m && m->ts > fork_ev->ts && m->ts < exit_ev->ts,
		 "child %d: Malloc %llu not between Fork %llu and Exit %llu", kid,
		 m ? (unsigned long long)m->ts : 0ull, (unsigned long long)fork_ev->ts,
		 (unsigned long long)exit_ev->ts);
}

static void test_interleave_tsc(void **s)
{
	check_interleave(s, true);
}
static void test_interleave_clock_gettime(void **s)
{
	check_interleave(s, false);
}

/* 3000 threads over the run, 64 at a time, against 1024 slots: every thread's pair is recorded,
 * nothing dropped (released slots are reused), the run complete. */
static void test_thousands_of_threads(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts, .timeout_s = 300};
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 777};
	size_t n;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("preload_edges", "threads", "3000"), 0);
	n = mt_count(r, &f);
	MT_CHECK(r, n == 3000, "%zu Mallocs of 777 bytes, want 3000 (one per thread)", n);
	MT_CHECK(r, mt_expect_count(r->exp, r->nr_exp, "malloc", 0) == 3000, "side channel");
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "manifest complete is not true");
}

/* thread_dlerror's run (1,500 threads, `how`): every thread's malloc(777) recorded, none
 * dropped, the run complete */
static void thread_slots(void **state, const char *how)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts, .no_expect_fd = true, .timeout_s = 300};
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 777};
	size_t n;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("thread_dlerror", "1500", how), 0);
	n = mt_count(r, &f);
	MT_CHECK(r, n == 1500, "%zu Mallocs of 777 bytes, want 1500 (one per thread)", n);
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "manifest complete is not true");
}

/*
 * 1,500 threads made and joined one after another, each with a failed dlsym: glibc frees the
 * thread's dlerror buffer after the key destructors, and that free takes a slot that its record
 * alone uses (pl_emit gives it back); a thread finding no free slot waits for memtrack to give
 * back those of exited threads (pl_claim). Until 8 December 2026 that free kept its slot for
 * good, the 1,024 slots ran out, and ~2,800 records were lost as no_slot.
 */
static void test_preload_thread_exit_slots(void **s)
{
	thread_slots(s, "pthread");
}

/* The same threads ending with the exit system call: no destructor gives their slots back;
 * memtrack does, for threads that are gone (shm__reclaim_orphans). Without it, 308 of 1,100
 * threads' records were lost, after 100 ms of waiting each. */
static void test_preload_thread_raw_exit_slots(void **s)
{
	thread_slots(s, "rawexit");
}

/* A process killed by abort(): what it wrote before is in the artifact. */
static void test_abort_keeps_records(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts};
	const struct mt_expect *x;
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_addr = true};

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("preload_edges", "abort"), 128 + SIGABRT);
	x = mt_need_expect(r, "malloc", 0, 0);
	f.pid = x->pid;
	f.addr = x->addr;
	MT_CHECK(r, mt_count(r, &f) == 1, "the malloc before abort() is not in the artifact");
}

/* The shared memory: 0600, named in the command's environment, gone after the run. */
static void test_shm_private_and_removed(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts};
	const struct mt_expect *x;
	char path[128];

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("preload_edges", "shm"), 0);
	x = mt_need_expect(r, "shm_mode", 0, 0);
	MT_CHECK(r, (x->size & 0777) == 0600, "shared memory mode %llo, want 600",
		 (unsigned long long)(x->size & 0777));
	x = mt_need_expect(r, "shm_pid", 0, 0);
	snprintf(path, sizeof(path), "/dev/shm/memtrack-%llu-", (unsigned long long)x->size);
	{
		DIR *d = opendir("/dev/shm");
		struct dirent *de;
		int left = 0;

		while (d && (de = readdir(d)))
			left += !strncmp(de->d_name, path + 9, strlen(path + 9));
		if (d)
			closedir(d);
		MT_CHECK(r, left == 0, "%s* still exists after the run", path);
	}
}

/* memtrack killed mid-run: the command finishes on its own, untracked, without hanging (the
 * rings fill within milliseconds of memtrack's death; the producers see it gone and pass
 * through). The command kills memtrack ($PPID of the shell) itself, once the storm runs: a
 * kill on a timer could land before memtrack released the command (TCG guests start slowly),
 * and a command never released never runs, by design. */
static void test_memtrack_killed(void **state)
{
	struct mt_run *r = mt_new_run(state);
	char cmd[512], dir[] = "/tmp/mt_killed.XXXXXX", done[64];
	struct mt_run_opts o = {.track_opts = preload_opts,
				.shell = cmd,
				.no_expect_fd = true,
				.timeout_s = 60};
	int waited = 0;

	MT_REQUIRE_ROOT();
	assert_non_null(mkdtemp(dir));
	snprintf(done, sizeof(done), "%s/done", dir);
	snprintf(cmd, sizeof(cmd), "%s -d 4 -t 2 & sleep 1; kill -KILL $PPID; wait $! && touch %s",
		 mt_target("alloc_storm"), done);
	assert_int_equal(mt_track(r, &o, NULL), 0);
	MT_CHECK(r, !r->timed_out, "memtrack hung");
	MT_CHECK(r, r->status == 128 + SIGKILL, "memtrack status %d, want killed", r->status);
	while (access(done, F_OK) && waited++ < 200)
		usleep(100 * 1000);
	MT_CHECK(r, !access(done, F_OK), "the command did not finish within 20 s of memtrack's death");
	unlink(done);
	rmdir(dir);
}

/* Another memtrack starting meanwhile in another pid namespace (a container) does not take
 * our shared memory away: it cannot see our pid, and it used to remove our file as a killed
 * run's, so every process of our tree exec'd after that passed through untracked, with the
 * run complete and no drop counted. The second memtrack runs inside the tracked tree (so it
 * surely starts while we run), tracks its /bin/true to the end (test_track_pidns) and removes
 * its own file; the program after it must still be recorded. */
static void test_other_pid_ns_keeps_shm(void **state)
{
	struct mt_run *r = mt_new_run(state);
	char cmd[1024], dir[] = "/tmp/mt_pidns.XXXXXX";
	struct mt_run_opts o = {.track_opts = preload_opts, .shell = cmd, .no_expect_fd = true};
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 12345};
	size_t n;

	MT_REQUIRE_ROOT();
	mt_need_file("/usr/bin/unshare");
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "timeout -s KILL 60 unshare -p -f --kill-child --mount-proc "
		 "%s track -q -o %s -- /bin/true; "
		 "%s 64 12345; s=$?; rm -rf %s; exit $s",
		 mt_memtrack(), dir, mt_target("alloc_fixed"), dir);
	assert_int_equal(mt_track(r, &o, NULL), 0);
	/* no status check: the inner memtrack's own processes carry its MEMTRACK_PRELOAD_SHM, so
	 * our interposer in them cannot record once it closed its file (drops.unserved, 123) */
	n = mt_count(r, &f);
	MT_CHECK(r, n == 64, "%zu Mallocs of 12345 bytes after the other memtrack ran, want 64", n);
}

/* A process in a user namespace of its own (`unshare -U`: no pid namespace, so its pids are
 * the tree's) is served by the interposer: the same events per process as under uprobes, and
 * alloc_hooks.libc "preload" with alloc_fixed's 64 mallocs, whether the namespace maps its user
 * (-r: root inside) or not (nobody inside): the kernel checks the shared memory's mode 0600
 * against the user it runs as, the invoking one, either way. */
static void test_same_user_ns(void **state)
{
	/* -r: mapped, root inside; "--" ends the options: unmapped, the overflow uid inside */
	static const char *const how[] = {"-r", "--"};
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 12345};
	struct mt_run_opts o = {.track_opts = preload_opts};

	mt_need_file("/usr/bin/unshare");
	compare_modes(state, (const char *const[]){"/usr/bin/unshare", "-U", "-r",
						   mt_target("alloc_fixed"), "64", "12345", NULL});
	for (size_t i = 0; i < sizeof(how) / sizeof(how[0]); i++) {
		struct mt_run *r = mt_new_run(state);
		size_t n;

		mt_track_ok(r, &o,
			    (const char *const[]){"/usr/bin/unshare", "-U", how[i],
						  mt_target("alloc_fixed"), "64", "12345", NULL},
			    0);
		check_hooks(r, "preload");
		n = mt_count(r, &f);
		MT_CHECK(r, n == 64, "unshare -U %s: %zu Mallocs of 12345 bytes, want 64", how[i],
			 n);
	}
}

/*
 * The handoff (src/track/handoff.h) answers the tree only, and only with memtrack's files: in a
 * run whose shell writes $MEMTRACK_PRELOAD_SHM into a file, build/targets/handoff_ask (the
 * interposer's own request code) asks for the rings' file from inside the tree (a descriptor of
 * the file's size: the positive control), for /etc/shadow from inside (refused), and, started
 * by this test before memtrack and so outside the tree, for the rings' file again (refused):
 * a process of another user outside the tree must not reach the shared memory this way.
 */
static void test_handoff_tree_only(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts, .timeout_s = 60};
	char dir[128], file[192], done[192], shell[2048];
	const struct mt_expect *in, *shadow, *out;
	struct mt_proc p;

	MT_REQUIRE_ROOT();
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "handoff"), 0);
	snprintf(file, sizeof(file), "%s/shm", dir);
	snprintf(done, sizeof(done), "%s/done", dir);
	assert_int_equal(mt_proc_start(&p, (const char *const[]){mt_target("handoff_ask"), "-w",
								 file, done, NULL}),
			 0);
	snprintf(shell, sizeof(shell),
		 "echo \"$MEMTRACK_PRELOAD_SHM\" > '%s.tmp' && mv '%s.tmp' '%s' && "
		 "'%s' \"$MEMTRACK_PRELOAD_SHM\" && '%s' /etc/shadow && "
		 "for i in $(seq 600); do [ -e '%s' ] && break; sleep 0.05; done; [ -e '%s' ]",
		 file, file, file, mt_target("handoff_ask"), mt_target("handoff_ask"), done, done);
	o.shell = shell;
	assert_int_equal(mt_track(r, &o, NULL), 0);
	assert_int_equal(mt_proc_wait(&p, 30), 0);
	mt_tmpdir_remove(dir);
	MT_CHECK(r, r->status == 0, "memtrack status %d, want 0 (the outsider never asked?)",
		 r->status);
	in = mt_need_expect(r, "handoff", 0, 0);
	shadow = mt_need_expect(r, "handoff", 0, 1);
	MT_CHECK(r, in->addr == 1 && in->size > 0,
		 "the tree asked for the shared memory: descriptor %llu, size %llu; want one",
		 (unsigned long long)in->addr, (unsigned long long)in->size);
	MT_CHECK(r, shadow->addr == 0, "the tree asked for /etc/shadow and got a descriptor");
	out = mt_expect_find(p.exp, p.nr_exp, "handoff", 0, 0);
	MT_CHECK(r, out && out->addr == 0,
		 "a process outside the tree asked for the shared memory: %s",
		 out ? "it got a descriptor" : "no answer reported (status of the asker: see log)");
	MT_CHECK(r, mt_need_u64(r, "mechanisms.handoffs") == 1, "%llu files handed, want 1",
		 (unsigned long long)mt_need_u64(r, "mechanisms.handoffs"));
	mt_proc_free(&p);
}

/*
 * Back-pressure is counted (mechanisms.preload_waits, preload_wait_ms), and never a drop.
 * stall_consumer stops memtrack (SIGSTOP, resumed 300 ms later by its child) and then writes
 * 80,000 records, more than its ring's 16,384: it must wait, on any machine. alloc_fixed
 * writes a few hundred records, far below one ring: no wait.
 */
static void test_backpressure_counted(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts};
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 64};
	size_t n;
	json_t *ms;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("stall_consumer", "40000"), 0);
	MT_CHECK(r, mt_need_u64(r, "mechanisms.preload_waits") > 0,
		 "the program never waited on its full ring");
	ms = mt_json(r, "mechanisms.preload_wait_ms");
	MT_CHECK(r, json_is_number(ms) && json_number_value(ms) > 0, "no time waited");
	MT_CHECK(r, mt_need_u64(r, "drops.total") == 0, "records were dropped");
	n = mt_count(r, &f);
	MT_CHECK(r, n >= 40000, "%zu Mallocs of 64 bytes, want the 40000 pairs' at least", n);
	r = mt_new_run(state);
	mt_track_ok(r, &o, MT_TARGET_ARGV("alloc_fixed", "64", "12345"), 0);
	MT_CHECK(r, mt_need_u64(r, "mechanisms.preload_waits") == 0,
		 "alloc_fixed waited %llu times",
		 (unsigned long long)mt_need_u64(r, "mechanisms.preload_waits"));
}

/*
 * A signal handler that allocates while its thread waits on the full ring (stall_consumer
 * `signal`: ten malloc(200) per SIGALRM that interrupts the interposer's syscall()): each call
 * is recorded, or counted lost (drops.signal) when it interrupted a record being written (the
 * doorbell's wake-up); none silent, and the wait's are recorded. Until 7 December 2026 every
 * one was taken for a nested call: unrecorded and uncounted, the run complete.
 */
static void test_signal_during_wait(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts};
	struct mt_filter f = {.type = MT_EV_MALLOC, .by_size = true, .size = 200};
	const struct mt_expect *e;
	uint64_t lost;
	size_t n;

	MT_REQUIRE_ROOT();
	mt_track(r, &o, MT_TARGET_ARGV("stall_consumer", "40000", "signal"));
	e = mt_need_expect(r, "sigallocs", 0, 0);
	n = mt_count(r, &f);
	lost = mt_need_u64(r, "drops.signal");
	MT_CHECK(r, e->size > 0, "no handler interrupted the interposer's wait");
	MT_CHECK(r, n + lost == e->size,
		 "%zu Mallocs of 200 bytes recorded and %llu counted lost, want the handler's %llu",
		 n, (unsigned long long)lost, (unsigned long long)e->size);
	MT_CHECK(r, n > 0, "none of the handler's %llu Mallocs recorded",
		 (unsigned long long)e->size);
	MT_CHECK(r, r->status == (lost ? 123 : 0), "memtrack status %d, want %d", r->status,
		 lost ? 123 : 0);
}

/*
 * Preload mode judges each exec as auto mode does, and an image the interposer cannot serve,
 * whose glibc calls auto mode would give to uprobes, is counted lost once (drops.unserved,
 * exit 123): an `env -i` process (no LD_PRELOAD) and one exec'd in a pid namespace of its own
 * (the interposer leaves it). Until 7 December 2026 both were lost silently (status 0).
 */
static void test_unserved_exec_counted(void **state)
{
	const char *af = mt_target("alloc_fixed");
	char cmds[2][1024];

	MT_REQUIRE_ROOT();
	snprintf(cmds[0], sizeof(cmds[0]), "env -i '%s' 64 12345; true", af);
	snprintf(cmds[1], sizeof(cmds[1]), "unshare -pf --mount-proc '%s' 64 12345; true", af);
	for (int i = 0; i < 2; i++) {
		struct mt_run *r = mt_new_run(state);
		struct mt_run_opts o = {
		    .track_opts = preload_opts, .shell = cmds[i], .no_expect_fd = true};

		assert_int_equal(mt_track(r, &o, NULL), 0);
		MT_CHECK(r, r->status == 123, "%s: memtrack status %d, want 123 (events lost)",
			 cmds[i], r->status);
		MT_CHECK(r, mt_need_u64(r, "drops.unserved") == 1,
			 "%s: drops.unserved %llu, want 1", cmds[i],
			 (unsigned long long)mt_need_u64(r, "drops.unserved"));
	}
}

/* A process that loads the interposer but cannot record (here: the shared memory its
 * environment names cannot be opened) is counted (drops.unserved), and the run is incomplete:
 * it used to pass through untracked with the run complete. */
static void test_unserved_counted(void **state)
{
	struct mt_run *r = mt_new_run(state);
	char cmd[512];
	struct mt_run_opts o = {.track_opts = preload_opts, .shell = cmd, .no_expect_fd = true};
	json_t *complete;

	MT_REQUIRE_ROOT();
	snprintf(cmd, sizeof(cmd), "MEMTRACK_PRELOAD_SHM=/dev/shm/memtrack-none %s 64 12345",
		 mt_target("alloc_fixed"));
	assert_int_equal(mt_track(r, &o, NULL), 0);
	MT_CHECK(r, r->status == 123, "memtrack status %d, want 123 (events lost)", r->status);
	MT_CHECK(r, mt_need_u64(r, "drops.unserved") == 1, "drops.unserved %llu, want 1",
		 (unsigned long long)mt_need_u64(r, "drops.unserved"));
	complete = json_object_get(r->manifest, "complete");
	MT_CHECK(r, json_is_false(complete), "the manifest says complete");
}

/*
 * A program under valgrind (which preloads its vgpreload_core and runs the program's code from
 * its own translation of it): a uprobe there is an int3 in the bytes valgrind translates, and
 * the program died of SIGTRAP at the interposer's first control point (exit 133). The
 * interposer passes through there, calls no control point, and the process is counted as not
 * served (drops.unserved, the run incomplete); the program runs to its own end (exit 0).
 */
static void test_valgrind_unserved(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts};
	const char *const argv[] = {"/usr/bin/valgrind", "-q", "--tool=none",
				    mt_target("alloc_fixed"), "64", "12345", NULL};

	MT_REQUIRE_ROOT();
	if (access(argv[0], X_OK)) {
		print_message("[ SKIP     ] needs valgrind (scripts/deps.sh installs it)\n");
		skip();
	}
	assert_int_equal(mt_track(r, &o, argv), 0);
	MT_CHECK(r, r->status == 123, "memtrack status %d, want 123 (events lost)", r->status);
	MT_CHECK(r, mt_need_u64(r, "exit_status") == 0, "the program's exit status %llu, want 0",
		 (unsigned long long)mt_need_u64(r, "exit_status"));
	MT_CHECK(r, mt_need_u64(r, "drops.unserved") == 1, "drops.unserved %llu, want 1",
		 (unsigned long long)mt_need_u64(r, "drops.unserved"));
}

/*
 * A dlmopen namespace (targets/dlmopen_alloc: libz and a libc of its own in LM_ID_NEWLM, 100
 * deflateInit/End pairs of 5 blocks each) has no interposer: glibc preloads nothing there.
 * Under the interposer the process is counted (drops.namespace) and the run is incomplete;
 * under uprobes, on the libc file, the namespace's calls are all recorded.
 */
static void test_dlmopen_counted(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts po = {.track_opts = preload_opts}, uo = {.track_opts = uprobe_opts};
	struct mt_filter m = {.type = MT_EV_MALLOC}, c = {.type = MT_EV_CALLOC};
	size_t n;

	MT_REQUIRE_ROOT();
	assert_int_equal(mt_track(r, &po, MT_TARGET_ARGV("dlmopen_alloc", "100")), 0);
	MT_CHECK(r, r->status == 123, "memtrack status %d, want 123 (events lost)", r->status);
	(void)mt_need_expect(r, "pairs", 0, 0); /* the target ran to its end */
	MT_CHECK(r, mt_need_u64(r, "drops.namespace") == 1, "drops.namespace %llu, want 1",
		 (unsigned long long)mt_need_u64(r, "drops.namespace"));
	MT_CHECK(r, json_is_false(json_object_get(r->manifest, "complete")),
		 "the manifest says complete");
	r = mt_new_run(state);
	mt_track_ok(r, &uo, MT_TARGET_ARGV("dlmopen_alloc", "100"), 0);
	MT_CHECK(r, mt_need_u64(r, "drops.namespace") == 0, "drops.namespace under uprobes");
	m.pid = c.pid = r->root_pid;
	n = mt_count(r, &m) + mt_count(r, &c);
	MT_CHECK(r, n >= 500, "%zu Mallocs and Callocs under uprobes, want the 100 pairs' 500", n);
}

/*
 * The interposer maps its ring's pages ahead of its records in one system call per piece (a
 * first touch of a shared page is a fault each, ~10 us on a VM that traps them): 16 KiB (341
 * records of 48 bytes) from the thread's first record, then 64 KiB (1365) at a time. After h
 * records, the pages of the pieces reached so far are present in the process, and none after
 * them (its slot's ring starts on a page: 16384 records are 192 pages). The
 * target is the root, run without a shell: its thread takes the file's first slot, fresh, so
 * the slot's head counts its own records from ring position 0.
 */
static void check_ring_pages(struct mt_run *r, const char *when)
{
	char op[32];
	uint64_t head, present, absent, want;
	uint64_t first = (16u << 10) / sizeof(struct mt_event), chunk = (64u << 10) / sizeof(struct mt_event);
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);

	snprintf(op, sizeof(op), "ring_head_%s", when);
	head = mt_need_expect(r, op, 0, 0)->size;
	snprintf(op, sizeof(op), "ring_present_%s", when);
	present = mt_need_expect(r, op, 0, 0)->size;
	snprintf(op, sizeof(op), "ring_absent_%s", when);
	absent = mt_need_expect(r, op, 0, 0)->size;
	MT_CHECK(r, head >= 1, "no record in the ring %s", when);
	/* records mapped: the first piece, then whole pieces up to the one record h-1 is in */
	want = head <= first ? first : first + ((head - 1 - first) / chunk + 1) * chunk;
	want *= sizeof(struct mt_event);
	want = (want + pg - 1) / pg;
	MT_CHECK(r, present == want && absent == want,
		 "%s: after %llu records %llu pages present, the first absent %llu; want %llu and %llu",
		 when, (unsigned long long)head, (unsigned long long)present,
		 (unsigned long long)absent, (unsigned long long)want, (unsigned long long)want);
}

static void test_ring_pages_ahead(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts};

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("preload_edges", "ring_pages"), 0);
	check_ring_pages(r, "a");
	check_ring_pages(r, "b");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_same_alloc_each, mt_teardown),
	    cmocka_unit_test_teardown(test_ring_pages_ahead, mt_teardown),
	    cmocka_unit_test_teardown(test_same_nested_cxx, mt_teardown),
	    cmocka_unit_test_teardown(test_same_cxx_static, mt_teardown),
	    cmocka_unit_test_teardown(test_cxx_static_aligned, mt_teardown),
	    cmocka_unit_test_teardown(test_same_cxx_dlopen, mt_teardown),
	    cmocka_unit_test_teardown(test_cxx_dlopen_each_call, mt_teardown),
	    cmocka_unit_test_teardown(test_own_ops_each_call_uprobe, mt_teardown),
	    cmocka_unit_test_teardown(test_own_ops_each_call_preload, mt_teardown),
	    cmocka_unit_test_teardown(test_same_forker, mt_teardown),
	    cmocka_unit_test_teardown(test_same_forker_50, mt_teardown),
	    cmocka_unit_test_teardown(test_same_threads, mt_teardown),
	    cmocka_unit_test_teardown(test_same_leader_exit, mt_teardown),
	    cmocka_unit_test_teardown(test_same_exec_chain, mt_teardown),
	    cmocka_unit_test_teardown(test_same_exec_thread, mt_teardown),
	    cmocka_unit_test_teardown(test_same_storm_2x2, mt_teardown),
	    cmocka_unit_test_teardown(test_same_edges, mt_teardown),
	    cmocka_unit_test_teardown(test_same_jemalloc, mt_teardown),
	    cmocka_unit_test_teardown(test_same_mimalloc, mt_teardown),
	    cmocka_unit_test_teardown(test_same_tcmalloc, mt_teardown),
	    cmocka_unit_test_teardown(test_same_mimalloc_preloaded, mt_teardown),
	    cmocka_unit_test_teardown(test_same_jemalloc_in_exe, mt_teardown),
	    cmocka_unit_test_teardown(test_jemalloc_each_call, mt_teardown),
	    cmocka_unit_test_teardown(test_mimalloc_each_call, mt_teardown),
	    cmocka_unit_test_teardown(test_tcmalloc_each_call, mt_teardown),
	    cmocka_unit_test_teardown(test_edges_each_call, mt_teardown),
	    cmocka_unit_test_teardown(test_interleave_tsc, mt_teardown),
	    cmocka_unit_test_teardown(test_interleave_clock_gettime, mt_teardown),
	    cmocka_unit_test_teardown(test_thousands_of_threads, mt_teardown),
	    cmocka_unit_test_teardown(test_preload_thread_exit_slots, mt_teardown),
	    cmocka_unit_test_teardown(test_preload_thread_raw_exit_slots, mt_teardown),
	    cmocka_unit_test_teardown(test_abort_keeps_records, mt_teardown),
	    cmocka_unit_test_teardown(test_other_pid_ns_keeps_shm, mt_teardown),
	    cmocka_unit_test_teardown(test_same_user_ns, mt_teardown),
	    cmocka_unit_test_teardown(test_handoff_tree_only, mt_teardown),
	    cmocka_unit_test_teardown(test_backpressure_counted, mt_teardown),
	    cmocka_unit_test_teardown(test_signal_during_wait, mt_teardown),
	    cmocka_unit_test_teardown(test_unserved_exec_counted, mt_teardown),
	    cmocka_unit_test_teardown(test_unserved_counted, mt_teardown),
	    cmocka_unit_test_teardown(test_dlmopen_counted, mt_teardown),
	    cmocka_unit_test_teardown(test_valgrind_unserved, mt_teardown),
	    cmocka_unit_test_teardown(test_shm_private_and_removed, mt_teardown),
	    cmocka_unit_test_teardown(test_memtrack_killed, mt_teardown),
	};

	if (getenv("MT_TEST_FILTER")) /* one test by name (a glob), e.g. to repeat it */
		cmocka_set_test_filter(getenv("MT_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
