// SPDX-License-Identifier: MIT
/* A running process's image, for libs: its loader's environment, its executable's inspection
 * (memoized by file, root and environment), the files it maps. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "track/libs_priv.h"

/* /proc/pid/what (NUL-separated strings: environ, cmdline) into buf, NUL-terminated: its length,
 * or 0 when it cannot be read or is empty (a process gone, or not exec'd yet). */
static size_t libs__proc_read(pid_t pid, const char *what, char *buf, size_t cap)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return (size_t)n;
}

/* Reads NAME=value from /proc/pid/environ into out (empty when unset). */
static char *libs__environ(pid_t pid, const char *name, char *out, size_t cap)
{
	char buf[65536];
	size_t nl = strlen(name), n = libs__proc_read(pid, "environ", buf, sizeof(buf));

	if (!n)
		return NULL;
	for (char *p = buf; p < buf + n; p += strlen(p) + 1) {
		if (!strncmp(p, name, nl) && p[nl] == '=') {
			snprintf(out, cap, "%s", p + nl + 1);
			return out;
		}
	}
	return NULL;
}

static bool libs__same(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static struct libs_memo *libs__memo_find(struct libs *l, const struct libs_memo *k)
{
	for (size_t i = 0; i < l->nr_memo; i++) {
		struct libs_memo *m = &l->memo[i];

		if (!memcmp(&m->exe, &k->exe, sizeof(k->exe)) && m->rdev == k->rdev &&
		    m->rino == k->rino && m->mntns == k->mntns &&
		    libs__same(m->ld_path, k->ld_path) && libs__same(m->ld_pre, k->ld_pre))
			return m;
	}
	return NULL;
}

/* Remembers k (its strings copied); a failure only forgets. */
static void libs__memo_add(struct libs *l, const struct libs_memo *k)
{
	struct libs_memo *m;

	if (l->nr_memo == l->cap_memo) {
		size_t cap = l->cap_memo ? 2 * l->cap_memo : 16;
		void *v = realloc(l->memo, cap * sizeof(*l->memo));

		if (!v)
			return;
		l->memo = v;
		l->cap_memo = cap;
	}
	m = &l->memo[l->nr_memo];
	*m = *k;
	m->ld_path = k->ld_path ? strdup(k->ld_path) : NULL;
	m->ld_pre = k->ld_pre ? strdup(k->ld_pre) : NULL;
	if ((k->ld_path && !m->ld_path) || (k->ld_pre && !m->ld_pre)) {
		free(m->ld_path);
		free(m->ld_pre);
		return;
	}
	l->nr_memo++;
}

/*
 * `ld.so [OPTION...] PROGRAM [ARG...]` (pid's executable is the loader: deps.h, exe_loader): the
 * program the loader maps, as pid sees it (the loader takes it as a path: through pid's root,
 * or its working directory), into prog. The options that change what the loader maps are
 * applied: --library-path replaces *ld_path, --preload adds to *ld_pre (after LD_PRELOAD's, as
 * the loader loads them). Returns 0; -ENOTSUP when an option memtrack does not model changes
 * it (--audit, --inhibit-cache, --inhibit-rpath, --glibc-hwcaps-*: prog is still set); -ENOENT
 * when no program runs (--list, --verify, --help, --version, ... or none given).
 */
/* What each of glibc's loader options (rtld.c) does to the program it maps */
enum ld_opt_effect {
	LD_OPT_NO_PROGRAM, /* it lists or checks, and runs nothing */
	LD_OPT_UNMODELLED, /* it changes what is mapped in a way memtrack does not follow */
	LD_OPT_LIBRARY_PATH,
	LD_OPT_PRELOAD,
	LD_OPT_NONE,
};

static const struct {
	const char *name;
	bool takes_value;
	enum ld_opt_effect effect;
} ld_opts[] = {
    {"--list", false, LD_OPT_NO_PROGRAM},
    {"--verify", false, LD_OPT_NO_PROGRAM},
    {"--help", false, LD_OPT_NO_PROGRAM},
    {"--version", false, LD_OPT_NO_PROGRAM},
    {"--list-tunables", false, LD_OPT_NO_PROGRAM},
    {"--list-diagnostics", false, LD_OPT_NO_PROGRAM},
    {"--inhibit-cache", false, LD_OPT_UNMODELLED},
    {"--audit", true, LD_OPT_UNMODELLED},
    {"--inhibit-rpath", true, LD_OPT_UNMODELLED},
    {"--glibc-hwcaps-prepend", true, LD_OPT_UNMODELLED},
    {"--glibc-hwcaps-mask", true, LD_OPT_UNMODELLED},
    {"--library-path", true, LD_OPT_LIBRARY_PATH},
    {"--preload", true, LD_OPT_PRELOAD},
    {"--argv0", true, LD_OPT_NONE},
};

static int libs__loader_program(pid_t pid, char *prog, size_t cap, char **ld_path, char *ldp,
				size_t ldp_cap, char **ld_pre, char *pre, size_t pre_cap)
{
	char buf[8192], path[64], *arg, *end;
	size_t n = libs__proc_read(pid, "cmdline", buf, sizeof(buf));
	int err = 0;

	if (!n)
		return -ENOENT;
	end = buf + n;
	arg = buf + strlen(buf) + 1; /* past argv[0], the loader */
	for (; arg < end && !strncmp(arg, "--", 2); arg += strlen(arg) + 1) {
		char *val = arg + strlen(arg) + 1;
		size_t o = 0, have;

		while (o < sizeof(ld_opts) / sizeof(ld_opts[0]) && strcmp(arg, ld_opts[o].name))
			o++;
		if (o == sizeof(ld_opts) / sizeof(ld_opts[0]))
			return -ENOTSUP; /* an option of a later loader: what it does is unknown */
		if (ld_opts[o].takes_value && val >= end)
			return -ENOENT;
		switch (ld_opts[o].effect) {
		case LD_OPT_NO_PROGRAM:
			return -ENOENT;
		case LD_OPT_UNMODELLED:
			err = -ENOTSUP;
			break;
		case LD_OPT_LIBRARY_PATH:
			snprintf(ldp, ldp_cap, "%s", val);
			*ld_path = ldp;
			break;
		case LD_OPT_PRELOAD:
			have = *ld_pre ? strlen(*ld_pre) : 0;
			if (*ld_pre && *ld_pre != pre)
				snprintf(pre, pre_cap, "%s", *ld_pre);
			snprintf(pre + have, pre_cap - have, "%s%s", have ? ":" : "", val);
			*ld_pre = pre;
			break;
		case LD_OPT_NONE:
			break;
		}
		if (ld_opts[o].takes_value)
			arg = val;
	}
	if (arg >= end)
		return -ENOENT;
	if (arg[0] == '/') {
		snprintf(prog, cap, "/proc/%d/root%s", pid, arg);
	} else { /* under its root, by its working folder's path: its $ORIGIN (deps.h) */
		char cwd[PATH_MAX];
		ssize_t cn;

		snprintf(path, sizeof(path), "/proc/%d/cwd", pid);
		cn = readlink(path, cwd, sizeof(cwd) - 1);
		if (cn <= 0)
			return -ENOENT;
		cwd[cn] = 0;
		snprintf(prog, cap, "/proc/%d/root%s/%s", pid, cwd, arg);
	}
	return err;
}

int libs__inspect_pid(struct libs *l, pid_t pid)
{
	char root[64], exe[64], mnt[64], name[PATH_MAX], ldp[PATH_MAX], pre[PATH_MAX], *ld_path,
	    *ld_pre;
	struct libs_memo key = {0}, *hit;
	struct stat xs, rs, ms, xs2, rs2;
	ssize_t n;
	int err;

	snprintf(root, sizeof(root), "/proc/%d/root", pid);
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	snprintf(mnt, sizeof(mnt), "/proc/%d/ns/mnt", pid);
	/* opened through the link (it works whatever the path, even deleted or in another
	 * mount namespace), shown by the path it points to */
	n = readlink(exe, name, sizeof(name) - 1);
	if (n > 0)
		name[n] = 0;
	ld_path = libs__environ(pid, "LD_LIBRARY_PATH", ldp, sizeof(ldp));
	ld_pre = libs__environ(pid, "LD_PRELOAD", pre, sizeof(pre));
	if (stat(exe, &xs) || stat(root, &rs) || stat(mnt, &ms))
		return -ESRCH;
	key = (struct libs_memo){.exe = libs__file_id(&xs),
				 .rdev = rs.st_dev,
				 .rino = rs.st_ino,
				 .mntns = ms.st_ino,
				 .ld_path = ld_path,
				 .ld_pre = ld_pre};
	hit = libs__memo_find(l, &key);
	if (hit) {
		l->kinds = hit->kinds;
		l->exe_malloc = hit->exe_malloc;
		l->lib_family = hit->lib_family;
		l->fam_malloc = hit->fam_malloc;
		l->exe_loader = false; /* never memoized */
		return 0;
	}
	err = libs__inspect(l, root, exe, n > 0 ? name : NULL, ld_path, ld_pre);
	/* the loader run as a program (`ld.so PROGRAM`): the program is what it maps, and the
	 * loader's own file (no allocator, no glibc) says nothing of it. Until 7 December 2026
	 * it was judged by the loader's file ("no glibc", a static program): an `env -i ld.so
	 * alloc_fixed` lost its calls, and its verdict went to every later `ld.so` exec. */
	if (err >= 0 && l->exe_loader) {
		char prog[PATH_MAX + 64];
		int perr = libs__loader_program(pid, prog, sizeof(prog), &ld_path, ldp, sizeof(ldp),
						&ld_pre, pre, sizeof(pre));

		if (perr != -ENOENT &&
		    (err = libs__inspect(l, root, prog, NULL, ld_path, ld_pre)) >= 0)
			err = perr; /* -ENOTSUP: judged as a failed inspection, uprobes for glibc */
		if (err < 0 && err != -ENOTSUP)
			err = -ENOTSUP;
		l->exe_loader = true; /* the program's inspection said otherwise of itself */
	}
	/* still there, the same image: a process that exited meanwhile left its libraries
	 * unreachable through its root, and the inspection found none (kinds 0, "no glibc"): a
	 * task left running at its exec was judged not to need glibc's probes, its calls lost
	 * and the run called complete (script over su -: 3 runs in 100 just after an uprobe-mode
	 * run), and the memo would have said so of every later exec of that file */
	if (err >= 0) {
		struct libs_file_id now;

		if (stat(exe, &xs2) || stat(root, &rs2) || rs2.st_ino != rs.st_ino)
			return -ESRCH;
		now = libs__file_id(&xs2);
		if (memcmp(&now, &key.exe, sizeof(now)))
			return -ESRCH;
	}
	if (err >= 0 && !l->exe_loader) { /* the loader's file runs any program */
		key.kinds = l->kinds;
		key.exe_malloc = l->exe_malloc;
		key.lib_family = l->lib_family;
		key.fam_malloc = l->fam_malloc;
		libs__memo_add(l, &key);
	}
	return err;
}

bool libs__fam_malloc(const struct libs *l)
{
	return l->fam_malloc;
}

bool libs__exe_loader(const struct libs *l)
{
	return l->exe_loader;
}

int libs__inspect_maps(struct libs *l, pid_t pid, unsigned served)
{
	char path[64], line[4096 + 128], file[PATH_MAX];
	int added = 0, err;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	l->dl_served = served;
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

void libs__memo_free(struct libs *l)
{
	for (size_t i = 0; i < l->nr_memo; i++) {
		free(l->memo[i].ld_path);
		free(l->memo[i].ld_pre);
	}
	free(l->memo);
	l->memo = NULL;
	l->nr_memo = l->cap_memo = 0;
}
