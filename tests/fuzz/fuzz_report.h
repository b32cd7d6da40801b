/*
 * fuzz_report — the body shared by the two harnesses of the report's
 * readers (fuzz_measured.c, fuzz_theory.c): one side is the fuzz input,
 * the other a fixed, valid partner file of the same model (a seed of the
 * corpus), parsed once. What loads is pushed through every stage of the
 * report that does not run a program: classify, findings, diff.json, the
 * text and LaTeX outputs, and the figure scripts (into a private folder).
 *
 * The partner's path is FUZZ_PARTNER (compiled in by tests/hardening.mk)
 * or, when set, the environment's ZS_FUZZ_PARTNER.
 */
#ifndef ZS_FUZZ_REPORT_H
#define ZS_FUZZ_REPORT_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "report/report_classify.h"
#include "report/report_data.h"
#include "report/report_figures.h"
#include "report/report_findings.h"
#include "report/report_text.h"
#include "report/report_tfm.h"
#include "util/util.h"

#ifndef FUZZ_PARTNER
#define FUZZ_PARTNER ""
#endif

static cJSON *partner;
static char figdir[256];

static void remove_figdir(void)
{
	DIR *dir = opendir(figdir);
	struct dirent *e;
	if (dir == NULL)
		return;
	while ((e = readdir(dir)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char *p = zs_asprintf("%s/%s", figdir, e->d_name);
		remove(p);
		free(p);
	}
	closedir(dir);
	rmdir(figdir);
}

static void fuzz_report_init(const char *partner_format)
{
	const char *path = getenv("ZS_FUZZ_PARTNER");
	char *cause = NULL;
	if (path == NULL || *path == '\0')
		path = FUZZ_PARTNER;
	if (zs_json_load(path, partner_format, &partner, &cause) != 0) {
		fprintf(stderr, "fuzz: cannot load the partner file (set ZS_FUZZ_PARTNER): %s\n", cause);
		exit(2);
	}
	/* The figures are written on every input that loads: in memory when
	 * the machine has a tmpfs, where fsync and rename cost nothing. */
	const char *tmp = getenv("TMPDIR");
	if (tmp == NULL || *tmp == '\0')
		tmp = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(figdir, sizeof figdir, "%s/zerosim-fuzz.XXXXXX", tmp);
	if (mkdtemp(figdir) == NULL) {
		perror("fuzz: mkdtemp");
		exit(2);
	}
	atexit(remove_figdir);
}

/* A theory input is also read as a transformer's (--transformer), and
 * its section written when it loads. */
static void fuzz_tfm(const cJSON *in)
{
	struct report_tfm t;
	char *cause = NULL;

	memset(&t, 0, sizeof t);
	if (report_tfm_add(in, "theory.json", &t, &cause) != 0) {
		if (cause == NULL || *cause == '\0' || strchr(cause, '\n') != NULL)
			abort(); /* a refusal must say why, in one line */
		free(cause);
		return;
	}
	if (cause != NULL || report_tfm_write(&t, figdir, figdir, &cause) != 0)
		abort();
	report_tfm_free(&t);
}

/* Load the input (the side named by `format`) against the partner and run
 * every in-memory stage of the report on what loads. */
static void fuzz_report_one(const uint8_t *data, size_t size, const char *format, int input_is_measured)
{
	cJSON *in = NULL;
	char *cause = NULL;
	struct report_data d;
	const char *path = fuzz_file(data, size);

	if (zs_json_load(path, format, &in, &cause) != 0)
		goto refused;
	if (!input_is_measured)
		fuzz_tfm(in);
	int rc = input_is_measured ? report_data_from_json(in, partner, "measured.json", "theory.json", &d, &cause)
	                           : report_data_from_json(partner, in, "measured.json", "theory.json", &d, &cause);
	cJSON_Delete(in);
	if (rc != 0)
		goto refused;
	if (cause != NULL)
		abort();

	size_t npts;
	struct report_point *pts = report_classify(&d, &npts);
	struct report_finding f[REPORT_NFINDINGS];
	report_findings(&d, f);
	cJSON *diff = report_diff_json(&d, pts, npts, f);
	char *text = cJSON_PrintUnformatted(diff);
	cJSON_free(text);
	cJSON_Delete(diff);
	struct zs_buf b = {0};
	report_flags_text(&d, pts, npts, &b);
	zs_buf_free(&b);
	report_table_tex(&d, pts, npts, &b);
	zs_buf_free(&b);
	report_findings_tex(&d, f, &b);
	zs_buf_free(&b);
	report_flags_tex(&d, pts, npts, &b);
	zs_buf_free(&b);
	if (report_figures_write(&d, figdir, &cause) != 0)
		abort(); /* the folder exists: writing the figures cannot fail */
	free(pts);
	report_findings_free(f);
	report_data_free(&d);
	return;
refused:
	if (cause == NULL || *cause == '\0' || strchr(cause, '\n') != NULL)
		abort(); /* a refusal must say why, in one line */
	free(cause);
}

#endif
