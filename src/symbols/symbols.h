/* SPDX-License-Identifier: MIT */
/*
 * Symbolisation of stack frames, (module, vaddr) as src/stacks/stackfile.h stores them, with
 * elfutils (libdwfl): the function, the functions inlined into it at that address, and file:line
 * when debug information exists. Per module, the first of these that fits is used:
 *   1. the file at the module's path, when its build-id matches the one captured (or none was);
 *   2. <debug_dir>/.build-id/xx/yyyy.debug (the file changed or is gone: the debug file alone
 *      has the symbols and lines);
 *   3. nothing: frames show as `name+0xVADDR`.
 * Debug information for the file of 1. is found by libdwfl's standard search: .gnu_debuglink
 * beside the file, in its .debug/ and under debug_dir, and the build-id path (checked against
 * the build-id). Without DWARF, names come from .symtab, else .dynsym (also from a separate
 * debug file or .gnu_debugdata).
 * Every frame is a return address: the call is looked up at vaddr - 1. Results are cached per
 * (module, vaddr).
 */
#ifndef MEMTRACK_SYMBOLS_H
#define MEMTRACK_SYMBOLS_H

#include <stdbool.h>
#include <stdint.h>
#include "stacks/stackfile.h"

/* One function of a frame: the physical one or one inlined into it. */
struct sym_line {
	const char *func; /* demangled; never NULL (`module+0xVADDR` or `[unknown]` at worst) */
	const char *file; /* source file, NULL when unknown */
	uint32_t line;	  /* 0 when unknown */
};

/* One frame, symbolised. */
struct sym_loc {
	uint32_t module; /* stackfile module id; 0: outside every module */
	uint64_t vaddr;	 /* as captured (the return address) */
	uint32_t nr;	 /* >= 1: lines[0] is the innermost inlined function, lines[nr - 1] the
			  * function the code belongs to (the caller of the rest) */
	struct sym_line *lines;
	bool found; /* a function name was found (not a `module+0x...` fallback) */
};

struct sym_opts {
	const char *debug_dir; /* NULL: /usr/lib/debug */
};

struct symbolizer;

/* sf must outlive s. 0 or -ENOMEM. */
int symbolizer__new(struct symbolizer **s, const struct stackfile *sf, const struct sym_opts *o);
void symbolizer__free(struct symbolizer *s); /* NULL-safe */
/* The frame (module, vaddr); NULL only when out of memory. Valid until symbolizer__free. */
const struct sym_loc *symbolizer__lookup(struct symbolizer *s, uint32_t module, uint64_t vaddr);
/* How a module was opened: "file", "build-id debug file", "none" (after its first lookup). */
const char *symbolizer__module_source(struct symbolizer *s, uint32_t module);

#endif
