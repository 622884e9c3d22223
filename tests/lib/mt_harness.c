// SPDX-License-Identifier: MIT
/* The root tests' harness: see mt_harness.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "artifact/artifact.h"
#include "mt_harness.h"
#include "mt_tmpdir.h"
#include "common/records.h"

/* The fd number the targets get their side channel on: high, so nothing else takes it. */
#define EXPECT_FD 200

static char *rot_buf(void)
{
	static char bufs[8][PATH_MAX];
	static unsigned k;

	return bufs[k++ % 8];
}

static bool is_file(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

const char *mt_repo_root(void)
{
	static char root[PATH_MAX];
	char self[PATH_MAX], probe[PATH_MAX + 32];
	const char *env = getenv("MT_REPO_ROOT");
	ssize_t n;

	if (root[0])
		return root;
	if (env && *env) {
		snprintf(root, sizeof(root), "%s", env);
		return root;
	}
	/* cwd first: `make check-root` runs the tests from the repository root */
	if (getcwd(root, sizeof(root))) {
		snprintf(probe, sizeof(probe), "%s/build/memtrack", root);
		if (is_file(probe))
			return root;
	}
	/* build/tests/test_x -> ../.. */
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = 0;
		for (int up = 0; up < 3; up++) {
			char *s = strrchr(self, '/');

			if (!s)
				break;
			*s = 0;
		}
		snprintf(probe, sizeof(probe), "%s/build/memtrack", self);
		if (is_file(probe)) {
			snprintf(root, sizeof(root), "%s", self);
			return root;
		}
	}
	if (!getcwd(root, sizeof(root)))
		snprintf(root, sizeof(root), ".");
	return root;
}

const char *mt_target(const char *name)
{
	char *b = rot_buf();

	snprintf(b, PATH_MAX, "%s/build/targets/%s", mt_repo_root(), name);
	return b;
}

const char *mt_memtrack(void)
{
	char *b = rot_buf();

	snprintf(b, PATH_MAX, "%s/build/memtrack", mt_repo_root());
	return b;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* --- side channel ------------------------------------------------------------------------------
 */

struct linebuf {
	char *buf;
	size_t len, cap;
};

static int lb_read(struct linebuf *lb, int fd)
{
	ssize_t n;

	if (lb->cap - lb->len < 4096) {
		size_t cap = lb->cap ? lb->cap * 2 : 65536;
		char *nb = realloc(lb->buf, cap);

		if (!nb)
			return -ENOMEM;
		lb->buf = nb;
		lb->cap = cap;
	}
	n = read(fd, lb->buf + lb->len, lb->cap - lb->len - 1);
	if (n < 0)
		return errno == EINTR ? 1 : -errno;
	lb->len += (size_t)n;
	return n > 0;
}

static int parse_expect(struct linebuf *lb, struct mt_expect **out, size_t *nr)
{
	size_t cap = 0, n = 0;
	struct mt_expect *v = NULL;
	char *line, *save = NULL;

	if (!lb->buf) {
		*out = NULL;
		*nr = 0;
		return 0;
	}
	lb->buf[lb->len] = 0;
	for (line = strtok_r(lb->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct mt_expect e = {0};
		unsigned long long ts, addr, old, size;

		if (sscanf(line, "%23s %d %d %llu %llx %llx %llu", e.op, &e.pid, &e.tid, &ts, &addr,
			   &old, &size) != 7) {
			fprintf(stderr, "harness: bad side-channel line: %s\n", line);
			continue;
		}
		e.ts = ts;
		e.addr = addr;
		e.old = old;
		e.size = size;
		if (n == cap) {
			struct mt_expect *nv;

			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = e;
	}
	*out = v;
	*nr = n;
	return 0;
}

/* Has a side-channel line with this op arrived (a complete line)? */
static bool lb_has_op(const struct linebuf *lb, const char *op)
{
	size_t oplen = strlen(op);

	for (size_t i = 0; i + oplen < lb->len; i++) {
		if ((i == 0 || lb->buf[i - 1] == '\n') && !memcmp(lb->buf + i, op, oplen) &&
		    lb->buf[i + oplen] == ' ' && memchr(lb->buf + i, '\n', lb->len - i))
			return true;
	}
	return false;
}

/* One line of /proc/PID/FILE (its first), trailing newline cut; "" when unreadable. */
static void proc_line(pid_t pid, const char *file, char *out, size_t cap)
{
	char path[64];
	FILE *f;

	out[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	f = fopen(path, "re");
	if (!f)
		return;
	if (!fgets(out, (int)cap, f))
		out[0] = 0;
	fclose(f);
	out[strcspn(out, "\n")] = 0;
}

/*
 * A run that timed out: what each process under memtrack (pid) was doing when it was killed,
 * to stderr, one line each (pid, ppid, state, comm, kernel wait channel of every thread): a
 * hang seen once in hundreds of runs is diagnosed from this alone.
 */
static void dump_tree(pid_t root)
{
	enum { MAX = 512 };
	static pid_t pids[MAX], ppids[MAX];
	static bool in[MAX];
	size_t n = 0;
	struct dirent *de;
	DIR *d = opendir("/proc");
	bool more = true;

	if (!d)
		return;
	while ((de = readdir(d)) && n < MAX) {
		char st[512], *p;
		pid_t pid = (pid_t)atoi(de->d_name);

		if (pid <= 0)
			continue;
		proc_line(pid, "stat", st, sizeof(st));
		p = strrchr(st, ')');
		if (!p || sscanf(p + 2, "%*c %d", &ppids[n]) != 1)
			continue;
		pids[n] = pid;
		in[n++] = pid == root;
	}
	closedir(d);
	while (more) { /* descendants: until nothing joins */
		more = false;
		for (size_t i = 0; i < n; i++)
			for (size_t j = 0; j < n && !in[i]; j++)
				if (in[j] && ppids[i] == pids[j])
					in[i] = more = true;
	}
	fprintf(stderr, "---- processes under memtrack when the run timed out:\n");
	for (size_t i = 0; i < n; i++) {
		char st[512], path[300], wchans[1024] = "", w[64], *p;
		DIR *td;

		if (!in[i])
			continue;
		proc_line(pids[i], "stat", st, sizeof(st));
		p = strrchr(st, ')');
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pids[i]);
		td = opendir(path);
		while (td && (de = readdir(td))) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "task/%s/wchan", de->d_name);
			proc_line(pids[i], path, w, sizeof(w));
			snprintf(wchans + strlen(wchans), sizeof(wchans) - strlen(wchans), " %s:%s",
				 de->d_name, w);
		}
		if (td)
			closedir(td);
		fprintf(stderr, "  %d ppid %d state %c %.*s wchan%s\n", (int)pids[i], (int)ppids[i],
			p ? p[2] : '?', p ? (int)(p - st + 1) : 0, st, wchans);
	}
}

/* Reads fd while pid runs, then drains what is left without waiting for EOF: a detaching
 * helper of memtrack may hold the write end a while after the command is gone. The signal
 * clock starts at memtrack's start, or at the line sig_line when given. */
static int collect(pid_t pid, int rfd, int timeout_s, struct linebuf *lb, int *status,
		   bool *timed_out, int log_fd, struct linebuf *logb, int sig, int sig_after_ms,
		   const char *sig_line)
{
	uint64_t start = now_ms();
	uint64_t sig_start = sig_line ? 0 : start;
	uint64_t deadline = start + (uint64_t)(timeout_s > 0 ? timeout_s : 120) * 1000;
	bool exited = false, killed = false;
	int ws = 0;

	while (!exited) {
		struct pollfd pf[2] = {{rfd, POLLIN, 0}, {log_fd, POLLIN, 0}};
		pid_t w;

		if (poll(pf, log_fd >= 0 ? 2 : 1, 50) > 0) {
			if (pf[0].revents & (POLLIN | POLLHUP))
				if (lb_read(lb, rfd) < 0)
					break;
			if (log_fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP)))
				if (lb_read(logb, log_fd) < 0)
					break;
		}
		if (sig && !sig_start && lb->buf && lb_has_op(lb, sig_line))
			sig_start = now_ms();
		if (sig && sig_start && now_ms() >= sig_start + (uint64_t)sig_after_ms) {
			kill(pid, sig);
			sig = 0;
		}
		w = waitpid(pid, &ws, WNOHANG);
		if (w == pid)
			exited = true;
		else if (!killed && now_ms() > deadline) {
			dump_tree(pid);
			kill(pid, SIGKILL);
			killed = true;
		}
	}
	if (!exited) {
		kill(pid, SIGKILL);
		waitpid(pid, &ws, 0);
	}
	fcntl(rfd, F_SETFL, O_NONBLOCK);
	while (lb_read(lb, rfd) > 0)
		;
	if (log_fd >= 0) {
		fcntl(log_fd, F_SETFL, O_NONBLOCK);
		while (lb_read(logb, log_fd) > 0)
			;
	}
	*timed_out = killed;
	if (WIFEXITED(ws))
		*status = WEXITSTATUS(ws);
	else if (WIFSIGNALED(ws))
		*status = 128 + WTERMSIG(ws);
	else
		*status = -1;
	return 0;
}

/* --- running memtrack --------------------------------------------------------------------------
 */

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && !strcmp(s + a - b, suffix);
}

static void find_outputs(struct mt_run *r)
{
	DIR *d = opendir(r->out);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (ends_with(de->d_name, ARTIFACT_SUFFIX)) {
			r->nr_artifacts++;
			r->root_pid = atoi(de->d_name);
			snprintf(r->artifact_path, sizeof(r->artifact_path), "%s/%s", r->out,
				 de->d_name);
		} else if (ends_with(de->d_name, ".memtrack.json")) {
			r->nr_manifests++;
		}
	}
	closedir(d);
	if (r->root_pid)
		snprintf(r->manifest_path, sizeof(r->manifest_path), "%s/%d.memtrack.json", r->out,
			 r->root_pid);
}

static int read_artifact(struct mt_run *r)
{
	struct artifact_reader *rd;
	size_t cap = 0;
	int rc;

	rc = artifact_reader__open(&rd, r->artifact_path);
	if (rc) {
		r->read_rc = rc;
		snprintf(r->read_err, sizeof(r->read_err), "open: %s", strerror(-rc));
		return rc;
	}
	for (;;) {
		struct mt_event ev;

		rc = artifact_reader__next(rd, &ev);
		if (rc <= 0)
			break;
		if (r->nr_ev == cap) {
			struct mt_event *nv;

			cap = cap ? cap * 2 : 4096;
			nv = realloc(r->ev, cap * sizeof(*nv));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			r->ev = nv;
		}
		r->ev[r->nr_ev++] = ev;
	}
	r->read_rc = rc;
	if (rc < 0)
		snprintf(r->read_err, sizeof(r->read_err), "%s",
			 artifact_reader__error(rd) ? artifact_reader__error(rd) : strerror(-rc));
	artifact_reader__free(rd);
	return rc;
}

int mt_track(struct mt_run *r, const struct mt_run_opts *o, const char *const argv[])
{
	static const struct mt_run_opts none;
	const char *args[64];
	struct linebuf lb = {0}, logb = {0};
	int pfd[2], lfd[2], n = 0, err;
	pid_t pid;

	/* r zeroed, or an earlier run's (tests run one after another in the same struct): that
	 * one's folder and buffers go first, else each reuse left a folder in /tmp (130 a
	 * `make check`) */
	mt_run_free(r);
	r->status = -1;
	if (!o)
		o = &none;
	err = mt_tmpdir_make(r->base, sizeof(r->base), "run");
	if (err)
		return err;
	snprintf(r->out, sizeof(r->out), "%s/out", r->base);
	if (mkdir(r->out, 0755))
		return -errno;

	for (int i = 0; o->wrap && o->wrap[i] && n < 8; i++)
		args[n++] = o->wrap[i];
	args[n++] = mt_memtrack();
	args[n++] = "track";
	/* $MT_TEST_VERBOSE: memtrack's -vv log instead of -q, printed with a failing run's dump
	 * (a flaky test's stops and judgements) */
	args[n++] = getenv("MT_TEST_VERBOSE") ? "-vv" : "-q";
	args[n++] = "-o";
	args[n++] = r->out;
	for (int i = 0; o->track_opts && o->track_opts[i] && n < 40; i++)
		args[n++] = o->track_opts[i];
	if (o->shell) {
		args[n++] = o->shell;
	} else {
		args[n++] = "--";
		for (int i = 0; argv && argv[i] && n < 62; i++)
			args[n++] = argv[i];
	}
	args[n] = NULL;

	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	if (pipe2(lfd, O_CLOEXEC)) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		char fdbuf[16];

		/* dup2 clears O_CLOEXEC on the copy: memtrack and the command inherit it */
		if (!o->no_expect_fd) {
			dup2(pfd[1], EXPECT_FD);
			snprintf(fdbuf, sizeof(fdbuf), "%d", EXPECT_FD);
			setenv("MT_EXPECT_FD", fdbuf, 1);
		} else {
			unsetenv("MT_EXPECT_FD");
		}
		/* Under `sudo make check` memtrack would run the targets as the invoking user, whose
		 * limits (RLIMIT_MEMLOCK for mlock) and rights differ: the root tests expect root.
		 * test_track_outputs sets these itself to test sudo. */
		unsetenv("SUDO_UID");
		unsetenv("SUDO_GID");
		/* the tests count stops: no earlier run's inert files unless a test asks for them
		 * (test_track_auto_dlopen names a cache of its own) */
		setenv("MEMTRACK_INERT_CACHE", "0", 0);
		for (int i = 0; o->env && o->env[i]; i++)
			putenv((char *)o->env[i]);
		dup2(lfd[1], 1);
		dup2(lfd[1], 2);
		execv(args[0], (char *const *)args);
		dprintf(2, "harness: exec %s: %s\n", args[0], strerror(errno));
		_exit(126);
	}
	close(pfd[1]);
	close(lfd[1]);
	collect(pid, pfd[0], o->timeout_s, &lb, &r->status, &r->timed_out, lfd[0], &logb, o->signal,
		o->signal_after_ms, o->signal_after_line);
	close(pfd[0]);
	close(lfd[0]);
	parse_expect(&lb, &r->exp, &r->nr_exp);
	free(lb.buf);
	if (logb.buf)
		logb.buf[logb.len] = 0;
	r->log = logb.buf ? logb.buf : strdup("");

	find_outputs(r);
	if (r->nr_artifacts)
		read_artifact(r);
	if (r->manifest_path[0]) {
		json_error_t jerr;

		r->manifest = json_load_file(r->manifest_path, 0, &jerr);
	}
	return 0;
}

void mt_run_free(struct mt_run *r)
{
	if (!r)
		return;
	if (r->base[0]) {
		if (getenv("MT_TEST_KEEP"))
			fprintf(stderr, "harness: kept %s\n", r->base);
		else
			mt_tmpdir_remove(r->base);
	}
	free(r->ev);
	free(r->exp);
	free(r->log);
	json_decref(r->manifest);
	memset(r, 0, sizeof(*r));
}

void mt_run_dump(const struct mt_run *r)
{
	uint64_t counts[MT_EV_TYPE_MAX] = {0};

	fprintf(stderr, "---- memtrack status %d%s, %zu artifact(s), root pid %d, %zu events%s%s\n",
		r->status, r->timed_out ? " (timed out)" : "", r->nr_artifacts, r->root_pid,
		r->nr_ev, r->read_rc ? ", reader: " : "", r->read_rc ? r->read_err : "");
	if (r->log && *r->log)
		fprintf(stderr, "---- memtrack output:\n%s\n", r->log);
	fprintf(stderr, "---- side channel (%zu lines):\n", r->nr_exp);
	for (size_t i = 0; i < r->nr_exp && i < 200; i++) {
		const struct mt_expect *e = &r->exp[i];

		fprintf(stderr, "  %-10s pid %d tid %d addr 0x%llx old 0x%llx size %llu\n", e->op,
			e->pid, e->tid, (unsigned long long)e->addr, (unsigned long long)e->old,
			(unsigned long long)e->size);
	}
	for (size_t i = 0; i < r->nr_ev; i++)
		if (r->ev[i].type < MT_EV_TYPE_MAX)
			counts[r->ev[i].type]++;
	fprintf(stderr, "---- events by type:");
	for (unsigned t = 1; t < MT_EV_TYPE_MAX; t++)
		if (counts[t])
			fprintf(stderr, " %s=%llu", mt_type_name(t), (unsigned long long)counts[t]);
	fprintf(stderr, "\n");
}

/* --- outside processes -------------------------------------------------------------------------
 */

int mt_proc_start(struct mt_proc *p, const char *const argv[])
{
	int pfd[2];

	memset(p, 0, sizeof(*p));
	p->rfd = -1;
	if (pipe2(pfd, O_CLOEXEC))
		return -errno;
	fflush(NULL);
	p->pid = fork();
	if (p->pid < 0)
		return -errno;
	if (p->pid == 0) {
		char fdbuf[16];

		dup2(pfd[1], EXPECT_FD);
		snprintf(fdbuf, sizeof(fdbuf), "%d", EXPECT_FD);
		setenv("MT_EXPECT_FD", fdbuf, 1);
		setenv("MEMTRACK_INERT_CACHE", "0", 0); /* as in mt_track */
		execv(argv[0], (char *const *)argv);
		_exit(126);
	}
	close(pfd[1]);
	p->rfd = pfd[0];
	return 0;
}

int mt_proc_wait(struct mt_proc *p, int timeout_s)
{
	struct linebuf lb = {0};
	bool to;

	collect(p->pid, p->rfd, timeout_s, &lb, &p->status, &to, -1, NULL, 0, 0, NULL);
	close(p->rfd);
	p->rfd = -1;
	parse_expect(&lb, &p->exp, &p->nr_exp);
	free(lb.buf);
	return to ? -ETIMEDOUT : 0;
}

void mt_proc_free(struct mt_proc *p)
{
	if (p->rfd >= 0)
		close(p->rfd);
	free(p->exp);
	memset(p, 0, sizeof(*p));
	p->rfd = -1;
}

/* --- queries -----------------------------------------------------------------------------------
 */

uint32_t mt_op_type(const char *op)
{
	if (!strcmp(op, "malloc"))
		return MT_EV_MALLOC;
	if (!strcmp(op, "calloc"))
		return MT_EV_CALLOC;
	if (!strcmp(op, "realloc"))
		return MT_EV_REALLOC;
	if (!strcmp(op, "aligned"))
		return MT_EV_ALIGNED_ALLOC;
	if (!strcmp(op, "free"))
		return MT_EV_FREE;
	return MT_EV_NONE;
}

bool mt_is_heap_type(uint32_t type)
{
	return records__has(type, REC_HEAP);
}

const char *mt_type_name(uint32_t type)
{
	const char *n = artifact__type_name(type);

	return n ? n : "?";
}

const struct mt_expect *mt_expect_find(const struct mt_expect *exp, size_t nr, const char *op,
				       int32_t tid, size_t nth)
{
	for (size_t i = 0; i < nr; i++)
		if (!strcmp(exp[i].op, op) && (!tid || exp[i].tid == tid) && nth-- == 0)
			return &exp[i];
	return NULL;
}

size_t mt_expect_count(const struct mt_expect *exp, size_t nr, const char *op, int32_t tid)
{
	size_t n = 0;

	for (size_t i = 0; i < nr; i++)
		n += !strcmp(exp[i].op, op) && (!tid || exp[i].tid == tid);
	return n;
}

static bool filter_ok(const struct mt_event *ev, const struct mt_filter *f)
{
	if (f->type && ev->type != f->type)
		return false;
	if (f->heap_only && !mt_is_heap_type(ev->type))
		return false;
	if (f->pid && ev->pid != f->pid)
		return false;
	if (f->tid && ev->tid != f->tid)
		return false;
	if (f->by_addr && ev->addr != f->addr)
		return false;
	if (f->by_size && ev->size != f->size)
		return false;
	if (f->t0 && ev->ts < f->t0)
		return false;
	if (f->t1 && ev->ts > f->t1)
		return false;
	return true;
}

size_t mt_count(const struct mt_run *r, const struct mt_filter *f)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nr_ev; i++)
		n += filter_ok(&r->ev[i], f);
	return n;
}

const struct mt_event *mt_first(const struct mt_run *r, const struct mt_filter *f)
{
	for (size_t i = 0; i < r->nr_ev; i++)
		if (filter_ok(&r->ev[i], f))
			return &r->ev[i];
	return NULL;
}

size_t mt_select(const struct mt_run *r, const struct mt_filter *f, const struct mt_event ***out)
{
	const struct mt_event **v = malloc((r->nr_ev + 1) * sizeof(*v));
	size_t n = 0;

	if (!v) {
		*out = NULL;
		return 0;
	}
	for (size_t i = 0; i < r->nr_ev; i++)
		if (filter_ok(&r->ev[i], f))
			v[n++] = &r->ev[i];
	/* insertion sort: stable, and the input is (nearly) sorted already */
	for (size_t i = 1; i < n; i++) {
		const struct mt_event *x = v[i];
		size_t j = i;

		while (j > 0 && v[j - 1]->ts > x->ts) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = x;
	}
	*out = v;
	return n;
}

bool mt_event_matches(const struct mt_event *ev, const struct mt_expect *e)
{
	uint32_t t = mt_op_type(e->op);

	if (!t || ev->type != t || ev->pid != e->pid || ev->tid != e->tid || ev->addr != e->addr)
		return false;
	if (t == MT_EV_FREE)
		return true;
	if (ev->size != e->size)
		return false;
	return t != MT_EV_REALLOC || ev->old_addr == e->old;
}

size_t mt_count_matching(const struct mt_run *r, const struct mt_expect *e)
{
	size_t n = 0;

	for (size_t i = 0; i < r->nr_ev; i++)
		n += mt_event_matches(&r->ev[i], e);
	return n;
}

static void fmt_event(char *b, size_t len, const struct mt_event *ev)
{
	snprintf(b, len, "%s addr 0x%llx size %llu old 0x%llx (pid %d tid %d)",
		 mt_type_name(ev->type), (unsigned long long)ev->addr, (unsigned long long)ev->size,
		 (unsigned long long)ev->old_addr, ev->pid, ev->tid);
}

static void fmt_expect(char *b, size_t len, const struct mt_expect *e)
{
	snprintf(b, len, "%s addr 0x%llx size %llu old 0x%llx (pid %d tid %d)",
		 mt_type_name(mt_op_type(e->op)), (unsigned long long)e->addr,
		 (unsigned long long)e->size, (unsigned long long)e->old, e->pid, e->tid);
}

int mt_check_window_exp(const struct mt_run *r, const struct mt_expect *exp, size_t nr, int32_t tid,
			size_t nth, char *msg, size_t len)
{
	const struct mt_expect *b = mt_expect_find(exp, nr, "begin", tid, nth);
	const struct mt_expect *e = mt_expect_find(exp, nr, "end", tid, nth);
	const struct mt_expect **want;
	const struct mt_event **got;
	struct mt_filter f = {0};
	size_t nw = 0, ng, i;
	int bad = 0;
	char l1[160], l2[160];

	if (!b || !e) {
		snprintf(msg, len, "no begin/end window #%zu for tid %d on the side channel", nth,
			 tid);
		return -1;
	}
	want = malloc((nr + 1) * sizeof(*want));
	if (!want) {
		snprintf(msg, len, "out of memory");
		return -1;
	}
	for (i = (size_t)(b - exp) + 1; i < (size_t)(e - exp); i++)
		if (exp[i].tid == tid && mt_op_type(exp[i].op))
			want[nw++] = &exp[i];
	f.tid = tid;
	f.pid = b->pid;
	f.heap_only = true;
	f.t0 = b->ts;
	f.t1 = e->ts;
	ng = mt_select(r, &f, &got);

	msg[0] = 0;
	for (i = 0; i < nw || i < ng; i++) {
		if (i < nw && i < ng) {
			if (mt_event_matches(got[i], want[i]))
				continue;
			fmt_expect(l1, sizeof(l1), want[i]);
			fmt_event(l2, sizeof(l2), got[i]);
			snprintf(msg, len, "tid %d op #%zu: expected %s, artifact has %s", tid, i,
				 l1, l2);
		} else if (i < nw) {
			fmt_expect(l1, sizeof(l1), want[i]);
			snprintf(msg, len,
				 "tid %d op #%zu: expected %s, artifact has nothing more "
				 "(%zu events for %zu operations)",
				 tid, i, l1, ng, nw);
		} else {
			fmt_event(l2, sizeof(l2), got[i]);
			snprintf(msg, len,
				 "tid %d: extra event #%zu in the window: %s (%zu events for "
				 "%zu operations)",
				 tid, i, l2, ng, nw);
		}
		bad = 1;
		break;
	}
	if (bad) {
		fprintf(stderr, "---- window tid %d: %zu operations, %zu heap events\n", tid, nw,
			ng);
		for (i = 0; i < nw || i < ng; i++) {
			l1[0] = l2[0] = 0;
			if (i < nw)
				fmt_expect(l1, sizeof(l1), want[i]);
			if (i < ng)
				fmt_event(l2, sizeof(l2), got[i]);
			fprintf(stderr, "  %c %-70s | %s\n",
				i < nw && i < ng && mt_event_matches(got[i], want[i]) ? ' ' : '!',
				l1, l2);
		}
		/* the thread's heap events over the whole run, timed from the window's begin:
		 * a missing one may be there with a timestamp outside it */
		fprintf(stderr, "---- tid %d's heap events, ns from the window's begin (end at +%lld)\n",
			tid, (long long)(e->ts - b->ts));
		f.t0 = 0;
		f.t1 = UINT64_MAX;
		free(got);
		ng = mt_select(r, &f, &got);
		for (i = 0; i < ng && i < 24; i++) {
			fmt_event(l2, sizeof(l2), got[i]);
			fprintf(stderr, "  %+lld %s\n", (long long)(got[i]->ts - b->ts), l2);
		}
	}
	free(want);
	free(got);
	return bad ? -1 : 0;
}

int mt_check_window(const struct mt_run *r, int32_t tid, size_t nth, char *msg, size_t len)
{
	return mt_check_window_exp(r, r->exp, r->nr_exp, tid, nth, msg, len);
}

/* Latest counter values per process; small trees only. */
struct rss_proc {
	int32_t pid;
	bool gone;
	uint64_t member[MT_RSS_NR];
};

static uint64_t rss_sum(const struct rss_proc *p)
{
	return p->gone ? 0
		       : p->member[MT_RSS_FILE] + p->member[MT_RSS_ANON] + p->member[MT_RSS_SHMEM];
}

uint64_t mt_rss_peak(const struct mt_run *r, int32_t pid)
{
	struct rss_proc procs[256];
	const struct mt_event **v;
	struct mt_filter f = {0};
	size_t np = 0, n;
	uint64_t peak = 0;

	f.pid = pid;
	n = mt_select(r, &f, &v);
	for (size_t i = 0; i < n; i++) {
		const struct mt_event *ev = v[i];
		struct rss_proc *p = NULL;
		uint64_t total = 0;

		if (ev->type != MT_EV_RSS && ev->type != MT_EV_EXIT)
			continue;
		for (size_t k = 0; k < np; k++)
			if (procs[k].pid == ev->pid)
				p = &procs[k];
		if (!p) {
			if (np == sizeof(procs) / sizeof(procs[0]))
				continue;
			p = &procs[np++];
			memset(p, 0, sizeof(*p));
			p->pid = ev->pid;
		}
		if (ev->type == MT_EV_EXIT)
			p->gone = true;
		else if (ev->aux < MT_RSS_NR)
			p->member[ev->aux] = ev->size;
		for (size_t k = 0; k < np; k++)
			total += rss_sum(&procs[k]);
		if (total > peak)
			peak = total;
	}
	free(v);
	return peak;
}

json_t *mt_json(const struct mt_run *r, const char *path)
{
	json_t *j = r->manifest;
	char key[64];

	while (j && *path) {
		const char *dot = strchr(path, '.');
		size_t n = dot ? (size_t)(dot - path) : strlen(path);

		if (n >= sizeof(key))
			return NULL;
		memcpy(key, path, n);
		key[n] = 0;
		j = json_object_get(j, key);
		path += n + (dot ? 1 : 0);
	}
	return j;
}

int mt_json_u64(const struct mt_run *r, const char *path, uint64_t *out)
{
	json_t *j = mt_json(r, path);

	if (!j)
		return -ENOENT;
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return -EINVAL;
	*out = (uint64_t)json_integer_value(j);
	return 0;
}

int mt_report_summary(const struct mt_run *r, char *buf, size_t cap)
{
	char cmd[2 * PATH_MAX];
	size_t len = 0, n;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "'%s' report '%s' 2>&1", mt_memtrack(), r->artifact_path);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (len + 1 < cap && (n = fread(buf + len, 1, cap - 1 - len, f)) > 0)
		len += n;
	buf[len] = 0;
	return pclose(f);
}
