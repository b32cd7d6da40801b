/*
 * tfm_moe — Mixtral's block over tfm.h's attention modules and
 * moe_kernels.h's router and experts (tfm_moe.h).
 */
#include "config.h"

#include <string.h>

#include "engine/moe_kernels.h"
#include "engine/tfm_moe.h"

size_t tfm_moe_slot(const struct tfm_dims *d, unsigned j)
{
	static const size_t qwen[3] = {0, 2, 1};
	return d->qwen_moe ? qwen[j] : j;
}

size_t tfm_moe_attn_modules(const struct tfm_dims *d) { return d->qk_norm ? 5 : 4; }

void tfm_moe_forward(float *out, struct tfm_moe_acts *a, const struct tfm_moe_params *p, const float *x,
                     const struct tfm_dims *d, size_t BT)
{
	size_t E = d->experts, k = d->top_k, C = d->d, F = d->ffn;
	memset(a->counts, 0, E * sizeof *a->counts);
	moe_router_forward(a->probs, x, p->gate, BT, C, E);
	moe_topk(a->idx, a->w, a->counts, a->probs, BT, E, k, !d->topk_raw);
	moe_dispatch(a->start, a->tok, a->slot, a->idx, BT, E, k);
	memset(out, 0, BT * C * sizeof *out);
	for (size_t e = 0; e < E; e++) {
		size_t at = a->start[e], n = a->start[e + 1] - at;
		float *const *w = p->w + 3 * e;
		moe_expert_forward(out, a->xe + at * C, a->gu + at * 2 * F, a->act + at * F, a->ye + at * C, x,
		                   w[tfm_moe_slot(d, 0)], w[tfm_moe_slot(d, 1)], w[tfm_moe_slot(d, 2)], a->w, a->tok + at,
		                   a->slot + at, n, k, C, F);
	}
	if (d->shared_ffn > 0)
		moe_shared_forward(out, a->sgu, a->sact, a->sye, a->sg, x, p->shared[0], p->shared[2], p->shared[1],
		                   p->shared[3], BT, C, d->shared_ffn);
}

void tfm_moe_backward(float *dx, struct tfm_moe_params *g, struct tfm_moe_scratch *s, const struct tfm_moe_acts *a,
                      const struct tfm_moe_params *p, const float *dout, const float *x, const struct tfm_dims *d,
                      size_t BT)
{
	size_t E = d->experts, k = d->top_k, C = d->d, F = d->ffn;
	memset(dx, 0, BT * C * sizeof *dx);
	for (size_t e = 0; e < E; e++) {
		size_t at = a->start[e], n = a->start[e + 1] - at;
		float *const *gw = g->w + 3 * e, *const *w = p->w + 3 * e;
		size_t s1 = tfm_moe_slot(d, 0), s2 = tfm_moe_slot(d, 1), s3 = tfm_moe_slot(d, 2);
		moe_expert_backward(dx, gw[s1], gw[s2], gw[s3], s->dw, s->dye, s->dact, s->dgu, s->dxe, dout,
		                    a->xe + at * C, a->gu + at * 2 * F, a->act + at * F, a->ye + at * C, w[s1], w[s2], w[s3],
		                    a->w, a->tok + at, a->slot + at, n, k, C, F);
	}
	/* the shared expert's scratch for its gate: the router's, before it */
	if (d->shared_ffn > 0)
		moe_shared_backward(dx, g->shared[0], g->shared[2], g->shared[1], g->shared[3], s->dsye, s->dsact, s->dsgu,
		                    s->dsxe, s->dlogits, s->dxr, dout, x, a->sgu, a->sact, a->sye, a->sg, p->shared[0],
		                    p->shared[2], p->shared[1], p->shared[3], BT, C, d->shared_ffn);
	moe_router_backward(dx, g->gate, s->dlogits, s->dxr, s->dw, a->idx, a->w, a->probs, x, p->gate, BT, C, E, k,
	                    !d->topk_raw);
}

void tfm_moe_block_forward(struct tfm_block_acts *a, struct tfm_moe_acts *m, const struct tfm_block_params *p,
                           const struct tfm_moe_params *mp, const float *x, const struct tfm_dims *d, size_t B,
                           size_t T)
{
	size_t BT = B * T;
	for (size_t s = 0; s < tfm_moe_attn_modules(d); s++)
		tfm_block_forward_module(a, p, x, d, B, T, s);
	tfm_moe_forward(a->res3, m, mp, a->ln2, d, BT);
	for (size_t i = 0; i < BT * d->d; i++)
		a->res3[i] += a->res2[i];
}

void tfm_moe_block_backward(struct tfm_block_params *g, struct tfm_moe_params *gm, struct tfm_scratch *sc,
                            struct tfm_moe_scratch *ms, const struct tfm_block_acts *a, const struct tfm_moe_acts *m,
                            const struct tfm_block_params *p, const struct tfm_moe_params *mp, const float *x,
                            const struct tfm_dims *d, size_t B, size_t T)
{
	/* res3 = res2 + moe(ln2): dres is d res2's residual part; d ln2 in
	 * dx, which ln2's backward reads and adds into dres */
	tfm_moe_backward(sc->dx, gm, ms, m, mp, sc->dres, a->ln2, d, B * T);
	for (size_t s = tfm_moe_attn_modules(d); s-- > 0;)
		tfm_block_backward_module(g, sc, a, p, x, d, B, T, s);
}
