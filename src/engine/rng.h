/*
 * rng — the generator behind --seed (docs/formats.md): splitmix64 (Steele,
 * Lea & Flood 2014), counter-based, so that any rank can produce any
 * element of a stream without the others. A header of its own so that
 * what draws from it (the step driver's MLP weights and batches, the
 * transformer's weights and task in tfm.c) shares one definition and the
 * transformer's kernels need nothing of the step driver (engine.h).
 */
#ifndef ZS_RNG_H
#define ZS_RNG_H

#include <stdint.h>

static inline uint64_t rng_splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Where stream `stream` of a seed starts. */
static inline uint64_t rng_stream_base(uint64_t seed, uint64_t stream)
{
	return rng_splitmix64(seed ^ rng_splitmix64(stream));
}

/* Element `index` of a stream, uniform in [-1, 1): 24 random bits, so that
 * every value is exact in a float. */
static inline float rng_uniform_at(uint64_t base, uint64_t index)
{
	return (float)((double)(rng_splitmix64(base + index) >> 40) / 8388608.0 - 1.0);
}

/* The same for (seed, stream, index). */
static inline float engine_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
	return rng_uniform_at(rng_stream_base(seed, stream), index);
}

#endif
