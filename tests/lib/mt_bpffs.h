/* SPDX-License-Identifier: MIT */
/*
 * A private folder of the BPF filesystem for the tests of the programs memtrack keeps between
 * runs (src/track/prog_cache.h) and the links it hands over (src/track/detacher.h).
 */
#ifndef MT_BPFFS_H
#define MT_BPFFS_H

#include <stdbool.h>
#include <stddef.h>
#include "track/attach.h"

/*
 * As memtrack would, mounts a bpffs on /sys/fs/bpf when none is there; then names the folder
 * /sys/fs/bpf/NAME-<pid> into root and $MEMTRACK_BPFFS (not made: memtrack makes it). Returns
 * whether a bpffs is there. Call as root.
 */
bool mt_bpffs_root(char *root, size_t cap, const char *name);

/* Skip (cmocka), saying why, unless root and a bpffs (have: mt_bpffs_root's answer). */
#define MT_REQUIRE_BPFFS(have)                                                                     \
	do {                                                                                       \
		MT_REQUIRE_ROOT();                                                                 \
		if (!(have)) {                                                                     \
			print_message(                                                             \
			    "[ SKIP     ] no BPF filesystem on /sys/fs/bpf, and mounting "         \
			    "one was refused: runs keep nothing here\n");                          \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

/* ... and runs keep programs and hand links over: uprobe_multi links (6.6+), with which alone
 * kept programs attach. */
#define MT_REQUIRE_KEEPING(have)                                                                   \
	do {                                                                                       \
		MT_REQUIRE_BPFFS(have);                                                            \
		if (!attach__probe_uprobe_multi()) {                                               \
			print_message("[ SKIP     ] this kernel has no uprobe_multi links: runs "  \
				      "keep no programs and hand no links over\n");                \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

#endif
