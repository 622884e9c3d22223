// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "common/sudo.h"

/* A whole decimal id: strtoul alone would take "", "12abc" or "-1" */
static bool sudo__id(const char *s, unsigned long *out)
{
	char *end;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoul(s, &end, 10);
	return !errno && !*end && *out < (unsigned long)(uid_t)-1;
}

bool sudo__invoker(uid_t *uid, gid_t *gid)
{
	unsigned long u, g;

	if (geteuid() != 0 || !sudo__id(getenv("SUDO_UID"), &u) ||
	    !sudo__id(getenv("SUDO_GID"), &g) || u == 0)
		return false;
	*uid = (uid_t)u;
	*gid = (gid_t)g;
	return true;
}
