// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "mt_exec.h"

static void mt_exec__child(const struct mt_exec_opts *o, const char *const argv[], int out)
{
	dup2(out, 1);
	dup2(out, 2);
	for (const char *const *e = o->env; e && *e; e++) {
		const char *eq = strchr(*e, '=');

		if (!eq) {
			unsetenv(*e);
			continue;
		}
		char *k = strndup(*e, (size_t)(eq - *e));

		if (!k || setenv(k, eq + 1, 1))
			_exit(126);
		free(k);
	}
	if (o->as_user && (setgroups(0, NULL) || setresgid(o->gid, o->gid, o->gid) ||
			   setresuid(o->uid, o->uid, o->uid)))
		_exit(126);
	if (o->new_pid_ns) {
		int status;
		pid_t pid;

		/* the namespace takes our next child; we pass its status on */
		if (unshare(CLONE_NEWPID))
			_exit(126);
		pid = fork();
		if (pid < 0)
			_exit(126);
		if (pid > 0) {
			if (waitpid(pid, &status, 0) < 0)
				_exit(126);
			_exit(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status));
		}
		/* the namespace's own /proc, as `unshare --mount-proc` makes it (memtrack reads
		 * processes there and refuses another namespace's) */
		if (unshare(CLONE_NEWNS) || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
			_exit(126);
	}
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

int mt_exec(const struct mt_exec_opts *o, const char *const argv[], struct mt_exec_result *r)
{
	static const struct mt_exec_opts none;
	int p[2], status, timeout_ms;
	size_t len = 0, cap = 4096;
	struct timespec t0, t;
	pid_t pid;

	o = o ? o : &none;
	timeout_ms = (o->timeout_s ? o->timeout_s : 60) * 1000;
	memset(r, 0, sizeof(*r));
	r->status = -1;
	r->output = malloc(cap);
	if (!r->output)
		return -ENOMEM;
	r->output[0] = 0;
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0)
		mt_exec__child(o, argv, p[1]);
	close(p[1]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pfd = {.fd = p[0], .events = POLLIN};
		int left, n;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = timeout_ms -
		       (int)((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&pfd, 1, left) == 0) {
			kill(pid, SIGKILL);
			break;
		}
		if (len + 1024 > cap) {
			char *b = realloc(r->output, cap * 2);

			if (!b)
				break;
			r->output = b;
			cap *= 2;
		}
		n = (int)read(p[0], r->output + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		r->output[len] = 0;
	}
	close(p[0]);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	r->status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
	return 0;
}

void mt_exec_free(struct mt_exec_result *r)
{
	if (r) {
		free(r->output);
		r->output = NULL;
	}
}
