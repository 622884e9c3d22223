/* SPDX-License-Identifier: MIT */
/*
 * The interposer -> memtrack stack area (--stacks with the preload path): a second shared file,
 * created by memtrack (src/track/stack_shm.c) and named in $MEMTRACK_STACKS_SHM, which every
 * process of the tree that loads the interposer maps (src/preload/preload_stack.c).
 *
 * A process that meets a new call stack writes it here once, resolved to (module, ELF vaddr),
 * as an entry in an append-only area (space taken with one fetch-add on `used`, shared by
 * all processes), and keeps its ref in a private cache; its allocation records carry the ref
 * in `aux` (src/bpf/events.h). Refs are (byte offset in the area) / 8 + 1; 0 = none.
 *
 * Ordering: an entry is complete before its ref is published to the process's cache (release)
 * and before any record naming it is published in a ring (release of the slot's head); the
 * consumer reads the entry after it acquired that record. So no entry is read half-written,
 * whichever thread or process wrote it, and a fork child's inherited refs stay valid: the area
 * is shared and entries never change (but for sink_id, which only the consumer writes).
 *
 * Entries (8-byte aligned, len a multiple of 8):
 *   MT_STK_MODULE  struct mt_stk_module, then the path, NUL-terminated
 *   MT_STK_STACK   struct mt_stk_stack, then nr x struct mt_stk_frame, leaf (the allocator's
 *                  caller) first; frame.module is a module entry's ref (0: outside every module,
 *                  vaddr is then the absolute address)
 */
#ifndef MEMTRACK_STACK_ABI_H
#define MEMTRACK_STACK_ABI_H

#include <stdint.h>
#include "bpf/events.h"

#define MT_STK_ENV	  "MEMTRACK_STACKS_SHM"
#define MT_STK_MAGIC	  0x316b7473746d656dull /* "memtstk1" little-endian */
#define MT_STK_VERSION	  2
#define MT_STK_MAX_FRAMES 128 /* STACKFILE_MAX_FRAMES */

enum mt_stk_kind {
	MT_STK_MODULE = 1,
	MT_STK_STACK = 2,
};

struct mt_stk_hdr {
	mt_u64 magic;
	mt_u32 version;
	mt_u32 max_frames;
	mt_u64 file_size, data_off, data_size;
	mt_u64 used; /* bytes of the area handed out; may exceed data_size (then it is full) */
	/* counted by the interposers: allocation records written with aux 0 because ... */
	mt_u64 full;   /* ... the area had no room for a new stack */
	mt_u64 failed; /* ... the unwinder was unavailable or found no frame past the interposer */
};

struct mt_stk_entry {
	mt_u32 kind;	/* enum mt_stk_kind */
	mt_u32 len;	/* bytes of the entry, this header included */
	mt_u32 sink_id; /* the consumer's: its stack-file id once it has read the entry, else 0 */
	mt_u32 nr;	/* MT_STK_STACK: frames, and the flags below */
};

#define MT_STK_TRUNCATED 0x80000000u /* the stack was cut (the root end is missing) */
/* ... at a return address a uretprobe had replaced with the kernel's trampoline ("[uprobes]":
 * another tool's return probe, or memtrack's where sessions are not, on a function the call
 * went through, e.g. glibc's dlopen): what called that function is not known in process */
#define MT_STK_URETPROBE 0x40000000u
#define MT_STK_FLAGS	 (MT_STK_TRUNCATED | MT_STK_URETPROBE)

struct mt_stk_module {
	struct mt_stk_entry e;
	mt_s32 pid;	      /* the process that mapped it (the stack file's `load`) */
	mt_u32 build_id_len;  /* 0..20 */
	mt_u64 bias;	      /* load address - ELF vaddr */
	uint8_t build_id[24]; /* GNU build-id, build_id_len bytes */
	char path[];	      /* NUL-terminated */
};

struct mt_stk_frame {
	mt_u32 module; /* ref of a MT_STK_MODULE entry, 0 = none */
	mt_u32 pad;
	mt_u64 vaddr;
};

struct mt_stk_stack {
	struct mt_stk_entry e;
	struct mt_stk_frame f[];
};

_Static_assert(sizeof(struct mt_stk_module) == 56, "8-aligned, path follows");
_Static_assert(sizeof(struct mt_stk_stack) == 16, "8-aligned, frames follow");

#endif
