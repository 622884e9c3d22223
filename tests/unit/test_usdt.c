// SPDX-License-Identifier: MIT
/*
 * USDT notes (src/track/usdt.c) read from this very binary, which has probes from
 * include/memtrack.h and, when <sys/sdt.h> (systemtap-sdt-dev) is there, from SystemTap's own
 * header with provider "memtrack": every site must be found, at a nop, with the semaphore's
 * file offset (for ours) and the register of MARK's argument.
 */
#include <fcntl.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/user.h>
#include <cmocka.h>
#include <gelf.h>
#include <libelf.h>
#include "memtrack.h"
#include "bpf/events.h"
#include "track/usdt.h"
#if __has_include(<sys/sdt.h>)
#include <sys/sdt.h>
#define HAVE_SDT 1
#else
#define HAVE_SDT 0
#endif

static const char *volatile label = "from a test";

/* Never run with the semaphore raised: the sites only need to exist. */
static void __attribute__((noinline, used)) probes(void)
{
	MEMTRACK_START();
	MEMTRACK_MARK(label);
	MEMTRACK_STOP();
#if HAVE_SDT
	const char *in_reg = label; /* a register operand: a memory one leaves MARK unnamed */

	DTRACE_PROBE(memtrack, start);
	DTRACE_PROBE1(memtrack, mark, in_reg);
	DTRACE_PROBE1(other, mark, in_reg); /* another provider: not ours */
#endif
}

static int sites_of_self(struct usdt_site **sites, char *path, size_t cap)
{
	ssize_t n = readlink("/proc/self/exe", path, cap - 1);
	int fd, nr;
	Elf *elf;

	assert_true(n > 0);
	path[n] = 0;
	assert_int_not_equal(elf_version(EV_CURRENT), EV_NONE);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	assert_non_null(elf);
	nr = usdt__sites(elf, sites);
	elf_end(elf);
	close(fd);
	return nr;
}

static int load_bias(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(uint64_t *)data = info->dlpi_addr; /* the first one is the executable */
	return 1;
}

/* vaddr -> file offset through the section holding it (usdt.c goes through the segments) */
static uint64_t section_offset(const char *path, const char *name, uint64_t vaddr)
{
	int fd = open(path, O_RDONLY);
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	uint64_t off = 0;
	size_t shstrndx;

	assert_non_null(elf);
	assert_int_equal(elf_getshdrstrndx(elf, &shstrndx), 0);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) &&
		    !strcmp(elf_strptr(elf, shstrndx, sh.sh_name), name) && vaddr >= sh.sh_addr &&
		    vaddr < sh.sh_addr + sh.sh_size)
			off = vaddr - sh.sh_addr + sh.sh_offset;
	}
	elf_end(elf);
	close(fd);
	return off;
}

static void test_own_binary(void **state)
{
	struct usdt_site *s = NULL;
	char path[4096];
	int n = sites_of_self(&s, path, sizeof(path)), kinds[MT_MARK_NR] = {0}, ours = 0;
	uint64_t bias = 0, sem_off = 0;
	FILE *f = fopen(path, "rb");

	(void)state;
	probes();
	assert_non_null(f);
	dl_iterate_phdr(load_bias, &bias);
	sem_off = section_offset(path, ".probes", (uint64_t)(uintptr_t)&memtrack_semaphore - bias);
	assert_int_not_equal(sem_off, 0);
	assert_int_equal(n, 3 + 2 * HAVE_SDT);
	for (int i = 0; i < n; i++) {
		unsigned kind = s[i].cookie & 0xff, off = (s[i].cookie >> 8) & 0xffff;
		unsigned char insn[4];

		assert_true(kind > MT_MARK_NONE && kind < MT_MARK_NR);
		kinds[kind]++;
		/* the uprobe's place is the nop */
		assert_int_equal(fseek(f, (long)s[i].offset, SEEK_SET), 0);
		assert_int_equal(fread(insn, 1, sizeof(insn), f), sizeof(insn));
#if defined(__x86_64__)
		assert_int_equal(insn[0], 0x90);
#elif defined(__aarch64__)
		assert_int_equal(insn[0] | insn[1] << 8 | insn[2] << 16 | (unsigned)insn[3] << 24,
				 0xd503201f);
#endif
		if (s[i].ref_ctr) { /* ours: the semaphore, where the kernel counts */
			assert_int_equal(s[i].ref_ctr, sem_off);
			ours++;
		}
		if (kind == MT_MARK_MARK)
			assert_int_not_equal(off, MT_MARK_NO_ARG); /* a register, wherever */
		else
			assert_int_equal(off, MT_MARK_NO_ARG);
	}
	assert_int_equal(ours, 3);
	assert_int_equal(kinds[MT_MARK_START], 1 + HAVE_SDT);
	assert_int_equal(kinds[MT_MARK_STOP], 1);
	assert_int_equal(kinds[MT_MARK_MARK], 1 + HAVE_SDT);
	if (!HAVE_SDT)
		print_message(
		    "[ NOTE     ] no <sys/sdt.h> (systemtap-sdt-dev): only our notes read\n");
	fclose(f);
	free(s);
}

/* Argument strings as <sys/sdt.h> writes them. */
static void test_cookies(void **state)
{
	(void)state;
	assert_int_equal(usdt__cookie("start", ""), MT_MARK_COOKIE(MT_MARK_START, MT_MARK_NO_ARG));
	assert_int_equal(usdt__cookie("stop", "8@%rdi"),
			 MT_MARK_COOKIE(MT_MARK_STOP, MT_MARK_NO_ARG));
	assert_int_equal(usdt__cookie("begin", ""), 0);
#if defined(__x86_64__)
	assert_int_equal(usdt__cookie("mark", "8@%rdi"),
			 MT_MARK_COOKIE(MT_MARK_MARK, offsetof(struct user_regs_struct, rdi)));
	assert_int_equal(usdt__cookie("mark", "-8@%rax"),
			 MT_MARK_COOKIE(MT_MARK_MARK, offsetof(struct user_regs_struct, rax)));
	assert_int_equal(usdt__cookie("mark", "8@%r12 4@%eax"),
			 MT_MARK_COOKIE(MT_MARK_MARK, offsetof(struct user_regs_struct, r12)));
	assert_int_equal(usdt__reg_offset("%rip"), -1);
#endif
	/* memory operands, 4-byte values: no name */
	assert_int_equal(usdt__cookie("mark", "8@-16(%rbp)"),
			 MT_MARK_COOKIE(MT_MARK_MARK, MT_MARK_NO_ARG));
	assert_int_equal(usdt__cookie("mark", "4@%edi"),
			 MT_MARK_COOKIE(MT_MARK_MARK, MT_MARK_NO_ARG));
	assert_int_equal(usdt__cookie("mark", ""), MT_MARK_COOKIE(MT_MARK_MARK, MT_MARK_NO_ARG));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_own_binary),
	    cmocka_unit_test(test_cookies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
