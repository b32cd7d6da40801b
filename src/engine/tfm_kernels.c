/*
 * tfm_kernels — the transformer's layers (tfm_kernels.h).
 *
 * Matrix products: OpenBLAS's sgemm on one thread. Measured against the
 * project's own register-blocked fp32 kernel (mlp_kernels.h) on the
 * shapes of GPT-2 small at 256 tokens and of the tiny test models, it ran
 * 2 to 4.5 times faster on this machine (tests/bench_matmul.c, run by
 * `make bench`), so the transformer uses it. A BLAS picks its kernels by
 * CPU, so bits may differ from machine to machine, never from run to run
 * or rank to rank on one machine (one thread, the same calls).
 *
 * Everything else is a plain loop with one fixed order of summation;
 * the reductions outside the products (the norms' statistics, softmax and
 * cross-entropy sums) accumulate in double and round once, which keeps
 * zerosim at least as close to a float64 run as PyTorch's fp32 is.
 */
#include "config.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "engine/tfm_kernels.h"

void tfm_blas_init(void) { openblas_set_num_threads(1); }

/* ------------------------------------------------------------------------ */

void embed_forward(float *out, const int *tok, const float *wte, const float *wpe, size_t BT, size_t T, size_t C)
{
	for (size_t r = 0; r < BT; r++) {
		const float *e = wte + (size_t)tok[r] * C; /* (C) */
		float *o = out + r * C;
		if (wpe == NULL) {
			memcpy(o, e, C * sizeof *o);
			continue;
		}
		const float *p = wpe + (r % T) * C; /* (C) */
		for (size_t i = 0; i < C; i++)
			o[i] = e[i] + p[i];
	}
}

void embed_backward(float *dwte, float *dwpe, const float *dout, const int *tok, size_t BT, size_t T, size_t C)
{
	for (size_t r = 0; r < BT; r++) {
		const float *d = dout + r * C;
		float *de = dwte + (size_t)tok[r] * C;
		for (size_t i = 0; i < C; i++)
			de[i] += d[i];
		if (dwpe != NULL) {
			float *dp = dwpe + (r % T) * C;
			for (size_t i = 0; i < C; i++)
				dp[i] += d[i];
		}
	}
}

/* ------------------------------------------------------------------------ */

void layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                       float eps, size_t BT, size_t C)
{
	for (size_t r = 0; r < BT; r++) {
		const float *xr = x + r * C;
		double sum = 0.0;
		for (size_t i = 0; i < C; i++)
			sum += xr[i];
		float m = (float)(sum / (double)C);
		double var = 0.0;
		for (size_t i = 0; i < C; i++) {
			float s = xr[i] - m;
			var += (double)(s * s);
		}
		float s = 1.0f / sqrtf((float)(var / (double)C) + eps);
		float *o = out + r * C;
		for (size_t i = 0; i < C; i++)
			o[i] = (s * (xr[i] - m)) * w[i] + b[i];
		mean[r] = m;
		rstd[r] = s;
	}
}

void layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                        const float *mean, const float *rstd, size_t BT, size_t C)
{
	for (size_t r = 0; r < BT; r++) {
		const float *d = dout + r * C, *xr = x + r * C;
		float m = mean[r], s = rstd[r];
		double sum = 0.0, sumn = 0.0;
		for (size_t i = 0; i < C; i++) {
			float n = (xr[i] - m) * s, dn = w[i] * d[i];
			sum += dn;
			sumn += (double)(dn * n);
		}
		float dmean = (float)(sum / (double)C), dnorm_mean = (float)(sumn / (double)C);
		float *o = dx + r * C;
		for (size_t i = 0; i < C; i++) {
			float n = (xr[i] - m) * s, dn = w[i] * d[i];
			db[i] += d[i];
			dw[i] += n * d[i];
			o[i] += (dn - dmean - n * dnorm_mean) * s;
		}
	}
}

void rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, float eps, size_t BT, size_t C)
{
	for (size_t r = 0; r < BT; r++) {
		const float *xr = x + r * C;
		double ss = 0.0;
		for (size_t i = 0; i < C; i++)
			ss += (double)(xr[i] * xr[i]);
		float s = 1.0f / sqrtf((float)(ss / (double)C) + eps);
		float *o = out + r * C;
		for (size_t i = 0; i < C; i++)
			o[i] = w[i] * (xr[i] * s);
		rstd[r] = s;
	}
}

void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                      size_t BT, size_t C)
{
	for (size_t r = 0; r < BT; r++) {
		const float *d = dout + r * C, *xr = x + r * C;
		float s = rstd[r];
		double sumn = 0.0;
		for (size_t i = 0; i < C; i++)
			sumn += (double)(w[i] * d[i] * (xr[i] * s));
		float dnorm_mean = (float)(sumn / (double)C);
		float *o = dx + r * C;
		for (size_t i = 0; i < C; i++) {
			float n = xr[i] * s;
			dw[i] += n * d[i];
			o[i] += (w[i] * d[i] - n * dnorm_mean) * s;
		}
	}
}

/* ------------------------------------------------------------------------ */

void matmul_forward(float *out, const float *in, const float *w, const float *bias, size_t BT, size_t C, size_t OC)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)BT, (blasint)OC, (blasint)C, 1.0f, in,
	            (blasint)C, w, (blasint)C, 0.0f, out, (blasint)OC);
	if (bias != NULL)
		for (size_t r = 0; r < BT; r++)
			for (size_t o = 0; o < OC; o++)
				out[r * OC + o] += bias[o];
}

void matmul_backward(float *din, float *dw, float *dbias, const float *dout, const float *in, const float *w,
                     size_t BT, size_t C, size_t OC)
{
	if (din != NULL)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)BT, (blasint)C, (blasint)OC, 1.0f,
		            dout, (blasint)OC, w, (blasint)C, 0.0f, din, (blasint)C);
	if (dw != NULL)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)OC, (blasint)C, (blasint)BT, 1.0f, dout,
		            (blasint)OC, in, (blasint)C, 1.0f, dw, (blasint)C);
	if (dbias != NULL)
		for (size_t r = 0; r < BT; r++)
			for (size_t o = 0; o < OC; o++)
				dbias[o] += dout[r * OC + o];
}

/* ------------------------------------------------------------------------ */

/* Rotate pairs (i, i + hd/2) of the first H + KV heads of every row by
 * the angle of position t, forward (sign +1) or back (sign -1). The
 * frequencies are computed in fp32 as Hugging Face computes them. */
static void rope_apply(float *qkv, float theta, float sign, size_t B, size_t T, size_t H, size_t KV, size_t hd)
{
	size_t half = hd / 2, row = (H + 2 * KV) * hd;
	for (size_t t = 0; t < T; t++)
		for (size_t i = 0; i < half; i++) {
			float inv = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
			float ang = (float)t * inv, c = cosf(ang), s = sign * sinf(ang);
			for (size_t b = 0; b < B; b++) {
				float *p = qkv + (b * T + t) * row;
				for (size_t h = 0; h < H + KV; h++) {
					float *x = p + h * hd;
					float x1 = x[i], x2 = x[i + half];
					x[i] = x1 * c - x2 * s;
					x[i + half] = x2 * c + x1 * s;
				}
			}
		}
}

void rope_forward(float *qkv, float theta, size_t B, size_t T, size_t H, size_t KV, size_t hd)
{
	rope_apply(qkv, theta, 1.0f, B, T, H, KV, hd);
}

void rope_backward(float *dqkv, float theta, size_t B, size_t T, size_t H, size_t KV, size_t hd)
{
	rope_apply(dqkv, theta, -1.0f, B, T, H, KV, hd);
}

/* ------------------------------------------------------------------------ */

/* Per (batch, head): scores = Q·Kᵀ·scale as one product over the whole
 * T × T square (the half above the diagonal is computed and discarded:
 * cheaper in the BLAS than row by row), the causal softmax row by row,
 * then out = att·V (att is zero above the diagonal). Head h's rows of q,
 * k, v sit in qkv with stride `row`. */
void attention_forward(float *out, float *att, const float *qkv, size_t B, size_t T, size_t H, size_t KV,
                       size_t hd)
{
	size_t row = (H + 2 * KV) * hd, group = H / KV;
	float scale = 1.0f / sqrtf((float)hd);
	for (size_t b = 0; b < B; b++)
		for (size_t h = 0; h < H; h++) {
			const float *q = qkv + b * T * row + h * hd;                       /* (T, hd), stride row */
			const float *k = qkv + b * T * row + (H + h / group) * hd;         /* (T, hd) */
			const float *v = qkv + b * T * row + (H + KV + h / group) * hd;    /* (T, hd) */
			float *a = att + (b * H + h) * T * T;                              /* (T, T) */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)T, (blasint)hd, scale,
			            q, (blasint)row, k, (blasint)row, 0.0f, a, (blasint)T);
			for (size_t t = 0; t < T; t++) {
				float *r = a + t * T, maxval = -INFINITY;
				double sum = 0.0;
				for (size_t t2 = 0; t2 <= t; t2++)
					if (r[t2] > maxval)
						maxval = r[t2];
				for (size_t t2 = 0; t2 <= t; t2++) {
					r[t2] = expf(r[t2] - maxval);
					sum += r[t2];
				}
				float inv = (float)(1.0 / sum);
				for (size_t t2 = 0; t2 <= t; t2++)
					r[t2] *= inv;
				for (size_t t2 = t + 1; t2 < T; t2++)
					r[t2] = 0.0f;
			}
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)T, (blasint)hd, (blasint)T, 1.0f,
			            a, (blasint)T, v, (blasint)row, 0.0f, out + b * T * H * hd + h * hd, (blasint)(H * hd));
		}
}

void attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv, const float *att,
                        size_t B, size_t T, size_t H, size_t KV, size_t hd)
{
	size_t row = (H + 2 * KV) * hd, group = H / KV;
	float scale = 1.0f / sqrtf((float)hd);
	memset(dqkv, 0, B * T * row * sizeof *dqkv);
	for (size_t b = 0; b < B; b++)
		for (size_t h = 0; h < H; h++) {
			size_t qo = b * T * row + h * hd, ko = b * T * row + (H + h / group) * hd;
			size_t vo = b * T * row + (H + KV + h / group) * hd;
			const float *a = att + (b * H + h) * T * T;     /* (T, T) */
			const float *d = dout + b * T * H * hd + h * hd; /* (T, hd), stride H·hd */
			float *ds = scratch;                             /* (T, T): d att, then d scores */
			/* d att = dout·Vᵀ; d V += attᵀ·dout (a key-value head serves `group` query heads) */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)T, (blasint)hd, 1.0f, d,
			            (blasint)(H * hd), qkv + vo, (blasint)row, 0.0f, ds, (blasint)T);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)T, (blasint)hd, (blasint)T, 1.0f, a,
			            (blasint)T, d, (blasint)(H * hd), 1.0f, dqkv + vo, (blasint)row);
			/* the softmax: d score = att·(d att - Σ att·d att)·scale, zero above the diagonal */
			for (size_t t = 0; t < T; t++) {
				const float *ar = a + t * T;
				float *r = ds + t * T;
				double acc = 0.0;
				for (size_t t2 = 0; t2 <= t; t2++)
					acc += (double)(ar[t2] * r[t2]);
				float dot = (float)acc;
				for (size_t t2 = 0; t2 <= t; t2++)
					r[t2] = ar[t2] * (r[t2] - dot) * scale;
				for (size_t t2 = t + 1; t2 < T; t2++)
					r[t2] = 0.0f;
			}
			/* d Q = d scores·K; d K += d scoresᵀ·Q */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)T, (blasint)hd, (blasint)T, 1.0f, ds,
			            (blasint)T, qkv + ko, (blasint)row, 0.0f, dqkv + qo, (blasint)row);
			cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)T, (blasint)hd, (blasint)T, 1.0f, ds,
			            (blasint)T, qkv + qo, (blasint)row, 1.0f, dqkv + ko, (blasint)row);
		}
}

/* ------------------------------------------------------------------------ */

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */

void gelu_forward(float *out, const float *in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float x = in[i];
		out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + 0.044715f * x * x * x)));
	}
}

void gelu_backward(float *din, const float *dout, const float *in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float x = in[i];
		float u = GELU_SCALE * (x + 0.044715f * x * x * x);
		float th = tanhf(u), sech2 = 1.0f - th * th;
		float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
		din[i] = local * dout[i];
	}
}

void swiglu_forward(float *out, const float *gu, size_t BT, size_t F)
{
	for (size_t r = 0; r < BT; r++) {
		const float *g = gu + r * 2 * F, *u = g + F;
		float *o = out + r * F;
		for (size_t i = 0; i < F; i++) {
			float sig = 1.0f / (1.0f + expf(-g[i]));
			o[i] = g[i] * sig * u[i];
		}
	}
}

void swiglu_backward(float *dgu, const float *dout, const float *gu, size_t BT, size_t F)
{
	for (size_t r = 0; r < BT; r++) {
		const float *g = gu + r * 2 * F, *u = g + F, *d = dout + r * F;
		float *dg = dgu + r * 2 * F, *du = dg + F;
		for (size_t i = 0; i < F; i++) {
			float sig = 1.0f / (1.0f + expf(-g[i]));
			float silu = g[i] * sig;
			du[i] = d[i] * silu;
			dg[i] = d[i] * u[i] * (sig * (1.0f + g[i] * (1.0f - sig)));
		}
	}
}

void residual_add(float *x, const float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] += y[i];
}

/* ------------------------------------------------------------------------ */

float crossentropy_forward_backward(float *logits, const int *target, size_t BT, size_t V)
{
	double loss = 0.0; /* the sum of BT token losses, rounded once */
	float inv_bt = 1.0f / (float)BT;
	for (size_t r = 0; r < BT; r++) {
		float *x = logits + r * V;
		float maxval = -INFINITY;
		for (size_t i = 0; i < V; i++)
			if (x[i] > maxval)
				maxval = x[i];
		double sum = expf(x[0] - maxval); /* V >= 1; the maximum's own term makes sum >= 1 */
		for (size_t i = 1; i < V; i++)
			sum += expf(x[i] - maxval);
		float lse = (float)log(sum);
		size_t y = (size_t)target[r];
		loss -= (double)(x[y] - maxval - lse);
		for (size_t i = 0; i < V; i++)
			x[i] = expf(x[i] - maxval - lse) * inv_bt;
		x[y] -= inv_bt;
	}
	return (float)(loss / (double)BT);
}
