// SPDX-License-Identifier: MIT
/*
 * The interposer's side of the handoff (shm_abi.h): a shared file it cannot open by its path is
 * asked of memtrack, which sends the descriptor. Runs inside malloc during the interposer's
 * initialisation: system calls only, nothing that allocates. Bounded: each step waits
 * MT_HANDOFF_WAIT_MS at most, and a memtrack that is gone refuses the connection at once (its
 * socket went with it), so a program never hangs on a dead tracker. Only memtrack is believed
 * (pl_handoff_peer_ok), and what it sends must be a regular file; the header is then checked
 * as for a file opened by its path (preload_ring.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* struct ucred; also built into tests/targets/handoff_ask */
#endif
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include "preload/preload.h"

/* The socket's address for the rings' path (rings); its length, or 0 when it does not fit. */
static socklen_t pl_handoff_addr(struct sockaddr_un *a, const char *rings)
{
	size_t pre = sizeof(MT_HANDOFF_PREFIX) - 1, n = strlen(rings);

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (1 + pre + n > sizeof(a->sun_path))
		return 0;
	memcpy(a->sun_path + 1, MT_HANDOFF_PREFIX, pre);
	memcpy(a->sun_path + 1 + pre, rings, n);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + pre + n);
}

/* Is the socket's other end memtrack, the process the rings' name was made by
 * (/dev/shm/memtrack-PID-...)? Once memtrack is gone its name is free: a process left behind
 * must not take a file from whoever bound it since (another process of the tree, of another
 * user, knows the name from its environment). */
static int pl_handoff_peer_ok(int s, const char *rings)
{
	const char *p = strstr(rings, "/memtrack-");
	struct ucred cr;
	socklen_t len = sizeof(cr);
	long pid;

	if (!p || getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return 0;
	pid = strtol(p + 10, NULL, 10);
	return pid > 0 && cr.pid == (pid_t)pid;
}

/* The descriptor memtrack sends for path (O_RDWR, close-on-exec), or -1 (errno kept). The
 * connection, the request and the answer wait MT_HANDOFF_WAIT_MS each at most. */
int pl_handoff(const char *path)
{
	const char *rings = getenv(MT_SHM_ENV);
	struct timeval to = {MT_HANDOFF_WAIT_MS / 1000, MT_HANDOFF_WAIT_MS % 1000 * 1000};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	unsigned char answer = EIO;
	struct iovec iov = {&answer, 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	struct sockaddr_un a;
	struct cmsghdr *c;
	struct stat st;
	int saved = errno, s, fd = -1;
	socklen_t len;

	if (!rings || !*rings || !(len = pl_handoff_addr(&a, rings)))
		return -1;
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		goto out;
	if (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &to, sizeof(to)) ||
	    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &to, sizeof(to)) ||
	    connect(s, (struct sockaddr *)&a, len) || !pl_handoff_peer_ok(s, rings) ||
	    send(s, path, strlen(path), MSG_NOSIGNAL) != (ssize_t)strlen(path) ||
	    recvmsg(s, &msg, MSG_CMSG_CLOEXEC) != 1)
		goto out;
	c = CMSG_FIRSTHDR(&msg);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(c), sizeof(fd));
	if (fd >= 0 && (answer || fstat(fd, &st) || !S_ISREG(st.st_mode))) {
		close(fd); /* with a refusal, or not a file: not ours to use */
		fd = -1;
	}
out:
	if (s >= 0)
		close(s);
	errno = saved;
	return fd;
}
