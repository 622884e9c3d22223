// SPDX-License-Identifier: MIT
/* `memtrack report`'s command line: its usage text, its options, their checks. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "artifact/outdir.h"
#include "cli/cmd_report_opts.h"
#include "common/log.h"

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

bool cmd_report__want_stacks(const struct report_opts *o)
{
	return o->top || o->folded || o->flamegraph || o->pprof;
}

int cmd_report__parse(int argc, char **argv, struct report_opts *o)
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
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_SVG:
			o->svg = optarg;
			break;
		case OPT_PERFETTO:
			o->perfetto = optarg;
			break;
		case 'o':
			o->output = optarg;
			break;
		case OPT_MANIFEST:
			o->manifest = optarg;
			break;
		case OPT_NO_MANIFEST:
			o->no_manifest = true;
			break;
		case OPT_WINDOW:
			o->window = true;
			break;
		case OPT_TOP:
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 1 || v > 100000) {
				log__error(
				    "--top takes a number of sites from 1 to 100000, not '%s'",
				    optarg);
				return -EINVAL;
			}
			o->top = (uint32_t)v;
			break;
		case OPT_FOLDED:
			o->folded = optarg;
			break;
		case OPT_FLAMEGRAPH:
			o->flamegraph = optarg;
			break;
		case OPT_PPROF:
			o->pprof = optarg;
			break;
		case OPT_STACKS:
			o->stacks = optarg;
			break;
		case OPT_DEBUG_DIR:
			o->debug_dir = optarg;
			break;
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
	if (!cmd_report__want_stacks(o) && (o->root || o->stacks || o->debug_dir)) {
		log__error("--root, --stacks and --debug-dir go with --top, --folded, --flamegraph "
			   "or --pprof");
		return -EINVAL;
	}
	return 0;
}
