/* SPDX-License-Identifier: MIT */
/*
 * The output folder (-o DIR) and the files memtrack creates in it, safely when run as root in
 * a folder someone else can write: a file is only ever created, never reused, and a symbolic
 * link at its name is never followed (issue 10: planted `<pid>.MemtrackArtifact.msgpack` and
 * `.tmp` links made root overwrite files they pointed to). Files are opened relative to the
 * folder's descriptor, so no full path is ever composed (or cut) for a system call.
 * Under sudo, the folders created and the files belong to the invoking user.
 */
#ifndef MEMTRACK_OUTDIR_H
#define MEMTRACK_OUTDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct outdir {
	const char *path; /* as the user gave it: messages name files as path/name */
	int fd;		  /* the folder, O_DIRECTORY; -1 when not open */
	bool chown;	  /* under sudo: what is created goes to uid:gid */
	dev_t dev;	  /* the folder opened first: a reopen must find the same */
	ino_t ino;
	uid_t uid;
	gid_t gid;
};

/*
 * Creates path and its missing parents like `mkdir -p` (0755; under sudo each folder created
 * is given to the invoking user), then opens it. max_name: the longest file name that will be
 * created in it; a path/name that would not fit in PATH_MAX is refused here, before anything
 * runs. Returns 0 or -errno, with the message logged (naming the folder or path concerned).
 */
int outdir__open(struct outdir *d, const char *path, size_t max_name);
/* For a file name that must not exist yet: 0 when nothing (not even a dangling link) is named
 * name, else -EEXIST or -errno, logged. */
int outdir__check_free(const struct outdir *d, const char *name);
/* Creates name (O_CREAT|O_EXCL: never an existing file, never through a link), mode 0644 before
 * the umask, owned by the invoking user under sudo. Returns the descriptor, or -errno logged. */
int outdir__create(const struct outdir *d, const char *name);
/*
 * Writes the iovcnt buffers of iov as name in one step: into a new file with a random hidden name
 * in the folder (created as outdir__create does), then renamed to name. With replace, an existing
 * name is replaced (a link there is replaced, not followed); without, an existing name fails
 * with -EEXIST and nothing is left behind. Returns 0 or -errno, logged.
 */
int outdir__publish(const struct outdir *d, const char *name, const struct iovec *iov, int iovcnt,
		    bool replace);
/*
 * The artifact in folder path, the one `memtrack track -o path` wrote: *artifact is
 * path/<pid>.MemtrackArtifact.msgpack (malloc'd). -ENOENT when the folder holds none,
 * -ENOTUNIQ when it holds several (their names logged: the user picks one), or -errno; logged.
 */
int outdir__find_artifact(const char *path, char **artifact);
/* Closes the folder; idempotent. */
void outdir__close(struct outdir *d);
/* Opens the folder outdir__open opened (and outdir__close closed) again: -ESTALE, logged, if
 * its path now leads to another folder. */
int outdir__reopen(struct outdir *d);

#endif
