// SPDX-License-Identifier: MIT
/*
 * A tracked task stops itself (SIGSTOP from the BPF side) at the exec of an executable not
 * inspected yet and at the return of dlopen, and memtrack's consumer answers with SIGCONT. If
 * memtrack dies between the two, SIGKILL included, nobody answers and the task stays stopped
 * for good, its parent waiting on it. The watchdog answers instead.
 *
 * Why this design:
 * - It must survive SIGKILL of memtrack, so it is a process of its own, forked at the start
 *   (memtrack is small then, the fork copies little) and holding no fd but one end of a socket.
 *   The detacher (detacher.c) cannot do it: it exists only once the run is over.
 * - It learns of memtrack's death from EOF on that socket, which comes when memtrack and
 *   everything sharing its fds (the detacher) have closed them: no signal to miss, nothing to
 *   poll, and no PR_SET_PDEATHSIG, whose "parent" is a thread, not the process.
 * - It needs the set of held tasks. The ring buffer holds it exactly: the consumer SIGCONTs a
 *   stopped task before it moves its consumer position past the task's control record, so every
 *   stop not answered is a control record between the consumer and producer positions. The
 *   watchdog receives the ring's fd (SCM_RIGHTS) once the maps exist, and at memtrack's death
 *   reads what is left in the ring through the same consumer code, answering the stops. At
 *   worst a task memtrack answered just before dying gets a second SIGCONT (harmless after an
 *   exec, which resets the handlers).
 * - New stops must end first: the BPF side stops a task only while stop_ctl[0] is 1 and reads
 *   it after reserving the record, with a full barrier (maps.bpf.h, mt_stop_submit). The
 *   watchdog clears it, then reads the ring: each stop either saw 0 or has its record there,
 *   busy until submitted; the watchdog waits for busy records and then WATCHDOG_SETTLE_MS of
 *   empty ring. memtrack's programs are detached anyway when its last fd goes, so the tree
 *   runs on untracked.
 * It holds only the two maps, never a program or link: it keeps nothing attached. And, when
 *   the run has a program cache slot (prog_cache.h), that slot's locked folder: the slot is not
 *   another run's while the watchdog may still read the ring.
 * - A run that ends normally (the stops ended, the tree gone, the ring drained) says so with one
 *   byte (watchdog__done): the watchdog then exits at once, without mapping the ring and
 *   waiting WATCHDOG_SETTLE_MS after memtrack and the detacher are gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include "common/records.h"
#include "track/consumer.h"
#include "track/watchdog.h"

#define WATCHDOG_SETTLE_MS 20	/* of empty ring before the watchdog exits */
#define WATCHDOG_MAX_MS	   2000 /* a record busy this long belongs to no live program */
#define WATCHDOG_DONE	   'D'	/* the one message after the maps: watchdog__done */

static uint64_t watchdog__ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int watchdog__cont(void *ctx, const struct mt_event *ev)
{
	(void)ctx;
	if (records__stopped(ev))
		kill(ev->pid, SIGCONT);
	return 0;
}

/* Ends the stops, then answers every stop left in the ring. */
static void watchdog__resume(int ring_fd, int ctl_fd)
{
	__u32 zero = 0;
	__u64 off = 0;
	struct event_source *src;
	struct consumer *c = NULL;
	const volatile uint64_t *cons = MAP_FAILED, *prod = MAP_FAILED;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t now, quiet = watchdog__ms(), end = quiet + WATCHDOG_MAX_MS;

	bpf_map_update_elem(ctl_fd, &zero, &off, BPF_ANY);
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* the store above before the loads below */
	cons = mmap(NULL, page, PROT_READ, MAP_SHARED, ring_fd, 0);
	prod = mmap(NULL, page, PROT_READ, MAP_SHARED, ring_fd, page);
	c = malloc(sizeof(*c));
	if (!c || cons == MAP_FAILED || prod == MAP_FAILED)
		return;
	consumer__init(c);
	if (ringbuf_source__new(&src, ring_fd))
		return;
	consumer__add_source(c, src);
	consumer__set_control(c, watchdog__cont, NULL);
	for (;;) {
		consumer__drain(c);
		now = watchdog__ms();
		if (__atomic_load_n(cons, __ATOMIC_ACQUIRE) !=
		    __atomic_load_n(prod, __ATOMIC_ACQUIRE))
			quiet = now; /* a record still busy: its stop has been sent */
		else if (now - quiet >= WATCHDOG_SETTLE_MS)
			break;
		if (now >= end)
			break;
		usleep(1000);
	}
}

/* One byte of data and room for the fds (the two maps, the slot's folder when there is one):
 * what memtrack sends and the watchdog receives. */
struct watchdog_msg {
	char data;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(3 * sizeof(int))];
	} ctl;
	struct iovec iov;
	struct msghdr msg;
};

static struct msghdr *watchdog__msg(struct watchdog_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->data = 1;
	m->iov.iov_base = &m->data;
	m->iov.iov_len = 1;
	m->msg.msg_iov = &m->iov;
	m->msg.msg_iovlen = 1;
	m->msg.msg_control = m->ctl.buf;
	m->msg.msg_controllen = sizeof(m->ctl.buf);
	return &m->msg;
}

/* Receives the two map fds and, when sent, the slot's folder (fds[2], else -1); -1 when
 * memtrack closed the socket first. */
static int watchdog__recv(int sock, int fds[3])
{
	struct watchdog_msg m;
	struct msghdr *msg = watchdog__msg(&m);
	struct cmsghdr *h;
	ssize_t n;

	do
		n = recvmsg(sock, msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	h = n > 0 ? CMSG_FIRSTHDR(msg) : NULL;
	if (!h || h->cmsg_type != SCM_RIGHTS)
		return -1;
	fds[2] = -1;
	if (h->cmsg_len == CMSG_LEN(3 * sizeof(int)))
		memcpy(fds, CMSG_DATA(h), 3 * sizeof(int));
	else if (h->cmsg_len == CMSG_LEN(2 * sizeof(int)))
		memcpy(fds, CMSG_DATA(h), 2 * sizeof(int));
	else
		return -1;
	return 0;
}

static void watchdog__main(int sock)
{
	int fds[3], null = open("/dev/null", O_RDWR | O_CLOEXEC);
	sigset_t none;
	char buf[64];
	ssize_t n;

	/* Nothing of memtrack's: a caller reading memtrack's output sees EOF at memtrack's exit,
	 * and the command's pipes (the spawn's go pipe) are not held open. */
	if (null >= 0)
		for (int fd = 0; fd < 3; fd++)
			dup2(null, fd);
	close_range(3, sock - 1, 0);
	close_range(sock + 1, ~0u, 0);
	/* its own session: a terminal's ^C, ^\ or hang-up, meant for memtrack (which forwards
	 * them), does not reach it */
	setsid();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, "memtrack-watch", 0, 0, 0);
	if (watchdog__recv(sock, fds))
		_exit(0); /* memtrack ended before its maps existed: no stop was possible */
	do
		n = read(sock, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n > 0 && buf[0] == WATCHDOG_DONE)
		_exit(0); /* watchdog__done: nothing left to answer */
	watchdog__resume(fds[0], fds[1]);
	_exit(0);
}

int watchdog__start(struct watchdog *w)
{
	int sv[2];

	w->pid = 0;
	w->sock = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		return -errno;
	w->pid = fork();
	if (w->pid < 0) {
		int err = -errno;

		close(sv[0]);
		close(sv[1]);
		w->pid = 0;
		return err;
	}
	if (w->pid == 0) {
		close(sv[0]);
		watchdog__main(sv[1]);
	}
	close(sv[1]);
	w->sock = sv[0];
	return 0;
}

int watchdog__arm(struct watchdog *w, int ring_fd, int stop_ctl_fd, int hold_fd)
{
	struct watchdog_msg m;
	struct msghdr *msg = watchdog__msg(&m);
	struct cmsghdr *h = CMSG_FIRSTHDR(msg);
	int fds[3] = {ring_fd, stop_ctl_fd, hold_fd}, nr = hold_fd >= 0 ? 3 : 2;
	ssize_t n;

	if (w->sock < 0)
		return -EBADF;
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(nr * sizeof(int));
	memcpy(CMSG_DATA(h), fds, nr * sizeof(int));
	msg->msg_controllen = CMSG_SPACE(nr * sizeof(int));
	do
		n = sendmsg(w->sock, msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : n < 0 ? -errno : -EIO;
}

void watchdog__done(struct watchdog *w)
{
	char c = WATCHDOG_DONE;

	if (w && w->sock >= 0)
		(void)!send(w->sock, &c, 1, MSG_NOSIGNAL);
}

void watchdog__close(struct watchdog *w)
{
	if (w && w->sock >= 0) {
		close(w->sock);
		w->sock = -1;
	}
}
