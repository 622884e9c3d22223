// SPDX-License-Identifier: MIT
/*
 * nested_cxx with libstdc++ linked into the executable (-static-libstdc++, as gcc's cc1plus
 * is built): the executable defines operator new and delete but not malloc, so its operators
 * call the process's malloc, which the preload interposer serves. Same calls, same events in
 * every mode; in auto mode no uprobe at all. Aligned new only with the argument "aligned": it
 * rounds the size up to the alignment before it calls aligned_alloc, and the interposer sees
 * only that call (uprobes record the operator's own size).
 */
#define MT_ALIGNED_BY_DEFAULT 0
#include "nested_cxx.cc"
