/*
 * mlp — shape bookkeeping and the kernels (mlp.h), instantiated from
 * mlp_kernels.h for fp16 and fp32 working params.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>
#ifdef __AVX__
#include <immintrin.h>
#endif

#include "engine/mlp.h"
#include "engine/vec8.h"
#include "util/step.h"

/* ReLU's derivative: v where in > 0, else +0 (also for a NaN in). */
static inline v8f relu_mask8(v8f v, const float *in)
{
	v8i keep = load8_f32(in) > (v8f){0};
	return (v8f)((v8i)v & keep);
}

/* Lane r of the result: tail[r] + a[r][0] + a[r][1] + ... + a[r][7], added
 * in that order. With AVX the eight sums run side by side: transpose a,
 * then add its columns one after another, the same order lane for lane. */
static inline v8f finish8(const v8f *a, v8f tail)
{
#ifdef __AVX__
	__m256 t0 = _mm256_unpacklo_ps((__m256)a[0], (__m256)a[1]), t1 = _mm256_unpackhi_ps((__m256)a[0], (__m256)a[1]);
	__m256 t2 = _mm256_unpacklo_ps((__m256)a[2], (__m256)a[3]), t3 = _mm256_unpackhi_ps((__m256)a[2], (__m256)a[3]);
	__m256 t4 = _mm256_unpacklo_ps((__m256)a[4], (__m256)a[5]), t5 = _mm256_unpackhi_ps((__m256)a[4], (__m256)a[5]);
	__m256 t6 = _mm256_unpacklo_ps((__m256)a[6], (__m256)a[7]), t7 = _mm256_unpackhi_ps((__m256)a[6], (__m256)a[7]);
	__m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
	__m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
	__m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
	__m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
	__m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
	__m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
	__m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
	__m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
	/* column k holds lane k of a[0..7] */
	__m256 acc = (__m256)tail;
	acc = _mm256_add_ps(acc, _mm256_permute2f128_ps(u0, u4, 0x20));
	acc = _mm256_add_ps(acc, _mm256_permute2f128_ps(u1, u5, 0x20));
	acc = _mm256_add_ps(acc, _mm256_permute2f128_ps(u2, u6, 0x20));
	acc = _mm256_add_ps(acc, _mm256_permute2f128_ps(u3, u7, 0x20));
	acc = _mm256_add_ps(acc, _mm256_permute2f128_ps(u0, u4, 0x31));
	acc = _mm256_add_ps(acc, _mm256_permute2f128_ps(u1, u5, 0x31));
	acc = _mm256_add_ps(acc, _mm256_permute2f128_ps(u2, u6, 0x31));
	acc = _mm256_add_ps(acc, _mm256_permute2f128_ps(u3, u7, 0x31));
	return (v8f)acc;
#else
	v8f s = tail;
	for (int r = 0; r < 8; r++)
		for (int k = 0; k < 8; k++)
			s[r] += a[r][k];
	return s;
#endif
}

/* Non-temporal stores (past the caches, no read of the line first), for
 * weight gradients too large to stay cached: the step reads them again
 * only after the whole backward pass, and a plain store would first read
 * each line from memory. p must be aligned (16 B for fp16, 32 B for fp32);
 * the bits stored are the same. Without AVX, plain stores. */
static inline void stream8_f16(zs_half *p, v8f v)
{
#ifdef __F16C__
	_mm_stream_si128((__m128i *)(void *)p, _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
	store8_f16(p, v);
#endif
}

static inline void stream8_f32(float *p, v8f v)
{
#ifdef __AVX__
	_mm256_stream_ps(p, (__m256)v);
#else
	store8_f32(p, v);
#endif
}

static inline void stream_fence(void)
{
#ifdef __AVX__
	_mm_sfence(); /* the streamed lines are visible before the kernel returns */
#endif
}

/* v's lanes 2q and 2q + 1 to out + q·stride, q = 0..3 (the forward's four
 * rows of two outputs): straight from the register, not through the stack
 * (19 instructions fewer a pair of outputs: 2.3M of the default sweep's
 * 215M, callgrind). */
static inline void store2x4(float *out, size_t stride, v8f v)
{
#ifdef __AVX__
	__m128 lo = _mm256_castps256_ps128((__m256)v), hi = _mm256_extractf128_ps((__m256)v, 1);
	_mm_storel_pi((__m64 *)(void *)out, lo);
	_mm_storeh_pi((__m64 *)(void *)(out + stride), lo);
	_mm_storel_pi((__m64 *)(void *)(out + 2 * stride), hi);
	_mm_storeh_pi((__m64 *)(void *)(out + 3 * stride), hi);
#else
	for (size_t q = 0; q < 4; q++)
		memcpy(out + q * stride, (const float *)&v + 2 * q, 2 * sizeof(float));
#endif
}

/* A weight matrix of this size or more is read from memory, not from the
 * caches: the kernels prefetch its rows and walk it row by row. Below it,
 * where prefetches are only extra instructions, they do not. */
#define LARGE_BYTES ((size_t)1 << 20)

/* Stream a weight gradient of this size or more (beyond the L2 cache of
 * any core) when every row starts on the vector's alignment. */
#define STREAM_BYTES ((size_t)4 << 20)

void mlp_shape_init(struct mlp_shape *s, const size_t *widths, size_t nwidths)
{
	struct step_params p;
	step_params_mlp(&p, widths, nwidths);
	*s = (struct mlp_shape){nwidths - 1, widths, p.numel};
	step_params_free(&p);
}

float mse_forward_backward(float *dy, const float *out, const float *y, size_t B, size_t d)
{
	size_t n = B * d, e = 0;
	float scale = 2.0f / (float)n, sum = 0.0f;
	/* eight differences, squares and gradients at a time; the squares
	 * still added to the sum one by one, in order (the same bits) */
	for (; e + 8 <= n; e += 8) {
		v8f diff = load8_f32(out + e) - load8_f32(y + e), sq = diff * diff;
		store8_f32(dy + e, scale * diff);
		for (int k = 0; k < 8; k++)
			sum += sq[k];
	}
	for (; e < n; e++) {
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
#define STREAM8(p, v) stream8_f16((p), (v))
#define NAME(f) f##_f16
#include "engine/mlp_kernels.h"
#undef T
#undef LOAD
#undef STORE
#undef LOAD8
#undef STORE8
#undef STREAM8
#undef NAME

#define T float
#define LOAD(x) (x)
#define STORE(x) (x)
#define LOAD8(p) load8_f32(p)
#define STORE8(p, v) store8_f32((p), (v))
#define STREAM8(p, v) stream8_f32((p), (v))
#define NAME(f) f##_f32
#include "engine/mlp_kernels.h"
#undef T
#undef LOAD
#undef STORE
#undef LOAD8
#undef STORE8
#undef STREAM8
#undef NAME
