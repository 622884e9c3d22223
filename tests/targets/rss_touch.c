// SPDX-License-Identifier: MIT
/*
 * `rss_touch [MIB [nothp]]`: map MIB (default 64) MiB anonymous (nothp: with THP disabled for
 * the process, so every touch faults in one 4 KiB page even where THP is "always"), touch
 * every page, then report the kernel's own high-water mark (VmHWM of /proc/self/status, "hwm"
 * in bytes) for the tests to compare memtrack's peak RSS with. read(2), not stdio: nothing allocates on the way.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include "expect.h"

static long status_kib(const char *key)
{
	char buf[8192], *p;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	p = strstr(buf, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
	size_t len = mib << 20;
	long pg = sysconf(_SC_PAGESIZE);
	volatile char *m;

	mt_expect_init();
	if (argc > 2 && !strcmp(argv[2], "nothp") && prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0))
		return 1;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	for (size_t off = 0; off < len; off += (size_t)pg)
		m[off] = 1;
	mt_say("touch", MT_P((const void *)m), 0, len);
	mt_say_fact("hwm", (uint64_t)status_kib("VmHWM:") * 1024);
	munmap((void *)m, len);
	return 0;
}
