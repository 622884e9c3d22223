// SPDX-License-Identifier: MIT
/*
 * The run, phase by phase (each timed into the manifest):
 *   load    open the skeleton, size the ring, pick uprobe_multi or perf uprobes, verify
 *   attach  raw tracepoints for the tree and RSS; allocator uprobes come per executable, when
 *           the BPF side stops a tracked task at the exec of a binary not seen yet
 *   run     the command, created held before exec, registered, then released
 *   drain   every record still in the ring after the root exits
 *   detach  links and maps closed after the artifact and manifest are complete
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "memtrack.skel.h"
#include "artifact/artifact.h"
#include "artifact/manifest.h"
#include "artifact/outdir.h"
#include "common/log.h"
#include "common/records.h"
#include "common/shquote.h"
#include "acct/acct.h"
#include "track/btf_cache.h"
#include "track/consumer.h"
#include "track/detacher.h"
#include "track/libs.h"
#include "track/preload_setup.h"
#include "track/root_prep.h"
#include "track/rmap_backend.h"
#include "track/sinks.h"
#include "track/spawn.h"
#include "track/tracker.h"
#include "track/watchdog.h"

struct tracker {
	const struct tracker_opts *o;
	struct memtrack_bpf *skel;
	struct bpf_link *tp_links[8];
	struct bpf_link *rmap_links[RMAP_FN_NR + 1]; /* fentry rmap backend */
	struct rmap_choice rmap;
	struct btf_cache btf;
	struct attach_set *set;
	struct libs *libs;
	struct artifact_writer *writer;
	struct heap_acct *acct;
	struct consumer cons;
	struct record_sinks sinks; /* the writer and acct above, behind the consumer */
	struct spawn sp;
	struct watchdog wd; /* resumes the stopped tasks if we die (watchdog.c) */
	struct manifest m;
	struct outdir out; /* -o DIR: the artifact and the manifest are created in it */
	char manifest_name[32];
	int epfd, sigfd;
	uint64_t ctl_stops;
	bool handed_off; /* a detacher holds every BPF fd and our address space (detach below) */
	struct root_prep root; /* the root executable, inspected while the programs load */
	struct preload_setup pre; /* --alloc-hooks preload: the interposer's source */
	bool pre_added; /* its source belongs to the consumer (destroyed with it) */
};

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static int libbpf_quiet(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	if (lvl == LIBBPF_DEBUG && log__level < LOG_TRACE)
		return 0;
	if (lvl == LIBBPF_INFO && log__level < LOG_DEBUG)
		return 0;
	if (lvl == LIBBPF_WARN && log__level < LOG_VERBOSE)
		return 0; /* load failures are explained by our own message */
	return vfprintf(stderr, fmt, ap);
}

static void tracker__detach(struct tracker *t);
static void tracker__detach_background(struct tracker *t);

/* A tracked task stopped itself at the exec of an executable not inspected yet, or at the
 * return of a dlopen; or a process' name (after its Fork or Exec record, which the accounting
 * has seen: the consumer flushes before a control record). */
static int control_exec_stopped(void *ctx, const struct mt_event *ev)
{
	struct tracker *t = ctx;
	__u8 one = 1;
	int err;

	uint64_t t0 = now_ns(CLOCK_MONOTONIC);

	if (ev->type == MT_EV_CTL_COMM) {
		char comm[16];

		_Static_assert(offsetof(struct mt_event, size) ==
				       offsetof(struct mt_event, addr) + 8,
			       "a name spans addr and size");
		memcpy(comm, (const char *)ev + offsetof(struct mt_event, addr), sizeof(comm));
		heap_acct__set_comm(t->acct, ev->pid, comm);
		return 0;
	}
	t->ctl_stops++;
	if (ev->type == MT_EV_CTL_DLOPEN_STOPPED) {
		err = libs__inspect_maps(t->libs, ev->pid);
		if (err < 0 && err != -ENOENT && err != -ESRCH)
			log__warn("process %d: cannot inspect its mappings after dlopen: %s",
				  ev->pid, strerror(-err));
		kill(ev->pid, SIGCONT);
		log__debug(LOG_VERBOSE, "dlopen stop of %d handled in %.2f ms", ev->pid,
			   (now_ns(CLOCK_MONOTONIC) - t0) / 1e6);
		return 0;
	}
	err = libs__inspect_pid(t->libs, ev->pid);
	if (err < 0 && err != -ENOENT && err != -ESRCH)
		log__warn("process %d: cannot inspect its libraries: %s", ev->pid, strerror(-err));
	bpf_map_update_elem(bpf_map__fd(t->skel->maps.known_exe), &ev->addr, &one, BPF_ANY);
	kill(ev->pid, SIGCONT);
	log__debug(LOG_VERBOSE, "exec stop of %d: %.2f ms after the exec, handled in %.2f ms", ev->pid,
		   (t0 - ev->ts) / 1e6, (now_ns(CLOCK_MONOTONIC) - t0) / 1e6);
	return 0;
}

/* Allows or ends the BPF side's stops (stop_ctl, maps.bpf.h). Allowed only once the watchdog
 * holds the ring, so that no stop outlives us unanswered; ended before the last drain, which
 * answers those still in the ring. */
static int tracker__set_stops(struct tracker *t, bool on)
{
	__u32 zero = 0;
	__u64 v = on;

	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.stop_ctl), &zero, &v, BPF_ANY))
		return -errno;
	return 0;
}

static int tracker__explain_load_error(int err)
{
	if (err == -EPERM || (err == -EACCES && geteuid() != 0))
		log__error("cannot load BPF programs: %s. Run as root, or grant the binary its "
			   "capabilities: sudo setcap cap_bpf,cap_perfmon+ep $(command -v memtrack)",
			   strerror(-err));
	else
		log__error("cannot load BPF programs: %s (run with -vv for the verifier log)",
			   strerror(-err));
	return MT_EXIT_FAILED;
}

static void tracker__unload(struct tracker *t)
{
	for (int i = 0; i <= RMAP_FN_NR; i++) {
		bpf_link__destroy(t->rmap_links[i]);
		t->rmap_links[i] = NULL;
	}
	memtrack_bpf__destroy(t->skel);
	t->skel = NULL;
}

/*
 * The possible CPU count the programs are loaded for (per-CPU sums walk that many).
 * MEMTRACK_TEST_NR_CPUS raises it, never lowers it (a sum over fewer CPUs than exist would be
 * wrong; past the real ones the walk stops at the first CPU the kernel does not have): the
 * suite loads as a 512-CPU machine would, to keep load time independent of the CPU count.
 */
static int tracker__nr_cpus(void)
{
	const char *env = getenv("MEMTRACK_TEST_NR_CPUS");
	int n = libbpf_num_possible_cpus(), want = env ? atoi(env) : 0;

	return want > n ? want : n;
}

/* Opens the skeleton against the BTF in t->btf, configures and loads it for t->rmap's backend.
 * Returns 0 or -errno. */
static int tracker__open_load(struct tracker *t, bool multi)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = t->btf.path[0] ? t->btf.path : NULL);
	int backend = t->o->rmap ? t->rmap.backend : MT_RMAP_OFF;
	struct memtrack_bpf *s;
	int err;

	s = t->skel = memtrack_bpf__open_opts(&oo);
	if (!s)
		return -errno;
	s->rodata->mt_nr_cpus = tracker__nr_cpus();
	s->rodata->mt_page_shift = __builtin_ctz(sysconf(_SC_PAGESIZE));
	s->rodata->mt_rss_step = t->o->rss_step;
	s->rodata->mt_stop_on_exec = true;
	s->rodata->mt_rmap = backend;
	rmap_backend__set_autoload(s, backend, &t->rmap);
	bpf_map__set_max_entries(s->maps.events, t->o->ring_bytes);
	/* wake the consumer at 256 KiB pending, or at a quarter of a smaller ring: the ring must
	 * be able to hold the threshold with room to spare while the consumer wakes up */
	s->rodata->mt_wakeup_bytes = t->o->ring_bytes / 4 < 256 * 1024 ? t->o->ring_bytes / 4
								       : 256 * 1024;
	bpf_program__set_autoload(s->progs.mt_alloc_entry_multi, multi);
	bpf_program__set_autoload(s->progs.mt_alloc_return_multi, multi);
	bpf_program__set_autoload(s->progs.mt_alloc_entry_perf, !multi);
	bpf_program__set_autoload(s->progs.mt_alloc_return_perf, !multi);
	if (multi) {
		bpf_program__set_expected_attach_type(s->progs.mt_alloc_entry_multi,
						      attach__uprobe_multi_type());
		bpf_program__set_expected_attach_type(s->progs.mt_alloc_return_multi,
						      attach__uprobe_multi_type());
	}
	err = memtrack_bpf__load(s);
	/* attached at load, so that a kernel refusing them leaves time to reload without them */
	if (!err && backend == MT_RMAP_FENTRY)
		err = rmap_backend__attach(s, &t->rmap, t->rmap_links);
	if (err)
		tracker__unload(t);
	return err;
}

/* Loads with the chosen rmap backend; when the fentry programs do not load or attach (the probe
 * load passed: verifier, attach), falls back to the tracepoint backend and says why. */
static int tracker__load_backend(struct tracker *t, bool multi)
{
	int err = tracker__open_load(t, multi);

	if (err && t->o->rmap && t->rmap.backend == MT_RMAP_FENTRY) {
		snprintf(t->rmap.reason, sizeof(t->rmap.reason),
			 "fentry programs cannot be loaded or attached (%s): tracepoint backend",
			 strerror(-err));
		log__warn("%s", t->rmap.reason);
		t->rmap.backend = MT_RMAP_TRACEPOINT;
		t->rmap.progs = 0;
		err = tracker__open_load(t, multi);
	}
	return err;
}

/* One load against t->btf's current path, for btf_cache__load. */
struct load_try {
	struct tracker *t;
	struct rmap_choice chosen;
	bool multi;
};

static int tracker__load_try(void *ctx)
{
	struct load_try *l = ctx;

	l->t->rmap = l->chosen; /* an earlier try's fentry fallback may have been the BTF's fault */
	return tracker__load_backend(l->t, l->multi);
}

static int tracker__load(struct tracker *t)
{
	struct load_try try = {.t = t};
	const void *obj;
	size_t obj_sz;
	bool multi;
	int err;

	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		log__error("cannot open '/sys/kernel/btf/vmlinux': %s. memtrack needs a kernel "
			   "built with CONFIG_DEBUG_INFO_BTF=y (Linux 5.15 or later)",
			   strerror(errno));
		return MT_EXIT_FAILED;
	}
	libbpf_set_print(libbpf_quiet);
	if (t->o->rmap && rmap_backend__select(&t->rmap, getenv("MEMTRACK_RMAP_BACKEND")))
		return MT_EXIT_FAILED;
	try.chosen = t->rmap;
	try.multi = multi = attach__probe_uprobe_multi();
	t->m.uprobe_mechanism = multi ? "uprobe_multi" : "perf_uprobe";
	t->m.tracepoint_mechanism = "raw_tracepoint";
	/* CO-RE against a minimal BTF for this kernel: no parse of the whole vmlinux BTF. */
	obj = memtrack_bpf__elf_bytes(&obj_sz);
	btf_cache__prepare(&t->btf, obj, obj_sz);
	err = btf_cache__load(&t->btf, tracker__load_try, &try);
	t->m.btf_source = t->btf.source;
	if (err)
		return tracker__explain_load_error(err);
	if (t->o->rmap) {
		t->m.rmap_backend = t->rmap.backend == MT_RMAP_FENTRY ? "fentry" : "tracepoint";
		t->m.rmap_reason = strdup(t->rmap.reason);
	}
	err = attach_set__new(&t->set, multi ? ATTACH_UPROBE_MULTI : ATTACH_PERF_UPROBE,
			      multi ? t->skel->progs.mt_alloc_entry_multi
				    : t->skel->progs.mt_alloc_entry_perf,
			      multi ? t->skel->progs.mt_alloc_return_multi
				    : t->skel->progs.mt_alloc_return_perf);
	if (err) { /* t->libs exists already (tracker__run): libs__bind attaches through set */
		log__error("cannot set up: %s", strerror(-err));
		return MT_EXIT_FAILED;
	}
	return 0;
}

static int tracker__attach_tracepoints(struct tracker *t)
{
	struct {
		struct bpf_program *prog;
		const char *tp;
	} tps[] = {
		{t->skel->progs.mt_on_fork, "sched_process_fork"},
		{t->skel->progs.mt_on_exec, "sched_process_exec"},
		{t->skel->progs.mt_on_exit, "sched_process_exit"},
		{t->skel->progs.mt_on_rss_stat, "rss_stat"},
		{t->skel->progs.mt_on_page_fault_user, "page_fault_user"},
		{t->skel->progs.mt_on_sys_enter, "sys_enter"},
		{t->skel->progs.mt_on_sys_exit, "sys_exit"},
		{t->skel->progs.mt_on_page_fault_kernel, "page_fault_kernel"},
	};

	for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++) {
		if (i >= 4 && t->rmap.backend != MT_RMAP_TRACEPOINT)
			break; /* the address programs serve the tracepoint backend only */
		t->tp_links[i] = bpf_program__attach_raw_tracepoint(tps[i].prog, tps[i].tp);
		if (!t->tp_links[i]) {
			log__error("cannot attach to raw tracepoint '%s': %s", tps[i].tp,
				   strerror(errno));
			return MT_EXIT_FAILED;
		}
	}
	return 0;
}

static int tracker__setup_loop(struct tracker *t)
{
	struct event_source *src;
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t sigs;
	int err;

	consumer__init(&t->cons);
	err = ringbuf_source__new(&src, bpf_map__fd(t->skel->maps.events));
	if (!err)
		err = consumer__add_source(&t->cons, src);
	if (err)
		return err;
	t->sinks.acct = t->acct;
	err = record_sinks__add(&t->sinks, &t->cons);
	if (err)
		return err;
	consumer__set_control(&t->cons, control_exec_stopped, t);
	if (t->pre.on) {
		shm_source__set_ring(t->pre.shm, src);
		err = consumer__add_source(&t->cons, shm_source__src(t->pre.shm));
		if (err)
			return err;
		t->pre_added = true;
		shm_source__order(t->pre.shm, &t->cons);
	}

	/* Signals for memtrack are forwarded to the command; read them from a signalfd. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
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
	return 0;
}

static void tracker__add_pidfd(struct tracker *t)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 2};

	epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->sp.pidfd, &ev);
}

/* True while any process of the tree is alive (the BPF side removes each at its exit). */
static bool tracker__tree_alive(struct tracker *t)
{
	__u32 key;

	return bpf_map_get_next_key(bpf_map__fd(t->skel->maps.procs), NULL, &key) == 0;
}

/*
 * Runs until the root process has exited and, like strace -f, until every process of the tree
 * has: a child the root left behind is still part of the run. A signal received after the root
 * exited stops the wait (the descendants run on untracked). Returns the root's wait status.
 */
static int tracker__loop(struct tracker *t)
{
	int root_status = -1;

	for (;;) {
		struct epoll_event evs[4];
		/* Records are submitted without wakeup below 256 KiB pending (a quarter of a
		 * smaller ring): poll every 10 ms so the ring never holds more than that long's
		 * worth. */
		int n = epoll_wait(t->epfd, evs, 4,
				   t->pre_added ? shm_source__poll_ms(t->pre.shm) : 10);

		if (n < 0 && errno != EINTR)
			return -errno;
		consumer__drain(&t->cons);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u32 == 1) {
				struct signalfd_siginfo si;

				while (read(t->sigfd, &si, sizeof(si)) == sizeof(si)) {
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

/*
 * When the wait ended with processes of the tree still running (a signal after the root
 * exited): records them for the manifest (pid, name) and stops tracking them, so that the last
 * drain ends (a process allocating nonstop would feed it forever) and no new child of theirs is
 * tracked. Rounds until the map is empty: a child forked while we delete is added once more.
 */
static int tracker__untrack_running(struct tracker *t)
{
	int fd = bpf_map__fd(t->skel->maps.procs);
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

static uint64_t tracker__read_drops(struct tracker *t, uint64_t *drops)
{
	int ncpu = libbpf_num_possible_cpus(), fd = bpf_map__fd(t->skel->maps.drops);
	uint64_t total = 0, *vals = calloc(ncpu, sizeof(*vals));

	for (__u32 r = 0; vals && r < MT_DROP_NR; r++) {
		drops[r] = 0;
		if (bpf_map_lookup_elem(fd, &r, vals))
			continue;
		for (int c = 0; c < ncpu; c++)
			drops[r] += vals[c];
		total += drops[r];
	}
	free(vals);
	return total;
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

static int tracker__status(int status)
{
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WIFEXITED(status) ? WEXITSTATUS(status) : MT_EXIT_FAILED;
}

static int tracker__finish(struct tracker *t, int status, uint64_t t_run0, uint64_t t_start)
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
	tracker__set_stops(t, false);
	if (tracker__untrack_running(t))
		log__warn("cannot list the processes still running: out of memory");
	while (consumer__drain(&t->cons) > 0)
		;
	if (t->pre_added) {
		shm_source__drain_all(t->pre.shm, &t->cons);
		shm_source__close(t->pre.shm);
		t->m.preload_drops_total = shm_source__drops(t->pre.shm, t->m.preload_drops);
	}
	t->m.t_drain = now_ns(CLOCK_MONOTONIC) - t0;
	artifact_writer__flush(t->writer);
	in_file = artifact_writer__events_written(t->writer);
	/* what the writer took, and what it refused once it had failed */
	arrived = artifact_writer__events(t->writer) + t->cons.rejected;
	err = artifact_writer__close(t->writer);
	t->writer = t->sinks.writer = NULL;
	if (err && !t->sinks.write_err)
		t->sinks.write_err = err;

	drops_total = tracker__read_drops(t, t->m.drops);
	bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.global), &zero, &g);
	heap_acct__fill(t->acct, &t->m);
	t->m.alloc_hooks = t->pre.on ? "preload" : "uprobe";
	t->m.preload_lib = t->pre.on ? t->pre.lib : NULL;
	preload_setup__fill(&t->pre, &t->m, !t->pre.on);
	/* The kernel-side tree peak is exact (every page); the artifact's Rss records are
	 * decimated, so prefer the larger of the two. */
	if ((uint64_t)g.tree_peak > t->m.peak_rss)
		t->m.peak_rss = g.tree_peak;
	memcpy(t->m.counts, t->sinks.counts, sizeof(t->sinks.counts));
	t->m.events_total = 0;
	for (int i = 0; i < MT_EV_TYPE_MAX; i++)
		t->m.events_total += t->sinks.counts[i];
	t->m.consumer_drops = t->cons.rejected;
	t->m.complete = drops_total == 0 && t->cons.rejected == 0 && !t->sinks.write_err &&
			!t->m.nr_running && !t->m.preload_drops_total;
	t->m.exit_status = exit_code;
	t->m.term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	uname(&un);
	t->m.kernel_release = strdup(un.release);
	libs__fill(t->libs, &t->m);
	getrusage(RUSAGE_SELF, &ru);
	t->m.memtrack_max_rss = (uint64_t)ru.ru_maxrss * 1024;
	t->m.ringbuf_bytes = t->o->ring_bytes;
	/* The detacher outlives us with a copy of our descriptors: the folder's would keep its
	 * file system busy (no umount right after memtrack). Reopened below, checked to be the
	 * same folder. */
	outdir__close(&t->out);
	if (t->o->sync_detach)
		tracker__detach(t);
	else
		tracker__detach_background(t);
	t->m.t_total = now_ns(CLOCK_MONOTONIC) - t_start;

	/* A cut artifact is said first: with a full disk the manifest fails too. */
	if (t->sinks.write_err)
		log__error("cannot write '%s/%s': %s: the artifact is cut, it holds the first %" PRIu64
			   " of the %" PRIu64 " events that arrived",
			   t->o->outdir, t->m.artifact, strerror(-t->sinks.write_err), in_file,
			   arrived);
	err = outdir__reopen(&t->out);
	if (!err) /* both log their failures */
		err = manifest__write_new(&t->m, &t->out, t->manifest_name);
	if (err || t->sinks.write_err)
		return MT_EXIT_FAILED;
	if (!t->o->quiet) {
		if (t->o->summary)
			t->o->summary(stderr, &t->m);
		fprintf(stderr, "memtrack: artifact: %s/%s\n", t->o->outdir, t->m.artifact);
	}
	if (t->m.nr_running)
		tracker__explain_running(&t->m);
	if (!t->m.complete && drops_total + t->cons.rejected + t->m.preload_drops_total == 0)
		return MT_EXIT_LOST;
	if (!t->m.complete) {
		char what[256], advice[512];

		log__error("%" PRIu64 " events were lost (%s, preload %" PRIu64
			   "): the artifact is incomplete.%s",
			   drops_total + t->cons.rejected + t->m.preload_drops_total,
			   records__drops_text(what, sizeof(what), t->m.drops, t->cons.rejected, true),
			   t->m.preload_drops_total,
			   records__drops_advice(advice, sizeof(advice), t->m.drops));
		return MT_EXIT_LOST;
	}
	return exit_code;
}

/* Closes every link and map; idempotent. Timed: detaching is part of what a run costs. */
static void tracker__detach(struct tracker *t)
{
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);

	if (!t->skel)
		return;
	attach_set__free(t->set);
	t->set = NULL;
	for (size_t i = 0; i < sizeof(t->tp_links) / sizeof(t->tp_links[0]); i++) {
		bpf_link__destroy(t->tp_links[i]);
		t->tp_links[i] = NULL;
	}
	consumer__destroy(&t->cons);
	tracker__unload(t);
	t->m.t_detach = now_ns(CLOCK_MONOTONIC) - t0;
	log__debug(LOG_VERBOSE, "detach: %.1f ms", t->m.t_detach / 1e6);
}

/* Detaching in a child that outlives us (detacher.c): our own exit then closes and unmaps
 * nothing, and the grace periods are paid off the caller's clock. */
static void tracker__detach_background(struct tracker *t)
{
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	pid_t pid = detacher__start();

	if (pid < 0) {
		tracker__detach(t);
		return;
	}
	t->handed_off = true;
	t->m.t_detach = now_ns(CLOCK_MONOTONIC) - t0;
	log__debug(LOG_VERBOSE, "detach: handed to process %d in %.2f ms", pid, t->m.t_detach / 1e6);
}

static void tracker__destroy(struct tracker *t)
{
	if (t->handed_off)
		return; /* the detacher's exit frees everything at once, off our critical path */
	tracker__detach(t);
	if (!t->pre_added && t->pre.shm)
		shm_source__src(t->pre.shm)->destroy(shm_source__src(t->pre.shm));
	artifact_writer__close(t->writer);
	heap_acct__free(t->acct);
	libs__free(t->libs);
	if (t->sigfd >= 0)
		close(t->sigfd);
	if (t->epfd >= 0)
		close(t->epfd);
	spawn__close(&t->sp);
	watchdog__close(&t->wd);
	outdir__close(&t->out);
	btf_cache__close(&t->btf);
	free(t->m.kernel_release);
	free(t->m.rmap_reason);
	free(t->m.artifact);
	for (uint32_t i = 0; i < t->m.nr_libraries; i++) {
		free(t->m.libraries[i].path);
		free(t->m.libraries[i].kind);
	}
	free(t->m.libraries);
	free(t->m.procs);
	free(t->m.running);
}


/* After the load: attaches what root_prep found and marks the executable known, so its exec
 * does not stop. */
static int tracker__attach_root(struct tracker *t)
{
	__u8 one = 1;
	int err;

	root_prep__join(&t->root);
	err = libs__bind(t->libs, t->set);
	if (!err && t->root.known)
		bpf_map_update_elem(bpf_map__fd(t->skel->maps.known_exe), &t->root.key, &one,
				    BPF_ANY);
	return err;
}

int tracker__run(const struct tracker_opts *o)
{
	struct tracker t = {.o = o, .epfd = -1, .sigfd = -1, .btf.memfd = -1, .out.fd = -1};
	struct mt_proc_init {
		__u8 raw[256];
	};
	char name[32];
	uint64_t t_start = now_ns(CLOCK_MONOTONIC), t0;
	int ret = MT_EXIT_FAILED, err, status, art_fd = -1;

	t.sp.go_fd = t.sp.err_fd = t.sp.pidfd = -1;
	t.wd.sock = -1;
	t.m.memtrack_version = MEMTRACK_VERSION;
	/* with --, the words as a shell command that runs them again */
	t.m.command = o->command ? (char *)o->command : shquote__argv(o->argv);
	t.m.argv = o->argv;
	t.m.start_unix_ns = now_ns(CLOCK_REALTIME);
	t.m.start_mono_ns = t_start;
	t.m.rmap_backend = "off";
	/* No RLIMIT_MEMLOCK raise (it needed CAP_SYS_RESOURCE): since 5.11 BPF memory is charged
	 * to the memory cgroup, and memtrack needs 5.15; libbpf raises it itself on older kernels. */
	/* names are "<pid><suffix>", a pid at most 10 digits: the longest is the artifact's */
	if (outdir__open(&t.out, o->outdir, 10 + strlen(ARTIFACT_SUFFIX)) ||
	    heap_acct__new(&t.acct))
		goto cleanup;
	/* before the fork: the command inherits LD_PRELOAD and the shared memory's name */
	if (preload_setup__start(&t.pre, (enum alloc_hooks)o->alloc_hooks))
		goto cleanup;
	/* The command is forked first, held before its exec: from a small process (no BPF maps
	 * or ring mapped yet) the fork copies little, and its exec has little to tear down. */
	err = spawn__start(&t.sp, o->argv, true);
	if (err) {
		log__error("cannot start '%s': %s", o->argv[0], strerror(-err));
		goto cleanup;
	}
	t.m.root_pid = t.sp.pid;
	/* Both names are claimed while the command is still held: a refusal runs nothing. */
	snprintf(name, sizeof(name), "%d%s", t.sp.pid, ARTIFACT_SUFFIX);
	snprintf(t.manifest_name, sizeof(t.manifest_name), "%d%s", t.sp.pid, MANIFEST_SUFFIX);
	t.m.artifact = strdup(name);
	if (!t.m.artifact || outdir__check_free(&t.out, t.manifest_name))
		goto cleanup;
	art_fd = outdir__create(&t.out, name);
	if (art_fd < 0)
		goto cleanup;
	err = watchdog__start(&t.wd);
	if (err) {
		log__error("cannot start the watchdog process: %s", strerror(-err));
		goto cleanup;
	}
	if (libs__new(&t.libs, NULL))
		goto cleanup;
	if (t.pre.on)
		libs__preload(t.libs, t.pre.dev, t.pre.ino);
	if (root_prep__start(&t.root, t.libs, o->argv[0]))
		goto cleanup;

	t0 = now_ns(CLOCK_MONOTONIC);
	ret = tracker__load(&t);
	t.m.t_load = now_ns(CLOCK_MONOTONIC) - t0;
	if (ret)
		goto cleanup;
	ret = MT_EXIT_FAILED;
	err = watchdog__arm(&t.wd, bpf_map__fd(t.skel->maps.events),
			    bpf_map__fd(t.skel->maps.stop_ctl));
	if (!err)
		err = tracker__set_stops(&t, true);
	if (err) {
		log__error("cannot arm the watchdog process: %s", strerror(-err));
		goto cleanup;
	}
	t0 = now_ns(CLOCK_MONOTONIC);
	ret = tracker__attach_tracepoints(&t);
	if (ret)
		goto cleanup;
	ret = MT_EXIT_FAILED;
	if (tracker__attach_root(&t))
		goto cleanup;
	err = tracker__setup_loop(&t);
	if (err) {
		log__error("cannot set up the event loop: %s", strerror(-err));
		goto cleanup;
	}
	{
		struct mt_proc_init zero = {};
		__u32 pid = t.sp.pid;

		/* struct mt_proc is BPF-private; a zeroed value of the map's size registers it */
		if (bpf_map__value_size(t.skel->maps.procs) > sizeof(zero) ||
		    bpf_map_update_elem(bpf_map__fd(t.skel->maps.procs), &pid, &zero, BPF_ANY)) {
			log__error("cannot register process %d: %s", pid, strerror(errno));
			goto cleanup;
		}
	}
	tracker__add_pidfd(&t);
	t.m.t_attach = now_ns(CLOCK_MONOTONIC) - t0;
	t0 = now_ns(CLOCK_MONOTONIC);
	err = spawn__go(&t.sp);
	if (err) {
		log__error("cannot release '%s': %s", o->argv[0], strerror(-err));
		goto cleanup;
	}
	/* While the command execs: nothing is read from the ring before the loop below. */
	err = artifact_writer__open_fd(&t.writer, art_fd, ARTIFACT_DEFAULT_LEVEL, 0);
	art_fd = -1; /* the writer's now, even on error */
	if (err) {
		log__error("cannot write '%s/%s': %s", o->outdir, t.m.artifact, strerror(-err));
		goto cleanup;
	}
	/* frames are compressed on every CPU while this thread drains the ring */
	err = artifact_writer__set_workers(t.writer, artifact__default_workers());
	if (err) {
		log__error("cannot start the artifact's compression threads: %s", strerror(-err));
		goto cleanup;
	}
	t.sinks.writer = t.writer;
	err = spawn__exec_result(&t.sp);
	if (err)
		log__error("cannot execute '%s': %s", o->argv[0], strerror(-err));
	status = tracker__loop(&t);
	if (status < 0) {
		log__error("event loop failed: %s", strerror(-status));
		goto cleanup;
	}
	t.sp.pid = 0; /* reaped: nothing to abort from here on */
	t.m.t_attach += libs__attach_ns(t.libs);
	ret = tracker__finish(&t, status, t0, t_start);
	if (err && ret == MT_EXIT_FAILED)
		ret = MT_EXIT_NOEXEC;
cleanup:
	root_prep__join(&t.root);
	spawn__abort(&t.sp); /* a child never released, or one we cannot follow */
	if (!o->command)
		free(t.m.command);
	if (art_fd >= 0) { /* created, the command never ran: no empty artifact left behind */
		close(art_fd);
		unlinkat(t.out.fd, t.m.artifact, 0);
	}
	t.m.command = NULL;
	t.m.argv = NULL;
	tracker__destroy(&t);
	return ret;
}
