/*
 * optim — Adam and SGD with momentum (optim.h).
 */
#include "config.h"

#include <math.h>

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

/* One loop per optimizer and grad type, so that each vectorises; the
 * arithmetic is the same element by element in every variant. */
#define ADAM_LOOP(GRAD)                                                          \
	for (size_t i = 0; i < n; i++) {                                         \
		float g = GRAD;                                                  \
		m[i] = b1 * m[i] + (1.0f - b1) * g;                              \
		v[i] = b2 * v[i] + (1.0f - b2) * g * g;                          \
		w[i] -= lr * (m[i] / bc1) / (sqrtf(v[i] / bc2) + eps);           \
	}
#define SGD_LOOP(GRAD)                                                           \
	for (size_t i = 0; i < n; i++) {                                         \
		m[i] = mu * m[i] + (GRAD);                                       \
		w[i] -= lr * m[i];                                               \
	}

void optim_update(const struct optim *o, unsigned t, float *restrict w, float *restrict m, float *restrict v,
                  const void *grad, enum zs_dtype gdt, zs_half *restrict out16, size_t n)
{
	const zs_half *g16 = grad;
	const float *g32 = grad;
	const float lr = o->lr, b1 = o->beta1, b2 = o->beta2, eps = o->eps, mu = o->momentum;
	/* Bias corrections once per step, in double, rounded once. */
	const float bc1 = (float)(1.0 - pow((double)b1, (double)t));
	const float bc2 = (float)(1.0 - pow((double)b2, (double)t));
	if (o->kind == ZS_ADAM && gdt == ZS_F16)
		ADAM_LOOP(zs_half_to_float(g16[i]))
	else if (o->kind == ZS_ADAM)
		ADAM_LOOP(g32[i])
	else if (gdt == ZS_F16)
		SGD_LOOP(zs_half_to_float(g16[i]))
	else
		SGD_LOOP(g32[i])
	if (out16 != NULL)
		for (size_t i = 0; i < n; i++)
			out16[i] = zs_float_to_half(w[i]);
}
