// SPDX-License-Identifier: MIT
/* Reading our pprof files back with an independent decoder (tests/pprof/decode.py). */
#include <stdio.h>
#include <stdlib.h>
#include "mt_harness.h"
#include "mt_pprof.h"

bool mt_pprof_decoder(void)
{
	return !system("/usr/bin/python3 -c 'import google.protobuf' 2>/dev/null") &&
	       !system("command -v protoc >/dev/null");
}

char *mt_pprof_decode(const char *file)
{
	char cmd[8192], buf[4096], *out = NULL;
	size_t n = 0, len;
	FILE *p, *o;
	int rc;

	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/pprof/decode.py '%s'", mt_repo_root(),
		 file);
	p = popen(cmd, "r");
	if (!p)
		return NULL;
	o = open_memstream(&out, &n);
	while (o && (len = fread(buf, 1, sizeof(buf), p)) > 0)
		fwrite(buf, 1, len, o);
	if (o)
		fclose(o);
	rc = pclose(p);
	if (rc) {
		fprintf(stderr, "decode.py failed (%d): %s\n", rc, out ? out : "");
		free(out);
		return NULL;
	}
	return out;
}
