/* SPDX-License-Identifier: MIT */
/*
 * A minimal kernel BTF for our BPF object's CO-RE relocations, so a run does not parse the whole
 * vmlinux BTF (~6 MB, 130k types: 30-60 ms of CPU and ~10 MB of memory per run). Built once per
 * kernel and object, then cached (btf_cache.h).
 */
#ifndef MEMTRACK_BTF_MIN_H
#define MEMTRACK_BTF_MIN_H

struct btf;

/*
 * Builds in *out a BTF holding every struct, union, enum and typedef of `kernel` whose name is
 * the essential name (without a "___flavor" suffix) of a named type of the same kind in
 * `local`, with everything they embed by value (members, arrays, typedef and modifier chains).
 * Pointers keep their target only when that target is kept anyway; otherwise they point to
 * void. Why this is enough: libbpf resolves each CO-RE relocation from a named local root type
 * to the kernel types of the same essential name, walks members by name and checks field
 * compatibility without looking through pointers; sizes and offsets of kept types are copied
 * exactly. So every relocation resolves as it would against the full BTF.
 * Returns 0 or -errno; *out is the caller's to btf__free().
 */
int btf_min__build(const struct btf *kernel, const struct btf *local, struct btf **out);

#endif
