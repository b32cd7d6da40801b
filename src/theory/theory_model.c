/*
 * theory_model — the paper level for transformers: parameters per unit
 * from a Hugging Face shape (util/model.h), activations from Korthikanti
 * et al. (2022), Table 2 without parallelism, and the peak they make with
 * the model states of ZeRO (SC'20) and the transients of docs/schedule.md.
 *
 * Parameters are the step description's (util/step.h: Hugging Face's
 * tensors, their shapes and modules, built from the config), summed per
 * unit; they give the published counts (tests/test_theory.c).
 *
 * Activations (Korthikanti §4.1, Table 2), with 2-byte activations:
 * sbh(34 + 5as/h) per layer; 34sbh with selective recomputation (the
 * attention scores, 5as²b, are recomputed); 2sbh with full (only the
 * layer input is kept). Flash attention never stores the scores: the
 * 5as/h term goes. Outside the layers, as the paper lists them: the
 * embeddings' dropout mask sbh (gpt2: llama has no dropout), the final
 * norm's input 2sbh, the head's input 2sbh, and the fp32 logits 4sbv the
 * loss keeps, with their gradient 4sbv at the start of backward. In fp32
 * precision every 2-byte term doubles (the masks stay 1 byte).
 * docs/schedule.md says where the formula does not fit a family exactly.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "util/ds_coord.h"
#include "util/step.h"
#include "util/util.h"

static const char *const act_names[THEORY_NACTS] = {
	"layers", "recomputed_layer", "embedding_dropout_mask", "final_norm_input",
	"head_input", "logits", "logits_grad",
};

const char *theory_act_name(enum theory_act a)
{
	return a < THEORY_NACTS ? act_names[a] : "?";
}

/* ------------------------------------------------------------------------ */
/* Parameters */

/* The units of `--unit layer`, from the description's layers (util/step.h). */
void theory_model_units(const struct zs_model *m, struct theory_units *u)
{
	struct step_params p;

	step_params_build(&p, m);
	u->embeddings = p.layer[0].numel;
	u->block = m->layers > 0 ? p.layer[1].numel : 0;
	u->layers = m->layers;
	u->head = p.layer[p.nlayers - 1].numel;
	step_params_free(&p);
}

uint64_t theory_model_params(const struct zs_model *m)
{
	struct theory_units u;

	theory_model_units(m, &u);
	return u.embeddings + u.layers * u.block + u.head;
}

/* DeepSpeed's estimator takes L as the largest nn.Module's own params
 * (recurse=False) of the Hugging Face model, whose modules are not
 * zerosim's fused tensors (util/step.h). */
uint64_t theory_model_largest_module(const struct zs_model *m)
{
	struct step_params p;

	step_params_build(&p, m);
	uint64_t L = step_params_largest_hf_module(&p);
	step_params_free(&p);
	return L;
}

size_t theory_model_tensors(const struct zs_model *m, uint64_t *n)
{
	struct step_params p;

	step_params_build(&p, m);
	for (size_t i = 0; i < p.ntensors; i++)
		n[i] = p.tensor[i].numel;
	size_t nt = p.ntensors;
	step_params_free(&p);
	return nt;
}

/* ------------------------------------------------------------------------ */
/* Activations */

/* sbh and 5as²b at micro-batch b, with 2-byte activations. */
static uint64_t sbh(const struct zs_model *m, const struct theory_act_opts *o, uint64_t b)
{
	return o->seq * b * m->hidden;
}

static uint64_t scores(const struct zs_model *m, const struct theory_act_opts *o, uint64_t b)
{
	return o->flash ? 0 : 5 * m->heads * o->seq * o->seq * b;
}

/* Korthikanti's 2-byte activations double in fp32; the 1-byte dropout
 * masks do not: in a layer the attention's and the MLP's, sbh each, and of
 * the scores' 5as²b the softmax's mask as²b. */
uint64_t theory_layer_activations(const struct zs_model *m, const struct theory_act_opts *o,
                                  uint64_t batch)
{
	uint64_t x = sbh(m, o, batch), sc = scores(m, o, batch) / 5; /* as²b */

	switch (o->recompute) {
	case ZS_RECOMPUTE_FULL:
		return 2 * x * o->elem / 2;
	case ZS_RECOMPUTE_SELECTIVE:
		return 32 * x * o->elem / 2 + 2 * x;
	case ZS_RECOMPUTE_NONE:
	default:
		return (32 * x + 4 * sc) * o->elem / 2 + 2 * x + sc;
	}
}

uint64_t theory_activations(const struct zs_model *m, const struct theory_act_opts *o,
                            uint64_t batch, uint64_t terms[THEORY_NACTS])
{
	uint64_t x = sbh(m, o, batch), sc = scores(m, o, batch) / 5, sum = 0; /* sc: as²b */
	uint64_t logits = 4 * o->seq * batch * m->vocab;

	terms[THEORY_ACT_LAYERS] = m->layers * theory_layer_activations(m, o, batch);
	/* The backward of one layer holds what recomputation rebuilt. */
	switch (o->recompute) {
	case ZS_RECOMPUTE_SELECTIVE:
		terms[THEORY_ACT_RECOMPUTED] = 4 * sc * o->elem / 2 + sc;
		break;
	case ZS_RECOMPUTE_FULL:
		terms[THEORY_ACT_RECOMPUTED] = (32 * x + 4 * sc) * o->elem / 2 + 2 * x + sc;
		break;
	case ZS_RECOMPUTE_NONE:
	default:
		terms[THEORY_ACT_RECOMPUTED] = 0;
		break;
	}
	terms[THEORY_ACT_EMBEDDING_DROPOUT] = m->family == ZS_FAMILY_GPT2 ? x : 0;
	terms[THEORY_ACT_FINAL_NORM_INPUT] = x * o->elem;
	terms[THEORY_ACT_HEAD_INPUT] = x * o->elem;
	terms[THEORY_ACT_LOGITS] = logits;
	terms[THEORY_ACT_LOGITS_GRAD] = logits;
	for (int a = 0; a < THEORY_NACTS; a++)
		sum += terms[a];
	return sum;
}

int theory_model_exact(const struct zs_model *m, const struct theory_act_opts *o, uint64_t batch)
{
	double h = (double)m->hidden, s = (double)o->seq, b = (double)batch;
	double layer = s * b * h * 34 + 5 * (double)m->heads * s * s * b;
	/* Above the sum of every term, in fp32 (twice the 2-byte terms). */
	double act = ((double)m->layers + 1) * layer * 2 + 8 * s * b * (double)m->vocab + 8 * s * b * h;

	return act < 0x1p52;
}

/* ------------------------------------------------------------------------ */
/* Peak */

void theory_model_peak(const struct zs_model *m, const struct theory_act_opts *o,
                       const struct theory_bytes *b, uint64_t batch, enum zs_scheme scheme,
                       enum zs_unit unit, unsigned world, struct theory_peak *out)
{
	struct theory_units u;
	struct theory_unit_run runs[3];
	size_t n = 0;
	uint64_t one[THEORY_NACTS];

	*out = (struct theory_peak){0};
	theory_model_units(m, &u);
	if (unit == ZS_UNIT_MODEL) {
		runs[n++] = (struct theory_unit_run){ u.embeddings + u.layers * u.block + u.head, 1 };
	} else {
		runs[n++] = (struct theory_unit_run){ u.embeddings, 1 };
		runs[n++] = (struct theory_unit_run){ u.block, u.layers };
		if (u.head > 0)
			runs[n++] = (struct theory_unit_run){ u.head, 1 };
	}
	theory_states(runs, n, b, scheme, world, &out->states);
	out->activations = theory_activations(m, o, batch, out->act);
	out->activations_per_sequence = theory_activations(m, o, 1, one);

	memcpy(out->peak_breakdown, out->states.resident_breakdown, sizeof out->peak_breakdown);
	out->peak_breakdown[THEORY_GATHERED_PARAMS] = out->states.gathered_params;
	out->peak_breakdown[THEORY_FULL_GRADS] = out->states.full_grads;
	out->peak_breakdown[THEORY_ACTIVATIONS] = out->activations;
	for (int c = 0; c < THEORY_NCATEGORIES; c++)
		out->peak_bytes += out->peak_breakdown[c];
}

/* ------------------------------------------------------------------------ */
/* The exact schedule of zerosim's own transformer (docs/schedule.md,
 * "Transformers: the engine's schedule"), from the shape alone: the
 * tensors it lists, allocated and freed where the step does, with the
 * scheme's transients as the framework makes them (struct events: the
 * paper's, torch's FSDP, DeepSpeed's ZeRO-1/2 buckets; DDP's buckets and
 * ZeroRedundancyOptimizer's partition are resident), walked in order; the
 * peak is the largest total,
 * and its breakdown the categories at the moment the total first reached
 * it, as a tracker records them. */

/* A running total by category, with its first maximum. */
struct walk {
	uint64_t cur[THEORY_NCATEGORIES], total, peak, at_peak[THEORY_NCATEGORIES];
};

static void walk_add(struct walk *w, enum theory_category c, uint64_t bytes)
{
	w->cur[c] += bytes;
	w->total += bytes;
	if (w->total > w->peak) {
		w->peak = w->total;
		memcpy(w->at_peak, w->cur, sizeof w->cur);
	}
}

static void walk_sub(struct walk *w, enum theory_category c, uint64_t bytes)
{
	w->cur[c] -= bytes;
	w->total -= bytes;
}

/* The layers: 0 the embedding, 1..L the blocks, L+1 the head. A tensor
 * is allocated at the start of forward (AT_FORWARD), before its layer's
 * forward (AT_LAYER) or at the start of backward (AT_BACKWARD); freed
 * after the backward of layer `freed`; a recomputed one is also freed
 * after its layer's forward and allocated again before its backward. */
enum { AT_FORWARD, AT_LAYER, AT_BACKWARD };

struct tensor {
	uint64_t bytes;
	enum theory_category cat;
	int when;
	uint64_t layer, freed;
	int recomputed;
};

struct tensors {
	size_t n;
	struct tensor *t;
};

/* Every buffer of the step at micro-batch b, as the step description
 * lists them (util/step.h: the batch, the backward's scratch, the mixed
 * precision's conversion buffers, what each layer saves, their bytes and
 * lifetimes). The caller frees ts->t. */
static void tensor_list(const struct zs_model *m, const struct theory_act_opts *o, uint64_t b, struct tensors *ts)
{
	static const int when[] = {[STEP_AT_FORWARD] = AT_FORWARD, [STEP_AT_LAYER] = AT_LAYER,
	                           [STEP_AT_BACKWARD] = AT_BACKWARD};
	struct step_params p;
	struct step_buffers sb;
	int mixed = o->elem == 2;

	if (mixed)
		step_params_build(&p, m); /* the conversion buffers' size */
	step_buffers_build(&sb, m, mixed ? &p : NULL, b, o->seq, mixed, o->recompute);
	ts->n = sb.n;
	ts->t = zs_calloc(sb.n > 0 ? sb.n : 1, sizeof *ts->t);
	for (size_t i = 0; i < sb.n; i++) {
		const struct step_buffer *x = &sb.buf[i];
		ts->t[i] = (struct tensor){x->elements * x->esize,
		                           x->cat == ZS_CAT_ACTIVATIONS ? THEORY_ACTIVATIONS : THEORY_SCRATCH,
		                           when[x->when], x->layer, x->freed_after, x->recomputed};
	}
	free(sb.buf);
	if (mixed)
		step_params_free(&p);
}

static void alloc_at(struct walk *w, const struct tensors *ts, int when)
{
	for (size_t i = 0; i < ts->n; i++)
		if (ts->t[i].when == when)
			walk_add(w, ts->t[i].cat, ts->t[i].bytes);
}

/* Layer l's tensors before its forward (all of them, alloc) or after it
 * (the recomputed ones freed); before its backward (the recomputed ones
 * again, alloc) or after it (those it frees). */
static void forward_part(struct walk *w, const struct tensors *ts, uint64_t l, int alloc)
{
	for (size_t i = 0; i < ts->n; i++)
		if (ts->t[i].when == AT_LAYER && ts->t[i].layer == l && (alloc || ts->t[i].recomputed))
			(alloc ? walk_add : walk_sub)(w, ts->t[i].cat, ts->t[i].bytes);
}

static void backward_part(struct walk *w, const struct tensors *ts, uint64_t l, int alloc)
{
	for (size_t i = 0; i < ts->n; i++)
		if (alloc ? ts->t[i].when == AT_LAYER && ts->t[i].layer == l && ts->t[i].recomputed : ts->t[i].freed == l)
			(alloc ? walk_add : walk_sub)(w, ts->t[i].cat, ts->t[i].bytes);
}

static void forward_layer(struct walk *w, const struct tensors *ts, uint64_t l)
{
	forward_part(w, ts, l, 1);
	forward_part(w, ts, l, 0);
}

static void backward_layer(struct walk *w, const struct tensors *ts, uint64_t l)
{
	backward_part(w, ts, l, 1);
	backward_part(w, ts, l, 0);
}

int theory_model_has_schedule(const struct zs_model *m, const struct theory_act_opts *o,
                              const struct theory_bytes *b, enum zs_framework fw, enum zs_scheme scheme)
{
	/* fp32, or mixed (fp32 master, 16-bit activations) */
	return m->layers + 2 <= ZS_MAX_WIDTHS && o->elem == (b->master != 0 ? 2 : 4) && !o->flash &&
	       (fw != ZS_FW_DEEPSPEED || scheme != ZS_ZERO3 || o->recompute != ZS_RECOMPUTE_FULL) &&
	       o->seq <= m->positions;
}

/* What a scheme gathers and reduces unit by unit: unit u's params are
 * gathered at gp bytes an element (0: never) for its forward and, unless
 * still held, for its backward, its full grads at fg bytes an element
 * for its backward; a unit's gathered params stay from its forward into
 * its backward for every unit (keep_all: FSDP's SHARD_GRAD_OP) or the
 * root (keep_root: FULL_SHARD's whole model, unit=model); prefetch: a
 * unit's backward gathers the next one of backward first (BACKWARD_PRE);
 * full: full grads through backward (paper zero2's Ψ·g, DeepSpeed
 * ZeRO-1's), after bucket bytes of DeepSpeed's reduce buckets, both
 * from backward's start to its end. */
struct events {
	unsigned gp, fg;
	int keep_all, keep_root, prefetch;
	uint64_t full, bucket;
	/* FSDP at N > 1: mp, the bytes of a slot of the 16-bit local shard an
	 * unshard sends from (_mp_shard; 0 in fp32); post_backward, its hook's
	 * padded grad copy and output shard; cast, the output's fp32 cast
	 * beside it (0 in fp32). Category buckets. */
	unsigned mp, cast;
	int post_backward; /* and a gathered copy padded to N·s_u (_full_param_padded) */
};

/* The step's state: the walk, which units are held gathered, and the
 * elements every rank sends in all-gathers and reduce-scatters. */
struct step {
	struct walk w;
	const struct events *ev;
	const struct theory_schedule *sc;
	const struct tensors *ts;
	uint64_t N;
	int held[ZS_MAX_WIDTHS];
	uint64_t gathered, reduced;
};

/* Unit u's slots per rank, ceil(n_u/N). */
static uint64_t slots(const struct step *st, size_t u) { return (st->sc->units[u] + st->N - 1) / st->N; }

/* The elements of unit u's gathered copy. */
static uint64_t copy_elements(const struct step *st, size_t u)
{
	return st->ev->post_backward ? st->N * slots(st, u) : st->sc->units[u];
}

static void gather(struct step *st, size_t u)
{
	walk_add(&st->w, THEORY_BUCKETS, slots(st, u) * st->ev->mp);
	walk_add(&st->w, THEORY_GATHERED_PARAMS, copy_elements(st, u) * st->ev->gp);
	walk_sub(&st->w, THEORY_BUCKETS, slots(st, u) * st->ev->mp);
	st->gathered += (st->N - 1) * ((st->sc->units[u] + st->N - 1) / st->N);
	st->held[u] = 1;
}

static void release(struct step *st, size_t u)
{
	if (st->held[u])
		walk_sub(&st->w, THEORY_GATHERED_PARAMS, copy_elements(st, u) * st->ev->gp);
	st->held[u] = 0;
}

/* FSDP's _post_backward_hook, after the reshard: F.pad's copy of the
 * unsharded grad (N·s_u), the output shard and its fp32 cast, freed as
 * the hook returns (the grad itself is freed after it). */
static void post_backward(struct step *st, size_t u)
{
	uint64_t sh = slots(st, u), staged = (st->N * sh + sh) * st->ev->fg;
	if (!st->ev->post_backward)
		return;
	walk_add(&st->w, THEORY_BUCKETS, staged);
	walk_add(&st->w, THEORY_BUCKETS, sh * st->ev->cast);
	walk_sub(&st->w, THEORY_BUCKETS, staged + sh * st->ev->cast);
}

static int kept(const struct step *st, size_t u, enum zs_unit unit)
{
	return st->ev->keep_all || (st->ev->keep_root && u == 0 && unit == ZS_UNIT_MODEL);
}

/* A tied head's own visit of unit 0, gathered as for a forward unless it
 * is held (SHARD_GRAD_OP), in forward or backward. */
static void visit_head(struct step *st, uint64_t head, enum zs_unit unit, int backward)
{
	int hooks = st->ev->gp > 0 && !st->held[0];
	if (hooks)
		gather(st, 0);
	(backward ? backward_layer : forward_layer)(&st->w, st->ts, head);
	if (hooks && !kept(st, 0, unit))
		release(st, 0);
}

/* DeepSpeed's ZeRO-3 on a transformer (docs/schedule.md, "deepspeed",
 * ZeRO-3 on a transformer): the modules are the nn.Modules with
 * parameters of their own, the step description's (util/step.h), in
 * forward order; a tied head is the token table again, whose grads its
 * own module makes. Their tensors are theory_model_tensors' runs. */
struct ds3_modules {
	size_t n, first[THEORY_MAX_TENSORS], count[THEORY_MAX_TENSORS];
	int grads[THEORY_MAX_TENSORS];
	size_t of_layer[ZS_MAX_WIDTHS + 1]; /* layer l's modules: [of_layer[l], of_layer[l + 1]) */
};

static void ds3_module(struct ds3_modules *md, size_t first, size_t count, int grads)
{
	md->first[md->n] = first;
	md->count[md->n] = count;
	md->grads[md->n++] = grads;
}

/* The description's modules (util/step.h) in forward order; a module over
 * tensors another module owns (the tied head over the token table) makes
 * no grads of its own. */
static void ds3_modules(const struct zs_model *m, struct ds3_modules *md)
{
	struct step_params p;
	size_t l = 0;
	step_params_build(&p, m);
	md->n = 0;
	for (size_t i = 0; i < p.nmodules; i++) {
		const struct step_module *x = &p.module[i];
		while (l <= x->layer)
			md->of_layer[l++] = md->n;
		ds3_module(md, x->first, x->n, x->n > 0 && p.tensor[x->first].module == i);
	}
	while (l <= p.nlayers)
		md->of_layer[l++] = md->n;
	step_params_free(&p);
}

/* The reduce bucket as the engine fills it (scheme_deepspeed.c): its
 * tensors, elements used, and a tensor larger than it whose grad is held
 * past its module; the elements every rank sends reducing. */
struct ds3_bucket {
	uint64_t B, used, held, reduced;
	size_t count, t[THEORY_MAX_TENSORS];
};

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
	walk_add(w, THEORY_FULL_GRADS, pad * g);
	walk_add(w, THEORY_FULL_GRADS, in_place ? 0 : N * part * g);
	walk_sub(w, THEORY_FULL_GRADS, (in_place ? 0 : N * part * g) + pad * g + bk->held);
	bk->held = 0;
	bk->reduced += (N - 1) * part;
	bk->used = bk->count = 0;
}

/* The tensors the coordinator gathered: each whole block, and with the
 * params offloaded the device copy of the rank's partition before it. */
static void ds3_gathered(struct walk *w, const struct ds_coord *d, const uint64_t *tn, const size_t *t,
                         size_t n, const struct theory_bytes *b, int offp)
{
	for (size_t i = 0; i < n; i++) {
		walk_add(w, THEORY_GATHERED_PARAMS, tn[t[i]] * b->p);
		walk_add(w, THEORY_GATHERED_PARAMS, offp ? d->s[t[i]] * b->p : 0);
		walk_sub(w, THEORY_GATHERED_PARAMS, offp ? d->s[t[i]] * b->p : 0);
	}
}

static void ds3_released(struct walk *w, const uint64_t *tn, const size_t *t, size_t n, const struct theory_bytes *b)
{
	for (size_t i = 0; i < n; i++)
		walk_sub(w, THEORY_GATHERED_PARAMS, tn[t[i]] * b->p);
}

/* The engine's step over --steps steps (the first records the trace):
 * each layer's tensors, then its modules, each fetched (with the
 * prefetch), run, its grads (backward) made, put in the bucket tensor by
 * tensor and dropped, and released; the epilogue's flush; step()'s fp32
 * gradient partition; the persistent params gathered after it. */
static void ds3_walk(const struct zs_model *m, const struct theory_act_opts *o, const struct theory_bytes *b,
                     const struct zs_config *c, uint64_t batch, unsigned world, struct theory_schedule *out)
{
	/* large, so on the heap; a row's own, so not static */
	struct tensors *ts = zs_calloc(1, sizeof *ts);
	uint64_t *tn = zs_calloc(THEORY_MAX_TENSORS, sizeof *tn);
	struct ds3_modules *md = zs_malloc(sizeof *md);
	struct ds3_bucket *bk = zs_malloc(sizeof *bk);
	struct walk w = {0};
	size_t nt = theory_model_tensors(m, tn), L = m->layers, nrel;
	size_t *rel = zs_calloc(nt, sizeof *rel), *post = zs_calloc(nt, sizeof *post);
	const size_t *got;
	uint64_t N = world, S = 0, persist = 0, base[THEORY_NCATEGORIES], sent = 0, sent_el = 0;
	int off = c->offload != ZS_OFFLOAD_NONE, offp = c->offload == ZS_OFFLOAD_PARAMS;
	ds3_modules(m, md);
	struct ds_coord *d = ds_coord_new(tn, nt, md->first, md->count, md->n, c, world);
	for (size_t t = 0; t < nt; t++) {
		S += d->s[t];
		persist += d->persist[t] ? tn[t] : 0;
	}
	out->params = theory_model_params(m);
	theory_ds3_resident(b, c, S, persist, world, out, base);
	tensor_list(m, o, batch, ts);
	for (int k = 0; k < THEORY_NCATEGORIES; k++) /* set-up */
		walk_add(&w, (enum theory_category)k, base[k]);
	*bk = (struct ds3_bucket){.B = (uint64_t)c->ds_reduce_bucket};
	for (unsigned step = 1; step <= c->steps; step++) {
		int complete = step > 1;
		size_t j = 0;
		ds_coord_begin_step(d, step);
		bk->reduced = 0;
		alloc_at(&w, ts, AT_FORWARD);
		for (size_t l = 0; l <= L + 1; l++) {
			forward_part(&w, ts, l, 1);
			for (size_t mi = md->of_layer[l]; mi < md->of_layer[l + 1]; mi++, j++) {
				size_t ng = ds_coord_fetch(d, c, j, complete, &got);
				ds3_gathered(&w, d, tn, got, ng, b, offp);
				ds3_released(&w, tn, rel, ds_coord_release(d, j, complete, rel), b);
			}
			forward_part(&w, ts, l, 0);
		}
		alloc_at(&w, ts, AT_BACKWARD);
		for (size_t l = L + 2; l-- > 0;) {
			backward_part(&w, ts, l, 1);
			for (size_t mi = md->of_layer[l + 1]; mi-- > md->of_layer[l]; j++) {
				size_t ng = ds_coord_fetch(d, c, j, complete, &got);
				ds3_gathered(&w, d, tn, got, ng, b, offp);
				uint64_t n = 0;
				for (size_t t = md->first[mi]; md->grads[mi] && t < md->first[mi] + md->count[mi]; t++)
					n += tn[t];
				walk_add(&w, THEORY_FULL_GRADS, n * b->g);
				for (size_t t = md->first[mi]; md->grads[mi] && t < md->first[mi] + md->count[mi]; t++) {
					if (bk->used + tn[t] > bk->B && bk->count > 0)
						ds3_flush(&w, bk, tn, N, b->g);
					bk->t[bk->count++] = t;
					bk->used += tn[t];
				}
				walk_sub(&w, THEORY_FULL_GRADS, n * b->g); /* the module's grads dropped */
				if (md->grads[mi] && bk->count == 1 && tn[bk->t[0]] > bk->B && bk->held == 0) {
					bk->held = tn[bk->t[0]] * b->g; /* an oversized grad kept until it is reduced */
					walk_add(&w, THEORY_FULL_GRADS, bk->held);
				}
				ds3_released(&w, tn, rel, ds_coord_release(d, j, complete, rel), b);
			}
			backward_part(&w, ts, l, 0);
		}
		ds3_flush(&w, bk, tn, N, b->g); /* the epilogue */
		/* step(): everything released; the fp32 gradient partition (in
		 * mixed precision from a flat fp16 copy; offloaded, the host's);
		 * then the persistent params gathered */
		size_t npost = ds_coord_step(d, rel, &nrel, post);
		ds3_released(&w, tn, rel, nrel, b);
		walk_add(&w, THEORY_GRAD16, !off && b->g == 2 ? S * b->g : 0);
		walk_add(&w, THEORY_GRAD32, off ? 0 : S * 4);
		walk_sub(&w, THEORY_GRAD16, !off && b->g == 2 ? S * b->g : 0);
		walk_sub(&w, THEORY_GRAD32, off ? 0 : S * 4);
		ds3_gathered(&w, d, tn, post, npost, b, offp);
		uint64_t gathered = d->gathered;
		sent += (N - 1) * gathered * b->p + bk->reduced * b->g;
		sent_el += (N - 1) * gathered + bk->reduced;
		out->comm_bytes = (N - 1) * gathered * b->p + bk->reduced * b->g; /* the last step's */
		out->comm_elements = (N - 1) * gathered + bk->reduced;
	}
	ds_coord_free(d);
	free(ts->t);
	free(ts);
	free(tn);
	free(md);
	free(bk);
	free(rel);
	free(post);
	out->peak_bytes = w.peak;
	memcpy(out->peak_breakdown, w.at_peak, sizeof w.at_peak);
	out->steps_differ = 1;
	out->comm_bytes_mean = (double)sent / c->steps;
	out->comm_elements_mean = (double)sent_el / c->steps;
}

void theory_model_framework_schedule(const struct zs_model *m, const struct theory_act_opts *o,
                                     const struct theory_bytes *b, const struct zs_config *c, uint64_t batch,
                                     enum zs_scheme scheme, enum zs_unit unit, unsigned world,
                                     struct theory_schedule *out)
{
	/* large, so on the heap; a row's own, so not static */
	struct tensors *ts = zs_calloc(1, sizeof *ts);
	uint64_t *tn = zs_calloc(THEORY_MAX_TENSORS, sizeof *tn);
	struct theory_units u;
	struct theory_states sts;
	struct theory_bytes rb = *b; /* the resident state's bytes */
	struct events ev = {0};
	struct step st = { .ev = &ev, .sc = out, .ts = ts, .N = world };
	struct walk *w = &st.w;
	uint64_t L = m->layers, head = L + 1, N = world;
	enum zs_framework fw = c != NULL ? c->framework : ZS_FW_PAPER;
	int fsdp = fw == ZS_FW_TORCH && scheme >= ZS_ZERO2, mixed = b->master != 0;
	int ds = fw == ZS_FW_DEEPSPEED && (scheme == ZS_ZERO1 || scheme == ZS_ZERO2);
	uint64_t ds_step[THEORY_NCATEGORIES] = {0};
	/* A tied head reads the embedding's unit: with unit=layer it runs in a
	 * visit of that unit of its own, gathered for it (params only). */
	int visit = m->tied && unit == ZS_UNIT_LAYER;

	*out = (struct theory_schedule){0};
	theory_model_units(m, &u);
	if (unit == ZS_UNIT_MODEL) {
		out->units[out->nunits++] = u.embeddings + u.layers * u.block + u.head;
	} else {
		out->units[out->nunits++] = u.embeddings;
		for (uint64_t l = 0; l < L; l++)
			out->units[out->nunits++] = u.block;
		if (u.head > 0)
			out->units[out->nunits++] = u.head;
	}
	if (fw == ZS_FW_DEEPSPEED && scheme == ZS_ZERO3) { /* its own walk, module by module */
		ds3_walk(m, o, b, c, batch, world, out);
		free(ts->t);
		free(ts);
		free(tn);
		return;
	}
	if (fsdp) {
		/* FSDP: the FlatParameters sharded as the paper's zero3 shards
		 * them (SHARD_GRAD_OP too), in fp32 under MixedPrecision (no
		 * master), the working copies and full grads 16-bit; NO_SHARD
		 * at N = 1 gathers (casts) only in mixed. */
		if (mixed)
			theory_bytes_per_param(ZS_FP32, c->optimizer, &rb);
		theory_schedule_states(out, &rb, ZS_ZERO3, world, &sts);
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
		 * unit's at a time), at every N. */
		theory_schedule_states(out, b, ZS_ZERO2, world, &sts);
		uint64_t tmax = 0;
		for (size_t i = 0, nt = theory_model_tensors(m, tn); i < nt; i++)
			tmax = tn[i] > tmax ? tn[i] : tmax;
		theory_deepspeed_resident(b, c, tmax, world, out, ds_step);
		ev.bucket = (uint64_t)(1 + c->ds_overlap_comm) * (uint64_t)c->ds_reduce_bucket * b->g;
		ev.full = scheme == ZS_ZERO1 ? sts.params * b->g : 0;
		ev.fg = scheme == ZS_ZERO2 ? b->g : 0;
	} else {
		theory_schedule_states(out, b, scheme, world, &sts);
		if (N > 1 && scheme == ZS_ZERO3)
			ev.gp = b->p, ev.fg = b->g;
		if (N > 1 && scheme == ZS_ZERO2)
			ev.full = sts.params * b->g;
		if (N > 1 && scheme == ZS_ZERO3 && visit) { /* the head's two extra gathers of the embedding's unit */
			uint64_t s0 = (out->units[0] + N - 1) / N;
			out->comm_bytes += 2 * (N - 1) * s0 * b->p;
			out->comm_elements += 2 * (N - 1) * s0;
		}
	}
	if (fw == ZS_FW_TORCH && scheme <= ZS_ZERO1) {
		size_t nt = theory_model_tensors(m, tn);
		if (scheme == ZS_DP)
			out->comm_bytes = out->comm_elements = 0; /* DDP's all-reduce is by bucket */
		if (scheme == ZS_ZERO1)
			theory_torch_zero1(tn, nt, b, world, out);
		theory_torch_ddp(tn, nt, b->g, c->bucket_cap_mb, world, out);
	}

	/* The step. Unit i holds layers first_i..last_i: unit=model all of
	 * them; unit=layer the embedding, each block, the untied head (a tied
	 * head is in no unit's visit but its own). */
	tensor_list(m, o, batch, ts);
	for (int k = 0; k < THEORY_NCATEGORIES; k++)
		walk_add(w, (enum theory_category)k, out->resident_breakdown[k]);
	size_t U = out->nunits;
	uint64_t first[ZS_MAX_WIDTHS] = {0}, last[ZS_MAX_WIDTHS] = {0};
	for (size_t i = 0; i < U; i++) {
		first[i] = unit == ZS_UNIT_MODEL ? 0 : i;
		last[i] = unit == ZS_UNIT_MODEL ? head : i;
	}
	if (unit == ZS_UNIT_LAYER && m->tied)
		last[U - 1] = head; /* the layout's last unit ends at the head; it runs in its own visit */

	alloc_at(w, ts, AT_FORWARD);
	for (size_t i = 0; i < U; i++) {
		if (ev.gp > 0)
			gather(&st, i);
		for (uint64_t l = first[i]; l <= last[i]; l++)
			if (!(visit && l == head))
				forward_layer(w, ts, l);
		if (ev.gp > 0 && !kept(&st, i, unit))
			release(&st, i);
	}
	if (visit)
		visit_head(&st, head, unit, 0);
	alloc_at(w, ts, AT_BACKWARD);
	walk_add(w, THEORY_BUCKETS, ev.bucket);
	walk_add(w, THEORY_FULL_GRADS, ev.full);
	for (size_t i = U; i-- > 0;) {
		if (visit && i == U - 1)
			visit_head(&st, head, unit, 1);
		if (ev.gp > 0 && !st.held[i])
			gather(&st, i);
		if (ev.prefetch && i > 0 && !st.held[i - 1])
			gather(&st, i - 1);
		walk_add(w, THEORY_FULL_GRADS, out->units[i] * ev.fg);
		if (ev.fg > 0)
			st.reduced += (N - 1) * ((out->units[i] + N - 1) / N);
		for (uint64_t l = last[i] + 1; l-- > first[i];)
			if (!(visit && l == head))
				backward_layer(w, ts, l);
		release(&st, i);
		post_backward(&st, i);
		walk_sub(w, THEORY_FULL_GRADS, out->units[i] * ev.fg);
	}
	walk_sub(w, THEORY_FULL_GRADS, ev.full);
	walk_sub(w, THEORY_BUCKETS, ev.bucket);
	/* DeepSpeed's step(): its buffers on the state between steps (every
	 * activation is freed by now). */
	for (int k = 0; k < THEORY_NCATEGORIES; k++)
		walk_add(w, (enum theory_category)k, ds_step[k]);
	out->peak_bytes = w->peak;
	memcpy(out->peak_breakdown, w->at_peak, sizeof w->at_peak);
	if (fsdp) { /* what FSDP sends: the walk's collectives */
		out->comm_elements = st.gathered + st.reduced;
		out->comm_bytes = st.gathered * ev.gp + st.reduced * ev.fg;
	}
	free(ts->t);
	free(ts);
	free(tn);
}
