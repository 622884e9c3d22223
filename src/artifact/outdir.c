// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "artifact/artifact.h"
#include "artifact/outdir.h"
#include "common/log.h"
#include "common/sudo.h"

#define OUTDIR_EXISTS_ADVICE                                                                       \
	"memtrack never replaces an output file nor follows a link there: remove it, or use "      \
	"another -o DIR"

static void outdir__log(const struct outdir *d, const char *verb, const char *name, int err)
{
	if (err == -EEXIST)
		log__error("cannot %s '%s/%s': %s; " OUTDIR_EXISTS_ADVICE, verb, d->path, name,
			   strerror(-err));
	else
		log__error("cannot %s '%s/%s': %s", verb, d->path, name, strerror(-err));
}

/* Gives what we just created to the invoking user (sudo). fd: the new file or folder. */
static int outdir__own(const struct outdir *d, int fd)
{
	return d->chown && fchown(fd, d->uid, d->gid) ? -errno : 0;
}

/*
 * mkdir -p: each missing prefix of path is created. A folder we create is opened without
 * following links to be given away (if someone swapped it for a link meanwhile, that open
 * fails rather than chown the link's target). Existing prefixes may be links, as for mkdir -p.
 */
static int outdir__mkdirs(const struct outdir *d, char *path)
{
	size_t n = strlen(path);
	int err = 0;

	for (size_t i = 1; i <= n && !err; i++) {
		int fd;

		if (i < n && (path[i] != '/' || path[i - 1] == '/'))
			continue;
		path[i] = 0;
		if (mkdir(path, 0755) == 0) {
			if (d->chown) {
				fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				err = fd < 0 ? -errno : outdir__own(d, fd);
				if (fd >= 0)
					close(fd);
			}
		} else if (errno != EEXIST) {
			err = -errno;
		}
		if (err)
			log__error("cannot create '%s': %s", path, strerror(-err));
		if (i < n)
			path[i] = '/';
	}
	return err;
}

int outdir__open(struct outdir *d, const char *path, size_t max_name)
{
	size_t len = strlen(path);
	char *copy;
	int err;

	memset(d, 0, sizeof(*d));
	d->path = path;
	d->fd = -1;
	d->chown = sudo__invoker(&d->uid, &d->gid);
	/* path/name must stay usable as one path by whoever reads the outputs, and by us in
	 * messages: refuse now rather than write a file that cannot be named */
	if (!len) {
		log__error("empty output folder: use -o DIR, or -o . for this one");
		return -EINVAL;
	}
	if (len + 1 + max_name >= PATH_MAX) {
		log__error("output path too long: '%s/' and a file name of up to %zu bytes exceed "
			   "PATH_MAX (%d bytes with its NUL): use a shorter -o DIR",
			   path, max_name, PATH_MAX);
		return -ENAMETOOLONG;
	}
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	err = outdir__mkdirs(d, copy);
	free(copy);
	if (err)
		return err;
	return outdir__reopen(d);
}

int outdir__reopen(struct outdir *d)
{
	struct stat st;
	int err;

	if (d->fd >= 0)
		return 0;
	d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0 || fstat(d->fd, &st)) {
		err = -errno;
		outdir__close(d);
		log__error("cannot open '%s': %s", d->path, strerror(-err));
		return err;
	}
	if (!d->ino) {
		d->dev = st.st_dev;
		d->ino = st.st_ino;
	} else if (d->dev != st.st_dev || d->ino != st.st_ino) {
		outdir__close(d);
		log__error("cannot write in '%s': it is another folder than when memtrack started "
			   "(moved or replaced meanwhile)",
			   d->path);
		return -ESTALE;
	}
	return 0;
}

int outdir__check_free(const struct outdir *d, const char *name)
{
	struct stat st;
	int err;

	if (!fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW))
		err = -EEXIST;
	else
		err = errno == ENOENT ? 0 : -errno;
	if (err)
		outdir__log(d, "create", name, err);
	return err;
}

/* O_EXCL: fails on any existing name, a link (even dangling) included. Not logged. */
static int outdir__create_quiet(const struct outdir *d, const char *name)
{
	int fd = openat(d->fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	int err;

	if (fd < 0)
		return -errno;
	err = outdir__own(d, fd);
	if (err) {
		close(fd);
		unlinkat(d->fd, name, 0);
		return err;
	}
	return fd;
}

int outdir__create(const struct outdir *d, const char *name)
{
	int fd = outdir__create_quiet(d, name);

	if (fd < 0)
		outdir__log(d, "create", name, fd);
	return fd;
}

/* ".NAME.XXXXXXXXXXXXXXXX": hidden, unguessable, so nobody can plant it in advance. */
static void outdir__tmp_name(char *buf, size_t len, const char *name)
{
	unsigned long long r;
	struct timespec ts;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = (unsigned long long)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
		    (unsigned long long)getpid();
	}
	snprintf(buf, len, ".%s.%016llx", name, r);
}

static int outdir__write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* tmp -> name without replacing: renameat2's NOREPLACE, else (a file system without it) a hard
 * link and an unlink, which also fail on an existing name. */
static int outdir__rename_new(const struct outdir *d, const char *tmp, const char *name)
{
	if (!renameat2(d->fd, tmp, d->fd, name, RENAME_NOREPLACE))
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (linkat(d->fd, tmp, d->fd, name, 0))
		return -errno;
	unlinkat(d->fd, tmp, 0);
	return 0;
}

int outdir__publish(const struct outdir *d, const char *name, const struct iovec *iov, int iovcnt,
		    bool replace)
{
	char tmp[NAME_MAX + 1];
	int fd = -EEXIST, err;

	if (strlen(name) + 18 > NAME_MAX) {
		outdir__log(d, "create", name, -ENAMETOOLONG);
		return -ENAMETOOLONG;
	}
	/* a clash with a random name is a planted file or a 2^-64 chance: try a few */
	for (int i = 0; i < 8 && fd == -EEXIST; i++) {
		outdir__tmp_name(tmp, sizeof(tmp), name);
		fd = outdir__create_quiet(d, tmp);
	}
	if (fd < 0) {
		outdir__log(d, "create a temporary file for", name, fd);
		return fd;
	}
	err = 0;
	for (int i = 0; i < iovcnt && !err; i++)
		err = outdir__write_all(fd, iov[i].iov_base, iov[i].iov_len);
	/* No fsync: the rename alone shows readers a complete file, which is what a run's
	 * consumers need; durability across a crash would need the artifact synced too, and
	 * costs ~1.3 ms per run here. */
	if (close(fd) && !err)
		err = -errno;
	if (!err) {
		if (replace)
			err = renameat(d->fd, tmp, d->fd, name) ? -errno : 0;
		else
			err = outdir__rename_new(d, tmp, name);
	}
	if (err) {
		unlinkat(d->fd, tmp, 0);
		outdir__log(d, "write", name, err);
	}
	return err;
}

void outdir__close(struct outdir *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

/* Whether name ends with the artifact's suffix, with something before it. */
static bool outdir__is_artifact(const char *name)
{
	size_t n = strlen(name), sl = strlen(ARTIFACT_SUFFIX);

	return n > sl && !strcmp(name + n - sl, ARTIFACT_SUFFIX);
}

int outdir__find_artifact(const char *path, char **artifact)
{
	enum { SHOWN = 5 }; /* names listed when there are several */
	char *names[SHOWN] = {NULL};
	DIR *d = opendir(path);
	struct dirent *e;
	size_t n = 0;
	int err = 0;

	*artifact = NULL;
	if (!d) {
		err = -errno;
		log__error("cannot open '%s': %s", path, strerror(-err));
		return err;
	}
	while ((e = readdir(d))) {
		if (!outdir__is_artifact(e->d_name))
			continue;
		if (n < SHOWN && !(names[n] = strdup(e->d_name))) {
			err = -ENOMEM;
			log__error("out of memory");
			goto cleanup;
		}
		n++;
	}
	if (!n) {
		err = -ENOENT;
		log__error("'%s' holds no *%s: give the artifact's path", path, ARTIFACT_SUFFIX);
	} else if (n > 1) {
		err = -ENOTUNIQ;
		log__error("'%s' holds %zu artifacts: give one of them:", path, n);
		for (size_t i = 0; i < n && i < SHOWN; i++)
			fprintf(stderr, "  %s/%s\n", path, names[i]);
		if (n > SHOWN)
			fprintf(stderr, "  ... and %zu more\n", n - SHOWN);
	} else if (asprintf(artifact, "%s/%s", path, names[0]) < 0) {
		*artifact = NULL;
		err = -ENOMEM;
		log__error("out of memory");
	}
cleanup:
	for (size_t i = 0; i < SHOWN; i++)
		free(names[i]);
	closedir(d);
	return err;
}
