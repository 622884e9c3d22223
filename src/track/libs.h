/* SPDX-License-Identifier: MIT */
/* The allocator libraries of the tracked tree: found at each new exec, attached once each. */
#ifndef MEMTRACK_LIBS_H
#define MEMTRACK_LIBS_H

#include <sys/types.h>
#include "artifact/manifest.h"
#include "track/attach.h"

struct libs;

/* set may be NULL: libraries are then inspected (ELF work only, no BPF object needed, so it can
 * run on another thread while the programs load) and attached by libs__bind. */
int libs__new(struct libs **l, struct attach_set *set);
/* Preload mode: the interposer (dev, ino) serves glibc's and libstdc++'s entry points, so
 * those libraries get no allocator probes (libc keeps its dlopen stop), and the interposer
 * itself is never probed. */
void libs__preload(struct libs *l, dev_t dev, ino_t ino);
/* Attaches every library inspected before, and any later, through set. Returns 0 or -errno. */
int libs__bind(struct libs *l, struct attach_set *set);
/* Resolves what pid's (just exec'd) executable maps and attaches to every allocator in it not
 * attached yet. Returns the number of libraries newly attached, or -errno. */
int libs__inspect_pid(struct libs *l, pid_t pid);
/* The same for an executable file seen from root ("" = our own view), with the loader's
 * environment given (either may be NULL); used before the exec, e.g. by memtrack-floor. */
int libs__inspect_exe(struct libs *l, const char *root, const char *exe, const char *ld_path,
		      const char *ld_pre);
/* Attaches to every allocator among the files pid maps executable now (after a dlopen).
 * Returns the number newly attached, or -errno. */
int libs__inspect_maps(struct libs *l, pid_t pid);
/* Copies the attached libraries into the manifest (allocated: the manifest's, freed by
 * manifest__free). */
int libs__fill(const struct libs *l, struct manifest *m);
uint64_t libs__attach_ns(const struct libs *l); /* time spent attaching, ns */
void libs__free(struct libs *l);

#endif
