/*
 * scheme — the state of one run (one scheme, one world size, one unit
 * mode) and the small interface each scheme implements. engine.c drives the
 * step of docs/schedule.md; which resident buffers a scheme shards is its
 * row of zs_shards (util/schedule.h), read through the run's layout; a
 * scheme supplies only the hooks where it differs: when params are
 * gathered, where grads are materialised, which collective reduces them,
 * and whether params are gathered after the optimizer. At N = 1 no paper
 * hook is called (layout.h's N = 1 rule); the framework hooks scheme_ops
 * still gives there ask no world size: at world 1 every collective is the
 * identity (coll.h).
 *
 * A process holds ranks [r0, r1) of the N; every per-rank loop runs over
 * those, and the pointer lists handed to the collectives are indexed by
 * k - r0. The in-process backend holds all of them.
 */
#ifndef ZS_SCHEME_H
#define ZS_SCHEME_H

#include <stddef.h>

#include "engine/coll.h"
#include "engine/fp16.h"
#include "engine/layout.h"
#include "engine/model.h"
#include "engine/optim.h"
#include "engine/tracker.h"
#include "util/config.h"

struct zs_case;

/* One rank's buffers. Resident ones live for the whole run; transient ones
 * are NULL outside the part of the step that needs them. */
struct zs_rank {
	void *buf[ZS_NBUFS];          /* per-parameter buffers (layout.h) */
	float **t;                    /* the model's ntensors tensors (model.h) */
	/* Unit u's params gathered in its forward and kept until its backward
	 * (torch's zero2, FSDP SHARD_GRAD_OP): a full copy of the unit, in
	 * category gathered_params; NULL otherwise. One a unit (engine_run
	 * allocates the list). */
	void **held;
	/* DeepSpeed's own transients (scheme_deepspeed.c): its reduce buckets
	 * (ipg_buffer, two with overlap_comm) and the fp32 gradient partition
	 * the optimizer steps on (NULL outside the optimizer: then the
	 * optimizer reads the grads buffer). */
	void *bucket[2];
	float *grad32;
	void *offload_tmp[2];         /* ZeRO-Offload's device and host grad buffers */
	void *held_grad;              /* ZeRO-3: autograd's grad of a tensor larger than the bucket, kept past its module */
	/* DeepSpeed's ZeRO-3: each parameter tensor's gathered copy (param.data,
	 * in category gathered_params), NULL while it is only partitioned; the
	 * list is NULL for every other scheme. */
	void **whole;
	/* DDP's gradient buckets (torch's dp and zero1): bucket i's flat
	 * grads, in category buckets, for the whole run; NULL otherwise. At
	 * most one a tensor (engine_run allocates the list). */
	void **ddp_bucket;
	float loss;
};

/* DeepSpeed's reduce bucket as the step fills it: elements used, the
 * buffer in use, and the units copied into it and not yet reduced, each
 * with the element of the bucket it starts at. */
struct zs_bucket {
	size_t used, count;
	size_t *unit, *at;  /* units; tensors under ZeRO-3 (engine_run allocates room for both) */
	unsigned index;
};

struct zs_ds3;

/* A DDP bucket: the layout's parameter tensors ntensors-1-first down to
 * ntensors-first-count (reverse model order, as gradients become ready),
 * n elements in all. */
struct zs_ddp_bucket {
	size_t first, count, n;
};

struct zs_run {
	const struct zs_scheme_ops *ops;
	struct zs_net model;
	struct zs_layout layout;
	unsigned world, r0, r1;       /* N, and the ranks this process holds */
	enum zs_precision precision;
	enum zs_dtype dt;             /* of params and grads */
	struct optim opt;
	/* Per buffer: its category, bytes per element, and the first element
	 * of the flat vector it holds while it is a full copy (0 for the
	 * resident full buffers; a transient copy of unit u starts at off_u). */
	enum zs_cat cat[ZS_NBUFS];
	size_t esize[ZS_NBUFS];
	size_t base[ZS_NBUFS];
	size_t len[ZS_NBUFS];         /* and how many elements a transient copy holds */
	int host[ZS_NBUFS];           /* held in host memory (an offloaded buffer) */

	struct zs_tracker tracker;
	struct zs_coll coll;
	struct zs_rank *rank;         /* rank[k - r0] */
	int mpi;                      /* the MPI backend (coll_mpi.h) */
	float *rank_loss;             /* [k][step]: rank k's losses (all N under MPI, for the gather) */
	/* Per-rank pointer lists handed to the collectives (bookkeeping, O(N)). */
	void **ptr_a, **ptr_b;

	enum zs_prefetch prefetch;    /* FSDP's backward prefetch (torch's zero2/3) */
	/* DDP's buckets (scheme_torch.c); 0 for every other scheme. */
	size_t nddp_buckets;
	struct zs_ddp_bucket *ddp_bucket; /* at most one a tensor (engine_run allocates the list) */

	uint64_t seed;
	const struct zs_case *cs;
	const float *init;            /* the initial fp32 weights, Ψ (outside every rank) */
	const struct zs_config *config; /* the run's options (a framework's settings) */
	struct zs_bucket bucket;
	struct zs_ds3 *ds3;           /* DeepSpeed's ZeRO-3 parameter coordinator (scheme_deepspeed.c) */
};

enum zs_pass { ZS_PASS_FORWARD, ZS_PASS_BACKWARD };

struct zs_scheme_ops {
	const char *name;
	/* Before anything is allocated: a framework's own types of the buffers
	 * (FSDP's MixedPrecision: fp32 shards, fp16 working copies) and where
	 * they live (DeepSpeed's offload: r->host). */
	void (*buffers)(struct zs_run *r);
	/* After the resident state is allocated (phase setup), and before it
	 * is freed: a framework's own resident buffers (DDP's buckets). */
	void (*setup)(struct zs_run *r, const struct zs_config *c);
	void (*teardown)(struct zs_run *r);
	/* Around each unit in forward and backward (zero3's gather). */
	void (*begin_unit)(struct zs_run *r, size_t u, enum zs_pass pass);
	void (*end_unit)(struct zs_run *r, size_t u, enum zs_pass pass);
	/* Around each module of a layer whose kind has modules, instead of
	 * the unit hooks (DeepSpeed's ZeRO-3 on a transformer: its gather and
	 * release per nn.Module, module s of layer l): the driver then runs
	 * such a layer module by module on every rank. */
	void (*module)(struct zs_run *r, size_t l, size_t s, enum zs_pass pass, int begin);
	/* At the start of backward (zero2's full grad buffer). */
	void (*begin_backward)(struct zs_run *r);
	/* After backward (dp's all-reduce, zero1's and zero2's reduce-scatter). */
	void (*reduce)(struct zs_run *r);
	/* After the optimizer (zero1's and zero2's all-gather of params). */
	void (*after_optimizer)(struct zs_run *r);
	/* At the start of the optimizer phase (DeepSpeed's fp32 gradient
	 * partition). */
	void (*before_optimizer)(struct zs_run *r);
	/* The optimizer state has an fp32 master copy in both precisions
	 * (DeepSpeed's single_partition_of_fp32_groups). DeepSpeed's hooks run
	 * at N = 1 too (it allocates its buffers on one rank as on many). */
	int master32;
};

extern const struct zs_scheme_ops scheme_dp, scheme_zero1, scheme_zero2, scheme_zero3;
/* The N = 1 rule's hooks: none (engine.c). */
extern const struct zs_scheme_ops scheme_one_rank;

/* A framework's hooks for a scheme at world size N (scheme_torch.c; the
 * paper's are the four above, and scheme_one_rank at N = 1, where DDP
 * alone still runs its reducer). zs_row says which exist. */
const struct zs_scheme_ops *scheme_ops(enum zs_framework fw, enum zs_scheme scheme, unsigned world);

/* Bytes per rank of a framework's resident buffers beyond the model
 * states, for the sweep's memory bound: DDP's buckets, Ψ·g. */
size_t scheme_buffer_bytes(enum zs_framework fw, enum zs_scheme scheme, size_t nparams, size_t grad_bytes);

/* DeepSpeed's hooks for a scheme (scheme_deepspeed.c), NULL where they are
 * the paper's (dp); and the bytes a rank of a DeepSpeed run touches beyond
 * engine_bytes_upper_bound's paper terms (its buckets as far as they are
 * written, the fp32 partitions). */
const struct zs_scheme_ops *scheme_deepspeed_ops(enum zs_scheme scheme);
double scheme_deepspeed_bound(const struct zs_config *c, const struct zs_layout *lo);

/* Helpers for the schemes (engine.c). */

static inline struct zs_rank *run_rank(const struct zs_run *r, unsigned k) { return &r->rank[k - r->r0]; }

/* Address of element `at` of rank k's buffer b. */
static inline void *run_at(const struct zs_run *r, unsigned k, enum zs_rankbuf b, size_t at)
{
	return (char *)run_rank(r, k)->buf[b] + at * r->esize[b];
}

/* Allocate transient buffer b on every rank held, as a full copy of the
 * elements [first, first + n) of the flat vector; free it again. */
void run_alloc_full(struct zs_run *r, enum zs_rankbuf b, size_t first, size_t n);
void run_free_all(struct zs_run *r, enum zs_rankbuf b);

/* All-reduce unit u of the full buffer b in place (dp). */
void run_all_reduce_unit(struct zs_run *r, size_t u, enum zs_rankbuf b);
/* All-reduce every unit of the full grads in place (dp, torch's zero1). */
void run_all_reduce_grads(struct zs_run *r);
/* Reduce-scatter unit u from each rank's full copy in `from` into the
 * slots it owns of its grads (in place when the grads are full). */
void run_reduce_scatter_unit(struct zs_run *r, size_t u, enum zs_rankbuf from);
/* All-gather unit u of the params from the slots each rank owns into its
 * full copy in `into` (in place when that is the full params buffer). */
void run_gather_params_unit(struct zs_run *r, size_t u, enum zs_rankbuf into);
/* All-gather every unit of the full params buffer in place (zero1, zero2). */
void run_gather_params_in_place(struct zs_run *r);

#endif
