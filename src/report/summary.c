// SPDX-License-Identifier: MIT
/* The human summary: a few lines, the same at the end of `memtrack track` and in `report`. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "artifact/artifact.h"
#include "common/records.h"
#include "common/shquote.h"
#include "report/report.h"

#define SUMMARY_TOP 10 /* processes listed, by peak RSS */

const char *report__bytes(uint64_t v, char *buf, size_t cap)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 5) {
		d /= 1024;
		u++;
	}
	/* 1023.96 KiB would print as "1024.0 KiB": move up a unit instead */
	if (u > 0 && u < 5 && d >= 1023.95) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%" PRIu64 " B", v);
	else
		snprintf(buf, cap, "%.1f %s", d, units[u]);
	return buf;
}

static int by_peak_rss(const void *a, const void *b)
{
	const struct manifest_proc *x = a, *y = b;

	if (x->peak_rss != y->peak_rss)
		return x->peak_rss < y->peak_rss ? 1 : -1;
	if (x->peak_heap != y->peak_heap)
		return x->peak_heap < y->peak_heap ? 1 : -1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

static void summary__drops(FILE *out, const struct manifest *m)
{
	uint64_t total = m->consumer_drops + records__drops_sum(m->drops);
	char what[1024]; /* every reason's label, when all lost some */

	fprintf(out, "memtrack: %" PRIu64 " events, %" PRIu64 " dropped\n", m->events_total, total);
	/* back-pressure: never a drop, but time the program spent waiting for memtrack */
	if (m->preload_waits)
		fprintf(out,
			"memtrack: the command waited %" PRIu64 " time%s (%.1f ms in all) for "
			"memtrack to take records from its full buffer\n",
			m->preload_waits, m->preload_waits == 1 ? "" : "s", m->preload_wait_ns / 1e6);
	if (m->nr_running) {
		fprintf(out, "memtrack: *** INCOMPLETE: %u process%s still running when memtrack "
			"stopped waiting, %s records end there:", m->nr_running,
			m->nr_running == 1 ? "" : "es", m->nr_running == 1 ? "its" : "their");
		for (uint32_t i = 0; i < m->nr_running && i < SUMMARY_TOP; i++)
			fprintf(out, "%s %d (%s)", i ? "," : "", m->running[i].pid,
				m->running[i].comm[0] ? m->running[i].comm : "-");
		fprintf(out, "%s ***\n", m->nr_running > SUMMARY_TOP ? ", ..." : "");
		if (!total)
			return;
	}
	if (!total && m->complete)
		return;
	records__drops_text(what, sizeof(what), m->drops, m->consumer_drops, false);
	fprintf(out, "memtrack: *** INCOMPLETE: %" PRIu64 " records lost (%s): peaks and counts "
		"are lower bounds ***\n", total, *what ? what : "artifact write failure");
}

static int summary__procs(FILE *out, const struct manifest *m)
{
	struct manifest_proc *p;
	uint32_t n = m->nr_procs < SUMMARY_TOP ? m->nr_procs : SUMMARY_TOP;
	char a[32], b[32], c[32];

	p = malloc(m->nr_procs * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(p, m->procs, m->nr_procs * sizeof(*p));
	qsort(p, m->nr_procs, sizeof(*p), by_peak_rss);
	fprintf(out, "memtrack: %u processes%s:\n", m->nr_procs,
		m->nr_procs > n ? ", top 10 by peak RSS" : "");
	fprintf(out, "  %-7s %-7s %-16s %10s %10s %10s %10s\n", "pid", "ppid", "comm", "peak RSS",
		"peak heap", "allocs", "leaked");
	for (uint32_t i = 0; i < n; i++)
		fprintf(out, "  %-7d %-7d %-16.16s %10s %10s %10" PRIu64 " %10s\n", p[i].pid,
			p[i].ppid, p[i].comm[0] ? p[i].comm : "-",
			report__bytes(p[i].peak_rss, a, sizeof(a)),
			report__bytes(p[i].peak_heap, b, sizeof(b)), p[i].allocs,
			report__bytes(p[i].leaked_bytes, c, sizeof(c)));
	if (m->nr_procs > n)
		fprintf(out, "  ... %u more\n", m->nr_procs - n);
	free(p);
	return 0;
}

int report__summary_view(FILE *out, const struct report_view *v)
{
	const struct manifest *m = v->m;
	char a[32], b[32];
	int err = 0;

	if (v->have_manifest && (m->command || (m->argv && m->argv[0]))) {
		/* manifests of older memtracks have no command with -- */
		char *q = m->command ? NULL : shquote__argv(m->argv);

		fprintf(out, "memtrack: command: %s", m->command ? m->command : q ? q : m->argv[0]);
		free(q);
		if (m->term_signal)
			fprintf(out, " (killed by signal %d, exit status %d)\n", m->term_signal,
				m->exit_status);
		else
			fprintf(out, " (exit status %d)\n", m->exit_status);
	}
	fprintf(out, "memtrack: peak heap %s, peak RSS %s (tree)\n",
		report__bytes(m->peak_heap, a, sizeof(a)), report__bytes(m->peak_rss, b, sizeof(b)));
	/* what heap_acct counts: see SUMMARY in docs/memtrack.1 */
	fprintf(out,
		"memtrack: %" PRIu64 " blocks allocated, %" PRIu64 " freed (reallocs count in both), "
		"leaked at exit %s in %" PRIu64 " blocks\n",
		m->allocs, m->frees, report__bytes(m->leaked_bytes, a, sizeof(a)), m->leaked_count);
	report__window_line(out, m);
	if (v->stats && v->stats->unmatched_frees)
		fprintf(out, "memtrack: %" PRIu64 " frees of blocks never seen allocated (before "
			"tracking, inherited through fork, or lost)\n", v->stats->unmatched_frees);
	if (v->stats && v->stats->lost_at_exec_count)
		fprintf(out, "memtrack: %s in %" PRIu64 " blocks went away with an exec'd image "
			"(not counted as leaks)\n",
			report__bytes(v->stats->lost_at_exec_bytes, a, sizeof(a)),
			v->stats->lost_at_exec_count);
	if (v->stats && v->stats->saturated)
		fprintf(out, "memtrack: *** SATURATED: a byte total passed 2^64 - 1 (corrupt or "
			"crafted sizes); such figures show as %" PRIu64 " ***\n", UINT64_MAX);
	if (v->have_manifest)
		summary__drops(out, m);
	else
		fprintf(out, "memtrack: %" PRIu64 " events, drops unknown (no manifest beside the "
			"artifact)\n", m->events_total);
	if (v->decode_error)
		fprintf(out, "memtrack: *** ARTIFACT CUT SHORT after %" PRIu64 " events: %s; the "
			"figures cover what was read ***\n", v->events_read, v->decode_error);
	if (m->nr_procs > 1)
		err = summary__procs(out, m);
	if (ferror(out))
		return -EIO;
	return err;
}

int report__summary(FILE *out, const struct manifest *m)
{
	struct report_view v = {.m = m, .have_manifest = true};

	return report__summary_view(out, &v);
}
