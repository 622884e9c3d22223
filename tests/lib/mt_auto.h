/* SPDX-License-Identifier: MIT */
/*
 * The --alloc-hooks auto root tests' common checks (test_track_auto.c: who serves each process;
 * test_track_auto_reach.c: the processes the interposer cannot reach): runs of a shell command
 * in each mode, and the manifest's account of which mechanism served which process.
 */
#ifndef MT_TEST_AUTO_H
#define MT_TEST_AUTO_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "mt_harness.h"

extern const char *const mt_hooks_uprobe[];
extern const char *const mt_hooks_preload[];
extern const char *const mt_hooks_auto[];

/* The manifest's process entry of pid, NULL if none; its comm; its family's mechanism. */
json_t *mt_auto_proc_of(const struct mt_run *r, int32_t pid);
const char *mt_auto_comm_of(const struct mt_run *r, int32_t pid);
const char *mt_auto_hooks_of(const struct mt_run *r, int32_t pid, const char *family);
/* Keeps the heap events of a process's last image whose name is one of ctx's (NULL-ended). */
bool mt_auto_keep_targets(const struct mt_run *r, size_t i, void *ctx);
/* The processes named in names (NULL-ended): want_procs of them in each run, each with the
 * same heap events in uprobe run u and auto run a (mt_modes_same). */
void mt_auto_same_events(struct mt_run *u, struct mt_run *a, const char *const *names,
			 size_t want_procs);
/* Processes named comm whose family's mechanism (manifest) is want; count_hooks: libc's. */
size_t mt_auto_count_family(const struct mt_run *r, const char *comm, const char *family,
			    const char *want);
size_t mt_auto_count_hooks(const struct mt_run *r, const char *comm, const char *want);
/* Processes named comm: want_preload served by the interposer, want_uprobe by uprobes. */
void mt_auto_check_split(struct mt_run *r, const char *comm, size_t want_preload,
			 size_t want_uprobe);
/* The idle interposer of a uprobe-mode run is never probed as an allocator (mt_auto.c). */
void mt_auto_check_unprobed(struct mt_run *r);
/* Runs shell under memtrack with opts, exit 0, one artifact; the uprobe-mode reference with
 * the interposer loaded idle (the same environment, two variables more). */
void mt_auto_run_ok(struct mt_run *r, const char *const *opts, const char *shell);
/* The uprobe_multi links memtrack held, as build/targets/uprobe_links dumped them to file. */
char *mt_auto_links_of(const char *file);
/* Nothing attached to any library in auto run a but the interposer's control points (want:
 * their line). False when this kernel has no uprobe_multi links. */
bool mt_auto_only_control_points(struct mt_run *a, const char *links, char *want, size_t cap);

#endif
