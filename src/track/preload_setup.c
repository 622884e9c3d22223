// SPDX-License-Identifier: MIT
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "common/log.h"
#include "bpf/proc.h"
#include "track/handoff.h"
#include "track/preload_setup.h"

#define PRELOAD_NAME "libmemtrack-preload.so"
/* Rings: 1024 threads alive at once, 16,384 records (768 KiB) each: a sparse 768 MiB file
 * that costs what the threads write. More threads than slots: their records are dropped and
 * counted (manifest drops.no_slot). */
#define PRELOAD_SLOTS 1024
#define PRELOAD_RECORDS 16384

int preload_setup__parse(const char *s, enum alloc_hooks *out)
{
	static const char *const names[] = {"uprobe", "preload", "auto"};

	for (int i = 0; i < 3; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum alloc_hooks)i;
			return 0;
		}
	return -EINVAL;
}

/* $MEMTRACK_PRELOAD_LIB, else beside the executable (build/), else ../lib/memtrack/. */
static int preload_setup__find(struct preload_setup *p)
{
	const char *env = getenv("MEMTRACK_PRELOAD_LIB");
	char self[PATH_MAX], *dir;
	struct stat st;
	ssize_t n;

	if (env && *env) {
		snprintf(p->lib, sizeof(p->lib), "%s", env);
	} else {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0)
			return -errno;
		self[n] = 0;
		dir = dirname(self);
		snprintf(p->lib, sizeof(p->lib), "%s/" PRELOAD_NAME, dir);
		if (access(p->lib, R_OK))
			snprintf(p->lib, sizeof(p->lib), "%s/../lib/memtrack/" PRELOAD_NAME, dir);
	}
	if (stat(p->lib, &st))
		return -errno;
	if (realpath(p->lib, self)) /* bin/../lib/memtrack/x: say it plainly */
		snprintf(p->lib, sizeof(p->lib), "%s", self);
	/* LD_PRELOAD separates with spaces and colons */
	if (p->lib[0] != '/' || strpbrk(p->lib, ": \t"))
		return -EINVAL;
	p->dev = st.st_dev;
	p->ino = st.st_ino;
	return 0;
}

int preload_setup__start(struct preload_setup *p, enum alloc_hooks mode, uint64_t pidns_ino)
{
	const char *u = getenv("SUDO_UID"), *g = getenv("SUDO_GID"), *old;
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	struct stat st;
	char *pre;
	int err;

	memset(p, 0, sizeof(*p));
	if (mode == ALLOC_HOOKS_UPROBE)
		return 0;
	p->pidns_ino = pidns_ino;
	err = preload_setup__find(p);
	if (err) {
		log__error("cannot use the allocator interposer '%s': %s. Set MEMTRACK_PRELOAD_LIB, "
			   "or use --alloc-hooks uprobe",
			   p->lib[0] ? p->lib : PRELOAD_NAME, strerror(-err));
		goto fail;
	}
	if (u && g && geteuid() == 0) { /* the command will run as the invoking user */
		uid = (uid_t)strtoul(u, NULL, 10);
		gid = (gid_t)strtoul(g, NULL, 10);
	}
	p->shm_uid = uid != (uid_t)-1 ? uid : geteuid();
	err = shm_source__new(&p->shm, PRELOAD_SLOTS, PRELOAD_RECORDS, uid, gid, NULL);
	if (!err)
		shm_source__set_pidns(p->shm, pidns_ino);
	if (err) {
		log__error("cannot create the interposer's shared memory in /dev/shm: %s. Use "
			   "--alloc-hooks uprobe",
			   strerror(-err));
		goto fail;
	}
	old = getenv("LD_PRELOAD");
	if (asprintf(&pre, "%s%s%s", p->lib, old && *old ? ":" : "", old && *old ? old : "") < 0) {
		err = -ENOMEM;
		goto fail;
	}
	if (setenv("LD_PRELOAD", pre, 1) || setenv(MT_SHM_ENV, shm_source__path(p->shm), 1)) {
		err = -errno;
		free(pre);
		goto fail;
	}
	free(pre);
	_Static_assert(sizeof(p->env_root) / sizeof(p->env_root[0]) == MT_ENV_NR, "env_root");
	p->env_root[MT_ENV_LD_PRELOAD] = mt_env_value(getenv("LD_PRELOAD"));
	p->env_root[MT_ENV_SHM] = mt_env_value(getenv(MT_SHM_ENV));
	p->env_root[MT_ENV_LD_LIBRARY_PATH] = mt_env_value(getenv("LD_LIBRARY_PATH"));
	if (stat(shm_source__path(p->shm), &st) == 0) {
		p->shm_dev = st.st_dev;
		p->shm_ino = st.st_ino;
	}
	if (stat("/proc/self/ns/mnt", &st) == 0)
		p->mntns_ino = st.st_ino;
	/* the processes of the tree that cannot open it by its path ask us for it (handoff.h);
	 * without the socket they are judged at their exec and left to the uprobes */
	err = handoff__open(shm_source__path(p->shm), shm_source__fd(p->shm));
	if (err)
		log__debug(1, "the shared memory cannot be handed to other users' processes: %s",
			   strerror(-err));
	p->on = true;
	p->autom = mode == ALLOC_HOOKS_AUTO;
	log__debug(1, "alloc hooks: preload (%s, %s)", p->lib, shm_source__path(p->shm));
	return 0;
fail:
	preload_setup__close(p);
	if (p->shm)
		shm_source__src(p->shm)->destroy(shm_source__src(p->shm));
	p->shm = NULL;
	return mode == ALLOC_HOOKS_AUTO ? 0 : err;
}

const char *preload_setup__mode_name(const struct preload_setup *p)
{
	if (!p->on)
		return "uprobe";
	return p->autom ? "auto" : "preload";
}

void preload_setup__mark_probed(struct preload_setup *p, pid_t pid, unsigned kinds, bool probed)
{
	if (p->nr_probed == p->cap_probed) {
		size_t cap = p->cap_probed ? 2 * p->cap_probed : 64;
		struct preload_probed *v = realloc(p->probed, cap * sizeof(*v));

		if (!v)
			return; /* the label only: "none" instead of "uprobe" */
		p->probed = v;
		p->cap_probed = cap;
	}
	p->probed[p->nr_probed++] =
	    (struct preload_probed){.pid = pid, .kinds = kinds, .probed = probed};
}

/* pid's last judgement when it said uprobes (a pid judged at two execs: the later one), or
 * NULL */
/* A pid's entries, found by binary search: the manifest is filled for every process of the
 * tree, and a scan of the registrations (and of the judgements) per process made the fill
 * quadratic (3,000 processes: 10.5 ms; the registrations' cap, 16,384: ~0.3 s). */
struct pid_ix {
	int32_t pid;
	uint32_t i; /* the entry's index: the last one of a pid is its last image's */
	uint32_t flags;
};

static int pid_ix__cmp(const void *a, const void *b)
{
	const struct pid_ix *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* The last entry of pid in v (n entries, sorted by pid_ix__cmp), or NULL. */
static const struct pid_ix *pid_ix__last(const struct pid_ix *v, size_t n, int32_t pid)
{
	size_t lo = 0, hi = n; /* the first entry above pid is at hi once lo == hi */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].pid <= pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return hi > 0 && v[hi - 1].pid == pid ? &v[hi - 1] : NULL;
}

struct pid_ixs {
	struct pid_ix *v;
	size_t n, cap;
	bool failed; /* out of memory: the scans of each pid, below, instead */
};

static void pid_ixs__add(struct pid_ixs *x, int32_t pid, uint32_t flags)
{
	if (x->failed)
		return;
	if (x->n == x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 256;
		struct pid_ix *v = realloc(x->v, cap * sizeof(*v));

		if (!v) {
			x->failed = true;
			return;
		}
		x->v = v;
		x->cap = cap;
	}
	x->v[x->n] = (struct pid_ix){.pid = pid, .i = (uint32_t)x->n, .flags = flags};
	x->n++;
}

/* a registration, in the shared memory's order (shm_source__each_proc); an ended image's is
 * left out, as shm_source__proc_flags does */
static void pid_ixs__add_reg(void *ctx, int32_t pid, uint64_t ts, uint32_t flags)
{
	(void)ts;
	if (!(flags & MT_SHM_PROC_ENDED))
		pid_ixs__add(ctx, pid, flags);
}

/* The pid's last judgement if it was to probe, else NULL; a scan (the fill's fallback). */
static const struct preload_probed *preload_setup__probed(const struct preload_setup *p,
							   pid_t pid)
{
	for (size_t i = p->nr_probed; i-- > 0;)
		if (p->probed[i].pid == pid)
			return p->probed[i].probed ? &p->probed[i] : NULL;
	return NULL;
}

/* A family's label: preload when the interposer registered it for the process, uprobe when
 * the process was judged to need uprobes with that family's library in its image, else unset. */
static uint8_t preload_setup__family(int flags, unsigned flag, const struct preload_probed *pr,
				     enum alloc_kind kind)
{
	if (flags >= 0 && (flags & flag))
		return MANIFEST_HOOKS_PRELOAD;
	if (pr && (pr->kinds & (1u << kind)))
		return MANIFEST_HOOKS_UPROBE;
	return MANIFEST_HOOKS_UNSET;
}

void preload_setup__fill(const struct preload_setup *p, struct manifest *m, bool libc_probed)
{
	struct pid_ixs regs = {0}, judged = {0};

	if (p->on)
		shm_source__each_proc(p->shm, pid_ixs__add_reg, &regs);
	for (size_t i = 0; i < p->nr_probed; i++)
		pid_ixs__add(&judged, p->probed[i].pid, 0);
	qsort(regs.v, regs.n, sizeof(*regs.v), pid_ix__cmp);
	qsort(judged.v, judged.n, sizeof(*judged.v), pid_ix__cmp);
	for (uint32_t i = 0; i < m->nr_procs; i++) {
		struct manifest_proc *mp = &m->procs[i];
		const struct pid_ix *r = pid_ix__last(regs.v, regs.n, mp->pid);
		const struct pid_ix *j = pid_ix__last(judged.v, judged.n, mp->pid);
		int f = r ? (int)r->flags : -1;
		const struct preload_probed *pr =
		    j && p->probed[j->i].probed ? &p->probed[j->i] : NULL;

		if (regs.failed)
			f = p->on ? shm_source__proc_flags(p->shm, mp->pid) : -1;
		if (judged.failed)
			pr = preload_setup__probed(p, mp->pid);
		uint8_t probed = libc_probed || pr ? MANIFEST_HOOKS_UPROBE : MANIFEST_HOOKS_NONE;

		mp->hooks_libc = f >= 0 && (f & MT_SHM_PROC_LIBC) ? MANIFEST_HOOKS_PRELOAD : probed;
		mp->hooks_cxx = f >= 0 && (f & MT_SHM_PROC_CXX) ? MANIFEST_HOOKS_PRELOAD : probed;
		mp->hooks_jemalloc = preload_setup__family(f, MT_SHM_PROC_JEMALLOC, pr, ALLOC_JEMALLOC);
		mp->hooks_mimalloc = preload_setup__family(f, MT_SHM_PROC_MIMALLOC, pr, ALLOC_MIMALLOC);
		mp->hooks_tcmalloc = preload_setup__family(f, MT_SHM_PROC_TCMALLOC, pr, ALLOC_TCMALLOC);
	}
	free(regs.v);
	free(judged.v);
}

void preload_setup__close(struct preload_setup *p)
{
	handoff__stop();
	if (p->shm)
		shm_source__close(p->shm);
	free(p->probed);
	p->probed = NULL;
	p->nr_probed = p->cap_probed = 0;
}

/* Reads a whole /proc file (environ, auxv) into buf; returns its length or -1. */
static ssize_t preload_setup__read(pid_t pid, const char *what, char *buf, size_t cap)
{
	char path[64];
	ssize_t n, len = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while ((size_t)len < cap && (n = read(fd, buf + len, cap - len)) > 0)
		len += n;
	close(fd);
	return len;
}

/* AT_SECURE of the image pid just exec'd: ld.so then ignores LD_PRELOAD paths with a slash.
 * An i386 process's auxv holds 32-bit pairs. */
static bool preload_setup__secure(pid_t pid, bool i386)
{
	Elf64_auxv_t av[128];
	Elf32_auxv_t *av32 = (Elf32_auxv_t *)av;
	ssize_t n = preload_setup__read(pid, "auxv", (char *)av, sizeof(av));

	if (n < 0)
		return true; /* cannot tell: the probes are the safe side */
	for (size_t i = 0; i386 && i < (size_t)n / sizeof(av32[0]) && av32[i].a_type != AT_NULL;
	     i++)
		if (av32[i].a_type == AT_SECURE)
			return av32[i].a_un.a_val != 0;
	for (size_t i = 0; !i386 && i < (size_t)n / sizeof(av[0]) && av[i].a_type != AT_NULL; i++)
		if (av[i].a_type == AT_SECURE)
			return av[i].a_un.a_val != 0;
	return false;
}

/* Is our interposer in pid's LD_PRELOAD (the same file, seen from its root) and our shared
 * memory in its MEMTRACK_PRELOAD_SHM? */
/* Does pid's environment name our interposer in LD_PRELOAD (*lib: the same file under its
 * root) and our shared memory (*mem)? */
static void preload_setup__env_names(const struct preload_setup *p, pid_t pid, bool *lib_out,
				     bool *mem_out)
{
	static char env[256 << 10];
	ssize_t n = preload_setup__read(pid, "environ", env, sizeof(env) - 1);
	const char *shm = shm_source__path(p->shm);
	bool lib = false, mem = false;

	*lib_out = *mem_out = false;
	if (n <= 0)
		return;
	env[n] = 0;
	for (char *e = env; e < env + n; e += strlen(e) + 1) {
		if (!strncmp(e, "LD_PRELOAD=", 11)) {
			for (char *tok = strtok(e + 11, ": \t"); tok; tok = strtok(NULL, ": \t"))
				lib |= !strcmp(tok, p->lib);
		} else if (!strncmp(e, MT_SHM_ENV "=", sizeof(MT_SHM_ENV))) {
			mem = !strcmp(e + sizeof(MT_SHM_ENV), shm);
		}
	}
	if (lib) { /* another mount namespace may not have it, or another file there */
		char path[PATH_MAX + 32];
		struct stat st;

		snprintf(path, sizeof(path), "/proc/%d/root%s", pid, p->lib);
		lib = !stat(path, &st) && st.st_dev == p->dev && st.st_ino == p->ino;
	}
	*lib_out = lib;
	*mem_out = mem;
}

bool preload_setup__env_reaches(const struct preload_setup *p, pid_t pid)
{
	bool lib, mem;

	preload_setup__env_names(p, pid, &lib, &mem);
	return lib && mem;
}

bool preload_setup__shm_reaches(const struct preload_setup *p, pid_t pid)
{
	char path[PATH_MAX + 32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, shm_source__path(p->shm));
	return p->shm_ino && !stat(path, &st) && st.st_dev == p->shm_dev && st.st_ino == p->shm_ino;
}

/* pid in a pid namespace other than ours (the tree ran `unshare -p`): the interposer leaves it
 * (its getpid() is not the pid we know it by, src/preload/preload_ring.c) */
static bool preload_setup__other_pidns(const struct preload_setup *p, pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	return p->pidns_ino && !stat(path, &st) && st.st_ino != p->pidns_ino;
}

bool preload_setup__like_root(const struct preload_setup *p, pid_t pid)
{
	static const char *const names[MT_ENV_NR] = {
	    [MT_ENV_LD_PRELOAD] = "LD_PRELOAD=",
	    [MT_ENV_SHM] = MT_SHM_ENV "=",
	    [MT_ENV_LD_LIBRARY_PATH] = "LD_LIBRARY_PATH=",
	};
	static char env[MT_ENV_MAX + 1];
	uint64_t got[MT_ENV_NR] = {0};
	char path[64];
	struct stat st, ours;
	ssize_t n = preload_setup__read(pid, "environ", env, sizeof(env));

	/* the BPF side reads at most MT_ENV_MAX bytes, and stops a larger environment */
	if (n <= 0 || n > MT_ENV_MAX)
		return false;
	env[n] = 0;
	for (char *e = env; e < env + n; e += strlen(e) + 1)
		for (int v = 0; v < MT_ENV_NR; v++) {
			size_t len = strlen(names[v]);

			if (strncmp(e, names[v], len))
				continue;
			if (got[v])
				return false; /* set twice: the BPF side never judges it */
			got[v] = mt_env_value(e + len);
		}
	for (int v = 0; v < MT_ENV_NR; v++)
		if (got[v] != p->env_root[v])
			return false;
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	return !stat(path, &st) && !stat("/", &ours) && st.st_dev == ours.st_dev &&
	       st.st_ino == ours.st_ino && !preload_setup__other_pidns(p, pid) &&
	       !preload_setup__secure(pid, false);
}

bool preload_setup__needs_probes(const struct preload_setup *p, pid_t pid, unsigned kinds)
{
	if (!(kinds & 1u << ALLOC_LIBC))
		return false; /* no glibc: a static program, its allocator is probed in its file */
	if (!p->on || kinds & PRELOAD_OTHER_ALLOCATORS)
		return true;
	return preload_setup__secure(pid, false) || !preload_setup__env_reaches(p, pid) ||
	       preload_setup__other_pidns(p, pid);
}

bool preload_setup__leaves_silently(const struct preload_setup *p, pid_t pid)
{
	bool lib, mem;

	preload_setup__env_names(p, pid, &lib, &mem);
	return !lib || preload_setup__secure(pid, false) || preload_setup__other_pidns(p, pid);
}

bool preload_setup__serves_i386(const struct preload_setup *p, pid_t pid)
{
	return p->on && !preload_setup__secure(pid, true) && !preload_setup__other_pidns(p, pid);
}

bool preload_setup__root_needs_probes(const struct preload_setup *p, const char *exe,
				      unsigned kinds)
{
	struct stat st;

	if (!(kinds & 1u << ALLOC_LIBC))
		return false;
	if (!p->on || kinds & PRELOAD_OTHER_ALLOCATORS || stat(exe, &st))
		return true;
	return preload_setup__root_setid(exe);
}

bool preload_setup__root_setid(const char *exe)
{
	struct stat st;

	/* set-id or file capabilities: the kernel may make its exec secure (AT_SECURE) */
	return !stat(exe, &st) && ((st.st_mode & (S_ISUID | S_ISGID)) ||
				   getxattr(exe, "security.capability", NULL, 0) > 0);
}
