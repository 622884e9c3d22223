/* SPDX-License-Identifier: MIT */
/*
 * Whether the interposer may stamp its records from the TSC (src/preload/preload_clock.c), and
 * the anchor it measures the TSC's rate from: a TSC read paired with CLOCK_MONOTONIC.
 *
 * The TSC can stand in for CLOCK_MONOTONIC where the kernel's own clock is the TSC scaled:
 * - clocksource `tsc`: the kernel found the TSC synchronised across CPUs and stable;
 * - clocksource `kvm-clock` whose pvclock page has PVCLOCK_TSC_STABLE_BIT: the guest's clock
 *   is then one linear function of the TSC for all vCPUs (the host vouches for synchronised
 *   TSCs), which is what lets the vDSO compute CLOCK_MONOTONIC in user space from the TSC and
 *   that page; without the bit the vDSO falls back to a system call and so do we (to
 *   clock_gettime). Firecracker guests such as this project's CI boot with `tsc=unstable
 *   clocksource=kvm-clock` and a stable pvclock.
 * Anywhere else clock_gettime.
 */
#ifndef MEMTRACK_STAMP_CLOCK_H
#define MEMTRACK_STAMP_CLOCK_H

#include <stdint.h>

/* pvclock_vcpu_time_info.flags bit 0 (Linux include/asm/pvclock-abi.h) */
#define STAMP_PVCLOCK_TSC_STABLE 0x1

/*
 * The decision alone, for tests: clocksource is the content of
 * /sys/devices/system/clocksource/clocksource0/current_clocksource (newline stripped, NULL if
 * unread), pvclock_flags the pvclock page's flags (-1 when not read), env
 * MEMTRACK_PRELOAD_TSC (NULL if unset). NULL: the TSC may be used; else why not (static text).
 */
const char *stamp_clock__refusal(const char *clocksource, int pvclock_flags, const char *env);

/*
 * The pvclock page's flags as this process's vDSO sees them ([vvar_vclock]'s first page since
 * Linux 6.13, [vvar]'s second before), or -1 when there is none or it cannot be read. The read
 * goes through write(2) into a pipe: a page the kernel refuses to map (no pvclock in use)
 * fails with EFAULT there instead of raising SIGBUS.
 */
int stamp_clock__pvclock_flags(void);

/*
 * Decides for this machine and, when the TSC may be used, takes the anchor (*tsc, *ns: the
 * midpoint of two TSC reads around a clock read, all within 500 ns by the clock). Returns
 * NULL with the anchor set, or why the interposer must use clock_gettime (*tsc = *ns = 0).
 */
const char *stamp_clock__anchor(uint64_t *tsc, uint64_t *ns);

#endif
