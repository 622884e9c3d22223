// SPDX-License-Identifier: MIT
/*
 * Root tests: where memtrack writes (issue 10, items 2, 5b, 5c and 6).
 * - Links planted by another user at the output names for the next pid (the artifact's, the
 *   manifest's and the old `.tmp` one) are neither followed nor replaced: memtrack refuses
 *   before the command runs, the files they point to stay as they were.
 * - Under sudo the folders created and the files belong to the invoking user; -o creates
 *   missing parents (mkdir -p).
 * - An output path that cannot fit PATH_MAX is refused before the command runs, naming it.
 * - On a full disk (a small tmpfs) the artifact is cut at a frame boundary and memtrack says
 *   how many events it holds: exactly what a reader decodes from it.
 * - A tree that lives on after its records are in (here a program holding on for 300 ms) has
 *   them compressed meanwhile: the artifact has a frame for them and one for what came after.
 * Planting uses a new pid namespace, where memtrack is pid 1 and its command pid 2: the next
 * pid is known, so the test is deterministic on a busy machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "artifact/artifact.h"
#include "../lib/mt_check.h"
#include "../lib/mt_exec.h"

#define NOBODY	    65534
#define VICTIM_TEXT "root's secret, 0600\n"

struct out_env {
	char base[64];	    /* temp dir, root's */
	char planted[96];   /* owned by nobody, 0755: "another user's folder" */
	char victim[2][96]; /* root-only files the links point to */
	char full[96];	    /* a small tmpfs mount point */
	bool mounted;
};

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(close(fd), 0);
}

/* The file is still exactly what it was: content, mode and owner. */
static void assert_untouched(const char *path)
{
	char buf[256] = {0};
	struct stat st;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_true(read(fd, buf, sizeof(buf) - 1) >= 0);
	close(fd);
	assert_string_equal(buf, VICTIM_TEXT);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_uid, 0);
}

static int setup(void **state)
{
	struct out_env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	snprintf(e->base, sizeof(e->base), "/tmp/memtrack-out-XXXXXX");
	assert_non_null(mkdtemp(e->base));
	assert_int_equal(chmod(e->base, 0755), 0);
	snprintf(e->planted, sizeof(e->planted), "%s/shared", e->base);
	snprintf(e->full, sizeof(e->full), "%s/full", e->base);
	for (int i = 0; i < 2; i++)
		snprintf(e->victim[i], sizeof(e->victim[i]), "%s/victim%d", e->base, i);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct out_env *e = *state;
	char cmd[128];

	if (e->mounted)
		umount2(e->full, MNT_DETACH);
	if (!getenv("MT_TEST_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->base);
		(void)!system(cmd);
	}
	free(e);
	return 0;
}

/* Fresh victims and another user's folder with `links` planted for pid 2. */
static void plant(struct out_env *e, const char *const *links, size_t n)
{
	char cmd[160], link[192];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->planted);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(mkdir(e->planted, 0755), 0);
	for (int i = 0; i < 2; i++)
		write_file(e->victim[i], VICTIM_TEXT, 0600);
	for (size_t i = 0; i < n; i++) {
		snprintf(link, sizeof(link), "%s/%s", e->planted, links[i]);
		/* the artifact's link to one victim, the manifest's (and .tmp) to the other */
		assert_int_equal(symlink(e->victim[strstr(links[i], "json") != NULL], link), 0);
		assert_int_equal(lchown(link, NOBODY, NOBODY), 0);
	}
	assert_int_equal(chown(e->planted, NOBODY, NOBODY), 0);
}

/* Runs not about sudo go without its variables: under `sudo make check` the command would
 * run as the invoking user, who cannot write in the folders these tests make. */
static const char *const no_sudo[] = {"SUDO_UID", "SUDO_GID", NULL};
static const struct mt_exec_opts as_root = {.env = no_sudo};

static void track_in_pid_ns(const char *out, const char *cmd, struct mt_exec_result *r)
{
	const char *argv[] = {mt_memtrack(), "track", "-q", "-o", out, cmd, NULL};
	struct mt_exec_opts o = {.new_pid_ns = true, .env = no_sudo};

	assert_int_equal(mt_exec(&o, argv, r), 0);
}

static size_t count_entries(const char *dir)
{
	char cmd[160];
	size_t n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%zu", &n), 1);
	pclose(f);
	return n;
}

static void check_refused(struct out_env *e, const char *const *links, size_t n, const char *named)
{
	struct mt_exec_result r;
	char marker[128], cmd[192];

	MT_REQUIRE_ROOT();
	mt_need_file(mt_memtrack());
	plant(e, links, n);
	snprintf(marker, sizeof(marker), "%s/ran", e->base);
	unlink(marker);
	snprintf(cmd, sizeof(cmd), "touch '%s'", marker);
	track_in_pid_ns(e->planted, cmd, &r);
	if (r.status != 125 || !strstr(r.output, named) || !strstr(r.output, "File exists") ||
	    !strstr(r.output, "never replaces")) {
		fprintf(stderr, "%s", r.output);
		fail_msg("memtrack exited %d: want 125 and a refusal naming %s", r.status, named);
	}
	mt_exec_free(&r);
	for (int i = 0; i < 2; i++)
		assert_untouched(e->victim[i]);
	assert_int_equal(access(marker, F_OK), -1);	/* refused before the command ran */
	assert_int_equal(count_entries(e->planted), n); /* the links, nothing of ours */
}

static void test_planted_links_all(void **state)
{
	const char *const links[] = {"2.MemtrackArtifact.msgpack", "2.memtrack.json",
				     "2.memtrack.json.tmp"};

	check_refused(*state, links, 3, "/2.memtrack.json'");
}

static void test_planted_link_artifact(void **state)
{
	const char *const links[] = {"2.MemtrackArtifact.msgpack"};

	check_refused(*state, links, 1, "/2.MemtrackArtifact.msgpack'");
}

static void test_planted_link_manifest(void **state)
{
	const char *const links[] = {"2.memtrack.json"};

	check_refused(*state, links, 1, "/2.memtrack.json'");
}

/* A name taken while the command runs (here by the command itself, as root: a link at the
 * manifest's name): the manifest is not written over it, the link stays, its target too. */
static void test_manifest_name_taken_during_run(void **state)
{
	struct out_env *e = *state;
	char cmd[256], link[192];
	const char *argv[] = {mt_memtrack(), "track", "-q", "-o", e->planted, cmd, NULL};
	struct mt_exec_result r;
	struct stat st;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_memtrack());
	plant(e, NULL, 0);
	/* bash -c is the root process: $$ is the pid the outputs are named after */
	snprintf(cmd, sizeof(cmd), "ln -s '%s' '%s'/$$.memtrack.json; echo pid $$", e->victim[1],
		 e->planted);
	assert_int_equal(mt_exec(&as_root, argv, &r), 0);
	if (r.status != 125 || !strstr(r.output, ".memtrack.json': File exists")) {
		fprintf(stderr, "%s", r.output);
		fail_msg("memtrack exited %d, want 125 refusing the taken manifest name", r.status);
	}
	{
		int pid = 0;

		assert_non_null(strstr(r.output, "pid "));
		assert_int_equal(sscanf(strstr(r.output, "pid "), "pid %d", &pid), 1);
		snprintf(link, sizeof(link), "%s/%d.memtrack.json", e->planted, pid);
	}
	mt_exec_free(&r);
	assert_untouched(e->victim[1]);
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	/* the link and the artifact: no temporary file left behind */
	assert_int_equal(count_entries(e->planted), 2);
}

/* Under sudo: -o a/b/c creates a/b and a/b/c for the invoking user, the outputs are theirs;
 * the folder that existed stays root's. Without sudo, all root's. */
static void run_mkdir_p(struct out_env *e, bool sudo)
{
	char out[160], path[256], sub[128];
	const char *argv[] = {mt_memtrack(), "track", "-q", "-o", out, "--", "/bin/true", NULL};
	const char *sudo_env[] = {"SUDO_UID=65534", "SUDO_GID=65534", NULL};
	struct mt_exec_opts o = {.env = sudo ? sudo_env : no_sudo};
	uid_t want = sudo ? NOBODY : 0;
	struct mt_exec_result r;
	struct stat st;
	FILE *ls;
	int files = 0;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_memtrack());
	snprintf(sub, sizeof(sub), "%s/%s", e->base, sudo ? "sudo" : "plain");
	assert_int_equal(mkdir(sub, 0755), 0);
	snprintf(out, sizeof(out), "%s/a/b/c", sub);
	assert_int_equal(mt_exec(&o, argv, &r), 0);
	if (r.status != 0) {
		fprintf(stderr, "%s", r.output);
		fail_msg("memtrack -o %s exited %d", out, r.status);
	}
	mt_exec_free(&r);
	assert_int_equal(stat(sub, &st), 0);
	assert_int_equal(st.st_uid, 0);
	for (const char *d = "a"; d; d = !strcmp(d, "a")     ? "a/b"
					 : !strcmp(d, "a/b") ? "a/b/c"
							     : 0) {
		snprintf(path, sizeof(path), "%s/%s", sub, d);
		assert_int_equal(stat(path, &st), 0);
		assert_true(S_ISDIR(st.st_mode));
		assert_int_equal(st.st_uid, want);
		assert_int_equal(st.st_gid, want);
	}
	snprintf(path, sizeof(path), "ls '%s'", out);
	ls = popen(path, "r");
	assert_non_null(ls);
	while (fgets(sub, sizeof(sub), ls)) {
		char file[300];

		sub[strcspn(sub, "\n")] = 0;
		snprintf(file, sizeof(file), "%s/%s", out, sub);
		assert_int_equal(stat(file, &st), 0);
		assert_int_equal(st.st_uid, want);
		assert_int_equal(st.st_gid, want);
		files++;
	}
	pclose(ls);
	assert_int_equal(files, 2);
}

static void test_sudo_owns_outputs(void **state)
{
	run_mkdir_p(*state, true);
}

static void test_mkdir_p_as_root(void **state)
{
	run_mkdir_p(*state, false);
}

/* A folder whose artifact path would pass PATH_MAX: refused up front, named whole. */
static void test_path_max(void **state)
{
	struct out_env *e = *state;
	char *out = malloc(PATH_MAX), marker[128], cmd[192];
	const char *argv[] = {mt_memtrack(), "track", "-q", "-o", out, cmd, NULL};
	struct mt_exec_result r;
	size_t len;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_memtrack());
	assert_non_null(out);
	snprintf(marker, sizeof(marker), "%s/ran", e->base);
	unlink(marker);
	snprintf(cmd, sizeof(cmd), "touch '%s'", marker);
	/* base/xxx...: room for the folder itself, not for "/<pid>.MemtrackArtifact.msgpack" */
	len = PATH_MAX - 20;
	snprintf(out, PATH_MAX, "%s/", e->base);
	memset(out + strlen(out), 'x', len - strlen(out));
	out[len] = 0;
	assert_int_equal(mt_exec(&as_root, argv, &r), 0);
	if (r.status != 125 || !strstr(r.output, "output path too long") ||
	    !strstr(r.output, out)) {
		fprintf(stderr, "%.300s\n", r.output);
		fail_msg("memtrack -o <%zu bytes> exited %d, want 125 naming the folder", len,
			 r.status);
	}
	mt_exec_free(&r);
	assert_int_equal(access(marker, F_OK), -1);
	assert_int_equal(count_entries(e->base), 0); /* nothing created */
	free(out);
}

/* A full disk: the artifact holds whole frames, and the count memtrack gives is what a reader
 * decodes. 400k events make ~3.4 MB of artifact (~550 KB per 65536-event frame); the tmpfs
 * holds 1 MiB: one frame, not two. */
/* The artifact's path in folder out (the only one there); 0 or -ENOENT. */
static int artifact_in(const char *out, char *path, size_t size)
{
	char cmd[256];
	FILE *ls;
	int rc = -ENOENT;

	snprintf(cmd, sizeof(cmd), "ls %s/*" ARTIFACT_SUFFIX " 2>/dev/null", out);
	ls = popen(cmd, "r");
	assert_non_null(ls);
	if (fgets(path, (int)size, ls)) {
		path[strcspn(path, "\n")] = 0;
		rc = 0;
	}
	pclose(ls);
	return rc;
}

static void test_full_disk(void **state)
{
	struct out_env *e = *state;
	char out[128], path[256], *p;
	const char *argv[] = {
	    mt_memtrack(), "track", "-q", "-o", out, "--", mt_target("alloc_storm"),
	    "200000",	   NULL};
	unsigned long long held = 0, arrived = 0;
	struct artifact_reader *rd;
	struct mt_event ev;
	struct mt_exec_result r;
	uint64_t n = 0;
	int rc;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_memtrack());
	mt_need_file(mt_target("alloc_storm"));
	assert_int_equal(mkdir(e->full, 0755), 0);
	if (mount("memtrack-test", e->full, "tmpfs", 0, "size=1m,mode=0755")) {
		print_message("[ SKIP     ] cannot mount a tmpfs: %s\n", strerror(errno));
		skip();
	}
	e->mounted = true;
	snprintf(out, sizeof(out), "%s/out", e->full);
	assert_int_equal(mt_exec(&as_root, argv, &r), 0);
	p = strstr(r.output, "the artifact is cut, it holds the first ");
	if (r.status != 125 || !strstr(r.output, "No space left on device") || !p ||
	    sscanf(p, "the artifact is cut, it holds the first %llu of the %llu events", &held,
		   &arrived) != 2) {
		fprintf(stderr, "%s", r.output);
		fail_msg("memtrack on a full disk exited %d, want 125 saying how much the "
			 "artifact holds",
			 r.status);
	}
	mt_exec_free(&r);
	/* fewer than arrived (400k pairs' events at least); whole frames: below, a reader gets
	 * exactly that many and a clean end (frames are cut early too: artifact_writer__cut) */
	assert_true(held > 0);
	assert_true(arrived >= 400000 && held < arrived);
	assert_int_equal(artifact_in(out, path, sizeof(path)), 0);
	assert_int_equal(artifact_reader__open(&rd, path), 0);
	while ((rc = artifact_reader__next(rd, &ev)) == 1)
		n++;
	assert_int_equal(rc, 0); /* decodes to a clean end: no partial frame */
	artifact_reader__free(rd);
	assert_int_equal(n, held);
}

/*
 * 4000 malloc/free pairs (~450 KiB of msgpack), then 300 ms of sleep: memtrack's loop drains
 * them within 10 ms, and with a worker idle hands them to it as a frame (artifact_writer__cut)
 * rather than keeping them for the end; the Exit that follows the sleep is in a later frame.
 * Before the cut, the artifact was one frame. Every record is still there, in order.
 */
static void test_frames_cut_while_running(void **state)
{
	struct out_env *e = *state;
	const char *argv[] = {
	    mt_memtrack(), "track", "-q",   "-o",  e->full, "--", mt_target("alloc_fixed"),
	    "4000",	   "64",    "hold", "300", NULL};
	struct artifact_reader *rd;
	struct mt_exec_result r;
	struct mt_event ev;
	unsigned mallocs = 0, exits = 0;
	uint64_t frames;
	char path[256];
	int rc;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_memtrack());
	mt_need_file(mt_target("alloc_fixed"));
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
		print_message("[ SKIP     ] one CPU: memtrack compresses on its own thread, at the "
			      "end (artifact__default_workers)\n");
		skip();
	}
	assert_int_equal(mt_exec(&as_root, argv, &r), 0);
	if (r.status != 0) {
		fprintf(stderr, "%s", r.output);
		fail_msg("memtrack exited %d", r.status);
	}
	mt_exec_free(&r);
	assert_int_equal(artifact_in(e->full, path, sizeof(path)), 0);
	assert_int_equal(artifact_reader__open(&rd, path), 0);
	while ((rc = artifact_reader__next(rd, &ev)) == 1) {
		mallocs += ev.type == MT_EV_MALLOC && ev.size == 64;
		exits += ev.type == MT_EV_EXIT;
	}
	assert_int_equal(rc, 0);
	frames = artifact_reader__frames(rd);
	artifact_reader__free(rd);
	assert_int_equal(mallocs, 4000);
	assert_true(exits >= 1);
	if (frames < 2)
		fail_msg("the artifact is %u frame: the records written before the sleep were not "
			 "compressed while it lasted",
			 (unsigned)frames);
}

/* Nothing of memtrack's (its detacher outlives it) keeps the output's file system busy. */
static void test_umount_right_after(void **state)
{
	struct out_env *e = *state;
	const char *argv[] = {mt_memtrack(), "track", "-q", "-o", e->full, "--", "/bin/true", NULL};
	struct mt_exec_result r;

	MT_REQUIRE_ROOT();
	mt_need_file(mt_memtrack());
	assert_int_equal(mkdir(e->full, 0755), 0);
	if (mount("memtrack-test", e->full, "tmpfs", 0, "size=8m,mode=0755")) {
		print_message("[ SKIP     ] cannot mount a tmpfs: %s\n", strerror(errno));
		skip();
	}
	e->mounted = true;
	assert_int_equal(mt_exec(&as_root, argv, &r), 0);
	if (r.status != 0) {
		fprintf(stderr, "%s", r.output);
		fail_msg("memtrack exited %d", r.status);
	}
	mt_exec_free(&r);
	if (umount(e->full))
		fail_msg("umount right after memtrack: %s", strerror(errno));
	e->mounted = false;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_planted_links_all, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_planted_link_artifact, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_planted_link_manifest, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_manifest_name_taken_during_run, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sudo_owns_outputs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_mkdir_p_as_root, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_path_max, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_full_disk, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_umount_right_after, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_frames_cut_while_running, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
