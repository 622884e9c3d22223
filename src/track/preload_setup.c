// SPDX-License-Identifier: MIT
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/log.h"
#include "track/preload_setup.h"

#define PRELOAD_NAME "libmemtrack-preload.so"
/* Rings: 1024 threads alive at once, 16,384 records (768 KiB) each: a sparse 768 MiB file
 * that costs what the threads write. More threads than slots: their records are dropped and
 * counted (manifest drops.no_slot). */
#define PRELOAD_SLOTS 1024
#define PRELOAD_RECORDS 16384

int preload_setup__parse(const char *s, enum alloc_hooks *out)
{
	static const char *const names[] = {"uprobe", "preload", "auto"};

	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum alloc_hooks)i;
			return 0;
		}
	return -EINVAL;
}

/* $MEMTRACK_PRELOAD_LIB, else beside the executable (build/), else ../lib/memtrack/. */
static int preload_setup__find(struct preload_setup *p)
{
	const char *env = getenv("MEMTRACK_PRELOAD_LIB");
	char self[PATH_MAX], *dir;
	struct stat st;
	ssize_t n;

	if (env && *env) {
		snprintf(p->lib, sizeof(p->lib), "%s", env);
	} else {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0)
			return -errno;
		self[n] = 0;
		dir = dirname(self);
		snprintf(p->lib, sizeof(p->lib), "%s/" PRELOAD_NAME, dir);
		if (access(p->lib, R_OK))
			snprintf(p->lib, sizeof(p->lib), "%s/../lib/memtrack/" PRELOAD_NAME, dir);
	}
	if (stat(p->lib, &st))
		return -errno;
	if (realpath(p->lib, self)) /* bin/../lib/memtrack/x: say it plainly */
		snprintf(p->lib, sizeof(p->lib), "%s", self);
	/* LD_PRELOAD separates with spaces and colons */
	if (p->lib[0] != '/' || strpbrk(p->lib, ": \t"))
		return -EINVAL;
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	return 0;
}

int preload_setup__start(struct preload_setup *p, enum alloc_hooks mode)
{
	const char *u = getenv("SUDO_UID"), *g = getenv("SUDO_GID"), *old;
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	char *pre;
	int err;

	memset(p, 0, sizeof(*p));
	if (mode == ALLOC_HOOKS_UPROBE)
		return 0;
	err = preload_setup__find(p);
	if (err) {
		log__error("cannot use the allocator interposer '%s': %s. Set MEMTRACK_PRELOAD_LIB, "
			   "or use --alloc-hooks uprobe",
			   p->lib[0] ? p->lib : PRELOAD_NAME, strerror(-err));
		goto fail;
	}
	if (u && g && geteuid() == 0) { /* the command will run as the invoking user */
		uid = (uid_t)strtoul(u, NULL, 10);
		gid = (gid_t)strtoul(g, NULL, 10);
	}
	err = shm_source__new(&p->shm, PRELOAD_SLOTS, PRELOAD_RECORDS, uid, gid, NULL);
	if (err) {
		log__error("cannot create the interposer's shared memory in /dev/shm: %s. Use "
			   "--alloc-hooks uprobe",
			   strerror(-err));
		goto fail;
	}
	old = getenv("LD_PRELOAD");
	if (asprintf(&pre, "%s%s%s", p->lib, old && *old ? ":" : "", old && *old ? old : "") < 0) {
		err = -ENOMEM;
		goto fail;
	}
	if (setenv("LD_PRELOAD", pre, 1) || setenv(MT_SHM_ENV, shm_source__path(p->shm), 1)) {
		err = -errno;
		free(pre);
		goto fail;
	}
	free(pre);
	p->on = true;
	log__debug(1, "alloc hooks: preload (%s, %s)", p->lib, shm_source__path(p->shm));
	return 0;
fail:
	preload_setup__close(p);
	if (p->shm)
		shm_source__src(p->shm)->destroy(shm_source__src(p->shm));
	p->shm = NULL;
	return mode == ALLOC_HOOKS_AUTO ? 0 : err;
}

void preload_setup__fill(const struct preload_setup *p, struct manifest *m, bool libc_probed)
{
	uint8_t probed = libc_probed ? MANIFEST_HOOKS_UPROBE : MANIFEST_HOOKS_NONE;

	for (uint32_t i = 0; i < m->nr_procs; i++) {
		int f = p->on ? shm_source__proc_flags(p->shm, m->procs[i].pid) : -1;

		m->procs[i].hooks_libc =
		    f >= 0 && (f & MT_SHM_PROC_LIBC) ? MANIFEST_HOOKS_PRELOAD : probed;
		m->procs[i].hooks_cxx =
		    f >= 0 && (f & MT_SHM_PROC_CXX) ? MANIFEST_HOOKS_PRELOAD : probed;
		if (f >= 0 && (f & MT_SHM_PROC_JEMALLOC))
			m->procs[i].hooks_jemalloc = MANIFEST_HOOKS_PRELOAD;
		if (f >= 0 && (f & MT_SHM_PROC_MIMALLOC))
			m->procs[i].hooks_mimalloc = MANIFEST_HOOKS_PRELOAD;
		if (f >= 0 && (f & MT_SHM_PROC_TCMALLOC))
			m->procs[i].hooks_tcmalloc = MANIFEST_HOOKS_PRELOAD;
	}
}

void preload_setup__close(struct preload_setup *p)
{
	if (p->shm)
		shm_source__close(p->shm);
}
