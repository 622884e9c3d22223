// SPDX-License-Identifier: MIT
/* memtrack: the command table. */
#include <stdio.h>
#include <string.h>
#include "cli/cmd_report.h"
#include "cli/cmd_track.h"
#include "cli/cmd_unload.h"
#include "cli/exit_status.h"
#include "common/log.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *help;
};

static const struct command commands[] = {
	{"track", cmd_track, "run a command and record its memory"},
	{"report", cmd_report, "summarise an artifact: text, JSON, SVG, Perfetto"},
	{"unload", cmd_unload, "free the BPF programs runs keep loaded for the next ones"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: memtrack COMMAND [OPTIONS]\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\n  memtrack COMMAND --help   details of one command\n"
		   "  memtrack --version\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return MT_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("memtrack %s\n", MEMTRACK_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].run(argc - 1, argv + 1);
	log__error("unknown command '%s'", argv[1]);
	usage(stderr);
	return MT_EXIT_USAGE;
}
