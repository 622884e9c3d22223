/* SPDX-License-Identifier: MIT */
/* Where a site's uprobes go: past leading instructions the kernel would single-step. */
#ifndef MEMTRACK_PROBE_PLACE_H
#define MEMTRACK_PROBE_PLACE_H

#include <stddef.h>
#include <stdint.h>
#include "track/elf_syms.h"

/* File offset for the probes (entry and return) of the function at file offset off, which
 * reads the argument registers in args (bit 0 rdi, 1 rsi, 2 rdx, 3 rcx) at its entry: off
 * itself unless a later place, at most max_bytes further, is provably equivalent and cheaper
 * (probe_place.c). where[i]: the register (0-3) that holds argument i there (i itself unless
 * the skipped instructions moved it). */
uint64_t probe_place__site(const struct elf_info *info, uint64_t off, unsigned args,
			   size_t max_bytes, uint8_t where[4]);

/* The decision on raw bytes: seg is an executable segment, f the function's offset in it.
 * Returns the probe's offset in seg (f when it stays), and where (NULL: not wanted) as above.
 * Exposed for tests. */
size_t probe_place__in_segment(const uint8_t *seg, size_t len, size_t f, unsigned args,
			       size_t max_bytes, uint8_t where[4]);

#endif
