// SPDX-License-Identifier: MIT
/* Expected values below were computed by hand; the derivations are in the comments. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include "../../bench/stats.h"

#define EPS 1e-9

static void test_known_sample(void **state)
{
	/* unsorted on purpose; sorted: 2 4 4 4 5 5 7 9 */
	const double x[] = {5, 4, 9, 2, 4, 7, 4, 5};
	struct bench_stats s;

	(void)state;
	assert_int_equal(bench_stats__compute(x, 8, &s), 0);
	assert_int_equal(s.n, 8);
	assert_float_equal(s.mean, 5.0, EPS); /* 40 / 8 */
	/* squared deviations 9+1+1+1+0+0+4+16 = 32; 32 / 7 = 4.571428...; sqrt = 2.138089935 */
	assert_float_equal(s.stddev, 2.138089935, 1e-8);
	assert_float_equal(s.median, 4.5, EPS); /* (4 + 5) / 2 */
	assert_float_equal(s.min, 2.0, EPS);
	assert_float_equal(s.max, 9.0, EPS);
	/* q1 at position 0.25 * 7 = 1.75: v[1] + 0.75 (v[2] - v[1]) = 4; q3 at 5.25: 5 + 0.25 * 2
	 */
	assert_float_equal(s.q1, 4.0, EPS);
	assert_float_equal(s.q3, 5.5, EPS);
	assert_float_equal(s.iqr, 1.5, EPS);
	/* fences 4 - 2.25 = 1.75 and 5.5 + 2.25 = 7.75: only 9 is out */
	assert_int_equal(s.outliers, 1);
	assert_float_equal(s.cv, 2.138089935 / 5.0, 1e-8);
	assert_float_equal(x[0], 5.0, EPS); /* input left alone */
}

static void test_outlier_high(void **state)
{
	const double x[] = {1, 2, 3, 4, 100};
	struct bench_stats s;

	(void)state;
	assert_int_equal(bench_stats__compute(x, 5, &s), 0);
	assert_float_equal(s.mean, 22.0, EPS);
	assert_float_equal(s.median, 3.0, EPS);
	assert_float_equal(s.q1, 2.0, EPS); /* position 1 */
	assert_float_equal(s.q3, 4.0, EPS); /* position 3 */
	assert_int_equal(s.outliers, 1);    /* fences -1 and 7 */
}

static void test_single_and_constant(void **state)
{
	const double one[] = {0.25}, same[] = {3, 3, 3, 3}, zeros[] = {0, 0, 0};
	struct bench_stats s;

	(void)state;
	assert_int_equal(bench_stats__compute(one, 1, &s), 0);
	assert_float_equal(s.mean, 0.25, EPS);
	assert_float_equal(s.median, 0.25, EPS);
	assert_true(isnan(s.stddev)); /* undefined with one round, written as null */
	assert_true(isnan(s.cv));
	assert_int_equal(s.outliers, 0);

	assert_int_equal(bench_stats__compute(same, 4, &s), 0);
	assert_float_equal(s.stddev, 0.0, EPS);
	assert_float_equal(s.iqr, 0.0, EPS);
	assert_int_equal(s.outliers, 0);
	assert_true(s.cv == 0); /* a deterministic figure varies by exactly nothing */
	assert_int_equal(bench_stats__compute(zeros, 3, &s), 0);
	assert_true(s.cv == 0); /* zeros too (no leak in any round), though the mean is 0 */

	assert_int_equal(bench_stats__compute(one, 0, &s), -EINVAL);
	assert_int_equal(bench_stats__compute(NULL, 3, &s), -EINVAL);
}

static void test_mann_whitney_separated(void **state)
{
	const double a[] = {1, 2, 3, 4, 5}, b[] = {6, 7, 8, 9, 10};
	double p;

	(void)state;
	/* U = 15 - 15 = 0, mu = 12.5, sigma = sqrt(25/12 * 11) = 4.787136; z = 12 / sigma
	 * = 2.50672; p = 2 (1 - Phi(z)) = 0.012186 */
	assert_int_equal(bench_stats__mann_whitney(a, 5, b, 5, &p), 0);
	assert_float_equal(p, 0.012186, 1e-5);
	/* symmetric in its arguments */
	assert_int_equal(bench_stats__mann_whitney(b, 5, a, 5, &p), 0);
	assert_float_equal(p, 0.012186, 1e-5);
}

static void test_mann_whitney_interleaved_and_ties(void **state)
{
	const double a[] = {1, 3, 5, 7}, b[] = {2, 4, 6, 8}, c[] = {1, 1, 1};
	double p;

	(void)state;
	/* rank sum 16, U = 6, mu = 8, sigma = sqrt(12); z = 1.5 / 3.4641 = 0.4330; p = 0.6650 */
	assert_int_equal(bench_stats__mann_whitney(a, 4, b, 4, &p), 0);
	assert_float_equal(p, 0.6650, 1e-3);
	/* every value tied: the variance vanishes and nothing can differ */
	assert_int_equal(bench_stats__mann_whitney(c, 3, c, 3, &p), 0);
	assert_float_equal(p, 1.0, EPS);
	/* too few values to test */
	assert_int_equal(bench_stats__mann_whitney(a, 1, b, 4, &p), -EINVAL);
}

static void test_mann_whitney_three_rounds_never_significant(void **state)
{
	const double a[] = {1, 1.1, 1.2}, b[] = {5, 5.1, 5.2};
	double p;

	(void)state;
	/* U = 0, mu = 4.5, sigma = sqrt(9/12 * 7) = 2.2913; z = 4 / 2.2913 = 1.7457; p = 0.0809 */
	assert_int_equal(bench_stats__mann_whitney(a, 3, b, 3, &p), 0);
	assert_float_equal(p, 0.0809, 1e-3);
	assert_true(p > 0.05);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_known_sample),
	    cmocka_unit_test(test_outlier_high),
	    cmocka_unit_test(test_single_and_constant),
	    cmocka_unit_test(test_mann_whitney_separated),
	    cmocka_unit_test(test_mann_whitney_interleaved_and_ties),
	    cmocka_unit_test(test_mann_whitney_three_rounds_never_significant),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
