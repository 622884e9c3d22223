// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <elfutils/libdwfl.h>
#include "stacks/unwind_dwfl.h"
#include "stacks/unwind_dwfl_priv.h"
#include "stacks/unwind_step.h"

#define UW_BUCKETS     1024		 /* processes, chained */
#define UW_REREAD_NS   (20 * 1000000ull) /* a process' maps are re-read at most this often */
#define UW_CACHE_SLOTS 8192		 /* remembered unwinds, direct-mapped */

/*
 * A remembered unwind. A walk is a function of the initial registers, the modules and the stack
 * words it reads; with the same process layout, ip, sp and copy size, the same values in the
 * registers and words that decided it, a walk would read the same words and find the same
 * frames. What decided it: for the cached-rule walk, the return addresses and whatever a CFA
 * was computed from (saved callee-saved registers that hold data do not count, so a call site
 * reached again with other data in them is still remembered); for libdwfl's, every word it
 * read and every callee-saved register that points into the copy.
 * So a stack that matches an entry gets its frames without unwinding: an allocation site called
 * again from the same place costs a hash lookup and a few word compares instead of ~1 us per
 * frame.
 */
struct uw_memo {
	pid_t pid;
	uint32_t gen;
	uint64_t regs[MT_UREG_NR];
	uint32_t needed_regs; /* bit r: regs[r] must match */
	uint32_t nr_reads;
	uint32_t nr;
	uint32_t size; /* of the copy */
	uint32_t id;   /* the caller's id of these frames (unwind_result.id), 0 until it sets one */
	bool truncated;
	size_t cap; /* bytes allocated: an entry is reused, not freed, when its slot is taken */
	uint64_t (*reads)[2];
	struct unwind_frame frames[];
};

struct unwind_dwfl {
	struct uw_proc *procs[UW_BUCKETS];
	struct uw_memo *memo[UW_CACHE_SLOTS];
	uint64_t reads[UW_MAX_READS][2];
	bool needed[UW_MAX_READS];
	struct unwind_steps *steps;
	bool no_fast;		     /* every walk by libdwfl (tests compare the two) */
	struct unwind_module **mods; /* interned */
	size_t nr_mods, cap_mods;
	struct unwind_stats st;
};

static uint64_t uw_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int unwind_dwfl__new(struct unwind_dwfl **u)
{
	*u = calloc(1, sizeof(**u));
	if (!*u)
		return -ENOMEM;
	if (unwind_steps__new(&(*u)->steps)) {
		free(*u);
		*u = NULL;
		return -ENOMEM;
	}
	return 0;
}

static struct uw_proc **uw_slot(struct unwind_dwfl *u, pid_t pid)
{
	struct uw_proc **pp = &u->procs[(uint32_t)pid % UW_BUCKETS];

	while (*pp && (*pp)->pid != pid)
		pp = &(*pp)->next;
	return pp;
}

static struct uw_proc *uw_proc(struct unwind_dwfl *u, pid_t pid, bool create)
{
	struct uw_proc **pp = uw_slot(u, pid);

	if (!*pp && create) {
		*pp = calloc(1, sizeof(**pp));
		if (*pp) {
			(*pp)->pid = pid;
			(*pp)->gen = uw_proc__next_gen();
			(*pp)->reads = u->reads;
			(*pp)->needed = u->needed;
		}
	}
	return *pp;
}

/* --- remembered unwinds (struct uw_memo) ------------------------------------------------------ */

/* The callee-saved registers, the ones a walk may use as addresses */
static const int uw_addr_regs[] = {MT_UREG_BP,	MT_UREG_BX,  MT_UREG_R12,
				   MT_UREG_R13, MT_UREG_R14, MT_UREG_R15};

static inline bool uw_in_stack(const struct mt_ustack *us, uint64_t a)
{
	return a - us->regs[MT_UREG_SP] < us->size;
}

static struct uw_memo **uw_memo_slot(struct unwind_dwfl *u, const struct uw_proc *p,
				     const struct mt_ustack *us)
{
	uint64_t h = (uint64_t)p->pid * 0x9e3779b97f4a7c15ull ^ p->gen;

	h = (h ^ us->regs[MT_UREG_IP]) * 0xff51afd7ed558ccdull;
	h = (h ^ us->regs[MT_UREG_SP]) * 0xc4ceb9fe1a85ec53ull;
	return &u->memo[(h >> 40) % UW_CACHE_SLOTS];
}

static bool uw_memo_match(const struct uw_memo *m, const struct uw_proc *p,
			  const struct mt_ustack *us, const uint8_t *stack)
{
	uint64_t sp = us->regs[MT_UREG_SP];

	if (m->pid != p->pid || m->gen != p->gen || m->regs[MT_UREG_IP] != us->regs[MT_UREG_IP] ||
	    m->regs[MT_UREG_SP] != sp || m->size != us->size)
		return false;
	for (int r = 0; r < MT_UREG_NR; r++)
		if ((m->needed_regs >> r & 1) && m->regs[r] != us->regs[r])
			return false;
	/* the words are in the ring, written by another CPU: a cache miss each, fetched all at
	 * once rather than one after the other */
	for (uint32_t i = 0; i < m->nr_reads; i++)
		if (m->reads[i][0] - sp < us->size)
			__builtin_prefetch(stack + (m->reads[i][0] - sp));
	for (uint32_t i = 0; i < m->nr_reads; i++) {
		uint64_t v;

		if (!uw_proc__word(us, stack, m->reads[i][0], &v) || v != m->reads[i][1])
			return false;
	}
	return true;
}

/* Remembers the walk just made; a truncated one only serves copies of the same size (the same
 * slice: its walk ran out at the same word). True when it did. */
static bool uw_memo_put(struct uw_memo **slot, const struct uw_proc *p,
			const struct unwind_result *res)
{
	size_t fsz = res->nr * sizeof(res->frames[0]), nr_reads = 0, need;
	struct uw_memo *m = *slot;

	if (p->nr_reads > UW_MAX_READS)
		return false;
	for (uint32_t i = 0; i < p->nr_reads; i++)
		nr_reads += p->needed[i];
	need = sizeof(*m) + fsz + nr_reads * sizeof(p->reads[0]);
	/* memtrack's own mallocs trap while a run is armed: an entry's memory is reused */
	if (!m || m->cap < need) {
		free(m);
		*slot = m = malloc(need);
		if (!m)
			return false;
		m->cap = need;
	}
	m->pid = p->pid;
	m->gen = p->gen;
	memcpy(m->regs, p->us->regs, sizeof(m->regs));
	m->needed_regs = p->needed_regs;
	m->nr = res->nr;
	m->id = 0;
	m->size = p->us->size;
	m->truncated = res->truncated;
	memcpy(m->frames, res->frames, fsz);
	m->reads = (uint64_t(*)[2])((uint8_t *)m->frames + fsz);
	m->nr_reads = 0;
	for (uint32_t i = 0; i < p->nr_reads; i++)
		if (p->needed[i])
			memcpy(m->reads[m->nr_reads++], p->reads[i], sizeof(p->reads[0]));
	return true;
}

/* Reads /proc/PID/maps whole. 0, or -errno (-ENOENT/-ESRCH: the process is gone). */
static int uw_read_maps(struct unwind_dwfl *u, struct uw_proc *p)
{
	char path[64], *buf = NULL;
	size_t len = 0, cap = 0;
	int fd, err = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", p->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n;

		if (cap - len < 4096) {
			char *nb = realloc(buf, cap ? cap * 2 : 16384);

			if (!nb) {
				err = -ENOMEM;
				goto cleanup;
			}
			buf = nb;
			cap = cap ? cap * 2 : 16384;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0) {
			err = -errno;
			goto cleanup;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (!len) {
		err = -ESRCH; /* a zombie: its address space is gone */
		goto cleanup;
	}
	free(p->maps);
	p->maps = buf;
	p->maps_len = len;
	buf = NULL;
	p->read_ns = uw_now();
	u->st.maps_reads++;
	uw_proc__drop_dwfl(p);
cleanup:
	free(buf);
	close(fd);
	return err;
}

/* The module of a Dwfl_Module: one per process and file (cached in its userdata), kept until
 * the end, since remembered unwinds point at it. */
static struct unwind_module *uw_module(struct unwind_dwfl *u, Dwfl_Module *m, Dwarf_Addr bias)
{
	void **userdata;
	const char *name = dwfl_module_info(m, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	const unsigned char *bits;
	GElf_Addr at;
	int blen;
	struct unwind_module *um;

	if (*userdata)
		return *userdata;
	if (u->nr_mods == u->cap_mods) {
		size_t cap = u->cap_mods ? u->cap_mods * 2 : 64;
		struct unwind_module **v = realloc(u->mods, cap * sizeof(*v));

		if (!v)
			return NULL;
		u->mods = v;
		u->cap_mods = cap;
	}
	um = calloc(1, sizeof(*um));
	if (!um || !(um->path = strdup(name ? name : ""))) {
		free(um);
		return NULL;
	}
	blen = dwfl_module_build_id(m, &bits, &at);
	if (blen > 0 && blen <= (int)sizeof(um->build_id)) {
		memcpy(um->build_id, bits, (size_t)blen);
		um->build_id_len = (uint8_t)blen;
	}
	um->bias = bias;
	u->mods[u->nr_mods++] = um;
	*userdata = um;
	return um;
}

struct uw_walk {
	struct unwind_dwfl *u;
	Dwfl *dwfl;
	struct unwind_result *res;
};

static int uw_frame(Dwfl_Frame *state, void *arg)
{
	struct uw_walk *w = arg;
	struct unwind_frame *f;
	Dwarf_Addr pc, bias;
	Dwfl_Module *m;

	if (!dwfl_frame_pc(state, &pc, NULL) || !pc)
		return DWARF_CB_ABORT;
	if (w->res->nr == STACKFILE_MAX_FRAMES) {
		w->res->truncated = true;
		return DWARF_CB_ABORT;
	}
	f = &w->res->frames[w->res->nr++];
	/* every frame is a return address: the call is the byte before */
	m = dwfl_addrmodule(w->dwfl, pc - 1);
	f->mod = m && dwfl_module_getelf(m, &bias) ? uw_module(w->u, m, bias) : NULL;
	f->vaddr = f->mod ? pc - bias : pc;
	return DWARF_CB_OK;
}

/* A value decided the walk: remember the read (or captured register) it came from. */
static void uw_need(struct uw_proc *p, int32_t origin)
{
	if (origin >= UW_MAX_READS)
		p->nr_reads = UW_MAX_READS + 1; /* beyond what is kept: not remembered */
	else if (origin >= 0)
		p->needed[origin] = true;
	else
		p->needed_regs |= 1u << (-1 - origin);
}

/*
 * The walk with cached rules (unwind_step.h): registers as the captured ones, then each frame's
 * rule applied to them. 0 when done (res filled, maybe truncated), -EAGAIN when a frame needs
 * libdwfl (a rule the fast path does not apply, a register it cannot know).
 */
static int uw_fast_walk(struct unwind_dwfl *u, struct uw_proc *p, Dwfl *dwfl,
			struct unwind_result *res)
{
	uint64_t regs[MT_UREG_NR], next[MT_UREG_NR];
	uint32_t known = (1u << MT_UREG_NR) - 1, next_known;
	/* where each register's value came from: reads[i] (i >= 0) or captured reg (-1 - r) */
	int32_t origin[MT_UREG_NR], next_origin[MT_UREG_NR];

	memcpy(regs, p->us->regs, sizeof(regs));
	for (int r = 0; r < MT_UREG_NR; r++)
		origin[r] = -1 - r;
	memset(p->needed, 0, UW_MAX_READS * sizeof(p->needed[0]));
	p->needed_regs = 1u << MT_UREG_IP | 1u << MT_UREG_SP;
	for (bool first = true;; first = false) {
		uint64_t pc = regs[MT_UREG_IP], cfa;
		const struct unwind_rule *rule;
		struct unwind_frame *f;
		Dwarf_Addr bias;
		Dwfl_Module *m;

		if (res->nr == STACKFILE_MAX_FRAMES) {
			res->truncated = true;
			return 0;
		}
		m = dwfl_addrmodule(dwfl, pc - 1); /* a return address: the call is before it */
		if (!m || !dwfl_module_getelf(m, &bias))
			return -EAGAIN;
		f = &res->frames[res->nr++];
		f->mod = uw_module(u, m, bias);
		f->vaddr = pc - bias;
		if (!f->mod)
			return -ENOMEM;
		/* the first pc is where the caller resumes: its own rule; the others are return
		 * addresses, whose call is the instruction before */
		rule = unwind_steps__rule(u->steps, p->gen, m, first ? pc : pc - 1);
		if (!rule || !(known >> rule->cfa_reg & 1))
			return -EAGAIN;
		cfa = regs[rule->cfa_reg] + (int64_t)rule->cfa_off;
		uw_need(p, origin[rule->cfa_reg]);
		next_known = known;
		for (int r = 0; r < MT_UREG_NR; r++) {
			uint64_t at = cfa + (int64_t)rule->off[r];

			next[r] = regs[r];
			next_origin[r] = origin[r];
			if (r == MT_UREG_SP || rule->how[r] == UW_IS_CFA) {
				next[r] = r == MT_UREG_SP ? cfa : at;
				next_origin[r] = origin[rule->cfa_reg];
				next_known |= 1u << r;
			} else if (rule->how[r] == UW_UNDEF) {
				next_known &= ~(1u << r);
			} else if (rule->how[r] == UW_AT_CFA) {
				if (!uw_proc__read(p, at, &next[r])) {
					res->truncated = true; /* the copy ended */
					return 0;
				}
				next_origin[r] = (int32_t)p->nr_reads - 1;
				next_known |= 1u << r;
			}
		}
		/* the return address decides the next frame */
		uw_need(p, next_origin[MT_UREG_IP]);
		/* the outermost frame says its return address is undefined */
		if (!(next_known >> MT_UREG_IP & 1) || !next[MT_UREG_IP])
			return 0;
		if (next[MT_UREG_SP] <= regs[MT_UREG_SP])
			return -EAGAIN; /* a stack unwinds upwards: let libdwfl judge */
		memcpy(regs, next, sizeof(regs));
		memcpy(origin, next_origin, sizeof(origin));
		known = next_known;
	}
}

/* One attempt with the maps p has now. */
static int uw_walk(struct unwind_dwfl *u, struct uw_proc *p, struct unwind_result *res)
{
	struct uw_walk w = {.u = u, .res = res};
	int err;

	res->nr = 0;
	res->truncated = false;
	w.dwfl = uw_proc__dwfl(p);
	if (!w.dwfl)
		return -ESRCH;
	if (!dwfl_addrmodule(w.dwfl, p->us->regs[MT_UREG_IP] - 1))
		return -ENOENT;
	p->out_of_slice = false;
	p->nr_reads = 0;
	err = u->no_fast ? -EAGAIN : uw_fast_walk(u, p, w.dwfl, res);
	if (err != -EAGAIN) {
		u->st.fast++;
		return err;
	}
	res->nr = 0;
	res->truncated = false;
	p->out_of_slice = false;
	p->nr_reads = 0;
	dwfl_getthread_frames(w.dwfl, p->tid, uw_frame, &w);
	/* libdwfl's walk: every word it read, and every register it may have used as an address */
	memset(p->needed, 1, UW_MAX_READS * sizeof(p->needed[0]));
	p->needed_regs = 1u << MT_UREG_IP | 1u << MT_UREG_SP;
	for (size_t i = 0; i < sizeof(uw_addr_regs) / sizeof(uw_addr_regs[0]); i++)
		if (uw_in_stack(p->us, p->us->regs[uw_addr_regs[i]]))
			p->needed_regs |= 1u << uw_addr_regs[i];
	/* libdwfl ends quietly when a read fails, and reports the end of some stacks as an
	 * error: running out of the copy is what makes a stack incomplete */
	if (p->out_of_slice)
		res->truncated = true;
	return res->nr ? 0 : -ENOENT;
}

int unwind_dwfl__unwind(struct unwind_dwfl *u, pid_t pid, pid_t tid, const struct mt_ustack *us,
			const uint8_t *stack, struct unwind_result *res)
{
	struct uw_proc *p = uw_proc(u, pid, true);
	struct uw_memo **slot;
	int err;

	u->st.stacks++;
	res->id = NULL;
	if (!p) {
		err = -ENOMEM;
		goto cleanup;
	}
	/* no stop read its maps (stops not allowed, the stop's record lost): read them now,
	 * which is right while the process lives in the image the stack is from */
	if (!p->maps && !p->gone && uw_read_maps(u, p))
		p->gone = true;
	p->tid = tid;
	p->us = us;
	p->stack = stack;
	slot = uw_memo_slot(u, p, us);
	if (*slot && uw_memo_match(*slot, p, us, stack)) {
		res->nr = (*slot)->nr;
		res->truncated = (*slot)->truncated;
		memcpy(res->frames, (*slot)->frames, res->nr * sizeof(res->frames[0]));
		res->id = &(*slot)->id;
		u->st.remembered++;
		err = 0;
		goto cleanup;
	}
	err = uw_walk(u, p, res);
	/* an address outside the maps we have: a library loaded since, if the process lives
	 * (exact maps are kept up to date by the dlopen stops) */
	if (err == -ENOENT && !p->exact && !p->gone && uw_now() - p->read_ns > UW_REREAD_NS) {
		if (uw_read_maps(u, p))
			p->gone = true;
		else
			err = uw_walk(u, p, res);
		slot = uw_memo_slot(u, p, us); /* the generation changed */
	}
	if (!err && uw_memo_put(slot, p, res))
		res->id = &(*slot)->id;
cleanup:
	if (err)
		u->st.failed++;
	else {
		u->st.frames += res->nr;
		u->st.truncated += res->truncated;
	}
	return err;
}

void unwind_dwfl__refresh(struct unwind_dwfl *u, pid_t pid)
{
	struct uw_proc *p = uw_proc(u, pid, true);

	if (p && uw_read_maps(u, p) == 0) {
		p->gone = false;
		p->exact = true;
	}
}

void unwind_dwfl__fork(struct unwind_dwfl *u, pid_t parent, pid_t child)
{
	struct uw_proc *pp = uw_proc(u, parent, false), *c;

	if (!pp || !pp->maps || !(c = uw_proc(u, child, true)) || c->maps)
		return;
	c->maps = malloc(pp->maps_len);
	if (!c->maps)
		return;
	memcpy(c->maps, pp->maps, pp->maps_len);
	c->maps_len = pp->maps_len;
	c->exact = pp->exact;
}

void unwind_dwfl__exec(struct unwind_dwfl *u, pid_t pid)
{
	struct uw_proc **pp = uw_slot(u, pid), *p = *pp;

	if (!p)
		return;
	*pp = p->next;
	uw_proc__drop_dwfl(p);
	free(p->maps);
	free(p);
}

void unwind_dwfl__libdwfl_only(struct unwind_dwfl *u, bool on)
{
	u->no_fast = on;
}

const struct unwind_stats *unwind_dwfl__stats(const struct unwind_dwfl *u)
{
	return &u->st;
}

void unwind_dwfl__free(struct unwind_dwfl *u)
{
	if (!u)
		return;
	for (size_t b = 0; b < UW_BUCKETS; b++) {
		while (u->procs[b]) {
			struct uw_proc *p = u->procs[b];

			u->procs[b] = p->next;
			uw_proc__drop_dwfl(p);
			free(p->maps);
			free(p);
		}
	}
	for (size_t i = 0; i < UW_CACHE_SLOTS; i++)
		free(u->memo[i]);
	for (size_t i = 0; i < u->nr_mods; i++) {
		free(u->mods[i]->path);
		free(u->mods[i]);
	}
	free(u->mods);
	unwind_steps__free(u->steps);
	free(u);
}
