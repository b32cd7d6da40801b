/*
 * report_host — the host bytes of offloaded runs (--offload), measured
 * beside the schedule model's: a rank's between steps and at its peak,
 * every rank's (per_rank), and a node's ranks between steps. Unlike the
 * process overhead these are predicted, so a run whose host figures, or
 * any one rank's, differ from the schedule is unexplained. The same reader,
 * line and check serve the MLP's runs (report_text.h: flags.txt, flags.tex,
 * diff.json's host) and a transformer's (report_tfm.h); the figure of host
 * bytes against N is report_figures_host (report_figures.h). A run's
 * report_run holds one (report_data.h), so this includes none of those.
 */
#ifndef ZS_REPORT_HOST_H
#define ZS_REPORT_HOST_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "report/report_buf.h"
#include "util/config.h"

/* The figures, and their JSON keys in that order. The first two are also
 * per_rank arrays. */
enum { REPORT_HOST_RESIDENT, REPORT_HOST_PEAK, REPORT_HOST_NODE, REPORT_NHOST };
#define REPORT_HOST_NRANK 2
extern const char *const report_host_keys[REPORT_NHOST];

struct report_host {
	int has;                           /* the measured run gives host bytes (it was offloaded) */
	double v[REPORT_NHOST];            /* measured, -1 where absent */
	double sched[REPORT_NHOST];        /* the schedule's, -1 where absent */
	/* Every rank's resident and peak: measured (per_rank, NULL where the
	 * file has none), and the schedule's where its per_rank gives them
	 * (NULL: every rank holds the schedule's figure). */
	double *rank[REPORT_HOST_NRANK], *sched_rank[REPORT_HOST_NRANK];
	unsigned world;
};

void report_host_free(struct report_host *h);

/* How many of the run's figures and ranks' figures differ from the
 * schedule's (0: explained). */
size_t report_host_departures(const struct report_host *h);

/* "LABEL: resident 297472 B (schedule 297472), peak ..., resident per node
 * ... B (...); each of the 2 ranks as the schedule" (or the ranks that
 * depart, each marked UNEXPLAINED). */
void report_host_line(const char *label, const struct report_host *h, struct zs_buf *b);

/* One offloaded run as the PDF's table gives it: its name ("zero1", or
 * "gpt2-tiny zero1" for a transformer), N, unit and host bytes. */
struct report_host_run {
	const char *name;
	unsigned world;
	enum zs_unit unit;
	const struct report_host *h;
};

/* The host bytes of offloaded runs as the PDF gives them, the same for
 * the MLP and a transformer: one sentence (every run equals the schedule,
 * or how many depart) and one table of the measured figures, where runs of
 * the same name and N that hold the same bytes share a row. Each run's
 * itemised line (report_host_line) is flags.txt's, not the PDF's. */
void report_host_table(struct zs_buf *b, const struct report_host_run *runs, size_t n);

/* Name a departing run on stderr ("zerosim report: UNEXPLAINED host bytes
 * LABEL..."); returns 1 if it departs, else 0. */
int report_host_check(const char *label, const struct report_host *h);

/* The figures as keys of o: measured, "per_rank", "schedule" and
 * "unexplained". */
void report_host_json_add(cJSON *o, const struct report_host *h);

#endif
