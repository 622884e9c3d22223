// SPDX-License-Identifier: MIT
/*
 * Phase run: raw tracepoints for the tree and RSS; allocator uprobes per executable, when the
 * BPF side stops a tracked task at the exec of a binary not seen yet (control records:
 * tracker_control.c); the command, created held before exec, registered, then released; the
 * event loop.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf/proc.h"
#include "common/log.h"
#include "common/records.h"
#include "track/elf_syms.h"
#include "track/handoff.h"
#include "track/tracker_priv.h"

int tracker__fill_early(struct tracker *t)
{
	const int tp[EARLY_TP_NR] = {
	    [EARLY_FORK] = t->fd.on_fork,
	    [EARLY_EXEC] = t->fd.on_exec,
	    [EARLY_EXIT] = t->fd.on_exit,
	    [EARLY_RSS_STAT] = t->fd.on_rss_stat,
	};

	t->early_ok = !early_links__fill(&t->early, tp, t->fd.preload_ctl);
	return manifest__set_str(&t->m.hook_links, !t->early_ok	      ? "after loading"
						   : t->early.adopted ? "taken from a finished run"
								      : "while loading");
}

int tracker__attach_tracepoints(struct tracker *t)
{
	/* the rmap backend's programs come with a load only (the cache serves no rmap run) */
	struct memtrack_bpf *s = t->rmap.backend == MT_RMAP_TRACEPOINT ? t->skel : NULL;
	struct {
		int prog;
		const char *tp;
		bool rmap_tp; /* an address program: serves the tracepoint rmap backend only */
	} tps[] = {
	    {t->fd.on_fork, "sched_process_fork", false},
	    {t->fd.on_exec, "sched_process_exec", false},
	    {t->fd.on_exit, "sched_process_exit", false},
	    {t->fd.on_rss_stat, "rss_stat", false},
	    {s ? bpf_program__fd(s->progs.mt_on_page_fault_user) : -1, "page_fault_user", true},
	    {s ? bpf_program__fd(s->progs.mt_on_sys_enter) : -1, "sys_enter", true},
	    {s ? bpf_program__fd(s->progs.mt_on_sys_exit) : -1, "sys_exit", true},
	    {s ? bpf_program__fd(s->progs.mt_on_page_fault_kernel) : -1, "page_fault_kernel", true},
	};
	_Static_assert(EARLY_TP_NR == 4, "the early links are the first four");
	_Static_assert(sizeof(tps) / sizeof(tps[0]) <= sizeof(t->tp_fds) / sizeof(t->tp_fds[0]),
		       "a link slot per tracepoint");

	for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++) {
		int fd;

		if (tps[i].rmap_tp && t->rmap.backend != MT_RMAP_TRACEPOINT)
			continue;
		if (i < EARLY_TP_NR && t->early_ok)
			continue;
		fd = tps[i].prog < 0 ? -EINVAL : bpf_raw_tracepoint_open(tps[i].tp, tps[i].prog);
		if (fd < 0) {
			int err = tps[i].prog < 0 ? fd : -errno;

			log__error("cannot attach to raw tracepoint '%s': %s", tps[i].tp,
				   strerror(-err));
			return err;
		}
		t->tp_fds[t->tp_nr++] = fd;
	}
	return 0;
}

/* After the load: attaches what root_prep found and marks the executable known, so its exec
 * does not stop. */
int tracker__attach_root(struct tracker *t)
{
	__u8 one = 1;
	int err;

	root_prep__join(&t->root);
	if (t->pre.autom && t->root.known) {
		unsigned kinds = libs__kinds(t->libs);

		if (kinds & PRELOAD_OTHER_ALLOCATORS)
			preload_setup__mark_probed(&t->pre, t->sp.pid, kinds, true);
		log__debug(LOG_VERBOSE, "root '%s': allocator kinds %#x", t->root.exe, kinds);
		if (preload_setup__root_needs_probes(&t->pre, t->root.exe, kinds) &&
		    !(kinds & PRELOAD_OTHER_ALLOCATORS) && preload_setup__root_setid(t->root.exe)) {
			/* set-id: whether its exec is secure (AT_SECURE: the loader then ignores
			 * LD_PRELOAD) is known once it is made: not known, it stops at its exec and
			 * is judged there like any other (`memtrack track -- su ...` as root: not
			 * secure, served by the interposer, no uprobe) */
			t->root.known = false;
		} else if (preload_setup__root_needs_probes(&t->pre, t->root.exe, kinds)) {
			preload_setup__mark_probed(&t->pre, t->sp.pid, kinds, true);
			/* nothing bound yet: libs__bind attaches; an executable defining malloc
			 * needs glibc's dlopen stop only (tracker__judge) */
			if (libs__exe_malloc(t->libs))
				libs__attach_glibc_dlopen(t->libs);
			else
				t->root_glibc = tracker__glibc_attach(t) >= 0;
		}
	}
	/* preload mode: a set-id root is judged at its exec like any other (whether that exec is
	 * secure is known only then: a secure one is lost, tracker__judge) */
	if (t->pre.on && !t->pre.autom && t->root.known &&
	    preload_setup__root_needs_probes(&t->pre, t->root.exe, libs__kinds(t->libs)) &&
	    preload_setup__root_setid(t->root.exe))
		t->root.known = false;
	err = tracker__set_shm_owner(t);
	if (!err) {
		err = libs__bind(t->libs, t->set); /* logs its own failures */
		if (err)
			return err;
		tracker__seen_publish(t);
		/* a 32-bit root is not known: its exec stops and counts (control_foreign_abi) */
		if (t->root.known && elf__native_abi(t->root.exe) != 0) {
			/* the root's file, and the file in the environment it inherits (proc.h,
			 * mt_known_key): memtrack's, with LD_PRELOAD set for the interposer */
			__u64 k = mt_known_key(t->root.key,
					       mt_env_mix(mt_env_value(getenv("LD_PRELOAD")),
							  mt_env_value(getenv("LD_LIBRARY_PATH"))));

			bpf_map_update_elem(t->fd.known_exe, &t->root.key, &one, BPF_ANY);
			bpf_map_update_elem(t->fd.known_exe, &k, &one, BPF_ANY);
		}
		if (t->pre.on)
			err = tracker__set_stop_all(t, true); /* each exec judged */
	}
	if (err)
		log__error("cannot set the exec stops' controls (BPF map stop_ctl): %s",
			   strerror(-err));
	return err;
}

/* The interposer's control points (served.bpf.c), uprobes on its file only: its
 * registration, its dlopen announcement (src/preload/preload_dl.c), its refusal. One
 * uprobe_multi link for all (one detach, ~25-40 ms, where perf uprobes cost ~90 ms each and
 * hold up the next run's attach meanwhile), made while loading (early_links.c) unless that
 * failed; else a perf uprobe each. */
int tracker__attach_served(struct tracker *t)
{
	uint64_t offs[MT_PRELOAD_CTL_NR],
	    cookies[MT_PRELOAD_CTL_NR] = {MT_PRELOAD_CTL_SERVED, MT_PRELOAD_CTL_DLOPEN,
					  MT_PRELOAD_CTL_UNSERVED};
	struct elf_info info;
	int err = 0;

	_Static_assert(sizeof(t->ctl_links) / sizeof(t->ctl_links[0]) == MT_PRELOAD_CTL_NR,
		       "a perf link per control point");
	if (!t->pre.on || (t->early_ok && early_links__has_ctl(&t->early)))
		return 0;
	err = elf_info__load(t->pre.lib, &info);
	if (!err) {
		for (int i = 0; i < MT_PRELOAD_CTL_NR; i++)
			if (!(offs[i] = elf_info__find(&info, early_ctl_fns[i])))
				err = -ENOENT;
		elf_info__free(&info);
	}
	if (!err && t->multi) {
		t->ctl_fd = attach__multi_link(t->fd.preload_ctl, t->pre.lib, offs, cookies,
					       MT_PRELOAD_CTL_NR);
		err = t->ctl_fd < 0 ? t->ctl_fd : 0;
	}
	for (int i = 0; i < MT_PRELOAD_CTL_NR && !err && !t->multi; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = cookies[i]);

		t->ctl_links[i] =
		    bpf_program__attach_uprobe_opts(t->skel->progs.mt_preload_ctl_perf, -1,
						    t->pre.lib, offs[i], &uo); /* no cache */
		if (!t->ctl_links[i])
			err = -errno;
	}
	if (err)
		log__error("cannot attach to the interposer '%s': %s. Use --alloc-hooks uprobe or "
			   "preload",
			   t->pre.lib, strerror(-err));
	else if (manifest__set_str(&t->m.control_link, "after loading"))
		err = -ENOMEM;
	if (!err)
		early_links__publish(shm_source__ctl_live(t->pre.shm));
	return err;
}

_Static_assert(MT_SHM_PROC_FAMILIES == MT_SERVED_FAMILIES && MT_SHM_PROC_LIBC == MT_SERVED_LIBC,
	       "the BPF side's served bits are the interposer's flags");

/* One registration of a served image made while the control link was not live: marked in
 * the procs map unless its process exec'd since (mt_mark_proc, served.bpf.c). */
static void tracker__mark_served(void *ctx, int32_t pid, uint64_t ts, uint32_t flags)
{
	struct tracker *t = ctx;
	int m = tracker__mark_proc(t, pid, ts, MT_MARK_SERVED_AS(flags & MT_SHM_PROC_FAMILIES));

	if (m < 0)
		log__warn("process %d: cannot mark it served by the interposer: %s", pid,
			  strerror(-m));
	else
		t->ctl_marked += (uint32_t)m;
}

int tracker__ctl_ready(struct tracker *t)
{
	uint32_t n;
	int err;

	if (!t->pre.on || t->ctl_ready)
		return 0;
	t->ctl_ready = true; /* once: a failure below is not retried */
	if (t->early_ok && early_links__has_ctl(&t->early)) {
		err = early_links__ctl_wait(&t->early);
		log__debug(LOG_VERBOSE, "%7.2f ms the interposer's control link %s",
			   ((double)t->early.ctl_end_ns - (double)t->t_start) / 1e6,
			   err ? "failed" : t->early.ctl_adopted ? "taken from a finished run" : "made");
		if (!err && manifest__set_str(&t->m.control_link, t->early.ctl_adopted
									? "taken from a finished run"
									: "while loading"))
			log__warn("out of memory");
		if (err && (err = tracker__attach_served(t))) {
			/* logged: the interposers waiting for it go on (no dlopen stop) */
			early_links__publish(shm_source__ctl_live(t->pre.shm));
			return err;
		}
	}
	/* Live: a served call traps from now on. The registrations of those that may not have
	 * trapped were written before ctl_live was set (preload_ctl.c): all listed now. Only the
	 * uprobes with MT_SPEC_PL consult the mark, and they go in after this (libs' gate). */
	n = shm_source__each_served(t->pre.shm, tracker__mark_served, t);
	log__debug(LOG_VERBOSE, "%u served registrations scanned, %u processes marked served", n,
		   t->ctl_marked);
	return 0;
}

/* libs' gate (libs__set_pl_gate): before the first uprobe that skips served processes */
int tracker__pl_gate(void *ctx)
{
	return tracker__ctl_ready(ctx);
}

int tracker__register_root(struct tracker *t)
{
	struct mt_proc zero = {.no_stop = t->root.known, .glibc_need = t->root_glibc};
	__u32 pid = t->sp.pid;
	int err = 0;

	/* the programs number processes as memtrack's pid namespace does, as pid here */
	err = pidns__set(&t->pidns, t->fd.pidns, t->fd.pidns_probe);
	if (err)
		return err;
	/* a zeroed entry registers it (bpf/proc.h: the layout both sides build); its exec was
	 * judged here (tracker__attach_root) */
	if (bpf_map_update_elem(t->fd.procs, &pid, &zero, BPF_ANY))
		err = -errno;
	t->glibc_marks += t->root_glibc;
	if (err)
		log__error("cannot register process %d: %s", pid, strerror(-err));
	return err;
}

int tracker__setup_loop(struct tracker *t)
{
	struct event_source *src;
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t sigs;
	int err;

	consumer__init(&t->cons);
	err = ringbuf_source__new(&src, t->fd.events);
	if (!err)
		err = consumer__add_source(&t->cons, src);
	if (err)
		return err;
	t->sinks.acct = t->acct;
	err = record_sinks__add(&t->sinks, &t->cons);
	if (err)
		return err;
	consumer__set_control(&t->cons, tracker__control_record, t);
	if (t->ustk)
		consumer__set_stack(&t->cons, ustack__record, t->ustk);
	if (t->pre.on) {
		shm_source__set_ring(t->pre.shm, src);
		err = consumer__add_source(&t->cons, shm_source__src(t->pre.shm));
		if (err)
			return err;
		t->pre_added = true;
		shm_source__order(t->pre.shm, &t->cons);
		err = shm_source__start(t->pre.shm);
		if (err)
			return err;
		err = handoff__start(t->fd.procs);
		if (err)
			return err;
	}

	/* Signals for memtrack are forwarded to the command; read them from a signalfd. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	/* pid 1 of a pid namespace: the tree's orphans become our children (tracker__reap) */
	if (getpid() == 1)
		sigaddset(&sigs, SIGCHLD);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	t->sigfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
	t->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (t->sigfd < 0 || t->epfd < 0)
		return -errno;
	ev.data.u32 = 0;
	if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, src->fd, &ev))
		return -errno;
	ev.data.u32 = 1;
	if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->sigfd, &ev))
		return -errno;
	ev.data.u32 = 3; /* the interposer's doorbell: the drain below reads it */
	if (t->pre_added && epoll_ctl(t->epfd, EPOLL_CTL_ADD, shm_source__src(t->pre.shm)->fd, &ev))
		return -errno;
	return 0;
}

void tracker__add_pidfd(struct tracker *t)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 2};

	epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->sp.pidfd, &ev);
}

/*
 * True while any process of the tree is alive (the BPF side adds each at its fork and removes it
 * at its exit). A look for the map's first key is no snapshot: it can pass the bucket a child
 * is added to, and reach its parent's after the parent exited, and find nothing while the child
 * runs. Such a miss needs an insertion during the look, so the forks counted after their
 * insertion (stop_ctl[16]) are read before it and those counted before (stop_ctl[15]) after
 * it: apart by no more than when the command was released (t->fork_drift: a kept load's
 * counts, zeroed one by one while a fork ran, may differ for good), no insertion overlapped it,
 * and an empty look is the truth. Otherwise the next round looks again: no loop here, which
 * would spin if the counts ever drifted. Until 8 December 2026 a fork-and-exit chain (a
 * daemon's double fork, drawn out) ended the run under it, 5 runs in 13 under qemu, its last
 * processes untracked and the run called cut short by a signal.
 */
#define TREE_EMPTY_BELIEVED_NS 1000000000ull /* empty looks in a row, counts apart: believed */

static bool tracker__tree_alive(struct tracker *t)
{
	__u64 added = tracker__ctl_count(t, 16);
	uint64_t now;
	__u32 key;

	if (!bpf_map_get_next_key(t->fd.procs, NULL, &key)) {
		t->empty_since = 0;
		return true;
	}
	if (errno != ENOENT)
		return true; /* cannot tell: the next round looks again */
	if (tracker__ctl_count(t, 15) - added == t->fork_drift)
		return false;
	/* A fork overlapped the look; or the drift changed after it was read (a fork of a
	 * killed run's process in flight then): empty looks for a second are believed, never a
	 * wait for ever (a chain's looks all overlapped by a fork for that long: not seen). */
	now = now_ns(CLOCK_MONOTONIC);
	if (!t->empty_since)
		t->empty_since = now;
	return now - t->empty_since < TREE_EMPTY_BELIEVED_NS;
}

/* Sends SIGCONT to every process of the tree (BPF's procs map). */
static void tracker__cont_all(struct tracker *t)
{
	int fd = t->fd.procs;
	__u32 key, next;

	for (int err = bpf_map_get_next_key(fd, NULL, &key); !err;
	     err = bpf_map_get_next_key(fd, &key, &next), key = next)
		kill((pid_t)key, SIGCONT);
}

/*
 * The ring's records can no longer be read (consumer read_err: its data area could not be
 * mapped further). Whatever is past that point is lost, and a task stopped at an exec or a
 * dlopen would wait forever for an answer its record cannot bring: end the stops, and for a
 * second resume every process of the tree (a task can stop itself between our reading the
 * switch and our SIGCONT; SIGCONT to a running process does nothing). The run goes on
 * untracked by the ring, and ends incomplete (tracker__finish).
 */
static void tracker__ring_lost(struct tracker *t)
{
	uint64_t now = now_ns(CLOCK_MONOTONIC);

	if (!t->ring_lost_ns) {
		t->ring_lost_ns = now;
		log__error("cannot read the BPF ring's records any further: %s: the records past "
			   "them are lost and the artifact will be incomplete; the command runs on. "
			   "If memory is short (a memory cgroup's limit, vm.max_map_count), raise it "
			   "or use a smaller --ring-size",
			   strerror(-t->cons.read_err));
		tracker__set_stops(t, false);
		epoll_ctl(t->epfd, EPOLL_CTL_DEL, t->fd.events, NULL);
	}
	if (now - t->ring_lost_ns < 1000000000ull)
		tracker__cont_all(t);
}

/*
 * As pid 1 of a pid namespace (a container's entry point), memtrack inherits the orphans of the
 * tree, as an init does: they are reaped here, at each SIGCHLD, or they would stay zombies
 * until memtrack exits. Its own children are left to their owners: the command (the loop's
 * pidfd) and the watchdog. Orphans may hang under any of our threads: each one's list is read.
 */
static void tracker__reap(struct tracker *t)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char path[300];
		FILE *f;
		int pid;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/children", de->d_name);
		f = fopen(path, "re");
		while (f && fscanf(f, "%d", &pid) == 1)
			if (pid != t->sp.pid && pid != t->wd.pid)
				waitpid(pid, NULL, WNOHANG);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
}

/*
 * How long the loop sleeps before the next drain, ms, from what the last one delivered: 0 while
 * records pour in (4096 and more: the rings fill), 1 while they come, and after rounds with
 * none 1, 2, 4, 8, then 10 ms. 10 is the bound on how long a record waits: BPF records are
 * submitted without a wakeup below 256 KiB pending, and the interposer rings its doorbell only
 * from half a ring. Starting at 1 rather than 10: a short program's records (ls -la of a big
 * folder, ~6,000 in ~11 ms) were all drained after its exit, then encoded and compressed on
 * the path from its exit to memtrack's.
 */
static int tracker__poll_ms(int delivered, unsigned *idle_rounds)
{
	if (delivered >= 4096)
		return 0;
	if (delivered > 0)
		*idle_rounds = 0;
	if (*idle_rounds >= 4)
		return 10;
	return 1 << (*idle_rounds)++;
}

/*
 * Runs until the root process has exited and, like strace -f, until every process of the tree
 * has: a child the root left behind is still part of the run. A signal received after the root
 * exited stops the wait (the descendants run on untracked). Returns the root's wait status.
 */
int tracker__loop(struct tracker *t)
{
	int root_status = -1, delivered = 0;
	unsigned idle_rounds = 0;

	for (;;) {
		struct epoll_event evs[4];
		int n = epoll_wait(t->epfd, evs, 4, tracker__poll_ms(delivered, &idle_rounds));

		if (n < 0 && errno != EINTR)
			return -errno;
		delivered = consumer__drain(&t->cons);
		/* a worker compresses what the tree wrote so far while it runs on */
		artifact_writer__cut(t->writer);
		stop_relay__tick(&t->relay);
		tracker__glibc_tick(t);
		/* the control link made (or failed) on its thread: scan, or attach it otherwise */
		if (!t->ctl_ready && t->pre.on && !early_links__ctl_pending(&t->early))
			tracker__ctl_ready(t);
		if (t->cons.read_err)
			tracker__ring_lost(t);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u32 == 1) {
				struct signalfd_siginfo si;

				while (read(t->sigfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo == SIGCHLD) {
						tracker__reap(t);
						continue;
					}
					if (root_status >= 0)
						return root_status;
					kill(t->sp.pid, (int)si.ssi_signo);
				}
			} else if (evs[i].data.u32 == 2 && root_status < 0) {
				int status;

				if (waitpid(t->sp.pid, &status, WNOHANG) == t->sp.pid) {
					root_status = status;
					epoll_ctl(t->epfd, EPOLL_CTL_DEL, t->sp.pidfd, NULL);
				}
			}
		}
		if (root_status >= 0 && !tracker__tree_alive(t))
			return root_status;
	}
}
