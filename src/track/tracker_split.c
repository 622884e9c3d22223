// SPDX-License-Identifier: MIT
/*
 * The re-base program (mt_rebase, process.bpf.c: ~60% of the tree programs' verification,
 * ~3.7 ms of ~6) verified on a thread while the caller's thread verifies the others: a second
 * instance of the object in which only mt_rebase loads, on the first instance's maps.
 *
 * The second instance needs those maps, and libbpf 1.1 creates them inside the first
 * instance's load, right before its programs. So the first program the first instance loads,
 * mt_on_fork, has a section handler of ours (libbpf_register_prog_handler, same program type
 * and flags as libbpf's own "raw_tp/"): its prepare callback, called just before that
 * program is verified, tells the thread that the maps exist. The thread has opened its
 * instance meanwhile; it takes the maps' descriptors and the read-only values, and loads.
 * If anything of this fails, the caller loads mt_rebase after its own load, as a second
 * instance on the same maps (one thread). Without a CPU to spare (split__worth_it) mt_rebase
 * loads with the others, as before.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "common/log.h"
#include "track/tracker_priv.h"

/* The section of the first program the first instance loads (the skeleton's order: mt_rebase,
 * then mt_on_fork). */
#define SPLIT_HOOK_SEC "raw_tp/sched_process_fork"

static struct rebase_split *split_armed; /* the one load in progress, for the callback */
static pthread_mutex_t split_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t split_cond = PTHREAD_COND_INITIALIZER;
static int split_handler; /* > 0 once registered, < 0: registration failed */

/* Called by libbpf just before it loads a program of SPLIT_HOOK_SEC: for the armed first
 * instance's mt_on_fork, the maps exist. */
static int split__prepare(struct bpf_program *prog, struct bpf_prog_load_opts *opts, long cookie)
{
	(void)opts;
	(void)cookie;
	pthread_mutex_lock(&split_lock);
	if (split_armed && prog == split_armed->first->progs.mt_on_fork) {
		split_armed->state = SPLIT_MAPS;
		split_armed = NULL;
		pthread_cond_broadcast(&split_cond);
	}
	pthread_mutex_unlock(&split_lock);
	return 0;
}

void tracker__split_init(void)
{
	LIBBPF_OPTS(libbpf_prog_handler_opts, ho, .prog_prepare_load_fn = split__prepare);

	if (!split_handler) {
		split_handler = libbpf_register_prog_handler(SPLIT_HOOK_SEC,
							     BPF_PROG_TYPE_RAW_TRACEPOINT, 0, &ho);
		if (split_handler <= 0)
			split_handler = -1;
	}
}

/* Only mt_rebase: autoload for tracker__load_second. */
static void split__autoload(struct memtrack_bpf *s, bool multi, bool load)
{
	(void)multi;
	bpf_program__set_autoload(s->progs.mt_rebase, load);
}

static void *split__run(void *arg)
{
	struct rebase_split *r = arg;
	struct memtrack_bpf *s = NULL;
	int state;

	r->err = tracker__open_second(r->btf_path, split__autoload, false, &s);
	if (!r->err && getenv("MEMTRACK_TEST_SPLIT_FAILS"))
		r->err = -EAGAIN; /* the caller's thread loads it after the others */
	pthread_mutex_lock(&split_lock);
	while ((state = r->state) == SPLIT_WAIT)
		pthread_cond_wait(&split_cond, &split_lock);
	pthread_mutex_unlock(&split_lock);
	if (!r->err)
		r->err = state == SPLIT_MAPS ? tracker__load_on(r->first, s) : -ECANCELED;
	if (!r->err)
		r->second = s;
	else
		memtrack_bpf__destroy(s);
	return NULL;
}

/*
 * Only with a CPU to spare: the second instance costs ~1.5-2 ms more CPU in all (its own
 * open, BTF and relocations), which a busy machine pays in wall time too. Measured, 40
 * interleaved pairs of `track -- /bin/true`: at load 6 on 2 CPUs, 1.08x the wall time of one
 * thread; with real-time priority (CPUs to spare) 0.95x. So: when the last minute's load
 * average leaves a CPU free beside this one. MEMTRACK_TEST_SPLIT_LOAD=on|no decides instead
 * (tests); MEMTRACK_TEST_SPLIT_FAILS=1 splits and makes the thread fail (the fallback).
 */
static bool split__worth_it(void)
{
	const char *env = getenv("MEMTRACK_TEST_SPLIT_LOAD");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	double load;

	if (getenv("MEMTRACK_TEST_SPLIT_FAILS")) /* the fallback, for the tests */
		return true;
	if (env)
		return !strcmp(env, "on");
	return cpus > 1 && getloadavg(&load, 1) == 1 && load + 1 <= (double)cpus;
}

void tracker__split_start(struct rebase_split *r, struct memtrack_bpf *first, const char *btf_path)
{
	sigset_t all, old;

	memset(r, 0, sizeof(*r));
	if (split_handler <= 0 || !split__worth_it())
		return;
	r->first = first;
	r->btf_path = btf_path;
	r->state = SPLIT_WAIT;
	pthread_mutex_lock(&split_lock);
	split_armed = r;
	pthread_mutex_unlock(&split_lock);
	sigfillset(&all); /* memtrack's signals are for its signalfd, later */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r->started = !pthread_create(&r->thread, NULL, split__run, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!r->started) {
		pthread_mutex_lock(&split_lock);
		split_armed = NULL;
		pthread_mutex_unlock(&split_lock);
	}
}

static struct memtrack_bpf *split__finish(struct rebase_split *r)
{
	if (!r->started)
		return NULL;
	pthread_mutex_lock(&split_lock);
	if (r->state == SPLIT_WAIT) /* the first instance failed before its programs */
		r->state = SPLIT_CANCEL;
	if (split_armed == r)
		split_armed = NULL;
	pthread_cond_broadcast(&split_cond);
	pthread_mutex_unlock(&split_lock);
	pthread_join(r->thread, NULL);
	r->started = false;
	if (r->err && r->err != -ECANCELED)
		log__debug(LOG_VERBOSE, "re-base program not loaded on a thread: %s",
			   strerror(-r->err));
	return r->second;
}

int tracker__load_rebase(struct tracker *t, struct rebase_split *r, int err)
{
	struct memtrack_bpf *s = split__finish(r);

	tracker__mark(t, "load: re-base program joined");
	if (err) {
		memtrack_bpf__destroy(s);
		return err;
	}
	if (s) {
		log__debug(LOG_VERBOSE, "re-base program verified on a thread");
	} else { /* on this thread, after the others */
		err = tracker__load_second(t, split__autoload, &s);
		log__debug(LOG_VERBOSE, "re-base program loaded after the others");
	}
	if (!err)
		t->rebase_skel = s;
	return err;
}
