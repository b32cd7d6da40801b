/*
 * report_classify — every point (scheme, N, unit, metric) against the
 * paper floor and the schedule model, and the causes of its departure from
 * the floor.
 *
 * Causes are attributed from the MEASURED breakdowns, not from the theory;
 * each cause's rule is written once, in report_cause_info's table
 * (report_classify.c), which the report also prints as the PDF's "How
 * departures are classified" (causes.tex). Whatever departure no cause
 * takes is `other`. A breakdown that does not sum to its total never gets
 * here: report_data refuses it as bad input.
 *
 * Activations and scratch are the common baseline: every scheme's peak sits
 * above its floor by them at every N, so a departure made only of them is
 * reported (status BASELINE) but not flagged. Any other cause flags the
 * point. Independently, a point whose measurement differs from the schedule
 * model by a single byte is `unexplained`: a bug in the engine or in the
 * theory (docs/schedule.md is the contract between them). For resident and
 * peak points whose theory row carries the schedule's breakdown, that holds
 * per category too: bytes moved from one category to another leave the
 * totals equal but make the point unexplained, and the first category that
 * differs is kept to be named.
 */
#ifndef ZS_REPORT_CLASSIFY_H
#define ZS_REPORT_CLASSIFY_H

#include "report/report_data.h"

enum report_cause {
	REPORT_PADDING, REPORT_GATHERED, REPORT_FULL_GRADS, REPORT_IMBALANCE, REPORT_BROADCAST,
	REPORT_ROOT_KEPT, REPORT_PARAMS_SHARDED, REPORT_BUCKETS, REPORT_GRAD_PARTITION, REPORT_FP32_COPY,
	REPORT_OFFLOADED, REPORT_STEP_BUFFERS, REPORT_GATHERS, REPORT_ACTIVATIONS, REPORT_OTHER, REPORT_NCAUSES
};

/* What the report says of a cause, written once. */
struct report_cause_info {
	const char *name;    /* in flags.txt and the findings: "padding" */
	const char *key;     /* in diff.json's causes: "padding" */
	char mark;           /* in table.tex: 'p' */
	int framework;       /* only a framework's (not the paper's) diff.json lists it */
	const char *legend;  /* table.tex's legend, LaTeX */
	const char *rule;    /* how its bytes are found, LaTeX: causes.tex */
};
const struct report_cause_info *report_cause_info(enum report_cause c);

enum report_status { REPORT_NONE, REPORT_BASELINE, REPORT_FLAGGED };

struct report_point {
	const struct report_run *run;
	enum report_metric metric;
	double floor, schedule, measured;    /* bytes per rank */
	double departure;                    /* measured − floor, bytes */
	double cause[REPORT_NCAUSES];        /* bytes; they sum to the departure */
	enum report_status status;
	/* The first category (enum report_cat) in which the measured breakdown
	 * differs from the schedule's, or -1 (none, or no schedule breakdown);
	 * with the bytes of that category on each side. */
	int breakdown_cat;
	double breakdown_measured, breakdown_schedule;
	int unexplained;                     /* measured != schedule, or breakdown_cat >= 0 */
};

/* Classify one point of run r. `d` gives Ψ and the bytes per param. */
void report_classify_point(const struct report_data *d, const struct report_run *r,
                           enum report_metric m, struct report_point *pt);

/* Classify every point: pts gets d->nruns·REPORT_NMETRICS entries, run by
 * run, metric by metric. The caller frees it with free(). */
struct report_point *report_classify(const struct report_data *d, size_t *npts);

/* report_cause_info(c)->name and ->mark. */
const char *report_cause_name(enum report_cause c);
char report_cause_mark(enum report_cause c);
const char *report_status_name(enum report_status s);

/* Whether a byte difference is zero, allowing for the rounding of
 * fractional floors such as Ψ·14/3. */
int report_is_zero(double bytes, double scale);

#endif
