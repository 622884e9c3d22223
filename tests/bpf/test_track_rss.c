// SPDX-License-Identifier: MIT
/*
 * Root tests: resident memory. build/targets/rss_touch maps 64 MiB, touches every page and
 * reports the kernel's VmHWM. memtrack's peak (the manifest's tree and process peak_rss, and
 * the peak rebuilt from the artifact's Rss events) must be within 5% of it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

static void within_5pct(struct mt_run *r, const char *what, uint64_t got, uint64_t hwm)
{
	double d = (double)got - (double)hwm;

	MT_CHECK(r, (d < 0 ? -d : d) <= 0.05 * (double)hwm,
		 "%s %llu bytes vs VmHWM %llu (%.1f%% off, limit 5%%)", what,
		 (unsigned long long)got, (unsigned long long)hwm, 100.0 * d / (double)hwm);
}

static struct mt_run *run_touch(void **state, uint64_t *hwm)
{
	struct mt_run *r = mt_new_run(state);

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("rss_touch", "64"), 0);
	*hwm = mt_need_expect(r, "hwm", 0, 0)->size;
	MT_CHECK(r, *hwm >= (64u << 20), "target: VmHWM %llu below the 64 MiB touched",
		 (unsigned long long)*hwm);
	return r;
}

static void test_rss_manifest_tree_peak(void **state)
{
	uint64_t hwm;
	struct mt_run *r = run_touch(state, &hwm);

	within_5pct(r, "manifest results.peak_rss", mt_need_u64(r, "results.peak_rss"), hwm);
}

static void test_rss_manifest_process_peak(void **state)
{
	uint64_t hwm;
	struct mt_run *r = run_touch(state, &hwm);
	json_t *procs = mt_json(r, "processes"), *p;
	size_t k;

	MT_CHECK(r, json_is_array(procs), "manifest: no processes[]");
	for (k = 0; k < json_array_size(procs) && (p = json_array_get(procs, k)); k++) {
		if (json_integer_value(json_object_get(p, "pid")) != r->root_pid)
			continue;
		within_5pct(r, "manifest processes[root].peak_rss",
			    (uint64_t)json_integer_value(json_object_get(p, "peak_rss")), hwm);
		return;
	}
	MT_CHECK(r, 0, "manifest: root pid %d not in processes[]", r->root_pid);
}

static void test_rss_events_peak(void **state)
{
	uint64_t hwm;
	struct mt_run *r = run_touch(state, &hwm);
	struct mt_filter f = {.type = MT_EV_RSS};

	f.pid = r->root_pid;
	MT_CHECK(r, mt_count(r, &f) > 0, "no Rss events for the root process");
	within_5pct(r, "tree peak from Rss events", mt_rss_peak(r, 0), hwm);
	within_5pct(r, "root peak from Rss events", mt_rss_peak(r, r->root_pid), hwm);
}

/* Loaded as for a 512-CPU machine (MEMTRACK_TEST_NR_CPUS): the per-CPU sum walks until the
 * first CPU this machine lacks, so the peaks stay exact; and the programs still load (the walk
 * is a bpf_loop, verified once whatever the count). */
static void test_rss_as_if_512_cpus(void **state)
{
	uint64_t hwm;
	struct mt_run *r;

	setenv("MEMTRACK_TEST_NR_CPUS", "512", 1);
	r = run_touch(state, &hwm);
	unsetenv("MEMTRACK_TEST_NR_CPUS");
	within_5pct(r, "manifest results.peak_rss", mt_need_u64(r, "results.peak_rss"), hwm);
	within_5pct(r, "root peak from Rss events", mt_rss_peak(r, r->root_pid), hwm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_rss_manifest_tree_peak, mt_teardown),
		cmocka_unit_test_teardown(test_rss_manifest_process_peak, mt_teardown),
		cmocka_unit_test_teardown(test_rss_events_peak, mt_teardown),
		cmocka_unit_test_teardown(test_rss_as_if_512_cpus, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
