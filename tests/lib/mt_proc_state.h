/* SPDX-License-Identifier: MIT */
/* A process's state letter from /proc, for the tests and the test targets alike (header-only:
 * the targets link nothing of tests/lib). Raw open/read, no stdio: nothing allocates, so a
 * target under the interposer records no call of its own here. */
#ifndef MT_PROC_STATE_H
#define MT_PROC_STATE_H

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* The state letter of /proc/<pid>/stat ('R', 'S', 'T', ...), or 0 when it cannot be read. */
static inline char mt_proc_state(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
	return p && p[1] == ' ' ? p[2] : 0;
}

#endif
