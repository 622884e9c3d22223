/* SPDX-License-Identifier: MIT */
/*
 * The root command's executable, inspected on a thread while the BPF programs load: its
 * libraries are attached and it is marked known before it runs, so its exec does not stop.
 */
#ifndef MEMTRACK_ROOT_PREP_H
#define MEMTRACK_ROOT_PREP_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "track/libs.h"

struct root_prep {
	pthread_t thread;
	bool running;
	bool known; /* key is valid */
	uint64_t key; /* known_exe's key of the executable */
	char exe[PATH_MAX]; /* its path, when known */
	struct libs *libs; /* not bound to an attach set yet: ELF work only */
	const char *argv0;
};

/* Starts inspecting argv0 (resolved as execvp would) into libs, which must have no attach set
 * yet (libs__new(&l, NULL)); runs inline when no thread can be made. Returns 0 or -errno. */
int root_prep__start(struct root_prep *rp, struct libs *libs, const char *argv0);
/* Waits for the inspection; idempotent. */
void root_prep__join(struct root_prep *rp);
/* known_exe's key for a file as the BPF side computes it from the inode (mt_exe_key,
 * bpf/proc.h). Returns 0 or -errno. */
int root_prep__exe_key(const char *path, uint64_t *key);

#endif
