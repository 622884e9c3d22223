/* SPDX-License-Identifier: MIT */
/*
 * Symbol names as people read them. C++ (Itanium ABI, `_Z...`), Rust legacy (`_ZN...17h<hash>E`,
 * shown without the hash) and Rust v0 (`_R...`) all go through libiberty's cplus_demangle (the
 * demangler of binutils and gdb; Debian's libiberty-dev), which tells the three apart itself.
 * Function parameters are kept: overloads stay apart.
 */
#ifndef MEMTRACK_DEMANGLE_H
#define MEMTRACK_DEMANGLE_H

/* A malloc'd demangled name, or NULL when name is not a mangled name (use it as it is). */
char *demangle(const char *name);

#endif
