// SPDX-License-Identifier: MIT
/*
 * Root tests of --stacks (docs/stacks.md) in the preload path: build/targets/stacks (built
 * -O2 -fomit-frame-pointer) allocates along known call paths; the stacks file read back must
 * give each of its allocation records the stack of its path, leaf first, frame by frame (the
 * expected functions resolved through the ELF symbol tables of the target and its libraries:
 * no symboliser involved; a thread, a linked and a dlopen'ed library, a signal handler, a fork
 * child among the paths), one id per distinct path, one id per allocation record of the
 * artifact (frees have none), and the bytes per leaf function exact.
 */
#include <fcntl.h>
#include <gelf.h>
#include <libgen.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "../lib/mt_check.h"
#include "../lib/mt_tmpdir.h"
#include "stacks/stackfile.h"

static const char *const preload_opts[] = {"--alloc-hooks", "preload", "--stacks", NULL};
static const char *const uprobe_opts[] = {"--alloc-hooks", "uprobe", "--stacks", NULL};

/* [lo, hi) of a function in path's .symtab; fails the test when absent. */
static void sym_range(const char *path, const char *name, uint64_t *lo, uint64_t *hi)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e;
	Elf_Scn *scn = NULL;
	bool found = false;

	assert_true(fd >= 0);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	assert_non_null(e);
	while (!found && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *n;

			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC)
				continue;
			n = elf_strptr(e, sh.sh_link, s.st_name);
			if (n && !strcmp(n, name) && s.st_size) {
				*lo = s.st_value;
				*hi = s.st_value + s.st_size;
				found = true;
				break;
			}
		}
	}
	elf_end(e);
	close(fd);
	if (!found)
		fail_msg("no function %s in %s", name, path);
}

struct expect_fn {
	const char *file; /* build/targets/... */
	const char *name;
	char real[PATH_MAX];
	uint64_t lo, hi;
};

/* Is frame f a return address into fn (module by path)? */
static bool frame_in(const struct stackfile *sf, const struct stack_frame *f,
		     const struct expect_fn *fn)
{
	const struct stack_module *m = stackfile__module(sf, f->module);

	return m && !strcmp(m->path, fn->real) && f->vaddr - 1 >= fn->lo && f->vaddr - 1 < fn->hi;
}

enum { B, A, MAIN, C, D, THREAD_MAIN, LIB_ALLOC, DL_ALLOC, E, ON_SIGNAL, F, NR_FN };

/* Per path (1..7): its frames, leaf first, and what its allocations add up to. */
static const struct {
	int fns[3], nr_fns;
	uint32_t type, count;
	uint64_t bytes;
} paths[8] = {
    [1] = {{B, A, MAIN}, 3, MT_EV_MALLOC, 100, 100 * 1024},
    [2] = {{C, MAIN}, 2, MT_EV_MALLOC, 10, 10 * 65536},
    [3] = {{D, THREAD_MAIN}, 2, MT_EV_CALLOC, 7, 7 * 4096},
    [4] = {{LIB_ALLOC, MAIN}, 2, MT_EV_REALLOC, 5, 5 * 2048},
    [5] = {{DL_ALLOC, MAIN}, 2, MT_EV_ALIGNED_ALLOC, 3, 3 * 512},
    /* the signal frame (libc's __restore_rt) follows on_signal: not checked */
    [6] = {{E, ON_SIGNAL}, 2, MT_EV_MALLOC, 2, 2 * 3000},
    [7] = {{F, MAIN}, 2, MT_EV_MALLOC, 4, 4 * 5000},
};
#define NR_PATHS 7

/* The whole check, for one event path: opts select it, unwinder is the header's string. */
/* every: each allocation record of the run has a whole stack (none failed, cut or left out) */
static void check_stacks(void **state, const char *const *opts, const char *unwinder, bool every)
{
	struct mt_run *r;
	struct mt_run_opts o = {.track_opts = opts};
	struct expect_fn fns[NR_FN] = {
	    [B] = {"stacks", "b"},
	    [A] = {"stacks", "a"},
	    [MAIN] = {"stacks", "main"},
	    [C] = {"stacks", "c"},
	    [D] = {"stacks", "d"},
	    [THREAD_MAIN] = {"stacks", "thread_main"},
	    [LIB_ALLOC] = {"libstacks_lib.so", "lib_alloc"},
	    [DL_ALLOC] = {"libstacks_dl.so", "dl_alloc"},
	    [E] = {"stacks", "e"},
	    [ON_SIGNAL] = {"stacks", "on_signal"},
	    [F] = {"stacks", "f"},
	};
	uint32_t path_id[NR_PATHS + 1] = {0}, seen[NR_PATHS + 1] = {0};
	uint64_t leaf_bytes[NR_PATHS + 1] = {0}, leaf_count[NR_PATHS + 1] = {0},
				       nr_alloc_records = 0;
	struct stackfile sf;
	char path[PATH_MAX + 64], dir[PATH_MAX];
	uint32_t *ord;
	size_t k = 0;
	int cur = 0, rc;

	MT_REQUIRE_ROOT();
	r = mt_new_run(state);
	snprintf(dir, sizeof(dir), "%s", mt_target("stacks"));
	dirname(dir);
	for (int i = 0; i < NR_FN; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, fns[i].file);
		assert_non_null(realpath(path, fns[i].real));
		sym_range(fns[i].real, fns[i].name, &fns[i].lo, &fns[i].hi);
	}
	mt_track_ok(r, &o, MT_TARGET_ARGV("stacks"), 0);
	snprintf(path, sizeof(path), "%s/%d%s", r->out, r->root_pid, STACKFILE_SUFFIX);
	rc = stackfile__read(path, &sf);
	MT_CHECK(r, rc == 0, "cannot read %s: %s", path, strerror(-rc));
	MT_CHECK(r, !strcmp(sf.unwinder, unwinder), "unwinder %s, want %s", sf.unwinder, unwinder);

	/* one id per allocation record of the artifact, in its order */
	for (size_t i = 0; i < r->nr_ev; i++)
		nr_alloc_records +=
		    r->ev[i].type >= MT_EV_MALLOC && r->ev[i].type <= MT_EV_ALIGNED_ALLOC;
	MT_CHECK(r, sf.nr_allocs == nr_alloc_records, "%llu stack ids for %llu allocation records",
		 (unsigned long long)sf.nr_allocs, (unsigned long long)nr_alloc_records);
	assert_int_equal(mt_need_u64(r, "stacks.allocs"), nr_alloc_records);
	assert_int_equal(mt_need_u64(r, "stacks.distinct"), sf.nr_stacks);
	if (every) {
		MT_CHECK(r, mt_need_u64(r, "stacks.with_stack") == nr_alloc_records,
			 "%llu of %llu allocation records have a stack",
			 (unsigned long long)mt_need_u64(r, "stacks.with_stack"),
			 (unsigned long long)nr_alloc_records);
		assert_int_equal(mt_need_u64(r, "stacks.truncated"), 0);
		assert_int_equal(mt_need_u64(r, "stacks.without.not_copied"), 0);
		for (uint32_t i = 0; i < sf.nr_allocs; i++)
			MT_CHECK(r, sf.allocs[i] != 0, "allocation record %u has no stack", i);
	}

	/* each allocation record's stack id; bytes by leaf function over every allocation */
	ord = calloc(r->nr_ev, sizeof(*ord));
	assert_non_null(ord);
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];
		const struct stack_trace *st;

		if (ev->type < MT_EV_MALLOC || ev->type > MT_EV_ALIGNED_ALLOC)
			continue;
		ord[i] = sf.allocs[k++];
		st = stackfile__stack(&sf, ord[i]);
		for (int p = 1; p <= NR_PATHS && st && st->nr; p++)
			if (frame_in(&sf, &st->frames[0], &fns[paths[p].fns[0]])) {
				leaf_bytes[p] += ev->size;
				leaf_count[p]++;
			}
	}
	/* each call the target reported: its one record, the stack of its path (processes
	 * interleave in the artifact, so by match, not by position) */
	for (size_t j = 0; j < r->nr_exp; j++) {
		const struct mt_expect *e = &r->exp[j];
		const struct stack_trace *st = NULL;
		size_t n = 0;
		uint32_t id = 0;

		if (!strcmp(e->op, "path"))
			cur = (int)e->size;
		if (!mt_op_type(e->op) || mt_op_type(e->op) == MT_EV_FREE)
			continue;
		for (size_t i = 0; i < r->nr_ev; i++)
			if (mt_event_matches(&r->ev[i], e)) {
				id = ord[i];
				n++;
			}
		MT_CHECK(r, n == 1, "%s of 0x%llx: %zu records", e->op, (unsigned long long)e->addr,
			 n);
		MT_CHECK(r, cur >= 1 && cur <= NR_PATHS && mt_op_type(e->op) == paths[cur].type,
			 "allocation of 0x%llx outside a known path", (unsigned long long)e->addr);
		st = stackfile__stack(&sf, id);
		MT_CHECK(r, st != NULL, "path %d: allocation of 0x%llx has no stack", cur,
			 (unsigned long long)e->addr);
		MT_CHECK(r, st->nr >= (uint32_t)paths[cur].nr_fns, "path %d: %u frames", cur,
			 st->nr);
		for (int f = 0; f < paths[cur].nr_fns; f++) {
			const struct expect_fn *fn = &fns[paths[cur].fns[f]];
			const struct stack_module *m = stackfile__module(&sf, st->frames[f].module);

			MT_CHECK(r, frame_in(&sf, &st->frames[f], fn),
				 "path %d frame %d: %s+0x%llx, want %s in %s [0x%llx, 0x%llx)", cur,
				 f, m ? m->path : "?", (unsigned long long)st->frames[f].vaddr,
				 fn->name, fn->real, (unsigned long long)fn->lo,
				 (unsigned long long)fn->hi);
		}
		/* one stack per path: the calls of a path share its id */
		MT_CHECK(r, !path_id[cur] || path_id[cur] == id, "path %d: ids %u and %u", cur,
			 path_id[cur], id);
		path_id[cur] = id;
		seen[cur]++;
	}
	free(ord);
	assert_int_equal(k, sf.nr_allocs);
	for (int p = 1; p <= NR_PATHS; p++) {
		MT_CHECK(r, seen[p] == paths[p].count, "path %d: %u calls matched, want %u", p,
			 seen[p], paths[p].count);
		MT_CHECK(r, leaf_count[p] == paths[p].count && leaf_bytes[p] == paths[p].bytes,
			 "leaf %s: %llu allocations, %llu bytes; want %u, %llu",
			 fns[paths[p].fns[0]].name, (unsigned long long)leaf_count[p],
			 (unsigned long long)leaf_bytes[p], paths[p].count,
			 (unsigned long long)paths[p].bytes);
		for (int q = 1; q < p; q++)
			assert_int_not_equal(path_id[p], path_id[q]);
	}
	stackfile__free(&sf);
}

static void test_stacks_preload(void **state)
{
	check_stacks(state, preload_opts, "preload=libunwind,uprobe=dwfl", false);
}

/* The uprobe path: the BPF side copies the stack at the allocator's return, memtrack unwinds it
 * with libdwfl (stacks/unwind_dwfl.c); the same paths, frames and counts. */
static void test_stacks_uprobe(void **state)
{
	check_stacks(state, uprobe_opts, "uprobe=dwfl", true);
}

/* A process of another user (child_wrapper nobody) cannot open the stack area by its path any
 * more than the rings: the interposer asks memtrack for both (src/track/handoff.h,
 * mechanisms.handoffs 2), and its 8 Mallocs of 4321 bytes have their stacks. The executable is
 * a copy in a 0755 folder: nobody may not reach the build tree. */
static void test_stacks_other_user(void **state)
{
	struct mt_run *r;
	struct mt_run_opts o = {.track_opts = preload_opts};
	struct stackfile sf;
	char dir[128], exe[192], path[PATH_MAX + 64];
	size_t k = 0, mine = 0, with = 0;
	int rc;

	MT_REQUIRE_ROOT();
	r = mt_new_run(state);
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "stk"), 0);
	assert_int_equal(mt_tmpdir_public_copy(dir, "alloc_fixed", exe, sizeof(exe)), 0);
	mt_track_ok(
	    r, &o,
	    (const char *const[]){mt_target("child_wrapper"), "nobody", exe, "8", "4321", NULL}, 0);
	mt_tmpdir_remove(dir);
	MT_CHECK(r, mt_need_u64(r, "mechanisms.handoffs") == 2, "%llu files handed, want 2",
		 (unsigned long long)mt_need_u64(r, "mechanisms.handoffs"));
	snprintf(path, sizeof(path), "%s/%d%s", r->out, r->root_pid, STACKFILE_SUFFIX);
	rc = stackfile__read(path, &sf);
	MT_CHECK(r, rc == 0, "cannot read %s: %s", path, strerror(-rc));
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];

		if (ev->type < MT_EV_MALLOC || ev->type > MT_EV_ALIGNED_ALLOC)
			continue;
		if (ev->type == MT_EV_MALLOC && ev->size == 4321 && k < sf.nr_allocs) {
			mine++;
			with += sf.allocs[k] != 0;
		}
		k++;
	}
	MT_CHECK(r, mine == 8 && with == 8, "%zu Mallocs of 4321 bytes, %zu with a stack; want 8",
		 mine, with);
	stackfile__free(&sf);
}

/*
 * Allocations made inside glibc's dlopen, by the constructor of the library it loads
 * (build/targets/dlopen_ctor: main -> open_lib -> dlopen -> ... -> ctor_alloc, 3 x 7777 bytes),
 * in preload mode, where libc's dlopen has memtrack's dlopen stop: a return probe. With uprobe
 * sessions (6.13+, mechanisms.uprobe_returns "session") no return is prepared for a served
 * process and its whole stack is taken, open_lib included. With separate return probes
 * (MEMTRACK_UPROBE_SESSION=0, or an older kernel) the kernel replaced open_lib's return
 * address with its trampoline: the stack ends at dlopen, flagged truncated, the trampoline's
 * frame left out, and stacks.cut_by_uretprobe counts it (the loader's own allocations during
 * the dlopen too: at least these 3).
 */
static void check_through_dlopen(void **state, bool no_session)
{
	const char *const env[] = {"MEMTRACK_UPROBE_SESSION=0", NULL};
	struct mt_run *r;
	struct mt_run_opts o = {.track_opts = preload_opts, .env = no_session ? env : NULL};
	struct expect_fn fns[2] = {{.file = "libctor_alloc.so", .name = "ctor_alloc"},
				   {.file = "dlopen_ctor", .name = "open_lib"}};
	struct expect_fn *leaf = &fns[0], *caller = &fns[1];
	struct stackfile sf;
	char path[PATH_MAX + 64], dir[PATH_MAX];
	const char *returns;
	size_t k = 0, mine = 0;
	bool session;
	int rc;

	MT_REQUIRE_ROOT();
	r = mt_new_run(state);
	snprintf(dir, sizeof(dir), "%s", mt_target("dlopen_ctor"));
	dirname(dir);
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, fns[i].file);
		assert_non_null(realpath(path, fns[i].real));
		sym_range(fns[i].real, fns[i].name, &fns[i].lo, &fns[i].hi);
	}
	mt_track_ok(r, &o, MT_TARGET_ARGV("dlopen_ctor"), 0);
	returns = json_string_value(mt_json(r, "mechanisms.uprobe_returns"));
	MT_CHECK(r, returns, "no mechanisms.uprobe_returns: libc's dlopen stop not attached?");
	session = !strcmp(returns, "session");
	MT_CHECK(r, !(no_session && session), "sessions used under MEMTRACK_UPROBE_SESSION=0");
	snprintf(path, sizeof(path), "%s/%d%s", r->out, r->root_pid, STACKFILE_SUFFIX);
	rc = stackfile__read(path, &sf);
	MT_CHECK(r, rc == 0, "cannot read %s: %s", path, strerror(-rc));
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];
		const struct stack_trace *st;
		bool in_caller = false, outside = false;

		if (ev->type < MT_EV_MALLOC || ev->type > MT_EV_ALIGNED_ALLOC)
			continue;
		st = k < sf.nr_allocs ? stackfile__stack(&sf, sf.allocs[k]) : NULL;
		k++;
		if (ev->type != MT_EV_MALLOC || ev->size != 7777 || ev->pid != r->root_pid)
			continue;
		mine++;
		MT_CHECK(r, st && st->nr && frame_in(&sf, &st->frames[0], leaf),
			 "malloc(7777) %zu: its stack does not start in ctor_alloc", mine);
		for (uint32_t f = 0; f < st->nr; f++) {
			in_caller |= frame_in(&sf, &st->frames[f], caller);
			outside |= !stackfile__module(&sf, st->frames[f].module);
		}
		MT_CHECK(r, !outside, "malloc(7777) %zu: a frame outside every module ([uprobes]?)",
			 mine);
		if (session)
			MT_CHECK(r, in_caller && !st->truncated,
				 "malloc(7777) %zu: %u frames, open_lib %s, truncated %d; want the "
				 "whole stack",
				 mine, st->nr, in_caller ? "in" : "not in", st->truncated);
		else
			MT_CHECK(
			    r, !in_caller && st->truncated,
			    "malloc(7777) %zu: open_lib %s, truncated %d; want it cut at dlopen",
			    mine, in_caller ? "in" : "not in", st->truncated);
	}
	MT_CHECK(r, mine == 3, "%zu Mallocs of 7777 bytes, want 3", mine);
	if (session)
		MT_CHECK(r, mt_need_u64(r, "stacks.cut_by_uretprobe") == 0,
			 "stacks.cut_by_uretprobe %llu with sessions",
			 (unsigned long long)mt_need_u64(r, "stacks.cut_by_uretprobe"));
	else
		MT_CHECK(
		    r,
		    mt_need_u64(r, "stacks.cut_by_uretprobe") >= 3 &&
			mt_need_u64(r, "stacks.truncated") >=
			    mt_need_u64(r, "stacks.cut_by_uretprobe"),
		    "stacks.cut_by_uretprobe %llu, truncated %llu; want >= 3, and <= truncated",
		    (unsigned long long)mt_need_u64(r, "stacks.cut_by_uretprobe"),
		    (unsigned long long)mt_need_u64(r, "stacks.truncated"));
	stackfile__free(&sf);
}

static void test_stacks_through_dlopen(void **state)
{
	check_through_dlopen(state, false);
}

static void test_stacks_through_dlopen_no_session(void **state)
{
	check_through_dlopen(state, true);
}

/* Without --stacks: no stacks file, no stacks keys in the manifest. */
static void test_no_stacks(void **state)
{
	static const char *const opts[] = {"--alloc-hooks", "preload", NULL};
	struct mt_run *r;
	struct mt_run_opts o = {.track_opts = opts};
	char path[PATH_MAX];
	uint64_t v;

	MT_REQUIRE_ROOT();
	r = mt_new_run(state);
	mt_track_ok(r, &o, MT_TARGET_ARGV("stacks"), 0);
	snprintf(path, sizeof(path), "%s/%d%s", r->out, r->root_pid, STACKFILE_SUFFIX);
	MT_CHECK(r, access(path, F_OK) != 0, "%s exists without --stacks", path);
	MT_CHECK(r, mt_json_u64(r, "stacks.allocs", &v) == -ENOENT, "stacks keys without --stacks");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_stacks_preload, mt_teardown),
	    cmocka_unit_test_teardown(test_stacks_uprobe, mt_teardown),
	    cmocka_unit_test_teardown(test_no_stacks, mt_teardown),
	    cmocka_unit_test_teardown(test_stacks_other_user, mt_teardown),
	    cmocka_unit_test_teardown(test_stacks_through_dlopen, mt_teardown),
	    cmocka_unit_test_teardown(test_stacks_through_dlopen_no_session, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
