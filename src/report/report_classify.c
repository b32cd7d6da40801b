/*
 * report_classify — departure of each point from the paper floor (ZeRO,
 * SC'20, section 5: Ψ(2+2+K), with the shards of stages 1-3) and its causes,
 * attributed from the measured breakdown. The rules are in the header.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "report/report_classify.h"
#include "util/schedule.h"
#include "util/util.h"

static const struct report_cause_info causes[REPORT_NCAUSES] = {
	{"padding", "padding", 'p', 0, "padding of the shards",
	 "\\emph{padding}: model state above the floor, up to the padding of the run's shards (each unit "
	 "of $n$ elements padded to $N\\lceil n/N\\rceil$); for comm, the padded part of the buffers sent"},
	{"gathered params", "gathered_params", 'g', 0, "gathered params",
	 "\\emph{gathered params}: ZeRO-3's transient buffers of a unit's whole params"},
	{"full grads", "full_grads", 'f', 0, "full grads",
	 "\\emph{full grads}: transient buffers of a unit's (or the model's) whole grads before they are "
	 "reduced, as ZeRO-2 and ZeRO-3 hold them"},
	{"partition imbalance", "partition_imbalance", 'i', 1,
	 "partition imbalance (whole tensors on unequal ranks)",
	 "\\emph{partition imbalance} (torch's zero1, ZeroRedundancyOptimizer): model state above the "
	 "floor where whole tensors go to unequal ranks and nothing is padded"},
	{"broadcast", "broadcast", 'b', 1, "broadcast of each tensor from its owner",
	 "\\emph{broadcast} (torch's zero1): the measured broadcasts' bytes, a collective the paper's "
	 "zero1 does not send"},
	{"root kept gathered", "root_kept_gathered", 'r', 1, "the root unit kept gathered (one all-gather fewer)",
	 "\\emph{root kept gathered} (torch's zero3 with the whole model as one FSDP unit): the backward "
	 "all-gather FSDP does not send, $-(N-1)\\,S\\,p$ bytes"},
	{"params sharded", "params_sharded", 's', 1, "params sharded between steps (FSDP)",
	 "\\emph{params sharded} (torch's zero2, FSDP's SHARD\\_GRAD\\_OP): a shard of the params between "
	 "steps where the paper's zero2 holds them all, $(S-\\Psi)\\,p$ bytes"},
	{"buckets", "buckets", 'd', 1,
	 "a framework's buckets (DDP's gradient buckets, FSDP's reduce-scatter and all-gather buffers, DeepSpeed's "
	 "reduce bucket)",
	 "\\emph{buckets}: the measured \\texttt{buckets} category, a framework's own communication "
	 "buffers (torch DDP's gradient buckets, resident; FSDP's padded grad copy, output shard and "
	 "16-bit local shard, in a unit's post-backward hook and unshard; DeepSpeed's reduce bucket, allocated at its "
	 "full size whatever the model and held through backward)"},
	{"grad partition", "grad_partition", 'q', 1,
	 "grads held as a partition (DeepSpeed's zero1), or only a buffer of them (offloaded)",
	 "\\emph{grad partition}: the measured grads between steps against the paper's for the scheme "
	 "($\\Psi g$, or $S g$ where grads are sharded): DeepSpeed's zero1 keeps only its partition, and "
	 "offloaded keeps on the device only a buffer of the largest tensor's grads"},
	{"fp32 partition copy", "fp32_partition_copy", 'c', 1,
	 "an fp32 copy of the partition in fp32 (DeepSpeed)",
	 "\\emph{fp32 partition copy} (DeepSpeed in fp32): the fp32 partition DeepSpeed clones from the "
	 "params whatever the precision (the \\texttt{master32} category), which the paper's fp32 "
	 "accounting, with no master copy, does not hold"},
	{"offloaded to host", "offloaded", 'h', 1, "optimizer state (and, offloading params, the params' partitions) on the host",
	 "\\emph{offloaded to host} (\\texttt{--offload}): the optimizer state the device no longer "
	 "holds, measured against $S\\,k$ (or $\\Psi k$), and with \\texttt{--offload params} the params' "
	 "partitions, against $S\\,p$; the report's figures are the device's, and what went to the host is "
	 "in measured.json's host figures (\\texttt{host\\_resident\\_bytes}, \\texttt{host\\_peak\\_bytes})"},
	{"step buffers", "step_buffers", 't', 1,
	 "the optimizer step's buffers (DeepSpeed's fp32 gradient partition)",
	 "\\emph{step buffers}: model-state bytes at the peak above those held between steps "
	 "(DeepSpeed's step converts the grad partition to fp32 and, offloaded, copies the fp32 "
	 "partition to the device)"},
	{"coordinator's gathers", "coordinator_gathers", 'w', 1,
	 "DeepSpeed ZeRO-3's all-gathers against the paper's two a step",
	 "\\emph{coordinator's gathers} (DeepSpeed's zero3, comm): the measured all-gather bytes against "
	 "the paper's two all-gathers of the padded params a micro-step ($2K$ a step under "
	 "\\texttt{--grad-accum}~$K$; DeepSpeed's coordinator gathers each "
	 "module twice in step~1 and keeps it whole from forward into backward after, and gathers the "
	 "persistent params once after each step; the figure is the mean over the steps)"},
	{"activations and scratch", "activations_and_scratch", 'a', 0,
	 "activations and scratch (held by every scheme: not flagged)",
	 "\\emph{activations and scratch}: the step's per-batch buffers, merged"},
	{"other", "other", 'o', 0, "other buffers", "\\emph{other}: whatever is left"},
};

const struct report_cause_info *report_cause_info(enum report_cause c)
{
	return &causes[c];
}

const char *report_cause_name(enum report_cause c)
{
	return causes[c].name;
}

char report_cause_mark(enum report_cause c)
{
	return causes[c].mark;
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

static double sum_cats(const double *bd, int (*pick)(enum report_cat))
{
	double t = 0;
	for (int c = 0; c < REPORT_NCATS; c++)
		if (pick((enum report_cat)c))
			t += bd[c];
	return t;
}

static int is_grad(enum report_cat c) { return c == REPORT_CAT_GRAD16 || c == REPORT_CAT_GRAD32; }
static int is_param(enum report_cat c) { return c == REPORT_CAT_PARAM16 || c == REPORT_CAT_PARAM32; }
static int is_optim(enum report_cat c) { return c >= REPORT_CAT_MASTER32 && c <= REPORT_CAT_MOMENTUM; }

/* Ψ_t; a report_data that names none (0) trains every parameter. */
static double trained_of(const struct report_data *d)
{
	return d->trained > 0 ? d->trained : d->params;
}

/* The trained elements' shard S_t (--freeze: docs/schedule.md, "Frozen
 * parameters under the paper's schedule"), which no file names: the
 * schedule's Adam m (or momentum, 4 bytes an element) is S_t elements
 * wherever the scheme shards the optimizer state; S without --freeze. */
static double trained_shard(const struct report_data *d, const struct report_run *r)
{
	if (trained_of(d) == d->params || r->scheme == ZS_DP || !r->has_sched_resident_bd)
		return r->shard_elements;
	return (r->sched_resident_bd[REPORT_CAT_ADAM_M] + r->sched_resident_bd[REPORT_CAT_MOMENTUM]) / 4;
}

/* Split a breakdown's departure from the floor into causes. Grads and the
 * optimizer state are judged between steps (the resident breakdown), so
 * that what the step adds on top of them is a cause of its own. Under
 * --freeze the floor's g and k are over Ψ_t, and so is what the causes
 * measure them against (S_t where sharded). */
static void attribute_memory(const struct report_data *d, const struct report_run *r,
                             const double *bd, struct report_point *pt)
{
	double state = sum_cats(bd, report_cat_is_state), excess, padding;
	double S = r->shard_elements, psi = d->params;
	double S_t = trained_shard(d, r), psi_t = trained_of(d);
	const enum zs_span *row = zs_shards[r->scheme];

	if (psi_t == psi)
		padding = (S - psi / r->world) * sharded_bytes(d, r->scheme);
	else /* the params' padding (zero3's) over every unit, the rest over the trained ones */
		padding = (S - psi / r->world) * (r->scheme == ZS_ZERO3 ? d->p : 0) +
		          (S_t - psi_t / r->world) * (sharded_bytes(d, r->scheme) - (r->scheme == ZS_ZERO3 ? d->p : 0));
	excess = state - pt->floor;
	if (strcmp(d->framework, "torch") == 0 && r->scheme == ZS_ZERO2) { /* FSDP: params a shard too */
		pt->cause[REPORT_PARAMS_SHARDED] = (S - psi) * d->p;
		excess -= pt->cause[REPORT_PARAMS_SHARDED];
	}
	if (strcmp(d->framework, "deepspeed") == 0) {
		pt->cause[REPORT_GRAD_PARTITION] = sum_cats(r->resident_bd, is_grad) -
		                                   (row[ZS_STATE_GRADS] == ZS_FULL ? psi_t : S_t) * d->g;
		if (d->p == 4) /* fp32: the paper has no master copy */
			pt->cause[REPORT_FP32_COPY] = r->resident_bd[REPORT_CAT_MASTER32];
		if (d->offload)
			pt->cause[REPORT_OFFLOADED] = sum_cats(r->resident_bd, is_optim) -
			                              (row[ZS_STATE_OPTIM] == ZS_FULL ? psi_t : S_t) * d->k;
		if (d->offload_params) /* the params' partitions too (the persistent ones stay whole: gathered) */
			pt->cause[REPORT_OFFLOADED] += sum_cats(r->resident_bd, is_param) -
			                               (row[ZS_STATE_PARAMS] == ZS_FULL ? psi : S) * d->p;
		if (pt->metric == REPORT_PEAK)
			pt->cause[REPORT_STEP_BUFFERS] = state - sum_cats(r->resident_bd, report_cat_is_state);
		excess -= pt->cause[REPORT_GRAD_PARTITION] + pt->cause[REPORT_FP32_COPY] + pt->cause[REPORT_OFFLOADED] +
		          pt->cause[REPORT_STEP_BUFFERS];
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
	/* DeepSpeed's zero3: its coordinator's all-gathers against the paper's
	 * two of the padded params a micro-step, (N-1)/N of 2·K·P·p (the
	 * floor is K-fold likewise). */
	double gathers = strcmp(d->framework, "deepspeed") == 0 && r->scheme == ZS_ZERO3 ?
	                 r->allgather_bytes - 2.0 * d->grad_accum * (r->world - 1) / r->world * r->padded_elements * d->p : 0;
	double rest = pt->departure - r->broadcast_bytes - skipped - gathers;

	pt->cause[REPORT_BROADCAST] = r->broadcast_bytes;
	pt->cause[REPORT_ROOT_KEPT] = skipped;
	pt->cause[REPORT_GATHERS] = gathers;
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
	 * it gives them; any difference is a bug. The rule is the one a
	 * transformer's rows are judged by (report_data.h). */
	pt->unexplained = report_run_departs(r, m, &pt->breakdown_cat);
	if (pt->breakdown_cat >= 0) {
		pt->breakdown_measured = (m == REPORT_RESIDENT ? r->resident_bd : r->peak_bd)[pt->breakdown_cat];
		pt->breakdown_schedule = (m == REPORT_RESIDENT ? r->sched_resident_bd : r->sched_peak_bd)[pt->breakdown_cat];
	}
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
