// SPDX-License-Identifier: MIT
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "bpf/proc.h"
#include "common/log.h"
#include "track/pidns.h"

/* the initial pid namespace's inode number, fixed by the kernel (PROC_PID_INIT_INO) */
#define PIDNS_INIT_INO 0xEFFFFFFCULL

int pidns__check(struct pidns *ns)
{
	char link[32] = "";
	struct stat st;
	ssize_t n;

	if (stat("/proc/self/ns/pid", &st)) {
		int err = -errno;

		log__error("cannot open '/proc/self/ns/pid': %s; memtrack reads processes in "
			   "/proc: mount it (mount -t proc proc /proc)",
			   strerror(-err));
		return err;
	}
	ns->ino = st.st_ino;
	ns->initial = st.st_ino == PIDNS_INIT_INO;
	if (ns->initial)
		return 0;
	/* /proc/self names us by our pid in the namespace /proc was mounted for */
	n = readlink("/proc/self", link, sizeof(link) - 1);
	if (n > 0)
		link[n] = 0;
	if (n <= 0 || strtol(link, NULL, 10) != getpid()) {
		log__error("/proc belongs to another pid namespace than memtrack's (memtrack is "
			   "process %d here, '%s' there): mount this namespace's /proc first, e.g. "
			   "`unshare -p -f --mount-proc`",
			   (int)getpid(), n > 0 ? link : "?");
		return -EXDEV;
	}
	return 0;
}

int pidns__set(const struct pidns *ns, int map_fd, int probe_fd)
{
	LIBBPF_OPTS(bpf_test_run_opts, run);
	struct mt_pidns v = {0};
	__u32 zero = 0;
	int err = 0;

	if (!ns->initial) {
		/* the probe reads memtrack's own task: depth, namespace inode and pid there */
		if (bpf_map_update_elem(map_fd, &zero, &v, BPF_ANY) ||
		    bpf_prog_test_run_opts(probe_fd, &run) ||
		    bpf_map_lookup_elem(map_fd, &zero, &v)) {
			err = -errno;
			log__error("cannot find memtrack's pid namespace for the BPF programs: %s",
				   strerror(-err));
			return err;
		}
		if (v.ino != ns->ino || v.pad != (mt_u32)getpid()) {
			log__error("cannot find memtrack's pid namespace for the BPF programs: the "
				   "kernel says namespace %llu, pid %u, /proc says %llu, pid %d",
				   (unsigned long long)v.ino, v.pad, (unsigned long long)ns->ino,
				   (int)getpid());
			return -ENOTSUP;
		}
		v.pad = 0;
	}
	if (bpf_map_update_elem(map_fd, &zero, &v, BPF_ANY)) {
		err = -errno;
		log__error("cannot set the BPF programs' pid namespace: %s", strerror(-err));
	}
	return err;
}
