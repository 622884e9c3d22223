// SPDX-License-Identifier: MIT
/*
 * Root tests: the manifest of small runs. No event may be lost (complete = true, drops.total
 * = 0, memtrack not exiting 123); its counts must be the artifact's; its identity fields must
 * name the run. Plus a storm of 50,000 malloc/free pairs: still complete, every call there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

static void check_complete(struct mt_run *r)
{
	json_t *c = mt_json(r, "complete");
	uint64_t drops = mt_need_u64(r, "drops.total");

	MT_CHECK(r, json_is_true(c), "manifest complete is not true");
	MT_CHECK(r, drops == 0, "manifest drops.total = %llu", (unsigned long long)drops);
}

/* events.total and events.by_type.<Name> equal what the artifact holds. */
static void check_counts(struct mt_run *r)
{
	uint64_t counts[MT_EV_TYPE_MAX] = {0};
	uint64_t total = mt_need_u64(r, "events.total");
	char path[64];

	MT_CHECK(r, total == r->nr_ev, "manifest events.total %llu, artifact has %zu events",
		 (unsigned long long)total, r->nr_ev);
	for (size_t i = 0; i < r->nr_ev; i++)
		if (r->ev[i].type < MT_EV_TYPE_MAX)
			counts[r->ev[i].type]++;
	for (unsigned t = MT_EV_MALLOC; t <= MT_EV_RMAP; t++) {
		uint64_t v = 0;

		snprintf(path, sizeof(path), "events.by_type.%s", mt_type_name(t));
		if (mt_json_u64(r, path, &v) && !counts[t])
			continue; /* a type that did not occur may be left out */
		MT_CHECK(r, v == counts[t], "manifest %s = %llu, artifact has %llu", path,
			 (unsigned long long)v, (unsigned long long)counts[t]);
	}
}

/* results.allocated_bytes is the sizes of the artifact's successful allocations summed (a
 * Realloc its whole new size), and results.allocs their number. */
static void check_allocated(struct mt_run *r)
{
	uint64_t bytes = 0, n = 0, got = mt_need_u64(r, "results.allocated_bytes");

	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *e = &r->ev[i];
		bool alloc = e->type == MT_EV_MALLOC || e->type == MT_EV_CALLOC ||
			     e->type == MT_EV_ALIGNED_ALLOC || e->type == MT_EV_REALLOC;

		if (!alloc || !e->addr)
			continue;
		bytes += e->size;
		n++;
	}
	MT_CHECK(r, got == bytes, "manifest results.allocated_bytes %llu, artifact sums %llu",
		 (unsigned long long)got, (unsigned long long)bytes);
	MT_CHECK(r, mt_need_u64(r, "results.allocs") == n, "manifest results.allocs, artifact %llu",
		 (unsigned long long)n);
}

static void check_small(void **state, const char *const argv[], int want)
{
	struct mt_run *r = mt_new_run(state);
	uint64_t root;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, argv, want);
	check_complete(r);
	check_counts(r);
	check_allocated(r);
	root = mt_need_u64(r, "root_pid");
	MT_CHECK(r, root == (uint64_t)r->root_pid, "manifest root_pid %llu, artifact named %d",
		 (unsigned long long)root, r->root_pid);
	MT_CHECK(r, mt_need_u64(r, "exit_status") == (uint64_t)want, "manifest exit_status");
	/* every pid in the artifact is one of the tree's processes */
	for (size_t i = 0; i < r->nr_ev; i++) {
		json_t *procs = mt_json(r, "processes"), *p;
		bool listed = false;
		size_t k;

		for (k = 0; k < json_array_size(procs) && (p = json_array_get(procs, k)); k++) {
			listed |= json_integer_value(json_object_get(p, "pid")) == r->ev[i].pid;
		}
		MT_CHECK(r, listed, "event pid %d not in manifest processes[]", r->ev[i].pid);
	}
}

static void test_manifest_alloc_each(void **state)
{
	check_small(state, MT_TARGET_ARGV("alloc_each"), 0);
}

static void test_manifest_nested_cxx(void **state)
{
	check_small(state, MT_TARGET_ARGV("nested_cxx"), 0);
}

static void test_manifest_threads(void **state)
{
	check_small(state, MT_TARGET_ARGV("threads", "join"), 0);
}

static void test_manifest_forker(void **state)
{
	check_small(state, MT_TARGET_ARGV("forker"), 0);
}

static void test_manifest_exec_chain(void **state)
{
	check_small(state, MT_TARGET_ARGV("exec_chain", "3"), 0);
}

static void test_manifest_exit_code(void **state)
{
	check_small(state, MT_TARGET_ARGV("exit_code", "7"), 7);
}

/* 50,000 pairs: nothing lost, and exactly the storm's calls in its window. */
static void test_storm_complete(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *b, *e;
	struct mt_filter f = {0};
	size_t nm, nf;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("alloc_storm", "50000"), 0);
	check_complete(r);
	b = mt_need_expect(r, "begin", 0, 0);
	e = mt_need_expect(r, "end", 0, 0);
	f.pid = b->pid;
	f.tid = b->tid;
	f.t0 = b->ts;
	f.t1 = e->ts;
	f.type = MT_EV_MALLOC;
	nm = mt_count(r, &f);
	f.type = MT_EV_FREE;
	nf = mt_count(r, &f);
	MT_CHECK(r, nm == 50000 && nf == 50000, "storm: %zu Malloc and %zu Free, want 50000 each",
		 nm, nf);
	f.type = 0;
	f.heap_only = true;
	MT_CHECK(r, mt_count(r, &f) == 100000, "storm: %zu heap events in the window, want 100000",
		 mt_count(r, &f));
}

/*
 * A 4 KiB ring cannot hold a 200,000-pair storm: events are lost, memtrack says so with 123
 * and complete = false, and the drop counters account for every call that is missing.
 */
static void test_lost_events_123(void **state)
{
	struct mt_run *r = mt_new_run(state);
	/* the BPF ring itself: the interposer's rings wait instead of dropping */
	static const char *const opts[] = {"--alloc-hooks", "uprobe", "--ring-size", "4096", NULL};
	struct mt_run_opts o = {.track_opts = opts};
	const struct mt_expect *b, *e;
	struct mt_filter f = {.heap_only = true};
	uint64_t drops;
	size_t got;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("alloc_storm", "200000"), 123);
	MT_CHECK(r, json_is_false(mt_json(r, "complete")), "manifest complete is not false");
	drops = mt_need_u64(r, "drops.total");
	b = mt_need_expect(r, "begin", 0, 0);
	e = mt_need_expect(r, "end", 0, 0);
	f.pid = b->pid;
	f.tid = b->tid;
	f.t0 = b->ts;
	f.t1 = e->ts;
	got = mt_count(r, &f);
	MT_CHECK(r, drops > 0 && got + drops >= 400000,
		 "%zu heap events recorded + %llu dropped < 400000 calls", got,
		 (unsigned long long)drops);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_manifest_alloc_each, mt_teardown),
		cmocka_unit_test_teardown(test_manifest_nested_cxx, mt_teardown),
		cmocka_unit_test_teardown(test_manifest_threads, mt_teardown),
		cmocka_unit_test_teardown(test_manifest_forker, mt_teardown),
		cmocka_unit_test_teardown(test_manifest_exec_chain, mt_teardown),
		cmocka_unit_test_teardown(test_manifest_exit_code, mt_teardown),
		cmocka_unit_test_teardown(test_storm_complete, mt_teardown),
		cmocka_unit_test_teardown(test_lost_events_123, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
