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

/* a where m is set (all ones, as a comparison gives), else b */
static inline v8f pick8(v8i m, v8f a, v8f b) { return (v8f)(((v8i)a & m) | ((v8i)b & ~m)); }

#endif
