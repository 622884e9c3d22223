// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/test_delay.h"
#include "track/deps.h"
#include "track/elf_syms.h"

#define LDCACHE_MAGIC "glibc-ld.so.cache1.1"
#define LDCACHE_HDR   48     /* magic[17] version[3] nlibs len_strings flags pad[3] ext unused[3] */
#define LDCACHE_ENT   24     /* flags key value osversion hwcap */
#define LDCACHE_X8664 0x0300 /* FLAG_X8664_LIB64 */

static const char *const default_dirs[] = {
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
};

/*
 * The last ld.so.cache mapped, kept between lookups: every exec stop looks up each DT_NEEDED
 * name, and mapping the file for each one cost more than the lookups (page-table work is slow
 * in VMs). Revalidated by stat at every lookup: a rewritten cache (ldconfig renames a new file
 * into place) has another inode or mtime and is mapped afresh. Single-threaded use only.
 */
static struct {
	char path[PATH_MAX];
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	const uint8_t *map;
	size_t len;
} ldcache = {.map = MAP_FAILED};

static int deps__ldcache_map(const char *path)
{
	struct stat st;
	int fd, err = 0;

	if (stat(path, &st))
		return -errno;
	if (ldcache.map != MAP_FAILED && !strcmp(ldcache.path, path) && ldcache.dev == st.st_dev &&
	    ldcache.ino == st.st_ino && ldcache.len == (size_t)st.st_size &&
	    ldcache.mtime.tv_sec == st.st_mtim.tv_sec &&
	    ldcache.mtime.tv_nsec == st.st_mtim.tv_nsec)
		return 0;
	if (ldcache.map != MAP_FAILED)
		munmap((void *)ldcache.map, ldcache.len);
	ldcache.map = MAP_FAILED;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_size < LDCACHE_HDR) {
		err = -ENOENT;
		goto cleanup;
	}
	ldcache.map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (ldcache.map == MAP_FAILED) {
		err = -errno;
		goto cleanup;
	}
	snprintf(ldcache.path, sizeof(ldcache.path), "%s", path);
	ldcache.dev = st.st_dev;
	ldcache.ino = st.st_ino;
	ldcache.mtime = st.st_mtim;
	ldcache.len = st.st_size;
cleanup:
	close(fd);
	return err;
}

int deps__ldcache_lookup(const char *root, const char *soname, char *out, size_t cap)
{
	char path[PATH_MAX];
	const uint8_t *map, *base;
	uint32_t nlibs;
	size_t len, hdr_off;
	int err;

	snprintf(path, sizeof(path), "%s/etc/ld.so.cache", root);
	err = deps__ldcache_map(path);
	if (err)
		return err;
	map = ldcache.map;
	len = ldcache.len;
	base = memmem(map, len < 4096 ? len : 4096, LDCACHE_MAGIC, strlen(LDCACHE_MAGIC));
	if (!base)
		return -ENOENT;
	hdr_off = base - map;
	memcpy(&nlibs, base + 20, 4);
	if (hdr_off + LDCACHE_HDR + (size_t)nlibs * LDCACHE_ENT > len)
		return -ENOENT;
	for (uint32_t i = 0; i < nlibs; i++) {
		const uint8_t *e = base + LDCACHE_HDR + (size_t)i * LDCACHE_ENT;
		int32_t flags;
		uint32_t key, value;

		memcpy(&flags, e, 4);
		memcpy(&key, e + 4, 4);
		memcpy(&value, e + 8, 4);
		/* new-format string offsets are from the start of the file */
		if (key >= len || value >= len || !memchr(map + key, 0, len - key) ||
		    !memchr(map + value, 0, len - value))
			continue;
#if defined(__x86_64__)
		if ((flags & LDCACHE_X8664) != LDCACHE_X8664)
			continue;
#endif
		if (strcmp((const char *)map + key, soname))
			continue;
		snprintf(out, cap, "%s", (const char *)map + value);
		return 0;
	}
	return -ENOENT;
}

static int deps__add(struct dep_list *l, const char *path)
{
	char **n;

	for (size_t i = 0; i < l->nr; i++)
		if (!strcmp(l->paths[i], path))
			return 0;
	n = realloc(l->paths, (l->nr + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	l->paths = n;
	n[l->nr] = strdup(path);
	if (!n[l->nr])
		return -ENOMEM;
	l->nr++;
	return 1;
}

static bool deps__exists(const char *root, const char *path, char *out, size_t cap)
{
	if ((size_t)snprintf(out, cap, "%s%s", root, path) >= cap)
		return false;
	return access(out, R_OK) == 0;
}

/* Search a ':'-separated list of directories; $ORIGIN is the directory of the dependent. */
static bool deps__search(const char *root, const char *list, const char *origin, const char *name,
			 char *out, size_t cap)
{
	char buf[PATH_MAX * 2], dir[PATH_MAX], cand[PATH_MAX * 2];
	char *save = NULL, *tok;

	if (!list)
		return false;
	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
		const char *o = strstr(tok, "$ORIGIN");

		if (o)
			snprintf(dir, sizeof(dir), "%.*s%s%s", (int)(o - tok), tok, origin, o + 7);
		else
			snprintf(dir, sizeof(dir), "%s", tok);
		if (snprintf(cand, sizeof(cand), "%s/%s", dir, name) >= (int)sizeof(cand))
			continue;
		if (deps__exists(root, cand, out, cap))
			return true;
	}
	return false;
}

/* The executable's DT_RPATH and $ORIGIN (deps__find): NULLs when it has none (or a RUNPATH). */
struct deps_exe_rpath {
	const char *list, *origin;
};

/* As the loader searches (glibc's _dl_map_object): an object's DT_RPATH, unless it has a
 * DT_RUNPATH, then the DT_RPATH of what loaded it up to the executable (here: the
 * executable's; the loaders in between are not tracked), LD_LIBRARY_PATH, the object's
 * DT_RUNPATH, ld.so.cache, the default directories. Until 7 December 2026 a DT_RUNPATH was
 * searched before LD_LIBRARY_PATH, and the executable's DT_RPATH was not inherited: another
 * file than the loader's could be inspected and attached to. */
static bool deps__find(const char *root, const char *name, const struct elf_info *from,
		       const char *from_path, const char *ld_path, const struct deps_exe_rpath *exe,
		       char *out, size_t cap)
{
	char origin[PATH_MAX], cached[PATH_MAX], tmp[PATH_MAX];
	size_t rl = strlen(root);
	bool runpath = from && from->runpath && !from->runpath_is_rpath;

	if (strchr(name, '/'))
		return deps__exists(root, name, out, cap);
	snprintf(tmp, sizeof(tmp), "%s", from_path + (strncmp(from_path, root, rl) ? 0 : rl));
	snprintf(origin, sizeof(origin), "%s", dirname(tmp));
	if (from && from->runpath && from->runpath_is_rpath &&
	    deps__search(root, from->runpath, origin, name, out, cap))
		return true;
	if (!runpath && exe && exe->list &&
	    deps__search(root, exe->list, exe->origin, name, out, cap))
		return true;
	if (deps__search(root, ld_path, origin, name, out, cap))
		return true;
	if (runpath && deps__search(root, from->runpath, origin, name, out, cap))
		return true;
	if (!deps__ldcache_lookup(root, name, cached, sizeof(cached)) &&
	    deps__exists(root, cached, out, cap))
		return true;
	for (size_t i = 0; i < sizeof(default_dirs) / sizeof(default_dirs[0]); i++) {
		snprintf(tmp, sizeof(tmp), "%s/%s", default_dirs[i], name);
		if (deps__exists(root, tmp, out, cap))
			return true;
	}
	return false;
}

/* MEMTRACK_TEST_INSPECT_DELAY_MS: the tests' slow look at an image without LD_PRELOAD (one the
 * interposer cannot serve, whose judgement attaches glibc's probes), its executable read and its
 * libraries not yet, so that a short one left running exits in between, as on a loaded machine
 * (test_login_under_queue_auto). */
static long deps_test_ms = -1;

int deps__resolve(const char *root, const char *exe, const char *ld_path, const char *ld_preload,
		  struct dep_list *out)
{
	return deps__resolve_as(root, exe, NULL, ld_path, ld_preload, out);
}

int deps__resolve_as(const char *root, const char *exe, const char *exe_as, const char *ld_path,
		     const char *ld_preload, struct dep_list *out)
{
	char found[PATH_MAX], rp_list[PATH_MAX * 2], rp_origin[PATH_MAX], as[PATH_MAX];
	struct deps_exe_rpath exe_rp = {NULL, NULL};
	size_t rl = strlen(root);
	int err;

	memset(out, 0, sizeof(*out));
	/* the executable's $ORIGIN: where it is, not the link it is opened through */
	if (exe_as) {
		size_t n = strlen(exe_as), dl = strlen(" (deleted)");

		snprintf(as, sizeof(as), "%s", exe_as);
		if (n > dl && !strcmp(as + n - dl, " (deleted)"))
			as[n - dl] = 0;
		exe_as = as;
	} else {
		exe_as = exe;
	}
	err = deps__add(out, exe);
	if (err < 0)
		goto cleanup;
	if (ld_preload) {
		char buf[PATH_MAX * 2], *save = NULL, *tok;

		snprintf(buf, sizeof(buf), "%s", ld_preload);
		for (tok = strtok_r(buf, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save))
			if (deps__find(root, tok, NULL, exe, ld_path, NULL, found, sizeof(found)) &&
			    (err = deps__add(out, found)) < 0)
				goto cleanup;
	}
	/* Breadth-first over the list as it grows: every entry's DT_NEEDED is appended once. */
	for (size_t i = 0; i < out->nr; i++) {
		struct elf_info info;

		if (elf_info__load_dynamic(out->paths[i], &info))
			continue; /* not ELF (a script): its interpreter is resolved at its own exec
				   */
		if (i == 0 && !ld_preload)
			test_delay__sleep("MEMTRACK_TEST_INSPECT_DELAY_MS", &deps_test_ms);
		if (i == 0)
			out->exe_loader =
			    !info.interp && info.soname && !strncmp(info.soname, "ld-", 3);
		if (i == 0 && info.runpath && info.runpath_is_rpath) {
			char tmp[PATH_MAX];

			snprintf(rp_list, sizeof(rp_list), "%s", info.runpath);
			snprintf(tmp, sizeof(tmp), "%s",
				 exe_as + (strncmp(exe_as, root, rl) ? 0 : rl));
			snprintf(rp_origin, sizeof(rp_origin), "%s", dirname(tmp));
			exe_rp = (struct deps_exe_rpath){rp_list, rp_origin};
		}
		if (i == 0 && info.interp &&
		    deps__exists(root, info.interp, found, sizeof(found)) &&
		    (err = deps__add(out, found)) < 0) {
			elf_info__free(&info);
			goto cleanup;
		}
		for (size_t j = 0; j < info.nr_needed; j++) {
			if (!deps__find(root, info.needed[j], &info, i ? out->paths[i] : exe_as,
					ld_path, &exe_rp, found, sizeof(found)))
				continue; /* the loader will fail on it too; nothing to attach */
			err = deps__add(out, found);
			if (err < 0) {
				elf_info__free(&info);
				goto cleanup;
			}
		}
		elf_info__free(&info);
	}
	err = 0;
cleanup:
	if (err)
		deps__free(out);
	return err;
}

void deps__free(struct dep_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nr; i++)
		free(l->paths[i]);
	free(l->paths);
	l->paths = NULL;
	l->nr = 0;
}
