// SPDX-License-Identifier: MIT
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "track/stamp_clock.h"

#define CLOCKSOURCE "/sys/devices/system/clocksource/clocksource0/current_clocksource"
#define PAGE	    4096ul

/* Linux's struct pvclock_vcpu_time_info (include/asm/pvclock-abi.h), 32 bytes */
struct pvclock_info {
	uint32_t version; /* odd while the host updates the page */
	uint32_t pad0;
	uint64_t tsc_timestamp;
	uint64_t system_time;
	uint32_t tsc_to_system_mul;
	int8_t tsc_shift;
	uint8_t flags;
	uint8_t pad[2];
};

const char *stamp_clock__refusal(const char *clocksource, int pvclock_flags, const char *env)
{
#if !defined(__x86_64__)
	(void)clocksource;
	(void)pvclock_flags;
	(void)env;
	return "not x86-64";
#else
	if (env && !strcmp(env, "0"))
		return "MEMTRACK_PRELOAD_TSC=0";
	if (!clocksource)
		return "clocksource unknown";
	if (!strcmp(clocksource, "tsc"))
		return NULL;
	if (strcmp(clocksource, "kvm-clock"))
		return "clocksource not tsc or kvm-clock";
	if (pvclock_flags < 0)
		return "kvm-clock's pvclock page unreadable";
	if (!(pvclock_flags & STAMP_PVCLOCK_TSC_STABLE))
		return "kvm-clock without a stable TSC";
	return NULL;
#endif
}

/* The address of the pvclock page in this process, or 0. */
static unsigned long stamp__pvclock_addr(void)
{
	unsigned long lo, hi, vclock = 0, vvar = 0;
	char line[256];
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		if (strstr(line, "[vvar_vclock]"))
			vclock = lo;
		else if (strstr(line, "[vvar]") && hi - lo >= 2 * PAGE)
			vvar = lo + PAGE; /* before 6.13: vvar data, then the pvclock page */
	}
	fclose(f);
	return vclock ? vclock : vvar;
}

int stamp_clock__pvclock_flags(void)
{
	struct pvclock_info pv;
	unsigned long addr;
	int fd[2], flags = -1;

	/* the vDSO faults the page in (when it uses it) at its first clock read */
	clock_gettime(CLOCK_MONOTONIC, &(struct timespec){0});
	addr = stamp__pvclock_addr();
	if (!addr || pipe2(fd, O_CLOEXEC))
		return -1;
	if (write(fd[1], (const void *)addr, sizeof(pv)) == (ssize_t)sizeof(pv) &&
	    read(fd[0], &pv, sizeof(pv)) == (ssize_t)sizeof(pv) &&
	    /* a page that is a pvclock: settled, a scale and a shift a clock can have */
	    !(pv.version & 1) && pv.version && pv.tsc_to_system_mul && pv.tsc_shift >= -32 &&
	    pv.tsc_shift <= 32)
		flags = pv.flags;
	close(fd[0]);
	close(fd[1]);
	return flags;
}

static uint64_t stamp__ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *stamp_clock__anchor(uint64_t *tsc, uint64_t *ns)
{
	char cs[32] = "";
	const char *why;
	ssize_t n = -1;
	int fd, pv = -1;

	*tsc = *ns = 0;
	fd = open(CLOCKSOURCE, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, cs, sizeof(cs) - 1);
		close(fd);
	}
	if (n > 0 && cs[n - 1] == '\n')
		cs[n - 1] = 0;
	if (n > 0 && !strcmp(cs, "kvm-clock"))
		pv = stamp_clock__pvclock_flags();
	why = stamp_clock__refusal(n > 0 ? cs : NULL, pv, getenv("MEMTRACK_PRELOAD_TSC"));
	if (why)
		return why;
#if defined(__x86_64__)
	/* as the interposer's pl_tsc_pair: retried when preempted between the reads */
	for (int i = 0; i < 8; i++) {
		uint64_t n0 = stamp__ns(), c0, mid, c1, n1;

		__builtin_ia32_lfence();
		c0 = __builtin_ia32_rdtsc();
		mid = stamp__ns();
		__builtin_ia32_lfence();
		c1 = __builtin_ia32_rdtsc();
		n1 = stamp__ns();
		if (n1 - n0 > 500 || c1 < c0 || mid < n0 || mid > n1)
			continue;
		*tsc = c0 + (c1 - c0) / 2;
		*ns = mid;
		return NULL;
	}
#endif
	return "preempted at every anchor read";
}
