// SPDX-License-Identifier: MIT
/*
 * `interleave [ROUNDS]`: allocator records among the BPF programs' records, microseconds apart
 * in one thread, for checking the two clocks agree (the interposer's TSC stamps and the
 * kernel's bpf_ktime_get_ns). Each round (default 20):
 *
 *	t0, 5 us, malloc(1 MiB) (glibc maps it), 5 us, t1, touch it (Rss rises, from BPF),
 *	5 us, t2, 5 us, free (the Free, then munmap: the Rss fall), 5 us, t3
 *
 * t0..t3 are CLOCK_MONOTONIC reads reported as facts "t0".."t3" after the round, with "malloc"
 * and "free" lines for the block. Then a child is forked ("fork", SIZE = its pid) that mallocs
 * 100 bytes, waits 5 us and exits: its Malloc lies after its Fork and before its Exit.
 * The 5 us gaps exceed the interposer's stated stamp error (< 0.4 us) tenfold.
 */
#include <malloc.h>
#include <string.h>
#include <sys/wait.h>
#include "expect.h"

#define BLOCK (1u << 20)

static void spin_us(uint64_t us)
{
	uint64_t end = mt_now_ns() + us * 1000;

	while (mt_now_ns() < end)
		;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20, st;
	pid_t kid;

	mt_expect_init();
	/* a fixed threshold: glibc would raise it after the first free of a mapped block */
	if (!mallopt(M_MMAP_THRESHOLD, 128 << 10))
		return 1;
	for (int i = 0; i < rounds; i++) {
		uint64_t t0, t1, t2, t3;
		char *volatile p;

		t0 = mt_now_ns();
		spin_us(5);
		p = malloc(BLOCK);
		if (!p)
			return 1;
		spin_us(5);
		t1 = mt_now_ns();
		memset(p, 1, BLOCK);
		spin_us(5);
		t2 = mt_now_ns();
		spin_us(5);
		free(p);
		spin_us(5);
		t3 = mt_now_ns();
		mt_say("malloc", MT_P(p), 0, BLOCK);
		mt_say("free", MT_P(p), 0, 0);
		mt_say_fact("t0", t0);
		mt_say_fact("t1", t1);
		mt_say_fact("t2", t2);
		mt_say_fact("t3", t3);
	}
	kid = fork();
	if (kid < 0)
		return 1;
	if (kid == 0) {
		char *volatile q = malloc(100);

		spin_us(5);
		mt_say("malloc", MT_P(q), 0, 100);
		_exit(q ? 0 : 1);
	}
	mt_say_fact("fork", (uint64_t)kid);
	if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st))
		return 1;
	return 0;
}
