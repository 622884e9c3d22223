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
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "cli/cmd_report.h"
#include "cli/exit_status.h"
#include "common/log.h"
#include "acct/acct.h"
#include "report/report.h"

static const char report_usage[] =
	"NAME\n"
	"    memtrack report - summarise a memtrack artifact\n"
	"\n"
	"SYNOPSIS\n"
	"    memtrack report [--json] [--svg FILE] [--perfetto FILE] [-o FILE]\n"
	"                    [--manifest FILE | --no-manifest] ARTIFACT\n"
	"\n"
	"DESCRIPTION\n"
	"    Decodes ARTIFACT (a <pid>.MemtrackArtifact.msgpack written by memtrack track or by\n"
	"    codspeed-memtrack) and replays its events through the accounting memtrack track\n"
	"    uses: live heap per process and for the whole process tree, RSS (file + anon +\n"
	"    shmem, swap excluded) per process and for the tree, their peaks, blocks allocated\n"
	"    and freed (a realloc that moves or resizes a block is one of each; realloc(p, 0)\n"
	"    a free), and the blocks still live when each process exited (leaks).\n"
	"\n"
	"    If <pid>.memtrack.json sits beside the artifact, the command, its exit status, the\n"
	"    records lost while tracking, process names and the tracker's exact RSS peaks are\n"
	"    taken from it (the artifact's Rss records are thresholded, so the larger of the two\n"
	"    peaks is shown). Without it, losses are unknown.\n"
	"\n"
	"    Blocks live when a process exec'd are gone with the old image: they are reported\n"
	"    as lost at exec, neither as frees nor as leaks.\n"
	"\n"
	"OPTIONS\n"
	"    --json\n"
	"        Print a JSON document instead of the summary: results, per-process figures,\n"
	"        event counts by type, the manifest's identity and drops, and a timeline of\n"
	"        tree heap and RSS with at most 1000 points (maxima per time bucket).\n"
	"    --svg FILE\n"
	"        Also write an SVG plot of tree heap and RSS over time ('-': stdout).\n"
	"    --perfetto FILE\n"
	"        Also write Chrome trace-event JSON with heap and RSS counter tracks, to open in\n"
	"        https://ui.perfetto.dev or chrome://tracing ('-': stdout).\n"
	"    -o, --output FILE\n"
	"        Write the summary or the JSON document to FILE instead of stdout.\n"
	"    --manifest FILE\n"
	"        Read the manifest from FILE instead of looking beside the artifact.\n"
	"    --no-manifest\n"
	"        Do not read any manifest.\n"
	"    -h, --help\n"
	"        Print this text and exit.\n"
	"\n"
	"EXIT STATUS\n"
	"    0  the artifact was read to its end and every output written\n"
	"    2  usage error; or bad input: ARTIFACT cannot be opened, is empty or truncated, or\n"
	"       holds an undecodable record (what was read before it is still reported), or an\n"
	"       output cannot be written. An unreadable manifest is only a warning.\n"
	"\n"
	"EXAMPLES\n"
	"    memtrack report out/1234.MemtrackArtifact.msgpack\n"
	"    memtrack report --json -o report.json --svg mem.svg out/1234.MemtrackArtifact.msgpack\n";

struct report_opts {
	bool json, no_manifest;
	const char *svg, *perfetto, *output, *manifest, *artifact;
};

/* DIR/PID.MemtrackArtifact.msgpack -> DIR/PID.memtrack.json; NULL when not named like that. */
static char *manifest_path_for(const char *artifact)
{
	size_t n = strlen(artifact), sl = strlen(ARTIFACT_SUFFIX);
	char *p;

	if (n <= sl || strcmp(artifact + n - sl, ARTIFACT_SUFFIX))
		return NULL;
	if (asprintf(&p, "%.*s%s", (int)(n - sl), artifact, MANIFEST_SUFFIX) < 0)
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
	int err;

	m->procs = NULL;
	m->nr_procs = 0;
	err = heap_acct__fill(acct, m);
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

static int parse_opts(int argc, char **argv, struct report_opts *o)
{
	enum { OPT_JSON = 256, OPT_SVG, OPT_PERFETTO, OPT_MANIFEST, OPT_NO_MANIFEST };
	static const struct option longopts[] = {
		{"json", no_argument, NULL, OPT_JSON},
		{"svg", required_argument, NULL, OPT_SVG},
		{"perfetto", required_argument, NULL, OPT_PERFETTO},
		{"output", required_argument, NULL, 'o'},
		{"manifest", required_argument, NULL, OPT_MANIFEST},
		{"no-manifest", no_argument, NULL, OPT_NO_MANIFEST},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;

	optind = 0; /* full re-initialisation: cmd_report may run more than once (tests) */
	while ((c = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_JSON: o->json = true; break;
		case OPT_SVG: o->svg = optarg; break;
		case OPT_PERFETTO: o->perfetto = optarg; break;
		case 'o': o->output = optarg; break;
		case OPT_MANIFEST: o->manifest = optarg; break;
		case OPT_NO_MANIFEST: o->no_manifest = true; break;
		case 'h':
			fputs(report_usage, stdout);
			return 1;
		default:
			fprintf(stderr, "Try 'memtrack report --help'.\n");
			return -EINVAL;
		}
	}
	if (optind + 1 != argc) {
		log__error("report takes exactly one artifact; see 'memtrack report --help'");
		return -EINVAL;
	}
	if (o->manifest && o->no_manifest) {
		log__error("--manifest and --no-manifest exclude each other");
		return -EINVAL;
	}
	o->artifact = argv[optind];
	return 0;
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
};

/* Reads the manifest beside the artifact (or o->manifest) into in->m; a bad one is only
 * warned about. */
static void report_load_manifest(const struct report_opts *o, struct report_input *in)
{
	char *mpath;
	int err;

	if (o->no_manifest)
		return;
	mpath = o->manifest ? strdup(o->manifest) : manifest_path_for(o->artifact);
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
	while ((n = artifact_reader__next(rd, &ev)) == 1) {
		uint64_t heap, rss;

		in->nread++;
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
	err = 0;
cleanup:
	if (err == -ENOMEM)
		log__error("out of memory");
	artifact_reader__free(rd);
	return err;
}

static void report_input__free(struct report_input *in)
{
	heap_acct__free(in->acct);
	timeline__free(in->tl);
	timeline__free(in->trace);
	manifest__free(&in->m);
	free(in->decode_error);
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
	};
	FILE *out = o->output ? out_open(o->output) : stdout;
	int err, cerr;

	if (!out) {
		err = -errno;
		log__error("cannot create '%s': %s", o->output, strerror(-err));
		return err;
	}
	if (o->json) {
		err = report__json_write(out, &v, in->tl);
		if (err == -ENOMEM) {
			log__error("out of memory");
			if (out != stdout)
				fclose(out);
			return err;
		}
	} else {
		err = report__summary_view(out, &v);
	}
	cerr = out_close(out, o->output ? o->output : "stdout");
	if (cerr || err)
		return cerr ? cerr : err;
	if (o->svg && (err = write_export(o->svg, report__svg, &v, in->tl)))
		return err;
	if (o->perfetto && (err = write_export(o->perfetto, report__perfetto, &v, in->trace)))
		return err;
	return 0;
}

int cmd_report(int argc, char **argv)
{
	struct report_opts o = {0};
	struct report_input in = {0};
	int err, ret = MT_EXIT_BAD_INPUT;

	err = parse_opts(argc, argv, &o);
	if (err)
		return err > 0 ? MT_EXIT_OK : MT_EXIT_USAGE;
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
	return ret;
}
