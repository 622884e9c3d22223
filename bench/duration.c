// SPDX-License-Identifier: MIT
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "duration.h"

struct duration_unit {
	const char *name;
	double ns;
};

/* Longest names first so "ms" is not read as "m" followed by garbage. */
static const struct duration_unit bench_duration__units[] = {
    {"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9},
};

static const struct duration_unit *bench_duration__unit(const char *s, size_t *len)
{
	const struct duration_unit *best = NULL;
	size_t best_len = 0;

	for (size_t i = 0; i < sizeof(bench_duration__units) / sizeof(bench_duration__units[0]);
	     i++) {
		size_t n = strlen(bench_duration__units[i].name);
		if (n > best_len && strncmp(s, bench_duration__units[i].name, n) == 0) {
			best = &bench_duration__units[i];
			best_len = n;
		}
	}
	*len = best_len;
	return best;
}

int bench_duration__parse(const char *s, int64_t *ns)
{
	double total = 0;
	const char *p = s;

	if (!s || !*s)
		return -EINVAL;
	if (strcmp(s, "0") == 0) {
		*ns = 0;
		return 0;
	}
	while (*p) {
		const struct duration_unit *unit;
		double value = 0, scale = 1;
		bool digits = false;
		size_t len;

		/* Digits by hand: strtod would also take "inf", "1e3", hex and leading spaces. */
		for (; *p >= '0' && *p <= '9'; p++, digits = true)
			value = value * 10 + (*p - '0');
		if (*p == '.') {
			for (p++; *p >= '0' && *p <= '9'; p++, digits = true) {
				scale /= 10;
				value += (*p - '0') * scale;
			}
		}
		if (!digits)
			return -EINVAL;
		unit = bench_duration__unit(p, &len);
		if (!unit)
			return -EINVAL;
		p += len;
		total += value * unit->ns;
	}
	if (total >= 9.2e18)
		return -ERANGE;
	*ns = (int64_t)llround(total);
	return 0;
}

const char *bench_duration__format(double seconds, char *buf, size_t size)
{
	static const struct {
		const char *name;
		double scale;
	} units[] = {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
	size_t i = 0;

	if (isnan(seconds)) {
		snprintf(buf, size, "-");
		return buf;
	}
	while (i + 1 < sizeof(units) / sizeof(units[0]) && fabs(seconds) < units[i].scale)
		i++;
	double v = seconds / units[i].scale;
	int decimals = fabs(v) >= 100 ? 0 : fabs(v) >= 10 ? 1 : 2;
	snprintf(buf, size, "%.*f %s", decimals, v, units[i].name);
	return buf;
}
