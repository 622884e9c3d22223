// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
/*
 * Workloads with known allocations for the root tests: `mt_target MODE [ARG]`.
 * What each mode did is written to the fd named by $MT_EXPECT_FD, one line per operation
 * ("malloc ADDR SIZE", ...), formatted on the stack and written with write(2): no stdio, so
 * the report itself allocates nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int expect_fd = -1;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	if (expect_fd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	(void)!write(expect_fd, buf, n);
}

static int mode_libc(void)
{
	void *a, *b, *c, *d, *e, *f, *g = NULL, *h = NULL, *v, *ra, *z;
	int r1, r2;

	a = malloc(100);
	say("malloc %p 100\n", a);
	b = calloc(10, 20);
	say("calloc %p 200\n", b);
	c = realloc(NULL, 33);
	say("realloc %p 0 33\n", c);
	d = realloc(a, 5000);
	say("realloc %p %p 5000\n", d, a);
	e = aligned_alloc(64, 256);
	say("aligned %p 256\n", e);
	f = memalign(128, 300);
	say("aligned %p 300\n", f);
	r1 = posix_memalign(&g, 32, 400);
	say("aligned %p 400 rc=%d\n", g, r1);
	r2 = posix_memalign(&h, 3, 500); /* EINVAL: no event */
	say("einval rc=%d\n", r2);
	v = valloc(1000);
	say("aligned %p 1000\n", v);
	ra = reallocarray(NULL, 7, 9);
	say("realloc %p 0 63\n", ra);
	z = realloc(c, 0); /* glibc frees c and returns NULL */
	say("free %p\n", c);
	(void)z;
	free(b);
	say("free %p\n", b);
	free(d);
	say("free %p\n", d);
	free(e);
	say("free %p\n", e);
	free(f);
	say("free %p\n", f);
	free(g);
	say("free %p\n", g);
	free(v);
	say("free %p\n", v);
	free(ra);
	say("free %p\n", ra);
	free(NULL);
	return 0;
}

static void *thread_body(void *arg)
{
	void *p = malloc((size_t)(uintptr_t)arg);

	say("thread %ld %p %zu\n", (long)gettid(), p, (size_t)(uintptr_t)arg);
	free(p);
	return NULL;
}

static int mode_threads(int leader_exits)
{
	pthread_t th[3];

	for (int i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, thread_body, (void *)(uintptr_t)(70001 + i));
	if (leader_exits) {
		/* the group lives on in its threads: their allocations are still tracked */
		pthread_exit(NULL);
	}
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	return 0;
}

static int mode_fork(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		void *p = malloc(12345);

		say("child %d %p 12345\n", getpid(), p);
		free(p);
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	return 0;
}

static int mode_exec(const char *self, int n)
{
	void *p = malloc(1000 + n);
	char arg[16];

	say("stage %d %p %d\n", n, p, 1000 + n);
	if (n == 0)
		return 0;
	snprintf(arg, sizeof(arg), "%d", n - 1);
	execl(self, self, "exec", arg, (char *)NULL);
	return 1;
}

static int mode_neighbour(int seconds)
{
	time_t end = time(NULL) + seconds;

	while (time(NULL) < end) {
		void *p = malloc(123457);

		free(p);
		usleep(1000);
	}
	return 0;
}

static int touch(size_t mib, char **out)
{
	size_t sz = mib << 20;
	char *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m == MAP_FAILED)
		return 1;
	for (size_t off = 0; off < sz; off += 4096)
		m[off] = 1;
	*out = m;
	return 0;
}

/* The kernel's own high-water mark, for the tests to compare memtrack's peak with. */
static void say_hwm(void)
{
	char buf[4096], *p;
	int fd = open("/proc/self/status", O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	p = strstr(buf, "VmHWM:");
	if (p)
		say("hwm %ld\n", strtol(p + 6, NULL, 10) * 1024);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *e = getenv("MT_EXPECT_FD");
	int arg = argc > 2 ? atoi(argv[2]) : 0;

	if (e)
		expect_fd = atoi(e);
	if (!strcmp(mode, "libc"))
		return mode_libc();
	if (!strcmp(mode, "threads"))
		return mode_threads(0);
	if (!strcmp(mode, "leader-exit"))
		return mode_threads(1);
	if (!strcmp(mode, "fork"))
		return mode_fork();
	if (!strcmp(mode, "exec"))
		return mode_exec(argv[0], arg);
	if (!strcmp(mode, "neighbour"))
		return mode_neighbour(arg);
	if (!strcmp(mode, "exit"))
		return arg;
	if (!strcmp(mode, "kill"))
		return raise(arg);
	if (!strcmp(mode, "touch") || !strcmp(mode, "hole")) {
		char *m;

		if (touch((size_t)arg, &m))
			return 1;
		say_hwm();
		if (!strcmp(mode, "hole")) {
			say("hole %p %d\n", m + (16 << 20), 16 << 20);
			munmap(m + (16 << 20), 16 << 20);
		}
		return 0;
	}
	return 2;
}
