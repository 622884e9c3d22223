// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Auto mode judges each exec: will the interposer serve the new image, or does it need glibc's
 * uprobes (its environment lost LD_PRELOAD, a secure exec, another namespace)? User space
 * judges a stopped task (src/track/tracker_control.c); the stop, its signals and wake-ups cost
 * ~0.5 ms an exec here (README, "What each process of the tree costs"). For an executable user
 * space already judged the interposer's (MT_EXE_SERVED), the same facts are checked here and
 * the exec goes on unstopped: its LD_PRELOAD, MEMTRACK_PRELOAD_SHM and LD_LIBRARY_PATH are the
 * root's (so the loader loads the same interposer and libraries, and the interposer opens the
 * same shared memory), not a secure exec (the loader would drop LD_PRELOAD), memtrack's pid
 * namespace (the interposer serves no other) and the root's file system root (the same files).
 * mt_on_exec has already ruled out the rest: credentials that cannot open the shared memory,
 * another mount namespace, a process that needs glibc's uprobes (mt_proc.glibc_need).
 * Any doubt stops, as before.
 */
#include "bpf/maps.bpf.h"

/* The walk's state (mt_env_step), beside the buffer: the verifier takes what it loads from a map
 * for any value, so the callback's states converge at once (on the stack, each byte's bounds
 * made new states until the verifier gave up at a million instructions). */
struct mt_env_scan {
	__u64 h[MT_ENV_NR]; /* per variable: its value's hash so far */
	__u64 seen;	    /* bit v: variable v found */
	__u64 var;	    /* the variable whose value is being hashed, MT_ENV_NR: none */
	__u64 from;	    /* where that value starts (the name's end) */
	__u64 bad;	    /* a variable set twice */
};

/* The environment as the new image's stack holds it: NUL-terminated strings. A per-CPU buffer:
 * tracepoint programs run with preemption disabled. 64 bytes of slack after MT_ENV_MAX: a name
 * compared at any string start stays inside. */
struct mt_env_buf {
	struct mt_env_scan s;
	char b[MT_ENV_MAX + 64];
};
_Static_assert(sizeof(struct mt_env_buf) <= 32768, "a per-CPU value is at most 32 KiB");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mt_env_buf);
} env_buf SEC(".maps");

/* Does b[i..] start with the n bytes of name? n <= 64 (the slack), i < MT_ENV_MAX. */
static __always_inline bool mt_env_is(const char *b, __u64 i, const char *name, int n)
{
	for (int k = 0; k < n; k++)
		if (b[i + k] != name[k])
			return false;
	return true;
}

/* Variable var's name ends at from: its value is hashed from there. */
static __always_inline void mt_env_start(struct mt_env_scan *s, __u64 var, __u64 from)
{
	s->bad |= s->seen & (1ull << var);
	s->seen |= 1ull << var;
	if (var == MT_ENV_LD_PRELOAD)
		s->h[0] = MT_FNV_INIT;
	else if (var == MT_ENV_SHM)
		s->h[1] = MT_FNV_INIT;
	else
		s->h[2] = MT_FNV_INIT;
	s->var = var;
	s->from = from;
}

/* One byte of the environment: hashes a value's bytes, or looks for a name at a string's
 * start. bpf_loop's callback: its body is verified once, whatever the environment's size. */
static long mt_env_step(__u64 i, void *unused)
{
	__u32 zero = 0;
	struct mt_env_buf *e = bpf_map_lookup_elem(&env_buf, &zero);
	struct mt_env_scan *s;
	char c;

	if (!e || i >= MT_ENV_MAX)
		return 1;
	s = &e->s;
	c = e->b[i];
	if (s->var < MT_ENV_NR) {
		if (i < s->from)
			return 0; /* still the name */
		if (!c) {
			s->var = MT_ENV_NR;
			return 0;
		}
		if (s->var == MT_ENV_LD_PRELOAD)
			s->h[0] = (s->h[0] ^ (__u8)c) * MT_FNV_PRIME;
		else if (s->var == MT_ENV_SHM)
			s->h[1] = (s->h[1] ^ (__u8)c) * MT_FNV_PRIME;
		else
			s->h[2] = (s->h[2] ^ (__u8)c) * MT_FNV_PRIME;
		return 0;
	}
	if (i && e->b[i - 1])
		return 0; /* inside a string */
	if (c == 'L' && mt_env_is(e->b, i, "LD_PRELOAD=", 11))
		mt_env_start(s, MT_ENV_LD_PRELOAD, i + 11);
	else if (c == 'L' && mt_env_is(e->b, i, "LD_LIBRARY_PATH=", 16))
		mt_env_start(s, MT_ENV_LD_LIBRARY_PATH, i + 16);
	else if (c == 'M' && mt_env_is(e->b, i, "MEMTRACK_PRELOAD_SHM=", 21))
		mt_env_start(s, MT_ENV_SHM, i + 21);
	return 0;
}

/* Variable v's value as mt_env_value (proc.h) gives it: 0 when unset */
static __always_inline __u64 mt_env_h(const struct mt_env_scan *s, __u32 v)
{
	if (v >= MT_ENV_NR || !(s->seen & (1ull << v)))
		return 0;
	return s->h[v] ?: 1;
}

/* The current task's LD_PRELOAD and LD_LIBRARY_PATH, mixed (mt_env_mix, proc.h), read from its
 * new stack (mm->env_start .. env_end) in place at this tracepoint: exec copied the strings
 * there. The walk's state stays in env_buf (per CPU; tracepoint programs are not preempted)
 * for mt_exec_served. MT_ENV_MIX_UNKNOWN when it cannot be read or a variable is set twice. */
__noinline __u64 mt_exec_env_mix(void)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u64 start = BPF_CORE_READ(task, mm, env_start), end = BPF_CORE_READ(task, mm, env_end);
	__u64 len = end - start;
	__u32 zero = 0;
	struct mt_env_buf *e = bpf_map_lookup_elem(&env_buf, &zero);

	if (!e)
		return MT_ENV_MIX_UNKNOWN;
	e->s = (struct mt_env_scan){.var = MT_ENV_NR, .bad = 1};
	if (end <= start || len > MT_ENV_MAX || bpf_probe_read_user(e->b, len, (const void *)start))
		return MT_ENV_MIX_UNKNOWN;
	e->s.bad = 0;
	/* the block ends with a NUL: the last value's hash ends there */
	bpf_loop(len, mt_env_step, NULL, 0);
	if (e->s.bad)
		return MT_ENV_MIX_UNKNOWN;
	return mt_env_mix(mt_env_h(&e->s, MT_ENV_LD_PRELOAD),
			  mt_env_h(&e->s, MT_ENV_LD_LIBRARY_PATH));
}

/* Are the current task's LD_PRELOAD, MEMTRACK_PRELOAD_SHM and LD_LIBRARY_PATH the root's
 * (stop_ctl[8..10])? From the walk mt_exec_env_mix made in this same program run. */
static __always_inline bool mt_env_is_root(void)
{
	__u32 zero = 0;
	struct mt_env_buf *e = bpf_map_lookup_elem(&env_buf, &zero);

	if (!e || e->s.bad)
		return false;
	for (__u32 v = 0; v < MT_ENV_NR; v++) {
		__u32 key = 8 + v;
		__u64 *want = bpf_map_lookup_elem(&stop_ctl, &key);

		if (!want || *want != mt_env_h(&e->s, v))
			return false;
	}
	return true;
}

__noinline int mt_exec_served(__u64 bprm, __u64 env_mix)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct linux_binprm *b = (struct linux_binprm *)bprm;
	__u32 on_key = 7, root_key = 11;
	__u64 *on = bpf_map_lookup_elem(&stop_ctl, &on_key);
	__u64 *root = bpf_map_lookup_elem(&stop_ctl, &root_key);
	__u8 *known;
	__u64 key;

	if (!on || !*on || !root || !*root || !b || env_mix == MT_ENV_MIX_UNKNOWN)
		return 0;
	key = mt_known_key(mt_bprm_exe_key(bprm), env_mix);
	known = bpf_map_lookup_elem(&known_exe, &key);
	if (!known || !(*known & MT_EXE_SERVED))
		return 0;
	if (BPF_CORE_READ_BITFIELD_PROBED(b, secureexec))
		return 0;
	if (!mt_in_our_pidns(task) || (__u64)BPF_CORE_READ(task, fs, root.dentry) + 1 != *root ||
	    !mt_env_is_root())
		return 0;
	on_key = 12;
	on = bpf_map_lookup_elem(&stop_ctl, &on_key);
	if (on)
		__sync_fetch_and_add(on, 1);
	return 1;
}
