// SPDX-License-Identifier: MIT
/* Rmap-record queries and the Rmap-vs-Rss invariant; see mt_rmap.h. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "mt_rmap.h"

bool mt_rmap_selected(const struct mt_event *ev, const struct mt_rmap_sel *s)
{
	bool inside;

	if (ev->type != MT_EV_RMAP)
		return false;
	if (s->pid && ev->pid != s->pid)
		return false;
	if (s->tid && ev->tid != s->tid)
		return false;
	if (s->member < 0 ? ev->aux == MT_RSS_SWAP : ev->aux != (uint32_t)s->member)
		return false;
	if (ev->ts < s->t0 || (s->t1 && ev->ts > s->t1))
		return false;
	if (s->sign > 0 && mt_rmap_delta(ev) <= 0)
		return false;
	if (s->sign < 0 && mt_rmap_delta(ev) >= 0)
		return false;
	if (!s->lo && !s->hi)
		return true;
	inside = ev->addr >= s->lo && ev->addr < s->hi;
	return s->outside ? !inside : inside;
}

int64_t mt_rmap_sum(const struct mt_run *r, const struct mt_rmap_sel *s, size_t *n)
{
	int64_t sum = 0;
	size_t k = 0;

	for (size_t i = 0; i < r->nr_ev; i++)
		if (mt_rmap_selected(&r->ev[i], s)) {
			sum += mt_rmap_delta(&r->ev[i]);
			k++;
		}
	if (n)
		*n = k;
	return sum;
}

int64_t mt_rmap_peak(const struct mt_run *r, const struct mt_rmap_sel *s)
{
	int64_t sum = 0, peak = 0;

	for (size_t i = 0; i < r->nr_ev; i++)
		if (mt_rmap_selected(&r->ev[i], s)) {
			sum += mt_rmap_delta(&r->ev[i]);
			if (sum > peak)
				peak = sum;
		}
	return peak;
}

int64_t mt_rmap_sum_before(const struct mt_run *r, int32_t pid, uint32_t member, size_t upto)
{
	int64_t sum = 0;

	for (size_t i = 0; i < upto && i < r->nr_ev; i++)
		if (r->ev[i].type == MT_EV_RMAP && r->ev[i].pid == pid && r->ev[i].aux == member)
			sum += mt_rmap_delta(&r->ev[i]);
	return sum;
}

uint64_t mt_rss_member_peak(const struct mt_run *r, int32_t pid, uint32_t member)
{
	uint64_t peak = 0;

	for (size_t i = 0; i < r->nr_ev; i++)
		if (r->ev[i].type == MT_EV_RSS && r->ev[i].pid == pid && r->ev[i].aux == member &&
		    r->ev[i].size > peak)
			peak = r->ev[i].size;
	return peak;
}

#define RECENT 8

/* Per (pid, member) state of the invariant walk; pages. */
struct pair {
	int32_t pid;
	uint32_t member;
	int64_t sum, hi_since_rss, last_rss;
	bool has_rss, seen_rmap, exited;
	struct {
		int32_t tid;
		int64_t delta;
	} recent[RECENT]; /* the pair's last Rmap records, for the concurrency slack */
	size_t nr_recent;
};

/*
 * How far an Rss record of task tid may be from the running sum under the fentry backend: its
 * Rmap records are written by the rmap calls, outside the lock under which the counter's
 * value and its Rss record are written; two tasks changing one mm at once (threads, a
 * reclaimer) can reach the ring in the other order, so the records of the other tasks near
 * this one may sit on either side of it. Their pages are the slack; a single-threaded pair
 * has none.
 */
static int64_t pair_slack(const struct pair *p, int32_t tid)
{
	int64_t slack = 0;

	for (size_t i = 0; i < p->nr_recent && i < RECENT; i++)
		if (p->recent[i].tid != tid)
			slack += p->recent[i].delta < 0 ? -p->recent[i].delta : p->recent[i].delta;
	return slack;
}

static int64_t abs64(int64_t x)
{
	return x < 0 ? -x : x;
}

static struct pair *pair_get(struct pair *v, size_t *n, size_t cap, int32_t pid, uint32_t member)
{
	for (size_t i = 0; i < *n; i++)
		if (v[i].pid == pid && v[i].member == member)
			return &v[i];
	if (*n == cap)
		return NULL;
	memset(&v[*n], 0, sizeof(v[*n]));
	v[*n].pid = pid;
	v[*n].member = member;
	return &v[(*n)++];
}

/* For a failed balance: which pages of pid's member do not net to 0 over events [0, upto)?
 * Under the fentry backend every record carries its page's address, so a missed add or a
 * remove seen twice shows as one address left over. Printed to stderr, at most 16 addresses
 * with their records; addr-0 records (seeds, re-bases) as one sum. */
struct rmap_rec {
	uint64_t addr;
	size_t idx;
};

static int rmap_rec_cmp(const void *a, const void *b)
{
	const struct rmap_rec *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void rmap_explain_unbalanced(const struct mt_run *r, int32_t pid, uint32_t member,
				    size_t upto)
{
	struct rmap_rec *v = calloc(upto ? upto : 1, sizeof(*v));
	int64_t zero = 0;
	size_t n = 0, shown = 0;

	if (!v)
		return;
	for (size_t i = 0; i < upto && i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];

		if (ev->type != MT_EV_RMAP || ev->pid != pid || ev->aux != member)
			continue;
		if (!ev->addr) {
			zero += mt_rmap_delta(ev);
			continue;
		}
		v[n].addr = ev->addr;
		v[n++].idx = i;
	}
	qsort(v, n, sizeof(*v), rmap_rec_cmp);
	/* the records without an address one by one (seeds, re-bases, the exit's close-out),
	 * and the last Rss before upto with the running sum there */
	{
		int64_t sum = 0, last_rss = -1, sum_at_rss = 0;
		size_t last_rss_i = 0, shown0 = 0;
		int64_t page = sysconf(_SC_PAGESIZE);

		for (size_t i = 0; i <= upto && i < r->nr_ev; i++) {
			const struct mt_event *ev = &r->ev[i];

			if (ev->pid != pid || ev->aux != member)
				continue;
			if (ev->type == MT_EV_RSS && i < upto) {
				last_rss = (int64_t)ev->size / page;
				sum_at_rss = sum;
				last_rss_i = i;
			}
			if (ev->type != MT_EV_RMAP)
				continue;
			sum += mt_rmap_delta(ev);
			if (!ev->addr && shown0++ < 16)
				fprintf(stderr,
					"  event %zu tid %d: %+" PRId64
					" without an address (sum %" PRId64 ")\n",
					i, ev->tid, mt_rmap_delta(ev), sum);
		}
		fprintf(stderr,
			"  last Rss before: event %zu, %" PRId64
			" pages; running sum there %" PRId64 "\n",
			last_rss_i, last_rss, sum_at_rss);
	}
	fprintf(stderr, "  pid %d member %u: records without an address sum to %" PRId64 "\n", pid,
		member, zero);
	for (size_t a = 0, b; a < n; a = b) {
		int64_t net = 0;

		for (b = a; b < n && v[b].addr == v[a].addr; b++)
			net += mt_rmap_delta(&r->ev[v[b].idx]);
		if (!net || shown++ >= 16)
			continue;
		fprintf(stderr, "  page 0x%" PRIx64 " nets %" PRId64 ":", v[a].addr, net);
		for (size_t k = a; k < b && k < a + 8; k++) {
			const struct mt_event *ev = &r->ev[v[k].idx];

			fprintf(stderr, " [event %zu tid %d %+" PRId64 " ts %" PRIu64 "]", v[k].idx,
				ev->tid, mt_rmap_delta(ev), ev->ts);
		}
		fprintf(stderr, "\n");
	}
	if (shown > 16)
		fprintf(stderr, "  ... %zu pages in all do not net to 0\n", shown);
	free(v);
}

int mt_rmap_check_rss(const struct mt_run *r, const char *backend, char *msg, size_t len)
{
	int64_t lag = mt_rmap_backend_lag(backend);
	/* the tracepoint backend writes both kinds of record under the process's lock */
	bool ordered = backend && !strcmp(backend, "tracepoint");
	enum { CAP = 1024 };
	struct pair *v = calloc(CAP, sizeof(*v)), *p;
	int64_t page = sysconf(_SC_PAGESIZE);
	size_t n = 0;
	int rc = -1;

	if (!v) {
		snprintf(msg, len, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];
		int64_t rss, slack;

		if (ev->type == MT_EV_EXIT) {
			for (size_t k = 0; k < n; k++) {
				if (v[k].pid != ev->pid)
					continue;
				v[k].exited = true;
				if (v[k].sum) {
					snprintf(msg, len,
						 "pid %d member %u: Rmap sum %" PRId64
						 " pages at its Exit (event %zu), want 0",
						 ev->pid, v[k].member, v[k].sum, i);
					rmap_explain_unbalanced(r, ev->pid, v[k].member, i);
					goto out;
				}
			}
			continue;
		}
		if ((ev->type != MT_EV_RMAP && ev->type != MT_EV_RSS) || ev->aux >= MT_RSS_NR)
			continue;
		p = pair_get(v, &n, CAP, ev->pid, ev->aux);
		if (!p) {
			snprintf(msg, len, "more than %d (pid, member) pairs", CAP);
			goto out;
		}
		if (ev->type == MT_EV_RMAP) {
			if (p->exited) {
				snprintf(msg, len,
					 "event %zu: Rmap of pid %d member %u after its Exit (delta %" PRId64
					 ")",
					 i, ev->pid, ev->aux, mt_rmap_delta(ev));
				goto out;
			}
			p->sum += mt_rmap_delta(ev);
			p->seen_rmap = true;
			p->recent[p->nr_recent % RECENT].tid = ev->tid;
			p->recent[p->nr_recent % RECENT].delta = mt_rmap_delta(ev);
			p->nr_recent++;
			if (p->sum > p->hi_since_rss)
				p->hi_since_rss = p->sum;
			continue;
		}
		/* Rss (the first one of a pair included: a fork seed or exec re-base is written as
		 * an Rmap record first, like any other change) */
		rss = (int64_t)ev->size / page;
		slack = (ordered ? 0 : pair_slack(p, ev->tid)) + lag;
		if (abs64(rss - p->sum) > slack && abs64(rss - p->hi_since_rss) > slack) {
			snprintf(msg, len,
				 "event %zu: Rss of pid %d member %u is %" PRIu64 " pages, Rmap running "
				 "sum %" PRId64 " (highest since the previous Rss %" PRId64
				 ", concurrency slack + backend lag %" PRId64 ", %s backend)",
				 i, ev->pid, ev->aux, ev->size / (uint64_t)page, p->sum,
				 p->hi_since_rss, slack, backend ? backend : "unknown");
			goto out;
		}
		/* peak keeping: a local maximum between two records must have been written */
		if (p->has_rss && p->hi_since_rss > p->last_rss + slack &&
		    p->hi_since_rss > rss + slack) {
			snprintf(msg, len,
				 "event %zu: pid %d member %u reached %" PRId64 " pages (Rmap) after "
				 "Rss %" PRId64 ", but the next Rss says %" PRIu64 ": a peak was lost",
				 i, ev->pid, ev->aux, p->hi_since_rss, p->last_rss,
				 ev->size / (uint64_t)page);
			goto out;
		}
		p->has_rss = true;
		p->last_rss = rss;
		p->hi_since_rss = p->sum;
	}
	for (size_t k = 0; k < n; k++)
		if (v[k].seen_rmap && !v[k].has_rss) {
			snprintf(msg, len, "pid %d member %u has Rmap records but no Rss record",
				 v[k].pid, v[k].member);
			goto out;
		}
	for (size_t k = 0; k < n; k++)
		if (v[k].sum != v[k].last_rss || v[k].sum != 0) {
			snprintf(msg, len,
				 "pid %d member %u ends with Rmap sum %" PRId64
				 " pages, last Rss %" PRId64 " pages (want both 0)",
				 v[k].pid, v[k].member, v[k].sum, v[k].last_rss);
			goto out;
		}
	rc = 0;
out:
	free(v);
	return rc;
}

int64_t mt_rmap_backend_lag(const char *backend)
{
	/* x86-64: a page table maps 512 pages; that is also a PMD-mapped THP's size */
	return backend && !strcmp(backend, "fentry") ? 512 : 0;
}
