/* SPDX-License-Identifier: MIT */
/* Temporary directories for tests: made under /tmp, removed with everything in them. */
#ifndef MT_TMPDIR_H
#define MT_TMPDIR_H

#include <stddef.h>

/* Makes /tmp/memtrack-test-NAME-XXXXXX into dir (cap bytes); 0 or -errno. */
int mt_tmpdir_make(char *dir, size_t cap, const char *name);
/* Removes dir and everything under it, without following symlinks; NULL and "" are no-ops.
 * 0 or -errno of the first failure. */
int mt_tmpdir_remove(const char *dir);
/* Copies build/targets/NAME to dir/NAME (its path into out), set-group-id to nogroup: run by
 * root, its exec is secure (AT_SECURE: egid != gid) and ld.so ignores LD_PRELOAD's paths.
 * 0 or -errno. */
int mt_tmpdir_setgid_copy(const char *dir, const char *name, char *out, size_t cap);

#endif
