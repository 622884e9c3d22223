// SPDX-License-Identifier: MIT
/*
 * btf_scan: function ids must be the ones libbpf finds, on a BTF built here with every kind of
 * record that has trailing data (and buffers small enough to split records and strings), and
 * on this machine's vmlinux when it is readable.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <cmocka.h>
#include "track/btf_scan.h"

#define NR_FUNCS 300

static char path[] = "/tmp/memtrack-test-btfscan-XXXXXX";

/* A BTF with ints, pointers, arrays, structs, unions, enums, typedefs, protos with params,
 * variables, a datasec, and NR_FUNCS functions interleaved with them; written to `path`. */
static struct btf *build_btf(void)
{
	struct btf *b = btf__new_empty();
	int i32, ptr, arr, st, un, en, proto, var, fd;
	const void *raw;
	__u32 size;
	char name[64];

	assert_non_null(b);
	i32 = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	ptr = btf__add_ptr(b, i32);
	arr = btf__add_array(b, i32, i32, 16);
	for (int f = 0; f < NR_FUNCS; f++) {
		snprintf(name, sizeof(name), "s_%d", f);
		st = btf__add_struct(b, name, 24);
		btf__add_field(b, "a", i32, 0, 0);
		btf__add_field(b, "b", ptr, 64, 0);
		btf__add_field(b, "c", arr, 128, 0);
		snprintf(name, sizeof(name), "u_%d", f);
		un = btf__add_union(b, name, 8);
		btf__add_field(b, "x", i32, 0, 0);
		btf__add_field(b, "y", ptr, 0, 0);
		snprintf(name, sizeof(name), "e_%d", f);
		en = btf__add_enum(b, name, 4);
		btf__add_enum_value(b, "E_ONE", 1);
		btf__add_enum_value(b, "E_TWO", 2);
		btf__add_typedef(b, "td", st);
		proto = btf__add_func_proto(b, i32);
		btf__add_func_param(b, "p", ptr);
		btf__add_func_param(b, "q", un);
		btf__add_func_param(b, "r", en);
		/* long names, so that strings straddle small buffers */
		snprintf(name, sizeof(name), "function_with_a_rather_long_name_%d", f);
		assert_true(btf__add_func(b, name, BTF_FUNC_GLOBAL, proto) > 0);
		snprintf(name, sizeof(name), "var_%d", f);
		var = btf__add_var(b, name, BTF_VAR_GLOBAL_ALLOCATED, i32);
		if (f % 50 == 0) {
			btf__add_datasec(b, ".data", 8);
			btf__add_datasec_var_info(b, var, 0, 4);
		}
	}
	raw = btf__raw_data(b, &size);
	assert_non_null(raw);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, raw, size), (ssize_t)size);
	close(fd);
	return b;
}

static void check_against(struct btf *b, size_t chunk)
{
	char names_buf[8][64];
	const char *names[8];
	int ids[8];

	/* first, last, some in between, one absent, one that is a struct and not a function */
	int picks[] = {0, 1, 77, 150, 298, NR_FUNCS - 1};

	for (int i = 0; i < 6; i++) {
		snprintf(names_buf[i], sizeof(names_buf[i]), "function_with_a_rather_long_name_%d",
			 picks[i]);
		names[i] = names_buf[i];
	}
	names[6] = "function_with_a_rather_long_name_";
	names[7] = "s_5";
	assert_int_equal(btf_scan__funcs_chunk(path, names, 8, ids, chunk), 0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(ids[i], btf__find_by_name_kind(b, names[i], BTF_KIND_FUNC));
	assert_int_equal(ids[6], 0);
	assert_int_equal(ids[7], 0);
}

static void test_matches_libbpf(void **state)
{
	struct btf *b = build_btf();

	(void)state;
	check_against(b, 64 * 1024);
	check_against(b, 256);
	check_against(b, 300); /* not a multiple of any record size */
	btf__free(b);
	unlink(path);
}

static void test_rejects_non_btf(void **state)
{
	char p[] = "/tmp/memtrack-test-btfscan-XXXXXX";
	const char *names[] = {"x"};
	int ids[1], fd = mkstemp(p);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not a BTF file at all, sorry", 28), 28);
	close(fd);
	assert_int_equal(btf_scan__funcs(p, names, 1, ids), -EINVAL);
	unlink(p);
	assert_int_equal(btf_scan__funcs("/nonexistent/btf", names, 1, ids), -ENOENT);
}

static void test_vmlinux(void **state)
{
	const char *names[] = {"schedule", "do_exit", "vfs_read", "no_such_function_here"};
	struct btf *b;
	int ids[4];

	(void)state;
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		print_message("no readable /sys/kernel/btf/vmlinux\n");
		skip();
	}
	b = btf__load_vmlinux_btf();
	assert_non_null(b);
	assert_int_equal(btf_scan__funcs("/sys/kernel/btf/vmlinux", names, 4, ids), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(ids[i], btf__find_by_name_kind(b, names[i], BTF_KIND_FUNC));
	assert_true(ids[0] > 0);
	assert_int_equal(ids[3], 0);
	btf__free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_matches_libbpf),
	    cmocka_unit_test(test_rejects_non_btf),
	    cmocka_unit_test(test_vmlinux),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
