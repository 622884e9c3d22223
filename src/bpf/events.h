/* SPDX-License-Identifier: MIT */
/*
 * The kernel -> user record ABI. This header is the ONLY definition of what the BPF programs
 * put in the ring buffer; both sides include it. Every record starts with the 48-byte struct
 * mt_event, tagged by `type`, little-endian, with no pointers; most are exactly that. Types whose
 * row in records.c has REC_VARLEN may be longer: with --stacks, an allocation record is followed
 * by a struct mt_ustack and the user stack bytes it copied (the ring's length says which).
 * The BPF object is built from this tree and embedded in the binary (the skeleton), so the two
 * sides cannot disagree at run time and nothing checks a version at load; MT_ABI_VERSION only
 * stamps the object's .rodata (mt_abi_version) for whoever inspects a loaded program. Bump it
 * when a field changes. What user space makes of each type and drop reason is one row each in
 * src/common/records.c.
 */
#ifndef MEMTRACK_EVENTS_H
#define MEMTRACK_EVENTS_H

#ifdef __VMLINUX_H__
typedef __u32 mt_u32;
typedef __s32 mt_s32;
typedef __u64 mt_u64;
typedef __s64 mt_s64;
#else
#include <stdint.h>
typedef uint32_t mt_u32;
typedef int32_t mt_s32;
/* 8-byte aligned in every ABI: the i386 interposer (libmemtrack-preld32.so) shares these
 * layouts, and i386 aligns a plain uint64_t struct member to 4 */
typedef uint64_t mt_u64 __attribute__((aligned(8)));
typedef int64_t mt_s64 __attribute__((aligned(8)));
#endif

#define MT_ABI_VERSION 2 /* 2: allocation records may carry a struct mt_ustack (--stacks) */

enum mt_event_type {
	MT_EV_NONE = 0,
	/* The allocation records (1..4, contiguous): aux = stack (see struct mt_event). */
	MT_EV_MALLOC = 1, /* size */
	MT_EV_CALLOC = 2, /* size = nmemb * size (saturated) */
	MT_EV_REALLOC = 3, /* size, old_addr (0 = none) */
	MT_EV_ALIGNED_ALLOC = 4, /* size */
	MT_EV_FREE = 5,
	MT_EV_MMAP = 6, /* size */
	MT_EV_MUNMAP = 7, /* size */
	MT_EV_BRK = 8, /* size */
	MT_EV_FORK = 9, /* size = parent pid */
	MT_EV_EXEC = 10,
	MT_EV_EXIT = 11,
	MT_EV_RSS = 12, /* aux = member, size = absolute bytes */
	MT_EV_RMAP = 13, /* aux = member, size = signed delta in pages, addr = page address */
	/* Companion records: never written to the artifact (its readers know none of them), they
	 * go to the accounting and the artifact's companion data (the manifest's window and
	 * markers), in order with the rest. From the USDT probes of include/memtrack.h. */
	MT_EV_MARKER = 32, /* aux = enum mt_marker_kind, size = length of the name (MARK) */
	/* 24 bytes of a MARK's name, in addr, size, old_addr (contiguous, NUL-padded); aux = part
	 * index. A marker's parts are written before it by the same thread. */
	MT_EV_MARKER_NAME = 33,
	/* Control records: never written to the artifact, they steer the consumer. */
	/* a tracked task stopped itself at exec: inspect, then SIGCONT; addr = the executable's
	 * key, size = MT_EXEC_* flags */
	MT_EV_CTL_EXEC_STOPPED = 64,
	MT_EV_CTL_DLOPEN_STOPPED = 65, /* ... at the return of dlopen: scan its maps, then SIGCONT */
	/* the process' name (the kernel's comm) after its Fork or Exec record: 16 bytes,
	 * NUL-padded, in addr then size (contiguous) */
	MT_EV_CTL_COMM = 66,
	/* --stacks: a tracked task stopped at its image's first allocation with a stack (the
	 * loader has mapped the linked libraries by then): read its maps, then SIGCONT. The
	 * stacks are unwound later, when the process may be gone (src/stacks/unwind_dwfl.h). */
	MT_EV_CTL_MAPS_STOPPED = 67,
	MT_EV_TYPE_MAX,
};

/* Values of `aux` for MT_EV_MARKER; also the cookie (low byte) of a USDT site's uprobe. */
enum mt_marker_kind {
	MT_MARK_NONE = 0,
	MT_MARK_START = 1, /* MEMTRACK_START() */
	MT_MARK_STOP = 2, /* MEMTRACK_STOP() */
	MT_MARK_MARK = 3, /* MEMTRACK_MARK(name) */
	MT_MARK_NR,
};
#define MT_MARK_NAME_MAX 63 /* bytes of a name kept, NUL excluded */
#define MT_MARK_NAME_PART 24 /* bytes per MT_EV_MARKER_NAME record */
/* cookie bits 8-23: byte offset in struct pt_regs of the register holding MARK's string
 * pointer; MT_MARK_NO_ARG when the site's argument is not one (its name is then "") */
#define MT_MARK_COOKIE(kind, off) ((mt_u64)(kind) | (mt_u64)(off) << 8)
#define MT_MARK_NO_ARG 0xffff

/* Values of `aux` for MT_EV_RSS and MT_EV_RMAP: the kernel's MM_* counter indices. */
enum mt_rss_member {
	MT_RSS_FILE = 0,
	MT_RSS_ANON = 1,
	MT_RSS_SWAP = 2,
	MT_RSS_SHMEM = 3,
	MT_RSS_NR = 4,
};

struct mt_event {
	mt_u32 type; /* enum mt_event_type */
	mt_s32 pid; /* thread-group id that owns the memory */
	mt_s32 tid; /* task that did it */
	/* RSS/RMAP: member. Allocation records (--stacks): the call stack, 0 = none; written by a
	 * source as its own reference (the interposer: a ref into the shared stack area,
	 * src/preload/stack_abi.h), which the source translates to the stack file's id
	 * (stack_sink__stack, src/stacks/stack_sink.h) before dispatching the record. A control
	 * record that stops its task (REC_STOPS): MT_CTL_NOT_STOPPED when it did not. 0 for all
	 * other records and without --stacks. Never written to the artifact. */
	mt_u32 aux;
	mt_u64 ts; /* CLOCK_MONOTONIC, ns (bpf_ktime_get_ns) */
	mt_u64 addr; /* returned / freed / page address; 0 when none */
	mt_u64 size; /* bytes, parent pid, or signed pages (see type) */
	mt_u64 old_addr; /* REALLOC only */
};
_Static_assert(sizeof(struct mt_event) == 48, "struct mt_event is the 48-byte record ABI");

/* size of MT_EV_CTL_EXEC_STOPPED: the new image's credentials cannot open the interposer's
 * shared memory (auto mode: another user's process, served by uprobes) */
#define MT_EXEC_SHM_DENIED 1
/* ... or the new image is in another mount namespace than memtrack's: user space looks whether
 * the shared memory is there (its /dev/shm may be another tmpfs), and marks it denied if not */
#define MT_EXEC_OTHER_MNTNS 2

/* aux of a stopping control record whose task was not stopped: it is traced (ptrace), and its
 * tracer would take our SIGSTOP and SIGCONT for the program's own signals (gdb's `run` ended
 * at the SIGCONT). It is inspected while it runs, and never sent SIGCONT. */
#define MT_CTL_NOT_STOPPED 1
/* ... or its parent, or a parent the stop would be passed on to (su under script), takes
 * SIGCHLD from a queue (signalfd: script(1)), where our stop's notices would absorb the child's
 * exit notice (mt_stop_reaches_queue, maps.bpf.h). Handled the same way. */
#define MT_CTL_NOT_STOPPED_PARENT 2

/*
 * The user stack of an allocation (--stacks), after its struct mt_event in the same ring record.
 * Taken at the return of the outermost allocator call, so the registers are the caller's, just
 * after the call: ip is the return address into the function that called the allocator (the
 * leaf frame), and the callee-saved registers hold the caller's values again. `size` bytes
 * follow, copied from sp upwards (the caller's frames, then theirs, up to MT_USTACK_MAX or the
 * end of the mapping); the record may be longer (its stack part comes in size classes, the
 * rest is slack). Registers are in DWARF order for x86-64 where it matters to CFI.
 */
enum mt_ustack_reg {
	MT_UREG_IP,
	MT_UREG_SP,
	MT_UREG_BP,
	MT_UREG_BX,
	MT_UREG_R12,
	MT_UREG_R13,
	MT_UREG_R14,
	MT_UREG_R15,
	MT_UREG_NR,
};

#define MT_USTACK_RETS 4

struct mt_ustack {
	mt_u64 regs[MT_UREG_NR]; /* enum mt_ustack_reg */
	mt_u32 size;		 /* bytes of stack after this header */
	mt_u32 flags;		 /* MT_USTACK_* */
	/* Return addresses in the copy that the kernel replaced with its uretprobe trampoline
	 * (a probed function still running further up: dlopen): where (the stack slot) and what
	 * was there. The unwinder reads the original instead. */
	mt_u32 nr_rets;
	mt_u32 pad;
	mt_u64 rets[MT_USTACK_RETS][2]; /* slot address, original return address */
};
_Static_assert(sizeof(struct mt_ustack) == 144, "struct mt_ustack is part of the record ABI");

#define MT_USTACK_MAX	 (16 * 1024) /* bytes of stack a record can carry */
#define MT_USTACK_CUT	 (1u << 0)   /* the copy stopped at the requested size, not at the end of
				      * the stack's mapping */

/* Stacks the BPF side could not attach to their record (the record itself is written without
 * one: these are not drops); index of the `ustack_lost` per-CPU array. */
enum mt_ustack_lost {
	MT_USTACK_LOST_RING = 0, /* the record with its stack did not fit the ring */
	MT_USTACK_LOST_COPY, /* the stack could not be read (sp not mapped) */
	MT_USTACK_LOST_NR,
};

/* Reasons a record was lost on the BPF side; index of the `drops` per-CPU array. */
enum mt_drop_reason {
	MT_DROP_RINGBUF = 0, /* bpf_ringbuf_reserve failed: consumer too slow or ring too small */
	MT_DROP_THREAD_MAP, /* per-thread call state (task storage) could not be created */
	MT_DROP_PROC_MAP, /* tracked-process map full: a child could not be tracked */
	MT_DROP_UNMATCHED_RET, /* a return probe without its entry (attached mid-call, or nesting lost) */
	MT_DROP_NEST_OVERFLOW, /* nesting deeper than MT_MAX_DEPTH */
	/* processes (images) that loaded the interposer but could not record (the shared memory
	 * in their environment could not be mapped): their allocator calls may be missing */
	MT_DROP_UNSERVED,
	MT_DROP_NR,
};

#define MT_MAX_DEPTH 8

/* rmap mode's backend (the BPF constant mt_rmap): which programs write the Rmap records. */
enum mt_rmap_backend {
	MT_RMAP_OFF = 0,
	MT_RMAP_TRACEPOINT = 1, /* rss_stat changes (rss.bpf.h), addresses from rmap.bpf.c */
	MT_RMAP_FENTRY = 2, /* fentry on the kernel's folio rmap functions (rmap_fentry.bpf.c) */
};

#endif /* MEMTRACK_EVENTS_H */
