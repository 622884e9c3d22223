/* SPDX-License-Identifier: MIT */
/* Attaching the generic allocator programs to the sites of one library. */
#ifndef MEMTRACK_ATTACH_H
#define MEMTRACK_ATTACH_H

#include <stdbool.h>
#include <stdint.h>
#include "track/alloc_table.h"
#include "track/usdt.h"

struct bpf_program;

enum attach_mech {
	ATTACH_UPROBE_MULTI, /* one bpf link per library and direction: one grace period to detach */
	ATTACH_PERF_UPROBE, /* one perf event per site: the fallback for kernels before 6.6 */
};

struct attach_set; /* every link made, for detach */

/* Does this kernel create uprobe_multi links? Loads a two-instruction program; < 1 ms. */
bool attach__probe_uprobe_multi(void);
/* The attach type the multi programs must be loaded with (BPF_TRACE_UPROBE_MULTI). */
int attach__uprobe_multi_type(void);
/* Does this kernel make uprobe sessions (6.13)? Loads a two-instruction program; < 1 ms. */
bool attach__probe_uprobe_session(void);
/* The attach type of the session program (BPF_TRACE_UPROBE_SESSION). */
int attach__uprobe_session_type(void);
/* The session program made loadable as this kernel can (its attach type), or not loaded. For
 * loads of every program (tests): a run decides with tracker__session. */
void attach__session_autoload(struct bpf_program *prog);
/* One uprobe_multi link of an entry program on cnt offsets of path, with their cookies.
 * Returns its fd or -errno. */
int attach__multi_link(int prog_fd, const char *path, const uint64_t *offs, const uint64_t *cookies,
		       uint32_t cnt);
/* The offsets of a uprobe_multi link of exactly cnt probes into offs[cnt] (6.8's link info):
 * 0, or -errno (-EINVAL: another kind of link, or another count). */
int attach__multi_link_offsets(int link_fd, uint64_t *offs, uint32_t cnt);

/* A program to attach: its fd (uprobe_multi links take only that) and, for perf uprobes, its
 * libbpf object (NULL when the program came from the program cache, which needs
 * uprobe_multi: prog_cache.h). */
struct attach_prog {
	int fd;
	struct bpf_program *prog;
};

int attach_set__new(struct attach_set **s, enum attach_mech mech, struct bpf_program *entry,
		    struct bpf_program *ret);
/* Gives the entry and return programs when first needed, and the session program (fd -1:
 * none; uprobe_multi only: then it takes every site with a return); 0 or -errno. */
typedef int (*attach_progs_fn)(void *ctx, struct attach_prog *entry, struct attach_prog *ret,
			       struct attach_prog *session);
/* A set whose programs are loaded only when a library is first attached (progs(ctx) then):
 * a run that attaches nothing never loads them. */
int attach_set__new_lazy(struct attach_set **s, enum attach_mech mech, attach_progs_fn progs,
			 void *ctx);
/* Attaches every site of path (sites from alloc_table__sites). Returns 0 or -errno. */
int attach_set__library(struct attach_set *s, const char *path, const struct alloc_site *sites,
			int n);
/* Gives the program of the USDT sites (include/memtrack.h) when first needed; 0 or -errno. */
typedef int (*attach_marker_fn)(void *ctx, struct attach_prog *marker);
/* Without it attach_set__usdt does nothing. */
void attach_set__set_marker(struct attach_set *s, attach_marker_fn marker, void *ctx);
/* Attaches the marker program to n USDT sites of path, with their semaphores. 0 or -errno. */
int attach_set__usdt(struct attach_set *s, const char *path, const struct usdt_site *sites, int n);
unsigned attach_set__links(const struct attach_set *s);
/* The links made from now on belong to group (0, the default: until attach_set__free). */
void attach_set__group(struct attach_set *s, uint8_t group);
/* The allocator sites attached from now on carry gen in their cookies (probe_spec.h:
 * MT_COOKIE_GEN): they run only while stop_ctl[13] is gen. 0, the default: no generation,
 * they always run. */
void attach_set__generation(struct attach_set *s, uint32_t gen);
struct attach_taken;
/* Takes the links of every group from `from` up out of the set into *out (NULL on failure),
 * for attach_taken__close. Their count, or -errno. */
int attach_set__take_groups(struct attach_set *s, uint8_t from, struct attach_taken **out);
/* Moves the links of group `from` into group `to` (0: kept until attach_set__free). */
void attach_set__regroup(struct attach_set *s, uint8_t from, uint8_t to);
/* Closes the taken links, the last made first (each waits for the kernel's grace period: call
 * it off the event loop) and frees them; NULL-safe. */
void attach_taken__close(struct attach_taken *t);
/* The same for uprobe_multi links, with close(2) alone (no allocation, no errno: callable from
 * a child sharing our memory, tracker_glibc.c); then attach_taken__free. */
void attach_taken__close_fds(const struct attach_taken *t);
void attach_taken__free(struct attach_taken *t);
/* Detaches everything; NULL-safe. */
void attach_set__free(struct attach_set *s);

#endif
