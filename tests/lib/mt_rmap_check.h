/* SPDX-License-Identifier: MIT */
/*
 * cmocka-side helpers of the rmap root tests (header-only, like mt_check.h; include after
 * <cmocka.h>): the run every rmap test starts with, and window checks that fail with the
 * numbers and the offending records.
 */
#ifndef MT_TEST_RMAP_CHECK_H
#define MT_TEST_RMAP_CHECK_H

#include <sys/vfs.h>
#include "mt_check.h"
#include "mt_rmap.h"

#define MT_TMPFS_MAGIC 0x01021994

static inline bool mt_on_tmpfs(const char *path)
{
	struct statfs st;

	return !statfs(path, &st) && st.f_type == MT_TMPFS_MAGIC;
}

/*
 * A folder on a disk file system for the file-backed scenarios: their pages must be FILE
 * pages, and reclaimable without swap (tmpfs pages are SHMEM and need swap). /var/tmp, else
 * the build folder; the test is skipped, saying why, when neither is on a disk.
 */
static inline const char *mt_disk_dir(void)
{
	static char build[4096];
	struct statfs st;

	if (!statfs("/var/tmp", &st) && !mt_on_tmpfs("/var/tmp"))
		return "/var/tmp";
	snprintf(build, sizeof(build), "%s/build", mt_repo_root());
	if (!statfs(build, &st) && !mt_on_tmpfs(build))
		return build;
	print_message("[ SKIP     ] needs a folder on a disk file system (/var/tmp and build/ "
		      "are tmpfs): file pages there would be shmem\n");
	skip();
	return NULL;
}

static int64_t mt_page; /* bytes; set by mt_rmap_run */

/* Runs a target with --rmap and checks what every rmap run must satisfy: complete, no drop,
 * a backend named in the manifest, and the Rmap-vs-Rss invariant (mt_rmap_check_rss). Under
 * uprobes: the checks are page-exact, and the interposer's own pages (the rings it touches,
 * a wipe-on-fork page a child does not inherit) would count. */
static inline void mt_rmap_run(struct mt_run *r, const char *const argv[])
{
	static const char *const opts[] = {"--rmap", "--alloc-hooks", "uprobe", NULL};
	struct mt_run_opts o = {.track_opts = opts};
	const char *backend;
	char msg[512];

	mt_page = sysconf(_SC_PAGESIZE);
	mt_track_ok(r, &o, argv, 0);
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "manifest: run not complete");
	MT_CHECK(r, mt_need_u64(r, "drops.total") == 0, "records were dropped");
	backend = json_string_value(mt_json(r, "mechanisms.rmap_backend"));
	MT_CHECK(r, backend && strcmp(backend, "off"), "manifest: rmap_backend is %s with --rmap",
		 backend ? backend : "missing");
	/* per record under tracepoint, threads racing included; under fentry give or take one
	 * operation's pages and concurrent tasks' records, exact at Exit and at the end (mt_rmap.h) */
	MT_CHECK(r, mt_rmap_check_rss(r, backend, msg, sizeof(msg)) == 0,
		 "Rmap vs Rss (%s backend): %s", backend, msg);
}

/* Does the backend give every record its page's address (no 0 for foreign or bulk changes)?
 * The fentry backend does (the folio rmap functions get the address); the tracepoint one
 * knows addresses only from faults and syscall ranges. */
static inline bool mt_rmap_exact(const struct mt_run *r)
{
	const char *b = json_string_value(mt_json(r, "mechanisms.rmap_backend"));

	return b && !strcmp(b, "fentry");
}

/* Do ev's pid and member have, in window [t0, t1], records at ev's address that net to 0
 * (ev included)? That is a page replaced in place: COW, or a THP split's +512/-512. */
static inline bool mt_rmap_replaced(const struct mt_run *r, const struct mt_event *ev,
				    uint64_t t0, uint64_t t1)
{
	struct mt_rmap_sel s = {.pid = ev->pid, .member = (int)ev->aux, .t0 = t0, .t1 = t1,
				.lo = ev->addr, .hi = ev->addr + 1};

	return mt_rmap_sum(r, &s, NULL) == 0;
}

/*
 * Pages the manifest's peak_rss may lag the Rmap records by, per process of the tree: fentry on
 * 6.1's page_* API only (memtrack's reason says which API). 6.1 keeps a task's counter changes
 * in the task (up to TASK_RSS_EVENTS_THRESH = 64 faults) before folding them into the mm, which
 * is where peak_rss is read from; the rmap calls carry every page at once. 0 elsewhere: the
 * tracepoint backend's records are the counter reads themselves, and 6.2+ has no task cache.
 */
static inline int64_t mt_rmap_task_cache_lag(const struct mt_run *r)
{
	const char *why = json_string_value(mt_json(r, "mechanisms.rmap_reason"));

	return mt_rmap_exact(r) && why && strstr(why, "page_* rmap functions") ? 64 : 0;
}

/* Pages of a reported range. */
static inline int64_t mt_pages(const struct mt_expect *e)
{
	return (int64_t)e->size / mt_page;
}

/*
 * In window [t0, t1], pid's records of `member` with sign `sign` (1 adds, -1 removes): the
 * ones inside [lo, hi) must add up to want pages exactly and none may fall outside. With
 * zero_ok, records without an address (addr 0: not known to the backend) count as inside.
 * Under fentry only, a record outside whose address nets to 0 in the window (mt_rmap_replaced:
 * the backend sees both halves of an in-place replacement, the counter does not move) is not
 * counted as outside.
 */
static inline void mt_rmap_want_ex(struct mt_run *r, const char *what, int32_t pid, int member,
				   int sign, uint64_t t0, uint64_t t1, uint64_t lo, uint64_t hi,
				   int64_t want, bool zero_ok)
{
	struct mt_rmap_sel s = {.pid = pid, .member = member, .sign = sign, .t0 = t0, .t1 = t1};
	int64_t in = 0, out = 0, zero = 0;
	size_t n_in = 0, n_out = 0, n_pair = 0;
	bool exact = mt_rmap_exact(r);

	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];
		int64_t d = mt_rmap_delta(ev);

		if (!mt_rmap_selected(ev, &s))
			continue;
		if ((ev->addr >= lo && ev->addr < hi) || (!lo && !hi) || (zero_ok && !ev->addr)) {
			in += d;
			n_in++;
			zero += ev->addr ? 0 : d;
			continue;
		}
		if (exact && ev->addr && mt_rmap_replaced(r, ev, t0, t1)) {
			/* fentry: a page replaced in place (a COW fault on the stack, say) is an add
			 * and a remove at one address that net to 0; the tracepoint backend sees
			 * no counter change there, so it is not part of what the window moved */
			if (n_pair++ < 5)
				print_message("  replaced in place (fentry): tid %d addr 0x%llx "
					      "delta %lld\n",
					      ev->tid, (unsigned long long)ev->addr, (long long)d);
			continue;
		}
		out += d;
		if (n_out++ < 5)
			print_message("  outside: tid %d addr 0x%llx delta %lld ts %llu\n", ev->tid,
				      (unsigned long long)ev->addr, (long long)d,
				      (unsigned long long)ev->ts);
	}
	MT_CHECK(r, in == want && out == 0,
		 "%s: %lld pages in %zu records inside [0x%llx, 0x%llx)%s, want %lld; %lld pages "
		 "in %zu records outside it, want 0",
		 what, (long long)in, n_in, (unsigned long long)lo, (unsigned long long)hi,
		 zero_ok ? " or without address" : "", (long long)want, (long long)out, n_out);
	print_message("  %s: %lld pages in %zu records, inside the range (%lld without address)\n",
		      what, (long long)in, n_in, (long long)zero);
}

static inline void mt_rmap_want(struct mt_run *r, const char *what, int32_t pid, int member,
				int sign, uint64_t t0, uint64_t t1, uint64_t lo, uint64_t hi,
				int64_t want)
{
	mt_rmap_want_ex(r, what, pid, member, sign, t0, t1, lo, hi, want, false);
}

#endif
