/*
 * theory — floors (ZeRO, SC'20, §5 and Table 1) and the exact step schedule
 * (docs/schedule.md) as closed-form sums. See theory.h.
 *
 * The ring-collective costs are the usual ones (Patarasuk & Yuan, 2009): a
 * reduce-scatter or all-gather of M bytes sends (N-1)/N·M bytes per rank, an
 * all-reduce twice that.
 *
 * Decisions docs/formats.md leaves open (to be folded into docs/):
 *   - theory.json rows come in the order schemes x units x worlds, each list
 *     in the order the user gave it.
 *   - Both "floor" and "schedule" carry "comm_per_param_fp32" (bytes / 4Ψ)
 *     next to "comm_elements_per_param" (elements / Ψ), as measured.json does.
 *   - "schedule" also carries "units" (n_u), "shard_elements" (S),
 *     "padded_elements" (P) and "resident_breakdown", with the same keys as
 *     measured.json.
 *   - "padding_bytes" is the rank's share of the padding in its resident
 *     state: (P - Ψ)/N elements at the bytes per param the scheme shards
 *     (0 for dp, k for zero1, g+k for zero2, p+g+k for zero3). Hence
 *     schedule resident = floor resident + padding_bytes, and it is a
 *     fraction of a byte when N does not divide Ψ.
 *   - With --params the unit list is still honoured (it only labels rows,
 *     the floors do not depend on it); --largest-unit L gives every zero3
 *     row "schedule": {"transient_bytes": L·(p+g)} whatever its unit label.
 *     L must not exceed Ψ, and --largest-unit needs --params (a shape knows
 *     its own units).
 *   - "fits" compares the floor's resident bytes with --device-mem (<=), as
 *     docs/formats.md says; the text output also shows the smallest N in the
 *     list at which each scheme fits, or "none".
 *   - Options always override a --spec file, wherever --spec appears.
 *     With --params and neither --world nor --spec, N is the paper's list
 *     1, 4, 16, 64, 256, 1024.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "util/freeze.h"
#include "util/lora.h"
#include "util/schedule.h"
#include "util/nf4.h"
#include "util/util.h"

void theory_bytes_per_param(enum zs_precision pr, enum zs_optimizer opt,
                            struct theory_bytes *out)
{
	int mixed = pr == ZS_MIXED;

	out->p = mixed ? 2 : 4;
	out->g = mixed ? 2 : 4;
	/* fp32 mode updates the working params in place: no master copy. */
	out->master = mixed ? 4 : 0;
	out->adam = opt == ZS_ADAM ? 4 : 0;
	out->momentum = opt == ZS_SGD ? 4 : 0;
	out->k = out->master + 2 * out->adam + out->momentum;
}

/* ------------------------------------------------------------------------ */
/* Floors */

void theory_floor(double params, enum zs_scheme scheme, unsigned world,
                  const struct theory_bytes *b, struct theory_floor *out)
{
	theory_floor_trained(params, params, scheme, world, b, out);
}

/* Ψ the params, Ψ_t the trained ones (all of them without --freeze):
 * p counts over Ψ, g and k over Ψ_t; the sharded terms divided by N. */
void theory_floor_trained(double params, double trained, enum zs_scheme scheme, unsigned world,
                          const struct theory_bytes *b, struct theory_floor *out)
{
	double n = world, psi = params, psi_t = trained;
	double p = b->p, g = b->g, k = b->k;
	/* Ψ·(N-1) before dividing by N keeps the common cases exact. */
	double sent = psi * (n - 1), sent_t = psi_t * (n - 1);

	switch (scheme) {
	case ZS_DP:
		out->resident_bytes = psi * p + psi_t * (g + k);
		out->comm_bytes = sent_t * 2 * g / n;
		out->comm_elements = sent_t * 2 / n;
		break;
	case ZS_ZERO1:
		out->resident_bytes = psi * p + psi_t * g + psi_t * k / n;
		out->comm_bytes = sent_t * (g + p) / n;
		out->comm_elements = sent_t * 2 / n;
		break;
	case ZS_ZERO2:
		out->resident_bytes = psi * p + psi_t * (g + k) / n;
		out->comm_bytes = sent_t * (g + p) / n;
		out->comm_elements = sent_t * 2 / n;
		break;
	case ZS_ZERO3:
		out->resident_bytes = (psi * p + psi_t * (g + k)) / n;
		out->comm_bytes = (sent * 2 * p + sent_t * g) / n;
		out->comm_elements = (sent * 2 + sent_t) / n;
		break;
	case ZS_NSCHEMES: /* no default: a new scheme without its floor is a -Wswitch warning */
		abort();
	}
}

void theory_floor_accum(double params, double trained, enum zs_scheme scheme, unsigned world,
                        const struct theory_bytes *b, unsigned K, struct theory_floor *out)
{
	double n = world, sent = params * (n - 1), sent_t = trained * (n - 1), k = K;
	if (K <= 1)
		return;
	if (scheme == ZS_ZERO2) {
		out->comm_bytes = sent_t * (k * b->g + b->p) / n;
		out->comm_elements = sent_t * (k + 1) / n;
	} else if (scheme == ZS_ZERO3) {
		out->comm_bytes = k * (sent * 2 * b->p + sent_t * b->g) / n;
		out->comm_elements = k * (sent * 2 + sent_t) / n;
	}
}

/* ------------------------------------------------------------------------ */
/* Schedule */

uint64_t theory_params(const struct theory_shape *s)
{
	struct step_params p;

	step_params_mlp(&p, s->widths, s->nwidths);
	uint64_t n = p.numel;
	step_params_free(&p);
	return n;
}

/* Fill the resident categories for `full` working params and grads (else
 * shards) and `full_opt` optimizer state (else a shard). */
static void resident(uint64_t *cat, const struct theory_bytes *b, int mixed,
                     uint64_t param_elems, uint64_t grad_elems, uint64_t opt_elems)
{
	cat[mixed ? ZS_CAT_PARAM16 : ZS_CAT_PARAM32] = param_elems * b->p;
	cat[mixed ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32] = grad_elems * b->g;
	cat[ZS_CAT_MASTER32] = opt_elems * b->master;
	cat[ZS_CAT_ADAM_M] = opt_elems * b->adam;
	cat[ZS_CAT_ADAM_V] = opt_elems * b->adam;
	cat[ZS_CAT_MOMENTUM] = opt_elems * b->momentum;
}

void theory_states(const struct theory_unit_run *units, size_t nruns,
                   const struct theory_bytes *b, enum zs_scheme scheme,
                   unsigned world, struct theory_states *out)
{
	theory_states_trained(units, NULL, nruns, b, scheme, world, out);
}

/* The elements of runs[0..nruns): Ψ = Σ n·count, S = Σ ceil(n/N)·count,
 * the largest n. */
static void runs_sum(const struct theory_unit_run *runs, size_t nruns, uint64_t n, uint64_t *psi, uint64_t *shard,
                     uint64_t *largest)
{
	*psi = *shard = *largest = 0;
	for (size_t u = 0; u < nruns; u++) {
		*psi += runs[u].elements * runs[u].count;
		*shard += (runs[u].elements + n - 1) / n * runs[u].count;
		if (runs[u].count > 0 && runs[u].elements > *largest)
			*largest = runs[u].elements;
	}
}

void theory_states_trained(const struct theory_unit_run *units, const struct theory_unit_run *trained,
                           size_t nruns, const struct theory_bytes *b, enum zs_scheme scheme, unsigned world,
                           struct theory_states *out)
{
	uint64_t n = world, psi, psi_t, S_t, largest_t;
	int mixed = b->master != 0;

	*out = (struct theory_states){0};
	/* Padding of each unit to a multiple of N. */
	runs_sum(units, nruns, n, &psi, &out->shard_elements, &out->largest_unit);
	runs_sum(trained != NULL ? trained : units, nruns, n, &psi_t, &S_t, &largest_t);
	out->params = psi;
	out->trained = psi_t;
	out->padded_elements = n * out->shard_elements;

	/* Resident model state: the scheme's row of zs_shards, the params
	 * over the n_u, the grads and the optimizer state over the t_u. At
	 * N = 1, S = Ψ and all schemes coincide. */
	uint64_t S = out->shard_elements, held[ZS_NSTATES];
	const uint64_t bytes[ZS_NSTATES] = {b->p, b->g, b->k};
	double pad = 0;
	for (int st = 0; st < ZS_NSTATES; st++) {
		int shard = zs_shards[scheme][st] == ZS_SHARD, all = st == ZS_STATE_PARAMS;
		held[st] = shard ? (all ? S : S_t) : (all ? psi : psi_t);
		pad += shard ? (double)((all ? out->padded_elements - psi : n * S_t - psi_t) * bytes[st]) : 0;
	}
	resident(out->resident_breakdown, b, mixed, held[ZS_STATE_PARAMS], held[ZS_STATE_GRADS],
	         held[ZS_STATE_OPTIM]);
	for (int c = 0; c < ZS_NCATS; c++)
		out->resident_bytes += out->resident_breakdown[c];
	out->padding_bytes = pad / (double)n;

	/* The transients alive at the peak (docs/schedule.md, "Peak"): the
	 * grads of the trained elements only. */
	if (n > 1 && scheme == ZS_ZERO2) {
		out->full_grads = psi_t * b->g;
	} else if (n > 1 && scheme == ZS_ZERO3) {
		/* unit=model: largest = Ψ; unit=layer: the largest unit. */
		out->gathered_params = out->largest_unit * b->p;
		out->full_grads = largest_t * b->g;
	}

	/* Communication: f·P = (N-1)·S elements per collective pass; the
	 * grads reduced, zero1/zero2's params gathered over the trained
	 * shard, zero3's params gathered over every unit. */
	uint64_t pass = (n - 1) * S, pass_t = (n - 1) * S_t;
	switch (scheme) {
	case ZS_DP:
		out->comm_bytes = 2 * pass_t * b->g;
		out->comm_elements = 2 * pass_t;
		break;
	case ZS_ZERO1:
	case ZS_ZERO2:
		out->comm_bytes = pass_t * (b->g + b->p);
		out->comm_elements = 2 * pass_t;
		break;
	case ZS_ZERO3:
		out->comm_bytes = pass * 2 * b->p + pass_t * b->g;
		out->comm_elements = 2 * pass + pass_t;
		break;
	case ZS_NSCHEMES:
		abort();
	}
}

uint64_t *theory_units_list(const struct step_params *p, enum zs_unit unit, size_t *n)
{
	uint64_t *units = zs_calloc(p->nlayers + 1, sizeof *units);

	*n = 0;
	if (unit == ZS_UNIT_MODEL)
		units[(*n)++] = p->numel;
	else
		for (size_t l = 0; l < p->nlayers; l++)
			if (p->layer[l].numel > 0)
				units[(*n)++] = p->layer[l].numel;
	return units;
}

void theory_schedule_states(struct theory_schedule *out, const uint64_t *n, const uint64_t *t,
                            const struct theory_bytes *b, enum zs_scheme scheme, unsigned world,
                            struct theory_states *st)
{
	size_t m = out->nunits > 0 ? out->nunits : 1;
	struct theory_unit_run *runs = zs_calloc(2 * m, sizeof *runs);

	for (size_t u = 0; u < out->nunits; u++) {
		runs[u] = (struct theory_unit_run){ n[u], 1 };
		runs[m + u] = (struct theory_unit_run){ t != NULL ? t[u] : n[u], 1 };
	}
	theory_states_trained(runs, runs + m, out->nunits, b, scheme, world, st);
	free(runs);
	out->params = st->params;
	out->shard_elements = st->shard_elements;
	out->padded_elements = st->padded_elements;
	out->resident_bytes = st->resident_bytes;
	memcpy(out->resident_breakdown, st->resident_breakdown, sizeof st->resident_breakdown);
	out->padding_bytes = st->padding_bytes;
	out->comm_bytes = st->comm_bytes;
	out->comm_elements = st->comm_elements;
}

void theory_schedule_walk(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                          enum zs_unit unit, unsigned world, struct theory_schedule *out)
{
	struct theory_desc d;

	theory_desc_mlp(&d, s->widths, s->nwidths, s->batch);
	theory_walk_schedule(&d, &s->bytes, c, scheme, unit, world, out);
	theory_desc_free(&d);
}

/* The paper's: the walk with no framework's transients but the scheme's
 * own (docs/schedule.md, "Peak"): during backward every activation, the
 * two delta buffers and the scheme's transients are alive at once. */
void theory_schedule(const struct theory_shape *s, enum zs_scheme scheme,
                     enum zs_unit unit, unsigned world,
                     struct theory_schedule *out)
{
	theory_schedule_walk(s, NULL, scheme, unit, world, out);
}

uint64_t theory_max_batch(uint64_t fixed, uint64_t per_batch, double usable)
{
	if (!(usable >= (double)fixed) || per_batch == 0)
		return 0;
	/* Whole bytes: the largest b with fixed + b·per_batch <= usable. */
	uint64_t u = usable >= 0x1p63 ? UINT64_C(1) << 63 : (uint64_t)usable;
	return (u - fixed) / per_batch;
}

/* ------------------------------------------------------------------------ */
/* Requests and rows */

void theory_request_bytes(const struct theory_request *req, struct theory_bytes *b)
{
	theory_bytes_per_param(req->config->precision, req->config->optimizer, b);
}

const char *theory_request_precision(const struct theory_request *req)
{
	return req->bf16 ? "bf16" : zs_precision_name(req->config->precision);
}

static void request_shape(const struct theory_request *req, struct theory_shape *s)
{
	s->widths = req->config->widths;
	s->nwidths = req->config->nwidths;
	s->batch = req->config->batch;
	theory_request_bytes(req, &s->bytes);
}

const struct theory_desc *theory_request_desc(const struct theory_request *req, struct theory_desc *own)
{
	const struct theory_desc *d = req->desc;
	if (d != NULL && (req->model == NULL || theory_desc_fits(d, req->model, &req->act, req->config->batch)))
		return d;
	theory_desc_build(own, req);
	return own;
}

double theory_request_params(const struct theory_request *req)
{
	struct theory_shape s;

	if (req->desc != NULL && req->desc->has_params)
		return (double)req->desc->params.numel;
	if (req->model != NULL)
		return (double)theory_tfm_params(req->model);
	if (!req->shape_known)
		return req->params;
	request_shape(req, &s);
	return (double)theory_params(&s);
}

double theory_request_trained(const struct theory_request *req)
{
	if (req->model == NULL || !zs_config_trains_part(req->config))
		return theory_request_params(req);
	struct theory_desc own;
	const struct theory_desc *d = theory_request_desc(req, &own);
	double t = (double)zs_freeze_trained(&d->params);
	if (d == &own)
		theory_desc_free(&own);
	return t;
}

double theory_request_usable(const struct theory_request *req)
{
	return req->device_mem - req->reserve;
}

/* QLoRA's 4-bit base at the paper level and in the floor (docs/finetune.md,
 * "What zerosim predicts for LoRA"): the base's linear weights held as
 * bitsandbytes stores them (util/nf4.h's nf4_base_count: n/2 packed, the
 * absmax and the per-layer constants), not p bytes each; sharded as the
 * scheme shards params (whole under the plain loop and DDP, the only
 * wrappers that run it). */
static void qbase_level(const struct theory_desc *d, const struct zs_config *c, const struct theory_bytes *b,
                        enum zs_scheme scheme, unsigned world, struct theory_row *r)
{
	struct nf4_base q;
	nf4_base_count(&d->params, c->double_quant, &q);
	int shard = zs_shards[scheme][ZS_STATE_PARAMS] == ZS_SHARD && world > 1;
	uint64_t less = q.weights * b->p - q.held;
	if (shard)
		less /= world;
	int cat = b->master != 0 ? ZS_CAT_PARAM16 : ZS_CAT_PARAM32;
	r->floor.resident_bytes -= (double)less;
	r->peak.states.resident_bytes -= less;
	r->peak.states.resident_breakdown[cat] -= less;
	r->peak.peak_breakdown[cat] -= less;
	r->peak.peak_bytes -= less;
}

int theory_described_at(const struct theory_request *req, enum zs_scheme scheme, unsigned world, char **why)
{
	struct zs_config one = *req->config;
	one.nworld = one.nschemes = 1;
	one.world[0] = world;
	one.schemes[0] = scheme;
	return zs_freeze_paper_check(&one, req->model, why) == 0 && zs_lora_paper_check(&one, req->model, why) == 0;
}

void theory_row(const struct theory_request *req, enum zs_scheme scheme, enum zs_unit unit,
                unsigned world, struct theory_row *r)
{
	struct theory_shape s;
	uint64_t b = req->config->batch;

	*r = (struct theory_row){ .scheme = scheme, .unit = unit, .world = world,
	                          .fits = -1, .fits_peak = -1 };
	struct theory_desc own;
	const struct theory_desc *d = theory_request_desc(req, &own);
	request_shape(req, &s);
	double psi = req->model != NULL ? (double)d->params.numel : theory_request_params(req);
	double psi_t = req->model != NULL ? (double)zs_freeze_trained(&d->params) : psi;
	theory_floor_trained(psi, psi_t, scheme, world, &s.bytes, &r->floor);
	theory_floor_accum(psi, psi_t, scheme, world, &s.bytes, req->config->grad_accum, &r->floor);
	if (req->model != NULL) {
		theory_peak_of(req->model, &d->params, &req->act, &s.bytes, b, scheme, unit, world, &r->peak);
		if (req->config->quant_nf4)
			qbase_level(d, req->config, &s.bytes, scheme, world, r);
		/* the PyTorch step (--wrapper none, ddp, fsdp) describes SDPA's
		 * kernels itself (util/autograd.c, theory_autograd_check passed),
		 * whether --attn sdpa was given or is 2.x's default */
		struct theory_act_opts act = req->act;
		if (zs_wrapper_step(req->config))
			act.flash = 0;
		/* autocast (the PyTorch step only, zs_precision_amp_check): fp32
		 * state, the step describing its own 16-bit activations */
		if (req->config->precision == ZS_AMP_BF16 || req->config->precision == ZS_AMP_FP16)
			act.elem = 4;
		/* the paper's step with LoRA (or --freeze) is not described at
		 * every (scheme, N) the default schemes reach (zero3 at N > 1:
		 * cmd_theory refuses it named by hand): the paper level alone,
		 * no schedule stands in */
		r->undescribed = req->config->framework == ZS_FW_PAPER && zs_config_trains_part(req->config) &&
		                 !theory_described_at(req, scheme, world, NULL);
		r->model_sched = !req->bf16 && /* measure runs no bf16 */
		                 !r->undescribed && theory_tfm_has_schedule(req->model, &act, &s.bytes);
		if (r->model_sched &&
		    theory_tfm_framework_schedule(req->model, d, &req->act, &s.bytes, req->config, b, scheme, unit, world,
		                                  &r->sched) != 0)
			r->model_sched = 0; /* the PyTorch step does not describe this N: no schedule stands in */
		r->peak_bytes = r->peak.peak_bytes;
		r->peak_per_batch = r->peak.activations_per_sequence;
		r->has_peak = 1;
	} else if (req->shape_known) {
		theory_walk_schedule(d, &s.bytes, req->config, scheme, unit, world, &r->sched);
		r->peak_bytes = r->sched.peak_bytes;
		/* The MLP's activations and scratch are b times their b = 1 bytes. */
		r->peak_per_batch = (r->sched.peak_breakdown[ZS_CAT_ACTIVATIONS]
		                     + r->sched.peak_breakdown[ZS_CAT_SCRATCH]) / b;
		r->has_peak = 1;
	}
	r->peak_fixed = r->peak_bytes - b * r->peak_per_batch;
	if (req->device_mem > 0) {
		double usable = theory_request_usable(req);

		r->fits = r->floor.resident_bytes <= usable;
		if (r->has_peak) {
			r->fits_peak = (double)r->peak_bytes <= usable;
			r->max_batch = theory_max_batch(r->peak_fixed, r->peak_per_batch, usable);
		}
	}
	if (d == &own)
		theory_desc_free(&own);
}
