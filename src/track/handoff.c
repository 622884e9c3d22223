// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "bpf/proc.h"
#include "common/fds.h"
#include "preload/shm_abi.h"
#include "track/handoff.h"

#define HANDOFF_FILES 4

static struct {
	int lfd;   /* the listening socket; the thread closes it when it ends */
	int procs; /* the thread's own copy of the procs map's fd */
	bool listening, started;
	uint64_t netns;
	char files[HANDOFF_FILES][PATH_MAX];
	int fds[HANDOFF_FILES]; /* copies of memtrack's descriptors, closed by the thread */
	unsigned nr_files;
	uint64_t handed, refused; /* written by the thread, read after handoff__stop or for -v */
} ho = {.lfd = -1, .procs = -1};

int handoff__open(const char *rings, int fd)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t pre = sizeof(MT_HANDOFF_PREFIX) - 1, n = strlen(rings);
	struct stat st;
	int err;

	if (ho.listening)
		return -EALREADY;
	if (1 + pre + n > sizeof(a.sun_path))
		return -ENAMETOOLONG;
	memcpy(a.sun_path + 1, MT_HANDOFF_PREFIX, pre);
	memcpy(a.sun_path + 1 + pre, rings, n);
	ho.lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (ho.lfd < 0)
		return -errno;
	if (bind(ho.lfd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + pre + n)) ||
	    listen(ho.lfd, SOMAXCONN) || stat("/proc/self/ns/net", &st)) {
		err = -errno;
		close(ho.lfd);
		ho.lfd = -1;
		return err;
	}
	ho.netns = st.st_ino;
	ho.listening = true;
	err = handoff__allow(rings, fd);
	if (err) { /* a socket that cannot hand the rings would only make processes wait */
		close(ho.lfd);
		ho.lfd = -1;
		ho.listening = false;
	}
	return err;
}

int handoff__allow(const char *path, int fd)
{
	char self[64];
	int copy;

	if (!ho.listening)
		return 0; /* nothing to hand out through */
	if (ho.nr_files == HANDOFF_FILES)
		return -ENOSPC;
	if (strlen(path) >= sizeof(ho.files[0]))
		return -ENAMETOOLONG;
	/* a new open of the same file (through /proc/self/fd: never its name in /dev/shm), not a
	 * copy of fd, which holds memtrack's lock (shm_file.c): a receiver could unlock it */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	copy = open(self, O_RDWR | O_CLOEXEC);
	if (copy < 0)
		return -errno;
	/* before the thread starts, or seen by it through the release below */
	strcpy(ho.files[ho.nr_files], path);
	ho.fds[ho.nr_files] = copy;
	__atomic_store_n(&ho.nr_files, ho.nr_files + 1, __ATOMIC_RELEASE);
	return 0;
}

/* Is pid (as SO_PEERCRED gives it: numbered in our pid namespace, as the map is) of the tree? */
static bool handoff__in_tree(pid_t pid)
{
	struct mt_proc p;
	__u32 key = (__u32)pid;

	return pid > 0 && !bpf_map_lookup_elem(ho.procs, &key, &p);
}

/* memtrack's descriptor of the file the request names (sent, not closed), or -errno. */
static int handoff__file(int c)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	char path[PATH_MAX];
	unsigned nr = __atomic_load_n(&ho.nr_files, __ATOMIC_ACQUIRE);
	ssize_t n;

	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		return -errno;
	if (!handoff__in_tree(cr.pid))
		return -EPERM;
	n = recv(c, path, sizeof(path) - 1, 0);
	if (n <= 0)
		return n < 0 ? -errno : -EINVAL;
	path[n] = 0;
	for (unsigned i = 0; i < nr; i++)
		if (!strcmp(path, ho.files[i]))
			return ho.fds[i];
	return -ENOENT;
}

static void handoff__answer(int c)
{
	/* a peer that never sends holds this thread 1 s at most */
	struct timeval to = {1, 0};
	int fd;

	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &to, sizeof(to));
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &to, sizeof(to));
	fd = handoff__file(c);
	if (!fds__send(c, fd >= 0 ? 0 : (unsigned char)(-fd < 256 ? -fd : EIO), fd) && fd >= 0)
		__atomic_fetch_add(&ho.handed, 1, __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(&ho.refused, 1, __ATOMIC_RELAXED);
}

static void handoff__close_fds(void)
{
	unsigned nr = __atomic_load_n(&ho.nr_files, __ATOMIC_ACQUIRE);

	for (unsigned i = 0; i < nr; i++)
		close(ho.fds[i]);
}

static void *handoff__main(void *arg)
{
	(void)arg;
	for (;;) {
		int c = accept4(ho.lfd, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break; /* shut down (EINVAL) */
		}
		handoff__answer(c);
		close(c);
	}
	close(ho.lfd);
	close(ho.procs);
	handoff__close_fds();
	return NULL;
}

int handoff__start(int procs)
{
	sigset_t all, old;
	pthread_t th;
	int err;

	if (!ho.listening || ho.started)
		return 0;
	ho.procs = fcntl(procs, F_DUPFD_CLOEXEC, 3);
	if (ho.procs < 0)
		return -errno;
	/* every signal blocked: memtrack reads its signals from a signalfd (shm_source.c) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&th, NULL, handoff__main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		close(ho.procs);
		ho.procs = -1;
		return err;
	}
	pthread_detach(th);
	ho.started = true;
	return 0;
}

void handoff__stop(void)
{
	if (!ho.listening)
		return;
	ho.listening = false;
	/* wakes the thread's accept (EINVAL); a connect is refused from now on */
	shutdown(ho.lfd, SHUT_RDWR);
	if (!ho.started) {
		close(ho.lfd);
		ho.lfd = -1;
		handoff__close_fds();
	}
}

uint64_t handoff__handed(void)
{
	return __atomic_load_n(&ho.handed, __ATOMIC_RELAXED);
}

uint64_t handoff__refused(void)
{
	return __atomic_load_n(&ho.refused, __ATOMIC_RELAXED);
}

uint64_t handoff__netns(void)
{
	return ho.listening ? ho.netns : 0;
}
