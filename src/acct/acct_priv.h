/* SPDX-License-Identifier: MIT */
/* The accounting's state, shared by acct.c (heap, RSS, processes) and window.c (the measured
 * window and the markers). Not an API: acct.h is. */
#ifndef MEMTRACK_ACCT_PRIV_H
#define MEMTRACK_ACCT_PRIV_H

#include "acct/acct.h"
#include "acct/blocks.h"
#include "acct/window.h"

/*
 * Byte sums are 128-bit: sizes come from the artifact, and crafted ones (2^64 - 1) would wrap a
 * 64-bit sum silently ("peak heap 10 B"). They stay exact here, and what does not fit the
 * 64-bit outputs is shown as UINT64_MAX with heap_stats.saturated set.
 */
typedef unsigned __int128 u128;

static inline uint64_t sat64(u128 v)
{
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

#define PID_MIN_CAP 64
#define IMG_NONE    UINT32_MAX /* proc.img after Exit: owns no slot */
#ifndef HEAP_IMG_MAX
#define HEAP_IMG_MAX (UINT32_MAX - 1) /* image ids 0 .. HEAP_IMG_MAX - 1; tests lower it */
#endif

/* heap_acct__events (acct_batch.c): records ahead to prefetch, enough to cover a DRAM miss at
 * ~5-40 ns of work per record; below PREFETCH_MIN_BYTES a table stays in L2 and a prefetch
 * only costs its hashing. */
#define PREFETCH_AHEAD	   8
#define PREFETCH_MIN_BYTES (512 * 1024)

struct proc {
	int32_t pid, ppid;
	uint32_t img; /* current image id; older images' slots are dead; IMG_NONE after Exit */
	bool exited;
	u128 live, peak_heap; /* bytes */
	uint64_t live_count;
	uint64_t allocs, frees, execs;
	u128 leaked_bytes, lost_bytes; /* live at Exit, at Exec */
	uint64_t leaked_count, lost_count;
	uint64_t rss[MT_RSS_NR]; /* bytes, last absolute value per member */
	u128 rss_sum, peak_rss;	 /* file + anon + shmem */
	char comm[16];		 /* the kernel's name for it, NUL-terminated; "" until told */
	bool win_open;		 /* its measured window is open (window.h) */
	u128 win_live;		 /* bytes of its window blocks live now */
	uint64_t win_count;
};

struct pid_slot {
	int32_t pid;
	uint32_t idx1; /* proc index + 1; 0: empty */
};

struct heap_acct {
	struct blocks blocks;

	struct proc *procs;
	uint32_t nr_procs, procs_cap;
	uint32_t *imgs; /* image id -> proc index */
	uint32_t nr_imgs, imgs_cap;
	struct pid_slot *pids; /* pid -> current proc (the newest one with that pid) */
	uint32_t pids_cap;
	int32_t last_pid; /* one-entry cache: events come in runs of one process */
	uint32_t last_idx;
	bool last_valid;

	u128 live, peak_heap; /* tree-wide, bytes */
	u128 rss, peak_rss;   /* tree-wide, bytes: sum over live processes */
	uint64_t live_count;
	uint64_t allocs, frees;
	u128 allocated; /* bytes, sum of the sizes of every block added */
	uint64_t counts[MT_EV_TYPE_MAX], events;
	u128 lost_bytes;
	uint64_t unmatched_frees, replaced, lost_count, ignored, nomem;
	uint64_t first_ts, last_ts;
	bool warned;
	struct acct_window win; /* window.c */
	struct heap_acct_hooks hooks; /* all NULL unless heap_acct__set_hooks */
	bool hooked;
	uint32_t tag; /* of the block the current event adds */
};

/* acct.c: the process a record belongs to (-1: ignore it; other < 0: out of memory), and
 * the current process of a pid (-1 when none) */
int acct__proc_of(struct heap_acct *a, const struct mt_event *ev);
int acct__pid_lookup(const struct heap_acct *a, int32_t pid);
/* a block could not be recorded for lack of memory (counted, warned about once) */
void acct__nomem(struct heap_acct *a);

/* window.c, called by acct.c */
int window__init(struct heap_acct *a);
void window__free(struct heap_acct *a);
/* a block of p (its window open) was added */
void window__add(struct heap_acct *a, struct proc *p, uint64_t addr, uint64_t size);
/* a block of p left the heap (freed: a free, else replaced); a no-op unless a window block */
void window__remove(struct heap_acct *a, struct proc *p, uint64_t addr, bool freed);
/* p's image old_img is gone (exec, or exit): its window blocks leave the window's live sum;
 * purged: its slots were deleted rather than left dead */
void window__drop_image(struct heap_acct *a, struct proc *p, uint32_t old_img, bool purged,
			bool exit, uint64_t ts);
void window__fork(struct heap_acct *a, struct proc *child, int32_t ppid, uint64_t ts);
/* MT_EV_MARKER and MT_EV_MARKER_NAME records */
void window__record(struct heap_acct *a, const struct mt_event *ev);
int window__fill(const struct heap_acct *a, struct manifest *m);

#endif
