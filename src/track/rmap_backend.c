// SPDX-License-Identifier: MIT
/* rmap backend selection: probes (BTF, a tracing program load) and the pure decision. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include "memtrack.skel.h"
#include "bpf/events.h"
#include "common/log.h"
#include "track/btf_cache.h"
#include "track/btf_scan.h"
#include "track/rmap_backend.h"

const char *const rmap_fn_names[RMAP_FN_NR] = {
    [RMAP_FN_ADD_NEW_ANON] = "folio_add_new_anon_rmap",
    [RMAP_FN_ADD_ANON_PTES] = "folio_add_anon_rmap_ptes",
    [RMAP_FN_ADD_FILE_PTES] = "folio_add_file_rmap_ptes",
    [RMAP_FN_REMOVE_PTES] = "folio_remove_rmap_ptes",
    [RMAP_FN_ADD_ANON_PMD] = "folio_add_anon_rmap_pmd",
    [RMAP_FN_ADD_FILE_PMD] = "folio_add_file_rmap_pmd",
    [RMAP_FN_REMOVE_PMD] = "folio_remove_rmap_pmd",
    [RMAP_FN_ADD_FILE_PUD] = "folio_add_file_rmap_pud",
    [RMAP_FN_REMOVE_PUD] = "folio_remove_rmap_pud",
    [RMAP_FN_PAGE_ADD_NEW_ANON] = "page_add_new_anon_rmap",
    [RMAP_FN_PAGE_ADD_ANON] = "page_add_anon_rmap",
    [RMAP_FN_PAGE_ADD_FILE] = "page_add_file_rmap",
    [RMAP_FN_PAGE_REMOVE] = "page_remove_rmap",
};

/* Which API this kernel has whole: the folio one (6.8+), else the page one (6.1; 6.2-6.7
 * mix folio_add_new_anon_rmap with the rest of the page API: neither is whole). */
static unsigned rmap_backend__api(unsigned found)
{
	if ((found & RMAP_FN_REQUIRED) == RMAP_FN_REQUIRED)
		return found & RMAP_FN_FOLIO_ALL;
	if ((found & RMAP_FN_PAGE_ALL) == RMAP_FN_PAGE_ALL)
		return RMAP_FN_PAGE_ALL;
	return 0;
}

bool rmap_backend__btf_ok(const struct rmap_probe *p)
{
	return p->want != RMAP_WANT_TRACEPOINT && !p->btf_err && rmap_backend__api(p->found);
}

int rmap_backend__parse_want(const char *s, enum rmap_want *want)
{
	if (!s || !*s || !strcmp(s, "auto"))
		*want = RMAP_WANT_AUTO;
	else if (!strcmp(s, "fentry"))
		*want = RMAP_WANT_FENTRY;
	else if (!strcmp(s, "tracepoint"))
		*want = RMAP_WANT_TRACEPOINT;
	else
		return -EINVAL;
	return 0;
}

/* Names of the required functions missing from BTF, comma-separated. */
static void missing_required(unsigned found, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = 0;
	for (int i = 0; i < RMAP_FN_NR && n < size; i++)
		if ((RMAP_FN_REQUIRED & (1u << i)) && !(found & (1u << i)))
			n += snprintf(buf + n, size - n, "%s%s", n ? ", " : "", rmap_fn_names[i]);
}

int rmap_backend__choose(const struct rmap_probe *p, struct rmap_choice *c)
{
	char missing[160];

	memset(c, 0, sizeof(*c));
	c->backend = MT_RMAP_TRACEPOINT;
	if (p->want == RMAP_WANT_TRACEPOINT) {
		snprintf(c->reason, sizeof(c->reason),
			 "MEMTRACK_RMAP_BACKEND=tracepoint: tracepoint backend");
		return 0;
	}
	if (p->btf_err) {
		snprintf(c->reason, sizeof(c->reason),
			 "cannot read vmlinux BTF (%s): tracepoint backend", strerror(-p->btf_err));
	} else if (!rmap_backend__api(p->found)) {
		missing_required(p->found, missing, sizeof(missing));
		snprintf(c->reason, sizeof(c->reason),
			 "no %s in vmlinux BTF (nor the whole page_* rmap API of 6.1): tracepoint "
			 "backend",
			 missing);
	} else if (!p->load_probed) {
		snprintf(c->reason, sizeof(c->reason),
			 "tracing programs not probed: tracepoint backend");
	} else if (p->load_err == -EPERM) {
		snprintf(c->reason, sizeof(c->reason),
			 "fentry refused by the kernel (EPERM, BPF tracing programs not allowed): "
			 "tracepoint backend");
	} else if (p->load_err) {
		snprintf(c->reason, sizeof(c->reason),
			 "fentry refused by the kernel (%s): tracepoint backend",
			 p->load_err == -EINVAL ? "EINVAL" : strerror(-p->load_err));
	} else {
		c->backend = MT_RMAP_FENTRY;
		c->progs = rmap_backend__api(p->found);
		if (c->progs & RMAP_FN_PAGE_ALL)
			snprintf(c->reason, sizeof(c->reason),
				 "page_* rmap functions found (before 6.8)");
		else if (c->progs & ((1u << RMAP_FN_ADD_FILE_PUD) | (1u << RMAP_FN_REMOVE_PUD)))
			snprintf(c->reason, sizeof(c->reason),
				 "folio_* rmap functions found (6.15+, with pud variants)");
		else
			snprintf(c->reason, sizeof(c->reason),
				 "folio_* rmap functions found (6.8+)");
		return 0;
	}
	if (p->want == RMAP_WANT_FENTRY) {
		/* the user asked for fentry: say why not, and fail */
		char why[sizeof(c->reason)];
		char *colon;

		snprintf(why, sizeof(why), "%s", c->reason);
		colon = strstr(why, ": tracepoint backend");
		if (colon)
			*colon = 0;
		snprintf(c->reason, sizeof(c->reason), "%s", why);
		return -ENOTSUP;
	}
	return 0;
}

/* Loads `r0 = 0; exit` as an fentry program on BTF function `btf_id`; returns its result. */
static int probe_tracing_load(int btf_id)
{
	struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_FENTRY,
		    .attach_btf_id = btf_id);
	int fd = bpf_prog_load(BPF_PROG_TYPE_TRACING, "mt_probe", "GPL", insns, 2, &opts);

	if (fd < 0)
		return fd; /* libbpf 1.x returns -errno */
	close(fd);
	return 0;
}

int rmap_backend__probe(struct rmap_probe *p)
{
	int ids[RMAP_FN_NR], err;
	unsigned api;

	p->btf_err = 0;
	p->found = 0;
	p->load_probed = false;
	p->load_err = 0;
	if (p->want == RMAP_WANT_TRACEPOINT)
		return 0;
	/* streamed, not btf__load_vmlinux_btf() (10-20x cheaper, see btf_scan.h), and only once
	 * per kernel build: later runs read the IDs from the cache */
	err = btf_cache__func_ids((const char *const *)rmap_fn_names, RMAP_FN_NR, ids);
	if (err) {
		p->btf_err = err;
		return 0;
	}
	for (int i = 0; i < RMAP_FN_NR; i++)
		if (ids[i] > 0)
			p->found |= 1u << i;
	api = rmap_backend__api(p->found);
	if (rmap_backend__btf_ok(p)) {
		p->load_probed = true;
		p->load_err =
		    probe_tracing_load(api & RMAP_FN_PAGE_ALL ? ids[RMAP_FN_PAGE_ADD_NEW_ANON]
							      : ids[RMAP_FN_ADD_NEW_ANON]);
	}
	return 0;
}

/* The skeleton's fentry programs, in enum rmap_fn order. */
static struct bpf_program *rmap_backend__prog(struct memtrack_bpf *s, int fn)
{
	struct bpf_program *progs[RMAP_FN_NR] = {
	    [RMAP_FN_ADD_NEW_ANON] = s->progs.mt_fentry_add_new_anon,
	    [RMAP_FN_ADD_ANON_PTES] = s->progs.mt_fentry_add_anon_ptes,
	    [RMAP_FN_ADD_FILE_PTES] = s->progs.mt_fentry_add_file_ptes,
	    [RMAP_FN_REMOVE_PTES] = s->progs.mt_fentry_remove_ptes,
	    [RMAP_FN_ADD_ANON_PMD] = s->progs.mt_fentry_add_anon_pmd,
	    [RMAP_FN_ADD_FILE_PMD] = s->progs.mt_fentry_add_file_pmd,
	    [RMAP_FN_REMOVE_PMD] = s->progs.mt_fentry_remove_pmd,
	    [RMAP_FN_ADD_FILE_PUD] = s->progs.mt_fentry_add_file_pud,
	    [RMAP_FN_REMOVE_PUD] = s->progs.mt_fentry_remove_pud,
	    [RMAP_FN_PAGE_ADD_NEW_ANON] = s->progs.mt_fentry_page_add_new_anon,
	    [RMAP_FN_PAGE_ADD_ANON] = s->progs.mt_fentry_page_add_anon,
	    [RMAP_FN_PAGE_ADD_FILE] = s->progs.mt_fentry_page_add_file,
	    [RMAP_FN_PAGE_REMOVE] = s->progs.mt_fentry_page_remove,
	};

	return progs[fn];
}

static double rmap_backend__ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1e3 + (t1.tv_nsec - t0->tv_nsec) / 1e6;
}

int rmap_backend__select(struct rmap_choice *c, const char *env)
{
	struct rmap_probe p = {0};
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (rmap_backend__parse_want(env, &p.want)) {
		log__error("cannot use MEMTRACK_RMAP_BACKEND='%s': want auto, fentry or tracepoint",
			   env);
		return -EINVAL;
	}
	rmap_backend__probe(&p);
	if (rmap_backend__choose(&p, c)) {
		log__error("cannot use the fentry rmap backend: %s. Unset MEMTRACK_RMAP_BACKEND "
			   "to fall back to the tracepoint backend",
			   c->reason);
		return -ENOTSUP;
	}
	log__debug(LOG_VERBOSE, "rmap backend %s (%s), chosen in %.2f ms",
		   c->backend == MT_RMAP_FENTRY ? "fentry" : "tracepoint", c->reason,
		   rmap_backend__ms_since(&t0));
	return 0;
}

void rmap_backend__set_autoload(struct memtrack_bpf *s, int backend, const struct rmap_choice *c)
{
	bool tp = backend == MT_RMAP_TRACEPOINT;

	/* the address programs serve the tracepoint backend only (sys_enter/sys_exit fire for
	 * every syscall of the machine) */
	bpf_program__set_autoload(s->progs.mt_on_page_fault_user, tp);
	bpf_program__set_autoload(s->progs.mt_on_page_fault_kernel, tp);
	bpf_program__set_autoload(s->progs.mt_on_sys_enter, tp);
	bpf_program__set_autoload(s->progs.mt_on_sys_exit, tp);
	/* only the selected fentry programs: each makes the kernel resolve its target, and a
	 * missing target fails the whole load */
	for (int i = 0; i < RMAP_FN_NR; i++)
		bpf_program__set_autoload(rmap_backend__prog(s, i),
					  backend == MT_RMAP_FENTRY && (c->progs & (1u << i)));
	/* 6.1: the exec seed misses the task's cached counter changes (rmap_fentry.bpf.c) */
	bpf_program__set_autoload(s->progs.mt_fentry_exec_cached,
				  backend == MT_RMAP_FENTRY && (c->progs & RMAP_FN_PAGE_ALL));
}

int rmap_backend__attach(struct memtrack_bpf *s, const struct rmap_choice *c,
			 struct bpf_link *links[RMAP_FN_NR + 1])
{
	for (int i = 0; i < RMAP_FN_NR; i++) {
		if (!(c->progs & (1u << i)))
			continue;
		links[i] = bpf_program__attach_trace(rmap_backend__prog(s, i));
		if (!links[i])
			return -errno;
	}
	if (c->progs & RMAP_FN_PAGE_ALL) {
		links[RMAP_FN_NR] =
		    bpf_program__attach_raw_tracepoint(s->progs.mt_fentry_exec_cached,
						       "sched_process_exec");
		if (!links[RMAP_FN_NR])
			return -errno;
	}
	return 0;
}
