/*
 * optim — Adam and SGD with momentum (optim.h).
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include "engine/optim.h"

void optim_init(struct optim *o, enum zs_optimizer kind, double lr)
{
	o->kind = kind;
	o->lr = (float)lr;
	o->beta1 = 0.9f;
	o->beta2 = 0.999f;
	o->eps = 1e-8f;
	o->momentum = 0.9f;
}

/* The update of one element; the same arithmetic in every variant. */
#define ADAM(i, g)                                                          \
	do {                                                                \
		m[i] = b1 * m[i] + c1 * (g);                                \
		v[i] = b2 * v[i] + c2 * (g) * (g);                          \
		w[i] -= step * (m[i] / (sqrtf(v[i]) / bc2s + eps));         \
	} while (0)
#define SGD(i, g)                                                           \
	do {                                                                \
		m[i] = mu * m[i] + (g);                                     \
		w[i] -= lr * m[i];                                          \
	} while (0)

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
	int adam = o->kind == ZS_ADAM;
	/* Blocks of eight with a fixed trip count, so that the compiler
	 * vectorises them at -O2; then the tail. */
	size_t i = 0;
	/* fp32 grads under Adam (an fp32 run's update) read in place: copied
	 * through a stack array as the loop below does, each block's two
	 * 16-byte stores fed one 32-byte load, a stalled store forwarding
	 * that made the update three times slower than its memory traffic. */
	if (adam && gdt == ZS_F32)
		for (; i + 8 <= n; i += 8) {
			for (size_t k = 0; k < 8; k++)
				ADAM(i + k, g32[i + k]);
			if (out16 != NULL)
				zs_float_to_half8(out16 + i, w + i);
		}
	float g[8];
	for (; i + 8 <= n; i += 8) {
		if (gdt == ZS_F16)
			zs_half_to_float8(g, g16 + i);
		else
			memcpy(g, g32 + i, sizeof g);
		if (adam)
			for (size_t k = 0; k < 8; k++)
				ADAM(i + k, g[k]);
		else
			for (size_t k = 0; k < 8; k++)
				SGD(i + k, g[k]);
		if (out16 != NULL)
			zs_float_to_half8(out16 + i, w + i);
	}
	for (; i < n; i++) {
		float gi = gdt == ZS_F16 ? zs_half_to_float(g16[i]) : g32[i];
		if (adam)
			ADAM(i, gi);
		else
			SGD(i, gi);
		if (out16 != NULL)
			out16[i] = zs_float_to_half(w[i]);
	}
}
