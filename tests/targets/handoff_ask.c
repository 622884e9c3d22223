// SPDX-License-Identifier: MIT
/*
 * `handoff_ask PATH`: asks memtrack for PATH over its handoff socket (the one named after
 * $MEMTRACK_PRELOAD_SHM), with the interposer's own code (src/preload/preload_handoff.c), and
 * reports "handoff" (ADDR 1 when a descriptor came, SIZE the size of the file it opens).
 * `handoff_ask -w FILE DONE`: a process outside the tree: waits (30 s at most) for FILE, which
 * the tree writes the rings' path into, asks for that path the same way, then creates DONE.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "expect.h"
#include "preload/preload.h"

/* The rings' path from file, once the tree has written it; 0 or -1 after 30 s. */
static int wait_path(const char *file, char *path, size_t cap)
{
	for (int i = 0; i < 3000; i++) {
		FILE *f = fopen(file, "r");

		if (f) {
			bool ok = fgets(path, (int)cap, f) && strchr(path, '\n');

			fclose(f);
			if (ok) {
				*strchr(path, '\n') = 0;
				return 0;
			}
		}
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	}
	return -1;
}

int main(int argc, char **argv)
{
	char path[4096];
	struct stat st = {0};
	int fd;

	mt_expect_init();
	if (argc == 4 && !strcmp(argv[1], "-w")) {
		if (wait_path(argv[2], path, sizeof(path)) || setenv(MT_SHM_ENV, path, 1))
			return 2;
	} else if (argc == 2) {
		snprintf(path, sizeof(path), "%s", argv[1]);
	} else {
		return 2;
	}
	fd = pl_handoff(path);
	if (fd >= 0 && fstat(fd, &st))
		return 2;
	mt_say("handoff", fd >= 0, 0, (uint64_t)st.st_size);
	if (argc == 4)
		close(open(argv[3], O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	return 0;
}
