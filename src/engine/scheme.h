/*
 * scheme — the state of one run (one scheme, one world size, one unit
 * mode) and the small interface each scheme implements. engine.c drives the
 * step of docs/schedule.md; a scheme says which resident buffers it shards
 * (DESIGN.md's table) and supplies the few hooks where it differs: when
 * params are gathered, where grads are materialised, which collective
 * reduces them, and whether params are gathered after the optimizer.
 */
#ifndef ZS_SCHEME_H
#define ZS_SCHEME_H

#include <stddef.h>

#include "engine/coll.h"
#include "engine/fp16.h"
#include "engine/mlp.h"
#include "engine/optim.h"
#include "engine/tracker.h"
#include "util/config.h"

struct zs_case;

/* One rank's buffers. Resident ones live for the whole run; transient ones
 * are NULL outside the part of the step that needs them. */
struct zs_rank {
	void *params;     /* working params: full (Ψ) or shard (S), fp16 or fp32 */
	void *grads;      /* full or shard */
	float *master;    /* fp32 master weights (mixed only): full or shard */
	float *m, *v;     /* Adam moments, or SGD momentum in m (v NULL) */
	void *gathered;   /* zero3: the current unit's gathered params */
	void *full_grads; /* zero2: the whole model's grads; zero3: the current unit's */
	float *x, *y;                   /* (B, d0), (B, dL) */
	float *act[ZS_MAX_WIDTHS];      /* layer l's output (B, d_{l+1}) */
	float *delta[2];                /* (B, max width) each */
	float loss;
};

struct zs_run {
	const struct zs_scheme_ops *ops;
	struct mlp_shape shape;
	unsigned world;
	size_t batch;
	enum zs_precision precision;
	enum zs_dtype dt; /* of params and grads */
	size_t esize;     /* their bytes per element: p = g */
	struct optim opt;

	/* Units (docs/schedule.md): offset in the flat layout, elements,
	 * slots per rank s, offset in the shard layout, and their layers. */
	size_t nunits;
	size_t unit_off[ZS_MAX_WIDTHS], unit_n[ZS_MAX_WIDTHS];
	size_t unit_s[ZS_MAX_WIDTHS], unit_soff[ZS_MAX_WIDTHS];
	size_t unit_first[ZS_MAX_WIDTHS], unit_last[ZS_MAX_WIDTHS];
	size_t shard; /* S = Σ s_u */

	struct zs_tracker tracker;
	struct zs_coll coll;
	/* This process holds ranks [r0, r1) (all of them in process, N/P
	 * under MPI); rank[] and the tracker are indexed 0..N-1 and only
	 * those ranks' entries are used. */
	unsigned r0, r1;
	int mpi;
	struct zs_rank *rank;
	float *rank_loss; /* [rank][step]: each rank's loss */
	/* Per-rank pointer lists handed to the collectives (bookkeeping, O(N)). */
	void **ptr_a, **ptr_b;

	uint64_t seed;
	const struct zs_case *cs;
	const float *init; /* the initial fp32 weights, Ψ (outside every rank) */
};

enum zs_pass { ZS_PASS_FORWARD, ZS_PASS_BACKWARD };

struct zs_scheme_ops {
	const char *name;
	int params_sharded, grads_sharded, state_sharded;
	/* Around each unit in forward and backward (zero3's gather). */
	void (*begin_unit)(struct zs_run *r, size_t u, enum zs_pass pass);
	void (*end_unit)(struct zs_run *r, size_t u, enum zs_pass pass);
	/* At the start of backward (zero2's full grad buffer). */
	void (*begin_backward)(struct zs_run *r);
	/* After backward (dp's all-reduce, zero1's and zero2's reduce-scatter). */
	void (*reduce)(struct zs_run *r);
	/* After the optimizer (zero1's and zero2's all-gather of params). */
	void (*after_optimizer)(struct zs_run *r);
};

extern const struct zs_scheme_ops scheme_dp, scheme_zero1, scheme_zero2, scheme_zero3;

/* Helpers for the schemes (engine.c). */

/* Address of element `i` of a params or grads buffer. */
static inline void *run_elem(const struct zs_run *r, void *buf, size_t i)
{
	return (char *)buf + i * r->esize;
}

/* Real elements of rank k's slots of unit u (0 for a rank holding only padding). */
size_t run_owned(const struct zs_run *r, size_t u, unsigned k);

/* Allocate on every rank: dst[k] = tracker_alloc(k, cat, bytes). */
void run_alloc_all(struct zs_run *r, size_t offset_of_field, enum zs_cat cat, size_t bytes);
void run_free_all(struct zs_run *r, size_t offset_of_field);
#define RUN_FIELD(f) offsetof(struct zs_rank, f)

/* Reduce-scatter unit u from each rank's full buffer (field, at element
 * `full_off`) into its grad shard (or its own slots of the full buffer when
 * the grads are not sharded). */
void run_reduce_scatter_unit(struct zs_run *r, size_t u, size_t full_field, size_t full_off);
/* All-gather unit u of the params: from the shards into field at full_off,
 * or in place in the full params buffer. */
void run_gather_params_unit(struct zs_run *r, size_t u, size_t full_field, size_t full_off);
/* All-gather every unit of the full params buffer in place (zero1, zero2). */
void run_gather_params_in_place(struct zs_run *r);

#endif
