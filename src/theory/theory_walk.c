/*
 * theory_walk — the step description (util/step.h) built once for a
 * request, and the one walk of it: the exact schedule of the MLP and of
 * zerosim's own transformer under every framework (docs/schedule.md,
 * "Peak", "Frameworks", "Transformers: the engine's schedule"), from the
 * shape alone. The description's buffers are allocated and freed
 * where their lifetimes say, layer by layer, forward then backward; a
 * framework is a callback the walk calls at fixed points of each layer
 * (before it, between making its buffers and freeing the recomputed ones,
 * after it) and of the step, with its own state: the paper's, torch's
 * FSDP and DeepSpeed's ZeRO-1/2 by unit (struct units_fw: what each unit
 * gathers and reduces; DDP's buckets and ZeroRedundancyOptimizer's
 * partition are resident), DeepSpeed's ZeRO-3 by module (struct ds3_fw:
 * the coordinator's answers, util/ds_coord.h, and its reduce bucket). The
 * peak is the largest total, and its breakdown the categories at the
 * moment the total first reached it, as a tracker records them.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "util/ds_coord.h"
#include "util/freeze.h"
#include "util/lora.h"
#include "util/nf4.h"
#include "util/step.h"
#include "util/util.h"

/* ------------------------------------------------------------------------ */
/* The description */

/* Index the buffers by layer (counting sort, so each list keeps the
 * description's order). */
static void index_buffers(struct theory_desc *d)
{
	size_t nl = d->params.nlayers, nb = d->bufs.n;
	d->made_first = zs_calloc(nl + 1, sizeof *d->made_first);
	d->freed_first = zs_calloc(nl + 1, sizeof *d->freed_first);
	d->made_at = zs_calloc(nb > 0 ? nb : 1, sizeof *d->made_at);
	d->freed_at = zs_calloc(nb > 0 ? nb : 1, sizeof *d->freed_at);
	for (size_t i = 0; i < nb; i++) {
		const struct step_buffer *x = &d->bufs.buf[i];
		if (x->when == STEP_AT_LAYER)
			d->made_first[x->layer + 1]++;
		if (x->freed_after != STEP_END_OF_BACKWARD && !x->freed_fwd)
			d->freed_first[x->freed_after + 1]++;
	}
	for (size_t l = 0; l < nl; l++) {
		d->made_first[l + 1] += d->made_first[l];
		d->freed_first[l + 1] += d->freed_first[l];
	}
	size_t *mk = zs_calloc(nl + 1, sizeof *mk), *fr = zs_calloc(nl + 1, sizeof *fr);
	for (size_t i = 0; i < nb; i++) {
		const struct step_buffer *x = &d->bufs.buf[i];
		if (x->when == STEP_AT_LAYER)
			d->made_at[d->made_first[x->layer] + mk[x->layer]++] = i;
		if (x->freed_after != STEP_END_OF_BACKWARD && !x->freed_fwd)
			d->freed_at[d->freed_first[x->freed_after] + fr[x->freed_after]++] = i;
	}
	free(mk);
	free(fr);
}

void theory_desc_model(struct theory_desc *d, const struct zs_model *m, const struct theory_act_opts *o,
                       uint64_t batch)
{
	int mixed = o->elem == 2;
	memset(d, 0, sizeof *d);
	snprintf(d->freeze, sizeof d->freeze, "%s", o->freeze != NULL ? o->freeze : "");
	d->freeze_graph = o->freeze_graph || o->lora != NULL;
	d->lora = o->lora;
	if (o->lora == NULL) {
		step_params_build(&d->params, m);
		step_params_freeze(&d->params, d->freeze);
	} else if (zs_lora_params(&d->params, m, m, o->lora, NULL) != 0)
		abort(); /* the CLI refused it (zs_lora_paper_check, cmd_theory's lora_check) */
	d->has_params = 1;
	/* mixed precision: the params give the conversion buffers' size */
	step_buffers_build(&d->bufs, m, mixed ? &d->params : NULL, batch, o->seq, mixed, o->recompute);
	if (d->freeze_graph)
		step_buffers_freeze(&d->bufs, &d->params, o->recompute);
	step_buffers_lora(&d->bufs, &d->params, batch, o->seq, mixed, o->recompute);
	if (o->lora != NULL && o->lora->quant_nf4 && zs_lora_engine(o->lora)) /* the 4-bit base's scratch */
		nf4_step_buffers(&d->bufs, &d->params, mixed, o->lora->double_quant);
	d->has_buffers = 1;
	d->model = m;
	d->batch = batch;
	d->seq = o->seq;
	d->elem = o->elem;
	d->recompute = o->recompute;
	d->routing = o->routing;
	index_buffers(d);
}

void theory_desc_mlp(struct theory_desc *d, const size_t *widths, size_t nwidths, uint64_t batch)
{
	memset(d, 0, sizeof *d);
	step_params_mlp(&d->params, widths, nwidths);
	d->has_params = 1;
	step_buffers_mlp(&d->bufs, widths, nwidths, batch);
	d->has_buffers = 1;
	d->batch = batch;
	d->elem = 4;
	index_buffers(d);
}

void theory_desc_build(struct theory_desc *d, const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	if (req->model != NULL)
		theory_desc_model(d, req->model, &req->act, c->batch);
	else if (req->shape_known)
		theory_desc_mlp(d, c->widths, c->nwidths, c->batch);
	else
		memset(d, 0, sizeof *d);
}

int theory_desc_fits(const struct theory_desc *d, const struct zs_model *m, const struct theory_act_opts *o,
                     uint64_t batch)
{
	return d->has_buffers && d->model == m && d->batch == batch && d->seq == o->seq && d->elem == o->elem &&
	       d->recompute == o->recompute && d->routing == o->routing &&
	       strcmp(d->freeze, o->freeze != NULL ? o->freeze : "") == 0 &&
	       d->freeze_graph == (o->freeze_graph || o->lora != NULL) && d->lora == o->lora;
}

void theory_desc_free(struct theory_desc *d)
{
	if (d->has_params)
		step_params_free(&d->params);
	void *lists[] = {d->bufs.buf, d->made_at, d->made_first, d->freed_at, d->freed_first};
	for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
		free(lists[i]);
	memset(d, 0, sizeof *d);
}

/* ------------------------------------------------------------------------ */
/* The walk */

/* A running total by category, with its first maximum, and the most
 * held in each phase of the step (the tracker's phases, util/schedule.h:
 * the walk's state starts in the set-up, the resident state). */
struct walk {
	uint64_t cur[ZS_NCATS], total, peak, at_peak[ZS_NCATS];
	enum zs_phase phase, peak_phase; /* the phase now; the one the peak was first reached in */
	uint64_t phase_peak[ZS_NPHASES];
	int entered[ZS_NPHASES];
	/* With a trace (theory_walk_trace): each add is one block allocated,
	 * each sub the block(s) it frees; key names a step buffer's block
	 * (its index + 1) while buf_add adds or frees it, else 0. */
	struct theory_trace *tr;
	uint64_t key;
	/* Gradient accumulation: the micro-step walked (0..nmicro-1) of
	 * nmicro a step (0 or 1: none), as the engine's run runs them. */
	unsigned micro, nmicro;
	/* A mixture's: the model, the walked rank's tokens per expert (NULL:
	 * a routed buffer at its bound), and the step walked (0, 1, ...). */
	const struct zs_model *model;
	const struct theory_rank_counts *counts;
	unsigned step;
	/* The framework makes a layer's routed buffers (its experts') itself,
	 * where the engine does: inside its z3 leaf, once the router has run
	 * (DeepSpeed's ZeRO-3 by module: ds3_routed). */
	int routed_by_fw;
};

/* Enter phase p: it holds at least what is held as it begins. */
static void walk_phase(struct walk *w, enum zs_phase p)
{
	w->phase = p;
	w->entered[p] = 1;
	if (w->total > w->phase_peak[p])
		w->phase_peak[p] = w->total;
}

static void walk_add(struct walk *w, enum zs_cat c, uint64_t bytes)
{
	w->cur[c] += bytes;
	w->total += bytes;
	if (w->total > w->peak) {
		w->peak = w->total;
		w->peak_phase = w->phase;
		memcpy(w->at_peak, w->cur, sizeof w->cur);
	}
	w->entered[w->phase] = 1;
	if (w->total > w->phase_peak[w->phase])
		w->phase_peak[w->phase] = w->total;
	if (w->tr != NULL)
		theory_trace_alloc(w->tr, w->phase, c, bytes, w->key);
}

/* The walk's peaks by phase into out (after the walk). */
static void walk_phases_out(const struct walk *w, struct theory_schedule *out)
{
	out->has_phases = 1;
	out->peak_phase = w->peak_phase;
	for (int p = 0; p < ZS_NPHASES; p++) {
		out->phase_entered[p] = w->entered[p];
		out->phase_peak[p] = w->phase_peak[p];
	}
}

static void walk_sub(struct walk *w, enum zs_cat c, uint64_t bytes)
{
	w->cur[c] -= bytes;
	w->total -= bytes;
	if (w->tr != NULL)
		theory_trace_free(w->tr, w->phase, c, bytes, w->key);
}

/* A buffer's bytes at this step: a routed one's rows are its expert's
 * tokens (the backward's scratch, the most any expert of any block got),
 * as the engine's alloc_tensor sizes them after the router has run. */
static uint64_t buf_bytes(const struct walk *w, const struct step_buffer *x)
{
	uint64_t row = w->model != NULL && w->counts != NULL ? step_moe_row(w->model, x) : 0;
	if (row == 0)
		return x->elements * x->esize;
	const struct theory_rank_counts *rc = w->counts;
	size_t E = rc->experts;
	const uint64_t *c = rc->counts + (w->step % rc->steps) * rc->blocks * E;
	long e = step_moe_expert(x);
	uint64_t n = 0;
	if (e >= 0)
		n = c[(size_t)x->block * E + (size_t)e];
	else
		for (size_t i = 0; i < rc->blocks * E; i++)
			n = c[i] > n ? c[i] : n;
	return n * row * x->esize;
}

/* Whether walk_steps leaves buffer x to the framework (routed_by_fw). */
static int fw_routed(const struct walk *w, const struct step_buffer *x)
{
	return w->routed_by_fw && step_moe_expert(x) >= 0;
}

static void buf_add(struct walk *w, const struct step_buffers *b, const struct step_buffer *x, int add)
{
	enum zs_cat c = x->cat == ZS_CAT_ACTIVATIONS ? ZS_CAT_ACTIVATIONS : ZS_CAT_SCRATCH;
	uint64_t bytes = buf_bytes(w, x);
	if (bytes == 0) /* an expert with no tokens: nothing is made */
		return;
	w->key = (uint64_t)(x - b->buf) + 1;
	(add ? walk_add : walk_sub)(w, c, bytes);
	w->key = 0;
}

/* The points of a step where the walk calls its framework. Layer l's
 * forward: before it (FWD_PRE), its buffers made (FWD_MATMUL, where it
 * runs one: the layer's step runs its first matmul; FWD_RUN: its modules
 * run), the recomputed ones freed (FWD_POST); its backward: BWD_PRE, the
 * recomputed ones made again (BWD_RUN), those it frees freed (BWD_POST).
 * A framework that runs the layer whole places the matmul at FWD_MATMUL
 * (walk_matmul); one that runs it module by module, where that module
 * runs in FWD_RUN (DeepSpeed's ZeRO-3). */
enum walk_point { STEP_BEGIN, FWD_PRE, FWD_MATMUL, FWD_RUN, FWD_POST, BWD_BEGIN, BWD_PRE, BWD_RUN, BWD_POST, STEP_END };

/* A framework in the walk: called at each point with its own state. */
struct walk_fw {
	void (*at)(void *ctx, struct walk *w, enum walk_point pt, size_t layer, unsigned step);
	void *ctx;
};

/* The module of layer l (forward order) that runs its first matmul, as
 * the step description says (step_layer.matmul_module; the engine reads
 * the same); -1: none. */
static long layer_matmul(const struct theory_desc *d, size_t l)
{
	return d->params.layer[l].matmul_module;
}

/* The step runs a matmul: the trace's first asks for cuBLAS's workspace
 * (theory_trace_matmul; not the walk's bytes: the tracker counts none). */
static void walk_matmul(struct walk *w)
{
	if (w->tr != NULL)
		theory_trace_matmul(w->tr, w->phase);
}

/* One walk of d's step, steps times, from w's state. */
static void walk_steps(const struct theory_desc *d, struct walk *w, unsigned steps, const struct walk_fw *fw)
{
	const struct step_buffers *b = &d->bufs;
	size_t nl = d->params.nlayers;
	unsigned K = w->nmicro > 1 ? w->nmicro : 1;
	for (unsigned step = 1, micro = 0; step <= steps; micro = (micro + 1) % K, step += micro == 0) {
		/* the state each step starts from is the set-up's (a later
		 * step's can hold more: DeepSpeed's ZeRO-3 gathers its
		 * persistent params after step()); the phases are the most over
		 * every step; a step is K micro-steps (the framework's STEP_END
		 * steps the optimizer after the last) */
		w->micro = micro;
		w->step = step - 1;
		if (micro == 0)
			walk_phase(w, ZS_PH_SETUP);
		walk_phase(w, ZS_PH_FORWARD);
		fw->at(fw->ctx, w, STEP_BEGIN, 0, step);
		for (size_t i = 0; i < b->n; i++)
			if (b->buf[i].when == STEP_AT_FORWARD)
				buf_add(w, b, &b->buf[i], 1);
		for (size_t l = 0; l < nl; l++) {
			size_t m0 = d->made_first[l], m1 = d->made_first[l + 1];
			fw->at(fw->ctx, w, FWD_PRE, l, step);
			for (size_t k = m0; k < m1; k++)
				if (!fw_routed(w, &b->buf[d->made_at[k]]))
					buf_add(w, b, &b->buf[d->made_at[k]], 1);
			if (layer_matmul(d, l) >= 0)
				fw->at(fw->ctx, w, FWD_MATMUL, l, step);
			fw->at(fw->ctx, w, FWD_RUN, l, step);
			for (size_t k = m0; k < m1; k++)
				if (b->buf[d->made_at[k]].recomputed)
					buf_add(w, b, &b->buf[d->made_at[k]], 0);
			/* --freeze: outside the graph, what this forward read last
			 * (the previous layer's output, its own) */
			for (size_t k = d->made_first[l > 0 ? l - 1 : 0]; k < m1; k++)
				if (b->buf[d->made_at[k]].freed_fwd == l + 1)
					buf_add(w, b, &b->buf[d->made_at[k]], 0);
			fw->at(fw->ctx, w, FWD_POST, l, step);
		}
		walk_phase(w, ZS_PH_BACKWARD);
		for (size_t i = 0; i < b->n; i++)
			if (b->buf[i].when == STEP_AT_BACKWARD)
				buf_add(w, b, &b->buf[i], 1);
		fw->at(fw->ctx, w, BWD_BEGIN, 0, step);
		for (size_t l = nl; l-- > 0;) {
			fw->at(fw->ctx, w, BWD_PRE, l, step);
			for (size_t k = d->made_first[l]; k < d->made_first[l + 1]; k++)
				if (b->buf[d->made_at[k]].recomputed && !fw_routed(w, &b->buf[d->made_at[k]]))
					buf_add(w, b, &b->buf[d->made_at[k]], 1);
			fw->at(fw->ctx, w, BWD_RUN, l, step);
			for (size_t k = d->freed_first[l]; k < d->freed_first[l + 1]; k++)
				buf_add(w, b, &b->buf[d->freed_at[k]], 0);
			fw->at(fw->ctx, w, BWD_POST, l, step);
		}
		for (size_t i = 0; i < b->n; i++)
			if (b->buf[i].freed_after == STEP_END_OF_BACKWARD && !b->buf[i].freed_fwd)
				buf_add(w, b, &b->buf[i], 0);
		/* after backward: the framework's reduce and step() (it marks
		 * the phases, as the engine's tracker does) */
		fw->at(fw->ctx, w, STEP_END, 0, step);
	}
}

int theory_tfm_has_schedule(const struct zs_model *m, const struct theory_act_opts *o,
                              const struct theory_bytes *b)
{
	/* fp32, or mixed (fp32 master, 16-bit activations); any number of
	 * blocks (the engine's are bounded by memory only); every framework
	 * and scheme (a mixture: zs_moe_scope) */
	return o->elem == (b->master != 0 ? 2 : 4) && !o->flash && o->seq <= m->positions;
}

/* ------------------------------------------------------------------------ */
/* Frameworks by unit: the paper's, torch's, DeepSpeed's ZeRO-1/2 */

/* What a scheme gathers and reduces unit by unit: unit u's params are
 * gathered at gp bytes an element (0: never) for its forward and, unless
 * still held, for its backward, its full grads at fg bytes an element
 * for its backward; a unit's gathered params stay from its forward into
 * its backward for every unit (keep_all: FSDP's SHARD_GRAD_OP) or the
 * root (keep_root: FULL_SHARD's whole model, unit=model); prefetch: a
 * unit's backward gathers the next one of backward first (BACKWARD_PRE);
 * full: full grads through backward (paper zero2's Ψ·g, DeepSpeed
 * ZeRO-1's), after bucket bytes of DeepSpeed's reduce buckets, both
 * from backward's start to its end; step: DeepSpeed's step()'s buffers on
 * the state between steps (every activation is freed by then). */
struct events {
	unsigned gp, fg;
	int keep_all, keep_root, prefetch;
	uint64_t full, bucket;
	unsigned nbucket; /* the reduce buckets: nbucket blocks of bucket bytes (two with overlap_comm) */
	/* FSDP at N > 1: mp, the bytes of a slot of the 16-bit local shard an
	 * unshard sends from (_mp_shard; 0 in fp32); post_backward, its hook's
	 * padded grad copy and output shard; cast, the output's fp32 cast
	 * beside it (0 in fp32). Category buckets. */
	unsigned mp, cast;
	int post_backward; /* and a gathered copy padded to N·s_u (_full_param_padded) */
	uint64_t step[ZS_NCATS];
	/* DDP's gradient buckets, their elements at bucket_bytes each, in the
	 * order DDP makes them: the resident `buckets` as a trace's blocks */
	uint64_t *buckets;
	size_t nbuckets;
	unsigned bucket_bytes;
	/* DeepSpeed's ZeRO-2: its reduce bucket of ds_bucket elements filled
	 * unit by unit, each reduction marking the reduce phase; under
	 * gradient_accumulation_steps nmicro > 1 a micro-step after the first
	 * reduces into a new grad partition of acc bytes (category grad_cat),
	 * made at its first reduction, added into the kept one and freed at
	 * its end (scheme_deepspeed.c). */
	unsigned nmicro;
	uint64_t acc, ds_bucket;
	enum zs_cat grad_cat;
	/* The paper's schedule under accumulation (nmicro > 1), a micro-step
	 * after the first: acc_fg, the bytes an element of a unit's transient
	 * full grads, added into the resident full grads after the unit (dp,
	 * zero1, every scheme at N = 1); acc_rs, of a unit's slots a
	 * reduce-scatter writes before they are added into the shard (zero2
	 * after backward, zero3 after each unit's), category grad_cat. */
	unsigned acc_fg, acc_rs;
	size_t nunits;
	/* The elements of each unit the grads hold (--freeze under the
	 * paper's schedule: its trainable ones; else NULL, all of them). */
	const uint64_t *trained;
	/* DeepSpeed's dp and ZeRO-1 under nmicro > 1: autograd's grads kept
	 * across the micro-steps (keep: ZeRO-1's full grads and buckets stay
	 * to the boundary, its backward makes the buckets again); a later
	 * micro-step's new grads of a unit are acc_fg's transient as above
	 * (scheme_deepspeed.c, fresh_begin). */
	int keep;
	/* DeepSpeed's ZeRO-1/2 where a starved expert is followed
	 * (ds_coord_starved_built): the description whose experts' zeros the
	 * epilogue makes at each step (ds_coord_starved, trainable under
	 * freeze), starved_esize bytes an element in starved_cat; else NULL. */
	const struct step_params *starved;
	unsigned starved_esize;
	enum zs_cat starved_cat;
};

/* The framework's state through the walk: which units are held gathered,
 * each layer's unit (or the tied head's visit of unit 0), and the elements
 * every rank sends in all-gathers and reduce-scatters. */
struct units_fw {
	const struct events *ev;
	const uint64_t *units;          /* n_u */
	enum zs_unit unit;
	uint64_t N;
	int *held;
	size_t *unit_of, *first, *last; /* per layer; per unit: its first and last layer run in its visit */
	size_t visit;                   /* the tied head's layer (unit=layer), or none: SIZE_MAX */
	int visit_hooks;
	uint64_t gathered, reduced;
	uint64_t used, count; /* DeepSpeed's bucket (with ev->acc): elements and units in it */
	int acc_held;
	uint64_t starved;     /* the epilogue's zeros held to step() (ev->starved) */
};

/* Unit u's slots per rank, ceil(n_u/N). */
static uint64_t slots(const struct units_fw *st, size_t u) { return (st->units[u] + st->N - 1) / st->N; }

/* Unit u's elements with grads, t_u (docs/schedule.md, "Frozen
 * parameters under the paper's schedule"), and their slots per rank. */
static uint64_t trained(const struct units_fw *st, size_t u)
{
	return st->ev->trained != NULL ? st->ev->trained[u] : st->units[u];
}

static uint64_t trained_slots(const struct units_fw *st, size_t u) { return (trained(st, u) + st->N - 1) / st->N; }

/* The elements of unit u's gathered copy. */
static uint64_t copy_elements(const struct units_fw *st, size_t u)
{
	return st->ev->post_backward ? st->N * slots(st, u) : st->units[u];
}

static void gather(struct units_fw *st, struct walk *w, size_t u)
{
	walk_add(w, ZS_CAT_BUCKETS, slots(st, u) * st->ev->mp);
	w->key = THEORY_TRACE_UNIT + u; /* a trace frees unit u's own copy, whatever its size */
	walk_add(w, ZS_CAT_GATHERED, copy_elements(st, u) * st->ev->gp);
	w->key = 0;
	walk_sub(w, ZS_CAT_BUCKETS, slots(st, u) * st->ev->mp);
	st->gathered += (st->N - 1) * slots(st, u);
	st->held[u] = 1;
}

static void release(struct units_fw *st, struct walk *w, size_t u)
{
	if (st->held[u]) {
		w->key = THEORY_TRACE_UNIT + u;
		walk_sub(w, ZS_CAT_GATHERED, copy_elements(st, u) * st->ev->gp);
		w->key = 0;
	}
	st->held[u] = 0;
}

/* FSDP's _post_backward_hook, after the reshard: F.pad's copy of the
 * unsharded grad (N·s_u), the output shard and its fp32 cast, freed as
 * the hook returns (the grad itself is freed after it). */
static void post_backward(struct units_fw *st, struct walk *w, size_t u)
{
	uint64_t sh = slots(st, u), fg = st->ev->fg;
	if (!st->ev->post_backward)
		return;
	walk_phase(w, ZS_PH_REDUCE); /* the hook's reduce-scatter, as the engine's tracker marks it */
	/* three blocks, freed shard, cast, copy (as the engine frees them: a
	 * trace's order, the same sums) */
	walk_add(w, ZS_CAT_BUCKETS, st->N * sh * fg);
	walk_add(w, ZS_CAT_BUCKETS, sh * fg);
	walk_add(w, ZS_CAT_BUCKETS, sh * st->ev->cast);
	walk_sub(w, ZS_CAT_BUCKETS, sh * fg);
	walk_sub(w, ZS_CAT_BUCKETS, sh * st->ev->cast);
	walk_sub(w, ZS_CAT_BUCKETS, st->N * sh * fg);
	walk_phase(w, ZS_PH_BACKWARD);
}

/* The paper's zero2 and zero3, a micro-step after the first: unit u's
 * reduce-scatter into a transient of its slots, added and freed (the
 * engine's run_reduce_scatter_unit_acc). */
static void paper_acc_rs(struct units_fw *st, struct walk *w, size_t u)
{
	if (st->ev->acc_rs == 0 || w->micro == 0)
		return;
	walk_add(w, st->ev->grad_cat, trained_slots(st, u) * st->ev->acc_rs);
	walk_sub(w, st->ev->grad_cat, trained_slots(st, u) * st->ev->acc_rs);
}

/* A reduction in DeepSpeed's ZeRO-2 bucket: a micro-step's first after
 * the first micro-step makes its new grad partition (tracked in the
 * reduce phase, as the engine's reduce_unit marks it). */
static void ds_reduction(struct units_fw *st, struct walk *w)
{
	enum zs_phase was = w->phase;
	walk_phase(w, ZS_PH_REDUCE); /* every reduction, K = 1's too, as the engine's tracker marks it */
	if (st->ev->acc > 0 && w->micro > 0 && !st->acc_held) {
		walk_add(w, st->ev->grad_cat, st->ev->acc);
		st->acc_held = 1;
	}
	w->phase = was;
}

/* Unit u's grads into the bucket (the engine's add_unit): a full bucket
 * is reduced first, a unit larger than the bucket from where it is. */
static void ds_add_unit(struct units_fw *st, struct walk *w, size_t u)
{
	uint64_t n = trained(st, u), B = st->ev->ds_bucket;
	if (B == 0 || n == 0) /* not DeepSpeed's ZeRO-2; a frozen unit (--freeze) has no grads */
		return;
	if (st->used + n > B) {
		if (st->count > 0)
			ds_reduction(st, w);
		st->used = st->count = 0;
	}
	if (n > B) {
		ds_reduction(st, w);
		return;
	}
	st->used += n;
	st->count++;
}

static int kept(const struct units_fw *st, size_t u)
{
	return st->ev->keep_all || (st->ev->keep_root && u == 0 && st->unit == ZS_UNIT_MODEL);
}

static void units_at(void *ctx, struct walk *w, enum walk_point pt, size_t l, unsigned step)
{
	struct units_fw *st = ctx;
	const struct events *ev = st->ev;
	size_t i = st->unit_of[l];
	(void)step;
	if (l == st->visit && (pt == FWD_PRE || pt == BWD_PRE)) {
		/* A tied head's own visit of unit 0, gathered as for a forward
		 * unless it is held (SHARD_GRAD_OP), in forward or backward. */
		st->visit_hooks = ev->gp > 0 && !st->held[0];
		if (st->visit_hooks)
			gather(st, w, 0);
		return;
	}
	if (l == st->visit && (pt == FWD_POST || pt == BWD_POST)) {
		if (st->visit_hooks && !kept(st, 0))
			release(st, w, 0);
		return;
	}
	switch (pt) {
	case FWD_PRE:
		if (l == st->first[i] && ev->gp > 0)
			gather(st, w, i);
		break;
	case FWD_POST:
		if (l == st->last[i] && ev->gp > 0 && !kept(st, i))
			release(st, w, i);
		break;
	case BWD_BEGIN:
		for (unsigned k = 0; k < ev->nbucket && ev->keep && w->micro > 0; k++) /* the last micro-step's dropped */
			walk_sub(w, ZS_CAT_BUCKETS, ev->bucket);
		for (unsigned k = 0; k < ev->nbucket; k++)
			walk_add(w, ZS_CAT_BUCKETS, ev->bucket);
		if (!ev->keep || w->micro == 0)
			walk_add(w, ZS_CAT_FULL_GRADS, ev->full);
		break;
	case BWD_PRE:
		if (l != st->last[i])
			break;
		if (ev->gp > 0 && !st->held[i])
			gather(st, w, i);
		if (ev->prefetch && i > 0 && !st->held[i - 1])
			gather(st, w, i - 1);
		walk_add(w, ZS_CAT_FULL_GRADS, trained(st, i) * ev->fg);
		if (ev->fg > 0)
			st->reduced += (st->N - 1) * slots(st, i);
		if (w->micro > 0) /* the paper's accumulation: the unit's grads apart */
			walk_add(w, ZS_CAT_FULL_GRADS, trained(st, i) * ev->acc_fg);
		break;
	case BWD_POST:
		if (l != st->first[i])
			break;
		if (ev->acc_rs > 0 && ev->fg > 0 && w->micro > 0) { /* the paper's zero3: the unit's reduce-scatter */
			walk_phase(w, ZS_PH_REDUCE);
			paper_acc_rs(st, w, i);
			walk_phase(w, ZS_PH_BACKWARD);
		}
		release(st, w, i);
		post_backward(st, w, i);
		ds_add_unit(st, w, i);
		walk_sub(w, ZS_CAT_FULL_GRADS, trained(st, i) * ev->fg);
		if (w->micro > 0) /* added into the resident grads, freed */
			walk_sub(w, ZS_CAT_FULL_GRADS, trained(st, i) * ev->acc_fg);
		break;
	case STEP_END:
		if (ev->full > 0 || ev->bucket > 0) /* freed by the reduce after backward, as the engine marks it */
			walk_phase(w, ZS_PH_REDUCE);
		if (ev->keep && w->micro + 1 < w->nmicro)
			break; /* ZeRO-1 and dp reduce at the boundary only */
		if (ev->ds_bucket > 0 && st->count > 0) /* the epilogue reduces what is left */
			ds_reduction(st, w);
		for (size_t u = 0; ev->acc_rs > 0 && ev->full > 0 && u < st->ev->nunits; u++)
			paper_acc_rs(st, w, u); /* the paper's zero2: each unit's reduce-scatter */
		if (ev->starved != NULL && w->counts != NULL) { /* the epilogue's zeros, before the buckets go */
			const struct theory_rank_counts *rc = w->counts;
			const uint64_t *now = rc->counts + (w->step % rc->steps) * rc->blocks * rc->experts;
			st->starved = ds_coord_starved(ev->starved, now, rc->experts) * ev->starved_esize;
			walk_add(w, ev->starved_cat, st->starved);
		}
		st->used = st->count = 0;
		for (unsigned k = 0; k < ev->nbucket; k++) /* the engine's order: the buckets, then the grads */
			walk_sub(w, ZS_CAT_BUCKETS, ev->bucket);
		walk_sub(w, ZS_CAT_FULL_GRADS, ev->full);
		if (st->acc_held) /* added into the kept partition, freed */
			walk_sub(w, ev->grad_cat, ev->acc);
		st->acc_held = 0;
		if (w->micro + 1 < (w->nmicro > 1 ? w->nmicro : 1))
			break; /* no step() before the last micro-step */
		walk_phase(w, ZS_PH_OPTIMIZER);
		for (int k = 0; k < ZS_NCATS; k++)
			walk_add(w, (enum zs_cat)k, ev->step[k]);
		/* step() frees them before it returns: the next step (a
		 * trace's, a mixture's under its routing) starts without them */
		for (int k = 0; k < ZS_NCATS; k++)
			walk_sub(w, (enum zs_cat)k, ev->step[k]);
		walk_sub(w, ev->starved_cat, st->starved); /* averaged_gradients = None */
		st->starved = 0;
		break;
	case FWD_MATMUL:
		walk_matmul(w);
		break;
	case STEP_BEGIN:
	case FWD_RUN:
	case BWD_RUN:
		break;
	}
}

/* The walk by unit, from out's resident state: unit i runs layers
 * first_i..last_i (unit=model all of them; unit=layer the embedding, each
 * block, the untied head; a tied head is in no unit's visit but its own). */
static void units_walk(const struct theory_desc *d, const struct events *ev, const uint64_t *units,
                       enum zs_unit unit, unsigned world, int visit, struct theory_schedule *out, uint64_t *gathered,
                       uint64_t *reduced, struct theory_trace *tr, const struct theory_rank_counts *rc)
{
	size_t nl = d->params.nlayers, head = nl - 1, U = out->nunits;
	struct units_fw st = {.ev = ev, .units = units, .unit = unit, .N = world, .visit = visit ? head : SIZE_MAX};
	st.held = zs_calloc(U, sizeof *st.held);
	st.first = zs_calloc(U, sizeof *st.first);
	st.last = zs_calloc(U, sizeof *st.last);
	st.unit_of = zs_calloc(nl, sizeof *st.unit_of);
	for (size_t l = 0; l < nl; l++) {
		size_t i = unit == ZS_UNIT_MODEL ? 0 : l < U ? l : U - 1;
		st.unit_of[l] = i;
		if (l == st.visit)
			continue;
		if (l == 0 || st.unit_of[l - 1] != i)
			st.first[i] = l;
		st.last[i] = l;
	}
	/* The resident state, a block per category in the categories' order
	 * (the order the engine sets its flat buffers up in); a trace walks
	 * every step, as the engine's run does. */
	struct walk w = {.tr = tr, .key = THEORY_TRACE_RESIDENT, .nmicro = ev->nmicro, .model = d->model, .counts = rc};
	for (int k = 0; k < ZS_NCATS; k++)
		if (k != ZS_CAT_BUCKETS || ev->nbuckets == 0)
			walk_add(&w, (enum zs_cat)k, out->resident_breakdown[k]);
		else /* the same sum, a block a bucket */
			for (size_t i = 0; i < ev->nbuckets; i++)
				walk_add(&w, ZS_CAT_BUCKETS, ev->buckets[i] * ev->bucket_bytes);
	w.key = 0;
	const struct walk_fw fw = {units_at, &st};
	/* every step where a mixture's routing differs from step to step */
	walk_steps(d, &w, tr != NULL ? tr->steps : rc != NULL ? (unsigned)rc->steps : 1, &fw);
	out->peak_bytes = w.peak;
	memcpy(out->peak_breakdown, w.at_peak, sizeof w.at_peak);
	walk_phases_out(&w, out);
	*gathered = st.gathered;
	*reduced = st.reduced;
	free(st.held);
	free(st.first);
	free(st.last);
	free(st.unit_of);
}

/* ------------------------------------------------------------------------ */
/* DeepSpeed's ZeRO-3 by module (docs/schedule.md, "deepspeed", ZeRO-3).
 * On a transformer the modules are the nn.Modules with parameters of
 * their own, the description's, in forward order (a mixture's sparse-MoE
 * block one z3 leaf: ds_coord_leaf), each run inside its
 * layer once the layer's buffers are made (a tied head is the token table
 * again, whose grads its own module makes); on the MLP they are zerosim's
 * units (unit=layer a linear layer, unit=model all of them), each fetched
 * before its first layer's forward and released after its last. */

/* The reduce bucket as the engine fills it (scheme_deepspeed.c): its
 * tensors, elements used, and a tensor larger than it whose grad is held
 * past its module; the elements every rank sends reducing. */
struct ds3_bucket {
	uint64_t B, used, held, reduced;
	size_t count, *t;
};

/* The modules as data: module i's tensors [first[i], first[i] + count[i])
 * and whether it makes their grads (grads[i]); its layers [lo[i], hi[i]];
 * by_unit: it is run around its layers (the MLP's units), else inside
 * its one layer. */
struct ds3_fw {
	const struct theory_bytes *b;
	const struct zs_config *c;
	struct ds_coord *d;
	struct ds3_bucket bk;
	const uint64_t *tn, *tt; /* per tensor: its elements, and its trainable ones (--freeze: 0 if frozen) */
	size_t nmodules, *first, *count, *lo, *hi;
	int *grads, *no_grad_in, by_unit;
	size_t *of_layer;   /* inside layers: layer l's modules are [of_layer[l], of_layer[l + 1]) */
	size_t *src;        /* inside layers: the description's module each is (a z3 leaf: its first) */
	size_t *rel, *post, j;
	uint64_t *blk;      /* per tensor: the elements of its block while whole */
	uint64_t N, S, S_t, sent, sent_el; /* S_t: Σ ceil(tt/N), the grad and fp32 partitions' */
	uint64_t msent, msent_el; /* this step's so far (--grad-accum: its micro-steps') */
	int off, offp;
	uint64_t s_max; /* the largest trainable ceil(tt/N) */
	struct theory_ds3_sub *sub; /* step()'s sub groups (theory_ds3_sub_groups) */
	size_t nsub;
	struct theory_schedule *out;
	const struct theory_desc *desc;
};

/* With a trace, each of ZeRO-3's blocks under a key of its own, so that
 * a free names the block the engine frees (scheme_deepspeed.c): tensor
 * t's gathered copy and (params offloaded) its partition's device copy,
 * the module's grads, the flush's padding and flat copy, the held grad,
 * step()'s two buffers. */
enum { DS3_GATHERED = 1, DS3_OFFP, DS3_GRADS, DS3_PAD, DS3_FLAT, DS3_HELD, DS3_G16, DS3_G32, DS3_POSTFLAT, DS3_CHECK,
       DS3_NORM };
#define DS3_KEY(kind, i) (THEORY_TRACE_UNIT + ((uint64_t)(kind) << 40) + (uint64_t)(i))

static void ds3_add(struct walk *w, enum zs_cat c, uint64_t bytes, uint64_t key)
{
	w->key = key;
	walk_add(w, c, bytes);
	w->key = 0;
}

static void ds3_sub(struct walk *w, enum zs_cat c, uint64_t bytes, uint64_t key)
{
	w->key = key;
	walk_sub(w, c, bytes);
	w->key = 0;
}

/* reduce_scatter_coalesced: the paddings, then the flat copy (unless one
 * tensor divides evenly), then both dropped and the held grad with them. */
static void ds3_flush(struct walk *w, struct ds3_bucket *bk, const uint64_t *tn, uint64_t N, unsigned g)
{
	uint64_t part = 0, pad = 0;
	if (bk->count == 0)
		return;
	for (size_t i = 0; i < bk->count; i++) {
		uint64_t s = (tn[bk->t[i]] + N - 1) / N;
		part += s;
		pad += N * s - tn[bk->t[i]];
	}
	int in_place = bk->count == 1 && pad == 0;
	enum zs_phase was = w->phase;
	walk_phase(w, ZS_PH_REDUCE); /* the bucket's reduce-scatter, as the engine marks it */
	ds3_add(w, ZS_CAT_FULL_GRADS, pad * g, DS3_KEY(DS3_PAD, 0));
	ds3_add(w, ZS_CAT_FULL_GRADS, in_place ? 0 : N * part * g, DS3_KEY(DS3_FLAT, 0));
	/* freed as the engine frees them: the flat copy, the padding, the held grad */
	ds3_sub(w, ZS_CAT_FULL_GRADS, in_place ? 0 : N * part * g, DS3_KEY(DS3_FLAT, 0));
	ds3_sub(w, ZS_CAT_FULL_GRADS, pad * g, DS3_KEY(DS3_PAD, 0));
	ds3_sub(w, ZS_CAT_FULL_GRADS, bk->held, DS3_KEY(DS3_HELD, 0));
	walk_phase(w, was);
	bk->held = 0;
	bk->reduced += (N - 1) * part;
	bk->used = bk->count = 0;
}

/* The tensors the coordinator gathered: each whole block (its held
 * elements, kept in blk until its release; 0 a view at N = 1), with
 * flat > 0 a flat before it (_post_step's one param: util/ds_coord.h),
 * and at N > 1 with the params offloaded but no flat the device copy of
 * the rank's partition. */
static void ds3_gathered(struct walk *w, const struct ds3_fw *f, const size_t *t, size_t n, uint64_t flat)
{
	unsigned p = f->b->p;
	int dev = f->offp && f->N > 1 && flat == 0;
	for (size_t i = 0; i < n; i++) {
		f->blk[t[i]] = f->d->held[t[i]];
		ds3_add(w, ZS_CAT_GATHERED, flat * p, DS3_KEY(DS3_POSTFLAT, t[i]));
		ds3_add(w, ZS_CAT_GATHERED, f->blk[t[i]] * p, DS3_KEY(DS3_GATHERED, t[i]));
		ds3_add(w, ZS_CAT_GATHERED, dev ? f->d->s[t[i]] * p : 0, DS3_KEY(DS3_OFFP, t[i]));
		ds3_sub(w, ZS_CAT_GATHERED, dev ? f->d->s[t[i]] * p : 0, DS3_KEY(DS3_OFFP, t[i]));
		ds3_sub(w, ZS_CAT_GATHERED, flat * p, DS3_KEY(DS3_POSTFLAT, t[i]));
	}
}

static void ds3_released(struct walk *w, const struct ds3_fw *f, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ds3_sub(w, ZS_CAT_GATHERED, f->blk[f->rel[i]] * f->b->p, DS3_KEY(DS3_GATHERED, f->rel[i]));
}

/* Module mi's backward: its grads made, put in the bucket tensor by
 * tensor (a flush before one that would not fit) and dropped. */
static void ds3_grads(struct ds3_fw *f, struct walk *w, size_t mi)
{
	struct ds3_bucket *bk = &f->bk;
	size_t t0 = f->first[mi], t1 = f->first[mi] + f->count[mi];
	unsigned g = f->b->g;
	uint64_t n = 0;
	if (!f->grads[mi])
		return;
	for (size_t t = t0; t < t1; t++)
		n += f->tt[t];
	ds3_add(w, ZS_CAT_FULL_GRADS, n * g, DS3_KEY(DS3_GRADS, 0));
	for (size_t t = t0; t < t1; t++) {
		if (f->tt[t] == 0) /* frozen: no grad, no reduction hook */
			continue;
		if (bk->used + f->tn[t] > bk->B && bk->count > 0)
			ds3_flush(w, bk, f->tn, f->N, g);
		bk->t[bk->count++] = t;
		bk->used += f->tn[t];
	}
	ds3_sub(w, ZS_CAT_FULL_GRADS, n * g, DS3_KEY(DS3_GRADS, 0)); /* the module's grads dropped */
	if (bk->count == 1 && f->tn[bk->t[0]] > bk->B && bk->held == 0) {
		bk->held = f->tn[bk->t[0]] * g; /* an oversized grad kept until it is reduced */
		ds3_add(w, ZS_CAT_FULL_GRADS, bk->held, DS3_KEY(DS3_HELD, 0));
	}
}

/* A z3 leaf's forward (or full recompute's) in layer l: once its params
 * are whole the router runs, and layer l's routed buffers (its experts',
 * sized by the rank's counts; in a recompute the recomputed ones) are
 * made, in list order, as the engine's route_leaf makes them. */
static void ds3_routed(struct ds3_fw *f, struct walk *w, size_t mi, size_t l)
{
	const struct theory_desc *d = f->desc;
	const struct step_buffers *b = &d->bufs;
	if (f->by_unit || f->d->bwd[f->j] || f->src[mi] != ds_coord_leaf(&d->params, l))
		return;
	int again = f->j >= f->nmodules; /* a full recompute's forward, in backward */
	for (size_t k = d->made_first[l]; k < d->made_first[l + 1]; k++) {
		const struct step_buffer *x = &b->buf[d->made_at[k]];
		if (fw_routed(w, x) && (!again || x->recomputed))
			buf_add(w, b, x, 1);
	}
}

/* Trace entry j (module mi, in layer l): its fetch (with the prefetch),
 * in backward its grads, a leaf's routed buffers, and its release. */
static void ds3_fetch(struct ds3_fw *f, struct walk *w, size_t mi, size_t l, int complete)
{
	const size_t *got;
	size_t ng = ds_coord_fetch(f->d, f->c, f->j, complete, &got);
	ds3_gathered(w, f, got, ng, 0);
	if (f->d->bwd[f->j])
		ds3_grads(f, w, mi);
	ds3_routed(f, w, mi, l);
}

static void ds3_release(struct ds3_fw *f, struct walk *w, int complete)
{
	ds3_released(w, f, ds_coord_release(f->d, f->j, complete, f->rel));
	f->j++;
}

/* The engine's step: each module fetched, run (backward: its grads) and
 * released where it runs; the epilogue's flush; step()'s fp32 gradient
 * partition; the persistent params gathered after it. */
static void ds3_at(void *ctx, struct walk *w, enum walk_point pt, size_t l, unsigned step)
{
	struct ds3_fw *f = ctx;
	const struct theory_bytes *b = f->b;
	int complete = step > 1 || w->micro > 0; /* --grad-accum: recorded in the first micro-step */
	/* by unit: the module (forward order: the trace's next) that starts or ends here */
	size_t mi = f->j < f->nmodules ? f->j : 2 * f->nmodules - 1 - f->j;
	switch (pt) {
	case STEP_BEGIN:
		f->j = 0;
		if (w->micro > 0) /* reset_step alone: no step() since the last micro-step */
			ds_coord_begin_micro(f->d);
		else
			ds_coord_begin_step(f->d, step);
		f->bk.reduced = 0;
		break;
	case FWD_PRE:
		if (f->by_unit && l == f->lo[mi])
			ds3_fetch(f, w, mi, l, complete);
		break;
	case FWD_POST:
		if (f->by_unit && l == f->hi[mi])
			ds3_release(f, w, complete);
		break;
	case BWD_PRE:
		if (f->by_unit && f->j < 2 * f->nmodules && l == f->hi[mi])
			ds3_fetch(f, w, mi, l, complete);
		break;
	case BWD_POST:
		if (f->by_unit && f->j < 2 * f->nmodules && l == f->lo[mi])
			ds3_release(f, w, complete);
		break;
	case FWD_MATMUL: /* module by module: where its module runs (FWD_RUN) */
		if (f->by_unit)
			walk_matmul(w);
		break;
	case FWD_RUN:
		for (size_t i = f->of_layer[l]; !f->by_unit && i < f->of_layer[l + 1]; i++) {
			ds3_fetch(f, w, i, l, complete);
			if ((long)(i - f->of_layer[l]) == layer_matmul(f->desc, l))
				walk_matmul(w);
			ds3_release(f, w, complete);
		}
		break;
	case BWD_RUN: /* the trace's entries of the layer's modules: a full recompute's forward, then backward */
		while (!f->by_unit && f->j < f->d->ntrace && f->d->trace[f->j] >= f->of_layer[l] &&
		       f->d->trace[f->j] < f->of_layer[l + 1]) {
			ds3_fetch(f, w, f->d->trace[f->j], l, complete);
			ds3_release(f, w, complete);
		}
		break;
	case STEP_END: {
		ds3_flush(w, &f->bk, f->tn, f->N, b->g); /* the epilogue */
		if (w->micro + 1 < w->nmicro) { /* --grad-accum: added into the partitions in place; no step() yet */
			f->msent += (f->N - 1) * f->d->gathered * b->p + f->bk.reduced * b->g;
			f->msent_el += (f->N - 1) * f->d->gathered + f->bk.reduced;
			break;
		}
		/* step(): everything released; each sub group's fp32 gradient
		 * (theory_ds3_sub_groups), one after another; then the persistent
		 * params gathered */
		size_t nrel, npost = ds_coord_step(f->d, f->rel, &nrel, f->post);
		walk_phase(w, ZS_PH_OPTIMIZER);
		ds3_released(w, f, nrel);
		/* on the device: the overflow check in mixed precision (the fp16
		 * abs and isinf's bool, S_t·3, then isnan's, S_t), then the norm's
		 * float64 copy of each grad partition, the largest's */
		uint64_t mag = !f->off && b->g == 2 ? f->S_t * b->g : 0, is_inf = mag / b->g, norm = f->off ? 0 : f->s_max * 8;
		ds3_add(w, ZS_CAT_SCRATCH, mag + is_inf, DS3_KEY(DS3_CHECK, 0));
		ds3_sub(w, ZS_CAT_SCRATCH, mag + is_inf, DS3_KEY(DS3_CHECK, 0));
		ds3_add(w, ZS_CAT_SCRATCH, is_inf, DS3_KEY(DS3_CHECK, 0));
		ds3_sub(w, ZS_CAT_SCRATCH, is_inf, DS3_KEY(DS3_CHECK, 0));
		ds3_add(w, ZS_CAT_SCRATCH, norm, DS3_KEY(DS3_NORM, 0));
		ds3_sub(w, ZS_CAT_SCRATCH, norm, DS3_KEY(DS3_NORM, 0));
		for (size_t i = 0; i < f->nsub; i++) {
			const struct theory_ds3_sub *sg = &f->sub[i];
			ds3_add(w, ZS_CAT_GRAD16, sg->g16, DS3_KEY(DS3_G16, 0));
			ds3_add(w, ZS_CAT_GRAD32, sg->g32, DS3_KEY(DS3_G32, 0));
			ds3_sub(w, ZS_CAT_GRAD16, sg->g16, DS3_KEY(DS3_G16, 0));
			ds3_sub(w, ZS_CAT_GRAD32, sg->g32, DS3_KEY(DS3_G32, 0));
		}
		walk_phase(w, ZS_PH_GATHER); /* the persistent params gathered after step() */
		ds3_gathered(w, f, f->post, npost, f->d->flat);
		uint64_t N = f->N, gathered = f->d->gathered, reduced = f->bk.reduced;
		f->msent += (N - 1) * gathered * b->p + reduced * b->g; /* with the step's earlier micro-steps' */
		f->msent_el += (N - 1) * gathered + reduced;
		f->sent += f->msent;
		f->sent_el += f->msent_el;
		f->out->comm_bytes = f->msent; /* the last step's */
		f->out->comm_elements = f->msent_el;
		f->msent = f->msent_el = 0;
		break;
	}
	case BWD_BEGIN:
		break;
	}
}

/* The modules: the description's inside their layers (a transformer's),
 * or the MLP's units around theirs. */
static void ds3_modules(struct ds3_fw *f, const struct theory_desc *d, enum zs_unit unit)
{
	const struct step_params *p = &d->params;
	size_t n = p->nmodules;
	f->by_unit = d->model == NULL;
	if (f->by_unit)
		n = unit == ZS_UNIT_MODEL ? 1 : p->nlayers;
	f->nmodules = n;
	/* first, count, lo and hi: n each, one block (freed with first) */
	f->first = zs_calloc(4 * n + 1, sizeof *f->first);
	f->count = f->first + n;
	f->lo = f->count + n;
	f->hi = f->lo + n;
	f->src = zs_calloc(n + 1, sizeof *f->src);
	f->grads = zs_calloc(n + 1, sizeof *f->grads);
	f->no_grad_in = zs_calloc(n + 1, sizeof *f->no_grad_in);
	f->of_layer = zs_calloc(p->nlayers + 1, sizeof *f->of_layer);
	for (size_t i = 0; f->by_unit && i < n; i++) {
		f->first[i] = unit == ZS_UNIT_MODEL ? 0 : p->layer[i].first;
		f->count[i] = unit == ZS_UNIT_MODEL ? p->ntensors : p->layer[i].n;
		f->lo[i] = unit == ZS_UNIT_MODEL ? 0 : i;
		f->hi[i] = unit == ZS_UNIT_MODEL ? p->nlayers - 1 : i;
		f->grads[i] = 1;
	}
	if (f->by_unit)
		return;
	/* a mixture's sparse-MoE block is one z3 leaf (ds_coord_leaf): its
	 * first module takes the rest of its layer's */
	size_t l = 0, i = 0;
	uint64_t *trained = zs_calloc(n + 1, sizeof *trained);
	/* LoRA's adapters (lora_A 1, lora_B 2) and their base modules, by
	 * the description's module (at) and as counted here */
	int *adapter = zs_calloc(n + 1, sizeof *adapter);
	size_t *base = zs_calloc(n + 1, sizeof *base), *at = zs_calloc(p->nmodules + 1, sizeof *at);
	for (size_t x = 0; x < p->nmodules; x++, i++) {
		const struct step_module *md = &p->module[x];
		at[x] = i;
		if (md->adapter != NULL) {
			adapter[i] = strncmp(md->adapter, "lora_A", 6) == 0 ? 1 : 2;
			base[i] = at[md->base];
		}
		size_t leaf = ds_coord_leaf(p, md->layer);
		for (; l <= md->layer; l++)
			f->of_layer[l] = i;
		f->src[i] = x;
		f->first[i] = md->first;
		f->count[i] = md->n;
		f->lo[i] = f->hi[i] = md->layer;
		f->grads[i] = md->n > 0 && p->tensor[md->first].module == x;
		f->no_grad_in[i] = md->no_grad_in;
		if (x == leaf)
			while (x + 1 < p->nmodules && p->module[x + 1].layer == md->layer)
				f->count[i] += p->module[++x].n;
		/* --freeze: grads of its trainable tensors only; a module before
		 * the first that trains runs no backward (ds_coord_grad_flow) */
		for (size_t t = f->first[i]; t < f->first[i] + f->count[i]; t++)
			trained[i] += f->tt[t];
		f->grads[i] &= trained[i] > 0;
	}
	f->nmodules = i;
	ds_coord_grad_flow_lora(i, trained, d->recompute == ZS_RECOMPUTE_FULL, f->no_grad_in, adapter, base);
	free(trained);
	free(adapter);
	free(base);
	free(at);
	for (; l <= p->nlayers; l++)
		f->of_layer[l] = i;
}

/* DeepSpeed's ZeRO-3 over --steps steps (the first records the trace). */
static void ds3_walk(const struct theory_desc *d, const struct theory_bytes *b, const struct zs_config *c,
                     enum zs_unit unit, unsigned world, struct theory_schedule *out, struct theory_trace *tr,
                     const struct theory_rank_counts *rc)
{
	const struct step_params *p = &d->params;
	uint64_t *tn = zs_calloc(p->ntensors, sizeof *tn), *tt = zs_calloc(p->ntensors, sizeof *tt), persist = 0,
	         ntrain = 0, base[ZS_NCATS];
	struct ds3_fw f = {.b = b, .c = c, .tn = tn, .tt = tt, .N = world, .out = out,
	                   .off = c->offload != ZS_OFFLOAD_NONE, .offp = c->offload == ZS_OFFLOAD_PARAMS};
	f.rel = zs_calloc(p->ntensors, sizeof *f.rel);
	f.post = zs_calloc(p->ntensors, sizeof *f.post);
	f.blk = zs_calloc(p->ntensors, sizeof *f.blk);
	f.bk = (struct ds3_bucket){.B = (uint64_t)c->ds_reduce_bucket, .t = zs_calloc(p->ntensors, sizeof *f.bk.t)};
	/* QLoRA's 4-bit base (docs/finetune.md, "QLoRA under DeepSpeed's own
	 * ZeRO-3"): each quantized tensor partitioned and gathered as its
	 * codes, quant_storage elements of the params' dtype; its QuantState
	 * (qs bytes in all) whole on every rank, beside the partitions */
	int q4 = c->quant_nf4 && zs_lora_engine(c);
	uint64_t qs = 0;
	if (q4) {
		struct nf4_base q;
		nf4_base_count(p, c->double_quant, &q);
		qs = q.held - q.codes;
	}
	for (size_t t = 0; t < p->ntensors; t++) { /* --freeze: only requires_grad params train (stage3.py 491-495) */
		tn[t] = q4 && nf4_quantized(p, t) ? nf4_tensor_storage(p, t, (unsigned)b->p) : p->tensor[t].numel;
		tt[t] = step_trained(p, t) ? tn[t] : 0;
		ntrain += tt[t];
	}
	ds3_modules(&f, d, unit);
	f.desc = d;
	/* full recompute: each block's modules are checkpointed together
	 * (LoRA's adapters, named without a block, with their base's: the
	 * block's forward rerun calls them again) */
	long *group = zs_calloc(f.nmodules + 1, sizeof *group);
	for (size_t i = 0; i < f.nmodules; i++) {
		const struct step_module *md = &p->module[f.src[i]];
		if (md->adapter != NULL)
			md = &p->module[md->base];
		group[i] = !f.by_unit && d->recompute == ZS_RECOMPUTE_FULL ? md->index : -1;
	}
	f.d = ds_coord_new_recompute(tn, p->ntensors, f.first, f.count, f.nmodules, group, f.no_grad_in, c, world);
	free(group);
	size_t npersist = 0;
	for (size_t t = 0; t < p->ntensors; t++) {
		f.S += f.d->s[t];
		f.S_t += (tt[t] + world - 1) / world;
		npersist += (size_t)f.d->persist[t];
	}
	for (size_t t = 0; t < p->ntensors; t++) /* whole between steps: as _post_step gathered them */
		persist += f.d->persist[t] ? ds_coord_block(tn[t], world, npersist, 0, f.offp) : 0;
	out->params = p->numel;
	f.sub = zs_calloc(p->ntensors + 1, sizeof *f.sub);
	f.nsub = theory_ds3_sub_groups(b, c, tt, p->ntensors, world, f.sub);
	uint64_t sub_max = 0;
	for (size_t t = 0; t < p->ntensors; t++)
		f.s_max = (tt[t] + world - 1) / world > f.s_max ? (tt[t] + world - 1) / world : f.s_max;
	for (size_t i = 0; i < f.nsub; i++)
		sub_max = f.sub[i].n > sub_max ? f.sub[i].n : sub_max;
	theory_ds3_resident(b, c, f.S, f.S_t, ntrain, persist, sub_max, world, out, base);
	enum zs_cat pc = b->p == 2 ? ZS_CAT_PARAM16 : ZS_CAT_PARAM32;
	base[pc] += qs;
	out->resident_breakdown[pc] += qs;
	out->resident_bytes += qs;
	struct walk w = {.tr = tr, .key = THEORY_TRACE_RESIDENT, .nmicro = c->grad_accum, .model = d->model, .counts = rc,
	                 .routed_by_fw = !f.by_unit};
	for (int k = 0; k < ZS_NCATS; k++) /* set-up */
		walk_add(&w, (enum zs_cat)k, base[k]);
	w.key = 0;
	const struct walk_fw fw = {ds3_at, &f};
	walk_steps(d, &w, c->steps, &fw);
	out->peak_bytes = w.peak;
	memcpy(out->peak_breakdown, w.at_peak, sizeof w.at_peak);
	walk_phases_out(&w, out);
	out->steps_differ = 1;
	out->comm_bytes_mean = (double)f.sent / c->steps;
	out->comm_elements_mean = (double)f.sent_el / c->steps;
	ds_coord_free(f.d);
	free(tn);
	free(tt);
	free(f.first);
	free(f.grads);
	free(f.src);
	free(f.no_grad_in);
	free(f.of_layer);
	free(f.rel);
	free(f.post);
	free(f.blk);
	free(f.bk.t);
	free(f.sub);
}

/* ------------------------------------------------------------------------ */
/* The row */

/* The elements of each of p's tensors, in its order (the caller frees). */
static uint64_t *tensor_numels(const struct step_params *p)
{
	uint64_t *n = zs_calloc(p->ntensors > 0 ? p->ntensors : 1, sizeof *n);
	for (size_t i = 0; i < p->ntensors; i++)
		n[i] = p->tensor[i].numel;
	return n;
}

int theory_tfm_framework_schedule(const struct zs_model *m, const struct theory_desc *d,
                                    const struct theory_act_opts *o, const struct theory_bytes *b,
                                    const struct zs_config *c, uint64_t batch, enum zs_scheme scheme,
                                    enum zs_unit unit, unsigned world, struct theory_schedule *out)
{
	struct theory_desc own;
	/* The plain loop is PyTorch's own step, described op by op
	 * (cmd_theory checked it at the run's micro-batch: theory_autograd_check);
	 * at another micro-batch or N it may not be (a mixture's routing,
	 * --torch-device cuda's tokens), and then nothing else is its figure */
	if (c != NULL && zs_wrapper_step(c))
		return theory_autograd_schedule(m, c, batch, o->seq, world, out, NULL) == 0 ? 0 : -1;
	if (d == NULL || !theory_desc_fits(d, m, o, batch)) {
		theory_desc_model(&own, m, o, batch);
		d = &own;
	}
	theory_walk_schedule(d, b, c, scheme, unit, world, out);
	if (d == &own)
		theory_desc_free(&own);
	return 0;
}

/* DeepSpeed's ZeRO-2 under gradient_accumulation_steps K > 1 (docs/
 * schedule.md, "deepspeed", "Gradient accumulation"): every micro-step
 * reduce-scatters (K times the grads' bytes a step, the params gathered
 * once), each after the first into a new grad partition. */
static void ds_accum_events(struct events *ev, struct theory_schedule *out, const uint64_t *units,
                            const struct theory_bytes *b, const struct zs_config *c, unsigned world)
{
	uint64_t S = 0, K = c->grad_accum, pass = (uint64_t)(world - 1);
	for (size_t u = 0; u < out->nunits; u++)
		S += (units[u] + world - 1) / world;
	pass *= S;
	ev->nmicro = c->grad_accum;
	ev->acc = S * b->g;
	ev->grad_cat = b->g == 2 ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32;
	out->comm_bytes += (K - 1) * pass * b->g;
	out->comm_elements += (K - 1) * pass;
}

/* The paper's schedule under accumulation, K micro-steps a step (docs/
 * schedule.md, "Gradient accumulation under the paper's schedule"): dp and
 * zero1 (and every scheme at N = 1) add each unit's grads into the full
 * grads through a transient and reduce once; zero2 and zero3 reduce-scatter
 * every micro-step (zero3 gathers the params in each), the later ones
 * through a transient of the unit's slots: K times the K = 1 step's grads
 * (and zero3's gathers) sent, the params gathered after step() once. */
static void paper_accum_events(struct events *ev, struct theory_schedule *out, const struct theory_bytes *b,
                               enum zs_scheme scheme, unsigned world, unsigned K, uint64_t S_t)
{
	int shard = world > 1 && scheme >= ZS_ZERO2;
	ev->nmicro = K;
	ev->nunits = out->nunits;
	ev->grad_cat = b->g == 2 ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32;
	ev->acc_fg = shard ? 0 : b->g;
	ev->acc_rs = shard ? b->g : 0;
	if (!shard)
		return;
	/* zero2: the reduce-scatters K times, the all-gather once; zero3: its
	 * whole step's collectives K times */
	uint64_t pass = (uint64_t)(world - 1) * S_t; /* the grads' shard (--freeze: the trainable elements') */
	uint64_t bytes = scheme == ZS_ZERO2 ? pass * b->g : out->comm_bytes;
	uint64_t elements = scheme == ZS_ZERO2 ? pass : out->comm_elements;
	out->comm_bytes += (K - 1) * bytes;
	out->comm_elements += (K - 1) * elements;
}

/* DeepSpeed's dp and ZeRO-1 under gradient_accumulation_steps K > 1
 * (docs/schedule.md, "deepspeed", "Gradient accumulation"): the grads
 * reduced once at the boundary (K = 1's bytes sent), autograd's kept in
 * .grad, each later micro-step's new grads of a unit added into them
 * through acc_fg's transient, as the paper's dp. */
static void ds_keep_events(struct events *ev, const struct theory_bytes *b, const struct zs_config *c)
{
	ev->nmicro = c->grad_accum;
	ev->keep = 1;
	ev->acc_fg = b->g;
}

/* --freeze under the paper's schedule (docs/schedule.md, "Frozen
 * parameters under the paper's schedule"): each unit's trainable
 * elements t_u (util/step.h, zs_freeze_units), Ψ_t and S_t. */
struct frozen {
	uint64_t *trained;      /* t_u, or NULL: none frozen */
	uint64_t ntrain, tshard;
};

/* f's t_u, Ψ_t and S_t for nunits units (util/step.h's zs_freeze_units;
 * whole: zero3's units all frozen or all trainable); returns nunits. */
static size_t frozen_units(struct frozen *f, const struct step_params *p, int whole, enum zs_unit unit,
                           unsigned world, size_t nunits)
{
	size_t n;
	struct zs_freeze_run *run = zs_freeze_units(p, unit == ZS_UNIT_LAYER, whole, &n, NULL);
	if (run == NULL || n != nunits)
		abort(); /* the CLI refused it (zs_freeze_paper_check) */
	f->trained = zs_calloc(n, sizeof *f->trained);
	f->ntrain = f->tshard = 0;
	for (size_t u = 0; u < n; u++) {
		f->trained[u] = run[u].n;
		f->ntrain += run[u].n;
		f->tshard += (run[u].n + world - 1) / world;
	}
	free(run);
	return n;
}

/* theory_walk_schedule, and with tr its trace (only where
 * theory_walk_trace says it is covered). */
static void walk_schedule(const struct theory_desc *d, const struct theory_bytes *b, const struct zs_config *c,
                          enum zs_scheme scheme, enum zs_unit unit, unsigned world, struct theory_schedule *out,
                          struct theory_trace *tr, unsigned rank)
{
	const struct step_params *p = &d->params;
	struct theory_states sts;
	struct theory_bytes rb = *b; /* the resident state's bytes */
	struct events ev = {0};
	struct frozen frozen = {0};
	uint64_t N = world;
	enum zs_framework fw = c != NULL ? c->framework : ZS_FW_PAPER;
	int fsdp = fw == ZS_FW_TORCH && scheme >= ZS_ZERO2, mixed = b->master != 0;
	int ds = fw == ZS_FW_DEEPSPEED && (scheme == ZS_ZERO1 || scheme == ZS_ZERO2);
	/* A tied head reads the embedding's unit: with unit=layer it runs in a
	 * visit of that unit of its own, gathered for it (params only). */
	int visit = p->tied && unit == ZS_UNIT_LAYER;

	*out = (struct theory_schedule){0};
	uint64_t *units = theory_units_list(p, unit, &out->nunits);
	frozen.ntrain = p->numel;
	for (size_t u = 0; u < out->nunits; u++)
		frozen.tshard += (units[u] + N - 1) / N;
	struct theory_rank_counts rc;
	int moe = d->model != NULL && d->model->experts > 0;
	if (moe) /* rank's counts at each step (theory_routing.c) */
		theory_rank_counts(&rc, d->routing, d->model, d->batch * d->seq, scheme, unit, world, rank);
	if (fw == ZS_FW_DEEPSPEED && scheme == ZS_ZERO3) { /* by module */
		ds3_walk(d, b, c, unit, world, out, tr, moe ? &rc : NULL);
		if (moe)
			theory_rank_counts_free(&rc);
		free(units);
		return;
	}
	if (fsdp) {
		/* FSDP: the FlatParameters sharded as the paper's zero3 shards
		 * them (SHARD_GRAD_OP too), in fp32 under MixedPrecision (no
		 * master), the working copies and full grads 16-bit; NO_SHARD
		 * at N = 1 gathers (casts) only in mixed. */
		if (mixed)
			theory_bytes_per_param(ZS_FP32, c->optimizer, &rb);
		theory_schedule_states(out, units, NULL, &rb, ZS_ZERO3, world, &sts);
		ev.gp = N > 1 || mixed ? b->p : 0;
		ev.fg = N > 1 || mixed ? b->g : 0;
		ev.keep_all = N > 1 && scheme == ZS_ZERO2;
		ev.keep_root = N > 1;
		ev.prefetch = N > 1 && c->prefetch == ZS_PREFETCH_BACKWARD_PRE;
		ev.post_backward = N > 1;
		ev.mp = N > 1 && mixed ? b->p : 0;
		ev.cast = N > 1 && mixed ? rb.g : 0;
	} else if (ds) {
		/* DeepSpeed's ZeRO-1/2: the paper's zero2 units, shards and
		 * collectives, its own resident state; backward holds the reduce
		 * buckets and the full grads (ZeRO-1 the model's, ZeRO-2 a
		 * unit's at a time), at every N; step() its buffers. */
		theory_schedule_states(out, units, NULL, b, ZS_ZERO2, world, &sts);
		if (zs_config_trains_part(c)) { /* --freeze, or LoRA's frozen base: the trainable elements partitioned, sent
		                                 * (docs/schedule.md) */
			frozen_units(&frozen, p, 0, unit, world, out->nunits);
			uint64_t pass_t = (uint64_t)(world - 1) * frozen.tshard;
			out->comm_bytes = pass_t * (b->g + b->p);
			out->comm_elements = 2 * pass_t;
		}
		ev.trained = frozen.trained;
		theory_deepspeed_resident(b, c, step_params_largest_trained(p), world, frozen.ntrain, frozen.tshard, out,
		                          ev.step);
		ev.bucket = (uint64_t)c->ds_reduce_bucket * b->g;
		ev.nbucket = 1 + (c->ds_overlap_comm != 0);
		ev.full = scheme == ZS_ZERO1 ? frozen.ntrain * b->g : 0; /* autograd's .grad: requires_grad ones */
		ev.fg = scheme == ZS_ZERO2 ? b->g : 0;
		ev.ds_bucket = scheme == ZS_ZERO2 ? (uint64_t)c->ds_reduce_bucket : 0; /* its reductions from the hooks */
		if (scheme == ZS_ZERO2 && c->grad_accum > 1) /* config.c: no offload */
			ds_accum_events(&ev, out, frozen.trained != NULL ? frozen.trained : units, b, c, world);
		if (scheme == ZS_ZERO1 && c->grad_accum > 1)
			ds_keep_events(&ev, b, c);
		if (moe && ds_coord_starved_built(c, scheme, world)) {
			ev.starved = p;
			ev.starved_esize = b->g;
			ev.starved_cat = b->g == 2 ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32;
		}
	} else {
		/* --freeze: the params over the n_u, the grads and the optimizer
		 * state over the t_u (DeepSpeed's dp: the paper's) */
		if ((fw == ZS_FW_PAPER || fw == ZS_FW_DEEPSPEED) && c != NULL && zs_config_trains_part(c))
			frozen_units(&frozen, p, scheme == ZS_ZERO3 && world > 1, unit, world, out->nunits);
		theory_schedule_states(out, units, frozen.trained, b, scheme, world, &sts);
		ev.trained = frozen.trained;
		if (N > 1 && scheme == ZS_ZERO3)
			ev.gp = b->p, ev.fg = b->g;
		if (N > 1 && scheme == ZS_ZERO2)
			ev.full = frozen.ntrain * b->g;
		if (fw == ZS_FW_DEEPSPEED && scheme == ZS_DP && c->grad_accum > 1)
			ds_keep_events(&ev, b, c);
		if (N > 1 && scheme == ZS_ZERO3 && visit) { /* the head's two extra gathers of the embedding's unit */
			uint64_t s0 = (units[0] + N - 1) / N;
			out->comm_bytes += 2 * (N - 1) * s0 * b->p;
			out->comm_elements += 2 * (N - 1) * s0;
		}
	}
	if (fw == ZS_FW_PAPER && c != NULL && c->grad_accum > 1)
		paper_accum_events(&ev, out, b, scheme, world, c->grad_accum, frozen.tshard);
	if (fw == ZS_FW_TORCH && scheme <= ZS_ZERO1) {
		uint64_t *tn = tensor_numels(p);
		if (scheme == ZS_DP)
			out->comm_bytes = out->comm_elements = 0; /* DDP's all-reduce is by bucket */
		if (scheme == ZS_ZERO1)
			theory_torch_zero1(tn, p->ntensors, b, world, out);
		theory_torch_ddp(tn, p->ntensors, b->g, c->bucket_cap_mb, world, out);
		if (tr != NULL) {
			ev.buckets = zs_calloc(p->ntensors > 0 ? p->ntensors : 1, sizeof *ev.buckets);
			ev.nbuckets = theory_ddp_bucket_list(tn, p->ntensors, b->g, c->bucket_cap_mb, ev.buckets);
			ev.bucket_bytes = b->g;
		}
		free(tn);
	}
	if (c != NULL && c->quant_nf4 && zs_lora_engine(c)) { /* the 4-bit base, whole on every rank, in no buffer */
		struct nf4_base q;
		nf4_base_count(p, c->double_quant, &q);
		enum zs_cat pc = b->p == 2 ? ZS_CAT_PARAM16 : ZS_CAT_PARAM32;
		out->resident_breakdown[pc] += q.held - q.weights * b->p;
		out->resident_bytes += q.held - q.weights * b->p;
	}
	uint64_t gathered, reduced;
	units_walk(d, &ev, units, unit, world, visit, out, &gathered, &reduced, tr, moe ? &rc : NULL);
	if (moe)
		theory_rank_counts_free(&rc);
	free(units);
	free(frozen.trained);
	free(ev.buckets);
	if (fsdp) { /* what FSDP sends: the walk's collectives */
		out->comm_elements = gathered + reduced;
		out->comm_bytes = gathered * ev.gp + reduced * ev.fg;
	}
}

/* The walk of each rank whose routing is its own (a mixture's under
 * --routing FILE; else rank 0's, every rank's): out the binding rank's
 * (the highest peak, the first of equals, as measure reports it), peaks
 * (NULL: none) each rank's. */
static void walk_ranks(const struct theory_desc *d, const struct theory_bytes *b, const struct zs_config *c,
                       enum zs_scheme scheme, enum zs_unit unit, unsigned world, struct theory_schedule *out,
                       uint64_t *peaks)
{
	int apart = d->model != NULL && d->model->experts > 0 && theory_routing_per_rank(d->routing);
	walk_schedule(d, b, c, scheme, unit, world, out, NULL, 0);
	for (unsigned k = 0; peaks != NULL && k < world; k++) /* rank 0's, every rank's unless apart */
		peaks[k] = out->peak_bytes;
	for (unsigned k = 1; apart && k < world; k++) {
		struct theory_schedule s;
		walk_schedule(d, b, c, scheme, unit, world, &s, NULL, k);
		if (peaks != NULL)
			peaks[k] = s.peak_bytes;
		if (s.peak_bytes > out->peak_bytes) {
			*out = s;
			out->peak_rank = k;
		}
	}
}

void theory_walk_schedule(const struct theory_desc *d, const struct theory_bytes *b, const struct zs_config *c,
                          enum zs_scheme scheme, enum zs_unit unit, unsigned world, struct theory_schedule *out)
{
	walk_ranks(d, b, c, scheme, unit, world, out, NULL);
}

void theory_walk_rank_peaks(const struct theory_desc *d, const struct theory_bytes *b, const struct zs_config *c,
                            enum zs_scheme scheme, enum zs_unit unit, unsigned world, uint64_t *peaks)
{
	struct theory_schedule s;
	walk_ranks(d, b, c, scheme, unit, world, &s, peaks);
}

uint64_t theory_desc_forward_end_bytes(const struct theory_desc *d)
{
	uint64_t bytes = 0;
	struct theory_rank_counts rc;
	int moe = d->model != NULL && d->model->experts > 0;
	/* balanced: the experts' saved rows sum to B·T·k a block whatever the routing */
	if (moe)
		theory_rank_counts(&rc, NULL, d->model, d->batch * d->seq, ZS_DP, ZS_UNIT_MODEL, 1, 0);
	struct walk w = {.model = d->model, .counts = moe ? &rc : NULL};
	for (size_t i = 0; d->has_buffers && i < d->bufs.n; i++) {
		const struct step_buffer *x = &d->bufs.buf[i];
		if (x->when != STEP_AT_BACKWARD && !x->recomputed)
			bytes += buf_bytes(&w, x);
	}
	if (moe)
		theory_rank_counts_free(&rc);
	return bytes;
}

int theory_walk_trace(const struct theory_desc *d, const struct theory_bytes *b, const struct zs_config *c,
                      enum zs_scheme scheme, enum zs_unit unit, unsigned world, struct theory_trace *tr)
{
	/* Not DeepSpeed's ZeRO-3 yet: its walk by module (ds3_walk) gathers
	 * and frees as category sums the engine makes as blocks of their own
	 * (docs/schedule.md, "The replay in theory"). */
	if (c == NULL || !d->has_buffers)
		return -1;
	struct theory_schedule scratch;
	walk_schedule(d, b, c, scheme, unit, world, &scratch, tr, 0);
	return tr->unmatched ? -1 : 0;
}

enum zs_phase theory_binding_phase(const struct theory_schedule *s)
{
	return s->peak_phase;
}

/* The framework's exact peak of m at micro-batch `batch` (its own
 * description, built and dropped); UINT64_MAX where the PyTorch step does
 * not describe that micro-batch, which the search then takes as not
 * fitting: it claims no micro-batch nothing describes. */
static uint64_t walk_peak_at(const struct theory_request *req, enum zs_scheme scheme, enum zs_unit unit,
                             unsigned world, uint64_t batch)
{
	struct theory_schedule s;
	struct theory_bytes b;
	theory_request_bytes(req, &b);
	if (theory_tfm_framework_schedule(req->model, NULL, &req->act, &b, req->config, batch, scheme, unit, world,
	                                  &s) != 0)
		return UINT64_MAX;
	return s.peak_bytes;
}

int theory_walk_described(const struct theory_request *req, unsigned world, uint64_t batch, char **why)
{
	struct theory_schedule s;
	if (req->model == NULL || !zs_wrapper_step(req->config))
		return 1;
	return theory_autograd_schedule(req->model, req->config, batch, req->act.seq, world, &s, why) == 0;
}

uint64_t theory_walk_max_batch(const struct theory_request *req, enum zs_scheme scheme, enum zs_unit unit,
                               unsigned world, const struct theory_schedule *at_batch)
{
	double usable = theory_request_usable(req);
	uint64_t b = req->config->batch;
	/* The walk's peak grows with the micro-batch (every activation and
	 * scratch buffer is b times its b = 1 bytes; nothing else depends on
	 * b), so the largest b that fits is found by doubling and halving,
	 * each probe a walk. */
	uint64_t lo, hi;
	if ((double)at_batch->peak_bytes <= usable)
		lo = b;
	else if (b == 1 || (double)walk_peak_at(req, scheme, unit, world, 1) > usable)
		return 0;
	else
		lo = 1;
	hi = lo * 2;
	while (hi <= THEORY_WALK_MAX_BATCH && theory_tfm_exact(req->model, &req->act, hi) &&
	       (double)walk_peak_at(req, scheme, unit, world, hi) <= usable) {
		lo = hi;
		hi *= 2;
	}
	if (hi > THEORY_WALK_MAX_BATCH || !theory_tfm_exact(req->model, &req->act, hi))
		return lo; /* the cap: more than any rank runs */
	while (hi - lo > 1) { /* peak(lo) fits, peak(hi) does not */
		uint64_t mid = lo + (hi - lo) / 2;
		if ((double)walk_peak_at(req, scheme, unit, world, mid) <= usable)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}
