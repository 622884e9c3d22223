// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>
#include "mt_harness.h"
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

int mt_tmpdir_copy(const char *dir, const char *name, const char *as, gid_t gid, mode_t mode,
		   char *out, size_t cap)
{
	int in = open(mt_target(name), O_RDONLY | O_CLOEXEC), fd = -1, err = 0;
	struct stat st;

	snprintf(out, cap, "%s/%s", dir, as ? as : name);
	if (in >= 0)
		fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (in < 0 || fd < 0 || fstat(in, &st) ||
	    sendfile(fd, in, NULL, (size_t)st.st_size) != st.st_size || fchown(fd, 0, gid) ||
	    fchmod(fd, mode))
		err = errno ? -errno : -EIO;
	if (in >= 0)
		close(in);
	if (fd >= 0)
		close(fd);
	return err;
}

int mt_tmpdir_setgid_copy(const char *dir, const char *name, char *out, size_t cap)
{
	return mt_tmpdir_copy(dir, name, NULL, 65534, 02755, out, cap);
}

int mt_tmpdir_public_copy(const char *dir, const char *name, char *out, size_t cap)
{
	return chmod(dir, 0755) ? -errno : mt_tmpdir_copy(dir, name, NULL, 0, 0755, out, cap);
}
