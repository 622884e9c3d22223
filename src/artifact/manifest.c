// SPDX-License-Identifier: MIT
/*
 * The run manifest, `<root_pid>.memtrack.json`, with jansson (which keeps insertion order, so
 * the file lists keys in the schema's order, manifest_schema.c): written in an arena, published
 * in the output folder, read back.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "artifact/outdir.h"
#include "common/log.h"
#include "artifact/manifest_schema.h"

/*
 * jansson allocates per node and per string: building and dumping a manifest is ~210
 * malloc/free pairs. memtrack writes it while its uprobes are still attached to libc's
 * allocator, and every one of those calls traps (the programs filter memtrack out, the trap is
 * paid anyway: ~3 us a pair here). The manifest is built in an arena instead, mapped with
 * mmap (not malloc) and dropped whole; past its end, allocations fall back to malloc.
 */
#define MANIFEST_ARENA_BYTES (256 << 10)

static struct {
	char *base;
	size_t used;
} arena;

static void *manifest__arena_malloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (arena.base && n <= MANIFEST_ARENA_BYTES - arena.used) {
		void *p = arena.base + arena.used;

		arena.used += n;
		return p;
	}
	return malloc(n);
}

static void manifest__arena_free(void *p)
{
	char *c = p;

	if (c && !(arena.base && c >= arena.base && c < arena.base + MANIFEST_ARENA_BYTES))
		free(p);
}

static void manifest__arena_begin(json_malloc_t *old_malloc, json_free_t *old_free)
{
	static bool seeded;
	struct timespec ts;

	json_get_alloc_funcs(old_malloc, old_free);
	arena.base = mmap(NULL, MANIFEST_ARENA_BYTES, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (arena.base == MAP_FAILED) {
		arena.base = NULL;
		return;
	}
	arena.used = 0;
	/* jansson seeds its hash from /dev/urandom at the first object otherwise (up to 1 ms
	 * here); hash flooding is no concern for a file we write from our own keys. */
	if (!seeded) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		json_object_seed((size_t)ts.tv_nsec ^ (size_t)getpid() ^ 1);
		seeded = true;
	}
	json_set_alloc_funcs(manifest__arena_malloc, manifest__arena_free);
}

static void manifest__arena_end(json_malloc_t old_malloc, json_free_t old_free)
{
	json_set_alloc_funcs(old_malloc, old_free);
	if (arena.base)
		munmap(arena.base, MANIFEST_ARENA_BYTES);
	arena.base = NULL;
}

/* Builds the JSON (in the arena) and publishes it as d/name; 0 or -errno, logged. */
static int manifest__publish(const struct manifest *m, const struct outdir *d, const char *name,
			     bool replace)
{
	json_malloc_t old_malloc;
	json_free_t old_free;
	json_t *root = NULL;
	struct iovec iov[2] = {{NULL, 0}, {"\n", 1}}; /* JSON_INDENT output ends without one */
	char *text = NULL;
	int rc;

	manifest__arena_begin(&old_malloc, &old_free);
	root = manifest__build(m);
	text = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
	if (!text) {
		log__error("cannot write '%s/%s': %s", d->path, name, strerror(ENOMEM));
		rc = -ENOMEM;
		goto cleanup;
	}
	iov[0].iov_base = text;
	iov[0].iov_len = strlen(text);
	rc = outdir__publish(d, name, iov, 2, replace);
cleanup:
	json_decref(root);
	manifest__arena_free(text);
	manifest__arena_end(old_malloc, old_free);
	return rc;
}

int manifest__write_new(const struct manifest *m, const struct outdir *d, const char *name)
{
	if (!m || !d || !name)
		return -EINVAL;
	return manifest__publish(m, d, name, false);
}

int manifest__write(const struct manifest *m, const char *path)
{
	struct outdir d = {.fd = -1};
	const char *slash;
	char *dir;
	int rc;

	if (!m || !path)
		return -EINVAL;
	slash = strrchr(path, '/');
	dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
	if (!dir)
		return -ENOMEM;
	d.path = dir;
	d.fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = d.fd < 0 ? -errno : manifest__publish(m, &d, slash ? slash + 1 : path, true);
	outdir__close(&d);
	free(dir);
	return rc;
}

int manifest__read(struct manifest *m, const char *path)
{
	json_error_t jerr;
	json_t *root = NULL;
	FILE *f = NULL;
	int rc;

	if (!m || !path)
		return -EINVAL;
	memset(m, 0, sizeof(*m));
	f = fopen(path, "re");
	if (!f) {
		rc = -errno;
		goto cleanup;
	}
	root = json_loadf(f, 0, &jerr);
	if (!root) {
		rc = -EBADMSG;
		goto cleanup;
	}
	rc = manifest__parse(m, root);

cleanup:
	if (rc)
		manifest__free(m); /* leaves *m zeroed */
	if (f)
		fclose(f);
	json_decref(root);
	return rc;
}

void manifest__free(struct manifest *m)
{
	if (!m)
		return;
	free(m->memtrack_version);
	free(m->command);
	for (char **p = m->argv; p && *p; p++)
		free(*p);
	free(m->argv);
	free(m->kernel_release);
	free(m->artifact);
	free(m->uprobe_mechanism);
	free(m->tracepoint_mechanism);
	free(m->rmap_backend);
	free(m->rmap_reason);
	free(m->alloc_programs);
	free(m->uprobe_returns);
	free(m->hook_links);
	free(m->control_link);
	free(m->btf_source);
	free(m->bpf_programs);
	free(m->alloc_hooks);
	free(m->preload_lib);
	free(m->preload_clock);
	free(m->preload_clock_reason);
	free(m->stacks_file);
	free(m->stacks_unwinder);
	for (uint32_t i = 0; m->libraries && i < m->nr_libraries; i++) {
		free(m->libraries[i].path);
		free(m->libraries[i].kind);
	}
	free(m->libraries);
	free(m->procs);
	free(m->running);
	free(m->markers);
	memset(m, 0, sizeof(*m));
}

int manifest__set_str(char **field, const char *s)
{
	char *copy = s ? strdup(s) : NULL;

	if (s && !copy)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

int manifest__set_argv(struct manifest *m, char *const *argv)
{
	size_t n = 0;
	char **copy = NULL;

	while (argv && argv[n])
		n++;
	if (argv) {
		copy = calloc(n + 1, sizeof(*copy));
		for (size_t i = 0; copy && i < n; i++) {
			copy[i] = strdup(argv[i]);
			if (!copy[i]) {
				while (i--)
					free(copy[i]);
				free(copy);
				copy = NULL;
			}
		}
		if (!copy)
			return -ENOMEM;
	}
	for (char **p = m->argv; p && *p; p++)
		free(*p);
	free(m->argv);
	m->argv = copy;
	return 0;
}

const char *manifest__hooks_name(unsigned hooks)
{
	static const char *const names[MANIFEST_HOOKS_NR] = {
	    [MANIFEST_HOOKS_PRELOAD] = "preload",
	    [MANIFEST_HOOKS_UPROBE] = "uprobe",
	    [MANIFEST_HOOKS_NONE] = "none",
	};

	return hooks < MANIFEST_HOOKS_NR ? names[hooks] : NULL;
}
