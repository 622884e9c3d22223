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
#include "cli/exit_status.h"
#include "common/log.h"
#include "acct/acct.h"
#include "acct/sites.h"
#include "report/profile.h"
#include "report/report.h"
#include "stacks/stackfile.h"
#include "symbols/symbols.h"

static const char report_usage[] =
	"NAME\n"
	"    memtrack report - summarise a memtrack artifact\n"
	"\n"
	"SYNOPSIS\n"
	"    memtrack report [--json] [--window] [--svg FILE] [--perfetto FILE] [-o FILE]\n"
	"                    [--manifest FILE | --no-manifest] [--top N] [--folded FILE]\n"
	"                    [--flamegraph FILE] [--pprof FILE] [--root process|thread]\n"
	"                    [--stacks FILE] [--debug-dir DIR] ARTIFACT|DIR\n"
	"\n"
	"DESCRIPTION\n"
	"    Decodes ARTIFACT (a <pid>.MemtrackArtifact.msgpack written by memtrack track or by\n"
	"    codspeed-memtrack) and replays its events through the accounting memtrack track\n"
	"    uses: live heap per process and for the whole process tree, RSS (file + anon +\n"
	"    shmem, swap excluded) per process and for the tree, their peaks, blocks allocated\n"
	"    and freed (a realloc that moves or resizes a block is one of each; realloc(p, 0)\n"
	"    a free), and the blocks still live when each process exited (leaks). A folder\n"
	"    (DIR) stands for the one artifact in it, as `memtrack track -o DIR` leaves it.\n"
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
	"    --window\n"
	"        Report the measured window instead (MEMTRACK_START() to MEMTRACK_STOP() of\n"
	"        <memtrack.h>): its peak heap (of blocks allocated inside and still live), its\n"
	"        allocations, and every marker with its time and heap. With --json, as JSON. The\n"
	"        window is the artifact's companion data: it comes from the manifest.\n"
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
	"\n"
	"  Allocation call stacks (of a run tracked with --stacks):\n"
	"    --top N\n"
	"        Also list the top N allocation sites (call stacks) five ways: by bytes live at\n"
	"        the tree's heap peak, by bytes and by number of allocations over the run, by\n"
	"        bytes leaked at exit, and by temporary allocations (freed by the same thread\n"
	"        as its next heap call). In the summary, and with --json as \"stacks\".\n"
	"    --folded FILE\n"
	"        Write folded stacks: per call stack a line of frames, root first, joined by ';',\n"
	"        a space and the bytes it allocated over the run (flamegraph.pl, inferno,\n"
	"        speedscope). Inlined functions are frames of their own.\n"
	"    --flamegraph FILE\n"
	"        Write a flame graph of the bytes allocated over the run as a self-contained SVG.\n"
	"    --pprof FILE\n"
	"        Write a gzipped pprof profile (go tool pprof, Pyroscope): alloc_objects and\n"
	"        alloc_space over the run, inuse_objects and inuse_space (the default) live at the\n"
	"        tree's heap peak.\n"
	"    --root process|thread\n"
	"        Give every stack a root frame naming its process (\"comm (pid N)\"), or its\n"
	"        process and thread (\"tid N\"): sites are then counted per process or thread.\n"
	"    --stacks FILE\n"
	"        Read the stacks from FILE instead of <pid>.memtrack.stacks beside ARTIFACT.\n"
	"    --debug-dir DIR\n"
	"        Look for separate debug files under DIR instead of /usr/lib/debug\n"
	"        (DIR/.build-id/xx/yyyy.debug, and .gnu_debuglink names).\n"
	"    Frames are symbolised with elfutils: the module's file if its build-id is the one\n"
	"    recorded, else DIR/.build-id/xx/yyyy.debug; functions, inlined functions and\n"
	"    file:line from DWARF when present (separate debug files via .gnu_debuglink and\n"
	"    build-id), else the ELF symbol tables, else module+0xADDR. C++ and Rust (legacy\n"
	"    and v0) names are demangled.\n"
	"\n"
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
	"    memtrack report out        (the folder `memtrack track -o out` wrote one artifact in)\n"
	"    memtrack report --json -o report.json --svg mem.svg out/1234.MemtrackArtifact.msgpack\n";

struct report_opts {
	bool json, no_manifest, window;
	const char *svg, *perfetto, *output, *manifest, *artifact;
	char *found; /* the artifact found in a folder given as ARTIFACT (outdir__find_artifact) */
	/* allocation stacks */
	uint32_t top;
	const char *folded, *flamegraph, *pprof, *stacks, *debug_dir;
	enum site_root root;
};

/* An option that needs the stacks file. */
static bool want_stacks(const struct report_opts *o)
{
	return o->top || o->folded || o->flamegraph || o->pprof;
}

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

static int parse_opts(int argc, char **argv, struct report_opts *o)
{
	struct stat st;
	enum {
		OPT_JSON = 256,
		OPT_SVG,
		OPT_PERFETTO,
		OPT_MANIFEST,
		OPT_NO_MANIFEST,
		OPT_TOP,
		OPT_FOLDED,
		OPT_FLAMEGRAPH,
		OPT_PPROF,
		OPT_ROOT,
		OPT_STACKS,
		OPT_DEBUG_DIR,
		OPT_WINDOW,
	};
	static const struct option longopts[] = {
		{"json", no_argument, NULL, OPT_JSON},
		{"svg", required_argument, NULL, OPT_SVG},
		{"perfetto", required_argument, NULL, OPT_PERFETTO},
		{"output", required_argument, NULL, 'o'},
		{"manifest", required_argument, NULL, OPT_MANIFEST},
		{"no-manifest", no_argument, NULL, OPT_NO_MANIFEST},
		{"window", no_argument, NULL, OPT_WINDOW},
		{"top", required_argument, NULL, OPT_TOP},
		{"folded", required_argument, NULL, OPT_FOLDED},
		{"flamegraph", required_argument, NULL, OPT_FLAMEGRAPH},
		{"pprof", required_argument, NULL, OPT_PPROF},
		{"root", required_argument, NULL, OPT_ROOT},
		{"stacks", required_argument, NULL, OPT_STACKS},
		{"debug-dir", required_argument, NULL, OPT_DEBUG_DIR},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char *end;
	long v;
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
		case OPT_WINDOW: o->window = true; break;
		case OPT_TOP:
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 1 || v > 100000) {
				log__error("--top takes a number of sites from 1 to 100000, not '%s'",
					   optarg);
				return -EINVAL;
			}
			o->top = (uint32_t)v;
			break;
		case OPT_FOLDED: o->folded = optarg; break;
		case OPT_FLAMEGRAPH: o->flamegraph = optarg; break;
		case OPT_PPROF: o->pprof = optarg; break;
		case OPT_STACKS: o->stacks = optarg; break;
		case OPT_DEBUG_DIR: o->debug_dir = optarg; break;
		case OPT_ROOT:
			if (!strcmp(optarg, "process")) {
				o->root = SITE_ROOT_PROCESS;
			} else if (!strcmp(optarg, "thread")) {
				o->root = SITE_ROOT_THREAD;
			} else {
				log__error("--root takes 'process' or 'thread', not '%s'", optarg);
				return -EINVAL;
			}
			break;
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
	/* `memtrack track -o DIR` then `memtrack report DIR`: the folder's one artifact */
	if (!stat(o->artifact, &st) && S_ISDIR(st.st_mode)) {
		if (outdir__find_artifact(o->artifact, &o->found))
			return -EINVAL;
		o->artifact = o->found;
	}
	if (!want_stacks(o) && (o->root || o->stacks || o->debug_dir)) {
		log__error("--root, --stacks and --debug-dir go with --top, --folded, --flamegraph "
			   "or --pprof");
		return -EINVAL;
	}
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
	if (want_stacks(o) && (err = report_load_stacks(o, in)))
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
		if (!err && !want_stacks(o))
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

	err = parse_opts(argc, argv, &o);
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
