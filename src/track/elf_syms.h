/* SPDX-License-Identifier: MIT */
/* What memtrack needs of an ELF file: defined functions at file offsets, and its dependencies. */
#ifndef MEMTRACK_ELF_SYMS_H
#define MEMTRACK_ELF_SYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_sym {
	const char *name; /* points into the mapped file; may carry an "@VERSION" suffix */
	uint32_t len; /* length without the version suffix */
	uint64_t offset; /* file offset of the first instruction: what a uprobe attaches to */
};

struct elf_dynhash;

struct elf_info {
	/* defined STT_FUNC/STT_GNU_IFUNC symbols of .symtab, and of .dynsym when it has no GNU
	 * hash table (otherwise looked up through it: dynhash) */
	struct elf_sym *syms;
	size_t nr_syms;
	struct elf_dynhash *dynhash; /* elf_syms.c; NULL when .dynsym is listed in syms */
	char **needed; /* DT_NEEDED sonames */
	size_t nr_needed;
	char *runpath; /* DT_RUNPATH, else DT_RPATH; NULL when none */
	bool runpath_is_rpath; /* runpath is DT_RPATH (no DT_RUNPATH): searched before
				* LD_LIBRARY_PATH, and inherited by what the object loads */
	char *interp; /* PT_INTERP; NULL for static executables and libraries */
	char *soname; /* DT_SONAME; NULL when none */
	bool dynamic; /* has a PT_DYNAMIC segment */
	/* The file stays open (read by libelf, or mapped when its symbol tables are large:
	 * elf_syms.c) while the info lives: symbol names point into libelf's copy and are not
	 * copied again, since every malloc memtrack makes while a run is armed traps into its
	 * own uprobes. */
	void *elf;
	int fd;
};

/* Reads path. Returns 0 or -errno (-ENOEXEC when not an ELF file). */
int elf_info__load(const char *path, struct elf_info *info);
/* The same without symbols (nr_syms = 0): interpreter, DT_NEEDED, DT_SONAME, RUNPATH/RPATH. */
int elf_info__load_dynamic(const char *path, struct elf_info *info);

void elf_info__free(struct elf_info *info);
/* File offset of a defined function, or 0 when absent. */
uint64_t elf_info__find(const struct elf_info *info, const char *name);
/* Is path a program of memtrack's own ABI (ELF class and machine: x86-64)? 1 yes, 0 no (a 32-bit
 * i386 or x32 program, whose calls neither the interposer nor the uprobe programs can read),
 * -errno when it cannot be read. */
int elf__native_abi(const char *path);
/* Virtual address -> file offset through the PT_LOAD segments; exposed for tests. */
int elf__vaddr_to_offset(const char *path, uint64_t vaddr, uint64_t *offset);

#endif
