/*
 * theory — the closed-form memory and communication model of data-parallel
 * training under DP and ZeRO-1/2/3, from the model's shape and options alone.
 *
 * Two levels (docs/design.md, "The theory"):
 *   - floors: Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
 *     Trillion Parameter Models", SC'20, §5 and Table 1 — no padding, no
 *     transients;
 *   - schedule: the exact bytes of docs/schedule.md — padding per unit,
 *     transient gathered params and full grads, activations, scratch.
 *
 * Everything here is a pure function of its arguments. Nothing in
 * src/theory/ includes an engine header: if the theory ever agreed with the
 * engine because it asked the engine, it would prove nothing.
 */
#ifndef ZS_THEORY_H
#define ZS_THEORY_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "util/config.h"
#include "util/cuda_alloc.h"
#include "util/model.h"
#include "util/schedule.h"
#include "util/step.h"

/* Bytes per parameter (docs/schedule.md, "Symbols"), and how the optimizer
 * bytes k split into the categories the tracker uses. */
struct theory_bytes {
	unsigned p, g, k;       /* working param, grad, optimizer state */
	unsigned master;        /* fp32 master copy: 4 mixed, 0 fp32 */
	unsigned adam;          /* each of adam_m, adam_v: 4 with Adam, else 0 */
	unsigned momentum;      /* 4 with SGD, else 0 */
};

void theory_bytes_per_param(enum zs_precision pr, enum zs_optimizer opt,
                            struct theory_bytes *out);

/* Bytes are counted in the contract's categories, enum zs_cat
 * (util/schedule.h). */

/* ------------------------------------------------------------------------ */
/* Floors: the paper's formulas, for a model that is only a count Ψ. */

struct theory_floor {
	double resident_bytes;  /* model states per rank */
	double comm_bytes;      /* bytes sent per rank per step */
	double comm_elements;   /* elements sent per rank per step */
};

void theory_floor(double params, enum zs_scheme scheme, unsigned world,
                  const struct theory_bytes *b, struct theory_floor *out);

/* The floor of a run that trains `trained` of its `params` (--freeze;
 * docs/schedule.md, "The floors under --freeze"): a frozen parameter holds
 * its p bytes, sharded as the scheme shards params, and no g, no k; the
 * grads' reduce and ZeRO-1/2's gather run over the trained ones, ZeRO-3's
 * gathers over every one. theory_floor is it with trained = params. */
void theory_floor_trained(double params, double trained, enum zs_scheme scheme, unsigned world,
                          const struct theory_bytes *b, struct theory_floor *out);

/* The floor's bytes sent per optimizer step under gradient accumulation,
 * K micro-steps a step (docs/schedule.md, "The paper's schedule under
 * accumulation"): dp and P_os reduce once at the boundary (K = 1's);
 * P_os+g reduce-scatters every micro-step (K times the grads' bytes);
 * P_os+g+p also gathers the params for every micro-step's forward and
 * backward (K times everything). K <= 1 changes nothing. */
void theory_floor_accum(double params, double trained, enum zs_scheme scheme, unsigned world,
                        const struct theory_bytes *b, unsigned K, struct theory_floor *out);

/* ------------------------------------------------------------------------ */
/* Schedule: the exact bytes of docs/schedule.md for a model with a shape.
 * Byte counts are exact integers (the caller validated the shape against
 * ZS_MAX_PARAMS, so they stay below 2^53). */

struct theory_shape {
	const size_t *widths;   /* d0..dL */
	size_t nwidths;         /* L + 1, at least 2 */
	unsigned batch;         /* b */
	struct theory_bytes bytes;
};

struct theory_schedule {
	uint64_t params;                /* Ψ */
	size_t nunits;                  /* U: the units n_u are theory_units_list's */
	uint64_t shard_elements;        /* S = Σ ceil(n_u / N) */
	uint64_t padded_elements;       /* P = N·S */
	uint64_t resident_bytes;
	uint64_t peak_bytes;
	uint64_t resident_breakdown[ZS_NCATS];
	uint64_t peak_breakdown[ZS_NCATS];
	uint64_t comm_bytes;            /* bytes sent per rank per step */
	uint64_t comm_elements;         /* elements sent per rank per step */
	/* The rank's share of the padding in its resident state: (P - Ψ)/N
	 * elements at the bytes per param the scheme shards, so that schedule
	 * resident = floor resident + padding_bytes. Can be a fraction. */
	double padding_bytes;
	/* A framework's uneven partition (torch's zero1): the binding rank's
	 * bytes above an even split, so that schedule resident = floor
	 * resident + padding_bytes + imbalance_bytes. 0 for the paper's. */
	double imbalance_bytes;
	/* Host memory (an offload, DeepSpeed's): resident and peak; the
	 * fields above are then the device's. 0 without offload. */
	uint64_t host_resident_bytes, host_peak_bytes;
	uint64_t host_resident_bytes_per_node;  /* --ranks-per-node ranks' */
	/* Steps that send different bytes (DeepSpeed's ZeRO-3: step 1 records
	 * its trace): comm_bytes and comm_elements are the last step's, these
	 * the mean over --steps, what measure reports. */
	int steps_differ;
	double comm_bytes_mean, comm_elements_mean;
	/* The walk's most held in each phase of the step (enum zs_phase:
	 * set-up is the resident state the step starts from), where
	 * has_phases; phase_entered[p] says whether the step enters p. The
	 * largest of them is peak_bytes, first reached in peak_phase (under
	 * --grad-accum a later micro-step's backward comes after an earlier
	 * one's reduce: the phases' order is not the step's). */
	int has_phases;
	int phase_entered[ZS_NPHASES];
	uint64_t phase_peak[ZS_NPHASES];
	enum zs_phase peak_phase;
	/* The PyTorch step's first step where it is a list of its own
	 * (util/autograd.h's step1): its most live, from the set-up's state
	 * (its phases are in phase_peak and peak_bytes with the steady
	 * step's); 0 where there is none (not written). */
	uint64_t first_step_peak;
	/* A mixture whose ranks route apart (--routing FILE): the rank whose
	 * peak this is (the highest, the first of equals), as measure's
	 * peak_rank; 0 otherwise. */
	unsigned peak_rank;
};

/* Model states of any model given as its units, as runs of equal units
 * (elements, how many): the schedule's resident bytes with padding, the
 * transients alive at the peak, and the communication. */
struct theory_unit_run {
	uint64_t elements, count;
};

struct theory_states {
	uint64_t params;                /* Ψ = Σ elements·count */
	uint64_t trained;               /* Ψ_t (theory_states_trained; Ψ without) */
	uint64_t largest_unit;          /* max n_u */
	uint64_t shard_elements;        /* S = Σ ceil(n_u / N) */
	uint64_t padded_elements;       /* P = N·S */
	uint64_t resident_bytes;
	uint64_t resident_breakdown[ZS_NCATS];
	uint64_t gathered_params;       /* zero3, N > 1: largest·p */
	uint64_t full_grads;            /* zero2, N > 1: Ψ·g; zero3: largest·g */
	uint64_t comm_bytes, comm_elements;
	double padding_bytes;           /* as in struct theory_schedule */
};

void theory_states(const struct theory_unit_run *units, size_t nruns,
                   const struct theory_bytes *b, enum zs_scheme scheme,
                   unsigned world, struct theory_states *out);
/* As theory_states, with the grads and the optimizer state (and their
 * transients, padding and comm) over trained[u].elements of each run
 * (--freeze: its trainable elements; NULL: every element), the params
 * over units[u]'s: docs/schedule.md, "The paper level under --freeze". */
void theory_states_trained(const struct theory_unit_run *units, const struct theory_unit_run *trained,
                           size_t nruns, const struct theory_bytes *b, enum zs_scheme scheme, unsigned world,
                           struct theory_states *out);

/* The largest micro-batch b with fixed + b·per_batch <= usable bytes, 0
 * when even b = 1 does not fit (or per_batch is 0). Exact: whole bytes,
 * no search. */
uint64_t theory_max_batch(uint64_t fixed, uint64_t per_batch, double usable);

/* Ψ of a shape: Σ d_l·d_{l+1} + d_{l+1}, its description's
 * (step_params_mlp). */
uint64_t theory_params(const struct theory_shape *s);

/* The model states of the units n[0..out->nunits) into out: everything
 * but the peak; st gets theory_states_trained's figures, t[u] each
 * unit's trainable elements (--freeze; NULL: all of them). */
void theory_schedule_states(struct theory_schedule *out, const uint64_t *n, const uint64_t *t,
                            const struct theory_bytes *b, enum zs_scheme scheme, unsigned world,
                            struct theory_states *st);

/* The units of a description's parameters p under `--unit`: unit=model
 * the whole flat vector, unit=layer each layer that holds tensors (a tied
 * head holds none). Their elements, *n of them; the caller frees them. */
uint64_t *theory_units_list(const struct step_params *p, enum zs_unit unit, size_t *n);

void theory_schedule(const struct theory_shape *s, enum zs_scheme scheme,
                     enum zs_unit unit, unsigned world,
                     struct theory_schedule *out);
/* The same under c's framework (NULL: the paper's; not DeepSpeed's
 * ZeRO-3): the MLP's description walked (theory_walk_schedule). */
void theory_schedule_walk(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                          enum zs_unit unit, unsigned world, struct theory_schedule *out);

/* ------------------------------------------------------------------------ */
/* Frameworks (theory_framework.c; docs/schedule.md, "Frameworks"). */

/* torch's ZeroRedundancyOptimizer partition of the tensors n[0..nt), in
 * model order (_partition_parameters: largest first, ties in model order,
 * each to the first least-loaded rank): the elements each of the N ranks
 * is assigned (load[N]). theory_torch_partition does it over the MLP's
 * tensors (each layer's weight, then its bias). */
void theory_greedy_partition(const uint64_t *n, size_t nt, unsigned world, uint64_t *load);
void theory_torch_partition(const struct theory_shape *s, unsigned world, uint64_t *load);

/* Redo a paper zero1 row out (params and grads full) as
 * ZeroRedundancyOptimizer over the tensors n[0..nt) does it: the binding
 * rank's optimizer state, its imbalance, and the broadcasts from the
 * owners (the comm: DDP's all-reduce is theory_torch_ddp's to add). */
void theory_torch_zero1(const uint64_t *n, size_t nt, const struct theory_bytes *b, unsigned world,
                        struct theory_schedule *out);

/* DDP's buckets over the tensors t[0..nt) of grad_bytes an element, for a
 * bucket cap in MB: their elements n[0..return), in the order DDP reduces
 * them (the reverse of model order). theory_torch_ddp adds them to a row
 * (Ψ·g resident, category buckets) with their all-reduces. */
size_t theory_ddp_bucket_list(const uint64_t *t, size_t nt, unsigned grad_bytes, double cap_mb, uint64_t *n);
void theory_torch_ddp(const uint64_t *t, size_t nt, unsigned grad_bytes, double cap_mb, unsigned world,
                      struct theory_schedule *out);

/* The MLP's row of s as torch implements the scheme, with its options
 * (--bucket-cap, --prefetch): theory_schedule_walk under c; nothing for
 * another framework. */
void theory_framework_schedule(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                               enum zs_unit unit, unsigned world, struct theory_schedule *out);

/* DDP's gradient buckets (torch's dp and zero1) for a bucket cap in MB:
 * their elements n[0..return), in the order DDP reduces them. */
size_t theory_ddp_buckets(const struct theory_shape *s, double cap_mb, uint64_t *n);


/* DeepSpeed's ZeRO-1, ZeRO-2 and ZeRO-3 (docs/schedule.md, "DeepSpeed")
 * on the MLP of s, with its settings from c: its row as DeepSpeed runs it
 * (theory_schedule_walk under c); nothing for another framework or dp. */
void theory_deepspeed_schedule(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                               enum zs_unit unit, unsigned world, struct theory_schedule *out);

/* DeepSpeed's ZeRO-1/2 resident state for out's units and shards (any
 * model; tmax its largest tensor), the params whole (out's params) and
 * the grads, fp32 and optimizer partitions over the ntrain elements that
 * train, S a rank (out's params and shard_elements without --freeze;
 * docs/schedule.md, "Frozen parameters under DeepSpeed"), into out
 * (breakdown, resident, padding,
 * host bytes under --offload optimizer), and what its step() adds at once
 * by category (step[ZS_NCATS]: the fp32 gradient partition, its
 * flat fp16 source in mixed precision; offloaded, the device copy of the
 * fp32 partition). */
void theory_deepspeed_resident(const struct theory_bytes *b, const struct zs_config *c, uint64_t tmax,
                               unsigned world, uint64_t ntrain, uint64_t S, struct theory_schedule *out,
                               uint64_t *step);

/* DeepSpeed's ZeRO-3 as it partitions the MLP (stage3.py,
 * partition_parameters.py): every parameter tensor on its own, ceil(n/N)
 * elements a rank, except that a tensor of at most c->ds_persist elements
 * (param_persistence_threshold) is also held whole on every rank. The
 * resident bytes between steps: the persistent tensors whole as _post_step
 * holds them (persistent_held, p each), and
 * per shard element the fp16 partition, the grad partition, the fp32
 * partition and the optimizer state (p + g + 4 + o), and the reduce bucket
 * stage 3 allocates at set-up (B·g). */
struct theory_deepspeed_z3 {
	unsigned tensors, persistent_tensors;
	uint64_t persistent_params, partitioned_params;
	uint64_t shard_elements;     /* Σ_t ceil(n_t/N) */
	uint64_t persistent_shard;   /* the persistent tensors' part of it */
	uint64_t persistent_held;    /* their elements whole between steps (util/ds_coord.h, ds_coord_block) */
	uint64_t resident_bytes;
};
void theory_deepspeed_zero3(const struct theory_shape *s, const struct zs_config *c, unsigned world,
                            struct theory_deepspeed_z3 *out);

/* What DeepSpeed's ZeRO-3 holds whole (gathered) as its parameter
 * coordinator runs the MLP (partitioned_param_coordinator.py,
 * PartitionedParameterCoordinator, with c's --ds-persist,
 * --ds-prefetch-bucket and --ds-max-live, and the default
 * stage3_max_reuse_distance, 1e9): the modules are the units (unit=model
 * one module of every tensor, unit=layer one per linear layer), the trace
 * forward then backward. Elements of parameters whole on a rank, the
 * persistent ones included:
 *   first_step   the most at any module of step 1, when the trace is being
 *                recorded (each module's params released after it runs);
 *   first_fetch  from step 2 on, after the first module's fetch and its
 *                prefetch (bounded by the prefetch bucket and max live);
 *   at_backward  from step 2 on, at the start of backward (the reuse
 *                distance, or the prefetch's marks, keep a module's params
 *                from its forward into its backward);
 *   peak         from step 2 on, the most at any module. */
struct theory_deepspeed_live {
	uint64_t first_step, first_fetch, at_backward, peak;
};
void theory_deepspeed_live(const struct theory_shape *s, const struct zs_config *c, enum zs_unit unit,
                           struct theory_deepspeed_live *out);

/* ZeRO-3's resident state (theory_deepspeed.c) from S = Σ ceil(n_t/N)
 * (the fp16 partitions), S_t and Ψ_t, the same over the trainable tensors
 * (--freeze; else S and Ψ: the grad and fp32 partitions and the optimizer
 * state), the persistent params' elements and the largest sub group's
 * slots (theory_ds3_sub_groups): base[] the device's categories between
 * steps (without the persistent params), out's resident, host, shard and
 * padding fields (out->params set). */
void theory_ds3_resident(const struct theory_bytes *b, const struct zs_config *c, uint64_t S, uint64_t S_t,
                         uint64_t ntrain, uint64_t persist, uint64_t sub_max, unsigned world,
                         struct theory_schedule *out, uint64_t *base);
/* ZeRO-3's step() a sub group at a time (docs/schedule.md, "deepspeed",
 * ZeRO-3's step): the sub groups of the trainable elements tt[0..nt) at
 * N = world (util/ds_coord.h's ds_sub_groups, c->ds_sub_group), each
 * one's slots on a rank (n) and the device blocks its
 * _prepare_fp32_grad_for_sub_group makes (the flat fp16 copy, g16, freed
 * once converted, and the fp32 gradient, g32, freed after its step), into
 * out (nt entries at most); returns their count. */
struct theory_ds3_sub {
	uint64_t n, g16, g32;
};
size_t theory_ds3_sub_groups(const struct theory_bytes *b, const struct zs_config *c, const uint64_t *tt, size_t nt,
                             unsigned world, struct theory_ds3_sub *out);

/* Where a DeepSpeed rank's bytes live between steps under c->offload
 * (docs/schedule.md, "deepspeed", offload): device and host bytes per
 * rank, the host bytes of a node of c->ranks_per_node ranks, and the
 * start-up figure, the full fp32 model every rank of a node loads on the
 * host before DeepSpeed partitions it (4Ψ a rank). */
struct theory_deepspeed_mem {
	uint64_t device_bytes, host_bytes, host_bytes_per_node, startup_host_bytes_per_node;
};
void theory_deepspeed_memory(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                             enum zs_unit unit, unsigned world, struct theory_deepspeed_mem *out);

/* DeepSpeed's estimators with their offload rows and host memory, as its
 * main branch computes them (estimate_zero2_model_states_mem_needs,
 * estimate_zero3_model_states_mem_needs with zero_init, the defaults'
 * additional_buffer_factor 1.5): the device bytes per GPU and the host
 * bytes per node (cpu_mem) for N GPUs, R a node, with offload o. -1 for a
 * scheme without an estimator, or zero3 without L. */
double theory_deepspeed_estimator(double params, double largest_layer, enum zs_scheme scheme, unsigned world,
                                  unsigned per_node, enum zs_offload o, double *host_per_node);

/* DeepSpeed (theory_deepspeed.c): its own estimate of a rank's model states on the device, without
 * offload, as DeepSpeed's main branch computes it since June 2024: zero2
 * 2Ψ + int(18Ψ/N), zero3 4L + int(18Ψ/N) with L the largest layer's
 * params. -1 for a scheme it has no estimator for, or zero3 without L. */
double theory_deepspeed_estimate(double params, double largest_layer, enum zs_scheme scheme, unsigned world);

/* ------------------------------------------------------------------------ */
/* Transformers (theory_tfm.c): the paper level for a Hugging Face shape.
 * Parameters per unit from the shape; activations from Korthikanti et al.,
 * "Reducing Activation Recomputation in Large Transformer Models" (2022),
 * Table 2 without parallelism: sbh(34 + 5as/h) bytes per layer with 2-byte
 * activations, 34sbh with selective recomputation, 2sbh with full. */

/* A transformer's units for --unit layer, in the order forward gathers
 * them: the embeddings (with the final norm when the head is tied: that
 * unit is gathered again for the head), one per block, and the final norm
 * with the untied head. */
struct theory_units {
	uint64_t embeddings;    /* token (+ position) embeddings (+ final norm if tied) */
	uint64_t block;         /* one decoder block */
	uint64_t layers;        /* how many blocks */
	uint64_t head;          /* final norm + untied head; 0 when tied */
};

void theory_units_of(const struct step_params *p, struct theory_units *u);
/* The same for m (its description built and dropped). */
void theory_tfm_units(const struct zs_model *m, struct theory_units *u);
/* Ψ of the transformer m (its description built and dropped). */
uint64_t theory_tfm_params(const struct zs_model *m);

/* The activation terms held at the peak, each by name (theory_act_name). */
enum theory_act {
	THEORY_ACT_LAYERS,              /* L x Korthikanti's per-layer bytes */
	THEORY_ACT_RECOMPUTED,          /* one layer recomputed in its backward */
	THEORY_ACT_EMBEDDING_DROPOUT,   /* gpt2: the embeddings' dropout mask, sbh */
	THEORY_ACT_FINAL_NORM_INPUT,    /* 2sbh */
	THEORY_ACT_HEAD_INPUT,          /* 2sbh */
	THEORY_ACT_LOGITS,              /* 4sbv: fp32 logits for the loss */
	THEORY_ACT_LOGITS_GRAD,         /* 4sbv: their gradient */
	THEORY_NACTS
};

const char *theory_act_name(enum theory_act a);

struct theory_routing;
struct theory_act_opts {
	uint64_t seq;                   /* s */
	enum zs_recompute recompute;
	int flash;                      /* attention scores never stored */
	unsigned elem;                  /* bytes of an activation: 2, or 4 in fp32 */
	/* A mixture of experts' routing (--routing; theory_routing.c); NULL:
	 * balanced. */
	const struct theory_routing *routing;
	/* --freeze (NULL or "": none): the description's frozen tensors
	 * (step_params_freeze) under every framework; with freeze_graph (the
	 * paper's and DeepSpeed's steps, util/step.h's zs_freeze_saved_spec)
	 * the layers below the first trainable tensor save nothing
	 * (step_buffers_freeze). */
	const char *freeze;
	int freeze_graph;
	/* --lora-r under --framework paper: the config whose adapters the
	 * description holds (util/lora.h's zs_lora_step_params), its saved set
	 * following the marks as freeze_graph's; NULL: none. */
	const struct zs_config *lora;
};

/* ------------------------------------------------------------------------ */
/* A mixture of experts' routing (theory_routing.c; docs/schedule.md,
 * "Mixtures of experts"): the tokens each expert of each block gets, on
 * each rank at each step, which size its routed buffers (util/step.h's
 * step_moe_row). balanced: a block's B·T·k assignments spread as evenly
 * as integers allow, the first (B·T·k mod E) experts one more; worst:
 * every token's k choices on the same k experts (the first k: B·T each,
 * the others none); file: a measured run's counts (measured.json's
 * "routing"), the run of the row's (scheme, unit, N), or else the first
 * of its N. Its keys in theory.json are theory_json.c's. */
enum theory_routing_mode { THEORY_ROUTING_BALANCED, THEORY_ROUTING_WORST, THEORY_ROUTING_FILE };
struct theory_routing_run {
	enum zs_scheme scheme;
	enum zs_unit unit;
	unsigned world;
	/* blocks: a step's lists of counts, the model's blocks times micro
	 * (the run's "micro_steps": under the PyTorch step's --grad-accum K
	 * each micro-step's blocks, micro-step major; 1 without) */
	size_t steps, blocks, experts, micro;
	uint64_t *counts;               /* [rank][step][block][expert] */
	cJSON *json;                    /* the run's "routing" object, as read */
};
struct theory_routing {
	enum theory_routing_mode mode;
	const char *file;               /* file: its path */
	struct theory_routing_run *run;
	size_t nruns;
	cJSON *config;                  /* file: its "config" (NULL: none), what its run was */
	struct theory_routing_run torch; /* balanced, worst under --framework torch: the run the PyTorch step
	                                  * walks (theory_routing_torch), one rank's; counts NULL until made */
};
/* A rank's counts: [step][block][expert], steps of them (the walk takes
 * step t's as t mod steps). */
struct theory_rank_counts {
	const uint64_t *counts;
	size_t steps, blocks, experts;
	uint64_t *own;                  /* balanced, worst: allocated here */
};

const char *theory_routing_name(enum theory_routing_mode m);
/* --routing ARG into r: balanced, worst, or a measured.json with
 * "routing" in every run (loaded). 0, or -1 with *cause. The caller
 * releases r with theory_routing_free. */
int theory_routing_parse(struct theory_routing *r, const char *arg, char **cause);
void theory_routing_free(struct theory_routing *r);
/* Whether r's file gives every row of c (its worlds, schemes, units) the
 * counts m at micro-batch B·T routes: E experts, a count list for each of
 * m's blocks, each summing to B·T·k, world ranks, c->steps steps. 0, or
 * -1 with *cause naming what differs. */
int theory_routing_check(const struct theory_routing *r, const struct zs_model *m, const struct zs_config *c,
                         uint64_t BT, char **cause);
/* The file's run for a row, or NULL. */
const struct theory_routing_run *theory_routing_run_of(const struct theory_routing *r, enum zs_scheme scheme,
                                                       enum zs_unit unit, unsigned world);
/* Rank k's counts in a row of m at B·T tokens a step (r NULL: balanced);
 * release with theory_rank_counts_free. */
void theory_rank_counts(struct theory_rank_counts *out, const struct theory_routing *r, const struct zs_model *m,
                        uint64_t BT, enum zs_scheme scheme, enum zs_unit unit, unsigned world, unsigned k);
void theory_rank_counts_free(struct theory_rank_counts *c);
/* Whether r (NULL: balanced) gives some expert of m no token at B·T
 * tokens a step, on some rank, step and block (a file's: the runs c's
 * sweep takes for the schemes of the mask, bit 1 << scheme): 1 with the
 * first named into what (n bytes), or 0. */
int theory_routing_starved(const struct theory_routing *r, const struct zs_model *m, const struct zs_config *c,
                           unsigned schemes, uint64_t BT, char *what, size_t n);
/* Under --framework torch with balanced or worst: r->torch, a run of
 * c->steps steps whose every step (under --grad-accum K each of its K
 * micro-steps) routes each block as theory_rank_counts does, the same on
 * every rank, but for worst's step 1, balanced: the PyTorch step gives an
 * expert its .grad and Adam's state at its first token, so worst's idle
 * experts from step 1 would hold neither, a step smaller than any run
 * past its first (docs/schedule.md, "Mixtures of experts"). --steps 1
 * under worst is refused (-1 with *cause). */
int theory_routing_torch(struct theory_routing *r, const struct zs_model *m, const struct zs_config *c, uint64_t BT,
                         char **cause);
/* Whether the ranks' counts can differ (a file's). */
int theory_routing_per_rank(const struct theory_routing *r);

/* Korthikanti's bytes for one layer at micro-batch b: sbh(34 + 5as/h),
 * 34sbh (selective, or flash attention), 2sbh (full), scaled by elem/2. */
uint64_t theory_layer_activations(const struct zs_model *m, const struct theory_act_opts *o,
                                  uint64_t batch);

/* Every term at micro-batch b; returns their sum. Each term is linear in
 * b (terms at b are b x terms at 1). */
uint64_t theory_activations(const struct zs_model *m, const struct theory_act_opts *o,
                            uint64_t batch, uint64_t terms[THEORY_NACTS]);

/* Whether the activation bytes at micro-batch b stay exact (below 2^52,
 * computed in floating point so that the check itself cannot overflow).
 * The shape's limits (util/model.h) keep Ψ inside 64 bits; the caller
 * checks Ψ against ZS_MAX_PARAMS. */
int theory_tfm_exact(const struct zs_model *m, const struct theory_act_opts *o, uint64_t batch);

/* The peak of one (scheme, unit, N) at micro-batch b: model states with
 * padding, the transients of docs/schedule.md ("Peak"), and the
 * activations, all alive at the start of backward. */
struct theory_peak {
	struct theory_states states;
	uint64_t act[THEORY_NACTS];
	uint64_t activations;           /* Σ act at b */
	uint64_t activations_per_sequence;  /* Σ act at b = 1 */
	uint64_t peak_bytes;            /* resident + transients + activations */
	uint64_t peak_breakdown[ZS_NCATS];
};

void theory_tfm_peak(const struct zs_model *m, const struct theory_act_opts *o,
                       const struct theory_bytes *b, uint64_t batch, enum zs_scheme scheme,
                       enum zs_unit unit, unsigned world, struct theory_peak *out);
/* The same from m's parameters p (its description's), under --freeze
 * (p marked: step_params_freeze) with the grads and the optimizer state
 * over each unit's trainable elements (theory_states_trained). */
void theory_peak_of(const struct zs_model *m, const struct step_params *p, const struct theory_act_opts *o,
                    const struct theory_bytes *b, uint64_t batch, enum zs_scheme scheme, enum zs_unit unit,
                    unsigned world, struct theory_peak *out);

/* The exact schedule level for zerosim's own transformer (the engine's
 * `measure --model`: fp32 or mixed, any number of blocks, any
 * framework's scheme): resident, peak and its
 * breakdown, comm, from the shape alone (docs/schedule.md, "Transformers:
 * the engine's schedule"). has_schedule says whether the request is one
 * the engine runs. */
int theory_tfm_has_schedule(const struct zs_model *m, const struct theory_act_opts *o,
                              const struct theory_bytes *b);
/* The walk (theory_walk.c) of d, m's description at micro-batch `batch`
 * (theory_desc_model; NULL: built here and dropped), under c's framework
 * (c->framework, its options; the paper's for ZS_FW_PAPER or c NULL):
 * torch's DDP, ZeroRedundancyOptimizer and FSDP, DeepSpeed's ZeRO-1/2 and
 * ZeRO-3 as docs/schedule.md gives them on the transformer. 0; -1 where c
 * runs the PyTorch step (zs_wrapper_step) and it does not describe this
 * micro-batch or N (out is then not written: no other schedule stands in
 * for the framework's exact step). */
struct theory_desc;
int theory_tfm_framework_schedule(const struct zs_model *m, const struct theory_desc *d,
                                     const struct theory_act_opts *o, const struct theory_bytes *b,
                                     const struct zs_config *c, uint64_t batch, enum zs_scheme scheme,
                                     enum zs_unit unit, unsigned world, struct theory_schedule *out);

/* The plain PyTorch loop (--framework torch --wrapper none): the sum of
 * util/autograd.h's step of m at micro-batch `batch` and sequence `seq`
 * (theory_autograd.c): resident, peak with its breakdown, each phase's
 * peak, and under --wrapper ddp its collectives' bytes at world size
 * `world` (the ring's, as theory_framework.c counts). theory_autograd_check says (one line, naming the option) what it
 * cannot describe yet (-1: bad input; -2: an internal error of DDP's pass,
 * a run-time failure); 0 when it can. */
int theory_autograd_check(const struct zs_model *m, const struct zs_config *c, uint64_t seq, int bf16,
                          char **cause);
int theory_autograd_schedule(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq,
                             unsigned world,
                             struct theory_schedule *out, char **cause);
/* The live bytes at each of the step's marks ("phase:backward",
 * "fwd:h.0:end", ..., as tests/hf_torch.py names them) as parent's
 * object "marks", label: bytes, in the step's order. */
struct cJSON;
void theory_autograd_marks_json(struct cJSON *parent, const struct zs_model *m, const struct zs_config *c,
                                uint64_t batch, uint64_t seq, unsigned world);
/* Under torch's zero1 (--wrapper ddp --schemes zero1) the ranks differ
 * (util/ag_zero1.h): theory_autograd_schedule and the marks are the
 * binding rank's (the highest peak, the first of equals; the marks' rank
 * in parent's "marks_rank"), and this gives every rank's resident and
 * peak (world of each) and the binding rank. 0, or -1 with *cause. */
int theory_autograd_ranks(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq,
                          unsigned world, uint64_t *resident, uint64_t *peak, unsigned *binding, char **cause);
struct ag_step;
struct step_params;
/* Leave in s (built for `world` ranks) the binding rank's events alone:
 * nothing changes where the ranks are equal. */
void theory_autograd_binding_rank(struct ag_step *s, const struct step_params *p, unsigned world, unsigned steps);

/* ------------------------------------------------------------------------ */
/* Requests and rows: what `zerosim theory` computes over, and one
 * (scheme, unit, N) of it. */

/* A model given by its MLP widths (shape_known), by a Hugging Face shape
 * (model != NULL), or only by a count Ψ (neither). */
struct theory_request {
	const struct zs_config *config;  /* worlds, schemes, units, batch, options */
	int shape_known;                 /* the MLP of config->widths */
	const struct zs_model *model;    /* --model, or NULL */
	struct theory_act_opts act;      /* --seq, --recompute, --flash-attn (a model) */
	int bf16;                        /* --precision bf16: mixed's bytes, its name */
	int lora_zero3_left;             /* LoRA's default schemes keep the paper's zero3, not described at N > 1 */
	double params;                   /* Ψ (used with neither shape) */
	double largest_unit;             /* --largest-unit, or 0 for none */
	double device_mem;               /* --device-mem bytes, or 0 for none */
	double reserve;                  /* --reserve bytes (default 0) */
	/* The step description (theory_desc_build), built once for the
	 * request by theory_json and theory_text; NULL: each row builds its
	 * own. It is the request's own: a copy of the request with another
	 * model, shape, sequence, batch, precision or recompute must not
	 * keep it (theory_desc_fits checks). */
	const struct theory_desc *desc;
	/* --allocator cuda: replay each row's step through the caching
	 * allocator with these options (theory_alloc.c); NULL: none. */
	const struct cuda_alloc_opts *alloc;
	/* --device-overhead: what the device holds outside the caching
	 * allocator's trace, given (overhead_given) or the documented
	 * constants (theory_device_overhead). */
	double overhead;
	int overhead_given;
	/* --nccl-channels C (0: not given, NCCL issue 964's measured
	 * figures) and --nccl-buffsize (0: NCCL's 4 MiB): NCCL's buffers
	 * from NCCL's source instead (theory_nccl.h). */
	unsigned nccl_channels;
	double nccl_buffsize;
};

/* ------------------------------------------------------------------------ */
/* The step description the theory walks (util/step.h; theory_walk.c): the
 * parameters of the request's shape (a transformer's, or the MLP's of its
 * widths; none for a count), its buffers at the request's micro-batch
 * (and a transformer's sequence), and the walk's index of them by layer.
 * Built from the config alone; owned by the caller (theory_desc_free). */
struct theory_desc {
	int has_params, has_buffers;
	struct step_params params;
	struct step_buffers bufs;
	/* what the buffers were built for (model NULL: the MLP's) */
	const struct zs_model *model;
	uint64_t batch, seq;
	unsigned elem;
	enum zs_recompute recompute;
	const struct theory_routing *routing; /* a mixture's (NULL: balanced) */
	char freeze[ZS_FREEZE_MAX + 1];       /* the act options' ("": none), their freeze_graph and lora */
	int freeze_graph;
	const struct zs_config *lora;
	/* By layer l (params.nlayers of them), indices into bufs.buf in its
	 * order: made before l's forward, made_at[made_first[l] ..
	 * made_first[l + 1]); freed after l's backward, freed_at[freed_first[l]
	 * .. freed_first[l + 1]). */
	size_t *made_at, *made_first, *freed_at, *freed_first;
};

void theory_desc_build(struct theory_desc *d, const struct theory_request *req);
/* The MLP's alone: widths d0..dL at micro-batch `batch`. */
void theory_desc_mlp(struct theory_desc *d, const size_t *widths, size_t nwidths, uint64_t batch);
/* The one walk of d's step (theory_walk.c) for (scheme, unit, N) under
 * c's framework (NULL or ZS_FW_PAPER: the paper's): its units, resident
 * state, peak and breakdown, and comm into out. */
void theory_walk_schedule(const struct theory_desc *d, const struct theory_bytes *b, const struct zs_config *c,
                          enum zs_scheme scheme, enum zs_unit unit, unsigned world, struct theory_schedule *out);
/* A mixture's: every rank's peak (world of them) of that walk, each from
 * its own routing (equal but under --routing FILE). */
void theory_walk_rank_peaks(const struct theory_desc *d, const struct theory_bytes *b, const struct zs_config *c,
                            enum zs_scheme scheme, enum zs_unit unit, unsigned world, uint64_t *peaks);
/* What a rank holds at the end of forward whatever N: the buffers made in
 * forward and kept for backward (a mixture's experts at B·T·k rows a
 * block, whatever the routing). */
uint64_t theory_desc_forward_end_bytes(const struct theory_desc *d);

/* ------------------------------------------------------------------------ */
/* The walk as a trace of blocks, for the caching allocator's replay
 * (theory_alloc.c; docs/schedule.md, "The replay in theory"): every add of
 * the walk one block allocated, every sub the block(s) it frees, in the
 * walk's order, over `steps` steps from the resident state's blocks. */
struct theory_tev {
	enum zs_phase phase;
	int alloc;          /* 1 alloc, 0 free */
	enum zs_cat cat;
	uint64_t bytes, id; /* ids 1, 2, ... in allocation order */
	uint64_t key;       /* a step buffer's index + 1, THEORY_TRACE_RESIDENT, or 0 */
};
/* The resident state's blocks: never the block a framework's free names
 * (DeepSpeed's step() makes a grad16 buffer of the resident one's size). */
#define THEORY_TRACE_RESIDENT UINT64_MAX
/* Unit u's gathered copy: THEORY_TRACE_UNIT + u (step buffers' keys are
 * their indexes, far below). */
#define THEORY_TRACE_UNIT ((uint64_t)1 << 62)
struct theory_trace {
	unsigned steps;           /* set by the caller */
	struct theory_tev *ev;
	size_t n, cap;
	struct theory_tev *live;  /* the blocks allocated and not freed */
	size_t nlive, caplive;
	uint64_t next_id;
	int unmatched;            /* a free no live block (or set of them) made up */
	uint64_t workspace;       /* cuBLAS's workspace bytes (set by the caller; 0: none) */
	int matmul_run;           /* the step's first matmul has run */
};
void theory_trace_alloc(struct theory_trace *t, enum zs_phase ph, enum zs_cat c, uint64_t bytes, uint64_t key);
void theory_trace_free(struct theory_trace *t, enum zs_phase ph, enum zs_cat c, uint64_t bytes, uint64_t key);
void theory_trace_release(struct theory_trace *t);
/* The step is about to run a matmul: the first time, the trace asks for
 * cuBLAS's workspace (t->workspace bytes, id CUDA_ALLOC_WORKSPACE_ID,
 * category scratch, never freed), as the engine's tracker_matmul does. */
void theory_trace_matmul(struct theory_trace *t, enum zs_phase ph);
/* The walk of theory_walk_schedule as a trace into tr (tr->steps set, the
 * rest zero): 0, or -1 where the walk is not a trace of the engine's blocks
 * (DeepSpeed's ZeRO-3 so far). */
int theory_walk_trace(const struct theory_desc *d, const struct theory_bytes *b, const struct zs_config *c,
                      enum zs_scheme scheme, enum zs_unit unit, unsigned world, struct theory_trace *tr);
struct theory_row;
/* Row r's step replayed through the caching allocator (req->alloc) as the
 * row's "allocator" object: the replay's figures (zs_alloc_keys), where
 * it runs out of --device-mem less --reserve, or null where not covered. */
void theory_alloc_json(cJSON *row, const struct theory_request *req, const struct theory_row *r);

/* What a rank's device holds outside the caching allocator's trace
 * (docs/schedule.md, "The device's fixed costs"): the CUDA context,
 * NCCL's buffers of the communicators the scheme's step makes (none at
 * N = 1), nccl_comms of nccl_per_comm each: measured (nccl_channels 0)
 * or, with --nccl-channels, from NCCL's source at nccl_channels and
 * nccl_buffsize; total is their sum, or --device-overhead where given
 * (then the parts are 0 and given 1). cuBLAS's workspace is not one: it
 * is a block of the trace (theory_trace_matmul). */
#define THEORY_CUDA_CONTEXT_BYTES UINT64_C(500000000)
#define THEORY_NCCL_PAIR_BYTES UINT64_C(544000000)
#define THEORY_NCCL_RING_BYTES UINT64_C(688000000)
struct theory_overhead {
	int given;
	uint64_t context, nccl, total;
	unsigned nccl_comms, nccl_channels;
	uint64_t nccl_per_comm, nccl_buffsize;
};
void theory_device_overhead(const struct theory_request *req, enum zs_scheme scheme, unsigned world,
                            struct theory_overhead *o);

/* A row's step (at the request's micro-batch, or at `batch`) replayed
 * through the caching allocator on a device whose cudaMalloc can hand out
 * --device-mem less --reserve less the fixed costs (no limit without
 * --device-mem). covered 0: the walk has no trace of the row's step. */
struct theory_held {
	int covered;
	struct cuda_alloc_run run;
	struct theory_overhead fixed;
	int oom;                        /* the replay ran out (needs --device-mem) */
	unsigned oom_step;
	enum zs_phase oom_phase;
	enum zs_cat oom_cat;
	int oom_workspace;              /* the request it ran out at is cuBLAS's workspace */
	uint64_t oom_bytes;
};
void theory_alloc_held(const struct theory_request *req, const struct theory_row *r,
                       const struct cuda_alloc_opts *opts, struct theory_held *h);
/* The largest micro-batch whose replay runs out of nothing (reserved plus
 * the fixed costs within --device-mem less --reserve), 0 where micro-batch
 * 1 does not, at most THEORY_WALK_MAX_BATCH; needs --device-mem and a
 * covered row. */
uint64_t theory_alloc_max_batch(const struct theory_request *req, const struct theory_row *r);
/* The largest micro-batch of the same replayed step whose allocated peak
 * (each block as the allocator rounds it, no limit) is within --device-mem
 * less --reserve: "on allocated" beside "on held". `held` is
 * theory_alloc_max_batch's answer; the result is never below it. */
uint64_t theory_alloc_max_batch_allocated(const struct theory_request *req, const struct theory_row *r,
                                          uint64_t held);

/* A transformer's alone: m at micro-batch `batch` with o's sequence,
 * recompute and activation bytes. */
void theory_desc_model(struct theory_desc *d, const struct zs_model *m, const struct theory_act_opts *o,
                       uint64_t batch);
/* Whether d describes m at this batch with o (its buffers match). */
int theory_desc_fits(const struct theory_desc *d, const struct zs_model *m, const struct theory_act_opts *o,
                     uint64_t batch);
void theory_desc_free(struct theory_desc *d);

/* The phase in which the walk first reaches its peak: where the step
 * binds, as a measured timeline's first event at the peak says it
 * (tests/json_agree). s must have has_phases. */
enum zs_phase theory_binding_phase(const struct theory_schedule *s);

/* Whether the framework's exact step describes m at micro-batch `batch`
 * and N = world (1 where it is zerosim's own walk, which describes every
 * one); 0 with *why (the step's one-line refusal) where the PyTorch step
 * (zs_wrapper_step) refuses it. */
int theory_walk_described(const struct theory_request *req, unsigned world, uint64_t batch, char **why);
/* The largest micro-batch whose framework's exact step (the walk of
 * req->model under req->config's framework, for scheme, unit and N) fits
 * req's usable memory, 0 where micro-batch 1 does not; at_batch is the
 * walk at the request's micro-batch. At most THEORY_WALK_MAX_BATCH. The
 * request must be one theory_tfm_has_schedule accepts. */
#define THEORY_WALK_MAX_BATCH (UINT64_C(1) << 20)
uint64_t theory_walk_max_batch(const struct theory_request *req, enum zs_scheme scheme, enum zs_unit unit,
                               unsigned world, const struct theory_schedule *at_batch);

/* Whether the run is described at N = world for scheme, by the same
 * checks the CLI makes of the list (the paper's step with --freeze or
 * --lora-r refuses zero3 at N > 1 where a unit mixes frozen and trainable
 * tensors); *why (where why is not NULL), where not, the refusal (the
 * caller frees it). */
int theory_described_at(const struct theory_request *req, enum zs_scheme scheme, unsigned world, char **why);

struct theory_row {
	enum zs_scheme scheme;
	enum zs_unit unit;
	unsigned world;
	struct theory_floor floor;
	struct theory_schedule sched;    /* valid for an MLP */
	struct theory_peak peak;         /* valid for a model */
	int model_sched;                 /* a model's sched is zerosim's own transformer's */
	int undescribed;                 /* the step is not described here (theory_described_at) */
	int has_peak;                    /* an MLP or a model: the peak is known */
	uint64_t peak_bytes;             /* at the request's micro-batch */
	uint64_t peak_fixed;             /* peak = fixed + b·per_batch */
	uint64_t peak_per_batch;
	int fits, fits_peak;             /* 1 or 0; -1 without --device-mem */
	uint64_t max_batch;              /* largest b whose peak fits (0: none) */
};

double theory_request_params(const struct theory_request *req);
/* Ψ_t, the floors' trained parameters: theory_request_params without
 * --freeze or a model (util/step.h's zs_freeze_trained). */
double theory_request_trained(const struct theory_request *req);
/* The request's description (req->desc where it fits), or one built into
 * own, which the caller then frees (the result is own). */
const struct theory_desc *theory_request_desc(const struct theory_request *req, struct theory_desc *own);
void theory_request_bytes(const struct theory_request *req, struct theory_bytes *b);
const char *theory_request_precision(const struct theory_request *req);
/* Device memory less --reserve: what the step may use. */
double theory_request_usable(const struct theory_request *req);

void theory_row(const struct theory_request *req, enum zs_scheme scheme, enum zs_unit unit,
                unsigned world, struct theory_row *r);

/* The keys only a framework adds (theory_framework.c; docs/formats.md).
 * To an MLP row's "schedule":
 * "imbalance_bytes" and "per_rank" (every rank's resident and peak bytes
 * and bytes sent). To a row: for DeepSpeed, "deepspeed_estimate" beside
 * zerosim's floor and schedule. */
void theory_framework_json(cJSON *schedule, const struct theory_request *req, enum zs_scheme scheme,
                           unsigned world, const struct theory_schedule *sc);
void theory_framework_row_json(cJSON *row, const struct theory_request *req, enum zs_scheme scheme,
                               enum zs_unit unit, unsigned world);

/* The framework's lines for the text output, or NULL for the paper's
 * (the caller frees it). */
char *theory_framework_text(const struct theory_request *req);
/* DeepSpeed's part of them (theory_deepspeed.c). */
char *theory_deepspeed_text(const struct theory_request *req);

/* ------------------------------------------------------------------------ */
/* Output (theory_json.c, theory_text.c). */

/* Build the zerosim-theory/1 tree (docs/formats.md). Rows are in the order
 * schemes x units x worlds, each list in the order given. The caller frees
 * the result with cJSON_Delete(). */
cJSON *theory_json(const struct theory_request *req);

/* The plain loop's step of a request (--wrapper none: util/autograd.h's
 * step of req->model at the request's batch and seq) into *s, its
 * parameters into *p; the caller frees both (ag_step_free,
 * step_params_free). -1 where the step cannot be described, nothing to
 * free (theory_alloc.c; theory_json.c's peak_live and theory_alloc.c's
 * trace use it). */
struct step_params;
struct ag_step;
int theory_plain_step(const struct theory_request *req, unsigned world, struct step_params *p, struct ag_step *s);
/* (world: the row's ranks; under torch's zero1 the step is then the
 * binding rank's, theory_autograd_binding_rank) */

/* The same content as text for a person. For a model known by its MLP
 * widths or its count, tables per rank laid out like the ZeRO paper's
 * Table 1 (one line per N, one column per scheme, in GB = 1e9 bytes, or
 * MB/KB/bytes for a table whose largest cell is below 1 GB) and, with
 * --device-mem, the smallest N in the list at which each scheme's floor fits
 * (and, for MLP widths, its peak, with the largest batch there). For
 * a transformer (--model), one table per unit mode: GB per rank by N and
 * scheme, the peak's parts and their sum, whether the floor and the peak
 * fit, the largest micro-batch, and what would fit when nothing does.
 * The caller frees the result with free(). */
char *theory_text(const struct theory_request *req);

/* A whole number of bytes, rounded, with thousands separators:
 * 17109375000 -> "17,109,375,000". Returns buf. */
const char *theory_grouped(char *buf, size_t size, double v);

#endif
