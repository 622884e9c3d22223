/* SPDX-License-Identifier: MIT */
/* `memtrack report`'s command line: its options and their checks (cmd_report_opts.c). */
#ifndef MEMTRACK_CMD_REPORT_OPTS_H
#define MEMTRACK_CMD_REPORT_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include "acct/sites.h"

struct report_opts {
	bool json, no_manifest, window;
	const char *svg, *perfetto, *output, *manifest, *artifact;
	char *found; /* the artifact found in a folder given as ARTIFACT (outdir__find_artifact) */
	/* allocation stacks */
	uint32_t top;
	const char *folded, *flamegraph, *pprof, *stacks, *debug_dir;
	enum site_root root;
};

/* Parses argv (argv[0] is "report") into o, zeroed by the caller: 0, 1 after --help (printed),
 * or -EINVAL after saying why. o->found is the caller's to free, whatever the outcome. */
int cmd_report__parse(int argc, char **argv, struct report_opts *o);
/* An option that needs the stacks file. */
bool cmd_report__want_stacks(const struct report_opts *o);

#endif
