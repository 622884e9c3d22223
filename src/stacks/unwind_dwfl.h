/* SPDX-License-Identifier: MIT */
/*
 * Unwinding the user stacks the BPF side copies (--stacks in the uprobe path, events.h's struct
 * mt_ustack) with elfutils' libdwfl, from the call-frame information (.eh_frame), as perf does
 * for --call-graph dwarf: correct without frame pointers. One Dwfl per process image, its modules
 * from /proc/PID/maps as read while the process was stopped in that image (at its first
 * allocation with a stack and after each dlopen: unwind_dwfl__refresh), or inherited at fork;
 * the stacks are unwound later, when the process may have exec'd or exited. Only a process no
 * stop read has its maps read when its first stack comes (and again when an address falls
 * outside every module). Memory reads come from the copied slice only.
 *
 * Frames come out resolved as stackfile.h wants them: leaf first, each a return address as
 * (module, ELF vaddr); the first is in the function that called the allocator.
 */
#ifndef MEMTRACK_UNWIND_DWFL_H
#define MEMTRACK_UNWIND_DWFL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "bpf/events.h"
#include "stacks/stackfile.h"

/* An ELF object frames are in, as one process mapped it (one per process and file). */
struct unwind_module {
	char *path;    /* as /proc/PID/maps named it */
	uint64_t bias; /* load address - ELF vaddr */
	uint8_t build_id[20];
	uint8_t build_id_len;
	uint32_t id; /* the caller's, e.g. the stack sink's module id; 0 until it sets one */
};

struct unwind_frame {
	struct unwind_module *mod; /* NULL: outside every known module (vaddr is absolute) */
	uint64_t vaddr;		   /* return address, in mod's ELF address space */
};

struct unwind_result {
	uint32_t nr;
	bool truncated; /* the copied slice ended, or STACKFILE_MAX_FRAMES, before the root */
	/* The caller's id for these frames (e.g. the stack sink's), kept with the remembered
	 * unwind they came from or went into: 0 until the caller sets it, then handed back with
	 * every stack that unwinds the same way (no need to intern the frames again). NULL when
	 * not remembered. Valid until the next unwind. */
	uint32_t *id;
	struct unwind_frame frames[STACKFILE_MAX_FRAMES];
};

struct unwind_stats {
	uint64_t stacks;    /* asked for */
	uint64_t failed;    /* no frame at all: no maps (process gone before its first stack),
			     * ip outside every module, or no CFI for it */
	uint64_t truncated; /* unwound in part */
	uint64_t frames;
	uint64_t remembered; /* served by a remembered unwind of the same place (no walk) */
	uint64_t fast;	     /* walked with cached CFI rules (unwind_step.h), not by libdwfl */
	uint64_t maps_reads;
};

struct unwind_dwfl;

int unwind_dwfl__new(struct unwind_dwfl **u);
/* Unwinds one stack of process pid (thread tid): us and the us->size bytes after it. Returns 0
 * (res filled, res->nr >= 1), or -errno when not even the first frame was found. */
int unwind_dwfl__unwind(struct unwind_dwfl *u, pid_t pid, pid_t tid, const struct mt_ustack *us,
			const uint8_t *stack, struct unwind_result *res);
/* Reads pid's maps now (it is stopped: at its image's first allocation with a stack, or after a
 * dlopen): this image's later stacks use them, even when pid has exec'd or exited by the time
 * they are unwound. */
void unwind_dwfl__refresh(struct unwind_dwfl *u, pid_t pid);
/* pid forked child: until child's own maps are read, it is unwound with the parent's. */
void unwind_dwfl__fork(struct unwind_dwfl *u, pid_t parent, pid_t child);
/* pid exec'd: the maps read before are another image's. */
void unwind_dwfl__exec(struct unwind_dwfl *u, pid_t pid);
/* Walks every stack with libdwfl, not with the cached rules first (tests compare the two). */
void unwind_dwfl__libdwfl_only(struct unwind_dwfl *u, bool on);
const struct unwind_stats *unwind_dwfl__stats(const struct unwind_dwfl *u);
void unwind_dwfl__free(struct unwind_dwfl *u); /* NULL-safe */

#endif
