/*
 * optim — Adam and SGD with momentum (optim.h).
 */
#include "config.h"

#include <math.h>
#include <string.h>
#ifdef __AVX__
#include <immintrin.h>
#endif

#include "engine/optim.h"
#include "engine/vec8.h"

void optim_init(struct optim *o, enum zs_optimizer kind, double lr)
{
	o->kind = kind;
	o->lr = (float)lr;
	o->beta1 = 0.9f;
	o->beta2 = 0.999f;
	o->eps = 1e-8f;
	o->momentum = 0.9f;
}

/* The update of one element; the same arithmetic in every variant. M0 and
 * V0 are the moments before the step: m[i] and v[i], or 0.0f at the first
 * step, where the state has never been written (optim.h): the state
 * starts at +0, and b1·(+0) and μ·(+0) are +0 for the non-negative finite
 * betas and momentum of optim_init, so +0 + c1·g, what reading a zeroed m
 * gave, is written 0.0f + c1·g, bit for bit (a -0 product becomes +0 as
 * before; a NaN passes through the addition unchanged). */
#define ADAM(i, g, M0, V0)                                                  \
	do {                                                                \
		m[i] = (M0) + c1 * (g);                                     \
		v[i] = (V0) + c2 * (g) * (g);                               \
		w[i] -= step * (m[i] / (sqrtf(v[i]) / bc2s + eps));         \
	} while (0)
#define SGD(i, g, M0)                                                       \
	do {                                                                \
		m[i] = (M0) + (g);                                          \
		w[i] -= lr * m[i];                                          \
	} while (0)

/* The same update on eight lanes at once, each lane's arithmetic that of
 * ADAM (vec8.h: elementwise IEEE, sqrt correctly rounded on both paths). */
static inline v8f sqrt8(v8f x)
{
#ifdef __AVX__
	return (v8f)_mm256_sqrt_ps((__m256)x);
#else
	for (int k = 0; k < 8; k++)
		x[k] = sqrtf(x[k]);
	return x;
#endif
}

/* One block of eight: g already in fp32 lanes; first: the state not read. */
static inline __attribute__((always_inline)) void adam8(float *w, float *m, float *v, v8f g, float b1, float b2,
                                                         float c1, float c2, float step, float bc2s, float eps,
                                                         zs_half *out16, const int first)
{
	v8f m0 = {0}, v0 = {0};
	if (!first) {
		m0 = b1 * load8_f32(m);
		v0 = b2 * load8_f32(v);
	}
	v8f mm = m0 + c1 * g, vv = v0 + c2 * g * g;
	v8f ww = load8_f32(w) - step * (mm / (sqrt8(vv) / bc2s + eps));
	store8_f32(m, mm);
	store8_f32(v, vv);
	store8_f32(w, ww);
	if (out16 != NULL)
		store8_f16(out16, ww);
}

/* Adam over whole blocks of eight, grads of type gdt; returns where the
 * tail starts. first, f16 (the grads are fp16) and out (out16 is not NULL)
 * are constants where it is inlined, so that the loop tests nothing. */
static inline __attribute__((always_inline)) size_t adam_blocks(float *restrict w, float *restrict m,
                                                                 float *restrict v, const void *grad,
                                                                 zs_half *restrict out16, size_t n, float b1,
                                                                 float b2, float c1, float c2, float step,
                                                                 float bc2s, float eps, const int first,
                                                                 const int f16, const int out)
{
	size_t i = 0;
#pragma GCC unroll 2
	for (; i + 8 <= n; i += 8)
		adam8(w + i, m + i, v + i, f16 ? load8_f16((const zs_half *)grad + i) : load8_f32((const float *)grad + i),
		      b1, b2, c1, c2, step, bc2s, eps, out ? out16 + i : NULL, first);
	return i;
}

/* adam_blocks with its three choices made once, here, not in its loop */
static size_t adam_all(float *restrict w, float *restrict m, float *restrict v, const void *grad,
                       enum zs_dtype gdt, zs_half *restrict out16, size_t n, float b1, float b2, float c1,
                       float c2, float step, float bc2s, float eps, int first)
{
#define ADAM_BLOCKS(F, H, O) adam_blocks(w, m, v, grad, out16, n, b1, b2, c1, c2, step, bc2s, eps, F, H, O)
	int f16 = gdt == ZS_F16, out = out16 != NULL;
	if (first)
		return f16 ? (out ? ADAM_BLOCKS(1, 1, 1) : ADAM_BLOCKS(1, 1, 0))
		           : (out ? ADAM_BLOCKS(1, 0, 1) : ADAM_BLOCKS(1, 0, 0));
	return f16 ? (out ? ADAM_BLOCKS(0, 1, 1) : ADAM_BLOCKS(0, 1, 0))
	           : (out ? ADAM_BLOCKS(0, 0, 1) : ADAM_BLOCKS(0, 0, 0));
#undef ADAM_BLOCKS
}

void optim_update(const struct optim *o, unsigned t, float *restrict w, float *restrict m, float *restrict v,
                  const void *grad, enum zs_dtype gdt, zs_half *restrict out16, size_t n)
{
	const zs_half *restrict g16 = grad;
	const float *restrict g32 = grad;
	const float lr = o->lr, b1 = o->beta1, b2 = o->beta2, eps = o->eps, mu = o->momentum;
	const float c1 = 1.0f - b1, c2 = 1.0f - b2; /* the same floats the update wrote inline */
	/* Bias corrections once per step, in double, rounded once. */
	const double bc1 = 1.0 - pow((double)b1, (double)t), bc2 = 1.0 - pow((double)b2, (double)t);
	const float step = (float)((double)lr / bc1), bc2s = (float)sqrt(bc2);
	const int adam = o->kind == ZS_ADAM, first = t == 1;
	/* Adam in registers, eight lanes at a time, the grads converted from
	 * fp16 straight into them: copied through a stack array, each block's
	 * stores fed wider loads (a stalled store forwarding), and the moments
	 * not read at the first step. SGD (no run's default) element by
	 * element. */
	size_t i = adam ? adam_all(w, m, v, grad, gdt, out16, n, b1, b2, c1, c2, step, bc2s, eps, first) : 0;
	for (; i < n; i++) {
		float gi = gdt == ZS_F16 ? zs_half_to_float(g16[i]) : g32[i];
		if (adam && first)
			ADAM(i, gi, 0.0f, 0.0f);
		else if (adam)
			ADAM(i, gi, b1 * m[i], b2 * v[i]);
		else if (first)
			SGD(i, gi, 0.0f);
		else
			SGD(i, gi, mu * m[i]);
		if (out16 != NULL)
			out16[i] = zs_float_to_half(w[i]);
	}
}
