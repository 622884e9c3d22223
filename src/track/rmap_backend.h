/* SPDX-License-Identifier: MIT */
/*
 * rmap mode's backend, chosen at run time: fentry on the kernel's folio rmap functions where
 * the kernel has them (6.8+) and loads BPF tracing programs, the rss_stat tracepoint backend
 * otherwise. The probing (rmap_backend__probe) is separate from the decision
 * (rmap_backend__choose, pure), so the decision is unit-tested on any kernel.
 */
#ifndef MEMTRACK_RMAP_BACKEND_H
#define MEMTRACK_RMAP_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

/* The fentry backend's target functions; one BPF program each (src/bpf/rmap_fentry.bpf.c). */
enum rmap_fn {
	RMAP_FN_ADD_NEW_ANON,  /* folio_add_new_anon_rmap: required */
	RMAP_FN_ADD_ANON_PTES, /* required */
	RMAP_FN_ADD_FILE_PTES, /* required */
	RMAP_FN_REMOVE_PTES,   /* required */
	RMAP_FN_ADD_ANON_PMD,  /* the pmd/pud ones: hooked when present (THP, DAX) */
	RMAP_FN_ADD_FILE_PMD,
	RMAP_FN_REMOVE_PMD,
	RMAP_FN_ADD_FILE_PUD, /* 6.15+ */
	RMAP_FN_REMOVE_PUD,
	RMAP_FN_PAGE_ADD_NEW_ANON, /* page_add_new_anon_rmap: the page_* API (< 6.8), all four */
	RMAP_FN_PAGE_ADD_ANON,
	RMAP_FN_PAGE_ADD_FILE,
	RMAP_FN_PAGE_REMOVE,
	RMAP_FN_NR,
};

#define RMAP_FN_REQUIRED                                                                           \
	((1u << RMAP_FN_ADD_NEW_ANON) | (1u << RMAP_FN_ADD_ANON_PTES) |                            \
	 (1u << RMAP_FN_ADD_FILE_PTES) | (1u << RMAP_FN_REMOVE_PTES))
#define RMAP_FN_FOLIO_ALL ((1u << RMAP_FN_PAGE_ADD_NEW_ANON) - 1)
#define RMAP_FN_PAGE_ALL                                                                           \
	((1u << RMAP_FN_PAGE_ADD_NEW_ANON) | (1u << RMAP_FN_PAGE_ADD_ANON) |                       \
	 (1u << RMAP_FN_PAGE_ADD_FILE) | (1u << RMAP_FN_PAGE_REMOVE))

extern const char *const rmap_fn_names[RMAP_FN_NR];

/* What the user asked for: MEMTRACK_RMAP_BACKEND=auto|fentry|tracepoint. */
enum rmap_want {
	RMAP_WANT_AUTO = 0,
	RMAP_WANT_FENTRY,
	RMAP_WANT_TRACEPOINT,
};

/* The probe results: the inputs of the decision. */
struct rmap_probe {
	enum rmap_want want;
	int btf_err;	  /* 0, or -errno: vmlinux BTF could not be read */
	unsigned found;	  /* bit per enum rmap_fn: a FUNC of that name is in vmlinux BTF */
	bool load_probed; /* a tracing program load was tried (only when the BTF check passed) */
	int load_err;	  /* its result: 0, or -errno (EPERM: refused by the kernel) */
};

struct rmap_choice {
	int backend;	  /* enum mt_rmap_backend: MT_RMAP_FENTRY or MT_RMAP_TRACEPOINT */
	unsigned progs;	  /* bit per enum rmap_fn: the fentry programs to load */
	char reason[256]; /* for the manifest's rmap_reason */
};

/* Whether the functions found allow the fentry backend, so that a probe load is worth it. */
bool rmap_backend__btf_ok(const struct rmap_probe *p);

/* The decision. Returns 0, or -ENOTSUP when MEMTRACK_RMAP_BACKEND=fentry cannot be honoured
 * (c->reason says why). */
int rmap_backend__choose(const struct rmap_probe *p, struct rmap_choice *c);

/* Parses MEMTRACK_RMAP_BACKEND's value (NULL or "" = auto). Returns 0 or -EINVAL. */
int rmap_backend__parse_want(const char *s, enum rmap_want *want);

/*
 * Fills `p` on this kernel: looks the functions up in /sys/kernel/btf/vmlinux (streamed,
 * btf_scan.h) and, when they are there and fentry is wanted, loads (never attaches) a
 * two-instruction fentry program on folio_add_new_anon_rmap. Called only in rmap mode.
 * Returns 0 (failures are results, in `p`).
 */
int rmap_backend__probe(struct rmap_probe *p);

struct memtrack_bpf;
struct bpf_link;

/* rmap mode's choice for this run: env is MEMTRACK_RMAP_BACKEND's value (NULL when unset).
 * Probes, decides, logs; returns 0, or -errno after saying why (bad env value; fentry forced
 * where it cannot run). */
int rmap_backend__select(struct rmap_choice *c, const char *env);

/* Before load: enables the programs of `backend` (enum mt_rmap_backend; MT_RMAP_OFF: none). */
void rmap_backend__set_autoload(struct memtrack_bpf *s, int backend, const struct rmap_choice *c);

/* After load, fentry backend: attaches the chosen programs into links[] (the last one: 6.1's
 * exec correction). Returns 0 or -errno (the links made so far stay in links[] for the caller
 * to destroy). */
int rmap_backend__attach(struct memtrack_bpf *s, const struct rmap_choice *c,
			 struct bpf_link *links[RMAP_FN_NR + 1]);

#endif
