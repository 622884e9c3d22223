// SPDX-License-Identifier: MIT
/*
 * Probe placement: on synthetic code (each rule of probe_place.c, one case each; allocators'
 * real first instructions) and on this machine's libc, where free must move past its
 * single-stepped `test %rdi,%rdi`.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "bpf/probe_spec.h"
#include "track/alloc_table.h"
#include "track/deps.h"
#include "track/elf_syms.h"
#include "track/probe_place.h"
#include "../lib/mt_tmpdir.h"

#define F 64 /* the function's offset in the synthetic segments */

/* glibc 2.36's free: test %rdi,%rdi; je +0xbf; push %rbp; ... */
static const uint8_t free_start[] = {0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0x00, 0x00, 0x00, 0x55};

static void seg_with(uint8_t *seg, size_t len, const uint8_t *code, size_t n)
{
	memset(seg, 0xcc, len); /* int3: decodes as nothing that branches */
	memcpy(seg + F, code, n);
}

static void test_moves_past_test(void **state)
{
	uint8_t seg[256];

	(void)state;
	seg_with(seg, sizeof(seg), free_start, sizeof(free_start));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 16, NULL), F + 3);
	/* the argument read is another register: test writes none, still moves */
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 1, 16, NULL), F + 3);
}

static void test_emulated_start_stays(void **state)
{
	const uint8_t push_r12[] = {0x41, 0x54, 0x55, 0x53}; /* glibc's malloc */
	uint8_t seg[256];

	(void)state;
	seg_with(seg, sizeof(seg), push_r12, sizeof(push_r12));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 16, NULL), F);
}

static void test_endbr_then_push(void **state)
{
	const uint8_t code[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5};
	uint8_t seg[256];

	(void)state;
	seg_with(seg, sizeof(seg), code, sizeof(code));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 16, NULL), F + 4);
}

static void test_unknown_stays(void **state)
{
	/* mov %rsi,%rdi: writes the argument; then a test: neither is in the skip table's terms */
	const uint8_t mov_first[] = {0x48, 0x89, 0xf7, 0x48, 0x85, 0xff, 0x74, 0x10};
	/* test, then an instruction the kernel single-steps anyway (mov -0x8(%rdi),%rax) */
	const uint8_t not_emulated[] = {0x48, 0x85, 0xff, 0x48, 0x8b, 0x47, 0xf8};
	uint8_t seg[256];

	(void)state;
	seg_with(seg, sizeof(seg), mov_first, sizeof(mov_first));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 16, NULL), F);
	seg_with(seg, sizeof(seg), not_emulated, sizeof(not_emulated));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 16, NULL), F);
	/* a function cut short by the segment's end */
	assert_int_equal(probe_place__in_segment(seg, F + 3, F, 1u << 0, 16, NULL), F);
}

/* jemalloc's malloc (Debian's libjemalloc.so.2, and linked into an executable):
 * cmp $0x1000,%rdi; ja rel8. The compare only sets flags: both probes go on the ja. */
static void test_moves_past_compare(void **state)
{
	const uint8_t code[] = {0x48, 0x81, 0xff, 0x00, 0x10, 0x00, 0x00, 0x77, 0x7f, 0x55};
	uint8_t seg[256];

	(void)state;
	seg_with(seg, sizeof(seg), code, sizeof(code));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 64, NULL), F + 7);
}

/* rustc's free (its jemalloc, in the executable): eight instructions that compute into rax,
 * rdx and rcx and read thread-local memory, then jne. The argument (rdi) untouched, no write
 * to memory or rsp: the probes go on the jne, 39 bytes on; not within a bound of 31 (a shared
 * library's free, whose cookie holds the distance in 5 bits). Two of the immediates read as
 * `loop` rel8 into the skipped bytes (83 e2 0f, and $0xf,%edx): decoded, they are none. */
static const uint8_t rustc_free[] = {
    0x48, 0xc7, 0xc0, 0xb8, 0xf5, 0xff, 0xff,		  /* mov $-0xa48,%rax */
    0x48, 0x89, 0xfa,					  /* mov %rdi,%rdx */
    0x48, 0xc1, 0xea, 0x1e,				  /* shr $0x1e,%rdx */
    0x83, 0xe2, 0x0f,					  /* and $0xf,%edx */
    0x48, 0x89, 0xf9,					  /* mov %rdi,%rcx */
    0x48, 0x81, 0xe1, 0x00, 0x00, 0x00, 0xc0,		  /* and $-0x40000000,%rcx */
    0xc1, 0xe2, 0x04,					  /* shl $0x4,%edx */
    0x64, 0x48, 0x39, 0x8c, 0x10, 0xb0, 0x01, 0x00, 0x00, /* cmp %rcx,%fs:0x1b0(...) */
    0x0f, 0x85, 0x93, 0x00, 0x00, 0x00,			  /* jne +0x93 */
};

static void test_moves_past_register_work(void **state)
{
	uint8_t seg[512];

	(void)state;
	seg_with(seg, sizeof(seg), rustc_free, sizeof(rustc_free));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 64, NULL), F + 39);
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 31, NULL), F);
	/* a site that reads rdx (e.g. a third argument) must not skip `mov %rdi,%rdx`, which
	 * overwrites it (the copy of rdi in it is lost at the shr after) */
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0 | 1u << 2, 64, NULL),
			 F);
}

/* mimalloc's malloc copies the size from %rdi to %rsi, then loads its heap into %rdi, before
 * its first branch: the probes move, and the size is read from %rsi there (where). A site that
 * reads the caller's %rsi stays: the copy overwrote it. */
static void test_moves_with_copied_argument(void **state)
{
	/* mov 0xb449(%rip),%rax; mov %rdi,%rsi; mov %fs:(%rax),%rdi; jne */
	const uint8_t mimalloc[] = {0x48, 0x8b, 0x05, 0x49, 0xb4, 0x00, 0x00, 0x48,
				    0x89, 0xfe, 0x64, 0x48, 0x8b, 0x38, 0x75, 0x10};
	/* the same with a 32-bit copy (mov %edi,%esi): not the whole argument */
	const uint8_t narrow[] = {0x48, 0x8b, 0x05, 0x49, 0xb4, 0x00, 0x00, 0x89,
				  0xfe, 0x64, 0x48, 0x8b, 0x38, 0x75, 0x10};
	uint8_t seg[256], where[4];
	int32_t rel;

	(void)state;
	seg_with(seg, sizeof(seg), mimalloc, sizeof(mimalloc));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 64, where), F + 14);
	assert_int_equal(where[0], 1);
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 1, 64, where), F);
	assert_int_equal(where[1], 1);
	seg_with(seg, sizeof(seg), narrow, sizeof(narrow));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 64, where), F);
	assert_int_equal(where[0], 0);
	/* kept at the start by a branch into the copy: the size is read where it came (until 7
	 * December 2026's fix a site that stayed kept the moved register: mimalloc's
	 * mi_realloc_aligned read its old block from %rsi, its size from %rdx) */
	seg_with(seg, sizeof(seg), mimalloc, sizeof(mimalloc));
	seg[200] = 0xe9;
	rel = (F + 7) - (200 + 5);
	memcpy(seg + 201, &rel, 4);
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 64, where), F);
	assert_int_equal(where[0], 0);
}

/* What must not be skipped: a write of the stack pointer (the return probe reads the return
 * address at [rsp]) or of memory (it could be that slot). */
static void test_writes_stay(void **state)
{
	const uint8_t sub_rsp[] = {0x48, 0x83, 0xec, 0x18, 0x75, 0x10}; /* sub $0x18,%rsp; jne */
	const uint8_t store[] = {0x48, 0x89, 0x02, 0x75, 0x10};		/* mov %rax,(%rdx); jne */
	uint8_t seg[256];

	(void)state;
	seg_with(seg, sizeof(seg), sub_rsp, sizeof(sub_rsp));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 0, 64, NULL), F);
	seg_with(seg, sizeof(seg), store, sizeof(store));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 0, 64, NULL), F);
}

/* The branch at the new place may itself loop back into the skipped bytes: then a call would
 * pass the probe twice. */
static void test_loop_back_stays(void **state)
{
	/* cmp $0x1000,%rdi; ja back to F + 1 (rel8 -8) */
	const uint8_t code[] = {0x48, 0x81, 0xff, 0x00, 0x10, 0x00, 0x00, 0x77, 0xf8};
	uint8_t seg[256];

	(void)state;
	seg_with(seg, sizeof(seg), code, sizeof(code));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 64, NULL), F);
}

static void test_branch_into_stays(void **state)
{
	uint8_t seg[256];
	int32_t rel;

	(void)state;
	/* jmp rel32 at 200 to F + 3: the probe there would see a call that never started */
	seg_with(seg, sizeof(seg), free_start, sizeof(free_start));
	seg[200] = 0xe9;
	rel = (F + 3) - (200 + 5);
	memcpy(seg + 201, &rel, 4);
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 16, NULL), F);
	/* jne rel8 from just before the function */
	seg_with(seg, sizeof(seg), free_start, sizeof(free_start));
	seg[F - 10] = 0x75;
	seg[F - 9] = (uint8_t)((F + 3) - (F - 8));
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 16, NULL), F);
	/* a branch to the start is fine: it passes the probe like any call */
	seg_with(seg, sizeof(seg), free_start, sizeof(free_start));
	seg[200] = 0xe9;
	rel = F - (200 + 5);
	memcpy(seg + 201, &rel, 4);
	assert_int_equal(probe_place__in_segment(seg, sizeof(seg), F, 1u << 0, 16, NULL), F + 3);
}

static void test_libc_sites(void **state)
{
	struct alloc_site sites[64];
	struct elf_info info;
	char path[4096];
	int n;

	(void)state;
	assert_int_equal(deps__ldcache_lookup("", "libc.so.6", path, sizeof(path)), 0);
	assert_int_equal(elf_info__load(path, &info), 0);
	n = alloc_table__sites(&info, ALLOC_LIBC, false, sites, 64);
	for (int i = 0; i < n; i++) {
		/* dlopen's stop (a return probe alone) never moves; the others never far */
		if (!sites[i].entry)
			assert_int_equal(sites[i].probe, sites[i].offset);
		assert_true(sites[i].probe >= sites[i].offset &&
			    sites[i].probe <= sites[i].offset + 64);
		if (sites[i].probe != sites[i].offset)
			print_message("%s: probes at +%d\n", sites[i].name,
				      (int)(sites[i].probe - sites[i].offset));
		/* the cookie says where the entry is from the probe: the BPF side compares a
		 * direct call's target with it (MT_SPEC_SELF) */
		if (sites[i].entry && (sites[i].spec & MT_SPEC_FREE)) {
			assert_true(sites[i].spec & MT_SPEC_SELF);
			assert_int_equal(MT_SPEC_AT(sites[i].spec),
					 sites[i].probe - sites[i].offset);
		}
	}
	/* in an executable the program's own calls are direct: none is skipped */
	n = alloc_table__sites(&info, ALLOC_LIBC, true, sites, 64);
	assert_true(n > 0);
	for (int i = 0; i < n; i++)
		assert_false(sites[i].spec & MT_SPEC_SELF);
	elf_info__free(&info);
}

/* The sites of the first library of names[] the loader's cache knows, as kind; fails the
 * test (with the package to install) when none is there. */
static int lib_sites(const char *const *names, enum alloc_kind kind, struct alloc_site *sites,
		     int cap)
{
	struct elf_info info;
	char path[4096];
	int n;

	while (*names && deps__ldcache_lookup("", *names, path, sizeof(path)))
		names++;
	if (!*names)
		fail_msg("a library the tests use is missing: run scripts/deps.sh");
	assert_int_equal(elf_info__load(path, &info), 0);
	n = alloc_table__sites(&info, kind, false, sites, cap);
	elf_info__free(&info);
	return n;
}

static int libc_sites(struct alloc_site *sites, int cap)
{
	return lib_sites((const char *const[]){"libc.so.6", NULL}, ALLOC_LIBC, sites, cap);
}

/* A shared jemalloc (Debian's, which the tests use): its malloc (cmp; ja) and its free (nine
 * register and thread-local instructions, 48 bytes) move, and the free's cookie holds the
 * whole distance for the internal-call check (MT_SPEC_AT: 6 bits). */
static void test_jemalloc_sites(void **state)
{
	struct alloc_site sites[64];
	int n, seen = 0;

	(void)state;
	n = lib_sites((const char *const[]){"libjemalloc.so.2", NULL}, ALLOC_JEMALLOC, sites, 64);
	for (int i = 0; i < n; i++) {
		uint64_t at = sites[i].probe - sites[i].offset;

		if (strcmp(sites[i].name, "malloc") && strcmp(sites[i].name, "free"))
			continue;
		print_message("%s: probes at +%d\n", sites[i].name, (int)at);
		assert_true(at > 0 && at <= MT_SPEC_AT_MAX);
		if (!strcmp(sites[i].name, "free"))
			assert_int_equal(MT_SPEC_AT(sites[i].spec), at);
		seen++;
	}
	assert_int_equal(seen, 2);
}

/* Debian's libmimalloc: its malloc's (mi_malloc's) probes move past the heap load, and the size is
 * read from %rsi there (MT_SPEC_SIZE 1). */
static void test_mimalloc_sites(void **state)
{
	struct alloc_site sites[64];
	int n, seen = 0;

	(void)state;
	n = lib_sites((const char *const[]){"libmimalloc.so", "libmimalloc.so.2", NULL},
		      ALLOC_MIMALLOC, sites, 64);
	for (int i = 0; i < n; i++) {
		/* mi_malloc, malloc: one address, one site (named after the first) */
		if (strcmp(sites[i].name, "malloc") && strcmp(sites[i].name, "mi_malloc"))
			continue;
		print_message("mi_malloc: probes at +%d, size in argument register %u\n",
			      (int)(sites[i].probe - sites[i].offset), MT_SPEC_SIZE(sites[i].spec));
		assert_true(sites[i].probe > sites[i].offset);
		assert_int_equal(MT_SPEC_SIZE(sites[i].spec), 1);
		seen++;
	}
	assert_int_equal(seen, 1);
}

/* Every place-* file of dir gets its value changed by delta. Returns how many there were. */
static int tamper(const char *dir, int64_t delta)
{
	char cmd[600], path[800];
	int n = 0;
	FILE *ls;

	snprintf(cmd, sizeof(cmd), "ls %s | grep '^place-'", dir);
	ls = popen(cmd, "r");
	assert_non_null(ls);
	while (fscanf(ls, "%511s", cmd) == 1) {
		uint64_t v;
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, cmd);
		f = fopen(path, "r+");
		assert_non_null(f);
		assert_int_equal(fread(&v, sizeof(v), 1, f), 1);
		v += delta;
		rewind(f);
		assert_int_equal(fwrite(&v, sizeof(v), 1, f), 1);
		fclose(f);
		n++;
	}
	pclose(ls);
	return n;
}

/* Placements are cached by file identity: a second inspection reads them back (a changed value
 * shows), an out-of-range value is not used, and the cache off writes nothing. */
static void test_placement_cache(void **state)
{
	char dir[] = "/tmp/memtrack-test-place-XXXXXX", cmd[128];
	struct alloc_site a[64], b[64];
	int n, moved = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	setenv("MEMTRACK_CACHE_DIR", dir, 1);
	unsetenv("MEMTRACK_BTF_CACHE");
	n = libc_sites(a, 64);
	for (int i = 0; i < n; i++)
		moved += a[i].probe != a[i].offset;
	if (!moved)
		skip(); /* this libc has no entry-only site that moves: nothing cached to show */
	/* read back: one byte less shows where it moved (at the start it is out of range) */
	assert_true(tamper(dir, -1) >= moved);
	assert_int_equal(libc_sites(b, 64), n);
	for (int i = 0; i < n; i++)
		assert_int_equal(b[i].probe, a[i].probe - (a[i].probe != a[i].offset));
	/* far out of range: not used, the scan answers (and rewrites the file) */
	tamper(dir, 1 << 20);
	assert_int_equal(libc_sites(b, 64), n);
	for (int i = 0; i < n; i++)
		assert_int_equal(b[i].probe, a[i].probe);
	assert_int_equal(libc_sites(b, 64), n);
	for (int i = 0; i < n; i++)
		assert_int_equal(b[i].probe, a[i].probe);
	/* off: same answer, no file */
	snprintf(cmd, sizeof(cmd), "rm -f %s/place-*", dir);
	assert_int_equal(system(cmd), 0);
	setenv("MEMTRACK_BTF_CACHE", "0", 1);
	assert_int_equal(libc_sites(b, 64), n);
	for (int i = 0; i < n; i++) {
		assert_int_equal(b[i].offset, a[i].offset);
		assert_int_equal(b[i].probe, a[i].probe);
		assert_int_equal(b[i].spec, a[i].spec);
	}
	assert_int_equal(tamper(dir, 0), 0);
	unsetenv("MEMTRACK_BTF_CACHE");
	unsetenv("MEMTRACK_CACHE_DIR");
	assert_int_equal(mt_tmpdir_remove(dir), 0);
}

/* The other tests leave nothing in the user's cache folder. */
static int setup(void **state)
{
	(void)state;
	return setenv("MEMTRACK_BTF_CACHE", "0", 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_moves_past_test),
	    cmocka_unit_test(test_emulated_start_stays),
	    cmocka_unit_test(test_endbr_then_push),
	    cmocka_unit_test(test_unknown_stays),
	    cmocka_unit_test(test_moves_past_compare),
	    cmocka_unit_test(test_moves_past_register_work),
	    cmocka_unit_test(test_moves_with_copied_argument),
	    cmocka_unit_test(test_writes_stay),
	    cmocka_unit_test(test_loop_back_stays),
	    cmocka_unit_test(test_branch_into_stays),
	    cmocka_unit_test(test_libc_sites),
	    cmocka_unit_test(test_jemalloc_sites),
	    cmocka_unit_test(test_mimalloc_sites),
	    cmocka_unit_test(test_placement_cache),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
