// SPDX-License-Identifier: MIT
/*
 * Root tests: the BPF ring buffer as the consumer's source (consumer.c), fed by a socket filter
 * program run with BPF_PROG_TEST_RUN that writes one record a run with bpf_ringbuf_output. The
 * data area is mapped as far as records reach, not whole at the start (an 8 MiB ring's pages
 * cost ~1.5 ms to map); records are delivered whole and in order over several laps of a ring
 * whose mapping grows meanwhile, records crossing its end included.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include "../lib/mt_check.h"
#include "track/consumer.h"

/* A few instructions, spelt out (the kernel's filter.h macros are not uapi). */
#define INSN(c, d, s, o, i)                                                                        \
	((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define CALL(fn)	 INSN(BPF_JMP | BPF_CALL, 0, 0, 0, (fn))
#define STX_DW(off, src) INSN(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, (src), (off), 0)
#define ST_W(off, v)	 INSN(BPF_ST | BPF_MEM | BPF_W, BPF_REG_10, 0, (off), (v))
#define ST_DW(off, v)	 INSN(BPF_ST | BPF_MEM | BPF_DW, BPF_REG_10, 0, (off), (v))
#define MOV_IMM(d, v)	 INSN(BPF_ALU64 | BPF_MOV | BPF_K, (d), 0, 0, (v))
#define MOV_REG(d, s)	 INSN(BPF_ALU64 | BPF_MOV | BPF_X, (d), (s), 0, 0)
#define ADD_IMM(d, v)	 INSN(BPF_ALU64 | BPF_ADD | BPF_K, (d), 0, 0, (v))

#define REC ((int)sizeof(struct mt_event)) /* 48 bytes, at fp - REC */

/* One Malloc record a run: ts = addr = bpf_ktime_get_ns(), size 16. */
static int load_writer(int ring_fd)
{
	struct bpf_insn insns[] = {
	    CALL(BPF_FUNC_ktime_get_ns),
	    STX_DW(-REC + (int)offsetof(struct mt_event, ts), BPF_REG_0),
	    STX_DW(-REC + (int)offsetof(struct mt_event, addr), BPF_REG_0),
	    ST_W(-REC + (int)offsetof(struct mt_event, type), MT_EV_MALLOC),
	    ST_W(-REC + (int)offsetof(struct mt_event, pid), 1),
	    ST_W(-REC + (int)offsetof(struct mt_event, tid), 1),
	    ST_W(-REC + (int)offsetof(struct mt_event, aux), 0),
	    ST_DW(-REC + (int)offsetof(struct mt_event, size), 16),
	    ST_DW(-REC + (int)offsetof(struct mt_event, old_addr), 0),
	    INSN(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, BPF_PSEUDO_MAP_FD, 0, ring_fd),
	    INSN(0, 0, 0, 0, 0),
	    MOV_REG(BPF_REG_2, BPF_REG_10),
	    ADD_IMM(BPF_REG_2, -REC),
	    MOV_IMM(BPF_REG_3, REC),
	    MOV_IMM(BPF_REG_4, 0),
	    CALL(BPF_FUNC_ringbuf_output),
	    MOV_IMM(BPF_REG_0, 0),
	    INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	_Static_assert(sizeof(struct mt_event) == 48, "the record the program writes");
	int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, "mt_test_ring", "GPL", insns,
			       sizeof(insns) / sizeof(insns[0]), NULL);

	assert_true(fd >= 0);
	return fd;
}

/* n records into the ring */
static void write_records(int prog_fd, unsigned n)
{
	uint8_t pkt[64] = {0};
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof(pkt), .repeat = n);

	assert_int_equal(bpf_prog_test_run_opts(prog_fd, &o), 0);
}

/* Resident bytes of this process' BPF map mappings (smaps Rss of "anon_inode:bpf-map"). Not
 * VmRSS: 6.1 does not count there the pages an mmap of a ring inserts (it does from 6.x). */
static long rss_bytes(void)
{
	char line[512];
	long kb, sum = 0;
	bool in = false;
	FILE *f = fopen("/proc/self/smaps", "r");
	unsigned long lo, hi;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) /* a mapping's first line */
			in = strstr(line, "bpf-map") != NULL;
		else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1)
			sum += kb;
	}
	fclose(f);
	return sum * 1024;
}

struct seen {
	uint64_t n, last_ts, bad;
};

static size_t check_sink(void *ctx, const struct mt_event *ev, size_t n)
{
	struct seen *s = ctx;

	for (size_t i = 0; i < n; i++) {
		if (ev[i].type != MT_EV_MALLOC || ev[i].pid != 1 || ev[i].addr != ev[i].ts ||
		    ev[i].size != 16 || ev[i].ts < s->last_ts)
			s->bad++;
		s->last_ts = ev[i].ts;
		s->n++;
	}
	return 0;
}

/* A consumer draining ring into check_sink (s), through a new ring source. */
static void open_consumer(struct consumer *c, int ring, struct seen *s)
{
	struct event_source *src;

	consumer__init(c);
	assert_int_equal(ringbuf_source__new(&src, ring), 0);
	assert_int_equal(consumer__add_source(c, src), 0);
	assert_int_equal(consumer__add_sink(c, check_sink, s), 0);
}

/* An 8 MiB ring: the source maps a small part of it, not 8 MiB (every page counts in RSS). */
static void test_maps_lazily(void **state)
{
	struct event_source *src;
	long before;
	int ring;

	(void)state;
	MT_REQUIRE_ROOT();
	ring = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "mt_test_ring", 0, 0, 8 << 20, NULL);
	assert_true(ring >= 0);
	before = rss_bytes();
	assert_int_equal(ringbuf_source__new(&src, ring), 0);
	print_message("RSS +%ld KiB for an 8 MiB ring\n", (rss_bytes() - before) / 1024);
	/* the whole area would be 8 MiB: 64 KiB are mapped, and the two position pages */
	assert_true(rss_bytes() - before < 1 << 20);
	src->destroy(src);
	close(ring);
}

/* Records over five laps of a 1 MiB ring, in batches of varying size: each delivered once,
 * whole, in order, while the mapping grows from 64 KiB to all of it. */
static void test_laps_in_order(void **state)
{
	const unsigned ring_bytes = 1 << 20, span = REC + 8; /* a record and its header */
	const uint64_t total = 5ull * ring_bytes / span;
	struct consumer c;
	struct seen s = {0};
	uint64_t written = 0;
	int ring, prog;

	(void)state;
	MT_REQUIRE_ROOT();
	ring = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "mt_test_ring", 0, 0, ring_bytes, NULL);
	assert_true(ring >= 0);
	prog = load_writer(ring);
	open_consumer(&c, ring, &s);
	for (unsigned i = 0; written < total; i++) {
		/* 1 to ~15,000 records: below the ring's ~18,700, so that nothing is refused */
		unsigned n = 1 + (i * 7919u) % 15000;

		write_records(prog, n);
		written += n;
		assert_true(consumer__drain(&c) >= 0);
		assert_int_equal(s.n, written);
	}
	assert_int_equal(s.bad, 0);
	assert_int_equal(c.rejected, 0);
	consumer__destroy(&c);
	close(prog);
	close(ring);
}

/* A fresh source on a ring whose consumer position is far into it, laps past (as the
 * watchdog's, started when memtrack dies): it maps from that position's lap, not from the
 * start, and delivers every record once, in order. 12 sources over ~8 laps of a 1 MiB ring. */
static void test_fresh_source_mid_lap(void **state)
{
	const unsigned ring_bytes = 1 << 20;
	struct consumer c;
	struct seen s = {0};
	uint64_t written = 0;
	int ring, prog;

	(void)state;
	MT_REQUIRE_ROOT();
	ring = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "mt_test_ring", 0, 0, ring_bytes, NULL);
	assert_true(ring >= 0);
	prog = load_writer(ring);
	for (unsigned round = 0; round < 12; round++) {
		unsigned n = 9000 + round * 517; /* below the ring's ~18,700 records */

		open_consumer(&c, ring, &s);
		write_records(prog, n);
		written += n;
		assert_true(consumer__drain(&c) >= 0);
		assert_int_equal(c.read_err, 0);
		assert_int_equal(s.n, written);
		consumer__destroy(&c);
	}
	assert_int_equal(s.bad, 0);
	close(prog);
	close(ring);
}

/*
 * The ring's data area cannot be mapped further mid-run (MEMTRACK_TEST_RING_MAP_FAIL: every
 * mapping past the first 64 KiB fails, as ENOMEM would): memtrack says so, releases the tasks
 * whose stop it can no longer read (a storm's ~40,000 uprobe records pass 64 KiB, then an exec
 * of an executable not seen yet stops), the command runs to its end, and the run ends
 * incomplete (exit 123, manifest complete: false). Before: the loop spun on the readable ring,
 * the stopped task waited forever, or the run ended "complete" with records missing.
 */
static void test_map_failure_ends_incomplete(void **state)
{
	struct mt_run *r = mt_new_run(state);
	const char *const env[] = {"MEMTRACK_TEST_RING_MAP_FAIL=1", NULL};
	const char *const opts[] = {"--alloc-hooks", "uprobe", NULL};
	char shell[1024];
	struct mt_run_opts o = {.env = env, .track_opts = opts, .shell = shell, .timeout_s = 60};
	json_t *complete;

	MT_REQUIRE_ROOT();
	snprintf(shell, sizeof(shell), "'%s' 20000 && '%s' && exit 7", mt_target("alloc_storm"),
		 mt_target("alloc_each"));
	assert_int_equal(mt_track(r, &o, NULL), 0);
	MT_CHECK(r, !r->timed_out, "memtrack did not end within 60 s (a stopped task left waiting?)");
	MT_CHECK(r, r->status == 123, "memtrack's exit status %d, want 123 (events lost)", r->status);
	complete = mt_json(r, "complete");
	MT_CHECK(r, json_is_false(complete), "manifest: complete is not false");
	MT_CHECK(r, r->log && strstr(r->log, "cannot read the BPF ring's records any further"),
		 "memtrack did not say the ring could not be read");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_maps_lazily),
	    cmocka_unit_test(test_laps_in_order),
	    cmocka_unit_test(test_fresh_source_mid_lap),
	    cmocka_unit_test_teardown(test_map_failure_ends_incomplete, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
