// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
/*
 * `rmap_ops MODE [DIR]`: one address-space operation per mode, for the rmap-mode tests. Every
 * range the test must find in the Rmap records is reported on the side channel (expect.h) as
 * `OP PID TID TS ADDR 0 LEN` (LEN in bytes), every phase as a marker whose TS bounds a window
 * ("map_begin" precedes every "map" touch):
 *
 *	hole      64 MiB anon touched ("map"), a 16 MiB hole unmapped ("hole"), then the rest
 *	file      DIR/file (8 MiB, written and synced) mapped private read-only, every page read
 *	memfd     16 MiB memfd mapped shared, every page written ("shmem")
 *	fork      16 MiB touched ("map"), fork ("fork", SIZE = child pid); the child touches
 *	          32 MiB more ("child") and exits; the parent waits, then unmaps its own
 *	mremap    16 MiB touched ("map"), moved by mremap onto a reserved range ("moved",
 *	          between "move_begin" and "move_end"), then unmapped at the new place ("unmapped")
 *	dontneed  16 MiB touched ("map"), MADV_DONTNEED ("dontneed"), every page touched again
 *	          ("refault")
 *	pageout   as `file`, then the pid and range go to DIR/ready (a FIFO, "PID ADDR LEN\n") for
 *	          an outside process to reclaim; waits for a line on DIR/done, then unmaps
 *	readbuf   read(2) of an 8 MiB file into a fresh anon buffer (kernel-mode faults)
 *	populate  16 MiB each by MAP_POPULATE, MADV_POPULATE_WRITE and mlock (no fault at all)
 *	shrink    16 MiB touched, mremap in place to 8 MiB ("cut"); brk raised 4 MiB, touched,
 *	          lowered to an unaligned 100 pages + 123 bytes ("brk_cut": the pages that go)
 *	exec      16 MiB touched, then exec of itself in `memfd` mode
 *	small     3 pages of a memfd mapped shared and written, left to exit
 *	sparse    16 MiB mapped, only its upper half touched ("touched"), all unmapped
 *	threads   two threads touch 16 MiB each at once ("thread" per thread, inside
 *	          "threads_begin"/"threads_end"); neither exits before both reported, so
 *	          nothing is unmapped (glibc's exit-time stack madvise) before the last "thread"
 *	folds     three threads, pinned round-robin to the CPUs it may run on (its affinity:
 *	          a test run under taskset gets those CPUs), fault in and MADV_DONTNEED
 *	          random runs of pages of their own 8 MiB at once (runs of 1-64 and 1-256
 *	          pages: the rss counter's per-CPU batches fold in both directions, racing),
 *	          in 24 phases; after each, with every thread parked, the exact anon figure
 *	          of /proc/self/smaps_rollup ("anon", SIZE = bytes); for a failed check to say
 *	          where the pages differ: each region ("region", ADDR, SIZE = bytes) once, and
 *	          at each report its pages present by /proc/self/pagemap ("anon_regions", SIZE
 *	          = pages), smaps_rollup read again ("anon_again", bytes) and the pages the
 *	          kernel migrated meanwhile ("migrated", /proc/vmstat pgmigrate_success)
 *	pagepairs two threads pinned to two CPUs change one page per call, at once: one faults
 *	          2048 fresh pages in, the other zaps (MADV_DONTNEED) the 2048 the first faulted
 *	          in the round before, one madvise each; 32 rounds between "pairs_begin" and
 *	          "pairs_end", each followed by "anon" as in `folds`. Every batch folds at
 *	          exactly +32 and -32 pages: folds that cancel in the shared count.
 *	          "pair_cpus" (before "pairs_end", SIZE): how many CPUs the two threads
 *	          were seen on: 1 when the affinity left one CPU, and nothing raced
 *
 * Pages are touched one write (or read) per 4 KiB page, so the tests know how many pages each
 * step faults in (THP is disabled for the process: see main). No stdio on the way: nothing here
 *allocates but what is reported.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "expect.h"

#define MIB (1ul << 20)

static size_t pg;

static char *map_anon(size_t len)
{
	char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return m == MAP_FAILED ? NULL : m;
}

static void touch(volatile char *m, size_t len)
{
	for (size_t off = 0; off < len; off += pg)
		m[off] = 1;
}

/* Reads every page; returns the sum so the compiler keeps the loads. */
static unsigned read_pages(const volatile char *m, size_t len)
{
	unsigned s = 0;

	for (size_t off = 0; off < len; off += pg)
		s += (unsigned char)m[off];
	return s;
}

/* An anonymous mapping of len bytes, every page touched between "map_begin" and "map". */
static char *map_touched(size_t len)
{
	char *m = map_anon(len);

	if (!m)
		return NULL;
	mt_say("map_begin", MT_P(m), 0, len);
	touch(m, len);
	mt_say("map", MT_P(m), 0, len);
	return m;
}

static int do_hole(void)
{
	size_t len = 64 * MIB, hole = 16 * MIB;
	char *m = map_touched(len);

	if (!m)
		return 1;
	mt_say("hole", MT_P(m + hole), 0, hole);
	if (munmap(m + hole, hole))
		return 1;
	mt_say("rest", MT_P(m), 0, len);
	munmap(m, hole);
	munmap(m + 2 * hole, len - 2 * hole);
	mt_say_fact("done", 0);
	return 0;
}

/* A clean file of len bytes of 0x5a in dir, already unlinked; returns its fd or -1. */
static int make_file(const char *dir, size_t len)
{
	char path[4096], buf[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/file", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	unlink(path);
	memset(buf, 0x5a, sizeof(buf));
	for (size_t off = 0; off < len; off += sizeof(buf))
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			return -1;
	/* clean pages: reclaim drops clean file pages without writeback (no swap needed) */
	return fsync(fd) ? -1 : fd;
}

/* A clean file in dir, mapped private read-only (not read yet). */
static char *map_file(const char *dir, size_t len)
{
	int fd = make_file(dir, len);
	char *m;

	if (fd < 0)
		return NULL;
	m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

static int do_file(const char *dir)
{
	size_t len = 8 * MIB;
	char *m = map_file(dir, len);

	if (!m)
		return 1;
	mt_say("file_begin", MT_P(m), 0, len);
	if (read_pages(m, len) != 0x5a * (len / pg))
		return 1;
	mt_say("file", MT_P(m), 0, len);
	munmap(m, len);
	mt_say_fact("done", 0);
	return 0;
}

/* A shared mapping of a fresh memfd of len bytes (shmem pages once touched); NULL on error. */
static char *map_memfd(const char *name, size_t len)
{
	int fd = memfd_create(name, 0);
	char *m;

	if (fd < 0 || ftruncate(fd, (off_t)len))
		return NULL;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd); /* the mapping keeps the file; its resident pages go at munmap as before */
	return m == MAP_FAILED ? NULL : m;
}

static int do_memfd(void)
{
	size_t len = 16 * MIB;
	char *m = map_memfd("rmap_ops", len);

	if (!m)
		return 1;
	mt_say("shmem_begin", MT_P(m), 0, len);
	touch(m, len);
	mt_say("shmem", MT_P(m), 0, len);
	munmap(m, len);
	mt_say_fact("done", 0);
	return 0;
}

static int do_fork(void)
{
	size_t len = 16 * MIB, clen = 32 * MIB;
	char *m = map_touched(len);
	pid_t pid;
	int st;

	if (!m)
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		char *c = map_anon(clen);

		if (!c)
			_exit(1);
		mt_say("child_begin", MT_P(c), 0, clen);
		touch(c, clen);
		mt_say("child", MT_P(c), 0, clen);
		_exit(0);
	}
	mt_say_fact("fork", (uint64_t)pid);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	munmap(m, len);
	mt_say_fact("done", 0);
	return 0;
}

static int do_mremap(void)
{
	size_t len = 16 * MIB;
	char *m = map_touched(len), *dst, *moved;

	/* a reserved, never touched range as the destination forces a real move */
	dst = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (!m || dst == MAP_FAILED)
		return 1;
	mt_say_fact("move_begin", 0);
	moved = mremap(m, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
	if (moved != dst)
		return 1;
	mt_say("move_end", MT_P(moved), MT_P(m), len);
	if (munmap(moved, len))
		return 1;
	mt_say("unmapped", MT_P(moved), 0, len);
	mt_say_fact("done", 0);
	return 0;
}

static int do_dontneed(void)
{
	size_t len = 16 * MIB;
	char *m = map_touched(len);

	if (!m)
		return 1;
	if (madvise(m, len, MADV_DONTNEED))
		return 1;
	mt_say("dontneed", MT_P(m), 0, len);
	touch(m, len);
	mt_say("refault", MT_P(m), 0, len);
	munmap(m, len);
	mt_say_fact("done", 0);
	return 0;
}

static int do_pageout(const char *dir)
{
	size_t len = 8 * MIB;
	char path[4096], line[128];
	char *m = map_file(dir, len);
	int fd, n;

	alarm(60); /* never hang on a FIFO whose other end died */
	if (!m || read_pages(m, len) != 0x5a * (len / pg))
		return 1;
	mt_say("file", MT_P(m), 0, len);
	snprintf(path, sizeof(path), "%s/ready", dir);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return 1;
	n = snprintf(line, sizeof(line), "%ld 0x%llx %zu\n", (long)getpid(),
		     (unsigned long long)MT_P(m), len);
	if (write(fd, line, (size_t)n) != n)
		return 1;
	close(fd);
	snprintf(path, sizeof(path), "%s/done", dir);
	fd = open(path, O_RDONLY);
	if (fd < 0 || read(fd, line, sizeof(line)) <= 0)
		return 1;
	close(fd);
	mt_say("reclaimed", MT_P(m), 0, len);
	munmap(m, len);
	mt_say_fact("done", 0);
	return 0;
}

/* read(2) into a fresh anonymous buffer: the pages are faulted in by the kernel's copy. */
static int do_readbuf(const char *dir)
{
	size_t len = 8 * MIB, got = 0;
	int fd = make_file(dir, len);
	char *m = map_anon(len);
	ssize_t k;

	if (fd < 0 || !m || lseek(fd, 0, SEEK_SET))
		return 1;
	mt_say("readbuf_begin", MT_P(m), 0, len);
	while (got < len && (k = read(fd, m + got, len - got)) > 0)
		got += (size_t)k;
	if (got != len)
		return 1;
	mt_say("readbuf", MT_P(m), 0, len);
	close(fd);
	munmap(m, len);
	mt_say_fact("done", 0);
	return 0;
}

/* Pages mapped without a fault: MAP_POPULATE, MADV_POPULATE_WRITE, mlock. */
static int do_populate(void)
{
	size_t len = 16 * MIB;
	char *m, *a, *l;

	mt_say_fact("populate_begin", 0);
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1,
		 0);
	if (m == MAP_FAILED)
		return 1;
	mt_say("populate", MT_P(m), 0, len);
	a = map_anon(len);
	if (!a)
		return 1;
	mt_say("madv_begin", MT_P(a), 0, len);
	if (madvise(a, len, MADV_POPULATE_WRITE))
		return 1;
	mt_say("madv", MT_P(a), 0, len);
	l = map_anon(len);
	if (!l)
		return 1;
	mt_say("mlock_begin", MT_P(l), 0, len);
	if (mlock(l, len))
		return 1;
	mt_say("mlock", MT_P(l), 0, len);
	munlock(l, len);
	munmap(m, len);
	munmap(a, len);
	munmap(l, len);
	mt_say_fact("done", 0);
	return 0;
}

/* Shrinking: mremap in place to half (the tail goes), brk lowered to an unaligned value. */
static int do_shrink(void)
{
	size_t len = 16 * MIB, blen = 4 * MIB, keep = 100 * pg + 123;
	char *m = map_touched(len), *b0, *b1;

	if (!m)
		return 1;
	if (mremap(m, len, len / 2, 0) != m)
		return 1;
	mt_say("cut", MT_P(m + len / 2), 0, len / 2);
	b0 = (char *)(((uintptr_t)sbrk(0) + pg - 1) & ~(uintptr_t)(pg - 1));
	if (brk(b0 + blen))
		return 1;
	mt_say("brk_begin", MT_P(b0), 0, blen);
	touch(b0, blen);
	mt_say("brk", MT_P(b0), 0, blen);
	b1 = (char *)(((uintptr_t)b0 + keep + pg - 1) & ~(uintptr_t)(pg - 1));
	if (brk(b0 + keep))
		return 1;
	mt_say("brk_cut", MT_P(b1), 0, (uint64_t)(b0 + blen - b1));
	munmap(m, len / 2);
	mt_say_fact("done", 0);
	return 0;
}

/* Fewer pages than --rss-step of a member that was 0 (shmem), kept until exit. */
static int do_small(void)
{
	size_t len = 3 * pg;
	char *m = map_memfd("rmap_small", len);

	if (!m)
		return 1;
	touch(m, len);
	mt_say("shmem", MT_P(m), 0, len);
	return 0; /* exit takes the pages back */
}

/* Partly resident: only the upper half of 16 MiB touched, then the whole range unmapped. */
static int do_sparse(void)
{
	size_t len = 16 * MIB;
	char *m = map_anon(len);

	if (!m)
		return 1;
	touch(m + len / 2, len / 2);
	mt_say("touched", MT_P(m + len / 2), 0, len / 2);
	munmap(m, len);
	mt_say("unmapped", MT_P(m), 0, len);
	return 0;
}

struct toucher {
	char *m;
	size_t len;
	int go; /* both start together, so their faults interleave */
	pthread_barrier_t *done; /* both reported: only then may either exit */
};

static void *toucher_main(void *arg)
{
	struct toucher *t = arg;

	while (!__atomic_load_n(&t->go, __ATOMIC_ACQUIRE))
		;
	touch(t->m, t->len);
	mt_say("thread", MT_P(t->m), 0, t->len);
	pthread_barrier_wait(t->done);
	return NULL;
}

/* Two threads touching 16 MiB each at the same time. */
static int do_threads(void)
{
	struct toucher t[2];
	pthread_t th[2];
	pthread_barrier_t done;

	if (pthread_barrier_init(&done, NULL, 2))
		return 1;
	for (int i = 0; i < 2; i++) {
		t[i] = (struct toucher){.m = map_anon(16 * MIB), .len = 16 * MIB, .done = &done};
		if (!t[i].m)
			return 1;
	}
	mt_say_fact("threads_begin", 0);
	for (int i = 0; i < 2; i++)
		if (pthread_create(&th[i], NULL, toucher_main, &t[i]))
			return 1;
	for (int i = 0; i < 2; i++)
		__atomic_store_n(&t[i].go, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	mt_say_fact("threads_end", 0);
	return 0;
}

#define FOLD_THREADS 3
#define FOLD_PHASES 24
#define FOLD_OPS 300 /* per thread and phase */
#define FOLD_PAGES 2048 /* 8 MiB of 4 KiB pages per thread */

struct folder {
	char *m;
	unsigned seed;
	int cpu;
	pthread_barrier_t *run, *parked;
};

static char smaps_buf[4096]; /* touched before the first phase: reading faults nothing */

/* smaps_rollup's "Anonymous:" in bytes (a walk of the page tables: exact, every kernel), or
 * -1. open/read/close only: nothing allocated, no page of ours faulted. */
static long long smaps_anon(void)
{
	int fd = open("/proc/self/smaps_rollup", O_RDONLY);
	ssize_t n;
	char *p;

	if (fd < 0)
		return -1;
	n = read(fd, smaps_buf, sizeof(smaps_buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	smaps_buf[n] = 0;
	p = strstr(smaps_buf, "\nAnonymous:");
	return p ? strtoll(p + 11, NULL, 10) * 1024 : -1;
}

/* Pages present or swapped in [m, m + n pages), by /proc/self/pagemap (bits 63, 62), or -1.
 * Into a static buffer touched before the first phase: reading faults nothing of ours. */
static uint64_t pagemap_buf[2048];

static long long pagemap_present(const char *m, size_t n)
{
	int fd = open("/proc/self/pagemap", O_RDONLY);
	long long present = 0;

	if (fd < 0)
		return -1;
	for (size_t done = 0; done < n;) {
		size_t k = n - done < 2048 ? n - done : 2048;
		off_t off = (off_t)((uintptr_t)m / pg + done) * 8;

		if (pread(fd, pagemap_buf, k * 8, off) != (ssize_t)(k * 8)) {
			present = -1;
			break;
		}
		for (size_t i = 0; i < k; i++)
			present += (pagemap_buf[i] >> 62) != 0;
		done += k;
	}
	close(fd);
	return present;
}

/* /proc/vmstat's pgmigrate_success, or -1 (nothing allocated: a static buffer) */
static char vmstat_buf[16384];

static long long vmstat_migrated(void)
{
	int fd = open("/proc/vmstat", O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, vmstat_buf, sizeof(vmstat_buf) - 1);
	char *p;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	vmstat_buf[n] = 0;
	p = strstr(vmstat_buf, "\npgmigrate_success ");
	return p ? strtoll(p + 20, NULL, 10) : -1;
}

/* The CPUs this process may run on (its affinity), at most max of them; at least one. */
static int allowed_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int n = 0;

	if (!sched_getaffinity(0, sizeof(set), &set))
		for (int c = 0; c < CPU_SETSIZE && n < max; c++)
			if (CPU_ISSET(c, &set))
				cpus[n++] = c;
	if (!n)
		cpus[n++] = 0;
	return n;
}

static void pin_to(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set); /* best effort */
}

static unsigned fold_rand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static void *folder_main(void *arg)
{
	struct folder *f = arg;

	pin_to(f->cpu);
	for (int ph = 0; ph < FOLD_PHASES; ph++) {
		pthread_barrier_wait(f->run);
		for (int i = 0; i < FOLD_OPS; i++) {
			unsigned r = fold_rand(&f->seed);
			size_t first = r % FOLD_PAGES, n;

			if ((r >> 12) % 5 < 3) {
				n = 1 + (r >> 16) % 64;
				if (first + n > FOLD_PAGES)
					n = FOLD_PAGES - first;
				touch(f->m + first * pg, n * pg);
			} else {
				n = 1 + (r >> 16) % 256;
				if (first + n > FOLD_PAGES)
					n = FOLD_PAGES - first;
				madvise(f->m + first * pg, n * pg, MADV_DONTNEED);
			}
		}
		pthread_barrier_wait(f->parked);
	}
	return NULL;
}

/* Threads folding the rss counter's per-CPU batches against each other (see the usage). */
static int do_folds(void)
{
	struct folder f[FOLD_THREADS];
	pthread_t th[FOLD_THREADS];
	pthread_barrier_t run, parked;
	int cpus[FOLD_THREADS], ncpu = allowed_cpus(cpus, FOLD_THREADS);

	if (pthread_barrier_init(&run, NULL, FOLD_THREADS + 1) ||
	    pthread_barrier_init(&parked, NULL, FOLD_THREADS + 1) || smaps_anon() < 0)
		return 1;
	for (int i = 0; i < FOLD_THREADS; i++) {
		f[i] = (struct folder){.m = map_anon(FOLD_PAGES * pg), .seed = 7919u * (i + 1),
				       .cpu = cpus[i % ncpu], .run = &run, .parked = &parked};
		if (!f[i].m || pthread_create(&th[i], NULL, folder_main, &f[i]))
			return 1;
	}
	memset(pagemap_buf, 0, sizeof(pagemap_buf));
	memset(vmstat_buf, 0, sizeof(vmstat_buf));
	for (int i = 0; i < FOLD_THREADS; i++)
		mt_say("region", MT_P(f[i].m), 0, FOLD_PAGES * pg);
	for (int ph = 0; ph < FOLD_PHASES; ph++) {
		long long migrated = vmstat_migrated(), present = 0;

		pthread_barrier_wait(&run);
		pthread_barrier_wait(&parked);
		mt_say("anon", 0, 0, (uint64_t)smaps_anon());
		/* what a failed check prints (see the usage): after the report, which is what
		 * the check compares */
		for (int i = 0; i < FOLD_THREADS && present >= 0; i++) {
			long long n = pagemap_present(f[i].m, FOLD_PAGES);

			present = n < 0 ? -1 : present + n;
		}
		mt_say_fact("anon_regions", (uint64_t)present);
		mt_say_fact("anon_again", (uint64_t)smaps_anon());
		mt_say_fact("migrated", (uint64_t)(vmstat_migrated() - migrated));
	}
	for (int i = 0; i < FOLD_THREADS; i++)
		pthread_join(th[i], NULL);
	return 0;
}

#define PAIR_ROUNDS 32

struct pairer {
	char *m[2]; /* the two regions, FOLD_PAGES each, used in turn */
	int zapper; /* 0: faults region[k % 2] in round k; 1: zaps region[(k + 1) % 2] */
	int cpu;
	uint64_t seen; /* bit c: the thread ran on CPU c (c < 64) during a round */
	pthread_barrier_t *run, *parked;
};

static void *pairer_main(void *arg)
{
	struct pairer *t = arg;

	pin_to(t->cpu);
	for (int k = 0; k < PAIR_ROUNDS; k++) {
		char *m = t->m[(k + t->zapper) % 2];
		int c;

		pthread_barrier_wait(t->run);
		for (size_t i = 0; i < FOLD_PAGES; i++) {
			if (t->zapper)
				madvise(m + i * pg, pg, MADV_DONTNEED);
			else
				m[i * pg] = 1;
			if (i % 256 == 0 && (c = sched_getcpu()) >= 0 && c < 64)
				t->seen |= 1ull << c;
		}
		pthread_barrier_wait(t->parked);
	}
	return NULL;
}

/* One page per change on two CPUs at once (see the usage). */
static int do_pagepairs(void)
{
	struct pairer t[2];
	pthread_t th[2];
	pthread_barrier_t run, parked;
	char *m0 = map_anon(FOLD_PAGES * pg), *m1 = map_anon(FOLD_PAGES * pg);

	if (!m0 || !m1 || pthread_barrier_init(&run, NULL, 3) ||
	    pthread_barrier_init(&parked, NULL, 3) || smaps_anon() < 0)
		return 1;
	int cpus[2], ncpu = allowed_cpus(cpus, 2);

	for (int i = 0; i < 2; i++) {
		t[i] = (struct pairer){.m = {m0, m1}, .zapper = i, .cpu = cpus[i % ncpu],
				       .run = &run, .parked = &parked};
		if (pthread_create(&th[i], NULL, pairer_main, &t[i]))
			return 1;
	}
	mt_say_fact("pairs_begin", 0);
	for (int k = 0; k < PAIR_ROUNDS; k++) {
		pthread_barrier_wait(&run);
		pthread_barrier_wait(&parked);
		mt_say("anon", 0, 0, (uint64_t)smaps_anon());
	}
	/* parked: their `seen` is final */
	mt_say_fact("pair_cpus", (uint64_t)__builtin_popcountll(t[0].seen | t[1].seen));
	mt_say_fact("pairs_end", 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	return 0;
}

/* exec after touching: the re-based counters of the new image have no page address. */
static int do_exec(void)
{
	size_t len = 16 * MIB;
	char *m = map_anon(len);

	if (!m)
		return 1;
	touch(m, len);
	mt_say("map", MT_P(m), 0, len);
	execl("/proc/self/exe", "rmap_ops", "memfd", (char *)NULL);
	return 1;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *dir = argc > 2 ? argv[2] : "/tmp";

	mt_expect_init();
	pg = (size_t)sysconf(_SC_PAGESIZE);
	/* No THP: no mode is about huge pages, and the tests count pages and place them by
	 * address. With THP "always" (Debian's kernels) a fault maps 512 pages at once, a partial
	 * munmap splits a THP (+512 then -512 at its start, maybe outside the range) and
	 * khugepaged collapses ranges by its own tid; disabled here, every kernel and backend
	 * sees the 4 KiB pages the loops touch. Inherited by the fork child, kept across exec. */
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0))
		return 1;
	/* the first report faults in the reporting code itself (libc text, fault-around): not
	 * inside any window the tests look at */
	mt_say_fact("start", 0);
	if (!strcmp(mode, "hole"))
		return do_hole();
	if (!strcmp(mode, "file"))
		return do_file(dir);
	if (!strcmp(mode, "memfd"))
		return do_memfd();
	if (!strcmp(mode, "fork"))
		return do_fork();
	if (!strcmp(mode, "mremap"))
		return do_mremap();
	if (!strcmp(mode, "dontneed"))
		return do_dontneed();
	if (!strcmp(mode, "pageout"))
		return do_pageout(dir);
	if (!strcmp(mode, "readbuf"))
		return do_readbuf(dir);
	if (!strcmp(mode, "populate"))
		return do_populate();
	if (!strcmp(mode, "shrink"))
		return do_shrink();
	if (!strcmp(mode, "exec"))
		return do_exec();
	if (!strcmp(mode, "small"))
		return do_small();
	if (!strcmp(mode, "sparse"))
		return do_sparse();
	if (!strcmp(mode, "threads"))
		return do_threads();
	if (!strcmp(mode, "folds"))
		return do_folds();
	if (!strcmp(mode, "pagepairs"))
		return do_pagepairs();
	return 2;
}
