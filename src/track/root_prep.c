// SPDX-License-Identifier: MIT
/*
 * Seen from memtrack's own root and environment, which the child inherits. When the key
 * differs from the kernel's view (a stacked file system), the exec stops as for any new
 * executable, and finds the libraries attached already.
 */
#include <errno.h>
#include <libelf.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "bpf/proc.h"
#include "common/log.h"
#include "track/root_prep.h"
#include "track/spawn.h"

int root_prep__exe_key(const char *path, uint64_t *key)
{
	struct stat st;

	if (stat(path, &st))
		return -errno;
	*key =
	    mt_exe_key(mt_kernel_dev(major(st.st_dev), minor(st.st_dev)), st.st_ino,
		       (uint64_t)st.st_ctim.tv_sec * 1000000000ull + (uint64_t)st.st_ctim.tv_nsec,
		       (uint64_t)st.st_size);
	return 0;
}

static void *root_prep__run(void *arg)
{
	struct root_prep *rp = arg;
	char *exe = rp->exe;
	int err;

	if (spawn__resolve(rp->argv0, exe, sizeof(rp->exe)))
		return NULL; /* the exec will fail and say so */
	err = libs__inspect_exe(rp->libs, "", exe, getenv("LD_LIBRARY_PATH"), getenv("LD_PRELOAD"));
	if (err < 0)
		log__debug(LOG_NORMAL, "cannot inspect '%s' before its exec: %s", exe, strerror(-err));
	else if (libs__exe_loader(rp->libs)) /* `ld.so PROGRAM`: judged at its exec's stop */
		rp->known = false;
	else
		rp->known = !root_prep__exe_key(exe, &rp->key);
	return NULL;
}

int root_prep__start(struct root_prep *rp, struct libs *libs, const char *argv0)
{
	int err;

	memset(rp, 0, sizeof(*rp));
	rp->libs = libs;
	rp->argv0 = argv0;
	elf_version(EV_CURRENT); /* libelf's global state, set before two threads use it */
	err = pthread_create(&rp->thread, NULL, root_prep__run, rp);
	rp->running = !err;
	if (err)
		root_prep__run(rp);
	return 0;
}

void root_prep__join(struct root_prep *rp)
{
	if (rp->running)
		pthread_join(rp->thread, NULL);
	rp->running = false;
}
