// SPDX-License-Identifier: MIT
/* The measured window in the accounting (src/acct/window.h), over synthetic streams with
 * hand-computed figures, and its manifest keys read back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "acct/acct.h"
#include "artifact/manifest.h"
#include "common/records.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define MiB  (1ULL << 20)

static uint64_t ts;

static struct mt_event E(uint32_t type, int pid, uint64_t addr, uint64_t size, uint64_t old) {
	struct mt_event e = {.type = type,
			     .pid = pid,
			     .tid = pid,
			     .ts = ts += 10,
			     .addr = addr,
			     .size = size,
			     .old_addr = old};
	return e;
}

static struct mt_event
K(int pid, uint32_t kind) /* a marker */
{
	struct mt_event e = E(MT_EV_MARKER, pid, 0, 0, 0);

	e.aux = kind;
	return e;
}

#define START(pid)		K(pid, MT_MARK_START)
#define STOP(pid)		K(pid, MT_MARK_STOP)
#define MALLOC(pid, addr, size) E(MT_EV_MALLOC, pid, addr, size, 0)
#define FREE(pid, addr)		E(MT_EV_FREE, pid, addr, 0, 0)

static void
run(struct manifest *m, const struct mt_event *ev, size_t n)
{
	struct heap_acct *a;

	memset(m, 0, sizeof(*m));
	assert_int_equal(heap_acct__new(&a), 0);
	for (size_t i = 0; i < n; i++)
		heap_acct__event(a, &ev[i]);
	assert_int_equal(heap_acct__fill(a, m), 0);
	heap_acct__free(a);
}

static void done(struct manifest *m)
{
	manifest__free(m);
}

/* The proof: 50 MiB before, 1 + 2 MiB live together inside, 30 MiB after. */
static void test_proof(void **state)
{
	struct mt_event ev[] = {
	    MALLOC(1, 0x10000, 50 * MiB),
	    START(1),
	    MALLOC(1, 0x20000, 1 * MiB),
	    MALLOC(1, 0x30000, 2 * MiB),
	    FREE(1, 0x30000),
	    FREE(1, 0x20000),
	    STOP(1),
	    MALLOC(1, 0x40000, 30 * MiB),
	    FREE(1, 0x40000),
	    FREE(1, 0x10000),
	    E(MT_EV_EXIT, 1, 0, 0, 0),
	};
	struct manifest m;

	(void)state;
	run(&m, ev, N(ev));
	assert_true(m.window.present);
	assert_int_equal(m.window.peak_heap, 3 * MiB);
	assert_int_equal(m.window.allocs, 2);
	assert_int_equal(m.window.allocated_bytes, 3 * MiB);
	assert_int_equal(m.window.frees, 2);
	assert_int_equal(m.window.live_bytes, 0);
	assert_int_equal(m.window.starts, 1);
	assert_int_equal(m.window.stops, 1);
	assert_int_equal(m.window.duration_ns, 50); /* five records of 10 ns after START */
	assert_int_equal(m.peak_heap, 80 * MiB);    /* the whole run's, unchanged */
	assert_int_equal(m.allocs, 4);
	assert_int_equal(m.nr_markers, 2);
	assert_string_equal(m.markers[0].kind, "start");
	assert_int_equal(m.markers[0].heap, 50 * MiB);
	assert_string_equal(m.markers[1].kind, "stop");
	done(&m);
}

/* Without START: no window, and the whole run is what is measured. */
static void test_no_start(void **state)
{
	struct mt_event ev[] = {MALLOC(1, 0x10, 100), STOP(1), FREE(1, 0x10)};
	struct manifest m;

	(void)state;
	run(&m, ev, N(ev));
	assert_false(m.window.present);
	assert_int_equal(m.window.allocs, 0);
	assert_int_equal(m.peak_heap, 100);
	assert_int_equal(m.nr_markers, 1); /* the unmatched STOP is still a marker */
	done(&m);
}

/* Frees of older blocks inside the window lower neither the window's live bytes nor its
 * peak; a window block freed after STOP is still one of its frees. */
static void test_old_frees(void **state)
{
	struct mt_event ev[] = {
	    MALLOC(1, 0x10, 1000), START(1), MALLOC(1, 0x20, 500), FREE(1, 0x10),
	    MALLOC(1, 0x30, 300),  STOP(1),  FREE(1, 0x20),	   FREE(1, 0x30),
	};
	struct manifest m;

	(void)state;
	run(&m, ev, N(ev));
	assert_int_equal(m.window.peak_heap, 800);
	assert_int_equal(m.window.allocs, 2);
	assert_int_equal(m.window.frees, 2);
	assert_int_equal(m.window.live_bytes, 0);
	assert_int_equal(m.peak_heap, 1500);
	done(&m);
}

/* realloc: of an older block inside, the new block is the window's; of a window block after
 * STOP, the new block is not (and the window block is gone: one of its frees). */
static void test_reallocs(void **state)
{
	struct mt_event ev[] = {
	    MALLOC(1, 0x10, 100), START(1), E(MT_EV_REALLOC, 1, 0x20, 400, 0x10),
	    MALLOC(1, 0x30, 50),  STOP(1),  E(MT_EV_REALLOC, 1, 0x40, 4000, 0x30),
	};
	struct manifest m;

	(void)state;
	run(&m, ev, N(ev));
	assert_int_equal(m.window.peak_heap, 450);
	assert_int_equal(m.window.allocs, 2);
	assert_int_equal(m.window.frees, 1);
	assert_int_equal(m.window.live_bytes, 400); /* 0x20, never freed */
	assert_int_equal(m.window.live_count, 1);
	done(&m);
}

/* Several pairs are one window, their union: a block left live by the first pair still counts
 * in the second; a START while open and a STOP while closed change nothing. */
static void test_pairs(void **state)
{
	struct mt_event ev[] = {
	    START(1),	   MALLOC(1, 0x10, 100),   START(1),	  STOP(1),
	    STOP(1),	   MALLOC(1, 0x20, 10000), FREE(1, 0x20), /* outside: not the window's */
	    START(1),	   MALLOC(1, 0x30, 200),   FREE(1, 0x30), STOP(1),
	    FREE(1, 0x10),
	};
	struct manifest m;

	(void)state;
	run(&m, ev, N(ev));
	assert_int_equal(m.window.peak_heap, 300);
	assert_int_equal(m.window.allocs, 2);
	assert_int_equal(m.window.starts, 2);
	assert_int_equal(m.window.stops, 2);
	assert_int_equal(m.window.duration_ns, 30 + 30);
	assert_int_equal(m.nr_markers, 6);
	done(&m);
}

/* Processes: the window is per process; a child forked inside inherits it, keeps it across
 * exec, and its exit closes it (its live window blocks are the window's leak); an unrelated
 * process' allocations do not count. Figures are tree-wide sums. */
static void test_processes(void **state)
{
	struct mt_event ev[] = {
	    MALLOC(1, 0x10, 7), /* root, before */
	    START(1),
	    E(MT_EV_FORK, 2, 0, 1, 0), /* inside: inherits the open window */
	    E(MT_EV_FORK, 3, 0, 1, 0),
	    STOP(3), /* the child closes its own */
	    MALLOC(1, 0x10 + 1, 100),
	    MALLOC(2, 0x10, 1000),     /* same address, another process: its own block */
	    MALLOC(3, 0x20, 50000),    /* closed: not counted */
	    E(MT_EV_EXEC, 2, 0, 0, 0), /* its window block leaves the live sum, state kept */
	    MALLOC(2, 0x30, 20),
	    E(MT_EV_EXIT, 2, 0, 0, 0), /* 20 live: the window's leak; closes 2's window */
	    STOP(1),
	    MALLOC(2, 0x40, 99999), /* pid 2 again: a new process, outside */
	};
	struct manifest m;

	(void)state;
	run(&m, ev, N(ev));
	assert_int_equal(m.window.peak_heap, 1100);
	assert_int_equal(m.window.allocs, 3);
	assert_int_equal(m.window.allocated_bytes, 1120);
	assert_int_equal(m.window.live_bytes, 120); /* root's 100 and pid 2's 20 */
	assert_int_equal(m.window.live_count, 2);
	assert_int_equal(m.window.starts, 1);
	assert_int_equal(m.window.stops, 2); /* 3's and 1's */
	done(&m);
}

/* MARK's name: parts before the marker from the same thread, another thread's interleaved. */
static void test_marker_names(void **state)
{
	const char *name = "a name longer than one part, two!";
	struct mt_event ev[5];
	struct manifest m;
	size_t n = 0;

	(void)state;
	for (uint32_t i = 0; i < 2; i++) {
		struct mt_event e = E(MT_EV_MARKER_NAME, 1, 0, 0, 0);

		e.tid = 11;
		e.aux = i;
		char part[MT_MARK_NAME_PART] = {0};
		size_t left = strlen(name) - i * MT_MARK_NAME_PART;

		memcpy(part, name + i * MT_MARK_NAME_PART,
		       left < sizeof(part) ? left : sizeof(part));
		/* addr, size and old_addr: 24 contiguous bytes */
		memcpy((char *)&e + offsetof(struct mt_event, addr), part, sizeof(part));
		ev[n++] = e;
		if (!i) {
			struct mt_event o = E(MT_EV_MARKER_NAME, 1, 0, 0, 0);

			o.tid = 12;
			memcpy(&o.addr, "other\0\0", 8);
			ev[n++] = o;
		}
	}
	ev[n] = K(1, MT_MARK_MARK);
	ev[n++].tid = 11;
	ev[n] = K(1, MT_MARK_MARK);
	ev[n++].tid = 12;
	run(&m, ev, n);
	assert_false(m.window.present); /* MARK alone opens nothing */
	assert_int_equal(m.nr_markers, 2);
	assert_string_equal(m.markers[0].kind, "mark");
	assert_string_equal(m.markers[0].name, name);
	assert_int_equal(m.markers[0].tid, 11);
	assert_string_equal(m.markers[1].name, "other");
	done(&m);
}

/* The manifest keys: results.window (null without one), markers[], read back equal. */
static void test_manifest_roundtrip(void **state)
{
	struct mt_event ev[] = {START(5), MALLOC(5, 0x10, 64), K(5, MT_MARK_MARK), STOP(5)};
	char path[] = "/tmp/test_window.XXXXXX";
	struct manifest m, back;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	run(&m, ev, N(ev));
	assert_int_equal(manifest__write(&m, path), 0);
	assert_int_equal(manifest__read(&back, path), 0);
	assert_true(back.window.present);
	assert_memory_equal(&back.window, &m.window, sizeof(m.window));
	assert_int_equal(back.nr_markers, 3);
	assert_memory_equal(back.markers, m.markers, 3 * sizeof(*m.markers));
	manifest__free(&back);
	done(&m);
	/* no window: the key is null and reads back absent */
	memset(&m, 0, sizeof(m));
	assert_int_equal(manifest__write(&m, path), 0);
	assert_int_equal(manifest__read(&back, path), 0);
	assert_false(back.window.present);
	assert_int_equal(back.nr_markers, 0);
	manifest__free(&back);
	unlink(path);
}

/* Markers are companion records: never artifact rows, delivered in order (REC_ORDERED). */
static void test_rows(void **state)
{
	(void)state;
	assert_true(records__has(MT_EV_MARKER, REC_COMPANION | REC_ORDERED));
	assert_false(records__has(MT_EV_MARKER, REC_ARTIFACT));
	assert_false(records__has(MT_EV_MARKER_NAME, REC_ARTIFACT | REC_CONTROL));
	assert_null(records__name(MT_EV_MARKER));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_proof),	 cmocka_unit_test(test_no_start),
	    cmocka_unit_test(test_old_frees),	 cmocka_unit_test(test_reallocs),
	    cmocka_unit_test(test_pairs),	 cmocka_unit_test(test_processes),
	    cmocka_unit_test(test_marker_names), cmocka_unit_test(test_manifest_roundtrip),
	    cmocka_unit_test(test_rows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
