// SPDX-License-Identifier: MIT
/*
 * Symbolisation (src/symbols) on a real -O2 program, tests/symbols/sym_target.cc, in four forms
 * (tests/targets/targets.mk): with DWARF, stripped with a .gnu_debuglink, symbols only, bare;
 * and through a build-id debug file. The target prints the return addresses of known call sites
 * ("// @name" lines of its source), as a stack file stores them. And demangling.
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
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <elfutils/libdwelf.h>
#include <gelf.h>
#include "artifact/artifact.h"
#include "cli/cmd_report.h"
#include "stacks/stackfile.h"
#include "symbols/demangle.h"
#include "symbols/symbols.h"
#include "../lib/mt_harness.h"
#include "../lib/mt_pprof.h"
#include "../lib/mt_tmpdir.h"
#include <jansson.h>

#define NR_SITES 4
static const char *const site_names[NR_SITES] = {"inlined", "template", "main", "outer"};

struct target {
	char dir[PATH_MAX];
	uint64_t vaddr[NR_SITES]; /* "outer" has none: it is the caller line of "inlined" */
	uint32_t line[NR_SITES];  /* of the "// @name" comment */
	uint8_t build_id[20];
	uint8_t build_id_len;
};

static struct target tg;

static void path_of(char *out, size_t cap, const char *suffix)
{
	snprintf(out, cap, "%s/sym_target%s", tg.dir, suffix);
}

static int site_index(const char *name)
{
	for (int i = 0; i < NR_SITES; i++)
		if (!strcmp(site_names[i], name))
			return i;
	return -1;
}

static int read_build_id(const char *path)
{
	int fd = open(path, O_RDONLY);
	Elf *elf;
	const void *id;
	ssize_t n;

	if (fd < 0)
		return -errno;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	n = elf ? dwelf_elf_gnu_build_id(elf, &id) : -1;
	if (n > 0 && n <= 20) {
		memcpy(tg.build_id, id, (size_t)n);
		tg.build_id_len = (uint8_t)n;
	}
	elf_end(elf);
	close(fd);
	return n > 0 ? 0 : -ENOENT;
}

static int setup(void **state)
{
	char path[PATH_MAX + 64], line[512];
	FILE *f;
	uint32_t ln = 0;

	(void)state;
	snprintf(tg.dir, sizeof(tg.dir), "%s/build/tests/symbols", mt_repo_root());
	path_of(path, sizeof(path), "");
	if (access(path, X_OK)) {
		fprintf(stderr, "test_symbols: %s missing: run make build/tests/test_symbols\n",
			path);
		return -1;
	}
	f = popen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		char name[32];
		unsigned long v;
		int i;

		if (sscanf(line, "%31s %lx", name, &v) == 2 && (i = site_index(name)) >= 0)
			tg.vaddr[i] = v;
	}
	if (!f || pclose(f))
		return -1;
	snprintf(path, sizeof(path), "%s/tests/symbols/sym_target.cc", mt_repo_root());
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *at = strstr(line, "// @");
		int i;

		ln++;
		if (at && (i = site_index(strtok(at + 4, " \n"))) >= 0)
			tg.line[i] = ln;
	}
	if (f)
		fclose(f);
	path_of(path, sizeof(path), "");
	return read_build_id(path);
}

/* A stack file of one module (path, build-id as given) and no stacks. */
static void one_module(struct stackfile *sf, struct stack_module *m, const char *path,
		       bool with_build_id)
{
	memset(sf, 0, sizeof(*sf));
	memset(m, 0, sizeof(*m));
	m->id = 1;
	m->path = (char *)path;
	if (with_build_id) {
		memcpy(m->build_id, tg.build_id, tg.build_id_len);
		m->build_id_len = tg.build_id_len;
	}
	sf->modules = m;
	sf->nr_modules = 1;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = s ? strlen(s) : 0, k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

/* Full DWARF answers: the inlined function and its caller, the template, main. */
static void check_dwarf(struct symbolizer *s)
{
	const struct sym_loc *l = symbolizer__lookup(s, 1, tg.vaddr[0]);

	assert_non_null(l);
	assert_true(l->found);
	assert_int_equal(l->nr, 2);
	assert_string_equal(l->lines[0].func, "util::inlined_helper");
	assert_true(ends_with(l->lines[0].file, "tests/symbols/sym_target.cc"));
	assert_int_equal(l->lines[0].line, tg.line[0]);
	assert_string_equal(l->lines[1].func, "outer_function(int)");
	assert_true(ends_with(l->lines[1].file, "tests/symbols/sym_target.cc"));
	assert_int_equal(l->lines[1].line, tg.line[3]);
	/* cached: the same answer object */
	assert_ptr_equal(symbolizer__lookup(s, 1, tg.vaddr[0]), l);

	l = symbolizer__lookup(s, 1, tg.vaddr[1]);
	assert_int_equal(l->nr, 1);
	assert_string_equal(l->lines[0].func, "shapes::Box<double>::fill(double)");
	assert_int_equal(l->lines[0].line, tg.line[1]);

	l = symbolizer__lookup(s, 1, tg.vaddr[2]);
	assert_int_equal(l->nr, 1);
	assert_string_equal(l->lines[0].func, "main");
	assert_int_equal(l->lines[0].line, tg.line[2]);
}

static void test_dwarf_in_file(void **state)
{
	char path[PATH_MAX + 64];
	struct stackfile sf;
	struct stack_module m;
	struct symbolizer *s;

	(void)state;
	path_of(path, sizeof(path), "");
	one_module(&sf, &m, path, true);
	assert_int_equal(symbolizer__new(&s, &sf, NULL), 0);
	check_dwarf(s);
	assert_string_equal(symbolizer__module_source(s, 1), "file");
	symbolizer__free(s);
}

/* Stripped, with a .gnu_debuglink to the debug file beside it. */
static void test_debuglink(void **state)
{
	char path[PATH_MAX + 64];
	struct stackfile sf;
	struct stack_module m;
	struct symbolizer *s;

	(void)state;
	path_of(path, sizeof(path), ".stripped");
	one_module(&sf, &m, path, true);
	assert_int_equal(symbolizer__new(&s, &sf, NULL), 0);
	check_dwarf(s);
	symbolizer__free(s);
}

/* The file is gone: DIR/.build-id/xx/yyyy.debug answers, found by the recorded build-id. */
static void test_build_id_dir(void **state)
{
	char dir[128], path[PATH_MAX + 64], dbg[PATH_MAX + 256], hex[41], cmd[4 * PATH_MAX + 1024];
	struct stackfile sf;
	struct stack_module m;
	struct symbolizer *s;
	struct sym_opts o;

	(void)state;
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "symbols"), 0);
	for (int i = 0; i < tg.build_id_len; i++)
		sprintf(hex + 2 * i, "%02x", tg.build_id[i]);
	snprintf(dbg, sizeof(dbg), "%s/.build-id/%.2s", dir, hex);
	path_of(path, sizeof(path), ".debug");
	snprintf(cmd, sizeof(cmd), "mkdir -p %s && cp %s %s/%s.debug", dbg, path, dbg, hex + 2);
	assert_int_equal(system(cmd), 0);
	one_module(&sf, &m, "/nonexistent/sym_target", true);
	o.debug_dir = dir;
	assert_int_equal(symbolizer__new(&s, &sf, &o), 0);
	check_dwarf(s);
	assert_string_equal(symbolizer__module_source(s, 1), "build-id debug file");
	symbolizer__free(s);
	mt_tmpdir_remove(dir);
}

/* Symbols only: names (demangled), no lines, no inlined functions. */
static void test_symtab_only(void **state)
{
	char path[PATH_MAX + 64];
	struct stackfile sf;
	struct stack_module m;
	struct symbolizer *s;
	const struct sym_loc *l;

	(void)state;
	path_of(path, sizeof(path), ".symtab");
	one_module(&sf, &m, path, false);
	assert_int_equal(symbolizer__new(&s, &sf, &(struct sym_opts){.debug_dir = "/nonexistent"}),
			 0);
	l = symbolizer__lookup(s, 1, tg.vaddr[0]);
	assert_true(l->found);
	assert_int_equal(l->nr, 1);
	assert_string_equal(l->lines[0].func, "outer_function(int)");
	assert_null(l->lines[0].file);
	l = symbolizer__lookup(s, 1, tg.vaddr[1]);
	assert_string_equal(l->lines[0].func, "shapes::Box<double>::fill(double)");
	symbolizer__free(s);
}

/* Nothing to go by, or the wrong file: module+0xVADDR; and a frame outside every module. */
static void test_fallbacks(void **state)
{
	char path[PATH_MAX + 64], want[64];
	struct stackfile sf;
	struct stack_module m;
	struct symbolizer *s;
	const struct sym_loc *l;
	struct sym_opts o = {.debug_dir = "/nonexistent"};

	(void)state;
	path_of(path, sizeof(path), ".bare");
	one_module(&sf, &m, path, true);
	assert_int_equal(symbolizer__new(&s, &sf, &o), 0);
	l = symbolizer__lookup(s, 1, tg.vaddr[1]);
	snprintf(want, sizeof(want), "sym_target.bare+%#lx", (unsigned long)tg.vaddr[1]);
	assert_false(l->found);
	assert_string_equal(l->lines[0].func, want);
	l = symbolizer__lookup(s, 0, 0x7f0012345678);
	assert_false(l->found);
	assert_string_equal(l->lines[0].func, "[unknown]");
	symbolizer__free(s);

	/* a build-id that is not the file's: the file is not used */
	path_of(path, sizeof(path), "");
	one_module(&sf, &m, path, true);
	m.build_id[0] ^= 0xff;
	assert_int_equal(symbolizer__new(&s, &sf, &o), 0);
	l = symbolizer__lookup(s, 1, tg.vaddr[2]);
	assert_false(l->found);
	snprintf(want, sizeof(want), "sym_target+%#lx", (unsigned long)tg.vaddr[2]);
	assert_string_equal(l->lines[0].func, want);
	assert_string_equal(symbolizer__module_source(s, 1), "none");
	symbolizer__free(s);
}

/* Known manglings: Itanium C++, Rust legacy (hash dropped) and v0 (RFC 2603's forms). */
static void test_demangle(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
	    {"_Z1ai", "a(int)"},
	    {"_ZNSt6vectorIiSaIiEE9push_backERKi",
	     "std::vector<int, std::allocator<int> >::push_back(int const&)"},
	    {"_ZN6shapes3BoxIdE4fillEd", "shapes::Box<double>::fill(double)"},
	    {"_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write"},
	    {"_ZN5alloc7raw_vec19RawVec$LT$T$C$A$GT$7reserve17h1234567890abcdefE",
	     "alloc::raw_vec::RawVec<T,A>::reserve"},
	    {"_RNvCs15kBYyAo9fc_7mycrate7example", "mycrate::example"},
	    {"_RNvNtCs1234_7mycrate3foo3bar", "mycrate::foo::bar"},
	    {"_RINvCs1234_7mycrate3fooNtB2_3BarE", "mycrate::foo::<mycrate::Bar>"},
	};
	char *d;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		d = demangle(cases[i].in);
		assert_non_null(d);
		assert_string_equal(d, cases[i].out);
		free(d);
	}
	assert_null(demangle("main"));
	assert_null(demangle("_Znot a mangled name"));
	assert_null(demangle(NULL));
}

/*
 * memtrack report through real files: an artifact and its stack file (the stackfile writer),
 * frames in sym_target. Stack 1: outer_function (with util::inlined_helper inlined) <- main,
 * 100 x 1 KiB, 50 freed, 50 leaked; stack 2: Box<double>::fill <- main, 10 x 64 KiB, all live at
 * the peak and freed before exit. Folded lines and totals exact; JSON top; pprof decoded.
 */
static void test_report_end_to_end(void **state)
{
	char dir[128], art[256], stk[256], folded[256], pp[256], js[256], path[PATH_MAX + 64];
	struct artifact_writer *aw;
	struct stackfile_writer *sw;
	uint32_t mod, st1, st2;
	uint64_t ts = 1000;
	int fd;

	(void)state;
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "stackreport"), 0);
	snprintf(art, sizeof(art), "%s/77%s", dir, ARTIFACT_SUFFIX);
	snprintf(stk, sizeof(stk), "%s/77%s", dir, STACKFILE_SUFFIX);
	snprintf(folded, sizeof(folded), "%s/out.folded", dir);
	snprintf(pp, sizeof(pp), "%s/out.pb.gz", dir);
	snprintf(js, sizeof(js), "%s/out.json", dir);
	path_of(path, sizeof(path), "");

	fd = open(stk, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(stackfile_writer__open(&sw, fd, "77" ARTIFACT_SUFFIX, "test"), 0);
	assert_int_equal(stackfile_writer__module(sw, path, tg.build_id, tg.build_id_len, &mod), 0);
	{
		struct stack_frame f1[] = {{mod, tg.vaddr[0]}, {mod, tg.vaddr[2]}};
		struct stack_frame f2[] = {{mod, tg.vaddr[1]}, {mod, tg.vaddr[2]}};

		assert_int_equal(stackfile_writer__stack(sw, f1, 2, false, &st1), 0);
		assert_int_equal(stackfile_writer__stack(sw, f2, 2, false, &st2), 0);
	}
	assert_int_equal(artifact_writer__open(&aw, art, 3, 64), 0);
	for (int i = 0; i < 100; i++) {
		struct mt_event e = {.type = MT_EV_MALLOC,
				     .pid = 77,
				     .tid = 77,
				     .ts = ts++,
				     .addr = 0x100000 + (uint64_t)i * 0x1000,
				     .size = 1024};

		assert_int_equal(artifact_writer__write(aw, &e), 0);
		assert_int_equal(stackfile_writer__alloc(sw, st1), 0);
	}
	for (int i = 0; i < 50; i++) {
		struct mt_event e = {.type = MT_EV_FREE,
				     .pid = 77,
				     .tid = 77,
				     .ts = ts++,
				     .addr = 0x100000 + (uint64_t)i * 0x1000};

		assert_int_equal(artifact_writer__write(aw, &e), 0);
	}
	for (int i = 0; i < 10; i++) {
		struct mt_event e = {.type = MT_EV_MALLOC,
				     .pid = 77,
				     .tid = 77,
				     .ts = ts++,
				     .addr = 0x10000000 + (uint64_t)i * 0x100000,
				     .size = 65536};

		assert_int_equal(artifact_writer__write(aw, &e), 0);
		assert_int_equal(stackfile_writer__alloc(sw, st2), 0);
	}
	for (int i = 0; i < 10; i++) {
		struct mt_event e = {.type = MT_EV_FREE,
				     .pid = 77,
				     .tid = 77,
				     .ts = ts++,
				     .addr = 0x10000000 + (uint64_t)i * 0x100000};

		assert_int_equal(artifact_writer__write(aw, &e), 0);
	}
	{
		struct mt_event e = {.type = MT_EV_EXIT, .pid = 77, .tid = 77, .ts = ts++};

		assert_int_equal(artifact_writer__write(aw, &e), 0);
	}
	assert_int_equal(artifact_writer__close(aw), 0);
	assert_int_equal(stackfile_writer__close(sw), 0);

	{
		char *argv[] = {"report", "--folded", folded, "--pprof", pp,  "--top",
				"3",	  "--json",   "-o",   js,	 art, NULL};
		size_t len;
		char *text;
		json_t *doc, *top, *f0;

		assert_int_equal(cmd_report(11, argv), 0);
		{
			FILE *f = fopen(folded, "r");
			char buf[4096];

			assert_non_null(f);
			len = fread(buf, 1, sizeof(buf) - 1, f);
			buf[len] = 0;
			fclose(f);
			assert_string_equal(buf,
					    "main;outer_function(int);util::inlined_helper 102400\n"
					    "main;shapes::Box<double>::fill(double) 655360\n");
		}
		doc = json_load_file(js, 0, NULL);
		assert_non_null(doc);
		top = json_object_get(json_object_get(doc, "stacks"), "top");
		/* at the peak: 50 x 1 KiB and 10 x 64 KiB live */
		f0 = json_array_get(json_object_get(top, "peak_live"), 0);
		assert_int_equal(json_integer_value(json_object_get(f0, "peak_live_bytes")),
				 655360);
		assert_string_equal(
		    json_string_value(json_object_get(
			json_array_get(json_object_get(f0, "frames"), 0), "function")),
		    "shapes::Box<double>::fill(double)");
		f0 = json_array_get(json_object_get(top, "leaked"), 0);
		assert_int_equal(json_integer_value(json_object_get(f0, "leaked_bytes")), 51200);
		assert_int_equal(json_array_size(json_object_get(top, "leaked")), 1);
		assert_int_equal(json_integer_value(
				     json_object_get(json_object_get(doc, "results"), "peak_heap")),
				 51200 + 655360);
		f0 = json_array_get(json_object_get(json_object_get(doc, "stacks"), "modules"), 0);
		assert_string_equal(json_string_value(json_object_get(f0, "symbols")), "file");
		assert_string_equal(json_string_value(json_object_get(f0, "path")), path);
		json_decref(doc);
		{
			/* the plain summary says the stacks are there */
			char *argv2[] = {"report", "-o", js, art, NULL};
			char buf[8192];
			FILE *f;

			assert_int_equal(cmd_report(4, argv2), 0);
			f = fopen(js, "r");
			assert_non_null(f);
			len = fread(buf, 1, sizeof(buf) - 1, f);
			buf[len] = 0;
			fclose(f);
			assert_non_null(strstr(buf, "memtrack: allocation call stacks in "));
			assert_non_null(strstr(buf, STACKFILE_SUFFIX ": see --top N"));
		}
		if (mt_pprof_decoder()) {
			text = mt_pprof_decode(pp);
			assert_non_null(text);
			assert_non_null(strstr(text, ";util::inlined_helper@"));
			assert_non_null(strstr(text, "sym_target.cc:"));
			assert_non_null(strstr(text, " 100 102400 50 51200\n"));
			assert_non_null(strstr(text, " 10 655360 10 655360\n"));
			free(text);
		}
	}
	mt_tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_dwarf_in_file),     cmocka_unit_test(test_debuglink),
	    cmocka_unit_test(test_build_id_dir),      cmocka_unit_test(test_symtab_only),
	    cmocka_unit_test(test_fallbacks),	      cmocka_unit_test(test_demangle),
	    cmocka_unit_test(test_report_end_to_end),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
