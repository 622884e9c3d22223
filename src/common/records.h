/* SPDX-License-Identifier: MIT */
/*
 * What user space knows about each record type of src/bpf/events.h and each drop reason (the
 * BPF programs' and the preload interposer's): one row each, in records.c. The consumer's type check, the artifact writer and reader, the
 * accounting, the manifest, the reports and the test harness all read these rows, so a new
 * record type is a value in events.h, a row here, and the code that gives it meaning.
 */
#ifndef MEMTRACK_RECORDS_H
#define MEMTRACK_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/events.h"
#include "preload/shm_abi.h"

/* A variant field of the artifact: which struct mt_event member holds it, how it is encoded. */
enum record_field {
	RF_NONE = 0,
	RF_SIZE, /* "size": size, unsigned */
	RF_OLD_ADDR, /* "old_addr": old_addr, unsigned, omitted when 0 */
	RF_PARENT_PID, /* "parent_pid": size, unsigned */
	RF_MEMBER, /* "member": aux, unsigned 32-bit (an MM_* index) */
	RF_DELTA, /* "delta": size, signed 64-bit (two's complement in size) */
	RF_NR,
};

enum record_member { RM_SIZE, RM_AUX, RM_OLD_ADDR };
enum record_enc { RE_U64, RE_U32, RE_I64 };

struct record_field_desc {
	const char *key;
	uint8_t key_len;
	uint8_t member; /* enum record_member */
	uint8_t enc; /* enum record_enc */
	bool optional; /* omitted when 0, and may be missing when read */
};

#define RECORD_MAX_FIELDS 2

/* Row flags */
#define REC_ARTIFACT (1u << 0) /* written to the artifact (has a variant name) */
#define REC_HEAP (1u << 1) /* an allocator call: allocates or frees a heap block */
#define REC_CONTROL (1u << 2) /* steers the consumer; never written, never accounted */
#define REC_IMAGE_END (1u << 3) /* ends a process image (Exec, Exit): the consumer first delivers
				  * the image's older records from the other sources */
#define REC_COMPANION (1u << 5) /* not in the artifact: to the accounting (window, markers),
				 * in order with the artifact's records */
#define REC_ORDERED (1u << 6) /* the consumer first delivers the process' older records from
			       * the other sources (with REC_IMAGE_END for Exec, Exit) */
#define REC_STOPS (1u << 4) /* control: its task stopped itself and waits for a SIGCONT, sent
			     * once the record is handled (by the tracker, or by the watchdog
			     * when memtrack died) */
#define REC_VARLEN (1u << 7) /* may be longer than struct mt_event: with --stacks, a struct
			      * mt_ustack and the stack bytes follow (events.h) */
#define REC_LAYOUT (1u << 8) /* starts a process' address-space layout (Fork, Exec): the
			      * consumer's stack hook sees it, in ring order (track/consumer.h) */

/* What the tracker does with a control record (its handlers in tracker_run.c, by this index),
 * before the SIGCONT of a REC_STOPS one. */
enum record_action {
	RA_NONE = 0,
	RA_INSPECT_EXE, /* attach to the allocators of pid's new executable; addr: its known_exe
			 * key (bpf/proc.h), marked known after */
	RA_INSPECT_MAPS, /* attach to the allocators among pid's mappings (after a dlopen) */
	RA_READ_MAPS, /* --stacks: keep pid's maps for unwinding its stacks later */
	RA_NAME, /* pid's name for the accounting: 16 bytes, NUL-padded, in addr then size */
	RA_NR,
};

struct record_type {
	const char *name; /* artifact variant name; NULL unless REC_ARTIFACT */
	uint8_t name_len;
	uint16_t flags;
	uint8_t fields[RECORD_MAX_FIELDS]; /* enum record_field in artifact order; RF_NONE ends */
	uint8_t action; /* REC_CONTROL: enum record_action */
};

extern const struct record_type records__types[MT_EV_TYPE_MAX];
extern const struct record_field_desc records__fields[RF_NR];

/* The row of a type; NULL for MT_EV_NONE, holes and values past the table. */
static inline const struct record_type *records__type(uint32_t type)
{
	const struct record_type *t = type < MT_EV_TYPE_MAX ? &records__types[type] : NULL;

	return t && t->flags ? t : NULL;
}

static inline bool records__has(uint32_t type, unsigned flag)
{
	return type < MT_EV_TYPE_MAX && (records__types[type].flags & flag);
}

/* A control record whose task stopped itself and waits for SIGCONT (REC_STOPS, not one the BPF
 * side left running: MT_CTL_NOT_STOPPED, MT_CTL_NOT_STOPPED_PARENT). */
static inline bool records__stopped(const struct mt_event *ev)
{
	return records__has(ev->type, REC_STOPS) && ev->aux != MT_CTL_NOT_STOPPED &&
	       ev->aux != MT_CTL_NOT_STOPPED_PARENT;
}

/* "Malloc", "Rss", ...; NULL for control records and unknown types. */
static inline const char *records__name(uint32_t type)
{
	return records__has(type, REC_ARTIFACT) ? records__types[type].name : NULL;
}

/* The action of a control record (RA_NONE for others and unknown types). */
static inline unsigned records__action(uint32_t type)
{
	return type < MT_EV_TYPE_MAX ? records__types[type].action : RA_NONE;
}

/* Inverse of records__name; MT_EV_NONE when unknown. */
uint32_t records__from_name(const char *name, size_t len);

/*
 * Every drop reason, one index for all the sources: the BPF programs' (enum mt_drop_reason,
 * the same values), then the preload interposer's (enum mt_shm_drop, from DROP_PRELOAD), then
 * the tracker's own (from DROP_TRACKER). Arrays of drop counts (struct manifest's drops) are
 * DROP_NR long, in this order.
 */
enum {
	DROP_PRELOAD = MT_DROP_NR,
	DROP_TRACKER = DROP_PRELOAD + MT_SHM_DROP_NR,
	/* the exec of a program of another ABI (32-bit): neither mechanism reads its calls */
	DROP_ABI = DROP_TRACKER,
	/* an image that was not stopped (traced, or its parent reads SIGCHLD from a queue) and
	 * ran while its uprobes were being attached: its first calls may be missing */
	DROP_LATE_PROBES,
	DROP_NR,
};

/* One row per drop reason. */
struct drop_reason {
	const char *key; /* manifest and report --json key */
	const char *label; /* in the summary and the lost-events message */
	const char *advice; /* what the user can do about it; NULL when nothing */
};

extern const struct drop_reason records__drops[DROP_NR];

/* The sum of the DROP_NR counts. */
uint64_t records__drops_sum(const uint64_t drops[DROP_NR]);
/*
 * "ring buffer 3, nesting overflow 1, consumer 2": the nonzero reasons (every one when all is
 * set) and the consumer's rejections, into buf. Returns buf.
 */
char *records__drops_text(char *buf, size_t cap, const uint64_t drops[DROP_NR],
			  uint64_t consumer, bool all);
/* The advice of each nonzero reason, each after a space; "" when there is none. Returns buf. */
char *records__drops_advice(char *buf, size_t cap, const uint64_t drops[DROP_NR]);

#endif
