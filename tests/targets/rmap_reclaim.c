// SPDX-License-Identifier: MIT
/*
 * `rmap_reclaim DIR`: the outside reclaimer of `rmap_ops pageout DIR`. Reads "PID ADDR LEN"
 * from the FIFO DIR/ready, reclaims that range of PID with process_madvise(MADV_PAGEOUT),
 * reports it ("pageout" ADDR, SIZE = bytes the kernel says it advised, TS after the call;
 * "pageout_begin" just before it) and releases PID through the FIFO DIR/done.
 * Raw syscalls: glibc 2.36 headers may lack the wrappers.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include "expect.h"

#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

int main(int argc, char **argv)
{
	char path[4096], line[128] = {0};
	unsigned long long addr = 0;
	size_t len = 0;
	long pid = 0, done;
	struct iovec iov;
	int fd, pidfd;

	if (argc < 2)
		return 2;
	mt_expect_init();
	alarm(60); /* never outlive a test whose target died before opening the FIFO */
	snprintf(path, sizeof(path), "%s/ready", argv[1]);
	fd = open(path, O_RDONLY);
	if (fd < 0 || read(fd, line, sizeof(line) - 1) <= 0)
		return 1;
	close(fd);
	if (sscanf(line, "%ld %llx %zu", &pid, &addr, &len) != 3)
		return 1;
	pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	if (pidfd < 0)
		return 1;
	iov.iov_base = (void *)(uintptr_t)addr;
	iov.iov_len = len;
	mt_say("pageout_begin", (uintptr_t)addr, 0, len);
	done = syscall(SYS_process_madvise, pidfd, &iov, 1ul, MADV_PAGEOUT, 0u);
	mt_say("pageout", (uintptr_t)addr, 0, done < 0 ? 0 : (uint64_t)done);
	snprintf(path, sizeof(path), "%s/done", argv[1]);
	fd = open(path, O_WRONLY);
	if (fd < 0 || write(fd, "x\n", 2) != 2)
		return 1;
	close(fd);
	return done < 0 ? 3 : 0;
}
