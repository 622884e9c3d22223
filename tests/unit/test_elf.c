// SPDX-License-Identifier: MIT
/*
 * ELF symbol offsets, dependency resolution and allocator classification, checked against
 * files of this machine and against a library built here with known symbols.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "bpf/events.h"
#include "bpf/probe_spec.h"
#include "bpf/proc.h"
#include "track/alloc_table.h"
#include "track/deps.h"
#include "track/early_links.h"
#include "track/elf_syms.h"
#include "../lib/mt_tmpdir.h"

static char tmpdir[64];
static char libpath[512];

/* A shared library whose exports look like a replacement allocator, and an alias pair. */
static int setup(void **state)
{
	char src[600], cmd[1400];
	FILE *f;

	(void)state;
	if (mt_tmpdir_make(tmpdir, sizeof(tmpdir), "elf"))
		return -1;
	snprintf(src, sizeof(src), "%s/fake.c", tmpdir);
	snprintf(libpath, sizeof(libpath), "%s/libfake.so", tmpdir);
	f = fopen(src, "w");
	if (!f)
		return -1;
	fputs("#include <stddef.h>\n"
	      "void *mi_malloc(size_t n) { (void)n; return NULL; }\n"
	      "void mi_free(void *p) { (void)p; }\n"
	      "void *malloc(size_t n) __attribute__((alias(\"mi_malloc\")));\n"
	      "void free(void *p) { mi_free(p); }\n",
	      f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -shared -fPIC -O1 -o %s %s", libpath, src);
	return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return mt_tmpdir_remove(tmpdir);
}

static void test_fake_allocator(void **state)
{
	struct alloc_site sites[64];
	struct elf_info info;
	uint64_t mi, mal;
	int n, found_free = 0;

	(void)state;
	assert_int_equal(elf_info__load(libpath, &info), 0);
	mi = elf_info__find(&info, "mi_malloc");
	mal = elf_info__find(&info, "malloc");
	assert_true(mi != 0);
	assert_int_equal(mi, mal); /* an alias shares the offset */
	assert_int_equal(elf_info__find(&info, "nope"), 0);
	assert_int_equal(alloc_table__classify(&info, false), ALLOC_MIMALLOC);
	n = alloc_table__sites(&info, ALLOC_MIMALLOC, false, sites, 64);
	/* mi_malloc (= malloc, attached once), mi_free, free */
	assert_int_equal(n, 3);
	for (int i = 0; i < n; i++) {
		if (sites[i].offset == mi)
			assert_int_equal(MT_SPEC_TYPE(sites[i].spec), MT_EV_MALLOC);
		if (sites[i].spec & MT_SPEC_FREE) {
			found_free++;
			/* a replacement's free may wrap its own: it needs depth tracking */
			assert_true(sites[i].ret);
		}
	}
	assert_int_equal(found_free, 2);
	elf_info__free(&info);
}

static void test_libc(void **state)
{
	struct alloc_site sites[64];
	char path[4096];
	struct elf_info info;
	int n;
	bool free_leaf = false, memalign_ok = false;

	(void)state;
	assert_int_equal(deps__ldcache_lookup("", "libc.so.6", path, sizeof(path)), 0);
	assert_int_equal(elf_info__load(path, &info), 0);
	assert_int_equal(alloc_table__classify(&info, false), ALLOC_LIBC);
	n = alloc_table__sites(&info, ALLOC_LIBC, false, sites, 64);
	assert_true(n >= 8);
	for (int i = 0; i < n; i++) {
		for (int j = i + 1; j < n; j++)
			assert_true(sites[i].offset != sites[j].offset);
		if (!strcmp(sites[i].name, "free"))
			free_leaf = !sites[i].ret;
		if (!strcmp(sites[i].name, "posix_memalign"))
			memalign_ok =
			    (sites[i].spec & MT_SPEC_MEMPTR) && MT_SPEC_SIZE(sites[i].spec) == 2;
	}
	assert_true(free_leaf);	  /* glibc's free calls nothing hooked: no return probe */
	assert_true(memalign_ok); /* size is the third argument */
	elf_info__free(&info);
}

static void test_offsets_match_vaddr(void **state)
{
	char path[4096];
	struct elf_info info;
	uint64_t off = 0;

	(void)state;
	assert_int_equal(deps__ldcache_lookup("", "libc.so.6", path, sizeof(path)), 0);
	assert_int_equal(elf_info__load(path, &info), 0);
	/* in a PIE/DSO whose text segment starts at offset 0 with vaddr 0, they coincide */
	assert_int_equal(elf__vaddr_to_offset(path, elf_info__find(&info, "malloc"), &off), 0);
	assert_int_equal(off, elf_info__find(&info, "malloc"));
	elf_info__free(&info);
}

/*
 * Lookups through .dynsym's GNU hash table (elf_syms.c) against binutils' view of the same file:
 * 400 exported functions, two versions of one name (vfn@V1, the default vfn@@V2: the first in
 * table order is the one found, as a listing finds it), an exported object (never a function)
 * and a hidden function that only .symtab holds. Built with each hash style: GNU (looked up)
 * and SysV only (listed); both must agree with nm on every name.
 */
/* nm's functions of lib (nm_args: "-D -p", "-p"): each name's first entry in table order, as a
 * file offset. Read once per library: 400 calls of nm took ~20 s here. */
#define NM_MAX 512
struct nm_table {
	char name[NM_MAX][32];
	uint64_t off[NM_MAX];
	size_t n;
};

static void nm_read(struct nm_table *t, const char *lib, const char *nm_args)
{
	char cmd[1024], line[512], sym[256], type;
	unsigned long long v;
	FILE *p;

	t->n = 0;
	snprintf(cmd, sizeof(cmd), "nm %s %s", nm_args, lib);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		bool seen = false;

		if (sscanf(line, "%llx %c %255s", &v, &type, sym) != 3 ||
		    (type != 'T' && type != 't' && type != 'i'))
			continue;
		/* a versioned name: "vfn@V1", "vfn@@V2"; -p: in table order, the first kept */
		sym[strcspn(sym, "@")] = 0;
		for (size_t i = 0; i < t->n && !seen; i++)
			seen = !strcmp(t->name[i], sym);
		if (seen || strlen(sym) >= sizeof(t->name[0]))
			continue;
		assert_true(t->n < NM_MAX);
		strcpy(t->name[t->n], sym);
		assert_int_equal(elf__vaddr_to_offset(lib, v, &t->off[t->n]), 0);
		t->n++;
	}
	pclose(p);
}

static uint64_t nm_offset(const struct nm_table *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->name[i], name))
			return t->off[i];
	return 0;
}

static void check_hash_style(const char *style)
{
	char src[600], map[600], lib[600], cmd[2400], name[32];
	struct nm_table *dyn = calloc(1, sizeof(*dyn)), *all = calloc(1, sizeof(*all));
	struct elf_info info;
	FILE *f;

	assert_non_null(dyn);
	assert_non_null(all);

	snprintf(src, sizeof(src), "%s/many.c", tmpdir);
	snprintf(map, sizeof(map), "%s/many.map", tmpdir);
	snprintf(lib, sizeof(lib), "%s/libmany-%s.so", tmpdir, style);
	f = fopen(src, "w");
	assert_non_null(f);
	for (int i = 0; i < 400; i++)
		fprintf(f, "int f%d(int x) { return x * %d + 1; }\n", i, i + 3);
	fputs("int vfn_1(void) { return 1; }\n"
	      "int vfn_2(void) { return 2; }\n"
	      "__asm__(\".symver vfn_1, vfn@V1\");\n"
	      "__asm__(\".symver vfn_2, vfn@@V2\");\n"
	      "int data_not_func = 7;\n"
	      "__attribute__((visibility(\"hidden\"))) int hid(int x) { return x + 9; }\n"
	      "int calls_hid(int x) { return hid(x); }\n",
	      f);
	fclose(f);
	f = fopen(map, "w");
	assert_non_null(f);
	fputs("V1 { global: vfn; };\nV2 { global: *; } V1;\n", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "cc -shared -fPIC -O1 -Wl,--hash-style=%s -Wl,--version-script=%s -o %s %s", style,
		 map, lib, src);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(elf_info__load(lib, &info), 0);
	/* the GNU style is looked up, the SysV one listed */
	assert_true(!strcmp(style, "gnu") ? info.dynhash != NULL : info.dynhash == NULL);
	nm_read(dyn, lib, "-D -p");
	nm_read(all, lib, "-p");
	for (int i = 0; i < 400; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		assert_true(elf_info__find(&info, name) != 0);
		assert_int_equal(elf_info__find(&info, name), nm_offset(dyn, name));
	}
	assert_true(elf_info__find(&info, "vfn") != 0);
	assert_int_equal(elf_info__find(&info, "vfn"), nm_offset(dyn, "vfn"));
	assert_int_equal(elf_info__find(&info, "data_not_func"), 0);
	assert_int_equal(elf_info__find(&info, "f400"), 0);
	assert_int_equal(elf_info__find(&info, "f"), 0);
	assert_int_equal(nm_offset(dyn, "hid"), 0);	/* not exported... */
	assert_true(elf_info__find(&info, "hid") != 0); /* ...but in .symtab */
	assert_int_equal(elf_info__find(&info, "hid"), nm_offset(all, "hid"));
	elf_info__free(&info);
	free(dyn);
	free(all);
}

static void test_hash_lookup_matches_nm(void **state)
{
	(void)state;
	check_hash_style("gnu");
	check_hash_style("sysv");
}

static void test_deps_of_bash(void **state)
{
	struct dep_list deps;
	bool libc = false, interp = false;

	(void)state;
	assert_int_equal(deps__resolve("", "/bin/bash", NULL, NULL, &deps), 0);
	assert_string_equal(deps.paths[0], "/bin/bash");
	for (size_t i = 0; i < deps.nr; i++) {
		libc |= strstr(deps.paths[i], "/libc.so.6") != NULL;
		interp |= strstr(deps.paths[i], "ld-linux") != NULL;
	}
	assert_true(libc);
	assert_true(interp);
	deps__free(&deps);
}

static void test_deps_preload_and_missing(void **state)
{
	struct dep_list deps;
	bool fake = false;

	(void)state;
	assert_int_equal(deps__resolve("", "/bin/true", NULL, libpath, &deps), 0);
	for (size_t i = 0; i < deps.nr; i++)
		fake |= !strcmp(deps.paths[i], libpath);
	assert_true(fake);
	deps__free(&deps);
	assert_int_equal(deps__ldcache_lookup("", "libdoesnotexist.so.9", libpath + 0, 0), -ENOENT);
}

/* Does deps have a path ending in tail? */
static bool deps_has(const struct dep_list *deps, const char *tail)
{
	size_t tl = strlen(tail);

	for (size_t i = 0; i < deps->nr; i++) {
		size_t n = strlen(deps->paths[i]);

		if (n >= tl && !strcmp(deps->paths[i] + n - tl, tail))
			return true;
	}
	return false;
}

/*
 * The loader's search order (glibc): an object's DT_RPATH before LD_LIBRARY_PATH, its
 * DT_RUNPATH after; an object without DT_RUNPATH also searches the executable's DT_RPATH. Built
 * here: libdep.so in a/ and b/, libleaf.so in c/, libmid.so (needs libleaf.so, no path of its
 * own) in d/; prog_run (RUNPATH a/), prog_rp (RPATH a/), prog_inh (RPATH d/:c/, needs libmid).
 * With LD_LIBRARY_PATH b/: prog_run maps b/libdep.so, prog_rp a/libdep.so, and prog_inh's
 * libmid finds libleaf in c/ through the executable's RPATH.
 */
static void test_deps_search_order(void **state)
{
	static const char *const progs[] = {
	    "run:-Wl,--enable-new-dtags,-rpath,%1$s/a -L%1$s/a -ldep",
	    "rp:-Wl,--disable-new-dtags,-rpath,%1$s/a -L%1$s/a -ldep",
	    "inh:-Wl,--disable-new-dtags,-rpath,%1$s/d:%1$s/c -L%1$s/d "
	    "-lmid -Wl,-rpath-link,%1$s/c"};
	char cmd[4096], ldp[256], path[512], flags[1024];
	struct dep_list deps;

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "cd %1$s && mkdir -p a b c d && echo 'int dep(void){return 1;}' > dep.c && "
		 "echo 'int leaf(void){return 3;}' > leaf.c && "
		 "echo 'int leaf(void); int mid(void){return leaf();}' > mid.c && "
		 "echo 'int dep(void); int main(void){return dep();}' > pdep.c && "
		 "echo 'int mid(void); int main(void){return mid();}' > pmid.c && "
		 "cc -shared -fPIC -o a/libdep.so dep.c && cp a/libdep.so b/libdep.so && "
		 "cc -shared -fPIC -o c/libleaf.so leaf.c && "
		 "cc -shared -fPIC -o d/libmid.so mid.c -Lc -lleaf",
		 tmpdir);
	assert_int_equal(system(cmd), 0);
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		const char *colon = strchr(progs[i], ':');

		snprintf(flags, sizeof(flags), colon + 1, tmpdir);
		snprintf(cmd, sizeof(cmd), "cd %s && cc -o prog_%.*s %s %s", tmpdir,
			 (int)(colon - progs[i]), progs[i], i < 2 ? "pdep.c" : "pmid.c", flags);
		assert_int_equal(system(cmd), 0);
	}
	snprintf(ldp, sizeof(ldp), "%s/b", tmpdir);
	snprintf(path, sizeof(path), "%s/prog_run", tmpdir);
	assert_int_equal(deps__resolve("", path, ldp, NULL, &deps), 0);
	assert_true(deps_has(&deps, "/b/libdep.so"));
	assert_false(deps_has(&deps, "/a/libdep.so"));
	deps__free(&deps);
	snprintf(path, sizeof(path), "%s/prog_rp", tmpdir);
	assert_int_equal(deps__resolve("", path, ldp, NULL, &deps), 0);
	assert_true(deps_has(&deps, "/a/libdep.so"));
	assert_false(deps_has(&deps, "/b/libdep.so"));
	deps__free(&deps);
	snprintf(path, sizeof(path), "%s/prog_inh", tmpdir);
	assert_int_equal(deps__resolve("", path, NULL, NULL, &deps), 0);
	assert_true(deps_has(&deps, "/d/libmid.so"));
	assert_true(deps_has(&deps, "/c/libleaf.so"));
	deps__free(&deps);
}

/* The mapping of ld.so.cache kept between lookups follows the file: replaced (a new inode, as
 * ldconfig does), it is read afresh; another root's cache is its own. */
static void test_ldcache_follows_file(void **state)
{
	char root[256], other[256], cmd[2048], out[PATH_MAX];

	(void)state;
	if (access("/etc/ld.so.cache", R_OK))
		skip(); /* no ld.so.cache on this machine */
	snprintf(root, sizeof(root), "%s/root", tmpdir);
	snprintf(other, sizeof(other), "%s/other", tmpdir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/etc %s/etc && cp /etc/ld.so.cache %s/etc/", root,
		 other, root);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(deps__ldcache_lookup(root, "libc.so.6", out, sizeof(out)), 0);
	assert_non_null(strstr(out, "libc.so.6"));
	assert_int_equal(deps__ldcache_lookup(other, "libc.so.6", out, sizeof(out)), -ENOENT);
	snprintf(cmd, sizeof(cmd),
		 "head -c 4096 /dev/zero > %s/etc/new && mv %s/etc/new %s/etc/ld.so.cache", root,
		 root, root);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(deps__ldcache_lookup(root, "libc.so.6", out, sizeof(out)), -ENOENT);
	snprintf(cmd, sizeof(cmd),
		 "cp /etc/ld.so.cache %s/etc/new && mv %s/etc/new %s/etc/ld.so.cache", root, root,
		 root);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(deps__ldcache_lookup(root, "libc.so.6", out, sizeof(out)), 0);
}

static void test_not_elf(void **state)
{
	struct elf_info info;

	(void)state;
	assert_int_equal(elf_info__load("/etc/hostname", &info), -ENOEXEC);
	assert_int_equal(elf_info__load("/nonexistent", &info), -ENOENT);
}

/*
 * The interposer covers what uprobes would probe in a shared jemalloc, mimalloc or tcmalloc:
 * every site alloc_table gives for Debian's library (its own entry points, and the standard and
 * C++ names it exports) is a symbol libmemtrack-preload.so defines, so that preload mode
 * (src/preload/preload_families.c), which leaves those libraries unprobed, misses none.
 */
static void test_preload_covers_families(void **state)
{
	static const struct {
		const char *lib;
		enum alloc_kind kind;
	} libs[] = {
		{"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", ALLOC_JEMALLOC},
		{"/usr/lib/x86_64-linux-gnu/libmimalloc.so.2", ALLOC_MIMALLOC},
		{"/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4", ALLOC_TCMALLOC},
	};
	char self[PATH_MAX], pre[PATH_MAX + 32];
	struct elf_info ours, real;
	struct alloc_site sites[96];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int checked = 0;

	(void)state;
	assert_true(n > 0);
	self[n] = 0;
	*strrchr(self, '/') = 0; /* build/tests */
	*strrchr(self, '/') = 0; /* build */
	snprintf(pre, sizeof(pre), "%s/libmemtrack-preload.so", self);
	assert_int_equal(elf_info__load(pre, &ours), 0);
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		int nr;

		if (access(libs[i].lib, R_OK) || elf_info__load(libs[i].lib, &real))
			continue; /* not installed here (scripts/deps.sh installs them) */
		assert_int_equal(alloc_table__classify(&real, false), libs[i].kind);
		nr = alloc_table__sites(&real, libs[i].kind, false, sites, 96);
		assert_true(nr > 10);
		for (int k = 0; k < nr; k++)
			if (!elf_info__find(&ours, sites[k].name))
				fail_msg("%s: the uprobe path probes %s, the interposer does not define it",
					 libs[i].lib, sites[k].name);
		elf_info__free(&real);
		checked++;
	}
	elf_info__free(&ours);
	if (!checked)
		skip();
}

/* Each control point of the interposer (early_ctl_fns) starts with `jmp .+2` (eb 00), which a
 * uprobe emulates: no out-of-line page in every served process (src/preload/preload.h). */
static void test_ctl_points_emulated(void **state)
{
	char self[PATH_MAX], pre[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct elf_info ours;
	int fd;

	(void)state;
	assert_true(n > 0);
	self[n] = 0;
	*strrchr(self, '/') = 0; /* build/tests */
	*strrchr(self, '/') = 0; /* build */
	snprintf(pre, sizeof(pre), "%s/libmemtrack-preload.so", self);
	assert_int_equal(elf_info__load(pre, &ours), 0);
	fd = open(pre, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (int i = 0; i < MT_PRELOAD_CTL_NR; i++) {
		uint64_t off = elf_info__find(&ours, early_ctl_fns[i]);
		unsigned char b[2] = {0};

		assert_true(off != 0);
		assert_int_equal(pread(fd, b, 2, (off_t)off), 2);
		if (b[0] != 0xeb || b[1] != 0)
			fail_msg("%s starts with %02x %02x, want eb 00 (jmp .+2)", early_ctl_fns[i],
				 b[0], b[1]);
	}
	close(fd);
	elf_info__free(&ours);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_preload_covers_families),
	    cmocka_unit_test(test_ctl_points_emulated),
	    cmocka_unit_test(test_fake_allocator),
	    cmocka_unit_test(test_libc),
	    cmocka_unit_test(test_offsets_match_vaddr),
	    cmocka_unit_test(test_hash_lookup_matches_nm),
	    cmocka_unit_test(test_deps_of_bash),
	    cmocka_unit_test(test_deps_search_order),
	    cmocka_unit_test(test_deps_preload_and_missing),
	    cmocka_unit_test(test_not_elf),
	    cmocka_unit_test(test_ldcache_follows_file),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
