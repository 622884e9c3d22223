// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>
#include "track/shm_file.h"

int shm_file__create(char *path, size_t cap, const char *tag, size_t size, uid_t uid, gid_t gid,
		     void **map)
{
	uint64_t rnd = 0;
	int fd, err;

	*map = NULL;
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
	if ((uid != (uid_t)-1 && fchown(fd, uid, gid)) || ftruncate(fd, (off_t)size)) {
		err = -errno;
		goto fail;
	}
	*map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED) {
		*map = NULL;
		err = -errno;
		goto fail;
	}
	close(fd);
	return 0;
fail:
	close(fd);
	unlink(path);
	path[0] = 0;
	return err;
}
