/*
 * zerosim — per-rank memory of data-parallel training under DP and
 * ZeRO-1/2/3: measured (engine), predicted (theory), compared (report).
 * This file only dispatches to the subcommands in src/cli/.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "util/util.h"

static void usage(FILE *f)
{
	fputs("Usage: zerosim COMMAND [OPTION]...\n"
	      "Measure, predict and compare the per-rank memory of data-parallel training\n"
	      "under DP, ZeRO-1, ZeRO-2 and ZeRO-3.\n"
	      "\n"
	      "Commands:\n"
	      "  measure   run real training steps with every buffer tracked; write measured.json\n"
	      "  theory    the ZeRO paper's floors and the exact schedule model; write theory.json\n"
	      "  report    compare the two, flag departures, draw figures, write a LaTeX table\n"
	      "\n"
	      "  -h, --help     display this help and exit\n"
	      "  -V, --version  output version information and exit\n"
	      "\n"
	      "'zerosim COMMAND --help' describes each command's options.\n"
	      "Exit status: 0 success, 1 failure at run time, 2 bad usage or bad input.\n",
	      f);
}

/* GNU's close_stdout: output that could not be written (a full disk, a
 * closed pipe) fails the command, said in one line, even for --help. A
 * command that already failed has said why. */
static int finish(int status)
{
	int flushed = fflush(stdout) == 0;
	int e = errno;
	if (status == ZS_EXIT_OK && (!flushed || ferror(stdout))) {
		fprintf(stderr, "zerosim: cannot write to standard output%s%s\n", flushed ? "" : ": ",
		        flushed ? "" : strerror(e));
		return ZS_EXIT_RUNTIME;
	}
	return status;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "zerosim: missing command (measure, theory, report); try 'zerosim --help'\n");
		return ZS_EXIT_USAGE;
	}
	zs_signals_init();
	zs_json_init();
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		usage(stdout);
		return finish(ZS_EXIT_OK);
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("zerosim %s\n"
		       "Copyright (C) 2026 the zerosim developers.\n"
		       "License MIT: <https://opensource.org/licenses/MIT>.\n"
		       "This is free software: you are free to change and redistribute it.\n"
		       "There is NO WARRANTY, to the extent permitted by law.\n",
		       PACKAGE_VERSION);
		return finish(ZS_EXIT_OK);
	}
	if (strcmp(cmd, "measure") == 0)
		return finish(zs_cmd_measure(argc - 1, argv + 1));
	if (strcmp(cmd, "theory") == 0)
		return finish(zs_cmd_theory(argc - 1, argv + 1));
	if (strcmp(cmd, "report") == 0)
		return finish(zs_cmd_report(argc - 1, argv + 1));
	fprintf(stderr, "zerosim: unknown command '%.40s' (measure, theory, report); try 'zerosim --help'\n", cmd);
	return ZS_EXIT_USAGE;
}
