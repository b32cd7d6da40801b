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
 * Everything else is a plain loop with one fixed order of summation (GELU
 * and the cross-entropy's row maximum run eight lanes side by side, each
 * lane's arithmetic the scalar loop's: see gelu_forward);
 * the reductions outside the products (the norms' statistics, softmax and
 * cross-entropy sums) accumulate in double and round once, which keeps
 * zerosim at least as close to a float64 run as PyTorch's fp32 is.
 */
#include "config.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "engine/fp16.h"
#include "engine/tfm_kernels.h"
#include "engine/vec8.h"

void tfm_blas_init(void) { openblas_set_num_threads(1); }

static inline float tanh1(float x); /* below, with GELU's */

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

void embed_backward_scaled(float *dwte, const float *dout, const int *tok, size_t BT, size_t C, size_t pad_row,
                           float scale)
{
	for (size_t r = 0; r < BT; r++) {
		const float *d = dout + r * C;
		float *de = dwte + (size_t)tok[r] * C;
		if ((size_t)tok[r] + 1 != pad_row)
			for (size_t i = 0; i < C; i++)
				de[i] += d[i] * scale;
	}
}

void embed_backward(float *dwte, float *dwpe, const float *dout, const int *tok, size_t BT, size_t T, size_t C,
                    size_t pad_row)
{
	for (size_t r = 0; r < BT; r++) {
		const float *d = dout + r * C;
		float *de = dwte + (size_t)tok[r] * C;
		if ((size_t)tok[r] + 1 != pad_row) /* nn.Embedding's padding_idx takes no gradient */
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
			if (db != NULL) /* none for a frozen norm (--freeze) */
				db[i] += d[i];
			if (dw != NULL)
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

/* One row of C: dw += ; o += the input's gradient (add), or o = it
 * (o may be d: each o[i] is written after d[i] is read for the last time). */
static void rms_row_backward(float *o, float *dw, const float *d, const float *xr, const float *w, float s, size_t C,
                             int add, int one_plus)
{
	double sumn = 0.0;
	for (size_t i = 0; i < C; i++)
		sumn += (double)((one_plus ? w[i] + 1.0f : w[i]) * d[i] * (xr[i] * s));
	float dnorm_mean = (float)(sumn / (double)C);
	for (size_t i = 0; i < C; i++) {
		float n = xr[i] * s;
		float g = ((one_plus ? w[i] + 1.0f : w[i]) * d[i] - n * dnorm_mean) * s;
		if (dw != NULL) /* none for a frozen norm (--freeze) */
			dw[i] += n * d[i];
		o[i] = add ? o[i] + g : g;
	}
}

void rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                      size_t BT, size_t C)
{
	for (size_t r = 0; r < BT; r++)
		rms_row_backward(dx + r * C, dw, dout + r * C, x + r * C, w, rstd[r], C, 1, 0);
}

void rmsnorm_rstd(float *rstd, const float *x, float eps, size_t BT, size_t C)
{
	for (size_t r = 0; r < BT; r++) {
		const float *xr = x + r * C;
		double ss = 0.0;
		for (size_t i = 0; i < C; i++)
			ss += (double)(xr[i] * xr[i]);
		rstd[r] = 1.0f / sqrtf((float)(ss / (double)C) + eps);
	}
}

void rmsnorm1p_forward(float *out, float *rstd, const float *x, const float *w, float eps, size_t BT, size_t C)
{
	rmsnorm_rstd(rstd, x, eps, BT, C);
	for (size_t r = 0; r < BT; r++)
		for (size_t i = 0; i < C; i++)
			out[r * C + i] = (x[r * C + i] * rstd[r]) * (1.0f + w[i]);
}

void rmsnorm1p_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                        size_t BT, size_t C)
{
	for (size_t r = 0; r < BT; r++)
		rms_row_backward(dx + r * C, dw, dout + r * C, x + r * C, w, rstd[r], C, 1, 1);
}

void headnorm_forward(float *qkv, float *pre, float *rstd, const float *w, float eps, size_t BT, size_t H, size_t KV,
                      size_t hd, int one_plus)
{
	size_t Q = (H + 2 * KV) * hd, N = H + KV;
	void (*norm)(float *, float *, const float *, const float *, float, size_t, size_t) =
	        one_plus ? rmsnorm1p_forward : rmsnorm_forward;
	for (size_t r = 0; r < BT; r++) {
		float *row = qkv + r * Q, *x = pre + r * N * hd;
		memcpy(x, row, N * hd * sizeof *x);
		norm(row, rstd + r * N, x, w, eps, H, hd);
		norm(row + H * hd, rstd + r * N + H, x + H * hd, w + hd, eps, KV, hd);
	}
}

void headnorm_backward(float *dqkv, float *dw, const float *pre, const float *w, const float *rstd, size_t BT,
                       size_t H, size_t KV, size_t hd, int one_plus)
{
	size_t Q = (H + 2 * KV) * hd, N = H + KV;
	for (size_t r = 0; r < BT; r++)
		for (size_t j = 0; j < N; j++) {
			float *o = dqkv + r * Q + j * hd;
			size_t k = j < H ? 0 : hd; /* q_norm's weight, or k_norm's */
			rms_row_backward(o, dw != NULL ? dw + k : NULL, o, pre + (r * N + j) * hd, w + k, rstd[r * N + j], hd, 0, one_plus);
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

void matmul_backward_din_add(float *din, const float *dout, const float *w, size_t BT, size_t C, size_t OC)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)BT, (blasint)C, (blasint)OC, 1.0f, dout,
	            (blasint)OC, w, (blasint)C, 1.0f, din, (blasint)C);
}

/* The adapter's rows of y and dy are a column block of a (BT, OC) row-major
 * matrix: sgemm reads and writes them in place with OC as the leading
 * dimension, and applies scaling as its alpha. */
void lora_forward_a(float *xa, const float *x, const float *A, size_t BT, size_t in, size_t r, int f16)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)BT, (blasint)r, (blasint)in, 1.0f, x, (blasint)in,
	            A, (blasint)in, 0.0f, xa, (blasint)r);
	if (f16)
		zs_round_half_n(xa, BT * r);
}

void lora_forward_b(float *y, const float *xa, const float *B, float scaling, size_t BT, size_t r, size_t out,
                    size_t OC, size_t row0, int f16)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)BT, (blasint)out, (blasint)r, scaling, xa,
	            (blasint)r, B, (blasint)r, 1.0f, y + row0, (blasint)OC);
	for (size_t i = 0; f16 && i < BT; i++)
		zs_round_half_n(y + i * OC + row0, out);
}

void lora_forward(float *y, float *xa, const float *x, const float *A, const float *B, float scaling, size_t BT,
                  size_t in, size_t r, size_t out, size_t OC, size_t row0, int f16)
{
	lora_forward_a(xa, x, A, BT, in, r, f16);
	lora_forward_b(y, xa, B, scaling, BT, r, out, OC, row0, f16);
}

void lora_backward_b(float *dB, float *dt, const float *dy, const float *xa, const float *B, float scaling, size_t BT,
                     size_t r, size_t out, size_t OC, size_t row0)
{
	if (dB != NULL)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)out, (blasint)r, (blasint)BT, scaling,
		            dy + row0, (blasint)OC, xa, (blasint)r, 1.0f, dB, (blasint)r);
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)BT, (blasint)r, (blasint)out, scaling, dy + row0,
	            (blasint)OC, B, (blasint)r, 0.0f, dt, (blasint)r);
}

void lora_backward_a(float *dx, float *dA, const float *dt, const float *x, const float *A, size_t BT, size_t in,
                     size_t r)
{
	if (dA != NULL)
		cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)r, (blasint)in, (blasint)BT, 1.0f, dt,
		            (blasint)r, x, (blasint)in, 1.0f, dA, (blasint)in);
	if (dx != NULL)
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)BT, (blasint)in, (blasint)r, 1.0f, dt,
		            (blasint)r, A, (blasint)in, 1.0f, dx, (blasint)in);
}

void lora_backward(float *dx, float *dA, float *dB, float *dt, const float *dy, const float *x, const float *xa,
                   const float *A, const float *B, float scaling, size_t BT, size_t in, size_t r, size_t out,
                   size_t OC, size_t row0)
{
	lora_backward_b(dB, dt, dy, xa, B, scaling, BT, r, out, OC, row0);
	lora_backward_a(dx, dA, dt, x, A, BT, in, r);
}

/* ------------------------------------------------------------------------ */

/* Rotate pairs (i, i + hd/2) of the first H + KV heads of every row by
 * the angle of position t, forward (sign +1) or back (sign -1). The
 * frequencies are computed in fp32 as Hugging Face computes them, a linear
 * rope_scaling's division after (_compute_linear_scaling_rope_parameters:
 * `inv_freq /= factor` on the default's fp32 inv_freq; factor 1: none). */
static void rope_apply(float *qkv, float theta, float factor, float sign, size_t B, size_t T, size_t H, size_t KV,
                       size_t hd)
{
	size_t half = hd / 2, row = (H + 2 * KV) * hd;
	for (size_t t = 0; t < T; t++)
		for (size_t i = 0; i < half; i++) {
			float inv = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
			if (factor != 1.0f)
				inv /= factor;
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

void rope_forward(float *qkv, float theta, float factor, size_t B, size_t T, size_t H, size_t KV, size_t hd)
{
	rope_apply(qkv, theta, factor, 1.0f, B, T, H, KV, hd);
}

void rope_backward(float *dqkv, float theta, float factor, size_t B, size_t T, size_t H, size_t KV, size_t hd)
{
	rope_apply(dqkv, theta, factor, -1.0f, B, T, H, KV, hd);
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
	attention_forward_capped(out, att, NULL, qkv, B, T, H, KV, hd, 1.0f / sqrtf((float)hd), 0.0f);
}

void attention_forward_capped(float *out, float *att, float *th, const float *qkv, size_t B, size_t T, size_t H,
                              size_t KV, size_t hd, float scale, float cap)
{
	size_t row = (H + 2 * KV) * hd, group = H / KV;
	for (size_t b = 0; b < B; b++)
		for (size_t h = 0; h < H; h++) {
			const float *q = qkv + b * T * row + h * hd;                       /* (T, hd), stride row */
			const float *k = qkv + b * T * row + (H + h / group) * hd;         /* (T, hd) */
			const float *v = qkv + b * T * row + (H + KV + h / group) * hd;    /* (T, hd) */
			float *a = att + (b * H + h) * T * T;                              /* (T, T) */
			cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)T, (blasint)hd, scale,
			            q, (blasint)row, k, (blasint)row, 0.0f, a, (blasint)T);
			for (size_t t = 0; th != NULL && cap > 0.0f && t < T; t++) { /* s -> cap·tanh(s / cap), tanh kept */
				float *r = a + t * T, *tr = &th[((b * H + h) * T + t) * T];
				for (size_t t2 = 0; t2 < T; t2++) {
					tr[t2] = t2 <= t ? tanh1(r[t2] / cap) : 0.0f;
					r[t2] = cap * tr[t2];
				}
			}
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
	attention_backward_capped(dqkv, scratch, dout, qkv, att, NULL, B, T, H, KV, hd, 1.0f / sqrtf((float)hd));
}

void attention_backward_capped(float *dqkv, float *scratch, const float *dout, const float *qkv, const float *att,
                               const float *th, size_t B, size_t T, size_t H, size_t KV, size_t hd, float scale)
{
	size_t row = (H + 2 * KV) * hd, group = H / KV;
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
				const float *tr = th != NULL ? &th[((b * H + h) * T + t) * T] : NULL;
				for (size_t t2 = 0; t2 <= t; t2++)
					r[t2] = tr != NULL ? ar[t2] * (r[t2] - dot) * (1.0f - tr[t2] * tr[t2]) * scale
					                   : ar[t2] * (r[t2] - dot) * scale;
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

/* GELU's tanh, eight lanes at a time, bit for bit the tanhf of glibc up
 * to 2.40 (Debian 12's 2.36): fdlibm's algorithm in float, tanh(x) =
 * 1 - 2/(expm1(2|x|) + 2) for |x| >= 1 and -t/(t + 2), t = expm1(-2|x|),
 * below, with fdlibm's expm1f (argument reduction by k·ln2, its rational
 * approximation, and its reconstruction for each range of k) computed for
 * every lane and the lane's case selected. Checked against libm's tanhf
 * for every float with 2^-55 <= |x| < 22, both signs (996,147,200 inputs,
 * no bit different); test_tfm checks a sample. The lanes outside that
 * range (zero, tiny, |x| >= 22, inf, NaN) take libm's tanhf itself,
 * where every libm gives the same bits (x, ±1, NaN); the scalar tail runs
 * one lane (tanh1), so a newer libm (glibc 2.41's correctly rounded
 * tanhf) changes no result of the kernels.
 * GCC's vector extensions: elementwise IEEE arithmetic, no contraction
 * (-ffp-contract=off), the same operations in the same order as the
 * scalar code. About six times the scalar loop's speed here. */
/* y·2^k: k added to y's exponent field (fdlibm's SET_FLOAT_WORD(y, i + (k << 23))) */
static inline v8f scale2(v8f y, v8i k) { return (v8f)((v8u)y + ((v8u)k << 23)); }

/* fdlibm's expm1f for |a| < 27·ln2 (no overflow, no -1 saturation). */
static inline v8f expm1_8(v8f a)
{
	const float ln2_hi = 6.9313812256e-01f, ln2_lo = 9.0580006145e-06f, invln2 = 1.4426950216e+00f;
	const float q1 = -3.3333335072e-02f, q2 = 1.5873016091e-03f, q3 = -7.9365076090e-05f,
	            q4 = 4.0082177293e-06f, q5 = -2.0109921195e-07f;
	const v8f zero = {0};
	v8i hx = (v8i)a & 0x7fffffff, neg = (v8i)a < 0;
	/* |a| > ln2/2 is reduced to x = a - k·ln2 (hi - lo, c the rounding of
	 * that difference); k = ±1 below 1.5·ln2, else a/ln2 rounded */
	v8i red = hx > 0x3eb17218, near = hx < 0x3f851592;
	v8i kg = __builtin_convertvector(invln2 * a + pick8(neg, zero - 0.5f, zero + 0.5f), v8i);
	v8f tg = __builtin_convertvector(kg, v8f);
	v8f hi = pick8(near, pick8(neg, a + ln2_hi, a - ln2_hi), a - tg * ln2_hi);
	v8f lo = pick8(near, pick8(neg, zero - ln2_lo, zero + ln2_lo), tg * ln2_lo);
	v8i k = red & ((near & ((neg & -1) | (~neg & 1))) | (~near & kg));
	v8f x = hi - lo;
	v8f c = (hi - x) - lo;
	x = pick8(red, x, a);
	v8f hfx = 0.5f * x, hxs = x * hfx;
	v8f r1 = 1.0f + hxs * (q1 + hxs * (q2 + hxs * (q3 + hxs * (q4 + hxs * q5))));
	v8f t = 3.0f - r1 * hfx;
	v8f e = hxs * ((r1 - t) / (6.0f - x * t));
	v8f f = (x * (e - c) - c) - hxs;
	v8f p = (v8f)((0x7fu - (v8u)k) << 23); /* 2^-k (unsigned: a lane tanhf takes over may hold any k) */
	v8f y = x - (x * e - hxs);            /* k = 0 */
	y = pick8(k == -1, 0.5f * (x - f) - 0.5f, y);
	y = pick8(k == 1, pick8(x < -0.25f, -2.0f * (f - (x + 0.5f)), 1.0f + 2.0f * (x - f)), y);
	y = pick8((k <= -2) | (k > 56), scale2(1.0f - (f - x), k) - 1.0f, y);
	y = pick8((k >= 2) & (k < 23), scale2((1.0f - p) - (f - x), k), y);
	y = pick8((k >= 23) & (k <= 56), scale2((x - (f + p)) + 1.0f, k), y);
	return pick8(hx < 0x33000000, a, y); /* |a| < 2^-25: a itself */
}

static inline v8f tanh8(v8f x)
{
	v8i jx = (v8i)x, ix = jx & 0x7fffffff;
	v8f ax = (v8f)ix;
	v8i big = ix >= 0x3f800000;
	v8f t = expm1_8(pick8(big, 2.0f * ax, -2.0f * ax));
	v8f z = pick8(big, 1.0f - 2.0f / (t + 2.0f), -t / (t + 2.0f));
	z = pick8(jx < 0, -z, z);
	v8i other = (ix < 0x24000000) | (ix >= 0x41b00000);
	for (int k = 0; k < 8; k++)
		if (other[k])
			z[k] = tanhf(x[k]);
	return z;
}

/* One value through the lanes' tanh: the scalar tail gets the same bits
 * as the lanes whatever libm is installed. */
static inline float tanh1(float x)
{
	v8f v = {x};
	return tanh8(v)[0];
}

static inline v8f gelu_u8(v8f x) { return GELU_SCALE * (x + 0.044715f * x * x * x); }

void gelu_forward(float *out, const float *in, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		v8f x = load8_f32(in + i);
		store8_f32(out + i, 0.5f * x * (1.0f + tanh8(gelu_u8(x))));
	}
	for (; i < n; i++) {
		float x = in[i];
		out[i] = 0.5f * x * (1.0f + tanh1(GELU_SCALE * (x + 0.044715f * x * x * x)));
	}
}

void gelu_backward(float *din, const float *dout, const float *in, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		v8f x = load8_f32(in + i);
		v8f th = tanh8(gelu_u8(x)), sech2 = 1.0f - th * th;
		v8f local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
		store8_f32(din + i, local * load8_f32(dout + i));
	}
	for (; i < n; i++) {
		float x = in[i];
		float u = GELU_SCALE * (x + 0.044715f * x * x * x);
		float th = tanh1(u), sech2 = 1.0f - th * th;
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

static inline float gelu1(float x) { return 0.5f * x * (1.0f + tanh1(GELU_SCALE * (x + 0.044715f * x * x * x))); }

void geglu_forward(float *out, const float *gu, size_t BT, size_t F)
{
	for (size_t r = 0; r < BT; r++) {
		const float *g = gu + r * 2 * F, *u = g + F;
		float *o = out + r * F;
		for (size_t i = 0; i < F; i++)
			o[i] = gelu1(g[i]) * u[i];
	}
}

void geglu_backward(float *dgu, const float *dout, const float *gu, size_t BT, size_t F)
{
	for (size_t r = 0; r < BT; r++) {
		const float *g = gu + r * 2 * F, *u = g + F, *d = dout + r * F;
		float *dg = dgu + r * 2 * F, *du = dg + F;
		for (size_t i = 0; i < F; i++) {
			float x = g[i];
			float th = tanh1(GELU_SCALE * (x + 0.044715f * x * x * x)), sech2 = 1.0f - th * th;
			float local = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
			du[i] = d[i] * (0.5f * x * (1.0f + th));
			dg[i] = d[i] * u[i] * local;
		}
	}
}

void softcap_forward(float *x, float cap, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] = cap * tanh1(x[i] / cap);
}

void residual_add(float *x, const float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		x[i] += y[i];
}

/* ------------------------------------------------------------------------ */

/* The largest of x[0..n) that is not NaN (-inf if none), eight lanes at a
 * time. Only the value is used: the one difference from a scalar scan is
 * which zero a row whose largest logit is ±0 keeps, and x - (+0) and
 * x - (-0) differ only for x = ±0, where exp gives 1 either way and the
 * loss's term x[y] - max - lse is ±0 - lse, the same -lse. */
static float row_max(const float *x, size_t n)
{
	v8f m8 = (v8f){0} - INFINITY;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		v8f v = load8_f32(x + i);
		m8 = pick8(v > m8, v, m8);
	}
	float m = -INFINITY;
	for (int k = 0; k < 8; k++)
		if (m8[k] > m)
			m = m8[k];
	for (; i < n; i++)
		if (x[i] > m)
			m = x[i];
	return m;
}

static float crossentropy(float *logits, const int *target, size_t BT, size_t V, float cap);

float crossentropy_forward_backward(float *logits, const int *target, size_t BT, size_t V)
{
	return crossentropy(logits, target, BT, V, 0.0f);
}

float crossentropy_capped_forward_backward(float *logits, const int *target, size_t BT, size_t V, float cap)
{
	return crossentropy(logits, target, BT, V, cap);
}

/* cap > 0: the logits are cap·tanh(z / cap), the gradient taken to z. */
static float crossentropy(float *logits, const int *target, size_t BT, size_t V, float cap)
{
	double loss = 0.0; /* the sum of BT token losses, rounded once */
	float inv_bt = 1.0f / (float)BT;
	for (size_t r = 0; r < BT; r++) {
		float *x = logits + r * V;
		float maxval = row_max(x, V);
		double sum = expf(x[0] - maxval); /* V >= 1; the maximum's own term makes sum >= 1 */
		for (size_t i = 1; i < V; i++)
			sum += expf(x[i] - maxval);
		float lse = (float)log(sum);
		size_t y = (size_t)target[r];
		loss -= (double)(x[y] - maxval - lse);
		if (cap > 0.0f) {
			for (size_t i = 0; i < V; i++) {
				float t = x[i] / cap, g = expf(x[i] - maxval - lse) * inv_bt - (i == y ? inv_bt : 0.0f);
				x[i] = g * (1.0f - t * t);
			}
			continue;
		}
		for (size_t i = 0; i < V; i++)
			x[i] = expf(x[i] - maxval - lse) * inv_bt;
		x[y] -= inv_bt;
	}
	return (float)(loss / (double)BT);
}
