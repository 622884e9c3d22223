// SPDX-License-Identifier: MIT
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdbool.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "common/records.h"
#include "track/shm_file.h"
#include "track/shm_source.h"
#include "track/shm_source_priv.h"
#include "track/stamp_clock.h"

#define SHM_TAIL_EVERY 256 /* publish the tail (and wake a waiting producer) this often */

static const struct mt_event *shm__rec(const struct shm_source *s, uint32_t slot, uint64_t pos)
{
	return &s->data[(size_t)slot * s->nrec + (pos & s->mask)];
}

/*
 * Publishes the slot's tail. A producer asleep on its full ring is woken only once half of it
 * is free (`final`: whatever is free at the end of a drain): woken at every publication, it
 * would write SHM_TAIL_EVERY records and sleep again, two context switches per 256 records,
 * and on a shared core the two sides would take turns instead of running side by side.
 */
static void shm__publish_tail(struct shm_source *s, struct mt_shm_slot *sl, uint64_t tail,
			      uint64_t head, bool final)
{
	__atomic_store_n(&sl->tail, tail, __ATOMIC_SEQ_CST);
	/* seq_cst pairs with the producer's waiting store then tail load: one of us sees the
	 * other's write, so no wake-up is lost */
	if (__atomic_load_n(&sl->waiting, __ATOMIC_SEQ_CST) &&
	    (final ? head - tail < s->nrec : s->nrec - (head - tail) >= s->nrec / 2))
		syscall(SYS_futex, (uint32_t *)&sl->tail, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static void shm__heap_push(struct shm_heap_ent *h, uint32_t *n, struct shm_heap_ent e)
{
	uint32_t i = (*n)++;

	while (i) {
		uint32_t p = (i - 1) / 2;

		if (h[p].ts <= e.ts)
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = e;
}

static struct shm_heap_ent shm__heap_pop(struct shm_heap_ent *h, uint32_t *n)
{
	struct shm_heap_ent top = h[0], last = h[--(*n)];
	uint32_t i = 0;

	for (;;) {
		uint32_t c = 2 * i + 1;

		if (c >= *n)
			break;
		if (c + 1 < *n && h[c + 1].ts < h[c].ts)
			c++;
		if (last.ts <= h[c].ts)
			break;
		h[i] = h[c];
		i = c;
	}
	if (*n)
		h[i] = last;
	return top;
}

/* Returns a slot whose thread is gone (released, or of an exited/exec'd image) to the pool once
 * everything it holds was delivered. */
static void shm__reclaim(struct mt_shm_slot *sl)
{
	uint32_t want = MT_SLOT_RELEASED;

	if (__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) != MT_SLOT_RELEASED ||
	    __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE) != sl->tail)
		return;
	sl->pid = 0;
	__atomic_compare_exchange_n(&sl->state, &want, MT_SLOT_FREE, false, __ATOMIC_RELEASE,
				    __ATOMIC_RELAXED);
}

/*
 * Dispatches the records of every slot (of `pid` only, when nonzero) older than `limit`, merged
 * by timestamp; a thread's own records are in order already. Returns how many.
 */
static int shm__deliver(struct shm_source *s, struct consumer *c, int32_t pid, uint64_t limit)
{
	uint32_t n = 0, hwm = __atomic_load_n(&s->hdr->next_slot, __ATOMIC_ACQUIRE);
	int delivered = 0;

	if (hwm > s->nr_slots)
		hwm = s->nr_slots;
	for (uint32_t i = 0; i < hwm; i++) {
		struct mt_shm_slot *sl = &s->slots[i];
		uint64_t head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE);
		const struct mt_event *ev;

		if (head == sl->tail)
			continue;
		if (pid && __atomic_load_n(&sl->pid, __ATOMIC_ACQUIRE) != pid)
			continue;
		ev = shm__rec(s, i, sl->tail);
		if (ev->ts < limit)
			shm__heap_push(s->heap, &n, (struct shm_heap_ent){ev->ts, i});
	}
	while (n) {
		struct shm_heap_ent e = shm__heap_pop(s->heap, &n);
		struct mt_shm_slot *sl = &s->slots[e.slot];
		uint64_t tail = sl->tail, head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE);
		const struct mt_event *ev;

		/* this slot's records until another slot's next one is older */
		uint64_t next_ts = n ? s->heap[0].ts : limit;

		if (next_ts > limit)
			next_ts = limit;
		do {
			ev = shm__rec(s, e.slot, tail);
			if (__builtin_expect(s->stacks.fn != NULL, 0) &&
			    ev->type - MT_EV_MALLOC < 4) {
				struct mt_event cp = *ev;

				cp.aux = s->stacks.fn(s->stacks.ctx, ev);
				consumer__dispatch(c, &cp);
			} else {
				consumer__dispatch_fast(c, ev);
			}
			tail++;
			delivered++;
			if (!(tail % SHM_TAIL_EVERY))
				shm__publish_tail(s, sl, tail, head, false);
			if (tail == head)
				head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE);
			ev = tail < head ? shm__rec(s, e.slot, tail) : NULL;
		} while (ev && ev->ts <= next_ts && ev->ts < limit);
		shm__publish_tail(s, sl, tail, head, false);
		if (ev && ev->ts < limit)
			shm__heap_push(s->heap, &n, (struct shm_heap_ent){ev->ts, e.slot});
	}
	/* wake whoever still waits: this drain freed what it could */
	for (uint32_t i = 0; delivered && i < hwm; i++) {
		struct mt_shm_slot *sl = &s->slots[i];

		if (__atomic_load_n(&sl->waiting, __ATOMIC_SEQ_CST))
			shm__publish_tail(s, sl, sl->tail,
					  __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE), true);
	}
	return delivered;
}

/*
 * The doorbell's thread (shm_abi.h): sleeps on the header's bell word and turns each ring into
 * an eventfd write, which wakes the event loop's epoll_wait. A futex cannot be in an epoll set,
 * and a producer cannot write memtrack's eventfd: it has no fd of ours.
 */
static void *shm__bell_main(void *arg)
{
	struct shm_source *s = arg;
	uint32_t *bell = &s->hdr->bell, seen = __atomic_load_n(bell, __ATOMIC_ACQUIRE);

	while (!__atomic_load_n(&s->bell_stop, __ATOMIC_ACQUIRE)) {
		uint32_t now;

		__atomic_store_n(&s->hdr->bell_sleeping, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(bell, __ATOMIC_SEQ_CST) == seen &&
		    !__atomic_load_n(&s->bell_stop, __ATOMIC_ACQUIRE))
			syscall(SYS_futex, bell, FUTEX_WAIT, seen, NULL, NULL, 0);
		__atomic_store_n(&s->hdr->bell_sleeping, 0, __ATOMIC_RELAXED);
		now = __atomic_load_n(bell, __ATOMIC_ACQUIRE);
		if (now != seen) {
			seen = now;
			eventfd_write(s->bell_fd, 1);
		}
	}
	return NULL;
}

/* Tells the doorbell's thread to end; joined only by join (before the mapping goes): at the
 * run's end memtrack exits without waiting for it to be scheduled (under load, tens of ms). */
static void shm__bell_stop(struct shm_source *s, bool join)
{
	if (!s->bell_started)
		return;
	if (!s->bell_stopped) {
		__atomic_store_n(&s->bell_stop, 1, __ATOMIC_RELEASE);
		__atomic_fetch_add(&s->hdr->bell, 1, __ATOMIC_SEQ_CST);
		syscall(SYS_futex, &s->hdr->bell, FUTEX_WAKE, 1, NULL, NULL, 0);
		s->bell_stopped = true;
	}
	if (!join)
		return;
	pthread_join(s->bell_thread, NULL);
	s->bell_started = false;
}

#define SHM_ORPHAN_MIN_NS 1000000ull   /* between two looks for slots of gone threads... */
#define SHM_ORPHAN_MAX_NS 128000000ull /* ...doubling up to this while they find none */

/*
 * A slot stays OWNED until its thread's key destructor gives it back (pl_release) or its
 * process's Exit or Exec record arrives. A thread whose last call comes after the destructors
 * claims one that nothing gives back: glibc's __libc_thread_freeres frees the thread's dlerror
 * buffer through free. Until 8 December 2026 a program making threads one after another, each
 * with a failed dlsym, used the slots up and lost its records as no_slot (469 of 1,100
 * threads, never more than two alive). So when fewer than a quarter of the slots are free, the
 * drained ones whose thread is gone (tgkill signal 0: ESRCH) go back too; the looks cost a
 * syscall a slot, so they space out while they find nothing. pid 0 is a claim in progress (the
 * reclaim zeroes it before FREE, the claim stores it last): never taken.
 */
static void shm__reclaim_orphans(struct shm_source *s, uint32_t hwm, uint32_t free_slots,
				 uint64_t now)
{
	uint32_t found = 0;

	if (free_slots >= s->nr_slots / 4 || now < s->orphan_ns + s->orphan_gap_ns)
		return;
	for (uint32_t i = 0; i < hwm && i < s->nr_slots; i++) {
		struct mt_shm_slot *sl = &s->slots[i];
		uint32_t want = MT_SLOT_OWNED;
		int32_t pid, tid;

		if (__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) != MT_SLOT_OWNED)
			continue;
		pid = __atomic_load_n(&sl->pid, __ATOMIC_ACQUIRE);
		tid = __atomic_load_n(&sl->tid, __ATOMIC_RELAXED);
		if (pid <= 0 || tid <= 0 || !syscall(SYS_tgkill, pid, tid, 0) || errno != ESRCH)
			continue;
		/* gone: what it wrote is all there; delivered first, at a later drain */
		if (__atomic_load_n(&sl->head, __ATOMIC_ACQUIRE) != sl->tail)
			continue;
		if (__atomic_compare_exchange_n(&sl->state, &want, MT_SLOT_RELEASED, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			shm__reclaim(sl);
			found++;
		}
	}
	s->orphan_ns = now;
	s->orphan_gap_ns = found				      ? SHM_ORPHAN_MIN_NS
			   : s->orphan_gap_ns * 2 > SHM_ORPHAN_MAX_NS ? SHM_ORPHAN_MAX_NS
								      : s->orphan_gap_ns * 2;
}

static int shm__drain(struct event_source *src, struct consumer *c)
{
	struct shm_source *s = src->priv;
	uint32_t hwm = __atomic_load_n(&s->hdr->next_slot, __ATOMIC_ACQUIRE), free_slots = 0;
	eventfd_t rung;
	int n;

	eventfd_read(s->bell_fd, &rung); /* nonblocking: rearms the doorbell's fd */

	/* The ring's drain in this round reached its end: every BPF record committed before the
	 * round began has been dispatched. Otherwise the previous bound stands. */
	if (!s->ring || s->ring->caught_up)
		s->safe_ns = c->round_ns;
	n = shm__deliver(s, c, 0, s->safe_ns);
	if (hwm > s->nr_slots)
		hwm = s->nr_slots;
	for (uint32_t i = 0; i < hwm; i++) {
		shm__reclaim(&s->slots[i]);
		free_slots += __atomic_load_n(&s->slots[i].state, __ATOMIC_RELAXED) == MT_SLOT_FREE;
	}
	shm__reclaim_orphans(s, hwm, free_slots + (s->nr_slots - hwm), c->round_ns);
	return n;
}

int shm_source__drain_all(struct shm_source *s, struct consumer *c)
{
	int n = shm__deliver(s, c, 0, UINT64_MAX);

	consumer__flush(c);
	s->src.delivered += (uint64_t)n;
	return n;
}

/* pid exec'd at ts: its images registered before are no longer what serves it. */
static void shm__end_images(struct shm_source *s, int32_t pid, uint64_t ts)
{
	struct mt_shm_proc *procs = s->procs;
	uint32_t n = __atomic_load_n(&s->hdr->nr_procs, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < n && i < MT_SHM_MAX_PROCS; i++)
		if (__atomic_load_n(&procs[i].pid, __ATOMIC_ACQUIRE) == pid && procs[i].ts < ts)
			procs[i].flags |= MT_SHM_PROC_ENDED;
}

/*
 * Before a record of a process from the ring that is not an allocator call (Rss, Fork, Exec,
 * Exit...): the process's records older than it, so that the artifact keeps its time order
 * (a Malloc, the Rss rise its touch causes, the Free, the fall). Before an Exec or Exit they
 * are all written (its threads, or those of its old image, run no more), and its slots claimed
 * before it go back once drained. Rmap records, one per page, are left to the drain: a scan of
 * the rings for each would cost more than the order is worth.
 */
static void shm__order(void *ctx, struct consumer *c, const struct mt_event *ev)
{
	struct shm_source *s = ctx;
	uint32_t hwm = __atomic_load_n(&s->hdr->next_slot, __ATOMIC_ACQUIRE);

	if (ev->type == MT_EV_RMAP)
		return;
	s->src.delivered += (uint64_t)shm__deliver(s, c, ev->pid, ev->ts);
	if (ev->type == MT_EV_EXEC)
		shm__end_images(s, ev->pid, ev->ts);
	if (!records__has(ev->type, REC_IMAGE_END))
		return; /* a marker (REC_ORDERED): the process lives on */
	for (uint32_t i = 0; i < hwm && i < s->nr_slots; i++) {
		struct mt_shm_slot *sl = &s->slots[i];
		uint32_t want = MT_SLOT_OWNED;

		if (__atomic_load_n(&sl->pid, __ATOMIC_ACQUIRE) != ev->pid || sl->claim_ns >= ev->ts)
			continue;
		__atomic_compare_exchange_n(&sl->state, &want, MT_SLOT_RELEASED, false,
					    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
		shm__reclaim(sl);
	}
}

void shm_source__order(struct shm_source *s, struct consumer *c)
{
	c->order.fn = shm__order;
	c->order.ctx = s;
}

static void shm__destroy(struct event_source *src)
{
	struct shm_source *s = src->priv;

	shm_source__close(s);
	shm__bell_stop(s, true); /* it reads the header: gone before the mapping */
	if (s->map)
		munmap(s->map, s->map_len);
	if (s->bell_fd >= 0)
		close(s->bell_fd);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s->heap);
	free(s);
}

void shm_source__close(struct shm_source *s)
{
	uint32_t hwm;

	if (!s || !s->hdr || s->closed)
		return;
	s->closed = true;
	shm__bell_stop(s, false);
	__atomic_store_n(&s->hdr->closed, 1, __ATOMIC_SEQ_CST);
	/* Only the slots ever claimed: a waiter raised next_slot when it claimed its slot, long
	 * before it waits. Reading all of them touched every slot's page (~0.24 ms for 1,024);
	 * one missed here would still wake at its 10 ms timeout and see memtrack gone. */
	hwm = __atomic_load_n(&s->hdr->next_slot, __ATOMIC_SEQ_CST);
	for (uint32_t i = 0; i < hwm && i < s->nr_slots; i++)
		if (__atomic_load_n(&s->slots[i].waiting, __ATOMIC_SEQ_CST))
			syscall(SYS_futex, (uint32_t *)&s->slots[i].tail, FUTEX_WAKE, 1, NULL, NULL,
				0);
	if (s->path[0])
		unlink(s->path);
	s->path[0] = 0;
}

int shm_source__new(struct shm_source **out, uint32_t nr_slots, uint32_t slot_records, uid_t uid,
		    gid_t gid, const struct event_source *ring)
{
	size_t procs_off = 4096, seen_off, kept_off, slots_off, data_off, size = 0;
	struct shm_source *s;
	int err;

	if (!nr_slots || !slot_records || (slot_records & (slot_records - 1)))
		return -EINVAL;
	shm_file__sweep();
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lock_fd = -1;
	s->bell_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->bell_fd < 0) {
		err = -errno;
		goto fail;
	}
	s->heap = calloc(nr_slots, sizeof(*s->heap));
	if (!s->heap) {
		err = -ENOMEM;
		goto fail;
	}
	seen_off = (procs_off + MT_SHM_MAX_PROCS * sizeof(struct mt_shm_proc) + 4095) & ~4095ul;
	kept_off = (seen_off + MT_SHM_SEEN_NR * sizeof(struct mt_shm_seen) + 4095) & ~4095ul;
	slots_off = (kept_off + MT_SHM_KEPT_MAX * sizeof(struct mt_shm_seen) + 4095) & ~4095ul;
	data_off = (slots_off + nr_slots * sizeof(struct mt_shm_slot) + 4095) & ~4095ul;
	size = data_off + (size_t)nr_slots * slot_records * sizeof(struct mt_event);
	err = shm_file__create(s->path, sizeof(s->path), "", size, uid, gid, &s->map, &s->lock_fd);
	if (err)
		goto fail;
	s->map_len = size;
	s->hdr = s->map;
	s->slots = (void *)((char *)s->map + slots_off);
	s->procs = (void *)((char *)s->map + procs_off);
	s->seen = (void *)((char *)s->map + seen_off);
	s->kept_off = kept_off;
	s->data = (void *)((char *)s->map + data_off);
	s->nr_slots = nr_slots;
	s->orphan_gap_ns = SHM_ORPHAN_MIN_NS;
	s->nrec = slot_records;
	s->mask = slot_records - 1;
	s->ring = ring;
	s->hdr->version = MT_SHM_VERSION;
	s->hdr->nr_slots = nr_slots;
	s->hdr->slot_records = slot_records;
	s->hdr->consumer_pid = getpid();
	s->hdr->procs_off = procs_off;
	s->hdr->slots_off = slots_off;
	s->hdr->data_off = data_off;
	s->hdr->seen_off = seen_off;
	s->hdr->seen_nr = MT_SHM_SEEN_NR;
	s->hdr->kept_off = kept_off;
	s->hdr->file_size = size;
	s->clock_refusal = stamp_clock__anchor(&s->hdr->tsc_anchor, &s->hdr->ns_anchor);
	__atomic_store_n(&s->hdr->magic, MT_SHM_MAGIC, __ATOMIC_RELEASE);
	s->src = (struct event_source){.name = "preload-shm",
				       .fd = s->bell_fd,
				       .drain = shm__drain,
				       .destroy = shm__destroy,
				       .priv = s};
	*out = s;
	return 0;
fail:
	if (s->path[0])
		unlink(s->path);
	if (s->map)
		munmap(s->map, size);
	if (s->bell_fd >= 0)
		close(s->bell_fd);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s->heap);
	free(s);
	return err;
}

int shm_source__start(struct shm_source *s)
{
	sigset_t all, old;
	int err;

	if (s->bell_started)
		return 0;
	/* The thread starts with every signal blocked: memtrack takes them through its signalfd,
	 * which works only while no thread can be handed them (a SIGTERM for the command must not
	 * kill memtrack through this thread). Started after the command: in a new pid namespace a
	 * thread takes a pid number too, and the command is expected to be pid 2 there. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&s->bell_thread, NULL, shm__bell_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!err)
		s->bell_started = true;
	return err;
}
