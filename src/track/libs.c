// SPDX-License-Identifier: MIT
/* The files a tracked tree maps: inspected once each, their allocator sites attached, kept for
 * later or counted; what a running process maps is read in libs_proc.c. */
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
#include "bpf/proc.h"
#include "common/log.h"
#include "track/deps.h"
#include "track/libs.h"
#include "track/libs_priv.h"
#include "track/usdt.h"

#define LIBS_MAX_SITES 96

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

struct libs_file_id libs__file_id(const struct stat *st)
{
	return (struct libs_file_id){
	    .dev = st->st_dev,
	    .ino = st->st_ino,
	    .size = (uint64_t)st->st_size,
	    .mtime_ns =
		(uint64_t)st->st_mtim.tv_sec * 1000000000ull + (uint64_t)st->st_mtim.tv_nsec,
	    .ctime_ns =
		(uint64_t)st->st_ctim.tv_sec * 1000000000ull + (uint64_t)st->st_ctim.tv_nsec,
	};
}

/* By the whole identity: a file rewritten in place, or a new one given a deleted file's inode
 * number, is inspected as the new file it is. */
static struct lib_entry *libs__seen(struct libs *l, const struct stat *st)
{
	struct libs_file_id id = libs__file_id(st);

	for (size_t i = 0; i < l->nr; i++)
		if (!memcmp(&l->v[i].id, &id, sizeof(id)))
			return &l->v[i];
	return NULL;
}

/* Attaches n sites of e's file; e->sites counts them already. */
int libs__attach_sites(struct libs *l, struct lib_entry *e, const struct alloc_site *sites, int n)
{
	char fdpath[32];
	const char *path = e->path;
	uint64_t t0;
	int err;

	for (int i = 0; i < n && l->pl_gate; i++) {
		/* a dlopen site stops every process alike: it needs no mark */
		if ((sites[i].spec & MT_SPEC_PL) && !(sites[i].spec & MT_SPEC_DLOPEN)) {
			err = l->pl_gate(l->pl_ctx);
			if (err)
				return err;
			l->pl_gate = NULL;
		}
	}
	t0 = libs__now();
	l->attaches++; /* tried: a process gone meanwhile fails it (its /proc/PID/exe) */
	if (e->fd >= 0) {
		snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", e->fd);
		path = fdpath;
	}
	err = attach_set__library(l->set, path, sites, n);

	l->attach_ns += libs__now() - t0;
	if (err) {
		e->sites -= n;
		log__error("cannot attach uprobes to '%s': %s", e->path, strerror(-err));
		return err;
	}
	if (e->sites > e->sites_max)
		e->sites_max = e->sites;
	log__debug(LOG_VERBOSE, "attached %d %s sites in %s", n, alloc_kind__name(e->kind),
		   e->path);
	for (int i = 0; i < n; i++)
		if (sites[i].probe != sites[i].offset)
			log__debug(LOG_DEBUG,
				   "  %s: probes at +%" PRIu64 " (an emulated instruction)",
				   sites[i].name, sites[i].probe - sites[i].offset);
	return 0;
}

/* The file's memtrack probes (MEMTRACK_START ...), once there is an attach set. */
static int libs__attach_usdt(struct libs *l, struct lib_entry *e)
{
	int err;

	if (!e->usdt || !l->set)
		return 0;
	err = attach_set__usdt(l->set, e->path, e->usdt, e->nr_usdt);
	if (err)
		log__error("cannot attach to the memtrack probes of '%s': %s", e->path,
			   strerror(-err));
	else
		log__debug(LOG_VERBOSE, "attached %d memtrack probes in %s", e->nr_usdt, e->path);
	free(e->usdt);
	e->usdt = NULL;
	return err;
}

void libs__preload(struct libs *l, dev_t dev, ino_t ino, bool defer)
{
	l->preload = !defer;
	l->defer = defer;
	l->pre_dev = dev;
	l->pre_ino = ino;
}

static bool libs__glibc_family(enum alloc_kind k)
{
	return k == ALLOC_LIBC || k == ALLOC_CXX;
}

static bool libs__family(enum alloc_kind k)
{
	return k == ALLOC_JEMALLOC || k == ALLOC_MIMALLOC || k == ALLOC_TCMALLOC;
}

/* MT_SPEC_FAM of a family kind's sites (probe_spec.h): the bit MT_SERVED_FAM_BIT gives is the
 * interposer's MT_SHM_PROC_* flag of that family (src/preload/shm_abi.h) */
static unsigned libs__family_index(enum alloc_kind k)
{
	return k == ALLOC_JEMALLOC ? 1 : k == ALLOC_MIMALLOC ? 2 : k == ALLOC_TCMALLOC ? 3 : 0;
}

/* The symbol by which the interposer recognises a family library as the process's malloc
 * (pl_fams in src/preload/preload_families.c). */
static const char *libs__family_mark(enum alloc_kind k)
{
	return k == ALLOC_JEMALLOC   ? "mallocx"
	       : k == ALLOC_MIMALLOC ? "mi_malloc"
	       : k == ALLOC_TCMALLOC ? "tc_malloc"
				     : NULL;
}

/* An exec's inspection meets e (in lookup order): what decides whether the interposer serves
 * a family library (libs__inspect). */
static void libs__note(struct libs *l, struct lib_entry *e, bool is_exe)
{
	if (!l->loading)
		return;
	l->nr_fam += libs__family(e->kind);
	l->exe_malloc |= is_exe && e->malloc_def;
	l->lib_family |= !is_exe && libs__family(e->kind);
	if (!is_exe && e->malloc_def && l->first_malloc < 0)
		l->first_malloc = e - l->v;
	/* the interposer's own test (pl_malloc_is_ours): its malloc must be the first definition
	 * (e.g. LD_PRELOAD="libjemalloc.so.2 $LD_PRELOAD" puts jemalloc's ahead of it) */
	if (!is_exe && e->malloc_def && !l->pre_seen)
		l->malloc_first = true;
}

/* Appends n sites of e's file to *dst (holding have) for later: libs__bind, or
 * libs__attach_glibc. The file is held open meanwhile: its path may be seen through a process
 * (/proc/PID/root/...) that is gone by then. */
int libs__keep(struct lib_entry *e, struct alloc_site **dst, int have,
	       const struct alloc_site *sites, int n)
{
	struct alloc_site *v;

	if (e->fd < 0)
		e->fd = open(e->path, O_PATH | O_CLOEXEC);
	if (e->fd < 0)
		return -errno;
	v = realloc(*dst, (have + n) * sizeof(*sites));
	if (!v)
		return -ENOMEM;
	memcpy(v + have, sites, n * sizeof(*sites));
	*dst = v;
	return 0;
}

/* Moves the dlopen sites (MT_SPEC_DLOPEN) of sites[n] to the front, in order. Their count. */
int libs__dlopen_first(struct alloc_site *sites, int n)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		if (sites[i].spec & MT_SPEC_DLOPEN) {
			struct alloc_site s = sites[i];

			memmove(sites + k + 1, sites + k, (size_t)(i - k) * sizeof(*sites));
			sites[k++] = s;
		}
	return k;
}

/* Preload mode: what is left to probe in a file (see libs__preload). */
static int libs__preload_filter(const struct lib_entry *e, struct alloc_site *sites, int n)
{
	int kept = 0;

	if (e->kind != ALLOC_LIBC && e->kind != ALLOC_CXX && !e->static_cxx)
		return n;
	for (int i = 0; i < n; i++)
		if (sites[i].spec & MT_SPEC_DLOPEN)
			sites[kept++] = sites[i];
	return kept;
}

/*
 * A dlopen brings e, a file seen before. Nothing to do, unless it is a family library kept back
 * because an exec mapped it as its process's malloc (the interposer serves it there; its sites
 * wait with glibc's): the process that dlopen'ed it calls it directly, where only uprobes see
 * the calls. Its sites go in for good now, or, in while glibc's are, stay in when those go out
 * (its own link group, made permanent). Returns the sites added (1) or 0, or -errno.
 */
static int libs__family_dlopened(struct libs *l, struct lib_entry *e)
{
	int err = 0;

	/* a dlopen stop reads every mapping: in the process whose malloc it is, served, it is
	 * not new. Any other process calls it directly, an unserved one too: glibc's uprobes (and
	 * the kept-back sites with them) are in only while a process needs them, and not at all
	 * for one whose executable defines malloc (until 7 December 2026 an unserved process was
	 * taken to have them in: `env -i dlopen_mimalloc_exe` after a served alloc_mimalloc lost
	 * its mi_malloc and mi_free) */
	if (!e->nr_later || !libs__family(e->kind) || !l->set ||
	    ((l->dl_served & MT_SERVED_LIBC) &&
	     (l->dl_served & MT_SERVED_FAM_BIT(libs__family_index(e->kind)))))
		return 0;
	if (l->glibc_on) {
		attach_set__regroup(l->set, e->group, 0);
	} else {
		e->sites += e->nr_later;
		attach_set__group(l->set, 0);
		err = libs__attach_sites(l, e, e->later, e->nr_later);
	}
	free(e->later);
	e->later = NULL;
	e->nr_later = 0;
	e->group = 0;
	log__debug(LOG_VERBOSE, "%s dlopen'ed: its sites in for the rest of the run", e->path);
	return err ? err : 1;
}

/* name: the path to show for it, NULL when path says it (see libs__fill). */
int libs__attach_file(struct libs *l, const char *path, const char *name, bool is_exe)
{
	struct alloc_site sites[LIBS_MAX_SITES];
	struct elf_info info;
	struct lib_entry *e;
	struct stat st;
	bool served_family;
	int n, err;

	if (stat(path, &st))
		return 0; /* vanished: the loader will not map it either */
	if (st.st_dev == l->pre_dev && st.st_ino == l->pre_ino && (l->preload || l->defer)) {
		l->pre_seen |= l->loading;
		return 0; /* the interposer: never probed, not an allocator of the program's */
	}
	e = libs__seen(l, &st);
	if (e) {
		l->kinds |= e->kinds;
		libs__note(l, e, is_exe);
		return l->loading ? 0 : libs__family_dlopened(l, e);
	}
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
	e->fd = -1;
	e->id = libs__file_id(&st);
	e->path = strdup(path);
	e->name = name ? strdup(name) : NULL;
	if (!e->path || (name && !e->name))
		return -ENOMEM;
	err = elf_info__load(path, &info);
	if (err == -ENOEXEC)
		return 0; /* not ELF: nothing to attach, ever */
	if (err) {
		/* Not read (a process gone between the stat and the open: its files are no longer
		 * reachable through its root): forgotten, not kept as a file with nothing in it,
		 * which every later inspection of the same file would find "seen" and take for a
		 * file without an allocator (a libc.so.6 kept so made the next `env -i` process
		 * "no glibc: a static program", its calls lost). */
		free(e->path);
		free(e->name);
		l->nr--;
		return 0;
	}
	e->nr_usdt = usdt__sites(info.elf, &e->usdt);
	err = libs__attach_usdt(l, e);
	if (err) {
		elf_info__free(&info);
		return err;
	}
	e->kind = alloc_table__classify(&info, is_exe);
	e->kinds = 1u << e->kind;
	e->malloc_def = elf_info__find(&info, "malloc") != 0;
	e->static_cxx = e->kind == ALLOC_STATIC && !alloc_table__defines_c(&info);
	if (e->static_cxx)
		e->kinds = LIBS_KIND_STATIC_CXX;
	e->fam_mark = libs__family(e->kind) && elf_info__find(&info, libs__family_mark(e->kind));
	e->inert_dl =
	    !l->loading && !is_exe && e->kind == ALLOC_NONE && !e->malloc_def && !e->nr_usdt;
	/* as the interposer judges the next malloc: by the file's name */
	if (libs__glibc_family(e->kind) && !strstr(path, "/libc.so") && e->malloc_def)
		e->kinds |= LIBS_KIND_MALLOC_SHIM;
	l->kinds |= e->kinds;
	libs__note(l, e, is_exe);
	n = alloc_table__sites(&info, e->kind, is_exe, sites, LIBS_MAX_SITES);
	served_family = l->loading && !is_exe && e->malloc_def && libs__family(e->kind);
	elf_info__free(&info);
	if (l->preload)
		n = libs__preload_filter(e, sites, n);
	if (n <= 0)
		return 0;
	e->sites = n;
	/* what reaches glibc's malloc in a served process is the interposer's to record: an
	 * executable's own operator new calling malloc too (one that defines malloc itself is
	 * never served: the interposer forwards to it) */
	if (libs__glibc_family(e->kind) || e->kind == ALLOC_STATIC)
		for (int i = 0; i < n; i++)
			sites[i].spec |= MT_SPEC_PL;
	/* so are the calls of a shared jemalloc, mimalloc or tcmalloc that is the process's
	 * malloc (src/preload/preload_families.c), and only there (MT_SPEC_FAM): the same file
	 * may be dlopen'ed RTLD_LOCAL by another process, before or after, which calls it
	 * directly, unseen by its interposer */
	if (libs__family(e->kind) && !is_exe)
		for (int i = 0; i < n; i++)
			sites[i].spec = MT_SPEC_WITH_FAM(sites[i].spec | MT_SPEC_PL,
							 libs__family_index(e->kind));
	/* dlopen included: a served process announces its dlopens itself (preload_dl.c); a
	 * family library an exec maps waits too: a process whose malloc it is is served
	 * (libs__inspect), any other one needs the probes, and has them attached before it runs;
	 * so does an executable with libstdc++ linked in (LIBS_KIND_STATIC_CXX) */
	/* a family file past the last group of its own is not kept back (attached for good) */
	if (served_family && l->defer && l->last_group < UINT8_MAX)
		e->group = l->last_group = l->last_group ? l->last_group + 1 : LIBS_GROUP_FAMILY;
	else if (libs__glibc_family(e->kind) || e->static_cxx)
		e->group = LIBS_GROUP_GLIBC;
	if (l->defer && e->group) {
		/* glibc's dlopen stop in already (libs__attach_glibc_dlopen): this file's too */
		int now = l->dlopen_on ? libs__dlopen_first(sites, n) : 0;

		err = n > now ? libs__keep(e, &e->later, 0, sites + now, n - now) : 0;
		if (err)
			return err;
		e->nr_later = n - now;
		e->sites = now;
		if (l->glibc_on && e->nr_later) { /* glibc's probes are in: so are this file's */
			e->sites += e->nr_later;
			err = libs__attach_later(l, e);
			if (err)
				return err;
		}
		if (!now)
			return l->glibc_on && e->nr_later ? 1 : 0;
		n = now;
	}
	if (!l->set) {
		err = libs__keep(e, &e->pending, 0, sites, n);
		return err ? err : 1;
	}
	err = libs__attach_sites(l, e, sites, n);
	return err ? err : 1;
}

int libs__bind(struct libs *l, struct attach_set *set)
{
	int err = 0;

	l->set = set;
	for (size_t i = 0; i < l->nr && !err; i++) {
		err = libs__attach_usdt(l, &l->v[i]);
		if (!err && l->v[i].pending) {
			err = libs__attach_sites(l, &l->v[i], l->v[i].pending,
						 l->v[i].sites -
						     (l->glibc_on ? l->v[i].nr_later : 0));
			free(l->v[i].pending);
			l->v[i].pending = NULL;
		}
		if (!err && l->glibc_on)
			err = libs__attach_later(l, &l->v[i]);
	}
	return err;
}

void libs__set_pl_gate(struct libs *l, int (*gate)(void *ctx), void *ctx)
{
	l->pl_gate = gate;
	l->pl_ctx = ctx;
}

uint64_t libs__attaches(const struct libs *l)
{
	return l->attaches;
}

void libs__each_seen(const struct libs *l, size_t *next,
		     void (*fn)(void *ctx, const struct libs_file_id *f), void *ctx)
{
	/* libs__attach_file returns at once for a file in v[], whatever it found in it, but a
	 * family library kept back (libs__family_dlopened): never listed, its dlopens stop */
	for (; l->set && *next < l->nr; ++*next)
		if (!(libs__family(l->v[*next].kind) && l->v[*next].group))
			fn(ctx, &l->v[*next].id);
}

void libs__each_inert(const struct libs *l, void (*fn)(void *ctx, const struct libs_file_id *f),
		      void *ctx)
{
	for (size_t i = 0; i < l->nr; i++)
		if (l->v[i].inert_dl)
			fn(ctx, &l->v[i].id);
}

unsigned libs__kinds(const struct libs *l)
{
	return l->kinds;
}

int libs__inspect(struct libs *l, const char *root, const char *exe, const char *exe_name,
		  const char *ld_path, const char *ld_pre)
{
	struct dep_list deps;
	int err, added = 0;

	l->kinds = 0;
	l->first_malloc = -1;
	l->fam_malloc = false;
	l->nr_fam = 0;
	l->pre_seen = l->malloc_first = l->exe_malloc = l->lib_family = false;
	err = deps__resolve_as(root, exe, exe_name, ld_path, ld_pre, &deps);
	if (err)
		return err;
	l->exe_loader = deps.exe_loader;
	l->loading = true;
	for (size_t i = 0; i < deps.nr; i++) {
		err = libs__attach_file(l, deps.paths[i], i == 0 ? exe_name : NULL, i == 0);
		if (err < 0)
			goto cleanup;
		added += err;
	}
	/* The interposer serves a family library that is the process's malloc, as it judges it
	 * (pl_fam_serve): the first malloc after its own is that library's, which has the
	 * family's mark. Only one such library: calls into a second one are forwarded
	 * unrecorded. */
	l->fam_malloc = l->first_malloc >= 0 && libs__family(l->v[l->first_malloc].kind);
	if (l->first_malloc >= 0 && l->v[l->first_malloc].fam_mark && l->nr_fam == 1 &&
	    !l->malloc_first)
		l->kinds = (l->kinds & ~l->v[l->first_malloc].kinds) | LIBS_KIND_SERVED_FAMILY;
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

int libs__fill(const struct libs *l, struct manifest *m)
{
	size_t n = 0;

	for (size_t i = 0; i < l->nr; i++)
		n += l->v[i].sites_max > 0;
	m->libraries = calloc(n ? n : 1, sizeof(*m->libraries));
	if (!m->libraries)
		return -ENOMEM;
	for (size_t i = 0; i < l->nr; i++) {
		struct manifest_library *ml;
		const char *p = l->v[i].path;

		if (!l->v[i].sites_max)
			continue;
		ml = &m->libraries[m->nr_libraries++];
		/* "/proc/PID/root/usr/lib/x" is "/usr/lib/x" seen from that process */
		if (l->v[i].name)
			p = l->v[i].name;
		else if (!strncmp(p, "/proc/", 6) && strstr(p, "/root/"))
			p = strstr(p, "/root/") + 5;
		ml->path = strdup(p);
		ml->kind = strdup(alloc_kind__name(l->v[i].kind));
		ml->sites = l->v[i].sites_max;
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
		free(l->v[i].usdt);
		free(l->v[i].later);
		if (l->v[i].fd >= 0)
			close(l->v[i].fd);
	}
	free(l->v);
	libs__memo_free(l);
	free(l);
}
