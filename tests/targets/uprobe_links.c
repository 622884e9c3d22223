// SPDX-License-Identifier: MIT
/*
 * uprobe_links PID: the uprobe_multi links process PID holds, one "path count" line each (count:
 * the link's uprobes), for tests/bpf/test_track_auto.c. Run as root while PID (memtrack) runs.
 *
 * Read from the kernel's link info (BPF_OBJ_GET_INFO_BY_FD, uprobe_multi since 6.8), not from
 * /proc/PID/fdinfo: fdinfo names a uprobe_multi link's file only from 6.13 on, so on 6.8-6.12
 * the test saw memtrack's links without their paths. PID's links are found by their ids in
 * its fdinfo (link_id), so other memtrack runs on the machine are not counted.
 * Exit status 0, or 1 with a message when PID's fds or a link cannot be read.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct bpf_link_info's head and its uprobe_multi member (include/uapi/linux/bpf.h, 6.8+):
 * Debian 12's headers (6.1) do not have the member yet. */
struct link_info_um {
	uint32_t type, id, prog_id, pad;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t path_size, count, flags, pid;
};

#define LINK_TYPE_UPROBE_MULTI 12 /* BPF_LINK_TYPE_UPROBE_MULTI */

/* BPF_OBJ_GET_INFO_BY_FD into info (len bytes); 0 or -errno */
static int link_info(int fd, void *info, uint32_t len)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.info.bpf_fd = (uint32_t)fd;
	a.info.info_len = len;
	a.info.info = (uint64_t)(uintptr_t)info;
	return syscall(SYS_bpf, BPF_OBJ_GET_INFO_BY_FD, &a, sizeof(a)) ? -errno : 0;
}

static int link_print(uint32_t id)
{
	char path[PATH_MAX] = "";
	struct link_info_um info;
	union bpf_attr a;
	int fd, err;

	memset(&a, 0, sizeof(a));
	a.link_id = id;
	fd = (int)syscall(SYS_bpf, BPF_LINK_GET_FD_BY_ID, &a, sizeof(a));
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno; /* gone meanwhile */
	/* the type first, with nothing to fill: another type reads the same words differently
	 * (a raw tracepoint's name pointer and length) and refuses a half-set pair */
	memset(&info, 0, sizeof(info));
	err = link_info(fd, &info, sizeof(info));
	if (!err && info.type == LINK_TYPE_UPROBE_MULTI) {
		memset(&info, 0, sizeof(info));
		info.path = (uint64_t)(uintptr_t)path;
		info.path_size = sizeof(path);
		err = link_info(fd, &info, sizeof(info));
		if (!err)
			printf("%s %u\n", path, info.count);
	}
	close(fd);
	return err;
}

int main(int argc, char **argv)
{
	char dir[64], file[PATH_MAX], line[256];
	struct dirent *d;
	DIR *dp;

	if (argc != 2) {
		fprintf(stderr, "usage: uprobe_links PID\n");
		return 2;
	}
	snprintf(dir, sizeof(dir), "/proc/%s/fdinfo", argv[1]);
	dp = opendir(dir);
	if (!dp) {
		fprintf(stderr, "uprobe_links: cannot open '%s': %s\n", dir, strerror(errno));
		return 1;
	}
	while ((d = readdir(dp))) {
		unsigned id = 0;
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(file, sizeof(file), "%s/%s", dir, d->d_name);
		f = fopen(file, "r");
		if (!f)
			continue; /* closed meanwhile */
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "link_id: %u", &id) == 1)
				break;
		fclose(f);
		if (id) {
			int err = link_print(id);

			if (err) {
				fprintf(stderr, "uprobe_links: link %u: %s\n", id, strerror(-err));
				closedir(dp);
				return 1;
			}
		}
	}
	closedir(dp);
	return 0;
}
