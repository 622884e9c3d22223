// SPDX-License-Identifier: MIT
/* rmap backend selection from probe results: which backend, which fentry programs, why. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>
#include "bpf/events.h"
#include "track/rmap_backend.h"

#define FOLIO_612                                                                                  \
	(RMAP_FN_REQUIRED | (1u << RMAP_FN_ADD_ANON_PMD) | (1u << RMAP_FN_ADD_FILE_PMD) |          \
	 (1u << RMAP_FN_REMOVE_PMD))
#define FOLIO_615 (FOLIO_612 | (1u << RMAP_FN_ADD_FILE_PUD) | (1u << RMAP_FN_REMOVE_PUD))

static void test_fentry_when_functions_and_load_ok(void **state)
{
	struct rmap_probe p = {.found = FOLIO_612, .load_probed = true};
	struct rmap_choice c;

	(void)state;
	assert_true(rmap_backend__btf_ok(&p));
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_FENTRY);
	assert_int_equal(c.progs, FOLIO_612); /* every function found, no pud */
	assert_string_equal(c.reason, "folio_* rmap functions found (6.8+)");

	p.found = FOLIO_615;
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.progs, FOLIO_615);
	assert_non_null(strstr(c.reason, "pud"));
}

static void test_only_present_optional_programs(void **state)
{
	/* a kernel without THP has no pmd functions: the required ones suffice */
	struct rmap_probe p = {.found = RMAP_FN_REQUIRED, .load_probed = true};
	struct rmap_choice c;

	(void)state;
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_FENTRY);
	assert_int_equal(c.progs, RMAP_FN_REQUIRED);
}

static void test_eperm_falls_back(void **state)
{
	struct rmap_probe p = {.found = FOLIO_612, .load_probed = true, .load_err = -EPERM};
	struct rmap_choice c;

	(void)state;
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_TRACEPOINT);
	assert_int_equal(c.progs, 0);
	assert_non_null(strstr(c.reason, "fentry refused by the kernel (EPERM"));
	assert_non_null(strstr(c.reason, ": tracepoint backend"));

	p.load_err = -EINVAL;
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_TRACEPOINT);
	assert_non_null(strstr(c.reason, "(EINVAL)"));
}

static void test_page_api_before_6_8(void **state)
{
	/* 6.1: the page_* API whole, no folio_* function */
	struct rmap_probe p = {.found = RMAP_FN_PAGE_ALL, .load_probed = true};
	struct rmap_choice c;

	(void)state;
	assert_true(rmap_backend__btf_ok(&p));
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_FENTRY);
	assert_int_equal(c.progs, RMAP_FN_PAGE_ALL);
	assert_string_equal(c.reason, "page_* rmap functions found (before 6.8)");

	/* 6.2-6.7: folio_add_new_anon_rmap replaced page_add_new_anon_rmap, the rest is page_*:
	 * neither API is whole */
	p.found =
	    (1u << RMAP_FN_ADD_NEW_ANON) | (RMAP_FN_PAGE_ALL & ~(1u << RMAP_FN_PAGE_ADD_NEW_ANON));
	assert_false(rmap_backend__btf_ok(&p));
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_TRACEPOINT);
	assert_non_null(strstr(c.reason, "nor the whole page_* rmap API"));

	/* both APIs (never seen; a kernel in between): the folio one wins */
	p.found = FOLIO_612 | RMAP_FN_PAGE_ALL;
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.progs, FOLIO_612);
}

static void test_missing_functions_named(void **state)
{
	struct rmap_probe p = {.found =
				   (1u << RMAP_FN_ADD_NEW_ANON) | (1u << RMAP_FN_ADD_FILE_PTES)};
	struct rmap_choice c;

	(void)state;
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_TRACEPOINT);
	assert_string_equal(c.reason, "no folio_add_anon_rmap_ptes, folio_remove_rmap_ptes in "
				      "vmlinux BTF (nor the whole page_* rmap API of 6.1): "
				      "tracepoint backend");
}

static void test_btf_unreadable(void **state)
{
	struct rmap_probe p = {.btf_err = -ENOENT};
	struct rmap_choice c;

	(void)state;
	assert_false(rmap_backend__btf_ok(&p));
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_TRACEPOINT);
	assert_non_null(strstr(c.reason, "cannot read vmlinux BTF"));
}

static void test_forced_backends(void **state)
{
	struct rmap_probe p = {
	    .want = RMAP_WANT_TRACEPOINT, .found = FOLIO_612, .load_probed = true};
	struct rmap_choice c;
	enum rmap_want w;

	(void)state;
	/* tracepoint wanted: no probe is worth it, and it wins over a working fentry */
	assert_false(rmap_backend__btf_ok(&p));
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_TRACEPOINT);
	assert_non_null(strstr(c.reason, "MEMTRACK_RMAP_BACKEND=tracepoint"));

	/* fentry wanted but refused: an error carrying the reason, without the fallback words */
	p.want = RMAP_WANT_FENTRY;
	p.load_err = -EPERM;
	assert_int_equal(rmap_backend__choose(&p, &c), -ENOTSUP);
	assert_non_null(strstr(c.reason, "EPERM"));
	assert_null(strstr(c.reason, "tracepoint backend"));
	p.load_err = 0;
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_FENTRY);

	assert_int_equal(rmap_backend__parse_want(NULL, &w), 0);
	assert_int_equal(w, RMAP_WANT_AUTO);
	assert_int_equal(rmap_backend__parse_want("", &w), 0);
	assert_int_equal(w, RMAP_WANT_AUTO);
	assert_int_equal(rmap_backend__parse_want("fentry", &w), 0);
	assert_int_equal(w, RMAP_WANT_FENTRY);
	assert_int_equal(rmap_backend__parse_want("tracepoint", &w), 0);
	assert_int_equal(w, RMAP_WANT_TRACEPOINT);
	assert_int_equal(rmap_backend__parse_want("kprobe", &w), -EINVAL);
}

static void test_unprobed_load_never_fentry(void **state)
{
	/* the functions alone are not enough: fentry needs a load that worked */
	struct rmap_probe p = {.found = FOLIO_612, .load_probed = false};
	struct rmap_choice c;

	(void)state;
	assert_int_equal(rmap_backend__choose(&p, &c), 0);
	assert_int_equal(c.backend, MT_RMAP_TRACEPOINT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fentry_when_functions_and_load_ok),
	    cmocka_unit_test(test_only_present_optional_programs),
	    cmocka_unit_test(test_eperm_falls_back),
	    cmocka_unit_test(test_page_api_before_6_8),
	    cmocka_unit_test(test_missing_functions_named),
	    cmocka_unit_test(test_btf_unreadable),
	    cmocka_unit_test(test_forced_backends),
	    cmocka_unit_test(test_unprobed_load_never_fentry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
