// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include "track/shm_file.h"

int shm_file__create(char *path, size_t cap, const char *tag, size_t size, uid_t uid, gid_t gid,
		     void **map, int *lock_fd)
{
	uint64_t rnd = 0;
	int fd, err;

	*map = NULL;
	*lock_fd = -1;
	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd ^= (uint64_t)(uintptr_t)map ^ (uint64_t)getpid() << 32;
	snprintf(path, cap, "/dev/shm/memtrack-%d-%s%016llx", (int)getpid(), tag,
		 (unsigned long long)rnd);
	/* 0600 and, under sudo, the invoking user's (the command runs as that user): no one else
	 * can open it */
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = -errno;
		path[0] = 0;
		return err;
	}
	/* held until the caller closes fd (or memtrack dies): in use (shm_file__sweep) */
	if (flock(fd, LOCK_SH | LOCK_NB) || (uid != (uid_t)-1 && fchown(fd, uid, gid)) ||
	    ftruncate(fd, (off_t)size)) {
		err = -errno;
		goto fail;
	}
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED) {
		*map = NULL;
		err = -errno;
		goto fail;
	}
	*lock_fd = fd;
	return 0;
fail:
	close(fd);
	unlink(path);
	path[0] = 0;
	return err;
}

/*
 * A file is stale when no memtrack holds its lock any more and either the pid in its name is
 * gone from our pid namespace or it is older than SHM_FILE_STALE_S. The lock is the test: a
 * memtrack in another pid namespace (a container, `unshare -p`) names its files with pids we
 * cannot see, and removing a running memtrack's file makes every process of its tree that
 * starts later pass through untracked. The pid or the age covers the instant between a file's
 * creation and its lock; the age, the files of a killed memtrack whose pid number is alive
 * here (a namespace's pid 1 is our init: such files were never removed).
 */
#define SHM_FILE_STALE_S 60

void shm_file__sweep(void)
{
	DIR *d = opendir("/dev/shm");
	time_t now = time(NULL);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char path[300];
		struct stat st;
		int pid, fd;
		bool free_;

		if (sscanf(de->d_name, "memtrack-%d-", &pid) != 1 || pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", de->d_name);
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			continue;
		free_ = !fstat(fd, &st) &&
			((kill(pid, 0) && errno == ESRCH) || st.st_mtime + SHM_FILE_STALE_S < now) &&
			!flock(fd, LOCK_EX | LOCK_NB);
		close(fd);
		if (free_)
			unlink(path);
	}
	if (d)
		closedir(d);
}
