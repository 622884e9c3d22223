// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>
#include "artifact/frame_pipe.h"
#include "common/populate.h"
#include "common/log.h"

/*
 * A slot's life: FILLING (the caller's, exactly one) -> QUEUED -> BUSY (a worker compresses it)
 * -> DONE -> written or dropped in sequence order -> FREE. All state changes under mu; the
 * buffers of a slot are touched only by whoever owns it in its current state.
 */
enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_QUEUED, SLOT_BUSY, SLOT_DONE };

struct slot {
	uint8_t *buf; /* msgpack bytes, cap bytes */
	uint8_t *zbuf; /* compressed frame, zcap bytes */
	size_t pop; /* bytes of buf mapped (frame_pipe__populate): kept across the slot's uses */
	size_t len, zlen;
	unsigned events;
	int fd; /* where it goes */
	int err; /* compression failure of this frame */
	uint64_t seq; /* submission order */
	enum slot_state state;
};

struct worker {
	struct frame_pipe *p;
	ZSTD_CCtx *cctx;
	pthread_t thread;
	bool started;
};

struct frame_pipe {
	size_t cap, zcap;
	unsigned nworkers, nslots;
	struct slot *slots;
	struct slot *cur; /* SLOT_FILLING */
	ZSTD_CCtx *cctx; /* no workers: the caller compresses */
	struct worker *workers;
	unsigned nstarted; /* threads running: 0 until the first frame worth handing off */
	unsigned active; /* threads allowed to run (<= nworkers): frame_pipe__set_active */
	pthread_mutex_t mu;
	pthread_cond_t work; /* a slot was queued, or stop */
	pthread_cond_t freed; /* a slot was written (or dropped) and freed */
	uint64_t next_seq; /* of the next submitted frame */
	uint64_t write_seq; /* of the next frame to write */
	uint64_t done_max; /* highest seq compressed so far */
	bool writing; /* a worker is in write(2): the others leave the writing to it */
	bool no_populate; /* MADV_POPULATE_WRITE refused (before Linux 5.14): pages fault in */
	bool stop, finished;
	int err; /* sticky, -errno */
	struct frame_pipe_stats st; /* bytes also read without mu: atomics */
};

/* Returns 0 or -errno; *done: bytes written, also on failure. */
static int write_all(int fd, const uint8_t *p, size_t n, size_t *done)
{
	*done = 0;
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
		*done += (size_t)w;
	}
	return 0;
}

/* One independent frame with its content size in the header (the reader relies on neither). */
static void compress_slot(ZSTD_CCtx *cctx, struct slot *s, size_t zcap)
{
	size_t z = ZSTD_compress2(cctx, s->zbuf, zcap, s->buf, s->len);

	s->err = ZSTD_isError(z) ? -EIO : 0;
	s->zlen = ZSTD_isError(z) ? 0 : z;
}

/*
 * Called with mu held (or no workers) and s compressed; writes it unless an error came first,
 * dropping mu meanwhile when unlock. A frame written in part is cut off again (best effort), so
 * the file stays whole frames: a prefix of the stream that every reader decodes to the end.
 */
static void write_slot(struct frame_pipe *p, struct slot *s, bool unlock)
{
	int rc = p->err ?: s->err;
	size_t done = 0;

	if (!rc) {
		if (unlock)
			pthread_mutex_unlock(&p->mu);
		rc = write_all(s->fd, s->zbuf, s->zlen, &done);
		if (rc && done) {
			/* shrinking needs no space; a file that cannot shrink (/dev/full) keeps
			 * its bytes */
			off_t end = lseek(s->fd, 0, SEEK_CUR);

			if (end >= (off_t)done && ftruncate(s->fd, end - (off_t)done) == 0)
				lseek(s->fd, end - (off_t)done, SEEK_SET);
			else
				log__debug(LOG_VERBOSE, "artifact: cannot cut the partial frame: %s",
					   strerror(errno));
		}
		if (unlock)
			pthread_mutex_lock(&p->mu);
	}
	if (rc) {
		if (!p->err)
			p->err = rc;
		return; /* dropped, and every frame after it: the error says so */
	}
	p->st.frames++;
	p->st.events_written += s->events;
	__atomic_store_n(&p->st.bytes, p->st.bytes + s->zlen, __ATOMIC_RELAXED);
}

/* With mu held: writes every frame that is next in line and compressed, in order. One worker
 * writes at a time; the others go back to compressing. */
static void write_ready(struct frame_pipe *p)
{
	while (!p->writing) {
		struct slot *s = NULL;

		for (unsigned i = 0; i < p->nslots; i++) {
			if (p->slots[i].state == SLOT_DONE && p->slots[i].seq == p->write_seq) {
				s = &p->slots[i];
				break;
			}
		}
		if (!s)
			return;
		p->writing = true;
		write_slot(p, s, true);
		p->writing = false;
		s->state = SLOT_FREE;
		p->write_seq++;
		pthread_cond_signal(&p->freed);
	}
}

/* The oldest queued slot, so frames are started in order; NULL when none. */
static struct slot *oldest_queued(struct frame_pipe *p)
{
	struct slot *best = NULL;

	for (unsigned i = 0; i < p->nslots; i++) {
		struct slot *s = &p->slots[i];

		if (s->state == SLOT_QUEUED && (!best || s->seq < best->seq))
			best = s;
	}
	return best;
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;
	struct frame_pipe *p = wk->p;

	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct slot *s = oldest_queued(p);

		if (!s) {
			if (p->stop)
				break;
			pthread_cond_wait(&p->work, &p->mu);
			continue;
		}
		s->state = SLOT_BUSY;
		pthread_mutex_unlock(&p->mu);
		compress_slot(wk->cctx, s, p->zcap);
		pthread_mutex_lock(&p->mu);
		if (s->seq < p->done_max)
			p->st.reordered++; /* a later frame started first and may finish first */
		if (s->seq > p->done_max)
			p->done_max = s->seq;
		s->state = SLOT_DONE;
		write_ready(p);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Buffers for slots [0, n) that have none yet (each is mapped lazily by malloc: an untouched
 * page costs no RSS, but each buffer is an mmap and a munmap). 0 or -ENOMEM. */
static int alloc_slots(struct frame_pipe *p, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct slot *s = &p->slots[i];

		if (!s->buf)
			s->buf = malloc(p->cap);
		if (!s->zbuf)
			s->zbuf = malloc(p->zcap);
		if (!s->buf || !s->zbuf)
			return -ENOMEM;
	}
	return 0;
}

static ZSTD_CCtx *new_cctx(int level)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();

	if (c && ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level))) {
		ZSTD_freeCCtx(c);
		return NULL;
	}
	return c;
}

int frame_pipe__new(struct frame_pipe **pp, int level, size_t frame_cap, unsigned workers)
{
	struct frame_pipe *p;
	int rc = 0;

	*pp = NULL;
	if (workers > FRAME_PIPE_MAX_WORKERS || !frame_cap)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->cap = frame_cap;
	p->zcap = ZSTD_compressBound(frame_cap);
	p->nworkers = p->active = workers;
	/* one filling, one per worker, one compressed and waiting for an earlier frame */
	p->nslots = workers ? workers + 2 : 1;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->freed, NULL);
	p->slots = calloc(p->nslots, sizeof(*p->slots));
	p->workers = calloc(workers ? workers : 1, sizeof(*p->workers));
	if (!p->slots || !p->workers) {
		rc = -ENOMEM;
		goto cleanup;
	}
	/* the caller's buffer; the workers' ones come with them (start_workers) */
	rc = alloc_slots(p, 1);
	if (rc)
		goto cleanup;
	/* Level errors show here, before any thread exists. */
	if (!workers) {
		p->cctx = new_cctx(level);
		if (!p->cctx) {
			rc = -EINVAL;
			goto cleanup;
		}
	}
	for (unsigned i = 0; i < workers; i++) {
		p->workers[i].p = p;
		p->workers[i].cctx = new_cctx(level);
		if (!p->workers[i].cctx) {
			rc = -EINVAL;
			goto cleanup;
		}
	}
	p->cur = &p->slots[0];
	p->cur->state = SLOT_FILLING;
	*pp = p; /* no thread yet: start_workers, at the first frame handed off */
	return 0;

cleanup:
	frame_pipe__free(p);
	return rc;
}

uint8_t *frame_pipe__buf(const struct frame_pipe *p)
{
	return p->cur->buf;
}

size_t frame_pipe__populate(struct frame_pipe *p, size_t upto)
{
	struct slot *s = p->cur;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), a, b;
	int rc;

	if (p->no_populate)
		return p->cap;
	if (upto > p->cap)
		upto = p->cap;
	if (upto <= s->pop)
		return s->pop;
	/* whole pages inside the buffer: the page it starts in is malloc's too, the one the end
	 * falls in may not be ours; a part-page faults in, as without this */
	a = ((uintptr_t)s->buf + s->pop) & ~(pg - 1);
	b = ((uintptr_t)s->buf + upto) & ~(pg - 1);
	rc = populate__pages(a, b);
	if (rc) {
		log__debug(LOG_VERBOSE, "artifact: frame buffers fault in page by page: %s",
			   strerror(-rc));
		p->no_populate = true;
		return p->cap;
	}
	s->pop = upto;
	return upto;
}

/*
 * Starts the workers not running yet, up to p->active (with signals blocked: the tracker reads
 * its own from a signalfd). Returns how many run; 0 when not one could start, and the caller
 * compresses on its own. Only on the caller's thread: nstarted and active are its to write.
 */
static unsigned start_workers(struct frame_pipe *p)
{
	sigset_t all, old;

	if (alloc_slots(p, p->nslots)) {
		log__debug(LOG_VERBOSE, "artifact: no memory for the compression buffers");
		return p->nstarted;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (unsigned i = 0; i < p->active; i++) {
		int rc;

		if (p->workers[i].started)
			continue;
		rc = pthread_create(&p->workers[i].thread, NULL, worker_main, &p->workers[i]);
		if (rc) {
			log__debug(LOG_VERBOSE, "artifact: compression thread %u: %s", i,
				   strerror(rc));
			break;
		}
		p->workers[i].started = true;
		pthread_mutex_lock(&p->mu); /* frame_pipe__stats reads it */
		p->nstarted++;
		pthread_mutex_unlock(&p->mu);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return p->nstarted;
}

int frame_pipe__set_active(struct frame_pipe *p, unsigned n)
{
	if (!p->nworkers)
		return 0; /* the caller compresses: nothing to limit */
	if (!n || p->stop)
		return -EINVAL;
	if (n > p->nworkers)
		n = p->nworkers;
	if (n < p->nstarted)
		return -EBUSY; /* a running worker is not stopped midway */
	p->active = n;
	/* running already: the others start now and take the frames queued */
	if (p->nstarted && n > p->nstarted)
		start_workers(p);
	return 0;
}

/*
 * No thread runs: s is compressed and written on the caller's thread. With workers asked for,
 * the bookkeeping is the workers' (sequence numbers, stats under mu), so that a later frame
 * handed off takes its turn after this one and frame_pipe__stats may read at any time.
 */
static int submit_inline(struct frame_pipe *p, struct slot *s)
{
	ZSTD_CCtx *cctx = p->nworkers ? p->workers[0].cctx : p->cctx; /* worker 0 not started */
	int rc;

	if (!p->err)
		compress_slot(cctx, s, p->zcap);
	if (!p->nworkers) {
		/* the historical path, without a lock: nobody else touches p */
		if (!p->err)
			write_slot(p, s, false);
		return p->err;
	}
	pthread_mutex_lock(&p->mu);
	s->seq = p->next_seq++;
	write_slot(p, s, true);
	p->write_seq++;
	rc = p->err;
	pthread_mutex_unlock(&p->mu);
	return rc; /* s stays the caller's, FILLING: the next frame's buffer */
}

/* Hands s to the workers; the caller waits for a free buffer when all are in flight. */
static int submit_queued(struct frame_pipe *p, struct slot *s)
{
	int rc;

	pthread_mutex_lock(&p->mu);
	s->seq = p->next_seq++;
	s->state = SLOT_QUEUED;
	pthread_cond_signal(&p->work);
	for (struct slot *next = NULL; !next;) {
		/* s itself may be written and free again by now: any free slot will do */
		for (unsigned i = 0; i < p->nslots && !next; i++)
			if (p->slots[i].state == SLOT_FREE)
				next = &p->slots[i];
		if (next) {
			p->cur = next;
			break;
		}
		p->st.waits++;
		pthread_cond_wait(&p->freed, &p->mu);
	}
	p->cur->state = SLOT_FILLING;
	rc = p->err;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/*
 * The workers start lazily: a short run (a few hundred records, one frame written at close)
 * never pays a thread start and two hand-offs for a frame its caller waits for anyway. Before
 * they run, a frame is compressed on the caller's thread when the caller waits for it (last),
 * or when it is the first and small (FRAME_PIPE_INLINE_MAX: cheaper here than a hand-off).
 * Any other frame starts them: a big frame, or a second one, means a stream worth the threads.
 */
static int submit(struct frame_pipe *p, int fd, size_t len, unsigned events, bool last)
{
	struct slot *s = p->cur;

	s->fd = fd;
	s->len = len;
	s->events = events;
	if (!p->nstarted &&
	    (!p->nworkers || last || (!p->next_seq && len < FRAME_PIPE_INLINE_MAX) ||
	     !start_workers(p)))
		return submit_inline(p, s);
	return submit_queued(p, s);
}

int frame_pipe__submit(struct frame_pipe *p, int fd, size_t len, unsigned events)
{
	return submit(p, fd, len, events, false);
}

int frame_pipe__submit_last(struct frame_pipe *p, int fd, size_t len, unsigned events)
{
	return submit(p, fd, len, events, true);
}

int frame_pipe__sync(struct frame_pipe *p)
{
	int rc;

	if (!p->nworkers)
		return p->err;
	pthread_mutex_lock(&p->mu);
	while (p->write_seq < p->next_seq)
		pthread_cond_wait(&p->freed, &p->mu);
	rc = p->err;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int frame_pipe__finish(struct frame_pipe *p)
{
	int rc = frame_pipe__sync(p);

	if (!p->nworkers || p->finished)
		return rc;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->nworkers; i++) {
		if (p->workers[i].started)
			pthread_join(p->workers[i].thread, NULL);
		p->workers[i].started = false;
	}
	p->finished = true;
	return rc;
}

bool frame_pipe__idle(struct frame_pipe *p)
{
	bool idle;

	if (!p->nworkers)
		return true;
	pthread_mutex_lock(&p->mu);
	idle = p->write_seq == p->next_seq;
	pthread_mutex_unlock(&p->mu);
	return idle;
}

void frame_pipe__stats(struct frame_pipe *p, struct frame_pipe_stats *st)
{
	if (p->nworkers)
		pthread_mutex_lock(&p->mu);
	*st = p->st;
	st->threads = p->nstarted;
	if (p->nworkers)
		pthread_mutex_unlock(&p->mu);
}

uint64_t frame_pipe__bytes(const struct frame_pipe *p)
{
	return __atomic_load_n(&p->st.bytes, __ATOMIC_RELAXED);
}

void frame_pipe__free(struct frame_pipe *p)
{
	if (!p)
		return;
	if (p->workers) {
		/* threads that did start (maybe not all, after a failed new) are stopped */
		pthread_mutex_lock(&p->mu);
		p->stop = true;
		pthread_cond_broadcast(&p->work);
		pthread_mutex_unlock(&p->mu);
		if (!p->finished)
			frame_pipe__finish(p);
		for (unsigned i = 0; i < p->nworkers; i++)
			ZSTD_freeCCtx(p->workers[i].cctx);
	}
	for (unsigned i = 0; p->slots && i < p->nslots; i++) {
		free(p->slots[i].buf);
		free(p->slots[i].zbuf);
	}
	ZSTD_freeCCtx(p->cctx);
	free(p->workers);
	free(p->slots);
	pthread_cond_destroy(&p->freed);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
