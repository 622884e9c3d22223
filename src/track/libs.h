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
/* The interposer (dev, ino) serves glibc's and libstdc++'s entry points; it is never probed
 * itself. Preload mode (defer false): those libraries get no allocator probes (libc keeps its
 * dlopen stop). Auto mode (defer true): their sites, dlopen included, wait until a process
 * that the interposer cannot serve needs them (libs__attach_glibc); so do those of a shared
 * jemalloc, mimalloc or tcmalloc an exec maps (which the interposer serves when it is the
 * process's malloc); the interposer announces a served process's dlopens itself
 * (src/preload/preload_dl.c). */
void libs__preload(struct libs *l, dev_t dev, ino_t ino, bool defer);
/* Attaches the sites kept back so far (auto: glibc's, libstdc++'s, the shared families'), and
 * every later one at once, until libs__detach_glibc.
 * Returns the number of libraries attached, or -errno. */
int libs__attach_glibc(struct libs *l);
struct attach_taken;
/* Auto mode: takes out what libs__attach_glibc attached (the sites are kept back again, for
 * its next call) into *out, for attach_taken__close. The number of links, or -errno. */
int libs__detach_glibc(struct libs *l, struct attach_taken **out);
/* The generation the links of libs__attach_glibc carry (probe_spec.h, MT_COOKIE_GEN): set it
 * in stop_ctl[13] before the call, and links taken out before, still closing, do nothing. */
uint32_t libs__glibc_next_gen(const struct libs *l);
/* Before the run's first libs__attach_glibc: its generations follow last (one above any an
 * earlier run's links may carry, tracker__glibc_attach). */
void libs__glibc_gen_after(struct libs *l, uint32_t last);
/* Are links without a generation among those libs__detach_glibc would take out (a shared
 * family's, which can be kept for good)? Those still closing would run beside new ones. */
bool libs__glibc_untagged(const struct libs *l);
/* Auto mode: attaches only glibc's dlopen stop kept back so far, and every later one at once;
 * the allocator sites wait on (libs__attach_glibc). For a process whose executable defines
 * malloc (libs__exe_malloc): the loader binds every malloc, calloc, free... of the process,
 * glibc's own calls and libstdc++'s operator new included, to the executable's, which has its
 * own probes; glibc's allocator entry points are never reached there. Returns the number of
 * libraries attached, or -errno. */
int libs__attach_glibc_dlopen(struct libs *l);
/* The last inspection's executable defines malloc, and no library of a jemalloc, mimalloc or
 * tcmalloc kind comes with it (whose own entry points, mallocx..., wait with glibc's). */
bool libs__exe_malloc(const struct libs *l);
/* gate is called (until it returns 0) before the first uprobe sites that skip the processes
 * the interposer serves (MT_SPEC_PL) are attached: their skipping needs its control link. */
void libs__set_pl_gate(struct libs *l, int (*gate)(void *ctx), void *ctx);
bool libs__glibc_attached(const struct libs *l);
/* Were glibc's probes attached at any time of the run? */
bool libs__glibc_used(const struct libs *l);
/* A library other than glibc's libc.so that defines malloc as glibc does (another interposer,
 * such as a counting LD_PRELOAD library): the interposer forwards to it (libs__kinds). */
#define LIBS_KIND_MALLOC_SHIM (1u << 31)
/* In place of its family's bit: the process's malloc is a shared jemalloc, mimalloc or
 * tcmalloc that an exec maps, which the interposer serves (src/preload/preload_families.c). */
#define LIBS_KIND_SERVED_FAMILY (1u << 30)
/* In place of ALLOC_STATIC's bit: an executable whose own allocator is C++'s operator new and
 * delete only, linked in with a static libstdc++ (gcc's cc1plus), not the C entry points. Its
 * operators call the process's malloc, which the interposer serves: in a served process their
 * calls are recorded there (the sites skip it, MT_SPEC_PL), so auto mode attaches its sites
 * only with glibc's (libs__attach_glibc) and preload mode never, as for libstdc++.so. */
#define LIBS_KIND_STATIC_CXX (1u << 29)
/* Bit (1 << enum alloc_kind) of every file of the last inspection (libs__inspect_*), the
 * interposer left out; LIBS_KIND_MALLOC_SHIM and LIBS_KIND_SERVED_FAMILY too. */
unsigned libs__kinds(const struct libs *l);
/* How many times allocator sites were to be attached to a file so far, failures included: moves
 * when an inspection attached something, or tried (a process running meanwhile, or gone by
 * then, may have made calls before any probe was in). */
uint64_t libs__attaches(const struct libs *l);
/* Attaches every library inspected before, and any later, through set. Returns 0 or -errno. */
int libs__bind(struct libs *l, struct attach_set *set);
/* Resolves what pid's (just exec'd) executable maps and attaches to every allocator in it not
 * attached yet. Returns the number of libraries newly attached, or -errno. */
int libs__inspect_pid(struct libs *l, pid_t pid);
/* Was that executable the loader run as a program (`ld.so PROGRAM`)? Then the program was
 * inspected, and the loader's file must not be marked known (known_exe): it runs any program. */
bool libs__exe_loader(const struct libs *l);
/* Is the last inspection's malloc (the first library defining it) a jemalloc, mimalloc or
 * tcmalloc? Its calls, glibc's own included, go to that library, whose sites uprobes take. */
bool libs__fam_malloc(const struct libs *l);
/* The same for an executable file seen from root ("" = our own view), with the loader's
 * environment given (either may be NULL); used before the exec, e.g. by memtrack-floor. */
int libs__inspect_exe(struct libs *l, const char *root, const char *exe, const char *ld_path,
		      const char *ld_pre);
/* Attaches to every allocator among the files pid maps executable now (after a dlopen);
 * served: what the interposer serves in pid (mt_proc.served's bits, bpf/proc.h; 0: nothing).
 * Returns the number newly attached, or -errno. */
int libs__inspect_maps(struct libs *l, pid_t pid, unsigned served);
/* A file as stat(2) tells it: device, inode, size, modification and change times (ns). */
struct libs_file_id {
	uint64_t dev, ino, size, mtime_ns, ctime_ns;
};
/* Calls fn for each file inspected since *next (then moves *next past them) once the library
 * set is bound: a later inspection of pid's maps (libs__inspect_maps) has nothing to do for
 * such a file, whoever maps it. Before libs__bind, nothing (their sites wait to attach). */
void libs__each_seen(const struct libs *l, size_t *next,
		     void (*fn)(void *ctx, const struct libs_file_id *f), void *ctx);
/* Calls fn for each file a dlopen stop found inert (no allocator entry point, no memtrack
 * probe): one a later run's dlopen stop would find nothing to do for either. */
void libs__each_inert(const struct libs *l, void (*fn)(void *ctx, const struct libs_file_id *f),
		      void *ctx);
/* Copies the attached libraries into the manifest (allocated: the manifest's, freed by
 * manifest__free). */
int libs__fill(const struct libs *l, struct manifest *m);
uint64_t libs__attach_ns(const struct libs *l); /* time spent attaching, ns */
void libs__free(struct libs *l);

#endif
