/* SPDX-License-Identifier: MIT */
/* Temporary directories for tests: made under /tmp, removed with everything in them. */
#ifndef MT_TMPDIR_H
#define MT_TMPDIR_H

#include <stddef.h>
#include <sys/types.h>

/* Makes /tmp/memtrack-test-NAME-XXXXXX into dir (cap bytes); 0 or -errno. */
int mt_tmpdir_make(char *dir, size_t cap, const char *name);
/* Removes dir and everything under it, without following symlinks; NULL and "" are no-ops.
 * 0 or -errno of the first failure. */
int mt_tmpdir_remove(const char *dir);
/* Copies build/targets/NAME to dir/NAME (its path into out), set-group-id to nogroup: run by
 * root, its exec is secure (AT_SECURE: egid != gid) and ld.so ignores LD_PRELOAD's paths.
 * 0 or -errno. */
int mt_tmpdir_setgid_copy(const char *dir, const char *name, char *out, size_t cap);
/* Copies build/targets/NAME to dir/AS (NAME when AS is NULL; its path into out), owned by root
 * and group gid, with mode (set-id bits included). 0 or -errno. */
int mt_tmpdir_copy(const char *dir, const char *name, const char *as, gid_t gid, mode_t mode,
		   char *out, size_t cap);
/* dir made 0755 and build/targets/NAME copied there 0755: another user (nobody) may run it,
 * who may not reach the build tree. 0 or -errno. */
int mt_tmpdir_public_copy(const char *dir, const char *name, char *out, size_t cap);

#endif
