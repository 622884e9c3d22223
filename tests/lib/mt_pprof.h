/* SPDX-License-Identifier: MIT */
#ifndef MT_PPROF_H
#define MT_PPROF_H

#include <stdbool.h>

/* true when tests/pprof/decode.py can run: /usr/bin/python3 with protobuf, and protoc */
bool mt_pprof_decoder(void);
/* The decoder's text for a gzipped profile (malloc'd), NULL when it failed. */
char *mt_pprof_decode(const char *file);

#endif
