// SPDX-License-Identifier: MIT
/*
 * Maps created ahead of the load (map_prep.h). The maps have no BTF of their own (libbpf would
 * give them the object's key and value types): none of these values holds a field the kernel
 * needs BTF for (spin lock, timer, kptr), so the verifier and the programs see the same maps.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf/proc.h"
#include "common/log.h"
#include "track/map_prep.h"

/*
 * The definitions in src/bpf/ (maps.bpf.h, rss.bpf.h, process.bpf.c). A change there that is
 * not made here only costs the early creation of that map (map_prep__give compares);
 * test_map_prep checks that this table is the object's.
 */
const struct map_prep_def map_prep_memtrack[] = {
    {"procs", BPF_MAP_TYPE_HASH, sizeof(uint32_t), sizeof(struct mt_proc), MT_MAX_PROCS,
     BPF_F_NO_PREALLOC},
    {"mm_owner", BPF_MAP_TYPE_HASH, sizeof(uint64_t), sizeof(uint32_t), MT_MAX_PROCS,
     BPF_F_NO_PREALLOC},
    /* struct mt_rss_shadow: one int32_t per member, per CPU */
    {"rss_shadow", BPF_MAP_TYPE_PERCPU_HASH, sizeof(uint32_t), sizeof(int32_t) * MT_RSS_NR,
     MT_MAX_PROCS, BPF_F_NO_PREALLOC},
    /* key: mt_exe_key (proc.h), value unused */
    {"known_exe", BPF_MAP_TYPE_HASH, sizeof(uint64_t), sizeof(uint8_t), 4096, BPF_F_NO_PREALLOC},
};
const int map_prep_memtrack_nr = sizeof(map_prep_memtrack) / sizeof(map_prep_memtrack[0]);

int map_prep__init(struct map_prep *mp, const struct map_prep_def *defs, int n)
{
	if (!mp || n < 0 || n > MAP_PREP_MAX || (n && !defs))
		return -EINVAL;
	mp->defs = defs;
	mp->n = n;
	mp->given = 0;
	for (int i = 0; i < n; i++)
		mp->fd[i] = -EAGAIN; /* not created yet */
	return 0;
}

int map_prep__create(struct map_prep *mp)
{
	int err = 0;

	for (int i = 0; i < mp->n; i++) {
		const struct map_prep_def *d = &mp->defs[i];
		LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = d->map_flags);

		/* the object's name: bpf_map__reuse_fd renames the object's map after the
		 * kernel's, and later instances find the map by that name */
		mp->fd[i] = bpf_map_create(d->type, d->name, d->key_size, d->value_size,
					   d->max_entries, &opts);
		if (mp->fd[i] < 0) {
			mp->fd[i] = -errno;
			if (!err)
				err = mp->fd[i];
		}
	}
	return err;
}

/* Whether map m, as the object will create it, is exactly d: then ours can stand for it. */
static bool map_prep__matches(const struct bpf_map *m, const struct map_prep_def *d)
{
	return bpf_map__type(m) == d->type && bpf_map__key_size(m) == d->key_size &&
	       bpf_map__value_size(m) == d->value_size &&
	       bpf_map__max_entries(m) == d->max_entries && bpf_map__map_flags(m) == d->map_flags;
}

int map_prep__give(struct map_prep *mp, struct bpf_object *obj)
{
	if (!mp || !obj)
		return -EINVAL;
	mp->given = 0;
	for (int i = 0; i < mp->n; i++) {
		const struct map_prep_def *d = &mp->defs[i];
		struct bpf_map *m = bpf_object__find_map_by_name(obj, d->name);

		if (mp->fd[i] < 0 || !m)
			continue; /* libbpf creates it (or the object has no such map) */
		if (!map_prep__matches(m, d)) {
			log__debug(LOG_VERBOSE,
				   "map '%s' created early differs from the object's: "
				   "libbpf creates it",
				   d->name);
			continue;
		}
		/* on failure the object's map is left as it was: libbpf creates it */
		if (!bpf_map__reuse_fd(m, mp->fd[i]))
			mp->given |= 1u << i;
	}
	return 0;
}

void map_prep__close(struct map_prep *mp)
{
	if (!mp)
		return;
	for (int i = 0; i < mp->n; i++) {
		if (mp->fd[i] >= 0)
			close(mp->fd[i]);
		mp->fd[i] = -EBADF;
	}
}
