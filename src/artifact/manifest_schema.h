/* SPDX-License-Identifier: MIT */
/* The manifest's JSON schema, private to src/artifact (manifest.c writes and reads files). */
#ifndef MEMTRACK_MANIFEST_SCHEMA_H
#define MEMTRACK_MANIFEST_SCHEMA_H

#include <jansson.h>
#include "artifact/manifest.h"

/* The document for m, keys in the schema's order; NULL when out of memory. */
json_t *manifest__build(const struct manifest *m);
/* Fills a zeroed m from root: missing keys read as zero/NULL, strings and arrays allocated.
 * -EBADMSG for a key of the wrong type, -EPROTO for a newer format version, -ENOMEM. */
int manifest__parse(struct manifest *m, json_t *root);

#endif
