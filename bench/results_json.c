// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/log.h"
#include "results_json.h"

/* jansson refuses NaN; hyperfine writes null for an undefined stddev too. */
static json_t *bench_json__real(double v)
{
	return isfinite(v) ? json_real(v) : json_null();
}

static json_t *bench_json__str(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *bench_json__doubles(const double *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_real(v[i]));
	return a;
}

/* {"values": [...], "median", "min", "max", "cv"}: integers stay integers. */
static json_t *bench_json__metric(const double *v, size_t n, const struct bench_stats *s)
{
	json_t *values = json_array();

	for (size_t i = 0; values && i < n; i++)
		json_array_append_new(values, json_integer((json_int_t)v[i]));
	return json_pack("{s:o, s:o, s:o, s:o, s:o}", "values", values, "median",
			 bench_json__real(s->median), "min", bench_json__real(s->min), "max",
			 bench_json__real(s->max), "cv", bench_json__real(s->cv));
}

static json_t *bench_json__memory(const struct bench_result *r)
{
	json_t *o = json_object();

	for (int i = 0; o && i < BENCH_MEM_NR; i++)
		json_object_set_new(o, bench_metrics[i].key,
				    bench_json__metric(r->mem[i], r->mem_rounds, &r->mem_stats[i]));
	return o;
}

static json_t *bench_json__result(const struct bench_result *r)
{
	const struct bench_stats *s = &r->stats;
	json_t *o, *codes = json_array();

	for (size_t i = 0; codes && i < r->nr_rounds; i++)
		json_array_append_new(codes, json_integer(r->exit_codes[i]));
	o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:I,"
		      " s:o, s:o, s:o, s:I, s:o, s:I}",
		      "command", r->command, "name", r->name, "id", r->id, "mode",
		      r->mode == BENCH_MODE_MEMORY ? "memory" : "walltime", "mean",
		      bench_json__real(s->mean), "stddev", bench_json__real(s->stddev), "median",
		      bench_json__real(s->median), "user", bench_json__real(r->user_mean), "system",
		      bench_json__real(r->sys_mean), "min", bench_json__real(s->min), "max",
		      bench_json__real(s->max), "times",
		      bench_json__doubles(r->times, r->nr_rounds), "exit_codes", codes, "rounds",
		      (json_int_t)r->nr_rounds, "warmup_rounds", (json_int_t)r->warmup_rounds, "q1",
		      bench_json__real(s->q1), "q3", bench_json__real(s->q3), "iqr",
		      bench_json__real(s->iqr), "outliers", (json_int_t)s->outliers, "cv",
		      bench_json__real(s->cv), "max_rss", (json_int_t)r->max_rss);
	if (o && r->conclude)
		json_object_set_new(o, "conclude", json_string(r->conclude));
	if (o && r->no_aslr)
		json_object_set_new(o, "aslr", json_false());
	if (o && r->window)
		json_object_set_new(o, "window", json_true());
	if (o && r->mode == BENCH_MODE_MEMORY && r->mem_rounds) {
		json_object_set_new(o, "memory", bench_json__memory(r));
		/* format 1 had one round's figures here: now the medians, for old readers */
		for (int i = BENCH_MEM_PEAK_HEAP; i <= BENCH_MEM_PEAK_RSS; i++)
			json_object_set_new(o, bench_metrics[i].key,
					    json_integer((json_int_t)r->mem_stats[i].median));
		json_object_set_new(
		    o, "allocs", json_integer((json_int_t)r->mem_stats[BENCH_MEM_ALLOCS].median));
	}
	return o;
}

json_t *bench_json__build(const struct bench_results *res)
{
	const struct bench_env *e = &res->env;
	json_t *root, *results = json_array(), *failures = json_array();
	char date[32] = "";
	time_t now = time(NULL);
	struct tm tm;

	if (gmtime_r(&now, &tm))
		strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	for (size_t i = 0; results && failures && i < res->nr; i++) {
		const struct bench_result *r = &res->v[i];
		if (r->failed) {
			json_t *f = json_pack("{s:s, s:s, s:s, s:i}", "name", r->name, "id", r->id,
					      "command", r->command, "exit_code", r->exit_code);
			/* a failure may be the conclude's: the entry names what ran */
			if (f && r->conclude)
				json_object_set_new(f, "conclude", json_string(r->conclude));
			json_array_append_new(failures, f);
		} else {
			json_array_append_new(results, bench_json__result(r));
		}
	}
	root = json_pack("{s:i, s:s, s:s, s:o, s:o, s:{s:o, s:o, s:o, s:I, s:o, s:I, s:I, s:s}}",
			 "format", RESULTS_JSON_FORMAT, "mode",
			 res->mode == BENCH_MODE_MEMORY ? "memory" : "walltime", "config",
			 res->config ? res->config : "", "results", results, "failures", failures,
			 "environment", "kernel", bench_json__str(e->kernel), "machine",
			 bench_json__str(e->machine), "cpu", bench_json__str(e->cpu), "cpus",
			 (json_int_t)e->cpus, "governor", bench_json__str(e->governor),
			 "bench_max_rss", (json_int_t)e->self_max_rss, "command_env_bytes",
			 (json_int_t)e->command_env_bytes, "date", date);
	return root;
}

int bench_json__write(const struct bench_results *res, const char *path)
{
	json_t *root = bench_json__build(res);
	char *tmp = NULL;
	int err = 0;

	if (!root)
		return -ENOMEM;
	if (asprintf(&tmp, "%s.tmp", path) < 0) {
		tmp = NULL;
		err = -ENOMEM;
		goto cleanup;
	}
	errno = 0;
	if (json_dump_file(root, tmp, JSON_INDENT(2) | JSON_REAL_PRECISION(12)) ||
	    rename(tmp, path)) {
		err = errno ? -errno : -EIO;
		log__error("cannot write '%s': %s", path, strerror(-err));
		unlink(tmp);
	}
cleanup:
	free(tmp);
	json_decref(root);
	return err;
}

static double bench_json__num(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/*
 * Memory figures: the "memory" object (values per round; a metric without values counts as
 * one round at its median), else format 1's single figures at the top level. Every metric gets
 * mem_rounds values so the arrays line up; a metric the file lacks reads 0 in each.
 */
static int bench_json__read_memory(json_t *o, struct bench_result *r)
{
	json_t *mem = json_object_get(o, "memory");
	size_t n = 0;

	for (int i = 0; json_is_object(mem) && i < BENCH_MEM_NR; i++) {
		json_t *values =
		    json_object_get(json_object_get(mem, bench_metrics[i].key), "values");
		if (json_is_array(values) && json_array_size(values) > n)
			n = json_array_size(values);
	}
	if (n == 0)
		n = 1;
	for (int i = 0; i < BENCH_MEM_NR; i++) {
		json_t *m = json_object_get(mem, bench_metrics[i].key);
		json_t *values = json_object_get(m, "values");
		double fill = json_is_object(m) ? bench_json__num(m, "median")
						: bench_json__num(o, bench_metrics[i].key);

		r->mem[i] = calloc(n, sizeof(double));
		if (!r->mem[i])
			return -ENOMEM;
		for (size_t j = 0; j < n; j++) {
			json_t *v = json_array_get(values, j);
			r->mem[i][j] = json_is_number(v) ? json_number_value(v) : fill;
			if (isnan(r->mem[i][j]))
				r->mem[i][j] = 0;
		}
	}
	r->mem_rounds = n;
	return bench_memory__stats(r);
}

static int bench_json__read_one(json_t *o, struct bench_result *r)
{
	const char *name = json_string_value(json_object_get(o, "name"));
	const char *command = json_string_value(json_object_get(o, "command"));
	const char *conclude = json_string_value(json_object_get(o, "conclude"));
	const char *id = json_string_value(json_object_get(o, "id"));
	const char *mode = json_string_value(json_object_get(o, "mode"));
	json_t *times = json_object_get(o, "times"), *v;
	size_t i;

	if (!name)
		name = command; /* plain hyperfine output: the command is the identity */
	if (!name)
		return -EPROTO;
	r->name = strdup(name);
	r->id = strdup(id ? id : name);
	r->command = strdup(command ? command : name);
	r->conclude = conclude ? strdup(conclude) : NULL;
	if (!r->name || !r->id || !r->command || (conclude && !r->conclude))
		return -ENOMEM;
	r->mode = mode && strcmp(mode, "memory") == 0 ? BENCH_MODE_MEMORY : BENCH_MODE_WALLTIME;
	if (json_is_array(times) && json_array_size(times) > 0) {
		r->times = calloc(json_array_size(times), sizeof(double));
		if (!r->times)
			return -ENOMEM;
		json_array_foreach(times, i, v)
		{
			if (json_is_number(v))
				r->times[r->nr_rounds++] = json_number_value(v);
		}
	}
	if (r->nr_rounds > 0) {
		int err = bench_stats__compute(r->times, r->nr_rounds, &r->stats);
		if (err)
			return err;
	} else {
		r->stats.mean = bench_json__num(o, "mean");
		r->stats.median = bench_json__num(o, "median");
		if (isnan(r->stats.median))
			r->stats.median = r->stats.mean;
		r->stats.stddev = bench_json__num(o, "stddev");
	}
	if (r->mode == BENCH_MODE_MEMORY) {
		int err = bench_json__read_memory(o, r);
		if (err)
			return err;
	}
	r->max_rss = (uint64_t)json_integer_value(json_object_get(o, "max_rss"));
	r->no_aslr = json_is_false(json_object_get(o, "aslr"));
	r->window = json_is_true(json_object_get(o, "window"));
	return 0;
}

int bench_json__read(const char *path, struct bench_results *res)
{
	json_error_t jerr;
	json_t *root, *results, *o;
	const char *mode;
	size_t i;
	int err = 0;

	memset(res, 0, sizeof(*res));
	root = json_load_file(path, 0, &jerr);
	if (!root) {
		log__error("%s:%d: %s", path, jerr.line, jerr.text);
		return -EPROTO;
	}
	results = json_object_get(root, "results");
	if (!json_is_array(results)) {
		log__error("%s: no 'results' list", path);
		err = -EPROTO;
		goto cleanup;
	}
	mode = json_string_value(json_object_get(root, "mode"));
	res->mode = mode && strcmp(mode, "memory") == 0 ? BENCH_MODE_MEMORY : BENCH_MODE_WALLTIME;
	res->config = strdup(path);
	res->v = calloc(json_array_size(results) + 1, sizeof(*res->v));
	if (!res->v || !res->config) {
		err = -ENOMEM;
		goto cleanup;
	}
	json_array_foreach(results, i, o)
	{
		err = bench_json__read_one(o, &res->v[res->nr++]);
		if (err) {
			log__error("%s: results[%zu]: %s", path, i,
				   err == -EPROTO ? "neither 'name' nor 'command'"
						  : strerror(-err));
			goto cleanup;
		}
	}
cleanup:
	json_decref(root);
	return err;
}
