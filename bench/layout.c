// SPDX-License-Identifier: MIT
/*
 * What a round's command starts with, kept the same from round to round and run to run: an
 * environment padded to a fixed size, and optionally no address-space randomisation.
 *
 * Why the size: bash, python, perl... copy every environment string into their heap, and the
 * strings sit on the initial stack. Two runs whose environments differ by a few bytes (OLDPWD,
 * a CI variable, a longer checkout path) show as deterministic heap differences: +24 B peak
 * heap for sqlite3 under bash, +616 B allocated for python3, measured here between two runs of
 * one config from two shells. Padding to a multiple of LAYOUT_ENV_BUCKET keeps the sum of the
 * strings, and so those figures, the same while the environments stay within one bucket.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "runner.h"

static bool bench_layout__is_pad(const char *s)
{
	size_t n = strlen(LAYOUT_ENV_PAD);
	return strncmp(s, LAYOUT_ENV_PAD, n) == 0 && s[n] == '=';
}

size_t bench_layout__env_bytes(char *const *env)
{
	size_t total = 0;

	for (; env && *env; env++)
		total += strlen(*env) + 1; /* what execve copies: the string and its NUL */
	return total;
}

int bench_layout__env(char *const *env, size_t bucket, char ***out)
{
	size_t n = 0, total = 0, name = strlen(LAYOUT_ENV_PAD) + 2; /* "NAME=" and the NUL */
	size_t fill;
	char **v, *pad;

	*out = NULL;
	if (bucket == 0)
		return -EINVAL;
	for (char *const *e = env; e && *e; e++) {
		if (bench_layout__is_pad(*e))
			continue; /* ours, from an enclosing memtrack-bench: sized anew */
		total += strlen(*e) + 1;
		n++;
	}
	fill = (bucket - (total + name) % bucket) % bucket;
	v = calloc(n + 2, sizeof(*v));
	pad = malloc(name + fill);
	if (!v || !pad) {
		free(v);
		free(pad);
		return -ENOMEM;
	}
	memcpy(pad, LAYOUT_ENV_PAD "=", name - 1);
	memset(pad + name - 1, 'x', fill);
	pad[name - 1 + fill] = '\0';
	n = 0;
	for (char *const *e = env; e && *e; e++)
		if (!bench_layout__is_pad(*e))
			v[n++] = *e;
	v[n] = pad; /* last: the strings before it keep their places on the stack */
	*out = v;
	return 0;
}

void bench_layout__env_free(char **env)
{
	size_t i;

	if (!env)
		return;
	for (i = 0; env[i] && !bench_layout__is_pad(env[i]); i++)
		;
	free(env[i]); /* the pad is the only string we own */
	free(env);
}
