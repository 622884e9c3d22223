// SPDX-License-Identifier: MIT
/* The padded environment: its size, what it keeps, an inherited pad. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "../../bench/runner.h"

static void test_pads_to_bucket(void **state)
{
	char *env[] = {"A=1", "PATH=/usr/bin:/bin", "LONGER=abcdefghijklmnopqrstuvwxyz", NULL};
	char **out;

	(void)state;
	for (size_t bucket = 64; bucket <= 8192; bucket *= 2) {
		assert_int_equal(bench_layout__env(env, bucket, &out), 0);
		assert_int_equal(bench_layout__env_bytes(out) % bucket, 0);
		/* the strings kept, in order, the pad last */
		for (int i = 0; env[i]; i++)
			assert_ptr_equal(out[i], env[i]);
		assert_memory_equal(out[3], LAYOUT_ENV_PAD "=", strlen(LAYOUT_ENV_PAD) + 1);
		assert_null(out[4]);
		bench_layout__env_free(out);
	}
}

/* Environments that differ in size within a bucket give the same total. */
static void test_same_size(void **state)
{
	char *a[] = {"OLDPWD=/", NULL}, *b[] = {"OLDPWD=/work/wt/memrounds", NULL};
	char **pa, **pb;

	(void)state;
	assert_int_equal(bench_layout__env(a, 4096, &pa), 0);
	assert_int_equal(bench_layout__env(b, 4096, &pb), 0);
	assert_int_equal(bench_layout__env_bytes(pa), 4096);
	assert_int_equal(bench_layout__env_bytes(pb), 4096);
	assert_int_equal(strlen(pa[1]) - strlen(pb[1]), strlen(b[0]) - strlen(a[0]));
	bench_layout__env_free(pa);
	bench_layout__env_free(pb);
}

/* A pad inherited from an enclosing memtrack-bench is replaced, not padded around. */
static void test_inherited_pad(void **state)
{
	char *env[] = {"A=1", LAYOUT_ENV_PAD "=xxxxxxxxxxxxxxxxxxxx", "B=2", NULL};
	char **out;

	(void)state;
	assert_int_equal(bench_layout__env(env, 128, &out), 0);
	assert_string_equal(out[0], "A=1");
	assert_string_equal(out[1], "B=2");
	assert_int_equal(bench_layout__env_bytes(out), 128);
	assert_null(out[3]);
	bench_layout__env_free(out);
}

static void test_edges(void **state)
{
	/* already a whole bucket with the shortest pad: no x at all */
	char fill[64 - 4 - (sizeof(LAYOUT_ENV_PAD) + 1)];
	char *env[] = {fill, NULL}, *empty[] = {NULL};
	char **out;

	(void)state;
	memset(fill, 'v', sizeof(fill) - 1);
	fill[0] = 'V';
	fill[1] = '=';
	fill[sizeof(fill) - 1] = '\0';
	assert_int_equal(bench_layout__env(env, 64 - 4, &out), 0);
	assert_string_equal(out[1], LAYOUT_ENV_PAD "=");
	bench_layout__env_free(out);
	assert_int_equal(bench_layout__env(empty, 4096, &out), 0);
	assert_int_equal(bench_layout__env_bytes(out), 4096);
	bench_layout__env_free(out);
	assert_int_equal(bench_layout__env(NULL, 4096, &out), 0);
	bench_layout__env_free(out);
	assert_int_equal(bench_layout__env(env, 0, &out), -EINVAL);
	bench_layout__env_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pads_to_bucket),
	    cmocka_unit_test(test_same_size),
	    cmocka_unit_test(test_inherited_pad),
	    cmocka_unit_test(test_edges),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
