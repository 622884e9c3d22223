/* SPDX-License-Identifier: MIT */
/*
 * The fast path of the uprobe unwinder (unwind_dwfl.c): the CFI rule of each code address, taken
 * from libdw once and cached, in a form applied without libdw. libdwfl's own walk allocates per
 * frame and per CFI lookup, and while a run is armed every malloc memtrack makes traps into
 * the uprobes on libc (its own and anyone else's): a libdwfl walk of a new stack cost ~2 ms
 * here, the same walk with cached rules a few microseconds and no allocation. Rules this
 * covers: the CFA as a register plus an offset, each register saved at CFA + offset, equal to
 * CFA + offset, unchanged or undefined (what gcc and clang emit for x86-64 code); anything else
 * (expressions, signal frames) is left to libdwfl.
 */
#ifndef MEMTRACK_UNWIND_STEP_H
#define MEMTRACK_UNWIND_STEP_H

#include <stdint.h>
#include <elfutils/libdwfl.h>
#include "bpf/events.h"

enum unwind_how {
	UW_SAME = 0, /* the caller's value is this frame's */
	UW_UNDEF,    /* not recoverable (for the return address: the outermost frame) */
	UW_AT_CFA,   /* saved in the word at CFA + off */
	UW_IS_CFA,   /* equal to CFA + off */
};

/* For the registers of enum mt_ustack_reg; MT_UREG_IP stands for the return address, and the
 * caller's sp is the CFA. */
struct unwind_rule {
	uint8_t cfa_reg; /* enum mt_ustack_reg */
	uint8_t how[MT_UREG_NR];
	int32_t cfa_off;
	int32_t off[MT_UREG_NR];
};

struct unwind_steps;

int unwind_steps__new(struct unwind_steps **s);
/* The rule at addr (absolute; the caller's pc - 1, or the pc itself for the first frame) in mod,
 * as laid out in generation gen of a process' layout (unwind_dwfl.c). NULL when mod's CFI has
 * no rule there that this path applies. */
const struct unwind_rule *unwind_steps__rule(struct unwind_steps *s, uint32_t gen, Dwfl_Module *mod,
					     uint64_t addr);
void unwind_steps__free(struct unwind_steps *s); /* NULL-safe */

#endif
