/* SPDX-License-Identifier: MIT */
/*
 * What user space knows about each record type and each drop reason of src/bpf/events.h: one
 * row each, in records.c. The consumer's type check, the artifact writer and reader, the
 * accounting, the manifest, the reports and the test harness all read these rows, so a new
 * record type is a value in events.h, a row here, and the code that gives it meaning.
 */
#ifndef MEMTRACK_RECORDS_H
#define MEMTRACK_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "bpf/events.h"

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
#define REC_LAYOUT (1u << 5) /* starts a process' address-space layout (Fork, Exec): the
			      * consumer's stack hook sees it, in ring order (track/consumer.h) */
#define REC_VARLEN (1u << 4) /* may be longer than struct mt_event: with --stacks, a struct
			      * mt_ustack and the stack bytes follow (events.h) */

struct record_type {
	const char *name; /* artifact variant name; NULL unless REC_ARTIFACT */
	uint8_t name_len;
	uint8_t flags;
	uint8_t fields[RECORD_MAX_FIELDS]; /* enum record_field in artifact order; RF_NONE ends */
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

/* "Malloc", "Rss", ...; NULL for control records and unknown types. */
static inline const char *records__name(uint32_t type)
{
	return records__has(type, REC_ARTIFACT) ? records__types[type].name : NULL;
}

/* Inverse of records__name; MT_EV_NONE when unknown. */
uint32_t records__from_name(const char *name, size_t len);

/* One row per drop reason (enum mt_drop_reason). */
struct drop_reason {
	const char *key; /* manifest and report --json key */
	const char *label; /* in the summary and the lost-events message */
	const char *advice; /* what the user can do about it; NULL when nothing */
};

extern const struct drop_reason records__drops[MT_DROP_NR];

/*
 * "ring buffer 3, nesting overflow 1, consumer 2": the nonzero reasons (every one when all is
 * set) and the consumer's rejections, into buf. Returns buf.
 */
char *records__drops_text(char *buf, size_t cap, const uint64_t drops[MT_DROP_NR],
			  uint64_t consumer, bool all);
/* The advice of each nonzero reason, each after a space; "" when there is none. Returns buf. */
char *records__drops_advice(char *buf, size_t cap, const uint64_t drops[MT_DROP_NR]);

#endif
