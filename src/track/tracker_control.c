// SPDX-License-Identifier: MIT
/*
 * Control records, the BPF side's questions to user space: a task stopped at the exec of an
 * executable not inspected yet (its libraries attached, auto mode's judgement of who serves
 * it), at the return of a dlopen, at its first allocation with a stack; a process' name. And
 * the stop controls (stop_ctl) those judgements set, and the marks user space leaves in a
 * process's procs entry (mt_mark_proc).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "bpf/proc.h"
#include "common/log.h"
#include "common/records.h"
#include "common/test_delay.h"
#include "track/elf_syms.h"
#include "track/handoff.h"
#include "track/inert_cache.h"
#include "track/tracker_priv.h"

/* stop_ctl[key] = v (maps.bpf.h says what each entry is): 0 or -errno. */
static int stop_ctl__set(struct tracker *t, __u32 key, __u64 v)
{
	return bpf_map_update_elem(t->fd.stop_ctl, &key, &v, BPF_ANY) ? -errno : 0;
}

/* Allows or ends the BPF side's stops (stop_ctl[0]). Allowed only once the watchdog holds the
 * ring, so that no stop outlives us unanswered; ended before the last drain, which answers
 * those still in the ring. */
int tracker__set_stops(struct tracker *t, bool on)
{
	return stop_ctl__set(t, 0, on);
}

/* Allows or ends the stops at every exec (stop_ctl[1]): auto mode, while glibc's probes are
 * not attached, each exec is judged (tracker__judge). Once a 32-bit program's environment
 * names the i386 interposer, every exec stops for good, in both modes: a 64-bit program it
 * execs, even a known one, gets the 64-bit name back before its loader runs (abi32.h). */
int tracker__set_stop_all(struct tracker *t, bool on)
{
	int err = stop_ctl__set(t, 1, on || t->abi32.rewrote);

	/* stop_ctl[7]: the BPF side's own judgement (exec_judge.bpf.c), never once a 32-bit
	 * program's environment was rewritten: its execs must stop to get their name back */
	if (!err)
		err = stop_ctl__set(t, 7, on && t->pre.on && !t->abi32.rewrote);
	return err ? err : tracker__set_glibc_in(t);
}

/* stop_ctl[key], one of the BPF side's counts (maps.bpf.h); 0 when it cannot be read */
uint64_t tracker__ctl_count(struct tracker *t, __u32 key)
{
	__u64 n = 0;

	return bpf_map_lookup_elem(t->fd.stop_ctl, &key, &n) ? 0 : n;
}

/* stop_ctl[12]: the execs the BPF side judged the interposer's, unstopped (exec_judge.bpf.c) */
uint64_t tracker__execs_judged(struct tracker *t)
{
	return tracker__ctl_count(t, 12);
}

/* stop_ctl[6]: 1 while glibc's uprobes are in (auto mode): the execs of a process that needs
 * them do not stop (maps.bpf.h); never once a 32-bit program's environment was rewritten (every
 * exec stops then, tracker__set_stop_all). */
int tracker__set_glibc_in(struct tracker *t)
{
	return stop_ctl__set(t, 6,
			     t->pre.autom && !t->abi32.rewrote && libs__glibc_attached(t->libs));
}

/* Auto and preload modes: the uid owning the interposer's shared memory, so that the exec of a
 * process whose credentials cannot open it stops and is judged (stop_ctl[2], mt_shm_denied in
 * maps.bpf.h), and our mount namespace, so that an exec in another stops too (stop_ctl[4],
 * mt_other_mntns); 0 otherwise. Set at every run: the map may be a kept one (tracker_kept.c). */
int tracker__set_shm_owner(struct tracker *t)
{
	__u64 uid = t->pre.on ? (__u64)t->pre.shm_uid + 1 : 0;
	__u64 mnt = t->pre.on && t->pre.mntns_ino ? (__u64)t->pre.mntns_ino + 1 : 0;
	__u64 net = t->pre.on && handoff__netns() ? handoff__netns() + 1 : 0;
	int err = stop_ctl__set(t, 2, uid);

	if (!err)
		err = stop_ctl__set(t, 3, 0); /* the root's seccomp filter: noted at its exec */
	if (!err)
		err = stop_ctl__set(t, 5, net); /* who can ask for the file (handoff.h) */
	if (!err)
		err = stop_ctl__set(t, 6, 0); /* glibc's uprobes not in yet */
	/* the command's environment (exec_judge.bpf.c); its root directory, at its exec */
	for (__u32 v = 0; v < MT_ENV_NR && !err; v++)
		err = stop_ctl__set(t, 8 + v, t->pre.on ? t->pre.env_root[v] : 0);
	if (!err)
		err = stop_ctl__set(t, 11, 0);
	if (!err)
		err = stop_ctl__set(t, 12, 0);
	return err ? err : stop_ctl__set(t, 4, mnt);
}

/* Marks pid's image in the procs map (mt_mark_proc, served.bpf.c: what is an enum mt_mark)
 * unless it began after ts. 1 when marked, 0 when not, -errno. */
int tracker__mark_proc(struct tracker *t, int32_t pid, uint64_t ts, uint32_t what)
{
	__u64 args[3] = {(__u64)pid, ts, what};
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = args, .ctx_size_in = sizeof(args));

	if (bpf_prog_test_run_opts(t->fd.mark_proc, &o))
		return -errno;
	return (int)o.retval;
}

/* libs__attach_glibc, its links' generation set first (stop_ctl[13]): links taken out before
 * and still closing then do nothing, and the process that needs the new ones need not wait
 * for them (~30 ms, tracker_glibc.c). Unless a family's links without a generation are among
 * them: those would run beside the new ones (two entries for one call). */
int tracker__glibc_attach(struct tracker *t)
{
	uint32_t gen;
	int err;

	/* The programs of a kept load are the last run's, whose links its detacher may still be
	 * closing: this run's generations start above any of its, at the time in units of 2^20
	 * ns (~1 ms; a run takes fewer generations than milliseconds: each take-out follows a
	 * 10 ms look) */
	if (!libs__glibc_used(t->libs))
		libs__glibc_gen_after(t->libs, (uint32_t)(now_ns(CLOCK_MONOTONIC) >> 20));
	gen = libs__glibc_next_gen(t->libs);
	if (t->glibc_closing_untagged)
		tracker__glibc_wait(t);
	/* MEMTRACK_TEST_GLIBC_STALE: a generation no link carries (the tests' way to see that
	 * the programs check it: nothing recorded at glibc's sites) */
	err = stop_ctl__set(t, 13, gen + (getenv("MEMTRACK_TEST_GLIBC_STALE") ? 1 : 0));
	return err ? err : libs__attach_glibc(t->libs);
}

/* Auto mode: glibc's and libstdc++'s probes go in (a process the interposer cannot serve),
 * until no process of the tree needs them (tracker_glibc.c); the processes it serves are
 * skipped by the BPF side (mt_proc.served). The execs go on stopping to be judged, but those of
 * a process that needs them (stop_ctl[6]). */
static int tracker__glibc_on(struct tracker *t, pid_t pid)
{
	int err;

	err = tracker__glibc_attach(t);
	if (err < 0)
		return err;
	err = tracker__set_glibc_in(t);
	if (err)
		return err;
	log__debug(LOG_VERBOSE,
		   "process %d is not served by the interposer: uprobes on glibc and libstdc++, "
		   "generation %u (every process calling them on this machine traps while they "
		   "are in)",
		   pid, libs__glibc_next_gen(t->libs));
	return 0;
}

/* Is pid's image still the one its exec record names (ev->addr, the executable's key)? A task
 * the BPF side left running may have exec'd again, or be in the middle of it, by the time its
 * record is read: what /proc says of it then (its environment, its maps) is another image's,
 * which its own record will have judged. */
static bool control_same_image(const struct mt_event *ev)
{
	char exe[64];
	uint64_t key;

	snprintf(exe, sizeof(exe), "/proc/%d/exe", ev->pid);
	return !root_prep__exe_key(exe, &key) && key == ev->addr;
}

/* Preload mode, at pid's exec stop: an image the interposer cannot serve (its environment
 * dropped LD_PRELOAD or our shared memory's name, a secure exec, another pid namespace, another
 * user's credentials) whose glibc calls auto mode would give to uprobes: they go unrecorded,
 * counted once per image (drops.unserved, exit 123). Until 7 December 2026 preload mode did
 * not judge execs, and such images were lost silently. */
static void tracker__preload_lost(struct tracker *t, pid_t pid)
{
	if (!t->preload_unserved++)
		log__warn("process %d cannot be served by the interposer (its environment dropped "
			  "LD_PRELOAD, a secure exec, another pid namespace or user): in preload "
			  "mode its allocator calls go unrecorded (counted in drops.unserved); "
			  "--alloc-hooks auto records them with uprobes",
			  (int)pid);
	log__debug(LOG_VERBOSE, "process %d: not served, lost in preload mode", (int)pid);
}

/* Auto mode, at pid's exec stop (its image inspected into t->libs): does it need glibc's
 * probes? Attaches them if so. A failed inspection errs on the probes' side; so does an image
 * whose credentials cannot open our shared memory (denied: the BPF side judged them at its
 * exec, MT_EXEC_SHM_DENIED, and does not count its interposer's refusal as a loss). A task left
 * running is looked at again once judged: its next exec may have begun meanwhile (its new mm
 * has no environment yet: "lost our LD_PRELOAD"), and glibc's probes for a wrong judgement
 * trap every process of the machine; the next image's own record judges it. */
static void tracker__judge(struct tracker *t, const struct mt_event *ev, int inspected, bool denied,
			   __u8 *exe)
{
	unsigned kinds = libs__kinds(t->libs);
	pid_t pid = ev->pid;
	bool need, served;
	int err;

	if (inspected == -ENOENT || inspected == -ESRCH)
		return; /* gone */
	need = inspected < 0 || (denied && kinds & 1u << ALLOC_LIBC) ||
	       preload_setup__needs_probes(&t->pre, pid, kinds);
	if (need && !records__stopped(ev) && !control_same_image(ev)) {
		t->inspect_gone = true;
		return;
	}
	/* judged where the command would be, while stopped: the BPF side may judge this
	 * executable's next execs there alike, without a stop (exec_judge.bpf.c). Only the
	 * interposer's alone: glibc in, no other allocator, nothing probed for it. Where the
	 * command would be is asked (its environment read again) only when the mark would
	 * change: most stops of a known executable leave it as it is. */
	served = !need && inspected >= 0 && kinds & 1u << ALLOC_LIBC &&
		 !(kinds & PRELOAD_OTHER_ALLOCATORS) && !libs__exe_malloc(t->libs);
	if (served != !!(*exe & MT_EXE_SERVED) && records__stopped(ev) && !denied &&
	    !(ev->size & MT_EXEC_OTHER_MNTNS) && !t->abi32.rewrote &&
	    preload_setup__like_root(&t->pre, pid))
		*exe = served ? *exe | MT_EXE_SERVED : *exe & ~MT_EXE_SERVED;
	log__debug(LOG_DEBUG, "process %d: allocator kinds %#x, %s", pid, kinds,
		   need ? "needs uprobes" : "the interposer's");
	/* preload mode: nothing attaches for it. An image whose interposer refuses (loaded, no
	 * shared memory) counts itself, but not with our shared memory denied to it (the BPF side
	 * took that refusal for uprobes' to make up: mt_preload_ctl) */
	if (!t->pre.autom) {
		if (need && inspected >= 0 && kinds & 1u << ALLOC_LIBC &&
		    !libs__exe_malloc(t->libs) && !libs__fam_malloc(t->libs) &&
		    (denied || preload_setup__leaves_silently(&t->pre, pid)))
			tracker__preload_lost(t, pid);
		return;
	}
	preload_setup__mark_probed(&t->pre, pid, kinds, need || (kinds & PRELOAD_OTHER_ALLOCATORS));
	/* its executable's malloc is the process's (below): glibc's probes are not its need */
	tracker__glibc_mark(t, pid, ev->ts, need && !(inspected >= 0 && libs__exe_malloc(t->libs)));
	if (!need)
		return;
	/* its executable's malloc is the whole process's: glibc's allocator entry points are
	 * never reached there, only its dlopen stop is needed (rustc, whose jemalloc is in the
	 * executable: glibc's probes for it trapped every other process of the tree and of the
	 * machine); the execs go on stopping to be judged. With glibc's probes in, their dlopen
	 * sites serve it until they go out, and stay in for it then (tracker__glibc_tick). */
	if (inspected >= 0 && libs__exe_malloc(t->libs)) {
		if (libs__glibc_attached(t->libs)) {
			t->glibc_dlopen_kept = true;
			return;
		}
		tracker__glibc_wait(t); /* glibc's dlopen sites may be among the links closing */
		err = libs__attach_glibc_dlopen(t->libs);
		if (err < 0)
			log__warn("process %d: cannot attach to glibc's dlopen: %s", pid,
				  strerror(-err));
		log__debug(LOG_VERBOSE,
			   "process %d: its executable defines malloc: glibc's dlopen stop only",
			   pid);
		return;
	}
	if (libs__glibc_attached(t->libs))
		return;
	err = tracker__glibc_on(t, pid);
	if (err)
		log__warn("process %d: cannot attach to glibc: %s", pid, strerror(-err));
}

/* Can the i386 interposer serve pid, an i386 program stopped at its exec (abi32.h)? Then its
 * environment is made to name it. It needs a loader (not static), no secure exec, our
 * interposer and shared memory in its environment, the i386 interposer under its root. */
static bool control_abi32(struct tracker *t, const struct mt_event *ev, const char *exe)
{
	char root_lib[PATH_MAX + 32];
	int err;

	if (!t->abi32.lib[0] || !records__stopped(ev) || !abi32__dynamic_i386(exe) ||
	    !preload_setup__serves_i386(&t->pre, ev->pid))
		return false;
	snprintf(root_lib, sizeof(root_lib), "/proc/%d/root%s", (int)ev->pid, t->abi32.lib);
	if (access(root_lib, R_OK))
		return false;
	err = abi32__rewrite(&t->abi32, ev->pid, true, shm_source__path(t->pre.shm));
	if (err < 0)
		log__debug(LOG_VERBOSE,
			   "process %d: cannot name the i386 interposer in its "
			   "environment: %s",
			   ev->pid, strerror(-err));
	if (err <= 0 || abi32__expect(&t->abi32, ev->pid, ev->ts))
		return false;
	if (tracker__set_stop_all(t, true))
		log__warn("cannot make every exec stop: a 64-bit program exec'd by process %d may "
			  "keep the i386 interposer's name and go unrecorded",
			  ev->pid);
	log__debug(LOG_VERBOSE, "process %d: a 32-bit program, served by the i386 interposer",
		   ev->pid);
	return true;
}

/* A program of another ABI (32-bit i386 or x32). An i386 one stopped at its exec is given the
 * i386 interposer (control_abi32). Otherwise its loader refuses our interposer ("wrong ELF
 * class") and the uprobe programs read x86-64 registers, so its calls go unrecorded: counted
 * (drops.abi, exit 123) and said, never silent. Its executable is not marked known: each of
 * its execs stops and is looked at again. */
static bool control_foreign_abi(struct tracker *t, const struct mt_event *ev)
{
	char path[64], exe[PATH_MAX];
	pid_t pid = ev->pid;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (elf__native_abi(path) != 0)
		return false; /* ours, or gone, or not readable: inspected as before */
	if (control_abi32(t, ev, path))
		return true;
	n = readlink(path, exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	if (!t->abi_unrecorded++)
		log__warn("process %d runs '%s', a 32-bit program the i386 interposer cannot serve "
			  "here (static, set-id, not stopped at its exec, uprobe mode, or no "
			  "libmemtrack-preld32.so): its allocator calls go unrecorded (counted in "
			  "drops.abi)",
			  (int)pid, exe);
	return true;
}

/* Can pid ask us for the shared memory (handoff.h: our socket is in its network namespace, and
 * we are in its pid namespace, where its interposer checks our pid)? */
static bool control_handoff_reaches(const struct tracker *t, pid_t pid)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	if (!handoff__netns() || stat(path, &st) || (uint64_t)st.st_ino != handoff__netns())
		return false;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	return !t->pre.pidns_ino || (!stat(path, &st) && st.st_ino == t->pre.pidns_ino);
}

/* What the interposer serves in pid's current image (its registration in the shared memory):
 * MT_SHM_PROC_LIBC and the family it serves as malloc, or 0. */
static unsigned control_served(const struct tracker *t, pid_t pid)
{
	int flags = shm_source__proc_flags(t->pre.shm, pid);

	if (flags < 0 || !(flags & MT_SHM_PROC_LIBC) || (flags & MT_SHM_PROC_OFF))
		return 0;
	return (unsigned)flags & (MT_SHM_PROC_LIBC | MT_SHM_PROC_FAMILIES);
}

/*
 * Control records (records.c says what each one asks for: its action, and REC_STOPS when its
 * task stopped itself and waits): a task stopped at the exec of an executable not inspected
 * yet, or at the return of a dlopen; a process' name (after its Fork or Exec record, which the
 * accounting has seen: the consumer flushes before a control record).
 */
static void control_inspect_exe(struct tracker *t, const struct mt_event *ev)
{
	__u8 exe = 0; /* MT_EXE_* (proc.h): SERVED kept unless judged again in its environment */
	__u64 kkey = mt_known_key(ev->addr, ev->old_addr);
	int err;

	/* not stopped and already another image (or gone): its later record tells */
	if (!records__stopped(ev) && !control_same_image(ev)) {
		t->inspect_gone = true;
		return;
	}
	if (control_foreign_abi(t, ev))
		return;
	/* a 64-bit program exec'd by a 32-bit one inherited the i386 interposer's name: its own,
	 * before its loader reads it (abi32.h) */
	if (t->abi32.rewrote && records__stopped(ev))
		abi32__rewrite(&t->abi32, ev->pid, false, NULL);
	err = libs__inspect_pid(t->libs, ev->pid);
	t->inspect_gone = err == -ENOENT || err == -ESRCH;
	if (err < 0 && err != -ENOENT && err != -ESRCH)
		log__warn("process %d: cannot inspect its libraries: %s", ev->pid, strerror(-err));
	/* an interposer that cannot map our shared memory can tell its refusal only by the
	 * control point (preload_ctl.c): the image waits for the link here. Not only when the
	 * environment does not reach it: an open refused for a reason not seen from here (a
	 * mount namespace, a security module) made a refusal nobody heard, an untracked process
	 * and no drop. The link is made on a thread since the load: this waits for its end. */
	if (t->pre.on && !t->ctl_ready)
		tracker__ctl_ready(t);
	if (t->pre.on) { /* auto and preload modes judge each exec */
		bool denied = ev->size & MT_EXEC_SHM_DENIED;

		/* another mount namespace: a sandbox's or a container's own /dev/shm lacks our
		 * shared memory. Its interposer asks us for it when it can reach our socket (the
		 * same network namespace, handoff.h); otherwise it will refuse, and it is judged
		 * like another user's image: uprobes record it, and the refusal is no loss once
		 * marked (while it is stopped, its image cannot change). */
		if (!denied && ev->size & MT_EXEC_OTHER_MNTNS &&
		    !preload_setup__shm_reaches(&t->pre, ev->pid) &&
		    !control_handoff_reaches(t, ev->pid)) {
			int m = tracker__mark_proc(t, ev->pid, ev->ts, MT_MARK_SHM_DENIED);

			denied = m > 0;
			if (m < 0)
				log__warn("process %d: cannot mark it for uprobes: %s", ev->pid,
					  strerror(-m));
			log__debug(LOG_VERBOSE,
				   "process %d: another mount namespace, without our shared memory",
				   ev->pid);
		}
		bpf_map_lookup_elem(t->fd.known_exe, &kkey, &exe);
		tracker__judge(t, ev, err, denied, &exe);
	}
	/* the loader run as a program: each of its execs runs another, and stops to be judged */
	if (libs__exe_loader(t->libs))
		return;
	/* the file (so that its next exec walks its environment) and the file in this
	 * environment (the stop's, mt_known_key: what its next exec may skip the stop with) */
	bpf_map_update_elem(t->fd.known_exe, &ev->addr, &(__u8){MT_EXE_KNOWN}, BPF_NOEXIST);
	if (ev->old_addr == MT_ENV_MIX_UNKNOWN)
		return; /* its environment unread: each exec of it stops */
	exe |= MT_EXE_KNOWN;
	bpf_map_update_elem(t->fd.known_exe, &kkey, &exe, BPF_ANY);
}

static void control_inspect_maps(struct tracker *t, const struct mt_event *ev)
{
	int err;

	ustack__read_maps(t->ustk, ev->pid); /* stopped: its maps are complete */
	err = libs__inspect_maps(t->libs, ev->pid, control_served(t, ev->pid));

	if (err < 0 && err != -ENOENT && err != -ESRCH)
		log__warn("process %d: cannot inspect its mappings after dlopen: %s", ev->pid,
			  strerror(-err));
}

/* --stacks: pid stopped at its image's first allocation with a stack; its stacks are unwound
 * with these maps, even once it has exited. */
static void control_read_maps(struct tracker *t, const struct mt_event *ev)
{
	ustack__read_maps(t->ustk, ev->pid);
}

static void control_name(struct tracker *t, const struct mt_event *ev)
{
	char comm[16];

	_Static_assert(offsetof(struct mt_event, size) == offsetof(struct mt_event, addr) + 8,
		       "a name spans addr and size");
	memcpy(comm, (const char *)ev + offsetof(struct mt_event, addr), sizeof(comm));
	heap_acct__set_comm(t->acct, ev->pid, comm);
}

static void (*const control_actions[RA_NR])(struct tracker *t, const struct mt_event *ev) = {
    [RA_INSPECT_EXE] = control_inspect_exe,
    [RA_INSPECT_MAPS] = control_inspect_maps,
    [RA_READ_MAPS] = control_read_maps,
    [RA_NAME] = control_name,
};

static struct mt_shm_seen control_seen_of(const struct libs_file_id *f)
{
	return (struct mt_shm_seen){f->dev, f->ino, f->size, f->mtime_ns, f->ctime_ns};
}

static void control_seen_add(void *ctx, const struct libs_file_id *f)
{
	struct mt_shm_seen e = control_seen_of(f);

	shm_source__seen_add(ctx, &e); /* a full table only leaves the file's stops in */
}

struct control_inert {
	struct mt_shm_seen *v;
	size_t n, cap;
};

static void control_inert_add(void *ctx, const struct libs_file_id *f)
{
	struct control_inert *c = ctx;

	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		void *v = realloc(c->v, cap * sizeof(*c->v));

		if (!v)
			return;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = control_seen_of(f);
}

void tracker__inert_store(struct tracker *t)
{
	struct control_inert c = {0};

	if (!t->pre.shm || t->o->stacks)
		return;
	libs__each_inert(t->libs, control_inert_add, &c);
	inert_cache__update(c.v, c.n);
	free(c.v);
}

void tracker__seen_publish(struct tracker *t)
{
	if (t->pre.shm && !t->o->stacks)
		libs__each_seen(t->libs, &t->seen_next, control_seen_add, t->pre.shm);
}

/* MEMTRACK_TEST_STOP_DELAY_MS: the tests' slow answer to a stop, so that a parent watching its
 * child (child_wrapper propagate) sees the stop before memtrack's SIGCONT, as it does when the
 * inspection is long, on any machine; and a slow look at a task left running, so that a short
 * one is gone by then, as on a loaded machine. */
static void control_test_delay(void)
{
	static long ms = -1;

	test_delay__sleep("MEMTRACK_TEST_STOP_DELAY_MS", &ms);
}

/* The parent of pid if it is a process of the tree (memtrack itself is the root's parent), else
 * 0. Asked while pid is stopped: once resumed it may exit at once, and its entry with it. */
pid_t tracker__tree_parent(void *ctx, pid_t pid)
{
	struct tracker *t = ctx;
	struct mt_proc p, pp;
	__u32 key = (__u32)pid, pkey;

	if (bpf_map_lookup_elem(t->fd.procs, &key, &p) || p.ppid <= 0)
		return 0;
	pkey = (__u32)p.ppid;
	return bpf_map_lookup_elem(t->fd.procs, &pkey, &pp) ? 0 : (pid_t)p.ppid;
}

void tracker__settle(void *ctx)
{
	struct tracker *t = ctx;

	consumer__drain(&t->cons);
}

int tracker__control_record(void *ctx, const struct mt_event *ev)
{
	struct tracker *t = ctx;
	unsigned action = records__action(ev->type);
	uint64_t t0 = now_ns(CLOCK_MONOTONIC), attaches = libs__attaches(t->libs);
	pid_t ppid;

	t->inspect_gone = false;
	if (!records__stopped(ev) && records__has(ev->type, REC_STOPS))
		control_test_delay();
	if (action < RA_NR && control_actions[action])
		control_actions[action](t, ev);
	tracker__seen_publish(t);
	if (!records__stopped(ev)) {
		if (!records__has(ev->type, REC_STOPS))
			return 0;
		t->ctl_not_stopped++;
		/* it ran on while this attached what it maps: calls made before the probes went
		 * in are lost, how many is not known. Said, never silent (drops.late_probes). So
		 * is an image gone before it could be looked at, unless the interposer says it
		 * served it (uprobe mode cannot tell: an image whose libraries were all attached
		 * already lost nothing, and most are such) */
		if ((libs__attaches(t->libs) != attaches ||
		     (t->inspect_gone && t->pre.on && !control_served(t, ev->pid))) &&
		    !t->late_probes++)
			log__warn(
			    "process %d was not stopped at its %s (it is traced, or its parent "
			    "reads SIGCHLD from a queue): uprobes went in while it ran, its "
			    "first allocator calls may be missing (drops.late_probes)",
			    ev->pid, ev->type == MT_EV_CTL_EXEC_STOPPED ? "exec" : "dlopen");
		return 0;
	}
	t->ctl_stops++;
	control_test_delay();
	/* its parent may have stopped itself in turn (stop_relay.h): looked up first. Looked up
	 * after the SIGCONT, a child that then ran and exited (64 mallocs) was no longer in the
	 * map: its parent, stopped, was never resumed, and the run waited for ever (1 run in 30
	 * of test_stop_propagated_uprobe with four busy loops on the 2 CPUs) */
	ppid = tracker__tree_parent(t, ev->pid);
	kill(ev->pid, SIGCONT);
	stop_relay__answered(&t->relay, ev->pid, ppid);
	log__debug(LOG_VERBOSE, "stop of %d (record type %u): %.2f ms after it, handled in %.2f ms",
		   ev->pid, ev->type, (t0 - ev->ts) / 1e6, (now_ns(CLOCK_MONOTONIC) - t0) / 1e6);
	return 0;
}
