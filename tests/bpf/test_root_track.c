// SPDX-License-Identifier: MIT
/*
 * Root tests of `memtrack track` end to end: run build/memtrack on tests/targets workloads,
 * decode the artifact and the manifest, and match events one by one against what the target
 * says it did on $MT_EXPECT_FD. Skipped (with the reason) when not root.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "artifact/artifact.h"

struct run {
	char dir[64];
	int status; /* memtrack's exit status */
	char expect[16384]; /* what the target reported */
	struct mt_event *ev;
	size_t nr;
	json_t *manifest;
};

static void skip_unless_root(void)
{
	if (geteuid() != 0) {
		print_message("needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN): sudo make check\n");
		skip();
	}
}

/* Runs `build/memtrack track -q -o DIR [extra] -- argv...` and loads everything it wrote. */
static void run_track(struct run *r, const char *extra, char *const argv[])
{
	char *args[32];
	int pipefd[2], n = 0, st;
	size_t got = 0;
	ssize_t k;
	pid_t pid;
	DIR *d;
	struct dirent *de;

	memset(r, 0, sizeof(*r));
	strcpy(r->dir, "/tmp/memtrack-root-XXXXXX");
	assert_non_null(mkdtemp(r->dir));
	assert_int_equal(pipe(pipefd), 0);
	args[n++] = "build/memtrack";
	args[n++] = "track";
	args[n++] = "-q";
	args[n++] = "-o";
	args[n++] = r->dir;
	if (extra)
		args[n++] = (char *)extra;
	args[n++] = "--";
	for (int i = 0; argv[i]; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char fdnum[16];

		close(pipefd[0]);
		snprintf(fdnum, sizeof(fdnum), "%d", pipefd[1]);
		setenv("MT_EXPECT_FD", fdnum, 1);
		execv(args[0], args);
		_exit(99);
	}
	close(pipefd[1]);
	while ((k = read(pipefd[0], r->expect + got, sizeof(r->expect) - 1 - got)) > 0)
		got += k;
	close(pipefd[0]);
	waitpid(pid, &st, 0);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);

	d = opendir(r->dir);
	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[512];

		snprintf(path, sizeof(path), "%s/%s", r->dir, de->d_name);
		if (strstr(de->d_name, ARTIFACT_SUFFIX)) {
			struct artifact_reader *rd;
			struct mt_event e;
			size_t cap = 0;

			assert_int_equal(artifact_reader__open(&rd, path), 0);
			while (artifact_reader__next(rd, &e) == 1) {
				if (r->nr == cap) {
					cap = cap ? cap * 2 : 1024;
					r->ev = realloc(r->ev, cap * sizeof(*r->ev));
					assert_non_null(r->ev);
				}
				r->ev[r->nr++] = e;
			}
			artifact_reader__free(rd);
		} else if (strstr(de->d_name, ".memtrack.json")) {
			r->manifest = json_load_file(path, 0, NULL);
		}
	}
	closedir(d);
}

static void run_free(struct run *r)
{
	char cmd[128];

	free(r->ev);
	json_decref(r->manifest);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", r->dir);
	assert_int_equal(system(cmd), 0);
}

static size_t count(const struct run *r, uint32_t type, uint64_t addr, int64_t size)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nr; i++)
		if (r->ev[i].type == type && (!addr || r->ev[i].addr == addr) &&
		    (size < 0 || r->ev[i].size == (uint64_t)size))
			n++;
	return n;
}

static const struct mt_event *find(const struct run *r, uint32_t type, uint64_t addr)
{
	for (size_t i = 0; i < r->nr; i++)
		if (r->ev[i].type == type && r->ev[i].addr == addr)
			return &r->ev[i];
	return NULL;
}

static json_int_t mget(const struct run *r, const char *obj, const char *key)
{
	json_t *o = obj ? json_object_get(r->manifest, obj) : r->manifest;

	return json_integer_value(json_object_get(o, key));
}

static void assert_complete(const struct run *r)
{
	assert_non_null(r->manifest);
	assert_true(json_is_true(json_object_get(r->manifest, "complete")));
	assert_int_equal(mget(r, "drops", "total"), 0);
}

static void test_libc_event_by_event(void **state)
{
	char *argv[] = {"build/targets/mt_target", "libc", NULL};
	struct run r;
	char *line, *save = NULL;
	int checked = 0;

	(void)state;
	skip_unless_root();
	run_track(&r, NULL, argv);
	assert_int_equal(r.status, 0);
	assert_complete(&r);
	for (line = strtok_r(r.expect, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		void *a = NULL, *b = NULL;
		unsigned long sz = 0;
		const struct mt_event *e;

		if (sscanf(line, "malloc %p %lu", &a, &sz) == 2) {
			assert_int_equal(count(&r, MT_EV_MALLOC, (uint64_t)a, sz), 1);
		} else if (sscanf(line, "calloc %p %lu", &a, &sz) == 2) {
			assert_int_equal(count(&r, MT_EV_CALLOC, (uint64_t)a, sz), 1);
		} else if (sscanf(line, "realloc %p 0 %lu", &a, &sz) == 2) {
			e = find(&r, MT_EV_REALLOC, (uint64_t)a);
			assert_non_null(e);
			assert_int_equal(e->size, sz);
			assert_int_equal(e->old_addr, 0);
			/* realloc(NULL, n) calls malloc inside glibc: not a second event */
			assert_int_equal(count(&r, MT_EV_MALLOC, (uint64_t)a, -1), 0);
		} else if (sscanf(line, "realloc %p %p %lu", &a, &b, &sz) == 3) {
			e = find(&r, MT_EV_REALLOC, (uint64_t)a);
			assert_non_null(e);
			assert_int_equal(e->size, sz);
			assert_int_equal(e->old_addr, (uint64_t)b);
		} else if (sscanf(line, "aligned %p %lu", &a, &sz) == 2) {
			assert_int_equal(count(&r, MT_EV_ALIGNED_ALLOC, (uint64_t)a, sz), 1);
		} else if (sscanf(line, "free %p", &a) == 1) {
			assert_int_equal(count(&r, MT_EV_FREE, (uint64_t)a, -1), 1);
		} else if (!strncmp(line, "einval", 6)) {
			/* posix_memalign(align 3, 500) failed: nothing was allocated */
			assert_int_equal(count(&r, MT_EV_ALIGNED_ALLOC, 0, 500), 0);
		} else {
			fail_msg("unexpected line from the target: %s", line);
		}
		checked++;
	}
	assert_int_equal(checked, 18);
	/* free(NULL) is no event */
	for (size_t i = 0; i < r.nr; i++)
		if (r.ev[i].type == MT_EV_FREE)
			assert_true(r.ev[i].addr != 0);
	run_free(&r);
}

static void test_cxx_counted_once(void **state)
{
	char *argv[] = {"build/targets/mt_target_cxx", NULL};
	struct run r;
	char *line, *save = NULL;
	int n = 0;

	(void)state;
	skip_unless_root();
	run_track(&r, NULL, argv);
	assert_int_equal(r.status, 0);
	assert_complete(&r);
	for (line = strtok_r(r.expect, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		void *a;
		unsigned long sz;
		uint64_t addr;

		if (sscanf(line, "new %p %lu", &a, &sz) == 2) {
			addr = (uint64_t)a;
			/* exactly one allocation event at that address, of that size */
			assert_int_equal(count(&r, MT_EV_MALLOC, addr, sz), 1);
			assert_int_equal(count(&r, MT_EV_MALLOC, addr, -1) +
						 count(&r, MT_EV_ALIGNED_ALLOC, addr, -1),
					 1);
		} else if (sscanf(line, "aligned %p %lu", &a, &sz) == 2) {
			assert_int_equal(count(&r, MT_EV_ALIGNED_ALLOC, (uint64_t)a, sz), 1);
		} else if (sscanf(line, "delete %p", &a) == 1) {
			assert_int_equal(count(&r, MT_EV_FREE, (uint64_t)a, -1), 1);
		}
		n++;
	}
	assert_int_equal(n, 8);
	run_free(&r);
}

static void test_threads(void **state)
{
	const char *modes[] = {"threads", "leader-exit"};

	(void)state;
	skip_unless_root();
	for (int m = 0; m < 2; m++) {
		char *argv[] = {"build/targets/mt_target", (char *)modes[m], NULL};
		struct run r;
		char *line, *save = NULL;
		int n = 0;

		run_track(&r, NULL, argv);
		assert_int_equal(r.status, 0);
		assert_complete(&r);
		for (line = strtok_r(r.expect, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			long tid;
			void *a;
			unsigned long sz;
			const struct mt_event *e;

			assert_int_equal(sscanf(line, "thread %ld %p %lu", &tid, &a, &sz), 3);
			/* threads may reuse each other's freed blocks: match on size too */
			e = NULL;
			for (size_t i = 0; i < r.nr && !e; i++)
				if (r.ev[i].type == MT_EV_MALLOC && r.ev[i].addr == (uint64_t)a &&
				    r.ev[i].size == sz)
					e = &r.ev[i];
			assert_non_null(e);
			assert_int_equal(e->tid, tid);
			assert_int_equal(e->pid, mget(&r, NULL, "root_pid"));
			assert_true(e->tid != e->pid);
			n++;
		}
		assert_int_equal(n, 3);
		/* one Exit for the group, after the last thread, not at the leader's exit */
		assert_int_equal(count(&r, MT_EV_EXIT, 0, -1), 1);
		run_free(&r);
	}
}

static void test_fork_child(void **state)
{
	char *argv[] = {"build/targets/mt_target", "fork", NULL};
	struct run r;
	int child;
	void *a;
	const struct mt_event *e;

	(void)state;
	skip_unless_root();
	run_track(&r, NULL, argv);
	assert_int_equal(r.status, 0);
	assert_complete(&r);
	assert_int_equal(sscanf(r.expect, "child %d %p", &child, &a), 2);
	e = find(&r, MT_EV_MALLOC, (uint64_t)a);
	assert_non_null(e);
	assert_int_equal(e->pid, child);
	assert_int_equal(e->size, 12345);
	for (size_t i = 0; i < r.nr; i++)
		if (r.ev[i].type == MT_EV_FORK && r.ev[i].pid == child)
			assert_int_equal(r.ev[i].size, mget(&r, NULL, "root_pid"));
	assert_int_equal(count(&r, MT_EV_FORK, 0, (int64_t)mget(&r, NULL, "root_pid")), 1);
	assert_int_equal(count(&r, MT_EV_EXIT, 0, -1), 2);
	run_free(&r);
}

static void test_exec_chain(void **state)
{
	char *argv[] = {"build/targets/mt_target", "exec", "3", NULL};
	struct run r;
	char *line, *save = NULL;
	int stages = 0;

	(void)state;
	skip_unless_root();
	run_track(&r, NULL, argv);
	assert_int_equal(r.status, 0);
	assert_complete(&r);
	for (line = strtok_r(r.expect, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int n, sz;
		void *a;

		assert_int_equal(sscanf(line, "stage %d %p %d", &n, &a, &sz), 3);
		assert_int_equal(count(&r, MT_EV_MALLOC, (uint64_t)a, sz), 1);
		stages++;
	}
	assert_int_equal(stages, 4);
	/* the first exec (of the target itself) and three re-execs */
	assert_int_equal(count(&r, MT_EV_EXEC, 0, -1), 4);
	run_free(&r);
}

static void test_neighbour_is_not_tracked(void **state)
{
	char *nb[] = {"build/targets/mt_target", "neighbour", "3", NULL};
	char *argv[] = {"build/targets/mt_target", "libc", NULL};
	struct run r;
	pid_t pid;

	(void)state;
	skip_unless_root();
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execv(nb[0], nb);
		_exit(99);
	}
	usleep(100 * 1000);
	run_track(&r, NULL, argv);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	assert_int_equal(r.status, 0);
	assert_true(r.nr > 0);
	assert_int_equal(count(&r, MT_EV_MALLOC, 0, 123457), 0);
	for (size_t i = 0; i < r.nr; i++)
		assert_true(r.ev[i].pid != pid);
	run_free(&r);
}

static void test_exit_status_passthrough(void **state)
{
	char *ex[] = {"build/targets/mt_target", "exit", "3", NULL};
	char *ki[] = {"build/targets/mt_target", "kill", "15", NULL};
	char *missing[] = {"/nonexistent/program", NULL};
	struct run r;

	(void)state;
	skip_unless_root();
	run_track(&r, NULL, ex);
	assert_int_equal(r.status, 3);
	assert_int_equal(mget(&r, NULL, "exit_status"), 3);
	run_free(&r);
	run_track(&r, NULL, ki);
	assert_int_equal(r.status, 128 + SIGTERM);
	assert_int_equal(mget(&r, NULL, "term_signal"), SIGTERM);
	run_free(&r);
	run_track(&r, NULL, missing);
	assert_int_equal(r.status, 127);
	run_free(&r);
}

static void test_rss_peak_matches_vmhwm(void **state)
{
	char *argv[] = {"build/targets/mt_target", "touch", "64", NULL};
	struct run r;
	long hwm = 0;
	int64_t cur[4] = {0}, peak = 0;
	double tree;

	(void)state;
	skip_unless_root();
	run_track(&r, NULL, argv);
	assert_int_equal(r.status, 0);
	assert_complete(&r);
	assert_int_equal(sscanf(r.expect, "hwm %ld", &hwm), 1);
	assert_true(hwm > 64L << 20);
	tree = (double)mget(&r, "results", "peak_rss");
	assert_true(tree > hwm * 0.95 && tree < hwm * 1.05);
	/* and from the Rss records of the artifact alone */
	for (size_t i = 0; i < r.nr; i++) {
		if (r.ev[i].type != MT_EV_RSS || r.ev[i].aux >= 4)
			continue;
		cur[r.ev[i].aux] = (int64_t)r.ev[i].size;
		if (cur[0] + cur[1] + cur[3] > peak)
			peak = cur[0] + cur[1] + cur[3];
	}
	assert_true(peak > hwm * 0.95 && peak < hwm * 1.05);
	run_free(&r);
}

static void test_rmap_hole(void **state)
{
	char *argv[] = {"build/targets/mt_target", "hole", "64", NULL};
	char *plain[] = {"build/targets/mt_target", "touch", "8", NULL};
	struct run r;
	void *hole;
	int len;
	int64_t anon = 0, peak = 0, hole_removed = 0;

	(void)state;
	skip_unless_root();
	run_track(&r, "--rmap", argv);
	assert_int_equal(r.status, 0);
	assert_complete(&r);
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(r.manifest, "mechanisms"), "rmap_backend")),
			    "tracepoint");
	assert_non_null(strstr(r.expect, "hole "));
	assert_int_equal(sscanf(strstr(r.expect, "hole "), "hole %p %d", &hole, &len), 2);
	for (size_t i = 0; i < r.nr; i++) {
		const struct mt_event *e = &r.ev[i];
		int64_t d = (int64_t)e->size;

		if (e->type != MT_EV_RMAP || e->aux != 1)
			continue;
		anon += d;
		if (anon > peak)
			peak = anon;
		if (d < 0 && e->addr >= (uint64_t)hole && e->addr < (uint64_t)hole + len)
			hole_removed += -d;
	}
	peak *= 4096;
	assert_true(peak > (64 << 20) * 0.9 && peak < (64 << 20) * 1.1);
	/* the 16 MiB hole's removes carry its addresses */
	assert_true(hole_removed * 4096 >= len * 0.9);
	assert_int_equal(anon, 0); /* exit takes everything back */
	run_free(&r);
	run_track(&r, NULL, plain);
	assert_int_equal(count(&r, MT_EV_RMAP, 0, -1), 0);
	run_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_libc_event_by_event),
		cmocka_unit_test(test_cxx_counted_once),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_fork_child),
		cmocka_unit_test(test_exec_chain),
		cmocka_unit_test(test_neighbour_is_not_tracked),
		cmocka_unit_test(test_exit_status_passthrough),
		cmocka_unit_test(test_rss_peak_matches_vmhwm),
		cmocka_unit_test(test_rmap_hole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
