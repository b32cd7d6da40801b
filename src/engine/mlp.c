/*
 * mlp — shape bookkeeping and the kernels (mlp.h), instantiated from
 * mlp_kernels.h for fp16 and fp32 working params.
 */
#include "config.h"

#include <string.h>

#include "engine/mlp.h"

/* Eight fp32 lanes (GCC and clang vector extensions: elementwise IEEE
 * arithmetic, the same as eight scalars). */
typedef float v8f __attribute__((vector_size(32)));

static inline v8f load8_f32(const float *p)
{
	v8f v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline void store8_f32(float *p, v8f v) { memcpy(p, &v, sizeof v); }

static inline v8f load8_f16(const zs_half *p)
{
	float f[8];
	v8f v;
	zs_half_to_float8(f, p);
	memcpy(&v, f, sizeof v);
	return v;
}

static inline void store8_f16(zs_half *p, v8f v)
{
	float f[8];
	memcpy(f, &v, sizeof f);
	zs_float_to_half8(p, f);
}

void mlp_shape_init(struct mlp_shape *s, const size_t *widths, size_t nwidths)
{
	memset(s, 0, sizeof *s);
	s->nlayers = nwidths - 1;
	size_t off = 0;
	for (size_t l = 0; l < nwidths; l++)
		s->width[l] = widths[l];
	for (size_t l = 0; l < s->nlayers; l++) {
		s->w_off[l] = off;
		off += widths[l] * widths[l + 1];
		s->b_off[l] = off;
		off += widths[l + 1];
	}
	s->nparams = off;
}

size_t mlp_max_width(const struct mlp_shape *s)
{
	size_t m = 0;
	for (size_t l = 1; l <= s->nlayers; l++)
		if (s->width[l] > m)
			m = s->width[l];
	return m;
}

float mse_forward_backward(float *dy, const float *out, const float *y, size_t B, size_t d)
{
	size_t n = B * d;
	float scale = 2.0f / (float)n, sum = 0.0f;
	for (size_t e = 0; e < n; e++) {
		float diff = out[e] - y[e];
		sum += diff * diff;
		dy[e] = scale * diff;
	}
	return sum / (float)n;
}

#define T zs_half
#define LOAD(x) zs_half_to_float(x)
#define STORE(x) zs_float_to_half(x)
#define LOAD8(p) load8_f16(p)
#define STORE8(p, v) store8_f16((p), (v))
#define NAME(f) f##_f16
#include "engine/mlp_kernels.h"
#undef T
#undef LOAD
#undef STORE
#undef LOAD8
#undef STORE8
#undef NAME

#define T float
#define LOAD(x) (x)
#define STORE(x) (x)
#define LOAD8(p) load8_f32(p)
#define STORE8(p, v) store8_f32((p), (v))
#define NAME(f) f##_f32
#include "engine/mlp_kernels.h"
#undef T
#undef LOAD
#undef STORE
#undef LOAD8
#undef STORE8
#undef NAME
