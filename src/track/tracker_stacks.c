// SPDX-License-Identifier: MIT
/*
 * --stacks in the tracker: the preload path's stack area (created before the command is
 * forked, so that it inherits its name), the stacks file and its sink (created with the
 * artifact, while the command is held), the manifest's keys at the end. Without --stacks
 * none of this runs and the outputs are what they were.
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "common/log.h"
#include "stacks/stack_sink.h"
#include "track/handoff.h"
#include "track/tracker_priv.h"

int tracker__stacks_start(struct tracker *t)
{
	const char *u = getenv("SUDO_UID"), *g = getenv("SUDO_GID");
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	int err;

	if (!t->o->stacks || !t->pre.on)
		return 0;
	if (u && g && geteuid() == 0) { /* the command runs as the invoking user (preload_setup) */
		uid = (uid_t)strtoul(u, NULL, 10);
		gid = (gid_t)strtoul(g, NULL, 10);
	}
	err = stack_shm__new(&t->stk_shm, uid, gid);
	if (err)
		log__error("cannot create the stack area in /dev/shm: %s", strerror(-err));
	else if (handoff__allow(stack_shm__path(t->stk_shm), stack_shm__fd(t->stk_shm)))
		log__warn("the stack area cannot be handed to other users' processes: they will "
			  "record no stacks");
	return err;
}

int tracker__stacks_open(struct tracker *t)
{
	char name[32];
	int fd, err;
	/* how each event path takes stacks */
	const char *unwinder = t->pre.on ? "preload=libunwind,uprobe=dwfl" : "uprobe=dwfl";

	if (!t->o->stacks)
		return 0;
	snprintf(name, sizeof(name), "%d%s", t->sp.pid, STACKFILE_SUFFIX);
	fd = outdir__create(&t->out, name); /* logs its failure */
	if (fd < 0)
		return fd;
	if (manifest__set_str(&t->m.stacks_file, name) ||
	    manifest__set_str(&t->m.stacks_unwinder, unwinder)) {
		close(fd);
		return -ENOMEM;
	}
	err = stack_sink__open(&t->stk_sink, fd, t->m.artifact, unwinder);
	if (err) {
		close(fd);
		log__error("cannot write '%s/%s': %s", t->o->outdir, name, strerror(-err));
		return err;
	}
	t->sinks.stacks = t->stk_sink;
	if (t->stk_shm) {
		stack_shm__set_sink(t->stk_shm, t->stk_sink);
		shm_source__set_stacks(t->pre.shm, stack_shm__translate, t->stk_shm);
	}
	/* allocators served by uprobes (every one without preload; with it, the others) */
	err = ustack__new(&t->ustk, t->stk_sink);
	if (err)
		log__error("cannot set up the unwinder: %s", strerror(-err));
	return err;
}

/* Stacks the BPF side could not copy or fit in the ring (their records went without). */
static uint64_t tracker__ustack_lost(struct tracker *t)
{
	uint64_t lost[MT_USTACK_LOST_NR];

	return tracker__percpu_sums(t->fd.ustack_lost, MT_USTACK_LOST_NR,
				    lost);
}

/* After the last drain, before the manifest is written: closes the file, fills the keys. */
int tracker__stacks_finish(struct tracker *t)
{
	struct stack_sink_stats st = {0};
	struct stack_shm_stats sh;
	struct ustack_stats us;
	struct stat sb;
	int err;

	if (!t->stk_sink)
		return 0;
	stack_sink__stats(t->stk_sink, &st);
	ustack__stats(t->ustk, &us);
	log__debug(LOG_VERBOSE,
		   "uprobe stacks: %" PRIu64 " records, %" PRIu64 " ring bytes, %" PRIu64
		   " remembered, %" PRIu64 " walked with cached rules, %" PRIu64 " failed, %" PRIu64
		   " truncated, %.1f ms, %" PRIu64 " maps readings",
		   us.records, us.bytes, us.remembered, us.fast, us.failed, us.truncated,
		   us.unwind_ns / 1e6, us.maps_reads);
	err = stack_sink__close(t->stk_sink);
	t->stk_sink = t->sinks.stacks = NULL;
	stack_shm__stats(t->stk_shm, &sh);
	/* nothing reads the area any more: its name goes now (a detacher may outlive us) */
	if (t->pre.shm)
		shm_source__set_stacks(t->pre.shm, NULL, NULL);
	stack_shm__free(t->stk_shm);
	t->stk_shm = NULL;
	t->m.stacks_allocs = st.allocs;
	t->m.stacks_with_stack = st.with_stack;
	t->m.stacks_distinct = st.stacks;
	t->m.stacks_modules = st.modules;
	t->m.stacks_unwind_failed = sh.failed + us.failed + us.bad;
	t->m.stacks_truncated = us.truncated + sh.truncated;
	t->m.stacks_cut_by_uretprobe = sh.uretprobe;
	t->m.stacks_ring_bytes = us.bytes;
	t->m.stacks_unwind_ns = us.unwind_ns;
	t->m.stacks_not_copied = tracker__ustack_lost(t);
	t->m.stacks_area_full = sh.full;
	t->m.stacks_bad_ref = sh.bad;
	t->m.stacks_early = sh.early;
	/* the rest came from the BPF ring without a stack for a reason not counted above */
	t->m.stacks_uprobe = st.allocs - st.with_stack - sh.failed - sh.full - sh.bad - sh.early -
			     us.failed - us.bad - t->m.stacks_not_copied;
	if (t->m.stacks_uprobe > st.allocs)
		t->m.stacks_uprobe =
		    0; /* records still in the rings when memtrack stopped reading */
	if (!fstatat(t->out.fd, t->m.stacks_file, &sb, AT_SYMLINK_NOFOLLOW))
		t->m.stacks_file_bytes = (uint64_t)sb.st_size;
	if (err)
		log__error("cannot write '%s/%s': %s: the stacks file is cut", t->o->outdir,
			   t->m.stacks_file, strerror(-err));
	if (sh.failed)
		log__warn("%llu allocations have no stack: the unwinder failed or could not be "
			  "loaded (the interposer needs libunwind.so.8: apt install libunwind8)",
			  (unsigned long long)sh.failed);
	if (sh.full)
		log__warn("%llu allocations have no stack: the stack area was full",
			  (unsigned long long)sh.full);
	if (sh.uretprobe)
		log__warn("%llu allocations have a stack cut short by a return probe on a function "
			  "it went through (another tool's uretprobe, or glibc's dlopen stop on a "
			  "kernel without uprobe sessions): the frames above it are unknown",
			  (unsigned long long)sh.uretprobe);
	return err;
}

void tracker__stacks_destroy(struct tracker *t)
{
	ustack__free(t->ustk);
	t->ustk = NULL;
	stack_sink__close(t->stk_sink);
	t->stk_sink = t->sinks.stacks = NULL;
	stack_shm__free(t->stk_shm);
	t->stk_shm = NULL;
}
