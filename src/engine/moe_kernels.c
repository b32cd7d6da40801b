/*
 * moe_kernels — a mixture of experts' layer in fp32. See moe_kernels.h;
 * the products are tfm_kernels.h's (the system's BLAS, one thread).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "engine/moe_kernels.h"
#include "engine/tfm_kernels.h"

void moe_router_forward(float *probs, const float *x, const float *gate, size_t BT, size_t d, size_t E)
{
	matmul_forward(probs, x, gate, NULL, BT, d, E);
	for (size_t t = 0; t < BT; t++) {
		float *r = probs + t * E, max = r[0];
		for (size_t e = 1; e < E; e++)
			max = r[e] > max ? r[e] : max;
		float sum = 0.0f;
		for (size_t e = 0; e < E; e++) {
			r[e] = expf(r[e] - max);
			sum += r[e];
		}
		for (size_t e = 0; e < E; e++)
			r[e] /= sum;
	}
}

void moe_topk(int *idx, float *w, size_t *counts, const float *probs, size_t BT, size_t E, size_t k, int renorm)
{
	for (size_t t = 0; t < BT; t++) {
		const float *r = probs + t * E;
		float sum = 0.0f;
		for (size_t j = 0; j < k; j++) {
			/* the largest not yet chosen; of equals the lower expert */
			size_t best = E;
			for (size_t e = 0; e < E; e++) {
				int taken = 0;
				for (size_t i = 0; i < j; i++)
					taken |= (size_t)idx[t * k + i] == e;
				if (!taken && (best == E || r[e] > r[best]))
					best = e;
			}
			idx[t * k + j] = (int)best;
			w[t * k + j] = r[best];
			sum += r[best];
			counts[best]++;
		}
		for (size_t j = 0; j < k && renorm; j++)
			w[t * k + j] /= sum;
	}
}

void moe_dispatch(size_t *start, size_t *tok, size_t *slot, const int *idx, size_t BT, size_t E, size_t k)
{
	memset(start, 0, (E + 1) * sizeof *start);
	for (size_t i = 0; i < BT * k; i++)
		start[(size_t)idx[i] + 1]++;
	for (size_t e = 0; e < E; e++)
		start[e + 1] += start[e];
	/* expert by expert, tokens in order (as torch.where over the mask) */
	for (size_t e = 0; e < E; e++) {
		size_t at = start[e];
		for (size_t i = 0; i < BT * k; i++)
			if ((size_t)idx[i] == e) {
				tok[at] = i / k;
				slot[at++] = i % k;
			}
	}
}

/* A SwiGLU MLP on n rows xe (n, d): gu (n, 2F) = xe · w1ᵀ, then xe · w3ᵀ
 * (w1 and w3 apart in the layout: two products), act = silu(w1 x) · w3 x,
 * ye (n, d) = act · w2ᵀ. */
static void expert_mlp_forward(float *gu, float *act, float *ye, const float *xe, const float *w1, const float *w2,
                               const float *w3, size_t n, size_t d, size_t F)
{
	const float *g = gu, *u = gu + n * F;
	matmul_forward(gu, xe, w1, NULL, n, d, F);
	matmul_forward(gu + n * F, xe, w3, NULL, n, d, F);
	for (size_t i = 0; i < n * F; i++) {
		float sig = 1.0f / (1.0f + expf(-g[i]));
		act[i] = g[i] * sig * u[i];
	}
	matmul_forward(ye, act, w2, NULL, n, F, d);
}

/* Its backward from dye (n, d), d loss / d ye: dw1, dw2, dw3 +=; dxe = dg
 * · w1 and dye = du · w3 (written: d xe is their sum). */
static void expert_mlp_backward(float *dxe, float *dye, float *dact, float *dgu, float *dw1, float *dw2, float *dw3,
                                const float *xe, const float *gu, const float *act, const float *w1, const float *w2,
                                const float *w3, size_t n, size_t d, size_t F)
{
	matmul_backward(dact, dw2, NULL, dye, act, w2, n, F, d);
	const float *g = gu, *u = gu + n * F;
	float *dg = dgu, *du = dgu + n * F;
	for (size_t i = 0; i < n * F; i++) {
		float sig = 1.0f / (1.0f + expf(-g[i]));
		du[i] = dact[i] * g[i] * sig;
		dg[i] = dact[i] * u[i] * (sig * (1.0f + g[i] * (1.0f - sig)));
	}
	/* dye, read above, holds the second */
	matmul_backward(dxe, dw1, NULL, dg, xe, w1, n, d, F);
	matmul_backward(dye, dw3, NULL, du, xe, w3, n, d, F);
}

void moe_expert_forward(float *out, float *xe, float *gu, float *act, float *ye, const float *x, const float *w1,
                        const float *w2, const float *w3, const float *w, const size_t *tok, const size_t *slot,
                        size_t n, size_t k, size_t d, size_t F)
{
	if (n == 0)
		return;
	for (size_t i = 0; i < n; i++)
		memcpy(xe + i * d, x + tok[i] * d, d * sizeof *xe);
	expert_mlp_forward(gu, act, ye, xe, w1, w2, w3, n, d, F);
	for (size_t i = 0; i < n; i++) {
		float s = w[tok[i] * k + slot[i]];
		float *o = out + tok[i] * d;
		const float *y = ye + i * d;
		for (size_t c = 0; c < d; c++)
			o[c] += s * y[c];
	}
}

void moe_expert_backward(float *dx, float *dw1, float *dw2, float *dw3, float *dw, float *dye, float *dact,
                         float *dgu, float *dxe, const float *dout, const float *xe, const float *gu, const float *act,
                         const float *ye, const float *w1, const float *w2, const float *w3, const float *w,
                         const size_t *tok, const size_t *slot, size_t n, size_t k, size_t d, size_t F)
{
	if (n == 0)
		return;
	for (size_t i = 0; i < n; i++) {
		const float *g = dout + tok[i] * d, *y = ye + i * d;
		float s = w[tok[i] * k + slot[i]], dot = 0.0f;
		for (size_t c = 0; c < d; c++) {
			dye[i * d + c] = s * g[c];
			dot += g[c] * y[c];
		}
		dw[tok[i] * k + slot[i]] = dot;
	}
	expert_mlp_backward(dxe, dye, dact, dgu, dw1, dw2, dw3, xe, gu, act, w1, w2, w3, n, d, F);
	for (size_t i = 0; i < n; i++)
		for (size_t c = 0; c < d; c++)
			dx[tok[i] * d + c] += dxe[i * d + c] + dye[i * d + c];
}

void moe_router_backward(float *dx, float *dgate, float *dlogits, float *dxr, const float *dw, const int *idx,
                         const float *w, const float *probs, const float *x, const float *gate, size_t BT, size_t d,
                         size_t E, size_t k, int renorm)
{
	for (size_t t = 0; t < BT; t++) {
		const float *p = probs + t * E, *g = dw + t * k, *wt = w + t * k;
		const int *c = idx + t * k;
		float *dl = dlogits + t * E;
		/* w_j = p_j / S: d p_j = (g_j - Σ_i g_i w_i) / S, S = p_j / w_j */
		float gw = 0.0f, S = 0.0f;
		for (size_t j = 0; j < k; j++) {
			gw += g[j] * wt[j];
			S += p[c[j]];
		}
		memset(dl, 0, E * sizeof *dl);
		for (size_t j = 0; j < k; j++) /* not renormalised: w_j = p_j */
			dl[c[j]] = renorm ? (g[j] - gw) / S : g[j];
		/* the softmax: d logit_e = p_e (d p_e - Σ_f d p_f p_f) */
		float dp = 0.0f;
		for (size_t e = 0; e < E; e++)
			dp += dl[e] * p[e];
		for (size_t e = 0; e < E; e++)
			dl[e] = p[e] * (dl[e] - dp);
	}
	matmul_backward(dxr, dgate, NULL, dlogits, x, gate, BT, d, E);
	for (size_t i = 0; i < BT * d; i++)
		dx[i] += dxr[i];
}

void moe_shared_forward(float *out, float *gu, float *act, float *ye, float *sg, const float *x, const float *w1,
                        const float *w2, const float *w3, const float *gate, size_t BT, size_t d, size_t S)
{
	expert_mlp_forward(gu, act, ye, x, w1, w2, w3, BT, d, S);
	matmul_forward(sg, x, gate, NULL, BT, d, 1);
	for (size_t t = 0; t < BT; t++) {
		sg[t] = 1.0f / (1.0f + expf(-sg[t]));
		for (size_t c = 0; c < d; c++)
			out[t * d + c] += sg[t] * ye[t * d + c];
	}
}

void moe_shared_backward(float *dx, float *dw1, float *dw2, float *dw3, float *dgate, float *dye, float *dact,
                         float *dgu, float *dxe, float *dsl, float *dxr, const float *dout, const float *x,
                         const float *gu, const float *act, const float *ye, const float *sg, const float *w1,
                         const float *w2, const float *w3, const float *gate, size_t BT, size_t d, size_t S)
{
	/* out += sg · ye: d ye = sg · dout; d sg = dout · ye, through the
	 * sigmoid to its logit, d logit = d sg · sg (1 - sg) */
	for (size_t t = 0; t < BT; t++) {
		float dot = 0.0f;
		for (size_t c = 0; c < d; c++) {
			dye[t * d + c] = sg[t] * dout[t * d + c];
			dot += dout[t * d + c] * ye[t * d + c];
		}
		dsl[t] = dot * sg[t] * (1.0f - sg[t]);
	}
	expert_mlp_backward(dxe, dye, dact, dgu, dw1, dw2, dw3, x, gu, act, w1, w2, w3, BT, d, S);
	matmul_backward(dxr, dgate, NULL, dsl, x, gate, BT, d, 1);
	for (size_t i = 0; i < BT * d; i++)
		dx[i] += dxe[i] + dye[i] + dxr[i];
}
