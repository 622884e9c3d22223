// SPDX-License-Identifier: MIT
/* Links made on a thread while the real programs load (see early_links.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include "bpf/proc.h"
#include "common/fds.h"
#include "common/log.h"
#include "track/attach.h"
#include "track/detacher.h"
#include "track/early_links.h"
#include "track/early_priv.h"
#include "track/elf_syms.h"

static const char *const early_tp_names[EARLY_TP_NR] = {
    [EARLY_FORK] = "sched_process_fork",
    [EARLY_EXEC] = "sched_process_exec",
    [EARLY_EXIT] = "sched_process_exit",
    [EARLY_RSS_STAT] = "rss_stat",
};

unsigned long long early__ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int early__fail(struct early_links *e, int err, const char *what)
{
	int none = 0;

	/* two threads may fail: the first one's reason stays */
	if (__atomic_compare_exchange_n(&e->err, &none, err, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		e->failed = what;
	return err;
}

/*
 * The slots' numbers in map memory (one u32 each, slot i at offset 4 * i), for the trampolines
 * whose tail call is indirect: the verifier cannot know a value read from a writable map, so
 * no jump is patched into the trampoline's text when its slot is filled or emptied (a text
 * patch is three rounds of IPIs to every CPU: ~0.35 ms each on this VM, on the path to the
 * command's release; emptying a patched slot, in the detacher, waits for a grace period too:
 * detacher.h, idle_mask).
 */
static int early__index_map(void)
{
	uint32_t zero = 0, idx[EARLY_TP_NR];
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "mt_early_idx", 4, sizeof(idx), 1, NULL);

	for (uint32_t i = 0; i < EARLY_TP_NR; i++)
		idx[i] = i;
	if (fd >= 0 && bpf_map_update_elem(fd, &zero, idx, BPF_ANY)) {
		close(fd);
		return -errno;
	}
	return fd < 0 ? -errno : fd;
}

/*
 * "tail-call slot `slot` of `map` with this program's context; else return 0": r1 holds the
 * context at entry and is what bpf_tail_call takes first. The program type and expected attach
 * type are those of the programs put into the slots: the kernel allows a tail call only
 * between programs of the same kind. With idx (early__index_map) the slot's number is read
 * from there: an indirect tail call, ~125-150 ns more per hit (a retpoline here), for the
 * hooks hit a few times per process (fork, exec, exit, the interposer's control points);
 * without, a direct one, for rss_stat, hit at every change of any process's RSS counters on
 * the machine.
 */
int early__trampoline(enum bpf_prog_type type, enum bpf_attach_type expected, int map, int slot,
		      int idx)
{
	struct bpf_insn direct[] = {
	    {.code = BPF_LD | BPF_DW | BPF_IMM,
	     .dst_reg = BPF_REG_2,
	     .src_reg = BPF_PSEUDO_MAP_FD,
	     .imm = map},
	    {0}, /* the upper half of the 64-bit immediate */
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_3, .imm = slot},
	    {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_tail_call},
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	struct bpf_insn indirect[] = {
	    {.code = BPF_LD | BPF_DW | BPF_IMM,
	     .dst_reg = BPF_REG_2,
	     .src_reg = BPF_PSEUDO_MAP_FD,
	     .imm = map},
	    {0},
	    /* r3 = &idx's value + 4 * slot (the second half's imm is the offset) */
	    {.code = BPF_LD | BPF_DW | BPF_IMM,
	     .dst_reg = BPF_REG_3,
	     .src_reg = BPF_PSEUDO_MAP_VALUE,
	     .imm = idx},
	    {.imm = 4 * slot},
	    {.code = BPF_LDX | BPF_MEM | BPF_W, .dst_reg = BPF_REG_3, .src_reg = BPF_REG_3},
	    {.code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_tail_call},
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = expected);
	int fd = idx >= 0 ? bpf_prog_load(type, "mt_early", "Dual MIT/GPL", indirect,
					  sizeof(indirect) / sizeof(indirect[0]), &opts)
			  : bpf_prog_load(type, "mt_early", "Dual MIT/GPL", direct,
					  sizeof(direct) / sizeof(direct[0]), &opts);

	return fd < 0 ? -errno : fd;
}

struct early_tp_job {
	struct early_links *e;
	int i;
};

static void *early__tp_run(void *arg)
{
	struct early_tp_job *j = arg;
	struct early_links *e = j->e;

	int fd = bpf_raw_tracepoint_open(early_tp_names[j->i], e->tp_prog[j->i]);

	if (fd < 0) {
		early__fail(e, -errno, early_tp_names[j->i]);
		return NULL;
	}
	/* onto its placeholder, below the control link's fd (early__run) */
	if (e->tp_link[j->i] >= 0 && dup3(fd, e->tp_link[j->i], O_CLOEXEC) >= 0) {
		close(fd);
		return NULL;
	}
	e->tp_link[j->i] = fd;
	return NULL;
}

/* Whether fd is a raw tracepoint link on tracepoint `name`. */
static bool early__is_tp_link(int fd, const char *name)
{
	struct bpf_link_info info;
	char tp[64] = "";
	uint32_t len = sizeof(info);

	memset(&info, 0, sizeof(info));
	info.raw_tracepoint.tp_name = (uint64_t)(uintptr_t)tp;
	info.raw_tracepoint.tp_name_len = sizeof(tp);
	return !bpf_obj_get_info_by_fd(fd, &info, &len) &&
	       info.type == BPF_LINK_TYPE_RAW_TRACEPOINT && !strcmp(tp, name);
}

/*
 * Takes the links a finished run's detacher offers (detacher.h): renaming the offer makes it
 * ours alone (another run, or its detacher withdrawing it, then fails to); its pins are
 * removed once we hold the fds. 0, or -ENOENT when there was none to take.
 */
static int early__adopt(struct early_links *e)
{
	DIR *d = opendir(e->adopt_root);
	struct dirent *ent;
	int err = -ENOENT;

	while (d && err && (ent = readdir(d))) {
		char from[PATH_MAX], to[PATH_MAX], pin[PATH_MAX + 16];
		int fds[EARLY_TP_NR + 1];
		bool ok = true;

		if (strncmp(ent->d_name, DETACHER_OFFER_PREFIX, strlen(DETACHER_OFFER_PREFIX)))
			continue;
		snprintf(from, sizeof(from), "%s/%s", e->adopt_root, ent->d_name);
		snprintf(to, sizeof(to), "%s/tk-%d-%llx", e->adopt_root, getpid(), early__ns());
		if (rename(from, to)) {
			log__debug(LOG_VERBOSE, "cannot take %s: %s", from, strerror(errno));
			continue; /* taken or withdrawn meanwhile */
		}
		for (int i = 0; i <= EARLY_TP_NR; i++) {
			if (i < EARLY_TP_NR)
				snprintf(pin, sizeof(pin), "%s/tp%d", to, i);
			else
				snprintf(pin, sizeof(pin), "%s/" DETACHER_OFFER_MAP, to);
			fds[i] = bpf_obj_get(pin);
			ok = ok && fds[i] >= 0 &&
			     (i == EARLY_TP_NR || early__is_tp_link(fds[i], early_tp_names[i]));
			unlink(pin);
		}
		for (int i = 0; i <= EARLY_TP_NR; i++) {
			if (!ok && fds[i] >= 0)
				close(fds[i]);
			else if (ok && i < EARLY_TP_NR)
				e->tp_link[i] = fds[i];
		}
		if (ok) {
			e->tp_map = fds[EARLY_TP_NR];
			err = 0;
		} else {
			log__debug(LOG_VERBOSE, "%s: not tracepoint links of memtrack's", from);
		}
		/* the control link only with the tracepoints' (removes its pins either way) */
		early__adopt_ctl(e, to, ok);
		rmdir(to);
	}
	if (d)
		closedir(d);
	return err;
}

/*
 * The trampolines first (no waiting), then every link on a thread of its own: a raw
 * tracepoint's first probe waits for a grace period after any tracepoint lost its last one
 * (another run's detach: tracepoint_add_func), a uprobe for one too (dup_mmap_sem), and
 * one after the other they cost up to 60 ms here, at once one.
 */
static void *early__run(void *arg)
{
	struct early_links *e = arg;
	unsigned long long t0 = early__ns();
	struct early_tp_job jobs[EARLY_TP_NR];
	pthread_t threads[EARLY_TP_NR];
	bool started[EARLY_TP_NR] = {false};
	int idx;

	e->adopted = e->adopt_root && !early__adopt(e);

	/* Placeholders for the tracepoints' links, taken before the control link's fd: an exiting
	 * process closes its fds in order, and the detacher's exit must remove the tracepoints'
	 * probes before it waits out the control link's grace period, else the next run's
	 * tracepoint links wait for one after that removal (back to back: 12-37 ms, the control
	 * link made in 2-7 ms meanwhile). dup3 onto one expands no fd table (which waits for a
	 * grace period in a process with threads). */
	for (int i = 0; i < EARLY_TP_NR && !e->adopted; i++)
		e->tp_link[i] = eventfd(0, EFD_CLOEXEC);
	if (!e->ctl_adopted && e->lib && e->multi)
		e->ctl_slot = eventfd(0, EFD_CLOEXEC); /* the control link's, after them */
	/* a trampoline to load: not when everything was taken */
	idx = !e->adopted || (!e->ctl_adopted && e->lib && e->multi) ? early__index_map() : -ENOENT;
	if (idx < 0 && idx != -ENOENT) {
		early__fail(e, idx, "the slots' index map");
		goto out;
	}
	if (e->ctl_adopted)
		; /* linked already: nothing to wait for */
	else if (e->lib && e->multi && !early__ctl_prep(e, idx))
		e->ctl_started = !early__ctl_fork(e);
	if (e->lib && e->multi && !e->ctl_started && !e->ctl_adopted && !e->err)
		early__fail(e, -EAGAIN, "a process for the interposer's control link");
	if (e->adopted)
		goto out;
	e->tp_map = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, "mt_early_tp", 4, 4, EARLY_TP_NR, NULL);
	if (e->tp_map < 0) {
		early__fail(e, -errno, "a program array");
		goto out;
	}
	for (int i = 0; i < EARLY_TP_NR; i++) {
		e->tp_prog[i] = early__trampoline(BPF_PROG_TYPE_RAW_TRACEPOINT, 0, e->tp_map, i,
						  i == EARLY_RSS_STAT ? -1 : idx);
		if (e->tp_prog[i] < 0) {
			early__fail(e, e->tp_prog[i], "a tracepoint trampoline");
			goto out;
		}
	}
	for (int i = 0; i < EARLY_TP_NR; i++) {
		jobs[i] = (struct early_tp_job){.e = e, .i = i};
		started[i] = i > 0 && !pthread_create(&threads[i], NULL, early__tp_run, &jobs[i]);
		if (!started[i] && i > 0)
			early__tp_run(&jobs[i]);
	}
	early__tp_run(&jobs[0]);
	for (int i = 1; i < EARLY_TP_NR; i++)
		if (started[i])
			pthread_join(threads[i], NULL);
out:
	if (idx >= 0)
		close(idx); /* the trampolines hold it */
	e->wait_ns = early__ns() - t0;
	return NULL;
}

void early_links__start(struct early_links *e, const char *lib, bool multi, uint32_t *live,
			const char *adopt_root)
{
	memset(e, 0, sizeof(*e));
	e->live = live;
	e->tp_map = e->ctl_map = e->ctl_prog = e->ctl_link = e->ctl_lib_map = -1;
	for (int i = 0; i < 3; i++)
		e->ctl_stale[i] = -1;
	e->ctl_sock = e->ctl_slot = -1;
	e->sh = mmap(NULL, sizeof(*e->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		     0);
	if (e->sh == MAP_FAILED)
		e->sh = NULL; /* no control link early: attached after the load */
	for (int i = 0; i < EARLY_TP_NR; i++)
		e->tp_prog[i] = e->tp_link[i] = -1;
	e->inited = true;
	e->lib = lib;
	e->multi = multi;
	/* MEMTRACK_TEST_NO_ADOPT: link anew beside a finished run's lingering links (the tests) */
	e->adopt_root = getenv("MEMTRACK_TEST_NO_ADOPT") ? NULL : adopt_root;
	if (getenv("MEMTRACK_TEST_NO_EARLY_LINKS")) { /* the fallback path, for the tests */
		early__fail(e, -ECANCELED, "MEMTRACK_TEST_NO_EARLY_LINKS");
		return;
	}
	e->started = !pthread_create(&e->thread, NULL, early__run, e);
	if (!e->started)
		early__run(e);
}

static void early__join(struct early_links *e)
{
	if (e->started)
		pthread_join(e->thread, NULL);
	e->started = false;
}

int early_links__fill(struct early_links *e, const int tp[EARLY_TP_NR], int ctl)
{
	uint32_t zero = 0;

	early__join(e);
	for (uint32_t i = 0; i < EARLY_TP_NR && !e->err; i++)
		if (bpf_map_update_elem(e->tp_map, &i, &tp[i], BPF_ANY))
			early__fail(e, -errno, "a tracepoint program's slot");
	if (!e->err && (e->ctl_prog >= 0 || e->ctl_adopted) &&
	    bpf_map_update_elem(e->ctl_map, &zero, &ctl, BPF_ANY))
		early__fail(e, -errno, "the interposer program's slot");
	if (!e->err) {
		if (e->sh) {
			__atomic_store_n(&e->sh->filled, 1, __ATOMIC_SEQ_CST);
			early__publish_if(e->sh, e->live);
		}
		log__debug(LOG_VERBOSE, "tracepoints %s, on a thread, in %.2f ms%s",
			   e->adopted ? "taken from a finished run" : "linked early",
			   e->wait_ns / 1e6,
			   e->ctl_adopted   ? ", the interposer's control link too"
			   : e->ctl_started ? "; the interposer's control link goes on"
					    : "");
		return 0;
	}
	log__debug(LOG_VERBOSE, "cannot link early (%s: %s): attaching after the load",
		   e->failed, strerror(-e->err));
	early_links__close(e);
	return e->err;
}

void early__close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void early_links__close(struct early_links *e)
{
	if (!e->inited)
		return;
	early__join(e);
	early_links__ctl_abandon(e);
	if (e->ctl_pid > 0)
		waitpid(e->ctl_pid, NULL, WNOHANG);
	e->ctl_pid = 0;
	early__close_fd(&e->ctl_slot);
	early__close_fd(&e->ctl_link);
	for (int i = 0; i < EARLY_TP_NR; i++)
		early__close_fd(&e->tp_link[i]);
	early__close_fd(&e->ctl_prog);
	for (int i = 0; i < EARLY_TP_NR; i++)
		early__close_fd(&e->tp_prog[i]);
	early__close_fd(&e->ctl_map);
	early__close_fd(&e->ctl_lib_map);
	early__close_fd(&e->tp_map);
	for (int i = 0; i < 3; i++)
		early__close_fd(&e->ctl_stale[i]);
	if (e->sh)
		munmap(e->sh, sizeof(*e->sh));
	e->sh = NULL;
}
