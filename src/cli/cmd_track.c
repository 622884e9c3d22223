// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cmd_track.h"
#include "cli/exit_status.h"
#include "common/log.h"
#include "report/report.h"
#include "track/preload_setup.h"

static const char track_usage[] =
	"Usage: memtrack track [OPTIONS] \"SHELL COMMAND\"\n"
	"       memtrack track [OPTIONS] -- PROGRAM [ARGS...]\n"
	"\n"
	"Run a command, follow its whole process tree and record every allocator call and the\n"
	"kernel's resident-memory counters with eBPF. A single string runs through `bash -c`;\n"
	"after `--` the program is executed directly.\n"
	"\n"
	"Options:\n"
	"  -o, --output DIR      write DIR/<pid>.MemtrackArtifact.msgpack and DIR/<pid>.memtrack.json\n"
	"                        (default: the current directory; created with its parents if\n"
	"                        missing; existing files there are never replaced)\n"
	"      --rmap            also record page-level events (rmap mode; env MEMTRACK_TRACK_RMAP=1)\n"
	"      --ring-size SIZE  BPF ring buffer size, rounded up to a power of two (default 8M;\n"
	"                        16M with --stacks)\n"
	"      --rss-step SIZE   write an Rss record when a counter moved this much (default 64K;\n"
	"                        0 = every change); peaks are always kept exactly\n"
	"      --alloc-hooks MODE  how allocator calls are caught (env MEMTRACK_ALLOC_HOOKS):\n"
	"                        auto (default): per process, an LD_PRELOAD interposer where it\n"
	"                        records glibc's, libstdc++'s and a shared jemalloc's, mimalloc's\n"
	"                        or tcmalloc's calls (in process, no cost to other processes),\n"
	"                        eBPF uprobes where it cannot (static programs, set-id programs,\n"
	"                        a cleared environment, an allocator in the executable);\n"
	"                        preload: the interposer for glibc and libstdc++, uprobes only on\n"
	"                        other allocators (a process it cannot serve goes untracked);\n"
	"                        uprobe: eBPF uprobes on every allocator library\n"
	"      --stacks          also record the call stack of every allocation (env\n"
	"                        MEMTRACK_STACKS=1) in DIR/<pid>.memtrack.stacks, for `memtrack\n"
	"                        report`; taken in process with --alloc-hooks preload (libunwind)\n"
	"      --sync-detach     detach the probes before exiting (default: a child process does\n"
	"                        it once the outputs are written, off the command's critical path)\n"
	"  -q, --quiet           no summary at the end\n"
	"  -v, --verbose         more detail on stderr (repeat for more: -vv, -vvv)\n"
	"  -h, --help            this text\n"
	"\n"
	"Exit status: the command's own; 128+N when signal N killed it; 127 when it cannot be\n"
	"executed; 123 when events were lost, or a signal after the command's exit ended the wait\n"
	"for processes still running (the artifact is incomplete); 125 when memtrack itself\n"
	"failed; 2 on a usage error (nothing run). Signals INT, TERM, HUP and QUIT sent to memtrack\n"
	"are forwarded to the command.\n"
	"Under sudo the command runs as the invoking user.\n";

/* "32M", "64K", "1G", "4096" -> bytes */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

static bool env_flag(const char *name, bool *val)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return false;
	*val = strcmp(v, "0") && strcasecmp(v, "false") && strcasecmp(v, "no");
	return true;
}

int cmd_track__parse(int argc, char **argv, struct tracker_opts *o, char *shell_argv[4])
{
	enum { OPT_RMAP = 256, OPT_NO_RMAP, OPT_RING_SIZE, OPT_RSS_STEP, OPT_SYNC_DETACH,
	       OPT_ALLOC_HOOKS, OPT_STACKS, OPT_NO_STACKS };
	static const struct option longopts[] = {
		{"output", required_argument, NULL, 'o'},
		{"rmap", no_argument, NULL, OPT_RMAP},
		{"no-rmap", no_argument, NULL, OPT_NO_RMAP},
		{"ring-size", required_argument, NULL, OPT_RING_SIZE},
		{"rss-step", required_argument, NULL, OPT_RSS_STEP},
		{"sync-detach", no_argument, NULL, OPT_SYNC_DETACH},
		{"alloc-hooks", required_argument, NULL, OPT_ALLOC_HOOKS},
		{"stacks", no_argument, NULL, OPT_STACKS},
		{"no-stacks", no_argument, NULL, OPT_NO_STACKS},
		{"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *hooks = getenv("MEMTRACK_ALLOC_HOOKS");
	enum alloc_hooks mode = ALLOC_HOOKS_AUTO;
	int c, rmap_flag = -1, stacks_flag = -1;
	bool ring_given = false;
	uint64_t v;

	memset(o, 0, sizeof(*o));
	o->outdir = ".";
	/* 8 MiB: ~200k records, 8x what the heaviest storm here needed (1 MiB lost nothing); each
	 * doubling costs ~2 ms of start-up (map creation, mmap, exit) */
	o->ring_bytes = 8 << 20;
	o->rss_step = 64 << 10;
	optind = 0; /* full re-initialisation: the parser may run more than once (tests) */
	/* '+': stop at the first non-option, so the command's own options stay its own */
	while ((c = getopt_long(argc, argv, "+o:qvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			o->outdir = optarg;
			break;
		case OPT_RMAP:
		case OPT_NO_RMAP:
			rmap_flag = c == OPT_RMAP;
			break;
		case OPT_RING_SIZE:
			if (parse_size(optarg, &v) || v < 4096 || v > (1ull << 32)) {
				log__error("invalid --ring-size '%s': use 4K to 4G, e.g. 64M", optarg);
				return -EINVAL;
			}
			o->ring_bytes = 4096;
			while (o->ring_bytes < v)
				o->ring_bytes <<= 1;
			ring_given = true;
			break;
		case OPT_RSS_STEP:
			if (parse_size(optarg, &v) || v > (1ull << 40)) {
				log__error("invalid --rss-step '%s': a size such as 0, 4K, 1M", optarg);
				return -EINVAL;
			}
			o->rss_step = (int64_t)v;
			break;
		case OPT_SYNC_DETACH:
			o->sync_detach = true;
			break;
		case OPT_ALLOC_HOOKS:
			hooks = optarg;
			break;
		case OPT_STACKS:
		case OPT_NO_STACKS:
			stacks_flag = c == OPT_STACKS;
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			log__level++;
			break;
		case 'h':
			fputs(track_usage, stdout);
			return 1;
		default:
			fprintf(stderr, "Try 'memtrack track --help'.\n");
			return -EINVAL;
		}
	}
	if (o->quiet)
		log__level = LOG_QUIET;
	if (hooks && *hooks && preload_setup__parse(hooks, &mode)) {
		log__error("invalid --alloc-hooks '%s': use auto, preload or uprobe", hooks);
		return -EINVAL;
	}
	o->alloc_hooks = mode;
	/* The flag wins over the environment; ours over codspeed-memtrack's names. */
	if (rmap_flag >= 0)
		o->rmap = rmap_flag;
	else if (!env_flag("MEMTRACK_TRACK_RMAP", &o->rmap) &&
		 !env_flag("CODSPEED_MEMTRACK_TRACK_RMAP", &o->rmap))
		env_flag("CODSPEED_MEMTRACK_TRACK_PHYSICAL", &o->rmap);
	if (stacks_flag >= 0)
		o->stacks = stacks_flag;
	else
		env_flag("MEMTRACK_STACKS", &o->stacks);
	/* uprobe stacks make allocation records ~1-16 KiB (events.h); the BPF side keeps half the
	 * ring for records without one. 16 MiB lost no stack on the sqlite3 row (64 MiB costs
	 * memtrack 48 MiB more RSS once the ring has gone round) */
	if (o->stacks && !ring_given)
		o->ring_bytes = 16 << 20;

	if (optind >= argc) {
		log__error("no command given. Usage: memtrack track \"CMD\" or memtrack track -- "
			   "PROG ARGS");
		return -EINVAL;
	}
	/* getopt_long consumed a "--"; a lone string without it is a shell command */
	if (!strcmp(argv[optind - 1], "--")) {
		o->argv = &argv[optind];
	} else {
		if (optind + 1 != argc) {
			log__error("a shell command is one argument: quote it (memtrack track "
				   "\"%s ...\"), or use -- to run a program with arguments",
				   argv[optind]);
			return -EINVAL;
		}
		o->command = argv[optind];
		shell_argv[0] = "bash";
		shell_argv[1] = "-c";
		shell_argv[2] = argv[optind];
		shell_argv[3] = NULL;
		o->argv = shell_argv;
	}
	return 0;
}

int cmd_track(int argc, char **argv)
{
	struct tracker_opts o;
	char *shell_argv[4];
	int err = cmd_track__parse(argc, argv, &o, shell_argv);

	if (err)
		return err > 0 ? MT_EXIT_OK : MT_EXIT_USAGE;
	o.summary = report__summary;
	return tracker__run(&o);
}
