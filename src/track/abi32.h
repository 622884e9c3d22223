/* SPDX-License-Identifier: MIT */
/*
 * 32-bit (i386) programs, served by the i386 interposer (libmemtrack-preld32.so, built beside
 * libmemtrack-preload.so where the compiler links 32-bit code). The environment names the
 * 64-bit interposer, which an i386 loader refuses ("wrong ELF class"); so when an i386 program
 * stops at its exec (its executable is never marked known: every exec of it stops), before its
 * loader has run, memtrack rewrites that name in its environment, in place, to the i386 one:
 * the two paths have the same length and differ only in the file name. The loader then loads
 * the i386 interposer, which writes the same records into the same shared memory (the layouts
 * are the same in both ABIs: events.h's 8-byte-aligned integers). A 64-bit program exec'd by it
 * inherits the i386 name: at its own exec stop the name is put back.
 *
 * Each image rewritten is expected to register with the interposer as served; at the end, one
 * that did not (its loader failed, it passed through) counts in drops.abi like a 32-bit image
 * memtrack could not serve at all: static ones, secure-exec ones, ones not stopped at their
 * exec, and every one in uprobe mode (the BPF programs read x86-64 registers).
 */
#ifndef MEMTRACK_ABI32_H
#define MEMTRACK_ABI32_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct abi32 {
	char lib[PATH_MAX]; /* the i386 interposer; "" when there is none */
	char lib64[PATH_MAX];
	size_t name_off; /* where the file name starts, in both paths */
	bool rewrote;	 /* an environment of the tree names lib now */
	struct abi32_image {
		pid_t pid;
		uint64_t ts; /* the exec's stop record */
		bool served;
	} * want;
	size_t nr_want, cap_want;
};

/* Finds the i386 interposer beside lib64 (the 64-bit one's path). Nothing found is no error. */
void abi32__init(struct abi32 *a, const char *lib64);
/* Is the program at path an i386 executable with a loader (PT_INTERP)? */
bool abi32__dynamic_i386(const char *path);
/* In pid's environment (stopped at its exec, its loader not run yet), replaces the name of one
 * interposer in LD_PRELOAD with the other's (to32: the i386 one). With shm (to32 only): only
 * when the environment also names that shared memory ($MEMTRACK_PRELOAD_SHM). 1 when the
 * environment names the wanted interposer now (and shm), 0 when not, -errno. */
int abi32__rewrite(struct abi32 *a, pid_t pid, bool to32, const char *shm);
/* Remembers that pid's image, stopped at ts, should register as served. 0 or -ENOMEM. */
int abi32__expect(struct abi32 *a, pid_t pid, uint64_t ts);
/* A registration (shm_source__each_proc's callback; ctx: the struct abi32). */
void abi32__registered(void *ctx, int32_t pid, uint64_t ts, uint32_t flags);
/* The images expected to register that did not; logs them. */
uint64_t abi32__unserved(const struct abi32 *a);
void abi32__free(struct abi32 *a);

#endif
