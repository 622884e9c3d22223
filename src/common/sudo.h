/* SPDX-License-Identifier: MIT */
/* Who ran `sudo memtrack`: the command runs as that user, and the outputs belong to them. */
#ifndef MEMTRACK_SUDO_H
#define MEMTRACK_SUDO_H

#include <stdbool.h>
#include <sys/types.h>

/* True when we run as root (effective uid 0) and SUDO_UID/SUDO_GID hold valid ids (decimal,
 * not root's, below (uid_t)-1); *uid and *gid are then set. */
bool sudo__invoker(uid_t *uid, gid_t *gid);

#endif
