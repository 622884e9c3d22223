// SPDX-License-Identifier: MIT
/*
 * Root tests: a finished run's tracepoint links handed over to the next run
 * (src/track/detacher.h, early_links.h), in a private folder of the BPF filesystem
 * ($MEMTRACK_BPFFS).
 *   - The detacher offers the links once memtrack has exited; a run starting then takes them
 *     (-v says so) and records every fork and exit of its tree exactly once.
 *   - A run that links its own beside a finished run's lingering links (MEMTRACK_TEST_NO_ADOPT)
 *     on the same kept programs and maps records each exactly once too: the lingering links'
 *     slots were emptied before anything else (without that, each event came twice).
 *   - An offer nobody takes is withdrawn after the linger time: nothing stays pinned.
 *   - The interposer's control link is offered with them, its slot emptied too, and taken
 *     with them: the next run's allocations are each recorded once. A run whose interposer is
 *     another file (MEMTRACK_PRELOAD_LIB: a copy) takes the tracepoints' links but links its
 *     own control points, and records each allocation once too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <bpf/bpf.h>
#include "../lib/mt_bpffs.h"
#include "../lib/mt_check.h"
#include "../lib/mt_tmpdir.h"
#include "track/detacher.h"
#include "track/early_links.h"

#define LIB_MAX (4 << 20) /* the interposer is ~200 KB */

#define CHILDREN 20

static char root[128];
static char cmd_buf[1024]; /* a shell command for mt_track */
static bool have_bpffs;

static int setup(void **state)
{
	(void)state;
	/* each run's control link made before it ends, as in a tree that outlives its grace
	 * period (forker may not): it is then handed over too */
	setenv("MEMTRACK_TEST_CTL_WAIT", "1", 1);
	if (geteuid() == 0)
		have_bpffs = mt_bpffs_root(root, sizeof(root), "mt-handover");
	return 0;
}

/* The entries of root whose names start with prefix (the first's name into first). */
static int entries(const char *prefix, char *first, size_t len)
{
	DIR *d = opendir(root);
	struct dirent *e;
	int n = 0;

	if (first)
		first[0] = '\0';
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, prefix, strlen(prefix)))
			continue;
		if (!n++ && first)
			snprintf(first, len, "%s", e->d_name);
	}
	if (d)
		closedir(d);
	return n;
}

/* Waits at most 20 s for want entries with prefix; fails after that. */
static void wait_entries(const char *prefix, int want)
{
	for (int i = 0; i < 2000; i++) {
		if (entries(prefix, NULL, 0) == want)
			return;
		usleep(10000);
	}
	fail_msg("%d entries %s* under %s after 20 s, want %d", entries(prefix, NULL, 0), prefix,
		 root, want);
}

/* Waits at most 20 s until slot folder `slot` is not locked (its last run's detacher has
 * closed everything but the links it offers). */
static void wait_unlocked(const char *slot)
{
	for (int i = 0; i < 2000; i++) {
		int fd = open(slot, O_RDONLY | O_DIRECTORY);
		bool free_ = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;

		if (fd >= 0)
			close(fd);
		if (free_)
			return;
		usleep(10000);
	}
	fail_msg("slot %s still locked after 20 s", slot);
}

/* Tells lingering detachers that a run has linked its tracepoints (prog_cache.h: the linger
 * map's counter moves): they withdraw their offers and exit. */
static void release_lingering(void)
{
	char path[192];
	uint32_t zero = 0;
	uint64_t gen = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/linger", root);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return;
	bpf_map_lookup_elem(fd, &zero, &gen);
	gen++;
	bpf_map_update_elem(fd, &zero, &gen, BPF_ANY);
	close(fd);
}

/* Waits until no program cache slot under root is locked: every finished run's detacher has
 * made its offer (before it lets its slot go), so that a release after this reaches them all
 * (a detacher still to offer when the test ended would otherwise linger into the next test). */
static void wait_slots_unlocked(void)
{
	DIR *d = opendir(root);
	struct dirent *e;
	char slot[300];

	while (d && (e = readdir(d))) {
		if (strlen(e->d_name) < 18 || e->d_name[16] != '-')
			continue; /* <16 hex digits>-<n>: a slot */
		snprintf(slot, sizeof(slot), "%s/%s", root, e->d_name);
		wait_unlocked(slot);
	}
	if (d)
		closedir(d);
}

static int teardown_each(void **state)
{
	mt_teardown(state);
	unsetenv("MEMTRACK_TEST_LINGER_MS");
	unsetenv("MEMTRACK_TEST_NO_ADOPT");
	if (geteuid() == 0 && have_bpffs) {
		wait_slots_unlocked();
		release_lingering();
		wait_entries(DETACHER_OFFER_PREFIX, 0); /* the lingering detachers are done */
	}
	mt_tmpdir_remove(root);
	return 0;
}

/* Whether program `id` is the detacher's idle one (DETACHER_IDLE_NAME): two instructions,
 * r0 = 0 and exit. */
static bool is_idle_prog(uint32_t id)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);
	int fd = bpf_prog_get_fd_by_id(id);
	bool idle;

	if (fd < 0)
		return false;
	memset(&info, 0, sizeof(info));
	idle = !bpf_obj_get_info_by_fd(fd, &info, &len) && !strcmp(info.name, DETACHER_IDLE_NAME) &&
	       info.xlated_prog_len == 2 * sizeof(struct bpf_insn);
	close(fd);
	return idle;
}

/* The offer's program arrays hold no program of a run: its links run nothing while they
 * linger (a lookup of a program array from user space gives the program's id, or ENOENT).
 * rss_stat's slot, which its trampoline tail-calls directly, holds the idle program (emptying
 * it waits for a grace period, detacher.h); the others are empty. The control link's array
 * is there (with the link and what it was made on): forker runs served. */
static void check_disarmed(struct mt_run *r, const char *offer)
{
	static const struct {
		const char *name;
		uint32_t slots;
		uint32_t idle; /* slots holding the idle program */
	} arrays[] = {{DETACHER_OFFER_MAP, EARLY_TP_NR, 1u << EARLY_RSS_STAT},
		      {DETACHER_OFFER_CMAP, 1, 0}};
	char path[512];
	int fd;

	for (size_t a = 0; a < sizeof(arrays) / sizeof(arrays[0]); a++) {
		snprintf(path, sizeof(path), "%s/%s/%s", root, offer, arrays[a].name);
		fd = bpf_obj_get(path);
		MT_CHECK(r, fd >= 0, "cannot open %s: %s", path, strerror(errno));
		for (uint32_t k = 0; k < arrays[a].slots; k++) {
			uint32_t id = 0;
			int rc = bpf_map_lookup_elem(fd, &k, &id);

			if (arrays[a].idle >> k & 1)
				MT_CHECK(
				    r, rc == 0 && is_idle_prog(id),
				    "slot %u of the offer's %s: %d, program %u, not the idle one",
				    k, arrays[a].name, rc, id);
			else
				MT_CHECK(r, rc == -ENOENT,
					 "slot %u of the offer's %s: %d, program %u", k,
					 arrays[a].name, rc, id);
		}
		close(fd);
	}
	for (const char *const *n =
		 (const char *const[]){DETACHER_OFFER_CTL, DETACHER_OFFER_LIB, NULL};
	     *n; n++) {
		snprintf(path, sizeof(path), "%s/%s/%s", root, offer, *n);
		fd = bpf_obj_get(path);
		MT_CHECK(r, fd >= 0, "the offer has no %s: %s", *n, strerror(errno));
		close(fd);
	}
}

/* Each of the tree's forks once, each process's exit once. */
static void check_once(struct mt_run *r)
{
	struct mt_filter fork = {.type = MT_EV_FORK}, ex = {.type = MT_EV_EXIT};
	size_t forks = mt_count(r, &fork), exits = mt_count(r, &ex);

	MT_CHECK(r, forks == CHILDREN, "%zu Fork events, want %d", forks, CHILDREN);
	MT_CHECK(r, exits == CHILDREN + 1, "%zu Exit events, want %d", exits, CHILDREN + 1);
	for (size_t i = 0; i < r->nr_ev; i++) {
		struct mt_filter one = {.type = MT_EV_EXIT, .pid = r->ev[i].pid};

		if (r->ev[i].type == MT_EV_EXIT)
			MT_CHECK(r, mt_count(r, &one) == 1, "process %d exits %zu times",
				 r->ev[i].pid, mt_count(r, &one));
	}
}

/* The manifest's mechanisms.hook_links (how this run's tracepoint links came), or another
 * key of mechanisms. */
static bool mechanism_is(struct mt_run *r, const char *key, const char *how)
{
	char path[64];
	json_t *j;

	snprintf(path, sizeof(path), "mechanisms.%s", key);
	j = mt_json(r, path);
	return json_is_string(j) && !strcmp(json_string_value(j), how);
}

static bool hook_links_are(struct mt_run *r, const char *how)
{
	return mechanism_is(r, "hook_links", how);
}

static void run_forker(struct mt_run *r)
{
	char n[16];

	snprintf(n, sizeof(n), "%d", CHILDREN);
	mt_track_ok(r, NULL, MT_TARGET_ARGV("forker", n), 0);
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "run not complete");
	MT_CHECK(r, mechanism_is(r, "alloc_hooks", "auto"), "not in auto mode");
	mt_each_op_once(r); /* every child's allocations, once: served, whatever the link */
}

/* The next run takes the offered links and records every fork and exit once. */
static void test_next_run_takes_them(void **state)
{
	struct mt_run *a = mt_new_run(state), b = {0};
	char first[300], taken[300];

	MT_REQUIRE_KEEPING(have_bpffs);
	setenv("MEMTRACK_TEST_LINGER_MS", "20000", 1); /* nothing withdrawn while we look */
	run_forker(a);
	check_once(a);
	wait_entries(DETACHER_OFFER_PREFIX, 1);
	entries(DETACHER_OFFER_PREFIX, first, sizeof(first));
	check_disarmed(a, first);
	run_forker(&b);
	MT_CHECK(&b, hook_links_are(&b, "taken from a finished run"),
		 "the second run did not take the offered links: hook_links %s",
		 json_string_value(mt_json(&b, "mechanisms.hook_links")));
	MT_CHECK(&b, mechanism_is(&b, "control_link", "taken from a finished run"),
		 "the second run did not take the offered control link: control_link %s",
		 json_string_value(mt_json(&b, "mechanisms.control_link")));
	check_once(&b);
	/* a's offer taken, b's made in its place */
	wait_entries(DETACHER_OFFER_PREFIX, 1);
	entries(DETACHER_OFFER_PREFIX, taken, sizeof(taken));
	MT_CHECK(&b, strcmp(first, taken), "the first run's offer %s is still there", first);
	unsetenv("MEMTRACK_TEST_LINGER_MS");
	mt_run_free(&b);
}

/* Links of its own beside a finished run's, on the same kept programs and maps: the
 * finished run's slots are empty, nothing is recorded twice. */
static void test_lingering_links_do_nothing(void **state)
{
	struct mt_run *a = mt_new_run(state), b = {0};
	char slot[300];

	MT_REQUIRE_KEEPING(have_bpffs);
	setenv("MEMTRACK_TEST_LINGER_MS", "20000", 1);
	run_forker(a);
	wait_entries(DETACHER_OFFER_PREFIX, 1);
	/* the same slot for the second run: the first one's detacher has let it go */
	{
		DIR *d = opendir(root);
		struct dirent *e;

		slot[0] = '\0';
		while (d && (e = readdir(d)))
			if (strlen(e->d_name) == 18 && !strcmp(e->d_name + 16, "-0"))
				snprintf(slot, sizeof(slot), "%s/%s", root, e->d_name);
		if (d)
			closedir(d);
	}
	MT_CHECK(a, slot[0], "no slot 0 under %s", root);
	wait_unlocked(slot);
	setenv("MEMTRACK_TEST_NO_ADOPT", "1", 1);
	run_forker(&b);
	MT_CHECK(&b, hook_links_are(&b, "while loading"), "the second run did not link anew");
	MT_CHECK(
	    &b,
	    json_is_string(mt_json(&b, "mechanisms.bpf_programs")) &&
		!strncmp(json_string_value(mt_json(&b, "mechanisms.bpf_programs")), "kept ", 5) &&
		strstr(json_string_value(mt_json(&b, "mechanisms.bpf_programs")), slot),
	    "the second run did not take the first one's programs and maps");
	check_once(&b);
	unsetenv("MEMTRACK_TEST_LINGER_MS");
	unsetenv("MEMTRACK_TEST_NO_ADOPT");
	mt_run_free(&b);
}

/* Copies the interposer into dir (a file of its own: another inode, what a rebuilt or
 * reinstalled interposer is); its path into out. */
static void copy_interposer(const char *dir, char *out, size_t cap)
{
	char from[512];
	static char buf[LIB_MAX];
	FILE *in, *o;
	size_t n;

	snprintf(from, sizeof(from), "%s/build/libmemtrack-preload.so", mt_repo_root());
	snprintf(out, cap, "%s/libmemtrack-preload.so", dir);
	in = fopen(from, "rb");
	o = fopen(out, "wb");
	assert_non_null(in);
	assert_non_null(o);
	n = fread(buf, 1, sizeof(buf), in);
	assert_true(n > 0 && n < sizeof(buf));
	assert_int_equal(fwrite(buf, 1, n, o), n);
	fclose(in);
	assert_int_equal(fclose(o), 0);
}

/* A copy of the interposer in a fresh folder dir (name: its prefix), path into lib, and a run
 * whose offer (20 s of lingering) is there once this returns. */
static void offer_beside_copy(struct mt_run *a, char *dir, size_t dcap, char *lib, size_t lcap,
			      const char *name)
{
	assert_int_equal(mt_tmpdir_make(dir, dcap, name), 0);
	copy_interposer(dir, lib, lcap);
	setenv("MEMTRACK_TEST_LINGER_MS", "20000", 1);
	run_forker(a);
	wait_entries(DETACHER_OFFER_PREFIX, 1);
}

/* Another interposer file: the tracepoints' links are taken, the control link is not (it
 * probes the other file), and the run's own records each allocation once. */
static void test_other_interposer(void **state)
{
	struct mt_run *a = mt_new_run(state), b = {0};
	char dir[128], lib[256];

	MT_REQUIRE_KEEPING(have_bpffs);
	offer_beside_copy(a, dir, sizeof(dir), lib, sizeof(lib), "mt-handover-lib");
	setenv("MEMTRACK_PRELOAD_LIB", lib, 1);
	run_forker(&b);
	unsetenv("MEMTRACK_PRELOAD_LIB");
	MT_CHECK(&b, hook_links_are(&b, "taken from a finished run"),
		 "the second run did not take the tracepoints' links");
	MT_CHECK(&b, mechanism_is(&b, "preload_lib", lib), "the second run's interposer is %s",
		 json_string_value(mt_json(&b, "mechanisms.preload_lib")));
	MT_CHECK(&b, mechanism_is(&b, "control_link", "while loading"),
		 "the control link on another file was taken: control_link %s",
		 json_string_value(mt_json(&b, "mechanisms.control_link")));
	check_once(&b);
	unsetenv("MEMTRACK_TEST_LINGER_MS");
	mt_run_free(&b);
	/* the lingering offer holds the copy's link: gone with it (teardown_each) */
	release_lingering();
	wait_entries(DETACHER_OFFER_PREFIX, 0);
	mt_tmpdir_remove(dir);
}

/* The id of the control link in offer folder `offer` (0 when it has none). The fd opened for
 * it is closed again: the pin alone holds the link. */
static uint32_t offered_ctl_id(const char *offer)
{
	struct bpf_link_info info;
	uint32_t len = sizeof(info);
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s/%s", root, offer, DETACHER_OFFER_CTL);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		info.id = 0;
	close(fd);
	return info.id;
}

/* A control link offered on another interposer file is set aside, not closed, while the run
 * starts: closing it waits out its uprobes' grace period (15-17 ms here, on the way to the
 * command's release). It is still there while the command runs (targets/bpf_link_alive finds
 * its id), and the run links its own. */
static void test_other_interposer_set_aside(void **state)
{
	struct mt_run *a = mt_new_run(state), b = {0};
	struct mt_run_opts o = {.shell = cmd_buf, .no_expect_fd = true};
	char dir[128], lib[256], offer[300], env[300];
	const char *const envs[] = {env, NULL};
	uint32_t id;

	MT_REQUIRE_KEEPING(have_bpffs);
	offer_beside_copy(a, dir, sizeof(dir), lib, sizeof(lib), "mt-handover-aside");
	entries(DETACHER_OFFER_PREFIX, offer, sizeof(offer));
	id = offered_ctl_id(offer);
	MT_CHECK(a, id != 0, "the offer %s has no control link", offer);
	snprintf(env, sizeof(env), "MEMTRACK_PRELOAD_LIB=%s", lib);
	o.env = envs;
	snprintf(cmd_buf, sizeof(cmd_buf), "%s 4 && %s %u", mt_target("forker"),
		 mt_target("bpf_link_alive"), id);
	assert_int_equal(mt_track(&b, &o, NULL), 0);
	if (b.status != 0)
		mt_run_dump(&b);
	MT_CHECK(&b, b.status == 0,
		 "status %d: the offered control link %u was gone while the command ran", b.status,
		 id);
	MT_CHECK(&b, hook_links_are(&b, "taken from a finished run"),
		 "the second run did not take the tracepoints' links");
	MT_CHECK(&b, mechanism_is(&b, "control_link", "while loading"),
		 "the control link on another file was taken: control_link %s",
		 json_string_value(mt_json(&b, "mechanisms.control_link")));
	unsetenv("MEMTRACK_TEST_LINGER_MS");
	mt_run_free(&b);
	release_lingering();
	wait_entries(DETACHER_OFFER_PREFIX, 0);
	mt_tmpdir_remove(dir);
}

/*
 * A pipe reading memtrack's output ends when memtrack exits, not when its detacher does: the
 * detacher holds no stdio, also when memtrack was gone before it ran (a short command;
 * MEMTRACK_TEST_DETACHER_LATE makes it so every time). It used to keep the pipe for its whole
 * linger: `memtrack track -- /bin/true | cat` took 1 s. Checked by reading the pipe to its end
 * while the offer (20 s of lingering) is still there: its detacher still runs.
 */
static void test_pipe_ends_with_memtrack(void **state)
{
	struct mt_run *a = mt_new_run(state);
	char buf[4096], dir[128];
	int pfd[2], status;
	pid_t pid;

	MT_REQUIRE_KEEPING(have_bpffs);
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "mt-handover-pipe"), 0);
	setenv("MEMTRACK_TEST_LINGER_MS", "20000", 1);
	setenv("MEMTRACK_TEST_DETACHER_LATE", "1", 1);
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		close(pfd[0]);
		close(pfd[1]);
		execl(mt_memtrack(), mt_memtrack(), "track", "-o", dir, "--", "/bin/true",
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (read(pfd[0], buf, sizeof(buf)) > 0)
		;
	close(pfd[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	unsetenv("MEMTRACK_TEST_DETACHER_LATE");
	unsetenv("MEMTRACK_TEST_LINGER_MS");
	MT_CHECK(a, WIFEXITED(status) && WEXITSTATUS(status) == 0, "memtrack status %#x", status);
	/* the offer is made after memtrack's exit: wait for it, then it must still be there */
	wait_entries(DETACHER_OFFER_PREFIX, 1);
	MT_CHECK(a, entries(DETACHER_OFFER_PREFIX, NULL, 0) == 1,
		 "the pipe ended only once the detacher had withdrawn its offer");
	release_lingering();
	wait_entries(DETACHER_OFFER_PREFIX, 0);
	mt_tmpdir_remove(dir);
}

/* Not taken: withdrawn after the linger time, nothing left pinned. */
static void test_withdrawn(void **state)
{
	struct mt_run *a = mt_new_run(state);

	MT_REQUIRE_KEEPING(have_bpffs);
	setenv("MEMTRACK_TEST_LINGER_MS", "300", 1);
	run_forker(a);
	/* withdrawn: renamed ex-<tag>, then unpinned and removed (the folder goes last) */
	wait_entries(DETACHER_OFFER_PREFIX, 0);
	wait_entries("ex-", 0);
	MT_CHECK(a, entries("pre-", NULL, 0) == 0, "an offer's folder is left under %s", root);
	unsetenv("MEMTRACK_TEST_LINGER_MS");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_next_run_takes_them, teardown_each),
	    cmocka_unit_test_teardown(test_lingering_links_do_nothing, teardown_each),
	    cmocka_unit_test_teardown(test_other_interposer, teardown_each),
	    cmocka_unit_test_teardown(test_other_interposer_set_aside, teardown_each),
	    cmocka_unit_test_teardown(test_pipe_ends_with_memtrack, teardown_each),
	    cmocka_unit_test_teardown(test_withdrawn, teardown_each),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
