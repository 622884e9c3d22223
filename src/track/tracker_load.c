// SPDX-License-Identifier: MIT
/*
 * Phase load: open the skeleton, size the ring, pick uprobe_multi or perf uprobes and the rmap
 * backend, load against a minimal BTF for this kernel (btf_cache.c), verify.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
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
	LIBBPF_OPTS(bpf_object_open_opts, oo,
		    .btf_custom_path = t->btf.path[0] ? t->btf.path : NULL);
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
	s->rodata->mt_wakeup_bytes =
	    t->o->ring_bytes / 4 < 256 * 1024 ? t->o->ring_bytes / 4 : 256 * 1024;
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

/* Loads the programs: the BTF they relocate against, the rmap backend, the uprobe mechanism,
 * then the attach set for the allocator probes. */
int tracker__load(struct tracker *t)
{
	struct load_try try = {.t = t};
	const void *obj;
	size_t obj_sz;
	bool multi;
	int err;

	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		err = -errno;
		log__error("cannot open '/sys/kernel/btf/vmlinux': %s. memtrack needs a kernel "
			   "built with CONFIG_DEBUG_INFO_BTF=y (Linux 5.15 or later)",
			   strerror(-err));
		return err;
	}
	libbpf_set_print(libbpf_quiet);
	if (t->o->rmap) {
		err = rmap_backend__select(&t->rmap, getenv("MEMTRACK_RMAP_BACKEND"));
		if (err)
			return err;
	}
	try.chosen = t->rmap;
	try.multi = multi = attach__probe_uprobe_multi();
	if (manifest__set_str(&t->m.uprobe_mechanism, multi ? "uprobe_multi" : "perf_uprobe") ||
	    manifest__set_str(&t->m.tracepoint_mechanism, "raw_tracepoint"))
		return tracker__no_memory();
	/* CO-RE against a minimal BTF for this kernel: no parse of the whole vmlinux BTF. */
	obj = memtrack_bpf__elf_bytes(&obj_sz);
	btf_cache__prepare(&t->btf, obj, obj_sz);
	err = btf_cache__load(&t->btf, tracker__load_try, &try);
	if (err)
		return tracker__explain_load_error(err);
	if (manifest__set_str(&t->m.btf_source, t->btf.source))
		return tracker__no_memory();
	if (t->o->rmap &&
	    (manifest__set_str(&t->m.rmap_backend,
			       t->rmap.backend == MT_RMAP_FENTRY ? "fentry" : "tracepoint") ||
	     manifest__set_str(&t->m.rmap_reason, t->rmap.reason)))
		return tracker__no_memory();
	err = attach_set__new(
	    &t->set, multi ? ATTACH_UPROBE_MULTI : ATTACH_PERF_UPROBE,
	    multi ? t->skel->progs.mt_alloc_entry_multi : t->skel->progs.mt_alloc_entry_perf,
	    multi ? t->skel->progs.mt_alloc_return_multi : t->skel->progs.mt_alloc_return_perf);
	if (err) { /* t->libs exists already (tracker__run): libs__bind attaches through set */
		log__error("cannot set up: %s", strerror(-err));
		return err;
	}
	return 0;
}
