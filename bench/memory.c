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

const struct bench_metric_info bench_metrics[BENCH_MEM_NR] = {
    [BENCH_MEM_PEAK_HEAP] = {"peak_heap", "Peak heap", NULL, true},
    [BENCH_MEM_PEAK_RSS] = {"peak_rss", "Peak RSS", NULL, true},
    [BENCH_MEM_ALLOCATED] = {"allocated_bytes", "Allocated", NULL, false},
    [BENCH_MEM_ALLOCS] = {"allocs", "Allocs", "allocation", true},
    [BENCH_MEM_LEAKED] = {"leaked_bytes", "Leaked", NULL, true},
};

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

static int bench_memory__value(json_t *results, const struct bench_metric_info *m, double *out)
{
	json_t *v = json_object_get(results, m->key);

	if (!v && !m->required) {
		*out = 0; /* a memtrack older than the key: reads 0, like memtrack's own reader */
		return 0;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EPROTO;
	*out = (double)json_integer_value(v);
	return 0;
}

/* The window's figures over the run's: the window object's key for each metric it has. */
static int bench_memory__window(json_t *w, double values[BENCH_MEM_NR], const char *manifest)
{
	static const char *const keys[BENCH_MEM_NR] = {
	    [BENCH_MEM_PEAK_HEAP] = "peak_heap",
	    [BENCH_MEM_ALLOCATED] = "allocated_bytes",
	    [BENCH_MEM_ALLOCS] = "allocs",
	    [BENCH_MEM_LEAKED] = "live_bytes", /* window blocks never freed */
	};

	for (int i = 0; i < BENCH_MEM_NR; i++) {
		json_t *v = keys[i] ? json_object_get(w, keys[i]) : NULL;

		if (!keys[i])
			continue;
		if (!json_is_integer(v) || json_integer_value(v) < 0) {
			log__error("%s: results.window.%s must be an integer >= 0", manifest,
				   keys[i]);
			return -EPROTO;
		}
		values[i] = (double)json_integer_value(v);
	}
	return 0;
}

int bench_memory__stats(struct bench_result *r)
{
	for (int i = 0; i < BENCH_MEM_NR; i++) {
		int err = bench_stats__compute(r->mem[i], r->mem_rounds, &r->mem_stats[i]);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Reads the manifest, then empties dir (artifact and manifest) so the next round finds exactly
 * one. memtrack names it after the tracked root pid, which only memtrack knows.
 * A program with a measured window (MEMTRACK_START() of <memtrack.h>: results.window is an
 * object) is measured over it: its heap metrics are the window's, peak RSS stays the run's
 * (pages are not attributed to a window). *windowed says which.
 */
int bench_runner__read_manifest(const char *dir, double values[BENCH_MEM_NR], bool *windowed)
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
	*windowed = json_is_object(json_object_get(results, "window"));
	for (int i = 0; i < BENCH_MEM_NR && !err; i++) {
		err = bench_memory__value(results, &bench_metrics[i], &values[i]);
		if (err)
			log__error("%s: results.%s must be an integer >= 0", manifest,
				   bench_metrics[i].key);
	}
	if (!err && *windowed)
		err = bench_memory__window(json_object_get(results, "window"), values, manifest);
cleanup:
	if (manifest) {
		unlink(manifest);
		free(manifest);
	}
	json_decref(root);
	return err;
}
