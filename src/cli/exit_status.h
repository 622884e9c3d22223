/* SPDX-License-Identifier: MIT */
/*
 * Exit statuses memtrack gives for its own reasons, the same in every command, and as in
 * memtrack-bench: 0 success; 2 usage error (a bad option or argument: nothing was run or read).
 * `track` otherwise exits with the command's status, or 123/125/127 (track/tracker.h);
 * `report` also exits 2 when its input is bad or an output cannot be written; `unload` 1 when
 * it cannot read the kept programs' folder.
 */
#ifndef MEMTRACK_EXIT_STATUS_H
#define MEMTRACK_EXIT_STATUS_H

#define MT_EXIT_OK	  0
#define MT_EXIT_USAGE	  2 /* every command */
#define MT_EXIT_BAD_INPUT 2 /* report: the same "could not answer" as memtrack-bench's */

#endif
