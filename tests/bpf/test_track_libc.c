// SPDX-License-Identifier: MIT
/*
 * Root tests: every glibc entry point (build/targets/alloc_each) recorded event by event: the
 * artifact's heap events of the target's thread between its begin/end markers are exactly the
 * operations it reported, with the same addresses and sizes, nothing extra.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

static void run_alloc_each(void **state, struct mt_run **out)
{
	struct mt_run *r = mt_new_run(state);
	struct mt_run_opts o = {.track_opts = mt_mode_opts};

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("alloc_each"), 0);
	*out = r;
}

/* The whole sequence, in order: malloc, calloc, realloc (NULL, grow, shrink, move, to 0),
 * reallocarray, aligned_alloc, memalign, posix_memalign, valloc, pvalloc, free, cfree. */
static void test_each_function_event_by_event(void **state)
{
	struct mt_run *r;
	const struct mt_expect *b;

	run_alloc_each(state, &r);
	b = mt_need_expect(r, "begin", 0, 0);
	MT_CHECK(r, b->pid == r->root_pid, "target pid %d, artifact root pid %d", b->pid,
		 r->root_pid);
	mt_window_ok(r, b->tid, 0);
}

/* Each reported call is recorded once (by address, not by position): a free
 * attached twice through an alias (free/cfree/__libc_free) would show here. */
static void test_each_call_recorded_once(void **state)
{
	struct mt_run *r;

	run_alloc_each(state, &r);
	mt_each_op_once(r);
}

/* posix_memalign(&p, 3, 500) fails with EINVAL: nothing allocated, no event at all. */
static void test_posix_memalign_einval_no_event(void **state)
{
	struct mt_run *r;
	const struct mt_expect *e;
	struct mt_filter f = {.pid = 0, .by_size = true, .size = 500, .heap_only = true};

	run_alloc_each(state, &r);
	e = mt_need_expect(r, "einval", 0, 0);
	f.pid = e->pid;
	MT_CHECK(r, mt_count(r, &f) == 0,
		 "%zu heap events of size 500 for a failed "
		 "posix_memalign",
		 mt_count(r, &f));
}

/* realloc(p, 0) frees p (glibc returns NULL): one Free of p, no Realloc with old = p and
 * size 0, and no Realloc/Malloc returning 0. */
static void test_realloc_zero_is_free(void **state)
{
	struct mt_run *r;
	const struct mt_expect *made, *freed = NULL;
	struct mt_filter f = {0};

	run_alloc_each(state, &r);
	/* the third line after begin: realloc(NULL, 33); its pointer is the one realloc'd to 0 */
	made = mt_expect_find(r->exp, r->nr_exp, "realloc", 0, 0);
	MT_CHECK(r, made && made->old == 0 && made->size == 33,
		 "side channel: no realloc(NULL, 33)");
	for (size_t i = 0; i < r->nr_exp; i++)
		if (!strcmp(r->exp[i].op, "free") && r->exp[i].addr == made->addr) {
			freed = &r->exp[i];
			break;
		}
	MT_CHECK(r, freed, "side channel: realloc(p, 0) not reported");
	MT_CHECK(r, mt_count_matching(r, made) == 1,
		 "realloc(NULL, 33) not recorded once as "
		 "Realloc with old_addr 0");
	f.type = MT_EV_FREE;
	f.pid = made->pid;
	f.by_addr = true;
	f.addr = made->addr;
	MT_CHECK(r, mt_count(r, &f) == 1, "%zu Free events of the realloc(p, 0) pointer, want 1",
		 mt_count(r, &f));
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];

		MT_CHECK(
		    r, !(ev->type == MT_EV_REALLOC && ev->old_addr == made->addr && ev->size == 0),
		    "realloc(p, 0) recorded as a Realloc of size 0");
		MT_CHECK(r, !(mt_is_heap_type(ev->type) && ev->type != MT_EV_FREE && ev->addr == 0),
			 "%s event with address 0 (size %llu)", mt_type_name(ev->type),
			 (unsigned long long)ev->size);
	}
}

/* reallocarray(NULL, 7, 9) is a Realloc of 63 bytes with no old address (size = product). */
static void test_reallocarray_product(void **state)
{
	struct mt_run *r;
	const struct mt_expect *e = NULL;

	run_alloc_each(state, &r);
	for (size_t i = 0; i < r->nr_exp; i++)
		if (!strcmp(r->exp[i].op, "realloc") && r->exp[i].size == 63)
			e = &r->exp[i];
	MT_CHECK(r, e, "side channel: no reallocarray(NULL, 7, 9)");
	MT_CHECK(r, mt_count_matching(r, e) == 1,
		 "reallocarray(NULL, 7, 9) not recorded as one "
		 "Realloc of 63 bytes at 0x%llx",
		 (unsigned long long)e->addr);
}

/* cfree is a compat symbol in glibc; when the target could call it, it is a Free. */
static void test_cfree_is_free(void **state)
{
	struct mt_run *r;
	const struct mt_expect *have, *g;
	struct mt_filter f = {.type = MT_EV_FREE, .by_addr = true};

	run_alloc_each(state, &r);
	have = mt_need_expect(r, "have_cfree", 0, 0);
	if (!have->size) {
		print_message("[ SKIP     ] this libc has no cfree\n");
		skip();
	}
	/* the target cfree()s the posix_memalign'ed block */
	g = mt_expect_find(r->exp, r->nr_exp, "aligned", 0, 2);
	MT_CHECK(r, g && g->size == 400, "side channel: no posix_memalign(.., 32, 400)");
	f.pid = g->pid;
	f.addr = g->addr;
	MT_CHECK(r, mt_count(r, &f) == 1, "%zu Free events for cfree(0x%llx), want 1",
		 mt_count(r, &f), (unsigned long long)g->addr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_each_function_event_by_event, mt_teardown),
		cmocka_unit_test_teardown(test_each_call_recorded_once, mt_teardown),
		cmocka_unit_test_teardown(test_posix_memalign_einval_no_event, mt_teardown),
		cmocka_unit_test_teardown(test_realloc_zero_is_free, mt_teardown),
		cmocka_unit_test_teardown(test_reallocarray_product, mt_teardown),
		cmocka_unit_test_teardown(test_cfree_is_free, mt_teardown),
	};

	return MT_RUN_IN_BOTH_MODES(tests);
}
