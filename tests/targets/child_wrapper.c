// SPDX-License-Identifier: MIT
/*
 * `child_wrapper MODE PROGRAM [ARGS...]`: runs PROGRAM as its child the way a tool that holds
 * a child does, and exits with the child's status (128 + N for signal N).
 *   ptrace     a minimal debugger: the child asks to be traced (PTRACE_TRACEME), stops itself,
 *              then execs; the parent continues it through every stop, passing each signal on,
 *              and reports every signal the child received ("signal", SIZE = the number) but
 *              its own first SIGSTOP and the exec's SIGTRAP event.
 *   propagate  job control passed on, as su, runuser and sudo do: waits with WUNTRACED, and when
 *              the child stops, stops itself (SIGSTOP) and, once continued, continues the
 *              child. Reports "propagated" (SIZE = the times it stopped itself) at the end.
 *   nobody     the child becomes user and group 65534 (no supplementary groups) before its
 *              exec, as runuser does; the parent waits plainly (no job control).
 *   sigfd      as script(1) does: every signal blocked, SIGCHLD read from a signalfd; a
 *              CLD_STOPPED child stops the parent too (SIGSTOP, then SIGCONT to the child), the
 *              child is reaped at CLD_EXITED/KILLED/DUMPED only, other codes are ignored.
 *              Reports "sigfd_stops" (SIZE = the child's stops it read) at the end.
 *   seccomp    the child installs a seccomp filter before its exec, as man-db's sandbox does,
 *              that refuses openat for writing (EPERM; reading is allowed, so the loader works);
 *              the parent waits plainly.
 *   shmns      the child enters a mount namespace of its own with an empty tmpfs on /dev/shm
 *              before its exec: memtrack's shared memory is not there to open; the parent
 *              waits plainly.
 *   mntns      the child enters a mount namespace of its own, the same mounts (`unshare -m`):
 *              the shared memory is still there; the parent waits plainly.
 *   login      as `su -` does: every signal blocked, job control passed on as in propagate
 *              (waitpid with WUNTRACED); the child execs with an empty environment (no
 *              LD_PRELOAD: the interposer is not loaded) once the parent sleeps in that wait
 *              (/proc/PPID/syscall says wait4), as su's child, slowed by its groups and PAM,
 *              finds it.
 *   netns      the child enters a network namespace of its own (memtrack's handoff socket,
 *              src/track/handoff.h, is not there); the parent waits plainly.
 * Modes combine with '+' (sigfd+nobody: a parent reading SIGCHLD from a queue, a child of
 * another user, as su does; nobody+netns); the child does netns, then nobody, seccomp, shmns,
 * mntns, in that order.
 */
#define _GNU_SOURCE /* unshare */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <grp.h>
#include <unistd.h>
#include <stddef.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include "expect.h"

enum {
	M_PTRACE,
	M_PROPAGATE,
	M_NOBODY,
	M_SIGFD,
	M_SECCOMP,
	M_SHMNS,
	M_MNTNS,
	M_NETNS,
	M_LOGIN,
	NR_MODES
};
static const char *const mode_names[NR_MODES] = {
    "ptrace", "propagate", "nobody", "sigfd", "seccomp", "shmns", "mntns", "netns", "login",
};

static int status_of(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int traced(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st)) /* its own SIGSTOP */
		return 2;
	if (ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_TRACEEXEC) ||
	    ptrace(PTRACE_CONT, pid, NULL, NULL))
		return 2;
	for (;;) {
		int sig;

		if (waitpid(pid, &st, 0) != pid)
			return 2;
		if (!WIFSTOPPED(st))
			return status_of(st);
		sig = WSTOPSIG(st);
		if (st >> 8 == (SIGTRAP | (PTRACE_EVENT_EXEC << 8)))
			sig = 0; /* the exec event */
		else
			mt_say_fact("signal", (uint64_t)sig);
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig))
			return 2;
	}
}

static int propagating(pid_t pid)
{
	uint64_t propagated = 0;
	int st;

	for (;;) {
		if (waitpid(pid, &st, WUNTRACED) != pid)
			return 2;
		if (WIFSTOPPED(st)) {
			propagated++;
			kill(getpid(), SIGSTOP);
			kill(pid, SIGCONT);
			continue;
		}
		mt_say_fact("propagated", propagated);
		return status_of(st);
	}
}

/* script(1)'s loop: a stop notice is taken for the child's, and its exit is reaped on its own
 * notice alone (a notice absorbed by one still queued is never read: it waits for ever) */
static int sigfd_loop(int fd, pid_t pid)
{
	uint64_t stops = 0;
	struct signalfd_siginfo si;
	int st;

	while (read(fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo != SIGCHLD)
			continue;
		if (si.ssi_code == CLD_EXITED || si.ssi_code == CLD_KILLED ||
		    si.ssi_code == CLD_DUMPED) {
			if (waitpid(pid, &st, WNOHANG) != pid)
				continue;
			mt_say_fact("sigfd_stops", stops);
			return status_of(st);
		}
		if (si.ssi_code == CLD_STOPPED) {
			stops++;
			kill(getpid(), SIGSTOP);
			kill(pid, SIGCONT);
		}
	}
	return 2;
}

/* Waits (10 s at most) until the parent sleeps in wait4: /proc/PPID/syscall starts with its
 * number while it is blocked in it. 0, or -1 when it never does. */
static int parent_waits(void)
{
	char path[64], line[32];

	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)getppid());
	for (int i = 0; i < 10000; i++) {
		FILE *f = fopen(path, "re");
		bool in = false;

		if (f) {
			in = fgets(line, sizeof(line), f) && atoi(line) == SYS_wait4 &&
			     line[strspn(line, "0123456789")] == ' ';
			fclose(f);
		}
		if (in)
			return 0;
		usleep(1000);
	}
	return -1;
}

/* openat(..., flags with O_WRONLY or O_RDWR) fails with EPERM; all else is allowed */
static int no_writes(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 3),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, O_WRONLY | O_RDWR, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | 1 /* EPERM */),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* MODE: one word, or words joined by '+' (sigfd+nobody); false when a word is unknown */
static bool parse_mode(char *mode, bool *on)
{
	for (char *w = strtok(mode, "+"); w; w = strtok(NULL, "+")) {
		size_t i = 0;

		while (i < NR_MODES && strcmp(w, mode_names[i]))
			i++;
		if (i == NR_MODES)
			return false;
		on[i] = true;
	}
	return true;
}

int main(int argc, char **argv)
{
	bool on[NR_MODES] = {0}, trace, nobody, sigfd, filtered, shmns, mntns, netns, login;
	sigset_t all;
	pid_t pid;
	int fd = -1;

	if (argc < 3 || !parse_mode(argv[1], on))
		return 2;
	trace = on[M_PTRACE];
	nobody = on[M_NOBODY];
	sigfd = on[M_SIGFD];
	filtered = on[M_SECCOMP];
	shmns = on[M_SHMNS];
	mntns = on[M_MNTNS];
	netns = on[M_NETNS];
	login = on[M_LOGIN];
	mt_expect_init();
	if (login) {
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, NULL);
	}
	if (sigfd) {
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, NULL);
		sigemptyset(&all);
		sigaddset(&all, SIGCHLD);
		fd = signalfd(-1, &all, SFD_CLOEXEC);
		if (fd < 0)
			return 2;
	}
	pid = fork();
	if (pid < 0)
		return 2;
	if (!pid) {
		if (trace && ptrace(PTRACE_TRACEME, 0, NULL, NULL))
			_exit(126);
		if (trace)
			raise(SIGSTOP);
		if (netns && unshare(CLONE_NEWNET))
			_exit(126);
		if (nobody && (setgroups(0, NULL) || setgid(65534) || setuid(65534)))
			_exit(126);
		if (filtered && no_writes())
			_exit(126);
		if (shmns && (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
			      mount("tmpfs", "/dev/shm", "tmpfs", 0, NULL)))
			_exit(126);
		if (mntns &&
		    (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)))
			_exit(126);
		if (sigfd || login) {
			sigemptyset(&all);
			sigprocmask(SIG_SETMASK, &all, NULL);
		}
		if (login && parent_waits())
			_exit(126);
		if (login)
			execve(argv[2], argv + 2, (char *[]){NULL});
		execv(argv[2], argv + 2);
		_exit(127);
	}
	if (sigfd)
		return sigfd_loop(fd, pid);
	if (nobody || filtered || shmns || mntns || netns) {
		int st;

		return waitpid(pid, &st, 0) == pid ? status_of(st) : 2;
	}
	return trace ? traced(pid) : propagating(pid);
}
