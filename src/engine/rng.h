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

/* Dropout's masks (a noise tensor's bernoulli_(keep)): the key of a draw
 * at `at` (the step's dropout draw, 1-based, | 1 << 31; or an event's
 * index) of step `step` (0-based) of the run's seed, and whether element
 * e of that draw is kept, u < keep for u uniform in [0, 1) of 53 bits.
 * The PyTorch step's (engine/ag_exec.c op_bernoulli) and the paper step's
 * LoRA dropout (engine/tfm_net.c) draw the same masks from them. */
static inline uint64_t rng_bernoulli_key(uint64_t seed, uint64_t step, uint64_t at)
{
	return rng_splitmix64(rng_splitmix64(seed) ^ (step << 32) ^ at);
}

static inline int rng_bernoulli_at(uint64_t key, uint64_t e, double keep)
{
	return (double)(rng_splitmix64(key + e) >> 11) * 0x1.0p-53 < keep;
}

#endif
