/* SPDX-License-Identifier: MIT */
/*
 * cmocka-side helpers for the root tests (header-only: the harness object itself must not
 * depend on cmocka, the unit tests link it too). Include after <cmocka.h>.
 * A test gets its run with mt_new_run(state); the teardown mt_teardown frees it even when an
 * assertion jumped out of the test. Failures dump memtrack's log, the side channel and an
 * event summary before failing, so a red test says why.
 */
#ifndef MT_TEST_CHECK_H
#define MT_TEST_CHECK_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "mt_harness.h"

#define MT_CHECK(r, cond, ...)                                                                     \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			mt_run_dump(r);                                                            \
			fail_msg(__VA_ARGS__);                                                     \
		}                                                                                  \
	} while (0)

/* The --alloc-hooks options of this pass of MT_RUN_IN_BOTH_MODES: NULL (the default, auto:
 * the interposer serves the targets), then uprobe (glibc's and libstdc++'s probes). */
static const char *const *mt_mode_opts __attribute__((unused));
static const char *const mt_uprobe_opts[] = {"--alloc-hooks", "uprobe", NULL};

/* Runs the group twice: as memtrack runs by default, then under uprobes, so that an
 * event-by-event test keeps checking both mechanisms. Tests pass mt_mode_opts as
 * track_opts. */
#define MT_RUN_IN_BOTH_MODES(tests)                                                                \
	({                                                                                         \
		int rc_ = cmocka_run_group_tests_name("default mode", tests, NULL, NULL);          \
		mt_mode_opts = mt_uprobe_opts;                                                     \
		rc_ | cmocka_run_group_tests_name("uprobe mode", tests, NULL, NULL);               \
	})

static inline int mt_teardown(void **state)
{
	struct mt_run *r = *state;

	if (r) {
		mt_run_free(r);
		free(r);
		*state = NULL;
	}
	return 0;
}

static inline struct mt_run *mt_new_run(void **state)
{
	struct mt_run *r;

	mt_teardown(state);
	r = calloc(1, sizeof(*r));
	assert_non_null(r);
	*state = r;
	return r;
}

/* The binaries a test needs must exist; a missing one is a build problem, not a skip. */
static inline void mt_need_file(const char *path)
{
	if (access(path, X_OK))
		fail_msg("%s missing (%s): run `make all` first", path, strerror(errno));
}

/*
 * Runs and checks the run itself: memtrack exited with want_status, wrote exactly one
 * artifact and its manifest into the fresh directory, and the artifact decodes to the end.
 */
static inline void mt_track_ok(struct mt_run *r, const struct mt_run_opts *o,
			       const char *const argv[], int want_status)
{
	int rc;

	mt_need_file(mt_memtrack());
	if (argv && argv[0])
		mt_need_file(argv[0]);
	rc = mt_track(r, o, argv);
	MT_CHECK(r, rc == 0, "harness could not run memtrack: %s", strerror(-rc));
	MT_CHECK(r, !r->timed_out, "memtrack did not finish in time (killed)");
	MT_CHECK(r, r->status == want_status, "memtrack exited %d, want %d", r->status,
		 want_status);
	MT_CHECK(r, r->nr_artifacts == 1, "%zu artifacts in %s, want exactly 1", r->nr_artifacts,
		 r->out);
	MT_CHECK(r, r->nr_manifests == 1, "%zu manifests in %s, want exactly 1", r->nr_manifests,
		 r->out);
	MT_CHECK(r, r->read_rc == 0, "artifact %s does not decode to the end: %s", r->artifact_path,
		 r->read_err);
	MT_CHECK(r, r->manifest != NULL, "manifest %s missing or not JSON", r->manifest_path);
}

/* Runs build/targets/NAME with args (NULL-terminated list after name). */
#define MT_TARGET_ARGV(name, ...) ((const char *const[]){mt_target(name), ##__VA_ARGS__, NULL})

static inline void mt_window_ok(struct mt_run *r, int32_t tid, size_t nth)
{
	char msg[512];

	MT_CHECK(r, mt_check_window(r, tid, nth, msg, sizeof(msg)) == 0, "%s", msg);
}

/*
 * Every reported operation is in the artifact exactly once: within its begin/end window when
 * it has one (an address can be reused by the target's calls outside the window), over the
 * whole run otherwise.
 */
static inline void mt_each_op_once(struct mt_run *r)
{
	for (size_t i = 0; i < r->nr_exp; i++) {
		const struct mt_expect *e = &r->exp[i];
		uint64_t t0 = 0, t1 = UINT64_MAX;
		size_t n = 0;

		if (!mt_op_type(e->op))
			continue;
		for (size_t k = i; k-- > 0;)
			if (r->exp[k].tid == e->tid && !strcmp(r->exp[k].op, "begin")) {
				t0 = r->exp[k].ts;
				break;
			} else if (r->exp[k].tid == e->tid && !strcmp(r->exp[k].op, "end")) {
				break;
			}
		for (size_t k = i + 1; t0 && k < r->nr_exp; k++)
			if (r->exp[k].tid == e->tid && !strcmp(r->exp[k].op, "end")) {
				t1 = r->exp[k].ts;
				break;
			}
		for (size_t k = 0; k < r->nr_ev; k++)
			n += r->ev[k].ts >= t0 && r->ev[k].ts <= t1 &&
			     mt_event_matches(&r->ev[k], e);
		MT_CHECK(r, n == 1,
			 "%s of 0x%llx size %llu (pid %d tid %d) recorded %zu times%s, want 1",
			 e->op, (unsigned long long)e->addr, (unsigned long long)e->size, e->pid,
			 e->tid, n, t0 ? " in its window" : "");
	}
}

/* The side channel must have what the target should have said (else the target is broken). */
static inline const struct mt_expect *mt_need_expect(struct mt_run *r, const char *op, int32_t tid,
						     size_t nth)
{
	const struct mt_expect *e = mt_expect_find(r->exp, r->nr_exp, op, tid, nth);

	MT_CHECK(r, e != NULL, "side channel has no \"%s\" #%zu (tid %d): target broken?", op, nth,
		 tid);
	return e;
}

static inline uint64_t mt_need_u64(struct mt_run *r, const char *path)
{
	uint64_t v = 0;
	int rc = mt_json_u64(r, path, &v);

	MT_CHECK(r, rc == 0, "manifest %s: %s", path, rc == -ENOENT ? "missing" : "not a u64");
	return v;
}

#endif
