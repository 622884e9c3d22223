// SPDX-License-Identifier: MIT
/*
 * Root tests of rmap mode, one address-space operation each (build/targets/rmap_ops MODE):
 * a hole unmapped from a touched mapping, private file read, memfd shared, fork, mremap move,
 * MADV_DONTNEED + refault, and reclaim by an outside process (process_madvise MADV_PAGEOUT). Every
 * run must also satisfy the Rmap/Rss invariant (mt_rmap_check_rss). Page counts are exact where the
 * target's loop decides them. RSS-only runs must have no Rmap record.
 *
 * Backends differ in addresses: under "fentry" every record but the fork/exec seeds has its
 * page's address; under "tracepoint" (this kernel) fork seeds and changes made by another
 * process carry 0, which the checks below allow there and only there. Under "fentry" the
 * Rmap/Rss check allows one operation's lag per record, and a page replaced in place (an add
 * and a remove netting to 0 at one address) is not "outside" a range (mt_rmap_check.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <cmocka.h>
#include "../lib/mt_check.h"
#include "../lib/mt_rmap_check.h"
#include "../lib/mt_tmpdir.h"

/*
 * 64 MiB touched, a 16 MiB hole unmapped from its middle, then the rest: every touched page
 * is one add inside the mapping, the hole's removes carry the hole's addresses, the rest's
 * removes the rest's, and the anon peak is the mapping (+ the process's own few pages) and
 * exactly the peak of the Rss records.
 */
/* The target's map_touched(): every page between "map_begin" and "map" is one anon add of
 * the root, inside the mapping. Returns the "map" line. */
static const struct mt_expect *want_touched(struct mt_run *r)
{
	const struct mt_expect *mb = mt_need_expect(r, "map_begin", 0, 0);
	const struct mt_expect *m = mt_need_expect(r, "map", 0, 0);

	mt_rmap_want(r, "touch: anon adds", r->root_pid, MT_RSS_ANON, 1, mb->ts, m->ts, m->addr,
		     m->addr + m->size, mt_pages(m));
	return m;
}

static void test_rmap_hole(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *m, *h, *rest, *d;
	struct mt_rmap_sel anon = {.pid = 0, .member = MT_RSS_ANON}, late;
	int64_t peak, rss_anon_peak, rss_peak;
	size_t n;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "hole"));
	m = want_touched(r);
	h = mt_need_expect(r, "hole", 0, 0);
	rest = mt_need_expect(r, "rest", 0, 0);
	d = mt_need_expect(r, "done", 0, 0);
	mt_rmap_want(r, "hole munmap: anon removes", r->root_pid, MT_RSS_ANON, -1, h->ts, rest->ts,
		     h->addr, h->addr + h->size, -mt_pages(h));
	mt_rmap_want(r, "hole munmap: anon adds", r->root_pid, MT_RSS_ANON, 1, h->ts, rest->ts, 0,
		     0, 0);
	mt_rmap_want(r, "rest munmap: anon removes", r->root_pid, MT_RSS_ANON, -1, rest->ts, d->ts,
		     m->addr, m->addr + m->size, -(mt_pages(m) - mt_pages(h)));
	late = (struct mt_rmap_sel){.pid = r->root_pid,
				    .member = MT_RSS_ANON,
				    .t0 = rest->ts,
				    .t1 = d->ts,
				    .lo = h->addr,
				    .hi = h->addr + h->size};
	MT_CHECK(r, mt_rmap_sum(r, &late, &n) == 0, "%zu records of the rest's munmap in the hole",
		 n);

	anon.pid = r->root_pid;
	peak = mt_rmap_peak(r, &anon) * mt_page;
	rss_anon_peak = (int64_t)mt_rss_member_peak(r, r->root_pid, MT_RSS_ANON);
	rss_peak = (int64_t)mt_rss_peak(r, r->root_pid);
	print_message("  anon peak: Rmap %lld bytes, Rss anon %lld, Rss file+anon+shmem %lld\n",
		      (long long)peak, (long long)rss_anon_peak, (long long)rss_peak);
	MT_CHECK(r, peak >= (int64_t)m->size && peak <= (int64_t)m->size * 11 / 10,
		 "anon Rmap peak %lld bytes, want 64 MiB + < 10%%", (long long)peak);
	MT_CHECK(r, peak == rss_anon_peak, "anon Rmap peak %lld bytes, Rss anon peak %lld",
		 (long long)peak, (long long)rss_anon_peak);
	MT_CHECK(
	    r, peak <= rss_peak && peak >= rss_peak * 9 / 10,
	    "anon Rmap peak %lld bytes, rss_stat peak (file+anon+shmem) %lld: want within 10%%",
	    (long long)peak, (long long)rss_peak);
}

/* Without --rmap: no Rmap record at all, and the manifest says so. */
static void test_rss_only_no_rmap(void **state)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_filter f = {.type = MT_EV_RMAP};
	const char *backend;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, NULL, MT_TARGET_ARGV("rmap_ops", "hole"), 0);
	backend = json_string_value(mt_json(r, "mechanisms.rmap_backend"));
	MT_CHECK(r, backend && !strcmp(backend, "off"), "rmap_backend %s without --rmap",
		 backend ? backend : "missing");
	MT_CHECK(r, mt_count(r, &f) == 0, "%zu Rmap records without --rmap", mt_count(r, &f));
	f.type = MT_EV_RSS;
	MT_CHECK(r, mt_count(r, &f) > 0, "no Rss records");
}

/* A private file mapping read page by page: FILE adds inside the mapping, all of its pages
 * (fault-around maps up to 16 pages per fault: fewer records, same sum); munmap removes them. */
static void test_rmap_file_read(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *b, *e, *d;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "file", mt_disk_dir()));
	b = mt_need_expect(r, "file_begin", 0, 0);
	e = mt_need_expect(r, "file", 0, 0);
	d = mt_need_expect(r, "done", 0, 0);
	mt_rmap_want(r, "file read: FILE adds", r->root_pid, MT_RSS_FILE, 1, b->ts, e->ts, e->addr,
		     e->addr + e->size, mt_pages(e));
	mt_rmap_want(r, "file read: anon adds", r->root_pid, MT_RSS_ANON, 1, b->ts, e->ts, 0, 0, 0);
	mt_rmap_want(r, "file munmap: FILE removes", r->root_pid, MT_RSS_FILE, -1, e->ts, d->ts,
		     e->addr, e->addr + e->size, -mt_pages(e));
}

/* A memfd mapped shared and written: SHMEM adds inside the mapping, removed by munmap. */
static void test_rmap_memfd_shared(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *b, *e, *d;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "memfd"));
	b = mt_need_expect(r, "shmem_begin", 0, 0);
	e = mt_need_expect(r, "shmem", 0, 0);
	d = mt_need_expect(r, "done", 0, 0);
	mt_rmap_want(r, "memfd touch: SHMEM adds", r->root_pid, MT_RSS_SHMEM, 1, b->ts, e->ts,
		     e->addr, e->addr + e->size, mt_pages(e));
	mt_rmap_want(r, "memfd touch: anon adds", r->root_pid, MT_RSS_ANON, 1, b->ts, e->ts, 0, 0,
		     0);
	mt_rmap_want(r, "memfd munmap: SHMEM removes", r->root_pid, MT_RSS_SHMEM, -1, e->ts, d->ts,
		     e->addr, e->addr + e->size, -mt_pages(e));
}

/* Tree peak over time of the Rmap running sums (file + anon + shmem, every pid), bytes. */
static int64_t tree_rmap_peak(const struct mt_run *r)
{
	struct mt_rmap_sel all = {.member = -1};

	return mt_rmap_peak(r, &all) * mt_page;
}

/*
 * fork: the child starts from the parent's anon counter (one seed record, the copied page
 * tables), its own faults are attributed to its pid and tid, the parent sees none of them,
 * and the tree's Rmap peak is the tree's rss_stat peak.
 */
static void test_rmap_fork(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *fk, *cb, *ce;
	const struct mt_event *seed = NULL;
	int32_t child;
	size_t fork_at = 0;
	int64_t parent_anon, peak, want_peak;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "fork"));
	fk = mt_need_expect(r, "fork", 0, 0);
	child = (int32_t)fk->size;
	cb = mt_need_expect(r, "child_begin", child, 0);
	ce = mt_need_expect(r, "child", child, 0);
	for (size_t i = 0; i < r->nr_ev; i++)
		if (r->ev[i].type == MT_EV_FORK && r->ev[i].pid == child) {
			fork_at = i;
			break;
		}
	MT_CHECK(r, fork_at, "no Fork record for child %d", child);
	for (size_t i = fork_at; i < r->nr_ev && !seed; i++)
		if (r->ev[i].type == MT_EV_RMAP && r->ev[i].pid == child &&
		    r->ev[i].aux == MT_RSS_ANON)
			seed = &r->ev[i];
	MT_CHECK(r, seed, "no anon Rmap record of child %d", child);
	parent_anon = mt_rmap_sum_before(r, r->root_pid, MT_RSS_ANON, fork_at);
	MT_CHECK(r, mt_rmap_delta(seed) == parent_anon && seed->ts < cb->ts,
		 "child's first anon Rmap: %lld pages, want the parent's %lld at the fork, before "
		 "the child ran",
		 (long long)mt_rmap_delta(seed), (long long)parent_anon);
	MT_CHECK(r, parent_anon >= 4096, "parent's anon before the fork: %lld pages, want >= 4096",
		 (long long)parent_anon);
	mt_rmap_want(r, "child touch: child's anon adds", child, MT_RSS_ANON, 1, cb->ts, ce->ts,
		     ce->addr, ce->addr + ce->size, mt_pages(ce));
	{
		struct mt_rmap_sel s = {
		    .pid = child, .tid = child, .member = MT_RSS_ANON, .t0 = cb->ts, .t1 = ce->ts};
		struct mt_rmap_sel p = {.pid = r->root_pid,
					.member = MT_RSS_ANON,
					.t0 = cb->ts,
					.t1 = ce->ts,
					.lo = ce->addr,
					.hi = ce->addr + ce->size};

		MT_CHECK(r, mt_rmap_sum(r, &s, NULL) == mt_pages(ce),
			 "child's adds not all with tid = child");
		MT_CHECK(r, mt_rmap_sum(r, &p, NULL) == 0, "child's pages counted for the parent");
	}
	/* the tree's rss_stat peak (kept exactly in the kernel; a racy max there may lose a
	 * page when two CPUs raise it at once) against the Rmap one; on 6.1 under fentry the
	 * Rmap peak may also be above by each process's cached counter changes (2 processes) */
	peak = tree_rmap_peak(r);
	want_peak = (int64_t)mt_need_u64(r, "results.peak_rss");
	print_message("  child seed %lld pages (parent's anon at the fork); tree peak: Rmap %lld "
		      "bytes, manifest %lld\n",
		      (long long)mt_rmap_delta(seed), (long long)peak, (long long)want_peak);
	MT_CHECK(r,
		 peak <= want_peak + (2 + 2 * mt_rmap_task_cache_lag(r)) * mt_page &&
		     peak >= want_peak - 2 * mt_page,
		 "tree Rmap peak %lld bytes, manifest peak_rss %lld (task-cache lag allowed: "
		 "%lld pages per process)",
		 (long long)peak, (long long)want_peak, (long long)mt_rmap_task_cache_lag(r));
	MT_CHECK(r, peak >= (16 + 16 + 32) << 20,
		 "tree peak %lld bytes, want >= 64 MiB (parent 16 + copied 16 + child 32)",
		 (long long)peak);
}

/* mremap move: nothing is counted twice or removed; munmap at the new place removes it all. */
static void test_rmap_mremap_move(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *b, *e, *u;
	struct mt_rmap_sel all_anon = {.member = MT_RSS_ANON};
	size_t n;
	int64_t moved;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "mremap"));
	want_touched(r);
	b = mt_need_expect(r, "move_begin", 0, 0);
	e = mt_need_expect(r, "move_end", 0, 0);
	u = mt_need_expect(r, "unmapped", 0, 0);
	all_anon.t0 = b->ts;
	all_anon.t1 = e->ts;
	moved = mt_rmap_sum(r, &all_anon, &n);
	MT_CHECK(r, moved == 0 && n == 0, "the move changed anon by %lld pages in %zu records",
		 (long long)moved, n);
	mt_rmap_want(r, "munmap of the new range: anon removes", r->root_pid, MT_RSS_ANON, -1,
		     e->ts, u->ts, e->addr, e->addr + e->size, -mt_pages(e));
	{
		/* the old range gives nothing back: its pages left with the move */
		struct mt_rmap_sel old = {.pid = r->root_pid,
					  .member = MT_RSS_ANON,
					  .sign = -1,
					  .lo = e->old,
					  .hi = e->old + e->size};

		MT_CHECK(r, mt_rmap_sum(r, &old, &n) == 0, "%zu removes in the moved-from range",
			 n);
	}
}

/* MADV_DONTNEED then refault: removes inside the range, then adds inside it, back to the
 * touched size. */
static void test_rmap_dontneed_refault(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *m, *dn, *rf;
	struct mt_rmap_sel s = {.member = MT_RSS_ANON};

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "dontneed"));
	m = mt_need_expect(r, "map", 0, 0);
	dn = mt_need_expect(r, "dontneed", 0, 0);
	rf = mt_need_expect(r, "refault", 0, 0);
	mt_rmap_want(r, "madvise(DONTNEED): anon removes", r->root_pid, MT_RSS_ANON, -1, m->ts,
		     dn->ts, m->addr, m->addr + m->size, -mt_pages(m));
	mt_rmap_want(r, "madvise(DONTNEED): anon adds", r->root_pid, MT_RSS_ANON, 1, m->ts, dn->ts,
		     0, 0, 0);
	mt_rmap_want(r, "refault: anon adds", r->root_pid, MT_RSS_ANON, 1, dn->ts, rf->ts, m->addr,
		     m->addr + m->size, mt_pages(m));
	s.t0 = m->ts;
	s.t1 = rf->ts;
	MT_CHECK(r, mt_rmap_sum(r, &s, NULL) == 0, "after the refault anon is off by %lld pages",
		 (long long)mt_rmap_sum(r, &s, NULL));
}

/*
 * Reclaim by an outside process: build/targets/rmap_reclaim (not tracked) pages out the
 * target's clean file mapping with process_madvise(MADV_PAGEOUT). There is no swap on the
 * machines this runs on (and adding one would change every other job's memory behaviour), so
 * anon or shmem pages could not be paged out; clean file pages are dropped without swap or
 * writeback. The removes belong to the target (pid) and were done by the helper (tid).
 */
static void test_rmap_pageout_by_other(void **state)
{
	struct mt_run *r = mt_new_run(state);
	char dir[4200], path[4300];
	const struct mt_expect *f, *pb, *po;
	struct mt_proc helper;
	struct mt_rmap_sel s = {.member = MT_RSS_FILE, .sign = -1};
	int64_t removed, want;
	size_t n, n_zero = 0;
	int32_t htid;
	int rc;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_target("rmap_reclaim"));
	snprintf(dir, sizeof(dir), "%s/mt-rmap-XXXXXX", mt_disk_dir());
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ready", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	snprintf(path, sizeof(path), "%s/done", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	rc = mt_proc_start(&helper, (const char *const[]){mt_target("rmap_reclaim"), dir, NULL});
	assert_int_equal(rc, 0);
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "pageout", dir));
	rc = mt_proc_wait(&helper, 30);
	pb = mt_expect_find(helper.exp, helper.nr_exp, "pageout_begin", 0, 0);
	po = mt_expect_find(helper.exp, helper.nr_exp, "pageout", 0, 0);
	if (rc || helper.status || !pb || !po) {
		mt_proc_free(&helper);
		MT_CHECK(r, 0, "the reclaim helper failed (status %d)", helper.status);
	}
	htid = po->tid;
	s.t0 = pb->ts;
	s.t1 = po->ts;
	mt_proc_free(&helper);
	mt_tmpdir_remove(dir);

	f = mt_need_expect(r, "file", 0, 0);
	want = mt_pages(f);
	s.pid = r->root_pid;
	s.tid = htid;
	removed = mt_rmap_sum(r, &s, &n);
	/* pageout skips a page another task has locked or is mapping just then: nearly all */
	MT_CHECK(r, removed <= -want * 9 / 10 && removed >= -want,
		 "FILE removes by the helper (tid %d) for the target: %lld pages in %zu records, "
		 "want -%lld (at least 90%%)",
		 htid, (long long)removed, n, (long long)want);
	print_message("  pageout by tid %d: FILE %lld pages in %zu records for pid %d\n", htid,
		      (long long)removed, n, r->root_pid);
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];

		if (ev->type != MT_EV_RMAP || ev->tid != htid)
			continue;
		MT_CHECK(r, ev->pid == r->root_pid && mt_rmap_delta(ev) < 0,
			 "helper's record: pid %d delta %lld, want pid %d and a remove", ev->pid,
			 (long long)mt_rmap_delta(ev), r->root_pid);
		if (!ev->addr)
			n_zero++;
		else
			MT_CHECK(r, ev->addr >= f->addr && ev->addr < f->addr + f->size,
				 "helper's remove at 0x%llx outside the mapping",
				 (unsigned long long)ev->addr);
	}
	print_message("  ... %zu of them without an address\n", n_zero);
	MT_CHECK(r, !mt_rmap_exact(r) || n_zero == 0,
		 "%zu of the helper's removes without an address under fentry", n_zero);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_rmap_hole, mt_teardown),
	    cmocka_unit_test_teardown(test_rss_only_no_rmap, mt_teardown),
	    cmocka_unit_test_teardown(test_rmap_file_read, mt_teardown),
	    cmocka_unit_test_teardown(test_rmap_memfd_shared, mt_teardown),
	    cmocka_unit_test_teardown(test_rmap_fork, mt_teardown),
	    cmocka_unit_test_teardown(test_rmap_mremap_move, mt_teardown),
	    cmocka_unit_test_teardown(test_rmap_dontneed_refault, mt_teardown),
	    cmocka_unit_test_teardown(test_rmap_pageout_by_other, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
