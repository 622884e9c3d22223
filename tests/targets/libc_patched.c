// SPDX-License-Identifier: MIT
/*
 * `libc_patched [clean MS]`: do glibc's allocator entry points carry a breakpoint in this
 * process? A uprobe writes its int3 into each process's copy of the page, wherever in the
 * function's first 64 bytes memtrack placed it (probe placement: at most 63 bytes in), so the
 * first 64 bytes of each, in memory, are compared with libc's file. Prints "patched" (exit 1)
 * or "clean" (exit 0). With `clean MS` it looks again every 10 ms until clean, for at most MS
 * ms. The same on every kernel (uprobe_multi links or perf uprobes), unlike the link list.
 * For tests/bpf/test_track_glibc.c.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SPAN 64

static const char *const names[] = {"malloc",	      "free",	       "calloc",   "realloc",
				    "posix_memalign", "aligned_alloc", "memalign", "valloc",
				    "pvalloc",	      "dlopen",	       NULL};

/* Where addr lies in its file, from /proc/self/maps: 0 and path and *off, or -1. */
static int file_of(uintptr_t addr, char *path, size_t cap, off_t *off)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	int rc = -1;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, o;
		char p[4096];

		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095s", &lo, &hi, &o, p) != 4)
			continue;
		if (addr >= lo && addr + SPAN <= hi) {
			snprintf(path, cap, "%s", p);
			*off = (off_t)(addr - lo + o);
			rc = 0;
			break;
		}
	}
	if (f)
		fclose(f);
	return rc;
}

/* 1 when some entry point differs from the file, 0 when none does, -1 on failure */
static int patched(void *libc)
{
	for (size_t i = 0; names[i]; i++) {
		unsigned char disk[SPAN];
		char path[4096];
		void *fn = dlsym(libc, names[i]);
		off_t off;
		int fd;

		if (!fn)
			continue; /* not in this glibc */
		if (file_of((uintptr_t)fn, path, sizeof(path), &off))
			return -1;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || pread(fd, disk, SPAN, off) != SPAN) {
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
		if (memcmp(disk, fn, SPAN))
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long ms = argc > 2 && !strcmp(argv[1], "clean") ? atol(argv[2]) : 0;
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD); /* glibc's own definitions */
	int p;

	if (!libc)
		return 2;
	for (long waited = 0;; waited += 10) {
		p = patched(libc);
		if (p <= 0 || waited >= ms)
			break;
		nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
	}
	if (p < 0)
		return 2;
	printf("%s\n", p ? "patched" : "clean");
	return p;
}
