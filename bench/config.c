// SPDX-License-Identifier: MIT
/* Loading codspeed.yml-style configs with libyaml's document API (nodes keep their line). */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include "common/log.h"
#include "config.h"
#include "yaml_check.h"
#include "duration.h"

struct config_ctx {
	struct bench_config *cfg;
	yaml_document_t *doc;
	int errors;
	int key_line; /* of the key being handled: unknown keys are reported there */
};

static const char *const bench_config__top_keys[] = {"options", "benchmarks", NULL};
static const char *const bench_config__bench_keys[] = {
    "name", "id", "exec", "conclude", "options", NULL,
};
static const char *const bench_config__option_keys[] = {
    "warmup-time", "max-time",		"min-time", "min-rounds",
    "max-rounds",  "working-directory", "aslr",	    NULL,
};

__attribute__((format(printf, 3, 4))) static void
bench_config__error(struct config_ctx *ctx, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log__error("%s:%d: %s", ctx->cfg->path, line, msg);
	ctx->errors++;
}

static int bench_config__line(const yaml_node_t *node)
{
	return (int)node->start_mark.line + 1; /* libyaml counts from 0 */
}

static const char *bench_config__scalar(const yaml_node_t *node)
{
	return node && node->type == YAML_SCALAR_NODE ? (const char *)node->data.scalar.value
						      : NULL;
}

/* Edit distance between short strings; keys are far below the 64-byte cap. */
static size_t bench_config__distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[65];

	if (la > 64 || lb > 64)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

static void bench_config__unknown_key(struct config_ctx *ctx, int line, const char *key,
				      const char *const *known)
{
	const char *best = NULL;
	size_t best_d = 3; /* suggest within two edits: max_time, maxtime, warmup-tme */

	for (; *known; known++) {
		size_t d = bench_config__distance(key, *known);
		if (d < best_d) {
			best_d = d;
			best = *known;
		}
	}
	if (strcmp(key, "entrypoint") == 0)
		bench_config__error(
		    ctx, line, "'entrypoint' is not supported; use 'exec' with a shell command");
	else if (best)
		bench_config__error(ctx, line, "unknown key '%s' (did you mean '%s'?)", key, best);
	else
		bench_config__error(ctx, line, "unknown key '%s'", key);
}

/* A non-empty scalar, or an error naming the key. */
static const char *bench_config__string(struct config_ctx *ctx, const char *key, yaml_node_t *value)
{
	const char *s = bench_config__scalar(value);

	if (!s) {
		bench_config__error(ctx, bench_config__line(value), "'%s' must be a string", key);
		return NULL;
	}
	if (!*s || strcmp(s, "~") == 0 || strcmp(s, "null") == 0) {
		bench_config__error(ctx, bench_config__line(value), "'%s' must not be empty", key);
		return NULL;
	}
	return s;
}

/* A copy of the scalar with ${VAR} expanded; NULL (logged) on error. */
static char *bench_config__expanded(struct config_ctx *ctx, const char *key, yaml_node_t *value)
{
	const char *s = bench_config__string(ctx, key, value);
	char *out = NULL, *bad = NULL;
	int err;

	if (!s)
		return NULL;
	err = bench_config__expand_env(s, &out, &bad);
	if (err == -EINVAL)
		bench_config__error(ctx, bench_config__line(value),
				    "'%s': environment variable '%s' is not set", key, bad);
	else if (err)
		bench_config__error(ctx, bench_config__line(value), "'%s': %s", key,
				    strerror(-err));
	free(bad);
	return out;
}

static void bench_config__duration(struct config_ctx *ctx, const char *key, yaml_node_t *value,
				   int64_t *ns)
{
	const char *s = bench_config__string(ctx, key, value);
	int err;

	if (!s)
		return;
	err = bench_duration__parse(s, ns);
	if (err == -ERANGE)
		bench_config__error(ctx, bench_config__line(value),
				    "'%s': duration '%s' is too long", key, s);
	else if (err)
		bench_config__error(
		    ctx, bench_config__line(value),
		    "'%s': bad duration '%s' (expected a number and a unit: 500ms, 5s, 1m)", key,
		    s);
}

static void bench_config__rounds(struct config_ctx *ctx, const char *key, yaml_node_t *value,
				 int64_t *rounds)
{
	const char *s = bench_config__string(ctx, key, value);
	char *end;
	long long v;

	if (!s)
		return;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || end == s || v < 1 || v > 1000000000LL || s[0] == '+' || s[0] == ' ')
		bench_config__error(ctx, bench_config__line(value),
				    "'%s': expected a whole number >= 1, got '%s'", key, s);
	else
		*rounds = v;
}

/* A YAML 1.1 boolean (true/false, yes/no, on/off). */
static void bench_config__bool(struct config_ctx *ctx, const char *key, yaml_node_t *value,
			       bool *out)
{
	static const char *const yes[] = {"true", "True", "yes", "on", NULL};
	static const char *const no[] = {"false", "False", "no", "off", NULL};
	const char *s = bench_config__string(ctx, key, value);

	if (!s)
		return;
	for (int i = 0; yes[i]; i++) {
		if (strcmp(s, yes[i]) == 0) {
			*out = true;
			return;
		}
		if (strcmp(s, no[i]) == 0) {
			*out = false;
			return;
		}
	}
	bench_config__error(ctx, bench_config__line(value),
			    "'%s': expected true or false, got '%s'", key, s);
}

/* Walks a mapping, rejecting non-string and duplicate keys; calls fn for each pair. */
typedef void (*bench_config__pair_fn)(struct config_ctx *ctx, const char *key, yaml_node_t *value,
				      void *arg);

static void bench_config__each_pair(struct config_ctx *ctx, yaml_node_t *map, const char *what,
				    bench_config__pair_fn fn, void *arg)
{
	if (map->type != YAML_MAPPING_NODE) {
		bench_config__error(ctx, bench_config__line(map), "%s must be a mapping", what);
		return;
	}
	for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		yaml_node_t *k = yaml_document_get_node(ctx->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(ctx->doc, p->value);
		const char *key = bench_config__scalar(k);

		if (!key) {
			bench_config__error(ctx, bench_config__line(k),
					    "keys in %s must be strings", what);
			continue;
		}
		for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
			const char *prev =
			    bench_config__scalar(yaml_document_get_node(ctx->doc, q->key));
			if (prev && strcmp(prev, key) == 0) {
				bench_config__error(ctx, bench_config__line(k),
						    "duplicate key '%s'", key);
				key = NULL;
				break;
			}
		}
		ctx->key_line = bench_config__line(k);
		if (key)
			fn(ctx, key, v, arg);
	}
}

static void bench_config__option_pair(struct config_ctx *ctx, const char *key, yaml_node_t *value,
				      void *arg)
{
	struct bench_options *o = arg;

	if (strcmp(key, "warmup-time") == 0) {
		bench_config__duration(ctx, key, value, &o->warmup_ns);
		o->set |= BENCH_OPT_WARMUP;
	} else if (strcmp(key, "max-time") == 0) {
		bench_config__duration(ctx, key, value, &o->max_time_ns);
		o->set |= BENCH_OPT_MAX_TIME;
	} else if (strcmp(key, "min-time") == 0) {
		bench_config__duration(ctx, key, value, &o->min_time_ns);
		o->set |= BENCH_OPT_MIN_TIME;
	} else if (strcmp(key, "min-rounds") == 0) {
		bench_config__rounds(ctx, key, value, &o->min_rounds);
		o->set |= BENCH_OPT_MIN_ROUNDS;
	} else if (strcmp(key, "max-rounds") == 0) {
		bench_config__rounds(ctx, key, value, &o->max_rounds);
		o->set |= BENCH_OPT_MAX_ROUNDS;
	} else if (strcmp(key, "working-directory") == 0) {
		free(o->working_directory);
		o->working_directory = bench_config__expanded(ctx, key, value);
		o->set |= BENCH_OPT_WORKDIR;
	} else if (strcmp(key, "aslr") == 0) {
		bool aslr = true;
		bench_config__bool(ctx, key, value, &aslr);
		o->no_aslr = !aslr;
		o->set |= BENCH_OPT_ASLR;
	} else {
		bench_config__unknown_key(ctx, ctx->key_line, key, bench_config__option_keys);
	}
}

static void bench_config__options(struct config_ctx *ctx, yaml_node_t *node,
				  struct bench_options *o)
{
	o->line = bench_config__line(node);
	bench_config__each_pair(ctx, node, "'options'", bench_config__option_pair, o);
	/* Contradictions inside one mapping are mistakes; across levels the inner one wins. */
	if ((o->set & BENCH_OPT_MIN_TIME) && (o->set & BENCH_OPT_MAX_TIME) &&
	    o->min_time_ns > o->max_time_ns)
		bench_config__error(ctx, o->line, "'min-time' is longer than 'max-time'");
	if ((o->set & BENCH_OPT_MIN_ROUNDS) && (o->set & BENCH_OPT_MAX_ROUNDS) &&
	    o->min_rounds > o->max_rounds)
		bench_config__error(ctx, o->line, "'min-rounds' is larger than 'max-rounds'");
}

static void bench_config__bench_pair(struct config_ctx *ctx, const char *key, yaml_node_t *value,
				     void *arg)
{
	struct bench_entry *b = arg;
	const char *s;

	if (strcmp(key, "name") == 0 || strcmp(key, "id") == 0) {
		char **dst = key[0] == 'n' ? &b->name : &b->id;
		s = bench_config__string(ctx, key, value);
		if (s && !(*dst = strdup(s)))
			bench_config__error(ctx, bench_config__line(value), "out of memory");
	} else if (strcmp(key, "exec") == 0) {
		b->exec = bench_config__expanded(ctx, key, value);
	} else if (strcmp(key, "conclude") == 0) {
		b->conclude = bench_config__expanded(ctx, key, value);
	} else if (strcmp(key, "options") == 0) {
		bench_config__options(ctx, value, &b->opts);
	} else {
		bench_config__unknown_key(ctx, ctx->key_line, key, bench_config__bench_keys);
	}
}

static void bench_config__benchmarks(struct config_ctx *ctx, yaml_node_t *seq)
{
	struct bench_config *cfg = ctx->cfg;
	size_t n;

	if (seq->type != YAML_SEQUENCE_NODE) {
		bench_config__error(ctx, bench_config__line(seq), "'benchmarks' must be a list");
		return;
	}
	n = seq->data.sequence.items.top - seq->data.sequence.items.start;
	if (n == 0) {
		bench_config__error(ctx, bench_config__line(seq), "'benchmarks' is empty");
		return;
	}
	cfg->benchmarks = calloc(n, sizeof(*cfg->benchmarks));
	if (!cfg->benchmarks) {
		bench_config__error(ctx, bench_config__line(seq), "out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *item =
		    yaml_document_get_node(ctx->doc, seq->data.sequence.items.start[i]);
		struct bench_entry *b = &cfg->benchmarks[cfg->nr_benchmarks++];

		b->line = bench_config__line(item);
		bench_config__each_pair(ctx, item, "a benchmark", bench_config__bench_pair, b);
		if (item->type != YAML_MAPPING_NODE)
			continue;
		if (!b->name)
			bench_config__error(ctx, b->line, "benchmark has no 'name'");
		if (!b->exec)
			bench_config__error(ctx, b->line, "benchmark '%s' has no 'exec'",
					    b->name ? b->name : "?");
		if (b->name && !b->id && !(b->id = strdup(b->name)))
			bench_config__error(ctx, b->line, "out of memory");
		/* compare matches by name and --bench selects by id: both must be unique */
		for (size_t j = 0; j + 1 < cfg->nr_benchmarks; j++) {
			struct bench_entry *o = &cfg->benchmarks[j];
			if (b->name && o->name && strcmp(b->name, o->name) == 0)
				bench_config__error(
				    ctx, b->line,
				    "duplicate benchmark name '%s' (first at line %d)", b->name,
				    o->line);
			else if (b->id && o->id && strcmp(b->id, o->id) == 0)
				bench_config__error(
				    ctx, b->line, "duplicate benchmark id '%s' (first at line %d)",
				    b->id, o->line);
		}
	}
}

static void bench_config__top_pair(struct config_ctx *ctx, const char *key, yaml_node_t *value,
				   void *arg)
{
	(void)arg;
	if (strcmp(key, "options") == 0)
		bench_config__options(ctx, value, &ctx->cfg->opts);
	else if (strcmp(key, "benchmarks") == 0)
		bench_config__benchmarks(ctx, value);
	else
		bench_config__unknown_key(ctx, ctx->key_line, key, bench_config__top_keys);
}

int bench_config__parse(struct bench_config *cfg, const char *path, const char *text, size_t len)
{
	struct config_ctx ctx = {.cfg = cfg};
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root;
	bool have_doc = false;
	int err = 0;

	memset(cfg, 0, sizeof(*cfg));
	cfg->path = strdup(path);
	if (!cfg->path)
		return -ENOMEM;
	{
		char msg[160];
		int line = 0;

		err = yaml_check__shape(text, len, BENCH_CONFIG_MAX_DEPTH, &line, msg, sizeof(msg));
		if (err == -EINVAL)
			bench_config__error(&ctx, line, "%s", msg);
		if (err)
			return err;
	}
	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		bench_config__error(&ctx, (int)parser.problem_mark.line + 1, "YAML: %s",
				    parser.problem ? parser.problem : "parse error");
		err = -EINVAL;
		goto cleanup;
	}
	have_doc = true;
	ctx.doc = &doc;
	root = yaml_document_get_root_node(&doc);
	if (!root) {
		bench_config__error(&ctx, 1, "empty file");
	} else {
		bench_config__each_pair(&ctx, root, "the top level", bench_config__top_pair, NULL);
		if (root->type == YAML_MAPPING_NODE && !cfg->benchmarks && !ctx.errors)
			bench_config__error(&ctx, bench_config__line(root), "no 'benchmarks' list");
	}
	if (ctx.errors)
		err = -EINVAL;
cleanup:
	if (have_doc)
		yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return err;
}

int bench_config__load(struct bench_config *cfg, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = NULL;
	int err = 0;

	memset(cfg, 0, sizeof(*cfg));
	f = fopen(path, "r");
	if (!f) {
		err = -errno;
		log__error("cannot open '%s': %s", path, strerror(errno));
		goto cleanup;
	}
	/* Slurp it: configs are small and libyaml then reports exact lines. */
	for (;;) {
		char *grown = realloc(text, len + 4096 + 1);
		size_t n;
		if (!grown) {
			err = -ENOMEM;
			goto cleanup;
		}
		text = grown;
		n = fread(text + len, 1, 4096, f);
		len += n;
		if (n < 4096)
			break;
	}
	if (ferror(f)) {
		err = -EIO;
		log__error("cannot read '%s': %s", path, strerror(EIO));
		goto cleanup;
	}
	text[len] = '\0';
	err = bench_config__parse(cfg, path, text, len);
cleanup:
	if (f)
		fclose(f);
	free(text);
	return err;
}

static void bench_config__free_entry(struct bench_entry *b)
{
	free(b->name);
	free(b->id);
	free(b->exec);
	free(b->conclude);
	free(b->opts.working_directory);
}

void bench_config__free(struct bench_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->nr_benchmarks; i++)
		bench_config__free_entry(&cfg->benchmarks[i]);
	free(cfg->benchmarks);
	free(cfg->opts.working_directory);
	free(cfg->path);
	memset(cfg, 0, sizeof(*cfg));
}

/* Copies the fields `from` sets into `to`, recording the level each came from. */
static void bench_config__apply(struct bench_options *to, int prio[4],
				const struct bench_options *from, int level)
{
	if (!from)
		return;
	if (from->set & BENCH_OPT_WARMUP)
		to->warmup_ns = from->warmup_ns;
	if (from->set & BENCH_OPT_MAX_TIME) {
		to->max_time_ns = from->max_time_ns;
		prio[0] = level;
	}
	if (from->set & BENCH_OPT_MIN_TIME) {
		to->min_time_ns = from->min_time_ns;
		prio[1] = level;
	}
	if (from->set & BENCH_OPT_MIN_ROUNDS) {
		to->min_rounds = from->min_rounds;
		prio[2] = level;
	}
	if (from->set & BENCH_OPT_MAX_ROUNDS) {
		to->max_rounds = from->max_rounds;
		prio[3] = level;
	}
	if (from->set & BENCH_OPT_WORKDIR)
		to->working_directory = from->working_directory;
	if (from->set & BENCH_OPT_ASLR)
		to->no_aslr = from->no_aslr;
	to->set |= from->set;
}

int bench_config__resolve(const struct bench_config *cfg, const struct bench_entry *b,
			  const struct bench_options *cli, struct bench_options *out)
{
	/* prio: 0 default, 1 top level, 2 benchmark, 3 command line; for max-time, min-time,
	 * min-rounds, max-rounds. Parsing already rejected contradictions within one level. */
	int prio[4] = {0};

	memset(out, 0, sizeof(*out));
	out->warmup_ns = BENCH_DEFAULT_WARMUP_NS;
	out->max_time_ns = BENCH_DEFAULT_MAX_TIME_NS;
	out->min_rounds = BENCH_DEFAULT_MIN_ROUNDS;
	bench_config__apply(out, prio, &cfg->opts, 1);
	bench_config__apply(out, prio, &b->opts, 2);
	bench_config__apply(out, prio, cli, 3);
	out->line = b->line;
	if (out->min_time_ns > out->max_time_ns) {
		if (prio[0] >= prio[1])
			out->min_time_ns = out->max_time_ns;
		else
			out->max_time_ns = out->min_time_ns;
	}
	if (out->max_rounds && out->min_rounds > out->max_rounds) {
		if (prio[3] >= prio[2])
			out->min_rounds = out->max_rounds;
		else
			out->max_rounds = out->min_rounds;
	}
	return 0;
}
