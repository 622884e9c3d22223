/* SPDX-License-Identifier: MIT */
/*
 * Mapping pages ahead of their first touch, in one system call. On a VM that traps page-table
 * work (this one) each first touch of a page is a fault of ~10-11 us, where
 * madvise(MADV_POPULATE_WRITE) maps them for ~0.4-1.1 us a page. Used by the artifact's frame
 * buffers (src/artifact/frame_pipe.c) and by the interposer's rings (src/preload/); header-only
 * because the interposer links nothing of memtrack's. No allocation, errno kept.
 */
#ifndef MEMTRACK_POPULATE_H
#define MEMTRACK_POPULATE_H

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Maps the pages [a, b) (page-aligned; nothing when b <= a) for writing. 0, or -errno:
 * -EINVAL before Linux 5.14, where the pages then fault in one by one as before. */
static inline int populate__pages(uintptr_t a, uintptr_t b)
{
	int saved = errno, rc = 0;

	if (b > a && madvise((void *)a, b - a, MADV_POPULATE_WRITE))
		rc = -errno;
	errno = saved;
	return rc;
}

#endif
