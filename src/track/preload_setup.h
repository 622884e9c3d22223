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
#include <sys/types.h>
#include "artifact/manifest.h"
#include "track/shm_source.h"

enum alloc_hooks {
	ALLOC_HOOKS_UPROBE = 0, /* every allocator through uprobes (the default for now) */
	ALLOC_HOOKS_PRELOAD, /* glibc and libstdc++ through the interposer, the rest uprobes */
	ALLOC_HOOKS_AUTO, /* for now: preload when it can be set up, else uprobe */
};

struct preload_setup {
	bool on;
	char lib[PATH_MAX];
	dev_t dev; /* the interposer's file: never probed itself */
	ino_t ino;
	struct shm_source *shm;
};

/* Parses "auto", "preload", "uprobe"; -EINVAL otherwise. */
int preload_setup__parse(const char *s, enum alloc_hooks *out);
/* Finds the library, creates the shared memory, sets LD_PRELOAD and $MEMTRACK_PRELOAD_SHM in
 * our environment. Returns 0 or -errno; with `auto`, a failure leaves p->on false. */
int preload_setup__start(struct preload_setup *p, enum alloc_hooks mode);
/* Per process: which mechanism served its allocator families (after heap_acct__fill). */
void preload_setup__fill(const struct preload_setup *p, struct manifest *m, bool libc_probed);
void preload_setup__close(struct preload_setup *p);

#endif
