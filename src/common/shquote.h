/* SPDX-License-Identifier: MIT */
/* Shell quoting: a command line a user can paste back into sh or bash. */
#ifndef MEMTRACK_SHQUOTE_H
#define MEMTRACK_SHQUOTE_H

/* The words of argv (NULL-terminated), each quoted where the shell would split or expand it,
 * joined by spaces: `a 'b c' 'it'\''s'`. A malloc'd string, NULL when out of memory. */
char *shquote__argv(char *const argv[]);

#endif
