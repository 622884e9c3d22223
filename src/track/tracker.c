// SPDX-License-Identifier: MIT
/*
 * The run, phase by phase (each timed into the manifest):
 *   load    open the skeleton, size the ring, pick uprobe_multi or perf uprobes, verify
 *           (tracker_load.c); or take the programs an earlier run kept (prog_cache.h)
 *   attach  raw tracepoints for the tree and RSS; allocator uprobes come per executable, when
 *           the BPF side stops a tracked task at the exec of a binary not seen yet
 *           (tracker_run.c)
 *   run     the command, created held before exec, registered, then released (tracker_run.c)
 *   drain   every record still in the ring after the root exits (tracker_finish.c)
 *   detach  links and maps closed after the artifact and manifest are complete
 *           (tracker_finish.c)
 * This file sequences them; the phases return 0 or -errno and log their failures, and only
 * tracker__run turns those into exit statuses (tracker.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "common/log.h"
#include "common/records.h"
#include "common/shquote.h"
#include "track/tracker_priv.h"

/* The exit status of a finished run: the command's, or MT_EXIT_LOST when the artifact is
 * incomplete (and why). */
static int tracker__exit_status(const struct tracker *t)
{
	if (!t->m.complete && t->drops_total + t->cons.rejected == 0)
		return MT_EXIT_LOST;
	if (!t->m.complete) {
		char what[512], advice[1024];

		/* the reasons that lost some: every reason's label did not fit in 256 bytes */
		log__error(
		    "%" PRIu64 " events were lost (%s): the artifact is incomplete.%s",
		    t->drops_total + t->cons.rejected,
		    records__drops_text(what, sizeof(what), t->m.drops, t->cons.rejected, false),
		    records__drops_advice(advice, sizeof(advice), t->m.drops));
		return MT_EXIT_LOST;
	}
	return t->m.exit_status;
}

/* The early links (early_links.h): the tracepoints and the interposer's control points. */
static void tracker__early_start(struct tracker *t)
{
	/* a finished run's tracepoint links are taken where runs coordinate their lingering
	 * (prog_cache.h, detacher.h) */
	early_links__start(&t->early, t->pre.on ? t->pre.lib : NULL, t->multi,
			   t->pre.on ? shm_source__ctl_live(t->pre.shm) : NULL,
			   t->pc.linger_fd >= 0 ? prog_cache__root() : NULL);
}

int tracker__run(const struct tracker_opts *o)
{
	struct tracker t = {
	    .o = o, .epfd = -1, .sigfd = -1, .btf.memfd = -1, .out.fd = -1, .ctl_fd = -1};
	char name[32];
	const char *clock_why; /* why the interposer stamps with clock_gettime, NULL: the TSC */
	uint64_t t_start = now_ns(CLOCK_MONOTONIC), t0, root_attach_ns = 0;
	int ret = MT_EXIT_FAILED, err, status, art_fd = -1;
	unsigned workers = 0; /* compression threads, artifact__default_workers */

	t.sp.go_fd = t.sp.err_fd = t.sp.pidfd = -1;
	t.alloc_entry.fd = t.alloc_ret.fd = t.alloc_session.fd = -1;
	t.session = -1;
	t.pc.dir_fd = t.pc.owner_fd = t.pc.linger_fd = -1;
	t.ring.fd = -EBADF;
	t.wd.sock = -1;
	t.relay.tree_parent = tracker__tree_parent;
	t.relay.settle = tracker__settle;
	t.relay.ctx = &t;
	t.m.start_unix_ns = now_ns(CLOCK_REALTIME);
	t.m.start_mono_ns = t.t_start = t_start;
	/* Creating the ring map takes ~3 ms of kernel time, on a thread the load waits for: started
	 * first thing. Not so when memtrack is the init of a new pid namespace, where a thread
	 * started before the command's fork would take pid 2, the command's (below). A thread and
	 * a map fd (close-on-exec, kernel memory) change nothing in what the forks copy; the
	 * watchdog closes every fd it inherits. */
	/* with --, the words as a shell command that runs them again */
	t.m.command = o->command ? strdup(o->command) : shquote__argv(o->argv);
	if (!t.m.command || manifest__set_argv(&t.m, o->argv) ||
	    manifest__set_str(&t.m.memtrack_version, MEMTRACK_VERSION) ||
	    manifest__set_str(&t.m.rmap_backend, "off")) {
		log__error("out of memory");
		goto cleanup;
	}
	/* No RLIMIT_MEMLOCK raise (it needed CAP_SYS_RESOURCE): since 5.11 BPF memory is charged
	 * to the memory cgroup, and memtrack needs 5.15; libbpf raises it itself on older kernels.
	 */
	/* in a pid namespace, /proc must be its own: refused before anything is made */
	if (pidns__check(&t.pidns))
		goto cleanup;
	/* names are "<pid><suffix>", a pid at most 10 digits: the longest is the artifact's */
	if (outdir__open(&t.out, o->outdir, 10 + strlen(ARTIFACT_SUFFIX)) ||
	    heap_acct__new(&t.acct))
		goto cleanup;
	tracker__mark(&t, "output folder");
	/* before the fork: the command inherits LD_PRELOAD and the shared memory's name */
	if (preload_setup__start(&t.pre, (enum alloc_hooks)o->alloc_hooks, t.pidns.ino) ||
	    tracker__stacks_start(&t))
		goto cleanup;
	if (t.pre.on)
		abi32__init(&t.abi32, t.pre.lib);
	/* earlier runs' inert files, for the dlopens (not with --stacks: tracker__seen_publish) */
	if (!o->stacks)
		shm_source__keep_load(t.pre.shm);
	tracker__mark(&t, "interposer's shared memory");
	/* the ring's thread too, unless a kept load has one; before the fork (the command holds
	 * no copy of the ring or the maps) */
	tracker__cache_open(&t);
	tracker__mark(&t, t.pc.hit ? "program cache: kept load found" : "program cache looked up");
	clock_why = t.pre.on ? shm_source__clock_refusal(t.pre.shm) : NULL;
	if (manifest__set_str(&t.m.alloc_hooks, preload_setup__mode_name(&t.pre)) ||
	    manifest__set_str(&t.m.preload_lib, t.pre.on ? t.pre.lib : NULL) ||
	    manifest__set_str(&t.m.preload_clock,
			      !t.pre.on ? NULL : clock_why ? "clock_gettime" : "tsc") ||
	    manifest__set_str(&t.m.preload_clock_reason, clock_why)) {
		log__error("out of memory");
		goto cleanup;
	}
	/* The command is forked first, held before its exec: from a small process (the ring map
	 * may exist already, but nothing of it is mapped) the fork copies little, and its exec has
	 * little to tear down. */
	err = spawn__start(&t.sp, o->argv, true);
	if (err) {
		log__error("cannot start '%s': %s", o->argv[0], strerror(-err));
		goto cleanup;
	}
	t.m.root_pid = t.sp.pid;
	tracker__mark(&t, "command forked, held");
	if (getpid() == 1 && !t.pc.hit)
		tracker__ring_start(&t);
	/* The command is memtrack's first child: in a new pid namespace it is pid 2 (memtrack
	 * pid 1), as test_track_outputs expects. Then the watchdog, while memtrack is small. */
	err = watchdog__start(&t.wd);
	if (err) {
		log__error("cannot start the watchdog process: %s", strerror(-err));
		goto cleanup;
	}
	tracker__mark(&t, "watchdog started");
	/* Both names are claimed while the command is still held: a refusal runs nothing. */
	snprintf(name, sizeof(name), "%d%s", t.sp.pid, ARTIFACT_SUFFIX);
	snprintf(t.manifest_name, sizeof(t.manifest_name), "%d%s", t.sp.pid, MANIFEST_SUFFIX);
	t.m.artifact = strdup(name);
	if (!t.m.artifact || outdir__check_free(&t.out, t.manifest_name))
		goto cleanup;
	art_fd = outdir__create(&t.out, name);
	if (art_fd < 0 || tracker__stacks_open(&t))
		goto cleanup;
	tracker__mark(&t, "output files created");
	/* The links wait for the kernel while this thread inspects and loads (early_links.h).
	 * After the two forks: started before them, with a kept load (5 December, 30 interleaved
	 * rounds), the forks took 1.7 and 3.3 ms longer (the links' text patching sends IPIs to
	 * every CPU) and the command was released 1.3 ms later. */
	tracker__early_start(&t);
	tracker__mark(&t, "early links started");
	if (libs__new(&t.libs, NULL))
		goto cleanup;
	if (t.pre.on) {
		libs__preload(t.libs, t.pre.dev, t.pre.ino, t.pre.autom);
		libs__set_pl_gate(t.libs, tracker__pl_gate, &t);
	}
	if (root_prep__start(&t.root, t.libs, o->argv[0]))
		goto cleanup;
	tracker__mark(&t, "root inspection started");

	t0 = now_ns(CLOCK_MONOTONIC);
	err = tracker__load(&t);
	t.m.t_load = now_ns(CLOCK_MONOTONIC) - t0;
	tracker__mark(&t, "loaded");
	if (err)
		goto cleanup;
	/* the slot stays busy while the watchdog lives (it may still read the ring): it holds the
	 * slot's lock too, and its pid is in the owner map */
	err = watchdog__arm(&t.wd, t.fd.events, t.fd.stop_ctl, t.pc.dir_fd);
	prog_cache__set_owner(&t.pc, PC_OWNER_WATCHDOG, t.wd.pid);
	if (!err)
		err = tracker__set_stops(&t, true);
	if (err) {
		log__error("cannot arm the watchdog process: %s", strerror(-err));
		goto cleanup;
	}
	tracker__mark(&t, "watchdog armed, stops on");
	t0 = now_ns(CLOCK_MONOTONIC);
	if (tracker__fill_early(&t)) { /* waits for the early links: the attach phase's start */
		log__error("out of memory");
		goto cleanup;
	}
	/* our tracepoints are linked: a detacher keeping the last run's for us lets them go */
	if (t.early_ok)
		prog_cache__linger_done(&t.pc);
	tracker__mark(&t, "early links filled");
	if (tracker__attach_tracepoints(&t))
		goto cleanup;
	tracker__mark(&t, "tracepoints attached");
	/* now unless made early; then the command does not wait for that link (early_links.h) */
	if (tracker__attach_served(&t))
		goto cleanup;
	tracker__mark(&t, early_links__ctl_pending(&t.early)
			      ? "interposer's control points linking on"
			      : "interposer's control points attached");
	if (tracker__attach_root(&t))
		goto cleanup;
	tracker__mark(&t, "root's libraries attached");
	err = tracker__setup_loop(&t);
	if (err) {
		log__error("cannot set up the event loop: %s", strerror(-err));
		goto cleanup;
	}
	tracker__mark(&t, "event loop set up");
	if (tracker__register_root(&t))
		goto cleanup;
	tracker__add_pidfd(&t);
	t.m.t_attach = now_ns(CLOCK_MONOTONIC) - t0;
	root_attach_ns = libs__attach_ns(t.libs); /* inside the window just timed */
	tracker__mark(&t, "root registered");
	/* the tree is the held root alone: no fork of it is in flight */
	t.fork_drift = tracker__ctl_count(&t, 15) - tracker__ctl_count(&t, 16);
	t.need_drift = tracker__ctl_count(&t, 17) - tracker__ctl_count(&t, 14);
	t0 = now_ns(CLOCK_MONOTONIC);
	err = spawn__go(&t.sp);
	if (err) {
		log__error("cannot release '%s': %s", o->argv[0], strerror(-err));
		goto cleanup;
	}
	tracker__mark(&t, "command released");
	/* While the command execs: nothing is read from the ring before the loop below. */
	err = artifact_writer__open_fd(&t.writer, art_fd, ARTIFACT_DEFAULT_LEVEL, 0);
	art_fd = -1; /* the writer's now, even on error */
	tracker__mark(&t, "artifact writer open");
	if (err) {
		log__error("cannot write '%s/%s': %s", o->outdir, t.m.artifact, strerror(-err));
		goto cleanup;
	}
	/* frames are compressed on every CPU but one while this thread drains the ring, on every
	 * CPU once the tree has exited; the threads start at the first full frame (a short run's
	 * one frame is compressed at close, here) */
	workers = artifact__default_workers();
	err = artifact_writer__set_workers(t.writer, workers);
	if (!err)
		err = artifact_writer__set_active_workers(t.writer, artifact__run_workers(workers));
	if (err) {
		log__error("cannot set up the artifact's compression: %s", strerror(-err));
		goto cleanup;
	}
	log__debug(LOG_VERBOSE, "compression: %u of %u workers while the tree runs",
		   artifact__run_workers(workers), workers);
	tracker__mark(&t, "compression set up");
	t.sinks.writer = t.writer;
	err = spawn__exec_result(&t.sp);
	if (err)
		log__error("cannot execute '%s': %s", o->argv[0], strerror(-err));
	tracker__mark(&t, "exec result read");
	status = tracker__loop(&t);
	tracker__mark(&t, "tree exited");
	/* what is left to drain and compress, on every CPU now: no error (n >= those running) */
	artifact_writer__set_active_workers(t.writer, workers);
	if (status < 0) {
		log__error("event loop failed: %s", strerror(-status));
		goto cleanup;
	}
	t.sp.pid = 0; /* reaped: nothing to abort from here on */
	t.m.t_attach += libs__attach_ns(t.libs) - root_attach_ns; /* at exec and dlopen stops */
	if (!tracker__finish(&t, status, t0, t_start)) {
	tracker__mark(&t, "finished");
		tracker__tell(&t);
		ret = tracker__exit_status(&t);
	}
	if (err && ret == MT_EXIT_FAILED)
		ret = MT_EXIT_NOEXEC;
cleanup:
	root_prep__join(&t.root);
	spawn__abort(&t.sp); /* a child never released, or one we cannot follow */
	if (art_fd >= 0) {   /* created, the command never ran: no empty artifact left behind */
		close(art_fd);
		unlinkat(t.out.fd, t.m.artifact, 0);
		if (t.m.stacks_file)
			unlinkat(t.out.fd, t.m.stacks_file, 0);
	}
	tracker__destroy(&t);
	tracker__mark(&t, "destroyed");
	return ret;
}
