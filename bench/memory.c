// SPDX-License-Identifier: MIT
/* --mode memory: finding memtrack and reading what it wrote. */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/log.h"
#include "runner.h"

#define MEMORY_MANIFEST_SUFFIX ".memtrack.json" /* MANIFEST_SUFFIX in src/artifact/manifest.h */

char *bench_runner__find_memtrack(void)
{
	const char *env = getenv("MEMTRACK");
	char self[PATH_MAX], *slash, *path = NULL;
	ssize_t n;

	if (env && *env)
		return strdup(env);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return NULL;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return NULL;
	*slash = '\0';
	if (asprintf(&path, "%s/memtrack", self) < 0)
		return NULL;
	if (access(path, X_OK)) {
		free(path);
		return NULL;
	}
	return path;
}

static bool bench_memory__has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int bench_memory__u64(json_t *results, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(results, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EPROTO;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/*
 * Reads the manifest, then empties dir (artifact and manifest) so the next round finds exactly
 * one. memtrack names it after the tracked root pid, which only memtrack knows.
 */
int bench_runner__read_manifest(const char *dir, struct bench_result *r)
{
	char *manifest = NULL;
	json_t *root = NULL, *results;
	struct dirent *de;
	json_error_t jerr;
	DIR *d;
	int err = 0;

	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *path;
		if (de->d_name[0] == '.')
			continue;
		if (asprintf(&path, "%s/%s", dir, de->d_name) < 0) {
			err = -ENOMEM;
			break;
		}
		if (bench_memory__has_suffix(de->d_name, MEMORY_MANIFEST_SUFFIX) && !manifest) {
			manifest = path;
			continue;
		}
		unlink(path);
		free(path);
	}
	closedir(d);
	if (err)
		goto cleanup;
	if (!manifest) {
		err = -ENOENT;
		goto cleanup;
	}
	root = json_load_file(manifest, 0, &jerr);
	if (!root) {
		log__error("%s:%d: %s", manifest, jerr.line, jerr.text);
		err = -EPROTO;
		goto cleanup;
	}
	results = json_object_get(root, "results");
	err = bench_memory__u64(results, "peak_heap", &r->peak_heap);
	if (!err)
		err = bench_memory__u64(results, "peak_rss", &r->peak_rss);
	if (!err)
		err = bench_memory__u64(results, "allocs", &r->allocs);
	if (err)
		log__error("%s: results.peak_heap, peak_rss and allocs must be integers", manifest);
cleanup:
	if (manifest) {
		unlink(manifest);
		free(manifest);
	}
	json_decref(root);
	return err;
}
