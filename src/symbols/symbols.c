// SPDX-License-Identifier: MIT
/* Symbolisation with libdwfl: one Dwfl per module, reported at bias 0 so that a frame's vaddr is
 * its address there (see symbols.h for the search order). */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/kvmap.h"
#include "common/log.h"
#include "symbols/demangle.h"
#include "symbols/symbols.h"

#define SCOPES_MAX 64 /* inlined functions kept per frame; deeper nests are cut at the caller end  \
		       */

enum mod_state { MOD_UNTRIED = 0, MOD_OPEN, MOD_NONE };

/* A function symbol: libdwfl's address lookup scans the whole symbol table per call (seconds
 * for a big program such as cc1plus), so each module's symbols are sorted once instead. */
struct msym {
	GElf_Addr addr, size; /* dwfl addresses */
	const char *name;     /* in the module's string table (valid while its Dwfl is) */
	int rank;	      /* among aliases at one address: global 0, weak 1, local 2 */
};

struct sym_module {
	enum mod_state state;
	struct msym *syms; /* sorted by addr */
	size_t nr_syms;
	Dwfl *dwfl;
	Dwfl_Module *mod;
	Dwarf_Addr bias; /* dwfl address = vaddr + bias */
	const char *source;
	const char *base; /* the path's last component, for `base+0x...` */
};

struct symbolizer {
	const struct stackfile *sf;
	char *debug_dir;
	char *debuginfo_path; /* libdwfl's search path for separate debug files */
	Dwfl_Callbacks cb;
	struct sym_module *mods; /* [nr_modules + 1]; [0] is "outside every module" */
	struct kvmap cache;	 /* (module, vaddr) -> index in locs */
	struct sym_loc **locs;
	size_t nr_locs, locs_cap;
};

int symbolizer__new(struct symbolizer **out, const struct stackfile *sf, const struct sym_opts *o)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	const char *dd = o && o->debug_dir ? o->debug_dir : "/usr/lib/debug";

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->sf = sf;
	s->debug_dir = strdup(dd);
	/* "": beside the file; ".debug": its .debug/ directory; then the global directory */
	if (asprintf(&s->debuginfo_path, ":.debug:%s", dd) < 0)
		s->debuginfo_path = NULL;
	s->mods = calloc(sf->nr_modules + 1, sizeof(*s->mods));
	if (!s->debug_dir || !s->debuginfo_path || !s->mods) {
		symbolizer__free(s);
		return -ENOMEM;
	}
	s->cb.find_elf = dwfl_build_id_find_elf;
	s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
	s->cb.section_address = dwfl_offline_section_address;
	s->cb.debuginfo_path = &s->debuginfo_path;
	s->mods[0].state = MOD_NONE;
	s->mods[0].source = "none";
	s->mods[0].base = "[unknown]";
	*out = s;
	return 0;
}

static void sym_loc__free(struct sym_loc *l)
{
	if (!l)
		return;
	for (uint32_t i = 0; l->lines && i < l->nr; i++) {
		free((char *)l->lines[i].func);
		free((char *)l->lines[i].file);
	}
	free(l->lines);
	free(l);
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; s->mods && i <= s->sf->nr_modules; i++) {
		if (s->mods[i].dwfl)
			dwfl_end(s->mods[i].dwfl);
		free(s->mods[i].syms);
	}
	for (size_t i = 0; i < s->nr_locs; i++)
		sym_loc__free(s->locs[i]);
	free(s->locs);
	kvmap__free(&s->cache);
	free(s->mods);
	free(s->debug_dir);
	free(s->debuginfo_path);
	free(s);
}

/* Opens path as module m's file: NULL when it cannot be read or its build-id is not the one
 * captured (*mismatch set then). */
static Dwfl *mod_try(struct symbolizer *s, const struct stack_module *m, const char *path,
		     Dwfl_Module **mod, bool *mismatch)
{
	Dwfl *d = dwfl_begin(&s->cb);
	const unsigned char *bits;
	GElf_Addr bid_vaddr;
	Dwfl_Module *md;
	int n;

	if (!d)
		return NULL;
	dwfl_report_begin(d);
	/* ET_DYN: base 0 relative to p_vaddr puts the file at its own vaddrs; ET_EXEC: there anyway
	 */
	md = dwfl_report_elf(d, m->path, path, -1, 0, true);
	dwfl_report_end(d, NULL, NULL);
	if (!md)
		goto fail;
	if (m->build_id_len) {
		n = dwfl_module_build_id(md, &bits, &bid_vaddr);
		if (n != m->build_id_len || memcmp(bits, m->build_id, m->build_id_len)) {
			*mismatch = true;
			goto fail;
		}
	}
	*mod = md;
	return d;
fail:
	dwfl_end(d);
	return NULL;
}

static int by_addr(const void *a, const void *b)
{
	const struct msym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* aliases: the exported name first (__libc_start_main, not __libc_start_main_impl) */
	if (x->rank != y->rank)
		return x->rank - y->rank;
	if (!x->size != !y->size)
		return !x->size - !y->size; /* the sized one first */
	return strcmp(x->name, y->name);
}

/* The module's function symbols (.symtab, else .dynsym, as libdwfl picks), sorted. */
static void mod_load_syms(struct sym_module *sm)
{
	int n = dwfl_module_getsymtab(sm->mod);
	size_t k = 0;

	if (n <= 0 || !(sm->syms = malloc((size_t)n * sizeof(*sm->syms))))
		return;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *name =
		    dwfl_module_getsym_info(sm->mod, i, &sym, &addr, NULL, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);

		if (!name || !*name || sym.st_shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		sm->syms[k++] = (struct msym){
		    .addr = addr,
		    .size = sym.st_size,
		    .name = name,
		    .rank = GELF_ST_BIND(sym.st_info) == STB_GLOBAL ? 0
			    : GELF_ST_BIND(sym.st_info) == STB_WEAK ? 1
								    : 2,
		};
	}
	qsort(sm->syms, k, sizeof(*sm->syms), by_addr);
	sm->nr_syms = k;
}

/* The function symbol covering pc, or NULL. A symbol without a size covers up to the next. */
static const char *mod_sym_at(const struct sym_module *sm, GElf_Addr pc)
{
	size_t lo = 0, hi = sm->nr_syms;
	const struct msym *m;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (sm->syms[mid].addr <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	/* among the symbols at that address, the first (sorted sized first) */
	m = &sm->syms[lo - 1];
	while (m > sm->syms && m[-1].addr == m->addr)
		m--;
	if (m->size && pc >= m->addr + m->size)
		return NULL;
	return m->name;
}

static void mod_open(struct symbolizer *s, uint32_t id)
{
	const struct stack_module *m = stackfile__module(s->sf, id);
	struct sym_module *sm = &s->mods[id];
	bool mismatch = false;
	char *p = NULL;
	Elf *elf;

	sm->state = MOD_NONE;
	sm->source = "none";
	sm->base = m->path ? (strrchr(m->path, '/') ? strrchr(m->path, '/') + 1 : m->path) : "?";
	if (m->path && (sm->dwfl = mod_try(s, m, m->path, &sm->mod, &mismatch)))
		sm->source = "file";
	if (!sm->dwfl && m->build_id_len >= 2) {
		char hex[2 * sizeof(m->build_id) + 1];

		for (uint8_t i = 0; i < m->build_id_len; i++)
			sprintf(hex + 2 * i, "%02x", m->build_id[i]);
		if (asprintf(&p, "%s/.build-id/%.2s/%s.debug", s->debug_dir, hex, hex + 2) >= 0 &&
		    (sm->dwfl = mod_try(s, m, p, &sm->mod, &mismatch)))
			sm->source = "build-id debug file";
		free(p);
	}
	if (!sm->dwfl) {
		if (mismatch)
			log__warn(
			    "'%s' is not the file the run used (build-id differs) and no debug "
			    "file has its build-id: its frames show as offsets",
			    m->path);
		return;
	}
	elf = dwfl_module_getelf(sm->mod, &sm->bias);
	if (!elf) {
		dwfl_end(sm->dwfl);
		sm->dwfl = NULL;
		sm->source = "none";
		return;
	}
	mod_load_syms(sm);
	sm->state = MOD_OPEN;
}

const char *symbolizer__module_source(struct symbolizer *s, uint32_t module)
{
	if (module > s->sf->nr_modules)
		return "none";
	return s->mods[module].state == MOD_UNTRIED ? "untried" : s->mods[module].source;
}

/* The DIE a concrete or inlined instance describes: its abstract origin's declaration. */
static Dwarf_Die *die_decl(Dwarf_Die *die, Dwarf_Die *buf)
{
	Dwarf_Attribute at;
	Dwarf_Die *d = die;

	for (int i = 0; i < 4; i++) {
		Dwarf_Attribute *a = dwarf_attr(d, DW_AT_abstract_origin, &at);

		if (!a)
			a = dwarf_attr(d, DW_AT_specification, &at);
		if (!a || !dwarf_formref_die(a, buf))
			break;
		d = buf;
	}
	return d;
}

/* The plain name qualified by the namespaces and classes around its declaration:
 * "ns::Class::func" (no parameters: only a linkage name has them). */
static char *qualified_name(Dwarf_Die *die, const char *name)
{
	Dwarf_Die buf, *decl = die_decl(die, &buf), *scopes = NULL;
	int n = dwarf_getscopes_die(decl, &scopes);
	size_t len = strlen(name) + 1;
	char *out;

	for (int i = 1; i < n; i++)
		if (dwarf_diename(&scopes[i]))
			len += strlen(dwarf_diename(&scopes[i])) + 2;
	out = malloc(len);
	if (out) {
		*out = 0;
		for (int i = n - 1; i >= 1; i--) {
			int tag = dwarf_tag(&scopes[i]);
			const char *sn = dwarf_diename(&scopes[i]);

			if (sn && (tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
				   tag == DW_TAG_structure_type || tag == DW_TAG_union_type)) {
				strcat(out, sn);
				strcat(out, "::");
			}
		}
		strcat(out, name);
	}
	free(scopes);
	return out;
}

/* A DIE's name for people: its linkage name demangled, else its plain name qualified. */
static char *die_func_name(Dwarf_Die *die)
{
	Dwarf_Attribute at;
	const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &at));
	char *d;

	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at));
	if (n && (d = demangle(n)))
		return d;
	if (n)
		return strdup(n);
	n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &at));
	return n ? qualified_name(die, n) : NULL;
}

/* An ELF symbol's name for people: demangled, without a symbol version ("@@GLIBC_2.34"). */
static char *sym_name(const char *n)
{
	const char *at = strchr(n, '@');
	char *plain = at ? strndup(n, (size_t)(at - n)) : NULL, *d;

	if (at && !plain)
		return NULL;
	d = demangle(plain ? plain : n);
	if (d) {
		free(plain);
		return d;
	}
	return plain ? plain : strdup(n);
}

/* The call site an inlined_subroutine DIE records: its DW_AT_call_file and DW_AT_call_line. */
static void call_site(Dwarf_Die *cu, Dwarf_Die *inl, struct sym_line *out)
{
	Dwarf_Attribute at;
	Dwarf_Word idx, line;
	Dwarf_Files *files;
	size_t nf;
	const char *f;

	if (!dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &at), &line))
		out->line = (uint32_t)line;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &at), &idx) ||
	    dwarf_getsrcfiles(cu, &files, &nf) || idx >= nf)
		return;
	f = dwarf_filesrc(files, idx, NULL, NULL);
	if (f)
		out->file = strdup(f);
}

static bool is_func(Dwarf_Die *d)
{
	int tag = dwarf_tag(d);

	return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram ||
	       tag == DW_TAG_entry_point;
}

/* Fills l from the module's symbols and DWARF; l->lines has room for SCOPES_MAX + 1 lines. */
static void symbolise(struct sym_module *sm, struct sym_loc *l)
{
	Dwarf_Addr pc = l->vaddr - 1 + sm->bias, cubias, lpc;
	const char *elf_name = mod_sym_at(sm, pc);
	Dwarf_Die *cu = dwfl_module_addrdie(sm->mod, pc, &cubias), *scopes = NULL;
	Dwfl_Line *ln = dwfl_module_getsrc(sm->mod, pc);
	Dwarf_Die chain[SCOPES_MAX];
	uint32_t nc = 0;
	int n = cu ? dwarf_getscopes(cu, pc - cubias, &scopes) : 0;
	int lno = 0;
	const char *file;

	/* the innermost function at pc: an inlined instance, or the function itself */
	for (int i = 0; i < n && !nc; i++)
		if (is_func(&scopes[i]))
			chain[nc++] = scopes[i];
	free(scopes);
	/* an inlined instance's scopes above it are its abstract definition's (its CU): the
	 * function it was inlined into is found among the concrete parents of the instance */
	while (nc && nc < SCOPES_MAX && dwarf_tag(&chain[nc - 1]) == DW_TAG_inlined_subroutine) {
		int m = dwarf_getscopes_die(&chain[nc - 1], &scopes), i;

		for (i = 1; i < m && !is_func(&scopes[i]); i++)
			;
		if (i < m)
			chain[nc++] = scopes[i];
		free(scopes);
		if (i >= m)
			break;
	}
	if (!nc) {
		l->nr = 1;
		l->lines[0].func = elf_name ? sym_name(elf_name) : NULL;
	}
	for (uint32_t k = 0; k < nc; k++) {
		bool outer = k == nc - 1;

		/* the ELF symbol qualifies C++ names the DWARF name lacks (class, namespace) */
		l->lines[k].func =
		    outer && elf_name ? sym_name(elf_name) : die_func_name(&chain[k]);
		if (k)
			call_site(cu, &chain[k - 1], &l->lines[k]);
	}
	if (nc)
		l->nr = nc;
	if (ln && (file = dwfl_lineinfo(ln, &lpc, &lno, NULL, NULL, NULL))) {
		l->lines[0].file = strdup(file);
		l->lines[0].line = (uint32_t)(lno > 0 ? lno : 0);
	}
}

/* `base+0xVADDR` when no name was found. 0 or -ENOMEM. */
static int fallback_names(struct sym_module *sm, struct sym_loc *l)
{
	for (uint32_t k = 0; k < l->nr; k++) {
		if (l->lines[k].func)
			continue;
		if (k && l->lines[k - 1].func) {
			l->lines[k].func = strdup("[inlined]");
		} else if (!l->module) {
			l->lines[k].func = strdup("[unknown]");
		} else if (asprintf((char **)&l->lines[k].func, "%s+0x%" PRIx64, sm->base,
				    l->vaddr) < 0) {
			l->lines[k].func = NULL;
		}
		if (!l->lines[k].func)
			return -ENOMEM;
	}
	return 0;
}

const struct sym_loc *symbolizer__lookup(struct symbolizer *s, uint32_t module, uint64_t vaddr)
{
	uint32_t mid = module <= s->sf->nr_modules ? module : 0;
	struct sym_module *sm = &s->mods[mid];
	uint64_t *slot = kvmap__find(&s->cache, module, vaddr);
	struct sym_loc *l;

	if (slot)
		return s->locs[*slot];
	if (s->nr_locs == s->locs_cap) {
		size_t cap = s->locs_cap ? s->locs_cap * 2 : 256;
		struct sym_loc **locs = realloc(s->locs, cap * sizeof(*locs));

		if (!locs)
			return NULL;
		s->locs = locs;
		s->locs_cap = cap;
	}
	l = calloc(1, sizeof(*l));
	if (!l || !(l->lines = calloc(SCOPES_MAX + 1, sizeof(*l->lines)))) {
		free(l);
		return NULL;
	}
	l->module = mid;
	l->vaddr = vaddr;
	l->nr = 1;
	if (sm->state == MOD_UNTRIED)
		mod_open(s, mid);
	if (sm->state == MOD_OPEN && vaddr)
		symbolise(sm, l);
	l->found = l->lines[l->nr - 1].func != NULL;
	if (fallback_names(sm, l) || !(slot = kvmap__get(&s->cache, module, vaddr, NULL))) {
		sym_loc__free(l);
		return NULL;
	}
	*slot = s->nr_locs;
	s->locs[s->nr_locs++] = l;
	return l;
}
