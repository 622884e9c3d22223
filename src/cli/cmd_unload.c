// SPDX-License-Identifier: MIT
/* memtrack unload: the kept programs' slots removed, but those a run is using. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "cli/cmd_unload.h"
#include "cli/exit_status.h"
#include "common/log.h"
#include "track/prog_cache.h"

static void cmd_unload__usage(FILE *f)
{
	fprintf(f,
		"Usage: memtrack unload\n\n"
		"Frees the BPF programs and maps that runs keep loaded for the next ones, in\n"
		"%s (kernel memory: about the ring's size, 8 MiB by default, per slot).\n"
		"Slots a run is using are left. MEMTRACK_PROG_CACHE=0 makes runs keep nothing.\n",
		prog_cache__root());
}

int cmd_unload(int argc, char **argv)
{
	int removed, kept, err;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		cmd_unload__usage(stdout);
		return 0;
	}
	if (argc > 1) {
		cmd_unload__usage(stderr);
		return MT_EXIT_USAGE;
	}
	err = prog_cache__unload(&removed, &kept);
	if (err) {
		log__error("cannot open '%s': %s", prog_cache__root(), strerror(-err));
		return 1;
	}
	printf("memtrack: %d kept load%s freed", removed, removed == 1 ? "" : "s");
	if (kept)
		printf(", %d in use left", kept);
	printf("\n");
	return 0;
}
