/* SPDX-License-Identifier: MIT */
/*
 * The shared objects an executable will map, resolved the way the dynamic loader does it:
 * LD_PRELOAD, then for each DT_NEEDED: the object's DT_RPATH and the executable's (unless the
 * object has a DT_RUNPATH), LD_LIBRARY_PATH, the object's DT_RUNPATH ($ORIGIN in either),
 * /etc/ld.so.cache, the default directories. Paths are looked up under a root prefix
 * ("/proc/PID/root") so a process in another mount namespace resolves its own files.
 */
#ifndef MEMTRACK_DEPS_H
#define MEMTRACK_DEPS_H

#include <stdbool.h>

#include <stddef.h>

struct dep_list {
	char **paths; /* prefixed paths; [0] is the executable itself */
	size_t nr;
	/* the executable is the loader itself (no interpreter of its own, a soname "ld-...":
	 * glibc's ld-linux-x86-64.so.2) run as a program, `ld.so PROGRAM` */
	bool exe_loader;
};

/* env_ld_library_path and env_ld_preload may be NULL. */
int deps__resolve(const char *root, const char *exe, const char *env_ld_library_path,
		  const char *env_ld_preload, struct dep_list *out);
/* The same for an executable opened through a link (exe: /proc/PID/exe) that the process sees
 * at exe_as (readlink's answer; NULL: exe): its $ORIGIN is exe_as's folder. Until 7 December
 * 2026 it was /proc/PID's, and a program with RUNPATH $ORIGIN/lib had its libraries looked
 * up in the system's folders: a jemalloc of its own was never attached, its calls lost. */
int deps__resolve_as(const char *root, const char *exe, const char *exe_as, const char *ld_path,
		     const char *ld_preload, struct dep_list *out);
void deps__free(struct dep_list *l);
/* One soname through ld.so.cache at root/etc/ld.so.cache; exposed for tests. */
int deps__ldcache_lookup(const char *root, const char *soname, char *out, size_t cap);

#endif
