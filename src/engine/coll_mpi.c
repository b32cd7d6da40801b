/*
 * coll_mpi — the MPI backend of the collectives (coll_mpi.h).
 */
#include "config.h"

/* Built only with MPI (./configure --with-mpi); linted in either build. */
#ifdef HAVE_MPI

#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/coll.h"
#include "engine/coll_mpi.h"
#include "util/util.h"

struct mpi_impl {
	int nproc, me;
	unsigned per;               /* ranks per process, L = N/P */
	char *send, *recv;          /* all-to-all staging, COLL_MPI_STAGE each at most */
	size_t cap;                 /* bytes allocated in each */
	size_t stage;               /* at most this many bytes each way */
	int *scount, *sdispl, *rcount, *rdispl; /* per process, bytes */
	const void **src;           /* per rank: where its slice of the chunk is */
	void **dst;                 /* per local rank: the all-reduce's in-place shards */
};

static void impl_free(void *p)
{
	struct mpi_impl *m = p;
	if (m == NULL)
		return;
	free(m->send);
	free(m->recv);
	free(m->scount);
	free(m->sdispl);
	free(m->rcount);
	free(m->rdispl);
	free(m->src);
	free(m->dst);
	free(m);
}

static const void *at(const void *buf, size_t i, size_t es) { return (const char *)buf + i * es; }

/* A byte count or offset for MPI, which takes int; staging keeps them small. */
static int mpi_int(size_t v)
{
	if (v > INT_MAX) {
		zs_print_error("zerosim", "internal error: a message to MPI exceeds 2^31 bytes");
		MPI_Abort(MPI_COMM_WORLD, ZS_EXIT_RUNTIME);
	}
	return (int)v;
}

/* Real elements of rank j's slots [off, off + chunk). */
static size_t chunk_part(size_t n, size_t s, unsigned j, size_t off, size_t chunk)
{
	size_t o = coll_owned(n, s, j);
	return o <= off ? 0 : (o - off < chunk ? o - off : chunk);
}

/* Reduce-scatter: shard[j] of every local rank j gets the mean over ranks
 * 0..N-1 of their slots of j. Chunk by chunk of slots: each process packs,
 * for every other process, its ranks' slots of that process's ranks
 * ([local q][remote j] order), the all-to-all delivers them, and each
 * local shard is summed from its N sources in rank order. */
static void reduce_scatter_kind(struct zs_coll *c, const void *const *full, void *const *shard, size_t n,
                                enum zs_dtype dt, enum zs_coll_kind kind)
{
	struct mpi_impl *m = c->impl;
	unsigned N = c->world, L = m->per, P = (unsigned)m->nproc;
	size_t s = coll_shard_len(n, N), es = coll_dtype_size(dt);
	/* Per chunk of C slots the process sends and receives (N - L)·L·C
	 * elements at most. */
	size_t chunk = s;
	if (P > 1) {
		size_t per_slot = (size_t)(N - L) * L * es;
		chunk = m->stage / per_slot;
		if (chunk == 0)
			chunk = 1;
		if (chunk > s)
			chunk = s;
		size_t need = per_slot * chunk;
		if (need > m->cap) {
			free(m->send);
			free(m->recv);
			m->send = zs_malloc(need);
			m->recv = zs_malloc(need);
			m->cap = need;
		}
	}
	float sum[COLL_BLOCK];
	for (size_t off = 0; off < s; off += chunk) {
		size_t mine = 0; /* Σ over local j of their part of this chunk */
		for (unsigned j = c->r0; j < c->r1; j++)
			mine += chunk_part(n, s, j, off, chunk);
		if (P > 1) {
			size_t pos = 0;
			for (unsigned p = 0; p < P; p++) {
				m->sdispl[p] = mpi_int(pos);
				if (p != (unsigned)m->me)
					for (unsigned q = c->r0; q < c->r1; q++)
						for (unsigned j = p * L; j < (p + 1) * L; j++) {
							size_t cnt = chunk_part(n, s, j, off, chunk);
							memcpy(m->send + pos, at(full[q - c->r0], (size_t)j * s + off, es), cnt * es);
							pos += cnt * es;
							c->stats[q].wire_bytes[kind] += cnt * es;
						}
				m->scount[p] = mpi_int(pos) - m->sdispl[p];
			}
			pos = 0;
			for (unsigned p = 0; p < P; p++) {
				size_t bytes = p == (unsigned)m->me ? 0 : (size_t)L * mine * es;
				m->rdispl[p] = mpi_int(pos);
				m->rcount[p] = mpi_int(bytes);
				pos += bytes;
			}
			MPI_Alltoallv(m->send, m->scount, m->sdispl, MPI_BYTE, m->recv, m->rcount, m->rdispl, MPI_BYTE,
			              MPI_COMM_WORLD);
			for (unsigned q = c->r0; q < c->r1; q++)
				c->stats[q].wire_calls[kind]++;
		}
		size_t before = 0; /* Σ over local j' < j of their part */
		for (unsigned j = c->r0; j < c->r1; j++) {
			size_t cnt = chunk_part(n, s, j, off, chunk);
			for (unsigned q = 0; q < N; q++) {
				unsigned p = q / L;
				if (p == (unsigned)m->me)
					m->src[q] = at(full[q - c->r0], (size_t)j * s + off, es);
				else
					m->src[q] = m->recv + (size_t)m->rdispl[p] + ((size_t)(q - p * L) * mine + before) * es;
			}
			for (size_t i = 0; i < cnt; i += COLL_BLOCK) {
				size_t b = cnt - i < COLL_BLOCK ? cnt - i : COLL_BLOCK;
				coll_mean_block(sum, m->src, N, i, b, dt);
				coll_store_block(shard[j - c->r0], off + i, sum, b, dt);
			}
			before += cnt;
		}
	}
}

/* All-gather: the local shards go into the first local rank's full
 * buffer, where this process's real elements are one contiguous run
 * (only the last ranks hold padding); MPI_Allgatherv fills in the other
 * processes' runs in place; the other local ranks copy the whole buffer. */
static void all_gather_kind(struct zs_coll *c, const void *const *shard, void *const *full, size_t n,
                            enum zs_dtype dt, enum zs_coll_kind kind)
{
	struct mpi_impl *m = c->impl;
	unsigned N = c->world, L = m->per, P = (unsigned)m->nproc;
	size_t s = coll_shard_len(n, N), es = coll_dtype_size(dt);
	char *first = full[0];
	for (unsigned r = c->r0; r < c->r1; r++) {
		char *dst = first + (size_t)r * s * es;
		if (dst != (const char *)shard[r - c->r0])
			memcpy(dst, shard[r - c->r0], coll_owned(n, s, r) * es);
	}
	if (P > 1) {
		for (unsigned p = 0; p < P; p++) {
			size_t cnt = 0;
			for (unsigned r = p * L; r < (p + 1) * L; r++)
				cnt += coll_owned(n, s, r);
			m->rcount[p] = mpi_int(cnt * es);
			m->rdispl[p] = mpi_int((size_t)p * L * s * es);
		}
		MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, first, m->rcount, m->rdispl, MPI_BYTE, MPI_COMM_WORLD);
		for (unsigned r = c->r0; r < c->r1; r++) {
			c->stats[r].wire_calls[kind]++;
			c->stats[r].wire_bytes[kind] += coll_owned(n, s, r) * es * (P - 1);
		}
	}
	for (unsigned q = c->r0 + 1; q < c->r1; q++)
		memcpy(full[q - c->r0], first, n * es);
}

static void mpi_reduce_scatter(struct zs_coll *c, const void *const *full, void *const *shard, size_t n,
                               enum zs_dtype dt)
{
	reduce_scatter_kind(c, full, shard, n, dt, ZS_REDUCE_SCATTER);
}

static void mpi_all_gather(struct zs_coll *c, const void *const *shard, void *const *full, size_t n,
                           enum zs_dtype dt)
{
	all_gather_kind(c, shard, full, n, dt, ZS_ALL_GATHER);
}

/* All-reduce: a reduce-scatter into each rank's own slots of its buffer,
 * then an all-gather in place; each element is still the mean of ranks
 * 0..N-1 in order, rounded once. */
static void mpi_all_reduce(struct zs_coll *c, void *const *full, size_t n, enum zs_dtype dt)
{
	struct mpi_impl *m = c->impl;
	size_t s = coll_shard_len(n, c->world), es = coll_dtype_size(dt);
	for (unsigned j = c->r0; j < c->r1; j++)
		m->dst[j - c->r0] = (char *)full[j - c->r0] + (coll_owned(n, s, j) > 0 ? (size_t)j * s * es : 0);
	reduce_scatter_kind(c, (const void *const *)full, m->dst, n, dt, ZS_ALL_REDUCE);
	all_gather_kind(c, (const void *const *)m->dst, full, n, dt, ZS_ALL_REDUCE);
}

void coll_mpi_set_stage(struct zs_coll *c, size_t bytes)
{
	((struct mpi_impl *)c->impl)->stage = bytes;
}

/* Broadcast (torch's ZeroRedundancyOptimizer): the root's process hands
 * its buffer to MPI_Bcast, in pieces of at most COLL_MPI_STAGE bytes (no
 * staging: the pieces go from and into the buffers themselves); every
 * other process receives it into its first rank's buffer; then each
 * process's other ranks copy it. The root's data goes to P - 1 processes. */
static void mpi_broadcast(struct zs_coll *c, void *const *full, unsigned root, size_t n, enum zs_dtype dt)
{
	struct mpi_impl *m = c->impl;
	size_t es = coll_dtype_size(dt), bytes = n * es;
	unsigned L = m->per, P = (unsigned)m->nproc, from = root / L;
	int here = from == (unsigned)m->me;
	char *src = here ? full[root - c->r0] : full[0];
	if (P > 1) {
		for (size_t off = 0; off < bytes; off += m->stage) {
			size_t len = bytes - off < m->stage ? bytes - off : m->stage;
			MPI_Bcast(src + off, mpi_int(len), MPI_BYTE, (int)from, MPI_COMM_WORLD);
			for (unsigned r = c->r0; r < c->r1; r++)
				c->stats[r].wire_calls[ZS_BROADCAST]++;
		}
		if (here)
			c->stats[root].wire_bytes[ZS_BROADCAST] += (unsigned long long)bytes * (P - 1);
	}
	for (unsigned q = c->r0; q < c->r1; q++)
		if (full[q - c->r0] != src)
			memcpy(full[q - c->r0], src, bytes);
}

static const struct zs_coll_ops mpi_ops = {
	.all_reduce = mpi_all_reduce,
	.reduce_scatter = mpi_reduce_scatter,
	.all_gather = mpi_all_gather,
	.broadcast = mpi_broadcast,
};

int coll_init_mpi(struct zs_coll *c, unsigned world, char **cause)
{
	int nproc, me;
	MPI_Comm_size(MPI_COMM_WORLD, &nproc);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	if (world % (unsigned)nproc != 0)
		return zs_fail(cause, "N=%u ranks cannot be split evenly over %d MPI processes", world, nproc);
	memset(c, 0, sizeof *c);
	struct mpi_impl *m = zs_calloc(1, sizeof *m);
	m->nproc = nproc;
	m->me = me;
	m->per = world / (unsigned)nproc;
	m->stage = COLL_MPI_STAGE;
	m->scount = zs_calloc((size_t)nproc, sizeof *m->scount);
	m->sdispl = zs_calloc((size_t)nproc, sizeof *m->sdispl);
	m->rcount = zs_calloc((size_t)nproc, sizeof *m->rcount);
	m->rdispl = zs_calloc((size_t)nproc, sizeof *m->rdispl);
	m->src = zs_calloc(world, sizeof *m->src);
	m->dst = zs_calloc(m->per, sizeof *m->dst);
	c->world = world;
	c->r0 = (unsigned)me * m->per;
	c->r1 = c->r0 + m->per;
	c->ops = &mpi_ops;
	c->stats = zs_calloc(world, sizeof *c->stats);
	c->impl = m;
	c->impl_free = impl_free;
	return 0;
}

#endif /* HAVE_MPI */
