/*
 * engine — the step driver (engine.h). It implements docs/schedule.md:
 * forward, backward, reduce, optimizer, with the scheme's hooks where the
 * schemes differ. Compute is per rank; collectives meet all ranks at once,
 * so ranks advance in lockstep between collectives, as real ranks would.
 *
 * Generator: splitmix64 (Steele, Lea & Flood 2014), counter-based, so any
 * rank can produce any element of the initial weights without the others.
 * Initial weights and biases of layer l: uniform in ±1/sqrt(d_l) (PyTorch's
 * nn.Linear default). Batches: x uniform in [-1, 1); the target is a fixed
 * teacher, y_j = 0.5·x_(j mod d0), so the loss can fall.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine/ag_exec.h"
#include "engine/engine.h"
#include "engine/osmem.h"
#include "engine/rng.h"
#include "engine/scheme.h"
#include "util/ds_coord.h"
#include "util/lora.h"
#include "util/nf4.h"
#include "util/util.h"
#ifdef HAVE_MPI
#include "engine/coll_mpi.h"
#include "engine/mpi_job.h"
#endif

/* ------------------------------------------------------------------------- */
/* generator (rng.h) */

/* Streams of the generator. */
#define STREAM_WEIGHTS 1
#define STREAM_BATCH(t, k) (2 + (uint64_t)(t) * ZS_MAX_WORLD + (k))

typedef float v8f __attribute__((vector_size(32)));

float *engine_initial_weights(const struct zs_config *c)
{
	if (c->tfm != NULL) /* each rank draws its own (initial_weights) */
		return NULL;
	struct zs_net m;
	net_mlp_init(&m, c->widths, c->nwidths, c->batch);
	float *w = zs_malloc(m.nparams * sizeof *w);
	uint64_t base = rng_stream_base(c->seed, STREAM_WEIGHTS);
	for (size_t l = 0; l < m.nlayers; l++) {
		const struct zs_layer *ly = &m.layer[l];
		float bound = (float)(1.0 / sqrt((double)ly->din));
		for (size_t g = ly->param_off; g < ly->param_off + ly->nparams; g++)
			w[g] = bound * rng_uniform_at(base, g);
	}
	net_free(&m);
	return w;
}

/* --lora-r under the paper's step (util/lora.h): the initial flat vector
 * of the description with adapters (net_tfm_init's). Each base tensor as
 * the seed draws it at its place in the vector without adapters
 * (tfm_init_range, as the PyTorch step's model starts), each adapter as
 * the PyTorch step's plain loop starts it (ag_exec_tfm_adapters: lora_A's
 * draws, lora_B zeros, in model.parameters()'s order, the description's),
 * so that the two steps train the same model. NULL with *cause where that
 * set-up fails. The caller frees it. */
static float *lora_initial_weights(const struct zs_config *c, char **cause)
{
	struct zs_model shape;
	struct step_params p;
	tfm_dims_shape(&shape, &c->tfm->dims);
	if (zs_lora_step_params(&p, &shape, &c->tfm->hf, c, cause) != 0)
		return NULL;
	struct zs_config t = *c;
	t.framework = ZS_FW_TORCH, t.wrapper = ZS_WRAPPER_NONE, t.precision = ZS_FP32, t.torch_device = ZS_DEVICE_CPU,
	t.attn = ZS_ATTN_EAGER; /* the set-up alone: the attention makes no parameter */
	float *ad = NULL, *w = NULL;
	size_t nad = 0, j = 0;
	if (ag_exec_tfm_adapters(&t, &c->tfm->hf, c->tfm->seq, 1, &ad, &nad, cause) == 0) {
		w = zs_malloc(p.numel * sizeof *w);
		uint64_t off = 0, base = 0;
		for (size_t i = 0; i < p.ntensors && j <= nad; off += p.tensor[i++].numel) {
			size_t n = (size_t)p.tensor[i].numel;
			if (p.module[p.tensor[i].module].adapter == NULL) {
				tfm_init_range(w + off, &c->tfm->dims, c->seed, (size_t)base, n);
				base += n;
			} else if ((j += n) <= nad)
				memcpy(w + off, ad + j - n, n * sizeof *w);
		}
		if (j != nad) {
			(void)zs_fail(cause, "internal error: the PyTorch step's adapters hold %zu elements, the "
			                     "description's %zu", nad, j);
			free(w);
			w = NULL;
		}
	}
	free(ad);
	step_params_free(&p);
	return w;
}

/* Elements [first, first + n) of the initial fp32 weights into element
 * `at` of rank k's buffer b, rounded to fp16 if b holds fp16. */
static void initial_weights(const struct zs_run *r, unsigned k, enum zs_rankbuf b, size_t first, size_t n, size_t at)
{
	if (r->model.kind == ZS_NET_TFM && r->init == NULL && r->esize[b] == sizeof(float)) {
		/* from the seed, no Ψ-sized copy */
		tfm_init_range(run_at(r, k, b, at), &r->model.tfm.dims, r->seed, first, n);
		return;
	}
	if (r->model.kind == ZS_NET_TFM && r->init == NULL) { /* fp16: drawn a few thousand at a time, then rounded */
		float part[4096];
		zs_half *w16 = run_at(r, k, b, at);
		for (size_t i = 0; i < n; i += sizeof part / sizeof part[0]) {
			size_t len = n - i < sizeof part / sizeof part[0] ? n - i : sizeof part / sizeof part[0];
			tfm_init_range(part, &r->model.tfm.dims, r->seed, first + i, len);
			zs_float_to_half_n(w16 + i, part, len);
		}
		return;
	}
	const float *v = r->init + first;
	if (r->esize[b] == sizeof(float)) {
		memcpy(run_at(r, k, b, at), v, n * sizeof(float));
		return;
	}
	zs_float_to_half_n(run_at(r, k, b, at), v, n);
}

/* ------------------------------------------------------------------------- */
/* helpers for the schemes */

static void run_alloc(struct zs_run *r, enum zs_rankbuf b, size_t n)
{
	for (unsigned k = r->r0; k < r->r1; k++)
		run_rank(r, k)->buf[b] = tracker_alloc(&r->tracker, k, r->cat[b], n * r->esize[b]);
}

void run_alloc_full(struct zs_run *r, enum zs_rankbuf b, size_t first, size_t n)
{
	r->base[b] = first;
	r->len[b] = n;
	run_alloc(r, b, n);
}

void run_free_all(struct zs_run *r, enum zs_rankbuf b)
{
	for (unsigned k = r->r0; k < r->r1; k++) {
		tracker_free(&r->tracker, k, run_rank(r, k)->buf[b]);
		run_rank(r, k)->buf[b] = NULL;
	}
}

/* Where rank k's full copy in b holds unit u: a buffer of the grads or
 * the optimizer state holds its trainable elements (layout_trained). */
static void *unit_in(const struct zs_run *r, unsigned k, enum zs_rankbuf b, size_t u)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	return run_at(r, k, b, (layout_trained(b) ? un->tbase : un->off) - r->base[b]);
}

/* Unit u's elements in b: all, or its trainable ones. */
static size_t unit_len(const struct zs_run *r, enum zs_rankbuf b, size_t u)
{
	return layout_trained(b) ? r->layout.unit[u].tn : r->layout.unit[u].n;
}

void run_all_reduce_unit(struct zs_run *r, size_t u, enum zs_rankbuf b)
{
	if (unit_len(r, b, u) == 0) /* all frozen (--freeze): no grads */
		return;
	for (unsigned k = r->r0; k < r->r1; k++)
		r->ptr_a[k - r->r0] = unit_in(r, k, b, u);
	coll_all_reduce(&r->coll, r->ptr_a, unit_len(r, b, u), r->dt);
}

void run_all_reduce_grads(struct zs_run *r)
{
	for (size_t u = 0; u < r->layout.nunits; u++)
		run_all_reduce_unit(r, u, ZS_BUF_GRADS);
}

void run_reduce_scatter_unit(struct zs_run *r, size_t u, enum zs_rankbuf from)
{
	if (r->layout.unit[u].tn == 0) /* all frozen (--freeze): no grads */
		return;
	for (unsigned k = r->r0; k < r->r1; k++) {
		r->ptr_a[k - r->r0] = unit_in(r, k, from, u);
		r->ptr_b[k - r->r0] = run_at(r, k, ZS_BUF_GRADS, layout_own(&r->layout, ZS_BUF_GRADS, u, k).at);
	}
	coll_reduce_scatter(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, r->layout.unit[u].tn, r->dt);
}

/* dst[i] += src[i], i < n, in the grads' type esize (fp16: each sum in
 * fp32, rounded once, as CUDA's add_ does). */
static void add_grads(void *dst, const void *src, size_t n, size_t esize)
{
	if (esize == sizeof(float)) {
		float *d = dst;
		const float *s = src;
		for (size_t i = 0; i < n; i++)
			d[i] += s[i];
		return;
	}
	zs_half *d = dst;
	const zs_half *s = src;
	for (size_t i = 0; i < n; i++)
		d[i] = zs_float_to_half(zs_half_to_float(d[i]) + zs_half_to_float(s[i]));
}

void run_reduce_scatter_unit_acc(struct zs_run *r, size_t u, enum zs_rankbuf from)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	size_t esz = r->esize[ZS_BUF_GRADS];
	if (r->micro == 0 || un->tn == 0) {
		run_reduce_scatter_unit(r, u, from);
		return;
	}
	/* a later micro-step: the collective writes its output, so it goes
	 * to a transient of the unit's slots, added into the shard and freed */
	for (unsigned k = r->r0; k < r->r1; k++) {
		r->ptr_a[k - r->r0] = unit_in(r, k, from, u);
		r->ptr_b[k - r->r0] = tracker_alloc(&r->tracker, k, r->cat[ZS_BUF_GRADS], un->ts * esz);
	}
	coll_reduce_scatter(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, un->tn, r->dt);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_slice own = layout_own(&r->layout, ZS_BUF_GRADS, u, k);
		add_grads(run_at(r, k, ZS_BUF_GRADS, own.at), r->ptr_b[k - r->r0], own.count, esz);
		tracker_free(&r->tracker, k, r->ptr_b[k - r->r0]);
	}
}

void run_gather_params_unit(struct zs_run *r, size_t u, enum zs_rankbuf into)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	/* in place after the optimizer: what it stepped, the trainable run
	 * (--freeze; all of the unit without) */
	int stepped = into == ZS_BUF_PARAMS;
	if (stepped && un->tn == 0)
		return;
	for (unsigned k = r->r0; k < r->r1; k++) {
		r->ptr_a[k - r->r0] = run_at(r, k, ZS_BUF_PARAMS,
		                             stepped ? layout_own(&r->layout, ZS_BUF_M, u, k).first
		                                     : layout_own(&r->layout, ZS_BUF_PARAMS, u, k).at);
		r->ptr_b[k - r->r0] = stepped ? run_at(r, k, ZS_BUF_PARAMS, un->toff) : unit_in(r, k, into, u);
	}
	coll_all_gather(&r->coll, (const void *const *)r->ptr_a, r->ptr_b, stepped ? un->tn : un->n, r->dt);
}

void run_gather_params_in_place(struct zs_run *r)
{
	tracker_set_phase(&r->tracker, ZS_PH_GATHER);
	for (size_t u = 0; u < r->layout.nunits; u++)
		run_gather_params_unit(r, u, ZS_BUF_PARAMS);
}

void run_gather_params_after_step(struct zs_run *r, void *ctx)
{
	(void)ctx;
	run_gather_params_in_place(r);
}

/* ------------------------------------------------------------------------- */
/* setup */

/* The run's layout: the scheme's units, the framework's row (all full at
 * N = 1), each tensor sharded on its own where the registry says so. */
static void run_layout(struct zs_layout *lo, const struct zs_net *m, const struct zs_config *c,
                       enum zs_scheme scheme, unsigned world, enum zs_unit unit)
{
	layout_init(lo, m, scheme, world, unit);
	layout_use_row(lo, zs_row(c->framework, scheme));
	if (scheme_entry(c->framework, scheme)->per_tensor)
		layout_shard_tensors(lo);
}

/* --freeze under the paper's schedule and DeepSpeed's dp, ZeRO-1, ZeRO-2
 * and ZeRO-3: each unit steps its trainable run only (docs/schedule.md,
 * "Frozen parameters under the paper's schedule", "... under DeepSpeed");
 * 0, or -1 with *cause where the pattern cannot be laid out so (the CLI
 * refused it before: zs_freeze_paper_check). */
static int freeze_layout(struct zs_layout *lo, const struct zs_config *c, enum zs_scheme scheme, unsigned world,
                         enum zs_unit unit, char **cause)
{
	int lora = zs_lora_engine(c); /* the base frozen (util/lora.h) */
	if ((!c->freeze[0] && !lora) || (c->framework != ZS_FW_PAPER && c->framework != ZS_FW_DEEPSPEED))
		return 0; /* DeepSpeed's ZeRO-1/2 and dp lay out as the paper's (zs_freeze_paper_check) */
	if (c->tfm == NULL)
		return zs_fail(cause, "--%s under --framework %s: only with --model (a transformer)",
		               lora ? "lora-r" : "freeze", zs_framework_name(c->framework));
	struct zs_model shape;
	struct step_params sp;
	size_t n;
	tfm_dims_shape(&shape, &c->tfm->dims); /* the shape the net was built from (net_tfm_init) */
	if (zs_lora_step_params(&sp, &shape, &c->tfm->hf, c, cause) != 0)
		return -1;
	/* the paper's zero3 shards a unit's optimizer state as its params
	 * (whole units); DeepSpeed's ZeRO-3 per tensor (layout_freeze) */
	int whole = c->framework == ZS_FW_PAPER && scheme == ZS_ZERO3 && world > 1;
	struct zs_freeze_run *run = zs_freeze_units(&sp, unit == ZS_UNIT_LAYER, whole, &n, cause);
	step_params_free(&sp);
	if (run == NULL)
		return -1;
	layout_freeze(lo, run, n);
	free(run);
	return 0;
}

/* The resident buffers, in the order they are allocated. */
static const enum zs_rankbuf resident[] = {ZS_BUF_PARAMS, ZS_BUF_GRADS, ZS_BUF_MASTER, ZS_BUF_M, ZS_BUF_V};
#define NRESIDENT (sizeof resident / sizeof resident[0])

/* Categories and element sizes of the buffers; fp32 mode has no master
 * copy and SGD no second moment. The resident params and grads are of the
 * state's precision, the transient copies of the compute's type (they
 * differ under ZS_OPS_FP32_STATE). */
static void setup_buffers(struct zs_run *r)
{
	int mixed = r->precision == ZS_MIXED, adam = r->opt.kind == ZS_ADAM;
	const enum zs_cat cat[ZS_NBUFS] = {
		[ZS_BUF_PARAMS] = mixed ? ZS_CAT_PARAM16 : ZS_CAT_PARAM32,
		[ZS_BUF_GRADS] = mixed ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32,
		[ZS_BUF_MASTER] = ZS_CAT_MASTER32,
		[ZS_BUF_M] = adam ? ZS_CAT_ADAM_M : ZS_CAT_MOMENTUM,
		[ZS_BUF_V] = ZS_CAT_ADAM_V,
		[ZS_BUF_GATHERED] = ZS_CAT_GATHERED,
		[ZS_BUF_FULL_GRADS] = ZS_CAT_FULL_GRADS,
	};
	for (int b = 0; b < ZS_NBUFS; b++) {
		r->cat[b] = cat[b];
		int fp32 = layout_state((enum zs_rankbuf)b) == ZS_STATE_OPTIM ||
		           (!mixed && (b == ZS_BUF_PARAMS || b == ZS_BUF_GRADS));
		r->esize[b] = fp32 ? sizeof(float) : coll_dtype_size(r->dt);
	}
}

static int has_buf(const struct zs_run *r, enum zs_rankbuf b)
{
	return (b != ZS_BUF_MASTER || r->precision == ZS_MIXED || (r->ops->flags & ZS_OPS_MASTER32)) &&
	       (b != ZS_BUF_V || r->opt.kind == ZS_ADAM);
}

/* Rank k's initial weights, in its params and (mixed) master. A shard's
 * rank computes its own slots. A full buffer is computed by the first rank
 * this process holds and copied by the others (DDP's initial broadcast;
 * set-up, not counted as step communication). */
static void init_rank(struct zs_run *r, unsigned k)
{
	const enum zs_rankbuf weights[] = {ZS_BUF_PARAMS, ZS_BUF_MASTER};
	for (size_t i = 0; i < 2; i++) {
		enum zs_rankbuf b = weights[i];
		if (!has_buf(r, b))
			continue;
		size_t psi = r->layout.nparams;
		if (layout_span(&r->layout, b) == ZS_FULL && k > r->r0)
			memcpy(run_rank(r, k)->buf[b], run_rank(r, r->r0)->buf[b], layout_len(&r->layout, b) * r->esize[b]);
		else if (layout_span(&r->layout, b) == ZS_FULL && !layout_trained(b))
			for (size_t e = 0, n; (n = layout_held(&r->layout, &e, psi)) > 0; e += n)
				initial_weights(r, k, b, e, n, e); /* (a 4-bit base's weights: quantize_base) */
		else
			for (size_t u = 0; u < layout_npieces(&r->layout); u++) {
				struct zs_slice sl = layout_own(&r->layout, b, u, k);
				initial_weights(r, k, b, sl.first, sl.count, sl.at);
			}
	}
}

/* The layout tensor that starts at flat element off. */
static size_t tensor_at(const struct zs_layout *lo, size_t off)
{
	size_t t = 0;
	while (lo->tensor[t].off != off || lo->tensor[t].n == 0)
		t++;
	return t;
}

/* QLoRA's 4-bit base under DeepSpeed's ZeRO-3 (docs/finetune.md, "QLoRA
 * under DeepSpeed's own ZeRO-3"): each quantized tensor's params are its
 * codes, as bitsandbytes' quant_storage of the params' dtype (es bytes)
 * holds them (its layers' one after another: util/nf4.h's
 * nf4_storage_elements), partitioned and gathered by stage 3 as any
 * frozen tensor; the shards cut again over them. */
static void pack_base(struct zs_layout *lo, const struct zs_net_tfm *tn, unsigned es)
{
	for (size_t i = 0; i < tn->nq4; i++) {
		const struct zs_q4_tensor *q = &tn->q4[i];
		size_t n = 0;
		for (unsigned p = 0; p < (q->nparts ? q->nparts : 1); p++)
			n += nf4_storage_elements((q->nparts ? q->part_rows[p] : q->rows) * q->cols, es);
		layout_pack(lo, tensor_at(lo, q->off), n);
	}
	layout_shard_tensors(lo);
}

/* One tracked block of rank k's 4-bit storages, a copy of n bytes of src. */
static void *q4_block(struct zs_run *r, unsigned k, const void *src, size_t n)
{
	void *p = tracker_alloc(&r->tracker, k, r->cat[ZS_BUF_PARAMS], n);
	memcpy(p, src, n);
	return p;
}

/* QLoRA's 4-bit base under zerosim's own step (docs/finetune.md, "QLoRA
 * under the paper's step and DeepSpeed's own step"): each quantized
 * layer of rank k as bitsandbytes stores it (util/nf4.h), quantized from
 * its initial weights (in mixed the fp16 ones the params would hold) as
 * the model is loaded, each storage a tracked block in the params'
 * category, with double quantization the one dynamic map first; under
 * DeepSpeed's ZeRO-3 the codes go into the rank's partition of their
 * tensor instead (pack_base). The
 * loader's temporaries are not the device's (the weights are made on
 * the host and quantized there, as a checkpoint is read). */
static void quantize_base(struct zs_run *r, unsigned k)
{
	const struct zs_net_tfm *tn = &r->model.tfm;
	struct zs_rank *rk = run_rank(r, k);
	rk->q4 = zs_calloc(tn->nq4parts, sizeof *rk->q4);
	if (tn->double_quant) {
		float map[256];
		nf4_dynamic_map(map);
		rk->qmap = q4_block(r, k, map, sizeof map);
	}
	int packed = r->layout.per_tensor; /* DeepSpeed's ZeRO-3: the codes in the params (pack_base) */
	size_t es = r->esize[ZS_BUF_PARAMS];
	for (size_t i = 0; i < tn->nq4; i++) {
		const struct zs_q4_tensor *q = &tn->q4[i];
		size_t t = packed ? tensor_at(&r->layout, q->off) : 0, at = 0;
		uint8_t *codes = packed ? zs_calloc(r->layout.tensor[t].n, es) : NULL;
		float *w = zs_malloc(q->numel * sizeof *w);
		for (uint64_t e = 0; e < q->numel; e++) /* [out, in], a Conv1D's too (net.h) */
			w[e] = r->precision == ZS_MIXED ? zs_half_to_float(zs_float_to_half(r->init[q->off + e])) : r->init[q->off + e];
		for (uint64_t p = 0, row = 0; p < (q->nparts ? q->nparts : 1); row += q->part_rows[p++]) {
			struct nf4_layer l;
			uint64_t rows = q->nparts ? q->part_rows[p] : q->rows;
			nf4_layer_quantize(&l, w + row * q->cols, rows * q->cols, tn->double_quant);
			struct zs_q4_store *st = &rk->q4[q->part0 + p];
			if (packed) {
				memcpy(codes + at, l.packed, l.b.packed);
				at += nf4_storage_elements(rows * q->cols, (unsigned)es) * es;
			} else
				st->packed = q4_block(r, k, l.packed, l.b.packed);
			if (!tn->double_quant)
				st->absmax = q4_block(r, k, l.absmax, l.b.absmax);
			st->code = q4_block(r, k, l.code, l.b.code);
			if (tn->double_quant) {
				st->qabsmax = q4_block(r, k, l.qabsmax, l.b.qabsmax);
				st->offset = q4_block(r, k, &l.offset, l.b.offset);
				st->absmax2 = q4_block(r, k, l.absmax2, l.b.absmax2);
				st->code2 = q4_block(r, k, l.code2, l.b.code2);
			}
			nf4_layer_free(&l);
		}
		if (packed) { /* rank k's partition of them (at N = 1 all: layout_own) */
			struct zs_slice sl = layout_own(&r->layout, ZS_BUF_PARAMS, t, k);
			memcpy(run_at(r, k, ZS_BUF_PARAMS, sl.at), codes + (sl.first - q->off) * es, sl.count * es);
		}
		free(codes);
		free(w);
	}
}

static void free_base(struct zs_run *r, unsigned k)
{
	struct zs_rank *rk = run_rank(r, k);
	for (size_t i = 0; rk->q4 != NULL && i < r->model.tfm.nq4parts; i++) {
		void *b[] = {rk->q4[i].packed, rk->q4[i].absmax, rk->q4[i].code, rk->q4[i].qabsmax, rk->q4[i].offset,
		             rk->q4[i].absmax2, rk->q4[i].code2};
		for (size_t j = 0; j < sizeof b / sizeof b[0]; j++)
			if (b[j] != NULL)
				tracker_free(&r->tracker, k, b[j]);
	}
	if (rk->qmap != NULL)
		tracker_free(&r->tracker, k, rk->qmap);
	free(rk->q4);
	rk->q4 = NULL;
	rk->qmap = NULL;
}

/* Allocate the resident model state and fill it. The optimizer state
 * starts at zero, but is not zeroed here: the first step writes it without
 * reading it (optim_update, t = 1), the same bits as from zeros, and no
 * other code reads it; every other buffer is written before it is read. */
static void setup_state(struct zs_run *r)
{
	tracker_set_phase(&r->tracker, ZS_PH_SETUP);
	for (size_t i = 0; i < NRESIDENT; i++)
		for (unsigned k = r->r0; k < r->r1 && has_buf(r, resident[i]); k++)
			run_rank(r, k)->buf[resident[i]] = (r->host[resident[i]] ? tracker_alloc_host : tracker_alloc)(
			        &r->tracker, k, r->cat[resident[i]], layout_rank_len(&r->layout, resident[i], k) * r->esize[resident[i]]);
	for (unsigned k = r->r0; k < r->r1; k++)
		init_rank(r, k); /* the first rank first: the others copy from it */
	for (unsigned k = r->r0; k < r->r1 && r->model.kind == ZS_NET_TFM && r->model.tfm.nq4 > 0; k++)
		quantize_base(r, k);
}

/* ------------------------------------------------------------------------- */
/* the step */

static void fill_batch(struct zs_run *r, unsigned k, unsigned t)
{
	const struct zs_net *m = &r->model;
	/* a transformer's micro-step m of step t is the task's batch t·K + m
	 * (a case's too), as the PyTorch step's (engine/ag_exec.c, case.c) */
	unsigned seq = t * r->nmicro + r->micro;
	size_t at = (size_t)(m->kind == ZS_NET_TFM ? seq : t) * r->world + k;
	if (m->kind == ZS_NET_TFM && r->cs != NULL) { /* row b: seq + 1 ids, inputs then targets one on */
		void *pin = run_rank(r, k)->t[m->input], *ptg = run_rank(r, k)->t[m->target];
		int *in = pin, *target = ptg;
		size_t B = m->batch, T = m->tfm.T;
		const int *row = r->cs->tokens + at * B * (T + 1);
		for (size_t b = 0; b < B; b++, row += T + 1) {
			memcpy(in + b * T, row, T * sizeof *in);
			memcpy(target + b * T, row + 1, T * sizeof *target);
		}
		return;
	}
	if (m->kind == ZS_NET_TFM) {
		net_tfm_batch(m, run_rank(r, k)->t, r->seed, seq, k);
		return;
	}
	float *x = run_rank(r, k)->t[m->input], *y = run_rank(r, k)->t[m->target];
	size_t B = m->batch, d0 = m->tensor[m->input].elements / B, dL = m->tensor[m->target].elements / B;
	if (r->cs != NULL) {
		memcpy(x, r->cs->x + at * B * d0, B * d0 * sizeof(float));
		memcpy(y, r->cs->y + at * B * dL, B * dL * sizeof(float));
		return;
	}
	/* micro-step m's batch is rows [m·B, (m+1)·B) of the K·B rows a step
	 * without accumulation draws (so K micro-steps see the K-fold batch) */
	engine_mlp_batch_rows(x, y, r->seed, t, k, (size_t)r->micro * B, B, d0, dL);
}

void engine_mlp_batch(float *x, float *y, uint64_t seed, unsigned t, unsigned k, size_t B, size_t d0, size_t dL)
{
	engine_mlp_batch_rows(x, y, seed, t, k, 0, B, d0, dL);
}

void engine_mlp_batch_rows(float *x, float *y, uint64_t seed, unsigned t, unsigned k, size_t row, size_t B,
                           size_t d0, size_t dL)
{
	uint64_t base = rng_stream_base(seed, STREAM_BATCH(t, k));
	for (size_t e = 0; e < B * d0; e++)
		x[e] = rng_uniform_at(base, row * d0 + e);
	/* y_j = 0.5·x_(j mod d0), as runs of up to d0 that start at x's row:
	 * eight at a time, the same products (a counter wrapping at d0 kept
	 * the loop scalar: 1.8M of the default sweep's 264M instructions). */
	for (size_t b = 0; b < B; b++) {
		const float *xb = x + b * d0;
		float *yb = y + b * dL;
		for (size_t j = 0; j < dL; j += d0) {
			size_t n = dL - j < d0 ? dL - j : d0, i = 0;
			for (; i + 8 <= n; i += 8) {
				v8f v;
				memcpy(&v, xb + i, sizeof v);
				v *= 0.5f;
				memcpy(yb + j + i, &v, sizeof v);
			}
			for (; i < n; i++)
				yb[j + i] = 0.5f * xb[i];
		}
	}
}

/* A routed tensor is as many rows as the rank's routing gives it this
 * step, and none at 0 rows (PyTorch allocates nothing for an empty one). */
static void alloc_tensor(struct zs_run *r, unsigned k, unsigned i)
{
	const struct zs_tensor *ts = &r->model.tensor[i];
	size_t n = ts->row > 0 ? net_tensor_rows(&r->model, run_rank(r, k)->t, i) * ts->row : ts->elements;
	run_rank(r, k)->t[i] = ts->row > 0 && n == 0 ? NULL : tracker_alloc(&r->tracker, k, ts->cat, n * ts->esize);
}

static void free_tensor(struct zs_run *r, unsigned k, unsigned i)
{
	tracker_free(&r->tracker, k, run_rank(r, k)->t[i]);
	run_rank(r, k)->t[i] = NULL;
}

/* Every rank's tensors allocated (or freed) at one point of the step, in
 * the model's list order. */
static void alloc_tensors_at(struct zs_run *r, enum zs_when when)
{
	for (unsigned i = 0; i < r->model.ntensors; i++)
		if (r->model.tensor[i].alloc == when)
			for (unsigned k = r->r0; k < r->r1; k++)
				alloc_tensor(r, k, i);
}

static void free_tensors_after(struct zs_run *r, unsigned k, size_t layer)
{
	for (unsigned i = 0; i < r->model.ntensors; i++)
		if (r->model.tensor[i].freed_after == layer && !r->model.tensor[i].freed_fwd)
			free_tensor(r, k, i);
}

/* Rank k's tensors of layer l allocated before its forward (all of them)
 * or before its backward (the recomputed ones), in list order, the routed
 * ones apart (route_layer); and the recomputed ones freed after its
 * forward, routed or not, with those outside autograd's graph that its
 * forward read last (freed_fwd, --freeze). */
static void layer_tensors(struct zs_run *r, unsigned k, size_t l, enum zs_pass pass, int alloc)
{
	for (unsigned i = 0; i < r->model.ntensors; i++) {
		const struct zs_tensor *ts = &r->model.tensor[i];
		if (!alloc && pass == ZS_PASS_FORWARD && ts->freed_fwd == l + 1) {
			free_tensor(r, k, i);
			continue;
		}
		if (ts->alloc != ZS_AT_LAYER || ts->layer != l || (pass == ZS_PASS_BACKWARD && !ts->recomputed) ||
		    (!alloc && !ts->recomputed) || (alloc && ts->row > 0))
			continue;
		if (alloc)
			alloc_tensor(r, k, i);
		else
			free_tensor(r, k, i);
	}
}

/* The unit whose params layer l reads: a tied layer reads the first's. */
size_t run_unit_of(const struct zs_run *r, size_t l)
{
	size_t u = 0;
	while (!r->model.layer[l].tied && r->layout.unit[u].last < l)
		u++;
	return u;
}

/* Whether unit u's layer l runs in a visit of its own: a tied layer
 * outside the unit it reads. */
static int own_visit(const struct zs_run *r, size_t u, size_t l) { return run_unit_of(r, l) != u; }

void run_layer_params(const struct zs_run *r, unsigned k, size_t l, struct zs_layer_io *io)
{
	const struct zs_layer *rd = net_reads(&r->model, l);
	enum zs_rankbuf p = run_rank(r, k)->buf[ZS_BUF_GATHERED] != NULL ? ZS_BUF_GATHERED : ZS_BUF_PARAMS;
	size_t e = rd->param_off;
	for (size_t i = 0; i < rd->nptensors; e += rd->ptensor[i++]) {
		size_t at = e - r->base[p];
		/* a 4-bit weight: in no buffer (the kernels dequantize it) */
		io->w[i] = p == ZS_BUF_PARAMS && rd->ptensor[i] > 0 && layout_held(&r->layout, &at, at + 1) == 0
		                   ? NULL
		                   : run_at(r, k, p, e - r->base[p]);
	}
}

void run_layer_grads(const struct zs_run *r, unsigned k, size_t l, enum zs_pass pass, struct zs_layer_io *io)
{
	const struct zs_layer *ly = &r->model.layer[l], *rd = net_reads(&r->model, l);
	const struct zs_layout_unit *un = &r->layout.unit[run_unit_of(r, l)];
	enum zs_rankbuf g = run_rank(r, k)->buf[ZS_BUF_FULL_GRADS] != NULL ? ZS_BUF_FULL_GRADS : ZS_BUF_GRADS;
	size_t e = rd->param_off;
	/* the grads hold the unit's trainable run at tbase; a frozen tensor
	 * (--freeze) has none */
	for (size_t i = 0; i < rd->nptensors; e += rd->ptensor[i++])
		io->g[i] = pass == ZS_PASS_BACKWARD && !ly->tied && e >= un->toff && e < un->toff + un->tn
		                   ? run_at(r, k, g, e - un->toff + un->tbase - r->base[g])
		                   : NULL;
}

/* Layer l's params (and in backward its grads) as rank k sees them now,
 * tensor by tensor: where the scheme's place hook says, or else the
 * transient full copies while there are any, else the resident full
 * buffers (sharded params are always gathered before they are used). */
static struct zs_layer_io layer_io(const struct zs_run *r, unsigned k, size_t l, enum zs_pass pass)
{
	struct zs_rank *rk = run_rank(r, k);
	struct zs_layer_io io = {.w = rk->w, .g = rk->g, .t = rk->t, .dt = r->dt, .batch = r->model.batch,
	                         .net = &r->model, .seed = r->seed, .step = r->step, .micro = r->micro, .q4 = rk->q4};
	if (r->ops->place != NULL && r->ops->place(r, r->ctx, k, l, pass, &io))
		return io;
	run_layer_params(r, k, l, &io);
	run_layer_grads(r, k, l, pass, &io);
	return io;
}

/* Rank k's routed tensors of layer l, once its route has run. */
static void routed_tensors(struct zs_run *r, unsigned k, size_t l)
{
	for (unsigned i = 0; i < r->model.ntensors; i++) {
		const struct zs_tensor *ts = &r->model.tensor[i];
		if (ts->alloc == ZS_AT_LAYER && ts->layer == l && ts->row > 0)
			alloc_tensor(r, k, i);
	}
}

/* Layer l's route (a mixture's attention half and router) and the routed
 * tensors it sizes: in forward, and again in backward where full
 * recomputation freed them (its counts are kept). */
static void route_layer(struct zs_run *r, unsigned k, size_t l, const struct zs_layer_io *io, enum zs_pass pass)
{
	const struct zs_layer *ly = &r->model.layer[l];
	if (ly->kind->route == NULL || (pass == ZS_PASS_BACKWARD && !r->model.tensor[ly->moe[STEP_MOE_PROBS]].recomputed))
		return;
	ly->kind->route(ly, io);
	routed_tensors(r, k, l);
}

/* Rank k's tokens per expert of step t, each block's, while its counts
 * are alive (from its forward to its backward). */
static void record_routing(struct zs_run *r, unsigned k, unsigned t)
{
	const struct zs_net *m = &r->model;
	size_t E = r->routing_experts, b = 0, *to = r->routing + ((size_t)k * r->config->steps + t) *
	                                                   r->routing_blocks * E;
	for (size_t l = 0; l < m->nlayers; l++)
		if (m->layer[l].moe != NULL)
			memcpy(to + E * b++, run_rank(r, k)->t[m->layer[l].moe[STEP_MOE_COUNTS]], E * sizeof *to);
}

/* Under DeepSpeed's dp, and ZeRO-1 and ZeRO-2 outside
 * ds_coord_starved_built, an expert that got no token is outside what the
 * step follows (ZS_MOE_STARVED; ZeRO-3's z3 leaf zero-fills its grad,
 * ZeRO-1/2's epilogue makes zeros of its own: scheme_deepspeed.c): -1
 * with *cause naming the first, or 0. */
static int starved_expert(const struct zs_run *r, enum zs_scheme scheme, char **cause)
{
	size_t E = r->routing_experts, L = r->routing_blocks, S = r->config->steps;
	int refused = r->config->framework == ZS_FW_DEEPSPEED && scheme != ZS_ZERO3 &&
	              !ds_coord_starved_built(r->config, scheme, r->world);
	for (unsigned k = r->r0; refused && k < r->r1 && r->routing != NULL; k++)
		for (size_t i = 0; i < S * L * E; i++)
			if (r->routing[(size_t)k * S * L * E + i] == 0)
				return zs_fail(cause, "%s: expert %zu of block %zu got no token on rank %u at step %zu: "
				               ZS_MOE_STARVED, r->config->tfm->hf.name, i % E, i / E % L, k, i / (L * E) + 1);
	return 0;
}

static void forward_layer(struct zs_run *r, unsigned k, size_t l)
{
	const struct zs_layer *ly = &r->model.layer[l];
	layer_tensors(r, k, l, ZS_PASS_FORWARD, 1);
	struct zs_layer_io io = layer_io(r, k, l, ZS_PASS_FORWARD);
	if (ly->matmul_module >= 0)
		tracker_matmul(&r->tracker, k);
	route_layer(r, k, l, &io, ZS_PASS_FORWARD);
	ly->kind->forward(ly, &io);
	layer_tensors(r, k, l, ZS_PASS_FORWARD, 0);
}

static void backward_layer(struct zs_run *r, unsigned k, size_t l)
{
	const struct zs_layer *ly = &r->model.layer[l];
	layer_tensors(r, k, l, ZS_PASS_BACKWARD, 1);
	struct zs_layer_io io = layer_io(r, k, l, ZS_PASS_BACKWARD);
	route_layer(r, k, l, &io, ZS_PASS_BACKWARD);
	if (!ly->nograd) /* --freeze: outside autograd's graph, no backward */
		ly->kind->backward(ly, &io);
	free_tensors_after(r, k, l);
}

/* Whether the run's layers go module by module (the scheme hooks modules
 * and the model's kinds have them). */
static int by_module(const struct zs_run *r)
{
	return r->ops->module != NULL && r->model.nlayers > 0 && r->model.layer[0].kind->forward_module != NULL;
}

/* A routed layer's leaf s in a forward (or a full recompute's): its
 * route, then the routed tensors it sizes (route_layer's, inside the
 * leaf's hooks). */
static void route_leaf(struct zs_run *r, unsigned k, size_t l, size_t s, const struct zs_layer_io *io)
{
	const struct zs_layer *ly = &r->model.layer[l];
	if (s != ly->leaf || ly->kind->route_module == NULL)
		return;
	ly->kind->route_module(ly, io);
	routed_tensors(r, k, l);
}

/* Layer l on every rank, module by module, the scheme's hooks around
 * each (a z3 leaf one module: net_hooked): its tensors, then its modules
 * (in reverse for backward). */
static void modules_layer(struct zs_run *r, size_t l, enum zs_pass pass)
{
	const struct zs_layer *ly = &r->model.layer[l];
	size_t nm = net_hooked(ly);
	for (unsigned k = r->r0; k < r->r1; k++)
		layer_tensors(r, k, l, pass, 1);
	/* full recompute: the block's forward again first, each module
	 * between the scheme's hooks of a forward (torch.utils.checkpoint
	 * reruns it inside backward, where DeepSpeed's hooks fire again) */
	for (size_t s = 0; pass == ZS_PASS_BACKWARD && ly->kind->recompute_module != NULL &&
	                   r->model.tfm.recompute == ZS_RECOMPUTE_FULL && s < nm; s++) {
		r->ops->module(r, r->ctx, l, s, ZS_PASS_FORWARD, 1);
		for (unsigned k = r->r0; k < r->r1; k++) {
			struct zs_layer_io io = layer_io(r, k, l, pass);
			route_leaf(r, k, l, s, &io);
			ly->kind->recompute_module(ly, &io, s);
		}
		r->ops->module(r, r->ctx, l, s, ZS_PASS_FORWARD, 0);
		tracker_set_phase(&r->tracker, ZS_PH_BACKWARD);
	}
	for (size_t i = 0; i < nm; i++) {
		size_t s = pass == ZS_PASS_FORWARD ? i : nm - 1 - i;
		if (!r->ops->module(r, r->ctx, l, s, pass, 1))
			continue; /* no backward (scheme.h) */
		for (unsigned k = r->r0; k < r->r1 && !(pass == ZS_PASS_BACKWARD && ly->nograd); k++) {
			struct zs_layer_io io = layer_io(r, k, l, pass);
			if (pass == ZS_PASS_FORWARD && ly->matmul_module >= 0 && s == (size_t)ly->matmul_module)
				tracker_matmul(&r->tracker, k);
			if (pass == ZS_PASS_FORWARD)
				route_leaf(r, k, l, s, &io);
			(pass == ZS_PASS_FORWARD ? ly->kind->forward_module : ly->kind->backward_module)(ly, &io, s);
		}
		r->ops->module(r, r->ctx, l, s, pass, 0);
		tracker_set_phase(&r->tracker, pass == ZS_PASS_FORWARD ? ZS_PH_FORWARD : ZS_PH_BACKWARD);
	}
	for (unsigned k = r->r0; k < r->r1; k++)
		if (pass == ZS_PASS_FORWARD)
			layer_tensors(r, k, l, pass, 0);
		else
			free_tensors_after(r, k, l);
}

/* Tied layer l, outside the unit it reads, in a visit of that unit of
 * its own: the unit's hooks of a forward (params only: it computes no
 * param grads; a scheme that holds the unit since its forward, torch's
 * zero2, gathers nothing). */
static void visit(struct zs_run *r, size_t l, enum zs_pass pass)
{
	size_t u = run_unit_of(r, l);
	if (by_module(r)) {
		modules_layer(r, l, pass);
		return;
	}
	if (r->ops->begin_unit)
		r->ops->begin_unit(r, r->ctx, u, ZS_PASS_FORWARD);
	for (unsigned k = r->r0; k < r->r1; k++)
		(pass == ZS_PASS_FORWARD ? forward_layer : backward_layer)(r, k, l);
	if (r->ops->end_unit)
		r->ops->end_unit(r, r->ctx, u, ZS_PASS_FORWARD);
	tracker_set_phase(&r->tracker, pass == ZS_PASS_FORWARD ? ZS_PH_FORWARD : ZS_PH_BACKWARD);
}

/* Gradient accumulation, a micro-step after the first, where a unit's
 * backward would write its grads into the resident full grads (the
 * paper's dp and zero1, and every scheme at N = 1; docs/schedule.md,
 * "Gradient accumulation under the paper's schedule"): the kernels write
 * a unit's grads, they do not add them, so the unit's grads go to a
 * transient full copy (full_grads) that is added into the resident grads
 * after the unit and freed, as autograd's AccumulateGrad adds a new grad
 * into .grad. A scheme that gave the unit a full copy of its own (zero2,
 * zero3) reduces it into its shard itself; a scheme with ZS_OPS_OWN_ACCUM
 * (DeepSpeed's) places a unit's new grads itself. */
static int accum_transient(const struct zs_run *r)
{
	return r->micro > 0 && !(r->ops->flags & ZS_OPS_OWN_ACCUM) && run_rank(r, r->r0)->buf[ZS_BUF_FULL_GRADS] == NULL &&
	       run_rank(r, r->r0)->buf[ZS_BUF_GRADS] != NULL && layout_span(&r->layout, ZS_BUF_GRADS) == ZS_FULL;
}

/* Unit u's layers (but those in a visit of their own) on every rank, the
 * scheme's unit hooks around them, or module by module. */
static void run_unit(struct zs_run *r, size_t u, enum zs_pass pass)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	int fwd = pass == ZS_PASS_FORWARD;
	if (by_module(r)) {
		for (size_t i = 0, n = un->last + 1 - un->first; i < n; i++) {
			size_t l = fwd ? un->first + i : un->last - i;
			if (!own_visit(r, u, l))
				modules_layer(r, l, pass);
		}
		return;
	}
	if (r->ops->begin_unit)
		r->ops->begin_unit(r, r->ctx, u, pass);
	int acc = !fwd && accum_transient(r) && un->tn > 0;
	if (acc)
		run_alloc_full(r, ZS_BUF_FULL_GRADS, un->tbase, un->tn);
	for (unsigned k = r->r0; k < r->r1; k++)
		for (size_t i = 0, n = un->last + 1 - un->first; i < n; i++) {
			size_t l = fwd ? un->first + i : un->last - i;
			if (!own_visit(r, u, l))
				(fwd ? forward_layer : backward_layer)(r, k, l);
		}
	if (acc) {
		for (unsigned k = r->r0; k < r->r1; k++)
			add_grads(run_at(r, k, ZS_BUF_GRADS, un->tbase), unit_in(r, k, ZS_BUF_FULL_GRADS, u), un->tn,
			          r->esize[ZS_BUF_GRADS]);
		run_free_all(r, ZS_BUF_FULL_GRADS);
	}
	if (r->ops->end_unit)
		r->ops->end_unit(r, r->ctx, u, pass);
}

static void forward(struct zs_run *r, unsigned t)
{
	tracker_set_phase(&r->tracker, ZS_PH_FORWARD);
	alloc_tensors_at(r, ZS_AT_FORWARD);
	for (unsigned k = r->r0; k < r->r1; k++)
		fill_batch(r, k, t);
	for (size_t u = 0; u < r->layout.nunits; u++) {
		const struct zs_layout_unit *un = &r->layout.unit[u];
		run_unit(r, u, ZS_PASS_FORWARD);
		for (size_t l = un->first; l <= un->last; l++)
			if (own_visit(r, u, l))
				visit(r, l, ZS_PASS_FORWARD);
	}
	for (unsigned k = r->r0; k < r->r1 && r->routing != NULL; k++)
		record_routing(r, k, t);
}

/* Rank k's d loss/d out times s: the gradient of loss·s (fp32: the MLP's
 * output gradient, the transformer's logits'). */
static void scale_loss_grad(struct zs_run *r, unsigned k, float s)
{
	const struct zs_net *m = &r->model;
	unsigned dy = m->layer[m->nlayers - 1].dy;
	float *g = run_rank(r, k)->t[dy];
	for (size_t e = 0; e < m->tensor[dy].elements; e++)
		g[e] *= s;
}

static int backward(struct zs_run *r, char **cause)
{
	const struct zs_net *m = &r->model;
	tracker_set_phase(&r->tracker, ZS_PH_BACKWARD);
	alloc_tensors_at(r, ZS_AT_BACKWARD);
	for (unsigned k = r->r0; k < r->r1; k++) {
		float loss = m->loss(m, run_rank(r, k)->t);
		if (r->nmicro > 1) /* the step's loss: the micro-steps' mean */
			run_rank(r, k)->loss = (r->micro == 0 ? 0.0f : run_rank(r, k)->loss) + loss / (float)r->nmicro;
		else
			run_rank(r, k)->loss = loss;
		if (r->nmicro > 1) /* the loss divided by K (DeepSpeed's backward(); the paper's, the mean over K·B rows) */
			scale_loss_grad(r, k, 1.0f / (float)r->nmicro);
	}
	if (r->ops->begin_backward && r->ops->begin_backward(r, r->ctx, cause) != 0)
		return -1;
	for (size_t u = r->layout.nunits; u-- > 0;) {
		const struct zs_layout_unit *un = &r->layout.unit[u];
		for (size_t l = un->last + 1; l-- > un->first;)
			if (own_visit(r, u, l))
				visit(r, l, ZS_PASS_BACKWARD);
		run_unit(r, u, ZS_PASS_BACKWARD);
		tracker_set_phase(&r->tracker, ZS_PH_BACKWARD);
	}
	for (unsigned i = 0; i < m->ntensors; i++)
		if (m->tensor[i].freed_after == ZS_END_OF_BACKWARD && !m->tensor[i].freed_fwd)
			for (unsigned k = r->r0; k < r->r1; k++)
				free_tensor(r, k, i);
	return 0;
}

/* The optimizer over pieces [u0, u1) of every rank. */
static void step_pieces(struct zs_run *r, unsigned t, size_t u0, size_t u1)
{
	const struct zs_layout *lo = &r->layout;
	int mixed = r->precision == ZS_MIXED, master = has_buf(r, ZS_BUF_MASTER);
	enum zs_dtype gdt = r->esize[ZS_BUF_GRADS] == sizeof(float) ? ZS_F32 : ZS_F16; /* the grads' own type */
	for (unsigned k = r->r0; k < r->r1; k++)
		for (size_t u = u0; u < u1; u++) {
			struct zs_slice g = layout_own(lo, ZS_BUF_GRADS, u, k), s = layout_own(lo, ZS_BUF_M, u, k);
			/* the params it steps: at their own index in a full buffer
			 * (--freeze: the trainable run's), else its slots (zero3's
			 * units are all frozen or all trainable) */
			struct zs_slice p = layout_span(lo, ZS_BUF_PARAMS) == ZS_FULL ? (struct zs_slice){s.first, s.count, s.first}
			                                                              : layout_own(lo, ZS_BUF_PARAMS, u, k);
			float *w = master ? run_at(r, k, ZS_BUF_MASTER, s.at) : run_at(r, k, ZS_BUF_PARAMS, p.at);
			float *v = has_buf(r, ZS_BUF_V) ? run_at(r, k, ZS_BUF_V, s.at) : NULL;
			const float *g32 = r->ops->optimizer_grads ? r->ops->optimizer_grads(r, r->ctx, k, u) : NULL;
			optim_update(&r->opt, t + 1, w, run_at(r, k, ZS_BUF_M, s.at), v,
			             g32 != NULL ? (const void *)g32 : run_at(r, k, ZS_BUF_GRADS, g.at),
			             g32 != NULL ? ZS_F32 : gdt,
			             mixed ? run_at(r, k, ZS_BUF_PARAMS, p.at) : NULL, s.count);
			if (master && !mixed)
				memcpy(run_at(r, k, ZS_BUF_PARAMS, p.at), w, s.count * sizeof *w);
		}
}

/* Each rank updates the slots it owns: its optimizer state, its weights
 * (the fp32 master if there is one, else the params), from its grads (or
 * the fp32 copy of them a framework made), then its params from the
 * master; in the scheme's groups of pieces, one after another. */
static void optimizer(struct zs_run *r, unsigned t)
{
	tracker_set_phase(&r->tracker, ZS_PH_OPTIMIZER);
	if (r->ops->before_optimizer)
		r->ops->before_optimizer(r, r->ctx);
	for (size_t i = 0, u0 = 0, np = layout_npieces(&r->layout), u1; u0 < np; i++, u0 = u1) {
		u1 = r->ops->step_group != NULL ? r->ops->step_group(r, r->ctx, i) : np;
		if (u1 <= u0 || u1 > np)
			abort(); /* a group of no piece, or past them (internal error) */
		step_pieces(r, t, u0, u1);
	}
}

/* One step; 0, or -1 with *cause where a hook failed (the step stops
 * there: engine_run frees what it holds). */
static int step(struct zs_run *r, unsigned t, char **cause)
{
	/* K micro-steps, each reduced as its framework reduces it; one
	 * optimizer step after the last */
	r->step = t;
	for (r->micro = 0; r->micro < r->nmicro; r->micro++) {
		forward(r, t);
		if (backward(r, cause) != 0)
			return -1;
		if (r->ops->reduce) {
			tracker_set_phase(&r->tracker, ZS_PH_REDUCE);
			r->ops->reduce(r, r->ctx);
		}
	}
	r->micro = r->nmicro - 1;
	optimizer(r, t);
	if (r->ops->after_optimizer)
		r->ops->after_optimizer(r, r->ctx);
	return 0;
}

/* ------------------------------------------------------------------------- */
/* results */

/* The buffer holding the final fp32 weights, and rank k's part of piece u
 * in the digest: what it owns of a shard or of whole tensors; all of a full
 * buffer's unit u from rank 0. In piece order, then rank order, the parts
 * are the flat vector in order. */
static enum zs_rankbuf weights_buf(const struct zs_run *r) { return r->precision == ZS_MIXED ? ZS_BUF_MASTER : ZS_BUF_PARAMS; }

static int weights_full(const struct zs_run *r) { return layout_span(&r->layout, weights_buf(r)) == ZS_FULL; }

static struct zs_slice final_weights(const struct zs_run *r, unsigned k, size_t u)
{
	const struct zs_layout_unit *un = &r->layout.unit[u];
	if (weights_full(r) && layout_trained(weights_buf(r))) /* the master: the trainable run (--freeze) */
		return (struct zs_slice){un->toff, k == 0 ? un->tn : 0, un->tbase};
	if (weights_full(r))
		return (struct zs_slice){un->off, k == 0 ? un->n : 0, un->off};
	return layout_own(&r->layout, weights_buf(r), u, k);
}

/* Full buffers must hold the same bytes on every rank after a step (DP's
 * replicas, ZeRO-1/2's gathered params); the digest reads rank 0's. The
 * two weight buffers, and whether b is one of them and full in this run. */
static const enum zs_rankbuf replica_bufs[] = {ZS_BUF_PARAMS, ZS_BUF_MASTER};
static const char *const replica_names[] = {"params", "master weights"};

static int is_replica(const struct zs_run *r, enum zs_rankbuf b)
{
	return has_buf(r, b) && layout_span(&r->layout, b) == ZS_FULL;
}

/* What each rank hands to process 0 after a run, as one record per rank,
 * so that under MPI a run ends with one gather rather than one per kind
 * (each is a meeting of the processes, which a busy machine makes slow):
 * its tracker figures and collective counts, the process's peak resident
 * set, the digests of its process's replicas (compared by process 0),
 * then its losses and, when the final weights are sharded, its S slots. */
struct rank_record {
	struct zs_rank_mem mem;
	struct zs_alloc_rank alloc; /* with an allocator replay */
	struct zs_coll_stats comm;
	size_t os_peak;
	uint64_t replica[2];
};

struct records {
	unsigned char *buf; /* world records of `stride` bytes */
	size_t stride, weights; /* weights: floats of final weights in each (0 or S) */
};

static struct rank_record *record(const struct records *rec, unsigned k)
{
	return (void *)(rec->buf + (size_t)k * rec->stride);
}

/* Its losses, then its weights. */
static float *record_losses(const struct records *rec, unsigned k) { return (float *)(record(rec, k) + 1); }

/* Under MPI with the final weights sharded, the slots of other processes'
 * ranks travel in the records (N·S floats, outside the tracker: it is after
 * the run); otherwise every part the digest reads is here. Floats of the
 * final weights in each record: what the longest rank holds (ranks hold
 * as many with shards, not with whole tensors, torch's zero1). */
static size_t remote_weights(const struct zs_run *r)
{
	size_t most = 0;
	if (!r->mpi || (r->r0 == 0 && r->r1 == r->world) || layout_span(&r->layout, weights_buf(r)) == ZS_FULL)
		return 0;
	for (unsigned k = 0; k < r->world; k++) {
		size_t len = layout_rank_len(&r->layout, weights_buf(r), k);
		most = len > most ? len : most;
	}
	return most;
}

/* Fill this process's ranks' records and, under MPI, gather every rank's
 * to process 0 (in process, every record is already here). */
static void gather_records(const struct zs_run *r, unsigned steps, size_t os_peak, struct records *rec)
{
	rec->weights = remote_weights(r);
	rec->stride = (sizeof(struct rank_record) + (steps + rec->weights) * sizeof(float) + 7) & ~(size_t)7;
	rec->buf = zs_calloc(r->world, rec->stride);
	uint64_t replica[2] = {0, 0};
	for (size_t i = 0; r->mpi && i < 2; i++)
		if (is_replica(r, replica_bufs[i]))
			replica[i] = XXH3_64bits(run_rank(r, r->r0)->buf[replica_bufs[i]],
			                         layout_len(&r->layout, replica_bufs[i]) * r->esize[replica_bufs[i]]);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct rank_record *e = record(rec, k);
		e->mem = r->tracker.rank[k];
		if (r->tracker.ca_rank != NULL)
			e->alloc = r->tracker.ca_rank[k];
		e->comm = r->coll.stats[k];
		e->os_peak = os_peak;
		memcpy(e->replica, replica, sizeof replica);
		memcpy(record_losses(rec, k), r->rank_loss + (size_t)k * steps, steps * sizeof(float));
		if (rec->weights != 0)
			memcpy(record_losses(rec, k) + steps, run_rank(r, k)->buf[weights_buf(r)],
			       layout_rank_len(&r->layout, weights_buf(r), k) * sizeof(float));
	}
#ifdef HAVE_MPI
	if (r->mpi)
		mpi_job_gather(rec->buf, rec->stride, r->world);
#endif
}

/* --freeze under mixed precision: the master holds the trainable weights
 * only; the frozen ones are their params (fp16, never changed), widened
 * into w from the rank holding each (in process: every rank is here). */
static void frozen_weights(const struct zs_run *r, float *w)
{
	const struct zs_layout *lo = &r->layout;
	int full = layout_span(lo, ZS_BUF_PARAMS) == ZS_FULL; /* else the pieces: units, or tensors (per-tensor shards) */
	for (size_t u = 0; u < (full ? lo->nunits : layout_npieces(lo)); u++)
		for (unsigned k = 0; k < r->world; k++) {
			const struct zs_layout_unit *un = &lo->unit[full || !lo->per_tensor ? u : lo->tensor[u].unit];
			struct zs_slice sl = full
			                             ? (struct zs_slice){un->off, k == 0 ? un->n : 0, un->off}
			                             : layout_own(lo, ZS_BUF_PARAMS, u, k);
			for (size_t e = sl.first, n; (n = layout_held(lo, &e, sl.first + sl.count)) > 0; e += n) {
				const zs_half *p = run_at(r, k, ZS_BUF_PARAMS, sl.at + (e - sl.first));
				for (size_t i = 0; i < n; i++) /* (a 4-bit base's weights: none, left 0) */
					if (e + i < un->toff || e + i >= un->toff + un->tn)
						w[e + i] = zs_half_to_float(p[i]);
			}
		}
}

/* Fill res from every rank's figures: under MPI process 0 gathers them,
 * and the other processes' res stays partial. */
static void collect(struct zs_run *r, const struct zs_run_options *opt, const struct records *rec,
                    struct zs_result *res)
{
	unsigned N = r->world, steps = res->steps;
	struct zs_rank_mem *mem = zs_calloc(N, sizeof *mem);
	res->comm = zs_calloc(N, sizeof *res->comm);
	if (r->mpi)
		res->os_peak = zs_calloc(N, sizeof *res->os_peak);
	for (unsigned k = 0; k < N; k++) {
		mem[k] = record(rec, k)->mem;
		res->comm[k] = record(rec, k)->comm;
		if (r->mpi)
			res->os_peak[k] = record(rec, k)->os_peak;
		memcpy(r->rank_loss + (size_t)k * steps, record_losses(rec, k), steps * sizeof(float));
	}
	res->partial = r->r0 != 0;

	res->resident = zs_calloc(N, sizeof *res->resident);
	res->peak = zs_calloc(N, sizeof *res->peak);
	if (r->config->offload != ZS_OFFLOAD_NONE) {
		res->host_resident = zs_calloc(N, sizeof *res->host_resident);
		res->host_peak = zs_calloc(N, sizeof *res->host_peak);
		for (unsigned k = 0; k < N; k++) {
			res->host_resident[k] = mem[k].host_total;
			res->host_peak[k] = mem[k].host_peak;
		}
	}
	res->binding_rank = 0;
	for (unsigned k = 0; k < N; k++) {
		res->resident[k] = mem[k].total;
		res->peak[k] = mem[k].peak;
		if (res->peak[k] > res->peak[res->binding_rank])
			res->binding_rank = k;
	}
	const struct zs_rank_mem *bm = &mem[res->binding_rank];
	memcpy(res->resident_breakdown, bm->cur, sizeof bm->cur);
	memcpy(res->peak_breakdown, bm->at_peak, sizeof bm->at_peak);
	free(mem);
	/* The mean loss of each step: ranks summed 0..N-1 in double. */
	for (unsigned t = 0; t < steps; t++) {
		double sum = 0;
		for (unsigned k = 0; k < N; k++)
			sum += r->rank_loss[(size_t)k * steps + t];
		res->losses[t] = (float)(sum / N);
	}
	res->nunits = r->layout.nunits;
	res->unit_n = zs_calloc(r->layout.nunits, sizeof *res->unit_n);
	for (size_t u = 0; u < r->layout.nunits; u++)
		res->unit_n[u] = r->layout.unit[u].n;
	res->shard_elements = r->layout.shard;
	res->padded_elements = r->layout.shard * N;
	if (res->partial)
		return;

	XXH3_state_t *h = XXH3_createState();
	if (h == NULL || XXH3_64bits_reset(h) != XXH_OK)
		zs_oom(__FILE__, __LINE__);
	if (opt->weights) /* a 4-bit base's weights left out: 0 */
		res->weights = zs_calloc(r->layout.nparams, sizeof(float));
	size_t npieces = weights_full(r) ? r->layout.nunits : layout_npieces(&r->layout);
	for (size_t u = 0; u < npieces; u++)
		for (unsigned k = 0; k < N; k++) {
			struct zs_slice all = final_weights(r, k, u);
			/* the runs between a 4-bit base's weights (all of it without) */
			for (size_t e = all.first, n; (n = layout_held(&r->layout, &e, all.first + all.count)) > 0; e += n) {
				struct zs_slice sl = {e, n, all.at + (e - all.first)};
				const float *w = k >= r->r1 && rec->weights != 0 ? record_losses(rec, k) + steps + sl.at
				                                                 : run_at(r, k, weights_buf(r), sl.at);
				if (XXH3_64bits_update(h, w, sl.count * sizeof *w) != XXH_OK)
					zs_oom(__FILE__, __LINE__);
				if (res->weights)
					memcpy(res->weights + sl.first, w, sl.count * sizeof(float));
			}
		}
	res->digest = XXH3_64bits_digest(h);
	XXH3_freeState(h);
	if (res->weights && layout_trained(weights_buf(r)) && r->layout.ntrain < r->layout.nparams)
		frozen_weights(r, res->weights);
	if (opt->timeline) {
		res->ntimeline = r->tracker.log[0].nevents;
		res->timeline = zs_malloc((res->ntimeline ? res->ntimeline : 1) * sizeof *res->timeline);
		memcpy(res->timeline, r->tracker.log[0].events, res->ntimeline * sizeof *res->timeline);
		/* The logs move to the result (the tracker is destroyed next). */
		res->ntimeline_logs = r->tracker.nlogged;
		res->timeline_logs = zs_calloc(res->ntimeline_logs, sizeof *res->timeline_logs);
		for (unsigned k = 0; k < res->ntimeline_logs; k++) {
			res->timeline_logs[k] = r->tracker.log[k];
			memset(&r->tracker.log[k], 0, sizeof r->tracker.log[k]);
		}
	}
	if (opt->alloc != NULL) {
		res->alloc = zs_calloc(N, sizeof *res->alloc);
		for (unsigned k = 0; k < N; k++)
			res->alloc[k] = record(rec, k)->alloc;
	}
}

/* --wrapper none: a transformer's plain training loop, one rank, no
 * framework around it. The run is the PyTorch step as data (util/autograd.h)
 * run by ag_exec.c, not the layer driver: nothing of a scheme runs, and the
 * units are the layout's only to be reported as every run reports them. */
static int plain_loop(const struct zs_config *c) { return zs_wrapper_step(c) && c->tfm != NULL; }

double engine_bytes_upper_bound(const struct zs_config *c, enum zs_scheme scheme, unsigned world,
                                enum zs_unit unit)
{
	if (plain_loop(c)) /* the list's own peak */
		return ag_exec_tfm_peak_bytes(c, &c->tfm->hf, c->tfm->seq) * world;
	struct zs_net m;
	net_init(&m, c);
	struct zs_layout lo;
	run_layout(&lo, &m, c, scheme, world, unit);
	unsigned p, g, k;
	zs_bytes_per_param(c->precision, c->optimizer, &p, &g, &k);
	/* the resident state as laid out; while anything is sharded, at most
	 * the whole model's params and grads in transient full copies; every
	 * tensor. Whole tensors count as full (no rank holds more). */
	double held[ZS_NSTATES] = {p, g, k}, per_rank = (double)net_tensor_bytes(&m);
	int sharded = 0;
	for (int st = 0; st < ZS_NSTATES; st++) {
		per_rank += held[st] * (double)(lo.span[st] == ZS_SHARD ? lo.shard : lo.nparams);
		sharded |= lo.span[st] == ZS_SHARD;
	}
	if (sharded)
		per_rank += (double)lo.nparams * (p + g);
	const struct zs_scheme_entry *e = scheme_entry(c->framework, scheme);
	if (e->bound != NULL) /* the framework's own buffers */
		per_rank += e->bound(c, &lo);
	layout_free(&lo);
	net_free(&m);
	return per_rank * world;
}

/* Bytes of the first rank's replica compared with every other rank's
 * before the next: they stay in the caches, so that the first rank's
 * replica is read from memory once, not once per rank (the large case's
 * DP run: 0.8 GB read, not 1.5). */
#define REPLICA_BLOCK ((size_t)64 << 10)

/* Each process compares its ranks' replicas with its first's; under MPI,
 * process 0 also compares every process's first rank's with rank 0's, by
 * the digests in the records. The error names the lowest rank that
 * differs, and for it the params before the master weights. */
static int check_replicas(const struct zs_run *r, enum zs_scheme scheme, const struct records *rec, char **cause)
{
	unsigned bad = r->r1;
	size_t bad_i = 0;
	for (size_t i = 0; i < 2; i++) {
		enum zs_rankbuf b = replica_bufs[i];
		if (!is_replica(r, b))
			continue;
		const char *first = run_rank(r, r->r0)->buf[b];
		size_t bytes = layout_len(&r->layout, b) * r->esize[b];
		for (size_t at = 0; at < bytes; at += REPLICA_BLOCK) {
			size_t n = bytes - at < REPLICA_BLOCK ? bytes - at : REPLICA_BLOCK;
			for (unsigned k = r->r0 + 1; k < bad; k++)
				if (memcmp(first + at, (const char *)run_rank(r, k)->buf[b] + at, n) != 0) {
					bad = k;
					bad_i = i;
					break;
				}
		}
	}
	if (bad < r->r1)
		return zs_fail(cause, "internal error: rank %u's %s differ from rank %u's (%s, N=%u)", bad,
		               replica_names[bad_i], r->r0, zs_scheme_name(scheme), r->world);
	for (unsigned k = 1; r->mpi && r->r0 == 0 && k < r->world; k++)
		for (size_t i = 0; i < 2; i++)
			if (record(rec, k)->replica[i] != record(rec, 0)->replica[i])
				return zs_fail(cause, "internal error: rank %u's %s differ from rank 0's (%s, N=%u)", k,
				               replica_names[i], zs_scheme_name(scheme), r->world);
	return 0;
}

/* Free the run wherever it stopped: the scheme's state (when its setup
 * succeeded), every buffer and tensor still held, the run. The tracked
 * blocks left over, a leak (0 after a whole run, and after a failed one
 * too). */
static size_t end_run(struct zs_run *r, int set_up)
{
	if (set_up && r->ops->teardown)
		r->ops->teardown(r, r->ctx);
	for (int b = 0; b < ZS_NBUFS; b++)
		run_free_all(r, (enum zs_rankbuf)b);
	for (unsigned k = r->r0; k < r->r1; k++) {
		for (unsigned i = 0; i < r->model.ntensors; i++)
			free_tensor(r, k, i);
		free_base(r, k);
	}
	size_t left = tracker_outstanding(&r->tracker);
	tracker_destroy(&r->tracker);
	coll_destroy(&r->coll);
	for (unsigned k = r->r0; k < r->r1; k++) {
		free(run_rank(r, k)->t);
		free(run_rank(r, k)->w);
		free(run_rank(r, k)->g);
	}
	layout_free(&r->layout);
	net_free(&r->model);
	free(r->rank);
	free(r->rank_loss);
	free(r->routing);
	free(r->ptr_a);
	free(r->ptr_b);
	free(r);
	return left;
}

static int run_plain_loop(const struct zs_config *c, enum zs_scheme scheme, unsigned world, enum zs_unit unit,
                          const struct zs_case *cs, const struct zs_run_options *opt, struct zs_result *res,
                          char **cause)
{
	struct ag_exec_result ar;
	struct zs_tracker tr;
	if (world != 1 && c->wrapper == ZS_WRAPPER_NONE)
		return zs_fail(cause, "--wrapper none is one process's plain training loop: N must be 1, not %u", world);
	/* its ranks' tracker (--wrapper ddp: N ranks in lockstep), set up as
	 * run_new sets up every run's */
	tracker_init(&tr, world);
	if (opt->timeline)
		tracker_keep_ids(&tr);
	if (opt->alloc != NULL)
		tracker_allocator(&tr, opt->alloc);
	/* a case's LoRA adapters start the run where it has them (its "lora") */
	if (ag_exec_tfm_run_lora(c, &c->tfm->hf, c->tfm->seq, world, cs != NULL ? cs->weights : NULL,
	                         cs != NULL ? cs->tokens : NULL, cs != NULL ? cs->lora_init : NULL,
	                         cs != NULL ? cs->nlora_init : 0, opt->weights, &tr,
	                         opt->timeline ? 1 + (opt->timeline_ranks != 0) : 0, &ar, cause) != 0) {
		tracker_destroy(&tr);
		return -1;
	}
	struct zs_net m;
	struct zs_layout lo;
	net_init(&m, c);
	run_layout(&lo, &m, c, scheme, world, unit);
	*res = (struct zs_result){.scheme = scheme, .world = world, .unit = unit, .steps = c->steps,
	                          .nunits = lo.nunits, .shard_elements = lo.shard, .padded_elements = lo.shard * world,
	                          .processes = 1, .losses = ar.losses, .digest = ar.digest, .weights = ar.weights,
	                          .mark_label = ar.mark_label,
	                          .mark_bytes = ar.mark_bytes, .nmarks = ar.nmarks,
	                          .rank_mark_bytes = ar.rank_mark_bytes};
	res->unit_n = zs_calloc(lo.nunits, sizeof *res->unit_n);
	for (size_t u = 0; u < lo.nunits; u++)
		res->unit_n[u] = lo.unit[u].n;
	res->resident = zs_calloc(world, sizeof *res->resident);
	res->peak = zs_calloc(world, sizeof *res->peak);
	res->comm = zs_calloc(world, sizeof *res->comm);
	for (unsigned k = 0; k < world; k++) {
		res->resident[k] = ar.rank_resident[k];
		res->peak[k] = ar.rank_peak[k];
		res->comm[k] = ar.rank_comm[k];
	}
	res->binding_rank = ar.binding_rank;
	res->first_step_peak = ar.first_step_peak;
	res->routing = ar.routing; /* a mixture's: the values' own */
	res->routing_blocks = ar.routing_blocks;
	res->routing_experts = ar.routing_experts;
	res->routing_micro = ar.routing_micro;
	free(ar.rank_resident);
	free(ar.rank_peak);
	free(ar.rank_comm);
	memcpy(res->resident_breakdown, ar.resident_breakdown, sizeof res->resident_breakdown);
	memcpy(res->peak_breakdown, ar.peak_breakdown, sizeof res->peak_breakdown);
	if (opt->timeline) { /* the log moves to the result, as run_result's */
		res->ntimeline = tr.log[0].nevents;
		res->timeline = zs_malloc((res->ntimeline ? res->ntimeline : 1) * sizeof *res->timeline);
		memcpy(res->timeline, tr.log[0].events, res->ntimeline * sizeof *res->timeline);
		res->ntimeline_logs = tr.nlogged;
		res->timeline_logs = zs_calloc(res->ntimeline_logs, sizeof *res->timeline_logs);
		for (unsigned k = 0; k < res->ntimeline_logs; k++) {
			res->timeline_logs[k] = tr.log[k];
			memset(&tr.log[k], 0, sizeof tr.log[k]);
		}
	}
	if (opt->alloc != NULL) {
		tracker_sync(&tr);
		res->alloc = zs_calloc(world, sizeof *res->alloc);
		for (unsigned k = 0; k < world; k++)
			res->alloc[k] = tr.ca_rank[k];
	}
	tracker_destroy(&tr);
	layout_free(&lo);
	net_free(&m);
	return 0;
}

int engine_run(const struct zs_config *c, enum zs_scheme scheme, unsigned world, enum zs_unit unit,
               const struct zs_case *cs, const struct zs_run_options *opt, struct zs_result *res,
               char **cause)
{
	if (zs_config_validate(c, cause) != 0)
		return -1;
	memset(res, 0, sizeof *res);
	if (plain_loop(c))
		return run_plain_loop(c, scheme, world, unit, cs, opt, res, cause);
	/* On the heap: a sweep calls this on its worker threads, whose stacks
	 * are not the place for a run (351,880 bytes while its lists were
	 * ZS_MAX_* arrays). */
	struct zs_run *r = zs_calloc(1, sizeof *r);
	r->ops = scheme_ops(scheme_entry(c->framework, scheme), world);
	r->config = c;
	r->nmicro = c->grad_accum > 1 ? c->grad_accum : 1; /* every scheme, paper's and DeepSpeed's (config.c) */
	net_init(&r->model, c);
	run_layout(&r->layout, &r->model, c, scheme, world, unit);
	if (freeze_layout(&r->layout, c, scheme, world, unit, cause) != 0) {
		layout_free(&r->layout);
		net_free(&r->model);
		free(r);
		return -1;
	}
	if (r->model.kind == ZS_NET_TFM && r->model.tfm.nq4 > 0) { /* the 4-bit base: in no buffer */
		struct zs_slice *hole = zs_calloc(r->model.tfm.nq4, sizeof *hole);
		for (size_t i = 0; i < r->model.tfm.nq4; i++)
			hole[i] = (struct zs_slice){r->model.tfm.q4[i].off, r->model.tfm.q4[i].numel, 0};
		layout_quantize(&r->layout, hole, r->model.tfm.nq4);
		free(hole);
		if (r->layout.per_tensor) /* DeepSpeed's ZeRO-3: each a frozen tensor of its codes */
			pack_base(&r->layout, &r->model.tfm, c->precision == ZS_MIXED ? 2 : 4);
	}
	r->world = world;
	/* The state's precision is --precision's, but fp32 with no master copy
	 * where the scheme keeps it so (FSDP's MixedPrecision); the compute
	 * and the collectives are fp16 under --precision mixed all the same. */
	r->precision = r->ops->flags & ZS_OPS_FP32_STATE ? ZS_FP32 : c->precision;
	r->dt = c->precision == ZS_MIXED ? ZS_F16 : ZS_F32;
	r->seed = c->seed;
	r->cs = cs;
	float *own_init = NULL;
	if (cs != NULL)
		r->init = cs->weights;
	else if (opt->init != NULL)
		r->init = opt->init;
	else if (c->tfm == NULL)
		r->init = own_init = engine_initial_weights(c);
	else if (zs_lora_engine(c) && (r->init = own_init = lora_initial_weights(c, cause)) == NULL) {
		layout_free(&r->layout);
		net_free(&r->model);
		free(r);
		return -1;
	}
	optim_init(&r->opt, c->optimizer, c->lr);
	r->opt.beta1 = (float)c->beta1; /* --beta1, --beta2, --eps, or a case's */
	r->opt.beta2 = (float)c->beta2;
	r->opt.eps = (float)c->eps;
	setup_buffers(r);
	if (r->ops->buffers)
		r->ops->buffers(r);
#ifdef HAVE_MPI
	/* This run's peak resident set starts from what the process holds
	 * without it. */
	if (opt->mpi && (osmem_reset_peak(cause) != 0 || coll_init_mpi(&r->coll, world, cause) != 0)) {
		free(own_init);
		layout_free(&r->layout);
		net_free(&r->model);
		free(r);
		return -1;
	}
	r->mpi = opt->mpi;
#endif
	if (!r->mpi)
		coll_init_inprocess(&r->coll, world);
	r->r0 = r->coll.r0;
	r->r1 = r->coll.r1;
	tracker_init(&r->tracker, world);
	if (opt->timeline)
		tracker_keep_ids(&r->tracker);
	if (opt->alloc != NULL)
		tracker_allocator(&r->tracker, opt->alloc);
	r->rank_loss = zs_calloc((size_t)world * c->steps, sizeof *r->rank_loss);
	for (size_t l = 0; l < r->model.nlayers; l++)
		if (r->model.layer[l].moe != NULL) {
			r->routing_blocks++;
			r->routing_experts = (r->model.layer[l].nmoe - STEP_MOE_EXPERT) / 4;
		}
	if (r->routing_blocks > 0)
		r->routing = zs_calloc((size_t)world * c->steps * r->routing_blocks * r->routing_experts,
		                       sizeof *r->routing);
	r->rank = zs_calloc(r->r1 - r->r0, sizeof *r->rank);
	r->ptr_a = zs_calloc(r->r1 - r->r0, sizeof *r->ptr_a);
	r->ptr_b = zs_calloc(r->r1 - r->r0, sizeof *r->ptr_b);
	for (unsigned k = r->r0; k < r->r1; k++) {
		struct zs_rank *rk = run_rank(r, k);
		rk->t = zs_calloc(r->model.ntensors ? r->model.ntensors : 1, sizeof(float *));
		rk->w = zs_calloc(net_max_ptensors(&r->model), sizeof *rk->w);
		rk->g = zs_calloc(net_max_ptensors(&r->model), sizeof *rk->g);
	}

	setup_state(r);
	int failed = r->ops->setup != NULL && r->ops->setup(r, &r->ctx, cause) != 0, set_up = !failed;
	res->losses = zs_calloc(c->steps, sizeof *res->losses);
	for (unsigned t = 0; t < c->steps && !failed; t++) {
		if (opt->timeline && t + 1 == c->steps) {
			if (opt->timeline_ranks)
				tracker_record_ranks(&r->tracker);
			else
				tracker_record(&r->tracker);
		}
		failed = step(r, t, cause) != 0;
		tracker_stop_recording(&r->tracker);
		for (unsigned k = r->r0; k < r->r1; k++)
			r->rank_loss[(size_t)k * c->steps + t] = run_rank(r, k)->loss;
	}
	if (failed) { /* the hook's cause, unless the way out leaked */
		size_t left = end_run(r, set_up);
		free(own_init);
		engine_result_free(res);
		char *why = cause != NULL ? *cause : NULL;
		if (cause != NULL && left != 0) {
			*cause = NULL;
			zs_fail(cause, "internal error: %zu tracked blocks were not freed after: %s", left, why ? why : "?");
			free(why);
		}
		return -1;
	}
	size_t os_peak = r->mpi ? osmem_peak_bytes() : 0;
	res->scheme = scheme;
	res->world = world;
	res->unit = unit;
	res->steps = c->steps;
	res->processes = world / (r->r1 - r->r0);
	struct records rec;
	tracker_sync(&r->tracker);
	gather_records(r, c->steps, os_peak, &rec);
	collect(r, opt, &rec, res);
	int starved = starved_expert(r, scheme, cause);
	res->routing = r->routing;
	res->routing_blocks = r->routing_blocks;
	res->routing_experts = r->routing_experts;
	r->routing = NULL;
	int replicas = starved < 0 ? -1 : check_replicas(r, scheme, &rec, cause);
	free(rec.buf);
	free(own_init);

	size_t left = end_run(r, 1);
	if (left != 0) {
		engine_result_free(res);
		return zs_fail(cause, "internal error: %zu tracked blocks were not freed", left);
	}
	if (replicas != 0)
		engine_result_free(res);
	return replicas;
}

void engine_result_free(struct zs_result *res)
{
	free(res->resident);
	free(res->peak);
	free(res->comm);
	free(res->os_peak);
	free(res->host_resident);
	free(res->host_peak);
	free(res->losses);
	free(res->unit_n);
	free(res->timeline);
	for (unsigned k = 0; k < res->ntimeline_logs; k++) {
		free(res->timeline_logs[k].events);
		free(res->timeline_logs[k].live);
	}
	free(res->timeline_logs);
	free(res->alloc);
	free(res->weights);
	for (size_t i = 0; i < res->nmarks; i++)
		free(res->mark_label[i]);
	free(res->mark_label);
	free(res->mark_bytes);
	free(res->rank_mark_bytes);
	free(res->routing);
	memset(res, 0, sizeof *res);
}
