// SPDX-License-Identifier: MIT
/*
 * The interposer's side of the handoff (src/preload/preload_handoff.c, compiled in here), against
 * a server played by this test on the socket named after a made-up shared memory path: a file
 * comes back only from the process whose pid the path names (once memtrack is gone its name is
 * free, and a process of the tree may bind it), only a regular file, and only with a 0 answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <cmocka.h>
#include "../../src/preload/preload_handoff.c"
#include "common/fds.h"

enum how { SEND_FILE, SEND_PIPE, SEND_REFUSAL };

struct server {
	int lfd;
	enum how how;
	char asked[256]; /* the request it read, "" when the client left first */
};

static void *serve(void *arg)
{
	struct server *sv = arg;
	int c = accept(sv->lfd, NULL, NULL), fd = -1, p[2] = {-1, -1};
	ssize_t n;

	if (c < 0)
		return NULL;
	n = recv(c, sv->asked, sizeof(sv->asked) - 1, 0);
	sv->asked[n > 0 ? n : 0] = 0;
	if (sv->how == SEND_PIPE && !pipe(p))
		fd = p[0];
	else if (sv->how == SEND_FILE)
		fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (n > 0) /* as memtrack answers (src/track/handoff.c) */
		fds__send(c, sv->how == SEND_REFUSAL ? EPERM : 0, fd);
	if (fd >= 0)
		close(fd);
	if (p[1] >= 0)
		close(p[1]);
	close(c);
	return NULL;
}

/* Serves one request on the socket of rings (as `how` says); returns the client's fd. */
static int ask(const char *rings, enum how how, struct server *sv)
{
	struct sockaddr_un a;
	socklen_t len = pl_handoff_addr(&a, rings);
	pthread_t th;
	int fd;

	assert_true(len > 0);
	sv->how = how;
	sv->asked[0] = 0;
	sv->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(sv->lfd >= 0);
	assert_int_equal(bind(sv->lfd, (struct sockaddr *)&a, len), 0);
	assert_int_equal(listen(sv->lfd, 4), 0);
	assert_int_equal(pthread_create(&th, NULL, serve, sv), 0);
	assert_int_equal(setenv(MT_SHM_ENV, rings, 1), 0);
	fd = pl_handoff(rings);
	shutdown(sv->lfd, SHUT_RDWR); /* the server's accept returns when nobody connected */
	pthread_join(th, NULL);
	close(sv->lfd);
	return fd;
}

static void test_from_memtrack(void **state)
{
	char rings[96];
	struct server sv;
	struct stat st;
	int fd;

	(void)state;
	snprintf(rings, sizeof(rings), "/dev/shm/memtrack-%d-test%08x", (int)getpid(),
		 (unsigned)rand());
	fd = ask(rings, SEND_FILE, &sv);
	assert_string_equal(sv.asked, rings);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	close(fd);
}

/* The name says another pid: whoever holds the socket is not that memtrack */
static void test_not_from_another(void **state)
{
	char rings[96];
	struct server sv;

	(void)state;
	snprintf(rings, sizeof(rings), "/dev/shm/memtrack-%d-test%08x", (int)getpid() + 1,
		 (unsigned)rand());
	assert_int_equal(ask(rings, SEND_FILE, &sv), -1);
	assert_string_equal(sv.asked, ""); /* nothing was even asked */
}

static void test_not_a_file(void **state)
{
	char rings[96];
	struct server sv;

	(void)state;
	snprintf(rings, sizeof(rings), "/dev/shm/memtrack-%d-pipe%08x", (int)getpid(),
		 (unsigned)rand());
	assert_int_equal(ask(rings, SEND_PIPE, &sv), -1);
}

static void test_refused(void **state)
{
	char rings[96];
	struct server sv;

	(void)state;
	snprintf(rings, sizeof(rings), "/dev/shm/memtrack-%d-nope%08x", (int)getpid(),
		 (unsigned)rand());
	errno = 0;
	assert_int_equal(ask(rings, SEND_REFUSAL, &sv), -1);
	assert_int_equal(errno, 0); /* pl_handoff keeps errno */
}

/* No server at all (memtrack gone): refused at once, no wait */
static void test_nobody_there(void **state)
{
	struct timespec a, b;

	(void)state;
	assert_int_equal(setenv(MT_SHM_ENV, "/dev/shm/memtrack-1-gone", 1), 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(pl_handoff("/dev/shm/memtrack-1-gone"), -1);
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_true(b.tv_sec - a.tv_sec < 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_from_memtrack), cmocka_unit_test(test_not_from_another),
	    cmocka_unit_test(test_not_a_file),	  cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_nobody_there),
	};

	srand((unsigned)getpid());
	return cmocka_run_group_tests(tests, NULL, NULL);
}
