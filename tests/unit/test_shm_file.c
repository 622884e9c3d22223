// SPDX-License-Identifier: MIT
/*
 * The sweep of the interposer's shared files (src/track/shm_file.c): a file nobody locks goes
 * when the pid in its name is gone or when it is older than a minute, whatever its pid (a
 * memtrack killed in a pid namespace names its files with pid 1, alive here); a locked file
 * always stays, and so does a fresh unlocked one whose pid lives (the instant between a
 * file's creation and its lock).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "track/shm_file.h"

/* Makes /dev/shm/memtrack-<pid>-unit<our pid><tag>, last modified age_s ago; its fd, open. */
static int make_file(char *path, size_t cap, int pid, const char *tag, int age_s)
{
	struct timespec ts[2];
	int fd;

	snprintf(path, cap, "/dev/shm/memtrack-%d-unit%d%s", pid, (int)getpid(), tag);
	unlink(path);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= age_s;
	ts[1] = ts[0];
	assert_int_equal(futimens(fd, ts), 0);
	return fd;
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* a pid that is surely gone: a child of ours, reaped */
static int dead_pid(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return (int)pid;
}

static void test_old_unlocked_live_pid_removed(void **state)
{
	char path[128];
	int fd = make_file(path, sizeof(path), 1, "old", 120);

	(void)state;
	close(fd);
	shm_file__sweep();
	assert_false(exists(path));
}

static void test_fresh_unlocked_live_pid_kept(void **state)
{
	char path[128];
	int fd = make_file(path, sizeof(path), 1, "fresh", 0);
	bool kept;

	(void)state;
	close(fd);
	shm_file__sweep();
	kept = exists(path);
	unlink(path);
	assert_true(kept);
}

static void test_old_locked_kept(void **state)
{
	char path[128];
	int fd = make_file(path, sizeof(path), dead_pid(), "locked", 3600);
	bool kept;

	(void)state;
	assert_int_equal(flock(fd, LOCK_SH | LOCK_NB), 0); /* as shm_file__create holds it */
	shm_file__sweep();
	kept = exists(path);
	unlink(path);
	close(fd);
	assert_true(kept);
}

static void test_fresh_unlocked_dead_pid_removed(void **state)
{
	char path[128];
	int fd = make_file(path, sizeof(path), dead_pid(), "dead", 0);

	(void)state;
	close(fd);
	shm_file__sweep();
	assert_false(exists(path));
}

/* what shm_file__create makes stays while its lock is held, and goes once closed and old */
static void test_created_file(void **state)
{
	char path[128];
	void *map = NULL;
	int lock_fd = -1;
	struct timespec ts[2] = {{.tv_nsec = UTIME_NOW}, {.tv_sec = 1000}};

	(void)state;
	assert_int_equal(shm_file__create(path, sizeof(path), "unit", 4096, (uid_t)-1, (gid_t)-1,
					  &map, &lock_fd),
			 0);
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0); /* 1970: very old */
	shm_file__sweep();
	assert_true(exists(path));
	/* the mapping holds the open file, and so the lock, as much as lock_fd does */
	assert_int_equal(munmap(map, 4096), 0);
	close(lock_fd);
	/* its pid (ours) lives: only the age lets it go */
	shm_file__sweep();
	assert_false(exists(path));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_old_unlocked_live_pid_removed),
	    cmocka_unit_test(test_fresh_unlocked_live_pid_kept),
	    cmocka_unit_test(test_old_locked_kept),
	    cmocka_unit_test(test_fresh_unlocked_dead_pid_removed),
	    cmocka_unit_test(test_created_file),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
