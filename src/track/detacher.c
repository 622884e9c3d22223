// SPDX-License-Identifier: MIT
/*
 * Detaching costs an RCU grace period per uprobe link (25-100 ms), paid after the artifact is
 * complete. The detacher pays it instead. CLONE_VM rather than fork: no page tables copied,
 * no copy-on-write faults on memtrack's side while it writes the manifest, and memtrack's own
 * exit unmaps nothing (the detacher is the address space's last user). It holds no stdio (a
 * caller reading memtrack's output sees EOF at memtrack's exit) and tracks nothing: the probes
 * only filter other processes out until it is done. It shares memtrack's memory and TLS, so it
 * runs only raw system calls, on a stack of its own. With a plan it hands the tracepoints over
 * to the next run instead of dropping them at once (detacher.h).
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <linux/bpf.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common/fds.h"
#include "track/detacher.h"

static char detacher_stack[16 * 1024] __attribute__((aligned(64)));

static int detacher__bpf(int cmd, union bpf_attr *a)
{
	return (int)syscall(SYS_bpf, cmd, a, sizeof(*a));
}

/* The linger map's counter; ~0 when it cannot be read. */
static uint64_t detacher__gen(int fd)
{
	uint32_t zero = 0;
	uint64_t v = ~0ull;
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)fd;
	a.key = (uint64_t)(uintptr_t)&zero;
	a.value = (uint64_t)(uintptr_t)&v;
	return detacher__bpf(BPF_MAP_LOOKUP_ELEM, &a) ? ~0ull : v;
}

/* Keeps the links until a later run has linked its own or taken these (the counter moved from
 * gen) or linger_ms has passed: a look every 10 ms. */
static void detacher__linger(const struct detacher_plan *p, uint64_t gen)
{
	struct timespec step = {.tv_nsec = 10 * 1000000};

	for (uint32_t waited = 0; gen != ~0ull && waited < p->linger_ms; waited += 10) {
		struct timespec left = step;

		while (syscall(SYS_nanosleep, &left, &left) && errno == EINTR)
			;
		if (detacher__gen(p->linger_fd) != gen)
			break;
	}
}

void detacher__plan_offer(struct detacher_plan *plan, const char *root, const char *tag,
			  const char *const *names)
{
	static const char *const stage[3] = {"pre-", DETACHER_OFFER_PREFIX,
					     "ex-"}; /* no dots: bpffs */
	bool fits = true;

	for (int s = 0; s < 3; s++) {
		fits = fits && snprintf(plan->offer_dir[s], DETACHER_PATH_MAX, "%s/%s%s", root,
					stage[s], tag) < DETACHER_PATH_MAX;
		for (int i = 0; fits && i < plan->nkeep + plan->nmaps; i++)
			fits = snprintf(plan->offer_pin[s][i], DETACHER_PATH_MAX, "%s/%s",
					plan->offer_dir[s], names[i]) < DETACHER_PATH_MAX;
	}
	if (!fits)
		plan->offer_dir[1][0] = '\0';
}

static int detacher__pin(int fd, const char *path)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.pathname = (uint64_t)(uintptr_t)path;
	a.bpf_fd = (uint32_t)fd;
	return detacher__bpf(BPF_OBJ_PIN, &a);
}

/* Removes the pins of stage s's folder, then the folder. */
static void detacher__unpin(const struct detacher_plan *p, int s)
{
	for (int i = 0; i < p->nkeep + p->nmaps; i++)
		syscall(SYS_unlink, p->offer_pin[s][i]);
	syscall(SYS_rmdir, p->offer_dir[s]);
}

/* Pins the kept links and their maps, made visible whole by one rename. */
static bool detacher__offer(const struct detacher_plan *p)
{
	bool ok = p->offer_dir[1][0] && !syscall(SYS_mkdir, p->offer_dir[0], 0700);

	for (int i = 0; ok && i < p->nkeep + p->nmaps; i++)
		ok = !detacher__pin(i < p->nkeep ? p->keep[i] : p->maps[i - p->nkeep],
				    p->offer_pin[0][i]);
	ok = ok && !syscall(SYS_rename, p->offer_dir[0], p->offer_dir[1]);
	if (!ok && p->offer_dir[1][0])
		detacher__unpin(p, 0);
	return ok;
}

/* DETACHER_IDLE_NAME of program type `type`: r0 = 0, exit. Its fd, or -1. */
static int detacher__idle_prog(uint32_t type)
{
	static const struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	static const char license[] = "Dual MIT/GPL";
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.prog_type = type;
	a.insns = (uint64_t)(uintptr_t)insns;
	a.insn_cnt = sizeof(insns) / sizeof(insns[0]);
	a.license = (uint64_t)(uintptr_t)license;
	_Static_assert(sizeof(DETACHER_IDLE_NAME) <= sizeof(a.prog_name), "a program name");
	memcpy(a.prog_name, DETACHER_IDLE_NAME, sizeof(DETACHER_IDLE_NAME));
	return detacher__bpf(BPF_PROG_LOAD, &a);
}

/* Slot k of program array `map`: emptied, or given the idle program of `type` (*idle, loaded
 * at the first need; detacher.h) when `direct`; emptied when that fails. */
static void detacher__disarm(int map, uint32_t k, bool direct, uint32_t type, int *idle)
{
	union bpf_attr a;
	uint32_t v;

	if (direct && *idle == -2)
		*idle = detacher__idle_prog(type);
	memset(&a, 0, sizeof(a));
	a.map_fd = (uint32_t)map;
	a.key = (uint64_t)(uintptr_t)&k;
	if (direct && *idle >= 0) {
		v = (uint32_t)*idle;
		a.value = (uint64_t)(uintptr_t)&v;
		a.flags = BPF_ANY;
		if (!detacher__bpf(BPF_MAP_UPDATE_ELEM, &a))
			return;
	}
	detacher__bpf(BPF_MAP_DELETE_ELEM, &a);
}

/* The hand-over (detacher.h): memtrack is gone when this runs. */
static void detacher__hand_over(const struct detacher_plan *p)
{
	int keep[DETACHER_KEEP_MAX + 4], n = 0;
	bool linger = p->linger_fd >= 0 && p->nkeep > 0 && p->nmaps > 0, offered;
	uint64_t gen;
	unsigned char zero[64] = {0};
	union bpf_attr a;
	int idle[DETACHER_MAPS_MAX];

	/* the trampolines' slots disarmed first: from here on a hit of a kept link runs nothing
	 * of the run's (an empty slot, or the idle program; the array holds the latter, whose fd
	 * the closing below lets go) */
	for (int m = 0; m < p->nmaps; m++) {
		idle[m] = -2; /* not loaded yet: one per map, its type */
		for (uint32_t k = 0; k < p->disarm_nr[m]; k++)
			detacher__disarm(p->maps[m], k, k < 32 && (p->idle_mask[m] >> k & 1),
					 p->idle_type[m], &idle[m]);
	}
	/* offered at once: a run starting now takes them (the counter as memtrack read it when
	 * it planned, before it exited: a move since, a taking or a run that linked its own, even
	 * one before this runs, is seen). The pins hold them from here on, not our fds: a run that
	 * took them and died must take them down with it, not leave them to us, filled with its
	 * programs */
	gen = linger ? p->linger_gen : ~0ull;
	offered = linger && detacher__offer(p);
	/* every other link closed, one grace period each, before the slot is another run's */
	if (offered)
		keep[n++] = p->linger_fd;
	if (p->lock_fd >= 0)
		keep[n++] = p->lock_fd;
	if (p->owner_fd >= 0)
		keep[n++] = p->owner_fd;
	fds__close_all_but(3, keep, n);
	if (p->owner_fd >= 0) {
		memset(&a, 0, sizeof(a));
		a.map_fd = (uint32_t)p->owner_fd;
		a.key = (uint64_t)(uintptr_t)&p->owner_key;
		a.value = (uint64_t)(uintptr_t)zero;
		a.flags = BPF_ANY;
		detacher__bpf(BPF_MAP_UPDATE_ELEM, &a);
		syscall(SYS_close, p->owner_fd);
	}
	if (p->lock_fd >= 0)
		syscall(SYS_close, p->lock_fd);
	if (!offered)
		return;
	detacher__linger(p, gen);
	/* not taken: withdrawn (a run renaming it meanwhile has it, and this rename fails) */
	if (offered && !syscall(SYS_rename, p->offer_dir[1], p->offer_dir[2]))
		detacher__unpin(p, 2);
}

static const struct detacher_plan *detacher_plan;

static int detacher__main(void *arg)
{
	pid_t parent = (pid_t)(intptr_t)arg;
	const struct detacher_plan *p = detacher_plan;
	uint64_t usr2 = 1ull << (SIGUSR2 - 1);

	/* with a plan, memtrack's exit is a signal to wait for (blocked, then taken) */
	if (p)
		syscall(SYS_rt_sigprocmask, SIG_BLOCK, &usr2, NULL, sizeof(usr2));
	syscall(SYS_prctl, PR_SET_PDEATHSIG, p ? SIGUSR2 : SIGKILL, 0, 0, 0);
	/* No stdio, first thing: a pipe reading memtrack's output ends with memtrack, not with
	 * the lingering (until 6 December 2026 a detacher that found memtrack gone already, after
	 * a short command, kept the pipe for its whole linger: `memtrack track -- /bin/true | cat`
	 * took 1 s) */
	for (int fd = 0; fd < 3; fd++)
		syscall(SYS_close, fd);
	/* the tests' way into the branch below (test_track_handover) */
	while (p && p->test_late && syscall(SYS_getppid) == parent) {
		struct timespec ms = {.tv_nsec = 1000000};

		syscall(SYS_nanosleep, &ms, NULL);
	}
	if (syscall(SYS_getppid) != parent) {
		if (p) /* memtrack is gone already */
			detacher__hand_over(p);
		return 0; /* exiting detaches */
	}
	syscall(SYS_setsid);
	if (!p) {
		for (;;)
			syscall(SYS_pause);
	}
	while (syscall(SYS_rt_sigtimedwait, &usr2, NULL, NULL, sizeof(usr2)) < 0)
		; /* EINTR */
	detacher__hand_over(p);
	return 0;
}

pid_t detacher__start(const struct detacher_plan *plan)
{
	pid_t pid;

	detacher_plan = plan;
	/* exit signal 0: memtrack never waits for it; whoever adopts it at memtrack's exit
	 * reaps it */
	pid = clone(detacher__main, detacher_stack + sizeof(detacher_stack), CLONE_VM,
		    (void *)(intptr_t)getpid());
	return pid < 0 ? -errno : pid;
}
