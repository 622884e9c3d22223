/* SPDX-License-Identifier: MIT */
/*
 * libs' state, shared by libs.c (files inspected, their sites attached) and libs_proc.c (a
 * running process's image: its environment, the memo of inspections, its maps). Not for other
 * modules: they use libs.h.
 */
#ifndef MEMTRACK_LIBS_PRIV_H
#define MEMTRACK_LIBS_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include "track/libs.h"
#include "track/usdt.h"

struct lib_entry {
	struct libs_file_id id; /* dev, ino and what tells a rewritten file (libs__each_seen) */
	/* found at a dlopen stop with nothing to attach: no allocator entry point, no memtrack
	 * probe (libs__each_inert) */
	bool inert_dl;
	unsigned kinds; /* its bit of libs__kinds */
	char *path;	/* what was opened and attached to (maybe through /proc/PID/...) */
	char *name;	/* what the manifest shows, when path does not say it: NULL otherwise */
	enum alloc_kind kind;
	int sites;
	int sites_max; /* the most attached at once: what the manifest lists (libs__fill) */
	struct alloc_site *pending; /* sites found before libs__bind: attached there */
	struct usdt_site *usdt;	    /* include/memtrack.h probes not attached yet (usdt.h) */
	int nr_usdt;
	/* auto: the allocator sites of glibc, libstdc++ or a family library an exec maps, kept
	 * for libs__attach_glibc (and kept while attached, for the next one after a detach) */
	struct alloc_site *later;
	int nr_later;
	int fd; /* once sites were kept back: the file (O_PATH) until libs__free, else -1 */
	bool malloc_def; /* defines malloc */
	bool static_cxx; /* LIBS_KIND_STATIC_CXX */
	/* jemalloc, mimalloc or tcmalloc, with the symbol the interposer knows it by
	 * (preload_families.c: mallocx, mi_malloc, tc_malloc) */
	bool fam_mark;
	/* the link group its kept-back sites go in with glibc's (attach_set__group): glibc's
	 * (LIBS_GROUP_GLIBC) or, for a jemalloc, mimalloc or tcmalloc, its own, so that it can
	 * stay in when glibc's go out (libs__family_dlopened); 0 when none is kept back */
	uint8_t group;
};

/* An executable's inspection, by what decides its outcome: the file, the root it is seen from,
 * the loader's environment. An exec of the same again finds every file seen already; only
 * the verdict is needed (auto mode judges every exec): all of what libs__kinds and
 * libs__exe_malloc read. A hit restores the whole of it: one part left from the last
 * inspection, another executable's, misjudged (an executable defining malloc inspected in
 * between made an `env -i` program's next exec "glibc's dlopen stop only", its calls lost). */
struct libs_memo {
	struct libs_file_id exe; /* the whole identity: a file rewritten is another (libs__seen) */
	dev_t rdev;
	ino_t rino;
	/* the mount namespace: the same root may show other files in another (bind mounts) */
	ino_t mntns;
	char *ld_path, *ld_pre; /* NULL when unset */
	unsigned kinds;
	bool exe_malloc, lib_family, fam_malloc;
};

struct libs {
	struct attach_set *set;
	struct libs_memo *memo;
	size_t nr_memo, cap_memo;
	struct lib_entry *v; /* every file inspected, allocator or not: inspected once */
	size_t nr, cap;
	uint64_t attach_ns;
	uint64_t attaches; /* attaches of sites to a file tried (libs__attaches) */
	bool preload;	   /* libs__preload */
	bool defer;	   /* auto: glibc's and libstdc++'s sites wait for libs__attach_glibc */
	bool glibc_on;	   /* libs__attach_glibc was called, and no libs__detach_glibc since */
	bool glibc_used;   /* libs__attach_glibc was called */
	uint32_t glibc_gen; /* the generation of glibc's links in (or last in); 0: none yet */
	bool dlopen_on;	   /* libs__attach_glibc_dlopen was called: glibc's dlopen stop is in */
	bool loading;	   /* inspecting what an exec maps (not a dlopen) */
	int (*pl_gate)(void *ctx); /* libs__set_pl_gate; NULL once passed */
	void *pl_ctx;
	dev_t pre_dev;
	ino_t pre_ino;
	unsigned kinds; /* of the last inspection (libs__kinds) */
	/* the last exec's inspection, in the loader's lookup order (deps.h), the interposer and
	 * the executable left out: */
	long first_malloc; /* of v, -1 if none: the first file defining malloc, the process's */
	int nr_fam;	   /* files of the jemalloc, mimalloc or tcmalloc kind */
	bool pre_seen;	   /* the interposer was met in this inspection (lookup order) */
	bool malloc_first; /* a file defining malloc comes before the interposer: the
			    * interposer's malloc is not the program's, it serves nothing */
	bool exe_malloc;   /* the executable defines malloc (libs__exe_malloc) */
	/* the first library defining malloc, the process's, is a jemalloc, mimalloc or tcmalloc
	 * (libs__fam_malloc) */
	bool fam_malloc;
	bool exe_loader; /* the last libs__inspect_pid's executable is the loader (libs__exe_loader)
			  */
	bool lib_family;   /* a library (not the executable) of a jemalloc/mimalloc/tcmalloc kind */
	uint8_t last_group; /* the last link group given to a family file (lib_entry.group) */
	unsigned dl_served; /* libs__inspect_maps' process: what the interposer serves there */
};

/* Inspects path (name: what the manifest shows, NULL for path itself), attaching or keeping its
 * sites; the executable's when is_exe. Returns the sites added, or -errno. */
int libs__attach_file(struct libs *l, const char *path, const char *name, bool is_exe);
/* Inspects exe and what the loader would map with it, seen from root (exe_name: what to call
 * exe in the manifest, NULL for exe itself); sets l->kinds. Returns the sites added or -errno. */
int libs__inspect(struct libs *l, const char *root, const char *exe, const char *exe_name,
		  const char *ld_path, const char *ld_pre);
/* The attach set's group of glibc's probes in auto mode (libs__attach_glibc): taken out again
 * by libs__detach_glibc */
#define LIBS_GROUP_GLIBC 1
/* ... and the groups of the family files kept back with them, one each (lib_entry.group) */
#define LIBS_GROUP_FAMILY 2
/* Attaches n sites of e's file; e->sites counts them already. */
int libs__attach_sites(struct libs *l, struct lib_entry *e, const struct alloc_site *sites, int n);
/* Keeps sites[n] in *dst (have there already) for a later attach, e's file held open. */
int libs__keep(struct lib_entry *e, struct alloc_site **dst, int have,
	       const struct alloc_site *sites, int n);
/* Moves the dlopen sites (MT_SPEC_DLOPEN) of sites[n] to the front, in order. Their count. */
int libs__dlopen_first(struct alloc_site *sites, int n);
/* Attaches e's kept-back sites in its group (libs_glibc.c). 0 or -errno. */
int libs__attach_later(struct libs *l, struct lib_entry *e);
/* A file's identity from its stat (libs.c). */
struct libs_file_id libs__file_id(const struct stat *st);
/* Frees the memo of inspections (libs_proc.c). */
void libs__memo_free(struct libs *l);

#endif
