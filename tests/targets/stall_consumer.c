// SPDX-License-Identifier: MIT
/*
 * `stall_consumer [PAIRS [signal]]`: stops its parent (memtrack, which runs it as its command)
 * with SIGSTOP, waits until it is stopped, then makes PAIRS (default 40,000) malloc/free pairs:
 * more records than one interposer ring holds (16,384), so its thread must wait on the full
 * ring (back-pressure) whatever the machine's speed. A child resumes memtrack (SIGCONT) after
 * 300 ms. Nothing here allocates before the pairs (raw reads of /proc, no stdio).
 * With `signal`, a SIGALRM every millisecond during the pairs: its handler makes ten
 * malloc(200), kept, whenever it interrupted libc's syscall() (which only the interposer calls
 * here: its futex wait on the full ring, its doorbell), never inside glibc's allocator; the
 * count goes to the side channel as "sigallocs" (SIZE).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <sys/wait.h>
#include "expect.h"
#include "../lib/mt_proc_state.h"

void *volatile stall_sink, *volatile stall_kept;
static uintptr_t syscall_lo, syscall_hi; /* libc's syscall(): [lo, hi) */
static volatile sig_atomic_t sig_allocs;

static void on_alarm(int sig, siginfo_t *si, void *uc_)
{
	uintptr_t pc = (uintptr_t)((ucontext_t *)uc_)->uc_mcontext.gregs[REG_RIP];

	(void)sig;
	(void)si;
	if (pc < syscall_lo || pc >= syscall_hi)
		return;
	for (int i = 0; i < 10; i++) {
		stall_kept = malloc(200);
		sig_allocs = sig_allocs + 1;
	}
}

/* Arms the alarm (libc's syscall() found first, through the loader's symbol table). */
static int arm_alarm(void)
{
	struct itimerval it = {{0, 1000}, {0, 1000}};
	struct sigaction sa;
	const ElfW(Sym) *sym = NULL;
	void *fn = dlsym(RTLD_DEFAULT, "syscall");
	Dl_info di;

	if (!fn || !dladdr1(fn, &di, (void **)&sym, RTLD_DL_SYMENT) || !sym || !sym->st_size)
		return -1;
	syscall_lo = (uintptr_t)fn;
	syscall_hi = syscall_lo + sym->st_size;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_alarm;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	return sigaction(SIGALRM, &sa, NULL) || setitimer(ITIMER_REAL, &it, NULL) ? -1 : 0;
}

int main(int argc, char **argv)
{
	long pairs = argc > 1 ? atol(argv[1]) : 40000;
	int with_signal = argc > 2 && !strcmp(argv[2], "signal");
	pid_t mt = getppid(), child;
	struct timespec ms = {0, 1000000}, wait300 = {0, 300000000};
	int i;

	child = fork();
	if (child < 0)
		return 2;
	if (child == 0) {
		nanosleep(&wait300, NULL);
		kill(mt, SIGCONT);
		_exit(0);
	}
	if (kill(mt, SIGSTOP))
		return 3;
	for (i = 0; i < 5000 && mt_proc_state(mt) != 'T'; i++)
		nanosleep(&ms, NULL);
	if (mt_proc_state(mt) != 'T')
		return 4;
	if (with_signal && arm_alarm())
		return 5;
	for (long k = 0; k < pairs; k++) {
		void *p = malloc(64);

		stall_sink = p;
		free(p);
	}
	if (with_signal) {
		struct itimerval off = {{0, 0}, {0, 0}};

		setitimer(ITIMER_REAL, &off, NULL);
		mt_say("sigallocs", 0, 0, (uint64_t)sig_allocs);
	}
	waitpid(child, NULL, 0);
	return 0;
}
