// SPDX-License-Identifier: MIT
/*
 * Root tests: the program cache (src/track/prog_cache.h), in a private folder of the BPF
 * filesystem ($MEMTRACK_BPFFS) so that other runs' slots are not touched.
 *   - the API: a stored and sealed slot is found again with every object; reset empties hash
 *     maps, zeroes arrays (every CPU's copy) and moves the ring's reader to its writer; names
 *     with dots survive; a slot is busy while its flock is held or a process of its owner map
 *     lives; an unsealed slot is emptied; the folder must be private; MEMTRACK_PROG_CACHE=0;
 *     unload frees idle slots and keeps busy ones; beyond PROG_CACHE_MAX_KEPT slots the idle
 *     ones used longest ago are removed, a busy one never.
 *   - runs: a second run takes the first run's load and records exactly what the first did;
 *     a process the first run left running is nobody's in the second (its exit is no event
 *     there); with every slot busy, or a slot missing a map, the run loads and records all.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "../lib/mt_bpffs.h"
#include "../lib/mt_check.h"
#include "../lib/mt_tmpdir.h"
#include "track/prog_cache.h"

static char root[128];
static bool have_bpffs; /* on /sys/fs/bpf, there or mounted by setup */

/* Root, and a BPF filesystem to keep programs in: else skip, saying why. */
static int setup(void **state)
{
	(void)state;
	if (geteuid() == 0)
		have_bpffs = mt_bpffs_root(root, sizeof(root), "mt-test");
	unsetenv("MEMTRACK_PROG_CACHE");
	return 0;
}

static int teardown_each(void **state)
{
	mt_teardown(state);
	unsetenv("MEMTRACK_PROG_CACHE");
	mt_tmpdir_remove(root);
	return 0;
}

static int array_map(enum bpf_map_type type, uint32_t n)
{
	int fd = bpf_map_create(type, "arr", 4, 8, n, NULL);

	assert_true(fd >= 0);
	return fd;
}

/* One 8-byte record into the ring: a socket filter calling bpf_ringbuf_output, run once. */
static void ring_write(int ring)
{
	struct bpf_insn insns[] = {
	    {.code = BPF_ST | BPF_MEM | BPF_DW, .dst_reg = BPF_REG_10, .off = -8, .imm = 42},
	    {.code = BPF_LD | BPF_DW | BPF_IMM,
	     .dst_reg = BPF_REG_1,
	     .src_reg = BPF_PSEUDO_MAP_FD,
	     .imm = ring},
	    {0},
	    {.code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10},
	    {.code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -8},
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_3, .imm = 8},
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_4, .imm = 0},
	    {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_ringbuf_output},
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	unsigned char pkt[64] = {0};
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof(pkt));
	int prog = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "mt_ring_w", "GPL", insns,
				 sizeof(insns) / sizeof(insns[0]), NULL);

	assert_true(prog >= 0);
	assert_int_equal(bpf_prog_test_run_opts(prog, &o), 0);
	close(prog);
}

/* The ring's reader and writer positions. */
static void ring_pos(int ring, unsigned long *cons, unsigned long *prod)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned long *c = mmap(NULL, pg, PROT_READ, MAP_SHARED, ring, 0);
	unsigned long *p = mmap(NULL, pg, PROT_READ, MAP_SHARED, ring, pg);

	assert_true(c != MAP_FAILED && p != MAP_FAILED);
	*cons = *c;
	*prod = *p;
	munmap(c, pg);
	munmap(p, pg);
}

static uint32_t prog_id(int fd)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	assert_int_equal(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	return info.id;
}

/* Stored, sealed, found again: every object, its state put back as a fresh load has it. */
static void test_store_take_reset(void **state)
{
	struct prog_cache c;
	int hash, pcpu, ring, prog, ncpu = libbpf_num_possible_cpus();
	struct bpf_insn ret0[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	uint64_t v = 7, *vals;
	unsigned long cons, prod;
	uint32_t id;

	(void)state;
	MT_REQUIRE_BPFFS(have_bpffs);
	assert_int_equal(prog_cache__open(&c, 0xabc), 0);
	assert_true(c.dir_fd >= 0);
	assert_false(c.hit);
	hash = bpf_map_create(BPF_MAP_TYPE_HASH, "h", 4, 8, 16, NULL);
	pcpu = array_map(BPF_MAP_TYPE_PERCPU_ARRAY, 3);
	ring = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "r", 0, 0, 4096, NULL);
	prog = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "p", "GPL", ret0, 2, NULL);
	assert_true(hash >= 0 && ring >= 0 && prog >= 0);
	id = prog_id(prog);
	for (uint32_t k = 0; k < 3; k++)
		assert_int_equal(bpf_map_update_elem(hash, &k, &v, BPF_ANY), 0);
	vals = calloc(ncpu, 8);
	for (int i = 0; i < ncpu; i++)
		vals[i] = 100 + i;
	for (uint32_t k = 0; k < 3; k++)
		assert_int_equal(bpf_map_update_elem(pcpu, &k, vals, BPF_ANY), 0);
	ring_write(ring);
	assert_int_equal(prog_cache__store(&c, "h.with.dots", hash, false), 0);
	assert_int_equal(prog_cache__store(&c, "pcpu", pcpu, false), 0);
	assert_int_equal(prog_cache__store(&c, "ring", ring, false), 0);
	assert_int_equal(prog_cache__store(&c, "prog", prog, true), 0);
	assert_int_equal(prog_cache__seal(&c), 0);
	prog_cache__close(&c);
	close(hash);
	close(pcpu);
	close(ring);
	close(prog);

	assert_int_equal(prog_cache__open(&c, 0xabc), 0);
	assert_true(c.hit);
	assert_non_null(strstr(c.state, "kept"));
	assert_int_equal(c.n, 4);
	hash = prog_cache__fd(&c, "h.with.dots");
	pcpu = prog_cache__fd(&c, "pcpu");
	ring = prog_cache__fd(&c, "ring");
	prog = prog_cache__fd(&c, "prog");
	assert_true(hash >= 0 && pcpu >= 0 && ring >= 0 && prog >= 0);
	assert_int_equal(prog_cache__fd(&c, "absent"), -ENOENT);
	assert_int_equal(prog_id(prog), id);
	ring_pos(ring, &cons, &prod);
	assert_int_equal(cons, 0);
	assert_int_equal(prod, 16); /* an 8-byte header and the 8-byte record */

	assert_int_equal(prog_cache__reset(&c), 0);
	{
		uint32_t k;

		assert_int_equal(bpf_map_get_next_key(hash, NULL, &k), -ENOENT); /* empty */
	}
	for (uint32_t k = 0; k < 3; k++) {
		assert_int_equal(bpf_map_lookup_elem(pcpu, &k, vals), 0);
		for (int i = 0; i < ncpu; i++)
			assert_int_equal(vals[i], 0);
	}
	ring_pos(ring, &cons, &prod);
	assert_int_equal(cons, 16);
	assert_int_equal(prod, 16);
	free(vals);
	prog_cache__close(&c);
}

/* A slot whose flock is held is passed over; with every slot held, no cache. */
static void test_busy_lock(void **state)
{
	struct prog_cache c[PROG_CACHE_SLOTS + 1];

	(void)state;
	MT_REQUIRE_BPFFS(have_bpffs);
	for (int i = 0; i < PROG_CACHE_SLOTS; i++) {
		char want[32];

		assert_int_equal(prog_cache__open(&c[i], 0x5107), 0);
		assert_true(c[i].dir_fd >= 0);
		snprintf(want, sizeof(want), "-%d", i);
		assert_non_null(strstr(c[i].path, want));
	}
	assert_int_equal(prog_cache__open(&c[PROG_CACHE_SLOTS], 0x5107), 0);
	assert_int_equal(c[PROG_CACHE_SLOTS].dir_fd, -1);
	assert_non_null(strstr(c[PROG_CACHE_SLOTS].state, "every slot in use"));
	for (int i = 0; i < PROG_CACHE_SLOTS; i++)
		prog_cache__close(&c[i]);
	/* released: slot 0 again */
	assert_int_equal(prog_cache__open(&c[0], 0x5107), 0);
	assert_non_null(strstr(c[0].path, "-0"));
	prog_cache__close(&c[0]);
}

/* A slot stays busy while a process of its owner map lives (it may have links on the
 * programs); once that process has exited it is usable, and found complete. */
static void test_busy_owner(void **state)
{
	struct prog_cache c;
	int map, status;
	pid_t child;

	(void)state;
	MT_REQUIRE_BPFFS(have_bpffs);
	assert_int_equal(prog_cache__open(&c, 0x0e), 0);
	map = array_map(BPF_MAP_TYPE_ARRAY, 1);
	assert_int_equal(prog_cache__store(&c, "m", map, false), 0);
	assert_int_equal(prog_cache__seal(&c), 0);
	child = fork();
	if (child == 0) {
		pause();
		_exit(0);
	}
	prog_cache__set_owner(&c, PC_OWNER_DETACHER, child);
	prog_cache__close(&c);
	assert_int_equal(prog_cache__open(&c, 0x0e), 0);
	assert_non_null(strstr(c.path, "-1")); /* slot 0: its detacher lives */
	assert_false(c.hit);
	prog_cache__close(&c);
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_int_equal(prog_cache__open(&c, 0x0e), 0);
	assert_non_null(strstr(c.path, "-0"));
	assert_true(c.hit);
	assert_true(prog_cache__fd(&c, "m") >= 0);
	prog_cache__close(&c);
	close(map);
}

/* A slot that was never sealed (a run cut short) is emptied, not taken. */
static void test_unsealed_emptied(void **state)
{
	struct prog_cache c;
	int map = array_map(BPF_MAP_TYPE_ARRAY, 1);
	char path[PATH_MAX + 8];

	(void)state;
	MT_REQUIRE_BPFFS(have_bpffs);
	assert_int_equal(prog_cache__open(&c, 0x75), 0);
	assert_int_equal(prog_cache__store(&c, "m", map, false), 0);
	snprintf(path, sizeof(path), "%s/m-m", c.path);
	assert_int_equal(access(path, F_OK), 0);
	prog_cache__close(&c);
	assert_int_equal(prog_cache__open(&c, 0x75), 0);
	assert_false(c.hit);
	assert_int_equal(c.n, 0);
	assert_int_equal(access(path, F_OK), -1);
	prog_cache__close(&c);
	close(map);
}

/* Off: MEMTRACK_PROG_CACHE=0, or a root folder others can enter. */
static void test_off(void **state)
{
	struct prog_cache c;

	(void)state;
	MT_REQUIRE_BPFFS(have_bpffs);
	setenv("MEMTRACK_PROG_CACHE", "0", 1);
	assert_int_equal(prog_cache__open(&c, 1), 0);
	assert_int_equal(c.dir_fd, -1);
	assert_non_null(strstr(c.state, "MEMTRACK_PROG_CACHE=0"));
	assert_int_equal(access(root, F_OK), -1); /* nothing made */
	unsetenv("MEMTRACK_PROG_CACHE");
	assert_int_equal(mkdir(root, 0755), 0);
	assert_int_equal(prog_cache__open(&c, 1), 0);
	assert_int_equal(c.dir_fd, -1);
	assert_non_null(strstr(c.state, "not private"));
}

/* unload frees the idle slots and leaves the one in use. */
static void test_unload(void **state)
{
	struct prog_cache a, b;
	int removed, kept, map = array_map(BPF_MAP_TYPE_ARRAY, 1);

	(void)state;
	MT_REQUIRE_BPFFS(have_bpffs);
	assert_int_equal(prog_cache__open(&a, 0x11), 0);
	assert_int_equal(prog_cache__store(&a, "m", map, false), 0);
	assert_int_equal(prog_cache__seal(&a), 0);
	prog_cache__close(&a);				 /* idle */
	assert_int_equal(prog_cache__open(&b, 0x22), 0); /* in use */
	assert_int_equal(prog_cache__unload(&removed, &kept), 0);
	assert_int_equal(removed, 1);
	assert_int_equal(kept, 1);
	assert_int_equal(access(a.path, F_OK), -1);
	assert_int_equal(access(b.path, F_OK), 0);
	prog_cache__close(&b);
	assert_int_equal(prog_cache__unload(&removed, &kept), 0);
	assert_int_equal(removed, 1);
	assert_int_equal(kept, 0);
	assert_int_equal(access(root, F_OK), -1);
	close(map);
}

static int count_slots(void)
{
	DIR *d = opendir(root);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.' && e->d_type == DT_DIR;
	if (d)
		closedir(d);
	return n;
}

/* Beyond PROG_CACHE_MAX_KEPT slots in all, a new one removes the idle ones used longest ago;
 * a busy one is never removed. */
static void test_evict(void **state)
{
	struct prog_cache c;
	int map = array_map(BPF_MAP_TYPE_ARRAY, 1);
	char first[PATH_MAX], second[PATH_MAX];

	(void)state;
	MT_REQUIRE_BPFFS(have_bpffs);
	for (uint64_t k = 1; k <= PROG_CACHE_MAX_KEPT; k++) {
		assert_int_equal(prog_cache__open(&c, k), 0);
		assert_int_equal(prog_cache__store(&c, "m", map, false), 0);
		assert_int_equal(prog_cache__seal(&c), 0);
		if (k == 1)
			snprintf(first, sizeof(first), "%s", c.path);
		if (k == 2)
			snprintf(second, sizeof(second), "%s", c.path);
		prog_cache__close(&c);
		usleep(20000); /* distinct folder times */
	}
	assert_int_equal(count_slots(), PROG_CACHE_MAX_KEPT);
	/* a hit is a use: key 1 becomes the newest, key 2 the oldest */
	assert_int_equal(prog_cache__open(&c, 1), 0);
	assert_true(c.hit);
	prog_cache__close(&c);
	usleep(20000);
	assert_int_equal(prog_cache__open(&c, 100), 0); /* a new key: one slot too many */
	assert_false(c.hit);
	assert_int_equal(count_slots(), PROG_CACHE_MAX_KEPT);
	assert_int_equal(access(second, F_OK), -1);
	assert_int_equal(access(first, F_OK), 0);
	prog_cache__close(&c);
	/* the oldest busy (its lock held, as a run holds it): kept, the next oldest goes */
	{
		char oldest[PATH_MAX], next[PATH_MAX];
		int fd;

		/* now, oldest first: key 3, key 4, key 1, key 100 */
		snprintf(oldest, sizeof(oldest), "%s", first);
		snprintf(next, sizeof(next), "%s", first);
		memcpy(strrchr(oldest, '/') + 1, "0000000000000003", 16);
		memcpy(strrchr(next, '/') + 1, "0000000000000004", 16);
		fd = open(oldest, O_RDONLY | O_DIRECTORY);
		assert_true(fd >= 0);
		assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
		usleep(20000);
		assert_int_equal(prog_cache__open(&c, 101), 0);
		prog_cache__close(&c);
		assert_int_equal(access(oldest, F_OK), 0);
		assert_int_equal(access(next, F_OK), -1);
		assert_int_equal(count_slots(), PROG_CACHE_MAX_KEPT);
		close(fd);
	}
	close(map);
}

/* --- runs --- */

/* The one slot folder under root (runs of one configuration); "" if none. */
static void only_slot(char *out, size_t len, int want_slot)
{
	DIR *d = opendir(root);
	struct dirent *e;

	out[0] = '\0';
	while (d && (e = readdir(d))) {
		char suffix[8];
		size_t n = strlen(e->d_name);

		snprintf(suffix, sizeof(suffix), "-%d", want_slot);
		if (e->d_name[0] != '.' && n > 2 && !strcmp(e->d_name + n - 2, suffix))
			snprintf(out, len, "%s/%s", root, e->d_name);
	}
	if (d)
		closedir(d);
}

/* Whether pid is gone or a zombie. */
static bool pid_done(uint32_t pid)
{
	char path[64], buf[512], *rp;
	FILE *f;
	size_t n;

	if (!pid)
		return true;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	rp = strrchr(buf, ')');
	return rp && (rp[2] == 'Z' || rp[2] == 'X');
}

/* Waits (at most 20 s) until the slot is free: unlocked, and every process of its last run
 * (memtrack, its watchdog, its detacher) gone. */
static void wait_idle(const char *slot)
{
	char owner[PATH_MAX + 16];

	snprintf(owner, sizeof(owner), "%s/owner", slot);
	for (int i = 0; i < 2000; i++) {
		int fd = open(slot, O_RDONLY | O_DIRECTORY), map = bpf_obj_get(owner);
		bool free_ = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;

		for (uint32_t k = 0; free_ && map >= 0 && k < PC_OWNER_NR; k++) {
			uint32_t pid = 0;

			if (!bpf_map_lookup_elem(map, &k, &pid) && !pid_done(pid))
				free_ = false;
		}
		if (fd >= 0)
			close(fd);
		if (map >= 0)
			close(map);
		if (free_)
			return;
		usleep(10000);
	}
	fail_msg("slot %s still in use after 20 s", slot);
}

static const char *programs(struct mt_run *r)
{
	json_t *j = mt_json(r, "mechanisms.bpf_programs");

	MT_CHECK(r, json_is_string(j), "manifest has no mechanisms.bpf_programs");
	return json_string_value(j);
}

/* The run's heap events as (type, size) counts: what two runs of alloc_fixed must share. */
static void heap_counts(const struct mt_run *r, uint64_t *mallocs, uint64_t *free_)
{
	*mallocs = *free_ = 0;
	for (size_t i = 0; i < r->nr_ev; i++) {
		if (r->ev[i].type == MT_EV_MALLOC && r->ev[i].size == 4000)
			(*mallocs)++;
		if (r->ev[i].type == MT_EV_FREE)
			(*free_)++;
	}
}

static void run_fixed(struct mt_run *r)
{
	mt_track_ok(r, NULL, MT_TARGET_ARGV("alloc_fixed", "300", "4000"), 0);
	MT_CHECK(r, json_is_true(mt_json(r, "complete")), "run not complete");
	MT_CHECK(r, mt_need_u64(r, "drops.total") == 0, "drops");
}

/* The second run takes the first one's programs and records the same calls. */
static void test_runs_reuse(void **state)
{
	struct mt_run *a = mt_new_run(state), b = {0};
	uint64_t ma, fa, mb, fb;
	char slot[PATH_MAX];

	MT_REQUIRE_KEEPING(have_bpffs);
	run_fixed(a);
	MT_CHECK(a, !strncmp(programs(a), "loaded, kept ", 13), "first run: bpf_programs '%s'",
		 programs(a));
	only_slot(slot, sizeof(slot), 0);
	MT_CHECK(a, slot[0], "no slot 0 under %s", root);
	wait_idle(slot);
	run_fixed(&b);
	MT_CHECK(&b, !strncmp(programs(&b), "kept ", 5) && strstr(programs(&b), slot),
		 "second run: bpf_programs '%s', want kept %s", programs(&b), slot);
	MT_CHECK(&b, !strcmp(json_string_value(mt_json(&b, "mechanisms.btf")), "kept"),
		 "second run: btf not 'kept'");
	heap_counts(a, &ma, &fa);
	heap_counts(&b, &mb, &fb);
	MT_CHECK(&b, ma == 300 && mb == 300, "mallocs of 4000 bytes: %llu then %llu, want 300",
		 (unsigned long long)ma, (unsigned long long)mb);
	MT_CHECK(&b, fa == fb && fb >= 300, "frees: %llu then %llu", (unsigned long long)fa,
		 (unsigned long long)fb);
	mt_run_free(&b);
}

static bool has_pid(const struct mt_run *r, int32_t pid)
{
	for (size_t i = 0; i < r->nr_ev; i++)
		if (r->ev[i].pid == pid)
			return true;
	return false;
}

/* A process the first run tracked is no process of the second run's, even when memtrack was
 * killed (SIGKILL: nothing cleaned up, its maps still name the tree, its ring may hold records)
 * and the process exits during the second run: the kept maps and ring start empty. */
static void test_killed_run_forgotten(void **state)
{
	struct mt_run *a = mt_new_run(state), b = {0};
	char slot[PATH_MAX], cmd[PATH_MAX + 128];
	struct mt_run_opts oa = {.shell = cmd,
				 .signal = SIGKILL,
				 .signal_after_line = "ready",
				 .signal_after_ms = 200,
				 .timeout_s = 60},
			   ob = {.shell = cmd};
	const struct mt_expect *p;
	int rc;

	MT_REQUIRE_KEEPING(have_bpffs);
	/* a tree that outlives memtrack: bash waiting for a sleep */
	snprintf(cmd, sizeof(cmd),
		 "%s 10 100; sleep 60 & echo \"ready $! $! 0 0 0 0\" >&$MT_EXPECT_FD; wait",
		 mt_target("alloc_fixed"));
	rc = mt_track(a, &oa, NULL);
	p = mt_expect_find(a->exp, a->nr_exp, "ready", 0, 0);
	MT_CHECK(a, rc == 0 && p, "no first run, or no ready line");
	MT_CHECK(a, a->status == 128 + SIGKILL, "memtrack exited %d, not killed", a->status);

	only_slot(slot, sizeof(slot), 0);
	MT_CHECK(a, slot[0], "no slot 0 under %s", root);
	wait_idle(slot);
	/* the second run ends the first one's tree: no exit of it may be an event here */
	snprintf(cmd, sizeof(cmd),
		 "kill %d; while kill -0 %d 2>/dev/null; do sleep 0.01; done; sleep 0.2; %s 10 100",
		 p->pid, p->pid, mt_target("alloc_fixed"));
	mt_track_ok(&b, &ob, NULL, 0);
	MT_CHECK(&b, !strncmp(programs(&b), "kept ", 5), "second run: bpf_programs '%s'",
		 programs(&b));
	for (size_t i = 0; i < b.nr_ev; i++)
		MT_CHECK(&b, !has_pid(a, b.ev[i].pid) && b.ev[i].pid != p->pid,
			 "the second run recorded process %d of the first", b.ev[i].pid);
	kill(p->pid, SIGKILL);
	mt_run_free(&b);
}

/* Every slot held by someone else: the run loads, keeps nothing, and records everything. */
static void test_every_slot_busy(void **state)
{
	struct mt_run *a = mt_new_run(state), b = {0};
	char slot[PATH_MAX];
	int fds[PROG_CACHE_SLOTS];
	uint64_t m, f;

	MT_REQUIRE_KEEPING(have_bpffs);
	run_fixed(a);
	only_slot(slot, sizeof(slot), 0);
	wait_idle(slot);
	for (int i = 0; i < PROG_CACHE_SLOTS; i++) {
		slot[strlen(slot) - 1] = (char)('0' + i);
		mkdir(slot, 0700);
		fds[i] = open(slot, O_RDONLY | O_DIRECTORY);
		assert_true(fds[i] >= 0);
		assert_int_equal(flock(fds[i], LOCK_EX | LOCK_NB), 0);
	}
	run_fixed(&b);
	MT_CHECK(&b, strstr(programs(&b), "every slot in use"), "bpf_programs '%s'", programs(&b));
	heap_counts(&b, &m, &f);
	MT_CHECK(&b, m == 300, "mallocs of 4000 bytes: %llu, want 300", (unsigned long long)m);
	for (int i = 0; i < PROG_CACHE_SLOTS; i++)
		close(fds[i]);
	mt_run_free(&b);
}

/* A slot missing one of its maps: given up, the run loads and records everything; the run
 * after it keeps a complete load again. */
static void test_broken_slot(void **state)
{
	struct mt_run *a = mt_new_run(state), b = {0}, c = {0};
	char slot[PATH_MAX], procs[PATH_MAX + 16];
	uint64_t m, f;

	MT_REQUIRE_KEEPING(have_bpffs);
	run_fixed(a);
	only_slot(slot, sizeof(slot), 0);
	wait_idle(slot);
	snprintf(procs, sizeof(procs), "%s/m-procs", slot);
	assert_int_equal(unlink(procs), 0);
	run_fixed(&b);
	MT_CHECK(&b, strstr(programs(&b), "unusable"), "bpf_programs '%s'", programs(&b));
	heap_counts(&b, &m, &f);
	MT_CHECK(&b, m == 300, "mallocs of 4000 bytes: %llu, want 300", (unsigned long long)m);
	wait_idle(slot);
	run_fixed(&c);
	MT_CHECK(&c, !strncmp(programs(&c), "loaded, kept ", 13), "third run: bpf_programs '%s'",
		 programs(&c));
	mt_run_free(&b);
	mt_run_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_store_take_reset, teardown_each),
	    cmocka_unit_test_teardown(test_busy_lock, teardown_each),
	    cmocka_unit_test_teardown(test_busy_owner, teardown_each),
	    cmocka_unit_test_teardown(test_unsealed_emptied, teardown_each),
	    cmocka_unit_test_teardown(test_off, teardown_each),
	    cmocka_unit_test_teardown(test_unload, teardown_each),
	    cmocka_unit_test_teardown(test_evict, teardown_each),
	    cmocka_unit_test_teardown(test_runs_reuse, teardown_each),
	    cmocka_unit_test_teardown(test_killed_run_forgotten, teardown_each),
	    cmocka_unit_test_teardown(test_every_slot_busy, teardown_each),
	    cmocka_unit_test_teardown(test_broken_slot, teardown_each),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
