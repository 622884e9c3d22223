// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/log.h"
#include "common/test_delay.h"
#include "track/stop_relay.h"

#define FIRST_LOOK_NS (2 * 1000 * 1000ull) /* then twice as long each time, up to MAX_STEP */
#define MAX_STEP_NS   (512 * 1000 * 1000ull)
#define WATCH_NS      (1000 * 1000 * 1000ull) /* a parent is watched this long, and then... */
/* ... for as long as it has not run since (runnable, or in the kernel): it cannot have acted
 * on the child's stop yet. A loaded machine (check-vm's two emulators on both CPUs) kept a
 * wrapper runnable past the second: it stopped itself afterwards, unwatched, and the run
 * waited for ever. Bounded all the same: a parent busy computing is never 'S'. */
#define WATCH_MAX_NS (60 * 1000 * 1000 * 1000ull)

static uint64_t relay__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The state letter of /proc/PID/stat (after the command's closing parenthesis), 0 when gone. */
static char relay__state(pid_t pid)
{
	char path[32], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

/* Resumes watch i's parent when it is stopped (job control, 'T'; not a tracer's 't') while its
 * child is not: it stopped itself after the child's stop. Returns 1 when the watch is over;
 * *state: the parent's state letter; *up: the parent's own parent of the tree when it was
 * resumed (its stop may have been passed on in turn), else 0. */
static int relay__look(struct stop_relay *r, unsigned i, char *state, pid_t *up)
{
	pid_t parent = r->v[i].parent, child = r->v[i].child;
	char ps = relay__state(parent), cs;
	bool own = r->v[i].own_answered;

	r->v[i].own_answered = false;
	*state = ps;
	*up = 0;
	if (!ps)
		return 1; /* gone */
	/* its own stop was answered since the last look: stopped now, it is at another of ours,
	 * whose record settle has not read yet */
	if (ps != 'T' || own)
		return 0;
	cs = relay__state(child);
	/* stopped again (another stop of ours, or the user's): not ours to judge */
	if (cs == 'T')
		return 0;
	/* looked up while it is stopped: once resumed it may exit, and its entry with it */
	if (r->tree_parent)
		*up = r->tree_parent(r->ctx, parent);
	kill(parent, SIGCONT);
	r->resumed++;
	log__debug(
	    LOG_VERBOSE,
	    "process %d stopped itself when its child %d stopped at memtrack's stop: resumed",
	    (int)parent, (int)child);
	return 1;
}

/* Watches parent from now: looked at from the next tick, then at growing intervals. */
static void relay__watch(struct stop_relay *r, pid_t child, pid_t parent)
{
	uint64_t now = relay__now();
	unsigned i;

	if (r->n == STOP_RELAY_MAX) { /* the oldest gives way */
		memmove(&r->v[0], &r->v[1], sizeof(r->v[0]) * (STOP_RELAY_MAX - 1));
		r->n--;
	}
	i = r->n++;
	r->v[i].parent = parent;
	r->v[i].child = child;
	r->v[i].step_ns = FIRST_LOOK_NS;
	r->v[i].due_ns = now;
	r->v[i].end_ns = now + WATCH_NS;
	r->v[i].max_ns = now + WATCH_MAX_NS;
	r->v[i].own_answered = false;
}

/* Called while the records are read (a stop's answer): the parent is looked at by the next
 * tick, which comes right after the read, when every record written before the look has been
 * answered (settle). */
void stop_relay__answered(struct stop_relay *r, pid_t child, pid_t parent)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->v[i].parent == child)
			r->v[i].own_answered = true;
	if (parent > 0)
		relay__watch(r, child, parent);
}

/* Is a watch due? */
static bool relay__due(const struct stop_relay *r, uint64_t now)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->v[i].due_ns <= now)
			return true;
	return false;
}

/* Is a due watch's parent stopped? Then it may be at one of memtrack's own stops. */
static bool relay__due_stopped(const struct stop_relay *r, uint64_t now)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->v[i].due_ns <= now && relay__state(r->v[i].parent) == 'T')
			return true;
	return false;
}

/* Past its watch: over unless it has not run yet (its state 'R' or 'D') and not for too long */
static bool relay__over(const struct stop_relay *r, unsigned i, uint64_t now, char state)
{
	if (now < r->v[i].end_ns)
		return false;
	return (state != 'R' && state != 'D') || now >= r->v[i].max_ns;
}

void stop_relay__tick(struct stop_relay *r)
{
	struct {
		pid_t child, parent;
	} up[STOP_RELAY_MAX]; /* resumed parents and theirs: watched once the loop is over */
	static long test_delay_ms = -1;
	unsigned nup = 0;
	uint64_t now;

	if (!r->n)
		return;
	now = relay__now();
	/* MEMTRACK_TEST_RELAY_DELAY_MS: the tests' late look. A memtrack preempted between its
	 * read of the records and this look (a loaded machine) may find a parent of the tree
	 * that exec'd and stopped meanwhile. */
	if (relay__due(r, now)) {
		test_delay__sleep("MEMTRACK_TEST_RELAY_DELAY_MS", &test_delay_ms);
		now = relay__now();
	}
	/* a stop of ours takes effect after its record is written: read (and answered) before a
	 * stopped parent is judged to have stopped itself. The read may add watches. */
	if (r->settle && relay__due_stopped(r, now)) {
		r->settle(r->ctx);
		now = relay__now();
	}
	for (unsigned i = 0; i < r->n;) {
		char state;
		pid_t gp;

		if (r->v[i].due_ns <= now) {
			int over = relay__look(r, i, &state, &gp);

			if (gp > 0) {
				up[nup].child = r->v[i].parent;
				up[nup++].parent = gp;
			}
			if (over || relay__over(r, i, now, state)) {
				r->v[i] = r->v[--r->n];
				continue;
			}
			if (r->v[i].step_ns < MAX_STEP_NS)
				r->v[i].step_ns *= 2;
			r->v[i].due_ns = now + r->v[i].step_ns;
		}
		i++;
	}
	/* a parent found stopped and resumed has its own parent watched: the depth of the tree
	 * bounds it, each parent resumed once */
	for (unsigned i = 0; i < nup; i++)
		relay__watch(r, up[i].child, up[i].parent);
}
