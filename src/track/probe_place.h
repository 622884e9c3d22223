/* SPDX-License-Identifier: MIT */
/* Where an entry-only uprobe goes: past a leading instruction the kernel would single-step. */
#ifndef MEMTRACK_PROBE_PLACE_H
#define MEMTRACK_PROBE_PLACE_H

#include <stddef.h>
#include <stdint.h>
#include "track/elf_syms.h"

/* File offset for the entry probe of the function at file offset off, whose argument arg
 * (0-3: rdi, rsi, rdx, rcx) is read at the probe. off itself unless a later place is
 * provably equivalent and cheaper (probe_place.c). Only for sites without a return probe. */
uint64_t probe_place__entry(const struct elf_info *info, uint64_t off, unsigned arg);

/* The decision on raw bytes: seg is an executable segment, f the function's offset in it.
 * Returns the probe's offset in seg (f when it stays). Exposed for tests. */
size_t probe_place__in_segment(const uint8_t *seg, size_t len, size_t f, unsigned arg);

#endif
