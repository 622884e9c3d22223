/* SPDX-License-Identifier: MIT */
/*
 * Synthetic record streams for memtrack-bench-consumer: what the BPF side would put in the ring
 * for P processes of T threads each running an allocator-heavy workload. Deterministic for a
 * seed. The mix (per heap call): malloc 88%, calloc 5%, realloc 5% (a third in place),
 * aligned 2%; sizes 16..128 B 70%, ..1 KiB 20%, ..16 KiB 9%, ..256 KiB 1%; each thread keeps
 * about `live` blocks live and frees at random among them; freed addresses are reused LIFO per
 * size class as glibc's tcache does; ~0.2% Rss records; Fork/Exec first, Exit last.
 */
#ifndef MEMTRACK_BENCH_SYNTH_H
#define MEMTRACK_BENCH_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include "bpf/events.h"

struct synth_opts {
	size_t events;	  /* records to generate (at least 3 per process) */
	unsigned procs;	  /* processes, >= 1 */
	unsigned threads; /* per process, >= 1 */
	unsigned live;	  /* blocks each thread keeps live in steady state */
	uint64_t seed;
};

/* Fills *out (malloc'd, caller frees) with exactly o->events records. 0 or -errno. */
int synth__generate(const struct synth_opts *o, struct mt_event **out);

#endif
