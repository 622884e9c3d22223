// SPDX-License-Identifier: MIT
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include "mt_tmpdir.h"

int mt_tmpdir_make(char *dir, size_t cap, const char *name)
{
	int n = snprintf(dir, cap, "/tmp/memtrack-test-%s-XXXXXX", name);

	if (n < 0 || (size_t)n >= cap)
		return -ENAMETOOLONG;
	return mkdtemp(dir) ? 0 : -errno;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) ? -errno : 0;
}

int mt_tmpdir_remove(const char *dir)
{
	if (!dir || !*dir)
		return 0;
	/* depth first, so a directory is empty when its turn comes; FTW_PHYS: links are removed,
	 * never followed */
	return nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}
