// SPDX-License-Identifier: MIT
/*
 * Minimal kernel BTF for CO-RE (see btf_min.h). Three passes: pick the kernel types the local
 * object names (roots), collect everything they hold by value (closure), then copy those types
 * into a new BTF in collection order and rewrite their type references to the new IDs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/btf.h>
#include "track/btf_min.h"

/* Kinds a CO-RE relocation can be rooted at, grouped as libbpf matches them (an enum and an
 * enum64 of the same name are candidates for each other). */
enum root_class { ROOT_NONE, ROOT_STRUCT, ROOT_UNION, ROOT_ENUM, ROOT_TYPEDEF };

struct root_name {
	const char *name; /* points into the local BTF's strings */
	size_t len;	  /* essential length: up to a "___" flavor suffix */
	enum root_class cls;
};

struct btf_min {
	const struct btf *kernel;
	__u32 *map;   /* kernel type ID -> new ID; 0 = not copied */
	__u32 *order; /* kernel IDs in copy order; new ID = index + 1 */
	__u32 nr;
};

static enum root_class root_class(const struct btf_type *t)
{
	switch (btf_kind(t)) {
	case BTF_KIND_STRUCT:
		return ROOT_STRUCT;
	case BTF_KIND_UNION:
		return ROOT_UNION;
	case BTF_KIND_ENUM:
	case BTF_KIND_ENUM64:
		return ROOT_ENUM;
	case BTF_KIND_TYPEDEF:
		return ROOT_TYPEDEF;
	default:
		return ROOT_NONE;
	}
}

static size_t essential_len(const char *name)
{
	const char *flavor = strstr(name, "___");

	return flavor ? (size_t)(flavor - name) : strlen(name);
}

static int root_cmp(const struct root_name *a, const char *name, size_t len, enum root_class cls)
{
	int c = memcmp(a->name, name, a->len < len ? a->len : len);

	if (c)
		return c;
	if (a->len != len)
		return a->len < len ? -1 : 1;
	return (int)a->cls - (int)cls;
}

static int root_sort_cmp(const void *pa, const void *pb)
{
	const struct root_name *b = pb;

	return root_cmp(pa, b->name, b->len, b->cls);
}

static bool root_wanted(const struct root_name *roots, size_t n, const char *name,
			enum root_class cls)
{
	size_t lo = 0, hi = n, len = strlen(name);

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = root_cmp(&roots[mid], name, len, cls);

		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* Adds kernel type `id` and, depth first, every type it holds by value. Pointer targets are not
 * followed: field compatibility never looks through a pointer. */
static void btf_min__collect(struct btf_min *m, __u32 id)
{
	const struct btf_type *t;

	if (id == 0 || m->map[id])
		return;
	m->order[m->nr++] = id;
	m->map[id] = m->nr;
	t = btf__type_by_id(m->kernel, id);
	switch (btf_kind(t)) {
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION: {
		const struct btf_member *mb = btf_members(t);

		for (__u16 i = 0; i < btf_vlen(t); i++)
			btf_min__collect(m, mb[i].type);
		break;
	}
	case BTF_KIND_ARRAY:
		btf_min__collect(m, btf_array(t)->type);
		btf_min__collect(m, btf_array(t)->index_type);
		break;
	case BTF_KIND_TYPEDEF:
	case BTF_KIND_CONST:
	case BTF_KIND_VOLATILE:
	case BTF_KIND_RESTRICT:
	case BTF_KIND_TYPE_TAG:
		btf_min__collect(m, t->type);
		break;
	case BTF_KIND_FUNC_PROTO: {
		const struct btf_param *p = btf_params(t);

		btf_min__collect(m, t->type);
		for (__u16 i = 0; i < btf_vlen(t); i++)
			btf_min__collect(m, p[i].type);
		break;
	}
	default: /* INT, FLOAT, ENUM, ENUM64, FWD, PTR: no by-value references */
		break;
	}
}

/* Rewrites the type references of copied type `nt` from kernel IDs to new IDs. */
static void btf_min__remap(const struct btf_min *m, struct btf_type *nt)
{
	switch (btf_kind(nt)) {
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION: {
		struct btf_member *mb = btf_members(nt);

		for (__u16 i = 0; i < btf_vlen(nt); i++)
			mb[i].type = m->map[mb[i].type];
		break;
	}
	case BTF_KIND_ARRAY:
		btf_array(nt)->type = m->map[btf_array(nt)->type];
		btf_array(nt)->index_type = m->map[btf_array(nt)->index_type];
		break;
	case BTF_KIND_PTR: /* kept target, or void */
	case BTF_KIND_TYPEDEF:
	case BTF_KIND_CONST:
	case BTF_KIND_VOLATILE:
	case BTF_KIND_RESTRICT:
	case BTF_KIND_TYPE_TAG:
		nt->type = m->map[nt->type];
		break;
	case BTF_KIND_FUNC_PROTO: {
		struct btf_param *p = btf_params(nt);

		nt->type = m->map[nt->type];
		for (__u16 i = 0; i < btf_vlen(nt); i++)
			p[i].type = m->map[p[i].type];
		break;
	}
	default:
		break;
	}
}

/* The named types of the local object that can root a relocation, sorted for lookup. */
static int btf_min__roots(const struct btf *local, struct root_name **out, size_t *n)
{
	__u32 cnt = btf__type_cnt(local);
	struct root_name *r = calloc(cnt, sizeof(*r));
	size_t nr = 0;

	if (!r)
		return -ENOMEM;
	for (__u32 id = 1; id < cnt; id++) {
		const struct btf_type *t = btf__type_by_id(local, id);
		const char *name = btf__name_by_offset(local, t->name_off);
		enum root_class cls = root_class(t);

		if (cls == ROOT_NONE || !name || !name[0])
			continue;
		r[nr].name = name;
		r[nr].len = essential_len(name);
		r[nr++].cls = cls;
	}
	qsort(r, nr, sizeof(*r), root_sort_cmp);
	*out = r;
	*n = nr;
	return 0;
}

int btf_min__build(const struct btf *kernel, const struct btf *local, struct btf **out)
{
	__u32 cnt = btf__type_cnt(kernel);
	struct btf_min m = {.kernel = kernel};
	struct root_name *roots = NULL;
	struct btf *b = NULL;
	size_t nroots = 0;
	int err;

	*out = NULL;
	m.map = calloc(cnt, sizeof(*m.map));
	m.order = calloc(cnt, sizeof(*m.order));
	err = m.map && m.order ? btf_min__roots(local, &roots, &nroots) : -ENOMEM;
	if (err)
		goto cleanup;
	for (__u32 id = 1; id < cnt; id++) {
		const struct btf_type *t = btf__type_by_id(kernel, id);
		enum root_class cls = root_class(t);
		const char *name;

		if (cls == ROOT_NONE || !t->name_off)
			continue;
		name = btf__name_by_offset(kernel, t->name_off);
		if (name && root_wanted(roots, nroots, name, cls))
			btf_min__collect(&m, id);
	}
	b = btf__new_empty();
	if (!b) {
		err = -errno;
		goto cleanup;
	}
	for (__u32 i = 0; i < m.nr; i++) {
		int id = btf__add_type(b, kernel, btf__type_by_id(kernel, m.order[i]));

		if (id < 0) {
			err = id;
			goto cleanup;
		}
		if ((__u32)id != i + 1) {
			err = -EPROTO; /* IDs must follow collection order for the map to hold */
			goto cleanup;
		}
		/* Types just added sit in the new BTF's writable buffer. */
		btf_min__remap(&m, (struct btf_type *)btf__type_by_id(b, id));
	}
	*out = b;
	b = NULL;
cleanup:
	btf__free(b);
	free(roots);
	free(m.map);
	free(m.order);
	return err;
}
