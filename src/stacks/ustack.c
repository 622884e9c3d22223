// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "stacks/unwind_dwfl.h"
#include "stacks/ustack.h"

struct ustack {
	struct unwind_dwfl *uw;
	struct stack_sink *sink; /* borrowed */
	struct ustack_stats st;
	struct unwind_result res;
	struct stack_frame frames[STACKFILE_MAX_FRAMES];
};

int ustack__new(struct ustack **u, struct stack_sink *sink)
{
	int err;

	*u = calloc(1, sizeof(**u));
	if (!*u)
		return -ENOMEM;
	err = unwind_dwfl__new(&(*u)->uw);
	if (err) {
		free(*u);
		*u = NULL;
		return err;
	}
	(*u)->sink = sink;
	return 0;
}

static uint64_t ustack__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The frames in the sink's terms: module ids (each module registered once per process, which
 * writes its load), ELF vaddrs. Returns 0 or -errno. */
static int ustack__intern(struct ustack *u, pid_t pid, uint32_t *id)
{
	const struct unwind_result *r = &u->res;

	for (uint32_t i = 0; i < r->nr; i++) {
		struct unwind_module *m = r->frames[i].mod;
		int err;

		if (m && !m->id) {
			err = stack_sink__module(u->sink, pid, m->path, m->build_id,
						 m->build_id_len, m->bias, &m->id);
			if (err)
				return err;
		}
		u->frames[i].module = m ? m->id : 0;
		u->frames[i].vaddr = r->frames[i].vaddr;
	}
	return stack_sink__stack(u->sink, u->frames, r->nr, r->truncated, id);
}

void ustack__record(void *ctx, struct mt_event *ev, const void *payload, size_t len)
{
	struct ustack *u = ctx;
	const struct mt_ustack *us = payload;
	uint64_t t0;

	if (!len) {
		if (ev->type == MT_EV_FORK)
			unwind_dwfl__fork(u->uw, (pid_t)ev->size, ev->pid);
		else if (ev->type == MT_EV_EXEC)
			unwind_dwfl__exec(u->uw, ev->pid);
		return;
	}
	ev->aux = 0;
	u->st.records++;
	u->st.bytes += sizeof(*ev) + len;
	/* the record may be longer than the copy: its stack part comes in size classes */
	if (len < sizeof(*us) || us->size > len - sizeof(*us)) {
		u->st.bad++;
		return;
	}
	t0 = ustack__now();
	if (unwind_dwfl__unwind(u->uw, ev->pid, ev->tid, us, (const uint8_t *)(us + 1), &u->res)) {
		u->st.failed++;
	} else if (u->res.id && *u->res.id) {
		ev->aux = *u->res.id; /* unwound as before: the same frames, interned then */
		u->st.truncated += u->res.truncated;
	} else if (ustack__intern(u, ev->pid, &ev->aux)) {
		ev->aux = 0; /* the sink's error is its own to report (sticky, at close) */
	} else {
		u->st.truncated += u->res.truncated;
		if (u->res.id)
			*u->res.id = ev->aux;
	}
	u->st.unwind_ns += ustack__now() - t0;
}

void ustack__read_maps(struct ustack *u, pid_t pid)
{
	if (u)
		unwind_dwfl__refresh(u->uw, pid);
}

void ustack__stats(const struct ustack *u, struct ustack_stats *st)
{
	if (!u) {
		memset(st, 0, sizeof(*st));
		return;
	}
	*st = u->st;
	st->remembered = unwind_dwfl__stats(u->uw)->remembered;
	st->maps_reads = unwind_dwfl__stats(u->uw)->maps_reads;
	st->fast = unwind_dwfl__stats(u->uw)->fast;
}

void ustack__free(struct ustack *u)
{
	if (!u)
		return;
	unwind_dwfl__free(u->uw);
	free(u);
}
