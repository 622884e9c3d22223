/* SPDX-License-Identifier: MIT */
/*
 * The measured window (include/memtrack.h) in the accounting: MEMTRACK_START() and
 * MEMTRACK_STOP() records (MT_EV_MARKER) open and close it, per process.
 *
 * Semantics (bytes; exact at record granularity):
 * - A block is a window block when its process' window was open when it was allocated (a
 *   Realloc's new block included). It stays one until it is freed, wherever that happens.
 * - window live = the bytes of window blocks live now, tree-wide; window peak heap = the
 *   maximum of window live. Frees of blocks from before the window change neither.
 * - Per process: START opens the process' window (a START while open is counted, nothing
 *   else), STOP closes it (a STOP while closed is counted as unmatched). Several START/STOP
 *   pairs make one window: their union. A block left live by one pair still counts in the next.
 * - A forked child starts with its parent's state (it runs on inside the window); exec keeps
 *   the state (`START; system("cmd"); STOP` measures cmd); Exit closes it. Window blocks of an
 *   image that exits are the window's leak (live_bytes at the end includes them); at exec they
 *   leave the live sum like every block of the old image.
 * - Several processes: the window's figures are tree-wide sums over their open windows.
 * - A run without any START has no window (window.present false): it is measured whole.
 * Markers (START, STOP, MARK) are kept in order, with the tree's live heap and the window's
 * live bytes at that point; past ACCT_MARKERS_MAX only counted.
 */
#ifndef MEMTRACK_ACCT_WINDOW_H
#define MEMTRACK_ACCT_WINDOW_H

#include <stdbool.h>
#include <stdint.h>
#include "acct/blocks.h"
#include "artifact/manifest.h"

#define ACCT_MARKERS_MAX 4096
#define ACCT_NAME_SLOTS	 8 /* threads with a name in assembly at once (parts, then marker) */

struct acct_name_slot {
	int32_t tid; /* 0: free */
	char name[MT_MARK_NAME_MAX + 1 + MT_MARK_NAME_PART];
};

struct acct_window {
	struct blocks blocks;			 /* window blocks: (addr, image) -> size */
	bool present;				 /* a START was seen */
	uint32_t open;				 /* processes whose window is open now */
	unsigned __int128 live, peak, allocated; /* bytes */
	uint64_t live_count, allocs, frees;
	unsigned __int128 exited_bytes; /* window blocks live when their process exited */
	uint64_t exited_count;
	uint64_t starts, stops, extra_starts, unmatched_stops;
	uint64_t open_since, open_ns; /* ts when open became nonzero; total ns open */
	struct manifest_marker *marks;
	uint32_t nr_marks, marks_cap;
	uint64_t marks_dropped;
	struct acct_name_slot names[ACCT_NAME_SLOTS];
};

#endif
