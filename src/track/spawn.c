// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common/sudo.h"
#include "track/spawn.h"

static int spawn__drop_to_sudo_user(void)
{
	uid_t uid;
	gid_t gid;

	if (!sudo__invoker(&uid, &gid))
		return 0;
	if (setgroups(1, &gid) || setresgid(gid, gid, gid) || setresuid(uid, uid, uid))
		return -errno;
	return 0;
}

static void spawn__child(int go, int err_w, char *const argv[], bool drop)
{
	sigset_t none;
	char c;
	int e;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL); /* memtrack blocks signals for its signalfd */
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	if (read(go, &c, 1) != 1)
		_exit(125); /* memtrack gave up before releasing us */
	close(go);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (drop && (e = spawn__drop_to_sudo_user())) {
		e = -e;
		(void)!write(err_w, &e, sizeof(e));
		_exit(127);
	}
	execvp(argv[0], argv);
	e = errno;
	(void)!write(err_w, &e, sizeof(e));
	_exit(127);
}

int spawn__start(struct spawn *sp, char *const argv[], bool drop_privileges)
{
	int go[2] = {-1, -1}, er[2] = {-1, -1}, err;

	memset(sp, 0, sizeof(*sp));
	sp->go_fd = sp->err_fd = sp->pidfd = -1;
	if (pipe2(go, O_CLOEXEC) || pipe2(er, O_CLOEXEC)) {
		err = -errno;
		goto cleanup;
	}
	sp->pid = fork();
	if (sp->pid < 0) {
		err = -errno;
		goto cleanup;
	}
	if (sp->pid == 0) {
		close(go[1]);
		close(er[0]);
		spawn__child(go[0], er[1], argv, drop_privileges);
	}
	close(go[0]);
	close(er[1]);
	sp->go_fd = go[1];
	sp->err_fd = er[0];
	sp->pidfd = (int)syscall(SYS_pidfd_open, sp->pid, 0);
	if (sp->pidfd < 0) {
		err = -errno;
		spawn__abort(sp);
		return err;
	}
	return 0;
cleanup:
	for (int i = 0; i < 2; i++) {
		if (go[i] >= 0)
			close(go[i]);
		if (er[i] >= 0)
			close(er[i]);
	}
	return err;
}

int spawn__go(struct spawn *sp)
{
	char c = 1;

	if (write(sp->go_fd, &c, 1) != 1)
		return -errno;
	close(sp->go_fd);
	sp->go_fd = -1;
	return 0;
}

int spawn__exec_result(struct spawn *sp)
{
	int e = 0;
	ssize_t n;

	if (sp->err_fd < 0)
		return 0;
	/* EOF when exec closed the CLOEXEC pipe: the child is running (or stopped at exec). */
	do
		n = read(sp->err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(sp->err_fd);
	sp->err_fd = -1;
	return n == (ssize_t)sizeof(e) ? -e : 0;
}

int spawn__release(struct spawn *sp)
{
	int err = spawn__go(sp);

	return err ? err : spawn__exec_result(sp);
}

int spawn__resolve(const char *argv0, char *out, size_t cap)
{
	const char *path = getenv("PATH"), *p;
	struct stat st;

	if (strchr(argv0, '/')) {
		if ((size_t)snprintf(out, cap, "%s", argv0) >= cap)
			return -ENAMETOOLONG;
		return 0;
	}
	if (!path)
		path = "/bin:/usr/bin";
	for (p = path;; p++) {
		const char *end = strchrnul(p, ':');
		int len = (int)(end - p);

		/* an empty PATH entry is the current directory, as for execvp */
		if ((size_t)snprintf(out, cap, "%.*s%s%s", len, p, len ? "/" : "", argv0) < cap &&
		    !access(out, X_OK) && !stat(out, &st) && S_ISREG(st.st_mode))
			return 0;
		if (!*end)
			break;
		p = end;
	}
	return -ENOENT;
}

void spawn__abort(struct spawn *sp)
{
	if (!sp || sp->pid <= 0)
		return;
	kill(sp->pid, SIGKILL);
	waitpid(sp->pid, NULL, 0);
	sp->pid = 0;
	spawn__close(sp);
}

void spawn__close(struct spawn *sp)
{
	if (!sp)
		return;
	if (sp->go_fd >= 0)
		close(sp->go_fd);
	if (sp->err_fd >= 0)
		close(sp->err_fd);
	if (sp->pidfd >= 0)
		close(sp->pidfd);
	sp->go_fd = sp->err_fd = sp->pidfd = -1;
}
