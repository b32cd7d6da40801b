/*
 * vec8 — eight fp32 lanes, as GCC's and clang's vector extensions give
 * them: elementwise IEEE arithmetic, the same as eight scalars (no
 * contraction under -ffp-contract=off), so a kernel written on them keeps
 * each lane's bits. Loads and stores through memcpy: any alignment.
 */
#ifndef ZS_VEC8_H
#define ZS_VEC8_H

#include <stdint.h>
#include <string.h>
#ifdef __AVX__
#include <immintrin.h>
#endif

#include "engine/fp16.h"

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));

static inline v8f load8_f32(const float *p)
{
	v8f v;
	memcpy(&v, p, sizeof v);
	return v;
}

static inline void store8_f32(float *p, v8f v) { memcpy(p, &v, sizeof v); }

/* *p in all eight lanes */
static inline v8f splat8(const float *p)
{
#ifdef __AVX__
	return (v8f)_mm256_broadcast_ss(p);
#else
	return (v8f){*p, *p, *p, *p, *p, *p, *p, *p};
#endif
}

/* a where m is set (all ones, as a comparison gives), else b */
static inline v8f pick8(v8i m, v8f a, v8f b) { return (v8f)(((v8i)a & m) | ((v8i)b & ~m)); }

/* With F16C straight between registers and memory (no float array for
 * the compiler to see through); the same instructions as fp16.h's; the
 * MLP kernels' and the optimizer's fp16 vectors. */
static inline v8f load8_f16(const zs_half *p)
{
#ifdef __F16C__
	return (v8f)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
#else
	float f[8];
	v8f v;
	zs_half_to_float8(f, p);
	memcpy(&v, f, sizeof v);
	return v;
#endif
}

static inline void store8_f16(zs_half *p, v8f v)
{
#ifdef __F16C__
	/* through memcpy, not _mm_storeu_si128: GCC 12 then stores straight
	 * from the conversion (vcvtps2ph to memory), one instruction, not two */
	const __m128i h = _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	memcpy(p, &h, sizeof h);
#else
	float f[8];
	memcpy(f, &v, sizeof f);
	zs_float_to_half8(p, f);
#endif
}

#endif
