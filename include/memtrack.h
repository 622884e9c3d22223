/* SPDX-License-Identifier: MIT */
/*
 * memtrack.h - mark the part of a program memtrack measures (its "window").
 *
 *   #include <memtrack.h>
 *
 *   setup();              // allocations here are not the window's
 *   MEMTRACK_START();
 *   work();               // only allocations made here count
 *   MEMTRACK_MARK("phase 2");
 *   more_work();
 *   MEMTRACK_STOP();
 *   teardown();
 *
 * Under `memtrack track` (and `memtrack-bench run --mode memory`) the window's figures are its
 * peak heap (the peak of the bytes allocated inside the window and still live: frees of older
 * blocks do not lower it), its allocation count and bytes, and the markers with their time and
 * heap. A program that never reaches MEMTRACK_START() is measured whole.
 *
 * Cost when the program is not tracked: each macro is a load of a 2-byte counter and a branch
 * not taken (about a nanosecond, see the README); nothing else runs, the string of
 * MEMTRACK_MARK is not even loaded. The mechanism is the one of SystemTap's <sys/sdt.h>
 * (USDT): each call site is a `nop` described by an ELF note (.note.stapsdt, provider
 * "memtrack", probes "start", "stop", "mark") whose semaphore memtrack raises when it attaches a
 * uprobe to the site; the header needs nothing but GCC or Clang on x86-64 or AArch64. Elsewhere
 * (or with -DMEMTRACK_DISABLE) the macros compile to nothing.
 *
 * MEMTRACK_MARK's argument is a NUL-terminated string; memtrack keeps its first 63 bytes.
 * Tools that read USDT notes (readelf -n, bpftrace, perf) see the three probes too.
 */
#ifndef MEMTRACK_H
#define MEMTRACK_H

#if !defined(MEMTRACK_DISABLE) && (defined(__GNUC__) || defined(__clang__)) &&                     \
    (defined(__x86_64__) || defined(__aarch64__))

/* The semaphore of every memtrack probe of this executable or library (hidden: one per file,
 * as the kernel counts it per file); weak: one copy however many files include the header. */
__attribute__((weak, used, section(".probes"), visibility("hidden"))) volatile unsigned short
    memtrack_semaphore;

#define MEMTRACK__ACTIVE() __builtin_expect(memtrack_semaphore != 0, 0)

/* One probe site: a nop, its note (the SystemTap SDT v3 layout: pc, the .stapsdt.base address
 * for prelink adjustment, the semaphore; provider, name and argument strings), and the
 * .stapsdt.base section the note refers to, made once per object file. */
#define MEMTRACK__PROBE(name, args, ...)                                                          \
	__asm__ __volatile__("990:\tnop\n"                                                        \
			     "\t.pushsection .note.stapsdt,\"?\",\"note\"\n"                      \
			     "\t.balign 4\n"                                                      \
			     "\t.4byte 992f-991f, 994f-993f, 3\n"                                 \
			     "991:\t.asciz \"stapsdt\"\n"                                         \
			     "992:\t.balign 4\n"                                                  \
			     "993:\t.8byte 990b\n"                                                \
			     "\t.8byte _.stapsdt.base\n"                                          \
			     "\t.8byte memtrack_semaphore\n"                                      \
			     "\t.asciz \"memtrack\"\n"                                            \
			     "\t.asciz \"" name "\"\n"                                            \
			     "\t.asciz \"" args "\"\n"                                            \
			     "994:\t.balign 4\n"                                                  \
			     "\t.popsection\n"                                                    \
			     "\t.ifndef _.stapsdt.base\n"                                         \
			     "\t.pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n" \
			     "\t.weak _.stapsdt.base\n"                                           \
			     "\t.hidden _.stapsdt.base\n"                                         \
			     "_.stapsdt.base:\t.space 1\n"                                        \
			     "\t.size _.stapsdt.base, 1\n"                                        \
			     "\t.popsection\n"                                                    \
			     "\t.endif\n" ::__VA_ARGS__)

#define MEMTRACK_START()                                                                          \
	do {                                                                                      \
		if (MEMTRACK__ACTIVE())                                                           \
			MEMTRACK__PROBE("start", "");                                             \
	} while (0)

#define MEMTRACK_STOP()                                                                           \
	do {                                                                                      \
		if (MEMTRACK__ACTIVE())                                                           \
			MEMTRACK__PROBE("stop", "");                                              \
	} while (0)

/* The argument sits in a fixed register, named in the note as <sys/sdt.h> would ("8@%rdi",
 * "8@x0"): the string's address, 8 bytes. */
#if defined(__x86_64__)
#define MEMTRACK_MARK(name)                                                                       \
	do {                                                                                      \
		if (MEMTRACK__ACTIVE())                                                           \
			MEMTRACK__PROBE("mark", "8@%%rdi", "D"((const char *)(name)));            \
	} while (0)
#else
#define MEMTRACK_MARK(name)                                                                       \
	do {                                                                                      \
		if (MEMTRACK__ACTIVE()) {                                                         \
			register const char *memtrack__x0 __asm__("x0") = (name);                \
			MEMTRACK__PROBE("mark", "8@x0", "r"(memtrack__x0));                      \
		}                                                                                 \
	} while (0)
#endif

#else /* not supported here, or disabled */

#define MEMTRACK_START() ((void)0)
#define MEMTRACK_STOP() ((void)0)
#define MEMTRACK_MARK(name) ((void)sizeof(name))

#endif

#endif /* MEMTRACK_H */
