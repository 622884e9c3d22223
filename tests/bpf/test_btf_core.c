// SPDX-License-Identifier: MIT
/*
 * The minimal kernel BTF relocates exactly like the whole vmlinux BTF: the object is loaded
 * twice, once per BTF, and every program's final instructions (CO-RE offsets, field sizes,
 * existence checks patched in) must be identical but for the map references libbpf embeds.
 * Then the cache's life in a run: built, hit, a corrupt or untrusted file replaced, turned off.
 * Root: loading needs CAP_BPF.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include "memtrack.skel.h"
#include <dirent.h>
#include <sys/stat.h>
#include "../lib/mt_check.h"
#include "track/attach.h"
#include "track/btf_min.h"
#include "track/rmap_backend.h"
#include "../lib/mt_tmpdir.h"

static struct memtrack_bpf *load(const char *btf_path)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = btf_path);
	struct memtrack_bpf *s = memtrack_bpf__open_opts(&oo);
	struct rmap_choice none = {0};

	assert_non_null(s);
	/* Every program a run of this machine can load: the tracepoint backend's, not fentry's
	 * (refused where BPF tracing programs are). */
	rmap_backend__set_autoload(s, MT_RMAP_TRACEPOINT, &none);
	attach__session_autoload(s->progs.mt_alloc_session);
	/* Small ring: two of them live at once. */
	bpf_map__set_max_entries(s->maps.events, 1 << 16);
	assert_int_equal(memtrack_bpf__load(s), 0);
	return s;
}

/* ld_imm64 of a map (fd or value): its two immediates are per-load, not per-relocation. */
static bool is_map_ref(const struct bpf_insn *in)
{
	return in->code == (BPF_LD | BPF_IMM | BPF_DW) &&
	       (in->src_reg == BPF_PSEUDO_MAP_FD || in->src_reg == BPF_PSEUDO_MAP_VALUE);
}

static void test_min_btf_relocates_like_vmlinux(void **state)
{
	char path[] = "/tmp/memtrack-test-btf-XXXXXX";
	struct btf *k, *min = NULL;
	struct bpf_object *o;
	struct memtrack_bpf *full, *small;
	struct bpf_program *p;
	const void *obj, *raw;
	size_t obj_sz;
	unsigned progs = 0, relocated = 0;
	__u32 sz;
	int fd;

	(void)state;
	MT_REQUIRE_ROOT();
	k = btf__load_vmlinux_btf();
	assert_non_null(k);
	obj = memtrack_bpf__elf_bytes(&obj_sz);
	o = bpf_object__open_mem(obj, obj_sz, NULL);
	assert_non_null(o);
	assert_int_equal(btf_min__build(k, bpf_object__btf(o), &min), 0);
	raw = btf__raw_data(min, &sz);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, raw, sz), (ssize_t)sz);
	close(fd);

	full = load(NULL);
	small = load(path);
	bpf_object__for_each_program(p, full->obj)
	{
		struct bpf_program *q =
		    bpf_object__find_program_by_name(small->obj, bpf_program__name(p));
		const struct bpf_insn *a = bpf_program__insns(p), *b;
		size_t n = bpf_program__insn_cnt(p);

		assert_non_null(q);
		b = bpf_program__insns(q);
		assert_int_equal(bpf_program__insn_cnt(q), n);
		for (size_t i = 0; i < n; i++) {
			if (is_map_ref(&a[i])) {
				assert_true(is_map_ref(&b[i]));
				i++; /* the second half of ld_imm64 */
				continue;
			}
			if (memcmp(&a[i], &b[i], sizeof(a[i])))
				fail_msg("%s: instruction %zu differs: code %02x off %d imm %d vs "
					 "off %d imm %d",
					 bpf_program__name(p), i, a[i].code, a[i].off, a[i].imm,
					 b[i].off, b[i].imm);
		}
		progs++;
		relocated += n;
	}
	/* every program was compared, and there was something to compare */
	assert_true(progs >= 8);
	assert_true(relocated > 1000);
	memtrack_bpf__destroy(full);
	memtrack_bpf__destroy(small);
	unlink(path);
	btf__free(min);
	btf__free(k);
	bpf_object__close(o);
}

/* The one cache file in dir ("" if none, fails on more than one). */
static void cache_file(const char *dir, char *path, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	path[0] = 0;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "vmlinux-", 8) && strstr(e->d_name, ".btf")) {
			snprintf(path, len, "%s/%s", dir, e->d_name);
			n++;
		}
	closedir(d);
	assert_true(n <= 1);
}

/* Tracks /bin/true with env; returns the manifest's mechanisms.btf (static buffer). */
static const char *run_btf(void **state, const char *const env[])
{
	static const char *const argv[] = {"/bin/true", NULL};
	static char source[32];
	struct mt_run_opts o = {.env = env};
	struct mt_run *r = mt_new_run(state);
	json_t *v;

	mt_track_ok(r, &o, argv, 0);
	v = mt_json(r, "mechanisms.btf");
	MT_CHECK(r, json_is_string(v), "manifest has no mechanisms.btf");
	snprintf(source, sizeof(source), "%s", json_string_value(v));
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "run not complete");
	return source;
}

static void test_cache_life(void **state)
{
	char dir[] = "/tmp/memtrack-test-btfcache-XXXXXX", env_dir[128], cdir[128], path[512];
	/* every run loads: a kept load (src/track/prog_cache.h) uses no BTF */
	const char *env[] = {env_dir, "MEMTRACK_PROG_CACHE=0", NULL};
	const char *off[] = {env_dir, "MEMTRACK_BTF_CACHE=0", "MEMTRACK_PROG_CACHE=0", NULL};
	struct stat st;
	FILE *f;

	MT_REQUIRE_ROOT();
	assert_non_null(mkdtemp(dir));
	snprintf(env_dir, sizeof(env_dir), "MEMTRACK_CACHE_DIR=%s/c", dir);
	snprintf(cdir, sizeof(cdir), "%s/c", dir);

	assert_string_equal(run_btf(state, env), "generated");
	cache_file(cdir, path, sizeof(path));
	assert_true(path[0]);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_true(st.st_size > 0 && st.st_size < 1 << 20);
	assert_string_equal(run_btf(state, env), "cache");

	/* corrupt: the run falls back to vmlinux and removes the file (the warning it prints is
	 * silenced by the harness's -q) */
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("not BTF", f);
	fclose(f);
	assert_string_equal(run_btf(state, env), "vmlinux");
	assert_int_equal(access(path, F_OK), -1);
	assert_string_equal(run_btf(state, env), "generated");

	/* writable by others: not trusted, rebuilt (and replaced by a 0644 file) */
	assert_int_equal(chmod(path, 0666), 0);
	assert_string_equal(run_btf(state, env), "generated");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);

	/* off: nothing read or written */
	assert_int_equal(unlink(path), 0);
	assert_string_equal(run_btf(state, off), "vmlinux");
	cache_file(cdir, path, sizeof(path));
	assert_string_equal(path, "");
	assert_int_equal(mt_tmpdir_remove(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_min_btf_relocates_like_vmlinux),
	    cmocka_unit_test_teardown(test_cache_life, mt_teardown),
	};

	libbpf_set_print(NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
