/* SPDX-License-Identifier: MIT */
/*
 * The allocation sites of a run, symbolised: what the stack outputs (top sites, folded stacks,
 * flame graph, pprof) are written from. Built from src/acct/sites.h's figures, the stacks file
 * and the symbolizer; the writers take only this model, so their tests give it by hand.
 */
#ifndef MEMTRACK_REPORT_PROFILE_H
#define MEMTRACK_REPORT_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <jansson.h>
#include "acct/sites.h"
#include "artifact/manifest.h"
#include "stacks/stackfile.h"
#include "symbols/symbols.h"

struct prof_sample {
	const struct sym_loc *const *locs; /* leaf (the allocator's caller) first */
	uint32_t nr_locs;
	uint32_t leaf_skip;  /* innermost functions of locs[0] not shown: allocator wrappers
			      * inlined into the caller (ld.so's malloc) */
	const char *root[2]; /* root frames (process, thread), outermost first */
	uint32_t nr_root;
	bool truncated; /* the stack was cut at its root end: shown as a `[truncated]` frame */
	uint32_t stack; /* stack id, 0: none (shown as a `[no stack]` frame) */
	uint64_t alloc_count, alloc_bytes; /* over the run */
	uint64_t inuse_count, inuse_bytes; /* live at the tree's heap peak */
	uint64_t leak_count, leak_bytes;   /* live at exit */
	uint64_t temp_count, temp_bytes;   /* temporary (sites.h) */
};

struct profile {
	const struct stack_module *modules; /* modules[i].id == i + 1 */
	uint32_t nr_modules;
	const struct prof_sample *samples;
	uint32_t nr_samples;
	uint64_t time_nanos; /* start, Unix ns; 0 unknown */
	uint64_t duration_nanos;
	uint64_t peak_heap; /* the tree's heap peak, bytes (titles, percentages) */
	/* per module (index id - 1): where its symbols came from (symbolizer__module_source),
	 * NULL when not known */
	const char *const *module_source;
};

/* A profile built from sites; owns what it points to except modules (sf's) and the locs
 * (sym's: keep it alive while the profile is used). */
struct profile_build {
	struct profile p;
	struct prof_sample *samples;
	const struct sym_loc **locs; /* all samples' locs, one array */
	char **names;		     /* root frame strings */
	uint32_t nr_names;
	const char **module_source;
};

/* m: names of processes (procs[].comm), may be NULL. 0 or -ENOMEM. */
int profile__build(struct profile_build *b, const struct stackfile *sf, const struct site *sites,
		   uint32_t nr_sites, struct symbolizer *sym, const struct manifest *m);
void profile__free(struct profile_build *b);

/* The frame names of a sample, root first, inlined functions as frames of their own, into *buf
 * (grown as needed, *cap entries; the caller frees it): their number, or -ENOMEM. */
uint32_t profile__depth(const struct prof_sample *s);
int64_t profile__frames(const struct prof_sample *s, const char ***buf, uint32_t *cap);

/* Folded stacks: `root;...;leaf BYTES` per sample with bytes allocated over the run. */
int report__folded(FILE *out, const struct profile *p);
/* profile.proto, uncompressed, into a malloc'd buffer; and gzipped into out. 0 or -errno. */
int report__pprof_encode(const struct profile *p, uint8_t **buf, size_t *len);
int report__pprof(FILE *out, const struct profile *p);
/* A self-contained SVG flame graph of bytes allocated over the run. 0 or -errno. */
int report__flamegraph(FILE *out, const struct profile *p, const char *title);
/* The top-N tables, as text and as the JSON document's "stacks" value. */
int report__stacks_summary(FILE *out, const struct profile *p, uint32_t top);
json_t *report__stacks_json(const struct profile *p, uint32_t top);

#endif
