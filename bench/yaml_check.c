// SPDX-License-Identifier: MIT
/*
 * Why before the load: libyaml's parser does work per token proportional to the nesting depth
 * (a 20k-level config took 3 s to load, 100k over 20 s), and the load silently ignores every
 * document after the first. Events are streamed and the walk stops at the first problem, so
 * its cost stays bounded by max_depth.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <yaml.h>
#include "yaml_check.h"

int yaml_check__shape(const char *text, size_t len, int max_depth, int *line, char *msg,
		      size_t cap)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	int depth = 0, docs = 0, err = 0;
	bool done = false;

	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	while (!done && !err) {
		if (!yaml_parser_parse(&parser, &ev))
			break; /* the load reports the syntax error, with its line */
		*line = (int)ev.start_mark.line + 1;
		switch (ev.type) {
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1) {
				snprintf(msg, cap, "a second YAML document: a config is one document "
					 "(remove this '---' and what follows, or merge them)");
				err = -EINVAL;
			}
			break;
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			if (++depth > max_depth) {
				snprintf(msg, cap, "nested deeper than %d levels: a config needs a few",
					 max_depth);
				err = -EINVAL;
			}
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	return err;
}
