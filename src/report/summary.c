// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "report/report.h"

const char *report__bytes(uint64_t v, char *buf, size_t cap)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double d = (double)v;
	int u = 0;

	while (d >= 1024 && u < 4) {
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

	return x->peak_rss < y->peak_rss ? 1 : x->peak_rss > y->peak_rss ? -1 : 0;
}

int report__summary(FILE *out, const struct manifest *m)
{
	char a[32], b[32], c[32];
	uint64_t drops = m->consumer_drops;

	for (int i = 0; i < MT_DROP_NR; i++)
		drops += m->drops[i];
	fprintf(out, "memtrack: peak heap %s, peak RSS %s (tree)\n",
		report__bytes(m->peak_heap, a, sizeof(a)), report__bytes(m->peak_rss, b, sizeof(b)));
	fprintf(out,
		"memtrack: %" PRIu64 " allocations, %" PRIu64 " frees, leaked at exit %s in %" PRIu64
		" blocks\n",
		m->allocs, m->frees, report__bytes(m->leaked_bytes, c, sizeof(c)), m->leaked_count);
	fprintf(out, "memtrack: %" PRIu64 " events, %" PRIu64 " dropped%s\n", m->events_total,
		drops, drops ? " -- THE ARTIFACT IS INCOMPLETE" : "");
	if (m->nr_procs > 1) {
		struct manifest_proc *p = malloc(m->nr_procs * sizeof(*p));
		uint32_t n = m->nr_procs < 10 ? m->nr_procs : 10;

		if (!p)
			return -1;
		memcpy(p, m->procs, m->nr_procs * sizeof(*p));
		qsort(p, m->nr_procs, sizeof(*p), by_peak_rss);
		fprintf(out, "memtrack: %u processes:\n", m->nr_procs);
		for (uint32_t i = 0; i < n; i++)
			fprintf(out,
				"  pid %-7d %-16s peak RSS %10s  peak heap %10s  %" PRIu64
				" allocs\n",
				p[i].pid, p[i].comm[0] ? p[i].comm : "-",
				report__bytes(p[i].peak_rss, a, sizeof(a)),
				report__bytes(p[i].peak_heap, b, sizeof(b)), p[i].allocs);
		if (m->nr_procs > n)
			fprintf(out, "  ... %u more\n", m->nr_procs - n);
		free(p);
	}
	return 0;
}
