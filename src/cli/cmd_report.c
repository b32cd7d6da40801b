/*
 * cmd_report — `zerosim report`: the command line of the report stage
 * (docs/design.md). The work is in src/report/report.c.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/options.h"
#include "report/report.h"
#include "report/report_figures.h"
#include "report/report_tfm.h"
#include "report/report_torch.h"
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
	       "  --transformer FILE\n"
	       "                    a transformer's theory.json (zerosim theory --model) or\n"
	       "                    measured.json (zerosim measure --model): adds the\n"
	       "                    transformer section; once per file, any number of models;\n"
	       "                    a plain loop's theory (--framework torch --wrapper none)\n"
	       "                    adds the section \"zerosim against PyTorch\" beside the\n"
	       "                    paper's theory of the same model\n"
	       "  -o, --out DIR     output folder, created if missing\n"
	       "  --template FILE   LaTeX template (default %s/zerosim-report.tex)\n"
	       "  --strict          exit 1 if any point is unexplained (measurement differs\n"
	       "                    from the schedule model)\n"
	       "  --no-render       write the scripts and LaTeX, run neither gnuplot nor pdflatex\n"
	       "  -h, --help        print this help and exit\n"
	       "  -V, --version     output version information and exit\n"
	       "\n"
	       "Exit status: 0 success, 1 failure at run time (or an unexplained point with\n"
	       "--strict), 2 bad usage or bad input.\n", ZS_DATADIR "/report");
}

/* What the report writes in its folder (report.c, report_figures.c; pdflatex
 * adds zerosim-report.aux, .log, .pdf and so on). */
static const char *const out_names[] = {"diff.json", "flags.txt", "table.tex", "causes.tex", "findings.tex", "flags.tex",
                                        REPORT_TFM_TEX, REPORT_TORCH_TEX, "gnuplot.log", "pdflatex.log"};
static const char *const figure_exts[] = {".gp", ".dat", ".pdf", ".png"};

/* 1 if the file `in` (resolved) is one the report would write in DIR. */
static int is_output(const char *dir, const char *in)
{
	char *target = NULL, *real = realpath(dir, NULL);
	int fd, hit = 0;
	if (real == NULL) /* no folder yet: nothing in it */
		return 0;
	if (zs_output_resolve(in, &target, &fd) == 0 && target != NULL) {
		size_t n = strlen(real);
		const char *base = target + n + 1;
		if (strncmp(target, real, n) == 0 && target[n] == '/') {
			hit = strncmp(base, "figures/", 8) == 0 || strncmp(base, "zerosim-report.", 15) == 0;
			for (size_t i = 0; i < sizeof out_names / sizeof out_names[0]; i++)
				hit |= strcmp(base, out_names[i]) == 0;
		}
	}
	/* The same file under another name (a hard link). */
	for (size_t i = 0; i < sizeof out_names / sizeof out_names[0] && !hit; i++) {
		char *p = zs_asprintf("%s/%s", real, out_names[i]);
		hit = zs_same_file(p, in);
		free(p);
	}
	for (size_t i = 0; i < (size_t)(REPORT_NFIGURES + REPORT_NOPTIONAL) * 4 && !hit; i++) {
		const char *fig = i / 4 < REPORT_NFIGURES ? report_figure_names[i / 4]
		                : report_figure_optional[i / 4 - REPORT_NFIGURES];
		char *p = zs_asprintf("%s/figures/%s%s", real, fig, figure_exts[i % 4]);
		hit = zs_same_file(p, in);
		free(p);
	}
	char *pdf = zs_asprintf("%s/zerosim-report.pdf", real), *tex = zs_asprintf("%s/zerosim-report.tex", real);
	hit = hit || zs_same_file(pdf, in) || zs_same_file(tex, in);
	free(pdf);
	free(tex);
	free(target);
	free(real);
	return hit;
}

enum { OPT_MEASURED = ZS_OPT_COMMAND, OPT_THEORY, OPT_OUT, OPT_TEMPLATE, OPT_STRICT, OPT_NO_RENDER,
       OPT_TRANSFORMER };

static const struct zs_opt options[] = {
	{"measured", 0, ZS_OPT_FILE, OPT_MEASURED, NULL},
	{"theory", 0, ZS_OPT_FILE, OPT_THEORY, NULL},
	{"transformer", 0, ZS_OPT_FILE, OPT_TRANSFORMER, NULL},
	{"out", 'o', 1, OPT_OUT, NULL},
	{"template", 0, ZS_OPT_FILE, OPT_TEMPLATE, NULL},
	{"strict", 0, 0, OPT_STRICT, NULL},
	{"no-render", 0, 0, OPT_NO_RENDER, NULL},
	ZS_OPTS_STANDARD,
	{NULL, 0, 0, ZS_OPT_END, NULL},
};

int zs_cmd_report(int argc, char **argv)
{
	struct report_options o = {NULL, NULL, NULL, ZS_DATADIR "/zerosim-report.tex", 0, 1, NULL, 0};
	struct zs_arg *args = NULL;
	size_t nargs = 0;
	const char **transformers = NULL; /* as many as given */
	struct zs_path *in = NULL;
	char *cause = NULL;
	int rc, template_given = 0;

	if (zs_opts_parse(options, argc, argv, &args, &nargs, &cause) != 0)
		goto usage_error;
	transformers = zs_calloc(nargs + 1, sizeof *transformers);
	for (size_t i = 0; i < nargs; i++) {
		const char *v = args[i].value;
		switch (args[i].opt->id) {
		case OPT_MEASURED: o.measured = v; break;
		case OPT_THEORY: o.theory = v; break;
		case OPT_TRANSFORMER:
			transformers[o.ntransformers++] = v;
			break;
		case OPT_OUT: o.out = v; break;
		case OPT_TEMPLATE: o.template_path = v; template_given = 1; break;
		case OPT_STRICT: o.strict = 1; break;
		case OPT_NO_RENDER: o.render = 0; break;
		case ZS_OPT_HELP: usage(); free(args); free(transformers); return ZS_EXIT_OK;
		case ZS_OPT_VERSION: zs_opts_print_version(); free(args); free(transformers); return ZS_EXIT_OK;
		default: break;
		}
	}
	free(args);
	o.transformers = transformers;
	if (o.measured == NULL || o.theory == NULL || o.out == NULL) {
		const char *missing[3];
		int k = 0;
		if (o.measured == NULL)
			missing[k++] = "--measured";
		if (o.theory == NULL)
			missing[k++] = "--theory";
		if (o.out == NULL)
			missing[k++] = "--out";
		cause = k == 1 ? zs_asprintf("%s is required; try 'zerosim report --help'", missing[0])
		      : k == 2 ? zs_asprintf("%s and %s are required; try 'zerosim report --help'", missing[0], missing[1])
		               : zs_asprintf("%s, %s and %s are required; try 'zerosim report --help'", missing[0],
		                             missing[1], missing[2]);
		goto usage_error;
	}
	/* "" would make OUT/figures the root folder's /figures. */
	if (*o.out == '\0') {
		fprintf(stderr, "zerosim report: --out: the folder name is empty\n");
		free(transformers);
		return ZS_EXIT_USAGE;
	}
	in = zs_calloc(3 + o.ntransformers, sizeof *in);
	in[0] = (struct zs_path){"--measured", o.measured};
	in[1] = (struct zs_path){"--theory", o.theory};
	in[2] = (struct zs_path){"--template", o.template_path};
	for (size_t i = 0; i < o.ntransformers; i++)
		in[3 + i] = (struct zs_path){"--transformer", transformers[i]};
	for (size_t i = 0; i < 3 + o.ntransformers; i++)
		if ((i != 2 || template_given) && is_output(o.out, in[i].path)) {
			cause = zs_asprintf("%s %s: is a file the report writes in %s; it would be overwritten", in[i].opt,
			                    in[i].path, o.out);
			goto usage_error;
		}
	/* The shipped template: installed, or beside an uninstalled binary. */
	char *found = template_given ? NULL : zs_datafile("report/zerosim-report.tex", &cause);
	if (!template_given && found == NULL) {
		zs_print_error("zerosim report", cause);
		free(cause);
		free(in);
		free(transformers);
		return ZS_EXIT_RUNTIME;
	}
	if (found != NULL)
		o.template_path = found;
	rc = report_main(&o, &cause);
	if (rc != ZS_EXIT_OK)
		zs_print_error("zerosim report", cause != NULL ? cause : "failed");
	free(found);
	free(cause);
	free(in);
	free(transformers);
	return rc;

usage_error:
	zs_print_error("zerosim report", cause);
	free(cause);
	free(in);
	free(transformers);
	return ZS_EXIT_USAGE;
}
