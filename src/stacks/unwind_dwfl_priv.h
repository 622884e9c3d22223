/* SPDX-License-Identifier: MIT */
/*
 * unwind_dwfl's inside, shared by its two files: a process as the unwinder sees it (struct
 * uw_proc), and the libdwfl side of it (unwind_dwfl_proc.c): its Dwfl built from its maps
 * text, the thread callbacks that give libdwfl the copied stack and registers, the reads a
 * walk makes (remembered for struct uw_memo, unwind_dwfl.c; inline: one a word).
 */
#ifndef MEMTRACK_UNWIND_DWFL_PRIV_H
#define MEMTRACK_UNWIND_DWFL_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <elfutils/libdwfl.h>
#include "stacks/unwind_dwfl.h"

#define UW_MAX_READS 512 /* stack words an unwind may read and still be remembered */

/* x86-64 DWARF register numbers (System V psABI, figure 3.36) */
enum { DW_RBX = 3, DW_RBP = 6, DW_RSP = 7, DW_R12 = 12 };

struct uw_proc {
	pid_t pid;
	char *maps; /* the text of /proc/PID/maps at its last reading (or the parent's) */
	size_t maps_len;
	/* maps are this image's as it was when its stacks were taken: read while it was stopped
	 * (unwind_dwfl__refresh), or inherited at fork from such a parent. Never replaced by a
	 * reading when a stack is unwound: the process may be in a later image by then. */
	bool exact;
	bool gone; /* its maps could not be read any more: keep what we have */
	uint64_t read_ns;
	Dwfl *dwfl; /* built from maps when first needed; NULL after a change */
	/* the stack being unwound, for the thread callbacks */
	pid_t tid;
	const struct mt_ustack *us;
	const uint8_t *stack;
	bool out_of_slice;    /* the unwinder wanted memory outside the copy */
	uint32_t gen;	      /* bumped when the Dwfl changes: remembered unwinds are stale */
	uint32_t nr_reads;    /* the words this unwind read, UW_MAX_READS + 1 when too many */
	uint64_t (*reads)[2]; /* address, value: struct unwind_dwfl's, one walk at a time */
	bool *needed;	      /* reads[i] decided the walk (struct unwind_dwfl's too) */
	uint32_t needed_regs; /* bit r: the captured regs[r] decided it */
	struct uw_proc *next;
};

/* A new generation (unique across processes: a pid reused after an exec starts afresh). */
uint32_t uw_proc__next_gen(void);
/* Ends p's Dwfl (NULL-safe) and starts a new generation: remembered unwinds are stale. */
void uw_proc__drop_dwfl(struct uw_proc *p);

/* The word at addr as the process had it: from the copy, with the return addresses the kernel
 * hijacked for uretprobes put back. False when addr is outside the copy. */
static inline bool uw_proc__word(const struct mt_ustack *us, const uint8_t *stack, uint64_t addr,
				 uint64_t *v)
{
	uint64_t sp = us->regs[MT_UREG_SP];

	if (addr < sp || addr - sp > us->size || us->size - (addr - sp) < sizeof(*v))
		return false;
	memcpy(v, stack + (addr - sp), sizeof(*v));
	for (uint32_t i = 0; i < us->nr_rets && i < MT_USTACK_RETS; i++)
		if (us->rets[i][0] == addr)
			*v = us->rets[i][1];
	return true;
}

/* A word for the walk (either kind), remembered for struct uw_memo. */
static inline bool uw_proc__read(struct uw_proc *p, uint64_t addr, uint64_t *v)
{
	if (!uw_proc__word(p->us, p->stack, addr, v)) {
		p->out_of_slice = true;
		return false;
	}
	if (p->nr_reads < UW_MAX_READS) {
		p->reads[p->nr_reads][0] = addr;
		p->reads[p->nr_reads][1] = *v;
	}
	if (p->nr_reads <= UW_MAX_READS)
		p->nr_reads++;
	return true;
}

/* The process' Dwfl, built from its maps text; NULL when it has none or it cannot be built. */
Dwfl *uw_proc__dwfl(struct uw_proc *p);

#endif
