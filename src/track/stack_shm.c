// SPDX-License-Identifier: MIT
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "preload/stack_abi.h"
#include "stacks/stack_sink.h"
#include "track/shm_file.h"
#include "track/stack_shm.h"

/* A sparse file: pages cost only once written. ~336 bytes per 20-frame stack: about 800k
 * distinct stacks per run before new ones go without (counted as full). */
#define STACK_AREA_BYTES (256ull << 20)
#define STACK_DATA_OFF	 4096

struct stack_shm {
	char path[96];
	/* the file, locked while we use it (shm_file.h) */
	int lock_fd;
	void *map;
	size_t len;
	struct mt_stk_hdr *hdr;
	uint8_t *data;
	uint64_t size;
	struct stack_sink *sink;
	uint64_t bad, zero; /* refs naming no entry; records with aux 0 */
	/* allocations whose stack is cut (MT_STK_TRUNCATED), ... at a uretprobe's trampoline */
	uint64_t truncated, uretprobe;
};

int stack_shm__new(struct stack_shm **out, uid_t uid, gid_t gid)
{
	struct stack_shm *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	s->len = STACK_DATA_OFF + STACK_AREA_BYTES;
	err = shm_file__create(s->path, sizeof(s->path), "stacks-", s->len, uid, gid, &s->map,
			       &s->lock_fd);
	if (err)
		goto fail;
	s->hdr = s->map;
	s->data = (uint8_t *)s->map + STACK_DATA_OFF;
	s->size = STACK_AREA_BYTES;
	s->hdr->version = MT_STK_VERSION;
	s->hdr->max_frames = MT_STK_MAX_FRAMES;
	s->hdr->file_size = s->len;
	s->hdr->data_off = STACK_DATA_OFF;
	s->hdr->data_size = STACK_AREA_BYTES;
	__atomic_store_n(&s->hdr->magic, MT_STK_MAGIC, __ATOMIC_RELEASE);
	if (setenv(MT_STK_ENV, s->path, 1)) {
		err = -errno;
		goto fail;
	}
	*out = s;
	return 0;
fail:
	stack_shm__free(s);
	return err;
}

const char *stack_shm__path(const struct stack_shm *s)
{
	return s->path;
}

int stack_shm__fd(const struct stack_shm *s)
{
	return s->lock_fd;
}

void stack_shm__set_sink(struct stack_shm *s, struct stack_sink *sink)
{
	s->sink = sink;
}

/* The entry a ref names, when it lies inside the used area and is of the kind asked; its length
 * in *len, read once: every process of the tree writes the area (other users' too, handoff.h),
 * so what was checked is what is used. */
static struct mt_stk_entry *entry(struct stack_shm *s, uint32_t ref, uint32_t kind, uint32_t *len)
{
	uint64_t off = ((uint64_t)ref - 1) * 8,
		 used = __atomic_load_n(&s->hdr->used, __ATOMIC_ACQUIRE);
	struct mt_stk_entry *e;
	uint32_t l;

	if (used > s->size)
		used = s->size;
	if (!ref || off + sizeof(*e) > used)
		return NULL;
	e = (struct mt_stk_entry *)(s->data + off);
	l = __atomic_load_n(&e->len, __ATOMIC_RELAXED);
	if (__atomic_load_n(&e->kind, __ATOMIC_RELAXED) != kind || l < sizeof(*e) || l % 8 ||
	    off + l > used)
		return NULL;
	*len = l;
	return e;
}

static uint32_t module_id(struct stack_shm *s, uint32_t ref)
{
	uint32_t len = 0, id, bid_len;
	struct mt_stk_module *m = (struct mt_stk_module *)entry(s, ref, MT_STK_MODULE, &len);
	uint8_t bid[20];
	char path[PATH_MAX];
	size_t room;

	if (!m || len < sizeof(*m) + 1)
		return 0;
	bid_len = __atomic_load_n(&m->build_id_len, __ATOMIC_RELAXED);
	if (bid_len > sizeof(bid))
		return 0;
	if (m->e.sink_id)
		return m->e.sink_id;
	/* the path and the build id copied out, the path ended inside the entry: another
	 * process may write them meanwhile, what is used is what was checked */
	room = len - sizeof(*m);
	if (room > sizeof(path))
		return 0;
	memcpy(path, m->path, room);
	path[room - 1] = 0;
	memcpy(bid, m->build_id, bid_len);
	if (stack_sink__module(s->sink, m->pid, path, bid, bid_len, m->bias, &id))
		return 0;
	m->e.sink_id = id;
	return id;
}

uint32_t stack_shm__translate(void *ctx, const struct mt_event *ev)
{
	struct stack_shm *s = ctx;
	struct mt_stk_stack *st;
	struct stack_frame f[MT_STK_MAX_FRAMES];
	uint32_t nr, id, len = 0, raw;

	if (!ev->aux) { /* unwinder failed, area full, or not set up yet in that process */
		s->zero++;
		return 0;
	}
	st = (struct mt_stk_stack *)entry(s, ev->aux, MT_STK_STACK, &len);
	if (!st || !s->sink)
		goto bad;
	raw = __atomic_load_n(&st->e.nr, __ATOMIC_RELAXED);
	if (!st->e.sink_id) { /* the entry's first record: into the sink, once */
		nr = raw & ~MT_STK_FLAGS;
		if (nr > MT_STK_MAX_FRAMES || len != sizeof(*st) + nr * sizeof(st->f[0]))
			goto bad;
		for (uint32_t i = 0; i < nr; i++) {
			f[i].module = st->f[i].module ? module_id(s, st->f[i].module) : 0;
			if (st->f[i].module && !f[i].module)
				goto bad;
			f[i].vaddr = st->f[i].vaddr;
		}
		if (stack_sink__stack(s->sink, f, nr, raw & MT_STK_TRUNCATED, &id))
			goto bad;
		st->e.sink_id = id;
	}
	/* per allocation, not per stack */
	s->truncated += !!(raw & MT_STK_TRUNCATED);
	s->uretprobe += !!(raw & MT_STK_URETPROBE);
	return st->e.sink_id;
bad:
	s->bad++;
	return 0;
}

void stack_shm__stats(const struct stack_shm *s, struct stack_shm_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!s)
		return;
	st->full = __atomic_load_n(&s->hdr->full, __ATOMIC_RELAXED);
	st->failed = __atomic_load_n(&s->hdr->failed, __ATOMIC_RELAXED);
	st->bad = s->bad;
	st->truncated = s->truncated;
	st->uretprobe = s->uretprobe;
	/* aux 0 without the interposer counting why: made before its unwinder was set up */
	st->early = s->zero - (st->full + st->failed <= s->zero ? st->full + st->failed : s->zero);
	st->used = __atomic_load_n(&s->hdr->used, __ATOMIC_RELAXED);
	if (st->used > s->size)
		st->used = s->size;
}

void stack_shm__free(struct stack_shm *s)
{
	if (!s)
		return;
	if (s->path[0])
		unlink(s->path);
	if (s->map)
		munmap(s->map, s->len);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s);
}
