// SPDX-License-Identifier: MIT
/* Loaded programs kept between runs in a BPF filesystem (prog_cache.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "common/log.h"
#include "track/prog_cache.h"

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif

#define OWNER_NAME  "owner"
#define LINGER_NAME "linger"

uint64_t prog_cache__hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i = 0;

	/* 8 bytes a step (the object is ~250 KB: ~0.06 ms instead of ~0.25 byte by byte) */
	for (; i + 8 <= n; i += 8) {
		uint64_t w;

		memcpy(&w, b + i, 8);
		h ^= w;
		h *= 0x100000001b3ull;
		h ^= h >> 29; /* the high bits back into the low ones the next xor meets */
	}
	for (; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

const char *prog_cache__root(void)
{
	const char *env = getenv("MEMTRACK_BPFFS");

	return env && *env ? env : "/sys/fs/bpf/memtrack";
}

static void off(struct prog_cache *c, const char *why, int err)
{
	snprintf(c->state, sizeof(c->state), "loaded (no cache: %s%s%s)", why, err ? ": " : "",
		 err ? strerror(-err) : "");
	log__debug(LOG_VERBOSE, "program cache: %s%s%s", why, err ? ": " : "",
		   err ? strerror(-err) : "");
}

/* The bpffs that holds root: there already, or mounted on /sys/fs/bpf (root's parent) as
 * systemd and bpftool do. Returns 0 or -errno. */
static int prog_cache__bpffs(const char *root)
{
	char parent[PATH_MAX];
	struct statfs sf;
	char *slash;

	snprintf(parent, sizeof(parent), "%s", root);
	slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return -EINVAL;
	*slash = '\0';
	if (statfs(parent, &sf))
		return -errno;
	if (sf.f_type == BPF_FS_MAGIC)
		return 0;
	if (strcmp(parent, "/sys/fs/bpf"))
		return -ENOTSUP; /* MEMTRACK_BPFFS names a directory we do not mount on */
	if (mount("bpf", parent, "bpf", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700"))
		return -errno;
	return 0;
}

/* An owner map entry: a process of the slot's last run, and the pid namespace its pid is in. */
struct owner_rec {
	uint32_t pid;
	uint32_t pad;
	uint64_t pidns; /* inode of its /proc/PID/ns/pid */
};

/* This process's pid namespace, when /proc is that namespace's (its pids are ours to look up);
 * else 0. */
static uint64_t prog_cache__pidns(void)
{
	char self[32], want[32];
	struct stat st;
	ssize_t n = readlink("/proc/self", self, sizeof(self) - 1);

	if (n <= 0)
		return 0;
	self[n] = '\0';
	snprintf(want, sizeof(want), "%d", getpid());
	if (strcmp(self, want) || stat("/proc/self/ns/pid", &st))
		return 0;
	return st.st_ino;
}

/* Whether pid is a process that has not finished exiting (a zombie has released its files). */
static bool prog_cache__alive(uint32_t pid)
{
	char path[64], buf[512];
	ssize_t n;
	int fd;
	char *rp;

	if (!pid || pid == (uint32_t)getpid())
		return false;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT && errno != ESRCH;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

/* Unlinks every entry of the slot's directory. */
static void prog_cache__empty(int dir_fd)
{
	int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* own offset */
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dir_fd, e->d_name, 0);
	closedir(d);
}

/*
 * Whether a process of the slot's last run still lives; owner_fd: its owner map. Only pids of
 * our own pid namespace can be looked up: for the others (a run as a pid namespace's init) the
 * slot's lock alone answers, which every one of those processes holds until its exit, where
 * the kernel releases files in the reverse order of their fds (task work), the lock's (opened
 * before any link) last.
 */
static bool prog_cache__busy(int owner_fd)
{
	uint64_t ns = prog_cache__pidns();

	for (uint32_t k = 0; ns && k < PC_OWNER_NR; k++) {
		struct owner_rec r = {0};

		if (!bpf_map_lookup_elem(owner_fd, &k, &r) && r.pidns == ns &&
		    prog_cache__alive(r.pid))
			return true;
	}
	return false;
}

/* Pinned names: "m-<name>" maps, "p-<name>" programs, each '.' of the object's name as '+'
 * (bpffs refuses dots: it keeps them for its own files). */
static void pin_name(char *out, size_t len, const char *name, bool prog, bool decode)
{
	size_t i = 0;

	if (!decode) {
		snprintf(out, len, "%s%s", prog ? "p-" : "m-", name);
		i = 2;
	} else {
		snprintf(out, len, "%s", name + 2);
	}
	for (; out[i]; i++)
		if (out[i] == (decode ? '+' : '.'))
			out[i] = decode ? '.' : '+';
}

/* Takes every pinned object of the locked slot. */
static int prog_cache__take(struct prog_cache *c)
{
	int fd = openat(c->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* own offset */
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	int err = 0;

	if (!d) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		return err;
	}
	while (!err && (e = readdir(d))) {
		char path[PATH_MAX + 264];
		bool prog = !strncmp(e->d_name, "p-", 2);

		if (!prog && strncmp(e->d_name, "m-", 2))
			continue; /* ".", "..", the owner map */
		if (c->n == PROG_CACHE_MAX_OBJS || strlen(e->d_name + 2) >= PROG_CACHE_NAME_MAX) {
			err = -E2BIG;
			break;
		}
		snprintf(path, sizeof(path), "%s/%s", c->path, e->d_name);
		fd = bpf_obj_get(path);
		if (fd < 0) {
			err = -errno;
			break;
		}
		pin_name(c->obj[c->n].name, PROG_CACHE_NAME_MAX, e->d_name, prog, true);
		c->obj[c->n].fd = fd;
		c->obj[c->n++].prog = prog;
	}
	closedir(d);
	return err;
}

static void prog_cache__slot_close(struct prog_cache *c);

/* Locks slot `slot` of key and finds whether it holds a complete load. 1: locked (c->hit
 * says which), 0: busy, -errno. */
static int prog_cache__try_slot(struct prog_cache *c, const char *root, uint64_t key, int slot)
{
	char owner[PATH_MAX + 16];
	int err;

	snprintf(c->path, sizeof(c->path), "%s/%016llx-%d", root, (unsigned long long)key, slot);
	if (mkdir(c->path, 0700) && errno != EEXIST)
		return -errno;
	c->dir_fd = open(c->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c->dir_fd < 0)
		return -errno;
	if (flock(c->dir_fd, LOCK_EX | LOCK_NB))
		goto busy;
	snprintf(owner, sizeof(owner), "%s/" OWNER_NAME, c->path);
	c->owner_fd = bpf_obj_get(owner);
	if (c->owner_fd < 0) { /* never sealed: a load that failed or was cut short */
		prog_cache__empty(c->dir_fd);
		return 1;
	}
	if (prog_cache__busy(c->owner_fd))
		goto busy;
	err = prog_cache__take(c);
	if (err) { /* unusable (unpinned by hand?): start it again */
		prog_cache__slot_close(c);
		c->dir_fd = open(c->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (c->dir_fd < 0 || flock(c->dir_fd, LOCK_EX | LOCK_NB))
			goto busy;
		prog_cache__empty(c->dir_fd);
		return 1;
	}
	c->hit = true;
	for (uint32_t k = 0; k < PC_OWNER_NR; k++)
		prog_cache__set_owner(c, k, k == PC_OWNER_MEMTRACK ? getpid() : 0);
	return 1;
busy:
	prog_cache__slot_close(c);
	return 0;
}

/* Whether name is a slot's folder name, "<16 hex digits>-<slot>" (not an offer of links,
 * detacher.h, nor the linger map). */
static bool prog_cache__is_slot(const char *name)
{
	for (int i = 0; i < 16; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	return name[16] == '-' && name[17] >= '0' && name[17] <= '9' && !name[18];
}

/* Whether the slot folder `path` can be removed (no run has it, no process of its last run
 * lives); if so, removes it. */
static bool prog_cache__remove_idle(const char *path)
{
	struct prog_cache c = {.dir_fd = -1, .owner_fd = -1, .linger_fd = -1};
	char owner[PATH_MAX + 16];
	bool idle;

	snprintf(c.path, sizeof(c.path), "%s", path);
	c.dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (c.dir_fd < 0)
		return false;
	snprintf(owner, sizeof(owner), "%s/" OWNER_NAME, path);
	c.owner_fd = bpf_obj_get(owner);
	idle = !flock(c.dir_fd, LOCK_EX | LOCK_NB) &&
	       !(c.owner_fd >= 0 && prog_cache__busy(c.owner_fd));
	if (idle) {
		prog_cache__empty(c.dir_fd);
		idle = !rmdir(path);
	}
	prog_cache__close(&c);
	return idle;
}

/*
 * Before a new slot is filled: at most PROG_CACHE_MAX_KEPT slots under root (each holds a ring,
 * 8 MiB by default, in kernel memory): the idle ones used longest ago go first, busy ones stay.
 * keep: the slot this run has locked. A slot's folder time is its last use (prog_cache__open
 * touches it).
 */
struct slot_age {
	char name[NAME_MAX + 1];
	struct timespec t;
};

static int slot_age__cmp(const void *a, const void *b)
{
	const struct timespec *x = &((const struct slot_age *)a)->t;
	const struct timespec *y = &((const struct slot_age *)b)->t;

	if (x->tv_sec != y->tv_sec)
		return x->tv_sec < y->tv_sec ? -1 : 1;
	return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

static void prog_cache__evict(const char *root, const char *keep)
{
	struct slot_age *all = NULL;
	char path[PATH_MAX + NAME_MAX + 2];
	DIR *d = opendir(root);
	struct dirent *e;
	int n = 0, cap = 0;

	while (d && (e = readdir(d))) {
		struct stat st;

		if (!prog_cache__is_slot(e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", root, e->d_name);
		if (stat(path, &st) || !S_ISDIR(st.st_mode) || !strcmp(path, keep))
			continue;
		if (n == cap) {
			struct slot_age *p = realloc(all, (cap = cap ? 2 * cap : 16) * sizeof(*p));

			if (!p)
				break;
			all = p;
		}
		snprintf(all[n].name, sizeof(all[n].name), "%s", e->d_name);
		all[n++].t = st.st_mtim;
	}
	if (d)
		closedir(d);
	qsort(all, n, sizeof(*all), slot_age__cmp);
	/* n others and ours: remove from the oldest until PROG_CACHE_MAX_KEPT are left */
	for (int i = 0, left = n + 1; i < n && left > PROG_CACHE_MAX_KEPT; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, all[i].name);
		if (prog_cache__remove_idle(path)) {
			left--;
			log__debug(LOG_VERBOSE, "program cache: removed %s (more than %d kept)",
				   path, PROG_CACHE_MAX_KEPT);
		}
	}
	free(all);
}

/* The root's linger map, made and pinned by the first run that needs it. */
static void prog_cache__linger_open(struct prog_cache *c, const char *root)
{
	char path[PATH_MAX + 16];
	int fd;

	snprintf(path, sizeof(path), "%s/" LINGER_NAME, root);
	c->linger_fd = bpf_obj_get(path);
	if (c->linger_fd >= 0)
		return;
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "mt_linger", sizeof(uint32_t), sizeof(uint64_t), 1,
			    NULL);
	if (fd < 0)
		return;
	if (bpf_obj_pin(fd, path)) { /* another run pinned one first: take that */
		close(fd);
		fd = bpf_obj_get(path);
	}
	c->linger_fd = fd;
}

void prog_cache__linger_done(struct prog_cache *c)
{
	uint32_t zero = 0;
	uint64_t gen = 0;

	if (!c || c->linger_fd < 0)
		return;
	bpf_map_lookup_elem(c->linger_fd, &zero, &gen);
	gen++;
	bpf_map_update_elem(c->linger_fd, &zero, &gen, BPF_ANY);
}

int prog_cache__open(struct prog_cache *c, uint64_t key)
{
	const char *root = prog_cache__root(), *env = getenv("MEMTRACK_PROG_CACHE");
	struct stat st;
	int err, fd;

	memset(c, 0, sizeof(*c));
	c->dir_fd = c->owner_fd = c->linger_fd = -1;
	if (env && !strcmp(env, "0")) {
		off(c, "MEMTRACK_PROG_CACHE=0", 0);
		return 0;
	}
	err = prog_cache__bpffs(root);
	if (err) {
		off(c, "no BPF filesystem", err);
		return 0;
	}
	if (mkdir(root, 0700) && errno != EEXIST) {
		off(c, root, -errno);
		return 0;
	}
	/* ours alone: another user's objects in it would be run by us */
	fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		off(c, "its directory is not private to this user", fd < 0 ? -errno : 0);
		if (fd >= 0)
			close(fd);
		return 0;
	}
	close(fd);
	prog_cache__linger_open(c, root);
	for (int slot = 0; slot < PROG_CACHE_SLOTS; slot++) {
		err = prog_cache__try_slot(c, root, key, slot);
		if (err < 0) {
			off(c, c->path, err);
			prog_cache__slot_close(c);
			return 0;
		}
		if (err > 0) {
			snprintf(c->state, sizeof(c->state), "%s %s",
				 c->hit ? "kept" : "loaded, kept", c->path);
			futimens(c->dir_fd, NULL); /* its last use, for prog_cache__evict */
			if (!c->hit)
				prog_cache__evict(root, c->path);
			return 0;
		}
	}
	off(c, "every slot in use", 0);
	return 0;
}

int prog_cache__fd(const struct prog_cache *c, const char *name)
{
	for (int i = 0; c && i < c->n; i++)
		if (!strcmp(c->obj[i].name, name))
			return c->obj[i].fd;
	return -ENOENT;
}

int prog_cache__store(struct prog_cache *c, const char *name, int fd, bool prog)
{
	char path[PATH_MAX + PROG_CACHE_NAME_MAX + 8], pinned[PROG_CACHE_NAME_MAX + 2];

	if (!c || c->dir_fd < 0)
		return 0;
	if (strlen(name) >= PROG_CACHE_NAME_MAX)
		return -ENAMETOOLONG;
	pin_name(pinned, sizeof(pinned), name, prog, false);
	snprintf(path, sizeof(path), "%s/%s", c->path, pinned);
	return bpf_obj_pin(fd, path) ? -errno : 0;
}

int prog_cache__seal(struct prog_cache *c)
{
	char path[PATH_MAX + 16];
	int fd;

	if (!c || c->dir_fd < 0 || c->owner_fd >= 0)
		return 0;
	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "mt_owner", sizeof(uint32_t),
			    sizeof(struct owner_rec), PC_OWNER_NR, NULL);
	if (fd < 0)
		return -errno;
	c->owner_fd = fd;
	prog_cache__set_owner(c, PC_OWNER_MEMTRACK, getpid());
	snprintf(path, sizeof(path), "%s/" OWNER_NAME, c->path);
	return bpf_obj_pin(fd, path) ? -errno : 0;
}

void prog_cache__set_owner(struct prog_cache *c, enum prog_cache_owner who, pid_t pid)
{
	struct owner_rec r = {.pid = (uint32_t)pid, .pidns = pid ? prog_cache__pidns() : 0};
	uint32_t k = who;

	if (c && c->owner_fd >= 0)
		bpf_map_update_elem(c->owner_fd, &k, &r, BPF_ANY);
}

/* Closes the slot's objects, its owner map and its folder (the lock); the linger map stays. */
static void prog_cache__slot_close(struct prog_cache *c)
{
	for (int i = 0; i < c->n; i++)
		close(c->obj[i].fd);
	c->n = 0;
	c->hit = false;
	if (c->owner_fd >= 0)
		close(c->owner_fd);
	if (c->dir_fd >= 0)
		close(c->dir_fd);
	c->owner_fd = c->dir_fd = -1;
}

void prog_cache__close(struct prog_cache *c)
{
	if (!c)
		return;
	prog_cache__slot_close(c);
	if (c->linger_fd >= 0)
		close(c->linger_fd);
	c->linger_fd = -1;
}

void prog_cache__discard(struct prog_cache *c)
{
	if (c && c->dir_fd >= 0)
		prog_cache__empty(c->dir_fd);
}

int prog_cache__unload(int *removed, int *kept)
{
	const char *root = prog_cache__root();
	DIR *d = opendir(root);
	struct dirent *e;

	*removed = *kept = 0;
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char path[PATH_MAX + 260];

		bool slot = prog_cache__is_slot(e->d_name);

		if (e->d_name[0] == '.' || !strcmp(e->d_name, LINGER_NAME))
			continue;
		snprintf(path, sizeof(path), "%s/%s", root, e->d_name);
		/* an offer of a finished run's links (detacher.h) goes too, uncounted: its
		 * detacher finds it gone and exits */
		if (prog_cache__remove_idle(path))
			*removed += slot;
		else
			*kept += slot;
	}
	closedir(d);
	if (!*kept) { /* nothing left but the linger map: the folder goes */
		char path[PATH_MAX + 16];

		snprintf(path, sizeof(path), "%s/" LINGER_NAME, root);
		unlink(path);
		rmdir(root);
	}
	return 0;
}
