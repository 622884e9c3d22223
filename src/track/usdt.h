/* SPDX-License-Identifier: MIT */
/*
 * The USDT probes of include/memtrack.h in an ELF file: SystemTap SDT notes (.note.stapsdt,
 * type 3, owner "stapsdt") of provider "memtrack", probes "start", "stop" and "mark". Notes
 * from <sys/sdt.h> itself (DTRACE_PROBE1(memtrack, mark, s)) are read the same way.
 */
#ifndef MEMTRACK_USDT_H
#define MEMTRACK_USDT_H

#include <stdint.h>

struct usdt_site {
	uint64_t offset;  /* file offset of the probe's nop: where the uprobe goes */
	uint64_t ref_ctr; /* file offset of its semaphore (the kernel's ref_ctr_offset); 0: none */
	uint64_t cookie;  /* MT_MARK_COOKIE(kind, register offset): what the BPF program needs */
};

/* The memtrack probes of an open ELF file (elf: an Elf * of libelf, as elf_info.elf), into
 * *sites (allocated; NULL when none). Returns their number, or -errno. */
int usdt__sites(void *elf, struct usdt_site **sites);
/* The byte offset in the kernel's struct pt_regs of a register named in an SDT argument
 * ("%rdi", "x0"), or -1 when not one this machine has. */
int usdt__reg_offset(const char *name);
/* A site's cookie from its note's probe name and argument string; 0 when not ours. */
uint64_t usdt__cookie(const char *name, const char *args);

#endif
