/* SPDX-License-Identifier: MIT */
/*
 * memtrack in a pid namespace (a container, `unshare -p`): the BPF programs number processes
 * as memtrack's namespace does (struct mt_pidns, src/bpf/proc.h), so that the root registered
 * by its pid, the interposer's getpid(), /proc and the artifact all agree.
 */
#ifndef MEMTRACK_TRACK_PIDNS_H
#define MEMTRACK_TRACK_PIDNS_H

#include <stdbool.h>
#include <stdint.h>

struct pidns {
	uint64_t ino; /* memtrack's /proc/self/ns/pid */
	bool initial; /* the initial namespace: ids as the kernel has them */
};

/* Finds memtrack's namespace and checks that /proc is this namespace's (its pids are read
 * there). 0, or -errno with the reason logged. Before the command is started. */
int pidns__check(struct pidns *ns);

/* Sets the programs' pidns map (map_fd) before the root is registered: outside the initial
 * namespace, runs probe_fd (mt_pidns_probe) once to find the namespace's depth. 0 or -errno,
 * logged. */
int pidns__set(const struct pidns *ns, int map_fd, int probe_fd);

#endif
