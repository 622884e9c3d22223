// SPDX-License-Identifier: MIT
/*
 * `bpf_link_alive ID`: exit status 0 when a BPF link with that id exists (the kernel gives a
 * descriptor for it), 1 when it does not, 2 on a usage error. For test_track_handover, in
 * guests that have no bpftool.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include "expect.h"

int main(int argc, char **argv)
{
	union bpf_attr a;
	int fd;

	if (argc != 2)
		return 2;
	memset(&a, 0, sizeof(a));
	a.link_id = (unsigned)strtoul(argv[1], NULL, 10);
	fd = (int)syscall(SYS_bpf, BPF_LINK_GET_FD_BY_ID, &a, sizeof(a));
	if (fd < 0)
		return 1;
	close(fd);
	return 0;
}
