/*
 * tfm — the transformer model (tfm.h): layout, views, the layers' forward
 * and backward over the kernels of tfm_kernels.h, weights and data from
 * the seed.
 */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/fp16.h"
#include "engine/rng.h"
#include "engine/tfm.h"
#include "engine/tfm_kernels.h"
#include "util/model.h"
#include "util/util.h"

/* Streams of the seed's generator (engine_uniform), apart from the MLP's. */
#define STREAM_WEIGHTS UINT64_C(0x74666d5f77656967) /* "tfm_weig" */
#define STREAM_PERM UINT64_C(0x74666d5f7065726d)    /* "tfm_perm" */
#define STREAM_DATA UINT64_C(0x74666d5f64617461)    /* "tfm_data" + rank */

int tfm_dims_check(const struct tfm_dims *d, char **cause)
{
	if (d->d == 0 || d->layers == 0 || d->heads == 0 || d->kv_heads == 0 || d->head_dim == 0 || d->ffn == 0 ||
	    d->vocab == 0 || d->seq == 0)
		return zs_fail(cause, "every dimension of the model must be at least 1");
	if (d->heads % d->kv_heads != 0)
		return zs_fail(cause, "the %zu attention heads are not a multiple of the %zu key-value heads", d->heads,
		               d->kv_heads);
	if (d->family == TFM_GPT2 && d->kv_heads != d->heads)
		return zs_fail(cause, "gpt2 has as many key-value heads as heads");
	if (d->family == TFM_GPT2 && (d->qk_norm || d->gemma))
		return zs_fail(cause, "gpt2 has no norms on its query and key heads, nor gemma2's");
	if (d->window_pattern != 0 && !(d->qk_norm && d->gemma && d->rope_local_theta > 0.0f))
		return zs_fail(cause, "a pattern of sliding and global layers is gemma3_text's alone");
	if (d->attn_scalar < 0.0f || d->attn_softcap < 0.0f || d->final_softcap < 0.0f)
		return zs_fail(cause, "the attention's scalar and the soft-caps must not be negative");
	if (d->family == TFM_LLAMA && d->head_dim % 2 != 0)
		return zs_fail(cause, "rotary embeddings need an even head dimension, not %zu", d->head_dim);
	if (d->experts > 0 && (d->family != TFM_LLAMA || d->gemma || d->top_k == 0 || d->top_k > d->experts))
		return zs_fail(cause, "a mixture of experts is a llama-family block with 1 to %zu experts a token", d->experts);
	if ((d->qwen_moe || d->shared_ffn > 0 || d->topk_raw) && (d->experts == 0 || !d->qwen_moe))
		return zs_fail(cause, "a shared expert and unnormalised top-k weights are qwen2_moe's and qwen3_moe's mixture's");
	if (d->vocab > (size_t)INT_MAX)
		return zs_fail(cause, "a vocabulary of %zu tokens is more than a token id holds", d->vocab);
	if (!(d->eps > 0.0f) || (d->family == TFM_LLAMA && !(d->rope_theta > 0.0f)))
		return zs_fail(cause, "the norms' epsilon and the rotary base must be positive");
	return 0;
}

void tfm_dims_from_config(struct tfm_dims *d, const struct zs_model *hf)
{
	int llama = hf->family == ZS_FAMILY_LLAMA;
	*d = (struct tfm_dims){.family = llama ? TFM_LLAMA : TFM_GPT2, .d = (size_t)hf->hidden,
	                       .layers = (size_t)hf->layers, .heads = (size_t)hf->heads, .kv_heads = (size_t)hf->kv_heads,
	                       .head_dim = (size_t)hf->head_dim, .ffn = (size_t)hf->intermediate,
	                       .vocab = (size_t)hf->vocab, .seq = (size_t)hf->positions, .tied = hf->tied,
	                       .eps = (float)hf->norm_eps, .rope_theta = llama ? (float)hf->rope_theta : 10000.0f,
	                       .qkv_bias = llama && hf->qkv_bias, .hf_fused = llama && hf->hf_fused,
	                       .pad_row = llama ? (size_t)hf->pad_row : 0, .qk_norm = llama && hf->qk_norm,
	                       .gemma = llama && hf->gemma, .attn_scalar = llama ? (float)hf->attn_scalar : 0.0f,
	                       .attn_softcap = llama ? (float)hf->attn_softcap : 0.0f,
	                       .final_softcap = llama ? (float)hf->final_softcap : 0.0f,
	                       .window_pattern = llama ? (size_t)hf->window_pattern : 0,
	                       .rope_local_theta = llama ? (float)hf->rope_local_theta : 0.0f,
	                       .rope_factor = llama ? (float)hf->rope_factor : 0.0f,
	                       .experts = llama ? (size_t)hf->experts : 0,
	                       .top_k = llama ? (size_t)hf->experts_per_tok : 0, .qwen_moe = llama && hf->qwen_moe,
	                       .shared_ffn = llama ? (size_t)hf->shared_ffn : 0, .topk_raw = llama && hf->topk_raw};
}

float tfm_rope_theta(const struct tfm_dims *d, size_t l)
{
	return d->window_pattern != 0 && (l + 1) % d->window_pattern != 0 ? d->rope_local_theta : d->rope_theta;
}

float tfm_rope_factor(const struct tfm_dims *d, size_t l)
{
	int local = d->window_pattern != 0 && (l + 1) % d->window_pattern != 0;
	return local || !(d->rope_factor > 0.0f) ? 1.0f : d->rope_factor;
}

void tfm_dims_shape(struct zs_model *m, const struct tfm_dims *d)
{
	*m = (struct zs_model){.family = d->family == TFM_LLAMA ? ZS_FAMILY_LLAMA : ZS_FAMILY_GPT2, .hidden = d->d,
	                       .intermediate = d->ffn, .layers = d->layers, .heads = d->heads, .kv_heads = d->kv_heads,
	                       .head_dim = d->head_dim, .vocab = d->vocab, .positions = d->seq, .tied = d->tied,
	                       .qkv_bias = d->qkv_bias, .hf_fused = d->hf_fused, .pad_row = d->pad_row,
	                       .qk_norm = d->qk_norm, .gemma = d->gemma, .attn_scalar = d->attn_scalar,
	                       .attn_softcap = d->attn_softcap, .final_softcap = d->final_softcap,
	                       .window_pattern = d->window_pattern, .rope_local_theta = d->rope_local_theta,
	                       .rope_factor = d->rope_factor,
	                       .experts = d->experts, .experts_per_tok = d->top_k, .qwen_moe = d->qwen_moe,
	                       .shared_ffn = d->shared_ffn, .topk_raw = d->topk_raw};
}

size_t tfm_qkv_rows(const struct tfm_dims *d) { return (d->heads + 2 * d->kv_heads) * d->head_dim; }
size_t tfm_up_rows(const struct tfm_dims *d) { return d->family == TFM_LLAMA ? 2 * d->ffn : d->ffn; }
size_t tfm_block_modules(const struct tfm_dims *d) { return d->gemma ? (d->qk_norm ? 9 : 8) : d->qk_norm ? 7 : 6; }

/* What a block's module s runs (the step description's modules in
 * forward order): llama's and gpt2's six, qwen3's seven (the q/k norm
 * after qkv), gemma2's eight (a norm after attention's projection and
 * after the MLP's), gemma3_text's nine (gemma2's and the q/k norm). */
enum { ROLE_LN1, ROLE_QKV, ROLE_QK_NORM, ROLE_PROJ, ROLE_POST_ATTN, ROLE_LN2, ROLE_UP, ROLE_DOWN, ROLE_POST_FF };
static size_t block_role(const struct tfm_dims *d, size_t s)
{
	static const unsigned char plain[] = {ROLE_LN1, ROLE_QKV, ROLE_PROJ, ROLE_LN2, ROLE_UP, ROLE_DOWN},
	                           qk[] = {ROLE_LN1, ROLE_QKV, ROLE_QK_NORM, ROLE_PROJ, ROLE_LN2, ROLE_UP, ROLE_DOWN},
	                           gemma[] = {ROLE_LN1, ROLE_QKV, ROLE_PROJ, ROLE_POST_ATTN, ROLE_LN2, ROLE_UP, ROLE_DOWN,
	                                      ROLE_POST_FF},
	                           gemma3[] = {ROLE_LN1, ROLE_QKV, ROLE_QK_NORM, ROLE_PROJ, ROLE_POST_ATTN, ROLE_LN2,
	                                       ROLE_UP, ROLE_DOWN, ROLE_POST_FF};
	return d->gemma ? (d->qk_norm ? gemma3[s] : gemma[s]) : d->qk_norm ? qk[s] : plain[s];
}

/* ------------------------------------------------------------------------ */
/* The layout: the step description's */

_Static_assert(TFM_SLOTS == 2 * TFM_BLOCK_MODULES, "two slots (weight, bias) for each of a block's modules");

void tfm_params(struct step_params *p, const struct tfm_dims *d)
{
	struct zs_model shape;
	tfm_dims_shape(&shape, d);
	step_params_build(p, &shape);
}

size_t tfm_nparams(const struct tfm_dims *d)
{
	struct zs_model shape;
	tfm_dims_shape(&shape, d);
	return (size_t)step_params_count(&shape);
}

/* Tensor i's first element in the flat vector: its layer's first, then
 * the layer's tensors before it (the list is the vector's order). */
static size_t tensor_offset(const struct step_params *p, size_t i)
{
	size_t l = 0;
	while (p->layer[l].first + p->layer[l].n <= i)
		l++;
	size_t off = p->layer[l].offset;
	for (size_t k = p->layer[l].first; k < i; k++)
		off += p->tensor[k].numel;
	return off;
}

/* Module i's place among its layer's modules (they are contiguous). */
static size_t module_slot(const struct step_params *p, size_t i)
{
	size_t s = 0;
	while (s < i && p->module[i - s - 1].layer == p->module[i].layer)
		s++;
	return s;
}

void tfm_layer_slots(float *slot[TFM_SLOTS], const struct step_params *p, size_t l, float *flat)
{
	memset(slot, 0, TFM_SLOTS * sizeof *slot);
	for (size_t i = 0, s = 0; i < p->nmodules; i++) {
		const struct step_module *md = &p->module[i];
		if (md->layer != l)
			continue;
		for (size_t k = 0; k < md->n && 2 * s + k < TFM_SLOTS; k++)
			slot[2 * s + k] = flat + tensor_offset(p, md->first + k);
		s++;
	}
}

void tfm_block_view(struct tfm_block_params *v, float *const slot[TFM_SLOTS], const struct tfm_dims *d, size_t l)
{
	memset(v, 0, sizeof *v);
	v->rope_theta = tfm_rope_theta(d, l);
	v->rope_factor = tfm_rope_factor(d, l);
	for (size_t s = 0; s < tfm_block_modules(d); s++) {
		float **w[] = {&v->ln1_w, &v->qkv_w, &v->qk_norm_w, &v->proj_w, &v->post_attn_w, &v->ln2_w, &v->fc_w,
		               &v->fcproj_w, &v->post_ff_w};
		float **b[] = {&v->ln1_b, &v->qkv_b, NULL, &v->proj_b, NULL, &v->ln2_b, &v->fc_b, &v->fcproj_b, NULL};
		size_t r = block_role(d, s);
		*w[r] = slot[2 * s];
		if (b[r] != NULL)
			*b[r] = slot[2 * s + 1];
	}
}

void tfm_embed_view(struct tfm_embed_params *v, float *const slot[TFM_SLOTS])
{
	*v = (struct tfm_embed_params){slot[0], slot[2]};
}

void tfm_final_view(struct tfm_final_params *v, float *const slot[TFM_SLOTS])
{
	*v = (struct tfm_final_params){slot[0], slot[1], slot[2]};
}

/* ------------------------------------------------------------------------ */
/* Activations */

float **tfm_block_act_slot(struct tfm_block_acts *acts, enum step_act a)
{
	float **s[STEP_NBLOCK_ACTS] = {&acts->ln1, &acts->ln1_mean, &acts->ln1_rstd, &acts->qkv, &acts->qk_pre,
	                              &acts->qk_rstd, &acts->att, &acts->att_tanh, &acts->atty, &acts->proj_out,
	                              &acts->proj_rstd, &acts->res2, &acts->ln2, &acts->ln2_mean, &acts->ln2_rstd,
	                              &acts->fch, &acts->fch_act, &acts->down_out, &acts->down_rstd, &acts->res3};
	return s[a];
}

float **tfm_head_act_slot(struct tfm_head_acts *acts, enum step_act a)
{
	float **s[] = {&acts->lnf, &acts->lnf_mean, &acts->lnf_rstd, &acts->logits};
	return s[a - STEP_ACT_LNF];
}

/* ------------------------------------------------------------------------ */
/* The layers */

static void norm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                         const struct tfm_dims *d, size_t BT)
{
	if (d->family == TFM_GPT2)
		layernorm_forward(out, mean, rstd, x, w, b, d->eps, BT, d->d);
	else if (d->gemma)
		rmsnorm1p_forward(out, rstd, x, w, d->eps, BT, d->d);
	else
		rmsnorm_forward(out, rstd, x, w, d->eps, BT, d->d);
}

/* dx += the norm's input gradient. */
static void norm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                          const float *mean, const float *rstd, const struct tfm_dims *d, size_t BT)
{
	if (d->family == TFM_GPT2)
		layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, BT, d->d);
	else if (d->gemma)
		rmsnorm1p_backward(dx, dw, dout, x, w, rstd, BT, d->d);
	else
		rmsnorm_backward(dx, dw, dout, x, w, rstd, BT, d->d);
}

/* Gemma2Model's normalizer: hidden_size ** 0.5 as a tensor of the
 * embeddings' dtype (fp32 here), the embedding multiplied by it.
 * Gemma3TextScaledWordEmbedding's (modeling_gemma3.py) is a float32
 * torch.tensor(hidden_size ** 0.5) cast to the weight's dtype: the same
 * float with fp32 weights, as the engine's (mixed precision keeps fp32
 * weights and autocasts the matmuls only); 16-bit weights would round it
 * (sqrt(1152) = 33.94 is 34.0 in bf16), which no run here has. */
static float embed_scale(const struct tfm_dims *d) { return (float)sqrt((double)d->d); }

static void scale_rows(float *x, float s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] *= s;
}

void tfm_embed_forward(float *x, const struct tfm_embed_params *p, const int *in, const struct tfm_dims *d,
                       size_t B, size_t T)
{
	embed_forward(x, in, p->wte, p->wpe, B * T, T, d->d);
	if (d->gemma)
		scale_rows(x, embed_scale(d), B * T * d->d);
}

void tfm_embed_backward(struct tfm_embed_params *g, const float *dx, const int *in, const struct tfm_dims *d,
                        size_t B, size_t T)
{
	if (d->gemma)
		tfm_embed_backward_module(g, dx, in, d, B, T, 0);
	else
		embed_backward(g->wte, g->wpe, dx, in, B * T, T, d->d, d->pad_row);
}

/* Module 0 the token table: x = wte[tok]; module 1 the positions' (gpt2):
 * x += wpe[t], the same sum in the same order as embed_forward's. */
void tfm_embed_forward_module(float *x, const struct tfm_embed_params *p, const int *in, const struct tfm_dims *d,
                              size_t B, size_t T, size_t s)
{
	size_t C = d->d;
	if (s == 0) {
		embed_forward(x, in, p->wte, NULL, B * T, T, C);
		if (d->gemma)
			scale_rows(x, embed_scale(d), B * T * C);
		return;
	}
	for (size_t r = 0; r < B * T; r++)
		for (size_t i = 0; i < C; i++)
			x[r * C + i] += p->wpe[(r % T) * C + i];
}

void tfm_embed_backward_module(struct tfm_embed_params *g, const float *dx, const int *in, const struct tfm_dims *d,
                               size_t B, size_t T, size_t s)
{
	size_t C = d->d;
	if ((s == 0 ? g->wte : g->wpe) == NULL) /* frozen (--freeze): no grads, and nothing before it needs a dx */
		return;
	if (s == 0 && d->gemma) { /* x = wte[tok]·√d: d wte = dx·√d */
		embed_backward_scaled(g->wte, dx, in, B * T, C, d->pad_row, embed_scale(d));
		return;
	}
	if (s == 0) {
		embed_backward(g->wte, NULL, dx, in, B * T, T, C, d->pad_row);
		return;
	}
	for (size_t r = 0; r < B * T; r++)
		for (size_t i = 0; i < C; i++)
			g->wpe[(r % T) * C + i] += dx[r * C + i];
}

/* A 16-bit tensor x (n) just written: rounded to fp16 values (mixed). */
static void r16(int f16, float *x, size_t n)
{
	if (f16)
		zs_round_half_n(x, n);
}

void tfm_attention_recompute(struct tfm_block_acts *a, const struct tfm_dims *d, size_t B, size_t T)
{
	float scale = d->attn_scalar > 0.0f ? 1.0f / sqrtf(d->attn_scalar) : 1.0f / sqrtf((float)d->head_dim);
	attention_forward_capped(a->atty, a->att, a->att_tanh, a->qkv, B, T, d->heads, d->kv_heads, d->head_dim, scale,
	                         d->attn_softcap);
	r16(a->f16, a->atty, B * T * d->heads * d->head_dim);
}

/* out (n), a 16-bit result just written, rounded; then the residual
 * stream res added, and rounded again. */
static void add16(int f16, float *out, const float *res, size_t n)
{
	r16(f16, out, n);
	residual_add(out, res, n);
	r16(f16, out, n);
}

/* From the q/k/v product on: the q/k norms (qwen3), rope (llama) and the
 * attention, each 16-bit result rounded. */
static void attend(struct tfm_block_acts *a, const struct tfm_block_params *p, const struct tfm_dims *d, size_t B,
                   size_t T)
{
	size_t BT = B * T, H = d->heads, KV = d->kv_heads, hd = d->head_dim, Q = tfm_qkv_rows(d);
	if (d->qk_norm) {
		headnorm_forward(a->qkv, a->qk_pre, a->qk_rstd, p->qk_norm_w, d->eps, BT, H, KV, hd, d->gemma);
		r16(a->f16, a->qkv, BT * Q);
	}
	if (d->family == TFM_LLAMA) {
		rope_forward(a->qkv, p->rope_theta, p->rope_factor, B, T, H, KV, hd);
		r16(a->f16, a->qkv, BT * Q);
	}
	tfm_attention_recompute(a, d, B, T);
}

/* In mixed precision every 16-bit output is rounded as it is written
 * (autocast's matmuls return fp16; the elementwise ops on 16-bit tensors
 * return 16 bits); a residual add too. Module s's part of the forward, by
 * its role (block_role): ln1; qkv (with rope and the attention, which
 * has no params, unless a q/k norm follows); the q/k norm (then rope and
 * the attention); the projection and the residual; ln2; the up
 * projection and its activation; the down projection and the residual. */
void tfm_block_forward_half(struct tfm_block_acts *a, const struct tfm_block_params *p, const float *x,
                            const struct tfm_dims *d, size_t B, size_t T, size_t s, enum tfm_half half)
{
	size_t BT = B * T, C = d->d, H = d->heads, hd = d->head_dim, F = d->ffn;
	size_t Q = tfm_qkv_rows(d), U = tfm_up_rows(d);
	int h = a->f16, prod = half != TFM_REST, rest = half != TFM_PRODUCT;
	switch (block_role(d, s)) {
	case ROLE_LN1:
		if (!prod)
			break;
		norm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, p->ln1_w, p->ln1_b, d, BT);
		r16(h, a->ln1, BT * C);
		break;
	case ROLE_QKV:
		if (prod) {
			matmul_forward(a->qkv, a->ln1, p->qkv_w, p->qkv_b, BT, C, Q);
			r16(h, a->qkv, BT * Q);
		}
		if (rest && !d->qk_norm)
			attend(a, p, d, B, T);
		break;
	case ROLE_QK_NORM:
		if (prod)
			attend(a, p, d, B, T);
		break;
	case ROLE_PROJ:
		if (d->gemma) { /* its norm, then the residual, in the next module */
			if (prod) {
				matmul_forward(a->proj_out, a->atty, p->proj_w, NULL, BT, H * hd, C);
				r16(h, a->proj_out, BT * C);
			}
			break;
		}
		if (prod)
			matmul_forward(a->res2, a->atty, p->proj_w, p->proj_b, BT, H * hd, C);
		if (rest)
			add16(h, a->res2, x, BT * C);
		break;
	case ROLE_POST_ATTN: /* gemma2: res2 = x + norm(proj_out) */
		if (!prod)
			break;
		norm_forward(a->res2, NULL, a->proj_rstd, a->proj_out, p->post_attn_w, NULL, d, BT);
		add16(h, a->res2, x, BT * C);
		break;
	case ROLE_POST_FF: /* gemma2: res3 = res2 + norm(down_out) */
		if (!prod)
			break;
		norm_forward(a->res3, NULL, a->down_rstd, a->down_out, p->post_ff_w, NULL, d, BT);
		add16(h, a->res3, a->res2, BT * C);
		break;
	case ROLE_LN2:
		if (!prod)
			break;
		norm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2_w, p->ln2_b, d, BT);
		r16(h, a->ln2, BT * C);
		break;
	case ROLE_UP:
		if (prod) {
			matmul_forward(a->fch, a->ln2, p->fc_w, p->fc_b, BT, C, U);
			r16(h, a->fch, BT * U);
		}
		if (!rest)
			break;
		if (d->family == TFM_GPT2)
			gelu_forward(a->fch_act, a->fch, BT * F);
		else if (d->gemma)
			geglu_forward(a->fch_act, a->fch, BT, F);
		else
			swiglu_forward(a->fch_act, a->fch, BT, F);
		r16(h, a->fch_act, BT * F);
		break;
	default:
		if (d->gemma) {
			if (prod) {
				matmul_forward(a->down_out, a->fch_act, p->fcproj_w, NULL, BT, F, C);
				r16(h, a->down_out, BT * C);
			}
			break;
		}
		if (prod)
			matmul_forward(a->res3, a->fch_act, p->fcproj_w, p->fcproj_b, BT, F, C);
		if (rest)
			add16(h, a->res3, a->res2, BT * C);
	}
}

void tfm_block_forward_module(struct tfm_block_acts *a, const struct tfm_block_params *p, const float *x,
                              const struct tfm_dims *d, size_t B, size_t T, size_t s)
{
	tfm_block_forward_half(a, p, x, d, B, T, s, TFM_WHOLE);
}

int tfm_block_linear(struct tfm_linear *l, const struct tfm_block_acts *a, const struct tfm_scratch *sc,
                     const struct tfm_dims *d, size_t s)
{
	size_t C = d->d, F = d->ffn, A = d->heads * d->head_dim;
	memset(l, 0, sizeof *l);
	switch (block_role(d, s)) {
	case ROLE_QKV:
		*l = (struct tfm_linear){a->ln1, a->qkv, sc ? sc->dqkv : NULL, sc ? sc->dx : NULL, C, tfm_qkv_rows(d)};
		return 1;
	case ROLE_PROJ:
		*l = (struct tfm_linear){a->atty, d->gemma ? a->proj_out : a->res2,
		                         sc ? (d->gemma ? sc->dup : sc->dres) : NULL, sc ? sc->dx : NULL, A, C};
		return 1;
	case ROLE_UP:
		*l = (struct tfm_linear){a->ln2, a->fch, sc ? sc->dup : NULL, sc ? sc->dx : NULL, C, tfm_up_rows(d)};
		return 1;
	case ROLE_DOWN:
		*l = (struct tfm_linear){a->fch_act, d->gemma ? a->down_out : a->res3,
		                         sc ? (d->gemma ? sc->dx : sc->dres) : NULL, sc ? sc->dh : NULL, F, C};
		return 1;
	default:
		return 0;
	}
}

void tfm_block_recompute_module(struct tfm_block_acts *a, const struct tfm_block_params *p, const float *x,
                                const struct tfm_dims *d, size_t B, size_t T, size_t s)
{
	if (s + 1 < tfm_block_modules(d))
		tfm_block_forward_module(a, p, x, d, B, T, s);
	else if (d->gemma) /* the last module's norm: its statistics, not its output res3 */
		rmsnorm_rstd(a->down_rstd, a->down_out, d->eps, B * T, d->d);
}

void tfm_block_forward(struct tfm_block_acts *a, const struct tfm_block_params *p, const float *x,
                       const struct tfm_dims *d, size_t B, size_t T)
{
	for (size_t s = 0; s < tfm_block_modules(d); s++)
		tfm_block_forward_module(a, p, x, d, B, T, s);
}

void tfm_block_backward_half(struct tfm_block_params *g, struct tfm_scratch *sc, const struct tfm_block_acts *a,
                             const struct tfm_block_params *p, const float *x, const struct tfm_dims *d, size_t B,
                             size_t T, size_t s, enum tfm_half half)
{
	size_t BT = B * T, C = d->d, H = d->heads, KV = d->kv_heads, hd = d->head_dim, F = d->ffn;
	int prod = half != TFM_REST, rest = half != TFM_PRODUCT;
	switch (block_role(d, s)) {
	case ROLE_POST_FF: /* gemma2: res3 = res2 + norm(down_out): dres flows to res2 and, in dx, to down_out */
		if (!prod)
			break;
		memset(sc->dx, 0, BT * C * sizeof *sc->dx);
		norm_backward(sc->dx, g->post_ff_w, NULL, sc->dres, a->down_out, p->post_ff_w, NULL, a->down_rstd, d, BT);
		break;
	case ROLE_DOWN: /* res3 = res2 + fcproj(fch_act): dres flows to both. */
		if (prod)
			matmul_backward(sc->dh, g->fcproj_w, g->fcproj_b, d->gemma ? sc->dx : sc->dres, a->fch_act, p->fcproj_w,
			                BT, F, C);
		if (!rest)
			break;
		if (d->family == TFM_GPT2)
			gelu_backward(sc->dup, sc->dh, a->fch, BT * F);
		else if (d->gemma)
			geglu_backward(sc->dup, sc->dh, a->fch, BT, F);
		else
			swiglu_backward(sc->dup, sc->dh, a->fch, BT, F);
		break;
	case ROLE_UP:
		if (prod)
			matmul_backward(sc->dx, g->fc_w, g->fc_b, sc->dup, a->ln2, p->fc_w, BT, C, tfm_up_rows(d));
		break;
	case ROLE_LN2:
		if (prod)
			norm_backward(sc->dres, g->ln2_w, g->ln2_b, sc->dx, a->res2, p->ln2_w, a->ln2_mean, a->ln2_rstd, d, BT);
		break;
	case ROLE_POST_ATTN: /* gemma2: res2 = x + norm(proj_out): d proj_out into dup, free until the MLP's */
		if (!prod)
			break;
		memset(sc->dup, 0, BT * C * sizeof *sc->dup);
		norm_backward(sc->dup, g->post_attn_w, NULL, sc->dres, a->proj_out, p->post_attn_w, NULL, a->proj_rstd, d, BT);
		break;
	case ROLE_PROJ: /* res2 = x + proj(atty). */
		if (prod)
			matmul_backward(sc->dx, g->proj_w, g->proj_b, d->gemma ? sc->dup : sc->dres, a->atty, p->proj_w, BT,
			                H * hd, C);
		if (!rest)
			break;
		attention_backward_capped(sc->dqkv, sc->datt, sc->dx, a->qkv, a->att, a->att_tanh, B, T, H, KV, hd,
		                          d->attn_scalar > 0.0f ? 1.0f / sqrtf(d->attn_scalar) : 1.0f / sqrtf((float)hd));
		if (d->family == TFM_LLAMA)
			rope_backward(sc->dqkv, p->rope_theta, p->rope_factor, B, T, H, KV, hd);
		break;
	case ROLE_QK_NORM: /* in place on the q and k heads of dqkv */
		if (prod)
			headnorm_backward(sc->dqkv, g->qk_norm_w, a->qk_pre, p->qk_norm_w, a->qk_rstd, BT, H, KV, hd, d->gemma);
		break;
	case ROLE_QKV:
		if (prod)
			matmul_backward(sc->dx, g->qkv_w, g->qkv_b, sc->dqkv, a->ln1, p->qkv_w, BT, C, tfm_qkv_rows(d));
		break;
	default:
		if (prod)
			norm_backward(sc->dres, g->ln1_w, g->ln1_b, sc->dx, x, p->ln1_w, a->ln1_mean, a->ln1_rstd, d, BT);
	}
}

void tfm_block_backward_module(struct tfm_block_params *g, struct tfm_scratch *sc, const struct tfm_block_acts *a,
                               const struct tfm_block_params *p, const float *x, const struct tfm_dims *d, size_t B,
                               size_t T, size_t s)
{
	tfm_block_backward_half(g, sc, a, p, x, d, B, T, s, TFM_WHOLE);
}

void tfm_block_backward(struct tfm_block_params *g, struct tfm_scratch *s, const struct tfm_block_acts *a,
                        const struct tfm_block_params *p, const float *x, const struct tfm_dims *d, size_t B,
                        size_t T)
{
	for (size_t m = tfm_block_modules(d); m-- > 0;)
		tfm_block_backward_module(g, s, a, p, x, d, B, T, m);
}

void tfm_head_forward_module(struct tfm_head_acts *a, const struct tfm_final_params *p, const float *x,
                             const struct tfm_dims *d, size_t B, size_t T, size_t s)
{
	size_t BT = B * T;
	if (s == 0) {
		norm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, x, p->norm_w, p->norm_b, d, BT);
		r16(a->f16, a->lnf, BT * d->d);
		return;
	}
	matmul_forward(a->logits, a->lnf, p->head, NULL, BT, d->d, d->vocab);
	r16(a->f16, a->logits, BT * d->vocab); /* a 16-bit product, then the loss in fp32 */
	if (d->final_softcap > 0.0f) { /* Gemma2ForCausalLM: cap·tanh(logits / cap) */
		softcap_forward(a->logits, d->final_softcap, BT * d->vocab);
		r16(a->f16, a->logits, BT * d->vocab);
	}
}

float tfm_loss(float *logits, const int *target, const struct tfm_dims *d, size_t BT)
{
	if (d->final_softcap > 0.0f)
		return crossentropy_capped_forward_backward(logits, target, BT, d->vocab, d->final_softcap);
	return crossentropy_forward_backward(logits, target, BT, d->vocab);
}

void tfm_head_logits(struct tfm_head_acts *a, const struct tfm_final_params *p, const float *x,
                     const struct tfm_dims *d, size_t B, size_t T)
{
	tfm_head_forward_module(a, p, x, d, B, T, 0);
	tfm_head_forward_module(a, p, x, d, B, T, 1);
}

float tfm_head_forward(struct tfm_head_acts *a, const struct tfm_final_params *p, const float *x,
                       const int *target, const struct tfm_dims *d, size_t B, size_t T)
{
	tfm_head_logits(a, p, x, d, B, T);
	return tfm_loss(a->logits, target, d, B * T);
}

void tfm_head_backward_module(struct tfm_final_params *g, struct tfm_scratch *s, const struct tfm_head_acts *a,
                              const struct tfm_final_params *p, const float *x, const struct tfm_dims *d, size_t B,
                              size_t T, size_t m)
{
	size_t BT = B * T;
	if (m == 1) {
		matmul_backward(s->dx, g->head, NULL, a->logits, a->lnf, p->head, BT, d->d, d->vocab);
		return;
	}
	memset(s->dres, 0, BT * d->d * sizeof *s->dres);
	norm_backward(s->dres, g->norm_w, g->norm_b, s->dx, x, p->norm_w, a->lnf_mean, a->lnf_rstd, d, BT);
}

void tfm_head_backward(struct tfm_final_params *g, struct tfm_scratch *s, const struct tfm_head_acts *a,
                       const struct tfm_final_params *p, const float *x, const struct tfm_dims *d, size_t B,
                       size_t T)
{
	tfm_head_backward_module(g, s, a, p, x, d, B, T, 1);
	tfm_head_backward_module(g, s, a, p, x, d, B, T, 0);
}

/* ------------------------------------------------------------------------ */
/* Weights and data from the seed */

/* How a tensor starts: uniform with a standard deviation, ones, zeros. */
#define ONES (-1.0)
#define ZEROS 0.0

/* The part [first, first + n) of the flat vector (into w[0, n)) that the
 * tensor [off, off + len) covers, started by rule: uniform in ±std·√3
 * (standard deviation std), element i of the flat vector drawing index i
 * of the weights' stream; or ONES, or ZEROS. */
static void fill_part(float *w, size_t first, size_t n, size_t off, size_t len, double rule, uint64_t seed)
{
	size_t lo = off > first ? off : first, hi = off + len < first + n ? off + len : first + n;
	float bound = (float)(rule * sqrt(3.0));
	for (size_t i = lo; i < hi; i++)
		w[i - first] = rule == ONES ? 1.0f : rule == ZEROS ? 0.0f : bound * engine_uniform(seed, STREAM_WEIGHTS, i);
}

/* A tensor's rule: a bias (a module's second tensor) zeros, a norm's
 * weight ones, a matrix or a table std, the residual stream's output
 * projections (a block's modules 2 and 5: proj and fcproj) proj. */
void tfm_init_range(float *w, const struct tfm_dims *d, uint64_t seed, size_t first, size_t n)
{
	const double std = 0.02;
	double proj = d->family == TFM_GPT2 ? std / sqrt(2.0 * (double)d->layers) : std;
	struct step_params p;
	tfm_params(&p, d);
	for (size_t i = 0, off = 0; i < p.ntensors && off < first + n; off += p.tensor[i++].numel) {
		const struct step_tensor *t = &p.tensor[i];
		const struct step_module *md = &p.module[t->module];
		size_t s = module_slot(&p, t->module);
		int block = md->layer >= 1 && md->layer <= d->layers;
		/* gemma2's norms scale by 1 + w: Gemma2RMSNorm's weight starts at zeros */
		double rule = i > md->first ? ZEROS : t->ndim == 1 ? (d->gemma ? ZEROS : ONES)
		              : block && (s == 2 || s == 5) ? proj : std;
		fill_part(w, first, n, off, t->numel, rule, seed);
	}
	step_params_free(&p);
}

void tfm_init_weights(float *w, const struct tfm_dims *d, uint64_t seed)
{
	tfm_init_range(w, d, seed, 0, tfm_nparams(d));
}

/* A whole number in [0, n) from the generator's [-1, 1). */
static size_t draw(uint64_t seed, uint64_t stream, uint64_t index, size_t n)
{
	double u = ((double)engine_uniform(seed, stream, index) + 1.0) / 2.0;
	size_t k = (size_t)(u * (double)n);
	return k < n ? k : n - 1;
}

void tfm_task_init(struct tfm_task *task, size_t vocab, uint64_t seed)
{
	task->vocab = vocab;
	task->perm = zs_malloc(vocab * sizeof *task->perm);
	for (size_t i = 0; i < vocab; i++)
		task->perm[i] = (int)i;
	for (size_t i = vocab - 1; i > 0; i--) { /* Fisher-Yates */
		size_t j = draw(seed, STREAM_PERM, i, i + 1);
		int t = task->perm[i];
		task->perm[i] = task->perm[j];
		task->perm[j] = t;
	}
}

void tfm_task_free(struct tfm_task *task)
{
	free(task->perm);
	task->perm = NULL;
}

void tfm_task_batch(int *in, int *target, const struct tfm_task *task, uint64_t seed, uint64_t step,
                    uint64_t rank, size_t B, size_t T)
{
	for (size_t b = 0; b < B; b++) {
		int x = (int)draw(seed, STREAM_DATA + rank, step * B + b, task->vocab);
		for (size_t t = 0; t < T; t++) {
			in[b * T + t] = x;
			x = task->perm[x];
			target[b * T + t] = x;
		}
	}
}
