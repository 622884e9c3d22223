// SPDX-License-Identifier: MIT
/*
 * `memtrack report`: the reader side. Decodes an artifact, runs the same accounting as the
 * tracker, merges what the manifest beside it recorded (command, exit status, drops, comm, the
 * kernel's exact RSS peaks), and prints a summary or a JSON document, plus optional SVG and
 * Perfetto exports.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "artifact/outdir.h"
#include "cli/cmd_report.h"
#include "cli/cmd_report_opts.h"
#include "cli/exit_status.h"
#include "common/log.h"
#include "acct/acct.h"
#include "acct/sites.h"
#include "report/profile.h"
#include "report/report.h"
#include "stacks/stackfile.h"
#include "symbols/symbols.h"

/* DIR/PID.MemtrackArtifact.msgpack -> DIR/PID<suffix>; NULL when not named like that. */
static char *beside_artifact(const char *artifact, const char *suffix)
{
	size_t n = strlen(artifact), sl = strlen(ARTIFACT_SUFFIX);
	char *p;

	if (n <= sl || strcmp(artifact + n - sl, ARTIFACT_SUFFIX))
		return NULL;
	if (asprintf(&p, "%.*s%s", (int)(n - sl), artifact, suffix) < 0)
		return NULL;
	return p;
}

/* Process records in (pid, order of appearance) order, for merging by pid. */
struct proc_ref {
	int32_t pid;
	uint32_t idx;
};

static int by_pid_then_idx(const void *a, const void *b)
{
	const struct proc_ref *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static struct proc_ref *proc_refs(const struct manifest_proc *procs, uint32_t nr)
{
	struct proc_ref *r = malloc((nr ? nr : 1) * sizeof(*r));

	for (uint32_t i = 0; r && i < nr; i++)
		r[i] = (struct proc_ref){procs[i].pid, i};
	if (r)
		qsort(r, nr, sizeof(*r), by_pid_then_idx);
	return r;
}

/* Per process what the tracker knew: the k-th record of a pid here takes the k-th one with
 * that pid in the file (pid reuse). Both sorted by (pid, order): one merge walk, O(n log n). */
static int merge_procs(struct manifest *m, const struct manifest_proc *file, uint32_t nr_file)
{
	struct proc_ref *a = proc_refs(m->procs, m->nr_procs);
	struct proc_ref *b = proc_refs(file, nr_file);
	uint32_t i = 0, j = 0;

	if (!a || !b) {
		free(a);
		free(b);
		return -ENOMEM;
	}
	while (i < m->nr_procs && j < nr_file) {
		struct manifest_proc *p = &m->procs[a[i].idx];
		const struct manifest_proc *f = &file[b[j].idx];

		if (a[i].pid != b[j].pid) {
			if (a[i].pid < b[j].pid)
				i++;
			else
				j++;
			continue;
		}
		memcpy(p->comm, f->comm, sizeof(p->comm));
		p->comm[sizeof(p->comm) - 1] = 0;
		if (f->peak_rss > p->peak_rss)
			p->peak_rss = f->peak_rss;
		if (!p->ppid)
			p->ppid = f->ppid;
		i++;
		j++;
	}
	free(a);
	free(b);
	return 0;
}

/*
 * The results from the artifact's accounting into m, which holds the manifest read beside it
 * (or nothing): m keeps what only the tracker knew (command, exit status, drops, what was
 * still running, per process the name and the kernel's exact RSS peak), the accounting
 * replaces the rest of the results.
 */
static int fill_results(const struct heap_acct *acct, struct manifest *m)
{
	struct manifest_proc *file_procs = m->procs;
	uint32_t nr_file_procs = m->nr_procs;
	uint64_t file_peak_rss = m->peak_rss;
	/* the window and its markers are the artifact's companion data: only the tracker saw
	 * the markers, the artifact's accounting has no window */
	struct manifest_window file_window = m->window;
	struct manifest_marker *file_markers = m->markers;
	uint32_t nr_file_markers = m->nr_markers;
	uint64_t file_markers_dropped = m->markers_dropped;
	int err;

	m->procs = NULL;
	m->nr_procs = 0;
	m->markers = NULL;
	m->nr_markers = 0;
	err = heap_acct__fill(acct, m);
	free(m->markers);
	m->window = file_window;
	m->markers = file_markers;
	m->nr_markers = nr_file_markers;
	m->markers_dropped = file_markers_dropped;
	/* the kernel saw every page; the artifact's Rss records are decimated */
	if (file_peak_rss > m->peak_rss)
		m->peak_rss = file_peak_rss;
	if (!err)
		err = merge_procs(m, file_procs, nr_file_procs);
	free(file_procs);
	return err;
}

static FILE *out_open(const char *path)
{
	return strcmp(path, "-") ? fopen(path, "w") : stdout;
}

static int out_close(FILE *f, const char *path)
{
	int err = 0;

	if (f == stdout)
		return fflush(f) ? -errno : 0;
	if (ferror(f))
		err = -EIO;
	if (fclose(f) && !err)
		err = -errno;
	if (err)
		log__error("cannot write '%s': %s", path, strerror(-err));
	return err;
}

/* One export into a file: returns 0 or -errno, with the message logged. */
static int write_export(const char *path, int (*fn)(FILE *, const struct report_view *,
						      struct timeline *),
			const struct report_view *v, struct timeline *tl)
{
	FILE *f = out_open(path);
	int err;

	if (!f) {
		err = -errno;
		log__error("cannot create '%s': %s", path, strerror(-err));
		return err;
	}
	fn(f, v, tl);
	return out_close(f, path);
}

/* What the artifact and its manifest hold, accounted: everything a view needs. */
struct report_input {
	struct heap_acct *acct;
	struct timeline *tl, *trace; /* trace: only with --perfetto */
	struct manifest m; /* the manifest beside the artifact, results from the accounting */
	bool have_manifest;
	struct heap_stats st;
	char *decode_error; /* the artifact stopped early; NULL when read to its end */
	uint64_t nread;
	/* allocation stacks, when an option wants them */
	bool have_stacks;
	struct stackfile sf;
	struct site_acct *sites;
	struct symbolizer *sym;
	struct profile_build prof;
};

/* Reads the stacks file and hooks the sites into the accounting. 0 or -errno, logged. */
static int report_load_stacks(const struct report_opts *o, struct report_input *in)
{
	char *path = o->stacks ? strdup(o->stacks) : beside_artifact(o->artifact, STACKFILE_SUFFIX);
	int err;

	if (!path) {
		log__error("no stacks file: '%s' is not named <pid>%s; give one with --stacks",
			   o->artifact, ARTIFACT_SUFFIX);
		return -EINVAL;
	}
	err = stackfile__read(path, &in->sf);
	if (err) {
		if (err == -ENOENT)
			log__error("cannot open '%s': %s; was the run tracked with "
				   "'memtrack track --stacks'?",
				   path, strerror(-err));
		else if (err != -EPROTO)
			log__error("cannot read '%s': %s", path, strerror(-err));
		free(path);
		return err;
	}
	free(path);
	in->have_stacks = true;
	err = site_acct__new(&in->sites, in->acct, &in->sf, o->root);
	if (err)
		log__error("out of memory");
	return err;
}

/* The sites symbolised into the profile the stack outputs are written from. */
static int report_build_profile(const struct report_opts *o, struct report_input *in)
{
	struct sym_opts so = {.debug_dir = o->debug_dir};
	uint64_t records, with_id;
	const char *base;
	const struct site *sites;
	uint32_t n;
	int err;

	base = strrchr(o->artifact, '/') ? strrchr(o->artifact, '/') + 1 : o->artifact;
	if (in->sf.artifact && *in->sf.artifact && strcmp(in->sf.artifact, base))
		log__warn("the stacks file was written for '%s', not '%s'", in->sf.artifact, base);
	site_acct__counts(in->sites, &records, &with_id);
	if (records != in->sf.nr_allocs)
		log__warn("the stacks file names %llu allocations, the artifact has %llu: do they "
			  "belong to the same run?",
			  (unsigned long long)in->sf.nr_allocs, (unsigned long long)records);
	err = site_acct__finish(in->sites);
	if (!err)
		err = symbolizer__new(&in->sym, &in->sf, &so);
	if (err)
		return err;
	sites = site_acct__sites(in->sites, &n);
	err = profile__build(&in->prof, &in->sf, sites, n, in->sym, &in->m);
	if (err)
		return err;
	in->prof.p.peak_heap = in->m.peak_heap;
	in->prof.p.time_nanos = in->m.start_unix_ns;
	in->prof.p.duration_nanos = in->st.last_ts - in->st.first_ts;
	return 0;
}

/* Reads the manifest beside the artifact (or o->manifest) into in->m; a bad one is only
 * warned about. */
static void report_load_manifest(const struct report_opts *o, struct report_input *in)
{
	char *mpath;
	int err;

	if (o->no_manifest)
		return;
	mpath = o->manifest ? strdup(o->manifest) : beside_artifact(o->artifact, MANIFEST_SUFFIX);
	if (mpath && !access(mpath, F_OK)) {
		err = manifest__read(&in->m, mpath);
		if (err)
			log__warn("ignoring manifest '%s': %s", mpath, strerror(-err));
		else
			in->have_manifest = true;
	} else if (o->manifest) {
		log__warn("no manifest '%s'", o->manifest);
	}
	free(mpath);
}

/* Decodes the artifact through the accounting and the timelines, then merges the manifest.
 * Returns 0 (a decode error is kept in in->decode_error) or -errno, with the message logged. */
static int report_load(const struct report_opts *o, struct report_input *in)
{
	struct artifact_reader *rd = NULL;
	struct mt_event ev;
	int err, n;

	err = artifact_reader__open(&rd, o->artifact);
	if (err) {
		log__error("cannot open '%s': %s", o->artifact, strerror(-err));
		return err;
	}
	err = -ENOMEM;
	if (heap_acct__new(&in->acct) || timeline__new(&in->tl, REPORT_POINTS) ||
	    (o->perfetto && timeline__new(&in->trace, REPORT_TRACE_POINTS)))
		goto cleanup;
	if (cmd_report__want_stacks(o) && (err = report_load_stacks(o, in)))
		goto cleanup;
	err = -ENOMEM;
	while ((n = artifact_reader__next(rd, &ev)) == 1) {
		uint64_t heap, rss;

		in->nread++;
		if (in->sites)
			site_acct__event(in->sites, &ev);
		else
			heap_acct__event(in->acct, &ev);
		heap = heap_acct__live_heap(in->acct);
		rss = heap_acct__live_rss(in->acct);
		timeline__add(in->tl, ev.ts, heap, rss);
		if (in->trace)
			timeline__add(in->trace, ev.ts, heap, rss);
	}
	if (n < 0) {
		const char *e = artifact_reader__error(rd);

		in->decode_error = strdup(e && *e ? e : strerror(-n));
	} else if (!artifact_reader__frames(rd)) {
		/* memtrack writes at least one frame, even for no event: nothing at all is what a
		 * run killed before its end leaves */
		in->decode_error = strdup("no zstd frame (an empty file: was the run killed?)");
	}
	report_load_manifest(o, in);
	if (fill_results(in->acct, &in->m))
		goto cleanup;
	heap_acct__stats(in->acct, &in->st);
	if (in->sites && report_build_profile(o, in))
		goto cleanup;
	err = 0;
cleanup:
	if (err == -ENOMEM)
		log__error("out of memory");
	artifact_reader__free(rd);
	return err;
}

static void report_input__free(struct report_input *in)
{
	profile__free(&in->prof);
	symbolizer__free(in->sym);
	site_acct__free(in->sites);
	if (in->have_stacks)
		stackfile__free(&in->sf);
	heap_acct__free(in->acct);
	timeline__free(in->tl);
	timeline__free(in->trace);
	manifest__free(&in->m);
	free(in->decode_error);
}

/* A run tracked with --stacks, reported without asking for them: say what there is. */
static void stacks_hint(FILE *out, const char *artifact)
{
	char *path = beside_artifact(artifact, STACKFILE_SUFFIX);

	if (path && !access(path, R_OK))
		fprintf(out,
			"memtrack: allocation call stacks in %s: see --top N, --folded, "
			"--flamegraph, --pprof\n",
			path);
	free(path);
}

enum stack_export { STACKS_FOLDED, STACKS_FLAME, STACKS_PPROF };

static int write_stack_export(const char *path, enum stack_export kind,
			      const struct report_input *in, const struct report_opts *o)
{
	FILE *f = out_open(path);
	char *title = NULL;
	int err;

	if (!f) {
		err = -errno;
		log__error("cannot create '%s': %s", path, strerror(-err));
		return err;
	}
	switch (kind) {
	case STACKS_FOLDED:
		err = report__folded(f, &in->prof.p);
		break;
	case STACKS_FLAME:
		if (asprintf(&title, "Bytes allocated by call stack: %s%s%s", o->artifact,
			     in->m.command ? " - " : "", in->m.command ? in->m.command : "") < 0)
			title = NULL;
		err = report__flamegraph(f, &in->prof.p, title);
		free(title);
		break;
	default:
		err = report__pprof(f, &in->prof.p);
	}
	if (err == -ENOMEM)
		log__error("out of memory");
	if (out_close(f, path) && !err)
		err = -EIO;
	return err;
}

/* The summary or JSON document, then the exports. Returns 0 or -errno, with the message
 * logged. */
static int report_render(const struct report_opts *o, struct report_input *in)
{
	struct report_view v = {
		.m = &in->m,
		.have_manifest = in->have_manifest,
		.stats = &in->st,
		.acct = in->acct,
		.artifact = o->artifact,
		.decode_error = in->decode_error,
		.events_read = in->nread,
		.profile = in->sites && o->top ? &in->prof.p : NULL,
		.top = o->top,
	};
	FILE *out = o->output ? out_open(o->output) : stdout;
	int err, cerr;

	if (!out) {
		err = -errno;
		log__error("cannot create '%s': %s", o->output, strerror(-err));
		return err;
	}
	if (o->window) {
		err = report__window(out, &v, o->json);
	} else if (o->json) {
		err = report__json_write(out, &v, in->tl);
		if (err == -ENOMEM) {
			log__error("out of memory");
			if (out != stdout)
				fclose(out);
			return err;
		}
	} else {
		err = report__summary_view(out, &v);
		if (!err && v.profile)
			err = report__stacks_summary(out, v.profile, o->top);
		if (!err && !cmd_report__want_stacks(o))
			stacks_hint(out, o->artifact);
	}
	cerr = out_close(out, o->output ? o->output : "stdout");
	if (cerr || err)
		return cerr ? cerr : err;
	if (o->svg && (err = write_export(o->svg, report__svg, &v, in->tl)))
		return err;
	if (o->perfetto && (err = write_export(o->perfetto, report__perfetto, &v, in->trace)))
		return err;
	if (o->folded && (err = write_stack_export(o->folded, STACKS_FOLDED, in, o)))
		return err;
	if (o->flamegraph && (err = write_stack_export(o->flamegraph, STACKS_FLAME, in, o)))
		return err;
	if (o->pprof && (err = write_stack_export(o->pprof, STACKS_PPROF, in, o)))
		return err;
	return 0;
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o = {0};
	struct report_input in = {0};
	int err, ret = MT_EXIT_BAD_INPUT;

	err = cmd_report__parse(argc, argv, &o);
	if (err) {
		free(o.found);
		return err > 0 ? MT_EXIT_OK : MT_EXIT_USAGE;
	}
	if (report_load(&o, &in) || report_render(&o, &in))
		goto cleanup;
	if (in.decode_error) {
		log__error("'%s': %s: reported the %llu events before it", o.artifact,
			   in.decode_error, (unsigned long long)in.nread);
		goto cleanup;
	}
	ret = MT_EXIT_OK;
cleanup:
	report_input__free(&in);
	free(o.found);
	return ret;
}
