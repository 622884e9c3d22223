// SPDX-License-Identifier: MIT
/*
 * Root tests: a tracked process held at one of memtrack's stops (exec of an executable not
 * inspected yet, return of dlopen) is resumed when memtrack dies, SIGKILL included.
 * build/targets/stop_hold forks a child that meets the stop; memtrack is stopped (SIGSTOP)
 * before that, so nobody answers the stop, then killed (SIGKILL). The child must finish and
 * the root, which waits for it, must exit 0. This test process is a child subreaper, so the
 * root (memtrack's child) is reparented to it and can be waited for.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include "../lib/mt_check.h"
#include "../lib/mt_proc_state.h"
#include "preload/shm_abi.h"

#define EXPECT_FD 200
/* memtrack's start (BPF load and attach) on a loaded machine or in an emulated guest */
#define START_TIMEOUT_MS 60000
/* From the go to the child's stop: a fork and an exec (or a dlopen) of small files, a few ms. */
#define STOP_TIMEOUT_MS 10000
/*
 * From memtrack's death to the root's exit: the watchdog wakes when memtrack's fds are closed
 * (at its exit), settles the ring for WATCHDOG_SETTLE_MS (src/track/watchdog.c, 20 ms) and
 * sends SIGCONT; the child then finishes its exec of exit_code or its dlopen (ms) and the root
 * reaps it. 5 s is two orders of magnitude above that, for a loaded 2-core machine.
 */
#define RESUME_TIMEOUT_MS 5000

struct hold {
	pid_t memtrack, root, child;
	int chan, go;
	char buf[4096];
	size_t len;
	char dir[64];
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads the side channel until a line "OP ..." arrived; its SIZE field, or -1 on timeout. */
static long long wait_line(struct hold *h, const char *op, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;
	size_t oplen = strlen(op);

	for (;;) {
		struct pollfd pf = {h->chan, POLLIN, 0};
		char *line = h->buf, *nl;
		ssize_t n;

		while ((nl = memchr(line, '\n', h->len - (size_t)(line - h->buf)))) {
			unsigned long long size;

			if (!strncmp(line, op, oplen) && line[oplen] == ' ' &&
			    sscanf(line, "%*s %*d %*d %*u %*x %*x %llu", &size) == 1)
				return (long long)size;
			line = nl + 1;
		}
		if (now_ms() >= end)
			return -1;
		if (poll(&pf, 1, 50) <= 0)
			continue;
		if (h->len + 1 >= sizeof(h->buf))
			return -1;
		n = read(h->chan, h->buf + h->len, sizeof(h->buf) - 1 - h->len);
		if (n <= 0)
			return -1;
		h->len += (size_t)n;
	}
}

/* Waits (we are a subreaper) for pid to exit; its status, or -1 on timeout. */
static int wait_exit(pid_t pid, int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;
	int status;

	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			return status;
		if (w < 0 && errno != EINTR)
			return -1;
		if (now_ms() >= end)
			return -1;
		usleep(5000);
	}
}

static void hold_start(struct hold *h, const char *mode)
{
	int chan[2], go[2];
	char out[96], log[96];

	memset(h, 0, sizeof(*h));
	snprintf(h->dir, sizeof(h->dir), "/tmp/mt_stop.XXXXXX");
	assert_non_null(mkdtemp(h->dir));
	snprintf(out, sizeof(out), "%s/out", h->dir);
	snprintf(log, sizeof(log), "%s/memtrack.log", h->dir);
	assert_int_equal(pipe2(chan, O_CLOEXEC), 0);
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	fflush(NULL);
	h->memtrack = fork();
	assert_true(h->memtrack >= 0);
	if (h->memtrack == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(chan[1], EXPECT_FD);
		setenv("MT_EXPECT_FD", "200", 1);
		dup2(go[0], 0);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(mt_memtrack(), "memtrack", "track", "-q", "-o", out, "--",
		      mt_target("stop_hold"), mode, (char *)NULL);
		_exit(126);
	}
	close(chan[1]);
	close(go[0]);
	h->chan = chan[0];
	h->go = go[1];
}

static void hold_log(const struct hold *h)
{
	char path[96], buf[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/memtrack.log", h->dir);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = 0;
		fprintf(stderr, "---- memtrack output:\n%s\n", buf);
	}
}

/* Whatever happened: nothing of the run stays behind, stopped or not. */
static void hold_end(struct hold *h)
{
	char cmd[128];

	if (h->memtrack > 0) {
		kill(h->memtrack, SIGKILL);
		waitpid(h->memtrack, NULL, 0);
	}
	for (pid_t p, *pp = &h->child; pp; pp = pp == &h->child ? &h->root : NULL) {
		p = *pp;
		if (p > 0) {
			kill(p, SIGKILL);
			kill(p, SIGCONT);
			waitpid(p, NULL, 0);
		}
	}
	/* the watchdog, reparented to us: it exits by itself once memtrack is gone */
	wait_exit(-1, 1000);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	close(h->chan);
	close(h->go);
	if (!getenv("MT_TEST_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->dir);
		if (system(cmd))
			fprintf(stderr, "cannot remove %s\n", h->dir);
	}
}

/*
 * Until memtrack's control link on the interposer is live (the shared memory's ctl_live): the
 * command runs before it is made (src/track/early_links.h), and a dlopen announced before it
 * waits in the interposer, not at memtrack's stop, so a memtrack stopped before the link
 * would make the dlopen case test nothing. True at once without the interposer.
 */
static bool wait_ctl_live(pid_t pid, int timeout_ms)
{
	char path[64], env[16384], *shm = NULL;
	const struct mt_shm_hdr *h;
	uint64_t end = now_ms() + (uint64_t)timeout_ms;
	bool live = false;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, env, sizeof(env) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n > 0)
		env[n] = 0;
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(env + i) + 1) {
		if (!strncmp(env + i, MT_SHM_ENV "=", sizeof(MT_SHM_ENV)))
			shm = env + i + sizeof(MT_SHM_ENV);
	}
	if (!shm)
		return true;
	fd = open(shm, O_RDONLY | O_CLOEXEC);
	h = fd >= 0 ? mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
	if (fd >= 0)
		close(fd);
	if (h == MAP_FAILED)
		return false;
	while (!(live = __atomic_load_n(&h->ctl_live, __ATOMIC_ACQUIRE)) && now_ms() < end)
		usleep(1000);
	munmap((void *)h, 4096);
	return live;
}

static void check_killed_at_stop(const char *mode)
{
	struct hold h;
	long long v;
	int status;
	char st = 0;
	uint64_t end;
	const char *why = NULL;

	mt_need_file(mt_memtrack());
	mt_need_file(mt_target("stop_hold"));
	mt_need_file(mt_target("exit_code"));
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
	hold_start(&h, mode);

	v = wait_line(&h, "pid", START_TIMEOUT_MS);
	if (v < 0) {
		why = "the target never reported its start";
		goto out;
	}
	/* the pid line's own pid field is what we need, the size is 0: read it from the buffer */
	sscanf(strstr(h.buf, "pid "), "pid %d", &h.root);
	if (!wait_ctl_live(h.root, START_TIMEOUT_MS)) {
		why = "memtrack's control link on the interposer never went live";
		goto out;
	}
	kill(h.memtrack, SIGSTOP);
	if (waitpid(h.memtrack, &status, WUNTRACED) != h.memtrack || !WIFSTOPPED(status)) {
		why = "memtrack did not stop";
		goto out;
	}
	if (write(h.go, "g", 1) != 1) {
		why = "cannot release the target";
		goto out;
	}
	v = wait_line(&h, "fork", STOP_TIMEOUT_MS);
	if (v <= 0) {
		why = "the target never reported its child";
		goto out;
	}
	h.child = (pid_t)v;
	for (end = now_ms() + STOP_TIMEOUT_MS; now_ms() < end; usleep(2000)) {
		st = mt_proc_state(h.child);
		if (st == 'T')
			break;
	}
	if (st != 'T') {
		why = "the child never stopped at memtrack's stop (the test tests nothing)";
		goto out;
	}
	kill(h.memtrack, SIGKILL);
	waitpid(h.memtrack, NULL, 0);
	h.memtrack = 0;

	status = wait_exit(h.root, RESUME_TIMEOUT_MS);
	if (status == -1) {
		st = mt_proc_state(h.child);
		fprintf(stderr, "child %d state '%c', root %d state '%c'\n", h.child, st ? st : '-',
			h.root, mt_proc_state(h.root) ? mt_proc_state(h.root) : '-');
		why = "the root did not exit after memtrack's death: its child stayed stopped";
		goto out;
	}
	h.root = 0;
	h.child = 0; /* reaped by the root */
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		why = "the root did not exit 0 (its child failed)";
	else if (wait_line(&h, "reaped", 1000) != 0)
		why = "the child did not exit 0";
out:
	if (why)
		hold_log(&h);
	hold_end(&h);
	if (why)
		fail_msg("%s: %s", mode, why);
}

static void test_kill_at_exec_stop(void **state)
{
	(void)state;
	MT_REQUIRE_ROOT();
	check_killed_at_stop("exec");
}

static void test_kill_at_dlopen_stop(void **state)
{
	(void)state;
	MT_REQUIRE_ROOT();
	check_killed_at_stop("dlopen");
}

/*
 * A normal run leaves nothing behind: once memtrack has exited, its watchdog (told the run
 * ended cleanly, watchdog__done; else woken by EOF, then WATCHDOG_SETTLE_MS of empty ring) and
 * its detacher (SIGKILL at memtrack's exit, then
 * the links' grace periods, tens of ms) exit too. Both are reparented to us, the subreaper:
 * we must run out of children within RESUME_TIMEOUT_MS.
 */
static void test_nothing_lingers(void **state)
{
	char dir[64], out[96];
	uint64_t end;
	pid_t pid, w;
	int status, others = 0;

	(void)state;
	MT_REQUIRE_ROOT();
	mt_need_file(mt_memtrack());
	mt_need_file(mt_target("exit_code"));
	assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		; /* what earlier tests left */
	snprintf(dir, sizeof(dir), "/tmp/mt_stop.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(out, sizeof(out), "%s/out", dir);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl(mt_memtrack(), "memtrack", "track", "-q", "-o", out, "--",
		      mt_target("exit_code"), "0", (char *)NULL);
		_exit(126);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (end = now_ms() + RESUME_TIMEOUT_MS;; usleep(5000)) {
		w = waitpid(-1, NULL, WNOHANG);
		if (w > 0)
			others++;
		else if (w < 0 && errno == ECHILD)
			break;
		if (now_ms() >= end)
			fail_msg("a process of memtrack's still runs %d ms after its exit",
				 RESUME_TIMEOUT_MS);
	}
	snprintf(out, sizeof(out), "rm -rf '%s'", dir);
	if (system(out))
		fprintf(stderr, "cannot remove %s\n", dir);
	/* the watchdog at least (the detacher too, unless it was gone before memtrack) */
	assert_true(others >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kill_at_exec_stop),
		cmocka_unit_test(test_kill_at_dlopen_stop),
		cmocka_unit_test(test_nothing_lingers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
