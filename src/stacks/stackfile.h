/* SPDX-License-Identifier: MIT */
/*
 * `<root_pid>.memtrack.stacks`: the allocation call stacks of a run (memtrack track --stacks),
 * beside the artifact, which stays byte-compatible with codspeed-memtrack's. Format: see
 * docs/stacks.md (version STACKFILE_VERSION). Capture writes it (the tracker's stack sink);
 * `memtrack report` reads it and symbolises. Frames are stored resolved: (module, vaddr), where
 * vaddr is an address in the module's ELF virtual address space (load bias removed), so equal
 * stacks of different processes (ASLR) are one stack, and symbolising needs only the module's
 * file or its build-id, possibly on another machine.
 *
 * Ids: modules and stacks are numbered from 1 in the order written; 0 means "none" (an
 * allocation without a stack, a frame outside any known module). Every frame is a return
 * address (the allocator itself is not part of a stack): to find its line, look up vaddr - 1.
 */
#ifndef MEMTRACK_STACKFILE_H
#define MEMTRACK_STACKFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STACKFILE_SUFFIX ".memtrack.stacks"
#define STACKFILE_VERSION 1
#define STACKFILE_MAX_FRAMES 128 /* deeper stacks are cut at the root end (truncated flag) */

struct stack_module {
	uint32_t id;
	char *path; /* as the process saw it */
	uint8_t build_id[20]; /* GNU build-id, build_id_len bytes; 0 when the file has none */
	uint8_t build_id_len;
};

struct stack_frame {
	uint32_t module; /* id, 0 = unknown (vaddr is then the absolute address) */
	uint64_t vaddr;
};

struct stack_trace {
	uint32_t id;
	uint32_t nr; /* frames, leaf (the allocator's caller) first */
	bool truncated; /* deeper than STACKFILE_MAX_FRAMES or the unwinder stopped early */
	struct stack_frame *frames;
};

/* Where a module was mapped in a process (informational: frames are already resolved). */
struct stack_load {
	int32_t pid;
	uint32_t module;
	uint64_t bias; /* load address - ELF vaddr */
};

/* --- writing (the tracker) ------------------------------------------------------------------ */
struct stackfile_writer;

/* fd: the open, empty output file (outdir.c creates it); taken over. unwinder: how stacks were
 * taken, per event path, e.g. {"preload": "libunwind", "uprobe": "dwarf"} as "k=v,k=v". */
int stackfile_writer__open(struct stackfile_writer **w, int fd, const char *artifact_name,
			   const char *unwinder);
/* Interning: the same (path, build-id) gives the same id. */
int stackfile_writer__module(struct stackfile_writer *w, const char *path, const uint8_t *build_id,
			     size_t build_id_len, uint32_t *id);
int stackfile_writer__load(struct stackfile_writer *w, const struct stack_load *l);
/* Interning: the same frames (and truncated flag) give the same id. */
int stackfile_writer__stack(struct stackfile_writer *w, const struct stack_frame *frames,
			    uint32_t nr, bool truncated, uint32_t *id);
/* The stack of the next allocation record of the artifact, in artifact order (Malloc, Calloc,
 * Realloc, AlignedAlloc, failed calls included: one per record); 0 = none. */
int stackfile_writer__alloc(struct stackfile_writer *w, uint32_t stack_id);
/* Flushes and closes; frees w (NULL-safe). Returns the first error met, 0 or -errno. */
int stackfile_writer__close(struct stackfile_writer *w);

/* --- reading (memtrack report) -------------------------------------------------------------- */
struct stackfile {
	uint32_t version;
	char *artifact; /* the artifact it belongs to (file name) */
	char *unwinder;
	struct stack_module *modules; /* modules[i].id == i + 1 */
	uint32_t nr_modules;
	struct stack_trace *stacks; /* stacks[i].id == i + 1 */
	uint32_t nr_stacks;
	struct stack_load *loads;
	uint32_t nr_loads;
	uint32_t *allocs; /* stack id of the k-th allocation record of the artifact */
	uint64_t nr_allocs;
};

/* Reads a whole file; -EPROTO (and a message on stderr) when it is not one, -ENOTSUP when its
 * version is newer than this build's. */
int stackfile__read(const char *path, struct stackfile *sf);
void stackfile__free(struct stackfile *sf); /* NULL-safe; frees what sf points to */

static inline const struct stack_trace *stackfile__stack(const struct stackfile *sf, uint32_t id)
{
	return id && id <= sf->nr_stacks ? &sf->stacks[id - 1] : NULL;
}

static inline const struct stack_module *stackfile__module(const struct stackfile *sf, uint32_t id)
{
	return id && id <= sf->nr_modules ? &sf->modules[id - 1] : NULL;
}

#endif
