/* SPDX-License-Identifier: MIT */
#ifndef MEMTRACK_CMD_REPORT_H
#define MEMTRACK_CMD_REPORT_H

/* memtrack report ARTIFACT [--json] [--svg FILE] [--perfetto FILE] [-o FILE]
 * [--manifest FILE | --no-manifest]; argv[0] is "report". Exit status: 0 ok, 1 usage,
 * 2 bad input (unreadable or truncated artifact, unwritable output). */
int cmd_report(int argc, char **argv);

#endif
