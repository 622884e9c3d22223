// SPDX-License-Identifier: MIT
#define _GNU_SOURCE
/*
 * `mt_target touch|hole MIB`: touch MIB of anonymous memory; `hole` then unmaps 16 MiB from
 * its middle. What it did is written to the fd named by $MT_EXPECT_FD, one line per operation
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
	const char *e = getenv("MT_EXPECT_FD");
	int mib = argc > 2 ? atoi(argv[2]) : 64;
	char *m;

	if (e)
		expect_fd = atoi(e);
	if (argc < 2 || (strcmp(argv[1], "touch") && strcmp(argv[1], "hole")))
		return 2;
	if (touch((size_t)mib, &m))
		return 1;
	say_hwm();
	if (!strcmp(argv[1], "hole") && mib >= 32) {
		say("hole %p %d\n", m + (16 << 20), 16 << 20);
		munmap(m + (16 << 20), 16 << 20);
	}
	return 0;
}
