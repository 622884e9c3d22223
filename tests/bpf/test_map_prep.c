// SPDX-License-Identifier: MIT
/*
 * The hash maps created ahead of the load (src/track/map_prep.c): a map whose definition is
 * exactly the object's is the one the loaded object uses (same map id, no second map); one that
 * differs in any field, or that the object was resized away from, is left alone and libbpf
 * creates the object's own; a map not created changes nothing. Also that map_prep's table is
 * the object's definitions, so that a change in src/bpf/ does not silently lose the saving.
 * Root for most cases: creating maps and loading the object take CAP_BPF; the table check and
 * the not-created case run without it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "memtrack.skel.h"
#include "bpf/proc.h"
#include "track/attach.h"
#include "track/map_prep.h"
#include "track/rmap_backend.h"

#define REQUIRE_BPF()                                                                              \
	do {                                                                                       \
		if (geteuid() != 0) {                                                              \
			print_message("[ SKIP     ] needs root: creating BPF maps and loading "    \
				      "programs take CAP_BPF\n");                                  \
			skip();                                                                    \
		}                                                                                  \
	} while (0)

/* The object as a run opens it, with a small ring (several live at once in this binary). */
static struct memtrack_bpf *open_obj(void)
{
	struct memtrack_bpf *s = memtrack_bpf__open();
	struct rmap_choice none = {0};

	assert_non_null(s);
	/* the programs a run of this machine loads: not the fentry backend's */
	rmap_backend__set_autoload(s, MT_RMAP_TRACEPOINT, &none);
	attach__session_autoload(s->progs.mt_alloc_session);
	bpf_map__set_max_entries(s->maps.events, 1 << 16);
	return s;
}

static __u32 map_id(int fd)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	return info.id;
}

static int def_index(const char *name)
{
	for (int i = 0; i < map_prep_memtrack_nr; i++)
		if (!strcmp(map_prep_memtrack[i].name, name))
			return i;
	return -1;
}

/* Each entry of the table is the object's map of that name, field by field. */
static void test_table_is_the_objects(void **state)
{
	struct memtrack_bpf *s = open_obj();

	(void)state;
	assert_true(map_prep_memtrack_nr > 0 && map_prep_memtrack_nr <= MAP_PREP_MAX);
	for (int i = 0; i < map_prep_memtrack_nr; i++) {
		const struct map_prep_def *d = &map_prep_memtrack[i];
		struct bpf_map *m = bpf_object__find_map_by_name(s->obj, d->name);

		print_message("map %s\n", d->name);
		assert_non_null(m);
		assert_int_equal(bpf_map__type(m), d->type);
		assert_int_equal(bpf_map__key_size(m), d->key_size);
		assert_int_equal(bpf_map__value_size(m), d->value_size);
		assert_int_equal(bpf_map__max_entries(m), d->max_entries);
		assert_int_equal(bpf_map__map_flags(m), d->map_flags);
	}
	memtrack_bpf__destroy(s);
}

/* Matching definitions: every map handed over, and the loaded object runs on those maps. */
static void test_matching_maps_are_reused(void **state)
{
	struct memtrack_bpf *s;
	struct map_prep mp;
	__u32 ids[MAP_PREP_MAX];

	(void)state;
	REQUIRE_BPF();
	s = open_obj();
	assert_int_equal(map_prep__init(&mp, map_prep_memtrack, map_prep_memtrack_nr), 0);
	assert_int_equal(map_prep__create(&mp), 0);
	for (int i = 0; i < mp.n; i++) {
		assert_true(mp.fd[i] >= 0);
		ids[i] = map_id(mp.fd[i]);
	}
	assert_int_equal(map_prep__give(&mp, s->obj), 0);
	assert_int_equal(mp.given, (1u << mp.n) - 1);
	assert_int_equal(memtrack_bpf__load(s), 0);
	/* the object's descriptors outlive ours */
	map_prep__close(&mp);
	for (int i = 0; i < mp.n; i++) {
		struct bpf_map *m = bpf_object__find_map_by_name(s->obj, map_prep_memtrack[i].name);

		assert_non_null(m);
		assert_int_equal(map_id(bpf_map__fd(m)), ids[i]);
	}
	/* what user space does with them in a run (tracker_run.c) */
	{
		struct mt_proc zero = {0};
		__u32 pid = getpid();

		assert_int_equal(
		    bpf_map_update_elem(bpf_map__fd(s->maps.procs), &pid, &zero, BPF_ANY), 0);
	}
	memtrack_bpf__destroy(s);
}

/*
 * One field off in each of these (known_exe's definition otherwise), and the object's own
 * known_exe resized after the table was written: none is handed over, and the loaded object
 * has a map of its own, with its own definition.
 */
static void test_mismatch_falls_back_to_libbpf(void **state)
{
	const struct map_prep_def *ke = &map_prep_memtrack[def_index("known_exe")];
	struct map_prep_def defs[6];
	struct memtrack_bpf *s;
	struct bpf_map *m;
	struct map_prep mp;

	(void)state;
	REQUIRE_BPF();
	assert_true(def_index("known_exe") >= 0);
	for (int i = 0; i < 6; i++)
		defs[i] = *ke;
	defs[0].type = BPF_MAP_TYPE_PERCPU_HASH;
	defs[1].key_size *= 2;
	defs[2].value_size *= 2;
	defs[3].max_entries /= 2;
	defs[4].map_flags = 0;
	/* defs[5] is the table's: the object is resized away from it below */
	s = open_obj();
	m = s->maps.known_exe;
	assert_int_equal(bpf_map__set_max_entries(m, ke->max_entries * 2), 0);
	for (int i = 0; i < 6; i++) {
		print_message("definition %d\n", i);
		assert_int_equal(map_prep__init(&mp, &defs[i], 1), 0);
		assert_int_equal(map_prep__create(&mp), 0);
		assert_true(mp.fd[0] >= 0);
		assert_int_equal(map_prep__give(&mp, s->obj), 0);
		assert_int_equal(mp.given, 0);
		assert_true(bpf_map__fd(m) < 0); /* still libbpf's to create */
		map_prep__close(&mp);
	}
	/* one of them kept open over the load: the object's map is another */
	assert_int_equal(map_prep__init(&mp, &defs[5], 1), 0);
	assert_int_equal(map_prep__create(&mp), 0);
	assert_int_equal(map_prep__give(&mp, s->obj), 0);
	assert_int_equal(mp.given, 0);
	assert_int_equal(memtrack_bpf__load(s), 0);
	assert_true(bpf_map__fd(m) >= 0);
	assert_int_not_equal(map_id(bpf_map__fd(m)), map_id(mp.fd[0]));
	assert_int_equal(bpf_map__max_entries(m), ke->max_entries * 2);
	map_prep__close(&mp);
	memtrack_bpf__destroy(s);
}

/* Maps not created (the thread never ran, or no privilege): nothing handed over, no error. */
static void test_not_created_changes_nothing(void **state)
{
	struct memtrack_bpf *s = open_obj();
	struct map_prep mp;

	(void)state;
	assert_int_equal(map_prep__init(&mp, map_prep_memtrack, map_prep_memtrack_nr), 0);
	assert_int_equal(map_prep__give(&mp, s->obj), 0);
	assert_int_equal(mp.given, 0);
	for (int i = 0; i < mp.n; i++)
		assert_true(mp.fd[i] < 0);
	assert_true(bpf_map__fd(s->maps.procs) < 0);
	map_prep__close(&mp);
	map_prep__close(&mp); /* idempotent */
	map_prep__close(NULL);
	assert_int_equal(map_prep__init(&mp, map_prep_memtrack, MAP_PREP_MAX + 1), -EINVAL);
	assert_int_equal(map_prep__init(NULL, map_prep_memtrack, 1), -EINVAL);
	assert_int_equal(map_prep__give(&mp, NULL), -EINVAL);
	memtrack_bpf__destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_is_the_objects),
	    cmocka_unit_test(test_matching_maps_are_reused),
	    cmocka_unit_test(test_mismatch_falls_back_to_libbpf),
	    cmocka_unit_test(test_not_created_changes_nothing),
	};

	libbpf_set_print(NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
