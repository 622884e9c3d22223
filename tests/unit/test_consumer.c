// SPDX-License-Identifier: MIT
/*
 * The consumer with the replay source and the tracker's record sinks, no BPF: batches are
 * delivered in order, control records go to the control handler only, unknown types are
 * rejected and reach no sink, the artifact holds exactly the artifact records and the
 * accounting sees them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "artifact/artifact.h"
#include "acct/acct.h"
#include "track/consumer.h"
#include "track/sinks.h"

#define NR 1000

struct ctl_seen {
	unsigned n;
	int32_t last_pid;
};

static int on_control(void *ctx, const struct mt_event *ev)
{
	struct ctl_seen *c = ctx;

	c->n++;
	c->last_pid = ev->pid;
	return 0;
}

/* NR records: malloc/free pairs of pid 7, a control record at 500, an unknown type at 700. */
static void make_stream(struct mt_event *ev)
{
	for (int i = 0; i < NR; i++) {
		ev[i] = (struct mt_event){.type = i % 2 ? MT_EV_FREE : MT_EV_MALLOC,
					  .pid = 7,
					  .tid = 7,
					  .ts = 1000 + (uint64_t)i,
					  .addr = 0x1000 + (uint64_t)(i / 2) * 16,
					  .size = i % 2 ? 0 : 32};
	}
	ev[500].type = MT_EV_CTL_EXEC_STOPPED;
	ev[500].pid = 9;
	ev[501].type = MT_EV_MALLOC; /* its pair's Malloc became the control record */
	ev[501].size = 48;
	ev[700].type = 14; /* unknown: rejected */
	ev[701].type = MT_EV_MALLOC;
	ev[701].size = 48;
}

static void test_replay_batches(void **state)
{
	struct mt_event ev[NR];
	struct event_source *src;
	struct consumer c;
	struct ctl_seen ctl = {0};
	int n, drains = 0;

	(void)state;
	make_stream(ev);
	consumer__init(&c);
	assert_int_equal(replay_source__new(&src, ev, NR, 300), 0);
	assert_int_equal(src->fd, -1);
	assert_int_equal(consumer__add_source(&c, src), 0);
	consumer__set_control(&c, on_control, &ctl);
	while ((n = consumer__drain(&c)) > 0) {
		assert_int_equal(n, drains < 3 ? 300 : 100);
		drains++;
	}
	assert_int_equal(n, 0);
	assert_int_equal(drains, 4);
	assert_int_equal(src->delivered, NR);
	assert_int_equal(c.dispatched, NR);
	assert_int_equal(ctl.n, 1);
	assert_int_equal(ctl.last_pid, 9);
	assert_int_equal(c.rejected, 1); /* the unknown type; no sink is none's failure */
	consumer__destroy(&c);
	assert_int_equal(replay_source__new(NULL, ev, NR, 1), -EINVAL);
	assert_int_equal(replay_source__new(&src, NULL, 1, 1), -EINVAL);
}

/* --- longer records (REC_VARLEN) and the stack hook ---------------------------------------- */

struct stack_seen {
	unsigned calls, layouts;
	size_t last_len;
	uint8_t last_byte;
	uint32_t types[8];
	uint32_t auxes[8];
	unsigned nr;
};

static void on_stack(void *ctx, struct mt_event *ev, const void *payload, size_t len)
{
	struct stack_seen *s = ctx;

	if (!len) {
		s->layouts++;
		return;
	}
	s->calls++;
	s->last_len = len;
	s->last_byte = ((const uint8_t *)payload)[len - 1];
	ev->aux = 40 + s->calls; /* a stack id */
}

static size_t on_records(void *ctx, const struct mt_event *ev, size_t n)
{
	struct stack_seen *s = ctx;

	for (size_t i = 0; i < n && s->nr < 8; i++, s->nr++) {
		s->types[s->nr] = ev[i].type;
		s->auxes[s->nr] = ev[i].aux;
	}
	return 0;
}

/* A Malloc with a payload: the hook gets the payload and sets aux before any sink sees the
 * header; a Free with one (not REC_VARLEN) is refused whole; Fork and Exec reach the hook
 * without payload, in order; plain records pass untouched. */
static void test_varlen_records(void **state)
{
	uint8_t rec[sizeof(struct mt_event) + 200];
	struct mt_event ev = {.type = MT_EV_MALLOC, .pid = 3, .tid = 3, .addr = 0x10, .size = 8};
	struct stack_seen seen = {0};
	struct consumer c;

	(void)state;
	consumer__init(&c);
	consumer__set_stack(&c, on_stack, &seen);
	assert_int_equal(consumer__add_sink(&c, on_records, &seen), 0);
	memcpy(rec, &ev, sizeof(ev));
	memset(rec + sizeof(ev), 0xab, sizeof(rec) - sizeof(ev));
	consumer__dispatch_var(&c, rec, sizeof(rec));
	ev.type = MT_EV_FREE;
	memcpy(rec, &ev, sizeof(ev));
	consumer__dispatch_var(&c, rec, sizeof(rec));
	consumer__dispatch(&c, &(struct mt_event){.type = MT_EV_FORK, .pid = 4, .size = 3});
	consumer__dispatch(&c, &(struct mt_event){.type = MT_EV_EXEC, .pid = 4});
	ev.type = MT_EV_CALLOC;
	consumer__dispatch_var(&c, &ev, sizeof(ev)); /* no payload: no hook */
	consumer__flush(&c);
	assert_int_equal(seen.calls, 1);
	assert_int_equal(seen.last_len, 200);
	assert_int_equal(seen.last_byte, 0xab);
	assert_int_equal(seen.layouts, 2);
	assert_int_equal(c.rejected, 1);
	assert_int_equal(seen.nr, 4);
	assert_int_equal(seen.types[0], MT_EV_MALLOC);
	assert_int_equal(seen.auxes[0], 41);
	assert_int_equal(seen.types[1], MT_EV_FORK);
	assert_int_equal(seen.types[2], MT_EV_EXEC);
	assert_int_equal(seen.types[3], MT_EV_CALLOC);
	assert_int_equal(seen.auxes[3], 0);
	consumer__destroy(&c);
}

static void test_sinks_artifact_and_acct(void **state)
{
	char path[] = "/tmp/test_consumer.XXXXXX";
	struct record_sinks sinks = {0};
	struct mt_event ev[NR], got;
	struct artifact_reader *r;
	struct event_source *src;
	struct heap_stats hs;
	struct consumer c;
	int fd = mkstemp(path), rc;
	size_t i = 0, read = 0;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	make_stream(ev);
	assert_int_equal(artifact_writer__open(&sinks.writer, path, ARTIFACT_DEFAULT_LEVEL, 64), 0);
	assert_int_equal(heap_acct__new(&sinks.acct), 0);
	consumer__init(&c);
	assert_int_equal(replay_source__new(&src, ev, NR, 0), 0);
	assert_int_equal(consumer__add_source(&c, src), 0);
	assert_int_equal(record_sinks__add(&sinks, &c), 0);
	assert_int_equal(consumer__drain(&c), NR);
	assert_int_equal(consumer__drain(&c), 0);
	assert_int_equal(c.rejected, 2); /* no control handler here, and the unknown type */
	assert_int_equal(sinks.write_err, 0);
	assert_int_equal(sinks.counts[MT_EV_MALLOC], 500);
	assert_int_equal(sinks.counts[MT_EV_FREE], 498);
	assert_int_equal(artifact_writer__close(sinks.writer), 0);

	/* every pair freed but 250 and 350: their Malloc became the control and the unknown
	 * record, their Free a Malloc of 48 that stays live */
	heap_acct__stats(sinks.acct, &hs);
	assert_int_equal(hs.live_count, 2);
	assert_int_equal(hs.live_bytes, 96);
	assert_int_equal(hs.unmatched_frees, 0);
	assert_int_equal(hs.replaced_allocs, 0);

	assert_int_equal(artifact_reader__open(&r, path), 0);
	while ((rc = artifact_reader__next(r, &got)) == 1) {
		while (ev[i].type != MT_EV_MALLOC && ev[i].type != MT_EV_FREE)
			i++;
		assert_int_equal(got.type, ev[i].type);
		assert_int_equal(got.ts, ev[i].ts);
		assert_int_equal(got.addr, ev[i].addr);
		assert_int_equal(got.size, ev[i].size);
		i++;
		read++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(read, 998);
	assert_int_equal(artifact_reader__frames(r), 16); /* ceil(998 / 64) */
	artifact_reader__free(r);
	consumer__destroy(&c);
	heap_acct__free(sinks.acct);
	unlink(path);
}

/*
 * A disk that is full: every record is either written or refused, never neither; the writer's
 * error reaches the sinks (at once without workers: the records after it are refused) and
 * close, so the tracker marks the run incomplete.
 */
static void test_sinks_write_error(void **state)
{
	struct mt_event ev[NR];

	(void)state;
	if (access("/dev/full", W_OK))
		skip();
	make_stream(ev);
	for (unsigned workers = 0; workers <= 2; workers += 2) {
		struct record_sinks sinks = {0};
		struct event_source *src;
		struct consumer c;
		uint64_t counted = 0;

		assert_int_equal(artifact_writer__open(&sinks.writer, "/dev/full",
						       ARTIFACT_DEFAULT_LEVEL, 64), 0);
		assert_int_equal(artifact_writer__set_workers(sinks.writer, workers), 0);
		assert_int_equal(heap_acct__new(&sinks.acct), 0);
		consumer__init(&c);
		assert_int_equal(replay_source__new(&src, ev, NR, 100), 0);
		assert_int_equal(consumer__add_source(&c, src), 0);
		assert_int_equal(record_sinks__add(&sinks, &c), 0);
		while (consumer__drain(&c) > 0)
			;
		for (int t = 0; t < MT_EV_TYPE_MAX; t++)
			counted += sinks.counts[t];
		assert_int_equal(counted + c.rejected, NR);
		if (!workers) {
			assert_int_equal(sinks.write_err, -ENOSPC);
			assert_int_equal(counted, 64); /* the first frame, whose write failed */
		}
		assert_true(sinks.write_err == 0 || sinks.write_err == -ENOSPC);
		assert_int_equal(artifact_writer__close(sinks.writer), -ENOSPC);
		consumer__destroy(&c);
		heap_acct__free(sinks.acct);
	}
}

/* heap_acct__events (prefetching) and heap_acct__event one by one agree on everything, over
 * a stream with address reuse, reallocs, two processes, an exec and an exit, and a table that
 * grows several times. */
static void test_acct_batch_equals_single(void **state)
{
	enum { N = 200000 };
	struct mt_event *ev = calloc(N, sizeof(*ev));
	struct heap_acct *one, *batch;
	struct heap_stats s1, s2;
	struct manifest m1 = {0}, m2 = {0};
	uint64_t x = 12345;

	(void)state;
	assert_non_null(ev);
	for (int i = 0; i < N; i++) {
		int32_t pid = (i / 7) % 2 ? 20 : 10;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		ev[i] = (struct mt_event){.pid = pid,
					  .tid = pid,
					  .ts = (uint64_t)i + 1,
					  .addr = 0x10000 + ((x >> 33) % 50000) * 16,
					  .size = 16 + (x >> 50) % 100};
		switch ((x >> 20) % 8) {
		case 0:
		case 1:
		case 2:
			ev[i].type = MT_EV_MALLOC;
			break;
		case 3:
		case 4:
		case 5:
			ev[i].type = MT_EV_FREE;
			break;
		case 6:
			ev[i].type = MT_EV_REALLOC;
			ev[i].old_addr = 0x10000 + ((x >> 40) % 50000) * 16;
			break;
		default:
			ev[i].type = MT_EV_CALLOC;
			break;
		}
	}
	ev[N / 3].type = MT_EV_EXEC;
	ev[N / 2].type = MT_EV_EXIT;
	assert_int_equal(heap_acct__new(&one), 0);
	assert_int_equal(heap_acct__new(&batch), 0);
	for (int i = 0; i < N; i++)
		heap_acct__event(one, &ev[i]);
	for (int i = 0; i < N; i += CONSUMER_BATCH)
		heap_acct__events(batch, &ev[i], N - i < CONSUMER_BATCH ? N - i : CONSUMER_BATCH);
	heap_acct__stats(one, &s1);
	heap_acct__stats(batch, &s2);
	assert_memory_equal(&s1, &s2, sizeof(s1));
	assert_true(s1.live_count > 1000 && s1.unmatched_frees > 0 && s1.lost_at_exec_count > 0);
	assert_int_equal(heap_acct__fill(one, &m1), 0);
	assert_int_equal(heap_acct__fill(batch, &m2), 0);
	assert_int_equal(m1.nr_procs, m2.nr_procs);
	assert_memory_equal(m1.procs, m2.procs, m1.nr_procs * sizeof(*m1.procs));
	assert_int_equal(m1.peak_heap, m2.peak_heap);
	assert_int_equal(m1.leaked_bytes, m2.leaked_bytes);
	free(m1.procs);
	free(m2.procs);
	heap_acct__free(one);
	heap_acct__free(batch);
	free(ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_replay_batches),
	    cmocka_unit_test(test_varlen_records),
	    cmocka_unit_test(test_sinks_artifact_and_acct),
	    cmocka_unit_test(test_sinks_write_error),
	    cmocka_unit_test(test_acct_batch_equals_single),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
