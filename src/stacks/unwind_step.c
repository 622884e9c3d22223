// SPDX-License-Identifier: MIT
#include <dwarf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <elfutils/libdw.h>
#include "stacks/unwind_step.h"

#define STEP_SLOTS 16384 /* direct-mapped: a collision replaces */

struct step_slot {
	uint64_t addr;
	uint32_t gen; /* 0: empty */
	bool ok;      /* rule is usable; false: leave this address to libdwfl */
	struct unwind_rule rule;
};

struct unwind_steps {
	struct step_slot slot[STEP_SLOTS];
};

/* DWARF register numbers of x86-64 (System V psABI, figure 3.36) for enum mt_ustack_reg */
static const int step_dwarf_reg[MT_UREG_NR] = {
    [MT_UREG_IP] = 16,	[MT_UREG_SP] = 7,   [MT_UREG_BP] = 6,	[MT_UREG_BX] = 3,
    [MT_UREG_R12] = 12, [MT_UREG_R13] = 13, [MT_UREG_R14] = 14, [MT_UREG_R15] = 15,
};

int unwind_steps__new(struct unwind_steps **s)
{
	*s = calloc(1, sizeof(**s));
	return *s ? 0 : -ENOMEM;
}

void unwind_steps__free(struct unwind_steps *s)
{
	free(s);
}

static int step_ureg(uint64_t dwarf_reg)
{
	for (int r = 0; r < MT_UREG_NR; r++)
		if ((uint64_t)step_dwarf_reg[r] == dwarf_reg)
			return r;
	return -1;
}

/* The CFA: DW_OP_bregx reg off (how libdw gives def_cfa) or DW_OP_bregN off. */
static bool step_cfa(Dwarf_Frame *fr, struct unwind_rule *rule)
{
	Dwarf_Op *ops;
	size_t nops;
	int reg;

	if (dwarf_frame_cfa(fr, &ops, &nops) || nops != 1)
		return false;
	if (ops[0].atom == DW_OP_bregx) {
		reg = step_ureg(ops[0].number);
		rule->cfa_off = (int32_t)(int64_t)ops[0].number2;
	} else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		reg = step_ureg(ops[0].atom - DW_OP_breg0);
		rule->cfa_off = (int32_t)(int64_t)ops[0].number;
	} else {
		return false;
	}
	if (reg < 0)
		return false;
	rule->cfa_reg = (uint8_t)reg;
	return true;
}

/* One register: libdw's forms for undefined, same value, offset(N) and val_offset(N). */
static bool step_reg(Dwarf_Frame *fr, int r, struct unwind_rule *rule)
{
	Dwarf_Op mem[3], *ops;
	size_t nops;

	if (dwarf_frame_register(fr, step_dwarf_reg[r], mem, &ops, &nops))
		return false;
	rule->off[r] = 0;
	if (nops == 0) {
		rule->how[r] = ops ? UW_UNDEF : UW_SAME;
		return true;
	}
	if (ops[0].atom != DW_OP_call_frame_cfa)
		return false;
	rule->how[r] = UW_AT_CFA;
	if (nops >= 2 && ops[1].atom == DW_OP_plus_uconst) {
		rule->off[r] = (int32_t)(int64_t)ops[1].number;
		ops++;
		nops--;
	}
	if (nops == 2 && ops[1].atom == DW_OP_stack_value)
		rule->how[r] = UW_IS_CFA;
	else if (nops != 1)
		return false;
	return true;
}

static bool step_compute(Dwfl_Module *mod, uint64_t addr, struct unwind_rule *rule)
{
	Dwarf_Addr bias, start, end;
	Dwarf_CFI *cfi = dwfl_module_eh_cfi(mod, &bias);
	Dwarf_Frame *fr = NULL;
	bool signal = false, ok;

	if (!cfi && !(cfi = dwfl_module_dwarf_cfi(mod, &bias)))
		return false;
	if (dwarf_cfi_addrframe(cfi, addr - bias, &fr))
		return false;
	ok = dwarf_frame_info(fr, &start, &end, &signal) >= 0 && !signal && step_cfa(fr, rule);
	for (int r = 0; ok && r < MT_UREG_NR; r++)
		if (r != MT_UREG_SP)
			ok = step_reg(fr, r, rule);
	free(fr); /* malloc'd by libdw */
	return ok;
}

const struct unwind_rule *unwind_steps__rule(struct unwind_steps *s, uint32_t gen, Dwfl_Module *mod,
					     uint64_t addr)
{
	struct step_slot *sl =
	    &s->slot[((addr ^ (uint64_t)gen << 40) * 0x9e3779b97f4a7c15ull) >> 50];

	_Static_assert(STEP_SLOTS == 1 << 14, "the hash keeps 14 bits");
	if (sl->gen != gen || sl->addr != addr) {
		sl->gen = gen;
		sl->addr = addr;
		sl->ok = step_compute(mod, addr, &sl->rule);
	}
	return sl->ok ? &sl->rule : NULL;
}
