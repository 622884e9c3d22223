// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/vfs.h>
#include "mt_bpffs.h"

#define MT_BPF_FS_MAGIC 0xcafe4a11

static bool mt_bpffs_there(void)
{
	struct statfs sf;

	return statfs("/sys/fs/bpf", &sf) == 0 && sf.f_type == MT_BPF_FS_MAGIC;
}

bool mt_bpffs_root(char *root, size_t cap, const char *name)
{
	if (!mt_bpffs_there())
		mount("bpf", "/sys/fs/bpf", "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700");
	snprintf(root, cap, "/sys/fs/bpf/%s-%d", name, getpid());
	setenv("MEMTRACK_BPFFS", root, 1);
	return mt_bpffs_there();
}
