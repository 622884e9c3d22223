/* SPDX-License-Identifier: MIT */
/*
 * --alloc-hooks preload: the interposer (build/libmemtrack-preload.so, installed as
 * PREFIX/lib/memtrack/libmemtrack-preload.so) injected through LD_PRELOAD, its shared memory
 * read as a second event source. Set up before the command is forked: the child inherits the
 * environment (the user's own LD_PRELOAD kept after ours, and $MEMTRACK_PRELOAD_SHM).
 */
#ifndef MEMTRACK_PRELOAD_SETUP_H
#define MEMTRACK_PRELOAD_SETUP_H

#include <limits.h>
#include <stdbool.h>
#include "track/alloc_table.h"
#include "track/libs.h"
#include <sys/types.h>
#include "artifact/manifest.h"
#include "track/shm_source.h"

enum alloc_hooks {
	ALLOC_HOOKS_UPROBE = 0, /* every allocator through uprobes */
	ALLOC_HOOKS_PRELOAD,	/* glibc and libstdc++ through the interposer, the rest uprobes */
	ALLOC_HOOKS_AUTO, /* per process: the interposer where it records, uprobes elsewhere */
};

/* Allocators the interposer forwards to instead of recording (preload_ring.c, pl_next_is_libc):
 * a non-glibc allocator among the libraries, or one linked into the executable. Bits of
 * libs__kinds. */
#define PRELOAD_OTHER_ALLOCATORS                                                                   \
	(1u << ALLOC_JEMALLOC | 1u << ALLOC_MIMALLOC | 1u << ALLOC_TCMALLOC | 1u << ALLOC_STATIC | \
	 LIBS_KIND_MALLOC_SHIM)

struct preload_setup {
	bool on;
	bool autom; /* --alloc-hooks auto (and on) */
	char lib[PATH_MAX];
	dev_t dev; /* the interposer's file: never probed itself */
	ino_t ino;
	ino_t pidns_ino; /* memtrack's pid namespace: the interposer serves no other (0: unknown) */
	ino_t mntns_ino; /* memtrack's mount namespace (0: unknown) */
	dev_t shm_dev;	 /* the shared memory's file, as seen from our root */
	ino_t shm_ino;
	struct shm_source *shm;
	uid_t shm_uid; /* the shared memory's owner: the invoking user under sudo, else ours */
	/* the command's LD_PRELOAD, MEMTRACK_PRELOAD_SHM and LD_LIBRARY_PATH (mt_env_value, enum
	 * mt_env_var): an exec in that environment may be judged by the BPF side */
	uint64_t env_root[3];
	/* auto: each judgement at an exec stop, in order: whether the image needs uprobes, and
	 * its libs__kinds (the manifest's labels come from a process's last one: a family
	 * library's bit makes its family `uprobe`) */
	struct preload_probed {
		pid_t pid;
		unsigned kinds;
		bool probed;
	} *probed;
	size_t nr_probed, cap_probed;
};

/* Parses "auto", "preload", "uprobe"; -EINVAL otherwise. */
int preload_setup__parse(const char *s, enum alloc_hooks *out);
/* Finds the library, creates the shared memory, sets LD_PRELOAD and $MEMTRACK_PRELOAD_SHM in
 * our environment. pidns_ino: memtrack's pid namespace (pidns.h), the only one the interposer
 * serves. Returns 0 or -errno; with `auto`, a failure leaves p->on false. */
int preload_setup__start(struct preload_setup *p, enum alloc_hooks mode, uint64_t pidns_ino);
/* The manifest's mechanisms.alloc_hooks: "auto", "preload" or "uprobe" (what was set up). */
const char *preload_setup__mode_name(const struct preload_setup *p);
/* Per process: which mechanism served its allocator families (after heap_acct__fill). */
void preload_setup__fill(const struct preload_setup *p, struct manifest *m, bool libc_probed);
void preload_setup__close(struct preload_setup *p);

/* Auto mode, at the exec stop of pid (kinds: libs__kinds of its image): will its glibc calls
 * need the uprobes? True when it maps glibc and the interposer will not record them: it is
 * not set up, another allocator serves the process (the interposer forwards), the exec is
 * secure (AT_SECURE), or its environment lost our LD_PRELOAD or shared memory. The
 * interposer's own registration stays authoritative (served.bpf.c): this only decides
 * whether the probes must be there before the process runs. */
/* Is our interposer in pid's LD_PRELOAD (the same file, seen from its root) and our shared
 * memory in its MEMTRACK_PRELOAD_SHM? */
bool preload_setup__env_reaches(const struct preload_setup *p, pid_t pid);
/* Is our shared memory, as named in its environment, the same file seen from pid's root? Asked
 * of a process in another mount namespace (MT_EXEC_OTHER_MNTNS): its /dev/shm may be another. */
bool preload_setup__shm_reaches(const struct preload_setup *p, pid_t pid);
bool preload_setup__needs_probes(const struct preload_setup *p, pid_t pid, unsigned kinds);
/* Preload mode: does pid's new image go unserved without the interposer saying so (not in its
 * LD_PRELOAD, a secure exec: the loader does not load it; another pid namespace: it leaves)?
 * Where it loads but cannot map our shared memory it refuses, and that is counted already. */
bool preload_setup__leaves_silently(const struct preload_setup *p, pid_t pid);
/* Is pid, stopped at its exec, where the command would be: the command's LD_PRELOAD,
 * MEMTRACK_PRELOAD_SHM and LD_LIBRARY_PATH (env_root), each set once, our root directory and
 * pid namespace, not a secure exec? What the BPF side checks before it judges an exec of an
 * executable judged here (src/bpf/exec_judge.bpf.c): only the file decides then. */
bool preload_setup__like_root(const struct preload_setup *p, pid_t pid);
/* Could the i386 interposer serve pid, an i386 process stopped at its exec (abi32.h)? Its exec
 * is not secure, it is in our pid namespace (its environment: abi32__prepare). */
bool preload_setup__serves_i386(const struct preload_setup *p, pid_t pid);
/* Remembers whether pid's new image (kinds: its libs__kinds) is served by uprobes
 * (preload_setup__fill); a later call for the same pid (its next exec) replaces it. */
void preload_setup__mark_probed(struct preload_setup *p, pid_t pid, unsigned kinds, bool probed);
/* The same for the root command before its exec, from its file (set-id bits, capabilities). */
bool preload_setup__root_needs_probes(const struct preload_setup *p, const char *exe,
				      unsigned kinds);
/* Is exe set-id, or does it carry file capabilities (its exec may be secure)? */
bool preload_setup__root_setid(const char *exe);

#endif
