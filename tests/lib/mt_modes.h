/* SPDX-License-Identifier: MIT */
/*
 * Comparing the heap events of two runs of the same command under different --alloc-hooks
 * modes: per process, a sorted multiset of (type, size, old_addr present or not); pids differ
 * between runs, so the per-process multisets are compared as a sorted list. No cmocka here.
 */
#ifndef MT_TEST_MODES_H
#define MT_TEST_MODES_H
#include <stdbool.h>
#include <stddef.h>
#include "mt_harness.h"

/* Per process, its sorted heap events as a string: "type:size:old,..." (n events) */
struct mt_proc_ms {
	char *s;
	size_t n;
};

/* Which of r's events (by index) to count; NULL counts every heap event. */
typedef bool (*mt_modes_keep_fn)(const struct mt_run *r, size_t i, void *ctx);

/* The multisets of r's processes, sorted; frees of blocks the run never saw allocated are left
 * out (glibc's internal ones at thread exit, which a uprobe on free sees and an interposer
 * does not). Returns how many. */
size_t mt_modes_per_process(const struct mt_run *r, mt_modes_keep_fn keep, void *ctx,
			    struct mt_proc_ms **out);
/* Equal, but for the one difference the interposer's presence makes by construction (its TLS:
 * each new thread's DTV calloc is 16 bytes larger). */
bool mt_modes_same(const char *uprobe, const char *preload);
void mt_modes_free(struct mt_proc_ms *v, size_t n);
#endif
