/* SPDX-License-Identifier: MIT */
/*
 * Where the minimal kernel BTF for our object lives (btf_min.h builds it). One file per kernel
 * build and BPF object:
 *   $MEMTRACK_CACHE_DIR, else /var/cache/memtrack as root, else $XDG_CACHE_HOME/memtrack or
 *   ~/.cache/memtrack; file vmlinux-<kernel build id>-<object hash>.btf
 * MEMTRACK_BTF_CACHE=0 turns it off (libbpf then parses the whole vmlinux BTF, as before).
 * A file is trusted only when it and its folder belong to us and nobody else can write them:
 * memtrack runs as root, and a forged BTF would move where its programs read kernel memory.
 */
#ifndef MEMTRACK_BTF_CACHE_H
#define MEMTRACK_BTF_CACHE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct btf_cache {
	char path[PATH_MAX]; /* for bpf_object_open_opts.btf_custom_path; "" = use vmlinux */
	const char *source;  /* "cache" (hit), "generated" (miss, built now), "vmlinux" (off) */
	int memfd; /* holds a BTF built this run when no folder was writable; -1 otherwise */
	uint64_t build_ns; /* time spent building on a miss */
};

/* Finds or builds the minimal BTF for the BPF object `obj` (its ELF bytes). Never fails the
 * run: on any problem c->path is "" and c->source "vmlinux". */
void btf_cache__prepare(struct btf_cache *c, const void *obj, size_t obj_sz);
/* BTF type IDs of the kernel functions `names` (0 = absent), as btf_scan__funcs() finds them,
 * cached per kernel build: they are a property of its BTF, and scanning it costs ~10 ms. Returns
 * 0 or -errno (the scan's). */
int btf_cache__func_ids(const char *const *names, int n, int *ids);
/* A small answer computed from files that do not change, in the same folder with the same
 * trust rules: exactly len bytes, or -ENOENT / -EBADMSG (absent, wrong size, not trusted, or the
 * cache is off). put is best effort. `name` must make the answer's inputs part of the key. */
int btf_cache__get(const char *name, void *buf, size_t len);
void btf_cache__put(const char *name, const void *buf, size_t len);
/* Runs load(ctx) (which opens the object with c->path) and returns its 0 or -errno. When it
 * fails with a cached BTF for a reason other than permissions, runs it again without (c->path
 * "", c->source "vmlinux"); the cached file is removed only when that second load works. */
int btf_cache__load(struct btf_cache *c, int (*load)(void *ctx), void *ctx);
void btf_cache__close(struct btf_cache *c);

/* Exposed for tests: the kernel's GNU build ID from an ELF notes blob (as /sys/kernel/notes),
 * in hex. Returns 0, or -ENOENT when the blob has none. */
int btf_cache__build_id(const void *notes, size_t len, char *hex, size_t hexlen);
/* The cache folder these environment values select (NULL = unset). */
int btf_cache__dir(char *buf, size_t len, const char *cache_env, const char *xdg, const char *home,
		   int euid);
/* Makes dir (and its parents) if needed: 0 when it is a folder we trust, else -errno/-EPERM. */
int btf_cache__mkdir(const char *dir);
/* Ours, and nobody else can write it: what a cached file and its folder must be. */
struct stat;
bool btf_cache__trusted(const struct stat *st);

#endif
