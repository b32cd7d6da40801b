/*
 * schedule — the names of the contract between the three stages, written
 * once: the tracker's categories, the phases of a step, and which states
 * each scheme shards. docs/schedule.md is the text; this is its vocabulary.
 * The engine tags its buffers with these names, the theory sums its bytes
 * under them, and the report reads them back from the JSON.
 *
 * This is plain data over config.h's names (the schemes, the frameworks, a
 * run's options); the counts of the shape (zs_params) are config's, so
 * config includes nothing of this. The engine, the theory and the report
 * may all include it; it includes nothing of theirs.
 */
#ifndef ZS_SCHEDULE_H
#define ZS_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "util/config.h"

/* What a byte is for (docs/schedule.md, "Categories"): the model states
 * first (through ZS_CAT_MOMENTUM), then the transients of a step, then a
 * framework's own communication buffers, never model state (DDP's gradient
 * buckets, resident; DeepSpeed's reduce bucket, held through backward). */
enum zs_cat {
	ZS_CAT_PARAM16, ZS_CAT_PARAM32, ZS_CAT_GRAD16, ZS_CAT_GRAD32,
	ZS_CAT_MASTER32, ZS_CAT_ADAM_M, ZS_CAT_ADAM_V, ZS_CAT_MOMENTUM,
	ZS_CAT_GATHERED, ZS_CAT_FULL_GRADS, ZS_CAT_ACTIVATIONS, ZS_CAT_SCRATCH,
	ZS_CAT_BUCKETS,
	ZS_NCATS
};

/* The phases of a step, in order, after the set-up. */
enum zs_phase { ZS_PH_SETUP, ZS_PH_FORWARD, ZS_PH_BACKWARD, ZS_PH_REDUCE, ZS_PH_OPTIMIZER, ZS_PH_GATHER,
	        ZS_NPHASES };

/* Their JSON names ("param16", "forward"); NULL out of range. */
const char *zs_cat_name(enum zs_cat c);

/* A breakdown, bytes per category, as the object `key` of parent (the
 * measured and the theory files write it so): every category always,
 * except `buckets`, listed only where it holds some (so the paper's files
 * are what they were before it existed; a reader takes a category missing
 * as 0). */
struct cJSON;
void zs_cat_json(struct cJSON *parent, const char *key, const uint64_t bytes[ZS_NCATS]);
const char *zs_phase_name(enum zs_phase p);

/* A caching-allocator replay's figures (util/cuda_alloc.h, struct
 * cuda_alloc_run) under the names both measured and theory files give
 * them (docs/formats.md, "allocator"): zs_alloc_keys[i] is v[i]. */
#define ZS_ALLOC_NKEYS 10
extern const char *const zs_alloc_keys[ZS_ALLOC_NKEYS];
struct cuda_alloc_run;
void zs_alloc_values(const struct cuda_alloc_run *r, double v[ZS_ALLOC_NKEYS]);
/* config.allocator of a file whose runs were replayed: {"model":
 * "pytorch-2.6.0", "conf": conf, "cublas_workspace_bytes": W} (conf: the
 * PYTORCH_CUDA_ALLOC_CONF-style options, NULL for none; W the workspace
 * each rank's first matmul asked for, 0 for none). */
void zs_alloc_config_json(struct cJSON *root, const char *conf, uint64_t cublas_workspace);

/* The model states, and how much of each a rank holds between steps. */
enum zs_state { ZS_STATE_PARAMS, ZS_STATE_GRADS, ZS_STATE_OPTIM, ZS_NSTATES };
/* ZS_TENSORS: whole parameter tensors, each held by the one rank it is
 * assigned to (torch's ZeroRedundancyOptimizer), so ranks hold unequal
 * parts; ZS_SHARD: every rank's equal slots of every unit. */
enum zs_span { ZS_FULL, ZS_SHARD, ZS_TENSORS };

/* The ZeRO paper's table (§5): zs_shards[scheme][state]. At N = 1 a shard
 * is the whole model and every scheme holds what dp holds. */
extern const enum zs_span zs_shards[ZS_NSCHEMES][ZS_NSTATES];

/* A framework's row for a scheme (docs/schedule.md, "Frameworks"): the
 * paper's is zs_shards[scheme]. Every framework has a row for every scheme. */
const enum zs_span *zs_row(enum zs_framework fw, enum zs_scheme scheme);

/* Refuse a framework's setting that the sweep's framework, schemes or
 * offload do not read (a DeepSpeed bucket without --framework deepspeed,
 * --offload params without zero3, ...): 0, or -1 with *cause. `theory`:
 * the theory's rules (it reads --ds-persist and --ranks-per-node where the
 * engine does not). */
int zs_framework_check(const struct zs_config *c, int theory, char **cause);

/* What a transformer's forward keeps for its backward (Korthikanti et al.
 * 2022, §4; docs/schedule.md): none recomputed, every block's tensors kept;
 * selective, the attention softmax of one block at a time (one (B, H, T, T)
 * buffer for all blocks), recomputed from qkv in each block's backward;
 * full, only each block's output (the next block's input), the block's
 * forward rerun in its backward into one block's worth of tensors. All
 * three give the same bits. The engine runs it and the theory sums it, so
 * the one name table is here. */
enum zs_recompute { ZS_RECOMPUTE_NONE, ZS_RECOMPUTE_SELECTIVE, ZS_RECOMPUTE_FULL };

/* "none", "selective", "full" ("?" out of range); parse: 0, or -1 for
 * another name. */
const char *zs_recompute_name(enum zs_recompute r);
int zs_recompute_parse(const char *s, enum zs_recompute *out);

/* A mixture of experts (mixtral, qwen2_moe, qwen3_moe) runs in the
 * engine's step, and the theory follows that step, as ZS_MOE_SCOPE says
 * (any recompute), in one process; under --framework torch --wrapper none,
 * ddp or fsdp measure runs and the theory describes PyTorch's own step
 * instead for the families ZS_MOE_TORCH_FAMILIES names (util/autograd.c's
 * mixture block, engine/ag_exec.c; under ddp util/ag_ddp.c's pass, under
 * fsdp util/ag_fsdp.c's, under --wrapper deepspeed's zero1 and zero2
 * util/ag_ds.c's, over each rank's step, each rank its own routing): what of c, the model's model_type (NULL where
 * none is known yet) and the caller's flags (below) is outside that,
 * named as an option ("--framework torch (give --framework paper or
 * deepspeed)"), into what (n bytes); "" when nothing is. measure and
 * theory refuse a mixture with it, each in its own sentence. */
#define ZS_MOE_TORCH_FAMILIES "mixtral, qwen2_moe and qwen3_moe"
#define ZS_MOE_SCOPE                                                                                          \
	"fp32 or mixed under --framework paper or deepspeed (its zero3 with the sparse-MoE block a z3 leaf), "    \
	"and fp32 under --framework torch --wrapper none, ddp or fsdp for " ZS_MOE_TORCH_FAMILIES " (PyTorch "  \
	"1.13's or 2.6's step, fsdp's FULL_SHARD under 1.13 with zero_grad zeros alone, under ddp and fsdp "        \
	"each rank its own routing; the theory with --routing FILE; "                                            \
	"--grad-accum, " \
	"each micro-step its own routing; bf16 autocast on 1.13's plain loop; --freeze and --lora-r on the plain loop), " \
	"and fp32 under --framework deepspeed --wrapper deepspeed --schemes zero1 or zero2 (1.13's step, each rank " \
	"its own routing, every expert given a token)"
/* Whether the PyTorch step's theory takes a mixture of this model_type
 * (one of ZS_MOE_TORCH_FAMILIES's words). */
int zs_moe_torch_takes(const char *model_type);
/* Under DeepSpeed's dp, and ZeRO-1 and ZeRO-2 outside ds_coord_starved_built
 * (util/ds_coord.h), an expert that gets no token is refused, measured or
 * predicted, in this sentence (docs/schedule.md, "Mixtures of experts");
 * ZeRO-3's z3 leaf zero-fills its grad before the leaf's one reduce, as a
 * block of the leaf's grads holds it: built. */
#define ZS_MOE_STARVED                                                                                        \
	"under --framework deepspeed its grad stays None, so DeepSpeed's reduce hook never fires for it and "  \
	"it zero-fills a grad of its own apart (stage_1_and_2.py get_flat_partition; engine.py for dp), "   \
	"which zerosim follows for zero1 and zero2 at N = 1 without --grad-accum or --offload only (give more " \
	"tokens: --batch, --seq; or --schemes zero3, whose z3 leaf zero-fills it before its one reduce)"
/* Under --wrapper deepspeed (DeepSpeed's engine over the PyTorch step's
 * mixture block, ZeRO-1 and ZeRO-2) an expert that gets no token, on any
 * rank at any step, is refused, measured or predicted, in this sentence
 * (docs/schedule.md, "DeepSpeed over the PyTorch step", its mixture
 * part). */
#define ZS_MOE_DS_WRAPPER_STARVED                                                                              \
	"under --wrapper deepspeed its .grad stays None: ZeRO-1's reduce_gradients skips it, ZeRO-2's hook never " \
	"fires, and the epilogue's get_flat_partition gives it zeros of its own (stage_1_and_2.py 719-724, "       \
	"1727-1730 at 38327e0), not built yet (give more tokens: --batch, --seq)"
/* counts (L blocks x E experts) = BTk assignments a block spread evenly,
 * the first BTk mod E experts one more (--routing balanced's). */
void zs_moe_balanced(uint64_t *counts, size_t L, size_t E, uint64_t BTk);
enum { ZS_MOE_MPI = 1, ZS_MOE_ALLOCATOR = 2, ZS_MOE_CASE = 4, ZS_MOE_FLASH = 8 };
void zs_moe_scope(const struct zs_config *c, const char *model_type, unsigned flags, char *what, size_t n);

#endif
