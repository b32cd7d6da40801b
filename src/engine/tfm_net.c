/*
 * tfm_net — the transformer of tfm.h as the step driver's layer list
 * (net.h), in fp32 or mixed precision. Layer 0 is the embedding,
 * layers 1..L the blocks, layer L+1 the final norm with the head and the
 * loss. Every tensor the backward reads is a tensor of the list with its
 * own name and lifetime (docs/schedule.md, "Transformers: the engine's
 * schedule"):
 *
 *   tokens, targets   (B, T) ints, from the start of forward; tokens until
 *                     the embedding's backward, targets until the head's
 *   x0                the embedding's output, until block 0's backward
 *   block l's tensors allocated before its forward, freed after its
 *                     backward; its output res3 after the next layer's
 *                     backward (which reads it as its input)
 *   lnf.., logits     the head's, until its backward (tied: lnf and the
 *                     logits' gradient until the embedding's backward)
 *   dres              the residual stream's gradient: the whole backward
 *   dx, dqkv, dh, dup, datt   backward scratch, until block 0's backward
 *   dnorm             tied: the final norm's grads, until the embedding's
 *   w32, act32, g32   mixed only: the conversion buffers (below)
 *
 * Recompute: selective makes each block's att a recomputed tensor (freed
 * after the block's forward, allocated again and rebuilt from qkv before
 * its backward); full makes every block tensor but res3 one (rebuilt,
 * module by module, by block_recompute from the block's input, before
 * the block's backward). The bits do not change.
 *
 * A tied head (gpt2) reads the embedding's unit and computes no param
 * grads: the head's contribution to wte (d logits^T · lnf) and the final
 * norm's grads are added in the embedding's backward, before its own, in
 * the order tfm_driver_step (tests/tfm_driver.c) adds them, so every scheme
 * and unit mode gets the same bits as the whole model in one buffer.
 *
 * A mixture's block (mixtral) is a kind of its own: a llama block's
 * attention half, then the router and the experts, whose tensors the
 * driver makes after the layer's route has counted each expert's tokens
 * (net.h's routed tensors).
 *
 * Every layer's backward zeroes the grads it owns first: a layer's grads
 * are a fresh buffer under zero3 and hold the last step's elsewhere.
 *
 * Mixed precision (PyTorch's autocast over fp16 working params): the
 * params and grads the schemes hand a layer are fp16, and the tensors of
 * the step description makes 16-bit (esize 2) are. The kernels are tfm.h's fp32 ones, run on
 * conversion buffers (OpenBLAS has no fp16 product): w32 the layer's
 * params widened; act32 its input and 16-bit tensors widened before it
 * runs and, after its forward (or a full recompute), rounded back into
 * them; g32 its grads, rounded into the fp16 grads at the end of its
 * backward. tfm.c rounds each 16-bit result as it is written, so what a
 * kernel reads in fp32 is what the 16-bit tensor holds.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/fp16.h"
#include "engine/moe_kernels.h"
#include "engine/tfm_moe.h"
#include "engine/net.h"
#include "engine/rng.h"
#include "engine/tfm.h"
#include "engine/tfm_kernels.h"
#include "util/ds_coord.h"
#include "util/lora.h"
#include "util/nf4.h"
#include "util/step.h"
#include "util/util.h"

static float *mut(const void *p) { return (float *)(size_t)p; }

/* Tensor i holds int32 token ids (the driver's tensors are 4-byte
 * elements of either type). */
static int *ids(float *const *t, unsigned i)
{
	void *p = t[i];
	return p;
}

static float *act(const struct zs_layer *l, const struct zs_layer_io *io, enum step_act a)
{
	return l->act[a] == ZS_NO_TENSOR ? NULL : io->t[l->act[a]];
}

static void scratch_of(struct tfm_scratch *s, const struct zs_layer_io *io)
{
	float **slot[6] = {&s->dres, &s->dx, &s->dqkv, &s->dh, &s->dup, &s->datt};
	for (int i = 0; i < 6; i++) /* a mixture's blocks have no MLP's dh and dup */
		*slot[i] = io->net->tfm.scratch[i] == ZS_NO_TENSOR ? NULL : io->t[io->net->tfm.scratch[i]];
}

/* ---- mixed precision: fp32 kernels on conversion buffers ------------------ */

/* The layer whose tensors l reads (a tied head: the embedding). */
static const struct zs_layer *reads(const struct zs_layer *l, const struct zs_layer_io *io)
{
	return l->tied ? &io->net->layer[0] : l;
}

/* Tensor i's first element among the params of the layer rd. */
static size_t tensor_off(const struct zs_layer *rd, size_t i)
{
	size_t off = 0;
	for (size_t k = 0; k < i; k++)
		off += rd->ptensor[k];
	return off;
}

/* The quantized tensor of the flat vector at `off` (NULL: none). */
static const struct zs_q4_tensor *q4_at(const struct zs_net_tfm *tn, size_t off)
{
	for (size_t i = 0; i < tn->nq4; i++)
		if (tn->q4[i].off == off)
			return &tn->q4[i];
	return NULL;
}

/* A 4-bit weight as its module's product reads it (bitsandbytes'
 * MatMul4Bit: F.dequantize_4bit(B, quant_state), forward line 380 and
 * backward line 411 of autograd/_functions.py; docs/finetune.md, "QLoRA
 * under the paper's step and DeepSpeed's own step"): each of its layers
 * dequantized from the rank's storages (with double quantization the
 * absmax first, in nf4a) into nf4w, the flat vector's layout ([out, in]); in mixed computed in fp32 at w32's place p and
 * rounded into the fp16 nf4w (quant_state.dtype), which p then widens as
 * every fp16 weight is widened. Under DeepSpeed's ZeRO-3 the codes are
 * `codes`, the tensor as stage 3 gathered it (NULL elsewhere: the
 * storages'), each layer's at its quant_storage elements of the params'
 * dtype (util/nf4.h's nf4_storage_elements; "QLoRA under DeepSpeed's own
 * ZeRO-3"). Returns the weight the kernels read. */
static float *dequantized(const struct zs_q4_tensor *q, const struct zs_layer_io *io, float *p, const void *codes)
{
	const struct zs_net_tfm *tn = &io->net->tfm;
	float *w = tn->mixed ? p : io->t[tn->nf4w], *tmp = tn->double_quant ? io->t[tn->nf4a] : NULL;
	unsigned es = tn->mixed ? 2 : 4;
	const uint8_t *at = codes;
	for (uint64_t k = 0, row = 0; k < (q->nparts ? q->nparts : 1); row += q->part_rows[k++]) {
		const struct zs_q4_store *st = &io->q4[q->part0 + k];
		uint64_t n = (q->nparts ? q->part_rows[k] : q->rows) * q->cols;
		struct nf4_state s = {codes != NULL ? at : st->packed, st->absmax, st->qabsmax,
		                      st->offset != NULL ? *st->offset : 0.0f, st->absmax2, st->code2};
		nf4_dequantize_state(w + row * q->cols, &s, tmp, n);
		at += codes != NULL ? nf4_storage_elements(n, es) * es : 0;
	}
	if (!tn->mixed)
		return w;
	zs_half *w16 = (zs_half *)(void *)io->t[tn->nf4w];
	zs_float_to_half_n(w16, p, q->numel);
	zs_half_to_float_n(p, w16, q->numel);
	return p;
}

/* Tensor i of the layer rd as the kernels read it, fp32: itself, or
 * (mixed) its place in w32, widened from fp16 when `widen` (a module
 * widens its own; the others are not read by its step); a 4-bit one
 * (io->w[i] NULL) dequantized when `widen`. */
static float *param32(const struct zs_layer *rd, const struct zs_layer_io *io, size_t i, int widen)
{
	const struct zs_net_tfm *tn = &io->net->tfm;
	float *p = tn->mixed ? io->t[tn->w32] + tensor_off(rd, i) : NULL;
	/* a 4-bit one: NULL in no buffer, else its codes (DeepSpeed's ZeRO-3) */
	const struct zs_q4_tensor *q = widen && tn->nq4 > 0 ? q4_at(tn, rd->param_off + tensor_off(rd, i)) : NULL;
	if (q != NULL)
		return dequantized(q, io, p, io->w[i]);
	if (!tn->mixed)
		return mut(io->w[i]);
	if (widen && io->w[i] != NULL)
		zs_half_to_float_n(p, io->w[i], rd->ptensor[i]);
	return p;
}

/* Tensor i's grads as the kernels write them (NULL where the layer writes
 * none), zeroed when `zero`: themselves, or (mixed) their place in g32,
 * which grads_done rounds into the fp16 grads. */
static float *grad32(const struct zs_layer *rd, const struct zs_layer_io *io, size_t i, int zero)
{
	const struct zs_net_tfm *tn = &io->net->tfm;
	if (io->g[i] == NULL)
		return NULL;
	float *g = tn->mixed ? io->t[tn->g32] + tensor_off(rd, i) : io->g[i];
	if (zero)
		memset(g, 0, rd->ptensor[i] * sizeof *g);
	return g;
}

/* The layer's tensors in tfm.h's slots (module s's k-th at 2s + k), its
 * params (grads 0) or its grads (1); those of [first, first + n) widened,
 * or zeroed. */
static void slots32(float *slot[TFM_SLOTS], const struct zs_layer *l, const struct zs_layer_io *io, int grads,
                    size_t first, size_t n)
{
	const struct zs_layer *rd = reads(l, io);
	memset(slot, 0, TFM_SLOTS * sizeof *slot);
	for (size_t s = 0; s < l->nmodules; s++) {
		size_t r = l->module[s].role; /* tfm.c's module: the adapters' are not its */
		for (size_t k = 0; !l->module[s].adapter && k < l->module[s].n && 2 * r + k < TFM_SLOTS; k++) {
			size_t i = l->module[s].first + k;
			int mine = i >= first && i < first + n;
			slot[2 * r + k] = grads ? grad32(rd, io, i, mine) : param32(rd, io, i, mine);
		}
	}
}

static void grads_done(const struct zs_layer *l, const struct zs_layer_io *io, size_t first, size_t n)
{
	const struct zs_net_tfm *tn = &io->net->tfm;
	const struct zs_layer *rd = reads(l, io);
	for (size_t i = first; i < first + n && tn->mixed; i++)
		if (io->g[i] != NULL)
			zs_float_to_half_n(io->g[i], io->t[tn->g32] + tensor_off(rd, i), rd->ptensor[i]);
}

/* Where the kernels see the layer's tensors: its input x (the previous
 * layer's output; with_x) and acts a of enum step_act a0..a1. In fp32 the
 * tensors themselves; in mixed the 16-bit ones' fp32 copies, one after
 * another in act32 (x first), the others themselves. */
struct view {
	float *x;
	float *t[STEP_NACTS];
	float *end; /* mixed: act32 past the copies */
};

static void view_of(struct view *v, const struct zs_layer *l, const struct zs_layer_io *io, int a0, int a1,
                    int with_x)
{
	const struct zs_net_tfm *tn = &io->net->tfm;
	const struct zs_net *m = io->net;
	float *p = tn->mixed ? io->t[tn->act32] : NULL;
	memset(v, 0, sizeof *v);
	v->x = with_x ? io->t[l->in] : NULL;
	if (p != NULL && v->x != NULL) {
		v->x = p;
		p += m->tensor[l->in].elements;
	}
	for (int a = a0; a <= a1; a++) {
		v->t[a] = act(l, io, (enum step_act)a);
		if (p != NULL && v->t[a] != NULL && m->tensor[l->act[a]].esize == sizeof(zs_half)) {
			v->t[a] = p;
			p += m->tensor[l->act[a]].elements;
		}
	}
	v->end = p;
}

/* Mixed: the 16-bit tensors of a0..a1 widened into their copies (in) or
 * their copies rounded into them (out); `skip` says which to leave. The
 * input x is widened with `in`. */
enum { SKIP_NONE, SKIP_RECOMPUTED, SKIP_ALL_BUT_INPUT };

static void sync16(const struct view *v, const struct zs_layer *l, const struct zs_layer_io *io, int a0, int a1,
                   int in, int skip)
{
	const struct zs_net *m = io->net;
	if (!m->tfm.mixed)
		return;
	if (in && v->x != NULL)
		zs_half_to_float_n(v->x, (const zs_half *)(const void *)io->t[l->in], m->tensor[l->in].elements);
	for (int a = a0; a <= a1 && skip != SKIP_ALL_BUT_INPUT; a++) {
		unsigned i = l->act[a];
		if (i == ZS_NO_TENSOR || m->tensor[i].esize != sizeof(zs_half) ||
		    (skip == SKIP_RECOMPUTED && m->tensor[i].recomputed))
			continue;
		void *t16 = io->t[i];
		if (t16 == NULL) /* freed: a block's output, which its backward does not read */
			continue;
		if (in)
			zs_half_to_float_n(v->t[a], t16, m->tensor[i].elements);
		else
			zs_float_to_half_n(t16, v->t[a], m->tensor[i].elements);
	}
}

static void block_acts(struct tfm_block_acts *a, const struct view *v, int f16)
{
	for (int i = 0; i < STEP_NBLOCK_ACTS; i++)
		*tfm_block_act_slot(a, (enum step_act)i) = v->t[i];
	a->f16 = f16;
}

static void head_acts(struct tfm_head_acts *a, const struct view *v, int f16)
{
	for (int i = STEP_ACT_LNF; i <= STEP_ACT_LOGITS; i++)
		*tfm_head_act_slot(a, (enum step_act)i) = v->t[i];
	a->f16 = f16;
}

/* ---- the embedding ------------------------------------------------------ */

static void embed_fwd(const struct zs_layer *l, const struct zs_layer_io *io, size_t s)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct zs_module *md = &l->module[s];
	struct tfm_embed_params p;
	float *w[TFM_SLOTS];
	struct view v;
	view_of(&v, l, io, STEP_ACT_X0, STEP_ACT_X0, 0);
	slots32(w, l, io, 0, md->first, md->n);
	tfm_embed_view(&p, w);
	tfm_embed_forward_module(v.t[STEP_ACT_X0], &p, ids(io->t, n->tokens), &n->dims, n->B, n->T, s);
	if (s + 1 == l->nmodules)
		sync16(&v, l, io, STEP_ACT_X0, STEP_ACT_X0, 0, SKIP_NONE);
}

/* The token table's grads (module 0) take the tied head's first, as
 * tfm_driver_step adds them, and the final norm's from dnorm where the
 * layer writes them (outside DeepSpeed's ZeRO-3, whose head writes its
 * norm's own). Tied, the final norm's tensors are the layer's last nf,
 * those none of its own modules runs (util/step.h). */
static void embed_bwd(const struct zs_layer *l, const struct zs_layer_io *io, size_t s)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct tfm_dims *d = &n->dims;
	const struct zs_module *md = &l->module[s];
	size_t f0 = 0;
	for (size_t k = 0; k < l->nmodules; k++)
		f0 += l->module[k].n;
	size_t nf = l->nptensors - f0;
	int norm = s == 0 && nf > 0 && io->g[f0] != NULL;
	float *g[TFM_SLOTS];
	struct tfm_embed_params eg;
	slots32(g, l, io, 1, md->first, md->n);
	tfm_embed_view(&eg, g);
	if (s == 0 && d->tied) { /* the tied head's grads first, as tfm_driver_step adds them */
		const struct zs_layer *h = &io->net->layer[io->net->nlayers - 1];
		struct view v;
		view_of(&v, h, io, STEP_ACT_LNF, STEP_ACT_LOGITS, 0); /* its input is freed */
		sync16(&v, h, io, STEP_ACT_LNF, STEP_ACT_LOGITS, 1, SKIP_NONE);
		if (eg.wte != NULL) /* frozen: lnf and the logits are freed (step_buffers_freeze) */
			matmul_backward(NULL, eg.wte, NULL, v.t[STEP_ACT_LOGITS], v.t[STEP_ACT_LNF], NULL, n->B * n->T,
			                d->d, d->vocab);
		for (size_t i = 0; norm && i < nf; i++)
			memcpy(grad32(l, io, f0 + i, 0), io->t[n->dnorm] + i * d->d, d->d * sizeof(float));
	}
	tfm_embed_backward_module(&eg, io->t[n->scratch[0]], ids(io->t, n->tokens), d, n->B, n->T, s);
	grads_done(l, io, md->first, md->n);
	if (norm)
		grads_done(l, io, f0, nf);
}

/* ---- a block -------------------------------------------------------------- */

/* Whether module s has LoRA's adapters (--lora-r; util/lora.h): its
 * lora_A and lora_B modules follow it. */
static int adapters_on(const struct zs_layer *l, size_t s)
{
	return s + 1 < l->nmodules && l->module[s + 1].adapter == 1;
}

/* Adapter md's xa as the kernels read it, fp32: itself, or (mixed: a
 * 16-bit tensor, the step description's lora_xa) its copy in act32 past
 * the view's copies, at `end` (util/step.c step_buffers_lora makes room
 * for one adapter's), widened from it when `widen`. */
static float *xa32(const struct zs_module *md, const struct zs_layer_io *io, float *end, int widen)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	if (!n->mixed)
		return io->t[md->xa];
	if (widen)
		zs_half_to_float_n(end, (const zs_half *)(const void *)io->t[md->xa], n->B * n->T * md->r);
	return end;
}

/* Adapter md's dropout (--lora-dropout p > 0; PEFT v0.20.0's
 * lora.Linear.forward, layer.py lines 1030-1069: lora_A(dropout(x)),
 * dropout nn.Dropout(p) from update_layer, 252-254) over its input x (BT,
 * in), as the PyTorch step runs it on the CPU (util/autograd.c dropout():
 * noise = empty_like(x), bernoulli_(1 − p), div_(1 − p); x.mul(noise)):
 * the noise drawn as that step's draw of the same number (engine/rng.h;
 * the adapters' dropouts are a step's only ones where the model's are 0,
 * numbered in forward order, a micro-step's after the previous one's),
 * element for element as the PyTorch step at --seq T + 1 draws its [B,
 * T + 1, in] noise (the step the paper's at T is held to: it scores T
 * tokens of a row, tests/freeze_lib.sh), its positions 0..T-1, so that
 * both steps drop the same elements; the noise and the output kept
 * (step_buffers_lora's lora_noise and lora_drop; mixed: 16-bit, rounded
 * as written). Returns the output as the kernels read it, fp32: its
 * tensor, or (mixed) its copy in act32 at `at`. */
static const float *dropout_fwd(const struct zs_module *md, const struct zs_layer_io *io, const float *x, float *at)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const size_t rows = n->B * n->T, in = md->in;
	const double keep = 1 - n->lora_dropout;
	const uint64_t draw = (uint64_t)io->micro * n->lora_n + md->draw + 1;
	const uint64_t key = rng_bernoulli_key(io->seed, io->step, draw | 1ULL << 31);
	const float scale = 1.0f / (float)keep; /* div_(1 − p): a float divided by the number as a float */
	const zs_half s16 = zs_float_to_half(scale), z16 = zs_float_to_half(0.0f);
	const float s32 = zs_half_to_float(s16);
	for (size_t i = 0; i < rows; i++) {
		const uint64_t e0 = (uint64_t)(i / n->T * (n->T + 1) + i % n->T) * in; /* [b, t] of [B, T + 1] */
		for (size_t c = 0, e = i * in; c < in; c++, e++) {
			const int kept = rng_bernoulli_at(key, e0 + c, keep);
			if (!n->mixed) {
				io->t[md->noise][e] = kept ? scale : 0.0f;
				io->t[md->drop][e] = x[e] * io->t[md->noise][e];
				continue;
			}
			zs_half *noise = (zs_half *)(void *)io->t[md->noise], *y16 = (zs_half *)(void *)io->t[md->drop];
			noise[e] = kept ? s16 : z16;
			y16[e] = zs_float_to_half(x[e] * (kept ? s32 : 0.0f));
			at[e] = zs_half_to_float(y16[e]);
		}
	}
	return n->mixed ? at : io->t[md->drop];
}

/* The dropout output's copy the kernels read in backward: its tensor, or
 * (mixed) widened into act32 at `at`. */
static const float *dropout_out32(const struct zs_module *md, const struct zs_layer_io *io, float *at)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	if (!n->mixed)
		return io->t[md->drop];
	zs_half_to_float_n(at, (const zs_half *)(const void *)io->t[md->drop], n->B * n->T * md->in);
	return at;
}

/* The dropout's backward (its MulBackward0, g · noise) of g, the
 * gradient at its output, added to dx, the base layer's input's. */
static void dropout_bwd(const struct zs_module *md, const struct zs_layer_io *io, float *dx, const float *g)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const size_t N = n->B * n->T * md->in;
	if (!n->mixed) {
		const float *noise = io->t[md->noise];
		for (size_t e = 0; e < N; e++) {
			float d = g[e] * noise[e];
			dx[e] += d;
		}
		return;
	}
	const zs_half *noise = (const zs_half *)(const void *)io->t[md->noise];
	for (size_t e = 0; e < N; e++) {
		float d = g[e] * zs_half_to_float(noise[e]);
		dx[e] += d;
	}
}

/* Module s's adapters, after its product: each pair adds
 * scaling·(x·Aᵀ)·Bᵀ into its rows of the product's output, keeping xa =
 * x·Aᵀ (PEFT's result + lora_B(lora_A(dropout(x)))·scaling; with
 * --lora-dropout its input is dropout_fwd's, else x itself). keep_only:
 * full recompute's rebuild of the block's last module, whose output is
 * kept, not rebuilt: xa alone (and the dropout's, drawn again: the same
 * key), the sum going to the backward's scratch dx, free until the
 * block's backward. Mixed: xa and the sum rounded to fp16 as written
 * (lora_forward), xa kept in its 16-bit tensor; `end` is act32 past the
 * view's copies (xa's copy there, then the dropout output's). */
static void lora_fwd(const struct zs_layer *l, const struct zs_layer_io *io, size_t s, const struct tfm_block_acts *a,
                     int keep_only, float *end)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	struct tfm_linear lin;
	struct tfm_scratch sc;
	tfm_block_linear(&lin, a, NULL, &n->dims, l->module[s].role);
	scratch_of(&sc, io);
	for (size_t k = s + 1; k < l->nmodules && l->module[k].adapter; k++) {
		const struct zs_module *md = &l->module[k];
		if (md->adapter != 1)
			continue;
		float *xa = xa32(md, io, end, 0);
		const float *x = md->drop != ZS_NO_TENSOR ? dropout_fwd(md, io, lin.x, end + n->B * n->T * md->r) : lin.x;
		lora_forward(keep_only ? sc.dx : lin.y, xa, x, param32(l, io, md->first, 1),
		             param32(l, io, md->first + 1, 1), n->lora_scaling, n->B * n->T, md->in, md->r, md->out,
		             keep_only ? md->out : lin.out, keep_only ? 0 : md->row0, n->mixed);
		if (n->mixed)
			zs_float_to_half_n((zs_half *)(void *)io->t[md->xa], xa, n->B * n->T * md->r);
	}
}

/* Their backward, after the product's (which wrote the input's
 * gradient): dA and dB (zeroed first: a layer's backward zeroes the
 * grads it owns), and each adapter's part of the input's gradient added
 * to the base's, through the scratch dlora (with dropout, through
 * dlora_x, the gradient at the dropout's output, then its noise). */
static void lora_bwd(const struct zs_layer *l, const struct zs_layer_io *io, size_t s, const struct tfm_block_acts *a,
                     const struct tfm_scratch *sc, float *end32)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	struct tfm_linear lin;
	tfm_block_linear(&lin, a, sc, &n->dims, l->module[s].role);
	size_t end = s + 1;
	while (end < l->nmodules && l->module[end].adapter)
		end++;
	for (size_t k = end; k-- > s + 1;) {
		const struct zs_module *md = &l->module[k];
		if (md->adapter != 1)
			continue;
		/* a frozen adapter's (--freeze): no gradient, nor what only it reads */
		float *dA = grad32(l, io, md->first, 1), *dB = grad32(l, io, md->first + 1, 1);
		const float *xa = dB != NULL ? xa32(md, io, end32, 1) : NULL, *x = dA != NULL ? lin.x : NULL;
		float *dx = lin.dx;
		if (md->drop != ZS_NO_TENSOR) {
			x = dA != NULL ? dropout_out32(md, io, end32 + n->B * n->T * md->r) : NULL;
			dx = io->t[n->lora_scratch[STEP_LORA_DX]];
			memset(dx, 0, n->B * n->T * md->in * sizeof *dx);
		}
		lora_backward(dx, dA, dB, io->t[n->lora_scratch[STEP_LORA_DT]], lin.dy, x, xa,
		              param32(l, io, md->first, 1), param32(l, io, md->first + 1, 1), n->lora_scaling,
		              n->B * n->T, md->in, md->r, md->out, lin.out, md->row0);
		if (md->drop != ZS_NO_TENSOR)
			dropout_bwd(md, io, lin.dx, dx);
		grads_done(l, io, md->first, 2);
	}
}

/* Whether s is the block's last module but the adapters' (its backward's
 * first). */
static int last_base(const struct zs_layer *l, size_t s)
{
	for (size_t k = s + 1; k < l->nmodules; k++)
		if (!l->module[k].adapter)
			return 0;
	return 1;
}

/* Full recompute under --freeze: a frozen linear's input that the
 * block's backward does not read (util/step.c linear_input_kept: freed
 * after the forward, not made again) is rebuilt in the backward's scratch,
 * free until the block's backward, as the rerun forward under
 * torch.utils.checkpoint makes it and drops it (lora_fwd's keep_only puts
 * its sum there too): ln1, the attention's output and ln2 in dx (B·T ·
 * max(d, H·hd); each is dead before the next is written: ln1 after the
 * q/k/v product, atty after the projection), the activation in dh (B·T ·
 * F), which only the down projection reads (not rerun: res3 is kept; its
 * norm's, gemma2's, reads it). fp32: in mixed each is rounded as it is
 * written, so the products read what the 16-bit tensor held. */
static void recompute_scratch(struct tfm_block_acts *a, const struct zs_layer_io *io)
{
	struct tfm_scratch sc;
	scratch_of(&sc, io);
	float **dx[3] = {&a->ln1, &a->atty, &a->ln2};
	for (int i = 0; i < 3; i++)
		if (*dx[i] == NULL)
			*dx[i] = sc.dx;
	if (a->fch_act == NULL)
		a->fch_act = sc.dh;
}

/* Module s of the block's forward, or (recompute) of its full recompute:
 * rebuild what the forward did not keep (every block tensor but res3,
 * and but a frozen linear's input: recompute_scratch) from the block's
 * input, reading module s's tensors only, in mixed also into their 16-bit
 * tensors, which then hold what they say (block_bwd's first module reads
 * them). */
static void block_run(const struct zs_layer *l, const struct zs_layer_io *io, size_t s, int recompute)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct zs_module *md = &l->module[s];
	struct tfm_block_params p;
	struct tfm_block_acts a;
	float *w[TFM_SLOTS];
	struct view v;
	if (md->adapter) /* run with its base module */
		return;
	view_of(&v, l, io, 0, STEP_NBLOCK_ACTS - 1, 1);
	if (s == 0)
		sync16(&v, l, io, 0, STEP_NBLOCK_ACTS - 1, 1, recompute ? SKIP_RECOMPUTED : SKIP_ALL_BUT_INPUT);
	slots32(w, l, io, 0, md->first, md->n);
	tfm_block_view(&p, w, &n->dims, (size_t)l->block);
	block_acts(&a, &v, n->mixed);
	if (recompute)
		recompute_scratch(&a, io);
	size_t r = md->role;
	int last = r + 1 == tfm_block_modules(&n->dims);
	if (!adapters_on(l, s))
		(recompute ? tfm_block_recompute_module : tfm_block_forward_module)(&a, &p, v.x, &n->dims, n->B, n->T, r);
	else if (recompute && last) {
		tfm_block_recompute_module(&a, &p, v.x, &n->dims, n->B, n->T, r);
		lora_fwd(l, io, s, &a, 1, v.end);
	} else {
		tfm_block_forward_half(&a, &p, v.x, &n->dims, n->B, n->T, r, TFM_PRODUCT);
		lora_fwd(l, io, s, &a, 0, v.end);
		tfm_block_forward_half(&a, &p, v.x, &n->dims, n->B, n->T, r, TFM_REST);
	}
	if (last_base(l, s))
		sync16(&v, l, io, 0, recompute ? STEP_ACT_RES3 - 1 : STEP_NBLOCK_ACTS - 1, 0, SKIP_NONE);
}

static void block_fwd(const struct zs_layer *l, const struct zs_layer_io *io, size_t s) { block_run(l, io, s, 0); }

static void block_recompute(const struct zs_layer *l, const struct zs_layer_io *io, size_t s)
{
	block_run(l, io, s, 1);
}

static void block_bwd(const struct zs_layer *l, const struct zs_layer_io *io, size_t s)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct tfm_dims *d = &n->dims;
	const struct zs_module *md = &l->module[s];
	int first = last_base(l, s);
	struct tfm_block_params p, g;
	struct tfm_block_acts a;
	struct tfm_scratch sc;
	float *w[TFM_SLOTS], *gr[TFM_SLOTS];
	struct view v;
	if (md->adapter) /* run with its base module */
		return;
	view_of(&v, l, io, 0, STEP_NBLOCK_ACTS - 1, 1);
	if (first)
		sync16(&v, l, io, 0, STEP_NBLOCK_ACTS - 1, 1, SKIP_RECOMPUTED);
	slots32(w, l, io, 0, md->first, md->n);
	tfm_block_view(&p, w, &n->dims, (size_t)l->block);
	slots32(gr, l, io, 1, md->first, md->n);
	tfm_block_view(&g, gr, &n->dims, (size_t)l->block);
	block_acts(&a, &v, n->mixed);
	scratch_of(&sc, io);
	if (first && n->recompute == ZS_RECOMPUTE_SELECTIVE)
		tfm_attention_recompute(&a, d, n->B, n->T);
	if (!adapters_on(l, s))
		tfm_block_backward_module(&g, &sc, &a, &p, v.x, d, n->B, n->T, md->role);
	else {
		tfm_block_backward_half(&g, &sc, &a, &p, v.x, d, n->B, n->T, md->role, TFM_PRODUCT);
		lora_bwd(l, io, s, &a, &sc, v.end);
		tfm_block_backward_half(&g, &sc, &a, &p, v.x, d, n->B, n->T, md->role, TFM_REST);
	}
	grads_done(l, io, md->first, md->n);
}

/* ---- a block under DeepSpeed's ZeRO-3, module by module ------------------------ */

/* DeepSpeed's ZeRO-3 hooks every nn.Module (parameter_offload.py's
 * _register_hooks_recursively at 38327e0) and gathers a module's own
 * parameters around its own forward and backward: PEFT's lora_A and
 * lora_B are nn.Linear modules of their own (layer.py's update_layer,
 * v0.20.0), called after the base layer's product (lora.Linear.forward:
 * result = self.base_layer(x), then lora_B(lora_A(dropout(x))) *
 * scaling added), so that the base's weight is not gathered while an
 * adapter runs, nor an adapter's while the base does. Module k here:
 * the base's product alone (its adapters follow), lora_A's xa = x·Aᵀ,
 * lora_B's sum into the product's rows, and after the base's last
 * adapter what follows the product (tfm.c's TFM_REST). Backward in
 * reverse, as autograd runs the branch before the base's product (its
 * nodes are younger): lora_B's dB and dt, lora_A's dA and its part of
 * the input's gradient (the first adapter's backward zeroes it), then
 * the base's product adds its own (a frozen weight: no dW) and what
 * precedes it. The arithmetic is lora_forward's and lora_backward's in
 * the same order but the input's gradient, whose sum starts from the
 * adapters' parts (PyTorch's own order: the branch's AccumulateGrad
 * input arrives first), so the losses equal the whole block's within
 * float rounding, not bit for bit. A module without adapters runs as
 * block_fwd and block_bwd run it. */
static int last_adapter(const struct zs_layer *l, size_t k)
{
	return k + 1 == l->nmodules || !l->module[k + 1].adapter;
}

/* Module k of the block under the coordinator: its base s (itself, or
 * an adapter's), the base's role, view, acts, params (its own tensors
 * widened where k is the base: an adapter's call reads none of them,
 * nor are they gathered then), scratch and linear (with the backward's
 * gradients where `bwd`). */
struct hooked {
	size_t s, r;
	struct view v;
	struct tfm_block_acts a;
	struct tfm_block_params p;
	struct tfm_scratch sc;
	struct tfm_linear lin;
};

static void hooked_setup(struct hooked *h, const struct zs_layer *l, const struct zs_layer_io *io, size_t k, int bwd)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	float *w[TFM_SLOTS];
	h->s = l->module[k].adapter ? l->module[k].base : k;
	h->r = l->module[h->s].role;
	view_of(&h->v, l, io, 0, STEP_NBLOCK_ACTS - 1, 1);
	slots32(w, l, io, 0, l->module[h->s].first, k == h->s ? l->module[h->s].n : 0);
	tfm_block_view(&h->p, w, &n->dims, (size_t)l->block);
	block_acts(&h->a, &h->v, n->mixed);
	scratch_of(&h->sc, io);
	tfm_block_linear(&h->lin, &h->a, bwd ? &h->sc : NULL, &n->dims, h->r);
}

static void block_run_hooked(const struct zs_layer *l, const struct zs_layer_io *io, size_t k, int recompute)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct zs_module *md = &l->module[k];
	if (!md->adapter && !adapters_on(l, k)) {
		block_run(l, io, k, recompute);
		return;
	}
	struct hooked h;
	hooked_setup(&h, l, io, k, 0);
	int last = h.r + 1 == tfm_block_modules(&n->dims);
	if (!md->adapter && h.s == 0)
		sync16(&h.v, l, io, 0, STEP_NBLOCK_ACTS - 1, 1, recompute ? SKIP_RECOMPUTED : SKIP_ALL_BUT_INPUT);
	if (recompute) {
		recompute_scratch(&h.a, io);
		tfm_block_linear(&h.lin, &h.a, NULL, &n->dims, h.r);
	}
	const size_t BT = n->B * n->T;
	if (!md->adapter) {
		if (recompute && last)
			tfm_block_recompute_module(&h.a, &h.p, h.v.x, &n->dims, n->B, n->T, h.r);
		else
			tfm_block_forward_half(&h.a, &h.p, h.v.x, &n->dims, n->B, n->T, h.r, TFM_PRODUCT);
		return;
	}
	int keep_only = recompute && last;
	if (md->adapter == 1) {
		float *xa = xa32(md, io, h.v.end, 0);
		const float *x = md->drop != ZS_NO_TENSOR ? dropout_fwd(md, io, h.lin.x, h.v.end + BT * md->r) : h.lin.x;
		lora_forward_a(xa, x, param32(l, io, md->first, 1), BT, md->in, md->r, n->mixed);
		if (n->mixed)
			zs_float_to_half_n((zs_half *)(void *)io->t[md->xa], xa, BT * md->r);
		return;
	}
	const struct zs_module *ma = &l->module[k - 1]; /* its lora_A: xa */
	lora_forward_b(keep_only ? h.sc.dx : h.lin.y, xa32(ma, io, h.v.end, 1), param32(l, io, md->first, 1),
	               n->lora_scaling, BT, md->r, md->out, keep_only ? md->out : h.lin.out, keep_only ? 0 : md->row0,
	               n->mixed);
	if (!last_adapter(l, k))
		return;
	if (!keep_only)
		tfm_block_forward_half(&h.a, &h.p, h.v.x, &n->dims, n->B, n->T, h.r, TFM_REST);
	if (k + 1 == l->nmodules)
		sync16(&h.v, l, io, 0, recompute ? STEP_ACT_RES3 - 1 : STEP_NBLOCK_ACTS - 1, 0, SKIP_NONE);
}

static void block_fwd_hooked(const struct zs_layer *l, const struct zs_layer_io *io, size_t k)
{
	block_run_hooked(l, io, k, 0);
}

static void block_recompute_hooked(const struct zs_layer *l, const struct zs_layer_io *io, size_t k)
{
	block_run_hooked(l, io, k, 1);
}

static void block_bwd_hooked(const struct zs_layer *l, const struct zs_layer_io *io, size_t k)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct zs_module *md = &l->module[k];
	if (!md->adapter && !adapters_on(l, k)) {
		block_bwd(l, io, k);
		return;
	}
	struct hooked h;
	hooked_setup(&h, l, io, k, 1);
	const size_t BT = n->B * n->T;
	if (k + 1 == l->nmodules) { /* the block's first in backward */
		sync16(&h.v, l, io, 0, STEP_NBLOCK_ACTS - 1, 1, SKIP_RECOMPUTED);
		if (n->recompute == ZS_RECOMPUTE_SELECTIVE)
			tfm_attention_recompute(&h.a, &n->dims, n->B, n->T);
	}
	float *dt = io->t[n->lora_scratch[STEP_LORA_DT]];
	if (md->adapter == 2) {
		if (last_adapter(l, k)) /* the base's first adapter in backward: the input's gradient starts here */
			memset(h.lin.dx, 0, BT * h.lin.in * sizeof *h.lin.dx);
		const struct zs_module *ma = &l->module[k - 1];
		float *dB = grad32(l, io, md->first, 1);
		lora_backward_b(dB, dt, h.lin.dy, dB != NULL ? xa32(ma, io, h.v.end, 1) : NULL, param32(l, io, md->first, 1),
		                n->lora_scaling, BT, md->r, md->out, h.lin.out, md->row0);
		grads_done(l, io, md->first, 1);
		return;
	}
	if (md->adapter == 1) {
		float *dA = grad32(l, io, md->first, 1), *dx = h.lin.dx;
		const float *x = dA != NULL ? h.lin.x : NULL;
		if (md->drop != ZS_NO_TENSOR) {
			x = dA != NULL ? dropout_out32(md, io, h.v.end + BT * md->r) : NULL;
			dx = io->t[n->lora_scratch[STEP_LORA_DX]];
			memset(dx, 0, BT * md->in * sizeof *dx);
		}
		lora_backward_a(dx, dA, dt, x, param32(l, io, md->first, 1), BT, md->in, md->r);
		if (md->drop != ZS_NO_TENSOR)
			dropout_bwd(md, io, h.lin.dx, dx);
		grads_done(l, io, md->first, 1);
		return;
	}
	/* the base: frozen (LoRA's, bias none: no dW, no db), its input's
	 * gradient added to the adapters' */
	float *gr[TFM_SLOTS];
	struct tfm_block_params g;
	slots32(gr, l, io, 1, md->first, md->n);
	tfm_block_view(&g, gr, &n->dims, (size_t)l->block);
	/* (a 4-bit weight dequantized again, as MatMul4Bit's backward does:
	 * its codes are what stage 3 gathered) */
	int q4 = n->nq4 > 0 && q4_at(n, l->param_off + tensor_off(l, md->first)) != NULL;
	matmul_backward_din_add(h.lin.dx, h.lin.dy, param32(l, io, md->first, q4), BT, h.lin.in, h.lin.out);
	tfm_block_backward_half(&g, &h.sc, &h.a, &h.p, h.v.x, &n->dims, n->B, n->T, h.r, TFM_REST);
	grads_done(l, io, md->first, md->n);
}

/* ---- a mixture's block ------------------------------------------------------ */

/* Mixtral's, Qwen2-MoE's and Qwen3-MoE's block (engine/tfm_moe.h): the
 * attention half is a llama block's first A = tfm_moe_attn_modules
 * modules (block_fwd, block_bwd; 4, qwen3_moe's 5 with its q/k norms),
 * then the router (module A) and each expert's three (modules A + 1 + 3e
 * ..: w1, w2, w3; qwen2_moe's and qwen3_moe's gate_proj, up_proj,
 * down_proj, tfm_moe_slot), then
 * qwen2_moe's shared expert (A + 1 + 3E ..: gate_proj, up_proj, down_proj,
 * shared_expert_gate), which runs on every token after the routed ones. route runs
 * the attention half and the router, which decide the experts' rows;
 * forward runs the experts on them. Expert e's tensors are its own,
 * n_e rows each, as transformers 4.x's loop makes them (tfm_moe.h groups
 * them in one allocation; here each is a tensor of the list).
 *
 * Mixed: the routing weights and the experts' tensors are 16-bit (the
 * step description's moe buffers); their fp32 copies follow the block's
 * in act32, the weights (BT, k), then expert e's four at start[e] rows of
 * 2d + 3F (Σ n_e = BT·k, so their room is the same whatever the routing),
 * then the shared expert's four (sgu, sact, sye, sg).
 * The kernels run in fp32 on the copies; each result is rounded into its
 * 16-bit tensor and read back as it is stored (the weights after top-k,
 * an expert's four after it runs, the block's after the experts' sum),
 * so backward reads what the 16-bit tensors hold. */
static const float *moe_param(const struct zs_layer *l, const struct zs_layer_io *io, size_t module)
{
	return param32(l, io, l->module[module].first, 1);
}

static void *moe_t(const struct zs_layer *l, const struct zs_layer_io *io, unsigned i)
{
	return io->t[l->moe[i]];
}

/* The block's tensors as the kernels see them: the routing weights and
 * the experts' copies after the block's own (fp32: the tensors). */
struct moe_view {
	struct view v;
	float *w;
	float *ex;
};

static void moe_view_of(struct moe_view *mv, const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	view_of(&mv->v, l, io, 0, STEP_NBLOCK_ACTS - 1, 1);
	mv->w = n->mixed ? mv->v.end : moe_t(l, io, STEP_MOE_W);
	mv->ex = n->mixed ? mv->w + n->B * n->T * n->dims.top_k : NULL;
}

/* Expert e's xe, gu, act, ye as the kernels see them (its ne rows from
 * the at-th assignment on). */
static void moe_expert_view(float *t[4], const struct moe_view *mv, const struct zs_layer *l,
                            const struct zs_layer_io *io, size_t e, size_t at, size_t ne)
{
	const struct tfm_dims *d = &io->net->tfm.dims;
	const size_t row[4] = {d->d, 2 * d->ffn, d->ffn, d->d};
	float *p = mv->ex != NULL ? mv->ex + at * (2 * d->d + 3 * d->ffn) : NULL;
	for (unsigned j = 0; j < 4; j++) {
		t[j] = p != NULL ? p : moe_t(l, io, STEP_MOE_EXPERT + 4 * (unsigned)e + j);
		p = p != NULL ? p + ne * row[j] : NULL;
	}
}

/* The shared expert's sgu, sact, sye, sg as the kernels see them. */
static void moe_shared_view(float *t[4], const struct moe_view *mv, const struct zs_layer *l,
                            const struct zs_layer_io *io)
{
	const struct tfm_dims *d = &io->net->tfm.dims;
	size_t BT = io->net->tfm.B * io->net->tfm.T, S = d->shared_ffn;
	const size_t n[4] = {BT * 2 * S, BT * S, BT * d->d, BT};
	float *p = mv->ex != NULL ? mv->ex + BT * d->top_k * (2 * d->d + 3 * d->ffn) : NULL;
	for (unsigned j = 0; j < 4; j++) {
		t[j] = p != NULL ? p : moe_t(l, io, STEP_MOE_SGU + j);
		p = p != NULL ? p + n[j] : NULL;
	}
}

/* Mixed: a copy rounded into its 16-bit tensor and read back from it
 * (store), or the tensor widened into its copy. */
static void moe16(float *copy, void *t16, size_t n, int store)
{
	if (store)
		zs_float_to_half_n(t16, copy, n);
	zs_half_to_float_n(copy, t16, n);
}

/* Mixed: each expert's four tensors and their copies, as moe16. */
static void moe_experts16(const struct moe_view *mv, const struct zs_layer *l, const struct zs_layer_io *io,
                          int store)
{
	const struct tfm_dims *d = &io->net->tfm.dims;
	const size_t *start = moe_t(l, io, STEP_MOE_START);
	const size_t row[4] = {d->d, 2 * d->ffn, d->ffn, d->d};
	for (size_t e = 0; e < d->experts; e++) {
		size_t ne = start[e + 1] - start[e];
		float *t[4];
		moe_expert_view(t, mv, l, io, e, start[e], ne);
		for (unsigned j = 0; j < 4 && ne > 0; j++)
			moe16(t[j], moe_t(l, io, STEP_MOE_EXPERT + 4 * (unsigned)e + j), ne * row[j], store);
	}
	if (d->shared_ffn > 0) {
		size_t BT = io->net->tfm.B * io->net->tfm.T, S = d->shared_ffn;
		const size_t n[4] = {BT * 2 * S, BT * S, BT * d->d, BT};
		float *t[4];
		moe_shared_view(t, mv, l, io);
		for (unsigned j = 0; j < 4; j++)
			moe16(t[j], moe_t(l, io, STEP_MOE_SGU + j), n[j], store);
	}
}

/* the attention half's modules (tfm_moe_attn_modules): the leaf's first
 * is the router, module moe_attn */
static size_t moe_attn(const struct zs_layer_io *io) { return tfm_moe_attn_modules(&io->net->tfm.dims); }

/* The router on ln2's output: the choices, weights and counts. */
static void moe_router(const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct tfm_dims *d = &n->dims;
	size_t BT = n->B * n->T, E = d->experts;
	size_t *counts = moe_t(l, io, STEP_MOE_COUNTS);
	struct moe_view mv;
	size_t A = tfm_moe_attn_modules(d);
	moe_view_of(&mv, l, io);
	memset(counts, 0, E * sizeof *counts);
	moe_router_forward(moe_t(l, io, STEP_MOE_PROBS), mv.v.t[STEP_ACT_LN2], moe_param(l, io, A), BT, d->d, E);
	moe_topk(moe_t(l, io, STEP_MOE_IDX), mv.w, counts, moe_t(l, io, STEP_MOE_PROBS), BT, E, d->top_k, !d->topk_raw);
	if (n->mixed)
		moe16(mv.w, moe_t(l, io, STEP_MOE_W), BT * d->top_k, 1);
	moe_dispatch(moe_t(l, io, STEP_MOE_START), moe_t(l, io, STEP_MOE_TOK), moe_t(l, io, STEP_MOE_SLOT),
	             moe_t(l, io, STEP_MOE_IDX), BT, E, d->top_k);
}

static void moe_route(const struct zs_layer *l, const struct zs_layer_io *io)
{
	for (size_t s = 0; s < moe_attn(io); s++)
		block_fwd(l, io, s);
	moe_router(l, io);
}

/* The experts on their tokens, out (BT, d) = Σ their weighted outputs
 * (in mixed their tensors then rounded into the 16-bit ones). */
static void moe_experts(float *out, const struct moe_view *mv, const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct tfm_dims *d = &n->dims;
	size_t C = d->d, F = d->ffn, k = d->top_k, x0 = tfm_moe_attn_modules(d) + 1; /* expert 0's first module */
	const size_t *start = moe_t(l, io, STEP_MOE_START), *tok = moe_t(l, io, STEP_MOE_TOK);
	const size_t *slot = moe_t(l, io, STEP_MOE_SLOT);
	memset(out, 0, n->B * n->T * C * sizeof *out);
	for (size_t e = 0; e < d->experts; e++) {
		size_t at = start[e], ne = start[e + 1] - at;
		float *t[4];
		if (ne == 0)
			continue;
		moe_expert_view(t, mv, l, io, e, at, ne);
		moe_expert_forward(out, t[0], t[1], t[2], t[3], mv->v.t[STEP_ACT_LN2],
		                   moe_param(l, io, x0 + 3 * e + tfm_moe_slot(d, 0)),
		                   moe_param(l, io, x0 + 3 * e + tfm_moe_slot(d, 1)),
		                   moe_param(l, io, x0 + 3 * e + tfm_moe_slot(d, 2)), mv->w, tok + at, slot + at, ne, k, C, F);
	}
	if (d->shared_ffn > 0) {
		size_t s0 = x0 + 3 * d->experts;
		float *t[4];
		moe_shared_view(t, mv, l, io);
		moe_shared_forward(out, t[0], t[1], t[2], t[3], mv->v.t[STEP_ACT_LN2], moe_param(l, io, s0),
		                   moe_param(l, io, s0 + 2), moe_param(l, io, s0 + 1), moe_param(l, io, s0 + 3),
		                   n->B * n->T, C, d->shared_ffn);
	}
	if (n->mixed)
		moe_experts16(mv, l, io, 1);
}

static void moe_fwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	struct moe_view mv;
	moe_view_of(&mv, l, io);
	float *out = mv.v.t[STEP_ACT_RES3];
	const float *res2 = mv.v.t[STEP_ACT_RES2];
	moe_experts(out, &mv, l, io);
	for (size_t i = 0; i < n->B * n->T * n->dims.d; i++)
		out[i] += res2[i];
	sync16(&mv.v, l, io, 0, STEP_NBLOCK_ACTS - 1, 0, SKIP_NONE);
}

static void moe_leaf_fwd(const struct zs_layer *l, const struct zs_layer_io *io, size_t s)
{
	(void)s;
	moe_fwd(l, io);
}

/* res3 = res2 + Σ experts: dres is res2's residual part; d ln2 goes in
 * dx, which ln2's backward (module 3) reads and adds into dres. Under
 * selective recomputation the attention's scores are rebuilt first, as a
 * dense block's (the router's and experts' tensors are kept); under full
 * the driver has run the route again (the attention half, the router)
 * and made the experts' tensors, which the experts fill again here (their
 * sum, the block's output, which is kept, goes to scratch and is not
 * read). */
static void moe_bwd_leaf(const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct tfm_dims *d = &n->dims;
	size_t BT = n->B * n->T, C = d->d, F = d->ffn, k = d->top_k, E = d->experts;
	const size_t *start = moe_t(l, io, STEP_MOE_START), *tok = moe_t(l, io, STEP_MOE_TOK);
	const size_t *slot = moe_t(l, io, STEP_MOE_SLOT);
	const struct zs_module *last = &l->module[l->nmodules - 1];
	size_t A = tfm_moe_attn_modules(d), g0 = l->module[A].first, ng = last->first + last->n - g0;
	struct moe_view mv;
	float *ms[STEP_MOE_NSCRATCH];
	struct tfm_scratch sc;
	moe_view_of(&mv, l, io);
	if (n->recompute == ZS_RECOMPUTE_FULL) {
		moe_experts(io->t[n->moe_scratch[STEP_MOE_DXR]], &mv, l, io);
		sync16(&mv.v, l, io, 0, STEP_NBLOCK_ACTS - 1, 0, SKIP_NONE);
	}
	if (n->mixed) {
		sync16(&mv.v, l, io, 0, STEP_NBLOCK_ACTS - 1, 1, SKIP_RECOMPUTED);
		moe16(mv.w, moe_t(l, io, STEP_MOE_W), BT * k, 0);
		moe_experts16(&mv, l, io, 0);
	}
	if (n->recompute == ZS_RECOMPUTE_SELECTIVE) {
		struct tfm_block_acts a;
		block_acts(&a, &mv.v, n->mixed);
		tfm_attention_recompute(&a, d, n->B, n->T);
	}
	const float *x = mv.v.t[STEP_ACT_LN2];
	scratch_of(&sc, io);
	for (unsigned i = 0; i < (d->shared_ffn > 0 ? STEP_MOE_NSCRATCH : STEP_MOE_DSYE); i++)
		ms[i] = io->t[n->moe_scratch[i]];
	for (size_t i = g0; i < g0 + ng; i++) /* its grads hold the last step's */
		grad32(l, io, i, 1);
	memset(sc.dx, 0, BT * C * sizeof *sc.dx);
	for (size_t e = 0; e < E; e++) {
		size_t at = start[e], ne = start[e + 1] - at, w = l->module[A + 1 + 3 * e].first;
		size_t w1 = w + tfm_moe_slot(d, 0), w2 = w + tfm_moe_slot(d, 1), w3 = w + tfm_moe_slot(d, 2);
		float *t[4];
		if (ne == 0)
			continue;
		moe_expert_view(t, &mv, l, io, e, at, ne);
		moe_expert_backward(sc.dx, grad32(l, io, w1, 0), grad32(l, io, w2, 0), grad32(l, io, w3, 0),
		                    ms[STEP_MOE_DW], ms[STEP_MOE_DYE], ms[STEP_MOE_DACT], ms[STEP_MOE_DGU], ms[STEP_MOE_DXE],
		                    sc.dres, t[0], t[1], t[2], t[3], param32(l, io, w1, 1), param32(l, io, w2, 1),
		                    param32(l, io, w3, 1), mv.w, tok + at, slot + at, ne, k, C, F);
	}
	if (d->shared_ffn > 0) { /* its gate's scratch the router's, before the router */
		size_t w = l->module[A + 1 + 3 * E].first;
		float *t[4];
		moe_shared_view(t, &mv, l, io);
		moe_shared_backward(sc.dx, grad32(l, io, w, 0), grad32(l, io, w + 2, 0), grad32(l, io, w + 1, 0),
		                    grad32(l, io, w + 3, 0), ms[STEP_MOE_DSYE], ms[STEP_MOE_DSACT], ms[STEP_MOE_DSGU],
		                    ms[STEP_MOE_DSXE], ms[STEP_MOE_DLOGITS], ms[STEP_MOE_DXR], sc.dres, x, t[0], t[1], t[2],
		                    t[3], param32(l, io, w, 1), param32(l, io, w + 2, 1), param32(l, io, w + 1, 1),
		                    param32(l, io, w + 3, 1), BT, C, d->shared_ffn);
	}
	moe_router_backward(sc.dx, grad32(l, io, g0, 0), ms[STEP_MOE_DLOGITS], ms[STEP_MOE_DXR], ms[STEP_MOE_DW],
	                    moe_t(l, io, STEP_MOE_IDX), mv.w, moe_t(l, io, STEP_MOE_PROBS), x, moe_param(l, io, A),
	                    BT, C, E, k, !d->topk_raw);
	grads_done(l, io, g0, ng);
}

static void moe_bwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	moe_bwd_leaf(l, io);
	for (size_t s = moe_attn(io); s-- > 0;)
		block_bwd(l, io, s);
}

/* Module by module (DeepSpeed's ZeRO-3): the attention half's modules
 * as a llama block's, then the sparse-MoE block as one z3 leaf
 * (zs_layer.leaf, module moe_attn): its route (moe_router) runs
 * first, then the experts; under full recompute the leaf reruns its
 * router alone (the experts run again in its backward, as moe_bwd). */
static void moe_fwd_module(const struct zs_layer *l, const struct zs_layer_io *io, size_t s)
{
	(s < moe_attn(io) ? block_fwd : moe_leaf_fwd)(l, io, s);
}

static void moe_recompute_module(const struct zs_layer *l, const struct zs_layer_io *io, size_t s)
{
	if (s < moe_attn(io))
		block_fwd(l, io, s);
}

static void moe_bwd_module(const struct zs_layer *l, const struct zs_layer_io *io, size_t s)
{
	if (s < moe_attn(io))
		block_bwd(l, io, s);
	else
		moe_bwd_leaf(l, io);
}

/* ---- the final norm, the head and the loss -------------------------------- */

static void head_fwd(const struct zs_layer *l, const struct zs_layer_io *io, size_t s)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct zs_module *md = &l->module[s];
	struct tfm_final_params p;
	struct tfm_head_acts a;
	float *w[TFM_SLOTS];
	struct view v;
	view_of(&v, l, io, STEP_ACT_LNF, STEP_ACT_LOGITS, 1);
	if (s == 0)
		sync16(&v, l, io, STEP_ACT_LNF, STEP_ACT_LOGITS, 1, SKIP_ALL_BUT_INPUT);
	slots32(w, l, io, 0, md->first, md->n);
	tfm_final_view(&p, w);
	head_acts(&a, &v, n->mixed);
	/* The loss waits for the driver, at the start of backward (head_loss). */
	tfm_head_forward_module(&a, &p, v.x, &n->dims, n->B, n->T, s);
	if (s + 1 == l->nmodules)
		sync16(&v, l, io, STEP_ACT_LNF, STEP_ACT_LOGITS, 0, SKIP_NONE);
}

static float head_loss(const struct zs_net *m, float *const *t)
{
	const struct zs_layer *h = &m->layer[m->nlayers - 1];
	const struct zs_net_tfm *n = &m->tfm;
	return tfm_loss(t[h->act[STEP_ACT_LOGITS]], ids(t, n->targets), &n->dims, n->B * n->T);
}

/* Tied, the head's own grads are none, and its norm's wait in dnorm (fp32)
 * for the embedding's backward, unless the head writes them (DeepSpeed's
 * ZeRO-3 hands it the final norm's grads). A frozen head's weight has no
 * grads (NULL): the head's matmul makes dx alone and reads no lnf, which
 * its forward freed (step_buffers_freeze; view_of and sync16 leave it
 * NULL). */
static void head_bwd(const struct zs_layer *l, const struct zs_layer_io *io, size_t s)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct tfm_dims *d = &n->dims;
	const struct zs_module *md = &l->module[s];
	struct tfm_final_params p, g = {NULL, NULL, NULL};
	struct tfm_head_acts a;
	struct tfm_scratch sc;
	float *w[TFM_SLOTS], *gr[TFM_SLOTS];
	struct view v;
	view_of(&v, l, io, STEP_ACT_LNF, STEP_ACT_LOGITS, 1);
	if (s + 1 == l->nmodules)
		sync16(&v, l, io, STEP_ACT_LNF, STEP_ACT_LOGITS, 1, SKIP_NONE);
	slots32(w, l, io, 0, md->first, md->n);
	tfm_final_view(&p, w);
	head_acts(&a, &v, n->mixed);
	scratch_of(&sc, io);
	slots32(gr, l, io, 1, md->first, md->n);
	if (!d->tied || gr[2 * s] != NULL) {
		tfm_final_view(&g, gr);
		if (d->tied)
			g.head = NULL;
	} else if (s == 0) { /* module 0, the final norm: its weight (and bias) */
		float *dn = io->t[n->dnorm];
		memset(dn, 0, md->n * d->d * sizeof *dn);
		g = (struct tfm_final_params){dn, md->n > 1 ? dn + d->d : NULL, NULL};
	}
	tfm_head_backward_module(&g, &sc, &a, &p, v.x, d, n->B, n->T, s);
	grads_done(l, io, md->first, md->n);
}

/* Forward runs the modules in order, backward in reverse. */
static void all_fwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	for (size_t s = 0; s < l->nmodules; s++)
		l->kind->forward_module(l, io, s);
}

static void all_bwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	for (size_t s = 0; l->kind->recompute_module != NULL && io->net->tfm.recompute == ZS_RECOMPUTE_FULL &&
	                   s < l->nmodules; s++)
		l->kind->recompute_module(l, io, s);
	for (size_t s = l->nmodules; s-- > 0;)
		l->kind->backward_module(l, io, s);
}

static const struct zs_layer_kind embed_kind = {"embedding", all_fwd, all_bwd, embed_fwd, embed_bwd, NULL, NULL, NULL};
/* whole (all_fwd, all_bwd over block_fwd and block_bwd), or module by
 * module under DeepSpeed's ZeRO-3 (an adapter a module of its own) */
static void block_all_fwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	for (size_t s = 0; s < l->nmodules; s++)
		block_fwd(l, io, s);
}

static void block_all_bwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	for (size_t s = 0; io->net->tfm.recompute == ZS_RECOMPUTE_FULL && s < l->nmodules; s++)
		block_recompute(l, io, s);
	for (size_t s = l->nmodules; s-- > 0;)
		block_bwd(l, io, s);
}

static const struct zs_layer_kind block_kind = {"block", block_all_fwd, block_all_bwd, block_fwd_hooked,
                                                block_bwd_hooked, NULL, block_recompute_hooked, NULL};
static const struct zs_layer_kind head_kind = {"head", all_fwd, all_bwd, head_fwd, head_bwd, NULL, NULL, NULL};
/* whole under every scheme but DeepSpeed's ZeRO-3, which hooks its
 * modules (its sparse-MoE block one z3 leaf) */
static const struct zs_layer_kind moe_kind = {"moe block", moe_fwd, moe_bwd, moe_fwd_module, moe_bwd_module,
                                              moe_route, moe_recompute_module, moe_router};

/* ---- the list --------------------------------------------------------------- */

static void no_acts(struct zs_layer *ly)
{
	for (int i = 0; i < STEP_NACTS; i++)
		ly->act[i] = ZS_NO_TENSOR;
}

/* Layer l's parameter tensors and modules, from the step description
 * (util/step.h). A module's first tensor is counted from the start of the
 * layer that holds it: a tied head's are the embedding's. */
static void layer_params(struct zs_layer *ly, const struct step_params *p, size_t l)
{
	const struct step_layer *pl = &p->layer[l];
	ly->param_off = pl->offset;
	ly->nparams = pl->numel;
	ly->matmul_module = pl->matmul_module;
	ly->ptensor = zs_calloc(pl->n, sizeof *ly->ptensor);
	for (size_t i = 0; i < pl->n; i++)
		ly->ptensor[ly->nptensors++] = p->tensor[pl->first + i].numel;
	size_t nmod = 0;
	for (size_t i = 0; i < p->nmodules; i++)
		nmod += p->module[i].layer == l;
	ly->module = nmod ? zs_calloc(nmod, sizeof *ly->module) : NULL;
	for (size_t i = 0; i < p->nmodules; i++) {
		const struct step_module *md = &p->module[i];
		if (md->layer != l)
			continue;
		size_t home = 0, k = ly->nmodules++;
		while (p->layer[home].first + p->layer[home].n <= md->first)
			home++;
		struct zs_module *z = &ly->module[k];
		*z = (struct zs_module){.first = md->first - p->layer[home].first, .n = md->n, .no_grad_in = md->no_grad_in,
		                        .xa = ZS_NO_TENSOR, .drop = ZS_NO_TENSOR, .noise = ZS_NO_TENSOR};
		for (size_t j = 0; j < k && !md->adapter; j++)
			z->role += !ly->module[j].adapter;
		if (md->adapter == NULL)
			continue;
		/* an adapter: its base, two modules before lora_A, one before lora_B per adapter of it */
		z->adapter = strncmp(md->adapter, "lora_A", 6) == 0 ? 1 : 2;
		/* the pair: lora_A's tensor, then lora_B's (a lora_B module's own
		 * is the second: the last of the list where its layer ends it) */
		const struct step_tensor *A = &p->tensor[md->first - (size_t)(z->adapter - 1)],
		                         *w = &p->tensor[p->module[md->base].first];
		z->base = k - (i - md->base);
		z->r = A[0].shape[0], z->in = A[0].shape[1], z->out = A[1].shape[0];
		for (int j = 0; j < md->part; j++)
			z->row0 += w->part_rows[j];
	}
	size_t leaf = ds_coord_leaf(p, l), m0 = 0;
	while (m0 < p->nmodules && p->module[m0].layer != l)
		m0++;
	ly->leaf = leaf < p->nmodules ? leaf - m0 : ly->nmodules;
}

/* Module y of the description p as its layer of m holds it. */
static struct zs_module *lora_module(struct zs_net *m, const struct step_params *p, size_t y)
{
	size_t l = p->module[y].layer, m0 = 0;
	while (p->module[m0].layer != l)
		m0++;
	return &m->layer[l].module[y - m0];
}

/* The quantized tensors of p (util/nf4.h's nf4_quantized), as bitsandbytes
 * holds them: [out, in] (a Conv1D's shape is (in, out)), a fused
 * tensor's parts each a layer of its own. */
static void q4_tensors(struct zs_net_tfm *n, const struct step_params *p)
{
	size_t off = 0;
	n->q4 = zs_calloc(p->ntensors ? p->ntensors : 1, sizeof *n->q4);
	for (size_t i = 0; i < p->ntensors; off += p->tensor[i++].numel) {
		const struct step_tensor *t = &p->tensor[i];
		if (!nf4_quantized(p, i))
			continue;
		int conv = n->dims.family == TFM_GPT2;
		struct zs_q4_tensor *q = &n->q4[n->nq4++];
		*q = (struct zs_q4_tensor){.off = off, .part0 = n->nq4parts, .numel = t->numel,
		                           .rows = t->shape[conv ? 1 : 0], .cols = t->shape[conv ? 0 : 1],
		                           .nparts = t->nparts};
		memcpy(q->part_rows, t->part_rows, sizeof q->part_rows);
		n->nq4parts += t->nparts ? t->nparts : 1;
	}
}

void net_tfm_init(struct zs_net *m, const struct zs_config *c)
{
	const struct zs_tfm_run *tr = c->tfm;
	const struct tfm_dims *d = &tr->dims;
	size_t batch = c->batch, L = d->layers, B = batch, T = tr->seq, head = L + 1;
	uint64_t seed = c->seed;
	enum zs_precision precision = c->precision;
	memset(m, 0, sizeof *m);
	struct step_params sp;
	struct zs_model shape;
	tfm_dims_shape(&shape, d); /* the shape the kernels run */
	if (zs_lora_step_params(&sp, &shape, &tr->hf, c, NULL) != 0)
		abort(); /* the CLI refused it (zs_lora_paper_check) */
	m->kind = ZS_NET_TFM;
	m->nparams = sp.numel;
	m->batch = batch;
	m->nlayers = L + 2;
	m->layer = zs_calloc(m->nlayers, sizeof *m->layer);
	m->loss = head_loss;
	struct zs_net_tfm *n = &m->tfm;
	n->dims = *d;
	n->B = B;
	n->T = T;
	n->recompute = tr->recompute;
	struct tfm_task task;
	tfm_task_init(&task, d->vocab, seed);
	n->perm = task.perm;
	n->dnorm = n->w32 = n->g32 = n->act32 = ZS_NO_TENSOR;
	n->mixed = precision == ZS_MIXED;

	/* The layers: their kinds, parameters and modules. */
	for (size_t l = 0; l < m->nlayers; l++) {
		struct zs_layer *ly = &m->layer[l];
		no_acts(ly);
		ly->kind = l == 0 ? &embed_kind : l == head ? &head_kind : d->experts > 0 ? &moe_kind : &block_kind;
		if (ly->kind == &moe_kind) {
			ly->nmoe = STEP_MOE_EXPERT + 4 * d->experts;
			ly->moe = zs_calloc(ly->nmoe, sizeof *ly->moe);
		}
		ly->block = l == 0 || l == head ? -1 : (int)(l - 1);
		ly->nograd = step_layer_no_backward(&sp, tr->recompute, l);
		layer_params(ly, &sp, l);
	}

	/* The batch, the backward's scratch, the conversion buffers and what
	 * each layer saves, as the step description lists them. */
	struct step_buffers sb;
	step_buffers_build(&sb, &shape, &sp, B, T, n->mixed, tr->recompute);
	step_buffers_freeze(&sb, &sp, tr->recompute);
	step_buffers_lora(&sb, &sp, B, T, n->mixed, tr->recompute);
	n->nf4w = n->nf4a = ZS_NO_TENSOR;
	if (c->quant_nf4 && zs_lora_engine(c)) { /* QLoRA's 4-bit base */
		q4_tensors(n, &sp);
		n->double_quant = c->double_quant;
		nf4_step_buffers(&sb, &sp, n->mixed, c->double_quant);
	}
	n->lora_scaling = c->lora_r ? (float)(c->lora_alpha / c->lora_r) : 0.0f; /* LoraLayer.update_layer, line 277 */
	n->lora_dropout = sp.lora_dropout;
	for (int i = 0; i < STEP_NSCRATCH; i++)
		n->scratch[i] = ZS_NO_TENSOR;
	n->lora_scratch[STEP_LORA_DT] = n->lora_scratch[STEP_LORA_DX] = ZS_NO_TENSOR;
	for (size_t k = 0; k < sb.n; k++) {
		const struct step_buffer *x = &sb.buf[k];
		unsigned i = net_add_buffer(m, x);
		struct zs_tensor *ts = &m->tensor[i];
		ts->row = (size_t)step_moe_row(&shape, x); /* routed: sized by the step's routing */
		ts->expert = step_moe_expert(x);
		if (ts->expert >= 0)
			ts->counts = m->layer[x->layer].moe[STEP_MOE_COUNTS];
		switch (x->role) {
		case STEP_TOKENS: n->tokens = i; break;
		case STEP_TARGETS: n->targets = i; break;
		case STEP_SCRATCH: n->scratch[x->index] = i; break;
		case STEP_DNORM: n->dnorm = i; break;
		case STEP_W32: n->w32 = i; break;
		case STEP_ACT32: n->act32 = i; break;
		case STEP_G32: n->g32 = i; break;
		case STEP_SAVED: m->layer[x->layer].act[x->index] = i; break;
		case STEP_MOE: m->layer[x->layer].moe[x->index] = i; break;
		case STEP_MOE_SCRATCH: n->moe_scratch[x->index] = i; break;
		case STEP_LORA: { /* x·Aᵀ, and with dropout its output and noise */
			struct zs_module *z = lora_module(m, &sp, x->index);
			if (strcmp(x->name, "lora_xa") == 0)
				z->xa = i, z->draw = n->lora_n++; /* the list's order: the adapters' forward order */
			else if (strcmp(x->name, "lora_drop") == 0)
				z->drop = i;
			else if (strcmp(x->name, "lora_noise") == 0)
				z->noise = i;
			else
				abort();
			break;
		}
		case STEP_LORA_SCRATCH: n->lora_scratch[x->index] = i; break;
		case STEP_NF4: *(x->index == NF4_W ? &n->nf4w : &n->nf4a) = i; break;
		}
	}
	free(sb.buf);
	m->input = n->tokens;
	m->target = n->targets;

	/* The data flow: the embedding reads the tokens; each block the
	 * previous layer's output; the head the last block's, and its
	 * logits are where backward starts. */
	struct zs_layer *e = &m->layer[0], *h = &m->layer[head];
	e->in = n->tokens;
	e->out = e->act[STEP_ACT_X0];
	for (size_t l = 1; l <= L; l++) {
		m->layer[l].in = m->layer[l - 1].out;
		m->layer[l].out = m->layer[l].act[STEP_ACT_RES3];
	}
	h->in = m->layer[L].out;
	h->tied = d->tied;
	if (d->tied)
		h->param_off = 0; /* it reads the first unit's */
	h->out = h->act[STEP_ACT_LOGITS];
	h->dy = h->out;
	step_params_free(&sp);
}

void net_tfm_batch(const struct zs_net *m, float *const *t, uint64_t seed, unsigned step, unsigned rank)
{
	const struct zs_net_tfm *n = &m->tfm;
	struct tfm_task task = {n->dims.vocab, n->perm};
	tfm_task_batch(ids(t, n->tokens), ids(t, n->targets), &task, seed, step, rank, n->B, n->T);
}
