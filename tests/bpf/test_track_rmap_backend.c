// SPDX-License-Identifier: MIT
/*
 * Root tests of rmap mode's backend choice: a kernel that has the folio rmap functions in BTF
 * and loads tracing programs must get the fentry backend, any other the tracepoint backend
 * (tests/lib/mt_rmap_probe.h decides independently of memtrack's code); MEMTRACK_RMAP_BACKEND
 * forces one; whichever runs, the Rmap sums per member follow the process's resident counters:
 * their peak is the Rss peak, and the exit brings every member back to zero.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"
#include "../lib/mt_rmap_probe.h"

static const char *backend_of(struct mt_run *r)
{
	const char *b = json_string_value(mt_json(r, "mechanisms.rmap_backend"));
	const char *why = json_string_value(mt_json(r, "mechanisms.rmap_reason"));

	MT_CHECK(r, b != NULL, "manifest has no mechanisms.rmap_backend");
	MT_CHECK(r, why && *why, "manifest has no mechanisms.rmap_reason");
	return b;
}

/* Peak of the running sum of the root's Rmap deltas of `member`, and the final sum (pages). */
static void rmap_sums(const struct mt_run *r, uint32_t member, int64_t *peak, int64_t *final)
{
	int64_t sum = 0;

	*peak = 0;
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *e = &r->ev[i];

		if (e->type != MT_EV_RMAP || e->aux != member || e->pid != r->root_pid)
			continue;
		sum += (int64_t)e->size;
		if (sum > *peak)
			*peak = sum;
	}
	*final = sum;
}

/* Highest Rss record of the root's `member`, in pages (every local maximum is written). */
static int64_t rss_peak_pages(const struct mt_run *r, uint32_t member)
{
	uint64_t peak = 0;

	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *e = &r->ev[i];

		if (e->type == MT_EV_RSS && e->aux == member && e->pid == r->root_pid &&
		    e->size > peak)
			peak = e->size;
	}
	return (int64_t)(peak / 4096);
}

/*
 * Tracepoint backend: exact. Its records are the counter's own moves, each Rss record equals the
 * running sum before it, and every local maximum is written (peak keeping), so the two peaks are
 * one value. fentry: the records come from the rmap calls, in a separate step from the counter.
 */
static void check_sums(struct mt_run *r)
{
	bool exact = !strcmp(backend_of(r), "tracepoint");

	for (uint32_t m = MT_RSS_FILE; m <= MT_RSS_ANON; m++) {
		int64_t peak, final, rss = rss_peak_pages(r, m);

		rmap_sums(r, m, &peak, &final);
		MT_CHECK(r, final == 0, "member %u: Rmap sum after exit is %lld pages, want 0", m,
			 (long long) final);
		if (exact)
			MT_CHECK(r, peak == rss,
				 "member %u: Rmap sum peaks at %lld pages, Rss at %lld (tracepoint: "
				 "want equal)",
				 m, (long long)peak, (long long)rss);
		else
			MT_CHECK(r, peak >= rss - rss / 50 - 4 && peak <= rss + rss / 50 + 4,
				 "member %u: Rmap sum peaks at %lld pages, Rss at %lld (want +-2%%)",
				 m, (long long)peak, (long long)rss);
	}
}

static void test_backend_follows_kernel(void **state)
{
	struct mt_run *r = mt_new_run(state);
	static const char *const opts[] = {"--rmap", NULL};
	struct mt_run_opts o = {.track_opts = opts};
	const char *want = mt_expected_rmap_backend(), *got;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("rss_touch", "32"), 0);
	got = backend_of(r);
	print_message("rmap backend here: %s (%s)\n", got,
		      json_string_value(mt_json(r, "mechanisms.rmap_reason")));
	MT_CHECK(r, !strcmp(got, want), "rmap_backend is %s; this kernel %s, so it must be %s", got,
		 strcmp(want, "fentry")
		     ? "refuses fentry or lacks a whole rmap API"
		     : "has a whole rmap API (folio_* or page_*) and loads fentry",
		 want);
	check_sums(r);
}

static void test_forced_tracepoint(void **state)
{
	struct mt_run *r = mt_new_run(state);
	static const char *const opts[] = {"--rmap", NULL};
	static const char *const env[] = {"MEMTRACK_RMAP_BACKEND=tracepoint", NULL};
	struct mt_run_opts o = {.track_opts = opts, .env = env};

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("rss_touch", "32"), 0);
	MT_CHECK(r, !strcmp(backend_of(r), "tracepoint"), "forced tracepoint backend not used");
	check_sums(r);
}

static void test_forced_fentry(void **state)
{
	struct mt_run *r = mt_new_run(state);
	static const char *const opts[] = {"--rmap", NULL};
	static const char *const env[] = {"MEMTRACK_RMAP_BACKEND=fentry", NULL};
	struct mt_run_opts o = {.track_opts = opts, .env = env};
	const char *const *argv = MT_TARGET_ARGV("rss_touch", "32");

	MT_REQUIRE_ROOT();
	if (strcmp(mt_expected_rmap_backend(), "fentry")) {
		/* not available: memtrack refuses to start, and says why */
		int rc = mt_track(r, &o, argv);

		MT_CHECK(r, rc == 0, "harness could not run memtrack");
		MT_CHECK(r, r->status == 125, "memtrack exited %d, want 125", r->status);
		MT_CHECK(r, r->log && strstr(r->log, "cannot use the fentry rmap backend"),
			 "no explanation in memtrack's log");
		return;
	}
	mt_track_ok(r, &o, argv, 0);
	MT_CHECK(r, !strcmp(backend_of(r), "fentry"), "forced fentry backend not used");
	check_sums(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_backend_follows_kernel, mt_teardown),
	    cmocka_unit_test_teardown(test_forced_tracepoint, mt_teardown),
	    cmocka_unit_test_teardown(test_forced_fentry, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
