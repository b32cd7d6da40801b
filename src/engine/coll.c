/*
 * coll — the in-process backend and the ring cost accounting (coll.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/coll.h"
#include "engine/fp16.h"
#include "util/util.h"

size_t coll_dtype_size(enum zs_dtype dt) { return dt == ZS_F16 ? 2 : 4; }

const char *coll_kind_name(enum zs_coll_kind k)
{
	static const char *const names[ZS_NCOLL] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};
	return names[k];
}

static inline void store(void *buf, size_t i, float v, enum zs_dtype dt)
{
	if (dt == ZS_F16)
		((zs_half *)buf)[i] = zs_float_to_half(v);
	else
		((float *)buf)[i] = v;
}

size_t coll_shard_len(size_t n, unsigned world) { return (n + world - 1) / world; }

/* Elements of rank r's slots that are real (not padding). */
size_t coll_owned(size_t n, size_t s, unsigned r)
{
	size_t lo = (size_t)r * s;
	return lo >= n ? 0 : (n - lo < s ? n - lo : s);
}

/* Elements reduced per pass: their means wait in a 1 KiB block on the
 * stack until every rank's slice of the block has been read. */
#define BLOCK COLL_BLOCK

typedef float v8f __attribute__((vector_size(32)));

static inline v8f load8(const void *buf, size_t i, enum zs_dtype dt)
{
	float f[8];
	v8f v;
	if (dt == ZS_F16)
		zs_half_to_float8(f, (const zs_half *)buf + i);
	else
		memcpy(f, (const float *)buf + i, sizeof f);
	memcpy(&v, f, sizeof v);
	return v;
}

static inline float load1(const void *buf, size_t i, enum zs_dtype dt)
{
	return dt == ZS_F16 ? zs_half_to_float(((const zs_half *)buf)[i]) : ((const float *)buf)[i];
}

/* sum[0..8·nv) = the means of bufs[q][at..at + 8·nv) over the ranks, nv
 * <= 8 vectors of running sums in registers while the ranks go by (nv a
 * constant where it is inlined): from 0, rank 0's value, then rank 1's,
 * ..., then divided by N. */
static inline __attribute__((always_inline)) void mean_vectors(float *sum, const void *const *bufs, unsigned world,
                                                               size_t at, enum zs_dtype dt, const int nv)
{
	v8f a[8] = {{0}};
	for (unsigned q = 0; q < world; q++) {
		const void *b = bufs[q];
#pragma GCC unroll 8
		for (int k = 0; k < nv; k++)
			a[k] += load8(b, at + 8 * (size_t)k, dt);
	}
#pragma GCC unroll 8
	for (int k = 0; k < nv; k++) {
		a[k] /= (float)world;
		memcpy(sum + 8 * (size_t)k, &a[k], sizeof a[k]);
	}
}

/* sum[i] = mean over ranks q = 0..N-1 of bufs[q][lo + i], i < cnt <= BLOCK,
 * summed as mean_vectors does: 64 at a time while they last (one pass over
 * the ranks' pointers and one loop test for eight vectors: 1M of the
 * default sweep's 211M instructions), then 32, then one by one. Made once
 * for each type (coll_mean_block), so that the loop over the ranks does
 * not test the type at every load (1.5M of the default sweep's 263M
 * instructions). */
static inline __attribute__((always_inline)) void mean_block(float *sum, const void *const *bufs, unsigned world,
                                                             size_t lo, size_t cnt, enum zs_dtype dt)
{
	const float n = (float)world;
	size_t i = 0;
	for (; i + 64 <= cnt; i += 64)
		mean_vectors(sum + i, bufs, world, lo + i, dt, 8);
	for (; i + 32 <= cnt; i += 32)
		mean_vectors(sum + i, bufs, world, lo + i, dt, 4);
	for (; i < cnt; i++) {
		float a = 0.0f;
		for (unsigned q = 0; q < world; q++)
			a += load1(bufs[q], lo + i, dt);
		sum[i] = a / n;
	}
}

void coll_mean_block(float *sum, const void *const *bufs, unsigned world, size_t lo, size_t cnt,
                     enum zs_dtype dt)
{
	if (dt == ZS_F16)
		mean_block(sum, bufs, world, lo, cnt, ZS_F16);
	else
		mean_block(sum, bufs, world, lo, cnt, ZS_F32);
}

void coll_store_block(void *buf, size_t lo, const float *v, size_t cnt, enum zs_dtype dt)
{
	size_t i = 0;
	if (dt == ZS_F16)
		for (; i + 8 <= cnt; i += 8)
			zs_float_to_half8((zs_half *)buf + lo + i, v + i);
	for (; i < cnt; i++)
		store(buf, lo + i, v[i], dt);
}

static void inproc_reduce_scatter(struct zs_coll *c, const void *const *full, void *const *shard, size_t n,
                                  enum zs_dtype dt)
{
	size_t s = coll_shard_len(n, c->world);
	float sum[BLOCK];
	for (unsigned r = 0; r < c->world; r++) {
		size_t lo = (size_t)r * s, cnt = coll_owned(n, s, r);
		for (size_t i = 0; i < cnt; i += BLOCK) {
			size_t m = cnt - i < BLOCK ? cnt - i : BLOCK;
			coll_mean_block(sum, full, c->world, lo + i, m, dt);
			coll_store_block(shard[r], i, sum, m, dt);
		}
	}
}

static void inproc_all_gather(struct zs_coll *c, const void *const *shard, void *const *full, size_t n,
                              enum zs_dtype dt)
{
	size_t s = coll_shard_len(n, c->world), es = coll_dtype_size(dt);
	for (unsigned q = 0; q < c->world; q++)
		for (unsigned r = 0; r < c->world; r++) {
			char *dst = (char *)full[q] + (size_t)r * s * es;
			if (dst != (const char *)shard[r])
				memcpy(dst, shard[r], coll_owned(n, s, r) * es);
		}
}

static void inproc_all_reduce(struct zs_coll *c, void *const *full, size_t n, enum zs_dtype dt)
{
	/* A block's mean is written to every rank only after every rank's
	 * block was read. */
	float sum[BLOCK];
	size_t es = coll_dtype_size(dt);
	for (size_t i = 0; i < n; i += BLOCK) {
		size_t m = n - i < BLOCK ? n - i : BLOCK;
		coll_mean_block(sum, (const void *const *)full, c->world, i, m, dt);
		/* rounded once into rank 0's buffer, copied to the others */
		coll_store_block(full[0], i, sum, m, dt);
		for (unsigned q = 1; q < c->world; q++)
			memcpy((char *)full[q] + i * es, (const char *)full[0] + i * es, m * es);
	}
}

static void inproc_broadcast(struct zs_coll *c, void *const *full, unsigned root, size_t n, enum zs_dtype dt)
{
	for (unsigned q = 0; q < c->world; q++)
		if (q != root)
			memcpy(full[q], full[root], n * coll_dtype_size(dt));
}

static const struct zs_coll_ops inprocess_ops = {
	inproc_all_reduce,
	inproc_reduce_scatter,
	inproc_all_gather,
	inproc_broadcast,
};

void coll_init_inprocess(struct zs_coll *c, unsigned world)
{
	memset(c, 0, sizeof *c);
	c->world = world;
	c->r1 = world;
	c->ops = &inprocess_ops;
	c->stats = zs_calloc(world, sizeof *c->stats);
}

void coll_destroy(struct zs_coll *c)
{
	if (c->impl_free != NULL)
		c->impl_free(c->impl);
	free(c->stats);
	c->stats = NULL;
	c->impl = NULL;
}

static void count(struct zs_coll *c, enum zs_coll_kind k, size_t n, enum zs_dtype dt)
{
	unsigned long long s = coll_shard_len(n, c->world);
	unsigned long long elems = (unsigned long long)(c->world - 1) * s * (k == ZS_ALL_REDUCE ? 2 : 1);
	for (unsigned r = 0; r < c->world; r++) {
		c->stats[r].calls[k]++;
		c->stats[r].elements[k] += elems;
		c->stats[r].bytes[k] += elems * coll_dtype_size(dt);
	}
}

/* The N = 1 rule (coll.h): at world 1, whether the call is counted, and
 * the identity's copy. */
static int one_rank(struct zs_coll *c, enum zs_coll_kind k)
{
	if (c->world > 1)
		return 0;
	c->stats[0].calls[k] += c->one_rank_calls != 0;
	return 1;
}

static void copy_if_apart(void *dst, const void *src, size_t n, enum zs_dtype dt)
{
	if (dst != src)
		memcpy(dst, src, n * coll_dtype_size(dt));
}

void coll_all_reduce(struct zs_coll *c, void *const *full, size_t n, enum zs_dtype dt)
{
	if (one_rank(c, ZS_ALL_REDUCE))
		return;
	count(c, ZS_ALL_REDUCE, n, dt);
	c->ops->all_reduce(c, full, n, dt);
}

void coll_reduce_scatter(struct zs_coll *c, const void *const *full, void *const *shard, size_t n,
                         enum zs_dtype dt)
{
	if (one_rank(c, ZS_REDUCE_SCATTER)) {
		copy_if_apart(shard[0], full[0], n, dt);
		return;
	}
	count(c, ZS_REDUCE_SCATTER, n, dt);
	c->ops->reduce_scatter(c, full, shard, n, dt);
}

void coll_all_gather(struct zs_coll *c, const void *const *shard, void *const *full, size_t n,
                     enum zs_dtype dt)
{
	if (one_rank(c, ZS_ALL_GATHER)) {
		copy_if_apart(full[0], shard[0], n, dt);
		return;
	}
	count(c, ZS_ALL_GATHER, n, dt);
	c->ops->all_gather(c, shard, full, n, dt);
}

void coll_broadcast(struct zs_coll *c, void *const *full, unsigned root, size_t n, enum zs_dtype dt)
{
	if (one_rank(c, ZS_BROADCAST))
		return;
	count(c, ZS_BROADCAST, n, dt);
	c->ops->broadcast(c, full, root, n, dt);
}
