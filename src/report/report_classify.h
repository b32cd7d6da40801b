/*
 * report_classify — every point (scheme, N, unit, metric) against the
 * paper floor and the schedule model, and the causes of its departure from
 * the floor.
 *
 * Causes are attributed from the MEASURED breakdowns, not from the theory:
 *  - padding: model-state bytes above the floor, up to the shard padding
 *    (S − Ψ/N)·(bytes of the sharded states) the run's own S implies; for
 *    comm, bytes above the floor up to floor·(P − Ψ)/Ψ;
 *  - gathered params, full grads: those transient categories at the peak;
 *  - partition imbalance (a framework that partitions unevenly: torch's
 *    zero1 gives whole tensors to ranks): model-state bytes above the
 *    floor, with no padding (nothing is padded there);
 *  - broadcast (torch's zero1): the measured broadcasts' bytes, the
 *    collective the paper's zero1 does not have;
 *  - root kept gathered (torch's zero3, FSDP, unit=model): the backward
 *    all-gather FSDP does not send, a negative cause: (N-1)·S·p bytes;
 *  - params sharded (torch's zero2, FSDP SHARD_GRAD_OP): between steps it
 *    holds a shard of the params where the paper's zero2 holds them all, a
 *    negative cause: (S - Ψ)·p bytes;
 *  - DDP buckets (torch's dp and zero1): the `buckets` category, DDP's
 *    second gradient-sized buffer, resident but not model state;
 *  - activations: the `activations` and `scratch` categories, merged as
 *    "activations and scratch" (both are per-batch step buffers every scheme
 *    holds alike);
 *  - other: whatever departure is left (an unknown category, model state
 *    beyond padding). A breakdown that does not sum to its total never gets
 *    here: report_data refuses it as bad input.
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
	REPORT_ROOT_KEPT, REPORT_PARAMS_SHARDED, REPORT_BUCKETS, REPORT_ACTIVATIONS, REPORT_OTHER, REPORT_NCAUSES
};

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

/* "padding", "gathered params", "full grads", "partition imbalance",
 * "broadcast", "root kept gathered", "params sharded", "DDP buckets",
 * "activations and scratch", "other". */
const char *report_cause_name(enum report_cause c);
/* One-letter mark used in table.tex: p g f i b r s d a o. */
char report_cause_mark(enum report_cause c);
const char *report_status_name(enum report_status s);

/* Whether a byte difference is zero, allowing for the rounding of
 * fractional floors such as Ψ·14/3. */
int report_is_zero(double bytes, double scale);

#endif
