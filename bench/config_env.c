// SPDX-License-Identifier: MIT
/* ${NAME} in a config's strings, from the environment (bench_config__expand_env, config.h):
 * apart from the YAML walk in config.c, which calls it for the keys it expands. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"

int bench_config__expand_env(const char *in, char **out, char **bad_name)
{
	size_t cap = strlen(in) + 1, len = 0;
	char *buf = malloc(cap);
	int err = 0;

	*out = NULL;
	*bad_name = NULL;
	if (!buf)
		return -ENOMEM;
	for (const char *p = in; *p;) {
		const char *piece = p, *value = NULL;
		size_t n = 1, skip = 1;

		if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
			piece = "${"; /* escaped: bash gets a literal ${ */
			n = 2;
			skip = 3;
		} else if (p[0] == '$' && p[1] == '{') {
			size_t nl =
			    strspn(p + 2, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
					  "0123456789_");
			if (nl > 0 && p[2 + nl] == '}' && !(p[2] >= '0' && p[2] <= '9')) {
				char *name = strndup(p + 2, nl);
				if (!name) {
					err = -ENOMEM;
					goto cleanup;
				}
				value = getenv(name);
				if (!value) {
					*bad_name = name;
					err = -EINVAL;
					goto cleanup;
				}
				free(name);
				piece = value;
				n = strlen(value);
				skip = nl + 3;
			}
			/* anything else (${X:-y}, ${#x}) is bash syntax and stays as written */
		}
		if (len + n + 1 > cap) {
			char *grown;
			cap = (len + n + 1) * 2;
			grown = realloc(buf, cap);
			if (!grown) {
				err = -ENOMEM;
				goto cleanup;
			}
			buf = grown;
		}
		memcpy(buf + len, piece, n);
		len += n;
		p += skip;
	}
	buf[len] = '\0';
	*out = buf;
	buf = NULL;
cleanup:
	free(buf);
	return err;
}
