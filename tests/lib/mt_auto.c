// SPDX-License-Identifier: MIT
/* The --alloc-hooks auto root tests' common checks: mt_auto.h. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <stdarg.h>
#include <cmocka.h>
#include "mt_auto.h"
#include "mt_check.h"
#include "mt_modes.h"

const char *const mt_hooks_uprobe[] = {"--alloc-hooks", "uprobe", NULL};
const char *const mt_hooks_preload[] = {"--alloc-hooks", "preload", NULL};
const char *const mt_hooks_auto[] = {"--alloc-hooks", "auto", NULL};

/* The manifest's process entry of pid, NULL if none. */
json_t *mt_auto_proc_of(const struct mt_run *r, int32_t pid)
{
	json_t *procs = json_object_get(r->manifest, "processes"), *p;
	size_t i;

	json_array_foreach(procs, i,
			   p) if (json_integer_value(json_object_get(p, "pid")) == pid) return p;
	return NULL;
}

const char *mt_auto_comm_of(const struct mt_run *r, int32_t pid)
{
	return json_string_value(json_object_get(mt_auto_proc_of(r, pid), "comm"));
}

const char *mt_auto_hooks_of(const struct mt_run *r, int32_t pid, const char *family)
{
	return json_string_value(
	    json_object_get(json_object_get(mt_auto_proc_of(r, pid), "alloc_hooks"), family));
}

/* Keeps the heap events of a process's last image whose name is one of ctx's (NULL-ended). */
bool mt_auto_keep_targets(const struct mt_run *r, size_t i, void *ctx)
{
	const char *const *names = ctx, *comm = mt_auto_comm_of(r, r->ev[i].pid);

	if (!comm)
		return false;
	for (size_t j = i + 1; j < r->nr_ev; j++)
		if (r->ev[j].type == MT_EV_EXEC && r->ev[j].pid == r->ev[i].pid)
			return false; /* an earlier image (sh, env): not compared */
	for (; *names; names++)
		if (!strcmp(comm, *names))
			return true;
	return false;
}

/* The named processes' last images give the same heap events in u (uprobe mode) and a. */
void mt_auto_same_events(struct mt_run *u, struct mt_run *a, const char *const *names,
			 size_t want_procs)
{
	struct mt_proc_ms *x, *y;
	size_t nx = mt_modes_per_process(u, mt_auto_keep_targets, (void *)names, &x);
	size_t ny = mt_modes_per_process(a, mt_auto_keep_targets, (void *)names, &y);

	MT_CHECK(a, nx == want_procs && ny == want_procs,
		 "%zu processes with events in uprobe mode, %zu in auto, want %zu", nx, ny,
		 want_procs);
	for (size_t i = 0; i < nx; i++)
		MT_CHECK(
		    a, mt_modes_same(x[i].s, y[i].s),
		    "process %zu of %zu differs:\n uprobe (%zu): %.600s\n auto   (%zu): %.600s", i,
		    nx, x[i].n, x[i].s, y[i].n, y[i].s);
	mt_modes_free(x, nx);
	mt_modes_free(y, ny);
}

/* How many processes named comm have alloc_hooks.libc == want. */
/* Processes named comm whose family's mechanism (manifest) is want. */
size_t mt_auto_count_family(const struct mt_run *r, const char *comm, const char *family,
			    const char *want)
{
	json_t *procs = json_object_get(r->manifest, "processes"), *p;
	size_t i, n = 0;

	json_array_foreach(procs, i, p)
	{
		int32_t pid = (int32_t)json_integer_value(json_object_get(p, "pid"));
		const char *c = mt_auto_comm_of(r, pid), *h = mt_auto_hooks_of(r, pid, family);

		n += c && h && !strcmp(c, comm) && !strcmp(h, want);
	}
	return n;
}

size_t mt_auto_count_hooks(const struct mt_run *r, const char *comm, const char *want)
{
	return mt_auto_count_family(r, comm, "libc", want);
}

/* Processes named comm: want_preload served by the interposer, want_uprobe by uprobes. */
void mt_auto_check_split(struct mt_run *r, const char *comm, size_t want_preload,
			 size_t want_uprobe)
{
	size_t p = mt_auto_count_hooks(r, comm, "preload"),
	       u = mt_auto_count_hooks(r, comm, "uprobe");

	MT_CHECK(r, p == want_preload && u == want_uprobe,
		 "%s: %zu served by preload, %zu by uprobe; want %zu and %zu", comm, p, u,
		 want_preload, want_uprobe);
}

/* The idle interposer of a uprobe-mode run is no allocator of the program's: it forwards each
 * call to the next definition, probed. Probed itself (it exports mimalloc's names: taken for
 * one), its return probes replaced return addresses into the program, and for ~0.2 s after
 * the run (the detacher's closing) the stacks of the next run's interposer ended at them:
 * test_stacks_preload failed right after this file's runs (alloc_table__classify). */
void mt_auto_check_unprobed(struct mt_run *r)
{
	json_t *libs = mt_json(r, "libraries"), *e;
	size_t i;

	json_array_foreach(libs, i, e)
	{
		const char *path = json_string_value(json_object_get(e, "path"));

		MT_CHECK(r, path && !strstr(path, "libmemtrack-preload"),
			 "the interposer probed as an allocator: %s (%s)", path ? path : "?",
			 json_string_value(json_object_get(e, "kind")));
	}
}

void mt_auto_run_ok(struct mt_run *r, const char *const *opts, const char *shell)
{
	char pre[PATH_MAX + 16];
	const char *const env[] = {pre, "MEMTRACK_PRELOAD_SHM=/dev/shm/memtrack-0-0000000000000000",
				   NULL};
	struct mt_run_opts o = {.track_opts = opts, .shell = shell};

	/* The uprobe-mode reference runs with the interposer loaded but idle (no shared memory:
	 * it forwards every call): the program's environment is then the same, two variables
	 * more, and so is what the interposer's initialisation allocates through an allocator
	 * it does not serve (dlsym): only the mechanism differs between the two runs. */
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s/build/libmemtrack-preload.so", mt_repo_root());
	if (opts == mt_hooks_uprobe)
		o.env = env;

	assert_int_equal(mt_track(r, &o, NULL), 0);
	MT_CHECK(r, r->status == 0 && r->nr_artifacts == 1 && r->read_rc == 0 && r->manifest,
		 "run failed: status %d, %zu artifacts, read %d", r->status, r->nr_artifacts,
		 r->read_rc);
	if (opts == mt_hooks_uprobe)
		mt_auto_check_unprobed(r);
}

/*
 * The uprobe_multi links memtrack holds, as "path uprobe_cnt" lines: written by
 * build/targets/uprobe_links, run by the command itself while memtrack (its parent) runs, into
 * file; from the kernel's link info, which names the file on every kernel with these links
 * (fdinfo does only from 6.13).
 */
char *mt_auto_links_of(const char *file)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = fopen(file, "r");

	if (!f)
		fail_msg("no link dump in %s", file);
	if (getdelim(&out, &len, '\0', f) < 0) {
		free(out);
		out = strdup("");
	}
	fclose(f);
	assert_non_null(out);
	return out;
}

/* Nothing attached to any library in auto run a, links (mt_auto_links_of) dumped while it ran: its
 * only uprobe_multi link is the interposer's control points (want: that line; none yet when the
 * dump ran before that link was made: the command does not wait for it), no library in the
 * manifest, the allocator programs never loaded. False when this kernel has no uprobe_multi
 * links (perf uprobes: their fdinfo names no file; the manifest still says it). */
bool mt_auto_only_control_points(struct mt_run *a, const char *links, char *want, size_t cap)
{
	bool multi = !strcmp(json_string_value(mt_json(a, "mechanisms.uprobe")), "uprobe_multi");

	snprintf(want, cap, "%s 3\n", /* the control points: MT_PRELOAD_CTL_NR */
		 json_string_value(mt_json(a, "mechanisms.preload_lib")));
	if (multi)
		MT_CHECK(a, !strcmp(links, want) || !*links,
			 "uprobe links in auto mode:\n%s\nnot only:\n%s", links, want);
	else
		fprintf(stderr, "skip the link check: this kernel has no uprobe_multi links\n");
	MT_CHECK(a, json_array_size(mt_json(a, "libraries")) == 0,
		 "libraries attached in auto mode: %zu", json_array_size(mt_json(a, "libraries")));
	MT_CHECK(a,
		 !strcmp(json_string_value(mt_json(a, "mechanisms.alloc_programs")), "not loaded"),
		 "mechanisms.alloc_programs is %s",
		 json_string_value(mt_json(a, "mechanisms.alloc_programs")));
	return multi;
}
