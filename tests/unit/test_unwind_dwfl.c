// SPDX-License-Identifier: MIT
/*
 * The libdwfl unwinder on stacks copied the way the BPF side copies them: registers as they are
 * just after a call returns (uw_capture below plays the return probe), then the bytes from sp
 * up. The call chain uw_main_like -> uw_a -> uw_b is this binary's own, built -O2 without frame
 * pointers, each function with a frame of its own; the frames' functions are checked against
 * the binary's symbol table (track/elf_syms.c), not through libdw.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "stacks/unwind_dwfl.h"
#include "track/elf_syms.h"

/*
 * Fills a struct mt_ustack with the caller's state as a return probe sees it after this
 * function returns: ip = the return address, sp = just above it, callee-saved registers
 * untouched (this function saves nothing and changes none).
 */
void uw_capture(struct mt_ustack *us);
__asm__(".text\n"
	".globl uw_capture\n"
	".type uw_capture, @function\n"
	"uw_capture:\n"
	".cfi_startproc\n"
	"	movq (%rsp), %rax\n"
	"	movq %rax, 0(%rdi)\n" /* ip */
	"	leaq 8(%rsp), %rax\n"
	"	movq %rax, 8(%rdi)\n" /* sp */
	"	movq %rbp, 16(%rdi)\n"
	"	movq %rbx, 24(%rdi)\n"
	"	movq %r12, 32(%rdi)\n"
	"	movq %r13, 40(%rdi)\n"
	"	movq %r14, 48(%rdi)\n"
	"	movq %r15, 56(%rdi)\n"
	"	ret\n"
	".cfi_endproc\n"
	".size uw_capture, .-uw_capture\n");

#define UW_COPY 16384

struct uw_copy {
	struct mt_ustack us;
	uint8_t stack[UW_COPY];
};

static struct uw_copy copy;
static volatile int sink;

/* The end of the mapping that holds address a (the top of a stack), from /proc/self/maps. */
static uint64_t uw_mapping_end(uint64_t a)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long lo, hi;
	char line[512];
	uint64_t end = a;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi)
			end = hi;
	if (f)
		fclose(f);
	return end;
}

/* Copies what sp points at: b's frame and its callers', intact after uw_capture returned; as
 * the BPF side does, no further than the end of the stack's mapping. */
static __attribute__((noipa)) void uw_take(struct uw_copy *c, size_t max)
{
	uint64_t sp = c->us.regs[MT_UREG_SP];
	size_t n = uw_mapping_end(sp) - sp < max ? uw_mapping_end(sp) - sp : max;

	memcpy(c->stack, (const void *)(uintptr_t)c->us.regs[MT_UREG_SP], n);
	c->us.size = (uint32_t)n;
}

static __attribute__((noipa, optimize("omit-frame-pointer"))) void uw_b(size_t max)
{
	volatile char local[200]; /* a frame of its own: CFA = rsp + something */

	local[0] = 1;
	uw_capture(&copy.us);
	uw_take(&copy, max);
	sink += local[0];
}

static __attribute__((noipa, optimize("omit-frame-pointer"))) void uw_a(size_t max)
{
	volatile char local[72];

	local[0] = 2;
	uw_b(max);
	sink += local[0];
}

static __attribute__((noipa, optimize("omit-frame-pointer"))) void uw_main_like(size_t max)
{
	volatile char local[40];

	local[0] = 3;
	uw_a(max);
	sink += local[0];
}

/* The function of this binary containing ELF vaddr v: the nearest function symbol before it. */
static const char *uw_func(const struct elf_info *self, uint64_t v)
{
	uint64_t off, best = 0;
	const char *name = "?";

	if (elf__vaddr_to_offset("/proc/self/exe", v, &off))
		return "?";
	for (size_t i = 0; i < self->nr_syms; i++)
		if (self->syms[i].offset <= off && self->syms[i].offset >= best) {
			best = self->syms[i].offset;
			name = self->syms[i].name;
		}
	return name;
}

static void uw_expect_chain(const struct unwind_result *r, const char *const *want, size_t n)
{
	struct elf_info self;
	char self_path[4096];
	ssize_t len = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);

	assert_true(len > 0);
	self_path[len] = 0;
	assert_int_equal(elf_info__load("/proc/self/exe", &self), 0);
	assert_true(r->nr >= n);
	for (size_t i = 0; i < n; i++) {
		const char *f;

		assert_non_null(r->frames[i].mod);
		assert_string_equal(r->frames[i].mod->path, self_path);
		f = uw_func(&self, r->frames[i].vaddr - 1);
		if (strncmp(f, want[i], strlen(want[i])) ||
		    (f[strlen(want[i])] != 0 && f[strlen(want[i])] != '.'))
			fail_msg("frame %zu is in %s, expected %s", i, f, want[i]);
	}
	elf_info__free(&self);
}

static const char *const chain[] = {"uw_b", "uw_a", "uw_main_like", "test_"};

static void test_unwinds_without_frame_pointers(void **state)
{
	struct unwind_dwfl *u;
	struct unwind_result *r = calloc(1, sizeof(*r));
	bool seen_main = false;
	struct elf_info self;

	(void)state;
	assert_int_equal(unwind_dwfl__new(&u), 0);
	uw_main_like(UW_COPY);
	assert_int_equal(unwind_dwfl__unwind(u, getpid(), gettid(), &copy.us, copy.stack, r), 0);
	uw_expect_chain(r, chain, 3);
	/* down to main, and on (cmocka's runner is between): the whole stack fits in the copy */
	assert_int_equal(elf_info__load("/proc/self/exe", &self), 0);
	for (uint32_t i = 3; i < r->nr; i++)
		if (r->frames[i].mod && !strcmp(uw_func(&self, r->frames[i].vaddr - 1), "main"))
			seen_main = true;
	elf_info__free(&self);
	assert_true(seen_main);
	assert_int_equal(unwind_dwfl__stats(u)->stacks, 1);
	assert_int_equal(unwind_dwfl__stats(u)->failed, 0);
	assert_int_equal(unwind_dwfl__stats(u)->maps_reads, 1);
	/* the same stack again: same frames, no second reading of the maps */
	{
		struct unwind_result *r2 = calloc(1, sizeof(*r2));

		assert_int_equal(
		    unwind_dwfl__unwind(u, getpid(), gettid(), &copy.us, copy.stack, r2), 0);
		assert_int_equal(r2->nr, r->nr);
		assert_memory_equal(r2->frames, r->frames, r->nr * sizeof(r->frames[0]));
		assert_int_equal(unwind_dwfl__stats(u)->maps_reads, 1);
		assert_int_equal(unwind_dwfl__stats(u)->remembered, 1);
		free(r2);
	}
	unwind_dwfl__free(u);
	free(r);
}

/* The cached-rule walk and libdwfl's give the same frames, complete or cut short; the first
 * walk of a stack takes the fast path. */
static void test_fast_walk_matches_libdwfl(void **state)
{
	struct unwind_result *r = calloc(1, sizeof(*r)), *r2 = calloc(1, sizeof(*r2));
	struct unwind_dwfl *fast, *slow;
	const uint32_t sizes[] = {UW_COPY, 300, 100};

	(void)state;
	uw_main_like(UW_COPY);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		if (sizes[i] < copy.us.size)
			copy.us.size = sizes[i];
		assert_int_equal(unwind_dwfl__new(&fast), 0);
		assert_int_equal(unwind_dwfl__new(&slow), 0);
		unwind_dwfl__libdwfl_only(slow, true);
		assert_int_equal(
		    unwind_dwfl__unwind(fast, getpid(), gettid(), &copy.us, copy.stack, r), 0);
		assert_int_equal(
		    unwind_dwfl__unwind(slow, getpid(), gettid(), &copy.us, copy.stack, r2), 0);
		assert_int_equal(unwind_dwfl__stats(fast)->fast, 1);
		assert_int_equal(unwind_dwfl__stats(slow)->fast, 0);
		assert_int_equal(r->nr, r2->nr);
		assert_int_equal(r->truncated, r2->truncated);
		for (uint32_t f = 0; f < r->nr; f++) {
			assert_int_equal(r->frames[f].vaddr, r2->frames[f].vaddr);
			assert_string_equal(r->frames[f].mod->path, r2->frames[f].mod->path);
		}
		if (i == 0)
			uw_expect_chain(r, chain, 3);
		unwind_dwfl__free(fast);
		unwind_dwfl__free(slow);
	}
	free(r);
	free(r2);
}

/* A copy that ends inside uw_main_like's frame: the first frames, then truncated. */
static void test_short_copy_is_truncated(void **state)
{
	struct unwind_dwfl *u;
	struct unwind_result *r = calloc(1, sizeof(*r));

	(void)state;
	assert_int_equal(unwind_dwfl__new(&u), 0);
	uw_main_like(UW_COPY);
	/* b's frame (>= 200 bytes) and a's: not far enough for uw_main_like's return address */
	copy.us.size = 300;
	assert_int_equal(unwind_dwfl__unwind(u, getpid(), gettid(), &copy.us, copy.stack, r), 0);
	assert_true(r->truncated);
	assert_true(r->nr >= 1 && r->nr < 4);
	uw_expect_chain(r, chain, 1);
	assert_int_equal(unwind_dwfl__stats(u)->truncated, 1);
	unwind_dwfl__free(u);
	free(r);
}

/*
 * A remembered unwind is used only when every word the walk read is the same: the same ip and
 * sp with another caller's return address above must not get the remembered frames.
 */
static void test_remembered_only_when_the_words_match(void **state)
{
	struct unwind_dwfl *u;
	struct unwind_result *r = calloc(1, sizeof(*r)), *r2 = calloc(1, sizeof(*r2));
	uint64_t ra;
	size_t at = 0;

	(void)state;
	assert_int_equal(unwind_dwfl__new(&u), 0);
	uw_main_like(UW_COPY);
	assert_int_equal(unwind_dwfl__unwind(u, getpid(), gettid(), &copy.us, copy.stack, r), 0);
	assert_true(r->nr >= 3);
	/* where the copy holds uw_a's return address into uw_main_like (frame 2) */
	ra = copy.us.regs[MT_UREG_IP] - r->frames[0].vaddr + r->frames[2].vaddr;
	for (size_t i = 0; i + 8 <= copy.us.size; i += 8)
		if (!memcmp(copy.stack + i, &ra, 8)) {
			at = i;
			break;
		}
	assert_true(at > 0);
	/* uw_a "called from" uw_a itself instead: frame 2 must become uw_a */
	memcpy(copy.stack + at,
	       &(uint64_t){copy.us.regs[MT_UREG_IP] - r->frames[0].vaddr + r->frames[1].vaddr}, 8);
	assert_int_equal(unwind_dwfl__unwind(u, getpid(), gettid(), &copy.us, copy.stack, r2), 0);
	assert_int_equal(unwind_dwfl__stats(u)->remembered, 0);
	assert_true(r2->nr >= 3);
	assert_int_equal(r2->frames[2].vaddr, r->frames[1].vaddr);
	unwind_dwfl__free(u);
	free(r);
	free(r2);
}

/* An ip in no mapping: no frame, counted as failed. */
static void test_unknown_ip_fails(void **state)
{
	struct unwind_dwfl *u;
	struct unwind_result *r = calloc(1, sizeof(*r));

	(void)state;
	assert_int_equal(unwind_dwfl__new(&u), 0);
	uw_main_like(UW_COPY);
	copy.us.regs[MT_UREG_IP] = 0x10;
	assert_int_equal(unwind_dwfl__unwind(u, getpid(), gettid(), &copy.us, copy.stack, r),
			 -ENOENT);
	assert_int_equal(unwind_dwfl__stats(u)->failed, 1);
	unwind_dwfl__free(u);
	free(r);
}

/*
 * A process that exited before its stack is unwound: with its maps read while it lived (at a
 * stop, as the tracker does after dlopen) the stack unwinds; without, it is counted as failed.
 */
static void test_exited_process(void **state)
{
	struct unwind_dwfl *u;
	struct unwind_result *r = calloc(1, sizeof(*r));
	struct uw_copy *c = calloc(1, sizeof(*c));
	int pfd[2], status;

	(void)state;
	assert_int_equal(pipe(pfd), 0);
	for (int refresh = 1; refresh >= 0; refresh--) {
		pid_t pid = fork();

		assert_true(pid >= 0);
		if (!pid) {
			uw_main_like(UW_COPY);
			if (write(pfd[1], &copy, sizeof(copy)) != sizeof(copy))
				_exit(1);
			raise(SIGSTOP);
			_exit(0);
		}
		for (size_t got = 0; got < sizeof(*c);) {
			ssize_t n = read(pfd[0], (char *)c + got, sizeof(*c) - got);

			assert_true(n > 0);
			got += (size_t)n;
		}
		assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
		assert_int_equal(unwind_dwfl__new(&u), 0);
		if (refresh)
			unwind_dwfl__refresh(u, pid);
		kill(pid, SIGCONT);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (refresh) {
			assert_int_equal(unwind_dwfl__unwind(u, pid, pid, &c->us, c->stack, r), 0);
			uw_expect_chain(r, chain, 3);
		} else {
			assert_int_equal(unwind_dwfl__unwind(u, pid, pid, &c->us, c->stack, r),
					 -ESRCH);
			assert_int_equal(unwind_dwfl__stats(u)->failed, 1);
		}
		unwind_dwfl__free(u);
	}
	close(pfd[0]);
	close(pfd[1]);
	free(c);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unwinds_without_frame_pointers),
	    cmocka_unit_test(test_fast_walk_matches_libdwfl),
	    cmocka_unit_test(test_short_copy_is_truncated),
	    cmocka_unit_test(test_remembered_only_when_the_words_match),
	    cmocka_unit_test(test_unknown_ip_fails),
	    cmocka_unit_test(test_exited_process),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
