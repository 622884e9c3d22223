/* SPDX-License-Identifier: MIT */
/*
 * early_links' internals, shared by early_links.c (the trampolines, the tracepoints' links, the
 * thread, a finished run's offer) and early_ctl.c (the interposer's control link: its program,
 * the child that links it, taking an offered one). Not for other modules: they use
 * early_links.h.
 */
#ifndef MEMTRACK_EARLY_PRIV_H
#define MEMTRACK_EARLY_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/bpf.h>
#include "bpf/proc.h"
#include "track/early_links.h"

/*
 * What the interposer's control link was made on, offered with it (detacher.h: "lib"): the
 * file as stat saw it before its symbols were read, and the offsets found then. A run takes
 * the link only for the same file, unchanged since (the link probes that inode at those
 * offsets: a library rewritten in place would have other code there).
 */
struct early_lib_id {
	uint64_t dev, ino, size, mtime_ns;
	uint64_t offs[MT_PRELOAD_CTL_NR];
};

/* Shared by memtrack and the control link's child (MAP_SHARED, one page). */
struct early_ctl_shared {
	uint32_t linked;    /* the link is made (by the child) or taken */
	uint32_t filled;    /* memtrack filled its slot (early_links__fill) */
	uint32_t published; /* ctl_live was set */
	int32_t err;	    /* the child's failure, -errno */
	uint64_t end_ns;    /* CLOCK_MONOTONIC when the child made it or failed */
};

/* CLOCK_MONOTONIC, ns. */
unsigned long long early__ns(void);
/* Records the first failure; returns err. */
int early__fail(struct early_links *e, int err, const char *what);
/* Closes *fd if open, and sets it to -1. */
void early__close_fd(int *fd);
/* A program that tail-calls slot `slot` of `map` (early_links.c); its fd or -errno. */
int early__trampoline(enum bpf_prog_type type, enum bpf_attach_type expected, int map, int slot,
		      int idx);

/* early_ctl.c: */
/* path as stat sees it, offsets left 0; 0 or -errno */
int early__lib_stat(const char *path, struct early_lib_id *id);
int early__ctl_prep(struct early_links *e, int idx);
void early__publish_if(struct early_ctl_shared *sh, uint32_t *live);
int early__ctl_fork(struct early_links *e);
void early__adopt_ctl(struct early_links *e, const char *dir, bool take);

#endif
