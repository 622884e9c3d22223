// SPDX-License-Identifier: MIT
/*
 * Root tests: memtrack run by an unprivileged user (issue 10, item 7).
 * - Without capabilities it fails with advice that names only the capabilities it needs, and
 *   the kernel BTF cache it built stays: a permission error is not a corrupt cache.
 * - With exactly that advice followed (cap_bpf,cap_perfmon on a copy of the binary; no
 *   cap_sys_resource, which this host's bounding set lacks) the same user tracks a command.
 * The user is `nobody` (65534), which needs no /etc/passwd entry; the outputs and the cache go
 * to folders it owns.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>
#include <linux/capability.h>
#include "../lib/mt_check.h"
#include "../lib/mt_exec.h"

#define NOBODY 65534

struct priv_env {
	char base[64];		 /* temp dir, 0755 */
	char cache[96], out[96]; /* owned by nobody */
	char bin[96];		 /* a copy of build/memtrack */
};

static void mkdir_nobody(const char *path)
{
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chown(path, NOBODY, NOBODY), 0);
}

static int setup(void **state)
{
	struct priv_env *e = calloc(1, sizeof(*e));
	char cmd[512];

	assert_non_null(e);
	snprintf(e->base, sizeof(e->base), "/tmp/memtrack-priv-XXXXXX");
	assert_non_null(mkdtemp(e->base));
	assert_int_equal(chmod(e->base, 0755), 0);
	snprintf(e->cache, sizeof(e->cache), "%s/cache", e->base);
	snprintf(e->out, sizeof(e->out), "%s/out", e->base);
	snprintf(e->bin, sizeof(e->bin), "%s/memtrack", e->base);
	mkdir_nobody(e->cache);
	mkdir_nobody(e->out);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 0755 '%s'", mt_memtrack(), e->bin,
		 e->bin);
	if (geteuid() == 0 && access(mt_memtrack(), X_OK) == 0)
		assert_int_equal(system(cmd), 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct priv_env *e = *state;
	char cmd[128];

	if (e && !getenv("MT_TEST_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->base);
		(void)!system(cmd);
	}
	free(e);
	return 0;
}

/* The one *.btf file in dir: its inode, 0 when there is none; fails on more than one. */
static ino_t btf_file(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	ino_t ino = 0;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);

		if (l > 4 && !strcmp(de->d_name + l - 4, ".btf")) {
			ino = de->d_ino;
			n++;
		}
	}
	closedir(d);
	assert_true(n <= 1);
	return ino;
}

static void run_as_nobody(const struct priv_env *e, const char *bin, struct mt_exec_result *r)
{
	char cache_env[128];
	const char *env[] = {cache_env, "MEMTRACK_BTF_CACHE", "SUDO_UID", "SUDO_GID", NULL};
	const char *argv[] = {bin, "track", "-o", e->out, "--", "/bin/true", NULL};
	struct mt_exec_opts o = {.as_user = true, .uid = NOBODY, .gid = NOBODY, .env = env};

	snprintf(cache_env, sizeof(cache_env), "MEMTRACK_CACHE_DIR=%s", e->cache);
	assert_int_equal(mt_exec(&o, argv, r), 0);
}

static void test_no_capabilities_keeps_the_cache(void **state)
{
	struct priv_env *e = *state;
	struct mt_exec_result r;
	ino_t first;

	MT_REQUIRE_ROOT();
	mt_need_file(e->bin);
	for (int i = 0; i < 2; i++) {
		run_as_nobody(e, e->bin, &r);
		if (r.status != 125 || !strstr(r.output, "setcap cap_bpf,cap_perfmon+ep") ||
		    strstr(r.output, "sys_resource") || strstr(r.output, "removed")) {
			fprintf(stderr, "%s", r.output);
			fail_msg("run %d as nobody: exit %d, want 125 with the setcap advice", i,
				 r.status);
		}
		mt_exec_free(&r);
		/* built by the first run, reused (not deleted and rebuilt) by the second */
		if (i == 0)
			first = btf_file(e->cache);
		if (!first)
			fail_msg("the BTF cache built by the unprivileged run was deleted");
		assert_int_equal(btf_file(e->cache), first);
	}
}

static void test_setcap_advice_works(void **state)
{
	struct priv_env *e = *state;
	/* what `setcap cap_bpf,cap_perfmon+ep` writes: security.capability, revision 2 */
	struct vfs_cap_data cap = {
	    .magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE,
	    .data = {{0, 0}, {CAP_TO_MASK(CAP_BPF) | CAP_TO_MASK(CAP_PERFMON), 0}},
	};
	struct mt_exec_result r;
	char path[512];
	DIR *d;
	struct dirent *de;
	int artifacts = 0;

	MT_REQUIRE_ROOT();
	mt_need_file(e->bin);
	_Static_assert(CAP_BPF >= 32 && CAP_PERFMON >= 32, "both capabilities in the high word");
	if (setxattr(e->bin, "security.capability", &cap, sizeof(cap), 0)) {
		print_message("[ SKIP     ] cannot set file capabilities here: %s\n",
			      strerror(errno));
		skip();
	}
	run_as_nobody(e, e->bin, &r);
	if (r.status != 0) {
		fprintf(stderr, "%s", r.output);
		fail_msg("memtrack with cap_bpf,cap_perfmon as nobody exited %d, want 0", r.status);
	}
	mt_exec_free(&r);
	d = opendir(e->out);
	assert_non_null(d);
	while ((de = readdir(d))) {
		struct stat st;

		if (!strstr(de->d_name, ".MemtrackArtifact.msgpack"))
			continue;
		artifacts++;
		snprintf(path, sizeof(path), "%s/%s", e->out, de->d_name);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_uid, NOBODY);
	}
	closedir(d);
	assert_int_equal(artifacts, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_no_capabilities_keeps_the_cache),
	    cmocka_unit_test(test_setcap_advice_works),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
