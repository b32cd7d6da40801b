/*
 * report — `zerosim report` as a library call: load and join the two files,
 * classify every point, check the findings, write diff.json, flags.txt,
 * table.tex, findings.tex, flags.tex and the figure scripts into the out
 * folder, then (unless told not to) run gnuplot and pdflatex.
 */
#ifndef ZS_REPORT_H
#define ZS_REPORT_H

struct report_options {
	const char *measured;       /* measured.json */
	const char *theory;         /* theory.json */
	const char *out;            /* output folder, created like mkdir -p */
	const char *template_path;  /* LaTeX template, copied to OUT/zerosim-report.tex */
	int strict;                 /* exit 1 when a point is unexplained */
	int render;                 /* run gnuplot and pdflatex */
	const char *const *transformers;   /* transformers' theory.json (report_tfm.h) */
	size_t ntransformers;
};

/* Returns the exit status (ZS_EXIT_*). On a non-zero status *cause holds
 * one sentence for the user; the caller frees it. Progress and the loud
 * list of unexplained points go to stdout and stderr. */
int report_main(const struct report_options *o, char **cause);

#endif
