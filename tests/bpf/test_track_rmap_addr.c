// SPDX-License-Identifier: MIT
/*
 * Root test of rmap mode's addresses: a 16 MiB hole unmapped from a touched 64 MiB mapping must
 * come back as removes carrying the hole's addresses (test_track_rmap checks the totals).
 * Skipped (with the reason) when not root.
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
#include "../lib/mt_rmap_probe.h"

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

static void assert_complete(const struct run *r)
{
	assert_non_null(r->manifest);
	assert_true(json_is_true(json_object_get(r->manifest, "complete")));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r->manifest, "drops"), "total")), 0);
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
			    mt_expected_rmap_backend());
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
		cmocka_unit_test(test_rmap_hole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
