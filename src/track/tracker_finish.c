// SPDX-License-Identifier: MIT
/*
 * Phase finish: drain every record still in the ring after the root exits, write the manifest,
 * then hand the links and maps to a detacher (or close them) once the artifact and manifest are
 * complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "common/log.h"
#include "track/detacher.h"
#include "track/handoff.h"
#include "track/tracker_priv.h"

static void tracker__detach(struct tracker *t);
static void tracker__detach_background(struct tracker *t);

/*
 * When the wait ended with processes of the tree still running (a signal after the root
 * exited): records them for the manifest (pid, name) and stops tracking them, so that the last
 * drain ends (a process allocating nonstop would feed it forever) and no new child of theirs is
 * tracked. Rounds until the map is empty: a child forked while we delete is added once more.
 */
static int tracker__untrack_running(struct tracker *t)
{
	int fd = t->fd.procs;
	__u32 key;

	for (int round = 0; round < 64 && !bpf_map_get_next_key(fd, NULL, &key); round++) {
		__u32 *pids = NULL, n = 0, cap = 0;
		int err = 0;

		do {
			if (n == cap) {
				__u32 *p = realloc(pids, (cap = cap ? cap * 2 : 16) * sizeof(*p));

				if (!p) {
					err = -ENOMEM;
					break;
				}
				pids = p;
			}
			pids[n++] = key;
		} while (!bpf_map_get_next_key(fd, &pids[n - 1], &key));
		for (__u32 i = 0; !err && i < n; i++) {
			struct manifest_running *r, *v;
			char path[64], comm[16] = "";
			int cfd;

			if (bpf_map_delete_elem(fd, &pids[i]))
				continue; /* it exited meanwhile: its Exit record is in the ring */
			v = realloc(t->m.running, (t->m.nr_running + 1) * sizeof(*v));
			if (!v) {
				err = -ENOMEM;
				break;
			}
			t->m.running = v;
			r = &v[t->m.nr_running++];
			r->pid = (int32_t)pids[i];
			snprintf(path, sizeof(path), "/proc/%u/comm", pids[i]);
			cfd = open(path, O_RDONLY | O_CLOEXEC);
			if (cfd >= 0) {
				ssize_t len = read(cfd, comm, sizeof(comm) - 1);

				comm[len > 0 ? len : 0] = 0;
				comm[strcspn(comm, "\n")] = 0;
				close(cfd);
			}
			heap_acct__comm_copy(r->comm, comm);
		}
		free(pids);
		if (err)
			return err;
	}
	return 0;
}

uint64_t tracker__percpu_sums(int fd, uint32_t nr, uint64_t *sums)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t total = 0, *vals = calloc(ncpu, sizeof(*vals));

	for (__u32 r = 0; r < nr; r++) {
		sums[r] = 0;
		if (!vals || bpf_map_lookup_elem(fd, &r, vals))
			continue;
		for (int c = 0; c < ncpu; c++)
			sums[r] += vals[c];
		total += sums[r];
	}
	free(vals);
	return total;
}

/* The BPF side's drops by reason (enum mt_drop_reason: the first rows of drops[]) */
static void tracker__read_drops(struct tracker *t, uint64_t *drops)
{
	tracker__percpu_sums(t->fd.drops, MT_DROP_NR, drops);
}

/* "3 processes were still running ...: 1234 (sleep), ..." */
static void tracker__explain_running(const struct manifest *m)
{
	char list[512];
	size_t len = 0;

	list[0] = 0;
	for (uint32_t i = 0; i < m->nr_running && len < sizeof(list) - 32; i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d (%s)", i ? ", " : "",
					m->running[i].pid, m->running[i].comm);
	log__error("%u process%s of the tree %s still running when memtrack stopped waiting (a "
		   "signal after the command exited): %s%s. Untracked from then on, with no Exit "
		   "record: the artifact is incomplete",
		   m->nr_running, m->nr_running == 1 ? "" : "es",
		   m->nr_running == 1 ? "was" : "were", list,
		   len >= sizeof(list) - 32 ? ", ..." : "");
}

#define FINISH_BUSY_MS 2000 /* a reserved record not committed by then has no live writer */

/*
 * The last drain stops at a record reserved and not yet committed (the consumer never passes
 * one: those after it wait for it), and reports nothing left. Each process commits its own
 * records before its Exit, but another task's may still be in flight: a reclaimer's Rss record
 * for the last process, reserved under that process's lock, which the exit's program gave up
 * waiting for (rss.bpf.h). Its writer commits it within microseconds unless its CPU was taken
 * away: waited for as the watchdog would (WATCHDOG_MAX_MS), then the run says it is incomplete.
 * Until 8 December 2026 the records from it on were lost, uncounted, the run called complete.
 */
static void tracker__drain_busy(struct tracker *t)
{
	const struct event_source *ring = t->cons.nr_sources > 0 ? t->cons.sources[0] : NULL;
	uint64_t end = now_ns(CLOCK_MONOTONIC) + FINISH_BUSY_MS * 1000000ull;

	while (ring && !ring->caught_up && !t->cons.read_err) {
		if (now_ns(CLOCK_MONOTONIC) > end) {
			t->cons.read_err = -ETIMEDOUT;
			log__error(
			    "a record of the BPF ring was reserved and never committed in %d "
			    "ms: the records after it are lost and the artifact is incomplete",
			    FINISH_BUSY_MS);
			return;
		}
		usleep(100);
		while (consumer__drain(&t->cons) > 0)
			;
	}
}

static int tracker__status(int status)
{
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WIFEXITED(status) ? WEXITSTATUS(status) : MT_EXIT_FAILED;
}

int tracker__finish(struct tracker *t, int status, uint64_t t_run0, uint64_t t_start)
{
	struct utsname un;
	struct rusage ru;
	uint64_t drops_total, t0, in_file, arrived;
	int exit_code = tracker__status(status), err;
	__u32 zero = 0;
	struct {
		__s64 tree_rss, tree_peak;
	} g = {0, 0};

	t->m.t_run = now_ns(CLOCK_MONOTONIC) - t_run0;
	t0 = now_ns(CLOCK_MONOTONIC);
	/* The tree is over: a control link still being made is given up, not waited for (one
	 * grace period from our start, ~6-15 ms, the end of a short run); its child closes it
	 * once made. One made is handed off with the tracepoints' links. MEMTRACK_TEST_CTL_WAIT:
	 * waited for, as a longer tree would (the tests of its hand-over). */
	if (t->pre.on && !t->ctl_ready && t->early_ok && !getenv("MEMTRACK_TEST_CTL_WAIT") &&
	    early_links__ctl_abandon(&t->early)) {
		t->ctl_ready = true;
		log__debug(LOG_VERBOSE, "the interposer's control link given up: the tree ended first");
		if (manifest__set_str(&t->m.control_link, "given up"))
			log__warn("out of memory");
	} else {
		tracker__ctl_ready(t);
	}
	tracker__set_stops(t, false);
	/* a process left behind is refused at once from now on: it never waits for us */
	handoff__stop();
	if (tracker__untrack_running(t))
		log__warn("cannot list the processes still running: out of memory");
	while (consumer__drain(&t->cons) > 0)
		;
	tracker__drain_busy(t);
	if (t->pre_added) {
		shm_source__drain_all(t->pre.shm, &t->cons);
		shm_source__close(t->pre.shm);
		shm_source__drops(t->pre.shm, &t->m.drops[DROP_PRELOAD]);
		shm_source__waits(t->pre.shm, &t->m.preload_waits, &t->m.preload_wait_ns);
	}
	t->m.parents_resumed = t->relay.resumed;
	t->m.stops = t->ctl_stops;
	t->m.not_stopped = t->ctl_not_stopped;
	t->m.execs_judged = tracker__execs_judged(t);
	t->m.dlopens_judged = shm_source__dl_judged(t->pre.shm);
	tracker__inert_store(t);
	t->m.handoffs = handoff__handed();
	if (handoff__refused())
		log__debug(LOG_VERBOSE,
			   "handoff: %llu requests refused (not of the tree, or "
			   "not our file)",
			   (unsigned long long)handoff__refused());
	/* the 32-bit images prepared for the i386 interposer that it did not serve (abi32.h) */
	shm_source__each_proc(t->pre.shm, abi32__registered, &t->abi32);
	t->m.drops[DROP_ABI] = t->abi_unrecorded + abi32__unserved(&t->abi32);
	t->m.drops[DROP_LATE_PROBES] = t->late_probes;
	/* With the stops ended and the whole tree gone, every stop record has been read and
	 * answered by the drain above: the watchdog has nothing left to guard. */
	if (!t->m.nr_running)
		watchdog__done(&t->wd);
	t->m.t_drain = now_ns(CLOCK_MONOTONIC) - t0;
	tracker__mark(t, "drained");
	artifact_writer__flush(t->writer);
	in_file = artifact_writer__events_written(t->writer);
	/* what the writer took, and what it refused once it had failed */
	arrived = artifact_writer__events(t->writer) + t->cons.rejected;
	err = artifact_writer__close(t->writer);
	t->writer = t->sinks.writer = NULL;
	if (err && !t->sinks.write_err)
		t->sinks.write_err = err;
	tracker__stacks_finish(t); /* logs its failure */
	tracker__mark(t, "artifact closed");

	tracker__read_drops(t, t->m.drops);
	/* refusals told before the control link was live (preload_ctl.c) */
	t->m.drops[MT_DROP_UNSERVED] += shm_source__unserved(t->pre.shm) + t->preload_unserved;
	t->drops_total = drops_total = records__drops_sum(t->m.drops);
	bpf_map_lookup_elem(t->fd.global, &zero, &g);
	heap_acct__fill(t->acct, &t->m);
	preload_setup__fill(&t->pre, &t->m,
			    !t->pre.on || (t->pre.autom && libs__glibc_used(t->libs)));
	/* The kernel-side tree peak is exact (every page); the artifact's Rss records are
	 * decimated, so prefer the larger of the two. */
	if ((uint64_t)g.tree_peak > t->m.peak_rss)
		t->m.peak_rss = g.tree_peak;
	memcpy(t->m.counts, t->sinks.counts, sizeof(t->sinks.counts));
	t->m.events_total = 0;
	for (int i = 0; i < MT_EV_TYPE_MAX; i++)
		t->m.events_total += t->sinks.counts[i];
	t->m.consumer_drops = t->cons.rejected;
	t->m.complete =
	    drops_total == 0 && t->cons.rejected == 0 && !t->sinks.write_err && !t->m.nr_running &&
	    !t->cons.read_err;
	t->m.exit_status = exit_code;
	t->m.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	uname(&un);
	t->m.kernel_release = strdup(un.release);
	libs__fill(t->libs, &t->m);
	getrusage(RUSAGE_SELF, &ru);
	t->m.memtrack_max_rss = (uint64_t)ru.ru_maxrss * 1024;
	t->m.ringbuf_bytes = t->o->ring_bytes;
	tracker__mark(t, "manifest filled");
	/* The detacher outlives us with a copy of our descriptors: the folder's would keep its
	 * file system busy (no umount right after memtrack). Reopened below, checked to be the
	 * same folder. */
	outdir__close(&t->out);
	/* how the allocator sites' returns were caught, when their programs were loaded */
	if (t->alloc_entry.fd >= 0 &&
	    manifest__set_str(&t->m.uprobe_returns,
			      t->alloc_session.fd >= 0 ? "session" : "return_probes"))
		log__warn("out of memory");
	if (t->o->sync_detach)
		tracker__detach(t);
	else
		tracker__detach_background(t);
	t->m.t_total = now_ns(CLOCK_MONOTONIC) - t_start;
	tracker__mark(t, "detach handed off");

	/* A cut artifact is said first: with a full disk the manifest fails too. */
	if (t->sinks.write_err)
		log__error(
		    "cannot write '%s/%s': %s: the artifact is cut, it holds the first %" PRIu64
		    " of the %" PRIu64 " events that arrived",
		    t->o->outdir, t->m.artifact, strerror(-t->sinks.write_err), in_file, arrived);
	err = outdir__reopen(&t->out);
	if (!err) /* both log their failures */
		err = manifest__write_new(&t->m, &t->out, t->manifest_name);
	tracker__mark(t, "manifest written");
	if (err)
		return err;
	return t->sinks.write_err;
}

void tracker__tell(struct tracker *t)
{
	if (!t->o->quiet) {
		if (t->o->summary)
			t->o->summary(stderr, &t->m);
		fprintf(stderr, "memtrack: artifact: %s/%s\n", t->o->outdir, t->m.artifact);
	}
	if (t->m.nr_running)
		tracker__explain_running(&t->m);
}

/* Closes every link and map; idempotent. Timed: detaching is part of what a run costs. */
static void tracker__detach(struct tracker *t)
{
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);

	tracker__glibc_wait(t); /* glibc's links taken out during the run, closed */
	if (!t->loaded) {
		/* the load failed or never ran: the early links' threads (started before it) still
		 * write into t->early, which lives in tracker__run's frame: join them */
		early_links__close(&t->early);
		return;
	}
	attach_set__free(t->set);
	t->set = NULL;
	for (int i = 0; i < 3; i++) { /* ctl_links */
		bpf_link__destroy(t->ctl_links[i]);
		t->ctl_links[i] = NULL;
	}
	if (t->ctl_fd >= 0)
		close(t->ctl_fd);
	t->ctl_fd = -1;
	while (t->tp_nr > 0)
		close(t->tp_fds[--t->tp_nr]);
	early_links__close(&t->early);
	consumer__destroy(&t->cons);
	tracker__unload(t);
	t->m.t_detach = now_ns(CLOCK_MONOTONIC) - t0;
	log__debug(LOG_VERBOSE, "detach: %.1f ms", t->m.t_detach / 1e6);
}

/* How long the detacher keeps the tracepoints' links for the next run (detacher.h): back-to-back
 * runs, a benchmark's rounds, start well within it; after the last one, an idle trampoline
 * runs at each hit of the four tracepoints for this long. MEMTRACK_TEST_LINGER_MS for tests. */
#define DETACHER_LINGER_MS 1000

/* Detaching in a child that outlives us (detacher.c): our own exit then closes and unmaps
 * nothing, and the grace periods are paid off the caller's clock. The tracepoints' early links
 * are handed over to the next run (detacher.h); read at our exit, so static. */
static void tracker__detach_background(struct tracker *t)
{
	static struct detacher_plan plan;
	const char *env = getenv("MEMTRACK_TEST_LINGER_MS");
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	pid_t pid;

	plan = (struct detacher_plan){.lock_fd = t->pc.dir_fd,
				      .owner_fd = t->pc.owner_fd,
				      .owner_key = PC_OWNER_DETACHER,
				      .linger_fd = t->pc.linger_fd,
				      .linger_ms = env ? (uint32_t)atoi(env) : DETACHER_LINGER_MS,
				      .test_late = getenv("MEMTRACK_TEST_DETACHER_LATE") != NULL};
	if (t->early_ok && t->early.tp_map >= 0 && t->pc.linger_fd >= 0) {
		_Static_assert(EARLY_TP_NR + 1 <= DETACHER_KEEP_MAX, "a kept link per hook");
		/* links, then maps (detacher.h); the control link's three when it is made */
		static const char *const names[] = {"tp0",
						    "tp1",
						    "tp2",
						    "tp3",
						    DETACHER_OFFER_CTL,
						    DETACHER_OFFER_MAP,
						    DETACHER_OFFER_CMAP,
						    DETACHER_OFFER_LIB};
		static const char *const names_no_ctl[] = {"tp0", "tp1", "tp2", "tp3",
							   DETACHER_OFFER_MAP};
		bool ctl = !early_links__ctl_pending(&t->early) && t->early.ctl_link >= 0 &&
			   t->early.ctl_map >= 0 && t->early.ctl_lib_map >= 0;
		char tag[48];

		_Static_assert(sizeof(names_no_ctl) / sizeof(names_no_ctl[0]) == EARLY_TP_NR + 1,
			       "a name per link, then the map's");
		for (int i = 0; i < EARLY_TP_NR; i++)
			plan.keep[plan.nkeep++] = t->early.tp_link[i];
		plan.maps[plan.nmaps] = t->early.tp_map;
		/* rss_stat's trampoline tail-calls its slot directly (early_links.c) */
		plan.idle_mask[plan.nmaps] = 1u << EARLY_RSS_STAT;
		plan.idle_type[plan.nmaps] = BPF_PROG_TYPE_RAW_TRACEPOINT;
		plan.disarm_nr[plan.nmaps++] = EARLY_TP_NR;
		if (ctl) {
			plan.keep[plan.nkeep++] = t->early.ctl_link;
			plan.maps[plan.nmaps] = t->early.ctl_map;
			plan.disarm_nr[plan.nmaps++] = 1;
			plan.maps[plan.nmaps++] = t->early.ctl_lib_map; /* no slots */
		}
		snprintf(tag, sizeof(tag), "%d-%llx", getpid(), (unsigned long long)t->t_start);
		detacher__plan_offer(&plan, prog_cache__root(), tag, ctl ? names : names_no_ctl);
	}
	if (plan.linger_fd < 0 ||
	    bpf_map_lookup_elem(plan.linger_fd, &(uint32_t){0}, &plan.linger_gen))
		plan.linger_gen = ~0ull; /* unknown: no lingering */
	tracker__glibc_end(t); /* a close under way ends on its own (the detacher holds a copy) */
	pid = detacher__start(&plan);

	if (pid < 0) {
		tracker__detach(t);
		return;
	}
	t->handed_off = true;
	/* its exit detaches: until it is gone, the slot is not another run's */
	prog_cache__set_owner(&t->pc, PC_OWNER_DETACHER, pid);
	t->m.t_detach = now_ns(CLOCK_MONOTONIC) - t0;
	log__debug(LOG_VERBOSE, "detach: handed to process %d in %.2f ms", pid,
		   t->m.t_detach / 1e6);
}

void tracker__destroy(struct tracker *t)
{
	if (t->handed_off)
		return; /* the detacher's exit frees everything at once, off our critical path */
	tracker__detach(t);
	tracker__ring_close(t);
	if (!t->pre_added && t->pre.shm)
		shm_source__src(t->pre.shm)->destroy(shm_source__src(t->pre.shm));
	artifact_writer__close(t->writer);
	tracker__stacks_destroy(t);
	heap_acct__free(t->acct);
	libs__free(t->libs);
	abi32__free(&t->abi32);
	if (t->sigfd >= 0)
		close(t->sigfd);
	if (t->epfd >= 0)
		close(t->epfd);
	spawn__close(&t->sp);
	watchdog__close(&t->wd);
	outdir__close(&t->out);
	btf_cache__close(&t->btf);
	manifest__free(&t->m);
}
