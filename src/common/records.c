// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "common/records.h"

#define KEY(s) .key = s, .key_len = sizeof(s) - 1
const struct record_field_desc records__fields[RF_NR] = {
	[RF_SIZE] = {KEY("size"), .member = RM_SIZE, .enc = RE_U64},
	[RF_OLD_ADDR] = {KEY("old_addr"), .member = RM_OLD_ADDR, .enc = RE_U64, .optional = true},
	[RF_PARENT_PID] = {KEY("parent_pid"), .member = RM_SIZE, .enc = RE_U64},
	[RF_MEMBER] = {KEY("member"), .member = RM_AUX, .enc = RE_U32},
	/* pages, signed: the BPF side stores the delta two's-complement in size */
	[RF_DELTA] = {KEY("delta"), .member = RM_SIZE, .enc = RE_I64},
};

/* The artifact's variants and fields are codspeed-memtrack's (reference notes, section 1). */
#define ART(s) .name = s, .name_len = sizeof(s) - 1, .flags = REC_ARTIFACT
const struct record_type records__types[MT_EV_TYPE_MAX] = {
	[MT_EV_MALLOC] = {ART("Malloc") | REC_HEAP | REC_VARLEN, .fields = {RF_SIZE}},
	[MT_EV_CALLOC] = {ART("Calloc") | REC_HEAP | REC_VARLEN, .fields = {RF_SIZE}},
	[MT_EV_REALLOC] = {ART("Realloc") | REC_HEAP | REC_VARLEN, .fields = {RF_SIZE, RF_OLD_ADDR}},
	[MT_EV_ALIGNED_ALLOC] = {ART("AlignedAlloc") | REC_HEAP | REC_VARLEN, .fields = {RF_SIZE}},
	[MT_EV_FREE] = {ART("Free") | REC_HEAP},
	[MT_EV_MMAP] = {ART("Mmap"), .fields = {RF_SIZE}},
	[MT_EV_MUNMAP] = {ART("Munmap"), .fields = {RF_SIZE}},
	[MT_EV_BRK] = {ART("Brk"), .fields = {RF_SIZE}},
	[MT_EV_FORK] = {ART("Fork") | REC_LAYOUT, .fields = {RF_PARENT_PID}},
	[MT_EV_EXEC] = {ART("Exec") | REC_IMAGE_END | REC_LAYOUT},
	[MT_EV_EXIT] = {ART("Exit") | REC_IMAGE_END},
	[MT_EV_RSS] = {ART("Rss"), .fields = {RF_MEMBER, RF_SIZE}},
	[MT_EV_RMAP] = {ART("Rmap"), .fields = {RF_MEMBER, RF_DELTA}},
	[MT_EV_MARKER] = {.flags = REC_COMPANION | REC_ORDERED},
	[MT_EV_MARKER_NAME] = {.flags = REC_COMPANION},
	[MT_EV_CTL_EXEC_STOPPED] = {.flags = REC_CONTROL | REC_STOPS, .action = RA_INSPECT_EXE},
	[MT_EV_CTL_DLOPEN_STOPPED] = {.flags = REC_CONTROL | REC_STOPS, .action = RA_INSPECT_MAPS},
	[MT_EV_CTL_COMM] = {.flags = REC_CONTROL, .action = RA_NAME},
	[MT_EV_CTL_MAPS_STOPPED] = {.flags = REC_CONTROL | REC_STOPS, .action = RA_READ_MAPS},
};

uint32_t records__from_name(const char *name, size_t len)
{
	for (uint32_t t = 0; t < MT_EV_TYPE_MAX; t++) {
		const struct record_type *r = &records__types[t];

		if ((r->flags & REC_ARTIFACT) && r->name_len == len && !memcmp(r->name, name, len))
			return t;
	}
	return MT_EV_NONE;
}

const struct drop_reason records__drops[DROP_NR] = {
    [MT_DROP_RINGBUF] = {"ringbuf", "ring buffer",
			 "Try a larger --ring-size, or a larger --rss-step."},
    [MT_DROP_THREAD_MAP] = {"thread_map", "thread map",
			    "The kernel could not allocate per-thread state: free some memory."},
    [MT_DROP_PROC_MAP] = {"proc_map", "process map",
			  "More processes were alive at once than memtrack can track."},
    [MT_DROP_UNMATCHED_RET] = {"unmatched_return", "unmatched returns", NULL},
    [MT_DROP_NEST_OVERFLOW] = {"nest_overflow", "nesting overflow", NULL},
    [MT_DROP_UNSERVED] = {"unserved", "processes the interposer could not serve",
			  "The interposer could not map memtrack's shared memory in those "
			  "processes, they were forked into a pid namespace of their own, ran "
			  "under valgrind, or (preload mode) dropped LD_PRELOAD from their "
			  "environment or made a secure exec: try --alloc-hooks auto or uprobe "
			  "(not under valgrind, which executes uprobes as breakpoints: SIGTRAP)."},
    [DROP_PRELOAD + MT_SHM_DROP_NO_SLOT] = {"no_slot", "preload no slot",
					    "More threads were alive at once than the preload "
					    "rings have slots: try --alloc-hooks uprobe."},
    [DROP_PRELOAD + MT_SHM_DROP_CLOSED] = {"closed", "preload after close", NULL},
    [DROP_PRELOAD + MT_SHM_DROP_NAMESPACE] = {"namespace",
					      "processes whose dlmopen namespace allocates "
					      "unrecorded",
					      "The interposer is not in a namespace that dlmopen "
					      "makes: try --alloc-hooks uprobe."},
    [DROP_PRELOAD + MT_SHM_DROP_SIGNAL] = {"signal",
					   "signal handlers' calls while the interposer wrote a "
					   "record",
					   "A signal handler allocated while its thread was inside "
					   "the interposer: make the handler not allocate, or use "
					   "--alloc-hooks uprobe."},
    [DROP_ABI] = {"abi", "32-bit program images unrecorded",
		  "32-bit programs are recorded by the i386 interposer only (auto and preload "
		  "modes; dynamically linked, not set-id, stopped at their exec; memtrack built "
		  "where gcc -m32 links): track a 64-bit build of those, or use --alloc-hooks "
		  "auto."},
    [DROP_LATE_PROBES] = {"late_probes", "images that ran before their uprobes were attached",
			  "Those processes were not stopped at their exec or dlopen (traced, or "
			  "their parent reads SIGCHLD from a queue, as script does): their "
			  "first allocator calls may be missing. With --alloc-hooks uprobe "
			  "glibc's probes are in before the command starts."},
};

uint64_t records__drops_sum(const uint64_t drops[DROP_NR])
{
	uint64_t total = 0;

	for (int i = 0; i < DROP_NR; i++)
		total += drops[i];
	return total;
}

char *records__drops_text(char *buf, size_t cap, const uint64_t drops[DROP_NR],
			  uint64_t consumer, bool all)
{
	size_t len = 0;
	const char *sep = "";

	if (cap)
		buf[0] = 0;
	for (int i = 0; i <= DROP_NR; i++) {
		uint64_t v = i < DROP_NR ? drops[i] : consumer;
		const char *label = i < DROP_NR ? records__drops[i].label : "consumer";
		int n;

		if (!v && !all)
			continue;
		n = snprintf(buf + len, cap - len, "%s%s %" PRIu64, sep, label, v);
		if (n < 0 || (size_t)n >= cap - len)
			break;
		len += (size_t)n;
		sep = ", ";
	}
	return buf;
}

char *records__drops_advice(char *buf, size_t cap, const uint64_t drops[DROP_NR])
{
	size_t len = 0;

	if (cap)
		buf[0] = 0;
	for (int i = 0; i < DROP_NR; i++) {
		int n;

		if (!drops[i] || !records__drops[i].advice)
			continue;
		n = snprintf(buf + len, cap - len, " %s", records__drops[i].advice);
		if (n < 0 || (size_t)n >= cap - len)
			break;
		len += (size_t)n;
	}
	return buf;
}
