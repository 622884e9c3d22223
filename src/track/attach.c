// SPDX-License-Identifier: MIT
/*
 * uprobe_multi links through bpf(BPF_LINK_CREATE) directly: Debian 12's libbpf 1.1 has no API
 * for them although the kernel does. Perf-event uprobes through libbpf are the fallback.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include "bpf/probe_spec.h"
#include "common/log.h"
#include "track/attach.h"

#define MT_BPF_TRACE_UPROBE_MULTI     48 /* enum bpf_attach_type, Linux 6.6 */
#define MT_BPF_TRACE_UPROBE_SESSION   57 /* Linux 6.13 */
#define MT_BPF_F_UPROBE_MULTI_RETURN 1u

/* union bpf_attr's link_create as of 6.6, with its uprobe_multi member. */
struct mt_link_create_attr {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t um_flags;
	uint32_t pid;
	uint32_t pad;
};

/* struct bpf_link_info with its uprobe_multi member, as of 6.8 (BPF_LINK_TYPE_UPROBE_MULTI,
 * 12): the header's copy (6.1) has neither. The kernel fills what fits in our length. */
#define MT_BPF_LINK_TYPE_UPROBE_MULTI 12
struct mt_link_info_um {
	uint32_t type;
	uint32_t id;
	uint32_t prog_id;
	uint32_t pad;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t path_size;
	uint32_t count;
	uint32_t flags;
	uint32_t pid;
};

struct attach_set {
	enum attach_mech mech;
	struct attach_prog entry, ret; /* fd -1 until progs gives them */
	struct attach_prog session;    /* fd -1: none (a kernel before 6.13, perf uprobes) */
	attach_progs_fn progs;
	void *progs_ctx;
	struct attach_prog marker; /* USDT sites of include/memtrack.h; fd -1 until needed */
	attach_marker_fn marker_fn; /* gives it; NULL: USDT sites are not attached */
	void *marker_ctx;
	int *fds; /* uprobe_multi link fds */
	struct bpf_link **links; /* perf uprobes */
	uint8_t *group;		 /* each link's (attach_set__group): 0 for good */
	uint8_t cur_group;
	uint32_t cur_gen; /* in the cookies of the links made now (attach_set__generation) */
	unsigned nr, cap;
};

/* Links taken out of a set (attach_set__take_group), to close off the caller's thread. */
struct attach_taken {
	int *fds;
	struct bpf_link **links;
	unsigned nr;
};

int attach__uprobe_multi_type(void)
{
	return MT_BPF_TRACE_UPROBE_MULTI;
}

int attach__uprobe_session_type(void)
{
	return MT_BPF_TRACE_UPROBE_SESSION;
}

enum link_kind { LINK_ENTRY, LINK_RETURN, LINK_SESSION };

static int attach__link_create_ref(int prog_fd, const char *path, const uint64_t *offs,
				   const uint64_t *ref_ctrs, const uint64_t *cookies, uint32_t cnt,
				   enum link_kind kind)
{
	struct mt_link_create_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.prog_fd = prog_fd;
	a.attach_type =
	    kind == LINK_SESSION ? MT_BPF_TRACE_UPROBE_SESSION : MT_BPF_TRACE_UPROBE_MULTI;
	a.path = (uint64_t)(uintptr_t)path;
	a.offsets = (uint64_t)(uintptr_t)offs;
	a.ref_ctr_offsets = (uint64_t)(uintptr_t)ref_ctrs;
	a.cookies = (uint64_t)(uintptr_t)cookies;
	a.cnt = cnt;
	a.um_flags = kind == LINK_RETURN ? MT_BPF_F_UPROBE_MULTI_RETURN : 0;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : fd;
}

static int attach__link_create(int prog_fd, const char *path, const uint64_t *offs,
			       const uint64_t *cookies, uint32_t cnt, enum link_kind kind)
{
	return attach__link_create_ref(prog_fd, path, offs, NULL, cookies, cnt, kind);
}

int attach__multi_link(int prog_fd, const char *path, const uint64_t *offs, const uint64_t *cookies,
		       uint32_t cnt)
{
	return attach__link_create(prog_fd, path, offs, cookies, cnt, LINK_ENTRY);
}

int attach__multi_link_offsets(int link_fd, uint64_t *offs, uint32_t cnt)
{
	struct mt_link_info_um info;
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	info.offsets = (uint64_t)(uintptr_t)offs;
	info.count = cnt;
	if (bpf_obj_get_info_by_fd(link_fd, &info, &len))
		return -errno;
	if (info.type != MT_BPF_LINK_TYPE_UPROBE_MULTI || info.count != cnt)
		return -EINVAL;
	return 0;
}

/* Does this kernel make links of that kind? A two-instruction program loaded for it. */
static bool attach__probe_link(enum link_kind kind, uint32_t type)
{
	struct bpf_insn insns[] = {
		{.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
		{.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = type);
	uint64_t off = 0;
	int prog, link;

	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "mt_probe", "GPL", insns, 2, &opts);
	if (prog < 0)
		return false;
	/* A kernel with these links parses the attr and refuses a path that is not a regular
	 * file with EBADF; one without them refuses the attach type itself with EINVAL. Nothing
	 * is attached either way, so there is no detach to pay. */
	link = attach__link_create(prog, "/", &off, NULL, 1, kind);
	if (link >= 0)
		close(link);
	close(prog);
	return link == -EBADF;
}

bool attach__probe_uprobe_multi(void)
{
	return attach__probe_link(LINK_ENTRY, MT_BPF_TRACE_UPROBE_MULTI);
}

bool attach__probe_uprobe_session(void)
{
	return attach__probe_link(LINK_SESSION, MT_BPF_TRACE_UPROBE_SESSION);
}

void attach__session_autoload(struct bpf_program *prog)
{
	if (attach__probe_uprobe_session())
		bpf_program__set_expected_attach_type(prog, MT_BPF_TRACE_UPROBE_SESSION);
	else
		bpf_program__set_autoload(prog, false);
}

int attach_set__new(struct attach_set **s, enum attach_mech mech, struct bpf_program *entry,
		    struct bpf_program *ret)
{
	*s = calloc(1, sizeof(**s));
	if (!*s)
		return -ENOMEM;
	(*s)->mech = mech;
	(*s)->entry =
	    (struct attach_prog){.fd = entry ? bpf_program__fd(entry) : -1, .prog = entry};
	(*s)->ret = (struct attach_prog){.fd = ret ? bpf_program__fd(ret) : -1, .prog = ret};
	(*s)->session.fd = -1;
	(*s)->marker.fd = -1;
	return 0;
}

int attach_set__new_lazy(struct attach_set **s, enum attach_mech mech, attach_progs_fn progs,
			 void *ctx)
{
	int err = attach_set__new(s, mech, NULL, NULL);

	if (!err) {
		(*s)->progs = progs;
		(*s)->progs_ctx = ctx;
	}
	return err;
}

static int attach_set__grow(struct attach_set *s, unsigned more)
{
	unsigned ncap;
	void *p;

	if (s->nr + more <= s->cap)
		return 0;
	ncap = (s->cap + more) * 2;
	p = realloc(s->fds, ncap * sizeof(*s->fds));
	if (!p)
		return -ENOMEM;
	s->fds = p;
	p = realloc(s->links, ncap * sizeof(*s->links));
	if (!p)
		return -ENOMEM;
	s->links = p;
	p = realloc(s->group, ncap * sizeof(*s->group));
	if (!p)
		return -ENOMEM;
	s->group = p;
	s->cap = ncap;
	return 0;
}

/* Records a link (its fd, or its perf link) in the set's current group. */
static void attach_set__push(struct attach_set *s, int fd, struct bpf_link *l)
{
	s->fds[s->nr] = fd;
	s->links[s->nr] = l;
	s->group[s->nr++] = s->cur_group;
}

void attach_set__group(struct attach_set *s, uint8_t group)
{
	s->cur_group = group;
}

void attach_set__generation(struct attach_set *s, uint32_t gen)
{
	s->cur_gen = gen;
}

void attach_set__regroup(struct attach_set *s, uint8_t from, uint8_t to)
{
	for (unsigned i = 0; i < s->nr; i++)
		if (s->group[i] == from)
			s->group[i] = to;
}

int attach_set__take_groups(struct attach_set *s, uint8_t from, struct attach_taken **out)
{
	struct attach_taken *t;
	unsigned kept = 0;

	*out = NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fds = calloc(s->nr ? s->nr : 1, sizeof(*t->fds));
	t->links = calloc(s->nr ? s->nr : 1, sizeof(*t->links));
	if (!t->fds || !t->links) {
		attach_taken__close(t);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < s->nr; i++) {
		if (s->group[i] && s->group[i] >= from) { /* never group 0 */
			t->fds[t->nr] = s->fds[i];
			t->links[t->nr++] = s->links[i];
			continue;
		}
		s->fds[kept] = s->fds[i];
		s->links[kept] = s->links[i];
		s->group[kept++] = s->group[i];
	}
	s->nr = kept;
	*out = t;
	return (int)t->nr;
}

void attach_taken__close_fds(const struct attach_taken *t)
{
	for (unsigned i = t->nr; i-- > 0;)
		if (t->fds[i] >= 0 && !t->links[i])
			syscall(SYS_close, t->fds[i]);
}

void attach_taken__free(struct attach_taken *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < t->nr; i++) /* perf links, which close_fds leaves */
		if (t->links[i])
			bpf_link__destroy(t->links[i]);
	free(t->fds);
	free(t->links);
	free(t);
}

void attach_taken__close(struct attach_taken *t)
{
	if (!t)
		return;
	/* the reverse of their making: a file's entry link before its return (or session) link,
	 * so that a call whose entry ran keeps its return while the entry's link closes */
	for (unsigned i = t->nr; i-- > 0;) {
		if (t->links && t->links[i])
			bpf_link__destroy(t->links[i]);
		else if (t->fds && t->fds[i] >= 0)
			close(t->fds[i]);
	}
	free(t->fds);
	free(t->links);
	free(t);
}

/*
 * ATTACH_RETURNS_FIRST: a library's return probes go in before its entry probes. A process
 * running meanwhile (not stopped: traced, a SIGCHLD-queue parent's child) may enter a call
 * between the two: with the entry first, its entry raised the thread's depth and no return
 * ever lowered it, and every later call of that thread counted as nested, unrecorded and
 * unsaid (`su nobody -c sh ...`: sh's 216 allocations read 170 in 1 run of 4); with the return
 * first, that one call's return finds no entry: drops.unmatched_return, counted.
 *
 * With a session program (mt_alloc_session) every site with a return is one session link's
 * (entry and return sit at the same place, sites[i].probe), the others one entry link's. A
 * session's return is prepared at its entry: a call that began before the link has neither (no race
 * to order).
 */
static uint64_t attach_set__cookie(const struct attach_set *s, const struct alloc_site *site)
{
	return (uint64_t)site->spec | (uint64_t)s->cur_gen << MT_COOKIE_GEN_SHIFT;
}

static int attach_set__multi(struct attach_set *s, const char *path, const struct alloc_site *sites,
			     int n)
{
	uint64_t offs[128], cookies[128];
	bool session = s->session.fd >= 0;
	int err = 0;

	/* returns first (ATTACH_RETURNS_FIRST) */
	for (int dir = 1; dir >= 0; dir--) {
		enum link_kind kind = dir ? (session ? LINK_SESSION : LINK_RETURN) : LINK_ENTRY;
		int prog = dir ? (session ? s->session.fd : s->ret.fd) : s->entry.fd;
		uint32_t cnt = 0;
		int fd;

		for (int i = 0; i < n && cnt < 128; i++) {
			if ((dir && !sites[i].ret) || (!dir && !sites[i].entry) ||
			    (!dir && session && sites[i].ret))
				continue;
			offs[cnt] = sites[i].probe;
			cookies[cnt++] = attach_set__cookie(s, &sites[i]);
		}
		if (!cnt)
			continue;
		fd = attach__link_create(prog, path, offs, cookies, cnt, kind);
		if (fd < 0) {
			err = fd;
			break;
		}
		attach_set__push(s, fd, NULL);
	}
	return err;
}

static int attach_set__perf(struct attach_set *s, const char *path, const struct alloc_site *sites,
			    int n)
{
	if (!s->entry.prog || !s->ret.prog)
		return -EINVAL; /* kept programs (prog_cache.h): uprobe_multi links only */
	for (int dir = 1; dir >= 0; dir--) { /* returns first (ATTACH_RETURNS_FIRST) */
		for (int i = 0; i < n; i++) {
			LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = dir == 1,
				    .bpf_cookie = attach_set__cookie(s, &sites[i]));
			struct bpf_link *l;

			if ((dir && !sites[i].ret) || (!dir && !sites[i].entry))
				continue;
			l = bpf_program__attach_uprobe_opts(dir ? s->ret.prog : s->entry.prog, -1,
							    path, sites[i].probe, &o);
			if (!l)
				return -errno;
			attach_set__push(s, -1, l);
		}
	}
	return 0;
}

int attach_set__library(struct attach_set *s, const char *path, const struct alloc_site *sites,
			int n)
{
	int err = attach_set__grow(s, 2 * (unsigned)n + 2);

	if (!err && n > 0 && s->entry.fd < 0)
		err = s->progs ? s->progs(s->progs_ctx, &s->entry, &s->ret, &s->session) : -EINVAL;
	if (err)
		return err;
	if (s->mech == ATTACH_UPROBE_MULTI)
		return attach_set__multi(s, path, sites, n);
	return attach_set__perf(s, path, sites, n);
}

void attach_set__set_marker(struct attach_set *s, attach_marker_fn marker, void *ctx)
{
	s->marker_fn = marker;
	s->marker_ctx = ctx;
}

/* Every site with its semaphore (the kernel raises it in each process mapping the file, now
 * and at later mmaps, and lowers it at detach): the program's probes run only while attached. */
int attach_set__usdt(struct attach_set *s, const char *path, const struct usdt_site *sites, int n)
{
	uint64_t offs[64], refs[64], cookies[64];
	int err, fd;

	if (!s->marker_fn || n <= 0)
		return 0;
	if (s->marker.fd < 0) {
		err = s->marker_fn(s->marker_ctx, &s->marker);
		if (err)
			return err;
	}
	if (n > 64)
		n = 64; /* a program has three macros; more sites than this are inlined copies */
	err = attach_set__grow(s, (unsigned)n);
	if (err)
		return err;
	if (s->mech == ATTACH_UPROBE_MULTI) {
		for (int i = 0; i < n; i++) {
			offs[i] = sites[i].offset;
			refs[i] = sites[i].ref_ctr;
			cookies[i] = sites[i].cookie;
		}
		fd = attach__link_create_ref(s->marker.fd, path, offs, refs, cookies, (uint32_t)n,
					     false);
		if (fd < 0)
			return fd;
		attach_set__push(s, fd, NULL);
		return 0;
	}
	if (!s->marker.prog)
		return -EINVAL; /* a kept program (prog_cache.h): uprobe_multi links only */
	for (int i = 0; i < n; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .ref_ctr_offset = sites[i].ref_ctr,
			    .bpf_cookie = sites[i].cookie);
		struct bpf_link *l =
		    bpf_program__attach_uprobe_opts(s->marker.prog, -1, path, sites[i].offset, &o);

		if (!l)
			return -errno;
		attach_set__push(s, -1, l);
	}
	return 0;
}

unsigned attach_set__links(const struct attach_set *s)
{
	return s ? s->nr : 0;
}

void attach_set__free(struct attach_set *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < s->nr; i++) {
		if (s->links[i])
			bpf_link__destroy(s->links[i]);
		else if (s->fds[i] >= 0)
			close(s->fds[i]);
	}
	free(s->fds);
	free(s->links);
	free(s->group);
	free(s);
}
