/*
 * scheme — the state of one run (one scheme, one world size, one unit
 * mode) and the interface each scheme implements. engine.c drives the
 * step of docs/schedule.md; which resident buffers a scheme shards is its
 * row of zs_shards (util/schedule.h), read through the run's layout; a
 * scheme supplies only the hooks where it differs: when params are
 * gathered, where grads are materialised, which collective reduces them,
 * whether params are gathered after the optimizer, and where it holds a
 * layer's params when not in the run's buffers (the place hook).
 *
 * A scheme's hooks are a table and a context, as ggml's backends are an
 * interface and a `void *context`: its setup makes a state of its own
 * (DDP's buckets, FSDP's kept units, DeepSpeed's buckets and ZeRO-3
 * coordinator), every other hook receives it, and teardown frees it. The
 * run and rank structs below hold only what every scheme has; the driver
 * never looks into a scheme's state, and asks no framework by name: which
 * hooks a (framework, scheme, N) runs, and the few properties it reads as
 * data (the flags, per-tensor sharding, the memory bound), are rows of the
 * registry (scheme_registry.c).
 *
 * At N = 1 no paper hook is called (layout.h's N = 1 rule); the framework
 * hooks the registry still gives there ask no world size: at world 1 every
 * collective is the identity (coll.h).
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
#include "engine/net.h"
#include "engine/optim.h"
#include "engine/tracker.h"
#include "util/config.h"

struct zs_case;

/* One rank's buffers. Resident ones live for the whole run; transient ones
 * are NULL outside the part of the step that needs them. A framework's own
 * buffers are in its state (zs_run.ctx), not here. */
struct zs_rank {
	void *buf[ZS_NBUFS];          /* per-parameter buffers (layout.h) */
	float **t;                    /* the model's ntensors tensors (net.h) */
	/* A layer io's w and g (net.h), net_max_ptensors long each:
	 * one layer of this rank runs at a time. */
	const void **w;
	void **g;
	float loss;
	/* QLoRA's 4-bit base: its layers' storages (net.tfm.nq4parts) and
	 * with double quantization the dynamic map (name2qmap["dynamic"],
	 * once a rank); NULL without */
	struct zs_q4_store *q4;
	float *qmap;
};

struct zs_run {
	/* The scheme's hooks, as the registry gives them for (framework,
	 * scheme, N), and the state they keep (ggml's backends: an interface
	 * and a context). The state is the hooks' alone: setup makes it,
	 * teardown frees it, and the driver only hands it back to them. */
	const struct zs_scheme_ops *ops;
	void *ctx;
	struct zs_net model;
	struct zs_layout layout;
	unsigned world, r0, r1;       /* N, and the ranks this process holds */
	/* The resident state's precision: --precision's, but fp32 where the
	 * framework keeps its state in fp32 under mixed precision too
	 * (ZS_OPS_FP32_STATE); dt is the compute's and the collectives'
	 * (fp16 under --precision mixed). */
	enum zs_precision precision;
	enum zs_dtype dt;             /* of params and grads as computed */
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
	/* A mixture of experts: the tokens each expert got, [k][step][block][expert]
	 * (engine.c's record_routing; NULL for any other model). Handed to the result. */
	size_t *routing;
	size_t routing_blocks, routing_experts;
	/* Per-rank pointer lists handed to the collectives (bookkeeping, O(N)). */
	void **ptr_a, **ptr_b;

	uint64_t seed;
	const struct zs_case *cs;
	const float *init;            /* the initial fp32 weights, Ψ (outside every rank) */
	const struct zs_config *config; /* the run's options (a framework's settings) */
	/* Gradient accumulation (--grad-accum K: the paper's schedule, dp and
	 * ZeRO-1 to 3, and DeepSpeed's dp, ZeRO-1, ZeRO-2 and ZeRO-3 on the
	 * MLP): an optimizer step is K micro-steps, each a forward, backward
	 * and reduce on its slice of the K-fold batch; micro is the one
	 * running (0..K-1), the optimizer runs after the last. */
	unsigned micro, nmicro;
	unsigned step; /* the step running (0-based; what layer_io hands the layers) */
};

enum zs_pass { ZS_PASS_FORWARD, ZS_PASS_BACKWARD };

/* Properties of a scheme's hooks (zs_scheme_ops.flags), read by the
 * driver as data. */
enum {
	/* The optimizer state has an fp32 master copy in both precisions
	 * (DeepSpeed's single_partition_of_fp32_groups). */
	ZS_OPS_MASTER32 = 1 << 0,
	/* Under --precision mixed the resident params and grads stay fp32 and
	 * there is no master copy; only what is gathered and computed is
	 * fp16 (FSDP's MixedPrecision: fp32 FlatParameter shards). */
	ZS_OPS_FP32_STATE = 1 << 1,
	/* Every unit gathered in forward is kept until its backward (FSDP's
	 * SHARD_GRAD_OP), not only the root. */
	ZS_OPS_KEEP_FORWARD = 1 << 2,
	/* Under --grad-accum a micro-step after the first places each unit's
	 * new grads itself and adds them up (DeepSpeed's: fresh_begin, ZeRO-2's
	 * new partition, ZeRO-3's add_ into the partition), so the driver makes
	 * no accumulation transient of its own (engine.c's accum_transient). */
	ZS_OPS_OWN_ACCUM = 1 << 3,
};

/* A scheme's hooks. Each is NULL where the scheme does what the driver
 * does. Every hook but buffers gets the state setup made (ctx; NULL for
 * the schemes that keep none). */
struct zs_scheme_ops {
	const char *name;
	unsigned flags;               /* ZS_OPS_* */
	/* Before anything is allocated, and before the state exists: a
	 * framework's own types of the resident buffers and where they live
	 * (DeepSpeed's offload: r->host, its fp32 grad partition). */
	void (*buffers)(struct zs_run *r);
	/* After the resident state is allocated (phase setup): make the
	 * scheme's state (*ctx) and its own resident buffers (DDP's buckets,
	 * DeepSpeed's ZeRO-3 bucket); 0, or -1 with *cause and nothing of
	 * its own left allocated. Teardown frees them all, wherever the step
	 * stopped (a hook failed), before the driver frees its buffers. */
	int (*setup)(struct zs_run *r, void **ctx, char **cause);
	void (*teardown)(struct zs_run *r, void *ctx);
	/* Around each unit in forward and backward (zero3's gather). */
	void (*begin_unit)(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass);
	void (*end_unit)(struct zs_run *r, void *ctx, size_t u, enum zs_pass pass);
	/* Around each module of a layer whose kind has modules, instead of
	 * the unit hooks (DeepSpeed's ZeRO-3 on a transformer: its gather and
	 * release per nn.Module, module s of layer l): the driver then runs
	 * such a layer module by module on every rank. Returns 0 where the
	 * module runs no backward (its output needs no grad: frozen below the
	 * first trainable module, --freeze): the driver then skips its kernel
	 * and its closing call; else 1. */
	int (*module)(struct zs_run *r, void *ctx, size_t l, size_t s, enum zs_pass pass, int begin);
	/* Where rank k's params of layer l (and in backward its grads) are
	 * now, when the scheme holds them outside the run's buffers (FSDP's
	 * units kept since their forward; DeepSpeed's ZeRO-3 tensors, each in
	 * a block of its own): it fills io->w and io->g and returns 1; 0
	 * leaves them to the driver (run_layer_params, run_layer_grads). */
	int (*place)(const struct zs_run *r, const void *ctx, unsigned k, size_t l, enum zs_pass pass,
	             struct zs_layer_io *io);
	/* At the start of backward (zero2's full grad buffer); 0, or -1 with
	 * *cause (DeepSpeed's buckets could not be mapped). */
	int (*begin_backward)(struct zs_run *r, void *ctx, char **cause);
	/* After backward (dp's all-reduce, zero1's and zero2's reduce-scatter). */
	void (*reduce)(struct zs_run *r, void *ctx);
	/* At the start of the optimizer phase (DeepSpeed's fp32 gradient
	 * partition). */
	void (*before_optimizer)(struct zs_run *r, void *ctx);
	/* The optimizer steps the pieces in groups, one after another
	 * (DeepSpeed ZeRO-3's sub groups): before group i it prepares it
	 * (after finishing group i - 1) and returns the piece the group ends
	 * at, past the last group's start (layout_npieces when i is past the
	 * last group). NULL: one group of every piece. */
	size_t (*step_group)(struct zs_run *r, void *ctx, size_t i);
	/* The fp32 grads of piece u (its layout_own slice of the grads) that
	 * rank k's optimizer steps on, when the scheme made them (DeepSpeed's
	 * fp32 gradient partition); NULL: the grads buffer's. */
	const float *(*optimizer_grads)(const struct zs_run *r, const void *ctx, unsigned k, size_t u);
	/* After the optimizer (zero1's and zero2's all-gather of params). */
	void (*after_optimizer)(struct zs_run *r, void *ctx);
};

/* The registry (scheme_registry.c, tmux's cmd_table[]): one row per
 * framework and scheme, each saying which hooks run at N > 1 and at N = 1,
 * how the layout cuts the state, and what the framework's own buffers add
 * to a run's memory bound. The paper's rows at N = 1 run scheme_one_rank
 * (the N = 1 rule: no hook); a framework keeps its hooks there where its
 * library keeps its buffers and casts (DDP's reducer, FSDP's NO_SHARD,
 * DeepSpeed's stages). zs_row (util/schedule.h) says which state each
 * shards. */
struct zs_scheme_entry {
	enum zs_framework framework;
	enum zs_scheme scheme;
	const struct zs_scheme_ops *ops, *one; /* at N > 1, at N = 1 */
	int per_tensor;               /* each tensor sharded on its own (layout_shard_tensors) */
	/* Bytes per rank of the framework's buffers beyond engine_bytes_
	 * upper_bound's model states, for the sweep's memory bound; NULL: none. */
	double (*bound)(const struct zs_config *c, const struct zs_layout *lo);
};

/* The row of (fw, scheme); every pair has one. */
const struct zs_scheme_entry *scheme_entry(enum zs_framework fw, enum zs_scheme scheme);
/* Its hooks at world size N. */
const struct zs_scheme_ops *scheme_ops(const struct zs_scheme_entry *e, unsigned world);

/* The hooks the rows name, each defined in its scheme's file. */
extern const struct zs_scheme_ops scheme_dp, scheme_zero1, scheme_zero2, scheme_zero3, scheme_one_rank;
extern const struct zs_scheme_ops scheme_torch_dp, scheme_torch_zero1, scheme_torch_zero2, scheme_torch_zero3,
        scheme_torch_no_shard;
extern const struct zs_scheme_ops scheme_ds_dp, scheme_ds_dp_one, scheme_ds_zero1, scheme_ds_zero2, scheme_ds_zero3;
/* The frameworks' bounds: DDP's buckets, Ψ·g (scheme_torch.c); FSDP's
 * reduce-scatter and all-gather buffers; DeepSpeed's buckets as far as
 * they are written and its fp32 partitions (scheme_deepspeed.c). */
double scheme_ddp_bound(const struct zs_config *c, const struct zs_layout *lo);
double scheme_fsdp_bound(const struct zs_config *c, const struct zs_layout *lo);
double scheme_deepspeed_bound(const struct zs_config *c, const struct zs_layout *lo);

/* Helpers for the schemes (engine.c). */

static inline struct zs_rank *run_rank(const struct zs_run *r, unsigned k) { return &r->rank[k - r->r0]; }

/* Address of element `at` of rank k's buffer b. */
static inline void *run_at(const struct zs_run *r, unsigned k, enum zs_rankbuf b, size_t at)
{
	/* a 4-bit base's weights are not in full params (a shard's index is its own) */
	if (b == ZS_BUF_PARAMS && r->layout.nholes > 0 && layout_span(&r->layout, b) == ZS_FULL)
		at = layout_params_at(&r->layout, at);
	return (char *)run_rank(r, k)->buf[b] + at * r->esize[b];
}

/* The unit whose params layer l reads (a tied layer reads the first's). */
size_t run_unit_of(const struct zs_run *r, size_t l);

/* Layer l's params and (in backward) grads for rank k where the run's
 * buffers hold them (the driver's placement, for a place hook that holds
 * only some): the params in the gathered copy while there is one, else
 * in the resident params; the grads in the full grads while there is a
 * transient copy, else in the resident grads, and none for a tied layer. */
void run_layer_params(const struct zs_run *r, unsigned k, size_t l, struct zs_layer_io *io);
void run_layer_grads(const struct zs_run *r, unsigned k, size_t l, enum zs_pass pass, struct zs_layer_io *io);

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
/* The same under gradient accumulation (the paper's zero2 and zero3): on
 * micro-step 0 as above; on a later one into a transient of the unit's
 * slots (the grads' category), added into the owned slots and freed. */
void run_reduce_scatter_unit_acc(struct zs_run *r, size_t u, enum zs_rankbuf from);
/* All-gather unit u of the params from the slots each rank owns into its
 * full copy in `into` (in place when that is the full params buffer). */
void run_gather_params_unit(struct zs_run *r, size_t u, enum zs_rankbuf into);
/* All-gather every unit of the full params buffer in place (zero1, zero2);
 * the same as an after_optimizer hook. */
void run_gather_params_in_place(struct zs_run *r);
void run_gather_params_after_step(struct zs_run *r, void *ctx);

#endif
