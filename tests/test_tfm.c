/*
 * test_tfm — the transformer's layers and model. Golden values come from
 * outside the code under test: every layer's backward against central
 * finite differences of its forward (the loss summed here in double), the
 * whole model's gradient likewise for both families, and training on the
 * seed's synthetic task, whose loss must fall; and the layout's units
 * against the theory's count of them for every shipped model config (two
 * implementations from the shape alone). Agreement with PyTorch is
 * tests/tfm_torch.sh's.
 */
#include "config.h"

#include <check.h>
#include <gnu/libc-version.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/optim.h"
#include "engine/tfm.h"
#include "engine/tfm_kernels.h"
#include "theory/theory.h"
#include "util/model.h"
#include "util/util.h"
#include "tfm_driver.h"

/* Random fill from the project's seeded generator: uniform in ±scale. */
static float *rnd(size_t n, float scale, uint64_t stream)
{
	float *x = malloc((n ? n : 1) * sizeof *x);
	ck_assert_ptr_nonnull(x);
	for (size_t i = 0; i < n; i++)
		x[i] = scale * engine_uniform(42, stream, i);
	return x;
}

static float *zeros(size_t n)
{
	float *x = calloc(n ? n : 1, sizeof *x);
	ck_assert_ptr_nonnull(x);
	return x;
}

/* Σ r·y in double: the scalar whose gradient a backward computes when
 * it is handed dout = r. */
static double dotd(const float *r, const float *y, size_t n)
{
	double s = 0.0;
	for (size_t i = 0; i < n; i++)
		s += (double)r[i] * (double)y[i];
	return s;
}

typedef double (*loss_fn)(void *ctx);

/* f's central difference at x[i], over the step float rounding took. */
static double central(loss_fn f, void *ctx, float *x, size_t i, float h)
{
	float xi = x[i], up = xi + h, dn = xi - h;
	x[i] = up;
	double fp = f(ctx);
	x[i] = dn;
	double fm = f(ctx);
	x[i] = xi;
	return (fp - fm) / ((double)up - (double)dn);
}

static void check_at(const char *what, size_t i, double num, float g, double atol, double rtol)
{
	double err = fabs(num - (double)g), tol = atol + rtol * fmax(fabs(num), fabs((double)g));
	ck_assert_msg(err <= tol, "%s[%zu]: backward %.7g, finite difference %.7g", what, i, (double)g, num);
}

/* Compare g (the backward's gradient of f with respect to x) with central
 * differences at up to 97 spread-out elements of x. */
static void check_grad(const char *what, loss_fn f, void *ctx, float *x, const float *g, size_t n, float h,
                       double atol, double rtol)
{
	size_t stride = n > 97 ? n / 97 : 1;
	for (size_t i = 0; i < n; i += stride)
		check_at(what, i, central(f, ctx, x, i, h), g[i], atol, rtol);
}

/* ------------------------------------------------------------------------- */
/* One layer at a time */

enum { BB = 2, TT = 5, CC = 12, OCC = 7 };

struct mm { float *out, *in, *w, *bias, *r; };
static double mm_loss(void *p)
{
	struct mm *c = p;
	matmul_forward(c->out, c->in, c->w, c->bias, BB * TT, CC, OCC);
	return dotd(c->r, c->out, BB * TT * OCC);
}

START_TEST(test_matmul_backward_matches_finite_differences)
{
	tfm_blas_init();
	size_t BT = BB * TT;
	struct mm c = {zeros(BT * OCC), rnd(BT * CC, 1.0f, 1), rnd(OCC * CC, 1.0f, 2), rnd(OCC, 1.0f, 3),
	               rnd(BT * OCC, 1.0f, 4)};
	float *din = zeros(BT * CC), *dw = zeros(OCC * CC), *db = zeros(OCC);
	matmul_backward(din, dw, db, c.r, c.in, c.w, BT, CC, OCC);
	check_grad("d in", mm_loss, &c, c.in, din, BT * CC, 1e-2f, 1e-4, 1e-3);
	check_grad("d w", mm_loss, &c, c.w, dw, OCC * CC, 1e-2f, 1e-4, 1e-3);
	check_grad("d bias", mm_loss, &c, c.bias, db, OCC, 1e-2f, 1e-4, 1e-3);
	/* The weight gradient accumulates: a second call doubles it. */
	float first = dw[5];
	matmul_backward(NULL, dw, NULL, c.r, c.in, c.w, BT, CC, OCC);
	ck_assert_float_eq_tol(dw[5], 2.0f * first, 1e-5f * fabsf(first) + 1e-6f);
	free(c.out), free(c.in), free(c.w), free(c.bias), free(c.r), free(din), free(dw), free(db);
}
END_TEST

/* LoRA's branch over rows 2..4 of a base output of OCC rows (a part of
 * a fused q/k/v, as llama's v_proj's adapter), r 4, scaling 2 (alpha 8):
 * the loss Σ R·y of y = y0 + scaling·(x·Aᵀ)·Bᵀ on those rows. */
enum { LR = 4, LROW0 = 2, LOUT = 3 };
struct lo { float *y, *y0, *xa, *x, *A, *B, *r; };
static double lora_loss(void *p)
{
	struct lo *c = p;
	memcpy(c->y, c->y0, BB * TT * OCC * sizeof *c->y);
	lora_forward(c->y, c->xa, c->x, c->A, c->B, 2.0f, BB * TT, CC, LR, LOUT, OCC, LROW0, 0);
	return dotd(c->r, c->y, BB * TT * OCC);
}

START_TEST(test_lora_backward_matches_finite_differences)
{
	tfm_blas_init();
	size_t BT = BB * TT;
	struct lo c = {zeros(BT * OCC), rnd(BT * OCC, 1.0f, 11), zeros(BT * LR), rnd(BT * CC, 1.0f, 12),
	               rnd(LR * CC, 1.0f, 13), rnd(LOUT * LR, 1.0f, 14), rnd(BT * OCC, 1.0f, 15)};
	lora_loss(&c);
	/* the rows outside the adapter's are the base's, untouched */
	for (size_t i = 0; i < BT * OCC; i++)
		if (i % OCC < LROW0 || i % OCC >= LROW0 + LOUT)
			ck_assert_float_eq(c.y[i], c.y0[i]);
	/* dx holds the base layer's dx (here 1 everywhere): the adapter adds to it */
	float *dx = zeros(BT * CC), *dA = zeros(LR * CC), *dB = zeros(LOUT * LR), *dt = zeros(BT * LR);
	for (size_t i = 0; i < BT * CC; i++)
		dx[i] = 1.0f;
	lora_backward(dx, dA, dB, dt, c.r, c.x, c.xa, c.A, c.B, 2.0f, BT, CC, LR, LOUT, OCC, LROW0);
	for (size_t i = 0; i < BT * CC; i++)
		dx[i] -= 1.0f;
	check_grad("d x", lora_loss, &c, c.x, dx, BT * CC, 1e-2f, 1e-3, 1e-3);
	check_grad("d A", lora_loss, &c, c.A, dA, LR * CC, 1e-2f, 1e-3, 1e-3);
	check_grad("d B", lora_loss, &c, c.B, dB, LOUT * LR, 1e-2f, 1e-3, 1e-3);
	/* A's and B's gradients accumulate, as a weight's does */
	float a5 = dA[5], b5 = dB[5];
	lora_backward(NULL, dA, dB, dt, c.r, c.x, c.xa, c.A, c.B, 2.0f, BT, CC, LR, LOUT, OCC, LROW0);
	ck_assert_float_eq_tol(dA[5], 2.0f * a5, 1e-5f * fabsf(a5) + 1e-6f);
	ck_assert_float_eq_tol(dB[5], 2.0f * b5, 1e-5f * fabsf(b5) + 1e-6f);
	free(c.y), free(c.y0), free(c.xa), free(c.x), free(c.A), free(c.B), free(c.r);
	free(dx), free(dA), free(dB), free(dt);
}
END_TEST

struct nm { float *out, *mean, *rstd, *x, *w, *b, *r; int rms; };
static double norm_loss(void *p)
{
	struct nm *c = p;
	if (c->rms == 2) /* gemma's, by 1 + w */
		rmsnorm1p_forward(c->out, c->rstd, c->x, c->w, 1e-5f, BB * TT, CC);
	else if (c->rms)
		rmsnorm_forward(c->out, c->rstd, c->x, c->w, 1e-5f, BB * TT, CC);
	else
		layernorm_forward(c->out, c->mean, c->rstd, c->x, c->w, c->b, 1e-5f, BB * TT, CC);
	return dotd(c->r, c->out, BB * TT * CC);
}

static void check_norm(int rms)
{
	size_t BT = BB * TT;
	struct nm c = {zeros(BT * CC), zeros(BT), zeros(BT), rnd(BT * CC, 2.0f, 5), rnd(CC, 1.5f, 6),
	               rnd(CC, 1.0f, 7), rnd(BT * CC, 1.0f, 8), rms};
	norm_loss(&c);
	float *dx = zeros(BT * CC), *dw = zeros(CC), *db = zeros(CC);
	if (rms == 2)
		rmsnorm1p_backward(dx, dw, c.r, c.x, c.w, c.rstd, BT, CC);
	else if (rms)
		rmsnorm_backward(dx, dw, c.r, c.x, c.w, c.rstd, BT, CC);
	else
		layernorm_backward(dx, dw, db, c.r, c.x, c.w, c.mean, c.rstd, BT, CC);
	check_grad("d x", norm_loss, &c, c.x, dx, BT * CC, 1e-2f, 1e-4, 2e-3);
	check_grad("d w", norm_loss, &c, c.w, dw, CC, 1e-2f, 1e-4, 2e-3);
	if (!rms)
		check_grad("d b", norm_loss, &c, c.b, db, CC, 1e-2f, 1e-4, 2e-3);
	free(c.out), free(c.mean), free(c.rstd), free(c.x), free(c.w), free(c.b), free(c.r);
	free(dx), free(dw), free(db);
}

START_TEST(test_layernorm_backward_matches_finite_differences) { check_norm(0); }
END_TEST

START_TEST(test_rmsnorm_backward_matches_finite_differences) { check_norm(1); }
END_TEST

START_TEST(test_gemma_rmsnorm_backward_matches_finite_differences) { check_norm(2); }
END_TEST

/* Attention with grouped queries: 4 query heads on 2 key-value heads. */
enum { AH = 4, AKV = 2, AHD = 6, AQ = (AH + 2 * AKV) * AHD };
struct at { float *out, *att, *qkv, *work, *r; int rope; float *w, *pre, *rstd, *th, cap; int one_plus; };
static double att_loss(void *p)
{
	struct at *c = p;
	memcpy(c->work, c->qkv, BB * TT * AQ * sizeof *c->work);
	if (c->w != NULL) /* qwen3's (gemma3's, by 1 + w) q/k norms first */
		headnorm_forward(c->work, c->pre, c->rstd, c->w, 1e-5f, BB * TT, AH, AKV, AHD, c->one_plus);
	if (c->rope)
		rope_forward(c->work, 10000.0f, 1.0f, BB, TT, AH, AKV, AHD);
	if (c->cap > 0.0f) /* gemma2's: another scale, the scores soft-capped */
		attention_forward_capped(c->out, c->att, c->th, c->work, BB, TT, AH, AKV, AHD, 0.3f, c->cap);
	else
		attention_forward(c->out, c->att, c->work, BB, TT, AH, AKV, AHD);
	return dotd(c->r, c->out, BB * TT * AH * AHD);
}

static void check_attention(int rope, int qk_norm, float cap)
{
	size_t BT = BB * TT;
	struct at c = {zeros(BT * AH * AHD), zeros(BB * AH * TT * TT), rnd(BT * AQ, cap > 0.0f ? 3.0f : 1.0f, 9),
	               zeros(BT * AQ), rnd(BT * AH * AHD, 1.0f, 10), rope, NULL, NULL, NULL,
	               cap > 0.0f ? zeros(BB * AH * TT * TT) : NULL, cap, qk_norm == 2};
	if (qk_norm) { /* weights about 1 (1 + w: w about 0), not all alike */
		c.w = rnd(2 * AHD, 0.5f, 11);
		for (size_t i = 0; i < 2 * AHD && qk_norm == 1; i++)
			c.w[i] += 1.0f;
		c.pre = zeros(BT * (AH + AKV) * AHD);
		c.rstd = zeros(BT * (AH + AKV));
	}
	att_loss(&c);
	/* Causal: nothing above the diagonal, every row a distribution. */
	for (size_t row = 0; row < BB * AH * TT; row++) {
		size_t t = row % TT;
		double sum = 0.0;
		for (size_t t2 = 0; t2 < TT; t2++) {
			if (t2 > t)
				ck_assert_float_eq(c.att[row * TT + t2], 0.0f);
			sum += c.att[row * TT + t2];
		}
		ck_assert_double_eq_tol(sum, 1.0, 1e-6);
	}
	float *dqkv = zeros(BT * AQ), *scratch = zeros(TT * TT);
	if (cap > 0.0f)
		attention_backward_capped(dqkv, scratch, c.r, c.work, c.att, c.th, BB, TT, AH, AKV, AHD, 0.3f);
	else
		attention_backward(dqkv, scratch, c.r, c.work, c.att, BB, TT, AH, AKV, AHD);
	if (rope)
		rope_backward(dqkv, 10000.0f, 1.0f, BB, TT, AH, AKV, AHD);
	float *dw = zeros(2 * AHD);
	if (qk_norm)
		headnorm_backward(dqkv, dw, c.pre, c.w, c.rstd, BT, AH, AKV, AHD, c.one_plus);
	check_grad("d qkv", att_loss, &c, c.qkv, dqkv, BT * AQ, 1e-2f, 1e-4, 2e-3);
	if (qk_norm)
		check_grad("d q_norm, k_norm", att_loss, &c, c.w, dw, 2 * AHD, 1e-2f, 1e-4, 2e-3);
	free(c.out), free(c.att), free(c.qkv), free(c.work), free(c.r), free(dqkv), free(scratch), free(dw);
	free(c.w), free(c.pre), free(c.rstd), free(c.th);
}

START_TEST(test_attention_backward_matches_finite_differences) { check_attention(0, 0, 0.0f); }
END_TEST

START_TEST(test_rope_attention_backward_matches_finite_differences) { check_attention(1, 0, 0.0f); }
END_TEST

/* Gemma 2's: scores scaled by 0.3 and soft-capped at 2 (the scores of
 * ±3-sized q and k reach well into tanh's bend). */
START_TEST(test_softcapped_attention_backward_matches_finite_differences) { check_attention(1, 0, 2.0f); }
END_TEST

/* Qwen3's RMSNorm on each query and key head, then rope and attention. */
START_TEST(test_qk_norm_rope_attention_backward_matches_finite_differences) { check_attention(1, 1, 0.0f); }
END_TEST

/* Gemma 3's: the same norm by 1 + w (Gemma3RMSNorm), soft-capped at 2. */
START_TEST(test_gemma3_qk_norm_attention_backward_matches_finite_differences) { check_attention(1, 2, 2.0f); }
END_TEST

START_TEST(test_rope_keeps_norms_and_position_zero)
{
	/* A rotation: each pair keeps its length, position 0 is unchanged,
	 * the values (the last 2 heads of a row) are untouched. */
	size_t BT = BB * TT;
	float *x = rnd(BT * AQ, 1.0f, 11), *y = malloc(BT * AQ * sizeof *y);
	memcpy(y, x, BT * AQ * sizeof *y);
	rope_forward(y, 10000.0f, 1.0f, BB, TT, AH, AKV, AHD);
	for (size_t r = 0; r < BT; r++)
		for (size_t h = 0; h < AH + 2 * AKV; h++)
			for (size_t i = 0; i < AHD / 2; i++) {
				const float *a = x + r * AQ + h * AHD, *b = y + r * AQ + h * AHD;
				double na = hypot(a[i], a[i + AHD / 2]), nb = hypot(b[i], b[i + AHD / 2]);
				ck_assert_double_eq_tol(na, nb, 1e-5);
				if (r % TT == 0 || h >= AH + AKV)
					ck_assert_float_eq(a[i], b[i]);
			}
	free(x), free(y);
}
END_TEST

struct act { float *out, *in, *r; int swiglu; };
static double act_loss(void *p)
{
	struct act *c = p;
	if (c->swiglu == 2) /* gemma's GeGLU */
		geglu_forward(c->out, c->in, BB * TT, CC);
	else if (c->swiglu)
		swiglu_forward(c->out, c->in, BB * TT, CC);
	else
		gelu_forward(c->out, c->in, BB * TT * CC);
	return dotd(c->r, c->out, BB * TT * CC);
}

static void check_activation(int swiglu)
{
	size_t BT = BB * TT, nin = BT * CC * (swiglu ? 2 : 1);
	struct act c = {zeros(BT * CC), rnd(nin, 3.0f, 12), rnd(BT * CC, 1.0f, 13), swiglu};
	float *din = zeros(nin);
	if (swiglu == 2)
		geglu_backward(din, c.r, c.in, BT, CC);
	else if (swiglu)
		swiglu_backward(din, c.r, c.in, BT, CC);
	else
		gelu_backward(din, c.r, c.in, BT * CC);
	check_grad("d in", act_loss, &c, c.in, din, nin, 1e-2f, 1e-4, 2e-3);
	free(c.out), free(c.in), free(c.r), free(din);
}

START_TEST(test_gelu_backward_matches_finite_differences) { check_activation(0); }
END_TEST

START_TEST(test_swiglu_backward_matches_finite_differences) { check_activation(1); }
END_TEST

START_TEST(test_geglu_backward_matches_finite_differences) { check_activation(2); }
END_TEST

START_TEST(test_gelu_is_gpt2s_tanh_form)
{
	/* 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))) at x = 1, worked in
	 * double by hand: 0.841191990... (the erf form gives 0.841344746). */
	float x = 1.0f, y;
	gelu_forward(&y, &x, 1);
	ck_assert_double_eq_tol(y, 0.8411919906, 1e-6);
}
END_TEST

/* The GELU kernels run eight lanes of their own tanh (tfm_kernels.c),
 * which must be libm's tanhf bit for bit, or every gpt2 digest would
 * move: the kernels against the scalar formula with tanhf, on a sample
 * of every float (one bit pattern in 251, both signs: zeros, subnormals,
 * the tanh's every range, infinities and NaNs), each batch of 4099 (so
 * that the scalar tail runs too). A libm whose tanhf is not fdlibm's
 * (glibc 2.41 on: CORE-MATH's, correctly rounded) is no reference: the
 * kernels keep glibc 2.36's bits, so there the test says so and checks
 * nothing. (The whole range the lanes compute, 2^-55 <= |u| < 22, was
 * checked once, every float.) */
static uint32_t bits_of(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

START_TEST(test_gelu_kernels_are_libms_tanhf_bit_for_bit)
{
	enum { N = 4099 };
	static float x[N], y[N], dy[N], dx[N];
	size_t bad = 0, n = 0;
	unsigned major = 0, minor = 0;
	if (sscanf(gnu_get_libc_version(), "%u.%u", &major, &minor) != 2 || major != 2 || minor > 40) {
		fprintf(stderr, "glibc %s's tanhf is not fdlibm's: the GELU kernels are not compared with it\n",
		        gnu_get_libc_version());
		return;
	}
	for (uint64_t b = 0; b < ((uint64_t)1 << 32); b += (uint64_t)N * 251) {
		for (size_t i = 0; i < N; i++) {
			uint32_t u = (uint32_t)(b + i * 251);
			memcpy(&x[i], &u, sizeof u);
			dy[i] = 1.0f + (float)(i % 7) * 0.25f;
		}
		gelu_forward(y, x, N);
		gelu_backward(dx, dy, x, N);
		for (size_t i = 0; i < N; i++, n++) {
			float v = x[i], u = 0.7978845608028654f * (v + 0.044715f * v * v * v), th = tanhf(u);
			float fy = 0.5f * v * (1.0f + th), sech2 = 1.0f - th * th;
			float local = 0.5f * (1.0f + th) + 0.5f * v * sech2 * 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * v * v);
			float fdx = local * dy[i];
			int same = (bits_of(fy) == bits_of(y[i]) || (isnan(fy) && isnan(y[i]))) &&
			           (bits_of(fdx) == bits_of(dx[i]) || (isnan(fdx) && isnan(dx[i])));
			if (!same && bad++ < 5)
				fprintf(stderr, "gelu(%a): %a, %a; tanhf's %a, %a\n", (double)v, (double)y[i], (double)dx[i],
				        (double)fy, (double)fdx);
		}
	}
	ck_assert_uint_gt(n, 16000000);
	ck_assert_uint_eq(bad, 0);
}
END_TEST

enum { EV = 9 };
struct em { float *out, *wte, *wpe, *r; int *tok; };
static double embed_loss(void *p)
{
	struct em *c = p;
	embed_forward(c->out, c->tok, c->wte, c->wpe, BB * TT, TT, CC);
	return dotd(c->r, c->out, BB * TT * CC);
}

START_TEST(test_embedding_backward_matches_finite_differences)
{
	size_t BT = BB * TT;
	int tok[BB * TT] = {3, 1, 4, 1, 5, 8, 2, 6, 5, 3};
	struct em c = {zeros(BT * CC), rnd(EV * CC, 1.0f, 14), rnd(TT * CC, 1.0f, 15), rnd(BT * CC, 1.0f, 16), tok};
	float *dwte = zeros(EV * CC), *dwpe = zeros(TT * CC);
	embed_backward(dwte, dwpe, c.r, c.tok, BT, TT, CC, 0);
	check_grad("d wte", embed_loss, &c, c.wte, dwte, EV * CC, 1e-2f, 1e-4, 1e-3);
	check_grad("d wpe", embed_loss, &c, c.wpe, dwpe, TT * CC, 1e-2f, 1e-4, 1e-3);
	/* nn.Embedding's padding_idx (token 5, twice in tok): its row takes
	 * no gradient, every other row the same as without it */
	float *dpad = zeros(EV * CC), *dwpe2 = zeros(TT * CC);
	embed_backward(dpad, dwpe2, c.r, c.tok, BT, TT, CC, 5 + 1);
	for (size_t v = 0; v < EV; v++)
		for (size_t i = 0; i < CC; i++)
			ck_assert_float_eq(dpad[v * CC + i], v == 5 ? 0.0f : dwte[v * CC + i]);
	ck_assert_float_ne(dwte[5 * CC], 0.0f);
	ck_assert_mem_eq(dwpe2, dwpe, TT * CC * sizeof *dwpe);
	free(dpad), free(dwpe2);
	free(c.out), free(c.wte), free(c.wpe), free(c.r), free(dwte), free(dwpe);
}
END_TEST

struct ce { float *logits, *work; const int *target; float cap; };
static double ce_loss(void *p)
{
	struct ce *c = p;
	memcpy(c->work, c->logits, BB * TT * EV * sizeof *c->work);
	if (c->cap > 0.0f) { /* gemma2's final soft-cap, then the loss */
		softcap_forward(c->work, c->cap, BB * TT * EV);
		return crossentropy_capped_forward_backward(c->work, c->target, BB * TT, EV, c->cap);
	}
	return crossentropy_forward_backward(c->work, c->target, BB * TT, EV);
}

/* The soft-capped logits' loss, its gradient taken to the uncapped
 * logits through cap·tanh(z / cap) (cap 3: logits of ±4 bend it). */
START_TEST(test_softcapped_crossentropy_backward_matches_finite_differences)
{
	size_t BT = BB * TT;
	int target[BB * TT] = {0, 8, 4, 1, 5, 8, 2, 6, 7, 3};
	struct ce c = {rnd(BT * EV, 4.0f, 17), zeros(BT * EV), target, 3.0f};
	float *g = zeros(BT * EV);
	memcpy(g, c.logits, BT * EV * sizeof *g);
	softcap_forward(g, 3.0f, BT * EV);
	crossentropy_capped_forward_backward(g, target, BT, EV, 3.0f);
	check_grad("d logits", ce_loss, &c, c.logits, g, BT * EV, 1e-2f, 5e-5, 2e-3);
	free(c.logits), free(c.work), free(g);
}
END_TEST

START_TEST(test_crossentropy_backward_matches_finite_differences)
{
	size_t BT = BB * TT;
	int target[BB * TT] = {0, 8, 4, 1, 5, 8, 2, 6, 7, 3};
	struct ce c = {rnd(BT * EV, 4.0f, 17), zeros(BT * EV), target, 0.0f};
	float *g = zeros(BT * EV);
	memcpy(g, c.logits, BT * EV * sizeof *g);
	float loss = crossentropy_forward_backward(g, target, BT, EV);
	/* The mean of -log softmax[target], worked here in double. */
	double want = 0.0;
	for (size_t r = 0; r < BT; r++) {
		double s = 0.0;
		for (size_t i = 0; i < EV; i++)
			s += exp((double)c.logits[r * EV + i]);
		want -= (double)c.logits[r * EV + (size_t)target[r]] - log(s);
	}
	ck_assert_double_eq_tol(loss, want / (double)BT, 1e-5);
	check_grad("d logits", ce_loss, &c, c.logits, g, BT * EV, 1e-2f, 5e-5, 2e-3);
	free(c.logits), free(c.work), free(g);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* The whole model */

static struct tfm_dims tiny(enum tfm_family f, int tied)
{
	struct tfm_dims d = {f, 16, 2, 4, f == TFM_LLAMA ? 2 : 4, 4, f == TFM_LLAMA ? 24 : 64, 32, 8, tied,
	                     1e-5f, 10000.0f, 0, 0, 0, 0, 0, 0.0f, 0.0f, 0.0f, 0, 0.0f, 0, 0, 0, 0, 0, 0.0f};
	return d;
}

struct md { struct tfm_driver *m; const int *in, *target; };
static double model_loss(void *p)
{
	struct md *c = p;
	return tfm_driver_loss(c->m, c->in, c->target);
}

/* The model's gradient against finite differences at the first, the last
 * and 7 elements spread between them (the middle one among them) of one
 * tensor, so that no tensor, however small beside its neighbours, goes
 * unsampled. The difference is Richardson's, (4·D(h/2) − D(h))/3 at
 * h = 4e-3: the test's large weights curve some paths strongly (llama's
 * untied qkv_w[447]: D(h) is −0.6555 at 4e-3 and −0.7627 at 1e-3 where
 * the backward gives −0.7698; Richardson's −0.7692), and a small h alone
 * drowns the small gradients in the float loss's rounding (2.4e-7, so
 * steps of 1.2e-4 in D at h = 1e-3). Over the 774 elements the four
 * models sample, the worst error was 0.38 of the tolerance, against 1.6
 * for D(1e-3) and 0.8 for Richardson from h = 2e-3. Returns n, the
 * elements the tensor covers. */
static size_t check_tensor(struct md *c, const char *what, size_t layer, const float *x0, size_t n, const float *g)
{
	enum { K = 9 };
	const float h = 4e-3f;
	float *x = c->m->params;
	size_t off = (size_t)(x0 - x);
	char name[128];
	snprintf(name, sizeof name, "%s (layer %zu)", what, layer);
	for (size_t k = 0; k < (n < K ? n : K); k++) {
		size_t i = off + (n <= K ? k : k * (n - 1) / (K - 1));
		double num = (4.0 * central(model_loss, c, x, i, h / 2) - central(model_loss, c, x, i, h)) / 3.0;
		check_at(name, i - off, num, g[i], 5e-4, 5e-3);
	}
	return n;
}

/* Qwen2's shape: llama's with biases on q, k and v. */
static struct tfm_dims tiny_qwen2(int tied)
{
	struct tfm_dims d = tiny(TFM_LLAMA, tied);
	d.qkv_bias = 1;
	return d;
}

/* Qwen3's: llama's with q_norm and k_norm, and a head_dim apart from
 * d / H (6 x 4 heads over a width of 16). */
static struct tfm_dims tiny_qwen3(int tied)
{
	struct tfm_dims d = tiny(TFM_LLAMA, tied);
	d.qk_norm = 1;
	d.head_dim = 6;
	return d;
}

/* Gemma 2's: the norms by 1 + w before and after attention and the MLP,
 * GeGLU, the embedding by √d, the scores scaled by 1/√24 and soft-capped
 * at 3, the logits at 2 (small caps, so that tanh bends), tied. */
static struct tfm_dims tiny_gemma2(void)
{
	struct tfm_dims d = tiny(TFM_LLAMA, 1);
	d.gemma = 1;
	d.head_dim = 6;
	d.attn_scalar = 24.0f;
	d.attn_softcap = 3.0f;
	d.final_softcap = 2.0f;
	return d;
}

/* Gemma 3's: gemma2's with q_norm and k_norm by 1 + w, block 0 sliding
 * (rotated by rope_local_theta 10000), block 1 global (rope_theta 100,
 * far from it), both caps set (Gemma 3's are optional). */
static struct tfm_dims tiny_gemma3(void)
{
	struct tfm_dims d = tiny_gemma2();
	d.qk_norm = 1;
	d.window_pattern = 2;
	d.rope_theta = 100.0f;
	d.rope_local_theta = 10000.0f;
	return d;
}

static void check_model_dims(struct tfm_dims d)
{
	int tied = d.tied;
	ck_assert_int_eq(tfm_dims_check(&d, NULL), 0);
	struct tfm_driver m;
	tfm_driver_init(&m, &d, 2, 8, ZS_RECOMPUTE_NONE);
	/* Larger weights than the seed's (×2.5 and ×5 alternately), so that
	 * every path carries a gradient well above the finite difference's
	 * rounding, and the weights are not all alike. */
	tfm_init_weights(m.params, &d, 7);
	for (size_t i = 0; i < m.nparams; i++)
		m.params[i] *= 5.0f * (i % 2 ? 1.0f : 0.5f);
	/* The q/k norms' weights about 1 (0.5 and 1): at ×5 the scores they
	 * scale saturate the softmax, where no difference step is small enough */
	for (size_t l = 1; d.qk_norm && l <= d.layers; l++) {
		float *slot[TFM_SLOTS];
		tfm_layer_slots(slot, &m.layout, l, m.params);
		for (size_t i = 0; i < 2 * d.head_dim; i++)
			slot[4][i] = i % 2 ? 1.0f : 0.5f;
	}
	struct tfm_task task;
	int in[16], target[16];
	tfm_task_init(&task, d.vocab, 7);
	tfm_task_batch(in, target, &task, 7, 0, 0, 2, 8);
	tfm_driver_step(&m, in, target);
	float *g = malloc(m.nparams * sizeof *g);
	memcpy(g, m.grads, m.nparams * sizeof *g);
	struct md c = {&m, in, target};
	/* Every tensor on its own, where the views find it (each layer's
	 * slots, from the step description's modules): together they must
	 * cover the whole flat vector (a tied head's table is the
	 * embedding's, checked there). */
	const struct step_params *p = &m.layout;
	size_t covered = 0;
	for (size_t l = 0; l < p->nlayers; l++) {
		float *slot[TFM_SLOTS];
		tfm_layer_slots(slot, p, l, m.params);
		for (size_t i = 0, s = 0; i < p->nmodules; i++) {
			const struct step_module *md = &p->module[i];
			if (md->layer != l)
				continue;
			for (size_t k = 0; k < md->n; k++) {
				char name[96];
				if (tied && l + 1 == p->nlayers && md->first == 0)
					continue;
				step_tensor_name(p, md->first + k, name, sizeof name);
				covered += check_tensor(&c, name, l, slot[2 * s + k], p->tensor[md->first + k].numel, g);
			}
			s++;
		}
	}
	ck_assert_uint_eq(covered, m.nparams);
	free(g);
	tfm_task_free(&task);
	tfm_driver_free(&m);
}

static void check_model(enum tfm_family f, int tied) { check_model_dims(tiny(f, tied)); }

START_TEST(test_gpt2_gradient_matches_finite_differences) { check_model(TFM_GPT2, 1); }
END_TEST

START_TEST(test_gpt2_untied_gradient_matches_finite_differences) { check_model(TFM_GPT2, 0); }
END_TEST

START_TEST(test_llama_gradient_matches_finite_differences) { check_model(TFM_LLAMA, 0); }
END_TEST

START_TEST(test_llama_tied_gradient_matches_finite_differences) { check_model(TFM_LLAMA, 1); }
END_TEST

/* Qwen2's biased q, k and v projections (and every other tensor). */
START_TEST(test_qwen2_gradient_matches_finite_differences) { check_model_dims(tiny_qwen2(1)); }
END_TEST

/* Qwen3's q_norm and k_norm (and every other tensor), both ties. */
START_TEST(test_qwen3_gradient_matches_finite_differences)
{
	check_model_dims(tiny_qwen3(0));
	check_model_dims(tiny_qwen3(1));
}
END_TEST

/* Recompute changes what is kept, never a bit of the result: the loss
 * and the gradient equal the kept run's, and the tensors kept shrink by
 * what docs/schedule.md says: selective keeps one softmax (B·H·T², and
 * one tanh of soft-capped scores) for all blocks, full one block's tensors plus each block's output. */
static void check_recompute_dims(struct tfm_dims d)
{
	const size_t B = 2, T = 8, L = d.layers;
	struct tfm_driver m[3];
	float loss[3];
	struct tfm_task task;
	int in[16], target[16];
	tfm_task_init(&task, d.vocab, 9);
	tfm_task_batch(in, target, &task, 9, 0, 0, B, T);
	for (int r = 0; r < 3; r++) {
		tfm_driver_init(&m[r], &d, B, T, (enum zs_recompute)r);
		tfm_init_weights(m[r].params, &d, 9);
		loss[r] = tfm_driver_step(&m[r], in, target);
	}
	size_t block = 0, el[STEP_NACTS], sc[STEP_NSCRATCH];
	tfm_driver_sizes(&d, B, T, el, sc);
	for (int a = 0; a < STEP_NBLOCK_ACTS; a++)
		block += el[a];
	/* selective: with soft-capped scores their tanh (B·H·T²) too */
	size_t att = B * d.heads * T * T * (d.attn_softcap > 0.0f ? 2 : 1), res3 = B * T * d.d;
	ck_assert_uint_eq(m[1].act_elems, m[0].act_elems - (L - 1) * att);
	ck_assert_uint_eq(m[2].act_elems, m[0].act_elems - (L - 1) * (block - res3));
	for (int r = 1; r < 3; r++) {
		ck_assert(memcmp(&loss[r], &loss[0], sizeof loss[0]) == 0);
		ck_assert(memcmp(m[r].grads, m[0].grads, m[0].nparams * sizeof *m[0].grads) == 0);
	}
	for (int r = 0; r < 3; r++)
		tfm_driver_free(&m[r]);
	tfm_task_free(&task);
}

static void check_recompute(enum tfm_family f) { check_recompute_dims(tiny(f, f == TFM_GPT2)); }

START_TEST(test_gpt2_recompute_gives_the_same_bits) { check_recompute(TFM_GPT2); }
END_TEST

START_TEST(test_llama_recompute_gives_the_same_bits) { check_recompute(TFM_LLAMA); }
END_TEST

START_TEST(test_qwen3_recompute_gives_the_same_bits) { check_recompute_dims(tiny_qwen3(0)); }
END_TEST

START_TEST(test_gemma2_gradient_matches_finite_differences) { check_model_dims(tiny_gemma2()); }
END_TEST

START_TEST(test_gemma3_gradient_matches_finite_differences) { check_model_dims(tiny_gemma3()); }
END_TEST

START_TEST(test_gemma3_recompute_gives_the_same_bits) { check_recompute_dims(tiny_gemma3()); }
END_TEST

/* The rotary bases reach the numbers: block 0 slides (the local base),
 * block 1 is global; swapping the bases changes the loss. */
START_TEST(test_gemma3_blocks_rotate_by_their_own_base)
{
	struct tfm_dims d = tiny_gemma3();
	ck_assert_float_eq(tfm_rope_theta(&d, 0), 10000.0f);
	ck_assert_float_eq(tfm_rope_theta(&d, 1), 100.0f);
	ck_assert_float_eq(tfm_rope_theta(&d, 2), 10000.0f);
	struct tfm_dims e = d;
	e.rope_theta = d.rope_local_theta;
	e.rope_local_theta = d.rope_theta;
	const size_t B = 2, T = 8;
	struct tfm_driver m, n;
	tfm_driver_init(&m, &d, B, T, ZS_RECOMPUTE_NONE);
	tfm_driver_init(&n, &e, B, T, ZS_RECOMPUTE_NONE);
	tfm_init_weights(m.params, &d, 5);
	tfm_init_weights(n.params, &e, 5);
	int in[16], target[16];
	for (size_t i = 0; i < B * T; i++)
		in[i] = (int)((7 * i + 3) % d.vocab), target[i] = (int)((5 * i + 1) % d.vocab);
	float a = tfm_driver_loss(&m, in, target), b = tfm_driver_loss(&n, in, target);
	ck_assert_msg(a != b, "the same loss %.9g with the bases swapped", (double)a);
	tfm_driver_free(&m);
	tfm_driver_free(&n);
}
END_TEST

START_TEST(test_parameter_counts_are_gpt2_smalls_and_llamas)
{
	/* GPT-2 small: 124,439,808 parameters with the tied head (Hugging
	 * Face's gpt2 model card; llm.c prints the same with V = 50257). */
	struct tfm_dims g = {TFM_GPT2, 768, 12, 12, 12, 64, 3072, 50257, 1024, 1, 1e-5f, 0.0f, 0, 0, 0, 0, 0, 0.0f, 0.0f, 0.0f, 0, 0.0f, 0, 0, 0, 0, 0, 0.0f};
	ck_assert_int_eq(tfm_dims_check(&g, NULL), 0);
	ck_assert_uint_eq(tfm_nparams(&g), 124439808);
	/* TinyLlama-1.1B (d 2048, 22 layers, 32 heads, 4 kv heads, F 5632,
	 * V 32000, untied): 1,100,048,384 parameters (its model card). */
	struct tfm_dims l = {TFM_LLAMA, 2048, 22, 32, 4, 64, 5632, 32000, 2048, 0, 1e-5f, 10000.0f, 0, 0, 0, 0, 0, 0.0f, 0.0f, 0.0f, 0, 0.0f, 0, 0, 0, 0, 0, 0.0f};
	ck_assert_int_eq(tfm_dims_check(&l, NULL), 0);
	ck_assert_uint_eq(tfm_nparams(&l), 1100048384);
}
END_TEST

/* The few lines that turn a Hugging Face shape (util/model.h, the config
 * reader) into the engine's dimensions. */
static struct tfm_dims dims_of(const struct zs_model *z)
{
	struct tfm_dims d;
	tfm_dims_from_config(&d, z);
	return d;
}

START_TEST(test_layout_units_are_the_theorys_for_every_shipped_model)
{
	/* The theory counts each unit from the model's config (the step
	 * description it builds); the engine lays its flat vector out from
	 * the description of its own dims (tfm_params), which must be the
	 * same ranges, or ZeRO-3's gathers would not be the theory's. */
	static const char *const names[] = {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "llama-2-7b",
	                                    "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b",
	                                    "mistral-7b", "qwen2.5-0.5b"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		struct zs_model z;
		char *cause = NULL;
		ck_assert_msg(zs_model_load(names[i], &z, &cause) == 0, "%s: %s", names[i], cause ? cause : "?");
		struct tfm_dims d = dims_of(&z);
		ck_assert_int_eq(tfm_dims_check(&d, NULL), 0);
		struct theory_units u;
		theory_tfm_units(&z, &u);
		/* The engine builds its layout from its dims (tfm_params): the
		 * same layers as the config's own description. */
		struct step_params p, q;
		tfm_params(&p, &d);
		step_params_build(&q, &z);
		ck_assert_uint_eq(p.nlayers, q.nlayers);
		for (size_t l = 0; l < p.nlayers; l++) {
			ck_assert_uint_eq(p.layer[l].offset, q.layer[l].offset);
			ck_assert_uint_eq(p.layer[l].numel, q.layer[l].numel);
		}
		ck_assert_uint_eq(u.embeddings, p.layer[0].numel);
		ck_assert_uint_eq(u.block, p.layer[1].numel);
		ck_assert_uint_eq(u.head, d.tied ? 0 : p.layer[d.layers + 1].numel);
		ck_assert_uint_eq(theory_tfm_params(&z), tfm_nparams(&d));
		step_params_free(&p);
		step_params_free(&q);
	}
}
END_TEST

START_TEST(test_bad_shapes_are_refused)
{
	struct tfm_dims d = tiny(TFM_LLAMA, 0);
	char *cause = NULL;
	d.kv_heads = 3;
	ck_assert_int_eq(tfm_dims_check(&d, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "not a multiple"));
	free(cause);
	d = tiny(TFM_LLAMA, 0);
	d.head_dim = 5;
	ck_assert_int_eq(tfm_dims_check(&d, NULL), -1);
	d = tiny(TFM_GPT2, 1);
	d.kv_heads = 2;
	ck_assert_int_eq(tfm_dims_check(&d, NULL), -1);
	d.kv_heads = 4;
	d.vocab = 0;
	ck_assert_int_eq(tfm_dims_check(&d, NULL), -1);
}
END_TEST

/* 100 Adam steps at lr 3e-3 on the seed's task with a 64-token
 * vocabulary, a fresh batch each step: the mean loss of the last ten steps
 * must be under a third of the first step's (ln 64 = 4.16 at the start). */
static void check_training(enum tfm_family f)
{
	struct tfm_dims d = {f, 32, 2, 4, f == TFM_LLAMA ? 2 : 4, 8, f == TFM_LLAMA ? 88 : 128, 64, 16,
	                     f == TFM_GPT2, 1e-5f, 10000.0f, 0, 0, 0, 0, 0, 0.0f, 0.0f, 0.0f, 0, 0.0f, 0, 0, 0, 0, 0, 0.0f};
	const size_t B = 2, T = 16, steps = 100;
	struct tfm_driver m;
	tfm_driver_init(&m, &d, B, T, ZS_RECOMPUTE_NONE);
	tfm_init_weights(m.params, &d, 3);
	float *mo = zeros(m.nparams), *v = zeros(m.nparams);
	struct optim o;
	optim_init(&o, ZS_ADAM, 3e-3);
	struct tfm_task task;
	tfm_task_init(&task, d.vocab, 3);
	int in[32], target[32];
	double first = 0.0, last = 0.0;
	for (size_t s = 0; s < steps; s++) {
		tfm_task_batch(in, target, &task, 3, s, 0, B, T);
		float loss = tfm_driver_step(&m, in, target);
		ck_assert(isfinite(loss));
		if (s == 0)
			first = loss;
		if (s >= steps - 10)
			last += loss / 10.0;
		optim_update(&o, (unsigned)s + 1, m.params, mo, v, m.grads, ZS_F32, NULL, m.nparams);
	}
	ck_assert_double_eq_tol(first, log(64.0), 0.1);
	ck_assert_msg(last < first / 3.0, "loss %.4f after 100 steps, %.4f at the first", last, first);
	if (getenv("TFM_VERBOSE") != NULL)
		printf("%s: loss %.4f at the first step, %.4f over the last ten\n", f == TFM_GPT2 ? "gpt2" : "llama",
		       first, last);
	free(mo), free(v);
	tfm_task_free(&task);
	tfm_driver_free(&m);
}

START_TEST(test_gpt2_loss_falls_on_the_synthetic_task) { check_training(TFM_GPT2); }
END_TEST

START_TEST(test_llama_loss_falls_on_the_synthetic_task) { check_training(TFM_LLAMA); }
END_TEST

START_TEST(test_task_is_a_permutation_and_targets_are_next_tokens)
{
	struct tfm_task task;
	tfm_task_init(&task, 256, 5);
	int seen[256] = {0};
	for (size_t i = 0; i < 256; i++)
		seen[task.perm[i]]++;
	for (size_t i = 0; i < 256; i++)
		ck_assert_int_eq(seen[i], 1);
	int in[2 * 32], target[2 * 32], in2[2 * 32], t2[2 * 32];
	tfm_task_batch(in, target, &task, 5, 3, 1, 2, 32);
	for (size_t b = 0; b < 2; b++)
		for (size_t t = 0; t + 1 < 32; t++)
			ck_assert_int_eq(target[b * 32 + t], in[b * 32 + t + 1]);
	tfm_task_batch(in2, t2, &task, 5, 4, 1, 2, 32);
	ck_assert(in2[0] != in[0] || in2[32] != in[32]); /* another step, other sequences */
	tfm_task_free(&task);
}
END_TEST

/* ------------------------------------------------------------------------- */
/* The transformer in the engine (tfm_net.c's layer list, engine.c's driver) */

static struct zs_config engine_config_dims(struct zs_tfm_run *tr, struct tfm_dims d, enum zs_recompute rc)
{
	struct zs_config c;
	zs_config_defaults(&c);
	memset(tr, 0, sizeof *tr);
	tr->dims = d;
	tr->seq = 8;
	tr->recompute = rc;
	c.tfm = tr;
	c.precision = ZS_FP32;
	c.batch = 2;
	c.steps = 3;
	c.lr = 3e-3;
	return c;
}

static struct zs_config engine_config(struct zs_tfm_run *tr, enum tfm_family f, int tied, enum zs_recompute rc)
{
	return engine_config_dims(tr, tiny(f, tied), rc);
}

static struct zs_result engine(const struct zs_config *c, enum zs_scheme s, unsigned n, enum zs_unit u)
{
	struct zs_result res;
	struct zs_run_options opt = {.weights = 1};
	char *cause = NULL;
	ck_assert_msg(engine_run(c, s, n, u, NULL, &opt, &res, &cause) == 0, "%s", cause ? cause : "?");
	return res;
}

/* One rank of the engine trains as tfm_driver does (the model the
 * finite-difference and PyTorch checks hold): the same losses and the
 * same final bits, for each family, tied or not, in each recompute mode
 * and unit mode. */
static void check_engine_is_the_model(enum tfm_family f, int tied)
{
	for (int rc = 0; rc < 3; rc++)
		for (int u = 0; u < ZS_NUNITS; u++) {
			struct zs_tfm_run tr;
			struct zs_config c = engine_config(&tr, f, tied, (enum zs_recompute)rc);
			struct zs_result res = engine(&c, ZS_DP, 1, (enum zs_unit)u);
			size_t B = c.batch, T = tr.seq;
			struct tfm_driver m;
			tfm_driver_init(&m, &tr.dims, B, T, ZS_RECOMPUTE_NONE);
			tfm_init_weights(m.params, &tr.dims, c.seed);
			float *mo = zeros(m.nparams), *v = zeros(m.nparams);
			struct optim o;
			optim_init(&o, ZS_ADAM, c.lr);
			o.beta1 = (float)c.beta1, o.beta2 = (float)c.beta2, o.eps = (float)c.eps;
			struct tfm_task task;
			tfm_task_init(&task, tr.dims.vocab, c.seed);
			int in[16], target[16];
			for (unsigned s = 0; s < c.steps; s++) {
				tfm_task_batch(in, target, &task, c.seed, s, 0, B, T);
				float loss = tfm_driver_step(&m, in, target);
				ck_assert_msg(memcmp(&loss, &res.losses[s], sizeof loss) == 0, "step %u: loss %.9g, engine %.9g",
				              s, (double)loss, (double)res.losses[s]);
				optim_update(&o, s + 1, m.params, mo, v, m.grads, ZS_F32, NULL, m.nparams);
			}
			ck_assert_msg(memcmp(m.params, res.weights, m.nparams * sizeof *m.params) == 0,
			              "%s%s, recompute %s, unit %s: the engine's weights differ from tfm_driver's",
			              f == TFM_GPT2 ? "gpt2" : "llama", tied ? " tied" : "", zs_recompute_name(tr.recompute),
			              zs_unit_name((enum zs_unit)u));
			free(mo), free(v);
			tfm_task_free(&task);
			tfm_driver_free(&m);
			engine_result_free(&res);
		}
}

START_TEST(test_engine_trains_gpt2_as_the_model_does) { check_engine_is_the_model(TFM_GPT2, 1); }
END_TEST

START_TEST(test_engine_trains_llama_as_the_model_does) { check_engine_is_the_model(TFM_LLAMA, 0); }
END_TEST

START_TEST(test_engine_trains_tied_llama_as_the_model_does) { check_engine_is_the_model(TFM_LLAMA, 1); }
END_TEST

/* One digest per N across the four schemes (the paper's and torch's),
 * both unit modes and the three recompute modes; recomputing holds fewer
 * activation bytes at the peak, full fewer than selective. */
static void check_one_digest_dims(struct tfm_dims d, enum zs_precision prec)
{
	/* make valgrind (tests/valgrind_case.sh sets ZS_TEST_MEMCHECK) takes
	 * N = 3 alone, several uneven ranks, memcheck running ~40 times
	 * slower: make check takes every N, in the plain and sanitizer builds */
	static const unsigned every[] = {2, 3, 8}, memcheck[] = {3};
	const int small = getenv("ZS_TEST_MEMCHECK") != NULL;
	const unsigned *worlds = small ? memcheck : every;
	const size_t nworlds = small ? sizeof memcheck / sizeof *memcheck : sizeof every / sizeof *every;
	for (size_t w = 0; w < nworlds; w++) {
		uint64_t digest = 0;
		size_t acts[3] = {0};
		for (int rc = 0; rc < 3; rc++)
			for (int u = 0; u < ZS_NUNITS; u++)
				for (int fw = 0; fw < 2; fw++) {
					if (fw == 1 && rc != 0)
						continue; /* torch's hooks once; their bits are the paper's */
					struct zs_tfm_run tr;
					struct zs_config c = engine_config_dims(&tr, d, (enum zs_recompute)rc);
					c.steps = 2;
					c.precision = prec;
					c.framework = fw ? ZS_FW_TORCH : ZS_FW_PAPER;
					for (int s = 0; s < ZS_NSCHEMES; s++) {
						struct zs_result res = engine(&c, (enum zs_scheme)s, worlds[w], (enum zs_unit)u);
						if (digest == 0)
							digest = res.digest;
						ck_assert_msg(res.digest == digest, "%s N=%u %s %s %s recompute %s: digest %016llx, not %016llx",
						              zs_precision_name(prec), worlds[w], zs_framework_name(c.framework), zs_scheme_name((enum zs_scheme)s),
						              zs_unit_name((enum zs_unit)u), zs_recompute_name(tr.recompute),
						              (unsigned long long)res.digest, (unsigned long long)digest);
						if (s == ZS_DP)
							acts[rc] = res.peak_breakdown[ZS_CAT_ACTIVATIONS];
						engine_result_free(&res);
					}
				}
		ck_assert_msg(acts[2] < acts[1] && acts[1] < acts[0], "activations at the peak: none %zu, selective %zu, full %zu",
		              acts[0], acts[1], acts[2]);
	}
}

static void check_one_digest(enum tfm_family f, int tied, enum zs_precision prec)
{
	check_one_digest_dims(tiny(f, tied), prec);
}

START_TEST(test_gpt2_one_digest_per_world_across_schemes) { check_one_digest(TFM_GPT2, 1, ZS_FP32); }
END_TEST

START_TEST(test_llama_one_digest_per_world_across_schemes) { check_one_digest(TFM_LLAMA, 0, ZS_FP32); }
END_TEST

START_TEST(test_qwen2_mixed_one_digest_per_world_across_schemes) { check_one_digest_dims(tiny_qwen2(1), ZS_MIXED); }
END_TEST

START_TEST(test_gemma3_one_digest_per_world_across_schemes)
{
	check_one_digest_dims(tiny_gemma3(), ZS_FP32);
	check_one_digest_dims(tiny_gemma3(), ZS_MIXED);
}
END_TEST

START_TEST(test_gemma2_one_digest_per_world_across_schemes)
{
	check_one_digest_dims(tiny_gemma2(), ZS_FP32);
	check_one_digest_dims(tiny_gemma2(), ZS_MIXED);
}
END_TEST

START_TEST(test_qwen3_one_digest_per_world_across_schemes)
{
	check_one_digest_dims(tiny_qwen3(0), ZS_FP32);
	check_one_digest_dims(tiny_qwen3(1), ZS_MIXED);
}
END_TEST

START_TEST(test_gpt2_mixed_one_digest_per_world_across_schemes) { check_one_digest(TFM_GPT2, 1, ZS_MIXED); }
END_TEST

START_TEST(test_llama_mixed_one_digest_per_world_across_schemes) { check_one_digest(TFM_LLAMA, 0, ZS_MIXED); }
END_TEST

/* Mixed precision trains for real: the engine's run of check_training's
 * model and task (100 Adam steps at lr 3e-3, a fresh batch each step, on
 * two ranks under zero3 unit=layer, so that the fp16 params are gathered
 * and the fp16 grads reduce-scattered) brings the mean loss of the last
 * ten steps under a third of the first step's; the first step's loss is
 * fp32's to within fp16's rounding of the activations (1e-3 relative),
 * and the final weights are not fp32's bits. */
static void check_mixed_training(enum tfm_family f)
{
	struct zs_tfm_run tr;
	struct zs_config c = engine_config(&tr, f, f == TFM_GPT2, ZS_RECOMPUTE_SELECTIVE);
	tr.dims = (struct tfm_dims){f, 32, 2, 4, f == TFM_LLAMA ? 2 : 4, 8, f == TFM_LLAMA ? 88 : 128, 64, 16,
	                            f == TFM_GPT2, 1e-5f, 10000.0f, 0, 0, 0, 0, 0, 0.0f, 0.0f, 0.0f, 0, 0.0f, 0, 0, 0, 0, 0, 0.0f};
	tr.seq = 16;
	c.steps = 100;
	c.precision = ZS_MIXED;
	struct zs_result mixed = engine(&c, ZS_ZERO3, 2, ZS_UNIT_LAYER);
	c.steps = 1;
	c.precision = ZS_FP32;
	struct zs_result fp32 = engine(&c, ZS_ZERO3, 2, ZS_UNIT_LAYER);
	double first = mixed.losses[0], last = 0.0;
	for (unsigned s = 90; s < 100; s++)
		last += mixed.losses[s] / 10.0;
	ck_assert_double_eq_tol(first, log(64.0), 0.1);
	ck_assert_double_eq_tol(first, fp32.losses[0], 1e-3 * fp32.losses[0]);
	ck_assert_msg(last < first / 3.0, "mixed: loss %.4f after 100 steps, %.4f at the first", last, first);
	ck_assert(mixed.digest != fp32.digest);
	if (getenv("TFM_VERBOSE") != NULL)
		printf("%s mixed: loss %.4f at the first step (fp32 %.4f), %.4f over the last ten\n",
		       f == TFM_GPT2 ? "gpt2" : "llama", first, (double)fp32.losses[0], last);
	engine_result_free(&mixed);
	engine_result_free(&fp32);
}

START_TEST(test_gpt2_mixed_loss_falls_on_the_synthetic_task) { check_mixed_training(TFM_GPT2); }
END_TEST

START_TEST(test_llama_mixed_loss_falls_on_the_synthetic_task) { check_mixed_training(TFM_LLAMA); }
END_TEST

static Suite *tfm_suite(void)
{
	Suite *s = suite_create("tfm");
	TCase *t = tcase_create("layers");
	tcase_add_test(t, test_matmul_backward_matches_finite_differences);
	tcase_add_test(t, test_lora_backward_matches_finite_differences);
	tcase_add_test(t, test_layernorm_backward_matches_finite_differences);
	tcase_add_test(t, test_rmsnorm_backward_matches_finite_differences);
	tcase_add_test(t, test_attention_backward_matches_finite_differences);
	tcase_add_test(t, test_rope_attention_backward_matches_finite_differences);
	tcase_add_test(t, test_qk_norm_rope_attention_backward_matches_finite_differences);
	tcase_add_test(t, test_gemma3_qk_norm_attention_backward_matches_finite_differences);
	tcase_add_test(t, test_softcapped_attention_backward_matches_finite_differences);
	tcase_add_test(t, test_rope_keeps_norms_and_position_zero);
	tcase_add_test(t, test_gelu_backward_matches_finite_differences);
	tcase_add_test(t, test_swiglu_backward_matches_finite_differences);
	tcase_add_test(t, test_gelu_is_gpt2s_tanh_form);
	tcase_add_test(t, test_gelu_kernels_are_libms_tanhf_bit_for_bit);
	tcase_add_test(t, test_embedding_backward_matches_finite_differences);
	tcase_add_test(t, test_crossentropy_backward_matches_finite_differences);
	tcase_add_test(t, test_softcapped_crossentropy_backward_matches_finite_differences);
	tcase_add_test(t, test_gemma_rmsnorm_backward_matches_finite_differences);
	tcase_add_test(t, test_geglu_backward_matches_finite_differences);
	suite_add_tcase(s, t);
	t = tcase_create("model");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_gpt2_gradient_matches_finite_differences);
	tcase_add_test(t, test_gpt2_untied_gradient_matches_finite_differences);
	tcase_add_test(t, test_llama_gradient_matches_finite_differences);
	tcase_add_test(t, test_llama_tied_gradient_matches_finite_differences);
	tcase_add_test(t, test_qwen2_gradient_matches_finite_differences);
	tcase_add_test(t, test_qwen3_gradient_matches_finite_differences);
	tcase_add_test(t, test_gpt2_recompute_gives_the_same_bits);
	tcase_add_test(t, test_llama_recompute_gives_the_same_bits);
	tcase_add_test(t, test_qwen3_recompute_gives_the_same_bits);
	tcase_add_test(t, test_gemma2_gradient_matches_finite_differences);
	tcase_add_test(t, test_gemma3_gradient_matches_finite_differences);
	tcase_add_test(t, test_gemma3_recompute_gives_the_same_bits);
	tcase_add_test(t, test_gemma3_blocks_rotate_by_their_own_base);
	tcase_add_test(t, test_parameter_counts_are_gpt2_smalls_and_llamas);
	tcase_add_test(t, test_layout_units_are_the_theorys_for_every_shipped_model);
	tcase_add_test(t, test_bad_shapes_are_refused);
	tcase_add_test(t, test_task_is_a_permutation_and_targets_are_next_tokens);
	tcase_add_test(t, test_gpt2_loss_falls_on_the_synthetic_task);
	tcase_add_test(t, test_llama_loss_falls_on_the_synthetic_task);
	suite_add_tcase(s, t);
	t = tcase_create("engine");
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_engine_trains_gpt2_as_the_model_does);
	tcase_add_test(t, test_engine_trains_llama_as_the_model_does);
	tcase_add_test(t, test_engine_trains_tied_llama_as_the_model_does);
	tcase_add_test(t, test_gpt2_one_digest_per_world_across_schemes);
	tcase_add_test(t, test_llama_one_digest_per_world_across_schemes);
	tcase_add_test(t, test_qwen2_mixed_one_digest_per_world_across_schemes);
	tcase_add_test(t, test_qwen3_one_digest_per_world_across_schemes);
	tcase_add_test(t, test_gpt2_mixed_one_digest_per_world_across_schemes);
	tcase_add_test(t, test_llama_mixed_one_digest_per_world_across_schemes);
	tcase_add_test(t, test_gpt2_mixed_loss_falls_on_the_synthetic_task);
	tcase_add_test(t, test_llama_mixed_loss_falls_on_the_synthetic_task);
	suite_add_tcase(s, t);
	/* Gemma's digests, two thirds of the engine's time, each a test case of
	 * its own: make valgrind runs one test case a job, side by side. */
	t = tcase_create("gemma2");
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_gemma2_one_digest_per_world_across_schemes);
	suite_add_tcase(s, t);
	t = tcase_create("gemma3");
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_gemma3_one_digest_per_world_across_schemes);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	const char *srcdir = getenv("srcdir"); /* the shipped model configs */
	if (getenv("ZEROSIM_DATADIR") == NULL)
		setenv("ZEROSIM_DATADIR", srcdir != NULL ? srcdir : ".", 1);
	SRunner *sr = srunner_create(tfm_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
