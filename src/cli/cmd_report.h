/* SPDX-License-Identifier: MIT */
#ifndef MEMTRACK_CMD_REPORT_H
#define MEMTRACK_CMD_REPORT_H

/* memtrack report ARTIFACT [--json] [--svg FILE]; exit 0 ok, 1 usage, 2 bad input */
int cmd_report(int argc, char **argv);

#endif
