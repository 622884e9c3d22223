/* SPDX-License-Identifier: MIT */
/*
 * System calls made inline, for the interposer's paths in a fresh fork child. After a fork the
 * child's page tables hold none of the parent's file-backed pages: the first call of each libc
 * function whose code sits in a 64 KiB window the child has not run yet is a page fault, ~10-15
 * us on this VM (a child's first allocation faulted on gettid, sysconf and __errno_location's
 * code, ~40 us of its ~0.35 ms). An inline `syscall` instruction runs from the interposer's own
 * code, already mapped, and sets no errno. Elsewhere than x86-64: libc's syscall().
 * Each returns the kernel's value: >= 0, or -errno.
 */
#ifndef MEMTRACK_PRELOAD_SYS_H
#define MEMTRACK_PRELOAD_SYS_H

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
static inline long pl_sys3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "0"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}
#else
/* i386 too: this kernel refuses 32-bit programs, so no test here could run inline code there */
static inline long pl_sys3(long nr, long a, long b, long c)
{
	int saved = errno;
	long ret = syscall(nr, a, b, c);

	if (ret == -1)
		ret = -errno;
	errno = saved;
	return ret;
}
#endif

static inline int pl_sys_getpid(void)
{
	return (int)pl_sys3(SYS_getpid, 0, 0, 0);
}

static inline int pl_sys_getppid(void)
{
	return (int)pl_sys3(SYS_getppid, 0, 0, 0);
}

static inline int pl_sys_gettid(void)
{
	return (int)pl_sys3(SYS_gettid, 0, 0, 0);
}

static inline int pl_sys_madvise(void *addr, size_t len, int advice)
{
	return (int)pl_sys3(SYS_madvise, (long)addr, (long)len, advice);
}

#endif
