// SPDX-License-Identifier: MIT
/*
 * Phase load: open the skeleton, size the ring, pick uprobe_multi or perf uprobes and the rmap
 * backend, load against a minimal BTF for this kernel (btf_cache.c), verify; then pin it all
 * for later runs (prog_cache.h). Or, when an earlier run of the same configuration kept its
 * load, take that: its maps emptied, nothing opened or verified. The allocator
 * programs are loaded with the others only when every process will need them (uprobe mode);
 * otherwise at the first attach to a library (tracker__alloc_ensure).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf/proc.h"
#include "common/log.h"
#include "track/tracker_priv.h"

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

/* Logs why the programs did not load; returns err. */
static int tracker__explain_load_error(int err)
{
	if (err == -EPERM || (err == -EACCES && geteuid() != 0))
		log__error(
		    "cannot load BPF programs: %s. Run as root, or grant the binary its "
		    "capabilities: sudo setcap cap_bpf,cap_perfmon+ep $(command -v memtrack)",
		    strerror(-err));
	else
		log__error("cannot load BPF programs: %s (run with -vv for the verifier log)",
			   strerror(-err));
	return err;
}

static int tracker__no_memory(void)
{
	log__error("out of memory");
	return -ENOMEM;
}

void tracker__unload(struct tracker *t)
{
	for (int i = 0; i <= RMAP_FN_NR; i++) {
		bpf_link__destroy(t->rmap_links[i]);
		t->rmap_links[i] = NULL;
	}
	t->alloc_entry.fd = t->alloc_ret.fd = t->alloc_session.fd = -1;
	t->alloc_entry.prog = t->alloc_ret.prog = t->alloc_session.prog = NULL;
	t->loaded = false;
	memtrack_bpf__destroy(t->alloc_skel);
	t->alloc_skel = NULL;
	memtrack_bpf__destroy(t->marker_skel);
	t->marker_skel = NULL;
	memtrack_bpf__destroy(t->skel);
	t->skel = NULL;
	prog_cache__close(&t->pc); /* after the links (tracker__detach): the slot's lock last */
}

/*
 * Does this kernel take the allocator sites' returns as uprobe sessions (attach.h,
 * mt_alloc_session)? Asked once, when the allocator programs are first loaded or looked up
 * (a probe load, < 1 ms: a run that loads none never asks). MEMTRACK_UPROBE_SESSION=0 keeps
 * separate return probes (measuring one against the other; the tests run both).
 */
bool tracker__session(struct tracker *t)
{
	const char *env = getenv("MEMTRACK_UPROBE_SESSION");

	if (t->session < 0)
		t->session =
		    t->multi && !(env && !strcmp(env, "0")) && attach__probe_uprobe_session();
	return t->session > 0;
}

/* Which of the allocator program pairs serves this kernel's uprobes: autoload for that pair
 * (when load is true) and its expected attach type, and for the session program where there
 * are sessions; no autoload for the others. */
static void tracker__alloc_autoload(struct tracker *t, struct memtrack_bpf *s, bool load)
{
	bool multi = t->multi, session = load && multi && tracker__session(t);

	bpf_program__set_autoload(s->progs.mt_alloc_entry_multi, load && multi);
	bpf_program__set_autoload(s->progs.mt_alloc_return_multi, load && multi);
	bpf_program__set_autoload(s->progs.mt_alloc_entry_perf, load && !multi);
	bpf_program__set_autoload(s->progs.mt_alloc_return_perf, load && !multi);
	bpf_program__set_autoload(s->progs.mt_alloc_session, session);
	if (multi) {
		bpf_program__set_expected_attach_type(s->progs.mt_alloc_entry_multi,
						      attach__uprobe_multi_type());
		bpf_program__set_expected_attach_type(s->progs.mt_alloc_return_multi,
						      attach__uprobe_multi_type());
	}
	if (session)
		bpf_program__set_expected_attach_type(s->progs.mt_alloc_session,
						      attach__uprobe_session_type());
}

static void tracker__alloc_take(struct tracker *t, struct memtrack_bpf *s)
{
	t->alloc_entry.prog =
	    t->multi ? s->progs.mt_alloc_entry_multi : s->progs.mt_alloc_entry_perf;
	t->alloc_ret.prog =
	    t->multi ? s->progs.mt_alloc_return_multi : s->progs.mt_alloc_return_perf;
	t->alloc_entry.fd = bpf_program__fd(t->alloc_entry.prog);
	t->alloc_ret.fd = bpf_program__fd(t->alloc_ret.prog);
	t->alloc_session.fd = bpf_program__fd(s->progs.mt_alloc_session); /* -1: not loaded */
	t->alloc_session.prog = t->alloc_session.fd >= 0 ? s->progs.mt_alloc_session : NULL;
}

/* The USDT marker program pair (include/memtrack.h): autoload for the one this kernel's
 * uprobes take (when load is true), none for the other. */
static void tracker__marker_autoload(struct tracker *t, struct memtrack_bpf *s, bool load)
{
	bool multi = t->multi;

	bpf_program__set_autoload(s->progs.mt_marker_multi, load && multi);
	bpf_program__set_autoload(s->progs.mt_marker_perf, load && !multi);
	if (multi)
		bpf_program__set_expected_attach_type(s->progs.mt_marker_multi,
						      attach__uprobe_multi_type());
}

/*
 * A second instance of the same object in which only the programs `autoload` picks load, on
 * the first instance's maps (bpf_map__reuse_fd) and read-only values, against the same BTF.
 * Its own cost (~2-3 ms for the allocator programs: open, relocation, verification) is paid
 * only by runs that need them. Returns 0 or -errno.
 */
static int tracker__load_second(struct tracker *t,
				void (*autoload)(struct tracker *t, struct memtrack_bpf *s,
						 bool load),
				struct memtrack_bpf **out)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo,
		    .btf_custom_path = t->btf.path[0] ? t->btf.path : NULL);
	struct memtrack_bpf *s;
	struct bpf_program *p;
	struct bpf_map *m;
	int err = 0;

	if (!t->loaded)
		return -EINVAL;
	if (!t->skel && !t->btf.source) { /* a kept load prepared none */
		const void *obj;
		size_t obj_sz;

		obj = memtrack_bpf__elf_bytes(&obj_sz);
		btf_cache__prepare(&t->btf, obj, obj_sz);
		oo.btf_custom_path = t->btf.path[0] ? t->btf.path : NULL;
	}
	s = memtrack_bpf__open_opts(&oo);
	if (!s)
		return -errno;
	bpf_object__for_each_program(p, s->obj)
		bpf_program__set_autoload(p, false);
	autoload(t, s, true);
	tracker__rodata_apply(s->rodata, &t->ro);
	bpf_object__for_each_map(m, s->obj) {
		int fd;

		if (bpf_map__is_internal(m))
			continue; /* .rodata, copied above */
		fd = t->skel ? bpf_object__find_map_fd_by_name(t->skel->obj, bpf_map__name(m))
			     : prog_cache__fd(&t->pc, bpf_map__name(m));
		/* a map the first instance did not create is none of these programs' */
		err = fd >= 0 ? bpf_map__reuse_fd(m, fd) : bpf_map__set_autocreate(m, false);
		if (err)
			goto cleanup;
	}
	err = memtrack_bpf__load(s);
	if (!err) {
		tracker__cache_programs(t, s);
		*out = s;
		s = NULL;
	}
cleanup:
	memtrack_bpf__destroy(s);
	return err;
}

/*
 * Loads the allocator programs if they are not yet (tracker__load_second): an --alloc-hooks
 * auto or preload run whose every process the interposer serves never pays for them. Returns
 * 0 or -errno; idempotent.
 */
int tracker__alloc_ensure(struct tracker *t)
{
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	int err;

	if (t->alloc_entry.fd >= 0)
		return 0;
	if (!tracker__alloc_take_kept(t))
		return manifest__set_str(&t->m.alloc_programs, "at first attach");
	err = tracker__load_second(t, tracker__alloc_autoload, &t->alloc_skel);
	if (!err) {
		tracker__alloc_take(t, t->alloc_skel);
		err = manifest__set_str(&t->m.alloc_programs, "at first attach");
		log__debug(LOG_VERBOSE, "allocator programs loaded in %.2f ms",
			   (now_ns(CLOCK_MONOTONIC) - t0) / 1e6);
	}
	if (err)
		log__error("cannot load the allocator programs: %s (run with -vv for the verifier "
			   "log)",
			   strerror(-err));
	return err;
}

/* attach_marker_fn: the USDT marker program, loaded at the first library that has memtrack's
 * probes (most runs have none: ~1.5 ms of verification saved). */
static int tracker__marker_prog(void *ctx, struct attach_prog *marker)
{
	struct tracker *t = ctx;
	uint64_t t0 = now_ns(CLOCK_MONOTONIC);
	int err = 0, kept = t->pc.hit ? prog_cache__fd(&t->pc, "mt_marker_multi") : -ENOENT;

	if (kept >= 0) {
		*marker = (struct attach_prog){.fd = kept};
		return 0;
	}
	if (!t->marker_skel) {
		err = tracker__load_second(t, tracker__marker_autoload, &t->marker_skel);
		if (err) {
			log__error("cannot load the USDT marker program: %s (run with -vv for the "
				   "verifier log)",
				   strerror(-err));
			return err;
		}
		log__debug(LOG_VERBOSE, "marker program loaded in %.2f ms",
			   (now_ns(CLOCK_MONOTONIC) - t0) / 1e6);
	}
	marker->prog =
	    t->multi ? t->marker_skel->progs.mt_marker_multi : t->marker_skel->progs.mt_marker_perf;
	marker->fd = bpf_program__fd(marker->prog);
	return 0;
}

/* attach_progs_fn for the allocator attach set: the programs on first need. */
static int tracker__alloc_progs(void *ctx, struct attach_prog *entry, struct attach_prog *ret,
				struct attach_prog *session)
{
	struct tracker *t = ctx;
	int err = tracker__alloc_ensure(t);

	if (err)
		return err;
	*entry = t->alloc_entry;
	*ret = t->alloc_ret;
	*session = t->alloc_session;
	return 0;
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

/* Fork, exec and exit end in mt_rebase through a tail call (process.bpf.c): its program array
 * is filled here, before anything is attached. Returns 0 or -errno. */
static int tracker__fill_tail(struct memtrack_bpf *s)
{
	__u32 zero = 0;
	int fd = bpf_program__fd(s->progs.mt_rebase);

	if (bpf_map_update_elem(bpf_map__fd(s->maps.rebase_prog), &zero, &fd, BPF_ANY))
		return -errno;
	return 0;
}

/*
 * The ring buffer map, created on a thread from the run's start: allocating and zeroing an
 * 8 MiB ring takes ~3 ms here, which the load would otherwise wait for. Given to libbpf with
 * bpf_map__reuse_fd; if it could not be created, libbpf creates the map as usual. It is mapped
 * for the consumer later, on the main thread (tracker__setup_loop): mapped on this thread it
 * cost more CPU than it saved wall time (the main thread's page faults spin on mmap_lock
 * while ~2,000 pages are inserted, each an rss_stat hit).
 * Then, on the same thread, the big hash maps (map_prep.h): the main thread reaches the load
 * ~10 ms after the start, this thread is done with the ring after ~3, so one thread has room
 * for both and costs one thread creation.
 */

static void *ring_prep__run(void *arg)
{
	struct ring_prep *r = arg;

	r->fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "events", 0, 0, r->bytes, NULL);
	if (r->fd < 0)
		r->fd = -errno;
	map_prep__create(&r->maps); /* a map not created is libbpf's to create, as before */
	return NULL;
}

void tracker__ring_start(struct tracker *t)
{
	struct ring_prep *r = &t->ring;
	sigset_t all, old;

	r->bytes = t->o->ring_bytes;
	r->fd = -EAGAIN;
	map_prep__init(&r->maps, map_prep_memtrack, map_prep_memtrack_nr);
	sigfillset(&all); /* memtrack's signals are for its signalfd, later */
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r->started = !pthread_create(&r->thread, NULL, ring_prep__run, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The ring's fd (-errno: none); idempotent. */
static int ring_prep__join(struct ring_prep *r)
{
	if (r->started)
		pthread_join(r->thread, NULL);
	r->started = false;
	return r->fd;
}

/* Closes its descriptors (the object holds the maps it took). Idempotent. */
void tracker__ring_close(struct tracker *t)
{
	struct ring_prep *r = &t->ring;

	if (ring_prep__join(r) >= 0)
		close(r->fd);
	r->fd = -EBADF;
	map_prep__close(&r->maps);
}

/*
 * --stacks: bytes of user stack the BPF side copies per allocation (MEMTRACK_STACK_BYTES,
 * default USTACK_DEFAULT_BYTES, at most MT_USTACK_MAX). Deeper stacks come out truncated.
 */
#define USTACK_DEFAULT_BYTES MT_USTACK_MAX
static uint32_t tracker__ustack_bytes(void)
{
	const char *env = getenv("MEMTRACK_STACK_BYTES");
	unsigned long n = env ? strtoul(env, NULL, 0) : USTACK_DEFAULT_BYTES;

	if (n < 64)
		n = 64;
	if (n > MT_USTACK_MAX)
		n = MT_USTACK_MAX;
	return (uint32_t)n & ~7u;
}

/* The read-only values of a load for rmap backend `backend` (every instance gets them). */
void tracker__rodata(const struct tracker *t, struct memtrack_bpf__rodata *ro, int backend)
{
	memset(ro, 0, sizeof(*ro));
	ro->mt_nr_cpus = tracker__nr_cpus();
	ro->mt_page_shift = __builtin_ctz(sysconf(_SC_PAGESIZE));
	ro->mt_rss_step = t->o->rss_step;
	ro->mt_stop_on_exec = true;
	ro->mt_rmap = backend;
	ro->mt_ustack_bytes = t->o->stacks ? tracker__ustack_bytes() : 0;
	/* wake the consumer at 256 KiB pending, or at a quarter of a smaller ring: the ring must
	 * be able to hold the threshold with room to spare while the consumer wakes up */
	ro->mt_wakeup_bytes = t->o->ring_bytes / 4 < 256 * 1024 ? t->o->ring_bytes / 4 : 256 * 1024;
	/* records with stacks are up to ~300x longer: wake the consumer after more bytes (an
	 * eighth of the ring, well before the half where stacks are left out) */
	if (t->o->stacks && t->o->ring_bytes / 8 > ro->mt_wakeup_bytes)
		ro->mt_wakeup_bytes = t->o->ring_bytes / 8;
}

/* The values tracker__rodata sets, onto an instance's (the others keep the object's). */
void tracker__rodata_apply(struct memtrack_bpf__rodata *dst, const struct memtrack_bpf__rodata *ro)
{
	dst->mt_nr_cpus = ro->mt_nr_cpus;
	dst->mt_page_shift = ro->mt_page_shift;
	dst->mt_rss_step = ro->mt_rss_step;
	dst->mt_stop_on_exec = ro->mt_stop_on_exec;
	dst->mt_rmap = ro->mt_rmap;
	dst->mt_ustack_bytes = ro->mt_ustack_bytes;
	dst->mt_wakeup_bytes = ro->mt_wakeup_bytes;
}

/* Whether the allocator programs load with the others (one object, one verification pass):
 * when the root needs them for sure: uprobe mode (every allocator), preload mode (libc's
 * dlopen stop). In auto mode tracker__alloc_ensure loads them if a process ever does. */
bool tracker__alloc_eager(const struct tracker *t)
{
	return !t->pre.on || t->o->alloc_hooks == ALLOC_HOOKS_PRELOAD;
}

/* Opens the skeleton against the BTF in t->btf, configures and loads it for t->rmap's backend,
 * on ring's map when it has one. Returns 0 or -errno. */
static int tracker__open_load(struct tracker *t, struct ring_prep *ring)
{
	/* -vvv: the verifier's statistics per program (processed insns, verification time) */
	LIBBPF_OPTS(bpf_object_open_opts, oo,
		    .btf_custom_path = t->btf.path[0] ? t->btf.path : NULL,
		    .kernel_log_level = log__level >= LOG_TRACE ? 4 : 0);
	int backend = t->o->rmap ? t->rmap.backend : MT_RMAP_OFF;
	bool eager = tracker__alloc_eager(t);
	struct memtrack_bpf *s;
	char what[64];
	int err;

	s = t->skel = memtrack_bpf__open_opts(&oo);
	if (!s)
		return -errno;
	tracker__mark(t, "load: object opened");
	tracker__rodata(t, &t->ro, backend);
	tracker__rodata_apply(s->rodata, &t->ro);
	rmap_backend__set_autoload(s, backend, &t->rmap);
	bpf_map__set_max_entries(s->maps.events, t->o->ring_bytes);
	tracker__alloc_autoload(t, s, eager);
	bpf_program__set_autoload(s->progs.mt_preload_ctl_multi, t->pre.on && t->multi);
	bpf_program__set_autoload(s->progs.mt_preload_ctl_perf, t->pre.on && !t->multi);
	bpf_program__set_autoload(s->progs.mt_mark_proc, t->pre.on);
	if (t->multi)
		bpf_program__set_expected_attach_type(s->progs.mt_preload_ctl_multi,
						      attach__uprobe_multi_type());
	/* the USDT marker programs (include/memtrack.h): at the first library with the probes */
	tracker__marker_autoload(t, s, false);
	err = ring_prep__join(ring) >= 0 ? bpf_map__reuse_fd(s->maps.events, ring->fd) : 0;
	tracker__mark(t, "load: ring joined");
	/* after every resize above: a map whose definition differs is libbpf's to create. A
	 * retry (BTF, rmap backend) takes them again: no program ran on them (nothing tracked) */
	map_prep__give(&ring->maps, s->obj);
	snprintf(what, sizeof(what), "load: maps joined (%d of %d created early)",
		 __builtin_popcount(ring->maps.given), ring->maps.n);
	tracker__mark(t, what);
	if (!err)
		err = memtrack_bpf__load(s);
	tracker__mark(t, "load: object loaded");
	if (!err)
		err = tracker__fill_tail(s);
	if (!err && eager)
		tracker__alloc_take(t, s);
	if (!err) {
		const char *missing = NULL;

		t->loaded = true;
		err = tracker__fds_take(t, &missing);
		if (err)
			log__error("cannot find '%s' in the loaded programs", missing);
	}
	/* attached at load, so that a kernel refusing them leaves time to reload without them */
	if (!err && backend == MT_RMAP_FENTRY)
		err = rmap_backend__attach(s, &t->rmap, t->rmap_links);
	if (err)
		tracker__unload(t);
	return err;
}

/* Loads with the chosen rmap backend; when the fentry programs do not load or attach (the probe
 * load passed: verifier, attach), falls back to the tracepoint backend and says why. */
static int tracker__load_backend(struct tracker *t, struct ring_prep *ring)
{
	int err = tracker__open_load(t, ring);

	if (err && t->o->rmap && t->rmap.backend == MT_RMAP_FENTRY) {
		snprintf(t->rmap.reason, sizeof(t->rmap.reason),
			 "fentry programs cannot be loaded or attached (%s): tracepoint backend",
			 strerror(-err));
		log__warn("%s", t->rmap.reason);
		t->rmap.backend = MT_RMAP_TRACEPOINT;
		t->rmap.progs = 0;
		err = tracker__open_load(t, ring);
	}
	return err;
}

/* One load against t->btf's current path, for btf_cache__load. */
struct load_try {
	struct tracker *t;
	struct rmap_choice chosen;
};

static int tracker__load_try(void *ctx)
{
	struct load_try *l = ctx;

	l->t->rmap = l->chosen; /* an earlier try's fentry fallback may have been the BTF's fault */
	return tracker__load_backend(l->t, &l->t->ring);
}

/* Loads the programs: the BTF they relocate against, the rmap backend, the uprobe mechanism,
 * then the attach set for the allocator probes. A kept load (t->pc.hit) skips all but the
 * last. */
int tracker__load(struct tracker *t)
{
	struct load_try try = {.t = t};
	const void *obj;
	size_t obj_sz;
	int err;

	libbpf_set_print(libbpf_quiet);
	if (manifest__set_str(&t->m.uprobe_mechanism, t->multi ? "uprobe_multi" : "perf_uprobe") ||
	    manifest__set_str(&t->m.tracepoint_mechanism, "raw_tracepoint"))
		return tracker__no_memory();
	if (t->pc.hit) {
		err = tracker__load_kept(t);
		if (err < 0)
			return err;
		if (!err)
			goto attach_set;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		err = -errno;
		log__error("cannot open '/sys/kernel/btf/vmlinux': %s. memtrack needs a kernel "
			   "built with CONFIG_DEBUG_INFO_BTF=y (Linux 5.15 or later)",
			   strerror(-err));
		return err;
	}
	if (t->o->rmap) {
		err = rmap_backend__select(&t->rmap, getenv("MEMTRACK_RMAP_BACKEND"));
		if (err)
			return err;
	}
	try.chosen = t->rmap;
	/* CO-RE against a minimal BTF for this kernel: no parse of the whole vmlinux BTF. */
	obj = memtrack_bpf__elf_bytes(&obj_sz);
	btf_cache__prepare(&t->btf, obj, obj_sz);
	tracker__mark(t, "load: BTF prepared");
	err = btf_cache__load(&t->btf, tracker__load_try, &try);
	tracker__ring_close(t); /* the object holds its own descriptor of the map */
	if (err)
		return tracker__explain_load_error(err);
	tracker__cache_store(t);
	tracker__mark(t, "load: kept for later runs");
	if (manifest__set_str(&t->m.btf_source, t->btf.source) ||
	    manifest__set_str(&t->m.alloc_programs,
			      t->alloc_entry.fd >= 0 ? "at load" : "not loaded") ||
	    manifest__set_str(&t->m.bpf_programs, t->pc.state))
		return tracker__no_memory();
	if (t->o->rmap &&
	    (manifest__set_str(&t->m.rmap_backend,
			       t->rmap.backend == MT_RMAP_FENTRY ? "fentry" : "tracepoint") ||
	     manifest__set_str(&t->m.rmap_reason, t->rmap.reason)))
		return tracker__no_memory();
attach_set:
	err = attach_set__new_lazy(&t->set, t->multi ? ATTACH_UPROBE_MULTI : ATTACH_PERF_UPROBE,
				   tracker__alloc_progs, t);
	if (!err)
		attach_set__set_marker(t->set, tracker__marker_prog, t);
	if (err) { /* t->libs exists already (tracker__run): libs__bind attaches through set */
		log__error("cannot set up: %s", strerror(-err));
		return err;
	}
	return 0;
}
