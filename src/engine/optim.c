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

void optim_update(const struct optim *o, unsigned t, float *w, float *m, float *v, const void *grad,
                  enum zs_dtype gdt, zs_half *out16, size_t n)
{
	const zs_half *g16 = grad;
	const float *g32 = grad;
	/* Bias corrections once per step, in double, rounded once. */
	float bc1 = (float)(1.0 - pow((double)o->beta1, (double)t));
	float bc2 = (float)(1.0 - pow((double)o->beta2, (double)t));
	for (size_t i = 0; i < n; i++) {
		float g = gdt == ZS_F16 ? zs_half_to_float(g16[i]) : g32[i];
		if (o->kind == ZS_ADAM) {
			m[i] = o->beta1 * m[i] + (1.0f - o->beta1) * g;
			v[i] = o->beta2 * v[i] + (1.0f - o->beta2) * g * g;
			float mhat = m[i] / bc1, vhat = v[i] / bc2;
			w[i] -= o->lr * mhat / (sqrtf(vhat) + o->eps);
		} else {
			m[i] = o->momentum * m[i] + g;
			w[i] -= o->lr * m[i];
		}
		if (out16 != NULL)
			out16[i] = zs_float_to_half(w[i]);
	}
}
