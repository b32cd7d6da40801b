/*
 * step — the description of a training step, as data: the contract the
 * engine runs and the theory sums (docs/design.md, "One description").
 *
 * Its first part is the model's parameters, built from the config alone
 * (util/model.h): every parameter tensor with its Hugging Face name and
 * its shape as PyTorch holds it, the nn.Module that owns it (its own
 * parameters, recurse=False, as DeepSpeed and FSDP see them), and the
 * layers zerosim steps through (0: the embedding, 1..L: the blocks, L+1:
 * the final norm and the head; the MLP's: one per linear layer). Tensors
 * are listed in the order of the
 * flat vector (docs/schedule.md, "Transformers"): a layer's tensors are
 * one contiguous range of the list, and so of the vector. Sizes live
 * here once; the engine lays its vector out from this list and the theory
 * walks it. Its second part (below) is a transformer step's buffers
 * beside the parameters, with their sizes and lifetimes: the engine
 * allocates that list through the tracker, the theory sums it.
 *
 * zerosim's kernels fuse two groups of Hugging Face's tensors: a block's
 * queries, keys and values are one matrix (gpt2's c_attn already is;
 * llama's q_proj, k_proj and v_proj are three), and llama's gate_proj and
 * up_proj are one. A fused tensor's name lists its parts, and it is one
 * module (docs/schedule.md says what that changes). Phi3's are fused in
 * Hugging Face's model too (qkv_proj, gate_up_proj): named so, no parts.
 * Mixtral's block (transformers 4.x's MixtralSparseMoeBlock) has, after
 * post_attention_layernorm, the router block_sparse_moe.gate (E, d) and
 * each expert's w1, w2 and w3, apart, in the order Hugging Face
 * registers them (not fused: w1 and w3 are not neighbours there).
 *
 * Ownership: step_params_build fills a struct whose arrays it allocates
 * (the names are made when asked for, from static parts);
 * step_params_free releases them. Out of memory is fatal.
 */
#ifndef ZS_UTIL_STEP_H
#define ZS_UTIL_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "util/model.h"
#include "util/schedule.h"

struct step_tensor {
	const char *leaf;   /* "weight" or "bias": its name is its module's and this (step_tensor_name) */
	unsigned ndim;      /* 1 or 2 */
	uint64_t shape[2];  /* nn.Linear's (out, in); gpt2's Conv1D's (in, out); a table's (rows, d) */
	uint64_t numel;     /* shape[0] (·shape[1]) */
	size_t module;      /* the module that owns it */
	/* A fused tensor (see above): the rows of each Hugging Face tensor it
	 * joins, in order (q, k, v; gate, up); nparts 0 for any other. */
	unsigned nparts;
	uint64_t part_rows[3];
	/* Its parts (1 without parts) that --freeze names (step_params_freeze):
	 * frozen when all are (step_trained), 0 for any tensor of an unmarked
	 * description. */
	unsigned frozen;
};

/* A module's Hugging Face name is made from three parts when asked for
 * (step_module_name): "transformer.h" "." 0 "." "attn.c_attn"; a part
 * left out (index -1, "" suffix) and its dot are not written. */
struct step_module {
	const char *prefix; /* "transformer.h", "model.layers", "lm_head"; "" for the MLP */
	long long index;    /* the block (or the MLP's layer), -1 for none */
	const char *suffix; /* "attn.c_attn", "mlp.down_proj", "" */
	size_t layer;       /* the layer whose step runs it */
	size_t first, n;    /* its tensors: tensor[first .. first+n-1] */
	int matmul;         /* its forward runs a matmul (a linear, lm_head; not a table's lookup, not a norm) */
	/* A mixture of experts' expert: "model.layers" "." 0 "."
	 * "block_sparse_moe.experts" "." expert "." tail; expert -1 for any
	 * other module. Each expert is modules of its own, so that experts
	 * can be placed one by one. */
	long long expert;
	const char *tail;   /* "w1", "w2", "w3" */
	/* No input of its forward requires grad: a table's lookup of token
	 * ids or positions (so DeepSpeed's post-backward hook, driven by its
	 * inputs' grads, never fires for it: util/ds_coord.h). */
	int no_grad_in;
	/* LoRA's adapter (util/lora.h's zs_lora_describe): "lora_A.default" or
	 * "lora_B.default" after the name of module `base` (its part `part`
	 * of a fused one, -1 for a whole one); NULL for any other module. */
	const char *adapter;
	size_t base;
	int part;
};

struct step_layer {
	size_t first, n;    /* the tensors it holds in the flat vector */
	uint64_t offset;    /* its first element in the flat vector */
	uint64_t numel;     /* its elements */
	/* Which of the modules its step runs (counted in forward order)
	 * runs its first matmul, where cuBLAS's workspace is made (the
	 * engine's tracker_matmul, the theory's walk): -1 where none runs
	 * (the embedding's lookups); a block's qkv projection after its first
	 * norm, lm_head after the final norm, an MLP's linear (0). */
	long matmul_module;
};

struct step_params {
	struct step_tensor *tensor;
	size_t ntensors;
	/* Modules in forward order. A tied head is the module "lm_head" of
	 * the last layer over tensor 0 (the token table), which that layer
	 * does not hold; tied, the final norm's tensors follow the embedding's
	 * in layer 0 (one unit with it), and its module runs in the last. */
	struct step_module *module;
	size_t nmodules;
	struct step_layer *layer;
	size_t nlayers;     /* L + 2 */
	uint64_t numel;     /* Ψ */
	int tied;
	/* The --freeze spec that marked its tensors (step_params_freeze), for
	 * messages; NULL: none, every tensor trained. */
	const char *freeze;
	/* LoRA's dropout p over the adapters (util/lora.h's zs_lora_describe;
	 * 0: none, PEFT's nn.Identity): with p > 0 lora_A reads the dropout's
	 * output (step_buffers_lora keeps it), not its base layer's input. */
	double lora_dropout;
};

/* Module i's or tensor i's Hugging Face name ("transformer.h.0.ln_1",
 * "transformer.h.0.ln_1.weight") into out, n bytes at most (cut if
 * longer); returns out. */
const char *step_module_name(const struct step_params *p, size_t i, char *out, size_t n);
const char *step_tensor_name(const struct step_params *p, size_t i, char *out, size_t n);
/* Part k of tensor i's name: a fused tensor's k-th word in braces
 * ("model.layers.0.self_attn.{q,k,v}_proj.weight", k 2:
 * "model.layers.0.self_attn.v_proj.weight"); k < 0, or a tensor without
 * parts: its name. Returns out. */
const char *step_part_name(const struct step_params *p, size_t i, int k, char *out, size_t n);

/* Build the parameters of the transformer m describes. */
void step_params_build(struct step_params *p, const struct zs_model *m);
/* Build the MLP's of widths d0..dL (nwidths = L + 1): layer l is the
 * nn.Linear "l" of nn.Sequential, weight (d(l+1), d(l)) and bias (d(l+1))
 * (tests/fsdp_torch.py builds it so); no table and no head. */
void step_params_mlp(struct step_params *p, const size_t *widths, size_t nwidths);
void step_params_free(struct step_params *p);
/* Each layer's matmul_module from its modules' flags, counted as its
 * step runs them (the modules of layer l, in forward order): the
 * builders' last step, again after modules are added (util/lora.h's
 * zs_lora_describe). */
void step_params_first_matmuls(struct step_params *p);

/* Ψ of the transformer m describes: its description built, counted and
 * released (the engine's tfm_nparams and the theory's Ψ both ask it). */
uint64_t step_params_count(const struct zs_model *m);

/* Mark p's tensors that --freeze's spec (util/freeze.h; NULL or "":
 * none) names, every part of a fused tensor apart (tensor[i].frozen);
 * p keeps the pointer (spec outlives p). The one place the spec is
 * matched: what the step trains is read from the marks (step_trained). */
void step_params_freeze(struct step_params *p, const char *spec);
/* Whether tensor i of p is trained (requires_grad): not frozen in every
 * part by the spec that marked p. */
int step_trained(const struct step_params *p, size_t i);
/* Whether a spec marked p (its saved set, units and messages follow it). */
int step_params_frozen(const struct step_params *p);

/* The largest parameter tensor's elements (DeepSpeed's offload sizes its
 * temporary grad buffers by it); the largest trained one (step_trained:
 * the buffers are sized over the requires_grad parameters). */
uint64_t step_params_largest_tensor(const struct step_params *p);
uint64_t step_params_largest_trained(const struct step_params *p);

/* The largest nn.Module's own parameters (elements) of the Hugging Face
 * model, whose modules are not zerosim's fused ones: each part of a fused
 * tensor counts apart (DeepSpeed's model_to_params, docs/schedule.md). */
uint64_t step_params_largest_hf_module(const struct step_params *p);

/* ------------------------------------------------------------------------ */
/* The transformer's buffers beside its parameters */

/* What a transformer's layers save for backward, B·T rows each (the
 * contract's names, docs/schedule.md): a block LN1 .. RES3 (its input is
 * the previous block's res3, or the embedding's x0; QK_PRE and QK_RSTD,
 * the head norms' input and statistics, are qwen3's alone; ATT_TANH,
 * the soft-capped scores' tanh, and PROJ_OUT, DOWN_OUT with their 1/rms,
 * the inputs of the norms after attention and the MLP, gemma2's), the
 * head LNF .. LOGITS. */
enum step_act {
	STEP_ACT_LN1, STEP_ACT_LN1_MEAN, STEP_ACT_LN1_RSTD, STEP_ACT_QKV, STEP_ACT_QK_PRE, STEP_ACT_QK_RSTD,
	STEP_ACT_ATT, STEP_ACT_ATT_TANH, STEP_ACT_ATTY, STEP_ACT_PROJ_OUT, STEP_ACT_PROJ_RSTD,
	STEP_ACT_RES2, STEP_ACT_LN2, STEP_ACT_LN2_MEAN, STEP_ACT_LN2_RSTD, STEP_ACT_FCH, STEP_ACT_FCH_ACT,
	STEP_ACT_DOWN_OUT, STEP_ACT_DOWN_RSTD, STEP_ACT_RES3, STEP_ACT_X0, STEP_ACT_LNF, STEP_ACT_LNF_MEAN, STEP_ACT_LNF_RSTD, STEP_ACT_LOGITS,
	STEP_NACTS,
	/* the MLP's layer output (step_buffers_mlp), kept for its backward:
	 * past the transformer's list, which no transformer layer saves */
	STEP_ACT_MLP_OUT = STEP_NACTS
};
#define STEP_NBLOCK_ACTS (STEP_ACT_RES3 + 1)
const char *step_act_name(enum step_act a);

/* What a buffer is to the engine that runs it. */
enum step_role {
	STEP_TOKENS, STEP_TARGETS, /* the batch's int token ids */
	STEP_SCRATCH,              /* the backward's scratch, slot `index`: dres, dx, dqkv, dh, dup, datt */
	STEP_DNORM,                /* tied: the final norm's grads, until the embedding's backward */
	STEP_W32, STEP_ACT32, STEP_G32, /* mixed precision: the fp32 conversion buffers */
	STEP_SAVED,                /* a layer's saved tensor, enum step_act `index` */
	STEP_MOE,                  /* a mixture's block's routed tensor, enum step_moe `index` (below) */
	STEP_MOE_SCRATCH,          /* the mixture's backward scratch, enum step_moe_scratch `index` */
	STEP_LORA,                 /* an adapter's saved tensor (step_buffers_lora): its lora_A module `index` */
	STEP_LORA_SCRATCH,         /* the adapters' backward scratch, enum step_lora_scratch `index` */
	STEP_NF4                   /* QLoRA's dequantized weight and absmax (util/nf4.h's nf4_step_buffers) */
};
#define STEP_NSCRATCH 6

/* A mixtral block's tensors beside its attention half's (engine/tfm_moe.h,
 * docs/schedule.md "Mixtures of experts"), made before its forward and
 * freed after its backward: the router's probabilities (BT, E), each
 * token's experts (BT, k, int64 as torch.topk's) and their weights (BT,
 * k), the tokens each expert got (E) and where its rows start (E + 1),
 * the assignments grouped by expert (BT·k tokens and slots, int64 as
 * torch.where's); then expert e's four at STEP_MOE_EXPERT + 4e: its
 * gathered input xe (n_e, d), gu (n_e, 2F), act (n_e, F) and output ye
 * (n_e, d), n_e the tokens the routing sends it this step. Their
 * `elements` is the bound (n_e = BT); step_moe_row gives one row's.
 * Qwen2-MoE's shared expert (S its width) has four of fixed size before
 * the experts' (none for mixtral): sgu (BT, 2S), sact (BT, S), sye (BT,
 * d) and its gate's sigmoid sg (BT). */
enum step_moe {
	STEP_MOE_PROBS, STEP_MOE_IDX, STEP_MOE_W, STEP_MOE_COUNTS, STEP_MOE_START, STEP_MOE_TOK, STEP_MOE_SLOT,
	STEP_MOE_SGU, STEP_MOE_SACT, STEP_MOE_SYE, STEP_MOE_SG, STEP_MOE_EXPERT
};
/* The backward's: dw (BT, k), dlogits (BT, E), dxr (BT, d) for the
 * router; for one expert at a time dye and dxe (n, d), dact (n, F), dgu
 * (n, 2F), n the most tokens any expert of any block got this step; the
 * shared expert's (qwen2_moe only) dsye and dsxe (BT, d), dsact (BT, S),
 * dsgu (BT, 2S). Made at the start of backward, freed after block 0's. */
enum step_moe_scratch {
	STEP_MOE_DW, STEP_MOE_DLOGITS, STEP_MOE_DXR, STEP_MOE_DYE, STEP_MOE_DXE, STEP_MOE_DACT, STEP_MOE_DGU,
	STEP_MOE_DSYE, STEP_MOE_DSXE, STEP_MOE_DSACT, STEP_MOE_DSGU, STEP_MOE_NSCRATCH
};

/* When a buffer is made: at the start of forward, before its layer's
 * forward, or at the start of backward. */
#define STEP_END_OF_BACKWARD SIZE_MAX
enum step_when { STEP_AT_FORWARD, STEP_AT_LAYER, STEP_AT_BACKWARD };

struct step_buffer {
	const char *name;
	enum step_role role;
	unsigned index;          /* the scratch slot, or the enum step_act */
	int block;               /* the block it belongs to, or -1 */
	uint64_t elements;
	unsigned esize;          /* bytes an element: 2 for a 16-bit tensor in mixed precision, else 4 */
	enum zs_cat cat;         /* activations or scratch */
	enum step_when when;
	size_t layer;            /* STEP_AT_LAYER: the layer it is made for */
	size_t freed_after;      /* the layer whose backward frees it (0: the end of backward), or
	                          * STEP_END_OF_BACKWARD: after every layer's and unit's backward */
	int recomputed;          /* freed after its layer's forward, made again for its backward */
	/* Outside autograd's graph (--freeze: below every trainable tensor,
	 * step_buffers_freeze): 1 + the layer whose forward frees it (its
	 * own, or the next one's for its output, which that one reads), never
	 * made again, freed_after unused; 0 for any other. */
	size_t freed_fwd;
};

/* A transformer step's buffers at micro-batch `batch` and sequence `seq`,
 * in the order the engine makes them; absent ones (llama's means) are
 * left out. p gives the conversion buffers' size in mixed precision
 * (NULL: none, as in fp32). The caller frees b->buf with free(). */
struct step_buffers {
	struct step_buffer *buf;
	size_t n;
};
void step_buffers_build(struct step_buffers *b, const struct zs_model *m, const struct step_params *p,
                        uint64_t batch, uint64_t seq, int mixed, enum zs_recompute recompute);

/* --freeze under the paper's and DeepSpeed's steps (docs/schedule.md,
 * "Frozen parameters under the paper's schedule"): the first layer
 * autograd's graph reaches, the layer of the first module (forward order)
 * with a trained tensor of p (0 where no spec marked p); under full
 * recomputation 1 at most (transformers' enable_input_require_grads makes
 * the token table's output require grad: every block runs backward,
 * docs/finetune.md). A layer below it runs no backward, and its saved
 * tensors of b (made by step_buffers_build for p's model; STEP_SAVED,
 * not a mixture's routed ones) are freed after the forward that reads
 * them last (freed_fwd), but the output that the first layer in the graph
 * reads in its backward. */
size_t step_graph_first(const struct step_params *p, enum zs_recompute recompute);
/* Whether layer l runs no backward: below step_graph_first, and holding
 * no trainable tensor (a tied model's layer 0 holds the final norm's,
 * whose grads its backward writes). */
int step_layer_no_backward(const struct step_params *p, enum zs_recompute recompute, size_t l);
void step_buffers_freeze(struct step_buffers *b, const struct step_params *p, enum zs_recompute recompute);
/* The spec whose frozen prefix the step leaves out of its saved set (the
 * one to mark the description the step runs with): c's
 * --freeze under --framework paper and deepspeed, else "" (the PyTorch
 * step's saved set is autograd's own, util/autograd.c). */
const char *zs_freeze_saved_spec(const struct zs_config *c);

/* A routed buffer's elements per row (one token of an expert: expert
 * e's of STEP_MOE, the largest expert's of STEP_MOE_SCRATCH); 0 for a
 * buffer of fixed size. Its bytes at n rows: n · row · esize. */
uint64_t step_moe_row(const struct zs_model *m, const struct step_buffer *b);
/* The expert a STEP_MOE buffer is sized by, or -1 (fixed, or the
 * scratch's largest expert). */
long step_moe_expert(const struct step_buffer *b);

/* The MLP's of widths d0..dL (step_params_mlp) at micro-batch `batch`,
 * fp32 in both precisions and all alive to the end of backward: the
 * backward's two deltas of the widest layer (scratch slots 0 and 1, made
 * at its start), the input x (d0, role STEP_TOKENS) and target y (dL,
 * STEP_TARGETS) from the start of forward, and each layer's output
 * (d(l+1), STEP_SAVED STEP_ACT_MLP_OUT), made before its forward. The caller frees
 * b->buf with free(). */
void step_buffers_mlp(struct step_buffers *b, const size_t *widths, size_t nwidths, uint64_t batch);

/* LoRA's buffers under the paper's schedule and DeepSpeed's own step
 * (docs/finetune.md, "LoRA under the paper's schedule and DeepSpeed's own
 * step"), appended to b (step_buffers_build's list for p's model) for
 * p's adapters (zs_lora_describe; none: b unchanged), B·T rows each.
 * Per adapter, named by its lora_A module (`index`, role STEP_LORA):
 * "lora_xa" [BT, r], A's output, which B's weight gradient reads (a
 * product's: 16-bit in mixed); with p->lora_dropout > 0 also
 * "lora_drop" [BT, in], the dropout's output, which A's weight gradient
 * reads, and "lora_noise" [BT, in], the dropout's scaled Bernoulli mask
 * (1.13's CPU _dropout_impl: x * noise, MulBackward0 keeps the noise),
 * both x's size. Made before the layer's forward, freed after its
 * backward; rebuilt under full recomputation as the block's tensors are
 * (every one but its output). In mixed precision the kernels' fp32
 * copies, one adapter's xa and (dropout) its dropped input, lengthen
 * act32 by B·T·r (with dropout B·T·(r + in), in the widest adapted
 * input). The backward's scratch (STEP_LORA_SCRATCH, fp32): "dlora" [BT, r], A's output's gradient (lora_backward's dt), and
 * with dropout "dlora_x" [BT, in] of the widest adapted input, the
 * dropout's output's gradient before its mask; made at the start of
 * backward, freed after block 0's as dx. */
enum step_lora_scratch { STEP_LORA_DT, STEP_LORA_DX };
void step_buffers_lora(struct step_buffers *b, const struct step_params *p, uint64_t batch, uint64_t seq, int mixed,
                       enum zs_recompute recompute);

/* --freeze under the paper's schedule (util/freeze.h's patterns) */

/* The paper's schedule (docs/schedule.md, "Frozen parameters under the
 * paper's schedule"): the trained elements (step_trained) of each of its units
 * (by_layer 0, unit=model: the flat vector; 1, unit=layer: each layer
 * of p with tensors), [off, off + n) of the flat vector, one run a unit. Returns
 * the units' runs (*nunits of them; the caller frees them), or NULL with
 * *cause ("--freeze ...: ...") where a unit's trainable tensors are not
 * one run, where zero3 (`whole`) would mix frozen and trainable in a unit,
 * or where a fused tensor's parts are not all frozen or all trainable.
 * An unmarked p freezes nothing (n = the unit's elements). */
struct zs_freeze_run {
	uint64_t off, n;
	uint64_t size;      /* the unit's elements, frozen ones too */
};
struct zs_freeze_run *zs_freeze_units(const struct step_params *p, int by_layer, int whole, size_t *nunits,
                                      char **cause);

/* --freeze under c's --framework paper (nothing to check under another,
 * or without --freeze): 0 where every unit mode of c can lay it out
 * (zs_freeze_units; zero3 at N > 1 among c's), or -1 with *cause, also
 * where m is NULL (the MLP) or the pattern freezes none or every one of
 * m's tensors. */
int zs_freeze_paper_check(const struct zs_config *c, const struct zs_model *m, char **cause);

/* Ψ_t: p's trained elements (step_trained; p->numel unmarked);
 * theory.json's trainable_params, which the report checks against it. */
uint64_t zs_freeze_trained(const struct step_params *p);

#endif
