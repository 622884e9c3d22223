// SPDX-License-Identifier: MIT
/* What the interposer's shared file says, for memtrack: its drop and wait counters, the
 * processes registered, the tables of files (seen in this run, kept from earlier ones); and
 * the source's settings. The rings themselves: shm_source.c. */
#include <errno.h>
#include <string.h>
#include "track/inert_cache.h"
#include "track/shm_source.h"
#include "track/shm_source_priv.h"

uint64_t shm_source__drops(const struct shm_source *s, uint64_t drops[MT_SHM_DROP_NR])
{
	uint64_t total = 0;

	for (int i = 0; i < MT_SHM_DROP_NR; i++) {
		drops[i] = s ? __atomic_load_n(&s->hdr->drops[i], __ATOMIC_RELAXED) : 0;
		total += drops[i];
	}
	return total;
}

void shm_source__waits(const struct shm_source *s, uint64_t *waits, uint64_t *ns)
{
	*waits = s ? __atomic_load_n(&s->hdr->waits, __ATOMIC_RELAXED) : 0;
	*ns = s ? __atomic_load_n(&s->hdr->wait_ns, __ATOMIC_RELAXED) : 0;
}

int shm_source__seen_add(struct shm_source *s, const struct mt_shm_seen *f)
{
	struct mt_shm_seen *t = s ? s->seen : NULL;
	uint32_t i = mt_shm_seen_slot(f->dev, f->ino, MT_SHM_SEEN_NR);

	if (!t || !f->ino)
		return -EINVAL;
	/* probes stay short; a file not listed only costs its stop */
	if (s->nr_seen >= MT_SHM_SEEN_NR / 4 * 3)
		return -ENOSPC;
	/* bounded: the tree can write the table too */
	for (uint32_t n = 0; n < MT_SHM_SEEN_NR; n++, i = (i + 1) & (MT_SHM_SEEN_NR - 1)) {
		uint64_t have = __atomic_load_n(&t[i].ino, __ATOMIC_RELAXED);

		if (have == f->ino && mt_shm_seen_same(&t[i], f))
			return 0;
		if (!have) {
			t[i] = (struct mt_shm_seen){f->dev, 0, f->size, f->mtime_ns, f->ctime_ns};
			__atomic_store_n(&t[i].ino, f->ino, __ATOMIC_RELEASE);
			s->nr_seen++;
			return 0;
		}
	}
	return -ENOSPC;
}

void shm_source__keep_load(struct shm_source *s)
{
	uint32_t nr = 0;

	if (!s || inert_cache__copy(s->lock_fd, (off_t)s->kept_off, MT_SHM_KEPT_MAX, &nr))
		return;
	__atomic_store_n(&s->hdr->kept_nr, nr, __ATOMIC_RELEASE);
}

uint64_t shm_source__dl_judged(const struct shm_source *s)
{
	return s ? __atomic_load_n(&s->hdr->dl_judged, __ATOMIC_RELAXED) : 0;
}

int shm_source__proc_flags(const struct shm_source *s, int32_t pid)
{
	const struct mt_shm_proc *procs;
	uint32_t n;
	int flags = -1;

	if (!s)
		return -1;
	procs = s->procs;
	n = __atomic_load_n(&s->hdr->nr_procs, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n && i < MT_SHM_MAX_PROCS; i++)
		if (procs[i].pid == pid && !(procs[i].flags & MT_SHM_PROC_ENDED))
			flags = (int)procs[i].flags; /* the last image's */
	return flags;
}

uint32_t *shm_source__ctl_live(struct shm_source *s)
{
	return s ? &s->hdr->ctl_live : NULL;
}

uint64_t shm_source__unserved(const struct shm_source *s)
{
	return s ? __atomic_load_n(&s->hdr->unserved, __ATOMIC_RELAXED) : 0;
}

void shm_source__each_proc(const struct shm_source *s,
			   void (*fn)(void *ctx, int32_t pid, uint64_t ts, uint32_t flags),
			   void *ctx)
{
	const struct mt_shm_proc *procs;
	uint32_t n;

	if (!s)
		return;
	procs = s->procs;
	n = __atomic_load_n(&s->hdr->nr_procs, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n && i < MT_SHM_MAX_PROCS; i++) {
		int32_t pid = __atomic_load_n(&procs[i].pid, __ATOMIC_ACQUIRE);

		if (pid > 0) /* stored last: the entry is complete */
			fn(ctx, pid, procs[i].ts, procs[i].flags);
	}
}

uint32_t shm_source__each_served(const struct shm_source *s,
				 void (*fn)(void *ctx, int32_t pid, uint64_t ts, uint32_t flags),
				 void *ctx)
{
	const struct mt_shm_proc *procs;
	uint32_t n, nr = 0;

	if (!s)
		return 0;
	procs = s->procs;
	n = __atomic_load_n(&s->hdr->nr_procs, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < n && i < MT_SHM_MAX_PROCS; i++) {
		int32_t pid = __atomic_load_n(&procs[i].pid, __ATOMIC_ACQUIRE);

		/* pid is stored last: an entry still being written is not a served call yet */
		if (pid > 0 && !(procs[i].flags & MT_SHM_PROC_OFF) &&
		    (procs[i].flags & MT_SHM_PROC_LIBC)) {
			fn(ctx, pid, procs[i].ts, procs[i].flags);
			nr++;
		}
	}
	return nr;
}

void shm_source__set_stacks(struct shm_source *s,
			    uint32_t (*fn)(void *ctx, const struct mt_event *ev), void *ctx)
{
	s->stacks.fn = fn;
	s->stacks.ctx = ctx;
}

void shm_source__set_pidns(struct shm_source *s, uint64_t ino)
{
	s->hdr->pidns_ino = ino;
}

void shm_source__set_ring(struct shm_source *s, const struct event_source *ring)
{
	s->ring = ring;
}

const char *shm_source__clock_refusal(const struct shm_source *s)
{
	return s->clock_refusal;
}

const char *shm_source__path(const struct shm_source *s)
{
	return s->path;
}

int shm_source__fd(const struct shm_source *s)
{
	return s->lock_fd;
}

struct event_source *shm_source__src(struct shm_source *s)
{
	return &s->src;
}
