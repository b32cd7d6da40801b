/*
 * report — the report stage end to end (docs/design.md, "Data flow"). Every
 * output is written atomically; diff.json goes last, so `make report`
 * (whose target it is) reruns after any failure.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "report/report.h"
#include "report/report_classify.h"
#include "report/report_data.h"
#include "report/report_exec.h"
#include "report/report_figures.h"
#include "report/report_findings.h"
#include "report/report_host.h"
#include "report/report_overhead.h"
#include "report/report_text.h"
#include "report/report_tfm.h"
#include "report/report_torch.h"
#include "util/util.h"

/* mkdir -p: create every missing folder of `path`. */
static int mkdir_p(const char *path, char **cause)
{
	char *p, *s;
	int rc = 0;

	if (*path == '\0')
		return zs_fail(cause, "the output folder name is empty");
	p = zs_strdup(path);
	for (s = p + 1; ; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0777) < 0 && errno != EEXIST) {
			rc = zs_fail(cause, "cannot create folder %s: %s", p, strerror(errno));
			break;
		}
		*s = c;
		if (c == '\0')
			break;
	}
	free(p);
	return rc;
}

static int write_buf(const char *dir, const char *name, struct zs_buf *b, char **cause)
{
	char *path = zs_asprintf("%s/%s", dir, name);
	int rc = zs_buf_write(b, path, cause);

	free(path);
	zs_buf_free(b);
	return rc;
}

/* Run every figure script in OUT/figures. */
static int run_gnuplot(const char *gnuplot, const char *out, char **cause)
{
	char *dir = zs_asprintf("%s/figures", out), *log = zs_asprintf("%s/gnuplot.log", out);
	int i, rc = 0;

	remove(log);
	for (i = 0; i < REPORT_NFIGURES + REPORT_NOPTIONAL && rc == 0; i++) {
		char *script = zs_asprintf("%s.gp", i < REPORT_NFIGURES ? report_figure_names[i]
		                           : report_figure_optional[i - REPORT_NFIGURES]);
		char *path = zs_asprintf("%s/%s", dir, script);
		const char *argv[] = {"gnuplot", script, NULL};
		if (i < REPORT_NFIGURES || access(path, F_OK) == 0) /* fig6 to fig9 are optional */
			rc = report_exec(gnuplot, argv, dir, log, cause);
		free(path);
		free(script);
	}
	free(dir);
	free(log);
	return rc;
}

static int run_pdflatex(const char *pdflatex, const char *out, char **cause)
{
	char *log = zs_asprintf("%s/pdflatex.log", out);
	const char *argv[] = {"pdflatex", "-interaction=nonstopmode", "-halt-on-error",
	                      "zerosim-report.tex", NULL};
	int rc;

	remove(log);
	rc = report_exec(pdflatex, argv, out, log, cause);
	free(log);
	return rc;
}

/* Render the figures and the PDF when the tools are there; say clearly
 * what was not built when they are not. */
static int render(const char *out, char **cause)
{
	char *gnuplot = report_exec_which("gnuplot"), *pdflatex = report_exec_which("pdflatex");
	int rc = ZS_EXIT_OK;

	if (gnuplot == NULL) {
		printf("zerosim report: gnuplot not found in PATH: the figure scripts and data are in "
		       "%s/figures; render them with: cd %s/figures && for f in *.gp; do gnuplot \"$f\"; done\n"
		       "zerosim report: the PDF was not built (it needs the figures)\n", out, out);
		goto end;
	}
	if (run_gnuplot(gnuplot, out, cause) < 0) {
		rc = ZS_EXIT_RUNTIME;
		goto end;
	}
	printf("zerosim report: figures rendered in %s/figures (PDF and PNG)\n", out);
	if (pdflatex == NULL) {
		printf("zerosim report: pdflatex not found in PATH: the PDF was NOT built; "
		       "run pdflatex zerosim-report.tex in %s\n", out);
		goto end;
	}
	if (run_pdflatex(pdflatex, out, cause) < 0) {
		rc = ZS_EXIT_RUNTIME;
		goto end;
	}
	printf("zerosim report: wrote %s/zerosim-report.pdf\n", out);
end:
	free(gnuplot);
	free(pdflatex);
	return rc;
}

/* Write everything but diff.json. */
static int write_outputs(const struct report_options *o, const struct report_data *d,
                         const struct report_point *pts, size_t npts,
                         const struct report_finding *f, const struct report_tfm *t,
                         const struct report_torch *pt, const char *tex, size_t texlen, char **cause)
{
	struct zs_buf b = {0};
	char *figdir = zs_asprintf("%s/figures", o->out), *path;
	int rc;

	rc = mkdir_p(figdir, cause);
	if (rc == 0) {
		report_flags_text(d, pts, npts, &b);
		report_overhead_text(d, &b);
		report_host_text(d, &b);
		report_allocator_text(d, &b);
		report_tfm_text(t, &b);
		rc = write_buf(o->out, "flags.txt", &b, cause);
	}
	if (rc == 0) {
		report_table_tex(d, pts, npts, &b);
		rc = write_buf(o->out, "table.tex", &b, cause);
	}
	if (rc == 0) {
		report_causes_tex(d, &b);
		rc = write_buf(o->out, "causes.tex", &b, cause);
	}
	if (rc == 0) {
		report_findings_tex(d, f, &b);
		rc = write_buf(o->out, "findings.tex", &b, cause);
	}
	if (rc == 0) {
		report_flags_tex(d, pts, npts, &b);
		report_overhead_tex(d, &b);
		report_host_tex(d, &b);
		rc = write_buf(o->out, "flags.tex", &b, cause);
	}
	if (rc == 0) {
		path = zs_asprintf("%s/zerosim-report.tex", o->out);
		rc = zs_write_atomic(path, tex, texlen, cause);
		free(path);
	}
	if (rc == 0)
		rc = report_figures_write(d, figdir, cause);
	if (rc == 0)
		rc = report_tfm_write(t, o->out, figdir, cause);
	if (rc == 0)
		rc = report_torch_write(pt, o->out, cause);
	if (rc == 0)
		rc = report_figures_torch(pt, figdir, cause);
	free(figdir);
	return rc;
}

static void print_summary(const struct report_data *d, const struct report_point *pts,
                          size_t npts, const struct report_finding *f, size_t unexplained)
{
	size_t i, flagged = 0;

	for (i = 0; i < npts; i++) {
		flagged += pts[i].status == REPORT_FLAGGED;
		if (pts[i].unexplained) {
			struct zs_buf b = {0};
			report_point_line(d, &pts[i], &b);
			fprintf(stderr, "zerosim report: %s\n", zs_buf_str(&b));
			zs_buf_free(&b);
		}
	}
	printf("zerosim report: %zu points, %zu flagged, %zu unexplained\n", npts, flagged,
	       unexplained);
	for (i = 0; i < REPORT_NFINDINGS; i++)
		if (f[i].shown)
			printf("zerosim report: finding %s: %s\n", f[i].key, report_verdict_name(f[i].verdict));
}

/* The --transformer files: a plain PyTorch loop's theory goes to the
 * section "zerosim against PyTorch" (report_torch.h), its measured.json
 * is refused (that section compares the theory with the paper's; nothing
 * there reads a measurement), every other file to the transformer
 * section, whose list *rest (of *nrest paths) gets it. */
static int split_transformers(const struct report_options *o, struct report_torch *pt, const char ***rest,
                              size_t *nrest, char **cause)
{
	*rest = zs_calloc(o->ntransformers + 1, sizeof **rest);
	*nrest = 0;
	for (size_t i = 0; i < o->ntransformers; i++) {
		cJSON *j;
		if (zs_json_load(o->transformers[i], REPORT_THEORY_FORMAT " or " REPORT_MEASURED_FORMAT, &j, cause) < 0)
			return -1;
		int rc = 0;
		const char *fmt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "format"));
		if (report_torch_is_plain(j) && fmt != NULL && strcmp(fmt, REPORT_MEASURED_FORMAT) == 0)
			rc = zs_fail(cause, "%s: a measured plain loop (--framework torch --wrapper none) is not reported: "
			             "give its theory.json, which the section \"zerosim against PyTorch\" takes", o->transformers[i]);
		else if (report_torch_is_plain(j))
			rc = report_torch_add(pt, j, o->transformers[i], cause);
		else {
			report_torch_note_paper(pt, j);
			(*rest)[(*nrest)++] = o->transformers[i];
		}
		cJSON_Delete(j);
		if (rc < 0)
			return -1;
	}
	return 0;
}

int report_main(const struct report_options *o, char **cause)
{
	struct report_data d;
	struct report_finding f[REPORT_NFINDINGS];
	struct report_tfm t;
	struct report_point *pts;
	char *tex = NULL, *path;
	size_t npts, texlen, i, unexplained = 0;
	cJSON *diff;
	int rc;

	if (report_data_load(o->measured, o->theory, &d, cause) < 0)
		return ZS_EXIT_USAGE;
	struct report_torch pt = {0};
	const char **rest = NULL;
	size_t nrest = 0;
	if (split_transformers(o, &pt, &rest, &nrest, cause) < 0 ||
	    report_tfm_load(rest, nrest, &t, cause) < 0) {
		free((void *)rest);
		report_torch_free(&pt);
		report_data_free(&d);
		return ZS_EXIT_USAGE;
	}
	free((void *)rest);
	if (report_torch_join(&pt, &t, cause) < 0) {
		report_torch_free(&pt);
		report_tfm_free(&t);
		report_data_free(&d);
		return ZS_EXIT_USAGE;
	}
	if (zs_read_file(o->template_path, &tex, &texlen, cause) < 0) {
		report_torch_free(&pt);
		report_tfm_free(&t);
		report_data_free(&d);
		return ZS_EXIT_USAGE;
	}
	pts = report_classify(&d, &npts);
	report_findings(&d, f);
	for (i = 0; i < npts; i++)
		unexplained += (size_t)pts[i].unexplained;
	print_summary(&d, pts, npts, f, unexplained);
	unexplained += report_tfm_summary(&t);
	unexplained += report_host_unexplained(&d);

	rc = ZS_EXIT_RUNTIME;
	if (write_outputs(o, &d, pts, npts, f, &t, &pt, tex, texlen, cause) < 0)
		goto end;
	if (o->render && (rc = render(o->out, cause)) != ZS_EXIT_OK)
		goto end;
	diff = report_diff_json(&d, pts, npts, f);
	if (t.n > 0) /* without --transformer diff.json is the MLP's, as it was */
		cJSON_AddItemToObject(diff, "transformers", report_tfm_diff_json(&t));
	path = zs_asprintf("%s/diff.json", o->out);
	rc = zs_json_write(path, diff, cause) < 0 ? ZS_EXIT_RUNTIME : ZS_EXIT_OK;
	free(path);
	cJSON_Delete(diff);
	if (rc == ZS_EXIT_OK && unexplained > 0 && o->strict) {
		zs_fail(cause, "%zu points unexplained (measurement differs from the schedule model) "
		        "and --strict was given; see %s/flags.txt", unexplained, o->out);
		rc = ZS_EXIT_RUNTIME;
	}
end:
	free(tex);
	free(pts);
	report_findings_free(f);
	report_torch_free(&pt);
	report_tfm_free(&t);
	report_data_free(&d);
	return rc;
}
