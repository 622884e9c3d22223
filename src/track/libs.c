// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "bpf/probe_spec.h"
#include "common/log.h"
#include "track/deps.h"
#include "track/libs.h"

#define LIBS_MAX_SITES 96

struct lib_entry {
	dev_t dev;
	ino_t ino;
	char *path; /* what was opened and attached to (maybe through /proc/PID/...) */
	char *name; /* what the manifest shows, when path does not say it: NULL otherwise */
	enum alloc_kind kind;
	int sites;
	struct alloc_site *pending; /* sites found before libs__bind: attached there */
};

struct libs {
	struct attach_set *set;
	struct lib_entry *v; /* every file inspected, allocator or not: inspected once */
	size_t nr, cap;
	uint64_t attach_ns;
	bool preload; /* libs__preload */
	bool loading; /* inspecting what an exec maps (not a dlopen) */
	dev_t pre_dev;
	ino_t pre_ino;
};

static uint64_t libs__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int libs__new(struct libs **l, struct attach_set *set)
{
	*l = calloc(1, sizeof(**l));
	if (!*l)
		return -ENOMEM;
	(*l)->set = set;
	return 0;
}

/* Reads NAME=value from /proc/pid/environ into out (empty when unset). */
static char *libs__environ(pid_t pid, const char *name, char *out, size_t cap)
{
	char path[64], buf[65536];
	size_t nl = strlen(name);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
		if (!strncmp(p, name, nl) && p[nl] == '=') {
			snprintf(out, cap, "%s", p + nl + 1);
			return out;
		}
	}
	return NULL;
}

static struct lib_entry *libs__seen(struct libs *l, const struct stat *st)
{
	for (size_t i = 0; i < l->nr; i++)
		if (l->v[i].dev == st->st_dev && l->v[i].ino == st->st_ino)
			return &l->v[i];
	return NULL;
}

static int libs__attach_sites(struct libs *l, struct lib_entry *e, const struct alloc_site *sites)
{
	uint64_t t0 = libs__now();
	int err = attach_set__library(l->set, e->path, sites, e->sites);

	l->attach_ns += libs__now() - t0;
	if (err) {
		e->sites = 0;
		log__error("cannot attach uprobes to '%s': %s", e->path, strerror(-err));
		return err;
	}
	log__debug(LOG_VERBOSE, "attached %d %s sites in %s", e->sites, alloc_kind__name(e->kind), e->path);
	for (int i = 0; i < e->sites; i++)
		if (sites[i].probe != sites[i].offset)
			log__debug(LOG_DEBUG, "  %s: entry probe at +%" PRIu64 " (an emulated instruction)",
				   sites[i].name, sites[i].probe - sites[i].offset);
	return 0;
}

void libs__preload(struct libs *l, dev_t dev, ino_t ino)
{
	l->preload = true;
	l->pre_dev = dev;
	l->pre_ino = ino;
}

/* Preload mode: what is left to probe in a file (see libs__preload). A shared jemalloc,
 * mimalloc or tcmalloc that an exec maps and that defines malloc is the process's malloc (it
 * comes before libc): the interposer serves it, its own entry points included
 * (src/preload/preload_families.c). One a dlopen brings is not, and an executable's own
 * allocator is not either: uprobes. But an executable that defines only operator new and
 * delete (cc1plus: libstdc++ linked in) calls malloc and free through the PLT, which the
 * interposer records: probing its operators too would count each call twice. */
static int libs__preload_filter(const struct libs *l, const struct lib_entry *e,
				const struct stat *st, bool is_exe, bool has_malloc,
				struct alloc_site *sites, int n)
{
	int kept = 0;

	if (st->st_dev == l->pre_dev && st->st_ino == l->pre_ino)
		return 0;
	if (!is_exe && has_malloc && l->loading &&
	    (e->kind == ALLOC_JEMALLOC || e->kind == ALLOC_MIMALLOC || e->kind == ALLOC_TCMALLOC))
		return 0;
	if (is_exe && !has_malloc && e->kind == ALLOC_STATIC)
		return 0;
	if (e->kind != ALLOC_LIBC && e->kind != ALLOC_CXX)
		return n;
	for (int i = 0; i < n; i++)
		if (sites[i].spec & MT_SPEC_DLOPEN)
			sites[kept++] = sites[i];
	return kept;
}

/* name: the path to show for it, NULL when path says it (see libs__fill). */
static int libs__attach_file(struct libs *l, const char *path, const char *name, bool is_exe)
{
	struct alloc_site sites[LIBS_MAX_SITES];
	struct elf_info info;
	struct lib_entry *e;
	struct stat st;
	bool has_malloc;
	int n, err;

	if (stat(path, &st))
		return 0; /* vanished: the loader will not map it either */
	if (libs__seen(l, &st))
		return 0;
	if (l->nr == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 32;
		void *p = realloc(l->v, ncap * sizeof(*l->v));

		if (!p)
			return -ENOMEM;
		l->v = p;
		l->cap = ncap;
	}
	e = &l->v[l->nr++];
	memset(e, 0, sizeof(*e));
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->path = strdup(path);
	e->name = name ? strdup(name) : NULL;
	if (!e->path || (name && !e->name))
		return -ENOMEM;
	if (elf_info__load(path, &info))
		return 0;
	e->kind = alloc_table__classify(&info, is_exe);
	n = alloc_table__sites(&info, e->kind, is_exe, sites, LIBS_MAX_SITES);
	has_malloc = elf_info__find(&info, "malloc") != 0;
	elf_info__free(&info);
	if (l->preload)
		n = libs__preload_filter(l, e, &st, is_exe, has_malloc, sites, n);
	if (n <= 0)
		return 0;
	e->sites = n;
	if (!l->set) {
		e->pending = malloc(n * sizeof(*sites));
		if (!e->pending)
			return -ENOMEM;
		memcpy(e->pending, sites, n * sizeof(*sites));
		return 1;
	}
	err = libs__attach_sites(l, e, sites);
	return err ? err : 1;
}

int libs__bind(struct libs *l, struct attach_set *set)
{
	int err = 0;

	l->set = set;
	for (size_t i = 0; i < l->nr && !err; i++) {
		if (!l->v[i].pending)
			continue;
		err = libs__attach_sites(l, &l->v[i], l->v[i].pending);
		free(l->v[i].pending);
		l->v[i].pending = NULL;
	}
	return err;
}

/* exe_name: what to call exe in the manifest, NULL for exe itself. */
static int libs__inspect(struct libs *l, const char *root, const char *exe, const char *exe_name,
			 const char *ld_path, const char *ld_pre)
{
	struct dep_list deps;
	int err, added = 0;

	err = deps__resolve(root, exe, ld_path, ld_pre, &deps);
	if (err)
		return err;
	l->loading = true;
	for (size_t i = 0; i < deps.nr; i++) {
		err = libs__attach_file(l, deps.paths[i], i == 0 ? exe_name : NULL, i == 0);
		if (err < 0)
			goto cleanup;
		added += err;
	}
	err = added;
cleanup:
	l->loading = false;
	deps__free(&deps);
	return err;
}

int libs__inspect_exe(struct libs *l, const char *root, const char *exe, const char *ld_path,
		      const char *ld_pre)
{
	return libs__inspect(l, root, exe, NULL, ld_path, ld_pre);
}

int libs__inspect_pid(struct libs *l, pid_t pid)
{
	char root[64], exe[64], name[PATH_MAX], ldp[PATH_MAX], pre[PATH_MAX], *ld_path, *ld_pre;
	ssize_t n;

	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	/* opened through the link (it works whatever the path, even deleted or in another
	 * mount namespace), shown by the path it points to */
	n = readlink(exe, name, sizeof(name) - 1);
	if (n > 0)
		name[n] = 0;
	ld_path = libs__environ(pid, "LD_LIBRARY_PATH", ldp, sizeof(ldp));
	ld_pre = libs__environ(pid, "LD_PRELOAD", pre, sizeof(pre));
	return libs__inspect(l, root, exe, n > 0 ? name : NULL, ld_path, ld_pre);
}

int libs__inspect_maps(struct libs *l, pid_t pid)
{
	char path[64], line[4096 + 128], file[PATH_MAX];
	int added = 0, err;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char perms[8], *name;

		/* start-end perms offset dev inode   path */
		if (sscanf(line, "%*s %7s", perms) != 1 || perms[2] != 'x')
			continue;
		name = strchr(line, '/');
		if (!name)
			continue;
		name[strcspn(name, "\n")] = 0;
		if (strstr(name, " (deleted)"))
			continue;
		snprintf(file, sizeof(file), "/proc/%d/root%s", pid, name);
		err = libs__attach_file(l, file, NULL, false);
		if (err < 0) {
			fclose(f);
			return err;
		}
		added += err;
	}
	fclose(f);
	return added;
}

int libs__fill(const struct libs *l, struct manifest *m)
{
	size_t n = 0;

	for (size_t i = 0; i < l->nr; i++)
		n += l->v[i].sites > 0;
	m->libraries = calloc(n ? n : 1, sizeof(*m->libraries));
	if (!m->libraries)
		return -ENOMEM;
	for (size_t i = 0; i < l->nr; i++) {
		struct manifest_library *ml;
		const char *p = l->v[i].path;

		if (!l->v[i].sites)
			continue;
		ml = &m->libraries[m->nr_libraries++];
		/* "/proc/PID/root/usr/lib/x" is "/usr/lib/x" seen from that process */
		if (l->v[i].name)
			p = l->v[i].name;
		else if (!strncmp(p, "/proc/", 6) && strstr(p, "/root/"))
			p = strstr(p, "/root/") + 5;
		ml->path = strdup(p);
		ml->kind = strdup(alloc_kind__name(l->v[i].kind));
		ml->sites = l->v[i].sites;
		if (!ml->path || !ml->kind)
			return -ENOMEM;
	}
	return 0;
}

uint64_t libs__attach_ns(const struct libs *l)
{
	return l ? l->attach_ns : 0;
}

void libs__free(struct libs *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->nr; i++) {
		free(l->v[i].path);
		free(l->v[i].name);
		free(l->v[i].pending);
	}
	free(l->v);
	free(l);
}
