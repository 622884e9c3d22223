// SPDX-License-Identifier: MIT
/* The inert files of earlier runs, kept between runs (see inert_cache.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>
#include "track/btf_cache.h"
#include "track/inert_cache.h"

#define INERT_MAGIC  0x7472656e6974746dull /* "mttinert" little-endian */
#define INERT_FORMAT 1
#define INERT_HDR    64

struct inert_hdr {
	uint64_t magic;
	uint32_t format;
	uint32_t nr;	 /* table entries, a power of two */
	uint64_t writer; /* inert_cache__writer() */
	uint8_t pad[INERT_HDR - 24];
};

_Static_assert(sizeof(struct inert_hdr) == INERT_HDR, "the header is 64 bytes");
_Static_assert(sizeof(struct mt_shm_seen) == 40, "the table's entries are the shared memory's");

/* The file, or false when the cache is off or has no folder. */
static bool inert_cache__path(char *path, size_t len)
{
	const char *env = getenv("MEMTRACK_INERT_CACHE");
	char dir[PATH_MAX];

	if (env && !strcmp(env, "0"))
		return false;
	if (env && env[0] == '/')
		return snprintf(path, len, "%s", env) < (int)len;
	if (btf_cache__dir(dir, sizeof(dir), getenv("MEMTRACK_CACHE_DIR"), getenv("XDG_CACHE_HOME"),
			   getenv("HOME"), (int)geteuid()))
		return false;
	return snprintf(path, len, "%s/inert-files", dir) < (int)len;
}

/* The memtrack executable (device, inode, size, modification time): a rebuilt one may find
 * allocators where this one found none. 0 when it cannot be told (then nothing is cached). */
static uint64_t inert_cache__writer(void)
{
	struct stat st;
	uint64_t v[4], h = 1469598103934665603ull ^ INERT_FORMAT;
	const unsigned char *p = (const unsigned char *)v;

	if (stat("/proc/self/exe", &st))
		return 0;
	v[0] = st.st_dev;
	v[1] = st.st_ino;
	v[2] = (uint64_t)st.st_size;
	v[3] = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
	for (size_t i = 0; i < sizeof(v); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h ? h : 1;
}

/* Opens the cache when it is usable: ours, nobody else may write it, written by this memtrack,
 * its table whole and no larger than max_nr entries. Its fd (*h its header), or -errno. */
static int inert_cache__open(uint32_t max_nr, struct inert_hdr *h)
{
	char path[PATH_MAX];
	struct stat st;
	int fd;

	if (!inert_cache__path(path, sizeof(path)))
		return -ENOENT;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || !btf_cache__trusted(&st) ||
	    pread(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h) || h->magic != INERT_MAGIC ||
	    h->format != INERT_FORMAT || h->writer != inert_cache__writer() || !h->nr ||
	    (h->nr & (h->nr - 1)) || h->nr > max_nr ||
	    (uint64_t)st.st_size != INERT_HDR + (uint64_t)h->nr * sizeof(struct mt_shm_seen)) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

int inert_cache__copy(int dst_fd, off_t off, uint32_t max_nr, uint32_t *nr)
{
	struct inert_hdr h;
	off_t in = INERT_HDR;
	size_t left;
	int fd = inert_cache__open(max_nr, &h), err = 0;

	*nr = 0;
	if (fd < 0)
		return fd;
	/* sendfile, not copy_file_range: the cache and /dev/shm are different file systems
	 * (EXDEV since 5.19); it writes at dst_fd's position, which nothing else uses */
	if (lseek(dst_fd, off, SEEK_SET) != off) {
		err = -errno;
		goto cleanup;
	}
	for (left = (size_t)h.nr * sizeof(struct mt_shm_seen); left;) {
		ssize_t n = sendfile(dst_fd, fd, &in, left);

		if (n <= 0) {
			err = n ? -errno : -EIO;
			goto cleanup;
		}
		left -= (size_t)n;
	}
	*nr = h.nr;
cleanup:
	close(fd);
	return err;
}

/* The cache's table, read here (*nr entries; NULL and 0 when there is none). */
static struct mt_shm_seen *inert_cache__read(uint32_t *nr)
{
	struct inert_hdr h;
	struct mt_shm_seen *t;
	int fd = inert_cache__open(MT_SHM_KEPT_MAX, &h);

	*nr = 0;
	if (fd < 0)
		return NULL;
	t = malloc((size_t)h.nr * sizeof(*t));
	if (t && pread(fd, t, (size_t)h.nr * sizeof(*t), INERT_HDR) ==
		     (ssize_t)((size_t)h.nr * sizeof(*t)))
		*nr = h.nr;
	close(fd);
	if (!*nr) {
		free(t);
		t = NULL;
	}
	return t;
}

/* Puts f into table t (nr entries, never full: twice the files at least). */
static void inert_cache__put(struct mt_shm_seen *t, uint32_t nr, const struct mt_shm_seen *f)
{
	uint32_t i = mt_shm_seen_slot(f->dev, f->ino, nr);

	while (t[i].ino)
		i = (i + 1) & (nr - 1);
	t[i] = *f;
}

void inert_cache__update(const struct mt_shm_seen *add, size_t n_add)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8], *slash;
	struct inert_hdr h = {.magic = INERT_MAGIC, .format = INERT_FORMAT};
	struct mt_shm_seen *t = NULL, *kept;
	size_t count = 0, unkept = 0;
	uint32_t nr = 64, kept_nr;
	int fd = -1;
	bool ok;

	h.writer = inert_cache__writer();
	if (!n_add || !h.writer || !inert_cache__path(path, sizeof(path)))
		return;
	/* read again here, not taken from the shared memory, which the tree can write */
	kept = inert_cache__read(&kept_nr);
	/* this run's first, then the kept ones still fitting; a file in both counts once */
	for (size_t i = 0; i < n_add; i++)
		unkept += !mt_shm_seen_has(kept, kept_nr, &add[i]);
	if (!unkept) /* nothing new: the file stays as it is */
		goto cleanup;
	count = unkept;
	for (uint32_t i = 0; i < kept_nr; i++)
		count += kept[i].ino != 0;
	if (count > INERT_CACHE_MAX)
		count = INERT_CACHE_MAX;
	while (nr < 2 * count && nr < MT_SHM_KEPT_MAX)
		nr *= 2;
	t = calloc(nr, sizeof(*t));
	if (!t)
		return;
	count = 0;
	for (size_t i = 0; i < n_add && count < INERT_CACHE_MAX; i++)
		if (add[i].ino && !mt_shm_seen_has(t, nr, &add[i])) {
			inert_cache__put(t, nr, &add[i]);
			count++;
		}
	for (uint32_t i = 0; i < kept_nr && count < INERT_CACHE_MAX; i++)
		if (kept[i].ino && !mt_shm_seen_has(t, nr, &kept[i])) {
			inert_cache__put(t, nr, &kept[i]);
			count++;
		}
	h.nr = nr;
	snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
	slash = strrchr(path, '/');
	if (slash && slash != path) {
		*slash = 0;
		ok = !btf_cache__mkdir(path);
		*slash = '/';
		if (!ok)
			goto cleanup;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		goto cleanup;
	ok = write(fd, &h, sizeof(h)) == (ssize_t)sizeof(h) &&
	     write(fd, t, nr * sizeof(*t)) == (ssize_t)(nr * sizeof(*t));
	if (close(fd) || !ok || rename(tmp, path)) /* the last writer's whole table wins */
		unlink(tmp);
cleanup:
	free(t);
	free(kept);
}
