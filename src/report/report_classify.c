/*
 * report_classify — departure of each point from the paper floor (ZeRO,
 * SC'20, section 5: Ψ(2+2+K), with the shards of stages 1-3) and its causes,
 * attributed from the measured breakdown. The rules are in the header.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "report/report_classify.h"
#include "util/util.h"

const char *report_cause_name(enum report_cause c)
{
	static const char *const names[REPORT_NCAUSES] = {
		"padding", "gathered params", "full grads", "partition imbalance", "broadcast",
		"root kept gathered", "params sharded", "DDP buckets", "activations and scratch", "other",
	};
	return names[c];
}

char report_cause_mark(enum report_cause c)
{
	return "pgfibrsdao"[c];
}

const char *report_status_name(enum report_status s)
{
	static const char *const names[] = {"none", "baseline", "flagged"};
	return names[s];
}

int report_is_zero(double bytes, double scale)
{
	/* Floors such as Ψ·14/3 are not integers; a millionth of a byte plus a
	 * relative 1e-12 covers their rounding and nothing a tracker counts. */
	return fabs(bytes) <= 1e-6 + 1e-12 * fabs(scale);
}

/* Bytes per element of the states a scheme shards (the paper's table):
 * zero1 the optimizer states, zero2 also grads, zero3 also params. */
static double sharded_bytes(const struct report_data *d, enum zs_scheme s)
{
	switch (s) {
	case ZS_ZERO1: return d->k;
	case ZS_ZERO2: return d->g + d->k;
	case ZS_ZERO3: return d->p + d->g + d->k;
	default: return 0;
	}
}

/* torch's zero1 (ZeroRedundancyOptimizer) partitions whole tensors. */
static int uneven(const struct report_data *d, const struct report_run *r)
{
	return strcmp(d->framework, "torch") == 0 && r->scheme == ZS_ZERO1;
}

/* Split a breakdown's departure from the floor into causes. */
static void attribute_memory(const struct report_data *d, const struct report_run *r,
                             const double *bd, struct report_point *pt)
{
	double state = 0, excess, padding;
	int c;

	for (c = 0; c < REPORT_NCATS; c++)
		if (report_cat_is_state((enum report_cat)c))
			state += bd[c];
	padding = (r->shard_elements - d->params / r->world) * sharded_bytes(d, r->scheme);
	excess = state - pt->floor;
	if (strcmp(d->framework, "torch") == 0 && r->scheme == ZS_ZERO2) { /* FSDP: params a shard too */
		pt->cause[REPORT_PARAMS_SHARDED] = (r->shard_elements - d->params) * d->p;
		excess -= pt->cause[REPORT_PARAMS_SHARDED];
	}
	if (uneven(d, r)) /* whole tensors: nothing padded, the rest is the partition */
		pt->cause[REPORT_IMBALANCE] = excess > 0 ? excess : 0;
	else
		pt->cause[REPORT_PADDING] = excess > 0 ? fmin(excess, padding) : 0;
	pt->cause[REPORT_GATHERED] = bd[REPORT_CAT_GATHERED];
	pt->cause[REPORT_FULL_GRADS] = bd[REPORT_CAT_FULL_GRADS];
	pt->cause[REPORT_BUCKETS] = bd[REPORT_CAT_BUCKETS];
	pt->cause[REPORT_ACTIVATIONS] = bd[REPORT_CAT_ACTIVATIONS] + bd[REPORT_CAT_SCRATCH];
}

/* The first category where the measured breakdown of a memory point
 * differs from the schedule model's, when the theory row has one. */
static void compare_breakdown(const struct report_run *r, enum report_metric m,
                              struct report_point *pt)
{
	const double *meas = m == REPORT_RESIDENT ? r->resident_bd : r->peak_bd;
	const double *sched = m == REPORT_RESIDENT ? r->sched_resident_bd : r->sched_peak_bd;
	int has = m == REPORT_RESIDENT ? r->has_sched_resident_bd : r->has_sched_peak_bd;
	int c;

	pt->breakdown_cat = -1;
	if (!has)
		return;
	for (c = 0; c < REPORT_NCATS; c++)
		if (meas[c] != sched[c]) {
			pt->breakdown_cat = c;
			pt->breakdown_measured = meas[c];
			pt->breakdown_schedule = sched[c];
			return;
		}
}

/* Ring collectives send (N-1)/N of the padded buffer: the floor scaled by P/Ψ. */
static void attribute_comm(const struct report_data *d, const struct report_run *r,
                           struct report_point *pt)
{
	double padding = pt->floor * (r->padded_elements - d->params) / d->params;
	double skipped = 0;

	/* FSDP keeps the root unit (the whole model) gathered into backward:
	 * one all-gather of the padded params fewer, (N-1)·S·p. */
	if (strcmp(d->framework, "torch") == 0 && r->scheme == ZS_ZERO3 && r->unit == ZS_UNIT_MODEL)
		skipped = -(double)(r->world - 1) * r->shard_elements * d->p;
	double rest = pt->departure - r->broadcast_bytes - skipped;

	pt->cause[REPORT_BROADCAST] = r->broadcast_bytes;
	pt->cause[REPORT_ROOT_KEPT] = skipped;
	pt->cause[REPORT_PADDING] = rest > 0 ? fmin(rest, padding) : 0;
}

void report_classify_point(const struct report_data *d, const struct report_run *r,
                           enum report_metric m, struct report_point *pt)
{
	double rest;
	int c, others = 0;

	memset(pt, 0, sizeof *pt);
	pt->breakdown_cat = -1;
	pt->run = r;
	pt->metric = m;
	pt->floor = r->floor[m];
	pt->schedule = r->schedule[m];
	pt->measured = r->measured[m];
	pt->departure = pt->measured - pt->floor;
	if (m == REPORT_RESIDENT)
		attribute_memory(d, r, r->resident_bd, pt);
	else if (m == REPORT_PEAK)
		attribute_memory(d, r, r->peak_bd, pt);
	else
		attribute_comm(d, r, pt);
	if (m != REPORT_COMM)
		compare_breakdown(r, m, pt);

	rest = pt->departure;
	for (c = 0; c < REPORT_OTHER; c++)
		rest -= pt->cause[c];
	pt->cause[REPORT_OTHER] = rest;
	for (c = 0; c < REPORT_NCAUSES; c++) {
		if (report_is_zero(pt->cause[c], pt->floor))
			pt->cause[c] = 0;
		else if (c != REPORT_ACTIVATIONS)
			others = 1;
	}
	if (report_is_zero(pt->departure, pt->floor))
		pt->status = REPORT_NONE;
	else
		pt->status = others ? REPORT_FLAGGED : REPORT_BASELINE;
	/* The schedule model predicts exact bytes, category by category where
	 * it gives them; any difference is a bug. */
	pt->unexplained = pt->measured != pt->schedule || pt->breakdown_cat >= 0;
}

struct report_point *report_classify(const struct report_data *d, size_t *npts)
{
	struct report_point *pts = zs_calloc(d->nruns * REPORT_NMETRICS + 1, sizeof *pts);
	size_t i;
	int m;

	for (i = 0; i < d->nruns; i++)
		for (m = 0; m < REPORT_NMETRICS; m++)
			report_classify_point(d, &d->runs[i], (enum report_metric)m,
			                      &pts[i * REPORT_NMETRICS + (size_t)m]);
	*npts = d->nruns * REPORT_NMETRICS;
	return pts;
}
