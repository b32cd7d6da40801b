/*
 * cmd_report — `zerosim report`: the command line of the report stage
 * (DESIGN.md). The work is in src/report/report.c.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/cli.h"
#include "report/report.h"
#include "util/datafile.h"
#include "util/util.h"

#ifndef ZS_DATADIR
#define ZS_DATADIR "."
#endif

static void usage(void)
{
	printf("Usage: zerosim report --measured FILE --theory FILE --out DIR [OPTION]...\n"
	       "Diff a measurement against the theory: flag every departure from the paper's\n"
	       "floors with its cause, check the findings, write diff.json, flags.txt,\n"
	       "table.tex, findings.tex and the gnuplot figures to DIR, then render the\n"
	       "figures with gnuplot and the PDF with pdflatex when they are in PATH.\n"
	       "\n"
	       "  --measured FILE   measured.json (zerosim-measured/1), from zerosim measure\n"
	       "  --theory FILE     theory.json (zerosim-theory/1), from zerosim theory\n"
	       "  --out DIR         output folder, created if missing\n"
	       "  --template FILE   LaTeX template (default %s/zerosim-report.tex)\n"
	       "  --strict          exit 1 if any point is unexplained (measurement differs\n"
	       "                    from the schedule model)\n"
	       "  --no-render       write the scripts and LaTeX, run neither gnuplot nor pdflatex\n"
	       "  --help            print this help and exit\n"
	       "\n"
	       "Exit status: 0 success, 1 failure at run time (or an unexplained point with\n"
	       "--strict), 2 bad usage or bad input.\n", ZS_DATADIR "/report");
}

int zs_cmd_report(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"measured", required_argument, NULL, 'm'},
		{"theory", required_argument, NULL, 't'},
		{"out", required_argument, NULL, 'o'},
		{"template", required_argument, NULL, 'T'},
		{"strict", no_argument, NULL, 's'},
		{"no-render", no_argument, NULL, 'n'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct report_options o = {NULL, NULL, NULL, ZS_DATADIR "/zerosim-report.tex", 0, 1};
	char *cause = NULL;
	int c, rc, template_given = 0;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (c) {
		case 'm': o.measured = optarg; break;
		case 't': o.theory = optarg; break;
		case 'o': o.out = optarg; break;
		case 'T': o.template_path = optarg; template_given = 1; break;
		case 's': o.strict = 1; break;
		case 'n': o.render = 0; break;
		case 'h': usage(); return ZS_EXIT_OK;
		case 'V': printf("zerosim %s\n", PACKAGE_VERSION); return ZS_EXIT_OK;
		case ':':
			cause = zs_asprintf("%s needs a value (try --help)", argv[optind - 1]);
			goto usage_error;
		default:
			cause = zs_asprintf("unknown option '%s' (try --help)", argv[optind - 1]);
			goto usage_error;
		}
	}
	if (optind < argc) {
		cause = zs_asprintf("unexpected argument '%s' (try --help)", argv[optind]);
		goto usage_error;
	}
	if (o.measured == NULL || o.theory == NULL || o.out == NULL) {
		fprintf(stderr, "zerosim report: --measured, --theory and --out are required (try --help)\n");
		return ZS_EXIT_USAGE;
	}
	/* "" would make OUT/figures the root folder's /figures. */
	if (*o.out == '\0') {
		fprintf(stderr, "zerosim report: --out: the folder name is empty\n");
		return ZS_EXIT_USAGE;
	}
	/* The shipped template: installed, or beside an uninstalled binary. */
	char *found = template_given ? NULL : zs_datafile("report/zerosim-report.tex", &cause);
	if (!template_given && found == NULL) {
		zs_print_error("zerosim report", cause);
		free(cause);
		return ZS_EXIT_RUNTIME;
	}
	if (found != NULL)
		o.template_path = found;
	rc = report_main(&o, &cause);
	if (rc != ZS_EXIT_OK)
		zs_print_error("zerosim report", cause != NULL ? cause : "failed");
	free(found);
	free(cause);
	return rc;

usage_error:
	zs_print_error("zerosim report", cause);
	free(cause);
	return ZS_EXIT_USAGE;
}
