// SPDX-License-Identifier: MIT
/*
 * Root test of the rss counters' exact read while their per-CPU batches fold under it
 * (src/bpf/rss.bpf.h: the fast read from the shared count and this CPU's batch, the walk of
 * every CPU when a fold may have happened). build/targets/rmap_ops folds: three threads pinned
 * round-robin to the CPUs fault in and MADV_DONTNEED random runs of their own pages at once
 * (the batch is 32 pages or more: folds in both directions, on every CPU, racing), in phases;
 * after each phase, with every thread parked, it reports smaps_rollup's Anonymous (a page-table
 * walk: the exact figure on every kernel).
 * Checked: the Rmap/Rss invariant of every rmap run (mt_rmap_run: every Rss record equals the
 * Rmap running sum before it), and at every report the anon Rmap running sum (the counter's
 * value as memtrack read it) equal to the reported figure, to the page. A fast read that got a
 * change wrong (a shadow not updated, a fold taken for this CPU's change) leaves the sum off
 * at the next report: nothing re-reads the counter while the threads only fault and zap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_rmap_check.h"

#define PHASES 24 /* rmap_ops.c: FOLD_PHASES */
#define ROUNDS 32 /* rmap_ops.c: PAIR_ROUNDS */

/* The k-th (from 1) expectation named `op`, or NULL. */
static const struct mt_expect *nth_expect(const struct mt_run *r, const char *op, size_t k)
{
	for (size_t i = 0; i < r->nr_exp; i++)
		if (!strcmp(r->exp[i].op, op) && !--k)
			return &r->exp[i];
	return NULL;
}

/*
 * A report's sum did not match: says where the pages differ. The anon Rmap records up to the
 * report inside the target's regions (whose pages it counted by /proc/self/pagemap right after
 * the report), those without an address (re-bases), and the rest (stacks, heap, libc); the
 * smaps figure read again after the pagemap walk, and the pages the kernel migrated during the
 * phase. Off inside the regions with pagemap agreeing with smaps: a record lost or doubled;
 * pagemap or the second read disagreeing with the first: the kernel's figure moved under a
 * parked process.
 */
static void explain_report(const struct mt_run *r, const struct mt_expect *e, size_t k)
{
	const struct mt_expect *present = nth_expect(r, "anon_regions", k),
			       *again = nth_expect(r, "anon_again", k),
			       *migrated = nth_expect(r, "migrated", k);
	int64_t in = 0, none = 0, other = 0;

	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];
		bool inside = false;

		if (ev->type != MT_EV_RMAP || ev->pid != r->root_pid || ev->aux != MT_RSS_ANON ||
		    ev->ts > e->ts)
			continue;
		for (size_t j = 0; j < r->nr_exp && !inside; j++)
			inside = !strcmp(r->exp[j].op, "region") && ev->addr >= r->exp[j].addr &&
				 ev->addr < r->exp[j].addr + r->exp[j].size;
		if (inside)
			in += mt_rmap_delta(ev);
		else if (!ev->addr)
			none += mt_rmap_delta(ev);
		else
			other += mt_rmap_delta(ev);
	}
	print_message("  report %zu: Rmap pages in the regions %lld (pagemap %lld), without an "
		      "address %lld, elsewhere %lld; smaps_rollup read again %lld pages; %lld pages "
		      "migrated in the phase\n",
		      k, (long long)in, present ? (long long)present->size : -1LL, (long long)none,
		      (long long)other, again ? (long long)again->size / mt_page : -1LL,
		      migrated ? (long long)migrated->size : -1LL);
}

/* At every "anon" report of the run: the anon Rmap running sum equals the figure reported.
 * Returns how many reports there were. */
static size_t check_reports(struct mt_run *r)
{
	size_t nr_rmap = 0, nr_reports = 0;

	for (size_t k = 0; k < r->nr_exp; k++) {
		const struct mt_expect *e = &r->exp[k];
		int64_t sum = 0;

		if (strcmp(e->op, "anon"))
			continue;
		nr_reports++;
		MT_CHECK(r, (int64_t)e->size >= 0, "report %zu: smaps_rollup unreadable", nr_reports);
		nr_rmap = 0;
		for (size_t i = 0; i < r->nr_ev; i++) {
			const struct mt_event *ev = &r->ev[i];

			if (ev->type != MT_EV_RMAP || ev->pid != r->root_pid ||
			    ev->aux != MT_RSS_ANON || ev->ts > e->ts)
				continue;
			sum += mt_rmap_delta(ev);
			nr_rmap++;
		}
		if (sum * mt_page != (int64_t)e->size)
			explain_report(r, e, nr_reports);
		MT_CHECK(r, sum * mt_page == (int64_t)e->size,
			 "report %zu: anon running sum %lld pages (%zu Rmap records), smaps_rollup "
			 "%lld pages",
			 nr_reports, (long long)sum, nr_rmap, (long long)e->size / mt_page);
	}
	print_message("  %zu reports, %zu anon Rmap records up to the last\n", nr_reports, nr_rmap);
	return nr_reports;
}

static void test_rss_exact_while_folding(void **state)
{
	struct mt_run *r = mt_new_run(state);
	size_t n;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "folds"));
	n = check_reports(r);
	MT_CHECK(r, n == PHASES, "%zu reports, want %d", n, PHASES);
}

/*
 * rmap_ops pagepairs: one thread faults pages in one at a time while another zaps them one at a
 * time, on two CPUs: their batches fold at exactly +32 and -32 pages, so two folds at once
 * leave the shared count where it was. Every change is traced right after it is made, so a
 * record holds its own page plus what other tasks changed but had not traced yet (one page per
 * task), plus a page per hit that gave up on the lock (a wait of milliseconds: a virtual CPU
 * descheduled): a few pages. A fold taken for this CPU's own change would show as a record of
 * about -31 or +31 pages (then its opposite): no record may exceed MAX_PAGES.
 */
#define MAX_PAGES 16

static void test_rss_page_pairs(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const struct mt_expect *b, *e, *c;
	size_t n, nr = 0, over = 0;
	int64_t max = 0;

	MT_REQUIRE_ROOT();
	mt_rmap_run(r, MT_TARGET_ARGV("rmap_ops", "pagepairs"));
	n = check_reports(r);
	MT_CHECK(r, n == ROUNDS, "%zu reports, want %d", n, ROUNDS);
	b = mt_need_expect(r, "pairs_begin", 0, 0);
	e = mt_need_expect(r, "pairs_end", 0, 0);
	c = mt_need_expect(r, "pair_cpus", 0, 0);
	if (c->size < 2) {
		/* one CPU (an affinity of one, under taskset): the changes took turns, no fold
		 * raced another, and the bound below would hold whatever the read did */
		print_message("[ SKIP     ] the two threads ran on %llu CPU: nothing raced (run "
			      "it where the process may use two CPUs)\n",
			      (unsigned long long)c->size);
		skip();
	}
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];
		int64_t d = mt_rmap_delta(ev), a = d < 0 ? -d : d;

		if (ev->type != MT_EV_RMAP || ev->pid != r->root_pid || ev->aux != MT_RSS_ANON ||
		    ev->ts < b->ts || ev->ts > e->ts)
			continue;
		nr++;
		if (a > max)
			max = a;
		if (a > MAX_PAGES && over++ < 5)
			print_message("  record %zu: %lld pages, tid %d\n", i, (long long)d, ev->tid);
	}
	print_message("  %zu anon Rmap records in the rounds, largest %lld pages\n", nr,
		      (long long)max);
	MT_CHECK(r, nr >= 2 * ROUNDS * 2048 / (MAX_PAGES + 1), "%zu records only", nr);
	MT_CHECK(r, over == 0, "%zu records over %d pages", over, MAX_PAGES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_rss_exact_while_folding, mt_teardown),
	    cmocka_unit_test_teardown(test_rss_page_pairs, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
