/* SPDX-License-Identifier: MIT */
/*
 * The tests' slow paths: a pause of the milliseconds an environment variable gives, where a
 * loaded machine would be slow (MEMTRACK_TEST_STOP_DELAY_MS, MEMTRACK_TEST_INSPECT_DELAY_MS).
 * Without the variable, nothing but one getenv per call site and run.
 */
#ifndef MEMTRACK_TEST_DELAY_H
#define MEMTRACK_TEST_DELAY_H

/* Sleeps $name milliseconds (0 when unset or negative); *ms caches it, -1 before the first
 * call. */
void test_delay__sleep(const char *name, long *ms);

#endif
