/* SPDX-License-Identifier: MIT */
/*
 * Accounting over an event stream, the same code live (memtrack track) and offline
 * (memtrack report): live heap per process and tree (addr -> size), RSS per process and member,
 * peaks, counts, leaks. Feed it events in timestamp order per process.
 */
#ifndef MEMTRACK_HEAP_H
#define MEMTRACK_HEAP_H

#include <stdint.h>
#include "bpf/events.h"
#include "artifact/manifest.h"

struct heap_acct;

int heap_acct__new(struct heap_acct **a);
void heap_acct__free(struct heap_acct *a);
/* Updates the accounting with one artifact event (control records are ignored). */
void heap_acct__event(struct heap_acct *a, const struct mt_event *ev);
/* Fills the results part of the manifest: peak_heap, peak_rss, allocs, frees, leaked_*,
 * counts[], events_total and procs[] (allocated; manifest__free releases them). */
int heap_acct__fill(const struct heap_acct *a, struct manifest *m);

#endif
