/*
 * config — the model and run options shared by `zerosim measure` and
 * `zerosim theory`: their defaults, parsing of
 * option values and of a sweep spec file (docs/formats.md, zerosim-sweep/5),
 * and the limits that keep every byte count exact in a double.
 *
 * This is plain data. The engine, the theory and the report may all include
 * it; it includes none of them.
 */
#ifndef ZS_CONFIG_H
#define ZS_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "util/freeze.h"

enum zs_scheme { ZS_DP, ZS_ZERO1, ZS_ZERO2, ZS_ZERO3, ZS_NSCHEMES };
enum zs_unit { ZS_UNIT_MODEL, ZS_UNIT_LAYER, ZS_NUNITS };
/* ZS_AMP_BF16 / ZS_AMP_FP16: PyTorch's own autocast (fp32 parameters,
 * grads and Adam state; 16-bit copies where autocast casts), described
 * for the PyTorch step only (--wrapper none or ddp, docs/schedule.md,
 * "Autocast"); everything else refuses it (zs_precision_amp_check). */
enum zs_precision { ZS_MIXED, ZS_FP32, ZS_AMP_BF16, ZS_AMP_FP16 };
enum zs_optimizer { ZS_ADAM, ZS_SGD };
/* Whose implementation of the schemes a run follows (docs/schedule.md,
 * "Frameworks"): the ZeRO paper's idealised one, PyTorch's classes, or
 * DeepSpeed's. The schemes keep their names; the framework says how each
 * is implemented. */
enum zs_framework { ZS_FW_PAPER, ZS_FW_TORCH, ZS_FW_DEEPSPEED, ZS_NFRAMEWORKS };
enum zs_offload { ZS_OFFLOAD_NONE, ZS_OFFLOAD_OPTIMIZER, ZS_OFFLOAD_PARAMS, ZS_NOFFLOADS };
/* FSDP's backward prefetch (torch's zero2/zero3, docs/schedule.md): none
 * (PyTorch 1.13's default) or BACKWARD_PRE (torch 2.x's default). */
enum zs_prefetch { ZS_PREFETCH_NONE, ZS_PREFETCH_BACKWARD_PRE, ZS_NPREFETCH };
/* The PyTorch a --framework torch or deepspeed run follows (docs/schedule.md,
 * "The PyTorch step"): the release and the device (their defaults, where
 * a "default" is left, are that release's on that device: util/autograd.h
 * ag_options_from_config), Adam's implementation, zero_grad's set_to_none,
 * transformers' attn_implementation, and whether the model is wrapped by
 * the framework (DDP, FSDP) or trained by a plain loop (N = 1 only). */
enum zs_torch_version { ZS_TORCH_2_6, ZS_TORCH_1_13 };
enum zs_torch_device { ZS_DEVICE_CUDA, ZS_DEVICE_CPU };
enum zs_optim_impl { ZS_OPTIM_IMPL_DEFAULT, ZS_OPTIM_SINGLE, ZS_OPTIM_FOREACH, ZS_OPTIM_FUSED };
enum zs_zero_grad { ZS_ZERO_GRAD_DEFAULT, ZS_ZERO_GRAD_NONE, ZS_ZERO_GRAD_ZEROS };
enum zs_attn { ZS_ATTN_DEFAULT, ZS_ATTN_EAGER, ZS_ATTN_SDPA };
enum zs_experts_impl { ZS_EXPERTS_MODULELIST, ZS_EXPERTS_EAGER, ZS_EXPERTS_GROUPED_MM, ZS_EXPERTS_BATCHED_MM };
enum zs_wrapper { ZS_WRAPPER_AUTO, ZS_WRAPPER_NONE, ZS_WRAPPER_DDP, ZS_WRAPPER_FSDP, ZS_WRAPPER_DEEPSPEED };

/* The MLP's depth: --layers (and a spec's or a case's "layers") takes 2 to
 * 131 widths, up to 130 layers; more gets a one-line error. A bound on the
 * input, kept as zs_config's (and zs_case's) array length on purpose:
 * zs_config is copied by value (config.c's parse-then-commit copies, a
 * case's `train`, the tests' fixtures), and a fixed array keeps each copy
 * its own, where a heap pointer would be shared by them and freed twice.
 * Nothing else is sized by it: the engine's layers and tensors, a
 * result's units and the theory's walk are sized by the model, and a
 * transformer's blocks are bounded by memory only. */
#define ZS_MAX_WIDTHS 131
#define ZS_MAX_WORLDS 64        /* entries in --world */
#define ZS_MAX_WORLD 65536      /* largest world size */
#define ZS_MAX_WIDTH 1000000    /* largest layer width */
#define ZS_MAX_STEPS 1000000
#define ZS_MAX_BATCH 65536
/* Byte counts must stay exact in a double: 16 bytes/param * params < 2^53. */
#define ZS_MAX_PARAMS 1e14
/* DeepSpeed ZeRO-3's sub_group_size default, in elements (--ds-sub-group-size). */
#define ZS_DS_SUB_GROUP 1e9
/* A DeepSpeed bucket, in elements (--ds-reduce-bucket, --ds-allgather-bucket). */
#define ZS_MAX_DS_BUCKET 4e9
/* Seeds are whole numbers 0..2^53-1, so that a JSON number (a double)
 * holds every one exactly and reads back as written: 2^53 + 1 in a file
 * reads as 2^53, which is therefore refused too. */
#define ZS_MAX_SEED 9007199254740991ULL
/* --grad-accum's largest K (the step list grows by K micro-steps). */
#define ZS_MAX_GRAD_ACCUM 1024ULL
#define ZS_MAX_LORA_R 65536ULL
#define ZS_LORA_TARGETS_MAX 255

/* The options a user can set (zs_config.given has bit ZS_KEY_BIT(ZS_KEY_...)). */
enum zs_key {
	ZS_KEY_LAYERS, ZS_KEY_WORLD, ZS_KEY_SCHEMES, ZS_KEY_UNITS, ZS_KEY_STEPS, ZS_KEY_BATCH,
	ZS_KEY_SEED, ZS_KEY_PRECISION, ZS_KEY_OPTIMIZER, ZS_KEY_LR, ZS_KEY_BETA1, ZS_KEY_BETA2,
	ZS_KEY_EPS, ZS_KEY_FRAMEWORK, ZS_KEY_BUCKET_CAP, ZS_KEY_PREFETCH, ZS_KEY_DS_REDUCE_BUCKET,
	ZS_KEY_DS_ALLGATHER_BUCKET, ZS_KEY_DS_OVERLAP_COMM, ZS_KEY_DS_PERSIST, ZS_KEY_OFFLOAD, ZS_KEY_RANKS_PER_NODE,
	ZS_KEY_DS_PREFETCH_BUCKET, ZS_KEY_DS_MAX_LIVE,
	/* The PyTorch a torch or deepspeed run follows (--torch-version, ...). */
	ZS_KEY_TORCH_VERSION, ZS_KEY_TORCH_DEVICE, ZS_KEY_OPTIM_IMPL, ZS_KEY_ZERO_GRAD, ZS_KEY_ATTN, ZS_KEY_WRAPPER,
	/* Gradient accumulation (--grad-accum K) and DDP's no_sync() on its
	 * first K - 1 micro-steps (--ddp-no-sync on|off). */
	ZS_KEY_GRAD_ACCUM, ZS_KEY_DDP_NO_SYNC,
	/* Fine-tuning (issue #23): --freeze PATTERN (util/freeze.h). */
	ZS_KEY_FREEZE,
	/* LoRA (issue #23): --lora-r R, --lora-alpha A, --lora-dropout P,
	 * --lora-targets T, PEFT's LoraConfig (docs/finetune.md). */
	ZS_KEY_LORA_R, ZS_KEY_LORA_ALPHA, ZS_KEY_LORA_DROPOUT, ZS_KEY_LORA_TARGETS,
	/* QLoRA (issue #23): --quant-base nf4, --double-quant on|off
	 * (bitsandbytes' Linear4bit under the adapters: docs/finetune.md). */
	ZS_KEY_QUANT_BASE, ZS_KEY_DOUBLE_QUANT,
	/* DeepSpeed ZeRO-3's zero_optimization.sub_group_size
	 * (--ds-sub-group-size): outside the ranges of DeepSpeed keys the
	 * wrappers' checks walk, checked on its own (check_ds_sub_group). */
	ZS_KEY_DS_SUB_GROUP,
	/* DDP's find_unused_parameters (--ddp-find-unused on|off; util/ag_ddp.h) */
	ZS_KEY_DDP_FIND_UNUSED,
	/* --recompute full's torch.utils.checkpoint: use_reentrant True or
	 * False (--recompute-impl reentrant|non-reentrant; util/autograd.h,
	 * ag_options.nonreentrant) */
	ZS_KEY_RECOMPUTE_IMPL,
	/* the loop's hold on the model's output (--logits kept|dropped:
	 * Hugging Face Trainer's compute_loss keeps the loss alone;
	 * ag_options.drop_logits) */
	ZS_KEY_LOGITS,
	/* a mixture's experts (--experts-impl modulelist|eager|grouped_mm|
	 * batched_mm: transformers 4.x's ModuleList of linears, or 5.x's two
	 * fused 3-D parameters under one of its experts implementations;
	 * zs_model.fused_experts) */
	ZS_KEY_EXPERTS_IMPL,
	/* the dtype the model is loaded in (--load-dtype fp32|bf16: Hugging
	 * Face's from_pretrained(torch_dtype=...)); bf16 only with
	 * --quant-base nf4 so far (QLoRA's bf16 recipe, docs/finetune.md
	 * "QLoRA loaded in bf16"; ag_options.mdt) */
	ZS_KEY_LOAD_DTYPE,
	/* FSDP's use_orig_params (--fsdp-orig-params on|off, default off as
	 * FSDP's; --wrapper fsdp under PyTorch 2.6: util/ag_fsdp.h,
	 * ag_options.fsdp_orig_params) */
	ZS_KEY_FSDP_ORIG_PARAMS,
	/* the LoRA adapters' dtype (--lora-dtype fp32|bf16): bf16 is TRL's
	 * SFTTrainer's cast over a quantized model (docs/finetune.md, "TRL's
	 * bf16 adapters"), only with --load-dtype bf16 so far */
	ZS_KEY_LORA_DTYPE,
	ZS_NKEYS
};

/* The set of given keys is one 64-bit word: room for 34 keys beyond
 * today's 30 before it needs another representation. */
typedef uint64_t zs_keys;
#define ZS_KEY_BIT(k) ((zs_keys)1 << (k))
_Static_assert(ZS_NKEYS <= 64, "zs_config.given holds a bit per key: 64 at most");

struct zs_tfm_run;

struct zs_config {
	size_t widths[ZS_MAX_WIDTHS];   /* d0..dL */
	size_t nwidths;                 /* L + 1 */
	unsigned world[ZS_MAX_WORLDS];
	size_t nworld;
	enum zs_scheme schemes[ZS_NSCHEMES];
	size_t nschemes;
	enum zs_unit units[ZS_NUNITS];
	size_t nunits;
	unsigned steps;
	unsigned batch;
	uint64_t seed;
	double lr;
	double beta1, beta2, eps;       /* Adam's; unused by SGD */
	enum zs_precision precision;
	enum zs_optimizer optimizer;
	enum zs_framework framework;
	double bucket_cap_mb;           /* torch: DDP's bucket_cap_mb (default 25) */
	enum zs_prefetch prefetch;      /* torch: FSDP's backward_prefetch */
	/* DeepSpeed's ZeRO-1/2 settings (--framework deepspeed; DeepSpeed's
	 * defaults): reduce_bucket_size and allgather_bucket_size in elements
	 * (5e8 each), overlap_comm (off for stages 1 and 2). */
	double ds_reduce_bucket, ds_allgather_bucket;
	int ds_overlap_comm;
	/* ZeRO-3's param_persistence_threshold (1e5): a tensor of at most
	 * this many elements stays whole on every rank. */
	double ds_persist;
	/* ZeRO-3's parameter coordinator: stage3_prefetch_bucket_size (5e7)
	 * and stage3_max_live_parameters (1e9), in elements. */
	double ds_prefetch_bucket, ds_max_live;
	/* ZeRO-3's sub_group_size, in elements: the engine's default
	 * (ZS_DS_SUB_GROUP, zero/config.py 168, passed by engine.py 1778;
	 * stage3.py's own 1e12 is not used). */
	double ds_sub_group;
	/* ZeRO-Offload: what lives in host memory (DeepSpeed's offload_optimizer
	 * and, ZeRO-3 only, offload_param, device cpu), and the ranks of a node
	 * (DeepSpeed's num_gpus_per_node, default 1). */
	enum zs_offload offload;
	unsigned ranks_per_node;
	/* The PyTorch followed (above): 2.6, cuda, and the rest "default"/auto. */
	enum zs_torch_version torch_version;
	enum zs_torch_device torch_device;
	enum zs_optim_impl optim_impl;
	enum zs_zero_grad zero_grad;
	enum zs_attn attn;
	enum zs_wrapper wrapper;
	/* --grad-accum: micro-steps per optimizer step (1: none; the
	 * micro-batch is --batch); --ddp-no-sync: DDP's no_sync() on the first
	 * K - 1 of them (1, the default) or not (0). The PyTorch step only. */
	unsigned grad_accum;
	int ddp_no_sync;
	/* --ddp-find-unused: DDP's find_unused_parameters (0, the default, or 1) */
	int ddp_find_unused;
	/* --recompute-impl: 1 where non-reentrant (checkpoint's
	 * use_reentrant=False), 0 (the default) where reentrant */
	int recompute_nonreentrant;
	/* --logits: 1 where dropped before backward (Trainer's compute_loss
	 * returns the loss alone), 0 (the default) where the loop holds the
	 * model's output to the step's end */
	int logits_dropped;
	/* --experts-impl: a mixture's experts as transformers 4.x registers
	 * them (ZS_EXPERTS_MODULELIST, the default), or 5.x's fused 3-D
	 * gate_up_proj and down_proj under its eager, grouped_mm or
	 * batched_mm experts implementation (integrations/moe.py; eager
	 * alone described, the PyTorch step's theory of a mixtral) */
	enum zs_experts_impl experts_impl;
	/* --freeze: the parameters left out of training, util/freeze.h's
	 * pattern ("" for none); a fixed array so that copies stay apart */
	char freeze[ZS_FREEZE_MAX + 1];
	/* --lora-r (0: no LoRA), --lora-alpha (8, PEFT's LoraConfig default),
	 * --lora-dropout (0: none), --lora-targets ("" for the
	 * family's default, "all-linear", or a comma list of module names) */
	unsigned lora_r;
	double lora_alpha, lora_dropout;
	char lora_targets[ZS_LORA_TARGETS_MAX + 1];
	/* --quant-base nf4 (1; 0: none) and --double-quant on (1; bnb's
	 * BitsAndBytesConfig default off): only with --lora-r */
	int quant_nf4, double_quant;
	/* --load-dtype bf16 (1; 0: fp32, the default): the model loaded in
	 * bf16, only with --quant-base nf4 */
	int load_bf16;
	/* --fsdp-orig-params on (1; 0: off, FSDP's default): FSDP's
	 * use_orig_params=True, a unit may mix frozen and trainable
	 * parameters (--wrapper fsdp, PyTorch 2.6; with --lora-r each
	 * block's unit its frozen base and its adapters) */
	int fsdp_orig_params;
	/* --lora-dtype bf16 (1; 0: fp32, PEFT's autocast_adapter_dtype):
	 * the adapters and their Adam state bf16, TRL's cast; only with
	 * --load-dtype bf16 */
	int lora_bf16;
	/* --recompute full under the PyTorch step (util/autograd.h,
	 * ag_options.recompute): set by measure and theory from their
	 * --recompute, no key of its own */
	int hf_recompute;
	/* A mixture's routing under the PyTorch step (ag_options.moe_counts:
	 * tokens per expert, layers x experts, of the step described): set by
	 * theory from its --routing FILE, no key of its own; NULL elsewhere.
	 * Not owned. */
	const uint64_t *moe_counts;
	/* The theory's: the run the routing file gives, [rank][step][block]
	 * [expert] (moe_run_steps steps; moe_run_ranks ranks, 1 where every
	 * rank routes as rank 0, else each rank its own list), whose steps'
	 * lists the peak is the most of (moe_counts is rank 0's last step's);
	 * NULL elsewhere. Not owned. */
	const uint64_t *moe_run;
	unsigned moe_run_steps, moe_run_ranks;
	zs_keys given;                  /* keys set by a spec or an option: ZS_KEY_BIT(key) */
	/* measure --model: a transformer instead of the MLP of widths
	 * (engine/tfm.h), or NULL. Not owned. */
	const struct zs_tfm_run *tfm;
};

/* The defaults: 64,256,64; N = 1..32 by doubling; all schemes;
 * unit model; 3 steps; batch 4; seed 3; mixed; adam; lr 1e-3; betas 0.9,
 * 0.999; eps 1e-8; framework paper; bucket cap 25 MB; prefetch none; DeepSpeed's
 * buckets 5e8 elements, overlap_comm off, persistence 1e5, prefetch bucket 5e7, max live
 * 1e9, sub groups of 1e9, no offload, one rank a node. */
void zs_config_defaults(struct zs_config *c);

/* Set one option from its command-line spelling: key is the long option
 * name without dashes ("layers", "world", "schemes", "unit", "steps",
 * "batch", "seed", "precision", "optimizer", "lr", "beta1", "beta2", "eps",
 * "framework", "bucket-cap", "prefetch", "ds-reduce-bucket", "ds-allgather-bucket", "ds-overlap-comm",
 * "ds-persist", "offload", "ranks-per-node", "ds-prefetch-bucket", "ds-max-live",
 * "torch-version", "torch-device", "optimizer-impl", "zero-grad", "attn", "wrapper",
 * "grad-accum", "ddp-no-sync", "ds-sub-group-size").
 * Returns 0 or -1 with *cause set ("--world: '0' is not a world size
 * (1..65536)"). Marks the key in c->given. */
int zs_config_set(struct zs_config *c, const char *key, const char *value, char **cause);

/* The key whose zs_config_set name (or its alias "scheme", "units") is
 * name[0..len), or -1. */
int zs_config_key(const char *name, size_t len);

/* Set `key` (a key of zerosim-sweep/5: "layers", "units", "lr", ...) from
 * a JSON value of its type; messages name the key as the file spells it. */
struct cJSON;
int zs_config_set_json(struct zs_config *c, const char *key, const struct cJSON *value, char **cause);

/* The framework a run follows into a file's "config" (docs/formats.md);
 * measured.json and theory.json both write it, so it is written here once:
 * - "framework" (absent: the paper's, as before the key existed), and
 *   under --framework torch its "bucket_cap_mb" and "prefetch";
 * - for the PyTorch step (--framework torch, --wrapper none, ddp or fsdp),
 *   "torch_version", "torch_device", "optimizer_impl", "zero_grad", "attn"
 *   and "wrapper", each as it runs (the *_resolve below: no "default");
 *   "attn" only where the run has a transformer (attention != 0: an MLP
 *   has none);
 * - under every framework, the step's settings that change its bytes
 *   (zs_step_json_keys), each only where it is on, so that a run without
 *   them writes what it wrote before they existed;
 * - for --framework deepspeed, "deepspeed": {"reduce_bucket",
 *   "allgather_bucket", "overlap_comm", "persist", "offload",
 *   "ranks_per_node"}. */
void zs_config_json_framework(struct cJSON *cfg, const struct zs_config *c, int attention);
/* The PyTorch keys, in that order (the report compares them between files). */
#define ZS_NTORCH_JSON_KEYS 6
extern const char *const zs_torch_json_keys[ZS_NTORCH_JSON_KEYS];
/* The step's settings that change its bytes, as the files name them: K
 * (written when K > 1), DDP's and FSDP's no_sync() (with K > 1 under
 * those wrappers), --freeze, LoRA's four and QLoRA's two. The report joins
 * two files only where each key is the same in both (absent in both, or
 * grad_accum absent beside 1). */
enum zs_step_json_key {
	ZS_SJ_GRAD_ACCUM,
	ZS_SJ_DDP_NO_SYNC,
	ZS_SJ_FREEZE,
	ZS_SJ_LORA_R,
	ZS_SJ_LORA_ALPHA,
	ZS_SJ_LORA_DROPOUT,
	ZS_SJ_LORA_TARGETS,
	ZS_SJ_QUANT_BASE,
	ZS_SJ_DOUBLE_QUANT,
	ZS_SJ_DDP_FIND_UNUSED,
	ZS_SJ_RECOMPUTE_IMPL,
	ZS_SJ_LOGITS,
	ZS_SJ_EXPERTS_IMPL,
	ZS_SJ_LOAD_DTYPE,
	ZS_SJ_FSDP_ORIG_PARAMS,
	ZS_SJ_LORA_DTYPE,
	ZS_NSTEP_JSON_KEYS
};
extern const char *const zs_step_json_keys[ZS_NSTEP_JSON_KEYS];

/* Load a zerosim-sweep/5, /4, /3, /2 or /1 file over `c` (keys it has replace
 * c's). A key the format does not have is an error naming it; an older
 * version's file has none of the later versions' keys (/2 adds the PyTorch
 * keys torch-version, torch-device, optimizer-impl, zero-grad, attn,
 * wrapper; /3 grad-accum, ddp-no-sync, freeze; /4 lora-r, lora-alpha,
 * lora-dropout, lora-targets, quant-base, double-quant, load-dtype,
 * fsdp-orig-params; /5 lora-dtype), and
 * one that has one is refused naming the version that has it. */
int zs_config_load_spec(struct zs_config *c, const char *path, char **cause);

/* The MLP's Ψ = Σ_l d_l·d_{l+1} + d_{l+1} for widths d_0..d_L, and a
 * unit=layer unit's n_l (the counts of the shape, here with the widths, so
 * that the schedule, which names the schemes of this file, is above it). */
uint64_t zs_params(const size_t *widths, size_t nwidths);
uint64_t zs_layer_params(const size_t *widths, size_t l);

/* Ψ for the widths: Σ d_l·d_{l+1} + d_{l+1}. */
double zs_config_params(const struct zs_config *c);

/* Check cross-option limits (Ψ not above ZS_MAX_PARAMS, ...). */
int zs_config_validate(const struct zs_config *c, char **cause);

/* The PyTorch options' rules (zs_config_validate calls it): refused
 * under --framework paper when given ("--zero-grad: only under
 * --framework torch or deepspeed"); --attn sdpa and, on the CPU,
 * --optimizer-impl fused need 2.x; --wrapper none needs every world size
 * to be 1 and none of DDP's, FSDP's or DeepSpeed's settings. */
int zs_config_check_torch(const struct zs_config *c, char **cause);

/* What needs a transformer (transformer: the run has --model or a
 * transformer's case): --attn, and --wrapper none. */
int zs_config_check_model(const struct zs_config *c, int transformer, char **cause);

/* Bytes per parameter for the precision and optimizer: p, g, k. */
void zs_bytes_per_param(enum zs_precision pr, enum zs_optimizer opt,
                        unsigned *p, unsigned *g, unsigned *k);

const char *zs_scheme_name(enum zs_scheme s);
const char *zs_unit_name(enum zs_unit u);
const char *zs_precision_name(enum zs_precision p);
const char *zs_optimizer_name(enum zs_optimizer o);
const char *zs_framework_name(enum zs_framework f);
const char *zs_prefetch_name(enum zs_prefetch p);
const char *zs_offload_name(enum zs_offload o);
/* The PyTorch options as the command line and the files spell them:
 * "2.6", "1.13"; "cuda", "cpu"; "default", "single", "foreach", "fused";
 * "default", "none", "zeros"; "default", "eager", "sdpa"; "auto", "none". */
const char *zs_torch_version_name(enum zs_torch_version v);
const char *zs_torch_device_name(enum zs_torch_device d);
const char *zs_optim_impl_name(enum zs_optim_impl i);
const char *zs_zero_grad_name(enum zs_zero_grad z);
const char *zs_attn_name(enum zs_attn a);
const char *zs_experts_impl_name(enum zs_experts_impl e);
const char *zs_wrapper_name(enum zs_wrapper w);
/* The run is the PyTorch step as data (util/autograd.h), plain (--wrapper
 * none), under DDP (--wrapper ddp, util/ag_ddp.h), FSDP (--wrapper fsdp,
 * util/ag_fsdp.h) or DeepSpeed's engine (--wrapper deepspeed,
 * util/ag_ds.h), not the layer driver's schemes: 1 or 0. */
int zs_wrapper_step(const struct zs_config *c);
/* The run trains part of the model: --freeze, or --lora-r under any
 * framework (every base parameter frozen, the adapters trained:
 * util/lora.h), so the floors and the paper level count g and k over
 * the trained elements. 1 or 0. */
int zs_config_trains_part(const struct zs_config *c);

/* The "default"s resolved to what the release does on the device
 * (docs/schedule.md, zerosim.1): zero_grad zeros in 1.13 (set_to_none
 * False), none from 2.0 (torch/optim/optimizer.py's zero_grad); Adam
 * single-tensor in 1.13 and on the CPU, foreach on CUDA from 2.0
 * (torch/optim/optimizer.py's _default_to_fused_or_foreach, fused never
 * by default); attn eager in 1.13 (no scaled_dot_product_attention), sdpa
 * in 2.x (transformers' default where the model supports it). A value
 * given stays as given. */
enum zs_optim_impl zs_optim_impl_resolve(const struct zs_config *c);
enum zs_zero_grad zs_zero_grad_resolve(const struct zs_config *c);
enum zs_attn zs_attn_resolve(const struct zs_config *c);
int zs_scheme_parse(const char *s, enum zs_scheme *out);
int zs_unit_parse(const char *s, enum zs_unit *out);
int zs_precision_parse(const char *s, enum zs_precision *out);
/* Autocast's precision is the PyTorch step's alone (--framework torch,
 * --wrapper none or ddp, with a model): 0, or -1 with *cause (bad usage)
 * for any other run; `has_model` says whether a transformer is given. */
int zs_precision_amp_check(const struct zs_config *c, int has_model, char **cause);
/* --recompute (its name: none, selective, full) of the PyTorch step: full
 * is Hugging Face's gradient checkpointing (c->hf_recompute), on the plain
 * loop and DDP so far; selective has no equivalent there. 0, or -1 with *cause
 * (bad usage). */
int zs_torch_recompute_set(struct zs_config *c, const char *recompute, char **cause);
int zs_optimizer_parse(const char *s, enum zs_optimizer *out);

/* Parse a byte size with a unit: "80GB" (1e9), "80GiB" (2^30), "512MB",
 * "1e12" (bytes): a whole number of bytes from 1 to 1e18. Returns 0 or -1
 * with *cause set. */
int zs_parse_bytes(const char *s, double *out, char **cause);

/* The grammar of quantities: decimal digits with an optional fraction and
 * exponent ("7.5e9", "0.001", ".5"); no sign, hex, white space, inf or nan.
 * Sets *out and returns 0 if the whole of s is one; -1 otherwise. */
int zs_parse_decimal(const char *s, double *out);

/* A whole number in [1, max], written in decimal digits only; errors
 * name the option as --OPT and the value as WHAT ("a world size"). */
int zs_parse_uint(const char *opt, const char *s, unsigned long long max, const char *what,
                  unsigned long long *out, char **cause);

/* Parse a positive whole count given as an integer or in e-notation
 * ("7.5e9"), at most `max`. */
int zs_parse_count(const char *s, double max, double *out, char **cause);

#endif
