/*
 * net — a model as the step driver sees it: a list of layers, each with
 * its forward, its backward, the parameters it owns and the activations it
 * saves, and the list of per-rank tensors those activations live in, each
 * saying when it is allocated and when it is freed (llm.c's
 * ParameterTensors and ActivationTensors, as tables the driver walks).
 * Parameters are one flat vector (mlp.h's layout); a layer owns the run
 * [param_off, param_off + nparams) of it. Activations are fp32 (the
 * transformer's token ids, ints of the same size), or 16-bit where the
 * transformer's mixed precision saves them so (esize 2).
 *
 * The paper's schemes shard and gather units of the flat vector (layout.h)
 * and never see a layer; a framework's hooks do where its library does
 * (DeepSpeed's ZeRO-3 gathers and releases per nn.Module: the `module`
 * hook and its coordinator read the layers' modules and tensors). A new
 * model is a new builder and, if it needs them, new layer kinds.
 */
#ifndef ZS_ENGINE_NET_H
#define ZS_ENGINE_NET_H

#include <stddef.h>
#include <stdint.h>

#include "engine/fp16.h"
#include "engine/tfm.h"
#include "util/config.h"
#include "util/schedule.h"
#include "util/step.h"

#define ZS_NO_TENSOR UINT32_MAX
#define ZS_END_OF_BACKWARD STEP_END_OF_BACKWARD

/* When a tensor is allocated: at the start of forward, just before the
 * layer that writes it runs forward, or at the start of backward. */
enum zs_when { ZS_AT_FORWARD, ZS_AT_LAYER, ZS_AT_BACKWARD };

struct zs_tensor {
	const char *name;   /* what it holds ("x", "out", "qkv", "dres", ...) */
	int block;          /* the transformer block it belongs to, or -1 */
	size_t elements;    /* elements per rank */
	size_t esize;       /* bytes of one: 4 (fp32, or int token ids) or 2 (fp16) */
	enum zs_cat cat;
	enum zs_when alloc;
	size_t layer;       /* ZS_AT_LAYER: the layer it is allocated for */
	/* Recomputed: freed right after its layer's forward, allocated again
	 * just before its layer's backward, which rebuilds it. */
	int recomputed;
	size_t freed_after; /* the layer whose backward frees it, or ZS_END_OF_BACKWARD */
	size_t freed_fwd;   /* nonzero: freed after layer freed_fwd - 1's forward instead (util/step.h) */
	/* Routed (a mixture of experts' tensors, util/step.h's step_moe_row):
	 * `row` elements a token (0: a tensor of fixed size), as many rows as
	 * the step's routing gives on its rank: expert `expert`'s tokens in
	 * the counts tensor `counts` (the layer's), or (expert -1) the most
	 * any expert of any block got (net_tensor_rows). `elements` is the
	 * bound. Made after its layer's route (below); none at 0 rows. */
	size_t row;
	long expert;
	unsigned counts;
};

struct zs_net;

/* What a layer's kernels work on, on one rank: each parameter tensor the
 * layer reads (its own in flat order; a tied layer's, those of the layer it
 * reads, net_reads), wherever the scheme holds it (a full buffer, a
 * gathered unit, or a block of its own: DeepSpeed's ZeRO-3), NULL while it
 * is not gathered; and in backward the grads of each, same type, NULL
 * where the layer writes none (a tied layer's, outside DeepSpeed's ZeRO-3,
 * which reduces the tied head's final norm from the head). */
struct zs_layer_io {
	/* One entry per tensor the layer reads (its nptensors): the rank's
	 * own arrays (struct zs_rank's, sized by net_max_ptensors), so
	 * that a layer may have as many tensors as its step description
	 * lists. */
	const void **w; /* fp16 or fp32 */
	void **g;
	float *const *t;    /* the rank's tensors, by index */
	enum zs_dtype dt;
	size_t batch;
	const struct zs_net *net;
	/* the run's seed, the step (0-based) and its micro-step: what LoRA's
	 * dropout under the paper's step keys its masks on (tfm_net.c) */
	uint64_t seed;
	unsigned step, micro;
	/* the rank's 4-bit storages (struct zs_q4_store, net.tfm.nq4parts;
	 * NULL without a 4-bit base) */
	const struct zs_q4_store *q4;
};

struct zs_layer;

/* A layer's kind. A kind with modules (the transformer's) also runs its
 * forward and backward one module at a time: module s's step reads (and
 * writes the grads of) module s's tensors only, and forward is the steps
 * 0..nmodules-1 in order, backward the same in reverse, so that a scheme
 * may gather and release each module's params between them (DeepSpeed's
 * ZeRO-3 hooks every nn.Module with parameters of its own). */
struct zs_layer_kind {
	const char *name;
	void (*forward)(const struct zs_layer *l, const struct zs_layer_io *io);
	void (*backward)(const struct zs_layer *l, const struct zs_layer_io *io);
	void (*forward_module)(const struct zs_layer *l, const struct zs_layer_io *io, size_t s);
	void (*backward_module)(const struct zs_layer *l, const struct zs_layer_io *io, size_t s);
	/* A layer whose tensors are sized by what it computes (a mixture's
	 * block, its experts' by the routing): the part of its forward that
	 * decides them, run before its routed tensors are made and `forward`
	 * runs the rest; NULL for any other. */
	void (*route)(const struct zs_layer *l, const struct zs_layer_io *io);
	/* A block under full recompute: module s's part of rebuilding, in
	 * its backward, what its forward did not keep, reading module s's
	 * tensors only (run s = 0..nmodules-1 before the backward modules,
	 * as torch.utils.checkpoint reruns the block's forward, so that a
	 * scheme may gather around each); NULL for any other kind. */
	void (*recompute_module)(const struct zs_layer *l, const struct zs_layer_io *io, size_t s);
	/* Module by module (a scheme's hooks), a routed layer's route runs
	 * inside its leaf (zs_layer.leaf): the part of the leaf's forward (or
	 * full recompute) that decides the routed tensors, before they are
	 * made and forward_module (recompute_module) runs the leaf's rest. */
	void (*route_module)(const struct zs_layer *l, const struct zs_layer_io *io);
};

/* A module of a layer: the tensors [first, first + n) of what it reads. */
struct zs_module {
	size_t first, n;
	int no_grad_in; /* the step description's (util/step.h) */
	/* LoRA (--lora-r; util/lora.h's zs_lora_describe): a base module's
	 * place among its layer's modules less the adapters' (what tfm.c
	 * calls module s); an adapter's: `adapter` 1 for lora_A [r, in] (its
	 * tensor `first`; lora_B [out, r] the next), which runs the pair, 2
	 * for lora_B, which runs nothing, over the rows [row0, row0 + out) of
	 * its base module's (`base`) product, keeping xa, x·Aᵀ (a tensor of
	 * the list; util/step.h's step_buffers_lora), and with LoRA's dropout
	 * its output `drop` and noise `noise` (ZS_NO_TENSOR without), drawn
	 * as the step's `draw`-th dropout (0-based: the adapters' forward
	 * order, the micro-step's first). */
	size_t role;
	int adapter;
	size_t base;
	uint64_t row0, in, out, r;
	unsigned xa, drop, noise, draw;
};

struct zs_layer {
	const struct zs_layer_kind *kind;
	/* Outside autograd's graph (--freeze: util/step.h's
	 * step_layer_no_backward): its backward runs no kernel. */
	int nograd;
	size_t param_off, nparams; /* the params it owns in the flat vector */
	unsigned in, out;          /* tensors it reads and writes (out is saved for backward) */
	unsigned dy, dx;           /* backward: d loss/d out (read), d loss/d in (written, or ZS_NO_TENSOR) */
	size_t din, dout;          /* linear: in (B, din), out (B, dout), weight (dout, din), bias (dout) */
	int relu;                  /* linear: ReLU on the output */
	/* Its parameter tensors (PyTorch's nn.Parameter), their elements in
	 * flat order: a linear layer's weight, then its bias. A framework that
	 * assigns whole tensors to ranks partitions these (layout.h). */
	size_t nptensors, *ptensor; /* malloc'd by the builder; net_free frees it */
	/* Tied: the layer owns no params and reads the first unit's (a tied
	 * head reads the token embedding at param_off 0). It runs in a visit
	 * of that unit of its own (engine.c: gathered as for a forward, params
	 * only) and computes no param grads: the layer that owns them does
	 * (the transformer's embedding, tfm_net.c). */
	int tied;
	/* Its modules in forward order (kinds with modules; else none): a
	 * block's norms and linears, the embedding's tables, the head's norm
	 * and linear (tied: the embedding's table again). */
	size_t nmodules;
	struct zs_module *module; /* malloc'd by the builder (NULL: none); net_free frees it */
	/* DeepSpeed's z3 leaf (util/ds_coord.h, ds_coord_leaf): modules
	 * [leaf, nmodules) are one to a scheme's module hooks, which see
	 * modules 0..leaf (a mixture's sparse-MoE block); nmodules: none.
	 * net_hooked says how many modules the hooks see. */
	size_t leaf;
	/* The module (forward order; 0 for a kind without modules) whose
	 * forward runs the layer's first matmul, where the replay places
	 * cuBLAS's workspace (tracker_matmul); -1: none. The step
	 * description's (step_layer.matmul_module). */
	long matmul_module;
	/* Transformer layers: the block (or -1) and the tensors it names,
	 * by enum step_act (ZS_NO_TENSOR where absent). */
	int block;
	unsigned act[STEP_NACTS];
	/* A mixture's block: its tensors by enum step_moe (nmoe of them:
	 * STEP_MOE_EXPERT + 4E), malloc'd by the builder (NULL: none). */
	size_t nmoe;
	unsigned *moe;
};

/* The transformer's own data (tfm_net.c), beside its layers. */
enum { ZS_NET_MLP, ZS_NET_TFM };
struct zs_net_tfm {
	struct tfm_dims dims;
	size_t B, T;
	enum zs_recompute recompute;
	int *perm;                 /* the task's permutation (tfm_task): malloc'd */
	unsigned tokens, targets;  /* (B, T) int token ids */
	unsigned scratch[6];       /* struct tfm_scratch's buffers, in its order */
	unsigned dnorm;            /* tied: the final norm's grads, until the embedding's backward */
	/* Mixed precision: fp16 params and grads, 16-bit activations; the
	 * kernels run in fp32 on conversion buffers: w32 a layer's params
	 * widened, g32 its grads before they are rounded to fp16, act32 a
	 * layer's 16-bit tensors widened (ZS_NO_TENSOR in fp32). */
	int mixed;
	unsigned w32, g32, act32;
	unsigned moe_scratch[STEP_MOE_NSCRATCH]; /* a mixture's backward scratch, by enum step_moe_scratch */
	/* LoRA: lora_alpha / r (PEFT's scaling), and the adapters' backward
	 * scratch by enum step_lora_scratch (ZS_NO_TENSOR without adapters) */
	float lora_scaling;
	unsigned lora_scratch[2];
	/* LoRA's dropout (--lora-dropout p; 0: none) and the adapters in the
	 * model (a micro-step's draws) */
	double lora_dropout;
	unsigned lora_n;
	/* QLoRA's 4-bit base (--quant-base nf4 under zerosim's own step;
	 * docs/finetune.md, "QLoRA under the paper's step and DeepSpeed's
	 * own step"): the quantized tensors, in the flat vector's order
	 * (nq4; their layers' storages nq4parts, each rank's struct
	 * zs_q4_store), the scratch a module's product reads its weight
	 * dequantized from (nf4w, and with double quantization nf4a for the
	 * absmax: util/nf4.h's nf4_step_buffers; ZS_NO_TENSOR without) */
	size_t nq4, nq4parts;
	struct zs_q4_tensor *q4;
	int double_quant;
	unsigned nf4w, nf4a;
};

/* A quantized tensor of the flat vector: its elements [off, off + numel),
 * [rows, cols] = [out, in] as bitsandbytes quantizes it (a Conv1D's too,
 * GPT-2's: transformers transposes it first, and the flat vector holds
 * it so already: engine/ag_exec.c's feed_tfm_param), its Hugging Face
 * layers (a fused tensor's parts, nparts rows each, else one) and the
 * first of their storages. */
struct zs_q4_tensor {
	size_t off, part0;
	uint64_t numel, rows, cols;
	unsigned nparts;
	uint64_t part_rows[3];
};

/* One quantized layer's storages on a rank, as Params4bit and its
 * QuantState hold them (util/nf4.h's struct nf4_bytes, each a tracked
 * block): the packed codes, the absmax (NULL with double quantization)
 * and the 16-entry code; with double quantization the 8-bit absmax, the
 * offset, state2's absmax and its copy of the dynamic map. */
struct zs_q4_store {
	uint8_t *packed, *qabsmax;
	float *absmax, *code, *offset, *absmax2, *code2;
};

struct zs_net {
	int kind;                  /* ZS_NET_MLP or ZS_NET_TFM */
	size_t nparams;            /* Ψ */
	size_t batch;              /* per rank */
	size_t nlayers;
	struct zs_layer *layer;    /* nlayers of them (malloc'd by the builder) */
	/* Allocated in list order at each point of enum zs_when, freed in
	 * list order at the end of backward (or after their layer). */
	size_t ntensors, tensor_cap;
	struct zs_tensor *tensor;  /* ntensors of them (malloc'd, grown by net_add_tensor) */
	unsigned input, target;    /* the batch: x (B, d_in) and y (B, d_out); tokens for a transformer */
	/* The loss of the last layer's output against the target; writes
	 * d loss/d out into the last layer's dy tensor (the transformer's
	 * logits, in place). */
	float (*loss)(const struct zs_net *m, float *const *t);
	struct zs_net_tfm tfm;
};

/* The MLP of mlp.h (ReLU between layers, MSE loss): layer l is a linear
 * layer owning its weight and bias; tensors are step_buffers_mlp's list,
 * in its order and with its sizes and lifetimes: the two delta buffers
 * (scratch; backward of layer l reads delta[(L-1-l) mod 2] and writes the
 * other), x, y, and each layer's output. */
void net_mlp_init(struct zs_net *m, const size_t *widths, size_t nwidths, size_t batch);

/* The transformer of c->tfm (tfm_net.c): layer 0 the embedding, layers
 * 1..L the blocks, layer L+1 the final norm and head (tied: reading the
 * embedding's unit); every tensor its backward reads, with its lifetime
 * (docs/schedule.md, "Transformers"); --freeze (util/step.h's
 * zs_freeze_saved_spec) leaves the layers below the first trainable
 * tensor out of autograd's graph (step_buffers_freeze); --lora-r under
 * the paper's step adds the adapters to each block (util/lora.h's
 * zs_lora_step_params, which the CLI checked). */
void net_tfm_init(struct zs_net *m, const struct zs_config *c);
/* Rank `rank`'s tokens and targets of step `step` into its tensors
 * (tfm_task_batch of the task the seed drew). */
void net_tfm_batch(const struct zs_net *m, float *const *t, uint64_t seed, unsigned step, unsigned rank);

/* The model of a run: c->tfm's transformer, or the MLP of c->widths. */
void net_init(struct zs_net *m, const struct zs_config *c);
/* Release what net_init allocated (the layers, the tensors, the
 * transformer's task). */
void net_free(struct zs_net *m);

/* Routed tensor i's rows on a rank whose tensors are t (its layer's
 * routing done); 0 for a tensor of fixed size. */
size_t net_tensor_rows(const struct zs_net *m, float *const *t, unsigned i);

/* For the builders: append tensor t to the list; its index. */
unsigned net_add_tensor(struct zs_net *m, struct zs_tensor t);
/* Append the step description's buffer b (util/step.h) as a tensor of the
 * same size and lifetime; its index. */
unsigned net_add_buffer(struct zs_net *m, const struct step_buffer *b);

/* The layer whose parameter tensors layer l reads (a tied layer reads the
 * first's), and the index of its first tensor in the model's tensor order. */
const struct zs_layer *net_reads(const struct zs_net *m, size_t l);
size_t net_first_ptensor(const struct zs_net *m, size_t l);
/* The modules of layer l a scheme's module hooks see: its z3 leaf's
 * first stands for the whole leaf (zs_layer.leaf). */
size_t net_hooked(const struct zs_layer *l);

/* The most parameter tensors any layer reads: the length of a layer io's
 * w and g (at least 1). */
size_t net_max_ptensors(const struct zs_net *m);

/* Bytes of every tensor the model allocates in one step, per rank. */
size_t net_tensor_bytes(const struct zs_net *m);

#endif
