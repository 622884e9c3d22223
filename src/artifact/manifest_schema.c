// SPDX-License-Identifier: MIT
/*
 * The manifest's schema: every key of `<root_pid>.memtrack.json` is one row of manifest_rows,
 * read by both manifest__build and manifest__parse. Timings are stored in milliseconds as
 * doubles; jansson prints reals with 17 significant digits, so ns -> ms -> ns is exact for any
 * run shorter than ~100 days. Unsigned counters go through json_int_t (int64): values above
 * INT64_MAX would come out negative in the JSON but still read back to the same bits.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "artifact/manifest_schema.h"
#include "common/records.h"

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

/*
 * The schema, once: each key of the file is one row, in the order written, with the member it
 * holds (or, for arrays and computed keys, the functions that put and get it). Rows of a group
 * ("mechanisms", "results", ...) go into that object of the root, made at its first row.
 */
enum field_kind { F_STR, F_COMM, F_NAME, F_I32, F_U32, F_INT, F_I64, F_U64, F_MS, F_BOOL, F_SUB };

struct field {
	const char *group; /* NULL: the root (or the array element) */
	const char *key;
	enum field_kind kind;
	size_t off; /* of the member in the struct the row describes */
	/* F_SUB: put sets key(s) in o; get reads them (NULL: written only). 0 or -errno. */
	int (*put)(json_t *o, const struct field *f, const struct manifest *m);
	int (*get)(json_t *o, const struct field *f, struct manifest *m);
};

#define AT(type, member) .off = offsetof(type, member)
#define M(member) AT(struct manifest, member)
#define N(a) (sizeof(a) / sizeof((a)[0]))

static int field_put(json_t *o, const struct field *f, const void *base)
{
	const char *p = (const char *)base + f->off;
	json_t *v = NULL;

	switch (f->kind) {
	case F_STR: v = str_or_null(*(const char *const *)p); break;
	case F_COMM: v = json_stringn(p, strnlen(p, 16)); break;
	case F_NAME: v = json_stringn(p, strnlen(p, MT_MARK_NAME_MAX)); break;
	case F_I32: v = json_integer(*(const int32_t *)p); break;
	case F_U32: v = json_integer(*(const uint32_t *)p); break;
	case F_INT: v = json_integer(*(const int *)p); break;
	case F_I64: v = json_integer(*(const int64_t *)p); break;
	case F_U64: v = u64(*(const uint64_t *)p); break;
	case F_MS: v = ms(*(const uint64_t *)p); break;
	case F_BOOL: v = json_boolean(*(const bool *)p); break;
	case F_SUB: return f->put(o, f, base);
	}
	return set(o, f->key, v);
}

static int fields_put(json_t *root, const struct field *rows, size_t n, const void *base)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		json_t *o = root;

		if (rows[i].group) {
			o = json_object_get(root, rows[i].group);
			if (!o && set(root, rows[i].group, o = json_object()))
				return -ENOMEM;
		}
		rc |= field_put(o, &rows[i], base);
	}
	return rc ? -ENOMEM : 0;
}

/* An array of n structs of elem_size bytes, each an object of rows. */
static int array_put(json_t *o, const char *key, const void *elems, size_t n, size_t elem_size,
		     const struct field *rows, size_t nr_rows)
{
	json_t *a = json_array();
	int rc = 0;

	for (size_t i = 0; a && i < n && !rc; i++) {
		json_t *e = json_object();

		rc = e ? json_array_append_new(a, e) : -1;
		if (!rc)
			rc = fields_put(e, rows, nr_rows, (const char *)elems + i * elem_size);
	}
	if (rc) {
		json_decref(a);
		return -ENOMEM;
	}
	return set(o, key, a);
}

/* processes[].alloc_hooks: which mechanism served each family, when the tracker said. The row
 * is one of proc_rows, so the base is a struct manifest_proc (field_put passes it as is). */
static int put_proc_hooks(json_t *o, const struct field *f, const struct manifest *base)
{
	const struct manifest_proc *p = (const void *)base;
	json_t *h;

	if (!p->hooks_libc && !p->hooks_cxx)
		return 0;
	h = json_object();
	if (set(o, f->key, h))
		return -ENOMEM;
	const struct {
		const char *key;
		uint8_t hooks;
	} fam[] = {
		{"jemalloc", p->hooks_jemalloc},
		{"mimalloc", p->hooks_mimalloc},
		{"tcmalloc", p->hooks_tcmalloc},
	};
	int err = set(h, "libc", str_or_null(manifest__hooks_name(p->hooks_libc))) |
		  set(h, "libstdc++", str_or_null(manifest__hooks_name(p->hooks_cxx)));

	for (size_t i = 0; i < sizeof(fam) / sizeof(fam[0]); i++)
		if (fam[i].hooks)
			err |= set(h, fam[i].key, str_or_null(manifest__hooks_name(fam[i].hooks)));
	return err;
}

/* mechanisms.alloc_hooks, preload_lib, preload_clock (and its reason) and preload_drops, when
 * set. preload_drops repeats the preload rows of "drops" (same keys, same values): the key
 * predates them there, and readers of it keep working. */
static int put_preload(json_t *o, const struct field *f, const struct manifest *m)
{
	json_t *d;
	int rc = 0;

	(void)f;
	if (!m->alloc_hooks)
		return 0;
	d = json_object();
	if (set(o, "alloc_hooks", json_string(m->alloc_hooks)) ||
	    set(o, "preload_lib", str_or_null(m->preload_lib)) || set(o, "preload_drops", d))
		return -ENOMEM;
	if (m->preload_clock && (set(o, "preload_clock", json_string(m->preload_clock)) ||
				 set(o, "preload_clock_reason", str_or_null(m->preload_clock_reason))))
		return -ENOMEM;
	for (int i = DROP_PRELOAD; i < DROP_TRACKER; i++)
		rc |= set(d, records__drops[i].key, u64(m->drops[i]));
	return rc;
}

/* --stacks: the `stacks` object's keys (docs/stacks.md), written only with --stacks */
static const struct field stacks_rows[] = {
    {NULL, "unwinder", F_STR, M(stacks_unwinder)},
    {NULL, "allocs", F_U64, M(stacks_allocs)},
    {NULL, "with_stack", F_U64, M(stacks_with_stack)},
    {NULL, "distinct", F_U64, M(stacks_distinct)},
    {NULL, "modules", F_U64, M(stacks_modules)},
    {"without", "unwind_failed", F_U64, M(stacks_unwind_failed)},
    {"without", "area_full", F_U64, M(stacks_area_full)},
    {"without", "bad_ref", F_U64, M(stacks_bad_ref)},
    {"without", "before_unwinder", F_U64, M(stacks_early)},
    {"without", "uprobe", F_U64, M(stacks_uprobe)},
    {"without", "not_copied", F_U64, M(stacks_not_copied)},
    {NULL, "truncated", F_U64, M(stacks_truncated)},
    {NULL, "cut_by_uretprobe", F_U64, M(stacks_cut_by_uretprobe)},
    {NULL, "ring_bytes", F_U64, M(stacks_ring_bytes)},
    {NULL, "unwind_ns", F_U64, M(stacks_unwind_ns)},
    {NULL, "file_bytes", F_U64, M(stacks_file_bytes)},
};

static int fields_put(json_t *root, const struct field *rows, size_t n, const void *base);

/* outputs.stacks and the stacks object, with --stacks only: without, the manifest is as before */
static int put_stacks(json_t *o, const struct field *f, const struct manifest *m)
{
	json_t *out, *st;

	(void)f;
	if (!m->stacks_file)
		return 0;
	out = json_object_get(o, "outputs");
	if (!out && set(o, "outputs", out = json_object()))
		return -ENOMEM;
	if (set(out, "stacks", json_string(m->stacks_file)) || set(o, "stacks", st = json_object()))
		return -ENOMEM;
	return fields_put(st, stacks_rows, N(stacks_rows), m);
}

static const struct field proc_rows[] = {
	{NULL, "pid", F_I32, AT(struct manifest_proc, pid)},
	{NULL, "ppid", F_I32, AT(struct manifest_proc, ppid)},
	{NULL, "comm", F_COMM, AT(struct manifest_proc, comm)},
	{NULL, "peak_heap", F_U64, AT(struct manifest_proc, peak_heap)},
	{NULL, "peak_rss", F_U64, AT(struct manifest_proc, peak_rss)},
	{NULL, "allocs", F_U64, AT(struct manifest_proc, allocs)},
	{NULL, "frees", F_U64, AT(struct manifest_proc, frees)},
	{NULL, "leaked_bytes", F_U64, AT(struct manifest_proc, leaked_bytes)},
	{NULL, "leaked_count", F_U64, AT(struct manifest_proc, leaked_count)},
	{NULL, "execs", F_U64, AT(struct manifest_proc, execs)},
	{NULL, "alloc_hooks", F_SUB, .put = put_proc_hooks},
};

static const struct field running_rows[] = {
	{NULL, "pid", F_I32, AT(struct manifest_running, pid)},
	{NULL, "comm", F_COMM, AT(struct manifest_running, comm)},
};

static const struct field library_rows[] = {
	{NULL, "path", F_STR, AT(struct manifest_library, path)},
	{NULL, "kind", F_STR, AT(struct manifest_library, kind)},
	{NULL, "sites", F_U32, AT(struct manifest_library, sites)},
};

#define W(member) AT(struct manifest_window, member)
static const struct field window_rows[] = {
	{NULL, "peak_heap", F_U64, W(peak_heap)},
	{NULL, "allocs", F_U64, W(allocs)},
	{NULL, "allocated_bytes", F_U64, W(allocated_bytes)},
	{NULL, "frees", F_U64, W(frees)},
	{NULL, "live_bytes", F_U64, W(live_bytes)},
	{NULL, "live_count", F_U64, W(live_count)},
	{NULL, "starts", F_U64, W(starts)},
	{NULL, "stops", F_U64, W(stops)},
	{NULL, "duration", F_MS, W(duration_ns)},
};

static const struct field marker_rows[] = {
	{NULL, "kind", F_COMM, AT(struct manifest_marker, kind)},
	{NULL, "name", F_NAME, AT(struct manifest_marker, name)},
	{NULL, "pid", F_I32, AT(struct manifest_marker, pid)},
	{NULL, "tid", F_I32, AT(struct manifest_marker, tid)},
	{NULL, "ts_ns", F_U64, AT(struct manifest_marker, ts_ns)},
	{NULL, "heap", F_U64, AT(struct manifest_marker, heap)},
	{NULL, "window_heap", F_U64, AT(struct manifest_marker, window_heap)},
};

/* results.window: null when the program never called MEMTRACK_START() */
static int put_window(json_t *o, const struct field *f, const struct manifest *m)
{
	json_t *w;

	if (!m->window.present)
		return set(o, f->key, json_null());
	w = json_object();
	if (set(o, f->key, w))
		return -ENOMEM;
	return fields_put(w, window_rows, N(window_rows), &m->window);
}

static int put_markers(json_t *o, const struct field *f, const struct manifest *m)
{
	return array_put(o, f->key, m->markers, m->nr_markers, sizeof(*m->markers), marker_rows,
			 N(marker_rows));
}

static int put_version(json_t *o, const struct field *f, const struct manifest *m)
{
	(void)m;
	return set(o, f->key, json_integer(MANIFEST_FORMAT_VERSION));
}

static int put_argv(json_t *o, const struct field *f, const struct manifest *m)
{
	json_t *a = json_array();
	int rc = 0;

	for (char **p = m->argv; a && p && *p; p++)
		rc |= json_array_append_new(a, json_string(*p));
	if (rc) {
		json_decref(a);
		return -ENOMEM;
	}
	return set(o, f->key, a);
}

static int put_libraries(json_t *o, const struct field *f, const struct manifest *m)
{
	return array_put(o, f->key, m->libraries, m->nr_libraries, sizeof(*m->libraries),
			 library_rows, N(library_rows));
}

static int put_running(json_t *o, const struct field *f, const struct manifest *m)
{
	return array_put(o, f->key, m->running, m->nr_running, sizeof(*m->running), running_rows,
			 N(running_rows));
}

static int put_procs(json_t *o, const struct field *f, const struct manifest *m)
{
	return array_put(o, f->key, m->procs, m->nr_procs, sizeof(*m->procs), proc_rows,
			 N(proc_rows));
}

/* Every artifact type, zeros included, so consumers see a fixed key set. */
static int put_by_type(json_t *o, const struct field *f, const struct manifest *m)
{
	json_t *bt = json_object();
	int rc = 0;

	for (uint32_t t = 0; bt && t < MT_EV_TYPE_MAX; t++)
		if (records__name(t))
			rc |= set(bt, records__name(t), u64(m->counts[t]));
	return rc | set(o, f->key, bt);
}

static int put_drop_reasons(json_t *o, const struct field *f, const struct manifest *m)
{
	int rc = 0;

	(void)f;
	for (int i = 0; i < DROP_NR; i++)
		rc |= set(o, records__drops[i].key, u64(m->drops[i]));
	return rc;
}

static int put_drops_total(json_t *o, const struct field *f, const struct manifest *m)
{
	return set(o, f->key, u64(m->consumer_drops + records__drops_sum(m->drops)));
}

static int get_argv(json_t *o, const struct field *f, struct manifest *m);
static int get_libraries(json_t *o, const struct field *f, struct manifest *m);
static int get_running(json_t *o, const struct field *f, struct manifest *m);
static int get_procs(json_t *o, const struct field *f, struct manifest *m);
static int get_by_type(json_t *o, const struct field *f, struct manifest *m);
static int get_drop_reasons(json_t *o, const struct field *f, struct manifest *m);
static int get_window(json_t *o, const struct field *f, struct manifest *m);
static int get_markers(json_t *o, const struct field *f, struct manifest *m);
static int get_stacks(json_t *o, const struct field *f, struct manifest *m);

static const struct field manifest_rows[] = {
    {NULL, "format_version", F_SUB, .put = put_version},
    {NULL, "memtrack_version", F_STR, M(memtrack_version)},
    {NULL, "command", F_STR, M(command)},
    {NULL, "argv", F_SUB, .put = put_argv, .get = get_argv},
    {NULL, "root_pid", F_I32, M(root_pid)},
    {NULL, "exit_status", F_INT, M(exit_status)},
    {NULL, "term_signal", F_INT, M(term_signal)},
    {NULL, "kernel_release", F_STR, M(kernel_release)},
    {NULL, "artifact", F_STR, M(artifact)},
    {NULL, "start_unix_ns", F_I64, M(start_unix_ns)},
    {NULL, "start_mono_ns", F_I64, M(start_mono_ns)},
    {"mechanisms", "uprobe", F_STR, M(uprobe_mechanism)},
    {"mechanisms", "tracepoint", F_STR, M(tracepoint_mechanism)},
    {"mechanisms", "rmap_backend", F_STR, M(rmap_backend)},
    {"mechanisms", "rmap_reason", F_STR, M(rmap_reason)},
    {"mechanisms", "bpf_programs", F_STR, M(bpf_programs)},
    {"mechanisms", "btf", F_STR, M(btf_source)},
    {"mechanisms", "alloc_programs", F_STR, M(alloc_programs)},
    {"mechanisms", "uprobe_returns", F_STR, M(uprobe_returns)},
    {"mechanisms", "hook_links", F_STR, M(hook_links)},
    {"mechanisms", "control_link", F_STR, M(control_link)},
    {"mechanisms", NULL, F_SUB, .put = put_preload},
    {"mechanisms", "preload_waits", F_U64, M(preload_waits)},
    {"mechanisms", "preload_wait_ms", F_MS, M(preload_wait_ns)},
    {"mechanisms", "parents_resumed", F_U64, M(parents_resumed)},
    {"mechanisms", "stops", F_U64, M(stops)},
    {"mechanisms", "not_stopped", F_U64, M(not_stopped)},
    {"mechanisms", "execs_judged", F_U64, M(execs_judged)},
    {"mechanisms", "dlopens_judged", F_U64, M(dlopens_judged)},
    {"mechanisms", "handoffs", F_U64, M(handoffs)},
    {"mechanisms", "glibc_detaches", F_U64, M(glibc_detaches)},
    {NULL, "libraries", F_SUB, .put = put_libraries, .get = get_libraries},
    {NULL, "stacks", F_SUB, .put = put_stacks, .get = get_stacks},
    {"events", "total", F_U64, M(events_total)},
    {"events", "by_type", F_SUB, .put = put_by_type, .get = get_by_type},
    {"drops", NULL, F_SUB, .put = put_drop_reasons, .get = get_drop_reasons},
    {"drops", "consumer", F_U64, M(consumer_drops)},
    {"drops", "total", F_SUB, .put = put_drops_total},
    {NULL, "complete", F_BOOL, M(complete)},
    {NULL, "still_running", F_SUB, .put = put_running, .get = get_running},
    {"timings_ms", "load", F_MS, M(t_load)},
    {"timings_ms", "attach", F_MS, M(t_attach)},
    {"timings_ms", "run", F_MS, M(t_run)},
    {"timings_ms", "drain", F_MS, M(t_drain)},
    {"timings_ms", "detach", F_MS, M(t_detach)},
    {"timings_ms", "total", F_MS, M(t_total)},
    {"results", "peak_heap", F_U64, M(peak_heap)},
    {"results", "peak_rss", F_U64, M(peak_rss)},
    {"results", "allocs", F_U64, M(allocs)},
    {"results", "allocated_bytes", F_U64, M(allocated_bytes)},
    {"results", "frees", F_U64, M(frees)},
    {"results", "leaked_bytes", F_U64, M(leaked_bytes)},
    {"results", "leaked_count", F_U64, M(leaked_count)},
    {"results", "window", F_SUB, .put = put_window, .get = get_window},
    {NULL, "markers", F_SUB, .put = put_markers, .get = get_markers},
    {NULL, "markers_dropped", F_U64, M(markers_dropped)},
    {NULL, "memtrack_max_rss", F_U64, M(memtrack_max_rss)},
    {NULL, "ringbuf_bytes", F_U64, M(ringbuf_bytes)},
    {NULL, "processes", F_SUB, .put = put_procs, .get = get_procs},
};

json_t *manifest__build(const struct manifest *m)
{
	json_t *root = json_object();

	if (root && fields_put(root, manifest_rows, N(manifest_rows), m)) {
		json_decref(root);
		return NULL;
	}
	return root;
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

/* One row's value from o into base; errors accumulate in *err. */
static void field_get(json_t *o, const struct field *f, void *base, int *err)
{
	char *p = (char *)base + f->off;
	json_t *v;

	switch (f->kind) {
	case F_STR: *(char **)p = dup_str(o, f->key, err); break;
	case F_COMM:
		v = get(o, f->key, JSON_STRING, err);
		if (v) /* truncated to what the kernel keeps: 15 bytes and a NUL */
			snprintf(p, 16, "%s", json_string_value(v));
		break;
	case F_NAME:
		v = get(o, f->key, JSON_STRING, err);
		if (v)
			snprintf(p, MT_MARK_NAME_MAX + 1, "%s", json_string_value(v));
		break;
	case F_I32: *(int32_t *)p = (int32_t)get_i64(o, f->key, err); break;
	case F_U32: *(uint32_t *)p = (uint32_t)get_u64(o, f->key, err); break;
	case F_INT: *(int *)p = (int)get_i64(o, f->key, err); break;
	case F_I64: *(int64_t *)p = get_i64(o, f->key, err); break;
	case F_U64: *(uint64_t *)p = get_u64(o, f->key, err); break;
	case F_MS: *(uint64_t *)p = get_ns(o, f->key, err); break;
	case F_BOOL:
		v = get(o, f->key, JSON_TRUE, err);
		*(bool *)p = v && json_is_true(v);
		break;
	case F_SUB:
		if (f->get && !*err)
			*err = f->get(o, f, base);
		break;
	}
}

static int fields_get(json_t *root, const struct field *rows, size_t n, void *base)
{
	int err = 0;

	for (size_t i = 0; i < n; i++) {
		json_t *o = rows[i].group ? get(root, rows[i].group, JSON_OBJECT, &err) : root;

		field_get(o, &rows[i], base, &err);
	}
	return err;
}

/* An array of objects into *elems (n structs of elem_size bytes, allocated). */
static int array_get(json_t *o, const char *key, void **elems, uint32_t *n, size_t elem_size,
		     const struct field *rows, size_t nr_rows)
{
	int err = 0;
	json_t *a = get(o, key, JSON_ARRAY, &err);
	size_t len = json_array_size(a);

	if (err || !len)
		return err;
	*elems = calloc(len, elem_size);
	if (!*elems)
		return -ENOMEM;
	*n = (uint32_t)len;
	for (size_t i = 0; i < len && !err; i++) {
		json_t *e = json_array_get(a, i);

		if (!json_is_object(e))
			return -EBADMSG;
		err = fields_get(e, rows, nr_rows, (char *)*elems + i * elem_size);
	}
	return err;
}

static int get_argv(json_t *o, const struct field *f, struct manifest *m)
{
	int err = 0;
	json_t *a = get(o, f->key, JSON_ARRAY, &err);
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

static int get_libraries(json_t *o, const struct field *f, struct manifest *m)
{
	return array_get(o, f->key, (void **)&m->libraries, &m->nr_libraries,
			 sizeof(*m->libraries), library_rows, N(library_rows));
}

static int get_running(json_t *o, const struct field *f, struct manifest *m)
{
	return array_get(o, f->key, (void **)&m->running, &m->nr_running, sizeof(*m->running),
			 running_rows, N(running_rows));
}

static int get_procs(json_t *o, const struct field *f, struct manifest *m)
{
	return array_get(o, f->key, (void **)&m->procs, &m->nr_procs, sizeof(*m->procs),
			 proc_rows, N(proc_rows));
}

static int get_window(json_t *o, const struct field *f, struct manifest *m)
{
	int err = 0;
	json_t *w = get(o, f->key, JSON_OBJECT, &err);

	if (err || !w)
		return err;
	m->window.present = true;
	return fields_get(w, window_rows, N(window_rows), &m->window);
}

static int get_markers(json_t *o, const struct field *f, struct manifest *m)
{
	return array_get(o, f->key, (void **)&m->markers, &m->nr_markers, sizeof(*m->markers),
			 marker_rows, N(marker_rows));
}

static int get_by_type(json_t *o, const struct field *f, struct manifest *m)
{
	int err = 0;
	json_t *bt = get(o, f->key, JSON_OBJECT, &err);

	for (uint32_t t = 0; t < MT_EV_TYPE_MAX; t++)
		if (records__name(t))
			m->counts[t] = get_u64(bt, records__name(t), &err);
	return err;
}

static int get_drop_reasons(json_t *o, const struct field *f, struct manifest *m)
{
	int err = 0;

	(void)f;
	for (int i = 0; i < DROP_NR; i++)
		if ((i != MT_DROP_UNSERVED && i != DROP_PRELOAD + MT_SHM_DROP_NAMESPACE &&
		     i < DROP_TRACKER) ||
		    json_object_get(o, records__drops[i].key))
			m->drops[i] = get_u64(o, records__drops[i].key, &err);
		else
			m->drops[i] = 0; /* added later: older manifests lack it */
	return err;
}

static int get_stacks(json_t *o, const struct field *f, struct manifest *m)
{
	int err = 0;
	json_t *out = get(o, "outputs", JSON_OBJECT, &err), *st;
	json_t *file = get(out, "stacks", JSON_STRING, &err);

	(void)f;
	if (err || !file)
		return err;
	m->stacks_file = strdup(json_string_value(file));
	if (!m->stacks_file)
		return -ENOMEM;
	st = get(o, "stacks", JSON_OBJECT, &err);
	return err ? err : fields_get(st, stacks_rows, N(stacks_rows), m);
}

int manifest__parse(struct manifest *m, json_t *root)
{
	json_t *v;

	if (!json_is_object(root))
		return -EBADMSG;
	v = json_object_get(root, "format_version");
	if (!json_is_integer(v) || json_integer_value(v) < 1)
		return -EBADMSG;
	if (json_integer_value(v) > MANIFEST_FORMAT_VERSION)
		return -EPROTO;
	return fields_get(root, manifest_rows, N(manifest_rows), m);
}
