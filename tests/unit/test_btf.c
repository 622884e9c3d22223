// SPDX-License-Identifier: MIT
/*
 * The minimal kernel BTF (src/track/btf_min.c) on a synthetic kernel BTF of known layout and on
 * this machine's vmlinux BTF with our own BPF object; the cache's key and folder choice.
 * (That libbpf relocates identically against it is the root test test_btf_core.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "memtrack.skel.h"
#include "track/btf_cache.h"
#include "track/btf_min.h"
#include "track/btf_scan.h"
#include "../lib/mt_tmpdir.h"

static const struct btf_type *find(const struct btf *b, const char *name, int kind)
{
	int id = btf__find_by_name_kind(b, name, kind);

	return id > 0 ? btf__type_by_id(b, id) : NULL;
}

static const struct btf_member *member(const struct btf *b, const struct btf_type *t,
				       const char *name)
{
	for (int i = 0; i < btf_vlen(t); i++)
		if (!strcmp(btf__name_by_offset(b, btf_members(t)[i].name_off), name))
			return &btf_members(t)[i];
	return NULL;
}

/*
 * kernel: int, long, struct percpu_counter {long count; struct unrelated *counters;},
 *         struct mm_struct {int a; struct percpu_counter rss_stat[4]; struct task_struct *owner;},
 *         struct task_struct {int pid; struct mm_struct *mm; struct {int x;} embedded;},
 *         struct unrelated {int z;}, typedef int pid_t, enum colour {RED = 1}
 * local:  struct task_struct, struct mm_struct___old, struct not_in_kernel, enum colour, an
 *         anonymous struct
 */
static void test_min_synthetic(void **state)
{
	struct btf *k = btf__new_empty(), *l = btf__new_empty(), *out = NULL, *back;
	int i_int, i_long, i_pc, i_ptr_unrelated, i_arr, i_mm, i_task, i_ptr_mm, i_ptr_task, i_anon;

	/* IDs: 1 int, 2 long, 3 struct unrelated *, 4 percpu_counter, 5 array, 6 task_struct *, 7
	 * mm_struct, 8 mm_struct *, 9 anonymous, 10 unrelated, 11 pid_t, 12 colour, 13 fwd, 14
	 * task_struct */
	const struct btf_type *t, *mt;
	const struct btf_member *mb;
	const void *raw;
	__u32 sz;

	(void)state;
	assert_non_null(k);
	assert_non_null(l);
	i_int = btf__add_int(k, "int", 4, BTF_INT_SIGNED);
	i_long = btf__add_int(k, "long", 8, BTF_INT_SIGNED);
	i_ptr_unrelated = btf__add_ptr(k, 10); /* struct unrelated *, defined below */
	i_pc = btf__add_struct(k, "percpu_counter", 16);
	btf__add_field(k, "count", i_long, 0, 0);
	btf__add_field(k, "counters", i_ptr_unrelated, 64, 0);
	i_arr = btf__add_array(k, i_int, i_pc, 4);
	i_ptr_task = btf__add_ptr(k, i_pc + 10); /* task_struct's ID, known below */
	i_mm = btf__add_struct(k, "mm_struct", 80);
	btf__add_field(k, "a", i_int, 0, 0);
	btf__add_field(k, "rss_stat", i_arr, 64, 0);
	btf__add_field(k, "owner", i_ptr_task, 576, 0);
	i_ptr_mm = btf__add_ptr(k, i_mm);
	i_anon = btf__add_struct(k, NULL, 4);
	btf__add_field(k, "x", i_int, 0, 0);
	assert_int_equal(btf__add_struct(k, "unrelated", 4), i_anon + 1);
	btf__add_field(k, "z", i_int, 0, 0);
	assert_int_equal(btf__add_typedef(k, "pid_t", i_int), i_anon + 2);
	assert_int_equal(btf__add_enum(k, "colour", 4), i_anon + 3);
	btf__add_enum_value(k, "RED", 1);
	assert_int_equal(btf__add_fwd(k, "placeholder", BTF_FWD_STRUCT), i_anon + 4);
	i_task = btf__add_struct(k, "task_struct", 24);
	assert_int_equal(i_task, i_pc + 10);
	btf__add_field(k, "pid", i_int, 0, 0);
	btf__add_field(k, "mm", i_ptr_mm, 64, 0);
	btf__add_field(k, "embedded", i_anon, 128, 0);

	i_int = btf__add_int(l, "int", 4, BTF_INT_SIGNED);
	btf__add_struct(l, "task_struct", 4);
	btf__add_field(l, "pid", i_int, 0, 0);
	btf__add_struct(l, "mm_struct___old", 4);
	btf__add_struct(l, "not_in_kernel", 4);
	btf__add_enum(l, "colour", 4);
	btf__add_enum_value(l, "RED", 1);
	btf__add_struct(l, NULL, 4);

	assert_int_equal(btf_min__build(k, l, &out), 0);
	assert_non_null(out);

	/* Roots by essential name and kind; nothing the object does not name, except by value. */
	t = find(out, "task_struct", BTF_KIND_STRUCT);
	assert_non_null(t);
	assert_int_equal(t->size, 24);
	assert_int_equal(btf_vlen(t), 3);
	mb = member(out, t, "embedded");
	assert_non_null(mb);
	assert_int_equal(mb->offset, 128);
	assert_true(btf_is_struct(btf__type_by_id(out, mb->type)));
	mb = member(out, t, "mm");
	assert_int_equal(mb->offset, 64);
	mt = btf__type_by_id(out, mb->type);
	assert_true(btf_is_ptr(mt));
	/* mm_struct is kept (the object names mm_struct___old), so the pointer keeps its target */
	assert_int_equal(mt->type, btf__find_by_name_kind(out, "mm_struct", BTF_KIND_STRUCT));
	t = find(out, "mm_struct", BTF_KIND_STRUCT);
	assert_non_null(t);
	assert_int_equal(t->size, 80);
	mb = member(out, t, "rss_stat");
	assert_int_equal(mb->offset, 64);
	mt = btf__type_by_id(out, mb->type);
	assert_true(btf_is_array(mt));
	assert_int_equal(btf_array(mt)->nelems, 4);
	/* embedded by value: copied although the object never names it */
	t = find(out, "percpu_counter", BTF_KIND_STRUCT);
	assert_non_null(t);
	assert_int_equal(btf_array(mt)->type,
			 btf__find_by_name_kind(out, "percpu_counter", BTF_KIND_STRUCT));
	/* a pointer to a type nothing keeps points to void */
	mb = member(out, t, "counters");
	assert_int_equal(mb->offset, 64);
	assert_int_equal(btf__type_by_id(out, mb->type)->type, 0);
	assert_non_null(find(out, "colour", BTF_KIND_ENUM));
	assert_null(find(out, "unrelated", BTF_KIND_STRUCT));
	assert_null(find(out, "pid_t", BTF_KIND_TYPEDEF));
	assert_null(find(out, "not_in_kernel", BTF_KIND_STRUCT));
	assert_null(find(out, "placeholder", BTF_KIND_FWD));

	/* What is written to the cache parses back. */
	raw = btf__raw_data(out, &sz);
	assert_non_null(raw);
	back = btf__new(raw, sz);
	assert_non_null(back);
	assert_int_equal(btf__type_cnt(back), btf__type_cnt(out));
	btf__free(back);
	btf__free(out);
	btf__free(k);
	btf__free(l);
}

/* This machine's kernel BTF and our own object: every kernel struct the object names is kept
 * whole, and the result is a small fraction of vmlinux. */
static void test_min_vmlinux(void **state)
{
	struct btf *k, *out = NULL;
	struct bpf_object *o;
	const struct btf_type *kt, *ot;
	const void *obj;
	size_t obj_sz;
	__u32 sz, ksz;

	(void)state;
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		skip(); /* no kernel BTF here (CONFIG_DEBUG_INFO_BTF=n): nothing to minimise */
	k = btf__load_vmlinux_btf();
	assert_non_null(k);
	obj = memtrack_bpf__elf_bytes(&obj_sz);
	o = bpf_object__open_mem(obj, obj_sz, NULL);
	assert_non_null(o);
	assert_int_equal(btf_min__build(k, bpf_object__btf(o), &out), 0);
	for (const char **n = (const char *[]){"task_struct", "mm_struct", "linux_binprm", "inode",
					       "bpf_array", NULL};
	     *n; n++) {
		kt = find(k, *n, BTF_KIND_STRUCT);
		ot = find(out, *n, BTF_KIND_STRUCT);
		assert_non_null(kt);
		assert_non_null(ot);
		assert_int_equal(ot->size, kt->size);
		assert_int_equal(btf_vlen(ot), btf_vlen(kt));
		for (int i = 0; i < btf_vlen(kt); i++) {
			assert_int_equal(btf_members(ot)[i].offset, btf_members(kt)[i].offset);
			assert_string_equal(btf__name_by_offset(out, btf_members(ot)[i].name_off),
					    btf__name_by_offset(k, btf_members(kt)[i].name_off));
		}
	}
	btf__raw_data(out, &sz);
	btf__raw_data(k, &ksz);
	assert_true(sz * 20 < ksz);
	btf__free(out);
	btf__free(k);
	bpf_object__close(o);
}

static size_t note(unsigned char *p, uint32_t type, const char *name, const void *desc,
		   uint32_t descsz)
{
	uint32_t namesz = strlen(name) + 1, h[3] = {namesz, descsz, type};
	size_t n = 12;

	memcpy(p, h, 12);
	memcpy(p + n, name, namesz);
	n += (namesz + 3) & ~3u;
	memcpy(p + n, desc, descsz);
	return n + ((descsz + 3) & ~3u);
}

static void test_build_id(void **state)
{
	unsigned char blob[256] = {0}, id[20];
	char hex[64];
	size_t n;

	(void)state;
	for (int i = 0; i < 20; i++)
		id[i] = (unsigned char)(0xa0 + i);
	n = note(blob, 6, "Linux", "\x01\x02\x03", 3); /* another note first */
	assert_int_equal(btf_cache__build_id(blob, n, hex, sizeof(hex)), -ENOENT);
	n += note(blob + n, 3, "GNU", id, sizeof(id));
	assert_int_equal(btf_cache__build_id(blob, n, hex, sizeof(hex)), 0);
	assert_string_equal(hex, "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3");
	/* truncated: the id runs past the end */
	assert_int_equal(btf_cache__build_id(blob, n - 4, hex, sizeof(hex)), -ENOENT);
	/* too small an output buffer is not an id */
	assert_int_equal(btf_cache__build_id(blob, n, hex, 40), -ENOENT);
}

static void test_cache_dir(void **state)
{
	char d[256];

	(void)state;
	assert_int_equal(btf_cache__dir(d, sizeof(d), "/x/c", "/xdg", "/home/u", 0), 0);
	assert_string_equal(d, "/x/c");
	assert_int_equal(btf_cache__dir(d, sizeof(d), NULL, "/xdg", "/home/u", 0), 0);
	assert_string_equal(d, "/var/cache/memtrack");
	assert_int_equal(btf_cache__dir(d, sizeof(d), "", "/xdg", "/home/u", 1000), 0);
	assert_string_equal(d, "/xdg/memtrack");
	assert_int_equal(btf_cache__dir(d, sizeof(d), NULL, "relative", "/home/u", 1000), 0);
	assert_string_equal(d, "/home/u/.cache/memtrack");
	assert_int_equal(btf_cache__dir(d, sizeof(d), NULL, NULL, NULL, 1000), -ENOENT);
	assert_int_equal(btf_cache__dir(d, 8, "/a/long/path", NULL, NULL, 0), -ENAMETOOLONG);
}

/* How many entries of dir match the shell glob pat. */
static int count_files(const char *dir, const char *pat)
{
	char cmd[256];
	int n = -1;
	FILE *ls;

	snprintf(cmd, sizeof(cmd), "ls %s/%s 2>/dev/null | wc -l", dir, pat);
	ls = popen(cmd, "r");
	assert_non_null(ls);
	assert_int_equal(fscanf(ls, "%d", &n), 1);
	pclose(ls);
	return n;
}

/* Function IDs: the cached answer is the scan's; a file of the wrong size is not used. */
static void test_func_ids_cache(void **state)
{
	const char *names[] = {"do_exit", "no_such_function_here", "kernel_clone"};
	char dir[] = "/tmp/memtrack-test-ids-XXXXXX", cmd[128];
	int scan[3], first[3], again[3];

	(void)state;
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		skip(); /* no kernel BTF here: nothing to scan */
	assert_non_null(mkdtemp(dir));
	setenv("MEMTRACK_CACHE_DIR", dir, 1);
	unsetenv("MEMTRACK_BTF_CACHE");
	assert_int_equal(btf_scan__funcs("/sys/kernel/btf/vmlinux", names, 3, scan), 0);
	assert_true(scan[0] > 0 && scan[2] > 0);
	assert_int_equal(scan[1], 0);
	assert_int_equal(btf_cache__func_ids(names, 3, first), 0);
	assert_memory_equal(first, scan, sizeof(scan));
	assert_int_equal(count_files(dir, "*.ids"), 1);
	/* the file now answers: make it wrong-sized, and the scan answers again (rewriting it) */
	snprintf(cmd, sizeof(cmd), "for f in %s/*.ids; do printf 1234 > $f; done", dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(btf_cache__func_ids(names, 3, again), 0);
	assert_memory_equal(again, scan, sizeof(scan));
	snprintf(cmd, sizeof(cmd), "test $(stat -c %%s %s/*.ids) = 12", dir);
	assert_int_equal(system(cmd), 0);
	/* off: nothing written */
	snprintf(cmd, sizeof(cmd), "rm -f %s/*.ids", dir);
	assert_int_equal(system(cmd), 0);
	setenv("MEMTRACK_BTF_CACHE", "0", 1);
	assert_int_equal(btf_cache__func_ids(names, 3, again), 0);
	assert_memory_equal(again, scan, sizeof(scan));
	assert_int_equal(count_files(dir, "*"), 0);
	unsetenv("MEMTRACK_BTF_CACHE");
	unsetenv("MEMTRACK_CACHE_DIR");
	assert_int_equal(mt_tmpdir_remove(dir), 0);
}

/* A loader for btf_cache__load: fails with errs[call] (0 = works), records the paths tried. */
struct fake_load {
	struct btf_cache *c;
	int errs[2];
	int calls;
	char tried[2][PATH_MAX];
};

static int fake_load(void *ctx)
{
	struct fake_load *f = ctx;

	assert_true(f->calls < 2); /* never more than the cached try and one without */
	snprintf(f->tried[f->calls], PATH_MAX, "%s", f->c->path);
	return f->errs[f->calls++];
}

/* Which load failures remove a cached BTF: only one that loading without it cures. A permission
 * error (issue 10: an unprivileged run built the cache, then deleted it on EPERM) keeps it. */
static void test_load_blames_only_the_cache(void **state)
{
	static const struct {
		int first, second, calls, rc;
		bool kept;
	} cases[] = {
		{0, 0, 1, 0, true},		      /* works with the cache */
		{-EPERM, 0, 1, -EPERM, true},	      /* no privileges: not the file's fault */
		{-EINVAL, 0, 2, 0, false},	      /* only the cache was wrong: removed */
		{-EINVAL, -EINVAL, 2, -EINVAL, true}, /* fails either way: kept */
		{-EACCES, -EPERM, 2, -EPERM, true},   /* the verifier, then privileges: kept */
	};
	char dir[] = "/tmp/memtrack-test-load-XXXXXX", path[PATH_MAX];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vmlinux-x.btf", dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct btf_cache c = {.memfd = -1, .source = "cache"};
		struct fake_load f = {.c = &c, .errs = {cases[i].first, cases[i].second}};
		FILE *fp = fopen(path, "w");

		assert_non_null(fp);
		fputs("btf", fp);
		assert_int_equal(fclose(fp), 0);
		snprintf(c.path, sizeof(c.path), "%s", path);
		assert_int_equal(btf_cache__load(&c, fake_load, &f), cases[i].rc);
		assert_int_equal(f.calls, cases[i].calls);
		assert_string_equal(f.tried[0], path);
		if (f.calls == 2) {
			assert_string_equal(f.tried[1], ""); /* the second try is without it */
			assert_string_equal(c.source, "vmlinux");
		}
		assert_int_equal(access(path, F_OK) == 0, cases[i].kept);
		unlink(path);
	}
	/* no cached file: nothing to retry */
	{
		struct btf_cache c = {.memfd = -1, .source = "vmlinux"};
		struct fake_load f = {.c = &c, .errs = {-EINVAL, 0}};

		assert_int_equal(btf_cache__load(&c, fake_load, &f), -EINVAL);
		assert_int_equal(f.calls, 1);
	}
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_min_synthetic),  cmocka_unit_test(test_min_vmlinux),
	    cmocka_unit_test(test_build_id),	   cmocka_unit_test(test_cache_dir),
	    cmocka_unit_test(test_func_ids_cache), cmocka_unit_test(test_load_blames_only_the_cache),
	};

	libbpf_set_print(NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
