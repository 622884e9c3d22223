// SPDX-License-Identifier: MIT
/*
 * A kept load's maps put back as a fresh load has them (prog_cache__reset, prog_cache.h), by
 * map type: what the object's maps hold is none of this file's business.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "track/prog_cache.h"

/* Empties a hash map. */
static int reset_hash(int fd, uint32_t key_size)
{
	unsigned char key[64];

	if (key_size > sizeof(key))
		return -E2BIG;
	while (!bpf_map_get_next_key(fd, NULL, key))
		if (bpf_map_delete_elem(fd, key))
			return -errno;
	return errno == ENOENT ? 0 : -errno;
}

/* Zeroes every element of an array (per-CPU: every CPU's copy). */
static int reset_array(int fd, const struct bpf_map_info *mi, bool percpu)
{
	size_t sz = percpu ? ((mi->value_size + 7) & ~7u) * (size_t)libbpf_num_possible_cpus()
			   : mi->value_size;
	void *zero = calloc(1, sz);
	int err = 0;

	if (!zero)
		return -ENOMEM;
	for (uint32_t k = 0; k < mi->max_entries && !err; k++)
		if (bpf_map_update_elem(fd, &k, zero, BPF_ANY))
			err = -errno;
	free(zero);
	return err;
}

/* The ring's reader at its writer: records a run cut short left are not the next one's. */
static int reset_ring(int fd)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned long *cons = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	const unsigned long *prod = mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, pg);
	int err = cons == MAP_FAILED || prod == MAP_FAILED ? -errno : 0;

	if (!err)
		__atomic_store_n(cons, __atomic_load_n(prod, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
	if (cons != MAP_FAILED)
		munmap(cons, pg);
	if (prod != MAP_FAILED)
		munmap((void *)prod, pg);
	return err;
}

int prog_cache__reset(struct prog_cache *c)
{
	for (int i = 0; c && c->hit && i < c->n; i++) {
		struct bpf_map_info mi;
		uint32_t len = sizeof(mi);
		int fd = c->obj[i].fd, err = 0;

		if (c->obj[i].prog)
			continue;
		memset(&mi, 0, sizeof(mi));
		if (bpf_obj_get_info_by_fd(fd, &mi, &len))
			return -errno;
		switch (mi.type) {
		case BPF_MAP_TYPE_HASH:
		case BPF_MAP_TYPE_PERCPU_HASH:
		case BPF_MAP_TYPE_LRU_HASH:
		case BPF_MAP_TYPE_LRU_PERCPU_HASH:
			err = reset_hash(fd, mi.key_size);
			break;
		case BPF_MAP_TYPE_ARRAY:
		case BPF_MAP_TYPE_PERCPU_ARRAY:
			if (mi.map_flags & BPF_F_RDONLY_PROG)
				break; /* .rodata: frozen, part of the key */
			if (strstr(c->obj[i].name, ".data"))
				return -ENOTSUP; /* initial values we do not have */
			err = reset_array(fd, &mi, mi.type == BPF_MAP_TYPE_PERCPU_ARRAY);
			break;
		case BPF_MAP_TYPE_RINGBUF:
			err = reset_ring(fd);
			break;
		case BPF_MAP_TYPE_PROG_ARRAY:	/* programs: the same ones */
		case BPF_MAP_TYPE_TASK_STORAGE: /* a task's, freed with it; new tasks start empty */
			break;
		default:
			return -ENOTSUP;
		}
		if (err)
			return err;
	}
	return 0;
}
