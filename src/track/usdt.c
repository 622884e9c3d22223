// SPDX-License-Identifier: MIT
/*
 * Reading SystemTap SDT notes with libelf. The note's descriptor: the probe's address, the
 * address of .stapsdt.base when the note was made, the semaphore's address (0: none), then
 * three NUL-terminated strings: provider, name, arguments. A prelinked file moved its
 * sections, not its notes: both addresses move by (.stapsdt.base now - then). Uprobes want file
 * offsets: addresses go through the PT_LOAD segment holding them.
 */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <sys/user.h>
#endif
#include "bpf/events.h"
#include "track/usdt.h"

#define USDT_NOTE_TYPE 3
#define USDT_PROVIDER  "memtrack"

int usdt__reg_offset(const char *name)
{
#if defined(__x86_64__)
	/* struct user_regs_struct is the kernel's struct pt_regs, member for member */
	static const struct {
		const char *name;
		int off;
	} regs[] = {
#define R(r) {#r, offsetof(struct user_regs_struct, r)}
	    R(rdi), R(rsi), R(rdx), R(rcx), R(r8),  R(r9),  R(rax), R(rbx),
	    R(rbp), R(r10), R(r11), R(r12), R(r13), R(r14), R(r15), R(rsp),
#undef R
	};

	if (*name == '%')
		name++;
	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		if (!strcmp(name, regs[i].name))
			return regs[i].off;
	return -1;
#elif defined(__aarch64__)
	/* struct user_pt_regs first: regs[31] */
	char *end;
	long n;

	if (name[0] != 'x')
		return -1;
	n = strtol(name + 1, &end, 10);
	return *end || end == name + 1 || n < 0 || n > 30 ? -1 : (int)n * 8;
#else
	(void)name;
	return -1;
#endif
}

uint64_t usdt__cookie(const char *name, const char *args)
{
	int off = -1;

	if (!strcmp(name, "start"))
		return MT_MARK_COOKIE(MT_MARK_START, MT_MARK_NO_ARG);
	if (!strcmp(name, "stop"))
		return MT_MARK_COOKIE(MT_MARK_STOP, MT_MARK_NO_ARG);
	if (strcmp(name, "mark"))
		return 0;
	/* the first argument: "8@%rdi" (an 8-byte value in a register); a memory operand or
	 * anything else leaves the marker without its name */
	if (!strncmp(args, "8@", 2) || !strncmp(args, "-8@", 3)) {
		char reg[16];
		const char *a = strchr(args, '@') + 1;
		size_t n = strcspn(a, " ");

		if (n < sizeof(reg)) {
			memcpy(reg, a, n);
			reg[n] = 0;
			off = usdt__reg_offset(reg);
		}
	}
	return MT_MARK_COOKIE(MT_MARK_MARK, off < 0 ? MT_MARK_NO_ARG : off);
}

/* vaddr -> file offset through the PT_LOAD segments; 0 when in none */
static uint64_t usdt__file_offset(Elf *elf, size_t phnum, uint64_t vaddr)
{
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
			return vaddr - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

/* One note's site into *s; false when it is not a memtrack probe or cannot be placed. */
static bool usdt__parse(Elf *elf, size_t phnum, const char *desc, size_t len, uint64_t base_now,
			struct usdt_site *s)
{
	uint64_t pc, base, sem;
	const char *prov, *name, *args, *end = desc + len;

	if (len < 3 * 8 + 3)
		return false;
	memcpy(&pc, desc, 8);
	memcpy(&base, desc + 8, 8);
	memcpy(&sem, desc + 16, 8);
	prov = desc + 24;
	name = memchr(prov, 0, (size_t)(end - prov));
	if (!name++ || name >= end)
		return false;
	args = memchr(name, 0, (size_t)(end - name));
	if (!args++ || args >= end || !memchr(args, 0, (size_t)(end - args)))
		return false;
	if (strcmp(prov, USDT_PROVIDER))
		return false;
	s->cookie = usdt__cookie(name, args);
	if (!s->cookie)
		return false;
	if (base_now && base) {
		pc += base_now - base;
		if (sem)
			sem += base_now - base;
	}
	s->offset = usdt__file_offset(elf, phnum, pc);
	s->ref_ctr = sem ? usdt__file_offset(elf, phnum, sem) : 0;
	return s->offset != 0;
}

int usdt__sites(void *handle, struct usdt_site **out)
{
	Elf *elf = handle;
	Elf_Scn *scn = NULL, *notes = NULL;
	struct usdt_site *v = NULL;
	uint64_t base_now = 0;
	size_t shstrndx, phnum, n = 0, cap = 0, off = 0, noff, doff;
	GElf_Nhdr nh;
	Elf_Data *d;

	*out = NULL;
	if (elf_getshdrstrndx(elf, &shstrndx) || elf_getphdrnum(elf, &phnum))
		return -ENOEXEC;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *sname;

		if (!gelf_getshdr(scn, &sh) || !(sname = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		if (sh.sh_type == SHT_NOTE && !strcmp(sname, ".note.stapsdt"))
			notes = scn;
		else if (!strcmp(sname, ".stapsdt.base"))
			base_now = sh.sh_addr;
	}
	if (!notes || !(d = elf_getdata(notes, NULL)))
		return 0;
	while ((off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0) {
		const char *owner = (const char *)d->d_buf + noff;

		if (nh.n_type != USDT_NOTE_TYPE || nh.n_namesz != sizeof("stapsdt") ||
		    memcmp(owner, "stapsdt", sizeof("stapsdt")))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			void *p = realloc(v, ncap * sizeof(*v));

			if (!p) {
				free(v);
				return -ENOMEM;
			}
			v = p;
			cap = ncap;
		}
		if (usdt__parse(elf, phnum, (const char *)d->d_buf + doff, nh.n_descsz, base_now,
				&v[n]))
			n++;
	}
	if (!n)
		free(v);
	else
		*out = v;
	return (int)n;
}
