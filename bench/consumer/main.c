// SPDX-License-Identifier: MIT
/*
 * memtrack-bench-consumer: the user side of `memtrack track` without BPF. Records (synthetic,
 * or read back from an artifact) go through a replay source, consumer__dispatch and the
 * tracker's own sinks (artifact writer at level -5, heap accounting) exactly as ring records
 * do; prints events/s. A separate program rather than a `memtrack` subcommand: it needs no
 * root and no BPF, ships nothing in the user-facing CLI, and links the same libmemtrack.a
 * objects as memtrack, so the code measured is the code shipped.
 *
 * Timed per round: creating the accounting, every drain, and closing the writer (the last
 * frame's compression and write). Not timed: generating or decoding the input, opening the file.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "artifact/artifact.h"
#include "common/log.h"
#include "common/records.h"
#include "acct/acct.h"
#include "track/consumer.h"
#include "track/sinks.h"
#include "synth.h"

#define MAX_ROUNDS 100
#define MAX_CONFIGS 4

struct opts {
	struct synth_opts synth;
	const char *replay;  /* artifact to replay instead of synthetic records */
	const char *out;     /* artifact written; NULL: a temporary file, removed */
	size_t batch;	     /* records per drain: one ring wake-up */
	int level;	     /* zstd level */
	size_t frame_events; /* 0: the writer's default */
	unsigned workers[MAX_CONFIGS]; /* compressing threads, one value per config */
	unsigned nconfigs;	       /* rounds alternate between the configs */
	unsigned rounds;
	int no_acct;
	int check; /* read the artifact back and compare it with the input */
};

static const char usage[] =
    "usage: memtrack-bench-consumer [--events N] [--procs P] [--threads T] [--live N]\n"
    "                               [--seed S] [--replay ARTIFACT] [--batch N] [--rounds R]\n"
    "                               [--level L] [--frame-events N] [--workers W[,W...]]\n"
    "                               [--no-acct] [--check] [-o FILE]\n"
    "Feeds records through the tracker's consumer and sinks; prints events/s.\n"
    "Defaults: 2000000 events, 2 processes x 2 threads, 1024 live blocks per thread,\n"
    "batch 5461 (256 KiB of ring records), 5 rounds, compression workers as `memtrack track`\n"
    "uses (0: compress on the consumer's thread; a list such as 0,2 alternates the values\n"
    "round by round, R rounds each, and prints a median for each). --rounds 0 only makes the\n"
    "input (the reference a wall-clock benchmark subtracts). CPU is the whole process's\n"
    "(workers included).\n";

static double now_s(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int load_replay(const char *path, struct mt_event **out, size_t *nr)
{
	struct artifact_reader *r;
	struct mt_event *ev = NULL, *p;
	size_t n = 0, cap = 0;
	int rc = artifact_reader__open(&r, path);

	if (rc)
		return rc;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 1 << 16;
			p = realloc(ev, cap * sizeof(*ev));
			if (!p) {
				rc = -ENOMEM;
				break;
			}
			ev = p;
		}
		rc = artifact_reader__next(r, &ev[n]);
		if (rc <= 0)
			break;
		n++;
	}
	artifact_reader__free(r);
	if (rc < 0) {
		free(ev);
		return rc;
	}
	*out = ev;
	*nr = n;
	return 0;
}

/* One pass of every record through a fresh consumer; *secs and *cpu are what it took, *own the
 * consumer's thread alone (without the compression workers). */
static int run_round(const struct opts *o, unsigned workers, const char *path,
		     const struct mt_event *ev, size_t nr, double *secs, double *cpu, double *own,
		     uint64_t *bytes)
{
	struct record_sinks sinks = {0};
	struct event_source *src;
	struct consumer c;
	struct stat st;
	double t0, c0, o0;
	int rc, n;

	rc = artifact_writer__open(&sinks.writer, path, o->level, (unsigned)o->frame_events);
	if (rc)
		return rc;
	consumer__init(&c);
	t0 = now_s(CLOCK_MONOTONIC);
	c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
	o0 = now_s(CLOCK_THREAD_CPUTIME_ID);
	rc = artifact_writer__set_workers(sinks.writer, workers);
	if (!rc && !o->no_acct)
		rc = heap_acct__new(&sinks.acct);
	if (!rc)
		rc = replay_source__new(&src, ev, nr, o->batch);
	if (!rc)
		rc = consumer__add_source(&c, src);
	if (!rc)
		rc = record_sinks__add(&sinks, &c);
	while (!rc && (n = consumer__drain(&c)) > 0)
		;
	rc = artifact_writer__close(sinks.writer) ?: rc;
	*cpu = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
	*own = now_s(CLOCK_THREAD_CPUTIME_ID) - o0;
	*secs = now_s(CLOCK_MONOTONIC) - t0;
	*bytes = stat(path, &st) ? 0 : (uint64_t)st.st_size; /* every frame is in after close */
	if (!rc && c.rejected)
		rc = -EBADMSG;
	if (!rc && sinks.write_err)
		rc = sinks.write_err;
	consumer__destroy(&c);
	heap_acct__free(sinks.acct);
	return rc;
}

/* The artifact must hold exactly the input's artifact records, in order. */
static int check_artifact(const char *path, const struct mt_event *ev, size_t nr)
{
	struct artifact_reader *r;
	struct mt_event got;
	size_t i = 0;
	int rc = artifact_reader__open(&r, path);

	for (; !rc && i < nr; i++) {
		const struct mt_event *w = &ev[i];

		if (!records__name(w->type))
			continue; /* a control record: not in the artifact */
		rc = artifact_reader__next(r, &got);
		if (rc != 1 || got.type != w->type || got.pid != w->pid || got.tid != w->tid ||
		    got.ts != w->ts || got.addr != w->addr || got.size != w->size ||
		    got.aux != w->aux || got.old_addr != w->old_addr) {
			log__error("--check: record %zu differs (reader: %d)", i, rc);
			rc = -EBADMSG;
			break;
		}
		rc = 0;
	}
	if (!rc && artifact_reader__next(r, &got) != 0)
		rc = -EBADMSG;
	artifact_reader__free(r);
	return rc;
}

static int parse_size(const char *s, size_t *v)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(s, &end);
	if (errno || end == s || d < 0)
		return -EINVAL;
	if (*end == 'k' || *end == 'K')
		d *= 1e3, end++;
	else if (*end == 'M')
		d *= 1e6, end++;
	if (*end)
		return -EINVAL;
	*v = (size_t)d;
	return 0;
}

/* "2" or "0,2": the configs rounds alternate between */
static int parse_workers(const char *arg, struct opts *o)
{
	char *end;

	o->nconfigs = 0;
	do {
		unsigned long v = strtoul(arg, &end, 10);

		if (end == arg || v > 64 || o->nconfigs == MAX_CONFIGS || (*end && *end != ',')) {
			log__error("bad --workers '%s': up to %d numbers 0-64, comma-separated",
				   arg, MAX_CONFIGS);
			return -EINVAL;
		}
		o->workers[o->nconfigs++] = (unsigned)v;
		arg = end + 1;
	} while (*end);
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
	    {"events", required_argument, NULL, 'n'},
	    {"procs", required_argument, NULL, 'p'},
	    {"threads", required_argument, NULL, 't'},
	    {"live", required_argument, NULL, 'l'},
	    {"seed", required_argument, NULL, 's'},
	    {"replay", required_argument, NULL, 'r'},
	    {"batch", required_argument, NULL, 'b'},
	    {"rounds", required_argument, NULL, 'R'},
	    {"no-acct", no_argument, NULL, 'A'},
	    {"check", no_argument, NULL, 'c'},
	    {"level", required_argument, NULL, 'L'},
	    {"frame-events", required_argument, NULL, 'F'},
	    {"workers", required_argument, NULL, 'W'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	size_t v = 0;
	int ch;

	while ((ch = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		if (strchr("nptlsbRF", ch) && parse_size(optarg, &v)) {
			log__error("bad number '%s'", optarg);
			return -EINVAL;
		}
		switch (ch) {
		case 'n':
			o->synth.events = v;
			break;
		case 'p':
			o->synth.procs = (unsigned)v;
			break;
		case 't':
			o->synth.threads = (unsigned)v;
			break;
		case 'l':
			o->synth.live = (unsigned)v;
			break;
		case 's':
			o->synth.seed = v;
			break;
		case 'b':
			o->batch = v;
			break;
		case 'R':
			o->rounds = v > MAX_ROUNDS ? MAX_ROUNDS : (unsigned)v;
			break;
		case 'F':
			o->frame_events = v;
			break;
		case 'W':
			if (parse_workers(optarg, o))
				return -EINVAL;
			break;
		case 'L':
			o->level = atoi(optarg);
			break;
		case 'r':
			o->replay = optarg;
			break;
		case 'o':
			o->out = optarg;
			break;
		case 'A':
			o->no_acct = 1;
			break;
		case 'c':
			o->check = 1;
			break;
		case 'h':
			fputs(usage, stdout);
			exit(0);
		default:
			fputs(usage, stderr);
			return -EINVAL;
		}
	}
	if (optind != argc) {
		fputs(usage, stderr);
		return -EINVAL;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {
	    .synth = {.events = 2000000, .procs = 2, .threads = 2, .live = 1024, .seed = 1},
	    .batch = 256 * 1024 / (sizeof(struct mt_event) + 8), /* record + ring header */
	    .rounds = 5,
	    .level = ARTIFACT_DEFAULT_LEVEL,
	};
	double secs[MAX_CONFIGS][MAX_ROUNDS], cpu[MAX_CONFIGS][MAX_ROUNDS];
	double own[MAX_CONFIGS][MAX_ROUNDS], med, medc, medo;
	char tmp[] = "/tmp/memtrack-bench-consumer.XXXXXX";
	const char *path;
	struct mt_event *ev = NULL;
	struct rusage ru;
	uint64_t bytes = 0;
	size_t nr = 0;
	int rc, fd;

	if (parse_opts(argc, argv, &o))
		return 2;
	if (!o.nconfigs) {
		o.workers[0] = artifact__default_workers();
		o.nconfigs = 1;
	}
	rc = o.replay ? load_replay(o.replay, &ev, &nr) : synth__generate(&o.synth, &ev);
	if (rc) {
		if (o.replay)
			log__error("cannot read '%s': %s", o.replay, strerror(-rc));
		else
			log__error("cannot generate records: %s", strerror(-rc));
		return 1;
	}
	if (!o.replay)
		nr = o.synth.events;
	path = o.out;
	if (!path) {
		fd = mkstemp(tmp);
		if (fd < 0) {
			log__error("cannot create '%s': %s", tmp, strerror(errno));
			return 1;
		}
		close(fd);
		path = tmp;
	}
	for (unsigned i = 0; i < o.rounds * o.nconfigs && !rc; i++) {
		unsigned k = i % o.nconfigs, j = i / o.nconfigs;

		rc = run_round(&o, o.workers[k], path, ev, nr, &secs[k][j], &cpu[k][j],
			       &own[k][j], &bytes);
		if (!rc)
			printf("round %u, %u workers: %zu events in %.3f s (CPU %.3f s): "
			       "%.2f M events/s\n",
			       j + 1, o.workers[k], nr, secs[k][j], cpu[k][j], nr / secs[k][j] / 1e6);
	}
	if (!rc && o.check && o.rounds)
		rc = check_artifact(path, ev, nr);
	if (!o.out)
		unlink(tmp);
	free(ev);
	if (rc) {
		log__error("failed: %s", strerror(-rc));
		return 1;
	}
	if (!o.rounds) {
		printf("%zu records made, none dispatched (--rounds 0)\n", nr);
		return 0;
	}
	getrusage(RUSAGE_SELF, &ru);
	for (unsigned k = 0; k < o.nconfigs; k++) {
		qsort(secs[k], o.rounds, sizeof(double), cmp_double);
		qsort(cpu[k], o.rounds, sizeof(double), cmp_double);
		qsort(own[k], o.rounds, sizeof(double), cmp_double);
		medo = own[k][o.rounds / 2];
		med = secs[k][o.rounds / 2];
		medc = cpu[k][o.rounds / 2];
		/* CPU time is the figure for "one core" on a shared machine; the best round is the
		 * one least disturbed by neighbours (caches, SMT siblings). The consumer's thread
		 * alone bounds what workers on idle cores can reach. */
		printf("median of %u, %u workers: %.2f M events/s wall (%.1f ns/event, best %.2f), "
		       "%.2f M events/s CPU (best %.2f), consumer thread alone %.2f M events/s CPU; "
		       "artifact %.1f B/event; max RSS %ld MiB%s\n",
		       o.rounds, o.workers[k], nr / med / 1e6, med * 1e9 / nr,
		       nr / secs[k][0] / 1e6, nr / medc / 1e6, nr / cpu[k][0] / 1e6, nr / medo / 1e6,
		       (double)bytes / nr, ru.ru_maxrss / 1024,
		       o.check ? "; --check: artifact == input" : "");
	}
	return 0;
}
