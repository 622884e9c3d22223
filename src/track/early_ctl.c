// SPDX-License-Identifier: MIT
/* The interposer's control link, for early_links: its trampoline and program array, the child
 * process that makes the link (early_links.h says why a child), its answer, and the control
 * link a finished run offers (taken only when made on our interposer as it is now). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include "common/fds.h"
#include "common/log.h"
#include "track/attach.h"
#include "track/detacher.h"
#include "track/early_priv.h"
#include "track/elf_syms.h"

_Static_assert(sizeof(((struct early_links *)0)->ctl_offs) / sizeof(uint64_t) == MT_PRELOAD_CTL_NR,
	       "an offset per control point");

const char *const early_ctl_fns[MT_PRELOAD_CTL_NR] = {
    [MT_PRELOAD_CTL_SERVED] = "__memtrack_preload_served",
    [MT_PRELOAD_CTL_DLOPEN] = "__memtrack_preload_dlopen",
    [MT_PRELOAD_CTL_UNSERVED] = "__memtrack_preload_unserved",
};

int early__lib_stat(const char *path, struct early_lib_id *id)
{
	struct stat st;

	if (stat(path, &st))
		return -errno;
	memset(id, 0, sizeof(*id));
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	id->size = (uint64_t)st.st_size;
	id->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
	return 0;
}

/* The control points' program array and trampoline, on the early thread (no waiting): the
 * slot can be filled after the load whether or not the link is made by then. */
int early__ctl_prep(struct early_links *e, int idx)
{
	struct early_lib_id id;
	struct elf_info info;
	uint32_t zero = 0;
	int err;

	err = early__lib_stat(e->lib, &id);
	if (!err)
		err = elf_info__load(e->lib, &info);
	if (err)
		return early__fail(e, err, "the interposer's symbols");
	for (int i = 0; i < MT_PRELOAD_CTL_NR; i++) {
		e->ctl_cookies[i] = (uint64_t)i;
		if (!(e->ctl_offs[i] = elf_info__find(&info, early_ctl_fns[i])))
			err = -ENOENT;
		id.offs[i] = e->ctl_offs[i];
	}
	elf_info__free(&info);
	if (err)
		return early__fail(e, err, "the interposer's control points");
	/* offered with the link at the end (detacher.h); not having it only stops that */
	e->ctl_lib_map = bpf_map_create(BPF_MAP_TYPE_ARRAY, "mt_early_lib", 4, sizeof(id), 1, NULL);
	if (e->ctl_lib_map >= 0 && bpf_map_update_elem(e->ctl_lib_map, &zero, &id, BPF_ANY))
		early__close_fd(&e->ctl_lib_map);
	e->ctl_map = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, "mt_early_ctl", 4, 4, 1, NULL);
	if (e->ctl_map < 0)
		return early__fail(e, -errno, "a program array");
	e->ctl_prog = early__trampoline(BPF_PROG_TYPE_KPROBE, attach__uprobe_multi_type(),
					e->ctl_map, 0, idx);
	if (e->ctl_prog < 0)
		return early__fail(e, e->ctl_prog, "the uprobe trampoline");
	return 0;
}

/* Tells the interposers that a call now traps (shm_abi.h: ctl_live), once the link is made and
 * its slot filled: each side sets its flag, then calls this; whichever sees both publishes
 * (seq_cst: at least one of the two sees the other's flag). */
void early__publish_if(struct early_ctl_shared *sh, uint32_t *live)
{
	uint32_t no = 0;

	if (sh && __atomic_load_n(&sh->linked, __ATOMIC_SEQ_CST) &&
	    __atomic_load_n(&sh->filled, __ATOMIC_SEQ_CST) &&
	    __atomic_compare_exchange_n(&sh->published, &no, 1, false, __ATOMIC_SEQ_CST,
					__ATOMIC_SEQ_CST))
		early_links__publish(live);
}

void early_links__publish(uint32_t *live)
{
	if (!live)
		return;
	__atomic_store_n(live, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, live, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* The control link's child, forked from the early thread: system calls only (a fork of a
 * process with threads). Keeps ctl_prog and its socket, closes the rest (the locks memtrack's
 * descriptors hold stay memtrack's alone; no pipe of memtrack's output stays open), makes
 * the link, says so in the shared page (and
 * publishes when the slot is filled already), sends it, exits: once memtrack has gone, the
 * send fails and the exit closes it. */
static void __attribute__((noreturn))
early__ctl_child(struct early_links *e, int sock, unsigned delay_ms, const char *hold)
{
	struct early_ctl_shared *sh = e->sh;
	int keep[2] = {e->ctl_prog, sock}, fd;

	/* stdin, stdout and stderr too: a pipe reading memtrack's output must end with it */
	fds__close_all_but(0, keep, 2);
	if (delay_ms)
		usleep((useconds_t)delay_ms * 1000);
	/* the tests' hold: until the tree made `hold` (60 s at most: a failed test still ends) */
	for (int ms = 0; hold && ms < 60000 && access(hold, F_OK); ms++)
		usleep(1000);
	fd =
	    attach__multi_link(e->ctl_prog, e->lib, e->ctl_offs, e->ctl_cookies, MT_PRELOAD_CTL_NR);
	sh->end_ns = early__ns();
	if (fd < 0) {
		sh->err = fd;
	} else {
		__atomic_store_n(&sh->linked, 1, __ATOMIC_SEQ_CST);
		early__publish_if(sh, e->live);
	}
	fds__send(sock, 0, fd); /* the link, or its absence */
	_exit(0);
}

/* Starts the control link's child. 0 or -errno. */
int early__ctl_fork(struct early_links *e)
{
	/* the tests' late link: a time, or (deterministic) until the tree makes a file */
	const char *delay = getenv("MEMTRACK_TEST_CTL_DELAY_MS");
	const char *hold = getenv("MEMTRACK_TEST_CTL_HOLD");
	unsigned delay_ms = delay ? (unsigned)atoi(delay) : 0;
	int sv[2];
	pid_t pid;

	if (!e->sh || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno ?: -ENOMEM;
	pid = fork();
	if (pid < 0) {
		int err = -errno;

		close(sv[0]);
		close(sv[1]);
		return err;
	}
	if (pid == 0)
		early__ctl_child(e, sv[1], delay_ms, hold);
	close(sv[1]);
	e->ctl_sock = sv[0];
	e->ctl_pid = pid;
	return 0;
}

/* Reads the child's answer (blocking, or not): the link when it was made. 0 once read,
 * -EAGAIN when not there yet. */
static int early__ctl_recv(struct early_links *e, bool block)
{
	char byte, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *c;
	ssize_t n;
	int fd = -1;

	do
		n = recvmsg(e->ctl_sock, &msg, MSG_CMSG_CLOEXEC | (block ? 0 : MSG_DONTWAIT));
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return -EAGAIN;
	for (c = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(c), sizeof(fd));
	early__close_fd(&e->ctl_sock);
	waitpid(e->ctl_pid, NULL, 0); /* it exits right after sending (or died) */
	e->ctl_pid = 0;
	e->ctl_started = false;
	e->ctl_end_ns = e->sh->end_ns;
	e->ctl_err = fd >= 0 ? 0 : e->sh->err ? e->sh->err : -EPIPE;
	if (fd >= 0 && e->ctl_slot >= 0 && dup3(fd, e->ctl_slot, O_CLOEXEC) == e->ctl_slot) {
		close(fd);
		fd = e->ctl_slot; /* after the tracepoints' links: closed after them (early__run) */
		e->ctl_slot = -1;
	}
	e->ctl_link = fd;
	e->ctl_linked = fd >= 0;
	return 0;
}

/*
 * The offer's control link, its program array and its file's identity, opened from the taken
 * folder `dir`: kept when the link probes our interposer as it is now (early__lib_stat, the
 * offsets the link holds) and take is set, else closed. Their pins are removed either way.
 */
void early__adopt_ctl(struct early_links *e, const char *dir, bool take)
{
	static const char *const names[3] = {DETACHER_OFFER_CTL, DETACHER_OFFER_CMAP,
					     DETACHER_OFFER_LIB};
	struct early_lib_id want, had;
	uint64_t offs[MT_PRELOAD_CTL_NR];
	uint32_t zero = 0;
	int fds[3];
	bool ok;

	for (int i = 0; i < 3; i++) {
		char pin[PATH_MAX + 16];

		snprintf(pin, sizeof(pin), "%s/%s", dir, names[i]);
		fds[i] = bpf_obj_get(pin);
		unlink(pin);
	}
	/* MEMTRACK_TEST_CTL_DELAY_MS or _HOLD (the tests' late link, early__ctl_fork): never a
	 * taken one, which would be live from the start */
	if (getenv("MEMTRACK_TEST_CTL_DELAY_MS") || getenv("MEMTRACK_TEST_CTL_HOLD"))
		take = false;
	ok = take && fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0 && e->lib && e->multi &&
	     !early__lib_stat(e->lib, &want) && !bpf_map_lookup_elem(fds[2], &zero, &had) &&
	     !attach__multi_link_offsets(fds[0], offs, MT_PRELOAD_CTL_NR);
	memcpy(want.offs, had.offs, sizeof(want.offs));
	ok = ok && !memcmp(&want, &had, sizeof(want)) && !memcmp(offs, had.offs, sizeof(offs));
	if (!ok) {
		if (take && fds[0] >= 0)
			log__debug(LOG_VERBOSE,
				   "the offered control link is not on '%s' as it is now: "
				   "linking it anew",
				   e->lib ? e->lib : "(none)");
		/* kept, unused, to the end: its slot is empty, its close waits (ctl_stale) */
		for (int i = 0; i < 3; i++)
			e->ctl_stale[i] = fds[i];
		return;
	}
	e->ctl_link = fds[0];
	e->ctl_map = fds[1];
	e->ctl_lib_map = fds[2];
	memcpy(e->ctl_offs, had.offs, sizeof(e->ctl_offs));
	e->ctl_adopted = e->ctl_linked = true;
	if (e->sh)
		__atomic_store_n(&e->sh->linked, 1, __ATOMIC_SEQ_CST);
	e->ctl_end_ns = early__ns();
}

bool early_links__has_ctl(const struct early_links *e)
{
	return e->ctl_started || e->ctl_link >= 0;
}

bool early_links__ctl_pending(struct early_links *e)
{
	return e->ctl_started && early__ctl_recv(e, false) == -EAGAIN;
}

bool early_links__ctl_abandon(struct early_links *e)
{
	if (!early_links__ctl_pending(e))
		return false;
	/* its send fails once this end is closed, and its exit closes the link; reaped by
	 * early_links__close, or by init once we are gone */
	early__close_fd(&e->ctl_sock);
	e->ctl_started = false;
	e->ctl_err = -ECANCELED;
	return true;
}

int early_links__ctl_wait(struct early_links *e)
{
	if (e->ctl_started) {
		early__ctl_recv(e, true);
		if (e->ctl_err)
			log__debug(LOG_VERBOSE,
				   "cannot link the interposer's control points early "
				   "(%s): attaching them now",
				   strerror(-e->ctl_err));
	}
	if (e->ctl_link >= 0)
		return 0;
	/* failed: the caller attaches them itself */
	early__close_fd(&e->ctl_prog);
	early__close_fd(&e->ctl_map);
	return e->ctl_err ? e->ctl_err : -ENOENT;
}
