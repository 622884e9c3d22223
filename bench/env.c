// SPDX-License-Identifier: MIT
/* What machine the numbers come from: kernel, CPU, frequency governor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "runner.h"

/* First line of a small file without its newline; NULL when absent (no cpufreq in most VMs). */
static char *bench_env__read_line(const char *path)
{
	char buf[256];
	FILE *f = fopen(path, "r");

	if (!f)
		return NULL;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return strdup(buf);
}

static char *bench_env__cpu_model(void)
{
	char line[512], *model = NULL;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (!f)
		return NULL;
	while (!model && fgets(line, sizeof(line), f)) {
		/* x86 says "model name", arm64 often only "CPU part"; keep the first we know */
		if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Model", 5) == 0) {
			char *v = strchr(line, ':');
			if (v) {
				v += 1 + strspn(v + 1, " \t");
				v[strcspn(v, "\n")] = '\0';
				model = strdup(v);
			}
		}
	}
	fclose(f);
	return model;
}

void bench_env__detect(struct bench_env *env)
{
	struct utsname u;
	struct rusage ru;

	memset(env, 0, sizeof(*env));
	if (uname(&u) == 0) {
		env->kernel = strdup(u.release);
		env->machine = strdup(u.machine);
	}
	env->cpu = bench_env__cpu_model();
	env->governor =
	    bench_env__read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
	env->cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		env->self_max_rss = (uint64_t)ru.ru_maxrss * 1024;
}

void bench_env__free(struct bench_env *env)
{
	if (!env)
		return;
	free(env->kernel);
	free(env->machine);
	free(env->cpu);
	free(env->governor);
	memset(env, 0, sizeof(*env));
}
