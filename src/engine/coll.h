/*
 * coll — the collectives ZeRO needs (all-reduce, reduce-scatter,
 * all-gather) over one unit of N ranks' buffers, behind a small table of
 * function pointers so that a second backend (one MPI process per rank) can
 * implement the same calls. The in-process backend here runs all N ranks in
 * one process.
 *
 * Semantics (docs/schedule.md): a unit of n elements is padded to N·s with
 * s = ceil(n/N); rank r owns slots [r·s, (r+1)·s). Full buffers hold the n
 * real elements only; padding slots of a shard are never written. Reductions
 * sum ranks in order 0..N-1 in fp32, divide by N in fp32, and round once to
 * the buffer type. In-place use is allowed: shard[r] may be full[r] + r·s.
 * A process holds the ranks [r0, r1) (all N in process; N/P of them in
 * each of P MPI processes, coll_mpi.h); the pointer lists hold those ranks'
 * buffers, rank k's at k - r0. The stats are for all N ranks.
 *
 * Cost accounting is the ring algorithm's (Patarasuk & Yuan 2009; the ZeRO
 * paper §7): a reduce-scatter or all-gather of a padded buffer of M bytes
 * sends (N-1)/N·M bytes per rank, an all-reduce twice that. A broadcast
 * (torch's ZeroRedundancyOptimizer) is counted as (N-1)/N of its padded
 * buffer per rank too: what a ring broadcast sends, (N-1)·M over N ranks,
 * spread evenly (the scatter-then-all-gather broadcast sends exactly that
 * from every rank). It is counted here, once for every backend. A backend
 * that moves data between processes also counts, per rank and per kind,
 * the MPI calls it made and the bytes of that rank's data it handed to MPI
 * for other processes (`wire_*`).
 *
 * The N = 1 rule, for every caller and every backend: at world 1 a
 * collective is the identity. Each destination that is not its source
 * receives a copy of it (a reduce-scatter's shard, an all-gather's full
 * buffer), nothing else is done, the backend is not asked, and nothing is
 * sent: no bytes, and no call unless `one_rank_calls` is set (a framework
 * that issues its collectives on a group of one, as DDP's reducer does;
 * FSDP's NO_SHARD and DeepSpeed issue none).
 */
#ifndef ZS_COLL_H
#define ZS_COLL_H

#include <stddef.h>

#include "engine/fp16.h"

enum zs_coll_kind { ZS_ALL_REDUCE, ZS_REDUCE_SCATTER, ZS_ALL_GATHER, ZS_BROADCAST, ZS_NCOLL };

struct zs_coll_stats {
	unsigned long long calls[ZS_NCOLL];
	unsigned long long bytes[ZS_NCOLL];    /* bytes sent */
	unsigned long long elements[ZS_NCOLL]; /* elements sent */
	unsigned long long wire_calls[ZS_NCOLL]; /* MPI calls (0 in process) */
	unsigned long long wire_bytes[ZS_NCOLL]; /* bytes handed to MPI for other processes */
};

struct zs_coll;

struct zs_coll_ops {
	/* full[r]: rank r's n elements; every rank receives the mean. */
	void (*all_reduce)(struct zs_coll *c, void *const *full, size_t n, enum zs_dtype dt);
	/* shard[r] receives the mean of slots [r·s, r·s + s) of every full[q]. */
	void (*reduce_scatter)(struct zs_coll *c, const void *const *full, void *const *shard, size_t n,
	                       enum zs_dtype dt);
	/* full[q] receives every rank's shard[r] at slots [r·s, r·s + s). */
	void (*all_gather)(struct zs_coll *c, const void *const *shard, void *const *full, size_t n,
	                   enum zs_dtype dt);
	/* Every full[q] receives full[root]'s n elements. */
	void (*broadcast)(struct zs_coll *c, void *const *full, unsigned root, size_t n, enum zs_dtype dt);
};

struct zs_coll {
	unsigned world;
	unsigned r0, r1; /* the ranks this process holds */
	const struct zs_coll_ops *ops;
	struct zs_coll_stats *stats; /* one per rank, 0..N-1 */
	void *impl;                  /* the backend's own state, or NULL */
	int one_rank_calls;          /* count the calls made at world 1 (above) */
	void (*impl_free)(void *impl);
};

size_t coll_dtype_size(enum zs_dtype dt);
const char *coll_kind_name(enum zs_coll_kind k);

/* The in-process backend. The caller frees with coll_destroy. */
void coll_init_inprocess(struct zs_coll *c, unsigned world);
void coll_destroy(struct zs_coll *c);

/* Count, then run. Use these, not the ops directly. */
void coll_all_reduce(struct zs_coll *c, void *const *full, size_t n, enum zs_dtype dt);
void coll_reduce_scatter(struct zs_coll *c, const void *const *full, void *const *shard, size_t n,
                         enum zs_dtype dt);
void coll_all_gather(struct zs_coll *c, const void *const *shard, void *const *full, size_t n,
                     enum zs_dtype dt);
void coll_broadcast(struct zs_coll *c, void *const *full, unsigned root, size_t n, enum zs_dtype dt);

/* For backends: the slots per rank s = ceil(n/N); the real elements of
 * rank r's slots; the mean of cnt <= COLL_BLOCK elements at lo of
 * bufs[0..nbufs) summed in that order in fp32; and its rounding into buf at
 * lo. Every backend reduces through these two, so all agree bit for bit. */
#define COLL_BLOCK 256
size_t coll_shard_len(size_t n, unsigned world);
size_t coll_owned(size_t n, size_t s, unsigned r);
void coll_mean_block(float *sum, const void *const *bufs, unsigned nbufs, size_t lo, size_t cnt,
                     enum zs_dtype dt);
void coll_store_block(void *buf, size_t lo, const float *v, size_t cnt, enum zs_dtype dt);

#endif
