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
#include "report/heap.h"
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
	"    2  usage error; or bad input: ARTIFACT cannot be opened, is truncated or holds an\n"
	"       undecodable record (what was read before it is still reported), or an output\n"
	"       cannot be written. An unreadable manifest is only a warning.\n"
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

/* Takes over what only the tracker knew. m keeps its results; the strings stay file's. */
static void merge_manifest(struct manifest *m, const struct manifest *file)
{
	struct manifest_proc *procs = m->procs;
	uint32_t nr = m->nr_procs;

	m->memtrack_version = file->memtrack_version;
	m->command = file->command;
	m->argv = file->argv;
	m->root_pid = file->root_pid;
	m->exit_status = file->exit_status;
	m->term_signal = file->term_signal;
	m->kernel_release = file->kernel_release;
	m->artifact = file->artifact;
	m->start_unix_ns = file->start_unix_ns;
	m->start_mono_ns = file->start_mono_ns;
	memcpy(m->drops, file->drops, sizeof(m->drops));
	m->consumer_drops = file->consumer_drops;
	m->complete = file->complete;
	m->running = file->running;
	m->nr_running = file->nr_running;
	/* the kernel saw every page; the artifact's Rss records are decimated */
	if (file->peak_rss > m->peak_rss)
		m->peak_rss = file->peak_rss;

	/* per process: match the k-th record of a pid with the k-th there (pid reuse) */
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t k = 0;

		for (uint32_t j = 0; j < i; j++)
			k += procs[j].pid == procs[i].pid;
		for (uint32_t j = 0; j < file->nr_procs; j++) {
			const struct manifest_proc *f = &file->procs[j];

			if (f->pid != procs[i].pid || k--)
				continue;
			memcpy(procs[i].comm, f->comm, sizeof(procs[i].comm));
			procs[i].comm[sizeof(procs[i].comm) - 1] = 0;
			if (f->peak_rss > procs[i].peak_rss)
				procs[i].peak_rss = f->peak_rss;
			if (!procs[i].ppid)
				procs[i].ppid = f->ppid;
			break;
		}
	}
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

int cmd_report(int argc, char **argv)
{
	struct report_opts o = {0};
	struct artifact_reader *rd = NULL;
	struct heap_acct *acct = NULL;
	struct timeline *tl = NULL, *trace = NULL;
	struct manifest m = {0}, file = {0};
	struct heap_stats st;
	struct report_view v = {0};
	char *mpath = NULL, *decode_error = NULL;
	struct mt_event ev;
	uint64_t nread = 0;
	FILE *out = NULL;
	int err, n, ret = MT_EXIT_BAD_INPUT;

	err = parse_opts(argc, argv, &o);
	if (err)
		return err > 0 ? MT_EXIT_OK : MT_EXIT_USAGE;

	err = artifact_reader__open(&rd, o.artifact);
	if (err) {
		log__error("cannot open '%s': %s", o.artifact, strerror(-err));
		goto cleanup;
	}
	if (heap_acct__new(&acct) || timeline__new(&tl, REPORT_POINTS) ||
	    (o.perfetto && timeline__new(&trace, REPORT_TRACE_POINTS))) {
		log__error("out of memory");
		goto cleanup;
	}
	while ((n = artifact_reader__next(rd, &ev)) == 1) {
		uint64_t heap, rss;

		nread++;
		heap_acct__event(acct, &ev);
		heap = heap_acct__live_heap(acct);
		rss = heap_acct__live_rss(acct);
		timeline__add(tl, ev.ts, heap, rss);
		if (trace)
			timeline__add(trace, ev.ts, heap, rss);
	}
	if (n < 0) {
		const char *e = artifact_reader__error(rd);

		decode_error = strdup(e && *e ? e : strerror(-n));
	}
	if (heap_acct__fill(acct, &m)) {
		log__error("out of memory");
		goto cleanup;
	}
	heap_acct__stats(acct, &st);

	if (!o.no_manifest) {
		mpath = o.manifest ? strdup(o.manifest) : manifest_path_for(o.artifact);
		if (mpath && !access(mpath, F_OK)) {
			err = manifest__read(&file, mpath);
			if (err)
				log__warn("ignoring manifest '%s': %s", mpath, strerror(-err));
			else
				v.have_manifest = true;
		} else if (o.manifest) {
			log__warn("no manifest '%s'", o.manifest);
		}
	}
	if (v.have_manifest)
		merge_manifest(&m, &file);
	v.m = &m;
	v.stats = &st;
	v.acct = acct;
	v.artifact = o.artifact;
	v.decode_error = decode_error;
	v.events_read = nread;

	out = o.output ? out_open(o.output) : stdout;
	if (!out) {
		log__error("cannot create '%s': %s", o.output, strerror(errno));
		goto cleanup;
	}
	if (o.json) {
		json_t *doc = report__json(&v, tl);

		if (!doc) {
			log__error("out of memory");
			goto cleanup;
		}
		err = json_dumpf(doc, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER) ? -EIO : 0;
		fputc('\n', out);
		json_decref(doc);
	} else {
		err = report__summary_view(out, &v);
	}
	n = out_close(out, o.output ? o.output : "stdout");
	out = NULL;
	if (n || err)
		goto cleanup;
	if (o.svg && write_export(o.svg, report__svg, &v, tl))
		goto cleanup;
	if (o.perfetto && write_export(o.perfetto, report__perfetto, &v, trace))
		goto cleanup;
	if (decode_error) {
		log__error("'%s': %s: reported the %llu events before it", o.artifact, decode_error,
			   (unsigned long long)nread);
		goto cleanup;
	}
	ret = MT_EXIT_OK;
cleanup:
	if (out && out != stdout)
		fclose(out); /* an error is already being reported */
	artifact_reader__free(rd);
	heap_acct__free(acct);
	timeline__free(tl);
	timeline__free(trace);
	free(m.procs);
	manifest__free(&file);
	free(mpath);
	free(decode_error);
	return ret;
}
