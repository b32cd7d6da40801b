/*
 * fp16 — IEEE 754 binary16 storage for the working params and grads of
 * mixed precision. Values are stored as 16-bit words (zs_half). Conversion
 * uses the compiler's _Float16 when configure found it (with F16C when the
 * build machine has it); the software conversion below is always built and
 * always tested, and is what a compiler without _Float16 gets.
 *
 * float -> half rounds to nearest, ties to even; overflow gives infinity;
 * results below the smallest normal become subnormals or zero; NaN stays NaN
 * (quiet). half -> float is exact.
 */
#ifndef ZS_FP16_H
#define ZS_FP16_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __F16C__
#include <immintrin.h>
#endif

typedef uint16_t zs_half;

/* Storage type of a params or grads buffer. */
enum zs_dtype { ZS_F16, ZS_F32 };

float zs_half_to_float_soft(zs_half h);
zs_half zs_float_to_half_soft(float f);

/* __FLT16_MANT_DIG__: the compiler at hand (not only configure's) has it. */
#if defined(HAVE_FLOAT16) && defined(__FLT16_MANT_DIG__)
static inline float zs_half_to_float(zs_half h)
{
	_Float16 v;
	memcpy(&v, &h, sizeof v);
	return (float)v;
}

static inline zs_half zs_float_to_half(float f)
{
	_Float16 v = (_Float16)f;
	zs_half h;
	memcpy(&h, &v, sizeof h);
	return h;
}
#else
static inline float zs_half_to_float(zs_half h) { return zs_half_to_float_soft(h); }
static inline zs_half zs_float_to_half(float f) { return zs_float_to_half_soft(f); }
#endif

/* Eight at a time: one instruction each way with F16C, else element by
 * element. The same bits either way. */
static inline void zs_half_to_float8(float *dst, const zs_half *src)
{
#ifdef __F16C__
	_mm256_storeu_ps(dst, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)src)));
#else
	for (int k = 0; k < 8; k++)
		dst[k] = zs_half_to_float(src[k]);
#endif
}

static inline void zs_float_to_half8(zs_half *dst, const float *src)
{
#ifdef __F16C__
	/* through memcpy: GCC 12 then converts straight to memory (one instruction) */
	const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	memcpy(dst, &h, sizeof h);
#else
	for (int k = 0; k < 8; k++)
		dst[k] = zs_float_to_half(src[k]);
#endif
}

/* Whole arrays, eight at a time and then one by one (the same bits):
 * dst (n) = src widened to fp32; dst (n) = src rounded to fp16; x (n)
 * rounded to fp16 values in place (what storing it in 16 bits keeps). */
void zs_half_to_float_n(float *dst, const zs_half *src, size_t n);
void zs_float_to_half_n(zs_half *dst, const float *src, size_t n);
void zs_round_half_n(float *x, size_t n);

#endif
