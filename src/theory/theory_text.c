/*
 * theory_text — the theory's text output, what a person reads first.
 *
 * For a model known by its MLP widths or only by its count: tables per
 * rank laid out like Table 1 of the ZeRO paper (Rajbhandari et al.,
 * SC'20): one line per N, one column per scheme, in GB = 1e9 bytes as in
 * the paper (smaller decimal units for a model whose largest cell is below
 * 1 GB).
 *
 * For a transformer: one table per unit mode with a line per (N, scheme)
 * that adds the peak up for the reader (model states + gathered params +
 * full grads + activations = peak), then whether the floor and the peak
 * fit and the largest micro-batch. DeepSpeed's estimator prints model
 * states only, per offload option, for one N; `accelerate estimate-memory`
 * prints one training figure per dtype (4x the weights) with no N and no
 * activations; neither says what the peak is made of or what would fit.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "theory/theory.h"
#include "util/ds_coord.h"
#include "util/buf.h"
#include "util/lora.h"
#include "util/step.h"
#include "util/nf4.h"
#include "util/util.h"

#define GB 1e9

/* A value with the paper's precision: three significant digits, whole
 * units from 1000 up (Table 1 prints 120, 52.5, 1.88, 0.12, 4011). Halves
 * round up as the paper does (41.25 -> 41.3), not to even as printf does:
 * the tiny nudge only decides exact ties. */
static const char *num_str(char *num, size_t size, double v)
{
	v *= 1 + 1e-12;
	if (v >= 1000)
		snprintf(num, size, "%.0f", v);
	else
		snprintf(num, size, "%.3g", v);
	return num;
}

/* Decimal units (the paper's GB is 1e9 bytes), the same spellings that
 * --device-mem accepts. */
static const struct { const char *name, *unit; double bytes; } scales[] = {
	{ "GB (1e9 bytes)", "GB", 1e9 }, { "MB (1e6 bytes)", "MB", 1e6 },
	{ "KB (1e3 bytes)", "KB", 1e3 }, { "bytes", "B", 1 },
};
#define NSCALES (sizeof scales / sizeof scales[0])

/* The largest decimal unit that keeps v at or above 1 (GB from 1 GB up). */
static size_t scale_of(double v)
{
	size_t sc = 0;
	while (sc + 1 < NSCALES && v < scales[sc].bytes)
		sc++;
	return sc;
}

/* What a row is judged on: its peak, whether it fits and the largest
 * micro-batch; exact when they are the framework's step's. */
struct headline {
	int exact;
	uint64_t peak;
	int fits_peak;
	uint64_t max_batch;
	char undescribed[400]; /* where max_batch + 1 is a micro-batch the exact step does not describe: why */
};
static void headline_of(const struct theory_request *req, const struct theory_row *r, struct headline *h);
static void allocator_text(struct zs_buf *t, const struct theory_request *req, enum zs_unit unit);

enum quantity { Q_FLOOR, Q_RESIDENT, Q_PEAK };

/* A transformer's row has a schedule only where zerosim's engine runs it
 * (theory_tfm_has_schedule); its floor always. */
static int has_quantity(const struct theory_request *req, const struct theory_row *r, enum quantity q)
{
	return q == Q_FLOOR || req->model == NULL || r->model_sched;
}

static double quantity(const struct theory_row *r, enum quantity q)
{
	switch (q) {
	case Q_RESIDENT: return (double)r->sched.resident_bytes;
	case Q_PEAK: return (double)r->sched.peak_bytes;
	case Q_FLOOR:
	default: return r->floor.resident_bytes;
	}
}

/* One Table-1-like block: N down, schemes across, in GB unless the
 * largest value is below 1 GB (a model small enough to run): then in the
 * largest decimal unit that keeps it at or above 1. */
static void put_table(struct zs_buf *t, const struct theory_request *req,
                      enum zs_unit unit, enum quantity q, const char *title)
{
	const struct zs_config *c = req->config;
	double largest = 0;
	size_t sc = 0;

	for (size_t w = 0; w < c->nworld; w++)
		for (size_t s = 0; s < c->nschemes; s++) {
			struct theory_row r;

			theory_row(req, c->schemes[s], unit, c->world[w], &r);
			if (has_quantity(req, &r, q) && quantity(&r, q) > largest)
				largest = quantity(&r, q);
		}
	sc = scale_of(largest);

	zs_buf_printf(t, "\n%s, %s\n%8s", title, scales[sc].name, "N");
	for (size_t s = 0; s < c->nschemes; s++)
		zs_buf_printf(t, " %10s", zs_scheme_name(c->schemes[s]));
	zs_buf_printf(t, "\n");
	for (size_t w = 0; w < c->nworld; w++) {
		zs_buf_printf(t, "%8u", c->world[w]);
		for (size_t s = 0; s < c->nschemes; s++) {
			struct theory_row r;
			char num[64];

			theory_row(req, c->schemes[s], unit, c->world[w], &r);
			zs_buf_printf(t, " %10s", has_quantity(req, &r, q)
			              ? num_str(num, sizeof num, quantity(&r, q) / scales[sc].bytes) : "-");
		}
		zs_buf_printf(t, "\n");
	}
}

/* The smallest N in the list where each scheme's floor (or, for a shape,
 * its schedule peak at the given batch) fits, with the largest batch per
 * rank whose peak fits there. */
static void put_fits(struct zs_buf *t, const struct theory_request *req, enum zs_unit unit,
                     int peak)
{
	const struct zs_config *c = req->config;

	if (peak)
		zs_buf_printf(t, "\nSmallest N in the list whose %s fits %.6g GB per rank, unit = %s "
		              "(batch %u), and the largest batch per rank there:\n",
		              req->alloc != NULL ? "step (reserved + fixed costs)" : "peak",
		              theory_request_usable(req) / GB, zs_unit_name(unit), c->batch);
	else
		zs_buf_printf(t, "\nSmallest N in the list whose floor fits %.6g GB per rank:\n",
		              theory_request_usable(req) / GB);
	for (size_t s = 0; s < c->nschemes; s++) {
		struct theory_row best = { .world = 0 };

		for (size_t w = 0; w < c->nworld; w++) {
			struct theory_row r;

			theory_row(req, c->schemes[s], unit, c->world[w], &r);
			if (peak && req->alloc != NULL) {
				struct headline h;
				headline_of(req, &r, &h);
				r.fits_peak = h.fits_peak;
				r.max_batch = h.max_batch;
			}
			if ((peak ? r.fits_peak : r.fits) == 1 && (best.world == 0 || r.world < best.world))
				best = r;
		}
		if (best.world == 0)
			zs_buf_printf(t, "  %-6s none\n", zs_scheme_name(c->schemes[s]));
		else if (peak)
			zs_buf_printf(t, "  %-6s N = %u, batch up to %llu\n", zs_scheme_name(c->schemes[s]),
			              best.world, (unsigned long long)best.max_batch);
		else
			zs_buf_printf(t, "  %-6s N = %u\n", zs_scheme_name(c->schemes[s]), best.world);
	}
}

static void mlp_text(struct zs_buf *t, const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	struct theory_bytes b;
	char num[64];

	theory_request_bytes(req, &b);
	zs_buf_printf(t, "Psi = %.17g parameters, %s precision, %s: p = %u, g = %u, k = %u bytes per parameter\n",
	              theory_request_params(req), theory_request_precision(req),
	              zs_optimizer_name(c->optimizer), b.p, b.g, b.k);
	if (req->shape_known) {
		zs_buf_printf(t, "layers");
		for (size_t i = 0; i < c->nwidths; i++)
			zs_buf_printf(t, "%s%zu", i ? "," : " ", c->widths[i]);
		zs_buf_printf(t, ", batch %u per rank\n", c->batch);
	}

	put_table(t, req, c->units[0], Q_FLOOR,
	          "Model states per rank, the paper's floors (ZeRO, SC'20, Table 1)");
	if (req->shape_known) {
		for (size_t u = 0; u < c->nunits; u++) {
			char *title = zs_asprintf("Model states per rank, the schedule (docs/schedule.md), unit = %s",
			                          zs_unit_name(c->units[u]));
			put_table(t, req, c->units[u], Q_RESIDENT, title);
			free(title);
			title = zs_asprintf("Peak per rank, the schedule, unit = %s",
			                    zs_unit_name(c->units[u]));
			put_table(t, req, c->units[u], Q_PEAK, title);
			free(title);
		}
	} else if (req->largest_unit > 0) {
		zs_buf_printf(t, "\nZeRO-3 transient (largest unit %.17g params gathered with its grads): ",
		              req->largest_unit);
		zs_buf_printf(t, "%s GB\n", num_str(num, sizeof num, req->largest_unit * (b.p + b.g) / GB));
	}
	for (size_t u = 0; req->shape_known && req->alloc != NULL && u < c->nunits; u++)
		allocator_text(t, req, c->units[u]);
	if (req->device_mem > 0) {
		put_fits(t, req, c->units[0], 0);
		for (size_t u = 0; req->shape_known && u < c->nunits; u++)
			put_fits(t, req, c->units[u], 1);
	}
}

/* ------------------------------------------------------------------------ */
/* Transformers */

/* Bytes in scales[sc] with two decimals, or "-" for nothing. */
static const char *in_scale(char *buf, size_t size, uint64_t bytes, int dash, size_t sc)
{
	if (dash && bytes == 0)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%.2f", (double)bytes / scales[sc].bytes);
	return buf;
}

/* theory --model's precision when none is given is mixed, measure
 * --model's fp32 (cmd_measure.c, transformer_run): the same options are
 * then two runs, and the text says so. Under the PyTorch step's plain
 * loop, DDP or FSDP it is fp32 on both sides (cmd_theory.c): nothing to say. */
static const char *default_precision_note(const struct zs_config *c)
{
	if ((c->given & ZS_KEY_BIT(ZS_KEY_PRECISION)) ||
	    (c->precision == ZS_FP32 && (c->wrapper == ZS_WRAPPER_NONE || c->wrapper == ZS_WRAPPER_DDP ||
	                                 c->wrapper == ZS_WRAPPER_FSDP)))
		return "";
	return " (theory's default; measure --model's is fp32: give --precision to both to compare them)";
}

/* Bytes with two decimals in the unit that suits them ("1.49 GB", "4.46 MB"). */
static const char *amount(char *buf, size_t size, uint64_t bytes)
{
	size_t sc = scale_of((double)bytes);
	snprintf(buf, size, "%.2f %s", (double)bytes / scales[sc].bytes, scales[sc].unit);
	return buf;
}

const char *theory_grouped(char *buf, size_t size, double v)
{
	char digits[32];
	size_t n = (size_t)snprintf(digits, sizeof digits, "%.0f", v), o = 0;

	for (size_t i = 0; i < n && o + 2 < size; i++) {
		if (i > 0 && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

static const char *const act_labels[THEORY_NACTS] = {
	"layers", "the layer being recomputed", "embedding dropout mask", "final norm input",
	"head input", "logits (fp32, 4sbv)", "logits gradient (fp32, 4sbv)",
};

static void model_header(struct zs_buf *t, const struct theory_request *req)
{
	const struct zs_model *m = req->model;
	const struct zs_config *c = req->config;
	struct theory_bytes b;
	char n1[32];

	theory_request_bytes(req, &b);
	zs_buf_printf(t, "%s (%s): %s parameters; %llu blocks, hidden %llu, %llu heads",
	              m->name, m->model_type, theory_grouped(n1, sizeof n1, (double)req->desc->params.numel),
	              (unsigned long long)m->layers, (unsigned long long)m->hidden,
	              (unsigned long long)m->heads);
	if (m->kv_heads != m->heads)
		zs_buf_printf(t, " (%llu key-value)", (unsigned long long)m->kv_heads);
	zs_buf_printf(t, ", vocabulary %llu, %s head\n", (unsigned long long)m->vocab,
	              m->tied ? "tied" : "untied");
	zs_buf_printf(t, "%s precision%s%s, %s: p = %u, g = %u, k = %u bytes per parameter; "
	              "sequence %llu, micro-batch %u per rank\n",
	              theory_request_precision(req), default_precision_note(c),
	              c->load_bf16 ? " (the model loaded in bf16, --load-dtype bf16: the exact step's; p, g and k are "
	                             "the paper level's)" : "",
	              zs_optimizer_name(c->optimizer), b.p, b.g, b.k, (unsigned long long)req->act.seq, c->batch);
	if (m->experts > 0) {
		const struct theory_routing *r = req->act.routing;
		enum theory_routing_mode mode = r != NULL ? r->mode : THEORY_ROUTING_BALANCED;
		zs_buf_printf(t, "%llu experts, top %llu: the routing is %s (--routing)", (unsigned long long)m->experts,
		              (unsigned long long)m->experts_per_tok, mode == THEORY_ROUTING_FILE ? r->file
		                                                       : theory_routing_name(mode));
		if (mode != THEORY_ROUTING_FILE) {
			struct theory_rank_counts rc;
			theory_rank_counts(&rc, r, m, (uint64_t)c->batch * req->act.seq, ZS_DP, ZS_UNIT_MODEL, 1, 0);
			zs_buf_printf(t, ", tokens per expert a block");
			for (size_t e = 0; e < rc.experts; e++)
				zs_buf_printf(t, "%s%llu", e == 0 ? " " : ", ", (unsigned long long)rc.counts[e]);
			theory_rank_counts_free(&rc);
			/* theory_routing_torch: the PyTorch step's idle experts from
			 * step 1 would hold no .grad nor Adam state */
			if (zs_wrapper_step(c) && mode == THEORY_ROUTING_WORST)
				zs_buf_printf(t, " (step 1 balanced, then worst: an expert's .grad and Adam state come with its "
				              "first token)");
			if (zs_wrapper_step(c))
				zs_buf_printf(t, "; a measured run departs from it by its routing imbalance: --routing FILE "
				              "(its measured.json) follows its counts");
		}
		zs_buf_printf(t, "\n");
	}
}

static void family_text(struct zs_buf *t, const struct theory_request *req);

static void activations_text(struct zs_buf *t, const struct theory_request *req)
{
	const struct zs_model *m = req->model;
	uint64_t act[THEORY_NACTS], total = theory_activations(m, &req->act, req->config->batch, act);
	char v[32], per[32];
	static const char *const formula[] = {
		[ZS_RECOMPUTE_NONE] = "sbh(34 + 5as/h)",
		[ZS_RECOMPUTE_SELECTIVE] = "34sbh, selective recompute",
		[ZS_RECOMPUTE_FULL] = "2sbh, full recompute",
	};
	const char *f = req->act.flash && req->act.recompute == ZS_RECOMPUTE_NONE
	                ? "34sbh, flash attention" : formula[req->act.recompute];

	zs_buf_printf(t, "\nActivations per rank at micro-batch %u (Korthikanti et al. 2022; "
	              "every scheme and N holds the same): %s\n",
	              req->config->batch, amount(v, sizeof v, total));
	for (int a = 0; a < THEORY_NACTS; a++) {
		if (act[a] == 0)
			continue;
		zs_buf_printf(t, "  %-30s %10s", act_labels[a], amount(v, sizeof v, act[a]));
		if (a == THEORY_ACT_LAYERS)
			zs_buf_printf(t, "  (%llu x %s, %s)", (unsigned long long)m->layers,
			              amount(per, sizeof per, act[a] / m->layers), f);
		zs_buf_printf(t, "\n");
	}
	family_text(t, req);
}

/* Bytes block 0 of b keeps to its backward (not recomputed) in the saved
 * tensors [first, last] of enum step_act; *all, every one's, recomputed too. */
static uint64_t block_saved(const struct step_buffers *b, enum step_act first, enum step_act last, uint64_t *all)
{
	uint64_t n = 0;
	*all = 0;
	for (size_t i = 0; i < b->n; i++) {
		const struct step_buffer *x = &b->buf[i];
		if (x->role == STEP_SAVED && x->block == 0 && x->index >= (unsigned)first && x->index <= (unsigned)last) {
			*all += x->elements * x->esize;
			n += x->recomputed ? 0 : x->elements * x->esize;
		}
	}
	return n;
}

/* "1.84 GB a block" (what it keeps to its backward), or where the
 * recomputation frees it after the forward, that said with its size. */
static const char *per_block(char *buf, size_t size, uint64_t kept, uint64_t all)
{
	char v[32];
	if (kept == all || kept > 0)
		snprintf(buf, size, "%s a block", amount(v, sizeof v, kept));
	else
		snprintf(buf, size, "%s a block in the forward, recomputed for the backward", amount(v, sizeof v, all));
	return buf;
}

/* Where the family's block departs from Korthikanti's GPT layer (the
 * formula above), read from the step's description (util/step.h's
 * buffers for this model, batch and sequence): each departure the
 * description holds, with its bytes a block. Nothing for gpt2, whose
 * block is the formula's. */
static void family_text(struct zs_buf *t, const struct theory_request *req)
{
	const struct zs_model *m = req->model;
	if (m->family == ZS_FAMILY_GPT2)
		return;
	struct step_buffers b;
	uint64_t all, kept;
	char v[32], w[128], n1[32], n2[32];
	step_buffers_build(&b, m, NULL, req->config->batch, req->act.seq, req->act.elem == 2, req->act.recompute);
	zs_buf_printf(t, "  %s's block departs from the formula's GPT layer (bytes from the step's description):\n",
	              m->model_type);
	kept = block_saved(&b, STEP_ACT_FCH, STEP_ACT_FCH_ACT, &all);
	if (all > 0)
		zs_buf_printf(t, "    %s MLP: the gate and up products and the activation, 3sbI (I = %llu), %s\n",
		              m->gemma ? "GeGLU (tanh GELU)" : "SwiGLU", (unsigned long long)m->intermediate,
		              per_block(w, sizeof w, kept, all));
	kept = block_saved(&b, STEP_ACT_ATT_TANH, STEP_ACT_ATT_TANH, &all);
	if (all > 0)
		zs_buf_printf(t, "    attention soft-capping (c = %g): the tanh of the a·s² scores, one more fp32 tensor, %s\n",
		              m->attn_softcap, per_block(w, sizeof w, kept, all));
	kept = block_saved(&b, STEP_ACT_PROJ_OUT, STEP_ACT_PROJ_RSTD, &all);
	uint64_t all2, kept2 = block_saved(&b, STEP_ACT_DOWN_OUT, STEP_ACT_DOWN_RSTD, &all2);
	if (all + all2 > 0)
		zs_buf_printf(t, "    four norms (before and after attention and the MLP): the inputs of the two after, "
		              "with 1/rms, %s\n", per_block(w, sizeof w, kept + kept2, all + all2));
	kept = block_saved(&b, STEP_ACT_QK_PRE, STEP_ACT_QK_RSTD, &all);
	if (all > 0)
		zs_buf_printf(t, "    q/k norms (an RMSNorm on each head's queries and keys): their input and 1/rms, %s\n",
		              per_block(w, sizeof w, kept, all));
	if (m->sliding_window > 0) {
		kept = block_saved(&b, STEP_ACT_ATT, STEP_ACT_ATT, &all);
		zs_buf_printf(t, "    sliding window of %llu tokens", (unsigned long long)m->sliding_window);
		if (m->window_pattern > 1)
			zs_buf_printf(t, " (%llu of every %llu layers)", (unsigned long long)m->window_pattern - 1,
			              (unsigned long long)m->window_pattern);
		zs_buf_printf(t, ": eager attention computes and keeps the full s² scores under the windowed mask "
		              "(%s): the window saves memory only under SDPA's kernels\n", per_block(w, sizeof w, kept, all));
	}
	if (m->final_softcap > 0)
		zs_buf_printf(t, "    final logit soft-capping (c = %g): in place on the logits, no more bytes\n",
		              m->final_softcap);
	if (m->experts > 0) {
		/* the router's (before the experts' own, enum step_moe) and one
		 * assignment's row through an expert (xe, gu, act, ye) */
		uint64_t router = 0, shared = 0, row = 0, k = m->experts_per_tok;
		uint64_t BT = (uint64_t)req->config->batch * req->act.seq;
		int rc = 0;
		for (size_t i = 0; i < b.n; i++) {
			const struct step_buffer *x = &b.buf[i];
			if (x->role != STEP_MOE || x->block != 0)
				continue;
			rc |= x->recomputed;
			if (x->index >= STEP_MOE_EXPERT)
				row += step_moe_expert(x) == 0 ? step_moe_row(m, x) * x->esize : 0;
			else if (x->index >= STEP_MOE_SGU)
				shared += x->elements * x->esize;
			else
				router += x->elements * x->esize;
		}
		zs_buf_printf(t, "    router: its logits' softmax (s·b·E, fp32), the top-%llu choice and weights, "
		              "the counts and the grouping, %s a block\n", (unsigned long long)k,
		              amount(v, sizeof v, router));
		zs_buf_printf(t, "    %llu SwiGLU experts in place of the dense MLP: each expert's saved tensors scale with "
		              "its tokens, k·s·b = %s assignments a block at %s B each, %s a block",
		              (unsigned long long)m->experts, theory_grouped(n1, sizeof n1, (double)(k * BT)),
		              theory_grouped(n2, sizeof n2, (double)row), amount(v, sizeof v, k * BT * row));
		if (shared > 0)
			zs_buf_printf(t, ", and the shared expert's %s", amount(w, sizeof w, shared));
		if (rc)
			zs_buf_printf(t, " (in the forward: recomputed for the backward)");
		zs_buf_printf(t, "\n    routing imbalance: the backward's scratch is sized by the busiest expert "
		              "(--routing: the counts above)\n");
	}
	free(b.buf);
}

/* Which unit is the largest, in words. */
static const char *largest_unit_name(const struct theory_units *u, int tied)
{
	if (u->head > 0 && u->head >= u->block && u->head >= u->embeddings)
		return "the head with the final norm";
	if (u->embeddings >= u->block)
		return tied ? "the embeddings with the final norm (the tied head gathers it again)"
		            : "the embeddings";
	return "a block";
}

static void units_text(struct zs_buf *t, const struct theory_request *req, enum zs_unit unit)
{
	const struct zs_model *m = req->model;
	struct theory_units u;
	struct theory_bytes b;
	char n1[32], n2[32], v[32];

	theory_units_of(&req->desc->params, &u);
	theory_request_bytes(req, &b);
	if (unit == ZS_UNIT_MODEL) {
		uint64_t psi = req->desc->params.numel;
		zs_buf_printf(t, "\nunit = model: one flat unit of %s elements; ZeRO-3 gathers the whole "
		              "model, %s with its grads\n", theory_grouped(n1, sizeof n1, (double)psi),
		              amount(v, sizeof v, psi * (b.p + b.g)));
		return;
	}
	uint64_t largest = u.head > u.embeddings ? u.head : u.embeddings;
	if (u.block > largest)
		largest = u.block;
	uint64_t nunits = u.layers + 1 + (u.head > 0 ? 1 : 0);
	zs_buf_printf(t, "\nunit = layer: %llu units; the largest is %s, %s elements",
	              (unsigned long long)nunits,
	              largest_unit_name(&u, m->tied), theory_grouped(n1, sizeof n1, (double)largest));
	if (largest != u.block)
		zs_buf_printf(t, ", %.2f times a block (%s)", (double)largest / (double)u.block,
		              theory_grouped(n2, sizeof n2, (double)u.block));
	/* a frozen or LoRA run: the grads of the largest trained unit only,
	 * as the paper level counts them (theory_states_trained) */
	uint64_t with_grads = largest * (b.p + b.g);
	if (zs_config_trains_part(req->config)) {
		struct theory_peak pk; /* the paper level alone: no step is walked (not every N is described) */
		theory_peak_of(m, &req->desc->params, &req->act, &b, req->config->batch, ZS_ZERO3, unit, 2, &pk);
		with_grads = pk.states.gathered_params + pk.states.full_grads;
	}
	zs_buf_printf(t, ": ZeRO-3 gathers it whole, %s with its grads%s\n", amount(v, sizeof v, with_grads),
	              zs_config_trains_part(req->config) ? " (the trained elements' alone)" : "");
	/* DeepSpeed's ZeRO-3 fetches by module, not by zerosim's unit: a
	 * mixture's sparse-MoE block is one z3 leaf (util/ds_coord.h
	 * ds_coord_leaf), the most it fetches at once */
	const struct step_params *p = &req->desc->params;
	int zero3 = 0;
	for (size_t i = 0; i < req->config->nschemes; i++)
		zero3 |= req->config->schemes[i] == ZS_ZERO3;
	if (req->config->framework == ZS_FW_DEEPSPEED && m->experts > 0 && zero3) {
		uint64_t leaf_n = 0;
		for (size_t l = 0; l < p->nlayers && leaf_n == 0; l++)
			for (size_t x = ds_coord_leaf(p, l); x < p->nmodules && p->module[x].layer == l; x++)
				for (size_t i = p->module[x].first; i < p->module[x].first + p->module[x].n; i++)
					leaf_n += p->tensor[i].numel;
		if (leaf_n > 0)
			zs_buf_printf(t, "  DeepSpeed's ZeRO-3 fetches by module: a block's sparse-MoE block (router and "
			              "experts) is one z3 leaf (set_z3_leaf_modules), %s elements fetched together, %s with "
			              "its grads; the attention's modules apart\n",
			              theory_grouped(n1, sizeof n1, (double)leaf_n), amount(v, sizeof v, leaf_n * (b.p + b.g)));
	}
}

/* Under --framework torch or deepspeed a transformer's headline is the
 * framework's exact step (the walk of what measure --model runs), where
 * the walk has it (theory_tfm_has_schedule); the paper's level, the parts
 * of the table, is its reference. */
static int framework_headline(const struct theory_request *req)
{
	/* a mixture's too: Korthikanti's dense layer is not its routed one;
	 * and a frozen or accumulating run's, which the dense formula does not
	 * know */
	return req->model != NULL && (req->config->framework != ZS_FW_PAPER || req->model->experts > 0 ||
	                              zs_config_trains_part(req->config) || req->config->grad_accum > 1);
}

static void headline_of(const struct theory_request *req, const struct theory_row *r, struct headline *h)
{
	h->exact = framework_headline(req) && r->model_sched;
	if (!h->exact) {
		*h = (struct headline){0, r->peak_bytes, r->fits_peak, r->max_batch, ""};
	} else {
		h->peak = r->sched.peak_bytes;
		h->fits_peak = req->device_mem > 0 ? (double)h->peak <= theory_request_usable(req) : -1;
		h->max_batch = req->device_mem > 0 ? theory_walk_max_batch(req, r->scheme, r->unit, r->world, &r->sched) : 0;
	}
	/* --allocator cuda: what the GPU holds decides, where the step is
	 * replayed (reserved plus the fixed costs within the usable memory:
	 * the replay runs out of nothing) */
	if (req->alloc != NULL && req->device_mem > 0) {
		struct theory_held held;
		theory_alloc_held(req, r, req->alloc, &held);
		if (held.covered) {
			h->fits_peak = !held.oom;
			h->max_batch = theory_alloc_max_batch(req, r);
		}
	}
	/* the largest micro-batch, whichever search found it, bounded by what
	 * the exact step describes rather than by memory: the step's reason */
	h->undescribed[0] = '\0';
	char *why = NULL;
	if (h->exact && h->max_batch > 0 && h->max_batch < THEORY_WALK_MAX_BATCH &&
	    !theory_walk_described(req, r->world, h->max_batch + 1, &why))
		snprintf(h->undescribed, sizeof h->undescribed, "%s", why != NULL ? why : "not described");
	free(why);
}

/* Why the framework's exact step is not available (theory_tfm_has_schedule
 * false), in words. */
static const char *no_step_reason(const struct theory_request *req)
{
	const struct zs_model *m = req->model;
	struct theory_bytes b;

	theory_request_bytes(req, &b);
	if (req->bf16)
		return "measure runs no bf16";
	if (req->act.flash)
		return "flash attention, which measure does not run";
	if (m->layers + 2 > ZS_MAX_WIDTHS)
		return "more blocks than measure runs";
	if (req->act.seq > m->positions)
		return "a sequence beyond the model's positions";
	return "activations of another width than the precision's";
}

static void table_text(struct zs_buf *t, const struct theory_request *req, enum zs_unit unit)
{
	const struct zs_config *c = req->config;
	int mem = req->device_mem > 0, fwh = framework_headline(req), fallback = 0;
	char undescribed[400] = "";
	uint64_t after = 0;
	const char *fw = zs_framework_name(c->framework), *reason = NULL;
	char v[7][32];
	uint64_t largest = 0;

	for (size_t w = 0; w < c->nworld; w++)
		for (size_t s = 0; s < c->nschemes; s++) {
			struct theory_row r;

			theory_row(req, c->schemes[s], unit, c->world[w], &r);
			/* the paper level's unit, as without a framework (a framework's
			 * step prints in it, however much larger) */
			if (r.peak_bytes > largest)
				largest = r.peak_bytes;
		}
	size_t sc = scale_of((double)largest);
	if (mem)
		zs_buf_printf(t, "\nPer rank, %s, on %.6g GB with %.6g GB reserved "
		              "(%.6g GB usable):\n", scales[sc].name, req->device_mem / GB, req->reserve / GB,
		              theory_request_usable(req) / GB);
	else
		zs_buf_printf(t, "\nPer rank, %s:\n", scales[sc].name);
	char runs[96];
	snprintf(runs, sizeof runs, "what measure --model --precision %s runs", zs_precision_name(c->precision));
	if (fwh)
		zs_buf_printf(t, "(the peak is %s's exact step, %s%s; \"paper level\" is the reference: the paper's "
		              "model states and transients with Korthikanti's activations, the parts to its left)\n",
		              fw, runs, mem ? ", and the fits and the largest micro-batch are judged on it" : "");
	if (c->freeze[0]) { /* the paper level and the floors over Ψ_t; DeepSpeed's estimators over Ψ */
		char tn[32], pn[32];
		zs_buf_printf(t, "(--freeze %s: %s of %s parameters trained; the model states, the paper level "
		              "and its parts, the floors (the fits below, theory.json's floor) and the %s peak are the "
		              "frozen run's: p over every parameter, g and k over the trained ones, docs/schedule.md "
		              "\"The paper level under --freeze\"; DeepSpeed's estimates below (and the floor beside "
		              "them) are the unfrozen model's, every parameter trained)\n", c->freeze,
		              theory_grouped(tn, sizeof tn, theory_request_trained(req)),
		              theory_grouped(pn, sizeof pn, theory_request_params(req)), fw);
	}
	if (c->lora_r && req->model != NULL) { /* PEFT's model: Ψ the base's and the adapters', Ψ_t the adapters' */
		char tn[32], pn[32];
		const char *targets = zs_lora_targets(req->model, c->lora_targets, NULL);
		zs_buf_printf(t, "(--lora-r %u on %s: %s of %s parameters trained, the adapters, every base parameter "
		              "frozen as get_peft_model freezes it; under --framework %s too the model states, the paper "
		              "level and its parts and the floors (theory.json's floor) are that run's: p over every "
		              "parameter, g and k over the adapters, docs/schedule.md \"The floors under --freeze\"; "
		              "Korthikanti's activations are the base model's, without the adapters' own saved tensors%s",
		              c->lora_r, targets != NULL ? targets : "?",
		              theory_grouped(tn, sizeof tn, theory_request_trained(req)),
		              theory_grouped(pn, sizeof pn, theory_request_params(req)), fw, c->quant_nf4 ? "" : ")\n");
		if (c->quant_nf4) { /* the base's linear weights at their stored bytes (util/nf4.h's nf4_base_count) */
			struct nf4_base q;
			struct theory_bytes qb;
			char qn[32], v1[32], v2[32];
			nf4_base_count(&req->desc->params, c->double_quant, &q);
			theory_request_bytes(req, &qb);
			zs_buf_printf(t, "; with --quant-base nf4%s the paper level and the floors hold the %s weights of the "
			              "%llu 4-bit linear layers as bitsandbytes stores them, %s (%.3f bits a weight: n/2 "
			              "packed, %s), not p = %u bytes each (%s))\n", c->double_quant ? " --double-quant on" : "",
			              theory_grouped(qn, sizeof qn, (double)q.weights), (unsigned long long)q.layers,
			              amount(v1, sizeof v1, q.held), q.weights ? (double)q.held * 8 / (double)q.weights : 0.0,
			              c->double_quant ? "an 8-bit absmax per 64 and an fp32 constant per 256 blocks"
			                              : "an fp32 absmax per 64", qb.p, amount(v2, sizeof v2, q.weights * qb.p));

			int z3 = 0;
			for (size_t i = 0; c->framework == ZS_FW_DEEPSPEED && i < c->nschemes; i++)
				z3 |= c->schemes[i] == ZS_ZERO3;
			if (z3) /* docs/finetune.md, "QLoRA under DeepSpeed's own ZeRO-3" */
				zs_buf_printf(t, "(under --framework deepspeed --schemes zero3 each 4-bit layer's codes are a "
				              "frozen tensor of %u-byte elements, bitsandbytes' quant_storage of the model's dtype, "
				              "n/%u of them: stage 3 partitions it as any frozen parameter (params, %s in all "
				              "before partitioning) and gathers it whole around its module (gathered_params, "
				              "bytes sent), a persistent one whole on every rank; its QuantState (%s) is an "
				              "attribute, whole on every rank, in params)\n",
				              qb.p, 2 * qb.p, amount(v1, sizeof v1, q.codes),
				              amount(v2, sizeof v2, q.held - q.codes));
		}
	}
	if (req->lora_zero3_left)
		zs_buf_printf(t, "(zero3 at N > 1 is not described: LoRA under the paper's zero3 is described at "
		              "N = 1 only, docs/finetune.md; its rows there give the paper level alone, marked, "
		              "and --schemes zero3 at N > 1 is refused)\n");
	if (mem && req->alloc != NULL)
		zs_buf_printf(t, "(--allocator cuda: the peak's fit and the largest micro-batch are judged on what "
		              "the GPU holds, the step's reserved bytes plus the device's fixed costs; see \"What "
		              "the GPU holds\" below)\n");
	zs_buf_printf(t, "%5s  %-6s %9s %9s %9s %11s %9s", "", "", "model", "gathered", "full", "",
	              fwh ? "paper" : "");
	if (fwh)
		zs_buf_printf(t, " %9s", fw);
	if (mem)
		zs_buf_printf(t, "  %5s %5s  %s", "floor", "peak", "largest");
	zs_buf_printf(t, "\n%5s  %-6s %9s %9s %9s %11s %9s", "N", "scheme", "states", "params", "grads",
	              "activations", fwh ? "level" : "= peak");
	if (fwh)
		zs_buf_printf(t, " %9s", "peak");
	if (mem)
		zs_buf_printf(t, "  %5s %5s  %s", "fits", "fits", "micro-batch");
	zs_buf_printf(t, "\n");
	for (size_t w = 0; w < c->nworld; w++)
		for (size_t s = 0; s < c->nschemes; s++) {
			struct theory_row r;
			struct headline h;

			if (s == 0 && w > 0 && c->nschemes > 1)
				zs_buf_printf(t, "\n");
			theory_row(req, c->schemes[s], unit, c->world[w], &r);
			headline_of(req, &r, &h);
			zs_buf_printf(t, "%5u  %-6s %9s %9s %9s %11s %9s", r.world, zs_scheme_name(r.scheme),
			              in_scale(v[0], sizeof v[0], r.peak.states.resident_bytes, 0, sc),
			              in_scale(v[1], sizeof v[1], r.peak.states.gathered_params, 1, sc),
			              in_scale(v[2], sizeof v[2], r.peak.states.full_grads, 1, sc),
			              in_scale(v[3], sizeof v[3], r.peak.activations, 0, sc),
			              in_scale(v[4], sizeof v[4], r.peak_bytes, 0, sc));
			if (fwh)
				zs_buf_printf(t, " %9s", h.exact ? in_scale(v[6], sizeof v[6], h.peak, 0, sc) : "-");
			if (mem) {
				if (h.max_batch > 0)
					snprintf(v[5], sizeof v[5], "%llu", (unsigned long long)h.max_batch);
				else
					snprintf(v[5], sizeof v[5], "none");
				zs_buf_printf(t, "  %5s %5s  %s%s", r.fits ? "yes" : "no",
				              h.fits_peak ? "yes" : "no", v[5], fwh && !h.exact ? " *" : h.undescribed[0] ? " +" : "");
				if (h.undescribed[0] && !undescribed[0]) {
					snprintf(undescribed, sizeof undescribed, "%s", h.undescribed);
					after = h.max_batch + 1;
				}
			}
			zs_buf_printf(t, "\n");
			if (fwh && !h.exact && !fallback) {
				fallback = 1;
				reason = r.undescribed ? "not described at this N" : no_step_reason(req);
			}
		}
	if (fallback)
		zs_buf_printf(t, "%s %s's exact step is not available here (%s): %s the paper level's, "
		              "the reference only.\n", mem ? "*" : "-", fw, reason,
		              mem ? "the peak's fit and the largest micro-batch marked * are" : "the peak is");
	if (undescribed[0])
		zs_buf_printf(t, "+ the largest micro-batch %s's exact step describes, not the most that fits: at "
		              "micro-batch %llu (%s)\n", fw, (unsigned long long)after, undescribed);
}

/* Under a framework, the walk's peak of each phase of the step (enum
 * zs_phase: set-up is the state between steps) and the phase that binds,
 * a line per (N, scheme) whose exact step the walk has. */
static void phases_text(struct zs_buf *t, const struct theory_request *req, enum zs_unit unit)
{
	const struct zs_config *c = req->config;
	uint64_t largest = 0;
	int any = 0;

	for (size_t w = 0; w < c->nworld; w++)
		for (size_t s = 0; s < c->nschemes; s++) {
			struct theory_row r;

			theory_row(req, c->schemes[s], unit, c->world[w], &r);
			if (r.model_sched && r.sched.has_phases) {
				any = 1;
				if (r.sched.peak_bytes > largest)
					largest = r.sched.peak_bytes;
			}
		}
	if (!any)
		return;
	size_t sc = scale_of((double)largest);
	zs_buf_printf(t, "\nPeak of each phase of %s's step, unit = %s, %s (\"-\": a phase the step "
	              "does not enter); the largest binds:\n%5s  %-6s",
	              zs_framework_name(c->framework), zs_unit_name(unit), scales[sc].name, "N", "scheme");
	for (int p = 0; p < ZS_NPHASES; p++)
		zs_buf_printf(t, " %9s", zs_phase_name((enum zs_phase)p));
	zs_buf_printf(t, "  binds\n");
	for (size_t w = 0; w < c->nworld; w++)
		for (size_t s = 0; s < c->nschemes; s++) {
			struct theory_row r;
			char v[32];

			theory_row(req, c->schemes[s], unit, c->world[w], &r);
			if (!r.model_sched || !r.sched.has_phases)
				continue;
			zs_buf_printf(t, "%5u  %-6s", r.world, zs_scheme_name(r.scheme));
			enum zs_phase binds = theory_binding_phase(&r.sched);
			for (int p = 0; p < ZS_NPHASES; p++) {
				/* phase_peak_bytes.setup is the state the steps start
				 * from (docs/formats.md); where the set-up's own
				 * transient is the run's peak (DDP's broadcast copy,
				 * the model built whole before FSDP shards it) the
				 * column shows that peak, which binds */
				uint64_t b = r.sched.phase_peak[p];
				if (p == ZS_PH_SETUP && binds == ZS_PH_SETUP && r.sched.peak_bytes > b)
					b = r.sched.peak_bytes;
				zs_buf_printf(t, " %9s", r.sched.phase_entered[p] ? in_scale(v, sizeof v, b, 0, sc) : "-");
			}
			zs_buf_printf(t, "  %s\n", zs_phase_name(binds));
		}
}

/* The largest micro-batch of one scheme at one N under another recompute
 * setting. */
static uint64_t max_batch_with(const struct theory_request *req, enum zs_recompute rc,
                               enum zs_scheme scheme, enum zs_unit unit, unsigned world)
{
	struct theory_request alt = *req;
	struct theory_row r;
	struct headline h;

	alt.act.recompute = rc;
	alt.desc = NULL; /* the request's is for its own recompute */
	theory_row(&alt, scheme, unit, world, &r);
	headline_of(&alt, &r, &h);
	return h.max_batch;
}

/* The smallest N above `from` at which micro-batch 1 fits as it is, or 0.
 * dp shards nothing, so more ranks never help it. Under a framework, by
 * its exact step at micro-batch 1 where the walk has it. Where the run is
 * not described at N = from + 1 (theory_described_at), 0 with *why set; both
 * checks refuse N > 1 alike, so no larger N is either. */
static unsigned smallest_world(const struct theory_request *req, enum zs_scheme scheme,
                               enum zs_unit unit, unsigned from, char **why)
{
	if (scheme == ZS_DP)
		return 0;
	if (from < ZS_MAX_WORLD && !theory_described_at(req, scheme, from + 1, why))
		return 0;
	struct zs_config one = *req->config;
	struct theory_request alt = *req;
	struct theory_desc own;
	one.batch = 1;
	alt.config = &one;
	alt.desc = NULL;
	if (framework_headline(req) && req->config->batch != 1) { /* one description at b = 1 for every N */
		theory_desc_build(&own, &alt);
		alt.desc = &own;
	}
	unsigned found = 0;
	double usable = theory_request_usable(req);
	if (framework_headline(req) && alt.desc == NULL) {
		theory_desc_build(&own, &alt);
		alt.desc = &own;
	}
	if (framework_headline(req) && from < ZS_MAX_WORLD && (double)theory_desc_forward_end_bytes(alt.desc) > usable) {
		struct theory_row r;
		theory_row(&alt, scheme, unit, from + 1, &r);
		if (r.model_sched)
			from = ZS_MAX_WORLD; /* judged on the step at every N, and no N fits: nothing to walk */
	}
	if (framework_headline(req) && req->config->framework == ZS_FW_PAPER && from < ZS_MAX_WORLD) {
		/* the paper's step starts from its resident states, each unit's
		 * shard ceil(n/N) (never more at a larger N): where they alone
		 * exceed the device at the largest N, no N fits, and the scan
		 * below (a walk an N, 64,512 of them past 1,024) finds none */
		struct theory_row r;
		theory_row(req->config->batch == 1 ? req : &alt, scheme, unit, ZS_MAX_WORLD, &r);
		if (r.model_sched && (double)r.sched.resident_bytes > usable)
			from = ZS_MAX_WORLD;
	}
	for (unsigned w = from + 1; w <= ZS_MAX_WORLD && found == 0; w++) {
		struct theory_row r;

		if (!framework_headline(req)) {
			theory_row(req, scheme, unit, w, &r);
			if (r.max_batch > 0)
				found = w;
			continue;
		}
		theory_row(req->config->batch == 1 ? req : &alt, scheme, unit, w, &r);
		if (r.model_sched ? (double)r.sched.peak_bytes <= usable : r.max_batch > 0)
			found = w;
	}
	if (alt.desc == &own)
		theory_desc_free(&own);
	return found;
}

/* The framework's exact peak at micro-batch 1 and sequence seq (0 where
 * the walk has no step for it). */
static uint64_t peak_at_seq(const struct theory_request *req, enum zs_scheme scheme, enum zs_unit unit,
                            unsigned world, uint64_t seq)
{
	struct zs_config one = *req->config;
	struct theory_request alt = *req;
	struct theory_row r;
	one.batch = 1;
	alt.config = &one;
	alt.act.seq = seq;
	alt.desc = NULL; /* the request's is for its own sequence */
	theory_row(&alt, scheme, unit, world, &r);
	return r.model_sched ? r.sched.peak_bytes : 0;
}

/* Where micro-batch 1 does not fit at the request's sequence under a
 * framework's exact step: the longest sequence that does (its peak
 * grows with the sequence: a bisection), 0 where not even one token
 * fits; *peak its peak. */
static uint64_t longest_seq(const struct theory_request *req, enum zs_scheme scheme, enum zs_unit unit,
                            unsigned world, uint64_t *peak)
{
	double usable = theory_request_usable(req);
	uint64_t lo = 0, hi = req->act.seq; /* lo fits (0: none yet), hi does not */
	*peak = 0;
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2, p = peak_at_seq(req, scheme, unit, world, mid);
		if (p > 0 && (double)p <= usable)
			lo = mid, *peak = p;
		else
			hi = mid;
	}
	return lo;
}

/* For each scheme where micro-batch 1 does not fit at the largest N of the
 * list: what would (more recomputation, more ranks), or that nothing does. */
/* One scheme's advice where micro-batch 1 does not fit at N = top (its
 * row r and headline h): more recomputation, more ranks, or nothing. */
static void scheme_advice(struct zs_buf *t, const struct theory_request *req, enum zs_unit unit, unsigned top,
                          enum zs_scheme scheme, const struct theory_row *r0, const struct headline *h)
{
	const struct zs_config *c = req->config;
	double usable = theory_request_usable(req);
	const struct theory_row *r = r0;
	char v[32];

	if (r->undescribed) { /* no step to size anything by (LoRA under the paper's zero3 at N > 1) */
		char *why = NULL;
		theory_described_at(req, scheme, top, &why);
		zs_buf_printf(t, " not described at N = %u: %s\n", top, why != NULL ? why : "");
		free(why);
		return;
	}
	if (c->wrapper == ZS_WRAPPER_DDP && scheme == ZS_ZERO1) {
		/* ZeroRedundancyOptimizer shards Adam's state alone */
		zs_buf_printf(t, " more ranks shard Adam's state alone (--wrapper ddp --schemes zero1: "
		              "ZeroRedundancyOptimizer); the step's activations, grads and buckets are every rank's\n");
		return;
	}
	/* the PyTorch step's one recomputation is Hugging Face's
	 * gradient checkpointing (--recompute full; not for every
	 * family: the step's own check says which), named, not sized */
	const char *ckpt = req->act.recompute == ZS_RECOMPUTE_FULL
	                           ? ""
	                           : "; --recompute full (Hugging Face's gradient checkpointing) keeps only each "
	                             "layer's input";
	if (c->wrapper == ZS_WRAPPER_DDP) {
		/* DDP keeps every byte on every rank: N changes nothing */
		zs_buf_printf(t, " nothing else under DDP (--wrapper ddp: every rank holds the whole step, whatever "
		              "N); a sharding scheme shards it%s\n", ckpt);
		return;
	}
	if (c->wrapper == ZS_WRAPPER_FSDP) {
		zs_buf_printf(t, " more ranks shard its parameters, gradients and Adam's state further (--wrapper "
		              "fsdp)%s\n", ckpt);
		return;
	}
	if (c->wrapper == ZS_WRAPPER_DEEPSPEED) {
		zs_buf_printf(t, " more ranks shard Adam's state, the fp32 partition and the gradients kept "
		              "(--wrapper deepspeed); the step's activations, flat parameters and bucket are every "
		              "rank's\n");
		return;
	}
	if (c->wrapper == ZS_WRAPPER_NONE) {
		/* the plain loop is one process: no N changes it */
		zs_buf_printf(t, " nothing else in the plain loop (--wrapper none: one process); a wrapper shards "
		              "it%s\n", ckpt);
		return;
	}
	const char *sep = " --recompute";
	for (int rc = (int)req->act.recompute + 1; rc <= ZS_RECOMPUTE_FULL; rc++) {
		uint64_t mb = max_batch_with(req, (enum zs_recompute)rc, scheme, unit, top);
		if (mb == 0)
			continue;
		zs_buf_printf(t, "%s %s (up to micro-batch %llu)", sep,
		              zs_recompute_name((enum zs_recompute)rc), (unsigned long long)mb);
		sep = " or";
	}
	int recompute_helps = sep[1] == 'o';
	char *why = NULL;
	unsigned n = smallest_world(req, scheme, unit, top, &why);
	if (why != NULL) {
		zs_buf_printf(t, "%s N > %u not described: %s\n", recompute_helps ? "; or" : "", top, why);
		free(why);
		return;
	}
	if (n > 0)
		zs_buf_printf(t, "%s N = %u or more as it is", recompute_helps ? "; or" : "", n);
	else if (recompute_helps)
		zs_buf_printf(t, "; no N up to %u as it is", ZS_MAX_WORLD);
	else if (h->exact && (double)r->sched.resident_bytes > usable)
		zs_buf_printf(t, " nothing: its model states alone are %s at N = %u in %s's step%s",
		              amount(v, sizeof v, r->sched.resident_bytes), top,
		              zs_framework_name(req->config->framework),
		              scheme == ZS_DP ? " (dp shards nothing, so no N helps)" : "");
	else if (!h->exact && (double)r->peak_fixed > usable)
		zs_buf_printf(t, " nothing: its model states%s alone are %s at N = %u%s",
		              r->peak_fixed > r->peak.states.resident_bytes ? " and transients" : "",
		              amount(v, sizeof v, r->peak_fixed), top,
		              scheme == ZS_DP ? " (dp shards nothing, so no N helps)" : "");
	else
		zs_buf_printf(t, " nothing up to N = %u and full recompute", ZS_MAX_WORLD);
	zs_buf_printf(t, "\n");
}

static void advice_text(struct zs_buf *t, const struct theory_request *req, enum zs_unit unit)
{
	const struct zs_config *c = req->config;
	double usable = theory_request_usable(req);
	unsigned top = 0;
	int header = 0;
	char v[32];

	for (size_t w = 0; w < c->nworld; w++)
		if (c->world[w] > top)
			top = c->world[w];
	for (size_t s = 0; s < c->nschemes; s++) {
		struct theory_row r;
		enum zs_scheme scheme = c->schemes[s];

		struct headline h;

		theory_row(req, scheme, unit, top, &r);
		headline_of(req, &r, &h);
		if (h.max_batch > 0)
			continue;
		if (!header) {
			zs_buf_printf(t, "\nWhere micro-batch 1 does not fit at N = %u, what would:\n", top);
			if ((double)r.peak_per_batch > usable)
				zs_buf_printf(t, "  (one sequence's activations alone are %s%s, more than the "
				              "%.6g GB usable, and every rank holds its own)\n",
				              amount(v, sizeof v, r.peak_per_batch),
				              framework_headline(req) ? " at the paper level" : "", usable / GB);
			header = 1;
		}
		zs_buf_printf(t, "  %-6s", zs_scheme_name(scheme));
		scheme_advice(t, req, unit, top, scheme, &r, &h);
		if (h.exact && req->act.seq > 1 && req->alloc == NULL) {
			/* the sequence, the other half of the question: how long a
			 * sequence one micro-batch of the same step fits */
			uint64_t pk, S = longest_seq(req, scheme, unit, top, &pk);
			if (S > 0)
				zs_buf_printf(t, "  %-6s or a shorter sequence: micro-batch 1 fits up to %llu tokens (--seq %llu: "
				                 "%s's peak %s)\n", "", (unsigned long long)S, (unsigned long long)S,
				              zs_framework_name(c->framework), amount(v, sizeof v, pk));
			else
				zs_buf_printf(t, "  %-6s no shorter sequence either: at micro-batch 1 even one token is over the "
				                 "usable memory in %s's step\n", "", zs_framework_name(c->framework));
		}
	}
}

/* ------------------------------------------------------------------------ */
/* --allocator cuda: what the GPU holds */

/* What NCCL's part of the fixed costs was computed from. */
static void nccl_inputs(struct zs_buf *t, const struct theory_overhead *o)
{
	char v[32];
	if (o->nccl_comms == 0)
		return;
	zs_buf_printf(t, "NCCL: %u communicator%s per rank (the process groups the step makes a collective on), "
	              "each %s: ", o->nccl_comms, o->nccl_comms == 1 ? "" : "s",
	              amount(v, sizeof v, o->nccl_per_comm));
	if (o->nccl_channels == 0)
		zs_buf_printf(t, "NCCL issue 964's measured figure (PyTorch, four A100s over NVLink); --nccl-channels C "
		              "computes it from NCCL 2.21.5's source instead.\n");
	else
		zs_buf_printf(t, "from NCCL 2.21.5's source at %u channels and NCCL_BUFFSIZE %llu bytes.\n",
		              o->nccl_channels, (unsigned long long)o->nccl_buffsize);
}

/* Each row's step replayed through the caching allocator (theory_alloc.c):
 * allocated and reserved at their peaks, the cache not in use at the
 * reserved peak, the fixed costs, and with --device-mem the fit and the
 * largest micro-batch on allocated (the step's blocks) against on what the
 * GPU holds, and where the replay runs out; then the fixed costs named and
 * what expandable segments or a split limit would change. */
static void allocator_text(struct zs_buf *t, const struct theory_request *req, enum zs_unit unit)
{
	const struct zs_config *c = req->config;
	int mem = req->device_mem > 0, any = 0, uncovered = 0;
	uint64_t largest = 0, worst_frag = 0;
	struct theory_row worst = { .world = 0 };
	char v[8][32];

	for (size_t w = 0; w < c->nworld; w++)
		for (size_t s = 0; s < c->nschemes; s++) {
			struct theory_row r;
			struct theory_held h;
			theory_row(req, c->schemes[s], unit, c->world[w], &r);
			theory_alloc_held(req, &r, req->alloc, &h);
			if (!h.covered)
				continue;
			any = 1;
			if (h.run.st.reserved_peak + h.fixed.total > largest)
				largest = h.run.st.reserved_peak + h.fixed.total;
			if (worst.world == 0 || h.run.st.frag_at_peak > worst_frag) {
				worst = r;
				worst_frag = h.run.st.frag_at_peak;
			}
		}
	zs_buf_printf(t, "\nWhat the GPU holds, unit = %s: each step replayed through PyTorch %s's CUDA caching "
	              "allocator (docs/schedule.md, \"The replay in theory\")", zs_unit_name(unit),
	              CUDA_ALLOC_TORCH_RELEASE);
	if (!any) {
		zs_buf_printf(t, ": no row's step is replayed here (only a step zerosim runs, with an exact "
		              "schedule, is traced)\n");
		return;
	}
	size_t sc = scale_of((double)largest);
	zs_buf_printf(t, ", %s;\nheld = reserved + fixed costs%s\n", scales[sc].name,
	              mem ? ", judged against the usable memory (a step fits when its replay runs out of nothing)"
	                  : "");
	zs_buf_printf(t, "%5s  %-6s %9s %9s %9s %9s %9s", "", "", "allocated", "reserved", "cache", "fixed", "held");
	if (mem)
		zs_buf_printf(t, "  %4s  %s", "fits", "largest micro-batch on");
	zs_buf_printf(t, "\n%5s  %-6s %9s %9s %9s %9s %9s", "N", "scheme", "peak", "peak", "at peak", "costs", "");
	if (mem)
		zs_buf_printf(t, "  %4s  %9s %9s", "", "allocated", "held");
	zs_buf_printf(t, "\n");
	for (size_t w = 0; w < c->nworld; w++)
		for (size_t s = 0; s < c->nschemes; s++) {
			struct theory_row r;
			struct theory_held h;
			theory_row(req, c->schemes[s], unit, c->world[w], &r);
			theory_alloc_held(req, &r, req->alloc, &h);
			if (!h.covered) {
				uncovered = 1;
				continue;
			}
			const struct cuda_alloc_stats *st = &h.run.st;
			zs_buf_printf(t, "%5u  %-6s %9s %9s %9s %9s %9s", r.world, zs_scheme_name(r.scheme),
			              in_scale(v[0], sizeof v[0], st->allocated_peak, 0, sc),
			              in_scale(v[1], sizeof v[1], st->reserved_peak, 0, sc),
			              in_scale(v[2], sizeof v[2], st->frag_at_peak, 0, sc),
			              in_scale(v[3], sizeof v[3], h.fixed.total, 0, sc),
			              in_scale(v[4], sizeof v[4], st->reserved_peak + h.fixed.total, 0, sc));
			if (mem) {
				/* on allocated: the same replayed step's allocated peak
				 * within the usable memory (never below held; the
				 * paper level's is the first table's reference) */
				struct headline hh;
				headline_of(req, &r, &hh);
				uint64_t ha = theory_alloc_max_batch_allocated(req, &r, hh.max_batch);
				snprintf(v[5], sizeof v[5], "%llu", (unsigned long long)ha);
				snprintf(v[6], sizeof v[6], "%llu", (unsigned long long)hh.max_batch);
				zs_buf_printf(t, "  %4s  %9s %9s", h.oom ? "no" : "yes",
				              ha ? v[5] : "none", hh.max_batch ? v[6] : "none");
			}
			zs_buf_printf(t, "\n");
			if (h.oom)
				zs_buf_printf(t, "%5s  out of memory in step %u's %s: a block of %s of %s (%llu bytes), "
				              "with %s reserved (the peaks above are up to there)\n", "", h.oom_step, zs_phase_name(h.oom_phase),
				              h.oom_workspace ? "cublas_workspace" : zs_cat_name(h.oom_cat), amount(v[7], sizeof v[7], h.oom_bytes),
				              (unsigned long long)h.oom_bytes, amount(v[0], sizeof v[0], st->reserved));
		}
	if (uncovered)
		zs_buf_printf(t, "(rows not listed are not replayed: they have no exact step to trace; their fit "
		              "above is on the paper level)\n");

	/* the fixed costs, named (N > 2's; every N's are in the JSON) */
	struct theory_overhead o;
	unsigned top = 0;
	for (size_t w = 0; w < c->nworld; w++)
		if (c->world[w] > top)
			top = c->world[w];
	struct theory_overhead pair;
	theory_device_overhead(req, worst.scheme, top, &o);
	theory_device_overhead(req, worst.scheme, 2, &pair);
	if (o.given)
		zs_buf_printf(t, "Fixed costs: %s per rank, as --device-overhead gives them.\n",
		              amount(v[0], sizeof v[0], o.total));
	else
		zs_buf_printf(t, "Fixed costs per rank at N = %u: CUDA context %s, NCCL's "
		              "buffers %s (none at N = 1, %s at N = 2); docs/schedule.md gives their sources, and "
		              "--device-overhead SIZE replaces them.\n", top, amount(v[0], sizeof v[0], o.context),
		              amount(v[2], sizeof v[2], o.nccl), amount(v[3], sizeof v[3], pair.nccl));
	if (!o.given)
		nccl_inputs(t, &o);
	/* not a fixed cost: a request of each replay (theory_trace_matmul) */
	if (req->alloc->cublas_workspace > 0)
		zs_buf_printf(t, "cuBLAS's workspace, %s, is one of each replay's requests (the step's first matmul "
		              "makes it; --cublas-workspace).\n",
		              amount(v[1], sizeof v[1], req->alloc->cublas_workspace));

	/* what the allocator's options would change, on the row whose cache
	 * at the reserved peak is the largest */
	struct cuda_alloc_opts xs = *req->alloc, ms = *req->alloc;
	struct theory_held base, hx, hm;
	xs.expandable_segments = 1;
	ms.max_split_size = 512 * CUDA_ALLOC_MIB;
	theory_alloc_held(req, &worst, req->alloc, &base);
	theory_alloc_held(req, &worst, &xs, &hx);
	theory_alloc_held(req, &worst, &ms, &hm);
	zs_buf_printf(t, "N = %u %s, the largest cache at the peak: reserved peak %s",
	              worst.world, zs_scheme_name(worst.scheme),
	              amount(v[0], sizeof v[0], base.run.st.reserved_peak));
	if (!req->alloc->expandable_segments)
		zs_buf_printf(t, "; with expandable_segments:True %s", amount(v[1], sizeof v[1], hx.run.st.reserved_peak));
	if (req->alloc->max_split_size == UINT64_MAX)
		zs_buf_printf(t, "; with max_split_size_mb:512 %s", amount(v[2], sizeof v[2], hm.run.st.reserved_peak));
	zs_buf_printf(t, "%s\n", base.oom || hx.oom || hm.oom ? " (up to where a replay ran out)" : "");
}

/* A framework's own bytes on a transformer: its exact step schedule, what
 * 'zerosim measure --model' holds with the same options ("-" where the
 * engine runs no such step). */
static void framework_tables(struct zs_buf *t, const struct theory_request *req, enum zs_unit unit)
{
	const char *fw = zs_framework_name(req->config->framework);
	char *title = zs_asprintf("Model states per rank, %s's step schedule (what measure --model holds), unit = %s",
	                          fw, zs_unit_name(unit));
	put_table(t, req, unit, Q_RESIDENT, title);
	free(title);
	title = zs_asprintf("Peak per rank, %s's step schedule, unit = %s", fw, zs_unit_name(unit));
	put_table(t, req, unit, Q_PEAK, title);
	free(title);
}

static void model_text(struct zs_buf *t, const struct theory_request *req)
{
	const struct zs_config *c = req->config;

	model_header(t, req);
	activations_text(t, req);
	for (size_t u = 0; u < c->nunits; u++) {
		units_text(t, req, c->units[u]);
		table_text(t, req, c->units[u]);
		if (c->framework != ZS_FW_PAPER)
			phases_text(t, req, c->units[u]);
		if (req->alloc != NULL)
			allocator_text(t, req, c->units[u]);
		if (req->device_mem > 0)
			advice_text(t, req, c->units[u]);
		if (c->framework != ZS_FW_PAPER)
			framework_tables(t, req, c->units[u]);
	}
}

char *theory_text(const struct theory_request *request)
{
	struct zs_buf t = {0};
	/* the step description, built once for every row */
	struct theory_desc own;
	struct theory_request copy = *request;
	copy.desc = theory_request_desc(request, &own);
	const struct theory_request *req = &copy;

	if (req->model != NULL)
		model_text(&t, req);
	else
		mlp_text(&t, req);
	char *fw = theory_framework_text(req); /* NULL for the paper's */
	if (fw != NULL)
		zs_buf_printf(&t, "%s", fw);
	free(fw);
	if (copy.desc == &own)
		theory_desc_free(&own);
	return zs_buf_take(&t);
}
