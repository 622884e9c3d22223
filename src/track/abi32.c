// SPDX-License-Identifier: MIT
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/log.h"
#include "preload/shm_abi.h"
#include "track/abi32.h"

#define LIB64_NAME "libmemtrack-preload.so"
#define LIB32_NAME "libmemtrack-preld32.so"
_Static_assert(sizeof(LIB64_NAME) == sizeof(LIB32_NAME), "rewritten in place: the same length");

/* An environment larger than this is not looked at (the kernel's own limit on one string is
 * 128 KiB; whole environments of megabytes are rare) */
#define ENV_MAX (4u << 20)

/* The ELF header of an i386 file at path, and whether it has a PT_INTERP: 0 or -errno. */
static int abi32__elf(const char *path, bool *interp)
{
	Elf32_Ehdr eh;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = -ENOEXEC;

	*interp = false;
	if (fd < 0)
		return -errno;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS32 ||
	    eh.e_machine != EM_386 || eh.e_phentsize != sizeof(Elf32_Phdr))
		goto cleanup;
	err = 0;
	for (unsigned i = 0; i < eh.e_phnum && i < 256; i++) {
		Elf32_Phdr ph;

		if (pread(fd, &ph, sizeof(ph), (off_t)eh.e_phoff + (off_t)i * sizeof(ph)) !=
		    (ssize_t)sizeof(ph)) {
			err = -ENOEXEC;
			break;
		}
		if (ph.p_type == PT_INTERP)
			*interp = true;
	}
cleanup:
	close(fd);
	return err;
}

void abi32__init(struct abi32 *a, const char *lib64)
{
	const char *slash = strrchr(lib64, '/');
	bool interp;

	memset(a, 0, sizeof(*a));
	if (!slash || strcmp(slash + 1, LIB64_NAME) || strlen(lib64) >= sizeof(a->lib))
		return; /* a renamed interposer (MEMTRACK_PRELOAD_LIB): no sibling to find */
	a->name_off = (size_t)(slash + 1 - lib64);
	snprintf(a->lib64, sizeof(a->lib64), "%s", lib64);
	snprintf(a->lib, sizeof(a->lib), "%.*s%s", (int)a->name_off, lib64, LIB32_NAME);
	if (abi32__elf(a->lib, &interp)) {
		log__debug(1, "no i386 interposer ('%s'): 32-bit programs are not recorded",
			   a->lib);
		a->lib[0] = 0;
	}
}

bool abi32__dynamic_i386(const char *path)
{
	bool interp;

	return !abi32__elf(path, &interp) && interp;
}

/* env_start and env_end of pid (/proc/PID/stat fields 50 and 51): 0 or -errno. */
static int abi32__env_range(pid_t pid, unsigned long *start, unsigned long *end)
{
	char path[64], buf[2048], *p;
	int fd, field = 2;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the name (field 2) may hold spaces and parentheses */
	if (!p)
		return -EIO;
	for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " ")) {
		if (++field == 50)
			*start = strtoul(tok, NULL, 10);
		else if (field == 51) {
			*end = strtoul(tok, NULL, 10);
			return *end > *start ? 0 : -EIO;
		}
	}
	return -EIO;
}

int abi32__rewrite(struct abi32 *a, pid_t pid, bool to32, const char *shm)
{
	const char *from = to32 ? a->lib64 : a->lib, *to = to32 ? a->lib : a->lib64;
	size_t flen = strlen(from), len, at[8];
	unsigned long start, end;
	char path[64], *env = NULL;
	int fd = -1, err, nr = 0, named = 0, mem = !shm;

	if (!a->lib[0])
		return 0;
	err = abi32__env_range(pid, &start, &end);
	if (err)
		return err;
	len = end - start > ENV_MAX ? ENV_MAX : end - start;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	env = malloc(len + 1);
	if (fd < 0 || !env) {
		err = fd < 0 ? -errno : -ENOMEM;
		goto cleanup;
	}
	if (pread(fd, env, len, (off_t)start) != (ssize_t)len) {
		err = -EIO;
		goto cleanup;
	}
	env[len] = 0;
	for (size_t e = 0; e < len; e += strlen(env + e) + 1) {
		if (shm && !strncmp(env + e, MT_SHM_ENV "=", sizeof(MT_SHM_ENV)))
			mem = !strcmp(env + e + sizeof(MT_SHM_ENV), shm);
		if (strncmp(env + e, "LD_PRELOAD=", 11))
			continue;
		/* tokens separated by colons and blanks, as the loader reads them */
		for (size_t t = e + 11; env[t];) {
			size_t n = strcspn(env + t, ": \t");

			if (n == flen && !memcmp(env + t, from, flen) && nr < 8)
				at[nr++] = t;
			named |= n == flen && !memcmp(env + t, to, flen); /* already */
			t += n;
			t += env[t] != 0;
		}
	}
	err = 0;
	if (!mem)
		goto cleanup;
	for (int i = 0; i < nr; i++) {
		size_t w = flen - a->name_off;

		errno = 0;
		if (pwrite(fd, to + a->name_off, w, (off_t)(start + at[i] + a->name_off)) !=
		    (ssize_t)w) {
			err = errno ? -errno : -EIO;
			goto cleanup;
		}
	}
	err = nr || named;
	if (nr && to32)
		a->rewrote = true;
cleanup:
	free(env);
	if (fd >= 0)
		close(fd);
	return err;
}

int abi32__expect(struct abi32 *a, pid_t pid, uint64_t ts)
{
	if (a->nr_want == a->cap_want) {
		size_t cap = a->cap_want ? 2 * a->cap_want : 16;
		struct abi32_image *v = realloc(a->want, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		a->want = v;
		a->cap_want = cap;
	}
	a->want[a->nr_want++] = (struct abi32_image){.pid = pid, .ts = ts};
	return 0;
}

void abi32__registered(void *ctx, int32_t pid, uint64_t ts, uint32_t flags)
{
	struct abi32 *a = ctx;
	size_t best = a->nr_want;

	/* the i386 interposer's, serving glibc's malloc family: it serves the latest image of pid
	 * prepared before it registered, no earlier one */
	if ((flags & (MT_SHM_PROC_I386 | MT_SHM_PROC_LIBC | MT_SHM_PROC_OFF)) !=
	    (MT_SHM_PROC_I386 | MT_SHM_PROC_LIBC))
		return;
	for (size_t i = 0; i < a->nr_want; i++)
		if (a->want[i].pid == pid && a->want[i].ts <= ts &&
		    (best == a->nr_want || a->want[i].ts > a->want[best].ts))
			best = i;
	if (best < a->nr_want)
		a->want[best].served = true;
}

uint64_t abi32__unserved(const struct abi32 *a)
{
	uint64_t n = 0;

	for (size_t i = 0; i < a->nr_want; i++)
		if (!a->want[i].served && !n++)
			log__warn("process %d, a 32-bit program, was not served by the i386 "
				  "interposer (its loader did not load it, or it passed through): "
				  "its allocator calls go unrecorded (drops.abi)",
				  (int)a->want[i].pid);
	return n;
}

void abi32__free(struct abi32 *a)
{
	free(a->want);
	a->want = NULL;
	a->nr_want = a->cap_want = 0;
}
