// SPDX-License-Identifier: MIT
/* Finding or building the minimal kernel BTF (see btf_cache.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "common/log.h"
#include "track/btf_cache.h"
#include "track/btf_min.h"
#include "track/btf_scan.h"

/* Bump when btf_min's output changes for the same inputs: old files are then ignored. */
#define BTF_CACHE_FORMAT 1
/* Files of other kernels or objects untouched this long are removed when a new one is built. */
#define BTF_CACHE_MAX_AGE_S (14 * 24 * 3600)

#define NT_GNU_BUILD_ID_TYPE 3

int btf_cache__build_id(const void *notes, size_t len, char *hex, size_t hexlen)
{
	const unsigned char *p = notes, *end = p + len;

	/* Elf64_Nhdr and Elf32_Nhdr are the same: three 32-bit words, name and desc 4-aligned. */
	while (p + 12 <= end) {
		uint32_t namesz, descsz, type;
		const unsigned char *name, *desc;

		memcpy(&namesz, p, 4);
		memcpy(&descsz, p + 4, 4);
		memcpy(&type, p + 8, 4);
		name = p + 12;
		desc = name + ((namesz + 3) & ~3u);
		if (desc + descsz > end || desc < name)
			break;
		if (type == NT_GNU_BUILD_ID_TYPE && namesz == 4 && !memcmp(name, "GNU", 4) &&
		    descsz > 0 && 2 * (size_t)descsz < hexlen) {
			for (uint32_t i = 0; i < descsz; i++)
				snprintf(hex + 2 * i, 3, "%02x", desc[i]);
			return 0;
		}
		p = desc + ((descsz + 3) & ~3u);
	}
	return -ENOENT;
}

int btf_cache__dir(char *buf, size_t len, const char *cache_env, const char *xdg, const char *home,
		   int euid)
{
	int n;

	if (cache_env && cache_env[0])
		n = snprintf(buf, len, "%s", cache_env);
	else if (euid == 0)
		n = snprintf(buf, len, "/var/cache/memtrack");
	else if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/memtrack", xdg);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/.cache/memtrack", home);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The running kernel's identity: its build ID, else release + version + BTF size. */
static void btf_cache__kernel_id(char *id, size_t len)
{
	unsigned char notes[4096];
	struct utsname un;
	struct stat st;
	ssize_t n = -1;
	uint64_t h = 1469598103934665603ull;
	int fd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, notes, sizeof(notes));
		close(fd);
	}
	if (n > 0 && btf_cache__build_id(notes, n, id, len) == 0)
		return;
	uname(&un);
	if (stat("/sys/kernel/btf/vmlinux", &st))
		st.st_size = 0;
	/* FNV-1a of the release and version strings: no slashes or spaces in a file name */
	for (const char *s = un.release; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	for (const char *s = un.version; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	snprintf(id, len, "%016llx%llx", (unsigned long long)h, (unsigned long long)st.st_size);
}

/* dir/name (or dir/.name.PID with `tmp`) into buf; -ENAMETOOLONG when it does not fit. */
static int btf_cache__join(char *buf, size_t len, const char *dir, const char *name, bool tmp)
{
	int n = tmp ? snprintf(buf, len, "%s/.%s.%d", dir, name, getpid())
		    : snprintf(buf, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static uint64_t fnv1a(const void *data, size_t n)
{
	const unsigned char *p = data;
	uint64_t h = 1469598103934665603ull ^ BTF_CACHE_FORMAT;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* The object's key: FNV-1a's step over 8-byte words, then the tail bytes. A byte at a time,
 * the ~240 KB object cost ~0.4 ms of every run's start; a word at a time, an eighth. */
static uint64_t btf_cache__obj_hash(const void *data, size_t n)
{
	const unsigned char *p = data;
	uint64_t h = 1469598103934665603ull ^ BTF_CACHE_FORMAT, w;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 1099511628211ull;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h ^ n;
}

/* Ours and writable by nobody else: safe to feed to the loader. */
bool btf_cache__trusted(const struct stat *st)
{
	return st->st_uid == geteuid() && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

int btf_cache__mkdir(const char *dir)
{
	struct stat st;
	char tmp[PATH_MAX];

	if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) && errno != EEXIST)
		return -errno;
	if (stat(dir, &st))
		return -errno;
	return S_ISDIR(st.st_mode) && btf_cache__trusted(&st) ? 0 : -EPERM;
}

static void btf_cache__prune(const char *dir, const char *keep)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	time_t now = time(NULL);

	if (!d)
		return;
	while ((e = readdir(d))) {
		char p[PATH_MAX];
		struct stat st;

		if (strncmp(e->d_name, "vmlinux-", 8) || !strcmp(e->d_name, keep))
			continue;
		if (!btf_cache__join(p, sizeof(p), dir, e->d_name, false) && !lstat(p, &st) &&
		    S_ISREG(st.st_mode) && now - st.st_atime > BTF_CACHE_MAX_AGE_S)
			unlink(p);
	}
	closedir(d);
}

/* Builds the minimal BTF from the kernel's and the object's; returns its raw bytes. */
static int btf_cache__build(const void *obj, size_t obj_sz, struct btf **out)
{
	struct bpf_object *o = bpf_object__open_mem(obj, obj_sz, NULL);
	struct btf *kernel = NULL;
	int err;

	*out = NULL;
	if (!o)
		return -errno;
	kernel = btf__load_vmlinux_btf();
	if (!kernel) {
		err = -errno;
		goto cleanup;
	}
	err = bpf_object__btf(o) ? btf_min__build(kernel, bpf_object__btf(o), out) : -ENODATA;
cleanup:
	btf__free(kernel);
	bpf_object__close(o);
	return err;
}

/* Writes raw BTF to dir/name atomically; returns 0 or -errno. */
static int btf_cache__store(const char *dir, const char *name, const void *raw, uint32_t sz)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	int fd, err = 0;

	if (btf_cache__join(path, sizeof(path), dir, name, false) ||
	    btf_cache__join(tmp, sizeof(tmp), dir, name, true))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, raw, sz) != (ssize_t)sz)
		err = errno ? -errno : -EIO;
	if (close(fd) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

void btf_cache__prepare(struct btf_cache *c, const void *obj, size_t obj_sz)
{
	const char *env = getenv("MEMTRACK_BTF_CACHE");
	char dir[PATH_MAX], kid[128], name[256];
	struct timespec t0, t1;
	struct btf *b = NULL;
	const void *raw;
	struct stat st;
	uint32_t sz;
	bool have_dir;
	int err;

	memset(c, 0, sizeof(*c));
	c->memfd = -1;
	c->source = "vmlinux";
	if (env && !strcmp(env, "0"))
		return;
	btf_cache__kernel_id(kid, sizeof(kid));
	snprintf(name, sizeof(name), "vmlinux-%s-%016llx.btf", kid,
		 (unsigned long long)btf_cache__obj_hash(obj, obj_sz));
	have_dir = btf_cache__dir(dir, sizeof(dir), getenv("MEMTRACK_CACHE_DIR"),
				  getenv("XDG_CACHE_HOME"), getenv("HOME"), (int)geteuid()) == 0;
	if (have_dir && !btf_cache__join(c->path, sizeof(c->path), dir, name, false)) {
		if (!lstat(c->path, &st) && S_ISREG(st.st_mode) && btf_cache__trusted(&st)) {
			c->source = "cache";
			return;
		}
		c->path[0] = 0;
	}

	clock_gettime(CLOCK_MONOTONIC, &t0);
	err = btf_cache__build(obj, obj_sz, &b);
	raw = b ? btf__raw_data(b, &sz) : NULL;
	if (err || !raw) {
		log__debug(LOG_NORMAL, "minimal BTF: cannot build it (%s): using the full vmlinux BTF",
			   strerror(err ? -err : ENOMEM));
		goto cleanup;
	}
	c->source = "generated";
	if (have_dir && btf_cache__mkdir(dir) == 0 && btf_cache__store(dir, name, raw, sz) == 0 &&
	    btf_cache__join(c->path, sizeof(c->path), dir, name, false) == 0) {
		btf_cache__prune(dir, name);
	} else {
		/* No folder of ours: keep this run's copy in memory; libbpf opens it by path. */
		c->memfd = memfd_create("memtrack-btf", MFD_CLOEXEC);
		if (c->memfd < 0 || write(c->memfd, raw, sz) != (ssize_t)sz) {
			c->source = "vmlinux";
			goto cleanup;
		}
		snprintf(c->path, sizeof(c->path), "/proc/self/fd/%d", c->memfd);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	c->build_ns = (t1.tv_sec - t0.tv_sec) * 1000000000ull + t1.tv_nsec - t0.tv_nsec;
	log__debug(LOG_NORMAL, "minimal BTF: %u bytes built in %.1f ms: %s", sz, c->build_ns / 1e6, c->path);
cleanup:
	btf__free(b);
}

/* The cache folder from the environment, when the cache is on. */
static bool btf_cache__env_dir(char *dir, size_t len)
{
	const char *env = getenv("MEMTRACK_BTF_CACHE");

	if (env && !strcmp(env, "0"))
		return false;
	return btf_cache__dir(dir, len, getenv("MEMTRACK_CACHE_DIR"), getenv("XDG_CACHE_HOME"),
			      getenv("HOME"), (int)geteuid()) == 0;
}

int btf_cache__get(const char *name, void *buf, size_t len)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct stat st;
	bool ok;
	int fd;

	if (!btf_cache__env_dir(dir, sizeof(dir)) ||
	    btf_cache__join(path, sizeof(path), dir, name, false))
		return -ENOENT;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	ok = !fstat(fd, &st) && S_ISREG(st.st_mode) && btf_cache__trusted(&st) &&
	     (size_t)st.st_size == len && read(fd, buf, len) == (ssize_t)len;
	close(fd);
	return ok ? 0 : -EBADMSG;
}

void btf_cache__put(const char *name, const void *buf, size_t len)
{
	char dir[PATH_MAX];

	if (btf_cache__env_dir(dir, sizeof(dir)) && btf_cache__mkdir(dir) == 0)
		btf_cache__store(dir, name, buf, (uint32_t)len);
}

int btf_cache__func_ids(const char *const *names, int n, int *ids)
{
	char kid[128], name[256];
	uint64_t h = 1469598103934665603ull;
	size_t want = (size_t)n * sizeof(*ids);
	int err;

	for (int i = 0; i < n; i++) /* the names and their order are part of the key */
		h = fnv1a(names[i], strlen(names[i]) + 1) ^ (h * 1099511628211ull);
	btf_cache__kernel_id(kid, sizeof(kid));
	snprintf(name, sizeof(name), "vmlinux-%s-funcs-%016llx.ids", kid, (unsigned long long)h);
	if (btf_cache__get(name, ids, want) == 0)
		return 0;
	err = btf_scan__funcs("/sys/kernel/btf/vmlinux", names, n, ids);
	if (!err)
		btf_cache__put(name, ids, want);
	return err;
}

/*
 * A cached file is to blame only when loading with it fails and loading without it works: then
 * it is removed, so the next run rebuilds it. A permission error (EPERM: no CAP_BPF/CAP_PERFMON,
 * a lockdown) says nothing about the file, so it is neither retried nor removed: a valid cache
 * built by a run that then lacked privileges stays for the run that has them.
 */
int btf_cache__load(struct btf_cache *c, int (*load)(void *ctx), void *ctx)
{
	char suspect[PATH_MAX];
	bool file;
	int err = load(ctx), again;

	if (!err || !c->path[0] || err == -EPERM)
		return err;
	snprintf(suspect, sizeof(suspect), "%s", c->path);
	file = c->memfd < 0;
	btf_cache__close(c);
	c->path[0] = 0;
	c->source = "vmlinux";
	again = load(ctx);
	if (again) {
		log__debug(LOG_VERBOSE, "minimal BTF: loading without '%s' fails too (%s): kept", suspect,
			   strerror(-again));
		return again;
	}
	if (file && unlink(suspect) && errno != ENOENT)
		log__warn("cannot remove '%s': %s", suspect, strerror(errno));
	log__warn("cannot load with the cached BTF '%s' (%s), loaded with the full vmlinux BTF: "
		  "the cached file is removed and will be rebuilt",
		  suspect, strerror(-err));
	return 0;
}

void btf_cache__close(struct btf_cache *c)
{
	if (c->memfd >= 0)
		close(c->memfd);
	c->memfd = -1;
}
