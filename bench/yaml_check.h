/* SPDX-License-Identifier: MIT */
/* A streaming look at a YAML text before libyaml's load builds its document. */
#ifndef BENCH_YAML_CHECK_H
#define BENCH_YAML_CHECK_H

#include <stddef.h>

/*
 * -EINVAL, with *line (1-based) and msg, when text holds a second document or mappings and
 * sequences nested deeper than max_depth; 0 otherwise (a syntax error is left to the load,
 * which reports it with its line); -ENOMEM.
 */
int yaml_check__shape(const char *text, size_t len, int max_depth, int *line, char *msg,
		      size_t cap);

#endif
