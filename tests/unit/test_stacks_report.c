// SPDX-License-Identifier: MIT
/*
 * Allocation sites (src/acct/sites.c) on a hand-made event stream with an in-memory stack file:
 * figures per stack exact, and their sums equal to the accounting's. The writers (folded, pprof,
 * flame graph, top) on a fixed model: golden lines and bytes, and the pprof read back by an
 * independent decoder (python3's protobuf with tests/pprof/profile.proto compiled by protoc).
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
#include "acct/acct.h"
#include "acct/blocks.h"
#include "acct/sites.h"
#include "report/profile.h"
#include "../lib/mt_harness.h"
#include "../lib/mt_pprof.h"
#include "../lib/mt_tmpdir.h"

/* --- sites ---------------------------------------------------------------------------------- */

struct evspec {
	uint32_t type;
	int32_t pid, tid;
	uint64_t addr, size, old_addr;
};

#define A(n) (0x10000 + (n)*0x100)

/*
 * pid 10, threads 10 and 11; then pid 20 (fork, exec, still running at the end).
 * Stacks of the allocation records, in order: 1 2 1 3 1 2 3 1 2.
 */
static const struct evspec stream[] = {
    {MT_EV_MALLOC, 10, 10, A(1), 100, 0},     /* stack 1 */
    {MT_EV_MALLOC, 10, 10, A(2), 200, 0},     /* stack 2 */
    {MT_EV_FREE, 10, 10, A(2), 0, 0},	      /* temporary: tid 10 made no allocation since */
    {MT_EV_MALLOC, 10, 11, A(3), 300, 0},     /* stack 1 */
    {MT_EV_MALLOC, 10, 10, A(4), 1000, 0},    /* stack 3 */
    {MT_EV_MALLOC, 10, 10, 0, 99, 0},	      /* stack 1, failed: still an allocation call */
    {MT_EV_MALLOC, 10, 11, A(5), 50, 0},      /* stack 2; tree live 1450: the peak */
    {MT_EV_FREE, 10, 11, A(3), 0, 0},	      /* not temporary: tid 11 allocated A(5) since */
    {MT_EV_FREE, 10, 10, A(4), 0, 0},	      /* not temporary: the failed call came between */
    {MT_EV_REALLOC, 10, 10, A(6), 400, A(1)}, /* stack 3: frees A(1) (stack 1) */
    {MT_EV_EXIT, 10, 10, 0, 0, 0},	      /* leaks A(5) (stack 2) and A(6) (stack 3) */
    {MT_EV_FORK, 20, 20, 0, 10, 0},
    {MT_EV_MALLOC, 20, 20, A(7), 64, 0}, /* stack 1, lost at the exec */
    {MT_EV_EXEC, 20, 20, 0, 0, 0},
    {MT_EV_MALLOC, 20, 20, A(8), 32, 0}, /* stack 2, live at the end: leaked */
};
static uint32_t stream_ids[] = {1, 2, 1, 3, 1, 2, 3, 1, 2};

static void run_stream(struct heap_acct **a, struct site_acct **s, struct stackfile *sf,
		       enum site_root root)
{
	static struct stack_trace stacks[3] = {{.id = 1}, {.id = 2}, {.id = 3}};

	memset(sf, 0, sizeof(*sf));
	sf->stacks = stacks;
	sf->nr_stacks = 3;
	sf->allocs = stream_ids;
	sf->nr_allocs = sizeof(stream_ids) / sizeof(*stream_ids);
	assert_int_equal(heap_acct__new(a), 0);
	assert_int_equal(site_acct__new(s, *a, sf, root), 0);
	for (size_t i = 0; i < sizeof(stream) / sizeof(*stream); i++) {
		const struct evspec *e = &stream[i];
		struct mt_event ev = {.type = e->type,
				      .pid = e->pid,
				      .tid = e->tid,
				      .ts = 1000 + i,
				      .addr = e->addr,
				      .size = e->size,
				      .old_addr = e->old_addr};

		site_acct__event(*s, &ev);
	}
	assert_int_equal(site_acct__finish(*s), 0);
}

static const struct site *site_of(const struct site *sites, uint32_t n, uint32_t stack)
{
	for (uint32_t i = 0; i < n; i++)
		if (sites[i].stack == stack)
			return &sites[i];
	fail_msg("no site for stack %u", stack);
	return NULL;
}

static void test_sites_figures(void **state)
{
	struct heap_acct *a;
	struct site_acct *s;
	struct stackfile sf;
	struct manifest m = {0};
	const struct site *sites, *st;
	uint64_t sum[8] = {0}, records, with_id;
	uint32_t n;

	(void)state;
	run_stream(&a, &s, &sf, SITE_ROOT_NONE);
	sites = site_acct__sites(s, &n);
	assert_int_equal(n, 3);
	site_acct__counts(s, &records, &with_id);
	assert_int_equal(records, 9);
	assert_int_equal(with_id, 9);

	st = site_of(sites, n, 1);
	assert_int_equal(st->alloc_bytes, 100 + 300 + 64);
	assert_int_equal(st->alloc_count, 3);
	assert_int_equal(st->peak_bytes, 400);
	assert_int_equal(st->peak_count, 2);
	assert_int_equal(st->leak_bytes, 0); /* A(7) was lost at the exec, not leaked */
	assert_int_equal(st->temp_count, 0);

	st = site_of(sites, n, 2);
	assert_int_equal(st->alloc_bytes, 200 + 50 + 32);
	assert_int_equal(st->alloc_count, 3);
	assert_int_equal(st->peak_bytes, 50);
	assert_int_equal(st->peak_count, 1);
	assert_int_equal(st->leak_bytes, 50 + 32);
	assert_int_equal(st->leak_count, 2);
	assert_int_equal(st->temp_count, 1);
	assert_int_equal(st->temp_bytes, 200);

	st = site_of(sites, n, 3);
	assert_int_equal(st->alloc_bytes, 1000 + 400);
	assert_int_equal(st->alloc_count, 2);
	assert_int_equal(st->peak_bytes, 1000);
	assert_int_equal(st->peak_count, 1);
	assert_int_equal(st->leak_bytes, 400);
	assert_int_equal(st->leak_count, 1);
	assert_int_equal(st->temp_count, 0);

	/* the sums are the accounting's figures */
	assert_int_equal(heap_acct__fill(a, &m), 0);
	for (uint32_t i = 0; i < n; i++) {
		sum[0] += sites[i].alloc_bytes;
		sum[1] += sites[i].alloc_count;
		sum[2] += sites[i].peak_bytes;
		sum[3] += sites[i].leak_bytes;
		sum[4] += sites[i].leak_count;
	}
	assert_int_equal(sum[0], m.allocated_bytes);
	assert_int_equal(sum[1], m.allocs);
	assert_int_equal(sum[2], m.peak_heap);
	assert_int_equal(m.peak_heap, 1450);
	assert_int_equal(sum[3], m.leaked_bytes);
	assert_int_equal(sum[4], m.leaked_count);
	free(m.procs);
	site_acct__free(s);
	heap_acct__free(a);
}

/* Per thread: stack 1 of thread 10 and of thread 11 are two sites. */
static void test_sites_per_thread(void **state)
{
	struct heap_acct *a;
	struct site_acct *s;
	struct stackfile sf;
	const struct site *sites;
	uint32_t n, found = 0;

	(void)state;
	run_stream(&a, &s, &sf, SITE_ROOT_THREAD);
	sites = site_acct__sites(s, &n);
	/* (10,10,1) (10,10,2) (10,11,1) (10,10,3) (10,11,2) (20,20,1) (20,20,2) */
	assert_int_equal(n, 7);
	for (uint32_t i = 0; i < n; i++) {
		if (sites[i].pid == 10 && sites[i].tid == 11 && sites[i].stack == 1) {
			assert_int_equal(sites[i].alloc_bytes, 300);
			assert_int_equal(sites[i].peak_bytes, 300);
			found++;
		}
		if (sites[i].pid == 20 && sites[i].stack == 2) {
			assert_int_equal(sites[i].leak_bytes, 32);
			found++;
		}
	}
	assert_int_equal(found, 2);
	site_acct__free(s);
	heap_acct__free(a);
}

/* Temporary: the free must be the thread's next heap call after the allocation. One thread:
 * A; B; free A (B came between: no); C; free B; free C (a free came between: no); E; free E
 * (yes); F; realloc(F, 0) (yes); G on another thread between H and free H (yes: per thread). */
static void test_sites_temporary(void **state)
{
	static const struct evspec ts[] = {
	    {MT_EV_MALLOC, 1, 1, A(1), 10, 0}, {MT_EV_MALLOC, 1, 1, A(2), 20, 0},
	    {MT_EV_FREE, 1, 1, A(1), 0, 0},    {MT_EV_MALLOC, 1, 1, A(3), 30, 0},
	    {MT_EV_FREE, 1, 1, A(2), 0, 0},    {MT_EV_FREE, 1, 1, A(3), 0, 0},
	    {MT_EV_MALLOC, 1, 1, A(5), 50, 0}, {MT_EV_FREE, 1, 1, A(5), 0, 0},
	    {MT_EV_MALLOC, 1, 1, A(6), 60, 0}, {MT_EV_REALLOC, 1, 1, 0, 0, A(6)},
	    {MT_EV_MALLOC, 1, 1, A(8), 80, 0}, {MT_EV_MALLOC, 1, 2, A(7), 70, 0},
	    {MT_EV_FREE, 1, 2, A(9), 0, 0}, /* unmatched, other thread */
	    {MT_EV_FREE, 1, 1, A(8), 0, 0},
	};
	static uint32_t ids[8] = {1, 1, 1, 1, 1, 1, 1, 1};
	struct stack_trace st = {.id = 1};
	struct stackfile sf = {.stacks = &st, .nr_stacks = 1, .allocs = ids, .nr_allocs = 8};
	struct heap_acct *a;
	struct site_acct *s;
	const struct site *sites;
	uint32_t n;

	(void)state;
	assert_int_equal(heap_acct__new(&a), 0);
	assert_int_equal(site_acct__new(&s, a, &sf, SITE_ROOT_NONE), 0);
	for (size_t i = 0; i < sizeof(ts) / sizeof(*ts); i++) {
		struct mt_event ev = {.type = ts[i].type,
				      .pid = ts[i].pid,
				      .tid = ts[i].tid,
				      .ts = i,
				      .addr = ts[i].addr,
				      .size = ts[i].size,
				      .old_addr = ts[i].old_addr};

		site_acct__event(s, &ev);
	}
	assert_int_equal(site_acct__finish(s), 0);
	sites = site_acct__sites(s, &n);
	assert_int_equal(n, 1);
	assert_int_equal(sites[0].temp_count, 3); /* E, F, H */
	assert_int_equal(sites[0].temp_bytes, 50 + 60 + 80);
	site_acct__free(s);
	heap_acct__free(a);
}

/* A stack file shorter than the artifact: the rest has no stack (site of stack 0). */
static void test_sites_short_file(void **state)
{
	struct heap_acct *a;
	struct site_acct *s;
	struct stackfile sf = {0};
	struct mt_event ev = {.type = MT_EV_MALLOC, .pid = 1, .tid = 1, .addr = 0x100, .size = 8};
	uint32_t ids[1] = {1}, n;
	struct stack_trace st = {.id = 1};
	const struct site *sites;
	uint64_t records, with_id;

	(void)state;
	sf.stacks = &st;
	sf.nr_stacks = 1;
	sf.allocs = ids;
	sf.nr_allocs = 1;
	assert_int_equal(heap_acct__new(&a), 0);
	assert_int_equal(site_acct__new(&s, a, &sf, SITE_ROOT_NONE), 0);
	site_acct__event(s, &ev);
	ev.addr = 0x200;
	site_acct__event(s, &ev);
	assert_int_equal(site_acct__finish(s), 0);
	sites = site_acct__sites(s, &n);
	assert_int_equal(n, 2);
	assert_int_equal(sites[1].stack, 0);
	site_acct__counts(s, &records, &with_id);
	assert_int_equal(records, 2);
	assert_int_equal(with_id, 1);
	site_acct__free(s);
	heap_acct__free(a);
}

/* Tags follow their blocks through growth (rehash), backward-shift deletions, replacement and
 * a purge: 40000 blocks over 3 owners, every other one removed, then the rest checked. */
static bool none_dead(const void *ctx, uint32_t owner)
{
	(void)ctx;
	(void)owner;
	return false;
}

static void test_block_tags(void **state)
{
	struct blocks b;
	uint64_t size, old;
	uint32_t tag, old_tag;
	const uint32_t n = 40000;

	(void)state;
	assert_int_equal(blocks__init(&b, none_dead, NULL), 0);
	assert_int_equal(blocks__enable_tags(&b), 0);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(blocks__put(&b, 0x1000 + (uint64_t)i * 16, i % 3, i + 1, i * 7 + 1,
					     &old, &old_tag),
				 0);
	assert_int_equal(blocks__enable_tags(&b), -EBUSY);
	/* replacing gives the old tag back and keeps the new one */
	assert_int_equal(blocks__put(&b, 0x1000, 0, 5, 999, &old, &old_tag), 1);
	assert_int_equal(old, 1);
	assert_int_equal(old_tag, 1);
	for (uint32_t i = 1; i < n; i += 2) {
		assert_true(blocks__take(&b, 0x1000 + (uint64_t)i * 16, i % 3, &size, &tag));
		assert_int_equal(size, i + 1);
		assert_int_equal(tag, i * 7 + 1);
	}
	blocks__purge(&b, 2);
	for (uint32_t i = 0; i < n; i += 2) {
		bool there = blocks__take(&b, 0x1000 + (uint64_t)i * 16, i % 3, &size, &tag);

		assert_int_equal(there, i % 3 != 2);
		if (there)
			assert_int_equal(tag, i ? i * 7 + 1 : 999);
	}
	blocks__free(&b);
}

/* --- writers on a fixed model --------------------------------------------------------------- */

static struct sym_line l1[] = {{"b", "b.c", 12}};
static struct sym_line l2[] = {{"inl", "a.c", 5}, {"a", "a.c", 20}};
static struct sym_line l3[] = {{"main", "main.c", 30}};
static struct sym_line l4[] = {{"c", "c.c", 7}};
static struct sym_line l5[] = {{"__libc_start_main", NULL, 0}};
/* ld.so's malloc, a wrapper inlined into its caller: left out of the leaf (leaf_skip) */
static struct sym_line l6[] = {{"malloc", "rtld-malloc.h", 56}, {"open_path", "dl-load.c", 9}};
static const struct sym_loc L1 = {1, 0x1010, 1, l1, true}, L2 = {1, 0x1020, 2, l2, true},
			    L3 = {1, 0x1030, 1, l3, true}, L4 = {1, 0x1040, 1, l4, true},
			    L5 = {2, 0x2000, 1, l5, true}, L6 = {2, 0x2100, 2, l6, true};
static const struct sym_loc *s1[] = {&L1, &L2, &L3, &L5}, *s2[] = {&L4, &L3, &L5},
			    *s4[] = {&L4, &L3}, *s5[] = {&L1}, *s6[] = {&L6, &L3, &L5};
static const struct stack_module mods[] = {
    {.id = 1, .path = "/usr/bin/prog", .build_id = {1, 2, 3, 0xab}, .build_id_len = 4},
    {.id = 2, .path = "/lib/libc.so.6"},
};
static const struct prof_sample samples[] = {
    {.locs = s1,
     .nr_locs = 4,
     .stack = 1,
     .alloc_count = 100,
     .alloc_bytes = 102400,
     .inuse_count = 50,
     .inuse_bytes = 51200,
     .leak_count = 10,
     .leak_bytes = 10240},
    {.locs = s2,
     .nr_locs = 3,
     .stack = 2,
     .alloc_count = 10,
     .alloc_bytes = 655360,
     .inuse_count = 10,
     .inuse_bytes = 655360,
     .temp_count = 2,
     .temp_bytes = 128},
    {.stack = 0, .alloc_count = 1, .alloc_bytes = 8},
    {.locs = s4,
     .nr_locs = 2,
     .stack = 3,
     .root = {"prog (pid 7)", "tid 8"},
     .nr_root = 2,
     .alloc_count = 3,
     .alloc_bytes = 300,
     .inuse_count = 1,
     .inuse_bytes = 100},
    {.locs = s5, .nr_locs = 1, .stack = 4, .truncated = true, .alloc_count = 5, .alloc_bytes = 50},
    {.locs = s6, .nr_locs = 3, .leaf_skip = 1, .stack = 5, .alloc_count = 2, .alloc_bytes = 16},
};
static const struct profile model = {
    .modules = mods,
    .nr_modules = 2,
    .samples = samples,
    .nr_samples = 6,
    .time_nanos = 1700000000000000000ULL,
    .duration_nanos = 2500000000ULL,
    .peak_heap = 706660,
};

/* The whole output of fn on the model, in a malloc'd string. */
static char *capture(int (*fn)(FILE *, const struct profile *), size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	assert_non_null(f);
	assert_int_equal(fn(f, &model), 0);
	fclose(f);
	if (len)
		*len = n;
	return buf;
}

static void test_folded_golden(void **state)
{
	char *out = capture(report__folded, NULL);

	(void)state;
	/* sorted by text */
	assert_string_equal(out, "[no stack] 8\n"
				 "[truncated];b 50\n"
				 "__libc_start_main;main;a;inl;b 102400\n"
				 "__libc_start_main;main;c 655360\n"
				 "__libc_start_main;main;open_path 16\n"
				 "prog (pid 7);tid 8;main;c 300\n");
	free(out);
}

/* Two stacks through other addresses of the same functions are one folded line. */
static void test_folded_merges(void **state)
{
	static struct sym_line lc2[] = {{"c", "c.c", 9}};
	static const struct sym_loc L4b = {1, 0x1048, 1, lc2, true};
	static const struct sym_loc *sb[] = {&L4b, &L3, &L5};
	struct prof_sample two[2] = {samples[1], samples[1]};
	struct profile p = model;
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	(void)state;
	two[1].locs = sb;
	two[1].alloc_bytes = 40;
	p.samples = two;
	p.nr_samples = 2;
	assert_int_equal(report__folded(f, &p), 0);
	fclose(f);
	assert_string_equal(buf, "__libc_start_main;main;c 655400\n");
	free(buf);
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* Exact bytes: tests/pprof/model.pb, checked once by the decoder test below and kept. Set
 * MT_WRITE_GOLDEN=1 to rewrite it after a deliberate change of the encoding. */
static void test_pprof_golden(void **state)
{
	char path[4096];
	uint8_t *buf;
	size_t len, glen;
	char *golden;

	(void)state;
	assert_int_equal(report__pprof_encode(&model, &buf, &len), 0);
	snprintf(path, sizeof(path), "%s/tests/pprof/model.pb", mt_repo_root());
	if (getenv("MT_WRITE_GOLDEN")) {
		FILE *f = fopen(path, "wb");

		assert_non_null(f);
		fwrite(buf, 1, len, f);
		fclose(f);
	}
	golden = read_file(path, &glen);
	assert_non_null(golden);
	assert_int_equal(len, glen);
	assert_memory_equal(buf, golden, len);
	free(golden);
	free(buf);
}

/* What tests/pprof/decode.py prints for the model: sample types, then per sample its frames
 * root first (inlined functions with their callers) and values, then mappings. */
static const char decoded_model[] =
    "sample_types alloc_objects/count alloc_space/bytes inuse_objects/count "
    "inuse_space/bytes\n"
    "default inuse_space\n"
    "period_type space/bytes period 1\n"
    "time_nanos 1700000000000000000 duration_nanos 2500000000\n"
    "sample __libc_start_main;main@main.c:30;a@a.c:20;inl@a.c:5;b@b.c:12 100 102400 50 "
    "51200\n"
    "sample __libc_start_main;main@main.c:30;c@c.c:7 10 655360 10 655360\n"
    "sample [no stack] 1 8 0 0\n"
    "sample prog (pid 7);tid 8;main@main.c:30;c@c.c:7 3 300 1 100\n"
    "sample [truncated];b@b.c:12 5 50 0 0\n"
    "sample __libc_start_main;main@main.c:30;open_path@dl-load.c:9 2 16 0 0\n"
    "mapping 1 /usr/bin/prog 010203ab functions=1 lines=1 inline=1\n"
    "mapping 2 /lib/libc.so.6 - functions=1 lines=1 inline=1\n";

static void test_pprof_decoded(void **state)
{
	char dir[128], path[256], *out;
	FILE *f;

	(void)state;
	assert_int_equal(mt_tmpdir_make(dir, sizeof(dir), "pprof"), 0);
	snprintf(path, sizeof(path), "%s/model.pb.gz", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(report__pprof(f, &model), 0);
	fclose(f);
	if (!mt_pprof_decoder()) {
		mt_tmpdir_remove(dir);
		skip(); /* scripts/deps.sh installs python3-protobuf and protobuf-compiler */
	}
	out = mt_pprof_decode(path);
	assert_non_null(out);
	assert_string_equal(out, decoded_model);
	free(out);
	/* and Go's own reader, when Go is installed (not a dependency) */
	if (!system("command -v go >/dev/null")) {
		char cmd[512];

		snprintf(cmd, sizeof(cmd),
			 "cd %s && HOME=%s go tool pprof -traces model.pb.gz 2>&1 | "
			 "grep -q '^ *inl (inline)$'",
			 dir, dir);
		assert_int_equal(system(cmd), 0);
	}
	mt_tmpdir_remove(dir);
}

static int flame(FILE *f, const struct profile *p)
{
	return report__flamegraph(f, p, "t <&>");
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;

	for (; (s = strstr(s, what)); s++)
		n++;
	return n;
}

static void test_flamegraph(void **state)
{
	char *svg = capture(flame, NULL);

	(void)state;
	assert_true(!strncmp(svg, "<?xml", 5));
	assert_non_null(strstr(svg, "</svg>\n"));
	assert_non_null(strstr(svg, ">t &lt;&amp;&gt;</text>"));
	/* one frame per node of the merged tree: all, __libc_start_main, main, a, inl, b, c,
	 * prog (pid 7), tid 8, main, c; not [no stack] (8 bytes: 0.01 px), [truncated] and b
	 * (50 bytes: 0.08 px), open_path (16 bytes), narrower than FG_MIN */
	assert_int_equal(count(svg, "<title>"), 11);
	assert_int_equal(count(svg, "<rect"), 12); /* and the background */
	assert_null(strstr(svg, "[truncated]"));
	/* main under __libc_start_main has 102400 + 655360 + 16 of the 758134 bytes */
	assert_non_null(strstr(svg, "<title>main (740.0 KiB, 757776 bytes, 99.95%)</title>"));
	assert_null(strstr(svg, "<script"));
	free(svg);
}

static int top3(FILE *f, const struct profile *p)
{
	return report__stacks_summary(f, p, 3);
}

static void test_top_text(void **state)
{
	char *t = capture(top3, NULL);
	const char *peak, *leak, *temp;

	(void)state;
	peak = strstr(t, "Top 3 allocation sites by bytes live at the tree's heap peak:\n"
			 "   1. 640.0 KiB live in 10 blocks (92.7% of the peak)\n"
			 "        c at c.c:7\n"
			 "        main at main.c:30\n"
			 "        __libc_start_main\n"
			 "   2. 50.0 KiB live in 50 blocks (7.2% of the peak)\n"
			 "        b at b.c:12\n"
			 "        inl at a.c:5 (inlined)\n"
			 "        a at a.c:20\n"
			 "        main at main.c:30\n"
			 "        __libc_start_main\n"
			 "   3. 100 B live in 1 blocks (0.0% of the peak)\n"
			 "        c at c.c:7\n"
			 "        main at main.c:30\n"
			 "        in prog (pid 7)\n"
			 "        in tid 8\n");
	assert_non_null(peak);
	leak = strstr(t, "by bytes leaked (live at exit):\n"
			 "   1. 10.0 KiB leaked in 10 blocks\n");
	assert_non_null(leak);
	temp = strstr(t, "(freed as the thread's next heap call):\n"
			 "   1. 2 temporary of 10 allocations (128 B)\n");
	assert_non_null(temp);
	free(t);
}

static void test_top_json(void **state)
{
	json_t *j = report__stacks_json(&model, 2), *a, *f;

	(void)state;
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "sites")), 6);
	a = json_object_get(json_object_get(j, "top"), "allocations");
	assert_int_equal(json_array_size(a), 2);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 0), "stack")), 1);
	f = json_array_get(json_object_get(json_array_get(a, 0), "frames"), 1);
	assert_string_equal(json_string_value(json_object_get(f, "function")), "inl");
	assert_true(json_is_true(json_object_get(f, "inlined")));
	assert_string_equal(json_string_value(json_object_get(f, "module")), "/usr/bin/prog");
	assert_int_equal(json_integer_value(json_object_get(f, "vaddr")), 0x1020);
	a = json_object_get(json_object_get(j, "top"), "temporary");
	assert_int_equal(json_array_size(a), 1);
	json_decref(j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sites_figures),    cmocka_unit_test(test_sites_per_thread),
	    cmocka_unit_test(test_sites_short_file), cmocka_unit_test(test_sites_temporary),
	    cmocka_unit_test(test_block_tags),	     cmocka_unit_test(test_folded_golden),
	    cmocka_unit_test(test_folded_merges),    cmocka_unit_test(test_pprof_golden),
	    cmocka_unit_test(test_pprof_decoded),    cmocka_unit_test(test_flamegraph),
	    cmocka_unit_test(test_top_text),	     cmocka_unit_test(test_top_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
