/* SPDX-License-Identifier: MIT */
#ifndef MEMTRACK_CMD_UNLOAD_H
#define MEMTRACK_CMD_UNLOAD_H

/* memtrack unload: frees the BPF programs and maps earlier runs kept (src/track/prog_cache.h). */
int cmd_unload(int argc, char **argv);

#endif
