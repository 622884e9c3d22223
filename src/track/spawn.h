/* SPDX-License-Identifier: MIT */
/* Starting the command held before its exec, so tracking is armed before any of its code runs. */
#ifndef MEMTRACK_SPAWN_H
#define MEMTRACK_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

struct spawn {
	pid_t pid;
	int go_fd; /* write end: one byte releases the child */
	int err_fd; /* read end: exec's errno, or EOF once exec succeeded */
	int pidfd; /* readable when the child exits */
};

/* Forks; the child waits for spawn__release(). With drop_privileges and SUDO_UID/SUDO_GID set,
 * the child becomes the invoking user; ambient capabilities are always cleared. */
int spawn__start(struct spawn *sp, char *const argv[], bool drop_privileges);
/* Lets the child exec: spawn__go() sends the go, spawn__exec_result() waits for the exec and
 * returns 0 when it succeeded, -errno of the failed exec otherwise (the child then exits 127).
 * Work done between the two overlaps the child's exec. spawn__release() is both. */
int spawn__go(struct spawn *sp);
int spawn__exec_result(struct spawn *sp);
int spawn__release(struct spawn *sp);
/* The file execvp() would run for argv0 (PATH search, "/bin:/usr/bin" when PATH is unset), into
 * out. Returns 0, or -ENOENT when there is none. */
int spawn__resolve(const char *argv0, char *out, size_t cap);
/* Kills and reaps a child that was never released. NULL-safe, idempotent. */
void spawn__abort(struct spawn *sp);
void spawn__close(struct spawn *sp);

#endif
