// SPDX-License-Identifier: MIT
/*
 * memtrack-floor -- PROG [ARGS]: the floor reference of issue 4. It probes exactly what memtrack
 * would for PROG (the same libraries, found by memtrack's dependency resolution, the same
 * allocator sites from its alloc_table, the same uprobe_multi links) but its programs only
 * count (floor.bpf.c). `memtrack track` minus this, per call, is what memtrack's own work costs.
 *
 * Simplifications, on purpose: only PROG's own process is counted (not its children), and
 * libraries are resolved once before the exec (no exec stop, no dlopen stop).
 * Prints the hit counts on stderr; exits with PROG's status (128+N for signal N).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "floor.skel.h"
#include "common/log.h"
#include "track/attach.h"
#include "track/libs.h"
#include "track/spawn.h"

#define FLOOR_EXIT_FAILED 125

/* argv[0] the way execvp will find it. Returns 0 or -ENOENT. */
static int floor__which(const char *prog, char *out, size_t cap)
{
	const char *path = getenv("PATH");
	char dirs[PATH_MAX], *save = NULL;

	if (strchr(prog, '/')) {
		snprintf(out, cap, "%s", prog);
		return 0;
	}
	snprintf(dirs, sizeof(dirs), "%s", path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		if ((size_t)snprintf(out, cap, "%s/%s", *d ? d : ".", prog) < cap &&
		    !access(out, X_OK))
			return 0;
	}
	return -ENOENT;
}

static uint64_t floor__sum(int map_fd, uint32_t slot)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t total = 0, *vals = calloc(ncpu > 0 ? ncpu : 1, sizeof(*vals));

	if (vals && !bpf_map_lookup_elem(map_fd, &slot, vals))
		for (int c = 0; c < ncpu; c++)
			total += vals[c];
	free(vals);
	return total;
}

/* Loads the counting programs for the held child pid, attaches memtrack's sites for exe. */
static int floor__arm(struct floor_bpf **skel, struct attach_set **set, struct libs **libs,
		      pid_t pid, const char *exe, bool multi)
{
	struct floor_bpf *s;
	int err;

	s = *skel = floor_bpf__open();
	if (!s)
		return -errno;
	s->rodata->floor_tgid = (uint32_t)pid;
	if (multi) {
		bpf_program__set_expected_attach_type(s->progs.floor_entry,
						      attach__uprobe_multi_type());
		bpf_program__set_expected_attach_type(s->progs.floor_return,
						      attach__uprobe_multi_type());
	}
	err = floor_bpf__load(s);
	if (err)
		return err;
	err = attach_set__new(set, multi ? ATTACH_UPROBE_MULTI : ATTACH_PERF_UPROBE,
			      s->progs.floor_entry, s->progs.floor_return);
	if (!err)
		err = libs__new(libs, *set);
	if (!err)
		err = libs__inspect_exe(*libs, "", exe, getenv("LD_LIBRARY_PATH"),
					getenv("LD_PRELOAD"));
	return err < 0 ? err : 0;
}

int main(int argc, char **argv)
{
	struct floor_bpf *skel = NULL;
	struct attach_set *set = NULL;
	struct libs *libs = NULL;
	struct spawn sp = {.pid = 0, .go_fd = -1, .err_fd = -1, .pidfd = -1};
	char exe[PATH_MAX];
	int ret = FLOOR_EXIT_FAILED, err, status, fd;
	char **args = argv + 1;
	bool multi;

	log__prog = "memtrack-floor";
	if (argc > 1 && !strcmp(argv[1], "--"))
		args++;
	if (!*args) {
		fprintf(stderr, "usage: memtrack-floor -- PROG [ARGS...]\n");
		return 2;
	}
	if (floor__which(args[0], exe, sizeof(exe))) {
		log__error("cannot find '%s'", args[0]);
		return 127;
	}
	err = spawn__start(&sp, args, true);
	if (err) {
		log__error("cannot start '%s': %s", args[0], strerror(-err));
		return FLOOR_EXIT_FAILED;
	}
	multi = attach__probe_uprobe_multi();
	err = floor__arm(&skel, &set, &libs, sp.pid, exe, multi);
	if (err) {
		log__error("cannot arm the probes: %s", strerror(-err));
		spawn__abort(&sp);
		goto cleanup;
	}
	err = spawn__release(&sp);
	if (err)
		log__error("cannot execute '%s': %s", args[0], strerror(-err));
	while (waitpid(sp.pid, &status, 0) < 0)
		if (errno != EINTR) {
			log__error("cannot wait for process %d: %s", (int)sp.pid, strerror(errno));
			goto cleanup;
		}
	fd = bpf_map__fd(skel->maps.floor_hits);
	fprintf(stderr,
		"memtrack-floor: %" PRIu64 " entry hits, %" PRIu64 " return hits, %u links (%s)\n",
		floor__sum(fd, 0), floor__sum(fd, 1), attach_set__links(set),
		multi ? "uprobe_multi" : "perf_uprobe");
	ret = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
				  : (WIFEXITED(status) ? WEXITSTATUS(status) : FLOOR_EXIT_FAILED);
cleanup:
	attach_set__free(set);
	libs__free(libs);
	floor_bpf__destroy(skel);
	spawn__close(&sp);
	return ret;
}
