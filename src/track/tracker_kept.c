// SPDX-License-Identifier: MIT
/*
 * The load kept between runs (prog_cache.h), the tracker's side: the key (everything a load
 * depends on), a fresh load pinned into the run's slot, a kept load taken (its maps emptied),
 * and the descriptors the run uses, by the object's names, from either.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "memtrack.obj_id.h" /* MEMTRACK_OBJ_ID: the BPF object's sha256, 64 bits (Makefile) */
#include "bpf/proc.h"
#include "common/log.h"
#include "track/attach.h"
#include "track/tracker_priv.h"

static int tracker__kept_no_memory(void)
{
	log__error("out of memory");
	return -ENOMEM;
}

/* The allocator programs of a kept load, when an earlier run pinned them: 0 or -ENOENT. */
int tracker__alloc_take_kept(struct tracker *t)
{
	int e = prog_cache__fd(&t->pc, "mt_alloc_entry_multi");
	int r = prog_cache__fd(&t->pc, "mt_alloc_return_multi"), s;

	if (!t->pc.hit || e < 0 || r < 0)
		return -ENOENT;
	t->alloc_entry = (struct attach_prog){.fd = e};
	t->alloc_ret = (struct attach_prog){.fd = r};
	/* kept only by a load that had sessions; one that had none is used as it is */
	s = tracker__session(t) ? prog_cache__fd(&t->pc, "mt_alloc_session") : -1;
	t->alloc_session = (struct attach_prog){.fd = s >= 0 ? s : -1};
	return 0;
}

/* Pins every loaded program of s into the run's cache slot (if any): later runs take them
 * instead of loading them. A failure only costs those runs the load. */
void tracker__cache_programs(struct tracker *t, struct memtrack_bpf *s)
{
	struct bpf_program *p;

	bpf_object__for_each_program(p, s->obj)
	{
		int err;

		if (bpf_program__fd(p) < 0)
			continue;
		err = prog_cache__store(&t->pc, bpf_program__name(p), bpf_program__fd(p), true);
		if (err)
			log__debug(LOG_VERBOSE, "program cache: cannot keep '%s': %s",
				   bpf_program__name(p), strerror(-err));
	}
}

/* The descriptors the run uses (struct tracker_fds), by the object's names. */
static const struct {
	const char *name;
	size_t off;
	bool prog;
	bool needed; /* else -1 when not loaded */
} tracker_fd_names[] = {
    {"events", offsetof(struct tracker_fds, events), false, true},
    {"procs", offsetof(struct tracker_fds, procs), false, true},
    {"stop_ctl", offsetof(struct tracker_fds, stop_ctl), false, true},
    {"known_exe", offsetof(struct tracker_fds, known_exe), false, true},
    {"ustack_lost", offsetof(struct tracker_fds, ustack_lost), false, true},
    {"global", offsetof(struct tracker_fds, global), false, true},
    {"drops", offsetof(struct tracker_fds, drops), false, true},
    {"pidns", offsetof(struct tracker_fds, pidns), false, true},
    {"mt_on_fork", offsetof(struct tracker_fds, on_fork), true, true},
    {"mt_on_exec", offsetof(struct tracker_fds, on_exec), true, true},
    {"mt_on_exit", offsetof(struct tracker_fds, on_exit), true, true},
    {"mt_on_rss_stat", offsetof(struct tracker_fds, on_rss_stat), true, true},
    {"mt_preload_ctl_multi", offsetof(struct tracker_fds, preload_ctl), true, false},
    {"mt_mark_proc", offsetof(struct tracker_fds, mark_proc), true, false},
    {"mt_pidns_probe", offsetof(struct tracker_fds, pidns_probe), true, true},
};

/* Fills t->fd from the skeleton (a load) or the cache slot (a kept load). 0 or -ENOENT (and
 * *missing: the name not found). */
int tracker__fds_take(struct tracker *t, const char **missing)
{
	for (size_t i = 0; i < sizeof(tracker_fd_names) / sizeof(tracker_fd_names[0]); i++) {
		const char *name = tracker_fd_names[i].name;
		int fd;

		if (!t->skel) {
			fd = prog_cache__fd(&t->pc, name);
		} else if (tracker_fd_names[i].prog) {
			struct bpf_program *p =
			    bpf_object__find_program_by_name(t->skel->obj, name);

			fd = p ? bpf_program__fd(p) : -1;
		} else {
			fd = bpf_object__find_map_fd_by_name(t->skel->obj, name);
		}
		if (fd < 0 && tracker_fd_names[i].needed) {
			*missing = name;
			return -ENOENT;
		}
		*(int *)((char *)&t->fd + tracker_fd_names[i].off) = fd < 0 ? -1 : fd;
	}
	/* a zeroed entry registers a process (bpf/proc.h: the layout both sides build) */
	if (t->skel && bpf_map__value_size(t->skel->maps.procs) != sizeof(struct mt_proc))
		return -EINVAL;
	return 0;
}

/*
 * The program cache (prog_cache.h): its key is everything a load depends on, so that a slot
 * only ever holds one exact load. uprobe_multi kernels and runs without rmap only: perf
 * uprobes and the rmap backends attach through libbpf's program objects, which a kept load
 * does not have.
 */
/* The kept programs' key: the object (its identity, computed when it was built), its
 * read-only values and what else the load depends on. */
static uint64_t tracker__cache_key(struct tracker *t, bool multi)
{
	const uint64_t obj = MEMTRACK_OBJ_ID;
	uint64_t h = PROG_CACHE_SEED;
	struct {
		uint64_t ring_bytes;
		uint8_t multi, preload, eager, session, pad[4];
	} cfg = {0};

	cfg.ring_bytes = t->o->ring_bytes;
	cfg.multi = multi;
	cfg.preload = t->pre.on;
	cfg.eager = tracker__alloc_eager(t);
	/* loaded with the others when eager: a load with it is another load */
	cfg.session = cfg.eager && multi && tracker__session(t);
	h = prog_cache__hash(h, &obj, sizeof(obj));
	h = prog_cache__hash(h, &t->ro, sizeof(t->ro));
	return prog_cache__hash(h, &cfg, sizeof(cfg));
}

void tracker__cache_open(struct tracker *t)
{
	struct stat st;

	t->pc.dir_fd = t->pc.owner_fd = t->pc.linger_fd = -1;
	/* The cache's root is made only where uprobe_multi links are (below), in a BPF file
	 * system, which lives no longer than this boot: when it is there, the kernel has them,
	 * and no program needs loading to ask (~0.3 ms a run). */
	t->multi = (!stat(prog_cache__root(), &st) && S_ISDIR(st.st_mode) &&
		    (st.st_mode & 0777) == 0700 && st.st_uid == geteuid()) ||
		   attach__probe_uprobe_multi();
	if (!t->multi || t->o->rmap) {
		snprintf(t->pc.state, sizeof(t->pc.state), "loaded (no cache: %s)",
			 t->o->rmap ? "rmap mode" : "this kernel has no uprobe_multi links");
	} else {
		tracker__rodata(t, &t->ro, MT_RMAP_OFF);
		t->cache_key = tracker__cache_key(t, t->multi);
		prog_cache__open(&t->pc, t->cache_key);
	}
	if (!t->pc.hit && getpid() != 1)
		tracker__ring_start(t); /* pid 1: after the command's fork (tracker.c) */
}

/* After a fresh load: every map and program into the run's slot, then sealed. A failure
 * leaves the slot empty and costs the next run a load, nothing else. */
void tracker__cache_store(struct tracker *t)
{
	struct bpf_map *m;
	int err = 0;

	if (t->pc.dir_fd < 0)
		return;
	bpf_object__for_each_map(m, t->skel->obj)
	{
		if (bpf_map__fd(m) < 0)
			continue;
		err = prog_cache__store(&t->pc, bpf_map__name(m), bpf_map__fd(m), false);
		if (err)
			break;
	}
	if (!err) {
		tracker__cache_programs(t, t->skel);
		err = prog_cache__seal(&t->pc);
	}
	if (err) {
		log__debug(LOG_VERBOSE, "program cache: cannot keep this load: %s", strerror(-err));
		prog_cache__discard(&t->pc);
		prog_cache__close(&t->pc);
		snprintf(t->pc.state, sizeof(t->pc.state), "loaded (no cache: cannot pin: %s)",
			 strerror(-err));
	}
}

/* A load kept by an earlier run: its maps emptied, its descriptors taken. 0 or -errno (the
 * slot is then given up and the run loads). */
int tracker__load_kept(struct tracker *t)
{
	const char *missing = "";
	int err = tracker__fds_take(t, &missing);

	if (!err) /* only then: a slot given up is emptied below, not reset */
		err = prog_cache__reset(&t->pc);
	if (!err && tracker__alloc_eager(t))
		err = tracker__alloc_take_kept(t);
	if (!err) {
		t->loaded = true;
		if (manifest__set_str(&t->m.btf_source, "kept") ||
		    manifest__set_str(&t->m.alloc_programs,
				      t->alloc_entry.fd >= 0 ? "at load" : "not loaded") ||
		    manifest__set_str(&t->m.bpf_programs, t->pc.state))
			return tracker__kept_no_memory();
		return 0;
	}
	log__warn("the kept BPF programs in '%s' cannot be used (%s%s%s): loading them", t->pc.path,
		  strerror(-err), *missing ? ": no " : "", missing);
	prog_cache__discard(&t->pc);
	prog_cache__close(&t->pc);
	snprintf(t->pc.state, sizeof(t->pc.state), "loaded (no cache: the slot was unusable)");
	memset(&t->fd, 0, sizeof(t->fd));
	t->alloc_entry.fd = t->alloc_ret.fd = t->alloc_session.fd = -1;
	return 1;
}
