/*
 * tfm_net — the transformer of tfm.h as the step driver's layer list
 * (model.h), in fp32 or mixed precision. Layer 0 is the embedding,
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
 * its backward); full makes every block tensor but res3 one (rebuilt by
 * tfm_block_recompute from the block's input). The bits do not change.
 *
 * A tied head (gpt2) reads the embedding's unit and computes no param
 * grads: the head's contribution to wte (d logits^T · lnf) and the final
 * norm's grads are added in the embedding's backward, before its own, in
 * the order tfm_model_step adds them, so every scheme and unit mode gets
 * the same bits as the whole model in one buffer.
 *
 * Every layer's backward zeroes the grads it owns first: a layer's grads
 * are a fresh buffer under zero3 and hold the last step's elsewhere.
 *
 * Mixed precision (PyTorch's autocast over fp16 working params): the
 * params and grads the schemes hand a layer are fp16, and the tensors of
 * tfm_act_is16 are 16-bit. The kernels are tfm.h's fp32 ones, run on
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
#include "engine/model.h"
#include "engine/tfm.h"
#include "engine/tfm_kernels.h"
#include "util/util.h"

static float *mut(const void *p) { return (float *)(size_t)p; }

/* Tensor i holds int32 token ids (the driver's tensors are 4-byte
 * elements of either type). */
static int *ids(float *const *t, unsigned i)
{
	void *p = t[i];
	return p;
}

static float *act(const struct zs_layer *l, const struct zs_layer_io *io, enum tfm_act a)
{
	return l->act[a] == ZS_NO_TENSOR ? NULL : io->t[l->act[a]];
}

static void scratch_of(struct tfm_scratch *s, const struct zs_layer_io *io)
{
	float **slot[6] = {&s->dres, &s->dx, &s->dqkv, &s->dh, &s->dup, &s->datt};
	for (int i = 0; i < 6; i++)
		*slot[i] = io->t[io->net->tfm.scratch[i]];
}

/* ---- mixed precision: fp32 kernels on conversion buffers ------------------ */

/* The first n params of the layer as fp32: themselves, or (mixed) widened
 * from fp16 into w32. */
static float *params32(const struct zs_layer_io *io, size_t n)
{
	const struct zs_net_tfm *tn = &io->net->tfm;
	if (!tn->mixed)
		return mut(io->w);
	float *w = io->t[tn->w32];
	zs_half_to_float_n(w, io->w, n);
	return w;
}

/* The layer's grads as fp32, zeroed: themselves, or (mixed) g32, which
 * grads_done rounds into the fp16 grads. */
static float *grads32(const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *tn = &io->net->tfm;
	float *g = tn->mixed ? io->t[tn->g32] : io->g;
	memset(g, 0, l->nparams * sizeof *g);
	return g;
}

static void grads_done(const struct zs_layer *l, const struct zs_layer_io *io)
{
	if (io->net->tfm.mixed)
		zs_float_to_half_n(io->g, io->t[io->net->tfm.g32], l->nparams);
}

/* Where the kernels see the layer's tensors: its input x (the previous
 * layer's output; with_x) and acts a of enum tfm_act a0..a1. In fp32 the
 * tensors themselves; in mixed the 16-bit ones' fp32 copies, one after
 * another in act32 (x first), the others themselves. */
struct view {
	float *x;
	float *t[TFM_NACTS];
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
		v->t[a] = act(l, io, (enum tfm_act)a);
		if (p != NULL && v->t[a] != NULL && tfm_act_is16((enum tfm_act)a)) {
			v->t[a] = p;
			p += m->tensor[l->act[a]].elements;
		}
	}
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
		if (i == ZS_NO_TENSOR || !tfm_act_is16((enum tfm_act)a) || (skip == SKIP_RECOMPUTED && m->tensor[i].recomputed))
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
	for (int i = 0; i < TFM_NBLOCK_ACTS; i++)
		*tfm_block_act_slot(a, (enum tfm_act)i) = v->t[i];
	a->f16 = f16;
}

static void head_acts(struct tfm_head_acts *a, const struct view *v, int f16)
{
	for (int i = TFM_ACT_LNF; i <= TFM_ACT_LOGITS; i++)
		*tfm_head_act_slot(a, (enum tfm_act)i) = v->t[i];
	a->f16 = f16;
}

/* ---- the embedding ------------------------------------------------------ */

static void embed_fwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	struct tfm_embed_params p;
	struct view v;
	view_of(&v, l, io, TFM_ACT_X0, TFM_ACT_X0, 0);
	tfm_embed_view(&p, &n->dims, params32(io, l->nparams));
	tfm_embed_forward(v.t[TFM_ACT_X0], &p, ids(io->t, n->tokens), &n->dims, n->B, n->T);
	sync16(&v, l, io, TFM_ACT_X0, TFM_ACT_X0, 0, SKIP_NONE);
}

static void embed_bwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct tfm_dims *d = &n->dims;
	float *g = grads32(l, io);
	struct tfm_embed_params eg;
	tfm_embed_view(&eg, d, g);
	if (d->tied) { /* the tied head's grads first, as tfm_model_step adds them */
		const struct zs_layer *h = &io->net->layer[io->net->nlayers - 1];
		struct tfm_final_params fg;
		struct view v;
		view_of(&v, h, io, TFM_ACT_LNF, TFM_ACT_LOGITS, 0); /* its input is freed */
		sync16(&v, h, io, TFM_ACT_LNF, TFM_ACT_LOGITS, 1, SKIP_NONE);
		tfm_head_view(&fg, d, g);
		matmul_backward(NULL, fg.head, NULL, v.t[TFM_ACT_LOGITS], v.t[TFM_ACT_LNF], NULL, n->B * n->T, d->d,
		                d->vocab);
		memcpy(fg.norm_w, io->t[n->dnorm], (d->family == TFM_GPT2 ? 2 : 1) * d->d * sizeof *g);
	}
	tfm_embed_backward(&eg, io->t[n->scratch[0]], ids(io->t, n->tokens), d, n->B, n->T);
	grads_done(l, io);
}

/* ---- a block -------------------------------------------------------------- */

static void block_fwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	struct tfm_block_params p;
	struct tfm_block_acts a;
	struct view v;
	view_of(&v, l, io, 0, TFM_NBLOCK_ACTS - 1, 1);
	sync16(&v, l, io, 0, TFM_NBLOCK_ACTS - 1, 1, SKIP_ALL_BUT_INPUT);
	tfm_block_view_at(&p, &n->dims, params32(io, l->nparams));
	block_acts(&a, &v, n->mixed);
	tfm_block_forward(&a, &p, v.x, &n->dims, n->B, n->T);
	sync16(&v, l, io, 0, TFM_NBLOCK_ACTS - 1, 0, SKIP_NONE);
}

static void block_bwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct tfm_dims *d = &n->dims;
	struct tfm_block_params p, g;
	struct tfm_block_acts a;
	struct tfm_scratch s;
	struct view v;
	view_of(&v, l, io, 0, TFM_NBLOCK_ACTS - 1, 1);
	sync16(&v, l, io, 0, TFM_NBLOCK_ACTS - 1, 1, SKIP_RECOMPUTED);
	tfm_block_view_at(&p, d, params32(io, l->nparams));
	tfm_block_view_at(&g, d, grads32(l, io));
	block_acts(&a, &v, n->mixed);
	scratch_of(&s, io);
	/* Rebuild what the forward did not keep (recomputed tensors; in mixed
	 * also into their 16-bit tensors, which then hold what they say). */
	if (n->recompute == TFM_RECOMPUTE_FULL) {
		tfm_block_recompute(&a, &p, v.x, d, n->B, n->T);
		sync16(&v, l, io, 0, TFM_ACT_RES3 - 1, 0, SKIP_NONE);
	} else if (n->recompute == TFM_RECOMPUTE_SELECTIVE) {
		tfm_attention_recompute(&a, d, n->B, n->T);
	}
	tfm_block_backward(&g, &s, &a, &p, v.x, d, n->B, n->T);
	grads_done(l, io);
}

/* ---- the final norm, the head and the loss -------------------------------- */

/* The params the head reads: its own, or (tied) the embedding's unit. */
static size_t head_reads(const struct zs_layer *l, const struct zs_layer_io *io)
{
	return l->tied ? io->net->layer[0].nparams : l->nparams;
}

static void head_fwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	struct tfm_final_params p;
	struct tfm_head_acts a;
	struct view v;
	view_of(&v, l, io, TFM_ACT_LNF, TFM_ACT_LOGITS, 1);
	sync16(&v, l, io, TFM_ACT_LNF, TFM_ACT_LOGITS, 1, SKIP_ALL_BUT_INPUT);
	tfm_head_view(&p, &n->dims, params32(io, head_reads(l, io)));
	head_acts(&a, &v, n->mixed);
	/* The loss waits for the driver, at the start of backward (head_loss). */
	tfm_head_logits(&a, &p, v.x, &n->dims, n->B, n->T);
	sync16(&v, l, io, TFM_ACT_LNF, TFM_ACT_LOGITS, 0, SKIP_NONE);
}

static float head_loss(const struct zs_net *m, float *const *t)
{
	const struct zs_layer *h = &m->layer[m->nlayers - 1];
	const struct zs_net_tfm *n = &m->tfm;
	return crossentropy_forward_backward(t[h->act[TFM_ACT_LOGITS]], ids(t, n->targets), n->B * n->T,
	                                     n->dims.vocab);
}

static void head_bwd(const struct zs_layer *l, const struct zs_layer_io *io)
{
	const struct zs_net_tfm *n = &io->net->tfm;
	const struct tfm_dims *d = &n->dims;
	struct tfm_final_params p, g;
	struct tfm_head_acts a;
	struct tfm_scratch s;
	struct view v;
	view_of(&v, l, io, TFM_ACT_LNF, TFM_ACT_LOGITS, 1);
	sync16(&v, l, io, TFM_ACT_LNF, TFM_ACT_LOGITS, 1, SKIP_NONE);
	tfm_head_view(&p, d, params32(io, head_reads(l, io)));
	head_acts(&a, &v, n->mixed);
	scratch_of(&s, io);
	if (!d->tied) {
		tfm_head_view(&g, d, grads32(l, io));
		tfm_head_backward(&g, &s, &a, &p, v.x, d, n->B, n->T);
		grads_done(l, io);
		return;
	}
	/* Tied: the input gradient only; the norm's grads wait in dnorm (fp32). */
	float *dn = io->t[n->dnorm];
	memset(dn, 0, (d->family == TFM_GPT2 ? 2 : 1) * d->d * sizeof *dn);
	g = (struct tfm_final_params){dn, d->family == TFM_GPT2 ? dn + d->d : NULL, NULL};
	size_t BT = n->B * n->T;
	matmul_backward(s.dx, NULL, NULL, a.logits, a.lnf, p.head, BT, d->d, d->vocab);
	memset(s.dres, 0, BT * d->d * sizeof *s.dres);
	if (d->family == TFM_GPT2)
		layernorm_backward(s.dres, g.norm_w, g.norm_b, s.dx, v.x, p.norm_w, a.lnf_mean, a.lnf_rstd, BT, d->d);
	else
		rmsnorm_backward(s.dres, g.norm_w, s.dx, v.x, p.norm_w, a.lnf_rstd, BT, d->d);
}

static const struct zs_layer_kind embed_kind = {"embedding", embed_fwd, embed_bwd};
static const struct zs_layer_kind block_kind = {"block", block_fwd, block_bwd};
static const struct zs_layer_kind head_kind = {"head", head_fwd, head_bwd};

/* ---- the list --------------------------------------------------------------- */

static unsigned add(struct zs_net *m, const char *name, int block, size_t elements, enum zs_cat cat,
                    enum zs_when alloc, size_t layer, size_t freed_after)
{
	if (elements == 0)
		return ZS_NO_TENSOR;
	m->tensor[m->ntensors] = (struct zs_tensor){.name = name, .block = block, .elements = elements, .esize = 4,
	                                            .cat = cat, .alloc = alloc, .layer = layer,
	                                            .freed_after = freed_after};
	return (unsigned)m->ntensors++;
}

/* Activation a of a layer: 16 bits in mixed precision where tfm_act_is16. */
static unsigned add_act(struct zs_net *m, enum tfm_act a, int block, size_t layer, size_t freed_after)
{
	const struct zs_net_tfm *n = &m->tfm;
	unsigned i = add(m, tfm_act_name(a), block, tfm_act_elems(&n->dims, n->B, n->T, a), ZS_CAT_ACTIVATIONS,
	                 ZS_AT_LAYER, layer, freed_after);
	if (i != ZS_NO_TENSOR && n->mixed && tfm_act_is16(a))
		m->tensor[i].esize = sizeof(zs_half);
	return i;
}

static void no_acts(struct zs_layer *ly)
{
	for (int i = 0; i < TFM_NACTS; i++)
		ly->act[i] = ZS_NO_TENSOR;
}

static void add_ptensors(struct zs_layer *ly, const size_t *sz, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (sz[i] != 0)
			ly->ptensor[ly->nptensors++] = sz[i];
}

void model_tfm_init(struct zs_net *m, const struct zs_tfm_run *tr, size_t batch, uint64_t seed,
                    enum zs_precision precision)
{
	const struct tfm_dims *d = &tr->dims;
	size_t L = d->layers, B = batch, T = tr->seq, BT = B * T, head = L + 1;
	size_t norm = (d->family == TFM_GPT2 ? 2 : 1) * d->d;
	memset(m, 0, sizeof *m);
	m->kind = ZS_NET_TFM;
	m->nparams = tfm_nparams(d);
	m->batch = batch;
	m->nlayers = L + 2;
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

	/* The batch; the backward's scratch, allocated at its start. */
	n->tokens = add(m, "tokens", -1, BT, ZS_CAT_ACTIVATIONS, ZS_AT_FORWARD, 0, 0);
	n->targets = add(m, "targets", -1, BT, ZS_CAT_ACTIVATIONS, ZS_AT_FORWARD, 0, head);
	m->input = n->tokens;
	m->target = n->targets;
	size_t sc[6];
	static const char *const sc_names[6] = {"dres", "dx", "dqkv", "dh", "dup", "datt"};
	tfm_scratch_elems(d, B, T, sc);
	for (int i = 0; i < 6; i++)
		n->scratch[i] = add(m, sc_names[i], -1, sc[i], ZS_CAT_SCRATCH, ZS_AT_BACKWARD, 0, i == 0 ? 0 : 1);
	if (d->tied)
		n->dnorm = add(m, "dnorm", -1, norm, ZS_CAT_SCRATCH, ZS_AT_BACKWARD, 0, 0);
	/* Mixed: the conversion buffers, for the whole step: a layer's params
	 * (the largest layer's: the embedding, a block or the untied head),
	 * its grads (backward), a block's input and 16-bit tensors. */
	if (n->mixed) {
		size_t wmax = tfm_block_offset(d, 0), blk = tfm_block_params_count(d), fin = d->tied ? 0 : tfm_final_params(d);
		size_t a16 = BT * d->d; /* the block's input */
		wmax = blk > wmax ? blk : wmax;
		wmax = fin > wmax ? fin : wmax;
		for (int a = 0; a < TFM_NBLOCK_ACTS; a++)
			if (tfm_act_is16((enum tfm_act)a))
				a16 += tfm_act_elems(d, B, T, (enum tfm_act)a);
		n->w32 = add(m, "w32", -1, wmax, ZS_CAT_SCRATCH, ZS_AT_FORWARD, 0, 0);
		n->act32 = add(m, "act32", -1, a16, ZS_CAT_SCRATCH, ZS_AT_FORWARD, 0, 0);
		n->g32 = add(m, "g32", -1, wmax, ZS_CAT_SCRATCH, ZS_AT_BACKWARD, 0, 0);
	}

	/* Layer 0: the embedding (tied: with the final norm's params). */
	struct zs_layer *e = &m->layer[0];
	no_acts(e);
	e->kind = &embed_kind;
	e->block = -1;
	e->param_off = 0;
	e->nparams = tfm_block_offset(d, 0);
	size_t esz[4] = {d->vocab * d->d, d->family == TFM_GPT2 ? d->seq * d->d : 0, d->tied ? d->d : 0,
	                 d->tied && d->family == TFM_GPT2 ? d->d : 0};
	add_ptensors(e, esz, 4);
	e->out = e->act[TFM_ACT_X0] = add_act(m, TFM_ACT_X0, -1, 0, 1);
	e->in = n->tokens;

	/* Layers 1..L: the blocks. */
	size_t bsz[TFM_BLOCK_TENSORS];
	tfm_block_tensor_sizes(d, bsz);
	for (size_t b = 0; b < L; b++) {
		size_t l = 1 + b;
		struct zs_layer *ly = &m->layer[l];
		no_acts(ly);
		ly->kind = &block_kind;
		ly->block = (int)b;
		ly->param_off = tfm_block_offset(d, b);
		ly->nparams = tfm_block_params_count(d);
		add_ptensors(ly, bsz, TFM_BLOCK_TENSORS);
		ly->in = m->layer[l - 1].out;
		for (int a = 0; a < TFM_NBLOCK_ACTS; a++) {
			size_t freed = a == TFM_ACT_RES3 ? l + 1 : l;
			unsigned i = add_act(m, (enum tfm_act)a, (int)b, l, freed);
			ly->act[a] = i;
			if (i != ZS_NO_TENSOR)
				m->tensor[i].recomputed = tr->recompute == TFM_RECOMPUTE_FULL ? a != TFM_ACT_RES3
				                          : tr->recompute == TFM_RECOMPUTE_SELECTIVE ? a == TFM_ACT_ATT : 0;
		}
		ly->out = ly->act[TFM_ACT_RES3];
	}

	/* Layer L+1: the final norm and the head (tied: the embedding's). */
	struct zs_layer *h = &m->layer[head];
	no_acts(h);
	h->kind = &head_kind;
	h->block = -1;
	h->in = m->layer[L].out;
	h->tied = d->tied;
	h->param_off = d->tied ? 0 : tfm_final_offset(d);
	h->nparams = d->tied ? 0 : tfm_final_params(d);
	if (!d->tied) {
		size_t hsz[3] = {d->d, d->family == TFM_GPT2 ? d->d : 0, d->vocab * d->d};
		add_ptensors(h, hsz, 3);
	}
	for (int a = TFM_ACT_LNF; a <= TFM_ACT_LOGITS; a++) {
		int kept = d->tied && (a == TFM_ACT_LNF || a == TFM_ACT_LOGITS); /* until the embedding's backward */
		h->act[a] = add_act(m, (enum tfm_act)a, -1, head, kept ? 0 : head);
	}
	h->out = h->act[TFM_ACT_LOGITS];
	h->dy = h->out;
}

void model_tfm_batch(const struct zs_net *m, float *const *t, uint64_t seed, unsigned step, unsigned rank)
{
	const struct zs_net_tfm *n = &m->tfm;
	struct tfm_task task = {n->dims.vocab, n->perm};
	tfm_task_batch(ids(t, n->tokens), ids(t, n->targets), &task, seed, step, rank, n->B, n->T);
}
