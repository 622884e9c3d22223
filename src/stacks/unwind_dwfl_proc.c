// SPDX-License-Identifier: MIT
/* The libdwfl side of a process for unwind_dwfl.c (unwind_dwfl_priv.h). */
#include <stdio.h>
#include <string.h>
#include <elfutils/libdwfl.h>
#include "stacks/unwind_dwfl_priv.h"

static uint32_t uw_gens;

uint32_t uw_proc__next_gen(void)
{
	return ++uw_gens;
}

void uw_proc__drop_dwfl(struct uw_proc *p)
{
	if (p->dwfl)
		dwfl_end(p->dwfl);
	p->dwfl = NULL;
	p->gen = uw_proc__next_gen();
}

/* --- libdwfl callbacks ----------------------------------------------------------------------- */

/* CFI comes from .eh_frame in the mapped file itself: no separate debug files, no debuginfod
 * (whatever DEBUGINFOD_URLS says) while tracking. */
static int uw_no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			   const char *file_name, const char *debuglink_file,
			   GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1;
}

static const Dwfl_Callbacks uw_callbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = uw_no_debuginfo,
};

static pid_t uw_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct uw_proc *p = arg;

	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = p;
	return p->tid;
}

static bool uw_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct uw_proc *p = arg;

	(void)dwfl;
	*thread_argp = p;
	return tid == p->tid;
}

static bool uw_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	uint64_t v;

	(void)dwfl;
	if (!uw_proc__read(arg, addr, &v))
		return false;
	*result = v;
	return true;
}

static bool uw_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct uw_proc *p = arg;
	const uint64_t *r = p->us->regs;
	const Dwarf_Word bx = r[MT_UREG_BX], bp_sp[2] = {r[MT_UREG_BP], r[MT_UREG_SP]};
	const Dwarf_Word r12_15[4] = {r[MT_UREG_R12], r[MT_UREG_R13], r[MT_UREG_R14],
				      r[MT_UREG_R15]};

	/* only what is valid after the call: the callee-saved registers, sp and the return
	 * address; the others stay undefined */
	if (!dwfl_thread_state_registers(thread, DW_RBX, 1, &bx) ||
	    !dwfl_thread_state_registers(thread, DW_RBP, 2, bp_sp) ||
	    !dwfl_thread_state_registers(thread, DW_R12, 4, r12_15))
		return false;
	dwfl_thread_state_register_pc(thread, r[MT_UREG_IP]);
	return true;
}

static const Dwfl_Thread_Callbacks uw_thread_callbacks = {
    .next_thread = uw_next_thread,
    .get_thread = uw_get_thread,
    .memory_read = uw_memory_read,
    .set_initial_registers = uw_set_initial_registers,
};

Dwfl *uw_proc__dwfl(struct uw_proc *p)
{
	FILE *f;
	int err;

	if (p->dwfl || !p->maps)
		return p->dwfl;
	p->dwfl = dwfl_begin(&uw_callbacks);
	if (!p->dwfl)
		return NULL;
	f = fmemopen(p->maps, p->maps_len, "r");
	if (!f) {
		uw_proc__drop_dwfl(p);
		return NULL;
	}
	dwfl_report_begin(p->dwfl);
	err = dwfl_linux_proc_maps_report(p->dwfl, f);
	fclose(f);
	if (err || dwfl_report_end(p->dwfl, NULL, NULL) ||
	    !dwfl_attach_state(p->dwfl, NULL, p->pid, &uw_thread_callbacks, p))
		uw_proc__drop_dwfl(p);
	return p->dwfl;
}
