// SPDX-License-Identifier: MIT
/*
 * Root tests: exactly the program's allocator calls, threads' exits included
 * (build/targets/thread_exit). At a thread's exit glibc frees its per-thread cache with direct
 * calls to __libc_free, the address of free: those are glibc's, not the program's, and an
 * LD_PRELOAD interposer never sees them. The independent check is such an interposer
 * (build/tests/libmt_count.so) preloaded into the same run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

#define NWORKERS 8 /* thread_exit: 2 rounds of 4 */

/* A worker's whole life: the heap events with its tid are exactly the calls it reported. */
static void check_workers(struct mt_run *r)
{
	MT_CHECK(r, mt_expect_count(r->exp, r->nr_exp, "begin", 0) == NWORKERS,
		 "target: %zu workers, want %d", mt_expect_count(r->exp, r->nr_exp, "begin", 0),
		 NWORKERS);
	for (size_t k = 0; k < NWORKERS; k++) {
		const struct mt_expect *b = mt_need_expect(r, "begin", 0, k);
		struct mt_filter f = {.pid = r->root_pid, .tid = b->tid, .heap_only = true};
		size_t said = mt_expect_count(r->exp, r->nr_exp, "malloc", b->tid) +
			      mt_expect_count(r->exp, r->nr_exp, "free", b->tid);
		size_t got = mt_count(r, &f);

		f.heap_only = false;
		f.type = MT_EV_FREE;
		MT_CHECK(r, got == said,
			 "worker tid %d: %zu heap events (%zu Free), it made %zu calls: the "
			 "thread's exit was recorded as the program's frees",
			 b->tid, got, mt_count(r, &f), said);
	}
	mt_each_op_once(r);
}

static void test_thread_exit_exact(void **state)
{
	struct mt_run *r = mt_new_run(state);

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &(struct mt_run_opts){.track_opts = mt_mode_opts},
		    MT_TARGET_ARGV("thread_exit"), 0);
	check_workers(r);
}

/* The counter's line for pid: "pid P malloc N calloc N realloc N aligned N free N". */
static bool read_counts(const char *path, int32_t pid, uint64_t c[5])
{
	char line[256];
	bool found = false;
	FILE *f = fopen(path, "r");
	int p;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		uint64_t v[5];

		if (sscanf(line, "pid %d malloc %lu calloc %lu realloc %lu aligned %lu free %lu", &p,
			   &v[0], &v[1], &v[2], &v[3], &v[4]) == 6 &&
		    p == pid) {
			memcpy(c, v, sizeof(v));
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* The whole process, main thread (pthread_create's own calls) included, against an interposer
 * in the same run: per type, the same number of calls. */
static void test_thread_exit_vs_preload(void **state)
{
	static const uint32_t types[5] = {MT_EV_MALLOC, MT_EV_CALLOC, MT_EV_REALLOC,
					  MT_EV_ALIGNED_ALLOC, MT_EV_FREE};
	struct mt_run *r = mt_new_run(state);
	char preload[600], file[300], counts[128];
	const char *env[3] = {preload, file, NULL};
	struct mt_run_opts o = {.env = env, .track_opts = mt_mode_opts};
	uint64_t c[5];

	MT_REQUIRE_ROOT();
	snprintf(preload, sizeof(preload), "LD_PRELOAD=%s/build/tests/libmt_count.so",
		 mt_repo_root());
	mt_need_file(preload + strlen("LD_PRELOAD="));
	snprintf(counts, sizeof(counts), "/tmp/memtrack-test-count-%d", (int)getpid());
	unlink(counts);
	snprintf(file, sizeof(file), "MT_COUNT_FILE=%s", counts);
	mt_track_ok(r, &o, MT_TARGET_ARGV("thread_exit"), 0);
	MT_CHECK(r, read_counts(counts, r->root_pid, c), "no counter line for pid %d in %s",
		 r->root_pid, counts);
	unlink(counts);
	check_workers(r);
	for (int i = 0; i < 5; i++) {
		struct mt_filter f = {.pid = r->root_pid, .type = types[i]};

		MT_CHECK(r, mt_count(r, &f) == c[i], "%s: memtrack %zu, LD_PRELOAD counter %lu",
			 mt_type_name(types[i]), mt_count(r, &f), c[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_thread_exit_exact, mt_teardown),
		cmocka_unit_test_teardown(test_thread_exit_vs_preload, mt_teardown),
	};

	return MT_RUN_IN_BOTH_MODES(tests);
}
