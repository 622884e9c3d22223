// SPDX-License-Identifier: MIT
/*
 * alloc_jemalloc with jemalloc linked into the executable (libjemalloc.a): the executable
 * defines malloc & co., so the preload interposer passes through and uprobes on the
 * executable serve it in every mode; same calls, same events.
 */
#include "alloc_jemalloc.c"
