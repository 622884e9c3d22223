// SPDX-License-Identifier: MIT
/*
 * stop_relay (src/track/stop_relay.h) with real processes: a watched parent that stopped itself
 * after its child's stop is resumed; one stopped at a stop of memtrack's own (its record not
 * read yet when the relay looks) is left to that stop's answer, which settle gives first. Until
 * 7 December 2026 the relay resumed such a parent before its new image's probes went in, and
 * the image's first calls went unrecorded (check-vm, test_allocators_unserved).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cmocka.h>
#include "../lib/mt_proc_state.h"
#include "track/stop_relay.h"

/* The test's process, killed by the teardown even when an assertion failed: stopped, it would
 * hold the output pipe of whoever runs the tests open for ever. */
static pid_t proc = -1;

/* A process that waits for signals, stopped (job control): 'T' when this returns. */
static pid_t stopped_process(void)
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		for (;;)
			pause();
	}
	proc = pid;
	assert_int_equal(kill(pid, SIGSTOP), 0);
	assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
	assert_true(WIFSTOPPED(st));
	assert_int_equal(mt_proc_state(pid), 'T');
	return pid;
}

static int end_process(void **state)
{
	(void)state;
	if (proc > 0) {
		kill(proc, SIGKILL);
		waitpid(proc, NULL, 0);
	}
	proc = -1;
	return 0;
}

/* What the tracker's settle does in these tests: answer the parent's own stop (or not). */
struct settle_ctx {
	struct stop_relay *r;
	pid_t parent;
	bool answer;	/* answer a stop of the parent's own (SIGCONT, as the tracker does) */
	bool restopped; /* ... and the parent is at another of ours by the look (no SIGCONT) */
	unsigned calls;
};

static void settle(void *ctx)
{
	struct settle_ctx *s = ctx;

	s->calls++;
	if (!s->answer)
		return;
	if (!s->restopped)
		kill(s->parent, SIGCONT);
	stop_relay__answered(s->r, s->parent, 0);
}

/* A stopped process, watched as the parent of a child (here: us, running) whose stop was just
 * answered; settle answers as s says. */
static pid_t watched_parent(struct stop_relay *r, struct settle_ctx *s)
{
	pid_t parent = stopped_process();

	memset(r, 0, sizeof(*r));
	memset(s, 0, sizeof(*s));
	s->r = r;
	s->parent = parent;
	r->settle = settle;
	r->ctx = s;
	stop_relay__answered(r, getpid(), parent);
	return parent;
}

/* A wrapper (su, sudo) stopped itself when its child stopped at ours: resumed at the first
 * tick after the child's answer, after settle found nothing of its own to answer. */
static void test_self_stopped_parent_resumed(void **state)
{
	struct stop_relay r;
	struct settle_ctx s;
	pid_t parent = watched_parent(&r, &s);

	(void)state;
	assert_int_equal(r.resumed, 0); /* looked at by the tick, not at the answer */
	stop_relay__tick(&r);
	assert_int_equal(s.calls, 1);
	assert_int_equal(r.resumed, 1);
	assert_int_not_equal(mt_proc_state(parent), 'T');
}

/* The parent stopped at one of memtrack's stops (it exec'd while watched): settle answers it;
 * the relay sends nothing of its own. */
static void test_parent_at_own_stop_left_to_answer(void **state)
{
	struct stop_relay r;
	struct settle_ctx s;
	pid_t parent = watched_parent(&r, &s);

	(void)state;
	s.answer = true;
	stop_relay__tick(&r);
	assert_int_equal(s.calls, 1);
	assert_int_equal(r.resumed, 0);
	assert_int_not_equal(mt_proc_state(parent), 'T'); /* the answer's SIGCONT */
}

/* Its own stop answered, and stopped again by the look (at another stop of ours, whose record
 * is not read yet): not resumed on that look; a later look, with nothing of its own answered
 * since, takes it for a wrapper's stop. */
static void test_parent_stopped_again_not_resumed(void **state)
{
	struct stop_relay r;
	struct settle_ctx s;
	pid_t parent = watched_parent(&r, &s);

	(void)state;
	s.answer = s.restopped = true;
	stop_relay__tick(&r);
	assert_int_equal(r.resumed, 0);
	assert_int_equal(mt_proc_state(parent), 'T');
	s.answer = false;
	for (int i = 0; i < 200 && !r.resumed; i++) { /* the next look is due 2 ms later */
		usleep(1000);
		stop_relay__tick(&r);
	}
	assert_int_equal(r.resumed, 1);
	assert_int_not_equal(mt_proc_state(parent), 'T');
}

/* No parent stopped: nothing to answer first (settle is a drain of the records). */
static void test_running_parent_no_settle(void **state)
{
	struct stop_relay r;
	struct settle_ctx s;
	pid_t parent = watched_parent(&r, &s);

	(void)state;
	kill(parent, SIGCONT);
	assert_int_not_equal(mt_proc_state(parent), 'T');
	stop_relay__tick(&r);
	assert_int_equal(s.calls, 0);
	assert_int_equal(r.resumed, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_self_stopped_parent_resumed, end_process),
	    cmocka_unit_test_teardown(test_parent_at_own_stop_left_to_answer, end_process),
	    cmocka_unit_test_teardown(test_parent_stopped_again_not_resumed, end_process),
	    cmocka_unit_test_teardown(test_running_parent_no_settle, end_process),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
