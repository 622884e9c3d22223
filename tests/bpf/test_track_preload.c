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
#include "../lib/mt_check.h"

static const char *const uprobe_opts[] = {"--alloc-hooks", "uprobe", NULL};
static const char *const preload_opts[] = {"--alloc-hooks", "preload", NULL};

/* A heap event reduced to what both mechanisms must agree on. */
struct key {
	int32_t pid;
	uint32_t type;
	uint64_t size;
	int has_old;
};

static int key_cmp(const void *a, const void *b)
{
	const struct key *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->size != y->size)
		return x->size < y->size ? -1 : 1;
	return x->has_old - y->has_old;
}

/* Per process, its sorted heap events as a string: "type:size:old,..." */
struct proc_ms {
	char *s;
	size_t n;
};

static int ms_cmp(const void *a, const void *b)
{
	const struct proc_ms *x = a, *y = b;

	return strcmp(x->s, y->s);
}

/* Frees of blocks the run never saw allocated: glibc's internal ones (the thread cache and the
 * DTV freed at thread exit through __libc_free), which a uprobe on free sees and the
 * interposer does not. Marked by index in `skip`. */
struct ref {
	int32_t pid;
	uint64_t addr;
	size_t idx;
};

static int ref_cmp(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void unmatched_frees(const struct mt_run *r, char *skip)
{
	struct ref *v = calloc(2 * r->nr_ev + 1, sizeof(*v));
	size_t n = 0;

	assert_non_null(v);
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *e = &r->ev[i];

		if (!mt_is_heap_type(e->type))
			continue;
		v[n++] = (struct ref){e->pid, e->addr, 2 * i + 1}; /* the block it returns/frees */
		if (e->type == MT_EV_REALLOC && e->old_addr)
			v[n++] = (struct ref){e->pid, e->old_addr, 2 * i}; /* freed first */
	}
	qsort(v, n, sizeof(*v), ref_cmp);
	for (size_t i = 0; i < n; i++) {
		const struct mt_event *e = &r->ev[v[i].idx / 2];
		bool live = i > 0 && v[i - 1].pid == v[i].pid && v[i - 1].addr == v[i].addr &&
			    !(r->ev[v[i - 1].idx / 2].type == MT_EV_FREE ||
			      (v[i - 1].idx % 2 == 0));

		if (e->type == MT_EV_FREE && !live)
			skip[v[i].idx / 2] = 1;
	}
	free(v);
}

static size_t per_process(const struct mt_run *r, struct proc_ms **out)
{
	struct key *k = calloc(r->nr_ev + 1, sizeof(*k));
	struct proc_ms *v = calloc(r->nr_ev + 1, sizeof(*v));
	char *skip = calloc(r->nr_ev + 1, 1);
	size_t nk = 0, nv = 0;

	assert_non_null(k);
	assert_non_null(v);
	assert_non_null(skip);
	unmatched_frees(r, skip);
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *e = &r->ev[i];

		if (!mt_is_heap_type(e->type) || skip[i])
			continue;
		k[nk++] = (struct key){e->pid, e->type, e->type == MT_EV_FREE ? 0 : e->size,
				       e->old_addr != 0};
	}
	free(skip);
	qsort(k, nk, sizeof(*k), key_cmp);
	for (size_t i = 0; i < nk;) {
		size_t j = i, len = 0, cap = 64;
		char *s = malloc(cap);

		assert_non_null(s);
		s[0] = 0;
		for (; j < nk && k[j].pid == k[i].pid; j++) {
			char one[64];
			int w = snprintf(one, sizeof(one), "%u:%llu:%d,", k[j].type,
					 (unsigned long long)k[j].size, k[j].has_old);

			if (len + (size_t)w + 1 > cap) {
				cap = (len + (size_t)w + 1) * 2;
				s = realloc(s, cap);
				assert_non_null(s);
			}
			memcpy(s + len, one, (size_t)w + 1);
			len += (size_t)w;
		}
		v[nv++] = (struct proc_ms){s, j - i};
		i = j;
	}
	qsort(v, nv, sizeof(*v), ms_cmp);
	free(k);
	*out = v;
	return nv;
}

/*
 * Equal, but for the differences the interposer's presence makes by construction, each an
 * allocation exactly 16 bytes larger than its uprobe-side partner: it is a module with
 * thread-local storage, so the dynamic thread vector glibc callocs for every new thread has
 * one more 16-byte dtv_t entry (272 -> 288 bytes with libc alone: a Calloc, a multiple of 16);
 * and it is one more loaded object, so the loader's per-object arrays that a dlopen reallocates
 * (the init/fini list: 8 + 16 per object, e.g. tcmalloc's constructor loading libgcc_s) are
 * 16 bytes larger (Reallocs).
 */
struct sized {
	unsigned type, has_old;
	unsigned long long size;
};

static size_t split_sized(const char *ms, char *rest, struct sized *v, size_t cap)
{
	char *a = strdup(ms), *sa, *t;
	size_t n = 0;

	assert_non_null(a);
	rest[0] = 0;
	for (t = strtok_r(a, ",", &sa); t; t = strtok_r(NULL, ",", &sa)) {
		struct sized x;

		if ((t[0] == '2' || t[0] == '3') && t[1] == ':' && n < cap &&
		    sscanf(t, "%u:%llu:%u", &x.type, &x.size, &x.has_old) == 3)
			v[n++] = x;
		else
			strcat(strcat(rest, t), ",");
	}
	free(a);
	return n;
}

static bool same_but_dtv(const char *u, const char *p)
{
	static struct sized ua[4096], pb[4096];
	char *ra = malloc(strlen(u) + 1), *rb = malloc(strlen(p) + 1);
	size_t nu, np;
	bool ok;

	assert_non_null(ra);
	assert_non_null(rb);
	nu = split_sized(u, ra, ua, 4096);
	np = split_sized(p, rb, pb, 4096);
	ok = !strcmp(ra, rb) && nu == np;
	for (size_t i = 0; ok && i < np; i++) {
		bool found = false;

		for (size_t j = 0; j < nu && !found; j++) {
			const struct sized *x = &ua[j];

			if (x->type != pb[i].type || x->has_old != pb[i].has_old)
				continue;
			if (x->size == pb[i].size ||
			    (x->size + 16 == pb[i].size && (x->type == 3 || x->size % 16 == 0))) {
				ua[j].type = 0;
				found = true;
			}
		}
		ok = found;
	}
	free(ra);
	free(rb);
	return ok;
}

static void free_ms(struct proc_ms *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].s);
	free(v);
}

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
	struct proc_ms *a, *b;
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
	na = per_process(u, &a);
	nb = per_process(&p, &b);
	if (na != nb)
		mt_run_dump(&p);
	assert_int_equal(na, nb);
	for (size_t i = 0; i < na; i++) {
		if (strcmp(a[i].s, b[i].s) && !same_but_dtv(a[i].s, b[i].s)) {
			mt_run_dump(&p);
			fail_msg("process %zu of %zu differs:\n uprobe  (%zu): %.600s\n preload (%zu): "
				 "%.600s",
				 i, na, a[i].n, a[i].s, b[i].n, b[i].s);
		}
	}
	free_ms(a, na);
	free_ms(b, nb);
	mt_run_free(&p);
}

static void compare_modes(void **state, const char *const argv[])
{
	compare_modes_as(state, argv, NULL, "preload", NULL, NULL);
}

static void test_same_alloc_each(void **s) { compare_modes(s, MT_TARGET_ARGV("alloc_each")); }
static void test_same_nested_cxx(void **s) { compare_modes(s, MT_TARGET_ARGV("nested_cxx")); }
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

/* Under the interposer alone, each family target's calls (the standard names and mi_malloc,
 * mallocx, tc_malloc, tc_new ...) are each in the artifact exactly once, and no uprobe is on
 * the allocator's library. */
static void check_family_calls(void **state, const char *target)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = preload_opts};
	const struct mt_expect *b;
	json_t *libs, *l;
	size_t k;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV(target), 0);
	b = mt_need_expect(r, "begin", 0, 0);
	mt_window_ok(r, b->tid, 0);
	mt_each_op_once(r);
	libs = mt_json(r, "libraries");
	json_array_foreach(libs, k, l)
	{
		const char *kind = json_string_value(json_object_get(l, "kind"));

		MT_CHECK(r, kind && (!strcmp(kind, "libc") || !strcmp(kind, "libstdc++")),
			 "uprobes on %s (%s) in preload mode",
			 json_string_value(json_object_get(l, "path")), kind ? kind : "?");
	}
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_same_alloc_each, mt_teardown),
		cmocka_unit_test_teardown(test_same_nested_cxx, mt_teardown),
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
		cmocka_unit_test_teardown(test_thousands_of_threads, mt_teardown),
		cmocka_unit_test_teardown(test_abort_keeps_records, mt_teardown),
		cmocka_unit_test_teardown(test_shm_private_and_removed, mt_teardown),
		cmocka_unit_test_teardown(test_memtrack_killed, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
