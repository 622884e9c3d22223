// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "track/elf_syms.h"

/* The bytes of symbol tables (and their strings) above which a file is mapped rather than read
 * (elf__open) */
#define ELF_READ_MAX (256 << 10)

/* The bytes the symbol tables and their string tables take in elf's file. */
static uint64_t elf__sym_bytes(Elf *elf)
{
	Elf_Scn *scn = NULL;
	uint64_t n = 0;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh, strh;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		n += sh.sh_size;
		if (gelf_getshdr(elf_getscn(elf, sh.sh_link), &strh))
			n += strh.sh_size;
	}
	return n;
}

/*
 * Read, not mapped, when what will be read of it is small (want_syms: its symbol tables too):
 * libelf then reads the headers and each section asked for, where a mapping costs a page fault
 * per page touched and its munmap a TLB shootdown on every CPU, which on this VM made most of
 * an inspection (ls and its libraries 1.4 -> 0.7-1.0 ms, python3 2.7 -> 1.1-1.3 ms). A file
 * with large symbol tables (cc1: 27,000 exported functions, 1.7 MB) is faster mapped.
 */
static int elf__open(const char *path, int *fd, Elf **elf, bool want_syms)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return -errno;
	*elf = elf_begin(*fd, ELF_C_READ, NULL);
	if (*elf && elf_kind(*elf) == ELF_K_ELF && want_syms &&
	    elf__sym_bytes(*elf) > ELF_READ_MAX) {
		elf_end(*elf);
		*elf = elf_begin(*fd, ELF_C_READ_MMAP, NULL);
	}
	if (!*elf || elf_kind(*elf) != ELF_K_ELF) {
		if (*elf)
			elf_end(*elf);
		close(*fd);
		return -ENOEXEC;
	}
	return 0;
}

static uint64_t elf__to_offset(const GElf_Phdr *ph, size_t n, uint64_t vaddr)
{
	for (size_t i = 0; i < n; i++) {
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && vaddr >= ph[i].p_vaddr &&
		    vaddr < ph[i].p_vaddr + ph[i].p_memsz)
			return vaddr - ph[i].p_vaddr + ph[i].p_offset;
	}
	return 0;
}

static int elf__add_sym(struct elf_info *info, size_t *cap, const char *name, uint64_t off)
{
	const char *at = strchr(name, '@');

	if (info->nr_syms == *cap) {
		size_t ncap = *cap ? *cap * 2 : 1024;
		struct elf_sym *n = realloc(info->syms, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		info->syms = n;
		*cap = ncap;
	}
	info->syms[info->nr_syms].name = name;
	info->syms[info->nr_syms].len = at ? (uint32_t)(at - name) : (uint32_t)strlen(name);
	info->syms[info->nr_syms++].offset = off;
	return 0;
}

/* The string at off in the string table strh, read from the file itself: libelf's elf_strptr
 * reads the whole table first, and an executable's dynamic strings can be large (cc1's 1.3 MB,
 * 320 fresh pages: ~5 ms of page faults here, at every exec of a new program, for the names of
 * its 8 libraries). A copy (free it), or NULL. */
static char *elf__str_at(int fd, const GElf_Shdr *strh, uint64_t off)
{
	char buf[PATH_MAX];
	uint64_t max;
	ssize_t n;

	if (strh->sh_type != SHT_STRTAB || off >= strh->sh_size)
		return NULL;
	max = strh->sh_size - off < sizeof(buf) ? strh->sh_size - off : sizeof(buf);
	n = pread(fd, buf, max, (off_t)(strh->sh_offset + off));
	if (n <= 0 || !memchr(buf, 0, (size_t)n))
		return NULL; /* short, or longer than a path */
	return strdup(buf);
}

static int elf__read_dynamic(Elf *elf, int fd, Elf_Scn *scn, GElf_Shdr *sh, struct elf_info *info)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
	char *runpath = NULL, *rpath = NULL, *soname = NULL;
	GElf_Shdr strh;
	int err = 0;

	if (!gelf_getshdr(elf_getscn(elf, sh->sh_link), &strh))
		return 0;
	for (size_t i = 0; data && i < n; i++) {
		char **path = NULL, *s;
		GElf_Dyn dyn;

		if (!gelf_getdyn(data, (int)i, &dyn))
			break;
		if (dyn.d_tag == DT_RUNPATH)
			path = &runpath;
		else if (dyn.d_tag == DT_RPATH)
			path = &rpath;
		else if (dyn.d_tag == DT_SONAME)
			path = &soname;
		else if (dyn.d_tag != DT_NEEDED)
			continue;
		errno = 0;
		s = elf__str_at(fd, &strh, dyn.d_un.d_val);
		if (!s) {
			if (errno == ENOMEM) {
				err = -ENOMEM;
				break;
			}
			continue;
		}
		if (path) { /* the last one of each, as before */
			free(*path);
			*path = s;
		} else {
			char **nn = realloc(info->needed, (info->nr_needed + 1) * sizeof(*nn));

			if (!nn) {
				free(s);
				err = -ENOMEM;
				break;
			}
			info->needed = nn;
			nn[info->nr_needed++] = s;
		}
	}
	if (!err) {
		info->soname = soname;
		soname = NULL;
	}
	free(soname);
	if (!err && (runpath || rpath)) {
		info->runpath = runpath ? runpath : rpath;
		info->runpath_is_rpath = !runpath;
		if (runpath)
			free(rpath);
		return 0;
	}
	free(runpath);
	free(rpath);
	return err;
}

/*
 * .dynsym through its GNU hash table (SHT_GNU_HASH, what the loader looks names up with): an
 * inspection asks for ~50-100 names, and listing every exported function first (cc1: 28,876;
 * each name scanned, each lookup a walk of the list) was most of its time. The table's layout
 * (header: nbuckets, symoffset, bloom words, bloom shift; the bloom words, 64- or 32-bit by
 * class; nbuckets bucket words; then one chain word per symbol from symoffset on, its low bit
 * ending a chain) is read as is, in the file's byte order, which must be ours.
 */
struct elf_dynhash {
	Elf_Data *syms; /* .dynsym */
	size_t nsyms, strndx;
	const uint32_t *buckets, *chain;
	uint32_t nbuckets, symoffset;
	size_t nchain;
	GElf_Phdr *ph; /* the program headers, for file offsets */
	size_t nph;
};

static bool elf__native_order(Elf *elf)
{
	const char *id = elf_getident(elf, NULL);
	const uint16_t one = 1;
	int ours = *(const uint8_t *)&one ? ELFDATA2LSB : ELFDATA2MSB;

	return id && id[EI_DATA] == ours;
}

/* The GNU hash table of the section dynsym, if it has a usable one; NULL otherwise. */
static struct elf_dynhash *elf__dynhash_open(Elf *elf, Elf_Scn *dynsym)
{
	size_t dynndx = elf_ndxscn(dynsym), word = gelf_getclass(elf) == ELFCLASS64 ? 8 : 4;
	GElf_Shdr dsh, sh;
	Elf_Scn *scn = NULL;
	Elf_Data *hd = NULL, *sd;
	struct elf_dynhash *d;
	const uint32_t *w;
	size_t nwords, need;

	if (!elf__native_order(elf) || !gelf_getshdr(dynsym, &dsh) || !dsh.sh_entsize)
		return NULL;
	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_GNU_HASH && sh.sh_link == dynndx)
			break;
	if (!scn || !(hd = elf_rawdata(scn, NULL)) || !hd->d_buf || hd->d_size < 16 ||
	    ((uintptr_t)hd->d_buf & 3) || !(sd = elf_getdata(dynsym, NULL)))
		return NULL;
	w = hd->d_buf;
	nwords = hd->d_size / 4;
	/* header, bloom words, buckets: all inside the section, and a chain word at least */
	need = 4 + (size_t)w[2] * (word / 4) + (size_t)w[0];
	if (!w[0] || need >= nwords)
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->syms = sd;
	d->nsyms = dsh.sh_size / dsh.sh_entsize;
	d->strndx = dsh.sh_link;
	d->nbuckets = w[0];
	d->symoffset = w[1];
	d->buckets = w + 4 + (size_t)w[2] * (word / 4);
	d->chain = d->buckets + d->nbuckets;
	d->nchain = nwords - need;
	return d;
}

/* File offset of the first defined function called name in .dynsym (as listing it would give:
 * symbols of a name share a hash, so a chain holds them in table order), 0 when none. */
static uint64_t elf__dynhash_find(const struct elf_info *info, const char *name)
{
	const struct elf_dynhash *d = info->dynhash;
	uint32_t h = 5381, idx;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = h * 33 + *p;
	for (idx = d->buckets[h % d->nbuckets];
	     idx >= d->symoffset && idx < d->nsyms && idx - d->symoffset < d->nchain; idx++) {
		uint32_t ch = d->chain[idx - d->symoffset];
		GElf_Sym sym;
		const char *s;
		int type;

		if ((ch | 1) == (h | 1) && gelf_getsym(d->syms, (int)idx, &sym) &&
		    (s = elf_strptr(info->elf, d->strndx, sym.st_name)) && !strcmp(s, name)) {
			type = GELF_ST_TYPE(sym.st_info);
			if ((type == STT_FUNC || type == STT_GNU_IFUNC) &&
			    sym.st_shndx != SHN_UNDEF && sym.st_value) {
				uint64_t off = elf__to_offset(d->ph, d->nph, sym.st_value);

				if (off)
					return off;
			}
		}
		if (ch & 1)
			break;
	}
	return 0;
}

/* want_syms: collect the defined functions too; without, only what the loader reads (PT_INTERP,
 * the dynamic section), which is all deps__resolve needs for every library of every exec. */
static int elf_info__read(const char *path, struct elf_info *info, bool want_syms)
{
	GElf_Phdr *ph = NULL;
	size_t nph = 0, cap = 0;
	Elf_Scn *scn = NULL;
	Elf *elf = NULL;
	int fd = -1, err;

	memset(info, 0, sizeof(*info));
	info->fd = -1;
	err = elf__open(path, &fd, &elf, want_syms);
	if (err)
		return err;
	if (elf_getphdrnum(elf, &nph) || !(ph = calloc(nph + 1, sizeof(*ph)))) {
		err = -ENOEXEC;
		goto cleanup;
	}
	for (size_t i = 0; i < nph; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph[i]))
			continue;
		if (ph[i].p_type == PT_DYNAMIC)
			info->dynamic = true;
		if (ph[i].p_type == PT_INTERP && ph[i].p_filesz && ph[i].p_filesz < PATH_MAX) {
			char buf[PATH_MAX];

			if (pread(fd, buf, ph[i].p_filesz, (off_t)ph[i].p_offset) ==
			    (ssize_t)ph[i].p_filesz)
				info->interp = strndup(buf, ph[i].p_filesz);
		}
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		size_t n;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNAMIC) {
			err = elf__read_dynamic(elf, fd, scn, &sh, info);
			if (err)
				goto cleanup;
			continue;
		}
		if (!want_syms || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		if (sh.sh_type == SHT_DYNSYM && !info->dynhash &&
		    (info->dynhash = elf__dynhash_open(elf, scn))) {
			info->dynhash->ph = ph;
			info->dynhash->nph = nph;
			ph = NULL; /* the table's now */
			continue;
		}
		data = elf_getdata(scn, NULL);
		n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; data && i < n; i++) {
			GElf_Sym sym;
			const char *name;
			int type;
			uint64_t off;

			if (!gelf_getsym(data, (int)i, &sym))
				break;
			type = GELF_ST_TYPE(sym.st_info);
			if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
			    sym.st_shndx == SHN_UNDEF || !sym.st_value)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name || !*name)
				continue;
			off = info->dynhash ? elf__to_offset(info->dynhash->ph, nph, sym.st_value)
					    : elf__to_offset(ph, nph, sym.st_value);
			if (!off)
				continue;
			err = elf__add_sym(info, &cap, name, off);
			if (err)
				goto cleanup;
		}
	}
	err = 0;
cleanup:
	free(ph);
	info->elf = elf;
	info->fd = fd;
	if (err)
		elf_info__free(info);
	return err;
}

int elf_info__load(const char *path, struct elf_info *info)
{
	return elf_info__read(path, info, true);
}

int elf_info__load_dynamic(const char *path, struct elf_info *info)
{
	return elf_info__read(path, info, false);
}

uint64_t elf_info__find(const struct elf_info *info, const char *name)
{
	size_t len = strlen(name);
	uint64_t off;

	/* .dynsym first, as it comes before .symtab in every file's sections (ld's order) */
	if (info->dynhash && (off = elf__dynhash_find(info, name)))
		return off;

	for (size_t i = 0; i < info->nr_syms; i++)
		if (info->syms[i].len == len && !memcmp(info->syms[i].name, name, len))
			return info->syms[i].offset;
	return 0;
}

int elf__vaddr_to_offset(const char *path, uint64_t vaddr, uint64_t *offset)
{
	GElf_Phdr ph[64];
	size_t nph = 0;
	Elf *elf;
	int fd, err;

	err = elf__open(path, &fd, &elf, false);
	if (err)
		return err;
	if (elf_getphdrnum(elf, &nph) || nph > 64)
		nph = 0;
	for (size_t i = 0; i < nph; i++)
		if (!gelf_getphdr(elf, (int)i, &ph[i]))
			memset(&ph[i], 0, sizeof(ph[i]));
	*offset = elf__to_offset(ph, nph, vaddr);
	elf_end(elf);
	close(fd);
	return *offset ? 0 : -ENOENT;
}

void elf_info__free(struct elf_info *info)
{
	if (!info)
		return;
	if (info->elf) {
		elf_end(info->elf);
		close(info->fd);
	}
	for (size_t i = 0; i < info->nr_needed; i++)
		free(info->needed[i]);
	if (info->dynhash)
		free(info->dynhash->ph);
	free(info->dynhash);
	free(info->syms);
	free(info->needed);
	free(info->runpath);
	free(info->soname);
	free(info->interp);
	memset(info, 0, sizeof(*info));
	info->fd = -1;
}

/* The class and machine of an ELF file: 0 or -errno. Read with one pread, not libelf: this
 * runs at every exec stop (libelf's open and map cost ~17 us there, the stop ~100-150 us). */
static int elf__abi(const char *path, int *cls, int *machine)
{
	Elf64_Ehdr eh; /* e_ident and e_machine sit at the same offsets in both classes */
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, &eh, offsetof(Elf64_Ehdr, e_machine) + sizeof(eh.e_machine), 0);
	close(fd);
	if (n < (ssize_t)(offsetof(Elf64_Ehdr, e_machine) + sizeof(eh.e_machine)) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG))
		return -ENOEXEC;
	*cls = eh.e_ident[EI_CLASS];
	*machine = eh.e_machine;
	return 0;
}

int elf__native_abi(const char *path)
{
	static int self_cls = -1, self_machine = -1;
	int cls, machine, err;

	if (self_cls < 0 && (err = elf__abi("/proc/self/exe", &self_cls, &self_machine))) {
		self_cls = -1;
		return err;
	}
	err = elf__abi(path, &cls, &machine);
	if (err)
		return err;
	return cls == self_cls && machine == self_machine;
}
