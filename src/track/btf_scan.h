/* SPDX-License-Identifier: MIT */
/*
 * Finding a few functions in a BTF file (vmlinux) without loading it: libbpf's
 * btf__load_vmlinux_btf() allocates and indexes the whole 5-6 MB, which costs 10-20x more
 * than streaming it once through a small buffer (rmap mode's backend probe only needs ids).
 */
#ifndef MEMTRACK_BTF_SCAN_H
#define MEMTRACK_BTF_SCAN_H

#include <stddef.h>

/* ids[i] = the BTF id of the FUNC named names[i] in the file at path, 0 when there is none.
 * Returns 0, or -errno (-EINVAL: not a BTF file this reader understands). */
int btf_scan__funcs(const char *path, const char *const *names, int n, int *ids);

/* The same with a given buffer size (bytes, >= 256): tests use small ones to cross record
 * and string boundaries. */
int btf_scan__funcs_chunk(const char *path, const char *const *names, int n, int *ids,
			  size_t chunk);

#endif
