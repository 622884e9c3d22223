// SPDX-License-Identifier: MIT
/*
 * The cache of inert files between runs (src/track/inert_cache.c): what a run writes is what
 * the next one copies into the shared memory, as a table the interposer searches
 * (mt_shm_seen_has); a run that found nothing new leaves the file as it is; this run's files
 * come first and the cache keeps INERT_CACHE_MAX at most; a file others may write, or the
 * cache turned off, gives nothing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "track/inert_cache.h"

static char dir[64], path[128];

static struct mt_shm_seen file_n(uint64_t n)
{
	return (struct mt_shm_seen){.dev = 2049,
				    .ino = 1000 + n,
				    .size = 4096 * n,
				    .mtime_ns = 1700000000000000000ull + n,
				    .ctime_ns = 1700000000000000001ull + n};
}

/* The cache copied as a run does: into a file at an offset; the table (*nr entries) mapped. */
static struct mt_shm_seen *copy_out(uint32_t *nr, int *err)
{
	size_t len = 4096 + MT_SHM_KEPT_MAX * sizeof(struct mt_shm_seen);
	int fd = memfd_create("kept", 0);
	void *m;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)len), 0);
	*err = inert_cache__copy(fd, 4096, MT_SHM_KEPT_MAX, nr);
	m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(m != MAP_FAILED);
	return (struct mt_shm_seen *)((char *)m + 4096);
}

static void unmap(struct mt_shm_seen *t)
{
	munmap((char *)t - 4096, 4096 + MT_SHM_KEPT_MAX * sizeof(struct mt_shm_seen));
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/memtrack-unit-inert-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/inert-files", dir);
	setenv("MEMTRACK_INERT_CACHE", path, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	rmdir(dir);
	unsetenv("MEMTRACK_INERT_CACHE");
	return 0;
}

static void test_round_trip(void **state)
{
	struct mt_shm_seen add[3] = {file_n(1), file_n(2), file_n(3)}, more = file_n(4), other;
	struct mt_shm_seen *t;
	struct stat a, b;
	uint32_t nr;
	int err;

	(void)state;
	t = copy_out(&nr, &err);
	assert_int_equal(err, -ENOENT); /* none yet */
	assert_int_equal(nr, 0);
	unmap(t);
	inert_cache__update(add, 3);
	t = copy_out(&nr, &err);
	assert_int_equal(err, 0);
	assert_true(nr >= 6 && !(nr & (nr - 1)));
	for (int i = 0; i < 3; i++)
		assert_true(mt_shm_seen_has(t, nr, &add[i]));
	other = add[0];
	other.ctime_ns++; /* the same inode, changed since: another file */
	assert_false(mt_shm_seen_has(t, nr, &other));
	assert_false(mt_shm_seen_has(t, nr, &more));
	unmap(t);
	/* nothing new: not written again (a new file would be another inode: rename) */
	assert_int_equal(stat(path, &a), 0);
	inert_cache__update(add + 1, 2);
	assert_int_equal(stat(path, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	/* one new: the union */
	inert_cache__update(&more, 1);
	t = copy_out(&nr, &err);
	assert_int_equal(err, 0);
	for (int i = 0; i < 3; i++)
		assert_true(mt_shm_seen_has(t, nr, &add[i]));
	assert_true(mt_shm_seen_has(t, nr, &more));
	unmap(t);
}

static void test_cap_keeps_this_run(void **state)
{
	size_t n = INERT_CACHE_MAX + 100, found = 0;
	struct mt_shm_seen *add = calloc(n, sizeof(*add)), old = file_n(999999), *t;
	uint32_t nr;
	int err;

	(void)state;
	assert_non_null(add);
	inert_cache__update(&old, 1);
	for (size_t i = 0; i < n; i++)
		add[i] = file_n(i + 1);
	inert_cache__update(add, n);
	t = copy_out(&nr, &err);
	assert_int_equal(err, 0);
	assert_true(nr <= MT_SHM_KEPT_MAX);
	for (size_t i = 0; i < n; i++)
		found += mt_shm_seen_has(t, nr, &add[i]);
	assert_int_equal(found, INERT_CACHE_MAX);
	assert_true(mt_shm_seen_has(t, nr, &add[0])); /* the first of this run's */
	assert_false(mt_shm_seen_has(t, nr, &old));   /* the older one went */
	unmap(t);
	free(add);
}

static void test_untrusted_or_off(void **state)
{
	struct mt_shm_seen f = file_n(7), *t;
	uint32_t nr;
	int err;

	(void)state;
	inert_cache__update(&f, 1);
	assert_int_equal(chmod(path, 0666), 0);
	t = copy_out(&nr, &err);
	assert_int_equal(err, -ENOENT);
	assert_int_equal(nr, 0);
	unmap(t);
	assert_int_equal(chmod(path, 0644), 0);
	setenv("MEMTRACK_INERT_CACHE", "0", 1);
	t = copy_out(&nr, &err);
	assert_int_equal(err, -ENOENT);
	unmap(t);
	setenv("MEMTRACK_INERT_CACHE", path, 1);
	t = copy_out(&nr, &err);
	assert_int_equal(err, 0);
	assert_true(mt_shm_seen_has(t, nr, &f));
	unmap(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cap_keeps_this_run, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_untrusted_or_off, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
