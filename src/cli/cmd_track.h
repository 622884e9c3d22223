/* SPDX-License-Identifier: MIT */
#ifndef MEMTRACK_CMD_TRACK_H
#define MEMTRACK_CMD_TRACK_H

#include "track/tracker.h"

/* Parses `track` options into o (argv[0] == "track"). Returns 0 to run, 1 when --help was
 * printed, -EINVAL on a usage error (already reported). */
int cmd_track__parse(int argc, char **argv, struct tracker_opts *o, char *shell_argv[4]);
int cmd_track(int argc, char **argv);

#endif
