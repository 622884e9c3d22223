// SPDX-License-Identifier: MIT
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <string.h>
#include "../../bench/duration.h"

static int64_t parse_ok(const char *s)
{
	int64_t ns = -1;
	assert_int_equal(bench_duration__parse(s, &ns), 0);
	return ns;
}

static void test_units(void **state)
{
	(void)state;
	assert_int_equal(parse_ok("500ms"), 500000000LL);
	assert_int_equal(parse_ok("5s"), 5000000000LL);
	assert_int_equal(parse_ok("1m"), 60000000000LL);
	assert_int_equal(parse_ok("2h"), 7200000000000LL);
	assert_int_equal(parse_ok("250us"), 250000LL);
	assert_int_equal(parse_ok("7ns"), 7LL);
}

static void test_fractions_and_compounds(void **state)
{
	(void)state;
	assert_int_equal(parse_ok("1.5s"), 1500000000LL);
	assert_int_equal(parse_ok(".25s"), 250000000LL);
	assert_int_equal(parse_ok("1m30s"), 90000000000LL);
	assert_int_equal(parse_ok("1s500ms"), 1500000000LL);
}

static void test_zero(void **state)
{
	(void)state;
	/* the CLI's --warmup-time 0 */
	assert_int_equal(parse_ok("0"), 0);
	assert_int_equal(parse_ok("0s"), 0);
	assert_int_equal(parse_ok("0ms"), 0);
}

static void test_rejects(void **state)
{
	static const char *const bad[] = {
	    "",	   "5",	  "s",	  "5x",	 "-1s",	  "+1s",   "1e3s", " 5s",
	    "5 s", "5s ", "5sec", "inf", "0x10s", "1..5s", "ms5",
	};
	int64_t ns = 42;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (bench_duration__parse(bad[i], &ns) != -EINVAL)
			fail_msg("'%s' was accepted", bad[i]);
	}
	assert_int_equal(ns, 42); /* untouched on error */
	assert_int_equal(bench_duration__parse(NULL, &ns), -EINVAL);
	assert_int_equal(bench_duration__parse("9999999999h", &ns), -ERANGE);
}

static void test_format(void **state)
{
	char buf[32];

	(void)state;
	assert_string_equal(bench_duration__format(1.234, buf, sizeof(buf)), "1.23 s");
	assert_string_equal(bench_duration__format(0.0125, buf, sizeof(buf)), "12.5 ms");
	assert_string_equal(bench_duration__format(0.000812, buf, sizeof(buf)), "812 us");
	assert_string_equal(bench_duration__format(NAN, buf, sizeof(buf)), "-");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_units),  cmocka_unit_test(test_fractions_and_compounds),
	    cmocka_unit_test(test_zero),   cmocka_unit_test(test_rejects),
	    cmocka_unit_test(test_format),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
