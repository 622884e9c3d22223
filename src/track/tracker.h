/* SPDX-License-Identifier: MIT */
/* `memtrack track`: load, attach, run the command, drain, write artifact and manifest. */
#ifndef MEMTRACK_TRACKER_H
#define MEMTRACK_TRACKER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* memtrack's own exit codes; anything else is the command's. */
#define MT_EXIT_LOST   123 /* the run completed but events were lost: the artifact is incomplete */
#define MT_EXIT_FAILED 125 /* memtrack could not track (set-up, BPF, output) */
#define MT_EXIT_NOEXEC 127 /* the command could not be executed */

struct manifest;

struct tracker_opts {
	char **argv; /* what to exec: {"bash", "-c", CMD, NULL} or PROG ARGS */
	const char *command; /* the shell string, NULL with -- */
	const char *outdir;
	bool rmap;
	bool quiet;
	bool sync_detach; /* detach in the foreground (default: in a child, after our outputs) */
	uint64_t ring_bytes; /* power of two */
	int64_t rss_step; /* bytes between Rss records; 0 = every change */
	/* prints the end-of-run summary unless quiet (report__summary); NULL: none. The caller
	 * wires it: the tracker knows nothing of the report module. */
	int (*summary)(FILE *out, const struct manifest *m);
	int alloc_hooks; /* enum alloc_hooks (preload_setup.h) */
	bool stacks; /* --stacks: <pid>.memtrack.stacks (tracker_stacks.c) */
};

/* Returns the exit status memtrack should exit with. */
int tracker__run(const struct tracker_opts *o);

#endif
