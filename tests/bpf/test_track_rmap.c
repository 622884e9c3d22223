// SPDX-License-Identifier: MIT
/*
 * Root tests: --rmap (page events). build/targets/rss_touch maps 64 MiB, touches every page,
 * then unmaps it: the anon Rmap events inside the mapping must add up to its 16384 pages on
 * the way up (within 5%) and come back to about zero after the munmap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "../lib/mt_check.h"

static void test_rmap_touch_and_unmap(void **state)
{
	struct mt_run *r = mt_new_run(state);
	static const char *const opts[] = {"--rmap", NULL};
	struct mt_run_opts o = {.track_opts = opts};
	const struct mt_expect *t;
	const char *backend;
	int64_t up = 0, down = 0, pages;
	size_t outside = 0, n = 0;

	MT_REQUIRE_ROOT();
	mt_track_ok(r, &o, MT_TARGET_ARGV("rss_touch", "64"), 0);
	backend = json_string_value(mt_json(r, "mechanisms.rmap_backend"));
	MT_CHECK(r, backend && strcmp(backend, "off"), "manifest: rmap_backend is %s with --rmap",
		 backend ? backend : "missing");
	t = mt_need_expect(r, "touch", 0, 0);
	pages = (int64_t)(t->size / 4096);
	for (size_t i = 0; i < r->nr_ev; i++) {
		const struct mt_event *ev = &r->ev[i];
		int64_t d = (int64_t)ev->size;

		if (ev->type != MT_EV_RMAP || ev->aux != MT_RSS_ANON || ev->pid != r->root_pid)
			continue;
		n++;
		if (ev->addr < t->addr || ev->addr >= t->addr + t->size) {
			outside++;
			continue;
		}
		if (d > 0)
			up += d;
		else
			down += d;
	}
	MT_CHECK(r, n > 0, "no anon Rmap events");
	MT_CHECK(r, up >= pages * 95 / 100 && up <= pages * 105 / 100,
		 "anon Rmap increases inside the mapping: %lld pages, want %lld +-5%% "
		 "(%zu anon events outside it)",
		 (long long)up, (long long)pages, outside);
	MT_CHECK(r, up + down >= -pages / 20 && up + down <= pages / 20,
		 "after munmap the mapping still holds %lld pages by Rmap (up %lld, down %lld)",
		 (long long)(up + down), (long long)up, (long long)down);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_rmap_touch_and_unmap, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
