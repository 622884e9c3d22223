// SPDX-License-Identifier: MIT
/*
 * The run manifest, `<root_pid>.memtrack.json`, with jansson (which keeps insertion order, so
 * the file lists keys in the order written here). Timings are stored in milliseconds as
 * doubles; jansson prints reals with 17 significant digits, so ns -> ms -> ns is exact for any
 * run shorter than ~100 days. Unsigned counters go through json_int_t (int64): values above
 * INT64_MAX would come out negative in the JSON but still read back to the same bits.
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

static const char *const drop_keys[MT_DROP_NR] = {
	[MT_DROP_RINGBUF] = "ringbuf",
	[MT_DROP_THREAD_MAP] = "thread_map",
	[MT_DROP_PROC_MAP] = "proc_map",
	[MT_DROP_UNMATCHED_RET] = "unmatched_return",
	[MT_DROP_NEST_OVERFLOW] = "nest_overflow",
};

/* json_object_set_new() steals the value even on failure; errors surface as a NULL check. */
static int set(json_t *o, const char *key, json_t *v)
{
	return v && !json_object_set_new(o, key, v) ? 0 : -ENOMEM;
}

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *u64(uint64_t v)
{
	return json_integer((json_int_t)v);
}

static json_t *ms(uint64_t ns)
{
	return json_real((double)ns / 1e6);
}

static json_t *build_procs(const struct manifest *m)
{
	json_t *a = json_array();
	int rc = 0;

	for (uint32_t i = 0; a && i < m->nr_procs; i++) {
		const struct manifest_proc *p = &m->procs[i];
		json_t *o = json_object();

		rc |= set(o, "pid", json_integer(p->pid));
		rc |= set(o, "ppid", json_integer(p->ppid));
		rc |= set(o, "comm", json_stringn(p->comm, strnlen(p->comm, sizeof(p->comm))));
		rc |= set(o, "peak_heap", u64(p->peak_heap));
		rc |= set(o, "peak_rss", u64(p->peak_rss));
		rc |= set(o, "allocs", u64(p->allocs));
		rc |= set(o, "frees", u64(p->frees));
		rc |= set(o, "leaked_bytes", u64(p->leaked_bytes));
		rc |= set(o, "leaked_count", u64(p->leaked_count));
		rc |= set(o, "execs", u64(p->execs));
		rc |= o ? json_array_append_new(a, o) : -1;
	}
	if (rc) {
		json_decref(a);
		return NULL;
	}
	return a;
}

static json_t *build(const struct manifest *m)
{
	json_t *root = json_object(), *o, *a;
	uint64_t drops = m->consumer_drops;
	int rc = 0;

	if (!root)
		return NULL;
	rc |= set(root, "format_version", json_integer(MANIFEST_FORMAT_VERSION));
	rc |= set(root, "memtrack_version", str_or_null(m->memtrack_version));
	rc |= set(root, "command", str_or_null(m->command));
	a = json_array();
	for (char **p = m->argv; a && p && *p; p++)
		rc |= json_array_append_new(a, json_string(*p));
	rc |= set(root, "argv", a);
	rc |= set(root, "root_pid", json_integer(m->root_pid));
	rc |= set(root, "exit_status", json_integer(m->exit_status));
	rc |= set(root, "term_signal", json_integer(m->term_signal));
	rc |= set(root, "kernel_release", str_or_null(m->kernel_release));
	rc |= set(root, "artifact", str_or_null(m->artifact));
	rc |= set(root, "start_unix_ns", json_integer(m->start_unix_ns));
	rc |= set(root, "start_mono_ns", json_integer(m->start_mono_ns));

	o = json_object();
	rc |= set(root, "mechanisms", o);
	if (o) {
		rc |= set(o, "uprobe", str_or_null(m->uprobe_mechanism));
		rc |= set(o, "tracepoint", str_or_null(m->tracepoint_mechanism));
		rc |= set(o, "rmap_backend", str_or_null(m->rmap_backend));
		rc |= set(o, "rmap_reason", str_or_null(m->rmap_reason));
		rc |= set(o, "btf", str_or_null(m->btf_source));
	}

	a = json_array();
	for (uint32_t i = 0; a && i < m->nr_libraries; i++) {
		json_t *l = json_object();

		rc |= set(l, "path", str_or_null(m->libraries[i].path));
		rc |= set(l, "kind", str_or_null(m->libraries[i].kind));
		rc |= set(l, "sites", json_integer(m->libraries[i].sites));
		rc |= l ? json_array_append_new(a, l) : -1;
	}
	rc |= set(root, "libraries", a);

	o = json_object();
	rc |= set(root, "events", o);
	if (o) {
		json_t *bt = json_object();

		rc |= set(o, "total", u64(m->events_total));
		rc |= set(o, "by_type", bt);
		/* Every artifact type, zeros included, so consumers see a fixed key set. */
		for (uint32_t t = 0; bt && t < MT_EV_TYPE_MAX; t++) {
			if (artifact__type_name(t))
				rc |= set(bt, artifact__type_name(t), u64(m->counts[t]));
		}
	}

	o = json_object();
	rc |= set(root, "drops", o);
	for (int i = 0; o && i < MT_DROP_NR; i++) {
		rc |= set(o, drop_keys[i], u64(m->drops[i]));
		drops += m->drops[i];
	}
	if (o) {
		rc |= set(o, "consumer", u64(m->consumer_drops));
		rc |= set(o, "total", u64(drops));
	}
	rc |= set(root, "complete", json_boolean(m->complete));
	a = json_array();
	for (uint32_t i = 0; a && i < m->nr_running; i++) {
		json_t *p = json_object();
		const char *c = m->running[i].comm;

		rc |= set(p, "pid", json_integer(m->running[i].pid));
		rc |= set(p, "comm", json_stringn(c, strnlen(c, sizeof(m->running[i].comm))));
		rc |= p ? json_array_append_new(a, p) : -1;
	}
	rc |= set(root, "still_running", a);

	o = json_object();
	rc |= set(root, "timings_ms", o);
	if (o) {
		rc |= set(o, "load", ms(m->t_load));
		rc |= set(o, "attach", ms(m->t_attach));
		rc |= set(o, "run", ms(m->t_run));
		rc |= set(o, "drain", ms(m->t_drain));
		rc |= set(o, "detach", ms(m->t_detach));
		rc |= set(o, "total", ms(m->t_total));
	}

	o = json_object();
	rc |= set(root, "results", o);
	if (o) {
		rc |= set(o, "peak_heap", u64(m->peak_heap));
		rc |= set(o, "peak_rss", u64(m->peak_rss));
		rc |= set(o, "allocs", u64(m->allocs));
		rc |= set(o, "frees", u64(m->frees));
		rc |= set(o, "leaked_bytes", u64(m->leaked_bytes));
		rc |= set(o, "leaked_count", u64(m->leaked_count));
	}
	rc |= set(root, "memtrack_max_rss", u64(m->memtrack_max_rss));
	rc |= set(root, "ringbuf_bytes", u64(m->ringbuf_bytes));
	rc |= set(root, "processes", build_procs(m));

	if (rc) {
		json_decref(root);
		return NULL;
	}
	return root;
}

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
	root = build(m);
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

/*
 * Reading: missing keys read as zero/NULL (older writers, or keys added later); a key of the
 * wrong JSON type is -EBADMSG. Errors accumulate in *err so the walk stays linear.
 */
static json_t *get(json_t *o, const char *key, json_type want, int *err)
{
	json_t *v = o ? json_object_get(o, key) : NULL;

	if (!v || json_is_null(v))
		return NULL;
	if (json_typeof(v) != want && !(want == JSON_REAL && json_is_integer(v)) &&
	    !(want == JSON_TRUE && json_is_boolean(v))) {
		*err = -EBADMSG;
		return NULL;
	}
	return v;
}

static uint64_t get_u64(json_t *o, const char *key, int *err)
{
	return (uint64_t)json_integer_value(get(o, key, JSON_INTEGER, err));
}

static int64_t get_i64(json_t *o, const char *key, int *err)
{
	return json_integer_value(get(o, key, JSON_INTEGER, err));
}

/* ms (float) back to integer ns */
static uint64_t get_ns(json_t *o, const char *key, int *err)
{
	double v = json_number_value(get(o, key, JSON_REAL, err));

	return v > 0 ? (uint64_t)llround(v * 1e6) : 0;
}

static char *dup_str(json_t *o, const char *key, int *err)
{
	json_t *v = get(o, key, JSON_STRING, err);
	char *s;

	if (!v)
		return NULL;
	s = strdup(json_string_value(v));
	if (!s)
		*err = -ENOMEM;
	return s;
}

static int read_argv(struct manifest *m, json_t *root)
{
	int err = 0;
	json_t *a = get(root, "argv", JSON_ARRAY, &err);
	size_t n = json_array_size(a);

	if (err)
		return err;
	m->argv = calloc(n + 1, sizeof(*m->argv)); /* NULL-terminated even when empty */
	if (!m->argv)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		json_t *s = json_array_get(a, i);

		if (!json_is_string(s))
			return -EBADMSG;
		m->argv[i] = strdup(json_string_value(s));
		if (!m->argv[i])
			return -ENOMEM;
	}
	return 0;
}

static int read_libraries(struct manifest *m, json_t *root)
{
	int err = 0;
	json_t *a = get(root, "libraries", JSON_ARRAY, &err);
	size_t n = json_array_size(a);

	if (err || !n)
		return err;
	m->libraries = calloc(n, sizeof(*m->libraries));
	if (!m->libraries)
		return -ENOMEM;
	m->nr_libraries = (uint32_t)n;
	for (size_t i = 0; i < n && !err; i++) {
		json_t *l = json_array_get(a, i);
		struct manifest_library *lib = &m->libraries[i];

		if (!json_is_object(l))
			return -EBADMSG;
		lib->path = dup_str(l, "path", &err);
		lib->kind = dup_str(l, "kind", &err);
		lib->sites = (uint32_t)get_u64(l, "sites", &err);
	}
	return err;
}

static int read_procs(struct manifest *m, json_t *root)
{
	int err = 0;
	json_t *a = get(root, "processes", JSON_ARRAY, &err);
	size_t n = json_array_size(a);

	if (err || !n)
		return err;
	m->procs = calloc(n, sizeof(*m->procs));
	if (!m->procs)
		return -ENOMEM;
	m->nr_procs = (uint32_t)n;
	for (size_t i = 0; i < n && !err; i++) {
		json_t *o = json_array_get(a, i), *comm;
		struct manifest_proc *p = &m->procs[i];

		if (!json_is_object(o))
			return -EBADMSG;
		p->pid = (int32_t)get_i64(o, "pid", &err);
		p->ppid = (int32_t)get_i64(o, "ppid", &err);
		comm = get(o, "comm", JSON_STRING, &err);
		if (comm) /* truncated to what the kernel keeps: 15 bytes and a NUL */
			snprintf(p->comm, sizeof(p->comm), "%s", json_string_value(comm));
		p->peak_heap = get_u64(o, "peak_heap", &err);
		p->peak_rss = get_u64(o, "peak_rss", &err);
		p->allocs = get_u64(o, "allocs", &err);
		p->frees = get_u64(o, "frees", &err);
		p->leaked_bytes = get_u64(o, "leaked_bytes", &err);
		p->leaked_count = get_u64(o, "leaked_count", &err);
		p->execs = get_u64(o, "execs", &err);
	}
	return err;
}

static int read_running(struct manifest *m, json_t *root)
{
	int err = 0;
	json_t *a = get(root, "still_running", JSON_ARRAY, &err);
	size_t n = json_array_size(a);

	if (err || !n)
		return err;
	m->running = calloc(n, sizeof(*m->running));
	if (!m->running)
		return -ENOMEM;
	m->nr_running = (uint32_t)n;
	for (size_t i = 0; i < n && !err; i++) {
		json_t *o = json_array_get(a, i), *comm;

		if (!json_is_object(o))
			return -EBADMSG;
		m->running[i].pid = (int32_t)get_i64(o, "pid", &err);
		comm = get(o, "comm", JSON_STRING, &err);
		if (comm)
			snprintf(m->running[i].comm, sizeof(m->running[i].comm), "%s",
				 json_string_value(comm));
	}
	return err;
}

static int parse(struct manifest *m, json_t *root)
{
	json_t *v, *o;
	int err = 0;

	if (!json_is_object(root))
		return -EBADMSG;
	v = json_object_get(root, "format_version");
	if (!json_is_integer(v) || json_integer_value(v) < 1)
		return -EBADMSG;
	if (json_integer_value(v) > MANIFEST_FORMAT_VERSION)
		return -EPROTO;

	m->memtrack_version = dup_str(root, "memtrack_version", &err);
	m->command = dup_str(root, "command", &err);
	m->root_pid = (int32_t)get_i64(root, "root_pid", &err);
	m->exit_status = (int)get_i64(root, "exit_status", &err);
	m->term_signal = (int)get_i64(root, "term_signal", &err);
	m->kernel_release = dup_str(root, "kernel_release", &err);
	m->artifact = dup_str(root, "artifact", &err);
	m->start_unix_ns = get_i64(root, "start_unix_ns", &err);
	m->start_mono_ns = get_i64(root, "start_mono_ns", &err);

	o = get(root, "mechanisms", JSON_OBJECT, &err);
	m->uprobe_mechanism = dup_str(o, "uprobe", &err);
	m->tracepoint_mechanism = dup_str(o, "tracepoint", &err);
	m->rmap_backend = dup_str(o, "rmap_backend", &err);
	m->rmap_reason = dup_str(o, "rmap_reason", &err);
	m->btf_source = dup_str(o, "btf", &err);

	o = get(root, "events", JSON_OBJECT, &err);
	m->events_total = get_u64(o, "total", &err);
	o = get(o, "by_type", JSON_OBJECT, &err);
	for (uint32_t t = 0; t < MT_EV_TYPE_MAX; t++) {
		if (artifact__type_name(t))
			m->counts[t] = get_u64(o, artifact__type_name(t), &err);
	}

	o = get(root, "drops", JSON_OBJECT, &err);
	for (int i = 0; i < MT_DROP_NR; i++)
		m->drops[i] = get_u64(o, drop_keys[i], &err);
	m->consumer_drops = get_u64(o, "consumer", &err);
	v = get(root, "complete", JSON_TRUE, &err);
	m->complete = v && json_is_true(v);

	o = get(root, "timings_ms", JSON_OBJECT, &err);
	m->t_load = get_ns(o, "load", &err);
	m->t_attach = get_ns(o, "attach", &err);
	m->t_run = get_ns(o, "run", &err);
	m->t_drain = get_ns(o, "drain", &err);
	m->t_detach = get_ns(o, "detach", &err);
	m->t_total = get_ns(o, "total", &err);

	o = get(root, "results", JSON_OBJECT, &err);
	m->peak_heap = get_u64(o, "peak_heap", &err);
	m->peak_rss = get_u64(o, "peak_rss", &err);
	m->allocs = get_u64(o, "allocs", &err);
	m->frees = get_u64(o, "frees", &err);
	m->leaked_bytes = get_u64(o, "leaked_bytes", &err);
	m->leaked_count = get_u64(o, "leaked_count", &err);
	m->memtrack_max_rss = get_u64(root, "memtrack_max_rss", &err);
	m->ringbuf_bytes = get_u64(root, "ringbuf_bytes", &err);
	if (err)
		return err;

	err = read_argv(m, root);
	if (!err)
		err = read_libraries(m, root);
	if (!err)
		err = read_procs(m, root);
	if (!err)
		err = read_running(m, root);
	return err;
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
	/* From here on every pointer in *m is ours; manifest__free relies on this flag. */
	m->read_allocated = true;
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
	rc = parse(m, root);

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
	/* A caller-built manifest points at the caller's strings: not ours to free. */
	if (!m || !m->read_allocated)
		return;
	free((char *)m->memtrack_version);
	free(m->command);
	for (char **p = m->argv; p && *p; p++)
		free(*p);
	free(m->argv);
	free(m->kernel_release);
	free(m->artifact);
	free((char *)m->uprobe_mechanism);
	free((char *)m->tracepoint_mechanism);
	free((char *)m->rmap_backend);
	free(m->rmap_reason);
	free((char *)m->btf_source);
	for (uint32_t i = 0; m->libraries && i < m->nr_libraries; i++) {
		free(m->libraries[i].path);
		free(m->libraries[i].kind);
	}
	free(m->libraries);
	free(m->procs);
	free(m->running);
	memset(m, 0, sizeof(*m));
}
