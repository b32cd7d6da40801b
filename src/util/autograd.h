/*
 * autograd — a training step of eager PyTorch as data: the tensors Hugging
 * Face's modeling code, autograd and torch.optim make in one step, each op
 * with its inputs and outputs, and every allocation and free in the order
 * PyTorch's allocator sees them (docs/schedule.md, "The PyTorch step").
 *
 * This is the third part of the step's description (util/step.h has the
 * parameters and zerosim's own buffers). It is built from the config and
 * the run's options alone, written from transformers' modeling files and
 * PyTorch's derivative formulas (tools/autograd/derivatives.yaml) — never
 * from zerosim's engine —, and checked against PyTorch's own allocator by
 * tests/hf_torch.sh. The engine runs it (engine/ag_exec.c: every op a real
 * kernel over buffers the tracker allocated when the list says, freed when
 * it says, so a kernel that read a freed tensor would fail under ASan); the
 * theory sums it (theory/theory_autograd.c). Neither adds a byte of its own.
 *
 * Tensors. A storage is what the allocator is asked for (`bytes`, as
 * PyTorch asks: numel · element size; 0-dim scalars are one element). A
 * view (`storage` != its own index) shares its storage's bytes, with its
 * own shape, strides (elements) and offset: split, permute, transpose,
 * view, unsqueeze and expand (a stride of 0) make views, never bytes.
 * Every operand of an op may be a view; an output is always a whole
 * contiguous storage, or a view of one for an in-place op.
 *
 * Events, in the order PyTorch runs them:
 *   AG_EV_ALLOC t   storage t is allocated (its bytes become live);
 *   AG_EV_OP        an op computes out[] from in[] (outputs already
 *                   allocated; an in-place op names its target as out[0]
 *                   and in[0]);
 *   AG_EV_FREE t    storage t is freed (its bytes are no longer live);
 *   AG_EV_MARK      a boundary: a phase's start, or a module's start and
 *                   end in forward and backward, named as the reference
 *                   (tests/hf_torch.py) names its marks.
 * Between the step's events nothing is made or freed: the list is the
 * whole of what the step allocates, for one rank, at steady state (the
 * optimizer's state exists); `setup` lists what exists before the first
 * step (the parameters, the model's buffers, and at steady state the
 * grads and optimizer state), and `first_step` what the first step makes
 * on top of it (Adam's state, its step counters).
 *
 * The first step as its own list (`step1`, ag_options.step1): where the
 * first step is not the steady one in its middle (PyTorch's plain loop:
 * every .grad is None until the first backward makes it, Adam's state is
 * made inside the first optimizer.step(), after backward), the run's
 * first step runs `step1` in place of `first_step` and the steady step
 * (then `first_step` is empty), and ends in the state every later step
 * starts from. Under DDP (util/ag_ddp.h) the second step is a list of
 * its own too (`step2`: its forward rebuilds the reducer's buckets, which
 * the first step ran on as the constructor cut them), run in place of
 * the steady step at step 2. ag_step_lists says which lists a step runs; the engine
 * runs them and the theory sums them, each with its own peak and phases,
 * the marks the steady step's.
 *
 * Gradient accumulation (ag_options.grad_accum K > 1, docs/schedule.md):
 * the step is K micro-steps, each a forward and backward over its own
 * batch (set-up holds the K pairs of input_ids and labels; ag_tensor.micro
 * says whose), its loss divided by K, then one optimizer phase; the
 * grads the first backward makes (or zeros kept) take the later ones in
 * place. A "micro:k" mark opens micro-step k, and every mark inside it is
 * named "LABEL@k". K = 1 is the list without any of it.
 *
 * Ownership: ag_step_build fills a struct whose arrays it allocates;
 * ag_step_free releases them. Out of memory is fatal.
 */
#ifndef ZS_UTIL_AUTOGRAD_H
#define ZS_UTIL_AUTOGRAD_H

#include <stddef.h>
#include <stdint.h>

#include "util/config.h"
#include "util/model.h"
#include "util/schedule.h"
#include "util/step.h"

#define AG_MAXDIM 5
#define AG_MAXIN 5
#define AG_MAXOUT 3
#define AG_NONE UINT32_MAX

/* AG_F64: the 8-byte double a Python float becomes when a tensor op takes
 * it (a "wrapped number", 0-dim; autograd keeps it where the op saves
 * its operand, e.g. mul's). */
/* AG_U8 (appended): bitsandbytes' uint8 storages of a 4-bit base weight
 * (util/nf4.h: the packed NF4 codes, the 8-bit absmax). */
enum ag_dtype { AG_F32, AG_BF16, AG_F16, AG_I64, AG_BOOL, AG_F64, AG_U8 };
/* Bytes an element: 4, 2, 2, 8, 1, 8, 1. */
unsigned ag_dtype_size(enum ag_dtype d);
const char *ag_dtype_name(enum ag_dtype d);

/* The `what` of a 4-bit base layer's packed codes (--quant-base nf4: a
 * BUFFER storage of its weight's parameter, which the weight's fp32 form
 * no longer is; under --wrapper fsdp fp32 elements, bitsandbytes'
 * quant_storage, that util/ag_fsdp.c flattens into the block's unit). */
#define AG_Q4_CODES "quantize_4bit (packed weight)"

/* The `what` of 1.13's two record_function handles around an optimizer's
 * step and zero_grad (util/autograd.c, record_function). */
#define AG_RF_HANDLE "zeros (record_function handle)"
#define AG_RF_ENTER "_record_function_enter (handle)"

/* What a storage is to the run. */
enum ag_role {
	AG_ROLE_PARAM,   /* a parameter tensor (step_params tensor `param`) */
	AG_ROLE_GRAD,    /* its .grad */
	AG_ROLE_ADAM_M, AG_ROLE_ADAM_V, AG_ROLE_ADAM_STEP, /* its optimizer state */
	AG_ROLE_BUFFER,  /* a module's registered buffer (GPT-2's causal `bias`, Llama's inv_freq) */
	AG_ROLE_INPUT,   /* the batch: input ids and labels */
	AG_ROLE_SCALER,  /* GradScaler's _scale and _growth_tracker (--precision amp-fp16), kept across steps */
	AG_ROLE_TEMP     /* anything else the step makes: activations, grads of activations, temporaries */
};

struct ag_tensor {
	const char *what;          /* static text: the op that made it ("addmm", "tanh", "_softmax") */
	enum ag_dtype dtype;
	unsigned ndim;             /* 0 (a scalar) .. AG_MAXDIM */
	uint64_t shape[AG_MAXDIM];
	int64_t stride[AG_MAXDIM]; /* in elements; 0 broadcasts */
	uint32_t storage;          /* the storage it views; its own index when it is one */
	uint64_t offset;           /* its first element in that storage */
	uint64_t bytes;            /* a storage's allocation; 0 for a view */
	enum ag_role role;
	enum zs_cat cat;           /* the tracker's category (the breakdown) */
	int32_t param;             /* PARAM, GRAD, ADAM_*: the step_params tensor; else -1 */
	int32_t module;            /* the step_params module whose forward or backward made it, or -1 */
	int32_t part;              /* PARAM, GRAD, ADAM_*: a fused step_params tensor's part (Hugging Face's
	                            * q/k/v or gate/up: part_rows[part] rows of it), else -1 */
	uint32_t micro;            /* INPUT: the micro-step (0..K-1 under --grad-accum K) whose batch it
	                            * holds; else 0 */
	unsigned char host;        /* a storage in host memory under --torch-device cuda (a CPU scalar:
	                            * util/autograd.c, host_scalar): 0 device bytes, never the tracker's */
	unsigned char q4;          /* PARAM: a base weight's storage --quant-base nf4 quantized (its packed
	                            * codes, an AG_Q4_CODES buffer of the same param and part, hold it:
	                            * util/autograd.c, q4_quantize) */
	unsigned char orig_frozen; /* PARAM: --freeze froze it, but --fsdp-orig-params on computes its gradient
	                            * (a view of a flat parameter that requires grad: ag_options.fsdp_orig_params);
	                            * no optimizer steps it */
	uint32_t adapter;          /* a LoRA adapter's weight (PARAM, param -1): 1 + its place among the
	                            * adapters in model.parameters() order (per adapted layer lora_A, then
	                            * lora_B: a case's "lora" side file's order); else 0 */
};

/* The most indices (batch x seq for the token table) whose embedding
 * backward (a trained table's alone: util/autograd.c emb_dense_bwd) takes CUDA's
 * feature kernel, which makes nothing but the zeros(V, d) gradient the CPU
 * makes too (aten/src/ATen/native/cuda/Embedding.cu,
 * embedding_dense_backward_cuda: `if (num_indices <= 3072 &&
 * !scale_grad_by_freq)`, v1.13.0 and v2.6.0); past it the sort path's
 * scratch (sorted and original indices, cub's radix-sort storage, the
 * segments, data-dependent) is not described. No GPU property enters. */
#define AG_CUDA_EMB_FAST_TOKENS 3072u

/* The device bytes of a storage's allocation: a host one's are none. */
static inline uint64_t ag_device_bytes(const struct ag_tensor *t)
{
	return t->host ? 0 : t->bytes;
}

/* The ops. Semantics are PyTorch's for the aten op named; shapes follow
 * the operands' views (broadcasting is a view with stride 0). Scalars
 * are in arg[]. "out = ..." writes a fresh output; "_" ops are in place.
 * Every op computes in fp32 (16-bit operands are widened and the result
 * rounded once, as PyTorch's CPU kernels do) unless its note says. */
enum ag_op {
	/* making values */
	AG_OP_ARANGE,        /* out[i] = i (int64) */
	AG_OP_FILL,          /* out = arg[0] */
	AG_OP_COPY,          /* out = in0 (any strides, any dtype: contiguous(), .to(dtype), clone) */
	AG_OP_TRIL_MASK,     /* out (bool [P, P]) = j <= i: GPT-2's causal `bias` */
	AG_OP_CAUSAL_ADD_MASK, /* out [T, T] = 0 where j <= i, else arg[0] (finfo.min): 5.x's/Llama's eager mask */
	/* elementwise */
	AG_OP_ADD,           /* out = in0 + arg[0] · in1 (arg[0] is add's alpha, 1 unless said) */
	AG_OP_ADD_SCALAR,    /* out = in0 + arg[0] */
	AG_OP_MUL,           /* out = in0 · in1 */
	AG_OP_MUL_SCALAR,    /* out = in0 · arg[0] */
	AG_OP_DIV,           /* out = in0 / in1 (in1 may be a 0-dim tensor) */
	AG_OP_NEG,           /* out = −in0 */
	AG_OP_POW_SCALAR,    /* out = in0 ^ arg[0] */
	AG_OP_TANH,          /* out = tanh(in0) */
	AG_OP_RSQRT,         /* out = 1 / sqrt(in0) */
	AG_OP_SQRT,          /* out = sqrt(in0) */
	AG_OP_SILU,          /* out = in0 · sigmoid(in0) */
	AG_OP_WHERE,         /* out = in0 (bool) ? in1 : in2 (in2 a 0-dim tensor) */
	AG_OP_CAT_LAST,      /* out = cat((in0, in1), dim = -1) */
	/* reductions and normalisations (over the last dim unless said) */
	AG_OP_MEAN_LAST,     /* out (keepdim) = mean(in0, -1) */
	AG_OP_SUM_ROWS,      /* out [n] = Σ_rows in0 [rows, n] (a bias's grad) */
	AG_OP_SUM_TO,        /* out = in0 summed to out's shape (expand's backward) */
	AG_OP_LAYER_NORM,    /* out0 = layer_norm(in0; w in1, b in2, eps arg[0]); out1 mean, out2 rstd [rows] */
	AG_OP_SOFTMAX,       /* out = softmax(in0, -1) */
	AG_OP_LOG_SOFTMAX,   /* out = log_softmax(in0, -1) */
	AG_OP_NLL,           /* out0 (0-dim) = mean over rows with target in1 != arg[0] of −in0[row, in1[row]];
	                      * out1 (0-dim) total_weight = those rows */
	/* matrix products (operands are 2-D or batched 3-D views; BLAS takes transposed views as they are) */
	AG_OP_MM,            /* out = in0 @ in1 */
	AG_OP_ADDMM,         /* out = in2 (a bias, broadcast over rows) + in0 @ in1 */
	AG_OP_BMM,           /* out[b] = in0[b] @ in1[b] */
	AG_OP_EMBEDDING,     /* out[i] = in0 (the table) [in1[i]] */
	/* backward formulas (derivatives.yaml's), each as one op */
	AG_OP_LAYER_NORM_BWD,/* native_layer_norm_backward: in grad, x, mean, rstd, w; out dx, dw, db
	                      * (AG_NONE where autograd asks none) */
	AG_OP_SOFTMAX_BWD,   /* out = (in0 − Σ in0·in1) · in1: _softmax_backward_data(grad in0, output in1) */
	AG_OP_LOG_SOFTMAX_BWD, /* out = in0 − exp(in1) · Σ in0: (grad in0, output in1) */
	AG_OP_NLL_BWD,       /* out = zeros, then −in0 (0-dim grad) / in2 (total_weight) at [row, in1[row]] */
	AG_OP_TANH_BWD,      /* out = in0 · (1 − in1²): (grad, output) */
	AG_OP_SILU_BWD,      /* out = in0 · σ(in1) · (1 + in1 · (1 − σ(in1))): (grad, input) */
	AG_OP_RSQRT_BWD,     /* out = −0.5 · in0 · in1³: (grad, output) */
	AG_OP_POW_BWD,       /* out = in0 · arg[0] · in1^(arg[0] − 1): (grad, input, exponent) */
	AG_OP_EMBEDDING_BWD, /* out (the table's shape) = zeros, then out[in1[i]] += in0[i] */
	/* in place: out[0] is in[0] */
	AG_OP_ZERO_,         /* in0 = 0 */
	AG_OP_ADD_,          /* in0 += arg[0] · in1 */
	AG_OP_MUL_SCALAR_,   /* in0 *= arg[0] */
	AG_OP_ADD_SCALAR_,   /* in0 += arg[0] */
	AG_OP_DIV_SCALAR_,   /* in0 /= arg[0] */
	AG_OP_ADDCMUL_,      /* in0 += arg[0] · in1 · in2 */
	AG_OP_ADDCDIV_,      /* in0 += arg[0] · in1 / in2 */
	AG_OP_LERP_,         /* in0 += arg[0] · (in1 − in0) */
	AG_OP_ADAM_FUSED_,   /* torch._fused_adam_ over (param in0, grad in1, m in2, v in3), step count arg[0]:
	                      * no temporaries */
	/* appended (the numbers above stay): Llama's rotary tables */
	AG_OP_COS,           /* out = cos(in0) */
	AG_OP_SIN,           /* out = sin(in0) */
	AG_OP_ROPE_INV_FREQ, /* out [n] = 1 / arg[0] ^ (2i / 2n): LlamaRotaryEmbedding's inv_freq, base arg[0] */
	/* appended (issue #22's builder): dropout */
	AG_OP_BERNOULLI_,    /* in0 = 1 with probability arg[0], else 0 (noise.bernoulli_(1 - p)): in place,
	                      * drawn from the run's seed, the step and the draw arg[1] (1-based; 0: the event)
	                      * (not PyTorch's generator; a checkpointed layer's rerun draws its forward's again) */
	/* appended (issue #22's builder): the CPU's flash SDPA */
	AG_OP_SDPA_FLASH,    /* out0 [B, h, T, hd] = causal softmax(in0 in1ᵀ · arg[0]) in2, out1 [B, h, T] its
	                      * logsumexp: _scaled_dot_product_flash_attention_for_cpu (q, k, v, no dropout) */
	AG_OP_SDPA_FLASH_BWD,/* its backward: in (grad, q, k, v, logsumexp), out (dq, dk, dv), scale arg[0] */
	/* appended: DDP's collectives (util/ag_ddp.h), in place on every rank
	 * (out[0] is in[0]); the executor runs them across its ranks */
	AG_OP_ALL_REDUCE_SUM_, /* in0 = the sum of every rank's in0 */
	AG_OP_BROADCAST_,    /* in0 = rank arg[0]'s in0 */
	/* appended: FSDP's (util/ag_fsdp.h), across the executor's ranks; every
	 * rank's out0 is N times its in0 (all-gather, in0 out0's shard) or in0
	 * N times out0 (reduce-scatter, shard) */
	AG_OP_ALL_GATHER,    /* out0 = cat(every rank's in0), rank order (_all_gather_base) */
	AG_OP_REDUCE_SCATTER_SUM, /* out0 = this rank's chunk of the sum of every rank's in0 (_reduce_scatter_base) */
	AG_OP_SHARD,         /* out0 = this rank's chunk of in0 (chunks of out0's elements), zeros past in0's end
	                      * (FlatParamHandle._get_shard: chunk().clone(), F.pad) */
	/* appended: QLoRA's 4-bit base (--quant-base nf4, util/nf4.h: bitsandbytes
	 * 0.47.0's kernels; blocks of 64, the absmax's own of arg[0]) */
	AG_OP_NF4_CODE,      /* out [16] = the NF4 code book (get_4bit_type("nf4")) */
	AG_OP_DYNAMIC_MAP,   /* out [256] = create_dynamic_map(signed=True) */
	AG_OP_NF4_QUANTIZE,  /* out0 (uint8 [(n + 1) / 2, 1]) the packed codes of in0 (fp32, n elements), out1 (fp32
	                      * [ceil(n / 64)]) the blocks' absmax: quantize_4bit */
	AG_OP_NF4_DEQUANTIZE,/* out (in0's weight, out's shape and dtype) = code[in0's codes] · in1 (fp32 absmax):
	                      * dequantize_4bit */
	AG_OP_MEAN_ALL,      /* out (0-dim) = mean of every element of in0 */
	AG_OP_QUANTIZE_BLOCKWISE, /* out0 (uint8 [n]) = in0's nearest codes of in1 (the dynamic map) in blocks of
	                      * arg[0], out1 (fp32) the blocks' absmax: quantize_blockwise */
	AG_OP_DEQUANTIZE_BLOCKWISE, /* out (fp32 [n]) = in2[in0] · in1 (absmax) by blocks of arg[0] */
	/* appended (issue #25's gemma2 and gemma3_text) */
	AG_OP_GELU_TANH,     /* out = gelu(in0, approximate="tanh"): 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))) */
	AG_OP_GELU_TANH_BWD, /* out = in0 · gelu'(in1): gelu_backward(grad in0, self in1, approximate="tanh") */
	AG_OP_SLIDING_MASK,  /* out (bool [.., T, T]) = j <= i − arg[0]: tril(ones_like(mask), diagonal=-window) */
	/* appended (issue #25's mixtral, MixtralSparseMoeBlock's routing; the
	 * description's, which the engine does not run yet) */
	AG_OP_TOPK,          /* out0 = the arg[0] largest of in0's last dim, out1 (int64) their indices: torch.topk */
	AG_OP_MIN_ALL,       /* out (0-dim) = min of in0 (one_hot's range check) */
	AG_OP_MAX_ALL,       /* out (0-dim) = max of in0 */
	AG_OP_SCATTER_,      /* in0[.., in1[.., j]] = in2[.., j] along the last dim (in2 AG_NONE: arg[0]): scatter_ */
	AG_OP_SUM_LEAD,      /* out [n] = in0 summed over every dim but the first (sum(dim=(-1, -2))) */
	AG_OP_GT,            /* out (bool) = in0 > in1 (a 0-dim wrapped number) */
	AG_OP_NONZERO,       /* out [n, in0's ndim] (int64) = the indices of in0's nonzero elements, n of them */
	AG_OP_INDEX,         /* out[i] = in0[in1[i]] (in2 AG_NONE), or in0[in1[i], in2[i]]: advanced indexing,
	                      * index_select */
	AG_OP_INDEX_ADD_,    /* in0[in1[i]] += in2[i] (rows): index_add_ */
	AG_OP_INDEX_PUT_ACC_,/* in0[in1[i]] += in3[i] (in2 AG_NONE), or in0[in1[i], in2[i]] += in3[i]:
	                      * _index_put_impl_ with accumulate (index's backward) */
	/* appended (qwen2_moe's shared_expert_gate; the description's) */
	AG_OP_SIGMOID,       /* out = sigmoid(in0) */
	AG_OP_SIGMOID_BWD,   /* out = in0 · in1 · (1 − in1): sigmoid_backward(grad in0, result in1) */
	AG_NOPS
};

/* The ops that call cuBLAS on the GPU (the first one makes its workspace:
 * docs/schedule.md, "The replay in measure"). */
#define AG_OP_CUBLAS(op) ((op) == AG_OP_MM || (op) == AG_OP_ADDMM || (op) == AG_OP_BMM)

const char *ag_op_name(enum ag_op op);
/* How util/autograd.c uses them, beyond the notes above (its bytes are
 * PyTorch's exactly; a few ops carry stand-in values where no later op
 * reads them or an exact kernel would add nothing to the bytes):
 *   AG_OP_COPY with arg[0] != 0 into a wider output is constant_pad_nd
 *     (in0 in out's leading corner, arg[0] around it: the labels padded
 *     with -100 at the end of the last dim), or, with arg[1] = p > 0, in0
 *     at offset p of out's last dim and zeros around it (slice_backward of
 *     rotate_half's x[..., hd/2:]); Llama's position_ids' float copy is a
 *     COPY from int64;
 *   AG_OP_CAT_LAST may take a third input (cat of three, SplitBackward's);
 *   AG_OP_TRIL_MASK also makes Llama's `arange(T) > cache_position` bool
 *     mask (j > i: stand-in values; only its float copy's bytes matter,
 *     CAUSAL_ADD_MASK makes the mask the attention reads);
 *   AG_OP_BMM makes the rope's inv_freq x positions ([1, hd/2, 1] by [1, 1, T]);
 *   AG_OP_MUL_SCALAR stands for Adam's division by bias_correction2_sqrt
 *     (arg[0] 1: the step-dependent value is not in the list) and for the
 *     backward products by a kept wrapped number (arg[0] its value);
 *   AG_OP_FILL of a bool [288] is 1.13's record_function handle;
 *   AG_OP_SUM_TO reduces to the output's shape (RMSNorm's weight and rsqrt
 *     grads, repeat_kv's expand, wpe's broadcast).
 * A 0-dim AG_F64 (wrapped number) and its 0-dim AG_F32 copy come in
 * pairs around the op that takes a Python float.
 *
 * Dropout (the model's probabilities, util/model.h; the CPU's path of
 * aten/src/ATen/native/Dropout.cpp, _dropout_impl): a noise tensor of the
 * input's shape and dtype (empty_like), AG_OP_BERNOULLI_ with 1 - p, an
 * AG_OP_DIV_SCALAR_ by 1 - p (a wrapped number), and AG_OP_MUL of the
 * input by it; autograd's MulBackward keeps the noise. p = 0 is the input
 * itself; p = 1 multiplies by a 0-dim zeros. */

/* AG_EV_GRAD_READY t (appended): parameter grad storage t is complete for
 * this backward -- AccumulateGrad has run, its post hooks (DDP's,
 * util/ag_ddp.h) fire here, before the incoming gradient is released.
 * Nothing is allocated or computed: the theory and the executor pass it. */
enum ag_event_kind { AG_EV_ALLOC, AG_EV_FREE, AG_EV_OP, AG_EV_MARK, AG_EV_GRAD_READY };

struct ag_event {
	enum ag_event_kind kind;
	uint32_t t;                /* ALLOC, FREE: the storage */
	enum ag_op op;             /* OP */
	uint32_t in[AG_MAXIN];     /* OP: operands, AG_NONE past the last */
	uint32_t out[AG_MAXOUT];   /* OP: results, AG_NONE past the last */
	double arg[2];             /* OP: its scalars */
	enum zs_phase phase;       /* every event: the phase it falls in (forward, backward, optimizer;
	                            * zero_grad is ZS_PH_OPTIMIZER's end, marked "phase:zero_grad") */
	int32_t module;            /* every event: the step_params module running, or -1 */
	const char *label;         /* MARK: "phase:backward", "fwd:h.0:end" (static or owned, see below) */
	uint32_t only_rank;        /* 0: every rank runs it; r + 1: rank r alone (ZeroRedundancyOptimizer's local
	                            * Adam and its state: each rank steps its own parameters, util/ag_zero1.h) */
};
/* Whether rank `rank` runs event e (e->only_rank). */
int ag_event_on_rank(const struct ag_event *e, unsigned rank);

/* ag_options.recompute: none, the model loop's checkpoint, the checkpoint
 * inside each FSDP unit */
enum { AG_CKPT_NONE, AG_CKPT_LOOP, AG_CKPT_IN_UNIT };

/* The options the step follows (zs_config's, resolved: no "default"). */
struct ag_options {
	uint64_t batch, seq;
	enum zs_torch_version version;
	enum zs_torch_device device;
	enum zs_optim_impl optim_impl;   /* single, foreach or fused */
	enum zs_zero_grad zero_grad;     /* none (set_to_none) or zeros */
	enum zs_attn attn;               /* eager or sdpa */
	enum zs_optimizer optimizer;     /* Adam (AdamW's bytes are Adam's) */
	double lr, beta1, beta2, eps;
	uint64_t seed;                   /* the run's --seed: dropout's masks (AG_OP_BERNOULLI_) */
	unsigned zero1_world;            /* 0: one Adam over every parameter; N >= 1: Adam inside
	                                  * ZeroRedundancyOptimizer over N ranks (util/ag_zero1.h): each rank's
	                                  * own section of the optimizer phase, then the owners' broadcasts */
	enum ag_dtype amp;               /* autocast's lower precision (--precision amp-bf16: AG_BF16), or
	                                  * AG_F32 without autocast (docs/schedule.md, "Autocast") */
	enum ag_dtype lora_amp;          /* autocast's lower precision inside an adapter's lora_A and lora_B:
	                                  * amp's, and under a bf16-loaded model's autocast (load_bf16) amp
	                                  * AG_F32 and this AG_BF16, since every other op's operands are bf16
	                                  * already and autocast casts none of them (docs/finetune.md, "QLoRA
	                                  * loaded in bf16 under autocast") */
	enum ag_dtype mdt;               /* the module's dtype: AG_BF16 after module.bfloat16() (DeepSpeed's bf16,
	                                  * --wrapper deepspeed --precision mixed: engine.py 1224-1231 at 38327e0),
	                                  * every parameter, floating buffer and activation in it, no autocast;
	                                  * else AG_F32 (docs/schedule.md, "DeepSpeed over the PyTorch step") */
	unsigned grad_accum;             /* K >= 1 micro-steps an optimizer step (--grad-accum) */
	int ddp_no_sync;                 /* DDP (util/ag_ddp.h): no_sync() on micro-steps 0..K-2 */
	/* --freeze (util/freeze.h), NULL or "" for none: the parameters it
	 * names require no grad. The step then follows autograd: no .grad and
	 * no Adam state for them, and an op saves for backward only what the
	 * gradient of an input that requires grad needs (docs/finetune.md). */
	const char *freeze;
	/* LoRA (--lora-r; 0: none), PEFT v0.20.0's lora.Linear over the
	 * targeted linear layers (lora_targets NULL or "": the family's
	 * default; "all-linear"; or module names, each matching a module whose
	 * name is it or ends with "." and it): every base parameter frozen,
	 * adapters lora_A [r, in] and lora_B [out, r] (zeros) trained, the
	 * layer's output y + B(A(x)) * lora_alpha / r (docs/finetune.md). */
	unsigned lora_r;
	double lora_alpha;
	const char *lora_targets;
	/* --lora-dropout P: PEFT's nn.Dropout(P) on the adapters' input (0:
	 * nn.Identity, no op) */
	double lora_dropout;
	/* QLoRA's 4-bit base (--quant-base nf4, with --lora-r): every base
	 * linear layer but the output embedding held as bitsandbytes'
	 * Linear4bit (NF4, blocks of 64; double_quant: the absmax in 8 bits,
	 * --double-quant), dequantized into an fp32 temporary at each use
	 * (docs/finetune.md, "QLoRA's 4-bit base"). */
	int quant_nf4;
	int double_quant;
	/* --load-dtype bf16 (with quant_nf4): QLoRA's bf16 recipe, the model
	 * loaded with from_pretrained(torch_dtype=torch.bfloat16) (mdt
	 * AG_BF16: every parameter made bf16, no module.bfloat16() after
	 * an fp32 build, so inv_freq stays the fp32 buffer its constructor
	 * computes), each 4-bit layer quantized from its bf16 weight
	 * (quant_state.dtype bf16: dequantized straight into bf16) with
	 * compute dtype bf16, and the adapters fp32 (PEFT's
	 * autocast_adapter_dtype; docs/finetune.md "QLoRA loaded in bf16") */
	int load_bf16;
	/* --lora-dtype bf16 (with load_bf16): TRL's SFTTrainer's cast of a
	 * quantized model's trainable parameters to bf16 (sft_trainer.py
	 * 1127-1130, v1.9.0): the adapters bf16, so their gradients and
	 * Adam's exp_avg and exp_avg_sq (zeros_like) too; autocast casts
	 * nothing inside them (lora_amp AG_F32: docs/finetune.md, "TRL's
	 * bf16 adapters") */
	int lora_bf16;
	/* --wrapper fsdp with LoRA (util/ag_fsdp.h): marks around each
	 * adapter's forward and backward ("unit:lora.K.A:fwd", ":fwd_end",
	 * ":bwd", ":bwd_end"; B likewise), where PEFT's wrap policy makes
	 * lora_A and lora_B units of their own; the pass consumes them. */
	int fsdp_unit_marks;
	/* DeepSpeed's ZeRO-3 hooks (util/ag_ds3.c, docs/schedule.md "ZeRO-3
	 * over the PyTorch step"): marks "ds3:NAME:fwd", ":fwd_end", ":bwd",
	 * ":bwd_end" at each leaf module that owns parameters (Hugging Face's
	 * names; Llama's q/k/v_proj and gate/up_proj each its own), where its
	 * pre-/post-forward hook and its pre-/post-backward Function run
	 * (a module whose inputs require no grad has no ":bwd_end"); and
	 * F.linear's saved weight.t() kept as a view that its backward reads.
	 * gpt2 and llama's layer (no fused, normed or biased q/k/v, no
	 * mixture, no LoRA, no 4-bit base, no --grad-accum) so far
	 * (ag_ds3_marks_lacking);
	 * ag_step_build_run sets it for DeepSpeed's ZeRO-3 at N > 1, whose
	 * first step gathers and releases at them; 0 leaves every list as it
	 * was. */
	int ds3_leaf_marks;
	/* --wrapper fsdp's backward_prefetch BACKWARD_PRE (--prefetch
	 * backward-pre, 2.6 only): each block's pre-backward hook gathers the
	 * block before it too (util/ag_fsdp.c). */
	int fsdp_prefetch;
	/* --wrapper fsdp's use_orig_params=True (--fsdp-orig-params on, 2.6
	 * only): a unit may mix frozen and trainable parameters; a frozen one
	 * in a unit that trains is computed with as a view that requires grad
	 * (its gradient made, its tensor's orig_frozen set) and never stepped;
	 * Adam steps each trainable parameter's piece of the rank's shard
	 * (util/ag_fsdp.c). */
	int fsdp_orig_params;
	/* --wrapper fsdp: the modules' parameters are views of the gathered
	 * flat parameter (1.13's flatten_params_wrapper.py 162-165, each
	 * forward), not leaves, so autocast caches none of their casts
	 * (docs/finetune.md, "Built: autocast under FSDP"). */
	int amp_param_views;
	/* --recompute full: Hugging Face's gradient checkpointing
	 * (model.gradient_checkpointing_enable(): each decoder layer through
	 * torch.utils.checkpoint with use_reentrant=True; docs/torch_saved.md,
	 * "Activation checkpointing"): a layer's forward under no_grad keeps
	 * its input and the RNG state, its backward reruns it with grad first.
	 * Every family but the gemmas', in fp32 on the plain loop and DDP of
	 * 1.13 and 2.6 so far (ag_step_build and zs_torch_recompute_set refuse
	 * the rest by name). AG_CKPT_IN_UNIT: under --wrapper fsdp, the
	 * checkpoint inside each layer's unit (5.x's GradientCheckpointingLayer:
	 * what the call binds is its partial's, whatever the family). */
	int recompute;
	/* --recompute-impl non-reentrant: the checkpoint with
	 * use_reentrant=False (1.13's _checkpoint_without_reentrant, 2.6's
	 * _checkpoint_without_reentrant_generator; docs/torch_saved.md,
	 * "Non-reentrant checkpointing"): the forward with grad, its saved
	 * tensors packed into holders (no bytes); the rerun at the layer's
	 * first unpack in the loop's own backward (2.6: stopped as its last
	 * saved tensor is packed); the frame (the input, the RNG state, what
	 * the call binds) let go as the layer's last node releases. Every
	 * dense family, fp32 or autocast, --wrapper none, ddp or fsdp, with
	 * --freeze (the rest refused by name: ag_step_build). */
	int nonreentrant;
	/* --logits dropped: the loop keeps the loss alone, as Hugging Face
	 * Trainer's compute_loss returns it: the model's output (its logits)
	 * goes once the forward has returned, before backward (docs/
	 * torch_saved.md, "Trainer's dropped logits"). The plain loop at
	 * K = 1 (util/config.c refuses the rest); 0: held to the step's end. */
	int drop_logits;
	/* Build the first step as a list of its own (ag_step.step1): the
	 * grads made by the first backward, Adam's state by the first step()
	 * (docs/schedule.md, "The first step"). ag_options_from_config sets it
	 * for the plain loop (--wrapper none) and DDP (--wrapper ddp, dp and
	 * zero1; find_unused_parameters False: util/ag_ddp.c runs it on the
	 * constructor's buckets) and FSDP (util/ag_fsdp.c); DeepSpeed's
	 * ZeRO-1/2 pass writes its own from the steady list (util/ag_ds.c:
	 * ag_step_build_run builds without it); the other passes take the
	 * steady list alone so far (ag_step1_lacking), where --steps 1 is
	 * refused (ag_step1_check). */
	int step1;
	/* A mixture's routing for the described step (mixtral's, qwen2_moe's
	 * and qwen3_moe's sparse-MoE blocks, fp32 on the plain loop of 1.13
	 * so far): the
	 * tokens each expert got in each block, layers x experts, block by
	 * block (the step's own; the theory's --routing). NULL for a model
	 * without experts; a mixture without it is refused. */
	const uint64_t *moe_counts;
};

struct ag_step {
	struct ag_tensor *tensor;
	size_t ntensors;
	struct ag_event *setup;         /* before the first step: params, buffers (allocs and their ops) */
	size_t nsetup;
	struct ag_event *first_step;    /* what the first step makes beyond steady state (optimizer state) */
	size_t nfirst;
	struct ag_event *event;         /* one step at steady state */
	size_t nevents;
	struct ag_event *step1;         /* the first step, run in place of first_step and event, or NULL */
	size_t nstep1;
	struct ag_event *step2;         /* the second step, run in place of event (DDP's rebuild), or NULL */
	size_t nstep2;
	char **labels;                  /* owned mark labels (freed by ag_step_free) */
	size_t nlabels;
	uint32_t loss, logits;          /* the loop's outputs (the last micro-step's), held to the step's
	                                 * end: DDP's _DDPSink clones them (util/ag_ddp.h) */
	uint32_t loss1, logits1;        /* the same of the first step's own list (step1), or AG_NONE */
};

/* Build the step of model m (gpt2, llama, mistral, qwen2, qwen3 or phi3) with parameters p
 * (step_params_build) under options o. Returns 0, or -1 with *cause set
 * (one line) for what it cannot describe yet (a family, an option). */
int ag_step_build(struct ag_step *s, const struct zs_model *m, const struct step_params *p,
                  const struct ag_options *o, char **cause);
void ag_step_free(struct ag_step *s);

/* The lists step `step` (0 the run's first) runs after the set-up, in
 * order, into ev[] and n[]: the first step's own list (step1) at step 0
 * where there is one, else first_step's prefix and the steady step at
 * step 0; the second step's own list (step2) at step 1 where there is
 * one; the steady step after. Returns how many (1 or 2). The lists of
 * steps 0, 1 and 2 are the run's every list: a step after the third runs
 * what the third does. */
unsigned ag_step_lists(const struct ag_step *s, unsigned step, const struct ag_event *ev[2], size_t n[2]);

/* One parameter's storages for the optimizer: the parameter, its .grad,
 * Adam's exp_avg, exp_avg_sq and step counter. */
struct ag_param_state { uint32_t w, g, m, v, step; };
/* Append to *list (*nlist events, capacity *cap, grown as needed) the
 * optimizer's phase as ag_step_build writes it -- the mark
 * "phase:optimizer", 1.13's record_function, Adam (o->optim_impl) over
 * ps[0..n) in that order --, its temporaries new tensors of s. For a
 * wrapper whose parameters are not the model's (FSDP's flat parameters,
 * util/ag_fsdp.h): one description of Adam. */
void ag_optimizer_events(struct ag_step *s, const struct ag_options *o, const struct ag_param_state *ps, size_t n,
                         struct ag_event **list, size_t *nlist, size_t *cap);
/* The same as the first step() writes it: each parameter's state (its
 * storages in ps, not allocated before) allocated and zeroed, step,
 * exp_avg, exp_avg_sq a parameter after another, before the update. */
void ag_optimizer_first_events(struct ag_step *s, const struct ag_options *o, const struct ag_param_state *ps,
                               size_t n, struct ag_event **list, size_t *nlist, size_t *cap);

/* Resolve the run's options: "default" becomes what release `version`
 * does on `device` (zero_grad: zeros in 1.13, none from 2.0; Adam: foreach
 * on CUDA from 2.0, else single; attention: eager in 1.13, sdpa in 2.x). */
void ag_options_from_config(struct ag_options *o, const struct zs_config *c, uint64_t batch, uint64_t seq);

/* What of m and o keeps the step's DeepSpeed ZeRO-3 leaf marks
 * (o->ds3_leaf_marks) from being described ("fused qkv_proj and
 * gate_up_proj", "--freeze", ...), or NULL where they are. */
const char *ag_ds3_marks_lacking(const struct zs_model *m, const struct ag_options *o);

/* What of c's wrapper and options keeps the first step from being a list
 * of its own (ag_options.step1: "--wrapper deepspeed", "--wrapper fsdp
 * with --grad-accum", ...), or NULL where it is one (a mixture's, m's,
 * too is not: ag_step_build). */
const char *ag_step1_lacking(const struct zs_config *c);
/* --steps 1 where the first step is not a list of its own (that of
 * ag_step1_lacking, or a mixture's): its one step would be the steady
 * step's over the set-up's state, a peak no PyTorch reaches. Returns 0,
 * or -1 with *cause (one line, naming what lacks it and giving --steps 2). */
int ag_step1_check(const struct zs_config *c, const struct zs_model *m, char **cause);
/* Whether DeepSpeed's ZeRO-3 first step at N > 1 is built for c's run
 * of m (its leaf marks described: ag_ds3_marks_lacking); 1 too where the
 * run is not ZeRO-3 at N > 1. */
int ag_ds3_step1_built(const struct zs_config *c, const struct zs_model *m);

#endif
