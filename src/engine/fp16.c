/*
 * fp16 — software binary16 conversion (see fp16.h). The float -> half
 * rounding follows the usual bit-level recipe: keep 10 mantissa bits, look
 * at the guard bit and the sticky bits below it, round to even on a tie.
 */
#include "config.h"

#include "engine/fp16.h"

float zs_half_to_float_soft(zs_half h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	uint32_t bits;
	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (man << 13); /* inf or NaN */
	} else if (exp != 0) {
		bits = sign | ((exp + 112u) << 23) | (man << 13);
	} else if (man == 0) {
		bits = sign;
	} else { /* subnormal: normalise */
		uint32_t e = 113;
		while ((man & 0x400u) == 0) {
			man <<= 1;
			e--;
		}
		bits = sign | (e << 23) | ((man & 0x3ffu) << 13);
	}
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

zs_half zs_float_to_half_soft(float f)
{
	uint32_t bits;
	memcpy(&bits, &f, sizeof bits);
	uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
	uint32_t exp = (bits >> 23) & 0xffu;
	uint32_t man = bits & 0x7fffffu;

	if (exp == 0xff) /* inf, or NaN made quiet */
		return (zs_half)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 0x1f)
		return (zs_half)(sign | 0x7c00u);
	uint32_t full; /* 11-bit significand with the implicit bit, plus 13 bits to round away */
	int shift;
	if (e <= 0) {
		if (e < -10) /* below half the smallest subnormal: rounds to zero */
			return sign;
		full = man | 0x800000u;
		shift = 14 - e; /* 13 bits, plus one per step below the normal range */
		e = 0;
	} else {
		full = man;
		shift = 13;
	}
	uint32_t kept = full >> shift;
	uint32_t rest = full & ((1u << shift) - 1);
	uint32_t half = 1u << (shift - 1);
	if (rest > half || (rest == half && (kept & 1u)))
		kept++;
	/* A carry out of the mantissa bumps the exponent, up to infinity. */
	return (zs_half)(sign | (((uint32_t)e << 10) + kept));
}

void zs_half_to_float_n(float *dst, const zs_half *src, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		zs_half_to_float8(dst + i, src + i);
	for (; i < n; i++)
		dst[i] = zs_half_to_float(src[i]);
}

void zs_float_to_half_n(zs_half *dst, const float *src, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8)
		zs_float_to_half8(dst + i, src + i);
	for (; i < n; i++)
		dst[i] = zs_float_to_half(src[i]);
}

void zs_round_half_n(float *x, size_t n)
{
	zs_half h[8];
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		zs_float_to_half8(h, x + i);
		zs_half_to_float8(x + i, h);
	}
	for (; i < n; i++)
		x[i] = zs_half_to_float(zs_float_to_half(x[i]));
}
