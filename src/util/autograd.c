/*
 * autograd — eager PyTorch's training step as data (util/autograd.h).
 *
 * The builder emulates what CPython, autograd and torch.optim do with the
 * storages: every storage has a count of its holders (a Python name or
 * temporary, a view, a node's saved variable, an autograd input buffer, a
 * .grad); ALLOC when one is made, FREE when its last holder lets go. The
 * model code below is written in the order of Hugging Face's modeling
 * files as tests/hf_torch.py transcribes them (their citations are
 * there), each op with what its derivative formula saves
 * (docs/torch_saved.md), and the backward in the order autograd's engine
 * runs the nodes (the ready node with the highest sequence number first;
 * AccumulateGrad at once), each node's saved variables released after it
 * runs, its incoming gradient when it returns. What the list must equal is
 * PyTorch's own allocator, event for event (tests/hf_torch.py --trace).
 *
 * The 0-dim tensors are real allocations and are here: a Python float
 * taken by a tensor op becomes an 8-byte double "wrapped number" (kept
 * when the op saves it, as mul does for the other operand's gradient), and
 * TensorIterator converts it to a 4-byte fp32 copy for the kernel's
 * duration.
 */
#include "util/autograd.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/ag_zero1.h"
#include "util/freeze.h"
#include "util/lora.h"
#include "util/nf4.h"
#include "util/util.h"

/* a refusal, whole (zs_fail: the cause as long as it needs) */
#define refuse(...) zs_fail(__VA_ARGS__)

unsigned ag_dtype_size(enum ag_dtype d)
{
	switch (d) {
	case AG_F32: return 4;
	case AG_BF16: case AG_F16: return 2;
	case AG_I64: case AG_F64: return 8;
	case AG_BOOL: case AG_U8: return 1;
	}
	return 4;
}

const char *ag_dtype_name(enum ag_dtype d)
{
	static const char *n[] = { "float32", "bfloat16", "float16", "int64", "bool", "float64", "uint8" };
	return (unsigned)d < sizeof n / sizeof *n ? n[d] : "?";
}

const char *ag_op_name(enum ag_op op)
{
	static const char *n[AG_NOPS] = {
		[AG_OP_ARANGE] = "arange", [AG_OP_FILL] = "fill", [AG_OP_COPY] = "copy",
		[AG_OP_TRIL_MASK] = "tril_mask", [AG_OP_CAUSAL_ADD_MASK] = "causal_add_mask",
		[AG_OP_ADD] = "add", [AG_OP_ADD_SCALAR] = "add_scalar", [AG_OP_MUL] = "mul",
		[AG_OP_MUL_SCALAR] = "mul_scalar", [AG_OP_DIV] = "div", [AG_OP_NEG] = "neg",
		[AG_OP_POW_SCALAR] = "pow_scalar", [AG_OP_TANH] = "tanh", [AG_OP_RSQRT] = "rsqrt",
		[AG_OP_SQRT] = "sqrt", [AG_OP_SILU] = "silu", [AG_OP_WHERE] = "where",
		[AG_OP_CAT_LAST] = "cat_last", [AG_OP_MEAN_LAST] = "mean_last", [AG_OP_SUM_ROWS] = "sum_rows",
		[AG_OP_SUM_TO] = "sum_to", [AG_OP_LAYER_NORM] = "layer_norm", [AG_OP_SOFTMAX] = "softmax",
		[AG_OP_LOG_SOFTMAX] = "log_softmax", [AG_OP_NLL] = "nll", [AG_OP_MM] = "mm",
		[AG_OP_ADDMM] = "addmm", [AG_OP_BMM] = "bmm", [AG_OP_EMBEDDING] = "embedding",
		[AG_OP_LAYER_NORM_BWD] = "layer_norm_bwd", [AG_OP_SOFTMAX_BWD] = "softmax_bwd",
		[AG_OP_LOG_SOFTMAX_BWD] = "log_softmax_bwd", [AG_OP_NLL_BWD] = "nll_bwd",
		[AG_OP_TANH_BWD] = "tanh_bwd", [AG_OP_SILU_BWD] = "silu_bwd", [AG_OP_RSQRT_BWD] = "rsqrt_bwd",
		[AG_OP_POW_BWD] = "pow_bwd", [AG_OP_EMBEDDING_BWD] = "embedding_bwd", [AG_OP_ZERO_] = "zero_",
		[AG_OP_ADD_] = "add_", [AG_OP_MUL_SCALAR_] = "mul_scalar_", [AG_OP_ADD_SCALAR_] = "add_scalar_",
		[AG_OP_DIV_SCALAR_] = "div_scalar_", [AG_OP_ADDCMUL_] = "addcmul_", [AG_OP_ADDCDIV_] = "addcdiv_",
		[AG_OP_LERP_] = "lerp_", [AG_OP_ADAM_FUSED_] = "adam_fused_",
		[AG_OP_COS] = "cos", [AG_OP_SIN] = "sin", [AG_OP_ROPE_INV_FREQ] = "rope_inv_freq",
		[AG_OP_BERNOULLI_] = "bernoulli_", [AG_OP_SDPA_FLASH] = "sdpa_flash", [AG_OP_SDPA_FLASH_BWD] = "sdpa_flash_bwd",
		[AG_OP_ALL_REDUCE_SUM_] = "all_reduce_sum_", [AG_OP_BROADCAST_] = "broadcast_",
		[AG_OP_ALL_GATHER] = "all_gather", [AG_OP_REDUCE_SCATTER_SUM] = "reduce_scatter_sum", [AG_OP_SHARD] = "shard",
		[AG_OP_NF4_CODE] = "nf4_code", [AG_OP_DYNAMIC_MAP] = "dynamic_map", [AG_OP_NF4_QUANTIZE] = "quantize_4bit",
		[AG_OP_NF4_DEQUANTIZE] = "dequantize_4bit", [AG_OP_MEAN_ALL] = "mean",
		[AG_OP_QUANTIZE_BLOCKWISE] = "quantize_blockwise", [AG_OP_DEQUANTIZE_BLOCKWISE] = "dequantize_blockwise",
		[AG_OP_GELU_TANH] = "gelu_tanh", [AG_OP_GELU_TANH_BWD] = "gelu_tanh_bwd", [AG_OP_SLIDING_MASK] = "sliding_mask",
		[AG_OP_TOPK] = "topk", [AG_OP_MIN_ALL] = "min_all", [AG_OP_MAX_ALL] = "max_all",
		[AG_OP_SCATTER_] = "scatter_", [AG_OP_SUM_LEAD] = "sum_lead", [AG_OP_GT] = "gt",
		[AG_OP_NONZERO] = "nonzero", [AG_OP_INDEX] = "index", [AG_OP_INDEX_ADD_] = "index_add_",
		[AG_OP_INDEX_PUT_ACC_] = "index_put_acc_", [AG_OP_SIGMOID] = "sigmoid", [AG_OP_SIGMOID_BWD] = "sigmoid_bwd",
	};
	return (unsigned)op < AG_NOPS && n[op] ? n[op] : "?";
}

/* ------------------------------------------------------------------------ */
/* The emulator */

typedef uint32_t T;
#define NO AG_NONE

struct bld {
	struct ag_step *s;
	size_t tcap;
	uint32_t *refs;             /* per storage: its holders */
	unsigned char *rg;          /* per tensor: requires_grad, as autograd sets it in forward (--freeze) */
	struct ag_event **list;     /* the list being written */
	size_t *n, cap, setcap, firstcap, step1cap;
	/* the first step's own list (ag_step.step1): the optimizer's phase
	 * makes Adam's state before its update, as the first step() does */
	int make_state;
	/* ag_optimizer_events: the state's storages are the caller's (a
	 * wrapper's), made by the first step() as allocations of those */
	int own_state;
	enum zs_phase phase;
	int32_t module;
	const struct ag_options *o;
	const struct step_params *p;
	const struct zs_model *m;
	/* name lookups, each built once: O(n log n) in all, where a scan per
	 * lookup made the builder O(L^2) in the blocks */
	struct names *tensors, *modules;
	int32_t *pt_of;             /* per step_params tensor: 4 slots, its whole pt and parts 0..2 (-1: none) */
	/* the rank every event is stamped with (ag_event.only_rank: 0 every
	 * rank; ZeroRedundancyOptimizer's sections, optimizer_phase) */
	uint32_t only_rank;
	struct model *M;            /* the model being built (autocast's cache is its) */
	int micro;                  /* under --grad-accum K > 1, the micro-step being written (its marks say
	                             * "@k"); -1 outside one, and always at K = 1 */
	const char *unsupported;    /* a --freeze pattern's case not described yet (static text), or NULL */
	int emb_sort;               /* under --torch-device cuda an embedding's backward over more than
	                             * AG_CUDA_EMB_FAST_TOKENS indices (CUDA's sort path): refused */
	/* activation checkpointing (ag_options.recompute): a checkpointed
	 * layer's forward under no_grad (nograd: nothing requires grad, no node
	 * keeps anything), and its rerun inside backward with grad (regrad:
	 * requires_grad follows the ops, its marks "refwd:") */
	int nograd, regrad;
	/* inside an adapter's lora_A and lora_B (lora_fwd, lora_bwd): autocast's
	 * dtype there is o->lora_amp, elsewhere o->amp (ac_dt) */
	int adapter;
	/* dropout's draws so far (each bernoulli_'s arg[1], 1-based): the
	 * engine keys a mask on it, so a checkpointed layer's rerun, which
	 * sets it back to the layer's first (preserve_rng_state), draws the
	 * forward's masks again */
	uint32_t draws;
	/* --torch-device cuda: each native_dropout's kept bool mask and its
	 * scale 1 / (1 - p), for native_dropout_backward (dropout_bwd) */
	struct { T mask; double scale; } *masks;
	size_t nmasks, capmasks;
	/* non-reentrant checkpointing (ag_options.nonreentrant; the
	 * checkpoint block): fork, the rerun's fork_rng state; ckd, per
	 * storage, the holders the rerun added (what its nodes saved) while
	 * the layer's backward runs, ckleft their sum: at 0 the layer's frame
	 * goes (ck_frame_goes, layer ckl of ckM); nrfirst, 2.x, the first of
	 * them a node of the layer's backward lets go (ckpt_early_stop) */
	T fork, nrfirst;
	size_t nrun_at; /* nr_unpack_at: where the first saving node of the layer's backward starts */
	int nrun_on;    /* a non-reentrant layer's backward runs */
	struct ckpt_ctx *nrc; /* the layer whose forward or rerun runs (nr_wrapped) */
	/* 2.x non-reentrant, the layer's backward after its rerun: unpack_hook
	 * hands a saved tensor over and drops its own entry (checkpoint.py
	 * 1132-1134: `holder.handles[gid] = None`), so apply's local is its
	 * last holder and it goes as apply returns -- before validate_outputs'
	 * reductions (a Conv1D bias's sum), where a kept one goes at the
	 * engine's release_variables, after them */
	int nrunpack;
	uint32_t *ckd;
	size_t nckd;
	uint64_t ckleft;
	int ckl;
	struct model *ckM;
};

/* Records what the step cannot describe yet; ag_step_build refuses it. */
static void unsupported(struct bld *b, const char *what)
{
	if (!b->unsupported)
		b->unsupported = what;
}

static void *grow(void *a, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return a;
	size_t c = *cap ? *cap : 256;
	while (c < need)
		c *= 2;
	a = zs_realloc(a, c * size);
	*cap = c;
	return a;
}

static struct ag_event *ev(struct bld *b, enum ag_event_kind k)
{
	size_t *cap = b->list == &b->s->setup        ? &b->setcap
	              : b->list == &b->s->first_step ? &b->firstcap
	              : b->list == &b->s->step1      ? &b->step1cap
	                                             : &b->cap;
	*b->list = grow(*b->list, cap, *b->n + 1, sizeof **b->list);
	struct ag_event *e = &(*b->list)[(*b->n)++];
	memset(e, 0, sizeof *e);
	e->kind = k;
	e->t = NO;
	for (int i = 0; i < AG_MAXIN; i++)
		e->in[i] = NO;
	for (int i = 0; i < AG_MAXOUT; i++)
		e->out[i] = NO;
	e->phase = b->phase;
	e->only_rank = b->only_rank;
	e->module = b->module;
	return e;
}

static void use(struct bld *b, struct ag_event **list, size_t *n)
{
	b->list = list;
	b->n = n;
}

static T newt(struct bld *b)
{
	size_t old = b->tcap;
	b->s->tensor = grow(b->s->tensor, &b->tcap, b->s->ntensors + 1, sizeof *b->s->tensor);
	if (b->tcap != old) {
		b->refs = zs_realloc(b->refs, b->tcap * sizeof *b->refs);
		b->rg = zs_realloc(b->rg, b->tcap * sizeof *b->rg);
	}
	T t = (T)b->s->ntensors++;
	memset(&b->s->tensor[t], 0, sizeof b->s->tensor[t]);
	b->refs[t] = 0;
	b->rg[t] = 0;
	return t;
}

static void contig(struct ag_tensor *x)
{
	int64_t st = 1;
	for (int i = (int)x->ndim - 1; i >= 0; i--) {
		x->stride[i] = st;
		st *= (int64_t)x->shape[i];
	}
}

static uint64_t numel(const struct ag_tensor *x)
{
	uint64_t n = 1;
	for (unsigned i = 0; i < x->ndim; i++)
		n *= x->shape[i];
	return n;
}

/* Whether t is its storage, whole and contiguous. */
static int whole(struct bld *b, T t)
{
	const struct ag_tensor *x = &b->s->tensor[t], *st = &b->s->tensor[x->storage];
	if (x->offset != 0 || numel(x) * ag_dtype_size(x->dtype) != st->bytes)
		return 0;
	int64_t e = 1;
	for (int i = (int)x->ndim - 1; i >= 0; i--) {
		if (x->shape[i] != 1 && x->stride[i] != e)
			return 0;
		e *= (int64_t)x->shape[i];
	}
	return 1;
}

/* A new storage of `shape`, allocated now: one holder. */
static T mk(struct bld *b, const char *what, enum ag_dtype dt, unsigned nd, const uint64_t *shape_,
            enum ag_role role, enum zs_cat cat, int32_t param)
{
	uint64_t shape[AG_MAXDIM]; /* shape_ may point into the array newt() moves */
	for (unsigned i = 0; i < nd; i++)
		shape[i] = shape_[i];
	T t = newt(b);
	struct ag_tensor *x = &b->s->tensor[t];
	x->what = what;
	x->dtype = dt;
	x->ndim = nd;
	for (unsigned i = 0; i < nd; i++)
		x->shape[i] = shape[i];
	contig(x);
	x->storage = t;
	x->bytes = numel(x) * ag_dtype_size(dt);
	x->role = role;
	x->cat = cat;
	x->param = param;
	x->part = -1;
	x->micro = 0;
	x->module = b->module;
	b->refs[t] = 1;
	ev(b, AG_EV_ALLOC)->t = t;
	return t;
}

/* A temporary of the step: activations and gradients in forward and
 * backward, scratch in the optimizer. */
static T tmp(struct bld *b, const char *what, enum ag_dtype dt, unsigned nd, const uint64_t *shape)
{
	return mk(b, what, dt, nd, shape, AG_ROLE_TEMP,
	          b->phase == ZS_PH_OPTIMIZER ? ZS_CAT_SCRATCH : ZS_CAT_ACTIVATIONS, -1);
}

static uint32_t sto(struct bld *b, T t)
{
	return b->s->tensor[t].storage;
}

static void ref(struct bld *b, T t)
{
	if (t != NO)
		b->refs[sto(b, t)]++;
}

static void ck_frame_goes(struct bld *b);

static void unref(struct bld *b, T t)
{
	if (t == NO)
		return;
	uint32_t s = sto(b, t);
	if (!b->refs[s]) {
		/* a builder's bug, never the input's */
		fprintf(stderr, "zerosim: autograd: storage %u (%s) released more often than held\n", s,
		        b->s->tensor[s].what);
		abort();
	}
	if (b->ckd && s < b->nckd && b->ckd[s] && b->nrfirst == NO &&
	    strcmp(b->s->tensor[s].what, "scalar (wrapped number)") != 0)
		b->nrfirst = s; /* (a wrapped number is not packed: ckpt_early_stop) */
	int last = b->ckd && s < b->nckd && b->ckd[s] && (b->ckd[s]--, --b->ckleft == 0);
	if (--b->refs[s] == 0)
		ev(b, AG_EV_FREE)->t = s;
	if (last)
		ck_frame_goes(b);
}

/* A view of t's storage: one more holder of it. */
static T vw(struct bld *b, T base, unsigned nd, const uint64_t *shape_, const int64_t *stride_, uint64_t off)
{
	uint64_t shape[AG_MAXDIM]; /* the arguments may point into the array newt() moves */
	int64_t stride[AG_MAXDIM];
	for (unsigned i = 0; i < nd; i++) {
		shape[i] = shape_[i];
		stride[i] = stride_ ? stride_[i] : 0;
	}
	T t = newt(b);
	struct ag_tensor *x = &b->s->tensor[t], *o = &b->s->tensor[base];
	*x = *o;
	x->ndim = nd;
	for (unsigned i = 0; i < nd; i++)
		x->shape[i] = shape[i];
	if (stride_)
		for (unsigned i = 0; i < nd; i++)
			x->stride[i] = stride[i];
	else
		contig(x);
	x->storage = o->storage;
	x->offset = o->offset + off;
	x->bytes = 0;
	b->rg[t] = b->rg[base] | b->rg[o->storage];
	ref(b, t);
	return t;
}

/* A contiguous view of t with another shape (view, reshape of a contiguous tensor). */
static T reshape(struct bld *b, T base, unsigned nd, const uint64_t *shape)
{
	return vw(b, base, nd, shape, NULL, 0);
}

static T transpose_last2(struct bld *b, T base)
{
	struct ag_tensor *o = &b->s->tensor[base];
	uint64_t sh[AG_MAXDIM];
	int64_t st[AG_MAXDIM];
	unsigned nd = o->ndim;
	for (unsigned i = 0; i < nd; i++)
		sh[i] = o->shape[i], st[i] = o->stride[i];
	sh[nd - 2] = o->shape[nd - 1], sh[nd - 1] = o->shape[nd - 2];
	st[nd - 2] = o->stride[nd - 1], st[nd - 1] = o->stride[nd - 2];
	return vw(b, base, nd, sh, st, 0);
}

/* Whether t requires grad (a view: its own flag or its storage's). */
static int RG(const struct bld *b, T t)
{
	return !b->nograd && t != NO && (b->rg[t] || b->rg[b->s->tensor[t].storage]);
}

static struct ag_event *op(struct bld *b, enum ag_op k, T i0, T i1, T i2, T o0, T o1, T o2)
{
	struct ag_event *e = ev(b, AG_EV_OP);
	e->op = k;
	e->in[0] = i0, e->in[1] = i1, e->in[2] = i2;
	e->out[0] = o0, e->out[1] = o1, e->out[2] = o2;
	/* forward: an output requires grad when an input does (autograd's
	 * compute_requires_grad over the differentiable inputs; the others,
	 * indices, masks, wrapped numbers, never require grad) */
	if ((b->phase == ZS_PH_FORWARD || b->regrad) && (RG(b, i0) || RG(b, i1) || RG(b, i2))) {
		T o[3] = { o0, o1, o2 };
		for (int j = 0; j < 3; j++)
			if (o[j] != NO)
				b->rg[o[j]] = b->rg[sto(b, o[j])] = 1;
	}
	return e;
}

static void mark(struct bld *b, const char *fmt, ...)
{
	char buf[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	/* grow() with a throwaway cap reallocates each time: labels are few
	 * (a named variable, not a compound literal: cppcheck cannot parse one
	 * among the arguments) */
	size_t cap = b->s->nlabels;
	b->s->labels = grow(b->s->labels, &cap, b->s->nlabels + 1, sizeof *b->s->labels);
	/* a checkpointed layer's rerun: its modules' forward marks again, as
	 * the reference's hooks name them */
	const char *re = b->regrad && strncmp(buf, "fwd:", 4) == 0 ? "re" : "";
	char *l = b->micro >= 0 ? zs_asprintf("%s%s@%d", re, buf, b->micro) : zs_asprintf("%s%s", re, buf);
	b->s->labels[b->s->nlabels++] = l;
	ev(b, AG_EV_MARK)->label = l;
}

/* DeepSpeed's ZeRO-3 hooks on a leaf module NAME (o->ds3_leaf_marks;
 * DeepSpeed 38327e0, runtime/zero/parameter_offload.py, po.py below):
 * "fwd" its forward pre-hook (_pre_forward_module_hook, the fetch), then
 * "fwd_end" its forward hook (_post_forward_module_hook, the release),
 * "bwd" where PreBackwardFunctionForModule, applied to its outputs
 * (342-379), runs in backward: once the gradient of its output is whole,
 * before the module's own nodes; "bwd_end" where
 * PostBackwardFunctionModule, applied to its inputs that require grad by
 * the forward pre-hook (401-440, 454), runs: after the module's nodes
 * have made its input's gradient. util/ag_ds3.c consumes them. */
static void ds3_vmark(struct bld *b, const char *where, const char *fmt, va_list ap)
{
	char name[160];
	vsnprintf(name, sizeof name, fmt, ap);
	mark(b, "ds3:%s:%s", name, where);
}

static void ds3_mark(struct bld *b, const char *where, const char *fmt, ...)
{
	if (!b->o->ds3_leaf_marks)
		return;
	va_list ap;
	va_start(ap, fmt);
	ds3_vmark(b, where, fmt, ap);
	va_end(ap);
}

#define SH(...) ((const uint64_t[]){ __VA_ARGS__ })
#define NDIM(...) (sizeof((uint64_t[]){ __VA_ARGS__ }) / sizeof(uint64_t))
#define TMP(what, dt, ...) tmp(b, what, dt, NDIM(__VA_ARGS__), SH(__VA_ARGS__))

/* The CUDA rule for a CPU scalar (--torch-device cuda): a Python number
 * given to a tensor op becomes a wrapped number made on the CPU
 * (wrapped_scalar_tensor, aten/src/ATen/ScalarOps.h), and TensorIterator
 * lets a CUDA kernel take a 0-dim CPU operand (compute_types'
 * is_cpu_scalar exception to the one-device check in
 * aten/src/ATen/TensorIterator.cpp; its promotion `op.tensor().to(common
 * dtype)` makes the copy on the CPU too), which the kernel reads as an
 * argument (iter.is_cpu_scalar / scalar_value in
 * aten/src/ATen/native/cuda/Loops.cuh's gpu_kernel_with_scalars): both
 * are host memory, 0 device bytes. They stay in the list, marked host,
 * so the engine still runs the ops that read them. (v2.6.0 and v1.13.0;
 * read by function, the tags' line numbers not at hand this session.) */
static T host_scalar(struct bld *b, T t)
{
	if (b->o->device == ZS_DEVICE_CUDA)
		b->s->tensor[t].host = 1;
	return t;
}

/* Whether a binary op over mixed float types copies the lower operand
 * to the common type first. TensorIteratorBase::compute_types
 * (aten/src/ATen/TensorIterator.cpp, v1.13.0 and v2.6.0 alike: "Creates
 * temporaries for CPU operations", `if (common_device == kCPU)` around
 * `promote_inputs_to_common_dtype_`'s `op.tensor().to(common_dtype_)`)
 * makes that temporary on the CPU only; a CUDA kernel converts each
 * operand as it loads it (cuda/Loops.cuh, gpu_kernel_impl's
 * needs_dynamic_casting), so under autocast on CUDA the residual adds,
 * the rope's products and the mask add make no fp32 copy. (Read by
 * function in the index's versions; the tags' line numbers not at hand.) */
static int promotes_by_copy(const struct bld *b)
{
	return b->o->device != ZS_DEVICE_CUDA;
}

/* A Python float given to a tensor op: the 8-byte wrapped number. */
static T wrapped(struct bld *b, double v)
{
	T t = host_scalar(b, tmp(b, "scalar (wrapped number)", AG_F64, 0, NULL));
	op(b, AG_OP_FILL, NO, NO, NO, t, NO, NO)->arg[0] = v;
	return t;
}

/* TensorIterator's copy of a wrapped number in the op's dtype (the
 * tensor operand's: fp32, or bf16 under autocast), alive while the
 * kernel runs. */
static T cast_scalar_as(struct bld *b, T w, enum ag_dtype dt)
{
	T t = tmp(b, dt == AG_F32 ? "scalar (fp32 copy)" : "scalar (16-bit copy)", dt, 0, NULL);
	if (b->s->tensor[w].host) /* a CPU scalar's copy stays on the CPU (host_scalar) */
		host_scalar(b, t);
	op(b, AG_OP_COPY, w, NO, NO, t, NO, NO);
	return t;
}

static T cast_scalar(struct bld *b, T w)
{
	return cast_scalar_as(b, w, AG_F32);
}

static T like(struct bld *b, const char *what, T x)
{
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	return tmp(b, what, o->dtype, o->ndim, o->shape);
}

static T *nr_wrapped(struct bld *b, T *keep);

/* out = x <op> python scalar v, through a wrapped number (mul.Tensor,
 * add.Tensor with a wrapped other): the number is returned in *keep when
 * the op saves it (keep != NULL), else released. */
static T scalar_op(struct bld *b, enum ag_op k, const char *what, T x, double v, T *keep)
{
	T w = wrapped(b, v);
	T c = cast_scalar_as(b, w, b->s->tensor[x].dtype);
	T out = like(b, what, x);
	op(b, k, x, NO, NO, out, NO, NO)->arg[0] = v;
	unref(b, c);
	if (keep)
		*keep = w;
	else
		unref(b, w);
	return out;
}

/* An in-place op with a Python scalar (mul_, add_ of a number): the
 * wrapped number and its copy, both gone when it returns. */
static void scalar_op_(struct bld *b, enum ag_op k, T x, T other, double v)
{
	T w = wrapped(b, v);
	T c = cast_scalar_as(b, w, b->s->tensor[x].dtype);
	op(b, k, x, other, NO, x, NO, NO)->arg[0] = v;
	unref(b, c);
	unref(b, w);
}

/* ------------------------------------------------------------------------ */
/* Parameters */

struct pt {
	T w;            /* the parameter (a view of a fused tensor's rows for a part) */
	T g;            /* its .grad (NO while None) */
	T m, v, step;   /* Adam's state */
	T w16;          /* autocast: its cached 16-bit copy while the region lasts (NO outside) */
	int32_t param, part;
	int frozen;     /* --freeze: requires_grad False (no grad, no Adam state) */
	int32_t lora;   /* --lora-r: its layer's adapters, an index of model.lora (-1: none) */
	int32_t q4;     /* --quant-base nf4: its 4-bit storages, an index of model.q4 (-1: none; w is then
	                 * freed in set-up) */
	size_t made;    /* the set-up's length once w was made (allocated and filled) */
};

struct lora_st;
struct q4_st;

/* A soft-capping's saved tensors (softcap_fwd, in the Gemma section). */
struct softcap_saved { T wdiv, th, wmul; };

/* What a checkpointed layer's CheckpointFunction ctx holds besides the
 * hidden states it saves (--recompute full; the checkpoint block): rng,
 * ctx.fwd_cpu_state; draws0, the dropout draws before its forward
 * (bld.draws); fn, the tensors ctx.run_function binds (transformers 5.x's
 * GradientCheckpointingLayer partial), let go last first as the graph
 * goes, before rng; in, those of the non-tensor arguments ctx.inputs
 * keeps (a tuple's tensors), let go last first after rng; sv, the other
 * tensor arguments save_for_backward keeps, let go in order after the
 * hidden states as the layer's backward returns (the engine's
 * release_variables). NO: none. */
struct ckpt_ctx {
	T rng;
	T x; /* non-reentrant: the hidden states the frame holds (NO: reentrant, saved[i]'s) */
	/* non-reentrant under 2.x: the wrapped numbers the forward's nodes
	 * keep (nr_wrapped), in order: a gemma's few, or one a LoRA
	 * adapter (seven a llama layer's all-linear) */
	T wn[8];
	unsigned nwn;
	uint32_t draws0;
	T fn[5], in[2], sv[3];
	unsigned nfn, nin, nsv;
};

/* Where a node that would save the wrapped number of x <op> v (keep's
 * slot, given where the node exists: its input requires grad) keeps it.
 * Called where the op's node saves the number (MulBackward0's other).
 * Non-reentrant under 2.x, in the layer's forward, the node exists and
 * keeps it although nothing requires grad here (b->nograd): SavedVariable
 * saves a wrapped number as it is, without the hooks
 * (torch/csrc/autograd/saved_variable.cpp, 2.x: `maybe_hooks &&
 * !is_wrapped_number()`), until the node releases it in backward; 1.13
 * packs it (the hook's Holder: nothing kept). The rerun's own (keep, as
 * any rerun's) are held by the rerun's graph and go at its early stop;
 * the forward's go at the node's release: the same bytes at the same
 * moments as freeing the forward's at the stop (ckpt_early_stop) and the
 * rerun's at the release, which is what the list does. */
static T *nr_wrapped(struct bld *b, T *keep)
{
	if (keep || !b->nograd || !b->nrc || b->o->version == ZS_TORCH_1_13)
		return keep;
	if (b->nrc->nwn == sizeof b->nrc->wn / sizeof *b->nrc->wn) {
		unsupported(b, "--recompute-impl non-reentrant: more wrapped numbers kept in a layer than described");
		return NULL;
	}
	return &b->nrc->wn[b->nrc->nwn++];
}

struct moe_aux;
static void moe_aux_bwd(struct bld *b, struct model *M, T one);
static T moe_aux_arrive(struct bld *b, struct model *M, int i, T dl);

struct model {
	struct pt *pt;      /* in model.parameters() order */
	size_t npt;
	T ids, labels;
	T *bias;            /* gpt2: each block's causal `bias` buffer */
	T *masked_bias;
	T inv_freq;         /* llama (gemma3_text: full_attention_inv_freq, at rope_theta) */
	T inv_freq_local;   /* gemma3_text: sliding_attention_inv_freq, at rope_local_base_freq */
	T escale;           /* gemma3_text: embed_tokens' embed_scale buffer, sqrt(hidden) (fp32, 0-dim) */
	T loss, logits;     /* the loop's outputs, held to the step's end */
	struct moe_aux *aux; /* a mixture's auxiliary loss (output_router_logits true: moe_aux_fwd); NULL without */
	T head16;           /* autocast: the head's 16-bit weight MmBackward keeps (NO: the weight itself) */
	T head_wt;          /* ds3_leaf_marks: the head's MmBackward0's saved weight.t() (ds3_saved_wt; NO: none) */
	T logits32;         /* autocast: logits.float(), the loss function's local (NO: the logits themselves) */
	size_t *cached;     /* autocast: the parameters (pt indices) cast in the region, in order */
	size_t ncached;
	/* --grad-accum K > 1: `loss = outputs[0] / K` (lossk) and the wrapped
	 * number K its DivBackward0 keeps (kwrap); NO at K = 1 */
	T lossk, kwrap;
	/* --precision amp-fp16: GradScaler("cpu")'s _scale and _growth_tracker
	 * (made by its first scale(), kept across steps), the scaled loss
	 * (held until backward returns) and found_inf's replica (held by the
	 * scaler's per-optimizer state from unscale_ to update); NO without;
	 * gs_sharded: FSDP's ShardedGradScaler (set by optimizer_events) */
	T gs_scale, gs_growth, gs_scaled, gs_found;
	int gs_sharded;
	/* gemma2's final_logit_softcapping: its saved tensors (softcap_fwd;
	 * unused without one) */
	struct softcap_saved fcap;
	/* --lora-r: the adapted layers, each its adapters and their saved
	 * tensors (util/autograd.c's LoRA section) */
	struct lora_st *lora;
	size_t nlora;
	/* --quant-base nf4: the quantized base weights (util/autograd.c's
	 * QLoRA section) and bitsandbytes' one dynamic map (double
	 * quantization; NO without) */
	struct q4_st *q4;
	size_t nq4;
	T qmap;
	/* --recompute full: each checkpointed layer's CheckpointFunction ctx
	 * (struct ckpt_ctx), by layer, for the nck layers checkpointed in this
	 * micro-step; kept until the graph goes with the loss */
	struct ckpt_ctx *ck;
	size_t nck, ckcap;
	/* --recompute full over frozen input embeddings: their output made a
	 * leaf that requires grad (input_require_grads), and the gradient its
	 * AccumulateGrad takes as its .grad; both held by that node until the
	 * graph goes (NO: none) */
	T leaf, leafgrad;
};

/* Whether --freeze freezes parameter `param` (part `part` of a fused
 * tensor: its Hugging Face name is the part's, "q_proj" of
 * "{q,k,v}_proj"). */
static void part_name(struct bld *b, int32_t param, int part, char *out, size_t n);

static int param_frozen(struct bld *b, int32_t param, int part)
{
	if (!b->o->freeze || !*b->o->freeze)
		return 0;
	char out[256];
	part_name(b, param, part, out, sizeof out);
	return zs_freeze_match(b->o->freeze, out, b->m->layers);
}

static void lora_module_name(struct bld *b, const struct pt *q, char *out, size_t n);
static void lora_weight_name(struct bld *b, const struct pt *q, int ab, char *out, size_t n);

/* The first term of --freeze (comma-separated, blanks trimmed, each a
 * spec of its own) that freezes none of M's parameters (with LoRA: none
 * of its adapters, by their PEFT names), into out: 1 if there is one,
 * else 0 (util/freeze.h zs_freeze_unmatched). */
static int freeze_unmatched(struct bld *b, const struct model *M, char *out, size_t n)
{
	enum { LEN = 320 };
	char *buf = zs_calloc(2 * (M->npt ? M->npt : 1), LEN);
	const char **names = zs_calloc(2 * (M->npt ? M->npt : 1), sizeof *names);
	size_t k = 0;
	for (size_t i = 0; i < M->npt; i++) {
		const struct pt *q = &M->pt[i];
		if (q->param < 0) /* an adapter: named below, by its base layer */
			continue;
		if (M->nlora > 0 && q->lora < 0) /* LoRA: the base is frozen already; what counts is an adapter */
			continue;
		if (M->nlora > 0) {
			for (int ab = 0; ab < 2; ab++, k++) {
				lora_weight_name(b, q, ab, buf + k * LEN, LEN);
				names[k] = buf + k * LEN;
			}
		} else {
			part_name(b, q->param, q->part, buf + k * LEN, LEN);
			names[k] = buf + k * LEN;
			k++;
		}
	}
	int r = zs_freeze_unmatched(b->o->freeze, names, k, b->m->layers, out, n);
	free(names);
	free(buf);
	return r;
}

/* The Hugging Face name of parameter `param`'s part `part` (-1: the
 * whole tensor) into out. */
static void part_name(struct bld *b, int32_t param, int part, char *out, size_t n)
{
	char name[256];
	step_tensor_name(b->p, (size_t)param, name, sizeof name);
	const char *l = strchr(name, '{'), *r = l ? strchr(l, '}') : NULL;
	if (part >= 0 && l && r) {
		/* the part's alternative: the part-th comma-separated word in braces */
		const char *a = l + 1;
		for (int k = 0; k < part && a < r; k++) {
			const char *c = memchr(a, ',', (size_t)(r - a));
			a = c ? c + 1 : r;
		}
		const char *e = memchr(a, ',', (size_t)(r - a));
		if (!e)
			e = r;
		snprintf(out, n, "%.*s%.*s%s", (int)(l - name), name, (int)(e - a), a, r + 1);
	} else {
		snprintf(out, n, "%s", name);
	}
}

/* --fsdp-orig-params on (FSDP's use_orig_params=True): whether a
 * parameter of param's FSDP unit (transformer_auto_wrap_policy's: its
 * block, or the root for a module of no block; util/ag_fsdp.c's
 * make_units) is trained. Its flat parameter then requires grad
 * (_flat_param.py 789-815, 2.6.0: the OR of its tensors'), and the views
 * the forward computes with are views of it (_use_unsharded_views,
 * 1969-1986: Tensor views, not the original parameters), so a frozen
 * parameter's gradient is computed too, into the flat gradient. */
static int unit_trained(struct bld *b, int32_t param)
{
	const struct step_params *p = b->p;
	long long unit = p->module[p->tensor[param].module].index;
	for (size_t i = 0; i < p->ntensors; i++) {
		if (p->module[p->tensor[i].module].index != unit)
			continue;
		unsigned n = p->tensor[i].nparts ? p->tensor[i].nparts : 1;
		for (unsigned k = 0; k < n; k++)
			if (!param_frozen(b, (int32_t)i, p->tensor[i].nparts ? (int)k : -1))
				return 1;
	}
	return 0;
}

static struct pt *add_param(struct bld *b, struct model *M, int32_t param, int part)
{
	const struct step_tensor *st = &b->p->tensor[param];
	M->pt = zs_realloc(M->pt, (M->npt + 1) * sizeof *M->pt);
	struct pt *q = &M->pt[M->npt++];
	q->param = param;
	q->part = part;
	q->g = q->m = q->v = q->step = q->w16 = NO;
	q->lora = q->q4 = -1;
	if (!b->pt_of) {
		b->pt_of = zs_calloc(b->p->ntensors * 4 + 1, sizeof *b->pt_of);
		for (size_t i = 0; i < b->p->ntensors * 4; i++)
			b->pt_of[i] = -1;
	}
	b->pt_of[(size_t)param * 4 + (size_t)(part + 1)] = (int32_t)(M->npt - 1);
	uint64_t sh[AG_MAXDIM] = { st->shape[0], st->ndim > 1 ? st->shape[1] : 0 }; /* mk reads ndim of them */
	if (part >= 0)
		sh[0] = st->part_rows[part];
	b->module = (int32_t)st->module;
	q->w = mk(b, "parameter", b->o->mdt, st->ndim, sh, AG_ROLE_PARAM, ZS_CAT_PARAM32, param);
	b->s->tensor[q->w].part = part;
	q->frozen = param_frozen(b, param, part);
	if (q->frozen && b->o->fsdp_orig_params && unit_trained(b, param)) {
		/* its gradient computed, never stepped (util/ag_fsdp.c) */
		q->frozen = 0;
		b->s->tensor[q->w].orig_frozen = 1;
	}
	b->rg[q->w] = (unsigned char)!q->frozen;
	op(b, AG_OP_FILL, NO, NO, NO, q->w, NO, NO)->arg[0] = 0.02;
	q->made = *b->n;
	b->module = -1;
	return q;
}

/* A sorted index of names (step_tensor_name's or step_module_name's) to
 * their indices, searched by bsearch. */
struct name_ix { char *name; int32_t i; };
struct names { struct name_ix *e; size_t n; };

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct name_ix *)a)->name, ((const struct name_ix *)b)->name);
}

static struct names *names_build(const struct step_params *p, int modules)
{
	struct names *x = zs_calloc(1, sizeof *x);
	size_t n = modules ? p->nmodules : p->ntensors;
	x->e = zs_calloc(n ? n : 1, sizeof *x->e);
	char buf[256];
	for (size_t i = 0; i < n; i++) {
		x->e[i].name = zs_strdup(modules ? step_module_name(p, i, buf, sizeof buf)
		                                 : step_tensor_name(p, i, buf, sizeof buf));
		x->e[i].i = (int32_t)i;
	}
	x->n = n;
	qsort(x->e, n, sizeof *x->e, name_cmp);
	return x;
}

static void names_free(struct names *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->n; i++)
		free(x->e[i].name);
	free(x->e);
	free(x);
}

static int32_t names_find(const struct names *x, const char *name)
{
	struct name_ix key = { .name = (char *)name, .i = -1 };
	const struct name_ix *r = bsearch(&key, x->e, x->n, sizeof *x->e, name_cmp);
	return r ? r->i : -1;
}

static int32_t find_tensor(struct bld *b, const char *name)
{
	if (!b->tensors)
		b->tensors = names_build(b->p, 0);
	return names_find(b->tensors, name);
}

static int32_t modf_(struct bld *b, const char *name)
{
	if (!b->modules)
		b->modules = names_build(b->p, 1);
	return names_find(b->modules, name);
}

/* The parameter whose Hugging Face name is `name`, part `part` (-1: the
 * whole tensor), or NULL. */
static struct pt *P_part(struct model *M, struct bld *b, const char *name, int part)
{
	int32_t t = find_tensor(b, name);
	if (t < 0 || part < -1 || part > 2)
		return NULL;
	int32_t k = b->pt_of[(size_t)t * 4 + (size_t)(part + 1)];
	return k < 0 ? NULL : &M->pt[k];
}

static struct pt *PF(struct model *M, struct bld *b, const char *fmt, ...)
{
	char name[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	struct pt *q = P_part(M, b, name, -1);
	if (!q) {
		fprintf(stderr, "zerosim: autograd: no parameter %s\n", name);
		abort();
	}
	return q;
}

/* The module of a Hugging Face name, for events' `module`. */
static int32_t modname(struct bld *b, const char *fmt, ...)
{
	char name[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	return modf_(b, name);
}

/* AccumulateGrad for parameter q with the new gradient g (one holder,
 * the engine's): zeros: .grad += g, g released; set_to_none: g becomes
 * .grad when it is a whole contiguous storage with that one holder (the
 * engine's), else a copy is made (clone_obey_contract). */
static void accumulate(struct bld *b, struct pt *q, T g)
{
	if (q->g != NO) {
		op(b, AG_OP_ADD_, q->g, g, NO, q->g, NO, NO)->arg[0] = 1;
		ev(b, AG_EV_GRAD_READY)->t = sto(b, q->g);
		unref(b, g);
		return;
	}
	const struct ag_tensor x_ = b->s->tensor[g], *x = &x_; /* a copy: the array grows */
	if (b->refs[x->storage] == 1 && whole(b, g)) {
		q->g = g;
		ev(b, AG_EV_GRAD_READY)->t = sto(b, q->g);
	} else {
		q->g = like(b, "grad (clone_obey_contract)", q->w);
		op(b, AG_OP_COPY, g, NO, NO, q->g, NO, NO);
		ev(b, AG_EV_GRAD_READY)->t = sto(b, q->g);
		unref(b, g);
	}
	b->s->tensor[sto(b, q->g)].role = AG_ROLE_GRAD;
	b->s->tensor[sto(b, q->g)].cat = ZS_CAT_GRAD32;
	b->s->tensor[sto(b, q->g)].param = q->param;
	b->s->tensor[sto(b, q->g)].part = q->part;
}


/* An autograd input buffer: the gradients arriving for one tensor, summed
 * as they come (InputBuffer::accumulate): the first is held; a next one is
 * added in place where the held one is no view and the only holder of its
 * storage (2.x's can_accumulate_inplace: a view keeps its base, so its
 * storage has two holders), else (always, in 1.13 as measured) into a new
 * tensor, both released. */
static void arrive(struct bld *b, T *buf, T g)
{
	if (*buf == NO) {
		*buf = g;
		return;
	}
	const struct ag_tensor x_ = b->s->tensor[*buf], *x = &x_; /* a copy: the array grows */
	if (b->o->version != ZS_TORCH_1_13 && x->storage == *buf && b->refs[*buf] == 1) {
		op(b, AG_OP_ADD_, *buf, g, NO, *buf, NO, NO)->arg[0] = 1;
		unref(b, g);
		return;
	}
	T sum = like(b, "add (input buffer)", *buf);
	op(b, AG_OP_ADD, *buf, g, NO, sum, NO, NO)->arg[0] = 1;
	unref(b, *buf);
	unref(b, g);
	*buf = sum;
}

/* Under ds3_leaf_marks a leaf module's input x is
 * PostBackwardFunctionModule's output (ds3_mark): the gradients of x the
 * module's nodes make meet in that Function's input buffer, and the sum
 * goes on to the buffer buf of the tensor x came from only when the
 * Function has run (its ":bwd_end"). ds3_buf gives the buffer the module's
 * backward is to write into (*lb, NO, under the option; buf without it);
 * ds3_hand then marks the end and hands *lb on to buf (arrive: the sum
 * made after the mark), where the module made a gradient. */
static T *ds3_buf(struct bld *b, T *buf, T *lb)
{
	*lb = NO;
	return b->o->ds3_leaf_marks ? lb : buf;
}

static void ds3_hand(struct bld *b, T *buf, const T *lb, const char *fmt, ...)
{
	if (!b->o->ds3_leaf_marks || *lb == NO)
		return;
	va_list ap;
	va_start(ap, fmt);
	ds3_vmark(b, "bwd_end", fmt, ap);
	va_end(ap);
	arrive(b, buf, *lb);
}

/* F.linear's MmBackward0 saves mat2, weight.t() (wt, its holder taken),
 * for self's gradient (derivatives.yaml mm: self: mm_mat1_backward(grad,
 * mat2, ...), which reads mat2.t()): a view of the weight's storage made
 * in forward, which holds a gathered parameter's forward copy until the
 * node releases it (tests/ds3_saved.py). Under ds3_leaf_marks, where x
 * requires grad, the step keeps that view, in W's layout (mat2.t(): the
 * same storage, no bytes), made in forward and read by x's gradient, so
 * that the read and the last holder's drop are of the forward's copy
 * (util/ag_ds3.c; docs/schedule.md, "F.linear's saved weight.t()"); else
 * wt goes as matmul returns. Where autocast saved the 16-bit copy (w16)
 * the view is of that, which w16 holds already: wt goes. */
static T ds3_saved_wt(struct bld *b, T wt, T w16, int dx)
{
	T kept = b->o->ds3_leaf_marks && dx && w16 == NO ? transpose_last2(b, wt) : NO;
	unref(b, wt);
	return kept;
}

/* What x's gradient reads for W ([out, in]): the kept view, or W itself
 * (w) without one. */
static T ds3_saved_read(T wt, T w)
{
	return wt != NO ? wt : w;
}

/* MulBackward0 of a · u (both kept, both requiring grad): *da = g · u,
 * then *du = g · a, each in its operands' promoted type; g goes as the
 * node returns, then validate_outputs casts a gradient of another type
 * than its input's to that (a bf16 a against an fp32 u: gpt2's gelu_new
 * under CUDA's autocast), then the saved pair goes. */
static T to_dtype(struct bld *b, T x, enum ag_dtype dt, const char *what);

static void mul_bwd(struct bld *b, const char *what, T g, T a, T u, T *da, T *du)
{
	const struct ag_tensor a_ = b->s->tensor[a], *ao = &a_; /* a copy: the array grows */
	enum ag_dtype ut = b->s->tensor[u].dtype, gt = b->s->tensor[g].dtype, at = ao->dtype;
	int mixed = at != ut; /* (a and u of one type: the products in it, as ever) */
	*da = tmp(b, what, !mixed ? at : gt == ut ? gt : AG_F32, ao->ndim, ao->shape);
	op(b, AG_OP_MUL, g, u, NO, *da, NO, NO);
	*du = tmp(b, what, !mixed ? at : gt == at ? gt : AG_F32, ao->ndim, ao->shape);
	op(b, AG_OP_MUL, g, a, NO, *du, NO, NO);
	unref(b, g);
	T *gr[2] = { da, du };
	enum ag_dtype want[2] = { at, ut };
	for (int j = 0; j < 2; j++)
		if (b->s->tensor[*gr[j]].dtype != want[j]) {
			T c = to_dtype(b, *gr[j], want[j], "_to_copy (validate_outputs)");
			unref(b, *gr[j]);
			*gr[j] = c;
		}
	unref(b, a);
	unref(b, u);
}

/* Dropout in training (nn.Dropout, F.dropout) over x, on the CPU:
 * aten/src/ATen/native/Dropout.cpp's dropout() takes the fused
 * native_dropout only where is_fused_kernel_acceptable (CUDA, XPU, lazy,
 * privateuse1 devices), else _dropout_impl: p = 0 returns the input
 * itself; p = 1 multiplies by at::zeros({}); else noise =
 * empty_like(input), noise.bernoulli_(1 - p), noise.div_(1 - p) (a
 * wrapped number), input.mul(noise). MulBackward0 saves `other` (the
 * noise) for the input's gradient and nothing of the input (the noise
 * needs no grad). The same in 1.13 and 2.6 (traced:
 * tests/hf_torch.py --dropout config --trace). Returns the output (one
 * holder; x's holders are the caller's), the tensor autograd keeps in
 * *kept (NO for p = 0). */
static T dropout(struct bld *b, T x, double p, T *kept)
{
	*kept = NO;
	if (p == 0) {
		ref(b, x);
		return x;
	}
	/* The CUDA rule for dropout: is_fused_kernel_acceptable holds (a CUDA
	 * input, 0 < p < 1), so dropout() returns native_dropout's output
	 * (aten/src/ATen/native/cuda/Dropout.cu, dropout_cuda<bool>: the mask
	 * empty_like(self) of dtype bool, then ret = empty_like(self), one fused
	 * kernel writing both; v1.13.0 and v2.6.0). NativeDropoutBackward0
	 * keeps result1, the 1-byte mask (derivatives.yaml native_dropout), where
	 * the CPU keeps a noise tensor of the input's dtype: 3 bytes an element
	 * less in fp32. The mask goes with the tuple where no node keeps it. */
	if (b->o->device == ZS_DEVICE_CUDA && p < 1) {
		const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
		T mask = tmp(b, "native_dropout (mask)", AG_BOOL, o->ndim, o->shape);
		struct ag_event *e = op(b, AG_OP_BERNOULLI_, mask, NO, NO, mask, NO, NO);
		e->arg[0] = 1 - p;
		e->arg[1] = ++b->draws;
		T y = like(b, "native_dropout", x);
		op(b, AG_OP_MUL, x, mask, NO, y, NO, NO);
		op(b, AG_OP_MUL_SCALAR_, y, NO, NO, y, NO, NO)->arg[0] = 1 / (1 - p);
		if (!RG(b, x)) {
			unref(b, mask);
			return y;
		}
		b->masks = grow(b->masks, &b->capmasks, b->nmasks + 1, sizeof *b->masks);
		b->masks[b->nmasks].mask = mask;
		b->masks[b->nmasks++].scale = 1 / (1 - p);
		*kept = mask;
		return y;
	}
	T noise;
	if (p >= 1) {
		noise = tmp(b, "zeros (dropout p = 1)", b->s->tensor[x].dtype, 0, NULL);
		op(b, AG_OP_FILL, NO, NO, NO, noise, NO, NO)->arg[0] = 0;
	} else {
		noise = like(b, "empty_like (dropout noise)", x);
		struct ag_event *e = op(b, AG_OP_BERNOULLI_, noise, NO, NO, noise, NO, NO);
		e->arg[0] = 1 - p;
		e->arg[1] = ++b->draws;
		scalar_op_(b, AG_OP_DIV_SCALAR_, noise, NO, 1 - p);
	}
	T y = like(b, "mul (dropout)", x);
	op(b, AG_OP_MUL, x, noise, NO, y, NO, NO);
	if (!RG(b, x)) { /* no MulBackward0: the noise goes with its name */
		unref(b, noise);
		return y;
	}
	*kept = noise; /* the name's holder passes to MulBackward0 */
	return y;
}

/* MulBackward0 of a dropout: g · noise (g released when `owned`, before
 * the saved noise). For p = 0 (kept NO) g itself, with a holder more when
 * not owned. */
static T dropout_bwd(struct bld *b, T g, int owned, T kept)
{
	if (kept == NO) {
		if (!owned)
			ref(b, g);
		return g;
	}
	if (b->s->tensor[kept].dtype == AG_BOOL) { /* CUDA's: native_dropout_backward(grad, mask, scale) */
		double scale = 1;
		for (size_t i = 0; i < b->nmasks; i++)
			if (b->masks[i].mask == kept)
				scale = b->masks[i].scale;
		T d = like(b, "native_dropout_backward", g);
		op(b, AG_OP_MUL, g, kept, NO, d, NO, NO);
		op(b, AG_OP_MUL_SCALAR_, d, NO, NO, d, NO, NO)->arg[0] = scale;
		if (owned)
			unref(b, g);
		unref(b, kept);
		return d;
	}
	T d = like(b, "mul (dropout backward)", g);
	op(b, AG_OP_MUL, g, kept, NO, d, NO, NO);
	if (owned)
		unref(b, g);
	unref(b, kept);
	return d;
}

/* ------------------------------------------------------------------------ */
/* Autocast (docs/schedule.md, "Autocast"; aten/src/ATen/autocast_mode.cpp)
 *
 * An op in the CPU's lower-precision list (addmm, mm, bmm, linear,
 * matmul, ...) casts each floating operand to the 16-bit type
 * (cached_cast): an operand already of that type is itself; a leaf that
 * requires grad (a parameter) is cast once per region and held by the
 * cache (cached_casts, cleared when the region exits); anything else is
 * copied each time. The copy's ToCopyBackward casts the gradient back to
 * the source's fp32 (a new tensor, the 16-bit one let go). */

/* A copy of x in dtype dt (`.to(dt)`, ToCopyBackward's `grad.to(dt)`,
 * autograd's validate_outputs): a new storage. */
static T to_dtype(struct bld *b, T x, enum ag_dtype dt, const char *what)
{
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	T c = tmp(b, what, dt, o->ndim, o->shape);
	op(b, AG_OP_COPY, x, NO, NO, c, NO, NO);
	return c;
}

/* autocast's lower precision where the builder is: an adapter's
 * (o->lora_amp) inside one, the model's (o->amp) elsewhere; AG_F32 where
 * autocast casts nothing there */
static enum ag_dtype ac_dt(const struct bld *b)
{
	return b->adapter ? b->o->lora_amp : b->o->amp;
}

/* cached_cast of a non-leaf x: x itself (one holder more) where it is of
 * the 16-bit type already, else a copy (one holder: the caller's). */
static T ac_cast(struct bld *b, T x)
{
	if (b->s->tensor[x].dtype == ac_dt(b)) {
		ref(b, x);
		return x;
	}
	return to_dtype(b, x, ac_dt(b), "_to_copy (autocast)");
}

/* cached_cast of parameter q: its cached copy, made at its first use in
 * the region (the cache one holder); the caller gets one more. A frozen
 * parameter (--freeze, LoRA's base) is no cache entry: cached_cast caches
 * a leaf only where it requires grad (autocast_mode.cpp, can_try_cache:
 * `arg.requires_grad() && arg.is_leaf()`), so it is copied at every use
 * (the caller's holder alone, no ToCopyBackward). Nor is a view of FSDP's
 * flat parameter (o->amp_param_views: no leaf, `!arg.is_view()` too): a
 * copy at every use, its ToCopyBackward as a cached one's. */
static T ac_cast_param(struct bld *b, struct pt *q)
{
	struct model *M = b->M;
	if (!b->rg[q->w] || b->o->amp_param_views)
		return to_dtype(b, q->w, ac_dt(b), "_to_copy (autocast)");
	if (q->w16 == NO) {
		q->w16 = to_dtype(b, q->w, ac_dt(b), "_to_copy (autocast, cached)");
		M->cached = zs_realloc(M->cached, (M->ncached + 1) * sizeof *M->cached);
		M->cached[M->ncached++] = (size_t)(q - M->pt);
	}
	ref(b, q->w16);
	return q->w16;
}

/* A matmul layer's casts (addmm's, linear's): W first (cached), then x.
 * Returns the x operand (x with one holder more, or its copy); *wm the W
 * operand, *w16 the 16-bit W autograd keeps (NO without autocast), *xcast
 * whether x was cast. */
static T ac_cast_layer(struct bld *b, T x, struct pt *w, T *wm, T *w16, int *xcast)
{
	*wm = w->w;
	*w16 = NO;
	*xcast = 0;
	if (ac_dt(b) == AG_F32)
		return x;
	*wm = *w16 = ac_cast_param(b, w);
	*xcast = b->s->tensor[x].dtype != ac_dt(b);
	return ac_cast(b, x);
}

/* The region exits (torch.autocast.__exit__: clear_autocast_cache): the
 * cache lets its copies go, latest first; a copy autograd saved stays
 * until its node releases it. */
static void ac_clear(struct bld *b, struct model *M)
{
	for (size_t i = M->ncached; i-- > 0;) {
		struct pt *q = &M->pt[M->cached[i]];
		unref(b, q->w16);
		q->w16 = NO;
	}
	M->ncached = 0;
}

/* ToCopyBackward: g (its holder taken) back in the source's dtype dt. */
static T ac_grad_back_to(struct bld *b, T g, enum ag_dtype dt)
{
	T c = to_dtype(b, g, dt, "_to_copy (ToCopyBackward)");
	unref(b, g);
	return c;
}

/* ToCopyBackward of a cast to the 16-bit type: back in fp32. */
static T ac_grad_back(struct bld *b, T g)
{
	return ac_grad_back_to(b, g, AG_F32);
}

/* ------------------------------------------------------------------------ */
/* GPT-2 (tests/hf_torch.py GPT2LMHeadModel: modeling_gpt2.py c44b2d9976e8) */

/* node: NativeLayerNormBackward exists (an input requires grad); it then
 * keeps x, mean and rstd whichever input it is (one formula for the three:
 * derivatives.yaml's native_layer_norm, no per-input guard). */
struct ln_saved { T x, mean, rstd; int node, dx, dw, db; };

static T layer_norm(struct bld *b, T x, struct pt *w, struct pt *bb, struct ln_saved *sv)
{
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	T y = like(b, "native_layer_norm", x);
	uint64_t sh[AG_MAXDIM];
	for (unsigned i = 0; i < o->ndim; i++)
		sh[i] = o->shape[i];
	sh[o->ndim - 1] = 1;
	T mean = tmp(b, "native_layer_norm (mean)", b->o->mdt, o->ndim, sh);
	T rstd = tmp(b, "native_layer_norm (rstd)", b->o->mdt, o->ndim, sh);
	op(b, AG_OP_LAYER_NORM, x, w->w, bb->w, y, mean, rstd)->arg[0] = b->m->norm_eps;
	sv->dx = RG(b, x), sv->dw = RG(b, w->w), sv->db = RG(b, bb->w);
	sv->node = sv->dx || sv->dw || sv->db;
	if (!sv->node) { /* at::layer_norm returns the output alone */
		unref(b, mean);
		unref(b, rstd);
		sv->x = sv->mean = sv->rstd = NO;
		return y;
	}
	ref(b, x);
	sv->x = x, sv->mean = mean, sv->rstd = rstd;
	return y;
}

/* NativeLayerNormBackward: dx, dw, db as its output mask asks (an input
 * that requires grad; AG_NONE for the others: layer_norm_backward_cpu
 * makes only those) and the kernel's own [2, d]-sized scratch, made only
 * for dw or db; the incoming gradient and the saved set let go. */
static T layer_norm_bwd(struct bld *b, T g, struct ln_saved *sv, struct pt *w, struct pt *bb, T *dw, T *db)
{
	const struct ag_tensor o_ = b->s->tensor[sv->x], *o = &o_; /* a copy: the array grows */
	uint64_t d = o->shape[o->ndim - 1];
	T dx = sv->dx ? like(b, "native_layer_norm_backward", sv->x) : NO;
	*dw = sv->dw ? like(b, "native_layer_norm_backward (dw)", w->w) : NO;
	*db = sv->db ? like(b, "native_layer_norm_backward (db)", bb->w) : NO;
	/* the CPU kernel's dgamma/dbeta partial sums, 2 x threads x d (one
	 * thread: tests/hf_torch.py pins it). The CUDA rule: CUDA's backward
	 * (aten/src/ATen/native/cuda/layer_norm_kernel.cu,
	 * LayerNormBackwardKernelImplInternal, v1.13.0 and v2.6.0) writes dgamma
	 * and dbeta straight from its kernels (GammaBetaBackwardSimpleCUDAKernel
	 * below 128 rows, GammaBetaBackwardCUDAKernel(_32x32) above; the
	 * part_grad_gamma/beta buffers are ROCm's branch, the dgamma_blocks of
	 * later releases only past 65,536 rows): no scratch. */
	T scratch = (sv->dw || sv->db) && b->o->device == ZS_DEVICE_CPU
	                    ? TMP("native_layer_norm_backward (scratch)", AG_F32, 2, d)
	                    : NO;
	struct ag_event *e = ev(b, AG_EV_OP);
	e->op = AG_OP_LAYER_NORM_BWD;
	e->in[0] = g, e->in[1] = sv->x, e->in[2] = sv->mean, e->in[3] = sv->rstd, e->in[4] = w->w;
	e->out[0] = dx, e->out[1] = *dw, e->out[2] = *db;
	unref(b, scratch);
	unref(b, g);
	unref(b, sv->x);
	unref(b, sv->mean);
	unref(b, sv->rstd);
	return dx;
}

/* A layer's rows r [rows, n] (its holder taken) as a view in g's shape
 * but for the last dim, n: its output viewed back in its input's shape
 * (x.view(-1, in) undone), or its x gradient as ViewBackward hands it on
 * (x's shape, which is that of the layer's output gradient g but for the
 * last dim). */
static T grad_in_x_shape(struct bld *b, T r, const struct ag_tensor *g)
{
	uint64_t sh[AG_MAXDIM];
	for (unsigned i = 0; i < g->ndim; i++)
		sh[i] = g->shape[i];
	sh[g->ndim - 1] = b->s->tensor[r].shape[1];
	T v = reshape(b, r, g->ndim, sh);
	unref(b, r);
	return v;
}

/* layer_norm_bwd, its input's gradient (where asked) arriving at *buf,
 * then the AccumulateGrads of weight and bias (where they require grad). */
static void layer_norm_bwd_to(struct bld *b, T g, struct ln_saved *sv, struct pt *w, struct pt *bb, T *buf)
{
	T dw, db;
	T dx = layer_norm_bwd(b, g, sv, w, bb, &dw, &db);
	if (dx != NO)
		arrive(b, buf, dx);
	if (dw != NO)
		accumulate(b, w, dw);
	if (db != NO)
		accumulate(b, bb, db);
}

/* After addmm(bias, x2, W or W^t): which of mat1 (x2), W and the bias
 * require grad (*dx, *dw, *db), and what its node saves of mat1: x2
 * itself (its holder passes to the node) only when W requires grad, its
 * one use being mm_mat2_backward (derivatives.yaml addmm, line 256 of
 * 2.6.0's; the codegen's guard_for, should_compute_output(2)), else
 * NO, x2's holder released. */
static T addmm_saved_mat1(struct bld *b, T x2, T w, T bias, int *dx, int *dw, int *db)
{
	*dx = RG(b, x2), *dw = RG(b, w), *db = RG(b, bias);
	if (*dw)
		return x2;
	unref(b, x2);
	return NO;
}

/* Conv1D: torch.addmm(bias, x.view(-1, nx), W), viewed back. Under
 * autocast addmm casts its operands (the C++ arguments evaluated right to
 * left: W, x, bias) and saves the 16-bit x and W. mat1 (the input's view)
 * is saved only when W requires grad (its one use is mm_mat2_backward:
 * the codegen's guard_for, should_compute_output(2)); dx, dw, db: which of
 * input, weight, bias require grad (node: any). */
/* LoRA's adapter over a layer's output y (util/autograd.c's LoRA
 * section, after the linear layers it uses). */
static T lora_fwd(struct bld *b, T x, T y, int32_t k);
static void lora_bwd(struct bld *b, T g, int32_t k, T *xbuf);
static void lora_over_4bit(struct bld *b, int32_t k);
/* A 4-bit base layer's forward and backward (util/autograd.c's QLoRA
 * section). */
static T q4_linear(struct bld *b, T x, struct pt *w, struct pt *bias, uint64_t *rows, uint64_t *in, int *dx,
                   int *cast);
static void q4_linear_bwd(struct bld *b, T g, int owned, uint64_t rows, uint64_t in, int dx, int cast, struct pt *w,
                          T *xbuf);

struct conv_saved {
	T x2;
	T w16;      /* autocast: the saved 16-bit W (NO: W itself) */
	int xcast;  /* autocast: x was cast (its gradient goes back to fp32) */
	uint64_t rows, nx;
	int node, dx, dw, db;
};

static T conv1d(struct bld *b, T x, struct pt *w, struct pt *bb, struct conv_saved *sv)
{
	if (w->q4 >= 0) { /* bnb's Linear4bit in Conv1D's place: no saved input (the base is frozen) */
		sv->x2 = sv->w16 = NO, sv->xcast = 0, sv->dw = sv->db = 0;
		T r = q4_linear(b, x, w, bb, &sv->rows, &sv->nx, &sv->dx, &sv->xcast);
		sv->node = sv->dx;
		return r;
	}
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	uint64_t rows = numel(o) / o->shape[o->ndim - 1];
	uint64_t nf = b->s->tensor[w->w].shape[1];
	T wm, bm = bb->w;
	T xm = ac_cast_layer(b, x, w, &wm, &sv->w16, &sv->xcast);
	if (b->o->amp != AG_F32)
		bm = ac_cast_param(b, bb);
	T x2 = reshape(b, xm, 2, SH(rows, o->shape[o->ndim - 1]));
	if (xm != x)
		unref(b, xm); /* the cast's name: the view holds it */
	else if (b->o->amp != AG_F32)
		unref(b, x); /* ac_cast's holder */
	T y = TMP("addmm", b->s->tensor[x2].dtype, rows, nf);
	op(b, AG_OP_ADDMM, x2, wm, bm, y, NO, NO);
	if (bm != bb->w)
		unref(b, bm); /* the cache holds it */
	sv->rows = rows, sv->nx = o->shape[o->ndim - 1];
	sv->x2 = addmm_saved_mat1(b, x2, w->w, bb->w, &sv->dx, &sv->dw, &sv->db);
	sv->node = sv->dx || sv->dw || sv->db;
	if (sv->w16 != NO && !sv->dx) { /* mat2 is saved for mat1's gradient only */
		unref(b, sv->w16);
		sv->w16 = NO;
	}
	T res = grad_in_x_shape(b, y, o);
	return w->lora >= 0 ? lora_fwd(b, x, res, w->lora) : res;
}

/* AddmmBackward (and the sum_to of its bias's gradient): dx, dW, db;
 * then the saved input released; the AccumulateGrads of bias and weight
 * (their nodes run at once, the bias's first). g is released when
 * `owned` (the node had the last holder of it). Returns dx as [rows, nx]. */
static T conv1d_bwd(struct bld *b, T g, int owned, struct conv_saved *sv, struct pt *w, struct pt *bb)
{
	if (w->q4 >= 0) {
		T lx = NO;
		q4_linear_bwd(b, g, owned, sv->rows, sv->nx, sv->dx, sv->xcast, w, &lx);
		return lx;
	}
	uint64_t rows = sv->rows, nx = sv->nx, nf = b->s->tensor[w->w].shape[1];
	const struct ag_tensor go_ = b->s->tensor[g]; /* x's shape is g's, but for the last dim */
	enum ag_dtype dt = go_.dtype;
	T wm = sv->w16 != NO ? sv->w16 : w->w;
	/* LoRA: the sum's AddBackward hands g to the adapter's branch, whose
	 * nodes (later in forward) run before the base layer's; its dx is
	 * the first to arrive in x's buffer */
	T lx = NO;
	if (w->lora >= 0) {
		ref(b, g);
		lora_bwd(b, g, w->lora, &lx);
	}
	T g2 = reshape(b, g, 2, SH(rows, nf));
	T dx = NO, dw = NO, db = NO;
	if (sv->dx) {
		dx = TMP("mm (addmm backward, mat1)", dt, rows, nx);
		T wt = transpose_last2(b, wm);
		op(b, AG_OP_MM, g2, wt, NO, dx, NO, NO);
		unref(b, wt);
	}
	if (sv->dw) {
		dw = TMP("mm (addmm backward, mat2)", dt, nx, nf);
		T xt = transpose_last2(b, sv->x2);
		op(b, AG_OP_MM, xt, g2, NO, dw, NO, NO);
		unref(b, xt);
	}
	if (b->nrunpack) { /* unpacked, the rerun's x goes as apply returns (nrunpack) */
		unref(b, sv->x2);
		sv->x2 = NO;
	}
	if (sv->db) {
		db = TMP("sum (addmm backward, bias)", dt, nf);
		op(b, AG_OP_SUM_ROWS, g2, NO, NO, db, NO, NO);
	}
	unref(b, g2);
	if (owned)
		unref(b, g); /* the node's input goes when it returns, before its saved set */
	unref(b, sv->x2);
	if (b->o->amp == AG_F32) {
		if (db != NO)
			accumulate(b, bb, db);
		if (dw != NO)
			accumulate(b, w, dw);
		/* ViewBackward (x.view(-1, nx)): x's gradient in x's shape */
		if (dx != NO)
			arrive(b, &lx, grad_in_x_shape(b, dx, &go_));
		return lx;
	}
	/* autocast: the casts' ToCopyBackward nodes by sequence number, the
	 * latest made first: the bias's (and its AccumulateGrad), x's where it
	 * was cast, then W's; each where its source requires grad (--freeze) */
	if (sv->w16 != NO)
		unref(b, sv->w16);
	if (db != NO)
		accumulate(b, bb, ac_grad_back(b, db));
	if (dx != NO) {
		dx = grad_in_x_shape(b, dx, &go_);
		if (sv->xcast)
			dx = ac_grad_back(b, dx);
		arrive(b, &lx, dx);
	}
	if (dw != NO)
		accumulate(b, w, ac_grad_back(b, dw));
	return lx;
}

/* The CPU flash kernel's saved set: q, k, v, the output and the logsumexp. */
struct sdpa_saved {
	T q, k, v, out, lse;
	int qcast, kcast; /* autocast copied q, k (fp32 rope sums): their ToCopyBackward casts dq, dk back */
};

struct gpt2_block_saved {
	struct ln_saved ln1, ln2;
	struct conv_saved attn_in, attn_out, fc, proj;
	T q, kt, divisor, attw, v;   /* the attention's saved set (attw: bmm's, the dropout's output) */
	T sm;                        /* softmax's result (attw itself without dropout) */
	T drop_attn, drop_resid, drop_mlp; /* the dropouts' noise kept (NO for p = 0) */
	struct sdpa_saved sd;        /* --attn sdpa: the flash kernel's saved set */
	T half, c1, c2;             /* gelu_new's wrapped numbers kept: 0.5, 0.044715, sqrt(2/pi) */
	T a, t, u, xfc;             /* 0.5·x, tanh(.), 1 + tanh(.), c_fc's output (kept by pow) */
	/* requires_grad (--freeze): the block's input, the attention's q/k/v,
	 * c_proj's output, the residual sum after the attention, the MLP's
	 * gelu input and its output */
	int rin, rqkv, rpo, rh1, rfc, rmo;
};

static struct pt *blk(struct model *M, struct bld *b, int i, const char *what)
{
	return PF(M, b, "transformer.h.%d.%s", i, what);
}

static void gpt2_setup(struct bld *b, struct model *M)
{
	const struct zs_model *m = b->m;
	/* model.parameters() order: wte, wpe, each block (ln_1, attn.c_attn,
	 * attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj: weight then bias), ln_f,
	 * lm_head when untied; the buffers with their blocks. */
	char n[256];
	add_param(b, M, find_tensor(b, "transformer.wte.weight"), -1);
	add_param(b, M, find_tensor(b, "transformer.wpe.weight"), -1);
	M->bias = zs_calloc(m->layers, sizeof *M->bias);
	M->masked_bias = zs_calloc(m->layers, sizeof *M->masked_bias);
	static const char *parts[] = { "ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj" };
	for (uint64_t l = 0; l < m->layers; l++) {
		b->module = modname(b, "transformer.h.%llu.attn.c_attn", (unsigned long long)l);
		uint64_t P_ = m->positions;
		M->bias[l] = mk(b, "causal bias buffer", AG_BOOL, 4, SH(1, 1, P_, P_), AG_ROLE_BUFFER, ZS_CAT_PARAM32, -1);
		op(b, AG_OP_TRIL_MASK, NO, NO, NO, M->bias[l], NO, NO);
		M->masked_bias[l] = mk(b, "masked_bias buffer", b->o->mdt, 0, NULL, AG_ROLE_BUFFER, ZS_CAT_PARAM32, -1);
		op(b, AG_OP_FILL, NO, NO, NO, M->masked_bias[l], NO, NO)->arg[0] = -1e4;
		b->module = -1;
		for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
			for (int wb = 0; wb < 2; wb++) {
				snprintf(n, sizeof n, "transformer.h.%llu.%s.%s", (unsigned long long)l, parts[k],
				         wb ? "bias" : "weight");
				add_param(b, M, find_tensor(b, n), -1);
			}
	}
	add_param(b, M, find_tensor(b, "transformer.ln_f.weight"), -1);
	add_param(b, M, find_tensor(b, "transformer.ln_f.bias"), -1);
	if (!m->tied)
		add_param(b, M, find_tensor(b, "lm_head.weight"), -1);
}

/* The loss (loss_utils.py ForCausalLMLoss) over logits [B·T, V]; returns
 * the loss; the saved set in *ls, *tgt, *tw. */
static T causal_lm_loss(struct bld *b, struct model *M, T logits2, T *ls, T *tgt, T *tw)
{
	uint64_t B = b->o->batch, Tn = b->o->seq, V = b->m->vocab;
	/* labels = pad(labels, (0, 1), value=-100) */
	T padded = TMP("constant_pad_nd (labels)", AG_I64, B, Tn + 1);
	op(b, AG_OP_COPY, M->labels, NO, NO, padded, NO, NO)->arg[0] = -100;
	/* shift_labels = labels[..., 1:].contiguous() */
	T sv = vw(b, padded, 2, SH(B, Tn), (const int64_t[]){ (int64_t)(Tn + 1), 1 }, 1);
	T shift;
	if (B == 1) { /* [1, T] with strides (T + 1, 1) is contiguous: no copy */
		shift = vw(b, padded, 2, SH(B, Tn), NULL, 1);
	} else {
		shift = TMP("clone (shift_labels)", AG_I64, B, Tn);
		op(b, AG_OP_COPY, sv, NO, NO, shift, NO, NO);
	}
	unref(b, sv);
	/* cross_entropy: log_softmax (saves its result), nll_loss (saves
	 * target and total_weight) */
	T lsm = TMP("_log_softmax", AG_F32, B * Tn, V);
	op(b, AG_OP_LOG_SOFTMAX, logits2, NO, NO, lsm, NO, NO);
	T t1 = reshape(b, shift, 1, SH(B * Tn));
	T loss = tmp(b, "nll_loss_forward", AG_F32, 0, NULL);
	T total = tmp(b, "nll_loss_forward (total_weight)", AG_F32, 0, NULL);
	op(b, AG_OP_NLL, lsm, t1, NO, loss, total, NO)->arg[0] = -100;
	unref(b, shift);  /* the name; the view t1 holds on for the node */
	/* the function returns: its locals go, `logits` (logits.float()'s copy
	 * under autocast: log_softmax keeps its result, not its input) first */
	if (M->logits32 != NO)
		unref(b, M->logits32);
	M->logits32 = NO;
	unref(b, padded);
	*ls = lsm, *tgt = t1, *tw = total;
	return loss;
}

/* ForCausalLMLoss's backward: NllLossBackward, LogSoftmaxBackward; the
 * logits' gradient [B·T, V]. */
static T lm_loss_bwd(struct bld *b, T one, int owned, T lsm, T tgt, T tw)
{
	const struct ag_tensor o_ = b->s->tensor[lsm], *o = &o_; /* a copy: the array grows */
	T dls = tmp(b, "nll_loss_backward", AG_F32, 2, o->shape);
	struct ag_event *e = op(b, AG_OP_NLL_BWD, one, tgt, tw, dls, NO, NO);
	e->arg[0] = -100;
	/* the node's input goes when call_function returns, before
	 * release_variables frees what it saved */
	if (owned)
		unref(b, one);
	unref(b, tgt);
	unref(b, tw);
	T dlg = tmp(b, "_log_softmax_backward_data", AG_F32, 2, o->shape);
	op(b, AG_OP_LOG_SOFTMAX_BWD, dls, lsm, NO, dlg, NO, NO);
	unref(b, dls);
	unref(b, lsm);
	return dlg;
}

/* --logits dropped (Hugging Face Trainer: compute_loss returns the loss
 * alone, `outputs` a local of it): once the model's forward has returned
 * (its autocast region exited), the output and with it the logits go,
 * before backward; *lg becomes NO. Nothing saves the logits themselves
 * (lm_head's MmBackward keeps its input and weight, log_softmax its
 * result), so their bytes go: in fp32 the one [B·T, V] tensor (
 * logits.float() is itself), under autocast the 16-bit logits (the fp32
 * copy went as the loss function returned). Held to tests/hf_torch.py
 * --keep-logits 0. */
static void drop_outputs(struct bld *b, T *lg)
{
	if (!b->o->drop_logits)
		return;
	unref(b, *lg);
	*lg = NO;
}

/* The loop's `loss = outputs[0] / K` under --grad-accum K > 1 (Trainer's
 * training_step divides by gradient_accumulation_steps; tests/ft_torch.py):
 * div.Tensor by a Python int, a wrapped int64 (8 B, kept by DivBackward0
 * for grad / other), the 0-dim output, TensorIterator's fp32 copy of K
 * while the kernel runs (1.13's order, traced). Nothing at K = 1. */
static void scale_loss(struct bld *b, struct model *M, T loss)
{
	M->loss = loss; /* (GradScaler's scale() takes it: grad_scaler_scale) */
	M->lossk = M->kwrap = NO;
	if (b->o->grad_accum <= 1)
		return;
	double K = (double)b->o->grad_accum;
	M->kwrap = host_scalar(b, tmp(b, "scalar (wrapped number K)", AG_F64, 0, NULL));
	op(b, AG_OP_FILL, NO, NO, NO, M->kwrap, NO, NO)->arg[0] = K;
	M->lossk = tmp(b, "div (loss / K)", AG_F32, 0, NULL);
	T c = cast_scalar(b, M->kwrap);
	op(b, AG_OP_DIV, loss, c, NO, M->lossk, NO, NO);
	unref(b, c);
}

/* lm_head (nn.Linear(d, V, bias=False); the token table when tied) over
 * x [B, T, d], whose holder it takes: matmul folds to mm over
 * x.view(-1, d), the view kept by the node (*x2); then the loss inside
 * the model's forward (ForCausalLMLoss: its saved set in *ls, *tgt, *tw),
 * marked as the reference marks them. The logits [B·T, V] in *lg (the
 * loop holds them and the loss to the step's end); returns the loss. */
static T causal_lm_loss(struct bld *b, struct model *M, T logits2, T *ls, T *tgt, T *tw);

static T softcap_fwd(struct bld *b, T x, double cap, struct softcap_saved *sv);
static T softcap_bwd(struct bld *b, T g, double cap, struct softcap_saved *sv);

static T head_fwd(struct bld *b, struct model *M, T x, struct pt *head, T *x2, T *lg, T *ls, T *tgt, T *tw)
{
	const struct ag_tensor x_ = b->s->tensor[x], *o = &x_; /* a copy: the array grows */
	uint64_t rows = o->shape[0] * o->shape[1], d = o->shape[2], V = b->s->tensor[head->w].shape[0];
	b->module = modname(b, "lm_head");
	mark(b, "fwd:lm_head:start");
	ds3_mark(b, "fwd", "lm_head");
	/* autocast's linear: W cast first (cached), then x; MmBackward keeps both */
	T wm = head->w, xm = x;
	M->head16 = NO;
	if (b->o->amp != AG_F32) {
		wm = M->head16 = ac_cast_param(b, head);
		xm = ac_cast(b, x);
	}
	*x2 = reshape(b, xm, 2, SH(rows, d));
	if (xm != x || b->o->amp != AG_F32)
		unref(b, xm); /* the cast's name (or ac_cast's holder of x): the view holds it */
	/* mm saves self (x) only for mat2's (the head's) gradient */
	int keep = RG(b, head->w);
	T wt = transpose_last2(b, wm);
	*lg = TMP("mm (lm_head)", b->s->tensor[*x2].dtype, rows, V);
	op(b, AG_OP_MM, *x2, wt, NO, *lg, NO, NO);
	M->head_wt = ds3_saved_wt(b, wt, M->head16, RG(b, x));
	if (!keep) { /* the view goes with matmul; x with the forward's `hidden_states` */
		unref(b, *x2);
		*x2 = NO;
	}
	if (M->head16 != NO && !RG(b, x)) { /* W16^t is saved for x's gradient only */
		unref(b, M->head16);
		M->head16 = NO;
	}
	ds3_mark(b, "fwd_end", "lm_head");
	mark(b, "fwd:lm_head:end");
	b->module = -1;
	/* Gemma2ForCausalLM.forward: logits / cap, tanh, * cap (the lm_head's
	 * product goes with the rebinding); the capped logits are the output */
	if (b->m->gemma && b->m->final_softcap > 0)
		*lg = softcap_fwd(b, *lg, b->m->final_softcap, &M->fcap);
	mark(b, "fwd:loss:start");
	/* logits.float() is logits itself in fp32, a copy under autocast;
	 * .view(-1, V) a view */
	T lf = *lg;
	M->logits32 = NO;
	if (b->s->tensor[*lg].dtype != AG_F32)
		lf = M->logits32 = to_dtype(b, *lg, AG_F32, "_to_copy (logits.float())");
	T loss = causal_lm_loss(b, M, lf, ls, tgt, tw);
	mark(b, "fwd:loss:end");
	/* the model's forward returns: its name for the final norm's output
	 * goes (fp32: the view mm keeps holds it, unless the head is frozen) */
	unref(b, x);
	return loss;
}

/* --precision amp-fp16: float16 autocast's recipe, torch.amp.GradScaler
 * ("cpu") (torch/amp/grad_scaler.py, Debian 13's 2.6.0; the CPU's since
 * 2.3): `scaler.scale(loss).backward(); scaler.step(opt);
 * scaler.update()`. scale() (174-210): the first call makes _scale
 * (torch.full((), 65536.0), fp32) and _growth_tracker (torch.full((), 0,
 * dtype=int32): 4 bytes, an fp32 here, exact for its counts), kept across
 * steps (_lazy_init_scale_growth_tracker, 166-171); then `outputs *
 * _scale.to(device)` (no copy: the same device), a 0-dim product held
 * until the backward it starts returns. */
static void grad_scaler_scale(struct bld *b, struct model *M)
{
	if (b->o->amp != AG_F16)
		return;
	if (M->gs_scale == NO) {
		M->gs_scale = mk(b, "full (GradScaler _scale)", AG_F32, 0, NULL, AG_ROLE_SCALER, ZS_CAT_ADAM_M, -1);
		op(b, AG_OP_FILL, NO, NO, NO, M->gs_scale, NO, NO)->arg[0] = 65536.0;
		M->gs_growth = mk(b, "full (GradScaler _growth_tracker, int32)", AG_F32, 0, NULL, AG_ROLE_SCALER,
		                  ZS_CAT_ADAM_M, -1);
		op(b, AG_OP_FILL, NO, NO, NO, M->gs_growth, NO, NO)->arg[0] = 0;
	}
	M->gs_scaled = tmp(b, "mul (scaler.scale(loss))", AG_F32, 0, NULL);
	op(b, AG_OP_MUL, M->lossk != NO ? M->lossk : M->loss, M->gs_scale, NO, M->gs_scaled, NO, NO);
}

/* the scaled loss, the statement's temporary, goes as backward returns
 * (after its ones_like) */
static void grad_scaler_backward_end(struct bld *b, struct model *M)
{
	if (M->gs_scaled == NO)
		return;
	unref(b, M->gs_scaled);
	M->gs_scaled = NO;
}

/* scaler.step(opt)'s unscale_ (grad_scaler.py 287-341, _unscale_grads_
 * 234-285), before Adam's step: inv_scale = _scale.double().reciprocal()
 * .float() (8 B, 8 B, the double going as reciprocal returns, 4 B, the
 * reciprocal going), found_inf = torch.full((), 0.0) (4 B), then
 * _MultiDeviceReplicator.get's copies (`.to(device, copy=True)`: found_inf's
 * first, the call's first argument, then inv_scale's) for
 * torch._amp_foreach_non_finite_check_and_unscale_ over every grad in
 * param_groups order, in place (no bytes; each grad times inv_scale, which
 * the engine runs as a multiply by 1/65536: the scale grows only after
 * 2,000 steps without an inf); inv_scale's replica goes as _unscale_grads_
 * returns, inv_scale and found_inf as unscale_ does; found_inf's replica
 * stays in the optimizer's state. _maybe_opt_step's found_inf.item()
 * allocates nothing: zerosim describes the step taken (an inf or NaN
 * skips Adam's step: fewer bytes, never more). */
static void grad_scaler_unscale(struct bld *b, struct pt *const *qs, size_t n)
{
	struct model *M = b->M;
	if (b->o->amp != AG_F16 || M == NULL || M->gs_scale == NO)
		return;
	T d = tmp(b, "_to_copy (_scale.double())", AG_F64, 0, NULL);
	op(b, AG_OP_COPY, M->gs_scale, NO, NO, d, NO, NO);
	T r = tmp(b, "reciprocal (inv_scale)", AG_F64, 0, NULL);
	op(b, AG_OP_POW_SCALAR, d, NO, NO, r, NO, NO)->arg[0] = -1;
	unref(b, d);
	T inv = tmp(b, "_to_copy (inv_scale.float())", AG_F32, 0, NULL);
	op(b, AG_OP_COPY, r, NO, NO, inv, NO, NO);
	unref(b, r);
	T fi = tmp(b, "full (found_inf)", AG_F32, 0, NULL);
	op(b, AG_OP_FILL, NO, NO, NO, fi, NO, NO)->arg[0] = 0;
	M->gs_found = tmp(b, "_to_copy (found_inf's replica)", AG_F32, 0, NULL);
	op(b, AG_OP_COPY, fi, NO, NO, M->gs_found, NO, NO);
	T ir = tmp(b, "_to_copy (inv_scale's replica)", AG_F32, 0, NULL);
	op(b, AG_OP_COPY, inv, NO, NO, ir, NO, NO);
	for (size_t i = 0; i < n; i++)
		if (!qs[i]->frozen && qs[i]->g != NO)
			op(b, AG_OP_MUL_SCALAR_, qs[i]->g, NO, NO, qs[i]->g, NO, NO)->arg[0] = 1.0 / 65536.0;
	unref(b, ir);
	if (M->gs_sharded) {
		/* FSDP's ShardedGradScaler (torch/distributed/fsdp/
		 * sharded_grad_scaler.py, 2.6.0): found_inf is full((1,)) (246-
		 * 248, the same 4 B); unscale_'s loop over the replicas rebinds
		 * its name found_inf (261), so the full goes first, then each
		 * replica's all_reduce across the ranks, waited (273-276: gloo's,
		 * in place: no bytes, and in the step described every rank's is
		 * 0, so the engine runs none), then inv_scale as unscale_
		 * returns (traced) */
		unref(b, fi);
		unref(b, inv);
		return;
	}
	unref(b, inv);
	unref(b, fi);
}

/* scaler.update() (463-531), after Adam's step: _amp_update_scale_ in
 * place (no inf: the growth tracker counts one more; the scale doubles
 * every 2,000 such steps), then _per_optimizer_states made anew, found_inf's
 * replica going with the old */
static void grad_scaler_update(struct bld *b)
{
	struct model *M = b->M;
	if (M == NULL || M->gs_found == NO)
		return;
	if (M->gs_sharded) {
		/* ShardedGradScaler.update on the CPU: _amp_update_scale_cpu_
		 * in Python (280-296): found_inf.item(), then `successful =
		 * self._growth_tracker + 1` (add.Tensor of a wrapped number: the
		 * number, its int32 copy, the result), `successful ==
		 * self._growth_interval` (eq.Scalar: its wrapped number, its
		 * int32 copy, the bool, read by `if` and let go) and
		 * `self._growth_tracker = successful`: the old tracker goes
		 * (2.6.0's allocator, hf_torch.py --fsdp 2 --amp fp16 --trace).
		 * The engine keeps one tracker (the result copied into it, then
		 * let go: the same bytes at every event) */
		T s = scalar_op(b, AG_OP_ADD_SCALAR, "add (successful, int32)", M->gs_growth, 1, NULL);
		T e = wrapped(b, 2000);
		T ec = cast_scalar(b, e);
		T eq = tmp(b, "eq (successful == growth_interval)", AG_BOOL, 0, NULL);
		op(b, AG_OP_FILL, NO, NO, NO, eq, NO, NO)->arg[0] = 0;
		unref(b, e);
		unref(b, ec);
		unref(b, eq);
		op(b, AG_OP_COPY, s, NO, NO, M->gs_growth, NO, NO);
		unref(b, s);
	} else {
		op(b, AG_OP_ADD_SCALAR_, M->gs_growth, NO, NO, M->gs_growth, NO, NO)->arg[0] = 1;
	}
	unref(b, M->gs_found);
	M->gs_found = NO;
}

/* MulBackward0 of scaler.scale(loss): grad * _scale (the scale is what
 * it saved: no bytes of its own), 4 B, the next node's input (the nll's,
 * or under --grad-accum DivBackward0's of `/ K`: scale() takes the
 * divided loss); ONE itself without a scaler */
static T scaled_loss_bwd(struct bld *b, struct model *M, T one)
{
	if (M->gs_scaled == NO)
		return one;
	T g = tmp(b, "mul (MulBackward0: grad * scale)", AG_F32, 0, NULL);
	op(b, AG_OP_MUL, one, M->gs_scale, NO, g, NO, NO);
	return g;
}

/* The backward's start: loss.backward()'s ones_like (held until backward
 * returns: *one), the loss's nodes, then lm_head's MmBackward. The head's
 * weight gradient goes to AccumulateGrad, or, tied, waits in the token
 * table's input buffer (*held) for the embedding's. Returns the final
 * norm's output gradient [B·T, d]. */
static T head_bwd(struct bld *b, struct model *M, T lsm, T tgt, T tw, T x2, struct pt *head, T *one, T *held,
                  int need_dx)
{
	b->phase = ZS_PH_BACKWARD;
	mark(b, "phase:backward");
	grad_scaler_scale(b, M);
	*one = tmp(b, "ones_like (loss grad)", AG_F32, 0, NULL);
	op(b, AG_OP_FILL, NO, NO, NO, *one, NO, NO)->arg[0] = 1;
	if (M->aux != NULL) /* `loss += coef * aux_loss`: its nodes are the newest */
		moe_aux_bwd(b, M, *one);
	T dlg;
	if (M->lossk != NO) {
		/* DivBackward0 of `outputs[0] / K`: grad / other, through
		 * TensorIterator's fp32 copy of the wrapped K; then
		 * release_variables frees the wrapped number it saved */
		T s = scaled_loss_bwd(b, M, *one);
		T g = tmp(b, "div (DivBackward0: grad / K)", AG_F32, 0, NULL);
		T c = cast_scalar(b, M->kwrap);
		op(b, AG_OP_DIV, s, c, NO, g, NO, NO);
		unref(b, c);
		if (s != *one) /* MulBackward0's grad, DivBackward0's input: goes as it returns */
			unref(b, s);
		unref(b, M->kwrap);
		M->kwrap = NO;
		dlg = lm_loss_bwd(b, g, 1, lsm, tgt, tw);
	} else if (M->gs_scaled != NO) {
		dlg = lm_loss_bwd(b, scaled_loss_bwd(b, M, *one), 1, lsm, tgt, tw);
	} else {
		dlg = lm_loss_bwd(b, *one, 0, lsm, tgt, tw);
	}
	T w16 = b->M->head16;
	if (b->o->amp != AG_F32 || b->o->mdt != AG_F32) /* logits.float()'s ToCopyBackward */
		dlg = ac_grad_back_to(b, dlg, b->o->amp != AG_F32 ? b->o->amp : b->o->mdt);
	if (b->m->gemma && b->m->final_softcap > 0) /* the logits' softcap, before lm_head's hook */
		dlg = softcap_bwd(b, dlg, b->m->final_softcap, &M->fcap);
	b->module = modname(b, "lm_head");
	mark(b, "bwd:lm_head:start");
	ds3_mark(b, "bwd", "lm_head");
	/* mm_mat2_backward computes W^t's gradient in W^t's own (transposed)
	 * layout, grad^t @ x, so that TBackward's view of it is W's
	 * contiguous [V, d]; it comes first */
	const struct ag_tensor w_ = b->s->tensor[head->w], *w = &w_; /* a copy: the array grows */
	enum ag_dtype dt = b->s->tensor[dlg].dtype;
	T dw = NO, dx = NO;
	if (!head->frozen) {
		dw = TMP("mm (lm_head weight grad)", dt, w->shape[0], w->shape[1]);
		T dlgt = transpose_last2(b, dlg);
		op(b, AG_OP_MM, dlgt, x2, NO, dw, NO, NO);
		unref(b, dlgt);
	}
	if (need_dx) {
		dx = TMP("mm (lm_head input grad)", dt, b->o->batch * b->o->seq, w->shape[1]);
		op(b, AG_OP_MM, dlg, ds3_saved_read(M->head_wt, w16 != NO ? w16 : head->w), NO, dx, NO, NO);
	}
	unref(b, dlg);
	unref(b, x2);
	unref(b, M->head_wt); /* MmBackward0 releases its saved mat2 */
	M->head_wt = NO;
	*held = NO;
	if (b->o->amp != AG_F32) {
		/* autocast: its saved 16-bit W goes; the casts' ToCopyBackward,
		 * x's (the later) first, then W's: the fp32 weight gradient, a
		 * whole tensor (the held one, tied); each where its source
		 * requires grad (--freeze) */
		if (w16 != NO)
			unref(b, w16);
		b->M->head16 = NO;
		if (dx != NO)
			dx = ac_grad_back(b, dx);
		if (dw == NO)
			return dx;
		dw = ac_grad_back(b, dw);
		if (b->m->tied)
			*held = dw;
		else
			accumulate(b, head, dw);
		return dx;
	}
	if (dw == NO) {
		/* a frozen head: no weight gradient */
	} else if (b->m->tied) {
		*held = vw(b, dw, 2, w->shape, NULL, 0);
		unref(b, dw);
	} else {
		accumulate(b, head, dw);
	}
	return dx;
}

/* Whether reshaping [n0, n1, ...] of strides st to [n0·n1, ...] is a
 * view: ATen's reshape copies only where computeStride finds no strides
 * (aten/src/ATen/TensorUtils.cpp), which merges two dims when the outer's
 * stride is the inner's times its size, and a dim of size 1 always. */
static int dims01_merge(const uint64_t *sh, const int64_t *st)
{
	return sh[0] == 1 || sh[1] == 1 || st[0] == st[1] * (int64_t)sh[1];
}

/* matmul's operand x ([B, n, r, c]) as bmm takes it, [B·n, r, c]: a
 * view, or where `copies` a copy (`clone`) that bmm then keeps. */
static T matmul_operand(struct bld *b, T x, int copies, const char *what)
{
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	uint64_t sh[3] = { o->shape[0] * o->shape[1], o->shape[2], o->shape[3] };
	if (!copies)
		return vw(b, x, 3, sh, (const int64_t[]){ o->shape[1] == 1 ? o->stride[0] : o->stride[1], o->stride[2],
		                                          o->stride[3] }, 0);
	T c = tmp(b, what, o->dtype, 3, sh);
	op(b, AG_OP_COPY, x, NO, NO, c, NO, NO);
	return c;
}

/* matmul's operand x ([B, n, r, c], its strides as they lie): expand +
 * reshape (1.13's matmul, aten/src/ATen/native/LinearAlgebra.cpp), a
 * view where B and n merge (B = 1, n = 1, or strides that chain), else
 * a copy. */
static T bmm_operand(struct bld *b, T x, const char *what)
{
	const struct ag_tensor *o = &b->s->tensor[x];
	return matmul_operand(b, x, !dims01_merge(o->shape, o->stride), what);
}

/* Whether matmul copies a rope's sum [B, n, T, hd]: the sum lies in the
 * transposed projection's layout ([B, T, n, hd] in memory: TensorIterator
 * keeps its operand's), so B and n merge only where B, n or T is 1. */
static int rope_sum_copies(uint64_t B, uint64_t n, uint64_t Tn, uint64_t hd)
{
	return !dims01_merge(SH(B, n), (const int64_t[]){ (int64_t)(Tn * n * hd), (int64_t)hd });
}

/* The attention's backward from the merged heads' gradient dm (B·T rows
 * of h·hd; its holder taken) to the scores': the heads' gradient as bmm wants it
 * (a copy unless B, h or T is 1), BmmBackward (attw @ v: v's gradient into *dv,
 * then attw's; its saved attw and v let go in that order), the dropout's
 * MulBackward (noise: NO without dropout, where attw is sm), then
 * SoftmaxBackward with its saved result sm. */
static T attn_v_bwd(struct bld *b, T dm, T attw, T sm, T noise, T v, uint64_t B, uint64_t h, uint64_t Tn,
                    uint64_t hd, T *dv, int vcast)
{
	uint64_t d = h * hd;
	T dmp = vw(b, dm, 4, SH(B, h, Tn, hd), (const int64_t[]){ (int64_t)(Tn * d), (int64_t)hd, (int64_t)d, 1 }, 0);
	T dao = bmm_operand(b, dmp, "clone (reshape of the heads' grad)");
	unref(b, dmp);
	unref(b, dm);
	enum ag_dtype dt = b->s->tensor[dao].dtype;
	*dv = TMP("bmm (attention backward, v)", dt, B * h, Tn, hd);
	T swt = transpose_last2(b, attw);
	op(b, AG_OP_BMM, swt, dao, NO, *dv, NO, NO);
	unref(b, swt);
	T dsm = TMP("bmm (attention backward, weights)", dt, B * h, Tn, Tn);
	T vt = transpose_last2(b, v);
	op(b, AG_OP_BMM, dao, vt, NO, dsm, NO, NO);
	unref(b, vt);
	unref(b, dao);
	/* BmmBackward0 lets its saved operands go: self (the weights) then
	 * mat2 (v) in 1.13, mat2 first in 2.6 (hf_torch.py --trace's clean
	 * step, gpt2 with attention dropout, eager and SDPA: the weights
	 * apart from the softmax's result, so their free shows) */
	if (b->o->version == ZS_TORCH_1_13) {
		unref(b, attw);
		unref(b, v);
	} else {
		unref(b, v);
		unref(b, attw);
	}
	/* autocast: bmm took a 16-bit cast of fp32 weights (Llama's softmax
	 * in fp32): its ToCopyBackward */
	enum ag_dtype smt = b->s->tensor[sm].dtype;
	/* after module.bfloat16() the dropout took the bf16 cast of the
	 * softmax (its mask bf16): its MulBackward before the cast's */
	int drop_first = noise != NO && b->s->tensor[noise].dtype == dt && dt != smt;
	if (smt != dt && !drop_first)
		dsm = ac_grad_back_to(b, dsm, smt);
	/* autocast over an fp32 v (QLoRA's v_proj: Linear4bit's result back
	 * in x's fp32): matmul cast v before the weights (right to left), so
	 * its ToCopyBackward runs after theirs, before the dropout's and the
	 * softmax's nodes (made before both casts) */
	if (vcast)
		*dv = ac_grad_back(b, *dv);
	if (noise != NO) {
		/* the grad in the dropout output's shape (Llama's is [B, h, T, T]) */
		const struct ag_tensor n_ = b->s->tensor[noise], *n = &n_; /* a copy: the array grows */
		T g = dsm;
		if (n->ndim > 3) {
			g = reshape(b, dsm, n->ndim, n->shape);
			unref(b, dsm);
		}
		dsm = dropout_bwd(b, g, 1, noise);
	}
	if (drop_first)
		dsm = ac_grad_back_to(b, dsm, smt);
	T dw = TMP("_softmax_backward_data", smt, B * h, Tn, Tn);
	op(b, AG_OP_SOFTMAX_BWD, dsm, sm, NO, dw, NO, NO);
	unref(b, dsm);
	unref(b, sm);
	return dw;
}

/* BmmBackward (q @ k^T) from the scores' gradient dsc (its holder
 * taken): q's gradient [n = B·h, T, hd], then k^T's [n, hd, T]; the saved
 * q and k^T let go. */
static void qk_bwd(struct bld *b, T dsc, T q, T kt, uint64_t n, uint64_t Tn, uint64_t hd, T *dq, T *dkt)
{
	enum ag_dtype dt = b->s->tensor[dsc].dtype;
	*dq = TMP("bmm (scores backward, q)", dt, n, Tn, hd);
	T ktt = transpose_last2(b, kt);
	op(b, AG_OP_BMM, dsc, ktt, NO, *dq, NO, NO);
	unref(b, ktt);
	*dkt = NO;
	if (q != NO) { /* NO: k requires no grad (q was not saved) */
		*dkt = TMP("bmm (scores backward, k^T)", dt, n, hd, Tn);
		T qt = transpose_last2(b, q);
		op(b, AG_OP_BMM, qt, dsc, NO, *dkt, NO, NO);
		unref(b, qt);
	}
	unref(b, dsc);
	unref(b, q);
	unref(b, kt);
}

/* embedding_dense_backward(g, idx) into de. On CUDA past
 * AG_CUDA_EMB_FAST_TOKENS indices it takes the sort path, not described:
 * marked, and the step refused by name. Only a trained table runs it, so a
 * frozen one (LoRA's, --freeze's) takes any number of tokens. */
static void emb_dense_bwd(struct bld *b, T g, T idx, T de)
{
	const struct ag_tensor *t = &b->s->tensor[idx];
	uint64_t n = 1;
	for (unsigned k = 0; k < t->ndim; k++)
		n *= (uint64_t)t->shape[k];
	if (b->o->device == ZS_DEVICE_CUDA && n > AG_CUDA_EMB_FAST_TOKENS)
		b->emb_sort = 1;
	op(b, AG_OP_EMBEDDING_BWD, g, idx, NO, de, NO, NO);
}

/* The token embedding's backward from g (its holder taken): its V·d
 * gradient, added to the tied head's held one in the table's input
 * buffer (out of place: that one is a view), then AccumulateGrad. */
static void embedding_bwd(struct bld *b, struct model *M, T g, struct pt *emb, T held)
{
	T de = like(b, "embedding_dense_backward", emb->w);
	emb_dense_bwd(b, g, M->ids, de);
	unref(b, g);
	if (held != NO) {
		arrive(b, &held, de);
		de = held;
	}
	accumulate(b, emb, de);
	b->module = -1;
}

/* A block's residual add a + y (y the sublayer's output): y goes as the
 * expression ends, then a's name is rebound to the sum. */
static T residual_add(struct bld *b, T a, T y, int y_first)
{
	/* under autocast y may be 16-bit and a fp32: TensorIterator promotes,
	 * copying y to fp32 for the kernel (made before the output, freed
	 * after it ran) */
	T yp = y;
	if (b->s->tensor[y].dtype != b->s->tensor[a].dtype && promotes_by_copy(b))
		yp = to_dtype(b, y, b->s->tensor[a].dtype, "_to_copy (add's type promotion)");
	T out = like(b, "add (residual)", a);
	op(b, AG_OP_ADD, y_first ? yp : a, y_first ? a : yp, NO, out, NO, NO)->arg[0] = 1;
	if (yp != y)
		unref(b, yp);
	unref(b, y);
	unref(b, a);
	return out;
}

/* The CPU flash kernel's blocks (aten/src/ATen/native/cpu/
 * FlashAttentionKernel.cpp, 2.6.0: flash_attention_kernel_impl and its
 * backward take q_split_size 256 from 768 query rows, 64 from 192, else
 * 32, and kv_split_size 512; cpu_flash_attention clamps each to the
 * sequence). One thread (the reference pins it): the workspaces are per
 * thread. */
static uint64_t flash_qsplit(uint64_t rows)
{
	uint64_t q = rows >= 768 ? 256 : rows >= 192 ? 64 : 32;
	return q < rows ? q : rows;
}

static uint64_t flash_kvsplit(uint64_t rows)
{
	return rows < 512 ? rows : 512;
}

/* The attention's scale: hd^-1/2, a gemma's query_pre_attn_scalar^-1/2
 * (Gemma2Attention and Gemma3Attention's self.scaling, which
 * eager_attention_forward multiplies by and sdpa_attention_forward passes
 * as SDPA's scale). */
static double attn_scale(const struct zs_model *m, uint64_t hd)
{
	return 1.0 / sqrt(m->gemma && m->attn_scalar > 0 ? m->attn_scalar : (double)hd);
}

/* transformers' sdpa_attention_forward (is_causal, no mask, no dropout;
 * GPT-2's, and Llama's with as many k/v heads as heads), on the CPU: F.scaled_dot_product_attention dispatches to
 * _scaled_dot_product_flash_attention_for_cpu (sdp_utils_cpp's
 * use_flash_attention_cpp), which makes its output [B, T, h, hd] (read as
 * [B, h, T, hd]: the caller's transpose(1, 2).contiguous() is then no
 * copy), its logsumexp [B, h, T] fp32, and per thread a workspace of
 * qS·kvS + 2·qS + qS·hd floats for the kernel's duration; autograd keeps
 * q, k, v, the output and the logsumexp (derivatives.yaml 2.6.0,
 * _scaled_dot_product_flash_attention_for_cpu) and no T×T matrix.
 * Under bf16 autocast (autocast_mode.cpp: KERNEL_CPU(scaled_dot_product_attention,
 * lower_precision_fp)) its arguments are cast first, right to left (v,
 * k, q: a bf16 one is itself, llama's fp32 rope sums are copied, and the
 * node keeps the copies); the kernel then runs in bf16
 * (FlashAttentionKernel.cpp at 008ec6b1, cpu_flash_attention): the output
 * bf16 (query.options()), the logsumexp and `buf` fp32 (accumulate_dtype),
 * and `buf_reduced`, qS·kvS of the 16-bit type, beside `buf` (allocated
 * after it; could_pack is Half's alone, so no padding). Returns the merged
 * heads [B, T, d] (a view of the output). */
static T sdpa_fwd(struct bld *b, struct sdpa_saved *s, T q, T k, T v)
{
	const struct ag_tensor q_ = b->s->tensor[q], *qt = &q_; /* a copy: the array grows */
	uint64_t B = qt->shape[0], h = qt->shape[1], Tn = qt->shape[2], hd = qt->shape[3];
	int amp = b->o->amp != AG_F32;
	/* (a 16-bit module's own q, k, v, DeepSpeed's bf16: the kernel in
	 * their dtype, as under autocast less the casts) */
	enum ag_dtype dt = amp ? b->o->amp : b->s->tensor[q].dtype;
	s->qcast = s->kcast = 0;
	if (amp) { /* cached_cast of each argument, the last first; each one holder more */
		s->kcast = b->s->tensor[k].dtype != dt;
		s->qcast = b->s->tensor[q].dtype != dt;
		if (b->s->tensor[v].dtype != dt) /* (an fp32 v, QLoRA's, amp_check refuses) */
			unsupported(b, "SDPA under autocast with an fp32 v");
		v = ac_cast(b, v);
		k = ac_cast(b, k);
		q = ac_cast(b, q);
	}
	T ost = TMP("_scaled_dot_product_flash_attention_for_cpu (output)", dt, B, Tn, h, hd);
	T lse = TMP("_scaled_dot_product_flash_attention_for_cpu (logsumexp)", AG_F32, B, h, Tn);
	uint64_t qs = flash_qsplit(Tn), kvs = flash_kvsplit(Tn);
	T ws = TMP("_scaled_dot_product_flash_attention_for_cpu (workspace)", AG_F32, 1, qs * kvs + 2 * qs + qs * hd);
	T wr = dt != AG_F32 ? TMP("_scaled_dot_product_flash_attention_for_cpu (buf_reduced)", dt, 1, qs, kvs) : NO;
	T ov = vw(b, ost, 4, SH(B, h, Tn, hd), (const int64_t[]){ (int64_t)(Tn * h * hd), (int64_t)hd,
	                                                           (int64_t)(h * hd), 1 }, 0);
	struct ag_event *e = op(b, AG_OP_SDPA_FLASH, q, k, v, ov, lse, NO);
	e->arg[0] = attn_scale(b->m, hd);
	if (wr != NO)
		unref(b, wr);
	unref(b, ws);
	/* no node (under no_grad, or none of q, k, v requiring grad: a
	 * frozen layer over an input that requires none): the logsumexp
	 * goes with the op's tuple, nothing is kept; autocast's casts go as
	 * its wrapper returns */
	if (b->nograd || !(RG(b, q) || RG(b, k) || RG(b, v))) {
		unref(b, lse);
		unref(b, ov);
		if (amp) {
			unref(b, q);
			unref(b, k);
			unref(b, v);
		}
		s->q = s->k = s->v = s->out = s->lse = NO;
		T merged = reshape(b, ost, 3, SH(B, Tn, h * hd));
		unref(b, ost);
		return merged;
	}
	if (!amp) { /* (under autocast the casts' holders are the node's) */
		ref(b, q);
		ref(b, k);
		ref(b, v);
	}
	s->q = q, s->k = k, s->v = v, s->out = ov, s->lse = lse;
	/* attn_output.permute(0, 2, 1, 3).contiguous() is the output's own
	 * layout; .view(B, T, d) a view */
	T merged = reshape(b, ost, 3, SH(B, Tn, h * hd));
	unref(b, ost);
	return merged;
}

/* Its backward from the merged heads' gradient dm (its holder taken),
 * read as [B, h, T, hd]: dq, dk and dv in the output's layout and q's
 * dtype, the kernel's per-thread workspace (2·qS·kvS floats), under
 * autocast its buf_reduced (2·qS·kvS of the 16-bit type:
 * cpu_flash_attention_backward's size_per_thread_reduced) and row sums
 * (qS floats); the gradient, then q, k, v, the logsumexp and the output
 * let go. gv[0..2]: dq, dk, dv as [B, h, T, hd] views over [B, T, h, hd]
 * storage, each its storage's only holder. */
static void sdpa_bwd(struct bld *b, struct sdpa_saved *s, T dm, T gv[3])
{
	const struct ag_tensor q_ = b->s->tensor[s->q], *qt = &q_; /* a copy: the array grows */
	uint64_t B = qt->shape[0], h = qt->shape[1], Tn = qt->shape[2], hd = qt->shape[3], d = h * hd;
	enum ag_dtype dt = qt->dtype;
	const int64_t *bthd = (const int64_t[]){ (int64_t)(Tn * d), (int64_t)hd, (int64_t)d, 1 };
	T g = vw(b, dm, 4, SH(B, h, Tn, hd), bthd, 0);
	T st_[3];
	static const char *what[3] = { "_scaled_dot_product_flash_attention_for_cpu_backward (dq)",
		                       "_scaled_dot_product_flash_attention_for_cpu_backward (dk)",
		                       "_scaled_dot_product_flash_attention_for_cpu_backward (dv)" };
	for (int j = 0; j < 3; j++) {
		st_[j] = TMP(what[j], dt, B, Tn, h, hd);
		gv[j] = vw(b, st_[j], 4, SH(B, h, Tn, hd), bthd, 0);
	}
	uint64_t qs = flash_qsplit(Tn), kvs = flash_kvsplit(Tn);
	T ws = TMP("_scaled_dot_product_flash_attention_for_cpu_backward (workspace)", AG_F32, 1, 2 * qs * kvs);
	T wr = dt != AG_F32 ? TMP("_scaled_dot_product_flash_attention_for_cpu_backward (buf_reduced)", dt, 1,
	                          2 * qs * kvs)
	                    : NO;
	T dsum = TMP("_scaled_dot_product_flash_attention_for_cpu_backward (row sums)", AG_F32, 1, qs);
	struct ag_event *e = ev(b, AG_EV_OP);
	e->op = AG_OP_SDPA_FLASH_BWD;
	e->in[0] = g, e->in[1] = s->q, e->in[2] = s->k, e->in[3] = s->v, e->in[4] = s->lse;
	e->out[0] = gv[0], e->out[1] = gv[1], e->out[2] = gv[2];
	e->arg[0] = attn_scale(b->m, hd);
	unref(b, dsum);
	if (wr != NO)
		unref(b, wr);
	unref(b, ws);
	unref(b, g);
	unref(b, dm);
	unref(b, s->q);
	unref(b, s->k);
	unref(b, s->v);
	unref(b, s->lse);
	unref(b, s->out);
	for (int j = 0; j < 3; j++)
		unref(b, st_[j]); /* the views hold them now */
}

/* ToCopyBackward of an autocast copy of q or k: the kernel's grad g
 * (a [B, h, T, hd] view over [B, T, h, hd] storage, its holder taken) in
 * fp32; `.to()` keeps a dense tensor's strides (preserve_format), so the
 * copy lies as g does. */
static T sdpa_grad_back(struct bld *b, T g)
{
	const struct ag_tensor g_ = b->s->tensor[g], *gt = &g_; /* a copy: the array grows */
	uint64_t B = gt->shape[0], h = gt->shape[1], Tn = gt->shape[2], hd = gt->shape[3], d = h * hd;
	T st = TMP("_to_copy (ToCopyBackward)", AG_F32, B, Tn, h, hd);
	T c = vw(b, st, 4, SH(B, h, Tn, hd), (const int64_t[]){ (int64_t)(Tn * d), (int64_t)hd, (int64_t)d, 1 }, 0);
	unref(b, st);
	op(b, AG_OP_COPY, g, NO, NO, c, NO, NO);
	unref(b, g);
	return c;
}

/* GPT-2's: SplitBackward's cat of dq, dk, dv read as [B, T, d] (views: no
 * copy; their dtype: bf16 under autocast, as c_attn's output). Returns
 * qkv's gradient [B, T, 3d]. */
static T gpt2_sdpa_bwd(struct bld *b, struct sdpa_saved *s, T dm)
{
	const struct ag_tensor q_ = b->s->tensor[s->q], *qt = &q_; /* a copy: the array grows */
	uint64_t B = qt->shape[0], Tn = qt->shape[2], d = qt->shape[1] * qt->shape[3];
	T gv[3], c[3];
	sdpa_bwd(b, s, dm, gv);
	T dqkv = TMP("cat (split backward)", qt->dtype, B, Tn, 3 * d);
	for (int j = 0; j < 3; j++) {
		c[j] = reshape(b, gv[j], 3, SH(B, Tn, d));
		unref(b, gv[j]);
	}
	op(b, AG_OP_CAT_LAST, c[0], c[1], c[2], dqkv, NO, NO);
	for (int j = 0; j < 3; j++)
		unref(b, c[j]);
	return dqkv;
}

static T expand_kv(struct bld *b, T x, uint64_t rep);

/* What the math path's nodes keep (NO: not kept): bmm(q, k^T)'s operands
 * (matmul's copy of q·√scale, k^T·√scale or its copy), bmm(weights, v)'s
 * (the weights, the dropout's output where it runs, and v: repeated, or
 * matmul's copy), _safe_softmax's result, the dropout's noise. */
struct sdpa_math {
	T q, kt, attw, sm, v, drop;
};

/* SDPA's math path, PyTorch 2.6.0's _scaled_dot_product_attention_math
 * (aten/src/ATen/native/transformers/attention.cpp), taken on the CPU
 * where the flash kernel is not (sdp_utils_cpp's use_flash_attention_cpp:
 * fewer k/v heads than heads, which check_batch_size_and_num_heads_dense
 * refuses in 2.6, or dropout_p > 0, which check_for_dropout refuses;
 * _scaled_dot_product_flash_attention_cpu checks dropout_p == 0 too), as
 * 2.6's allocator records it: q · √scale (mul.Scalar: the wrapped number
 * and its fp32 copy), the causal mask (ones(T, T) bool, tril, two
 * scalar_tensors, where: a float T×T of 0 and -inf), k and v
 * repeat_interleave'd where rep > 1 (unsqueeze, expand, clone: a copy
 * each, no slice; rep 1: k and v as they are), k^T · √scale, matmul (q's
 * product copied where its layout makes the batch dims unmergeable; k^T's
 * a view of the repeat's contiguous product, a copy of GPT-2's, which
 * lies as q's), the mask added out of place, _safe_softmax (softmax, then
 * its bool isneginf map [B, h, T, T], the all-masked rows [B, h, T, 1] and
 * a scalar zero for the moment), with the config's attention dropout
 * at::dropout(attn, p, true) (the CPU's noise of the weights' dtype and
 * the product: dropout()), matmul with v (repeated: a view; as it is:
 * bmm_operand's copy). q·√scale, k repeated and the mask go as it
 * returns; autograd keeps matmul's operands, the softmax's result and the
 * noise, none of q, k, v. kk: k requires grad. Returns the merged heads
 * [B, T, h·hd] (transpose(1, 2).contiguous(): a copy). qcontig: q lies
 * contiguous as [B, h, T, hd] (phi3's cat). */
static T sdpa_math(struct bld *b, struct sdpa_math *s, int kk, T qe, T ke, T vt, uint64_t rep, int qcontig)
{
	/* no node where none of q, k, v requires grad (a frozen layer over
	 * an input that requires none): as under no_grad, nothing kept */
	int none = b->nograd || !(RG(b, qe) || RG(b, ke) || RG(b, vt));
	const struct ag_tensor q_ = b->s->tensor[qe], *qt = &q_; /* a copy: the array grows */
	uint64_t B = qt->shape[0], h = qt->shape[1], Tn = qt->shape[2], hd = qt->shape[3];
	double rs = sqrt(attn_scale(b->m, hd)); /* calculate_scale(...).sqrt() */
	T qs = scalar_op(b, AG_OP_MUL_SCALAR, "mul (q * sqrt(scale))", qe, rs, NULL);
	/* is_causal: ones(L, S, bool).tril(), convert_boolean_attn_mask's where */
	T ones = TMP("ones (causal mask)", AG_BOOL, Tn, Tn);
	op(b, AG_OP_FILL, NO, NO, NO, ones, NO, NO)->arg[0] = 1;
	T tril = TMP("tril (causal mask)", AG_BOOL, Tn, Tn);
	op(b, AG_OP_TRIL_MASK, ones, NO, NO, tril, NO, NO);
	unref(b, ones);
	T ninf = tmp(b, "scalar_tensor (-inf)", AG_F32, 0, NULL);
	op(b, AG_OP_FILL, NO, NO, NO, ninf, NO, NO)->arg[0] = -INFINITY;
	T zero = tmp(b, "scalar_tensor (0)", AG_F32, 0, NULL);
	op(b, AG_OP_FILL, NO, NO, NO, zero, NO, NO)->arg[0] = 0;
	T mask = TMP("where (causal mask)", AG_F32, Tn, Tn);
	op(b, AG_OP_CAUSAL_ADD_MASK, tril, NO, NO, mask, NO, NO)->arg[0] = -INFINITY;
	unref(b, ninf);
	unref(b, zero);
	unref(b, tril);
	/* repeat_interleave(rep, -3): k, then v (rep 1: pre_process_group_
	 * query_attention_input returns them as they are) */
	T kr = ke, vr = vt;
	if (rep > 1) {
		kr = TMP("clone (repeat_interleave k)", AG_F32, B, h, Tn, hd);
		T kx = expand_kv(b, ke, rep);
		op(b, AG_OP_COPY, kx, NO, NO, kr, NO, NO);
		unref(b, kx);
		vr = TMP("clone (repeat_interleave v)", AG_F32, B, h, Tn, hd);
		T vx = expand_kv(b, vt, rep);
		op(b, AG_OP_COPY, vx, NO, NO, vr, NO, NO);
		unref(b, vx);
	} else {
		ref(b, kr);
		ref(b, vr);
	}
	/* key.transpose(-2, -1) * √scale: the product keeps k's layout:
	 * the repeat's contiguous [B, h, T, hd], so bmm reads its transpose
	 * as a view; GPT-2's k (a permuted view of c_attn's output) lies as
	 * [B, T, h, hd], and matmul copies it as it copies q's below */
	T ks = scalar_op(b, AG_OP_MUL_SCALAR, "mul (k^T * sqrt(scale))", kr, rs, NULL);
	int kcopy = rep == 1 && rope_sum_copies(B, h, Tn, hd);
	T ktv = kcopy ? vw(b, ks, 4, SH(B, h, hd, Tn), (const int64_t[]){ (int64_t)(h * Tn * hd), (int64_t)(Tn * hd), 1,
	                                                                    (int64_t)hd }, 0)
	              : vw(b, ks, 3, SH(B * h, hd, Tn), (const int64_t[]){ (int64_t)(Tn * hd), 1, (int64_t)hd }, 0);
	unref(b, ks);
	/* q·√scale keeps q's layout: the rope's transposed one (GPT-2's
	 * permuted view the same), which matmul copies; phi3's cat (qcontig)
	 * a contiguous one, which it views */
	T qc = matmul_operand(b, qs, !qcontig && rope_sum_copies(B, h, Tn, hd), "clone (matmul's copy of q * sqrt(scale))");
	T kt4 = NO;
	if (kcopy) {
		kt4 = ktv;
		ktv = matmul_operand(b, kt4, 1, "clone (matmul's copy of k^T * sqrt(scale))");
	}
	T sc = TMP("bmm (q k^T)", AG_F32, B * h, Tn, Tn);
	op(b, AG_OP_BMM, qc, ktv, NO, sc, NO, NO);
	if (kt4 != NO) /* the product, a temporary of the expression, goes as matmul returns */
		unref(b, kt4);
	if (none) { /* no MmBackward: matmul's copy goes as it returns, k^T·√scale with the expression */
		unref(b, qc);
		unref(b, ktv);
		qc = ktv = NO;
	} else if (!kk) {
		/* k requires no grad (a frozen k_proj over an input that requires
		 * none: LoRA on q and v, --freeze): bmm's node keeps k^T·√scale
		 * for q's gradient and not q's copy, which only k's needed
		 * (derivatives.yaml 2.6.0 lines 378-380, bmm: self's formula
		 * takes mat2, mat2's takes self; the generated node saves each
		 * only where the other's gradient is computed, as eager's
		 * qv_only); the copy goes as matmul returns */
		unref(b, qc);
		qc = NO;
	}
	/* attn.add_(*attn_mask): in place (2.6's clean step; under a
	 * TorchDispatchMode, hf_torch.py --trace's traced step,
	 * areAnyTensorSubclassLike holds and it adds out of place) */
	T mv = vw(b, mask, 4, SH(B, h, Tn, Tn), (const int64_t[]){ 0, 0, (int64_t)Tn, 1 }, 0);
	T am = reshape(b, sc, 4, SH(B, h, Tn, Tn));
	op(b, AG_OP_ADD, am, mv, NO, am, NO, NO)->arg[0] = 1;
	unref(b, mv);
	unref(b, sc);
	T sm = TMP("_safe_softmax", AG_F32, B, h, Tn, Tn);
	op(b, AG_OP_SOFTMAX, am, NO, NO, sm, NO, NO);
	/* its masked rows: none under a causal mask (the diagonal stays) */
	T ni = TMP("_safe_softmax (isneginf)", AG_BOOL, B, h, Tn, Tn);
	T rows = TMP("_safe_softmax (all rows masked)", AG_BOOL, B, h, Tn, 1);
	T z = tmp(b, "_safe_softmax (zero)", AG_F32, 0, NULL);
	unref(b, z);
	unref(b, rows);
	unref(b, ni);
	unref(b, am);
	/* dropout_p > 0: attn = at::dropout(attn, dropout_p, true), the
	 * softmax's result then held by its node alone (the name rebound) */
	T drop = NO;
	T smd = dropout(b, sm, b->m->attn_pdrop, &drop);
	if (smd != sm && none) {
		unref(b, sm);
		sm = NO;
	}
	T sm3 = reshape(b, smd, 3, SH(B * h, Tn, Tn));
	unref(b, smd);
	T vr3 = rep > 1 ? reshape(b, vr, 3, SH(B * h, Tn, hd)) : bmm_operand(b, vr, "clone (matmul's copy of v)");
	unref(b, vr);
	T ao = TMP("bmm (attention x v)", AG_F32, B * h, Tn, hd);
	op(b, AG_OP_BMM, sm3, vr3, NO, ao, NO, NO);
	/* the function returns: q·√scale, k repeated and the mask go */
	unref(b, qs);
	unref(b, kr);
	unref(b, mask);
	if (none) { /* nothing kept: v repeated goes with the function, the weights with its tuple */
		unref(b, vr3);
		unref(b, sm3);
		if (sm != NO)
			unref(b, sm);
		vr3 = sm3 = sm = NO;
	}
	s->q = qc, s->kt = ktv, s->attw = sm3, s->sm = sm, s->v = vr3, s->drop = drop;
	T aot = vw(b, ao, 4, SH(B, Tn, h, hd), (const int64_t[]){ (int64_t)(h * Tn * hd), (int64_t)hd,
	                                                           (int64_t)(Tn * hd), 1 }, 0);
	T ac = TMP("clone (transpose(1, 2).contiguous())", AG_F32, B, Tn, h * hd);
	op(b, AG_OP_COPY, aot, NO, NO, ac, NO, NO);
	unref(b, aot);
	unref(b, ao);
	return ac;
}

/* The math path's backward from the merged heads' gradient dac (its
 * holder taken), in 2.6's order (autograd runs the later-made node
 * first): bmm(weights, v)'s, the dropout's MulBackward and
 * _safe_softmax's (attn_v_bwd, the heads' grad copied as bmm takes it),
 * AddBackward passing, bmm(q, k^T)'s (qk_bwd), k^T·√scale's MulBackward.
 * *dqc: the gradient of matmul's q operand [B·h, T, hd]; *dks: k^T·√scale's
 * input gradient [B·h, hd, T] (NO: k requires no grad); *dvr: v's as bmm
 * took it [B·h, T, hd]. The saved set let go. */
static void sdpa_math_bwd_core(struct bld *b, struct sdpa_math *s, T dac, uint64_t B, uint64_t h, uint64_t Tn,
                               uint64_t hd, T *dqc, T *dks, T *dvr)
{
	T dam = attn_v_bwd(b, dac, s->attw, s->sm, s->drop, s->v, B, h, Tn, hd, dvr, 0);
	T dkt;
	qk_bwd(b, dam, s->q, s->kt, B * h, Tn, hd, dqc, &dkt);
	s->q = s->kt = s->attw = s->sm = s->v = s->drop = NO;
	/* k requires no grad: no node of k's (qk_bwd gave no dkt) */
	*dks = NO;
	if (dkt != NO) {
		*dks = scalar_op(b, AG_OP_MUL_SCALAR, "mul (k^T * sqrt(scale) backward)", dkt,
		                 sqrt(attn_scale(b->m, hd)), NULL);
		unref(b, dkt);
	}
}

/* q·√scale's MulBackward: the gradient of q from its product's (dqc,
 * its holder taken). */
static T sdpa_q_scale_bwd(struct bld *b, T dqc, uint64_t hd)
{
	T dqs = scalar_op(b, AG_OP_MUL_SCALAR, "mul (q * sqrt(scale) backward)", dqc, sqrt(attn_scale(b->m, hd)), NULL);
	unref(b, dqc);
	return dqs;
}

/* GPT-2's causal condition for block l, bias[:, :, :T, :T]: a [1, 1, T, T]
 * view of its `bias` buffer ([1, 1, P, P] bool), as the forward's
 * torch.where and WhereBackward take it. One holder, the caller's. */
static T gpt2_causal_view(struct bld *b, const struct model *M, uint64_t l, uint64_t Tn)
{
	const uint64_t P_ = b->m->positions;
	return vw(b, M->bias[l], 4, SH(1, 1, Tn, Tn),
	          (const int64_t[]){ (int64_t)(P_ * P_), (int64_t)(P_ * P_), (int64_t)P_, 1 }, 0);
}

/* ------------------------------------------------------------------------ */
/* Activation checkpointing (ag_options.recompute; docs/torch_saved.md,
 * "Activation checkpointing"): 1.13's CheckpointFunction
 * (torch/utils/checkpoint.py 74-162), as Hugging Face's
 * gradient_checkpointing_enable calls it (use_reentrant=True,
 * preserve_rng_state). */

/* A family's decoder layer as the loop calls it: fwd(b, M, i, hs, ctx)
 * is layer i's forward over hs (its holder taken), returning its output
 * (one holder); bwd(b, M, i, g, ctx) its backward from g (taken),
 * returning the input's gradient (NO where it requires none). */
struct layer_fns {
	T (*fwd)(struct bld *b, struct model *M, int i, T hs, void *ctx);
	T (*bwd)(struct bld *b, struct model *M, int i, T g, void *ctx);
	void *ctx;
	/* checkpointed, what layer i's call gives its ctx besides the hidden
	 * states (fills c's fn, in and sv; NULL: nothing) */
	void (*hold)(const struct bld *b, int i, struct ckpt_ctx *c, const void *ctx);
};

/* torch.get_rng_state(): the CPU generator's state, a uint8 tensor of
 * 5,056 bytes on the CPU, which checkpointing takes in forward and
 * fork_rng in the rerun. Under --torch-device cuda it is host memory (a
 * CPU tensor: host_scalar's mark), and so are the CUDA generators' states
 * checkpoint.py takes beside it (get_device_states -> torch.cuda
 * .get_rng_state(), whose CUDAGeneratorImpl::get_state fills a CPU byte
 * tensor; fork_rng's device_rng_states), left out of the list: 0 device
 * bytes (torch/utils/checkpoint.py 2.6.0: 237, 246, 1489, 1498; 1.13.0:
 * 81, 89, 344, 353; torch/random.py 2.6.0 fork_rng 195-196). */
static T rng_state(struct bld *b, const char *what)
{
	return host_scalar(b, TMP(what, AG_U8, 5056));
}

/* Layer i's forward; checkpointed where saved != NULL (its input kept in
 * saved[i]): CheckpointFunction.forward -- ctx.fwd_cpu_state =
 * torch.get_rng_state() (the CPU generator's state, a uint8 tensor of
 * 5,056 bytes, held by ctx until the graph goes with the loss; the
 * dropout draws so far, for the rerun), save_for_backward(hs and the
 * other tensor arguments), what the call binds (f->hold: M->ck[i]), the
 * layer under no_grad (nothing requires grad, no node keeps anything);
 * the Function's output requires grad. */
static T layer_fwd(struct bld *b, struct model *M, const struct layer_fns *f, T *saved, int i, T hs)
{
	if (!saved)
		return f->fwd(b, M, i, hs, f->ctx);
	if ((size_t)i >= M->ckcap)
		M->ck = grow(M->ck, &M->ckcap, (size_t)i + 1, sizeof *M->ck);
	struct ckpt_ctx *c = &M->ck[i];
	*c = (struct ckpt_ctx){ .rng = rng_state(b, "get_rng_state (checkpoint's fwd_cpu_state)"), .x = NO,
	                        .draws0 = b->draws, .nwn = 0 };
	if (f->hold)
		f->hold(b, i, c, f->ctx);
	for (unsigned k = 0; k < c->nfn; k++)
		ref(b, c->fn[k]);
	for (unsigned k = 0; k < c->nin; k++)
		ref(b, c->in[k]);
	for (unsigned k = 0; k < c->nsv; k++)
		ref(b, c->sv[k]);
	M->nck = (size_t)i + 1;
	saved[i] = hs;
	ref(b, hs);
	if (b->o->nonreentrant)
		c->x = hs;
	/* non-reentrant: the layer runs with grad, every tensor a node saves
	 * packed into a holder (1.13's pack, checkpoint.py 370-374; 2.6's
	 * _checkpoint_hook, 1101-1109): no node keeps bytes, as under
	 * no_grad. The input is the frame's (1.13: unpack's closure over
	 * args; 2.6: _NoopSaveInputs' saved tensors, 1441-1470 and 778-808,
	 * its dummy and output 0 bytes), held here as ctx's was. */
	b->nograd = 1;
	b->nrc = b->o->nonreentrant ? c : NULL;
	T out = f->fwd(b, M, i, hs, f->ctx);
	b->nrc = NULL;
	b->nograd = 0;
	b->rg[out] = b->rg[sto(b, out)] = 1;
	return out;
}

/* Non-reentrant (ag_options.nonreentrant): layer i's frame goes as the
 * last node that saved a tensor in its rerun releases it (the engine's
 * release_variables; the SavedVariables' hooks held the frame): 1.13's
 * unpack closure lets go of its cells last name first (fwd_cpu_state,
 * then function -- the partial's bound tensors --, then args), 2.6's
 * _CheckpointFrame of its attributes in the order set (recompute_fn's
 * closure: fwd_cpu_state, fn; then input_saver: the saved inputs);
 * both: the RNG state, what the call binds, the hidden states, the
 * other tensor arguments, the non-tensor arguments' tensors. */
static void ck_frame_goes(struct bld *b)
{
	struct model *M = b->ckM;
	struct ckpt_ctx *c = &M->ck[b->ckl];
	free(b->ckd);
	b->ckd = NULL;
	b->nckd = 0;
	b->ckM = NULL;
	unref(b, c->rng);
	for (unsigned k = c->nfn; k-- > 0;)
		unref(b, c->fn[k]);
	unref(b, c->x);
	for (unsigned k = 0; k < c->nsv; k++)
		unref(b, c->sv[k]);
	for (unsigned k = c->nin; k-- > 0;)
		unref(b, c->in[k]);
	c->rng = NO; /* gone: graph_goes passes it */
}

/* 2.x's early stop (_enable_checkpoint_early_stop, checkpoint.py 735;
 * _recomputation_hook, 1051-1097: once the rerun has packed as many
 * tensors as the forward did it raises _StopRecomputationError, caught in
 * unpack_hook 1120-1127), derived from the layer's saved set, no family
 * placing it: the builder runs the rerun to its end (as 1.13 does) over
 * events [r0, r2), then, once the layer's backward has run, cuts the
 * rerun where its last pack was. The last node that saves is the first
 * that the engine runs of those that saved (sequence numbers, highest
 * first), so its saved tensors are the first of the rerun's holders
 * (ckd) a node lets go: nrfirst, a wrapped number left out (2.x's
 * SavedVariable packs none: nr_wrapped). The op that saved it is the
 * rerun's last OP event over it: its pack comes before its output is
 * made (a node packs its inputs first) -- the cut at its output's
 * allocation --, or after its kernel where the node keeps its output too
 * (kept, the rerun's holders). From the cut the rerun made nothing:
 * every ALLOC, OP and MARK after it goes, and the storages it allocated
 * never were; the unwinding frees fork_rng's state first, then the
 * forward's wrapped numbers (nr_wrapped: the rerun's graph's), then what
 * existed as the frames let go, in the order the builder freed it.
 * Returns the number of events taken out (the list moved down). */
static size_t ckpt_early_stop(struct bld *b, size_t r0, size_t r2, T fork, const T *wn, unsigned nwn,
                              const unsigned char *kept, size_t nkept)
{
	struct ag_event *ev_ = *b->list;
	size_t n = *b->n, at = r2;
	T s = b->nrfirst;
	for (size_t k = r2; s != NO && k-- > r0;) {
		const struct ag_event *e = &ev_[k];
		if (e->kind != AG_EV_OP)
			continue;
		int in = 0, out = 0;
		for (int j = 0; j < AG_MAXIN; j++)
			in |= e->in[j] != NO && sto(b, e->in[j]) == s;
		for (int j = 0; j < AG_MAXOUT; j++)
			out |= e->out[j] != NO && sto(b, e->out[j]) == s;
		if (!in && !out)
			continue;
		at = k;
		break;
	}
	if (at == r2) {
		unsupported(b, "--recompute-impl non-reentrant: no op of the rerun saved what the layer's backward "
		               "first released");
		return 0;
	}
	const struct ag_event *e = &ev_[at];
	int keeps_out = 0;
	for (int j = 0; j < AG_MAXOUT; j++)
		keeps_out |= e->out[j] != NO && sto(b, e->out[j]) < nkept && kept[sto(b, e->out[j])];
	size_t cut = at + 1;
	if (!keeps_out) /* before its output's allocation */
		for (cut = at; cut > r0 && ev_[cut - 1].kind == AG_EV_ALLOC;) {
			int mine = 0;
			for (int j = 0; j < AG_MAXOUT; j++)
				mine |= e->out[j] != NO && sto(b, e->out[j]) == ev_[cut - 1].t;
			if (!mine)
				break;
			cut--;
		}
	/* the storages made after the cut, which never were */
	unsigned char *gone = zs_calloc(b->s->ntensors ? b->s->ntensors : 1, 1);
	for (size_t k = cut; k < r2; k++)
		if (ev_[k].kind == AG_EV_ALLOC) {
			gone[ev_[k].t] = 1;
			if (ev_[k].t < nkept && kept[ev_[k].t])
				unsupported(b, "--recompute-impl non-reentrant: a tensor the rerun keeps after its early stop");
		}
	struct ag_event *tail = zs_malloc((r2 - cut ? r2 - cut : 1) * sizeof *tail);
	size_t nt = 0;
	for (int pass = 0; pass < 3; pass++) /* fork_rng's state, the wrapped numbers, the rest */
		for (size_t k = cut; k < r2; k++) {
			const struct ag_event *x = &ev_[k];
			if (x->kind != AG_EV_FREE || gone[x->t])
				continue;
			int w = 0;
			for (unsigned j = 0; j < nwn; j++)
				w |= x->t == sto(b, wn[j]);
			if ((pass == 0) == (x->t == fork) && (pass == 0 || (pass == 1) == w))
				tail[nt++] = *x;
		}
	memcpy(ev_ + cut, tail, nt * sizeof *tail);
	memmove(ev_ + cut + nt, ev_ + r2, (n - r2) * sizeof *ev_);
	*b->n = n - (r2 - cut - nt);
	free(tail);
	free(gone);
	return r2 - cut - nt;
}

/* The layer's nodes that the engine runs before the first that saved a
 * tensor run before the rerun, which that node's unpack starts: the
 * residual add's AddBackward0, whose gradient for a 16-bit operand under
 * autocast is cast (the engine's validate_outputs) before the rerun and
 * lives through it; under 2.x also a LoRA adapter's MulBackward0 over the
 * layer's last linear (its wrapped number saved without the hooks:
 * lora_wk), 1.13's unpacking it. The builder runs the layer's backward
 * after the rerun; the backward names where each such node ends
 * (nr_unpack_at, the last before a node that saved has released, its
 * event index in nrun_at), and the events from r2 to there move to before
 * the rerun's first event, rf (fork_rng's state). */
static void nr_unpack_at(struct bld *b)
{
	if (b->nrun_on && b->nrfirst == NO)
		b->nrun_at = *b->n;
}

static void nr_before_unpack(struct bld *b, size_t rf, size_t r2, size_t u)
{
	struct ag_event *ev_ = *b->list;
	if (u == SIZE_MAX || u <= r2)
		return;
	struct ag_event *tmp_ = zs_malloc((u - r2) * sizeof *tmp_);
	memcpy(tmp_, ev_ + r2, (u - r2) * sizeof *tmp_);
	memmove(ev_ + rf + (u - r2), ev_ + rf, (r2 - rf) * sizeof *ev_);
	memcpy(ev_ + rf, tmp_, (u - r2) * sizeof *tmp_);
	free(tmp_);
}

/* Layer i's backward from g, checkpointed without reentrance
 * (ag_options.nonreentrant), after its marks: the loop's own engine runs
 * the layer's nodes; the first that saved a tensor unpacks it, and the
 * rerun happens there, before any of them allocates (the output's
 * AddBackward saves nothing) -- 1.13's unpack (checkpoint.py 379-412):
 * fork_rng's get_rng_state, set_rng_state, the layer under enable_grad,
 * each saved tensor's detached view kept by `storage` until its node
 * releases it, fork_rng's state going as the `with` exits and the
 * rerun's output (_unused) as unpack returns; 2.6's unpack_hook
 * (1111-1135) -> recompute_fn (1500-1517): the same, stopped early
 * (ckpt_early_stop). Then the layer's backward, the frame going as its
 * last saving node releases (ck_frame_goes). */
static T layer_bwd_nonreentrant(struct bld *b, struct model *M, const struct layer_fns *f, const T *saved, int i, T g)
{
	size_t n0 = b->s->ntensors;
	uint32_t *before = zs_calloc(n0 ? n0 : 1, sizeof *before);
	memcpy(before, b->refs, n0 * sizeof *before);
	size_t rf = *b->n;
	b->fork = rng_state(b, "get_rng_state (fork_rng)");
	T fork = b->fork;
	T x = saved[i];
	ref(b, x); /* the call's argument (args, from the frame) */
	b->nrc = &M->ck[i];
	b->regrad = 1;
	uint32_t draws = b->draws;
	b->draws = M->ck[i].draws0; /* set_rng_state(fwd_cpu_state): the forward's masks again */
	size_t r0 = *b->n;
	struct ag_event **list = b->list;
	T out = f->fwd(b, M, i, x, f->ctx);
	b->draws = draws;
	b->regrad = 0;
	b->nrc = NULL;
	/* under autocast the rerun is a region of its own (1.13 checkpoint.py
	 * 404-406: torch.cpu.amp.autocast(**cpu_autocast_kwargs) around the
	 * function; 2.6 1510-1515): its cache of cast weights goes as it
	 * exits, the nodes keeping the copies they saved */
	ac_clear(b, M);
	int stop = b->o->version != ZS_TORCH_1_13; /* 1.13 has no early stop: the rerun runs to its end */
	unref(b, b->fork);
	b->fork = NO;
	T wn[sizeof M->ck[i].wn / sizeof *M->ck[i].wn];
	unsigned nwn = 0;
	if (stop) { /* the rerun's graph's wrapped numbers (nr_wrapped), let go at the stop */
		for (unsigned k = 0; k < M->ck[i].nwn; k++)
			unref(b, wn[nwn++] = M->ck[i].wn[k]);
		M->ck[i].nwn = 0;
	}
	unref(b, out);
	size_t r2 = *b->n;
	/* what the rerun's nodes keep: each storage's holders it added */
	b->nckd = b->s->ntensors;
	b->ckd = zs_calloc(b->nckd, sizeof *b->ckd);
	unsigned char *kept = zs_calloc(b->nckd ? b->nckd : 1, 1);
	size_t nkept = b->nckd;
	uint64_t left = 0;
	for (size_t s = 0; s < b->nckd; s++) {
		uint32_t was = s < n0 ? before[s] : 0;
		if (b->refs[s] > was) {
			b->ckd[s] = b->refs[s] - was;
			kept[s] = 1;
			left += b->ckd[s];
		}
	}
	free(before);
	b->ckleft = left, b->ckl = i, b->ckM = M;
	b->nrfirst = NO;
	b->nrun_at = SIZE_MAX;
	b->nrun_on = 1;
	if (!left)
		ck_frame_goes(b);
	b->nrunpack = b->o->version != ZS_TORCH_1_13;
	T gin = f->bwd(b, M, i, g, f->ctx);
	b->nrunpack = 0;
	b->nrun_on = 0;
	if (b->ckd) { /* a holder the rerun added outlived the layer's nodes */
		unsupported(b, "--recompute-impl non-reentrant: the frame outlives the layer's backward");
		ck_frame_goes(b);
	}
	if (b->list != list)
		unsupported(b, "--recompute-impl non-reentrant: a layer's backward over two lists");
	else {
		size_t gone = stop ? ckpt_early_stop(b, r0, r2, fork, wn, nwn, kept, nkept) : 0;
		nr_before_unpack(b, rf, r2 - gone, b->nrun_at == SIZE_MAX ? SIZE_MAX : b->nrun_at - gone);
	}
	b->nrun_at = SIZE_MAX;
	b->nrfirst = NO;
	free(kept);
	return gin;
}

/* Layer i's backward from g, between its marks (the reference's hooks:
 * "bwd:UNIT.i:start" on its output, the end of the unit above -- `above`
 * over the last of L layers -- on its input). Checkpointed,
 * CheckpointFunction.backward: the output made under no_grad had no hook;
 * fork_rng's torch.get_rng_state() while the `with` lasts; set_rng_state
 * (no bytes: the draws set back to the forward's, so its dropouts draw
 * the same masks); detach_variable (a view of the saved input that
 * requires grad, held by the detached_inputs tuple); the layer again with
 * requires_grad following the ops ("refwd:" marks), inside an autocast
 * region of its own under autocast (ctx's autocast kwargs: its cache
 * cleared as the region exits, before the nested backward); then
 * torch.autograd.backward(outputs, args) -- the args tuple holds g --,
 * AccumulateGrad taking the input's fresh gradient itself as the
 * detached view's .grad; as it returns the rerun's output, g, the
 * detached view and ctx's saved input go. */
static T layer_bwd(struct bld *b, struct model *M, const struct layer_fns *f, const T *saved, int i, int L,
                   const char *unit, const char *above, T g)
{
	if (!saved || b->o->nonreentrant) /* non-reentrant: the output's hook, before the nodes run */
		mark(b, "bwd:%s.%d:start", unit, i);
	if (i == L - 1)
		mark(b, "bwd:%s:end", above);
	else
		mark(b, "bwd:%s.%d:end", unit, i + 1);
	if (!saved)
		return f->bwd(b, M, i, g, f->ctx);
	if (b->o->nonreentrant)
		return layer_bwd_nonreentrant(b, M, f, saved, i, g);
	T fork = rng_state(b, "get_rng_state (fork_rng)");
	const struct ag_tensor x_ = b->s->tensor[saved[i]], *x = &x_; /* a copy: the array grows */
	T det = reshape(b, saved[i], x->ndim, x->shape);
	b->rg[det] = 1;
	ref(b, det); /* the layer's argument; the tuple's holder stays */
	b->regrad = 1;
	uint32_t draws = b->draws;
	b->draws = M->ck[i].draws0; /* set_rng_state(ctx.fwd_cpu_state): the forward's masks again */
	T out = f->fwd(b, M, i, det, f->ctx);
	b->draws = draws;
	b->regrad = 0;
	ac_clear(b, M); /* the rerun's autocast region exits: its own casts' cache goes */
	unref(b, fork);
	mark(b, "bwd:%s.%d:start", unit, i);
	ref(b, g); /* the args tuple's */
	T gin = f->bwd(b, M, i, g, f->ctx);
	unref(b, out);
	unref(b, g);
	unref(b, det);
	unref(b, saved[i]);
	const struct ckpt_ctx *c = &M->ck[i];
	for (unsigned k = 0; k < c->nsv; k++)
		unref(b, c->sv[k]);
	return gin;
}

/* transformers' enable_input_require_grads, which gradient_checkpointing_enable
 * calls with use_reentrant (the default it passes) and PEFT calls as it
 * prepares a model for checkpointing (peft/peft_model.py 726-740,
 * peft/utils/other.py 225-239 at 5d602fdbf): a forward hook on the input
 * embeddings, output.requires_grad_(True). Over a frozen table the lookup
 * ie is then a leaf that requires grad, so the checkpointed layers' input
 * does and their parameters get gradients; the leaf's AccumulateGrad,
 * which the graph holds, keeps it. With a trainable table the hook
 * changes nothing. */
static void input_require_grads(struct bld *b, struct model *M, const struct pt *table, T ie)
{
	if (!b->o->recompute || !table->frozen)
		return;
	b->rg[ie] = b->rg[sto(b, ie)] = 1;
	ref(b, ie);
	M->leaf = ie;
}

/* The leaf's AccumulateGrad over g (taken), the gradient that reached
 * input_require_grads' leaf: the first one, stolen as its .grad (no copy:
 * nothing else holds it, traced). */
static void leaf_grad(struct model *M, T g)
{
	M->leafgrad = g;
}

/* `del loss` (the loop's outputs let go): the graph goes before the loss's
 * storage (TensorImpl's release_resources), and with it each checkpoint's
 * ctx, the last layer's first, and input_require_grads' AccumulateGrad
 * (its leaf, then the leaf's .grad); the checkpoints' state starts again
 * for the next micro-step. */
static void graph_goes(struct bld *b, struct model *M)
{
	for (size_t i = M->nck; i-- > 0;) {
		/* a ctx's attributes in the order set (checkpoint.py 1.13 76-99,
		 * 2.6 229-257): run_function (its bound tensors), fwd_cpu_state,
		 * inputs (a list and tuples: last item first) */
		const struct ckpt_ctx *c = &M->ck[i];
		if (c->rng == NO) /* non-reentrant: its frame went with its backward (ck_frame_goes) */
			continue;
		for (unsigned k = c->nfn; k-- > 0;)
			unref(b, c->fn[k]);
		unref(b, c->rng);
		for (unsigned k = c->nin; k-- > 0;)
			unref(b, c->in[k]);
	}
	M->nck = 0;
	if (M->leaf != NO) {
		unref(b, M->leaf);
		if (M->leafgrad != NO)
			unref(b, M->leafgrad);
	}
	M->leaf = M->leafgrad = NO;
}

/* GPT2Block.forward (block i over hs, its holder taken): the block's
 * output, one holder; what autograd keeps in *s. */
static T gpt2_block_fwd(struct bld *b, struct model *M, struct gpt2_block_saved *s, int i, T hs)
{
	const struct zs_model *m = b->m;
	uint64_t B = b->o->batch, Tn = b->o->seq, d = m->hidden, h = m->heads, hd = m->head_dim;
	uint64_t l = (uint64_t)i;
	mark(b, "fwd:h.%d:start", i);
	/* the caller's `hidden_states` holds the block's input until the
	 * block returns (no event where a node keeps it anyway) */
	T hin = hs;
	ref(b, hin);
	/* residual = h; h = ln_1(h) */
	b->module = modname(b, "transformer.h.%d.ln_1", i);
	ds3_mark(b, "fwd", "transformer.h.%d.ln_1", i);
	T x1 = layer_norm(b, hs, blk(M, b, i, "ln_1.weight"), blk(M, b, i, "ln_1.bias"), &s->ln1);
	ds3_mark(b, "fwd_end", "transformer.h.%d.ln_1", i);
	T residual = hs; /* the name moves */
	b->module = modname(b, "transformer.h.%d.attn.c_attn", i);
	ds3_mark(b, "fwd", "transformer.h.%d.attn.c_attn", i);
	T qkv = conv1d(b, x1, blk(M, b, i, "attn.c_attn.weight"), blk(M, b, i, "attn.c_attn.bias"),
	               &s->attn_in);
	ds3_mark(b, "fwd_end", "transformer.h.%d.attn.c_attn", i);
	/* the attention's activations are qkv's dtype: bf16 under autocast */
	enum ag_dtype dt = b->s->tensor[qkv].dtype;
	/* split (views) and _split_heads (view, permute): q, k, v are
	 * [B, h, T, hd] views of qkv */
	int64_t st3 = (int64_t)(3 * d);
	T q = vw(b, qkv, 4, SH(B, h, Tn, hd), (const int64_t[]){ (int64_t)Tn * st3, (int64_t)hd, st3, 1 }, 0);
	T k = vw(b, qkv, 4, SH(B, h, Tn, hd), (const int64_t[]){ (int64_t)Tn * st3, (int64_t)hd, st3, 1 }, d);
	T v = vw(b, qkv, 4, SH(B, h, Tn, hd), (const int64_t[]){ (int64_t)Tn * st3, (int64_t)hd, st3, 1 },
	         2 * d);
	unref(b, qkv);
	s->rin = RG(b, hs);
	/* the attention's nodes exist, and keep what they keep, when q, k
	 * and v require grad: all three or none (one c_attn) */
	int ka = s->rqkv = RG(b, qkv);
	/* matmul(q, k^T): both operands to [B·h, T, hd] and [B·h, hd, T]
	 * (expand + reshape of permuted views: copies unless B or h is 1), kept by bmm */
	T merged;
	if (b->o->attn == ZS_ATTN_SDPA && m->attn_pdrop > 0) {
		/* sdpa_attention_forward's dropout (GPT2Attention passes
		 * attn_dropout.p in training): the math path */
		struct sdpa_math ms;
		merged = sdpa_math(b, &ms, ka, q, k, v, 1, 0);
		s->q = ms.q, s->kt = ms.kt, s->attw = ms.attw, s->sm = ms.sm, s->v = ms.v, s->drop_attn = ms.drop;
	} else if (b->o->attn == ZS_ATTN_SDPA) {
		merged = sdpa_fwd(b, &s->sd, q, k, v);
	} else {
		T qc = bmm_operand(b, q, "clone (matmul's copy of q)");
		T kt = transpose_last2(b, k);
		T ktc = bmm_operand(b, kt, "clone (matmul's copy of k^T)");
		unref(b, kt);
		T sc = TMP("bmm (q k^T)", dt, B * h, Tn, Tn);
		op(b, AG_OP_BMM, qc, ktc, NO, sc, NO, NO);
		s->q = qc, s->kt = ktc;
		if (!ka) { /* matmul's copies go when it returns */
			unref(b, qc);
			unref(b, ktc);
			s->q = s->kt = NO;
		}
		/* / torch.full([], sqrt(hd)): the divisor is saved */
		T dv = tmp(b, "full (1/sqrt(hd) divisor)", dt, 0, NULL);
		op(b, AG_OP_FILL, NO, NO, NO, dv, NO, NO)->arg[0] = sqrt((double)hd);
		T aw = TMP("div (scores)", dt, B * h, Tn, Tn);
		op(b, AG_OP_DIV, sc, dv, NO, aw, NO, NO);
		unref(b, sc);
		s->divisor = dv;
		if (!ka) {
			unref(b, dv);
			s->divisor = NO;
		}
		/* torch.where(causal_mask, w, mask_value): the condition is a
		 * view of the `bias` buffer, the only thing saved */
		/* torch.finfo(attn_weights.dtype).min */
		T mv = tmp(b, "full (mask_value)", dt, 0, NULL);
		op(b, AG_OP_FILL, NO, NO, NO, mv, NO, NO)->arg[0] = dt == AG_BF16 ? -3.3895313892515355e38
		                                                   : dt == AG_F16 ? -65504.0
		                                                                   : -3.4028234663852886e38;
		T cm = gpt2_causal_view(b, M, l, Tn);
		T wh = TMP("where (causal mask)", dt, B * h, Tn, Tn);
		op(b, AG_OP_WHERE, cm, aw, mv, wh, NO, NO);
		unref(b, aw);
		/* softmax(dim=-1): on CUDA under autocast in fp32, where the CPU
		 * runs it in bf16: CUDA's fp32_set_opt_dtype list holds softmax
		 * (autocast_mode.h's AT_FORALL_FP32_SET_OPT_DTYPE), so it is
		 * softmax(x, -1, float32), whose SoftMax.cpp softmax() copies a
		 * bf16 input (`input_.toType(dtype)`; Half alone takes
		 * half_to_float) and keeps the fp32 result */
		int sm32 = !promotes_by_copy(b) && b->o->amp != AG_F32;
		T wh32 = sm32 ? to_dtype(b, wh, AG_F32, "_to_copy (softmax in fp32: autocast on CUDA)") : NO;
		T sm = TMP("_softmax", sm32 ? AG_F32 : dt, B * h, Tn, Tn);
		op(b, AG_OP_SOFTMAX, sm32 ? wh32 : wh, NO, NO, sm, NO, NO);
		if (sm32)
			unref(b, wh32); /* softmax's converted input goes as it returns */
		unref(b, wh);
		if (ka)
			ref(b, sm); /* softmax saves its result */
		T smt = sm;
		if (sm32) { /* attn_weights.type(value.dtype): a bf16 copy, the name rebound to it */
			smt = to_dtype(b, sm, dt, "_to_copy (.type(value.dtype))");
			unref(b, sm);
		}
		mark(b, "fwd:h.%d.attn.attn_dropout:start", i);
		T smd = dropout(b, smt, m->attn_pdrop, &s->drop_attn);
		mark(b, "fwd:h.%d.attn.attn_dropout:end", i);
		unref(b, smt); /* the name `attn_weights` is rebound to the dropout's output */
		/* bmm with v saves the weights and v's copy */
		T vc = bmm_operand(b, v, "clone (matmul's copy of v)");
		T ao = TMP("bmm (attention x v)", dt, B * h, Tn, hd);
		op(b, AG_OP_BMM, smd, vc, NO, ao, NO, NO);
		s->attw = smd, s->sm = sm, s->v = vc;
		if (ka)
			ref(b, smd); /* bmm keeps it */
		else {
			unref(b, vc); /* matmul's copy goes when it returns */
			s->attw = s->sm = s->v = NO;
		}
		unref(b, smd); /* the name `attn_weights` goes when _attn returns */
		unref(b, mv); /* _attn returns */
		/* _merge_heads: permute(0, 2, 1, 3).contiguous() */
		T aop = vw(b, ao, 4, SH(B, Tn, h, hd), (const int64_t[]){ (int64_t)(h * Tn * hd), (int64_t)hd,
		                                                           (int64_t)(Tn * hd), 1 }, 0);
		merged = TMP("clone (merge heads)", dt, B, Tn, d);
		op(b, AG_OP_COPY, aop, NO, NO, merged, NO, NO);
		unref(b, aop);
		unref(b, ao);
	}
	b->module = modname(b, "transformer.h.%d.attn.c_proj", i);
	ds3_mark(b, "fwd", "transformer.h.%d.attn.c_proj", i);
	T po = conv1d(b, merged, blk(M, b, i, "attn.c_proj.weight"), blk(M, b, i, "attn.c_proj.bias"),
	              &s->attn_out);
	ds3_mark(b, "fwd_end", "transformer.h.%d.attn.c_proj", i);
	unref(b, merged);
	mark(b, "fwd:h.%d.attn.resid_dropout:start", i);
	T pod = dropout(b, po, m->resid_pdrop, &s->drop_resid);
	mark(b, "fwd:h.%d.attn.resid_dropout:end", i);
	b->module = modname(b, "transformer.h.%d.attn.c_attn", i);
	/* attn's forward returns: q, k, v (views of qkv) go, then the
	 * name of c_proj's output */
	unref(b, q);
	unref(b, k);
	unref(b, v);
	unref(b, po);
	po = pod;
	/* h = attn(h) + residual */
	b->module = -1;
	s->rpo = RG(b, po);
	residual = residual_add(b, residual, po, 1);
	unref(b, x1); /* the name hidden_states is rebound to the sum (fp32: addmm's saved view holds it) */
	s->rh1 = RG(b, residual);
	b->module = modname(b, "transformer.h.%d.ln_2", i);
	ds3_mark(b, "fwd", "transformer.h.%d.ln_2", i);
	T x2 = layer_norm(b, residual, blk(M, b, i, "ln_2.weight"), blk(M, b, i, "ln_2.bias"), &s->ln2);
	ds3_mark(b, "fwd_end", "transformer.h.%d.ln_2", i);
	b->module = modname(b, "transformer.h.%d.mlp.c_fc", i);
	ds3_mark(b, "fwd", "transformer.h.%d.mlp.c_fc", i);
	T fc = conv1d(b, x2, blk(M, b, i, "mlp.c_fc.weight"), blk(M, b, i, "mlp.c_fc.bias"), &s->fc);
	ds3_mark(b, "fwd_end", "transformer.h.%d.mlp.c_fc", i);
	/* gelu_new: 0.5 * x * (1.0 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3.0)))):
	 * its nodes keep what they keep when c_fc's output requires grad */
	int kg = s->rfc = RG(b, fc);
	T a = scalar_op(b, AG_OP_MUL_SCALAR, "mul (0.5 x)", fc, 0.5, nr_wrapped(b, kg ? &s->half : NULL));
	/* pow: on CUDA under autocast in fp32 (CUDA's fp32 list holds
	 * pow.Tensor_Scalar; the CPU's none): cached_cast copies the bf16 x
	 * (no leaf: anew), PowBackward keeps that fp32 copy, and the rest of
	 * the expression is fp32 by promotion (no copies on CUDA:
	 * promotes_by_copy), the product with the bf16 0.5·x too */
	T xp = fc;
	if (!promotes_by_copy(b) && b->s->tensor[fc].dtype != AG_F32 && b->o->amp != AG_F32)
		xp = to_dtype(b, fc, AG_F32, "_to_copy (pow in fp32: autocast on CUDA)");
	T p3 = like(b, "pow (x^3)", xp);
	op(b, AG_OP_POW_SCALAR, xp, NO, NO, p3, NO, NO)->arg[0] = 3;
	if (kg)
		ref(b, xp); /* pow saves its input */
	if (xp != fc)
		unref(b, xp); /* the cast's: the wrapper returns */
	T c = scalar_op(b, AG_OP_MUL_SCALAR, "mul (0.044715 x^3)", p3, 0.044715,
	                     nr_wrapped(b, kg ? &s->c1 : NULL));
	unref(b, p3);
	T sx = like(b, "add (x + 0.044715 x^3)", c);
	op(b, AG_OP_ADD, fc, c, NO, sx, NO, NO)->arg[0] = 1;
	unref(b, c);
	T y = scalar_op(b, AG_OP_MUL_SCALAR, "mul (sqrt(2/pi) .)", sx, sqrt(2.0 / M_PI),
	                     nr_wrapped(b, kg ? &s->c2 : NULL));
	unref(b, sx);
	T th = like(b, "tanh", y);
	op(b, AG_OP_TANH, y, NO, NO, th, NO, NO);
	unref(b, y);
	T u = scalar_op(b, AG_OP_ADD_SCALAR, "add (1 + tanh)", th, 1.0, NULL);
	T gl = like(b, "mul (gelu_new)", u);
	op(b, AG_OP_MUL, a, u, NO, gl, NO, NO);
	/* tanh keeps its result, the last mul both operands */
	s->a = a, s->t = th, s->u = u, s->xfc = xp;
	if (!kg) { /* the expression's temporaries go as it ends */
		unref(b, a);
		unref(b, th);
		unref(b, u);
		s->a = s->t = s->u = s->xfc = NO;
	}
	unref(b, fc); /* the MLP's name for c_fc's output; pow's holder stays */
	b->module = modname(b, "transformer.h.%d.mlp.c_proj", i);
	ds3_mark(b, "fwd", "transformer.h.%d.mlp.c_proj", i);
	T mo = conv1d(b, gl, blk(M, b, i, "mlp.c_proj.weight"), blk(M, b, i, "mlp.c_proj.bias"), &s->proj);
	ds3_mark(b, "fwd_end", "transformer.h.%d.mlp.c_proj", i);
	unref(b, gl);
	mark(b, "fwd:h.%d.mlp.dropout:start", i);
	T mod_ = dropout(b, mo, m->resid_pdrop, &s->drop_mlp);
	mark(b, "fwd:h.%d.mlp.dropout:end", i);
	unref(b, mo); /* the temporary c_proj(...) goes when dropout returns */
	mo = mod_;
	s->rmo = RG(b, mo);
	b->module = -1;
	hs = residual_add(b, residual, mo, 0);
	unref(b, x2); /* the block returns: its name for ln_2's output goes */
	mark(b, "fwd:h.%d:end", i);
	unref(b, hin);
	return hs;
}

/* GPT-2's math-path backward (--attn sdpa with attention dropout):
 * sdpa_math_bwd_core, q·√scale's MulBackward, then the split heads'
 * view backwards, later-made first: v's and q's grads reshaped to
 * [B, T, d] from their permuted [B, T, h, hd] views (copies), k's a
 * view (its transposed layout merges h and hd), and SplitBackward's cat.
 * Returns qkv's gradient [B, T, 3d]. */
static T gpt2_sdpa_math_bwd(struct bld *b, struct gpt2_block_saved *s, T dm, uint64_t B, uint64_t h, uint64_t Tn,
                            uint64_t hd)
{
	uint64_t d = h * hd;
	struct sdpa_math ms = { s->q, s->kt, s->attw, s->sm, s->v, s->drop_attn };
	T dqc, dks, dvr;
	sdpa_math_bwd_core(b, &ms, dm, B, h, Tn, hd, &dqc, &dks, &dvr);
	s->q = s->kt = s->attw = s->sm = s->v = s->drop_attn = NO;
	T dqs = sdpa_q_scale_bwd(b, dqc, hd);
	const int64_t *hst = (const int64_t[]){ (int64_t)(h * Tn * hd), (int64_t)hd, (int64_t)(Tn * hd), 1 };
	T dvv = vw(b, dvr, 4, SH(B, Tn, h, hd), hst, 0);
	T dv = TMP("clone (v grad to [B, T, d])", AG_F32, B, Tn, d);
	op(b, AG_OP_COPY, dvv, NO, NO, dv, NO, NO);
	unref(b, dvv);
	unref(b, dvr);
	T dk = vw(b, dks, 4, SH(B, Tn, h, hd), (const int64_t[]){ (int64_t)(h * hd * Tn), 1, (int64_t)(hd * Tn),
	                                                           (int64_t)Tn }, 0);
	unref(b, dks);
	T dqv = vw(b, dqs, 4, SH(B, Tn, h, hd), hst, 0);
	T dq = TMP("clone (q grad to [B, T, d])", AG_F32, B, Tn, d);
	op(b, AG_OP_COPY, dqv, NO, NO, dq, NO, NO);
	unref(b, dqv);
	unref(b, dqs);
	T dqkv = TMP("cat (split backward)", AG_F32, B, Tn, 3 * d);
	op(b, AG_OP_CAT_LAST, dq, dk, dv, dqkv, NO, NO);
	unref(b, dq);
	unref(b, dk);
	unref(b, dv);
	return dqkv;
}

/* Block i's backward from gx (the gradient of its output, its holder
 * taken): the gradient of its input, NO where it requires none. */
static T gpt2_block_bwd(struct bld *b, struct model *M, struct gpt2_block_saved *s, int i, T gx)
{
	const struct zs_model *m = b->m;
	uint64_t B = b->o->batch, Tn = b->o->seq, d = m->hidden, h = m->heads, hd = m->head_dim;
	/* AddBackward (residual + mlp): gx goes to both (those that
	 * require grad); the MLP first */
	b->module = modname(b, "transformer.h.%d.mlp.c_proj", i);
	T dgl = NO, dx2 = NO;
	T g2 = s->rh1 ? gx : NO;
	if (s->rmo) {
		/* autocast: AddBackward's gradient for the 16-bit operand is
		 * cast to its dtype (validate_outputs) */
		T gmo = b->o->amp != AG_F32 ? to_dtype(b, gx, b->o->amp, "_to_copy (validate_outputs)")
		                            : dropout_bwd(b, gx, !s->rh1, s->drop_mlp);
		if (b->o->amp != AG_F32 && !s->rh1) /* the residual requires no grad (--freeze): gx is the node's alone */
			unref(b, gx);
		if (b->o->amp != AG_F32)
			nr_unpack_at(b); /* (the add's node ends: non-reentrant's rerun here) */
		ds3_mark(b, "bwd", "transformer.h.%d.mlp.c_proj", i);
		dgl = conv1d_bwd(b, gmo, 1, &s->proj, blk(M, b, i, "mlp.c_proj.weight"),
		                 blk(M, b, i, "mlp.c_proj.bias"));
		if (dgl != NO)
			ds3_mark(b, "bwd_end", "transformer.h.%d.mlp.c_proj", i);
	}
	b->module = modname(b, "transformer.h.%d.mlp.c_fc", i);
	if (dgl != NO) {
		T da, du;
		mul_bwd(b, "mul (gelu backward)", dgl, s->a, s->u, &da, &du);
		/* AddBackward (1 + tanh): du passes; TanhBackward */
		T dy = like(b, "tanh_backward", s->t);
		op(b, AG_OP_TANH_BWD, du, s->t, NO, dy, NO, NO);
		unref(b, du);
		unref(b, s->t);
		/* MulBackward (sqrt(2/pi) ·): g · the kept number */
		T cs = cast_scalar_as(b, s->c2, b->s->tensor[dy].dtype);
		T dsx = like(b, "mul (gelu backward)", dy);
		op(b, AG_OP_MUL_SCALAR, dy, NO, NO, dsx, NO, NO)->arg[0] = sqrt(2.0 / M_PI);
		unref(b, cs);
		unref(b, dy);
		unref(b, s->c2);
		/* AddBackward (x + c): dsx to x's buffer and to the mul; an
		 * fp32 dsx for a bf16 x (CUDA's fp32 pow) cast for x by
		 * validate_outputs, the fp32 one the mul's alone */
		enum ag_dtype xdt = b->s->tensor[da].dtype;
		T acc = dsx;
		if (b->s->tensor[dsx].dtype != xdt)
			acc = to_dtype(b, dsx, xdt, "_to_copy (validate_outputs)");
		cs = cast_scalar_as(b, s->c1, b->s->tensor[dsx].dtype);
		T dp = like(b, "mul (gelu backward)", dsx);
		op(b, AG_OP_MUL_SCALAR, dsx, NO, NO, dp, NO, NO)->arg[0] = 0.044715;
		unref(b, cs);
		unref(b, s->c1);
		if (acc != dsx)
			unref(b, dsx);
		/* PowBackward: g · 3 · x^2 */
		T x2p = like(b, "pow (x^2, pow backward)", s->xfc);
		op(b, AG_OP_POW_SCALAR, s->xfc, NO, NO, x2p, NO, NO)->arg[0] = 2;
		T w3 = wrapped(b, 3.0);
		T c3 = cast_scalar_as(b, w3, b->s->tensor[x2p].dtype);
		T x3 = like(b, "mul (3 x^2)", s->xfc);
		op(b, AG_OP_MUL_SCALAR, x2p, NO, NO, x3, NO, NO)->arg[0] = 3;
		unref(b, c3);
		unref(b, w3);
		T dxp = like(b, "mul (pow backward)", s->xfc);
		op(b, AG_OP_MUL, dp, x3, NO, dxp, NO, NO);
		unref(b, x3);
		unref(b, x2p);
		unref(b, dp);
		unref(b, s->xfc);
		/* the ToCopyBackward of pow's fp32 cast (CUDA), back to x's bf16 */
		if (b->s->tensor[dxp].dtype != xdt)
			dxp = ac_grad_back_to(b, dxp, xdt);
		/* x's input buffer: dsx + dxp */
		arrive(b, &acc, dxp);
		/* MulBackward (0.5 ·) */
		cs = cast_scalar_as(b, s->half, b->s->tensor[da].dtype);
		T dh = like(b, "mul (gelu backward)", da);
		op(b, AG_OP_MUL_SCALAR, da, NO, NO, dh, NO, NO)->arg[0] = 0.5;
		unref(b, cs);
		unref(b, da);
		unref(b, s->half);
		arrive(b, &acc, dh);
		T acc2 = acc;
		/* c_fc's AddmmBackward */
		ds3_mark(b, "bwd", "transformer.h.%d.mlp.c_fc", i);
		dx2 = conv1d_bwd(b, acc2, 1, &s->fc, blk(M, b, i, "mlp.c_fc.weight"),
		                 blk(M, b, i, "mlp.c_fc.bias"));
		if (dx2 != NO)
			ds3_mark(b, "bwd_end", "transformer.h.%d.mlp.c_fc", i);
	}
	b->module = modname(b, "transformer.h.%d.ln_2", i);
	if (dx2 != NO) { /* the residual's input buffer: gx + ln_2's dx */
		ds3_mark(b, "bwd", "transformer.h.%d.ln_2", i);
		T lb;
		layer_norm_bwd_to(b, dx2, &s->ln2, blk(M, b, i, "ln_2.weight"), blk(M, b, i, "ln_2.bias"),
		                  ds3_buf(b, &g2, &lb));
		ds3_hand(b, &g2, &lb, "transformer.h.%d.ln_2", i);
	}
	if (g2 == NO)
		return NO;
	/* AddBackward (attn + residual): g2 to both; the attention first */
	b->module = modname(b, "transformer.h.%d.attn.c_proj", i);
	T g3 = s->rin ? g2 : NO, dm = NO, dx1 = NO;
	if (s->rpo) {
		T gpo = b->o->amp != AG_F32 ? to_dtype(b, g2, b->o->amp, "_to_copy (validate_outputs)")
		                            : dropout_bwd(b, g2, !s->rin, s->drop_resid);
		if (b->o->amp != AG_F32 && !s->rin) /* as gx's above */
			unref(b, g2);
		ds3_mark(b, "bwd", "transformer.h.%d.attn.c_proj", i);
		dm = conv1d_bwd(b, gpo, 1, &s->attn_out, blk(M, b, i, "attn.c_proj.weight"),
		                blk(M, b, i, "attn.c_proj.bias"));
		if (dm != NO)
			ds3_mark(b, "bwd_end", "transformer.h.%d.attn.c_proj", i);
	}
	b->module = modname(b, "transformer.h.%d.attn.c_attn", i);
	T dqkv = NO;
	if (dm == NO) {
		/* the attention requires no grad */
	} else if (b->o->attn == ZS_ATTN_SDPA && b->m->attn_pdrop > 0) {
		dqkv = gpt2_sdpa_math_bwd(b, s, dm, B, h, Tn, hd);
	} else if (b->o->attn == ZS_ATTN_SDPA) {
		dqkv = gpt2_sdpa_bwd(b, &s->sd, dm);
	} else {
		/* CloneBackward, PermuteBackward: a permuted view of dm; then
		 * UnsafeViewBackward, BmmBackward, SoftmaxBackward */
		T dvc;
		T dwh = attn_v_bwd(b, dm, s->attw, s->sm, s->drop_attn, s->v, B, h, Tn, hd, &dvc, 0);
		/* an fp32 softmax (autocast on CUDA): the ToCopyBackward of its
		 * input's cast, back to the scores' bf16 */
		enum ag_dtype dt = b->s->tensor[s->divisor].dtype;
		if (b->s->tensor[dwh].dtype != dt)
			dwh = ac_grad_back_to(b, dwh, dt);
		/* WhereBackward: where(cond, grad, 0) */
		T zero = tmp(b, "scalar_tensor (0)", dt, 0, NULL);
		op(b, AG_OP_FILL, NO, NO, NO, zero, NO, NO)->arg[0] = 0;
		T cm = gpt2_causal_view(b, M, (uint64_t)i, Tn);
		T daw = TMP("where (backward)", dt, B * h, Tn, Tn);
		op(b, AG_OP_WHERE, cm, dwh, zero, daw, NO, NO);
		unref(b, cm);
		unref(b, zero);
		unref(b, dwh);
		/* DivBackward */
		T dsc = TMP("div (backward)", dt, B * h, Tn, Tn);
		op(b, AG_OP_DIV, daw, s->divisor, NO, dsc, NO, NO);
		unref(b, daw);
		unref(b, s->divisor);
		/* BmmBackward (q @ k^T): d q, d k^T */
		T dq, dkt;
		qk_bwd(b, dsc, s->q, s->kt, B * h, Tn, hd, &dq, &dkt);
		/* the copies' backward: reshape to [B, h, T, hd] and permute to
		 * the split's layout; SplitBackward (cat) wants them as
		 * [B, T, d]: k's and q's are copied (reshape of a transposed and
		 * of a permuted grad), v's passes as a view */
		/* The views say which element goes where: dq and dv [B·h, T, hd]
		 * are read as [B, T, h, hd] (PermuteBackward of the split's
		 * permute(0, 2, 1, 3)), dkᵀ [B·h, hd, T] as [B, T, h, hd] through
		 * the transpose as well. They make no bytes: each is let go before
		 * the tensor it views, whose free stays where PyTorch has it. */
		const int64_t *hst = (const int64_t[]){ (int64_t)(h * Tn * hd), (int64_t)hd, (int64_t)(Tn * hd), 1 };
		T dk = TMP("clone (k grad to [B, T, d])", dt, B, Tn, d);
		T dktv = vw(b, dkt, 4, SH(B, Tn, h, hd),
		            (const int64_t[]){ (int64_t)(h * hd * Tn), 1, (int64_t)(hd * Tn), (int64_t)Tn }, 0);
		op(b, AG_OP_COPY, dktv, NO, NO, dk, NO, NO);
		unref(b, dktv);
		unref(b, dkt);
		T dqq = TMP("clone (q grad to [B, T, d])", dt, B, Tn, d);
		T dqv = vw(b, dq, 4, SH(B, Tn, h, hd), hst, 0);
		op(b, AG_OP_COPY, dqv, NO, NO, dqq, NO, NO);
		unref(b, dqv);
		unref(b, dq);
		dqkv = TMP("cat (split backward)", dt, B, Tn, 3 * d);
		T dvv = vw(b, dvc, 4, SH(B, Tn, h, hd), hst, 0);
		op(b, AG_OP_CAT_LAST, dqq, dk, dvv, dqkv, NO, NO);
		unref(b, dvv);
		unref(b, dvc);
		unref(b, dk);
		unref(b, dqq);
	}
	if (dqkv != NO) {
		ds3_mark(b, "bwd", "transformer.h.%d.attn.c_attn", i);
		dx1 = conv1d_bwd(b, dqkv, 1, &s->attn_in, blk(M, b, i, "attn.c_attn.weight"),
		                 blk(M, b, i, "attn.c_attn.bias"));
		if (dx1 != NO)
			ds3_mark(b, "bwd_end", "transformer.h.%d.attn.c_attn", i);
	}
	b->module = modname(b, "transformer.h.%d.ln_1", i);
	if (dx1 != NO) {
		ds3_mark(b, "bwd", "transformer.h.%d.ln_1", i);
		T lb;
		layer_norm_bwd_to(b, dx1, &s->ln1, blk(M, b, i, "ln_1.weight"), blk(M, b, i, "ln_1.bias"),
		                  ds3_buf(b, &g3, &lb));
		ds3_hand(b, &g3, &lb, "transformer.h.%d.ln_1", i);
	}
	return g3;
}

static T gpt2_layer_fwd(struct bld *b, struct model *M, int i, T hs, void *ctx)
{
	return gpt2_block_fwd(b, M, (struct gpt2_block_saved *)ctx + i, i, hs);
}

static T gpt2_layer_bwd(struct bld *b, struct model *M, int i, T g, void *ctx)
{
	return gpt2_block_bwd(b, M, (struct gpt2_block_saved *)ctx + i, i, g);
}

static void gpt2_step(struct bld *b, struct model *M)
{
	const struct zs_model *m = b->m;
	uint64_t B = b->o->batch, Tn = b->o->seq, d = m->hidden;
	uint64_t L = m->layers;
	struct gpt2_block_saved *S = zs_calloc(L, sizeof *S);
	struct pt *wte = PF(M, b, "transformer.wte.weight"), *wpe = PF(M, b, "transformer.wpe.weight");
	struct pt *lnfw = PF(M, b, "transformer.ln_f.weight"), *lnfb = PF(M, b, "transformer.ln_f.bias");
	struct pt *head = m->tied ? wte : PF(M, b, "lm_head.weight");

	b->phase = ZS_PH_FORWARD;
	mark(b, "phase:forward");
	/* position_ids = torch.arange(0, T).unsqueeze(0) */
	T pos = TMP("arange (position_ids)", AG_I64, Tn);
	op(b, AG_OP_ARANGE, NO, NO, NO, pos, NO, NO);
	T pos2 = reshape(b, pos, 2, SH(1, Tn));
	unref(b, pos);
	b->module = modname(b, "transformer.wte");
	mark(b, "fwd:wte:start");
	ds3_mark(b, "fwd", "transformer.wte");
	T ie = TMP("embedding (wte)", b->o->mdt, B, Tn, d);
	op(b, AG_OP_EMBEDDING, wte->w, M->ids, NO, ie, NO, NO);
	ds3_mark(b, "fwd_end", "transformer.wte");
	if (b->o->recompute && wte->frozen && !wpe->frozen) /* AddBackward's gradient to both: which copies is not traced */
		unsupported(b, "under --recompute full, transformer.wte frozen with transformer.wpe trained");
	else
		input_require_grads(b, M, wte, ie);
	mark(b, "fwd:wte:end");
	b->module = modname(b, "transformer.wpe");
	mark(b, "fwd:wpe:start");
	ds3_mark(b, "fwd", "transformer.wpe");
	T pe = TMP("embedding (wpe)", b->o->mdt, 1, Tn, d);
	op(b, AG_OP_EMBEDDING, wpe->w, pos2, NO, pe, NO, NO);
	ds3_mark(b, "fwd_end", "transformer.wpe");
	mark(b, "fwd:wpe:end");
	b->module = -1;
	/* the embedding's backward keeps the indices: pos2's holder goes to
	 * wpe's node (input_ids are the caller's) */
	T hs = TMP("add (embeddings)", b->o->mdt, B, Tn, d);
	op(b, AG_OP_ADD, ie, pe, NO, hs, NO, NO)->arg[0] = 1;
	unref(b, ie);
	unref(b, pe);
	mark(b, "fwd:drop:start");
	T drop_embd;
	T hd_ = dropout(b, hs, m->embd_pdrop, &drop_embd);
	mark(b, "fwd:drop:end");
	unref(b, hs); /* hidden_states = self.drop(hidden_states) */
	hs = hd_;
	T *saved = b->o->recompute ? zs_calloc(L, sizeof *saved) : NULL;
	const struct layer_fns lf = { gpt2_layer_fwd, gpt2_layer_bwd, S, NULL };
	for (uint64_t l = 0; l < L; l++)
		hs = layer_fwd(b, M, &lf, saved, (int)l, hs);
	b->module = modname(b, "transformer.ln_f");
	mark(b, "fwd:ln_f:start");
	struct ln_saved lnf;
	ds3_mark(b, "fwd", "transformer.ln_f");
	T xf = layer_norm(b, hs, lnfw, lnfb, &lnf);
	ds3_mark(b, "fwd_end", "transformer.ln_f");
	mark(b, "fwd:ln_f:end");
	unref(b, hs); /* the caller rebinds `hidden_states` after the module's hooks */
	T xf2, lg, lsm, tgt, tw;
	T loss = head_fwd(b, M, xf, head, &xf2, &lg, &lsm, &tgt, &tw);
	if (wpe->frozen)
		unref(b, pos2); /* no EmbeddingBackward keeps it: it goes as the forward returns */
	/* the loop keeps outputs (the loss and the logits) to the step's end;
	 * the autocast region exits */
	ac_clear(b, M);
	drop_outputs(b, &lg);
	scale_loss(b, M, loss);

	/* Backward, from the requires_grad flags: a node runs only where an
	 * input of it requires grad, and computes only those inputs'
	 * gradients; a unit's marks are the reference's hooks, registered on
	 * the tensors that require grad. */
	T one, held;
	T dxf = head_bwd(b, M, lsm, tgt, tw, xf2, head, &one, &held, RG(b, xf));
	b->module = modname(b, "transformer.ln_f");
	T gx = NO;
	if (dxf != NO) {
		mark(b, "bwd:ln_f:start");
		mark(b, "bwd:lm_head:end");
		ds3_mark(b, "bwd_end", "lm_head");
		ds3_mark(b, "bwd", "transformer.ln_f");
		T lb;
		layer_norm_bwd_to(b, dxf, &lnf, lnfw, lnfb, ds3_buf(b, &gx, &lb));
		ds3_hand(b, &gx, &lb, "transformer.ln_f");
	}
	/* gx: the gradient of block i's output, NO where it requires none (nor
	 * then does any block below) */
	for (int i = (int)L - 1; i >= 0 && gx != NO; i--)
		gx = layer_bwd(b, M, &lf, saved, i, (int)L, "h", "ln_f", gx);
	free(saved);
	if (gx == NO) { /* nothing below the blocks requires grad */
		unref(b, one); /* backward returns */
		grad_scaler_backward_end(b, M);
		free(S);
		M->loss = loss;
		M->logits = lg;
		return;
	}
	/* the reference's hooks: drop's end on its input, its start and
	 * h.0's end on its output, in the order they were registered; without
	 * dropout the two are one tensor */
	if (drop_embd == NO) {
		mark(b, "bwd:drop:end");
		mark(b, "bwd:drop:start");
		mark(b, "bwd:h.0:end");
	} else {
		mark(b, "bwd:drop:start");
		mark(b, "bwd:h.0:end");
		gx = dropout_bwd(b, gx, 1, drop_embd);
		mark(b, "bwd:drop:end");
	}
	/* AddBackward (wte + wpe): wpe's first (created later); its operand
	 * was [1, T, d]: the gradient summed to it */
	b->module = modname(b, "transformer.wpe");
	if (!wpe->frozen) {
		T dpe;
		if (B == 1) { /* the shapes agree: the gradient itself */
			dpe = gx;
			if (!wte->frozen)
				ref(b, gx);
		} else {
			dpe = TMP("sum (wpe grad to [1, T, d])", b->o->mdt, 1, Tn, d);
			op(b, AG_OP_SUM_TO, gx, NO, NO, dpe, NO, NO);
			if (wte->frozen)
				unref(b, gx); /* validate_outputs replaces it by its sum */
		}
		mark(b, "bwd:wpe:start");
		ds3_mark(b, "bwd", "transformer.wpe");
		T dwpe = like(b, "embedding_dense_backward (wpe)", wpe->w);
		emb_dense_bwd(b, dpe, pos2, dwpe);
		unref(b, dpe);
		unref(b, pos2);
		accumulate(b, wpe, dwpe);
	}
	b->module = modname(b, "transformer.wte");
	if (!wte->frozen) {
		mark(b, "bwd:wte:start");
		ds3_mark(b, "bwd", "transformer.wte");
		embedding_bwd(b, M, gx, wte, held);
	} else if (M->leaf != NO) {
		mark(b, "bwd:wte:start");
		leaf_grad(M, gx);
	} else if (wpe->frozen) {
		unref(b, gx);
	}
	unref(b, one); /* backward returns */
	grad_scaler_backward_end(b, M);
	free(S);
	M->loss = loss;
	M->logits = lg;
}

/* ------------------------------------------------------------------------ */
/* Llama (tests/hf_torch.py LlamaForCausalLM: modeling_llama.py 5dd4a6354885) */


/* nn.Linear without bias on [.., in]: matmul(x, W^t) folds to mm over
 * x.view(-1, in); the node keeps the view and W^t. */
struct lin_saved {
	T x2;
	T w16;      /* autocast: the saved 16-bit W (NO: W itself) */
	T wt;       /* ds3_leaf_marks: MmBackward0's saved mat2, the weight.t() view made in forward, which x's
	             * gradient reads (NO: W read itself, or x requires no grad) */
	int xcast;  /* autocast: x was cast */
	uint64_t rows, in;
	int node, dx, dw; /* as conv_saved's (--freeze) */
	int db;           /* linear_b: the bias requires grad */
};

/* linear and linear_b over a 4-bit base weight: MatMul4Bit keeps no
 * activation (sv's x2 NO); x's gradient where x requires grad. */
static T q4_lin(struct bld *b, T x, struct pt *w, struct pt *bias, struct lin_saved *sv)
{
	sv->x2 = sv->w16 = sv->wt = NO, sv->xcast = 0, sv->dw = sv->db = 0;
	T r = q4_linear(b, x, w, bias, &sv->rows, &sv->in, &sv->dx, &sv->xcast);
	sv->node = sv->dx;
	return r;
}

static T linear(struct bld *b, T x, struct pt *w, struct lin_saved *sv)
{
	if (w->q4 >= 0)
		return q4_lin(b, x, w, NULL, sv);
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	uint64_t in = o->shape[o->ndim - 1], rows = numel(o) / in, out = b->s->tensor[w->w].shape[0];
	/* autocast's linear: W cast first (cached), then x (a copy at every
	 * use: q, k and v each cast the same norm output); MmBackward keeps
	 * both 16-bit */
	T wm;
	T xm = ac_cast_layer(b, x, w, &wm, &sv->w16, &sv->xcast);
	T x2 = reshape(b, xm, 2, SH(rows, in));
	if (ac_dt(b) != AG_F32)
		unref(b, xm); /* the cast's name (or ac_cast's holder of x): the view holds it */
	T wt = transpose_last2(b, wm);
	T y = TMP("mm (linear)", b->s->tensor[x2].dtype, rows, out);
	op(b, AG_OP_MM, x2, wt, NO, y, NO, NO);
	/* mm's self is saved only for mat2's (W^t's) gradient */
	sv->rows = rows, sv->in = in;
	sv->dx = RG(b, x2), sv->dw = RG(b, w->w), sv->node = sv->dx || sv->dw;
	/* mat2 (wt) is saved for self's gradient: ds3_saved_wt */
	sv->wt = ds3_saved_wt(b, wt, sv->w16, sv->dx);
	sv->x2 = x2;
	if (!sv->dw) {
		unref(b, x2);
		sv->x2 = NO;
	}
	if (sv->w16 != NO && !sv->dx) { /* W16^t is saved for x's gradient only */
		unref(b, sv->w16);
		sv->w16 = NO;
	}
	T res = grad_in_x_shape(b, y, o);
	return w->lora >= 0 ? lora_fwd(b, x, res, w->lora) : res;
}

/* MmBackward of a linear layer: W^t's gradient first (made as W's
 * [out, in]: see lm_head's), then x's; the node's input released when
 * `owned`, then its saved x; dx goes to *xbuf; then TBackward hands the
 * weight's to AccumulateGrad. */
static void linear_bwd(struct bld *b, T g, int owned, struct lin_saved *sv, struct pt *w, T *xbuf)
{
	if (w->q4 >= 0) {
		q4_linear_bwd(b, g, owned, sv->rows, sv->in, sv->dx, sv->xcast, w, xbuf);
		return;
	}
	uint64_t rows = sv->rows, in = sv->in, out = b->s->tensor[w->w].shape[0];
	const struct ag_tensor go_ = b->s->tensor[g];
	if (w->lora >= 0) { /* the adapter's branch first (as conv1d_bwd's) */
		ref(b, g);
		lora_bwd(b, g, w->lora, xbuf);
	}
	T g2 = reshape(b, g, 2, SH(rows, out));
	T dw = NO, dx = NO;
	if (sv->dw) {
		/* W^t's gradient in W^t's layout (mm_mat2_backward): W's [out, in] */
		dw = TMP("mm (linear backward, weight)", go_.dtype, out, in);
		T gt = transpose_last2(b, g2);
		op(b, AG_OP_MM, gt, sv->x2, NO, dw, NO, NO);
		unref(b, gt);
	}
	if (sv->dx) {
		dx = TMP("mm (linear backward, input)", go_.dtype, rows, in);
		op(b, AG_OP_MM, g2, ds3_saved_read(sv->wt, sv->w16 != NO ? sv->w16 : w->w), NO, dx, NO, NO);
	}
	unref(b, g2);
	if (owned)
		unref(b, g);
	unref(b, sv->x2);
	unref(b, sv->wt); /* the node releases its saved variables: mat2 */
	sv->wt = NO;
	if (sv->w16 != NO)
		unref(b, sv->w16);
	/* ViewBackward (x.view(-1, in)) hands on a view of it in x's shape;
	 * a 2-D x (a mixture's router and experts: F.linear over [n, d] is
	 * mm, no view) takes dx itself, which 2.6's InputBuffer can add to
	 * in place */
	if (dx != NO) {
		T dxv = go_.ndim == 2 ? dx : grad_in_x_shape(b, dx, &go_);
		/* autocast: x's ToCopyBackward (the later cast) before W's */
		if (sv->xcast)
			dxv = ac_grad_back(b, dxv);
		arrive(b, xbuf, dxv);
	}
	if (dw != NO)
		accumulate(b, w, ac_dt(b) != AG_F32 ? ac_grad_back(b, dw) : dw);
}

/* linear_b under autocast (qwen2's biased q/k/v): linear is in the CPU's
 * lower-precision list (aten/src/ATen/autocast_mode.cpp: 1.13's
 * KERNEL_CPU(ADD_NS(linear), "linear", ..., lower_precision_fp); 2.6's
 * KERNEL_CPU(linear, lower_precision_fp)), so the wrapper casts every
 * floating argument, the C++ arguments evaluated right to left as
 * conv1d's: the bias (cached), W (cached), then x (a copy at every use);
 * at::linear below it flattens to addmm(bias16, x16.view(-1, in),
 * W16.t()) as in fp32. AddmmBackward keeps the 16-bit mat1 (for W's
 * gradient) and W16^T (a view of the cached copy: it holds it). */
static T linear_b_amp(struct bld *b, T x, struct pt *w, struct pt *bias, struct lin_saved *sv)
{
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	uint64_t in = o->shape[o->ndim - 1], rows = numel(o) / in, out = b->s->tensor[w->w].shape[0];
	T bm = ac_cast_param(b, bias);
	T wm = sv->w16 = ac_cast_param(b, w);
	sv->xcast = b->s->tensor[x].dtype != b->o->amp;
	T xm = ac_cast(b, x);
	T wt = transpose_last2(b, wm);
	T x2 = reshape(b, xm, 2, SH(rows, in));
	unref(b, xm); /* the cast's name (or ac_cast's holder of x): the view holds it */
	T y = TMP("addmm (linear, bias)", b->o->amp, rows, out);
	op(b, AG_OP_ADDMM, x2, wt, bm, y, NO, NO);
	unref(b, wt);
	unref(b, bm); /* the cache holds it */
	sv->rows = rows, sv->in = in;
	sv->x2 = addmm_saved_mat1(b, x2, w->w, bias->w, &sv->dx, &sv->dw, &sv->db);
	sv->node = sv->dx || sv->dw || sv->db;
	if (!sv->dx) { /* W16^t is saved for mat1's gradient only */
		unref(b, sv->w16);
		sv->w16 = NO;
	}
	return grad_in_x_shape(b, y, o);
}

/* AddmmBackward's three gradients for linear_b, in dtype dt (the 16-bit
 * type under autocast, fp32 without): mat1's mm with wmat (W16 or W
 * itself: W^t's saved mat2 is a view of it), mat2's mm made in W's
 * [out, in] layout, the bias's row sum; each only where sv says its input
 * requires grad (NO in *dx, *dw, *db otherwise). Then the flattened g
 * released, g itself when `owned`, and the saved mat1; what the caller
 * releases and hands on after that differs between the two (the order
 * of the ready queue), so it stays with them. */
static void linear_b_grads(struct bld *b, T g, int owned, struct lin_saved *sv, T wmat, uint64_t out,
                           enum ag_dtype dt, T *dx, T *dw, T *db)
{
	uint64_t rows = sv->rows, in = sv->in;
	T g2 = reshape(b, g, 2, SH(rows, out));
	*dx = *dw = *db = NO;
	if (sv->dx) {
		*dx = TMP("mm (addmm backward, mat1)", dt, rows, in);
		op(b, AG_OP_MM, g2, wmat, NO, *dx, NO, NO);
	}
	if (sv->dw) {
		*dw = TMP("mm (addmm backward, mat2)", dt, out, in);
		T gt = transpose_last2(b, g2);
		op(b, AG_OP_MM, gt, sv->x2, NO, *dw, NO, NO);
		unref(b, gt);
	}
	if (sv->db) {
		*db = TMP("sum (addmm backward, bias)", dt, out);
		op(b, AG_OP_SUM_ROWS, g2, NO, NO, *db, NO, NO);
	}
	unref(b, g2);
	if (owned)
		unref(b, g);
	unref(b, sv->x2);
}

/* Its AddmmBackward in the 16-bit type: mat1's, mat2's and the bias's
 * gradients, each where its input requires grad (--freeze); the node's input, its saved mat1 and W16 released;
 * then the ready queue by sequence number (the casts were made bias, W,
 * x; W.t() and x.view after them): x's ViewBackward and ToCopyBackward
 * (dx back to fp32, to *xbuf), W's TBackward and ToCopyBackward and its
 * AccumulateGrad, the bias's ToCopyBackward and AccumulateGrad. */
static void linear_b_amp_bwd(struct bld *b, T g, int owned, struct lin_saved *sv, struct pt *w, struct pt *bias,
                             T *xbuf)
{
	const struct ag_tensor go_ = b->s->tensor[g];
	T dx, dw, db;
	linear_b_grads(b, g, owned, sv, sv->w16, b->s->tensor[w->w].shape[0], go_.dtype, &dx, &dw, &db);
	if (sv->w16 != NO)
		unref(b, sv->w16);
	if (dx != NO) {
		T dxv = grad_in_x_shape(b, dx, &go_);
		if (sv->xcast)
			dxv = ac_grad_back(b, dxv);
		arrive(b, xbuf, dxv);
	}
	if (dw != NO)
		accumulate(b, w, ac_grad_back(b, dw));
	if (db != NO)
		accumulate(b, bias, ac_grad_back(b, db));
}

/* nn.Linear with a bias on [.., in] (qwen2's q_proj, k_proj, v_proj):
 * 1.13's at::linear flattens a contiguous 3-D input (_flatten_3d_linear):
 * addmm(bias, x.view(-1, in), W.t()) viewed back; AddmmBackward keeps
 * mat1 (the view) and mat2 (W^t, a view of the parameter). Without a
 * bias, linear's mm. --freeze: the node exists where one of x, W, bias
 * requires grad (sv->node); mat1 is saved only for W's gradient
 * (addmm_saved_mat1), mat2, saved for x's, is a view of the parameter (no
 * bytes). dx, dw, db: which of x, W, bias require grad. */
static T linear_b(struct bld *b, T x, struct pt *w, struct pt *bias, struct lin_saved *sv)
{
	if (!bias)
		return linear(b, x, w, sv);
	if (w->q4 >= 0)
		return q4_lin(b, x, w, bias, sv);
	sv->wt = NO; /* AddmmBackward's saved W^t: not kept (ds3_leaf_marks refuses biased q/k/v) */
	if (b->o->amp != AG_F32) {
		T r = linear_b_amp(b, x, w, bias, sv);
		return w->lora >= 0 ? lora_fwd(b, x, r, w->lora) : r;
	}
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	uint64_t in = o->shape[o->ndim - 1], rows = numel(o) / in, out = b->s->tensor[w->w].shape[0];
	T wt = transpose_last2(b, w->w);
	T x2 = reshape(b, x, 2, SH(rows, in));
	T y = TMP("addmm (linear, bias)", AG_F32, rows, out);
	op(b, AG_OP_ADDMM, x2, wt, bias->w, y, NO, NO);
	unref(b, wt);
	sv->rows = rows, sv->in = in;
	sv->x2 = addmm_saved_mat1(b, x2, w->w, bias->w, &sv->dx, &sv->dw, &sv->db);
	sv->node = sv->dx || sv->dw || sv->db;
	T res = grad_in_x_shape(b, y, o);
	return w->lora >= 0 ? lora_fwd(b, x, res, w->lora) : res;
}

/* Its AddmmBackward (derivatives.yaml addmm: mat1's mm_mat1_backward,
 * then mat2's mm_mat2_backward, made in W's [out, in] layout; the bias's
 * grad is the incoming one, summed to [out] by validate_outputs), each
 * only for an input that requires grad (the node's output mask); the
 * node's input released when `owned`, then its saved mat1; then the
 * ready queue: the bias's AccumulateGrad (the highest sequence number),
 * x's ViewBackward (dx to *xbuf), TBackward to the weight's. */
static void linear_b_bwd(struct bld *b, T g, int owned, struct lin_saved *sv, struct pt *w, struct pt *bias, T *xbuf)
{
	if (!bias || w->q4 >= 0) {
		linear_bwd(b, g, owned, sv, w, xbuf);
		return;
	}
	if (b->o->amp != AG_F32) {
		if (w->lora >= 0) { /* the adapter's branch first (as conv1d_bwd's) */
			ref(b, g);
			lora_bwd(b, g, w->lora, xbuf);
		}
		linear_b_amp_bwd(b, g, owned, sv, w, bias, xbuf);
		return;
	}
	const struct ag_tensor go_ = b->s->tensor[g];
	if (w->lora >= 0) { /* the adapter's branch first (as conv1d_bwd's) */
		ref(b, g);
		lora_bwd(b, g, w->lora, xbuf);
	}
	T dx, dw, db;
	linear_b_grads(b, g, owned, sv, w->w, b->s->tensor[w->w].shape[0], AG_F32, &dx, &dw, &db);
	if (db != NO)
		accumulate(b, bias, db);
	if (dx != NO)
		arrive(b, xbuf, grad_in_x_shape(b, dx, &go_));
	if (dw != NO)
		accumulate(b, w, dw);
}

/* ------------------------------------------------------------------------ */
/* QLoRA's 4-bit base (--quant-base nf4; docs/finetune.md, "QLoRA's 4-bit
 * base"). transformers' _replace_with_bnb_linear (integrations/
 * bitsandbytes.py, commit 01ae98ae) puts bnb.nn.Linear4bit in place of
 * every nn.Linear and Conv1D but the modules not to convert (the output
 * embedding: get_keys_to_not_convert), a Conv1D's weight transposed to
 * [out, in] before quantizing (set_module_quantized_tensor_to_device).
 * bitsandbytes 0.47.0 (util/nf4.h): Params4bit._quantize (nn/modules.py
 * lines 298–312) quantizes the weight and lets the fp32 one go; the
 * layer's forward (lines 541–565) is MatMul4Bit (autograd/_functions.py
 * lines 359–413): F.linear(x, dequantize_4bit(W), bias), the dequantized
 * weight a temporary of the run's dtype (quant_state.dtype: fp32 here)
 * freed when linear returns; it saves the packed weight only (a
 * parameter: no bytes), and its backward dequantizes again for x's
 * gradient (no weight gradient). PEFT v0.20.0's lora.bnb.Linear4bit
 * (tuners/lora/bnb.py lines 513–553) clones the base's result before
 * adding the adapter's term (line 533). Under ZeroRedundancyOptimizer
 * the base, frozen, is given to no rank (zero1_partition): its Params4bit
 * is a uint8 parameter, which 2.6 would refuse beside the fp32 adapters
 * (docs/finetune.md, "Under --schemes zero1"). */

struct q4_st {
	T packed, absmax;   /* uint8 [(n + 1) / 2, 1] (FSDP: fp32 [(n + 1) / 8, 1]); fp32 [blocks] (NO with double
	                     * quantization) */
	T code;             /* fp32 [16] */
	T qabsmax, offset, absmax2, code2; /* double quantization (else NO) */
	uint64_t rows, cols;                /* the weight as [out, in] */
	size_t from, to, at; /* its quantization, set-up events [from, to), moved to at (q4_stream) */
};

static uint64_t q4_blocks(const struct q4_st *q) { return (q->rows * q->cols + NF4_BLOCK - 1) / NF4_BLOCK; }

/* A quantized storage of the layer of parameter pt q, held for the run. */
static T q4_storage(struct bld *b, const struct pt *q, const char *what, enum ag_dtype dt, unsigned nd,
                    const uint64_t *shape)
{
	T t = mk(b, what, dt, nd, shape, AG_ROLE_BUFFER, ZS_CAT_PARAM32, q->param);
	b->s->tensor[t].part = q->part;
	return t;
}

/* Params4bit._quantize of pt w (in set-up): quantize_4bit (functional.py
 * lines 825–905) with its double quantization (873–886), then the fp32
 * weight freed (`self.data = w_4bit`). */
static void q4_quantize(struct bld *b, struct model *M, size_t w)
{
	struct pt *q = &M->pt[w];
	const struct ag_tensor *wt = &b->s->tensor[q->w];
	int conv = b->m->family == ZS_FAMILY_GPT2; /* Conv1D's [in, out], quantized as its transpose */
	M->q4 = zs_realloc(M->q4, (M->nq4 + 1) * sizeof *M->q4);
	struct q4_st *s = &M->q4[M->nq4];
	s->rows = wt->shape[conv ? 1 : 0], s->cols = wt->shape[conv ? 0 : 1];
	s->absmax = s->qabsmax = s->offset = s->absmax2 = s->code2 = NO;
	uint64_t n = s->rows * s->cols, blocks = q4_blocks(s);
	b->module = (int32_t)b->p->tensor[q->param].module;
	s->from = *b->n;
	s->at = q->made;
	T src = conv ? transpose_last2(b, q->w) : q->w;
	/* under --wrapper fsdp the codes are held as fp32 elements
	 * (bitsandbytes' quant_storage=torch.float32, the fp32-loaded model's
	 * dtype, which FSDP's uniform flat parameter needs: docs/finetune.md,
	 * "QLoRA under FSDP"): the CUDA kernel's output (n + 1) / 8 of them
	 * (backends/cuda/ops.py line 320), the same n / 2 bytes where 8
	 * divides n; util/ag_fsdp.c flattens them into the block's unit */
	/* (loaded in bf16, --load-dtype bf16, the storage is bfloat16, the
	 * model's dtype as PEFT's examples/sft/utils.py lines 102-112 set it:
	 * (n + 1) / 4 elements, the same n / 2 bytes where 4 divides n) */
	enum ag_dtype qsdt = b->o->mdt;
	uint64_t per = 2 * (uint64_t)ag_dtype_size(qsdt);
	if (b->o->fsdp_unit_marks && n % per)
		unsupported(b, qsdt == AG_F32 ? "--quant-base nf4 under --wrapper fsdp with a base layer of elements not a "
		                                "multiple of 8 (quant_storage float32's (n + 1) // 8 elements would not "
		                                "hold its codes)"
		                              : "--quant-base nf4 under --wrapper fsdp with a base layer of elements not a "
		                                "multiple of 4 (quant_storage bfloat16's (n + 1) // 4 elements would not "
		                                "hold its codes)");
	s->packed = b->o->fsdp_unit_marks ? q4_storage(b, q, AG_Q4_CODES, qsdt, 2, SH((n + 1) / per, 1))
	                                  : q4_storage(b, q, AG_Q4_CODES, AG_U8, 2, SH((n + 1) / 2, 1));
	b->s->tensor[sto(b, q->w)].q4 = 1;
	T absmax = q4_storage(b, q, "quantize_4bit (absmax)", AG_F32, 1, SH(blocks));
	op(b, AG_OP_NF4_QUANTIZE, src, NO, NO, s->packed, absmax, NO);
	if (conv)
		unref(b, src);
	s->code = q4_storage(b, q, "get_4bit_type (code)", AG_F32, 1, SH(16));
	op(b, AG_OP_NF4_CODE, NO, NO, NO, s->code, NO, NO);
	if (!b->o->double_quant) {
		s->absmax = absmax;
	} else {
		s->offset = q4_storage(b, q, "mean (offset)", AG_F32, 0, NULL);
		op(b, AG_OP_MEAN_ALL, absmax, NO, NO, s->offset, NO, NO);
		T d = TMP("sub (_absmax - offset)", AG_F32, blocks);
		op(b, AG_OP_ADD, absmax, s->offset, NO, d, NO, NO)->arg[0] = -1;
		if (M->qmap == NO) { /* name2qmap["dynamic"], made at the first call (functional.py lines 604–607) */
			M->qmap = mk(b, "create_dynamic_map", AG_F32, 1, SH(256), AG_ROLE_BUFFER, ZS_CAT_PARAM32, -1);
			op(b, AG_OP_DYNAMIC_MAP, NO, NO, NO, M->qmap, NO, NO);
		}
		s->qabsmax = q4_storage(b, q, "quantize_blockwise (absmax)", AG_U8, 1, SH(blocks));
		s->absmax2 = q4_storage(b, q, "quantize_blockwise (state2.absmax)", AG_F32, 1,
		                        SH((blocks + NF4_DQ_BLOCK - 1) / NF4_DQ_BLOCK));
		op(b, AG_OP_QUANTIZE_BLOCKWISE, d, M->qmap, NO, s->qabsmax, s->absmax2, NO)->arg[0] = NF4_DQ_BLOCK;
		s->code2 = q4_storage(b, q, "copy (state2.code)", AG_F32, 1, SH(256)); /* code.to(device, copy=True) */
		op(b, AG_OP_COPY, M->qmap, NO, NO, s->code2, NO, NO);
		unref(b, d);
		unref(b, absmax); /* del _absmax */
	}
	unref(b, q->w); /* the fp32 weight: self.data = w_4bit */
	s->to = *b->n;
	b->module = -1;
	q->q4 = (int32_t)M->nq4++;
}

/* The loader's order (docs/finetune.md, "What zerosim builds for it"):
 * transformers' 4-bit loading quantizes each weight as it moves it to
 * the device, one tensor at a time (create_quantized_param:
 * Params4bit(...).to(device), whose _quantize frees the 16/32-bit copy),
 * so each layer's quantization (built after the whole model, as
 * lora_setup meets the layer) runs right after its weight is made: the
 * set-up holds one layer's fp32 weight at a time, never the whole base. */
static void q4_stream(struct bld *b, struct model *M)
{
	size_t n = *b->n, k = 0;
	if (!M->nq4)
		return;
	int32_t *at = zs_calloc(n + 1, sizeof *at); /* at[i]: 1 + the layer whose events go before event i */
	unsigned char *moved = zs_calloc(n ? n : 1, 1);
	for (size_t j = 0; j < M->nq4; j++) {
		at[M->q4[j].at] = (int32_t)j + 1;
		memset(moved + M->q4[j].from, 1, M->q4[j].to - M->q4[j].from);
	}
	struct ag_event *ev = zs_calloc(n ? n : 1, sizeof *ev), *old = *b->list;
	for (size_t i = 0; i <= n; i++) {
		if (at[i]) {
			const struct q4_st *q = &M->q4[at[i] - 1];
			memcpy(ev + k, old + q->from, (q->to - q->from) * sizeof *ev);
			k += q->to - q->from;
		}
		if (i < n && !moved[i])
			ev[k++] = old[i];
	}
	memcpy(old, ev, n * sizeof *ev);
	free(ev);
	free(moved);
	free(at);
}

/* dequantize_4bit (functional.py lines 930–1015): with double
 * quantization the fp32 absmax first (dequantize_blockwise, then `absmax
 * += offset`, lines 981–984), then the weight [out, in] in fp32; the
 * absmax goes when it returns. Returns the weight (one holder). */
static T q4_weight(struct bld *b, const struct q4_st *q)
{
	T am = q->absmax;
	if (q->qabsmax != NO) {
		am = TMP("dequantize_blockwise (absmax)", AG_F32, q4_blocks(q));
		op(b, AG_OP_DEQUANTIZE_BLOCKWISE, q->qabsmax, q->absmax2, q->code2, am, NO, NO)->arg[0] = NF4_DQ_BLOCK;
		op(b, AG_OP_ADD_, am, q->offset, NO, am, NO, NO)->arg[0] = 1;
	}
	/* into quant_state.dtype, the weight's before quantizing: the dtype
	 * the model was loaded in, fp32 but with --load-dtype bf16. Under
	 * DeepSpeed's bf16 (mdt bf16) the loader quantized the fp32 weight
	 * before deepspeed.initialize's module.bfloat16() (engine.py
	 * 1228-1231 at 38327e0), which casts floating parameters alone: the
	 * QuantState, no parameter, keeps dtype fp32 (bitsandbytes 0.47.0
	 * functional.py quantize_4bit lines 879 and 890: dtype=A.dtype) */
	T d = TMP("dequantize_4bit", b->o->load_bf16 ? AG_BF16 : AG_F32, q->rows, q->cols);
	op(b, AG_OP_NF4_DEQUANTIZE, q->packed, am, NO, d, NO, NO);
	if (q->qabsmax != NO)
		unref(b, am);
	return d;
}

/* Linear4bit.forward over x [.., in] (nn/modules.py lines 541–565):
 * F.linear(x, W, bias) with W dequantized (1.13's linear: addmm over x's
 * 2-D view with a bias, mm without; inside the autograd.Function, so
 * nothing saved); then, for an adapted layer, PEFT's clone and the
 * adapter. *dx: x requires grad (the node's backward makes x's gradient).
 * Under autocast (--precision amp-bf16) the compute dtype is bf16, as the
 * QLoRA recipe sets it (BitsAndBytesConfig(bnb_4bit_compute_dtype=
 * torch.bfloat16): compute_type_is_set, lines 482–483): x.to(bf16) (line
 * 559: a copy where x is fp32, *cast set; ToCopyBackward), the bias
 * .to(bf16) (line 561: a copy a call, frozen: no node), MatMul4Bit
 * (autograd/_functions.py line 380): the weight dequantized into
 * quant_state.dtype, the weight's dtype before quantizing (fp32: zerosim's
 * model is fp32), then .to(A.dtype), a bf16 copy, the fp32 one gone before
 * F.linear runs (its operands all bf16 already: autocast's linear casts
 * nothing); its bf16 result .to(x's dtype) (line 565: where *cast, an fp32
 * copy, ToCopyBackward; the bf16 one gone), x's and the bias's copies
 * gone as forward returns. A bias whose dtype is not x's is cast for
 * good (`self.bias.data = self.bias.data.to(x.dtype)`, line 551): the
 * parameter's dtype would change in the first forward, not described
 * (gpt2's c_proj, fed bf16). Loaded in bf16 (--load-dtype bf16) x
 * is bf16 already and the weight dequantized into bf16: no copy. */
static enum ag_dtype q4_cdt(const struct bld *b)
{
	return b->o->amp != AG_F32 ? b->o->amp : b->o->mdt;
}

static T q4_linear(struct bld *b, T x, struct pt *w, struct pt *bias, uint64_t *rows, uint64_t *in, int *dx,
                   int *cast)
{
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	const struct q4_st *q = &b->M->q4[w->q4];
	/* the compute dtype: bf16 under autocast, or loaded in bf16
	 * (bnb_4bit_compute_dtype=torch.bfloat16, the recipe's), else fp32 */
	enum ag_dtype cdt = q4_cdt(b);
	*in = o->shape[o->ndim - 1], *rows = numel(o) / *in;
	*cast = o->dtype != cdt;
	/* gpt2 under autocast: c_attn's result is back in fp32 (x's dtype),
	 * which the attention's casts (written for a bf16 qkv) do not take,
	 * and c_proj's bf16 input would cast its bias for good */
	if (b->o->amp != AG_F32 && b->m->family == ZS_FAMILY_GPT2)
		unsupported(b, "QLoRA under autocast over gpt2: Linear4bit hands c_attn's result back in fp32 to an "
		               "attention written for bf16, and casts c_proj's bias to bf16 for good (bitsandbytes 0.47.0 "
		               "nn/modules.py line 551)");
	if (bias && b->s->tensor[bias->w].dtype != o->dtype)
		unsupported(b, "QLoRA under autocast with a biased 4-bit layer fed bf16: Linear4bit.forward casts its "
		               "bias to bf16 for good (bitsandbytes 0.47.0 nn/modules.py line 551)");
	T xm = *cast ? to_dtype(b, x, cdt, "_to_copy (Linear4bit's x.to(compute_dtype))") : x;
	T bm = bias && cdt != b->s->tensor[bias->w].dtype ? to_dtype(b, bias->w, cdt, "_to_copy (Linear4bit's bias.to(compute_dtype))")
	       : bias ? bias->w : NO;
	T x2 = reshape(b, xm, 2, SH(*rows, *in));
	T d = q4_weight(b, q);
	if (cdt != b->s->tensor[d].dtype) { /* .to(A.dtype): the fp32 weight goes as the copy is made */
		T d16 = to_dtype(b, d, cdt, "_to_copy (dequantize_4bit(...).to(A.dtype))");
		unref(b, d);
		d = d16;
	}
	T dt = transpose_last2(b, d);
	T y = TMP(bias ? "addmm (Linear4bit)" : "mm (Linear4bit)", cdt, *rows, q->rows);
	op(b, bias ? AG_OP_ADDMM : AG_OP_MM, x2, dt, bm, y, NO, NO);
	unref(b, dt);
	unref(b, d); /* the dequantized weight: a temporary of the call */
	*dx = RG(b, x2);
	unref(b, x2);
	T res = grad_in_x_shape(b, y, o);
	if (*cast) { /* .to(inp_dtype) */
		T r32 = to_dtype(b, res, o->dtype, "_to_copy (Linear4bit's result .to(x's dtype))");
		unref(b, res);
		res = r32;
		unref(b, xm);
	}
	if (bm != NO && bm != bias->w)
		unref(b, bm);
	if (w->lora < 0)
		return res;
	T c = like(b, "clone (lora.bnb.Linear4bit's result)", res);
	op(b, AG_OP_COPY, res, NO, NO, c, NO, NO);
	unref(b, res);
	lora_over_4bit(b, w->lora);
	return lora_fwd(b, x, c, w->lora);
}

/* Its backward from g [.., out]: the adapter's branch first (later in
 * forward; CloneBackward hands g on as it is), then MatMul4Bit's: x's
 * gradient g @ W, W dequantized again (_functions.py line 411), to *xbuf.
 * Where forward cast (autocast, x fp32): g's ToCopyBackward to bf16
 * first (g let go as it returns), the weight dequantized in fp32 and
 * .to(grad_output.dtype) (bf16), the product bf16, then x.to(bf16)'s
 * ToCopyBackward back to fp32. */
static void q4_linear_bwd(struct bld *b, T g, int owned, uint64_t rows, uint64_t in, int dx, int cast, struct pt *w,
                          T *xbuf)
{
	const struct ag_tensor go_ = b->s->tensor[g];
	const struct q4_st *q = &b->M->q4[w->q4];
	enum ag_dtype cdt = q4_cdt(b);
	if (w->lora >= 0) {
		ref(b, g);
		lora_bwd(b, g, w->lora, xbuf);
	}
	if (dx && cast) {
		T gb = to_dtype(b, g, cdt, "_to_copy (ToCopyBackward)");
		if (owned)
			unref(b, g);
		g = gb, owned = 1;
	}
	T g2 = reshape(b, g, 2, SH(rows, q->rows));
	T r = NO;
	if (dx) {
		T d = q4_weight(b, q);
		if (cdt != b->s->tensor[d].dtype) {
			T d16 = to_dtype(b, d, cdt, "_to_copy (dequantize_4bit(...).to(grad_output.dtype))");
			unref(b, d);
			d = d16;
		}
		r = TMP("mm (MatMul4Bit backward)", cdt, rows, in);
		op(b, AG_OP_MM, g2, d, NO, r, NO, NO);
		unref(b, d);
	}
	unref(b, g2);
	if (owned)
		unref(b, g);
	if (r != NO) {
		T rx = grad_in_x_shape(b, r, &go_);
		arrive(b, xbuf, cast ? ac_grad_back(b, rx) : rx);
	}
}

/* LoRA (--lora-r): PEFT v0.20.0's lora.Linear (peft/tuners/lora/layer.py,
 * as tests/ft_torch.py's LoraLinear writes it; docs/finetune.md "LoRA as
 * PEFT writes it"): result = base_layer(x); result = result +
 * lora_B(lora_A(dropout(x))) * scaling, dropout nn.Dropout(p)
 * (--lora-dropout; p = 0: nn.Identity, no op), lora_A and lora_B
 * nn.Linear without bias, scaling lora_alpha / r. */

struct lora_st {
	size_t a, b;            /* lora_A [r, in], lora_B [out, r]: model.pt indices */
	double scaling;         /* lora_alpha / r, a Python float */
	struct lin_saved sa, sb;
	T wk;                   /* MulBackward0's saved `other`: the wrapped number scaling (NO: none) */
	T drop;                 /* the dropout's noise its MulBackward0 keeps (NO: p = 0, or x requires no grad) */
	int xcast;              /* x's dtype was not lora_A's (autocast: x 16-bit, the adapters fp32): PEFT's
	                         * x.to(lora_A.weight.dtype) made a copy (ToCopyBackward back to xdt) */
	enum ag_dtype xdt;      /* x's own dtype */
	int bnb;                /* over a 4-bit base: lora.bnb.Linear4bit's forward (q4_linear) */
	int ocast;              /* bnb where the term's dtype is not the result's (autocast: a bf16 term, an fp32
	                         * result; --load-dtype bf16: an fp32 term, a bf16 result): output.to(result's)
	                         * made a copy (ToCopyBackward) */
	enum ag_dtype odt;      /* the term's own dtype */
};

/* Under --wrapper fsdp (o->fsdp_unit_marks) a mark where PEFT's wrap
 * policy's unit of adapter k's lora_A or lora_B (which) begins or ends its
 * forward or backward (util/ag_fsdp.c places its unshard and reshard
 * there). In backward the end is after the gradient of the adapter's
 * input has arrived (its view's node runs before the weight's chain: the
 * higher sequence number) and before the next node's pre-hook. A frozen
 * adapter is no unit of its own (PEFT's policy asks requires_grad when
 * FSDP wraps: util/ag_fsdp.c make_units), so it has no marks; nor has
 * any adapter under --fsdp-orig-params on (no PEFT policy: lora_orig_params). */
static void lora_unit_mark(struct bld *b, int32_t k, char which, const char *where)
{
	const struct lora_st *st = &b->M->lora[k];
	if (b->o->fsdp_unit_marks && !b->o->fsdp_orig_params && !b->M->pt[which == 'A' ? st->a : st->b].frozen)
		mark(b, "unit:lora.%d.%c:%s", (int)k, which, where);
}

/* Where `* scaling`'s MulBackward0 keeps its wrapped number (NULL: no
 * node). Non-reentrant under 2.x (nr_wrapped: the number saved as it is,
 * no hook) the forward's node keeps it until the adapter's backward uses
 * it (st->wk), which may be before the rerun (an adapter over the layer's
 * last linear: nr_unpack_at); the rerun's node keeps its own in the
 * frame's list, gone at the early stop (ckpt_early_stop), never made
 * where the stop comes first. */
static T *lora_wk(struct bld *b, struct lora_st *st, T bo)
{
	int nr2 = b->nrc && b->o->version != ZS_TORCH_1_13;
	if (nr2 && b->regrad) {
		if (!RG(b, bo))
			return NULL;
		if (b->nrc->nwn == sizeof b->nrc->wn / sizeof *b->nrc->wn) {
			unsupported(b, "--recompute-impl non-reentrant: more wrapped numbers kept in a layer than described");
			return NULL;
		}
		return &b->nrc->wn[b->nrc->nwn++];
	}
	st->wk = NO;
	return nr2 && b->nograd ? &st->wk : RG(b, bo) ? &st->wk : NULL;
}

/* The adapter over the base layer's output y (its holder taken), x the
 * layer's input (the caller's): lora_A's linear keeps x (a view) for
 * A's weight gradient; lora_B's keeps A's output; `* scaling` keeps the
 * wrapped number for its input's gradient (mul.Tensor's MulBackward0
 * saves other where self requires grad, self where other does: never);
 * the sum (AddBackward0) keeps nothing. With --lora-dropout p > 0 the
 * dropout's output (dropout(): a new tensor, the CPU's noise kept where x
 * requires grad) is lora_A's input, and what its node keeps in x's place.
 * Returns the sum. */
static T lora_fwd(struct bld *b, T x, T y, int32_t k)
{
	struct lora_st *st = &b->M->lora[k];
	T a;
	st->drop = NO;
	/* PEFT's `x = self._cast_input_dtype(x, lora_A.weight.dtype)`: under
	 * autocast a 16-bit x (o_proj's, down_proj's input) is copied to
	 * lora_A's fp32, the local `x` holding it until forward returns;
	 * lora_A's linear then casts it back (autocast). Under DeepSpeed's
	 * bf16 (ag_options.mdt) module.bfloat16() made lora_A bf16 as x is:
	 * no copy (_cast_input_dtype returns x where the dtypes agree) */
	T x0 = x;
	st->xdt = b->s->tensor[x].dtype;
	/* lora.bnb.Linear4bit converts (x here, the term below) only where
	 * `requires_conversion = not torch.is_autocast_enabled()` (bnb.py line
	 * 543): that asks CUDA's autocast (1.13 and 2.6 alike), True inside
	 * torch.autocast("cuda"), so under --torch-device cuda's autocast
	 * neither copy is made: x reaches lora_A as it is, 16-bit, and its
	 * linear casts nothing of it */
	int conv = !(st->bnb && b->o->device == ZS_DEVICE_CUDA && b->o->lora_amp != AG_F32);
	st->xcast = conv && st->xdt != b->s->tensor[b->M->pt[st->a].w].dtype;
	if (st->xcast)
		x = to_dtype(b, x, b->s->tensor[b->M->pt[st->a].w].dtype, "_to_copy (PEFT's _cast_input_dtype)");
	b->adapter = 1; /* lora_A's and lora_B's linears: autocast's o->lora_amp (ac_dt) */
	if (b->o->lora_dropout > 0) {
		T xd = dropout(b, x, b->o->lora_dropout, &st->drop);
		lora_unit_mark(b, k, 'A', "fwd");
		a = linear(b, xd, &b->M->pt[st->a], &st->sa);
		lora_unit_mark(b, k, 'A', "fwd_end");
		unref(b, xd); /* the name: lora_A's node keeps its view where it needs it */
	} else {
		lora_unit_mark(b, k, 'A', "fwd");
		a = linear(b, x, &b->M->pt[st->a], &st->sa);
		lora_unit_mark(b, k, 'A', "fwd_end");
	}
	lora_unit_mark(b, k, 'B', "fwd");
	T bo = linear(b, a, &b->M->pt[st->b], &st->sb);
	lora_unit_mark(b, k, 'B', "fwd_end");
	b->adapter = 0;
	unref(b, a); /* lora_A's output: a temporary (B's node keeps its view) */
	T m = scalar_op(b, AG_OP_MUL_SCALAR, "mul (lora_B(...) * scaling)", bo, st->scaling, lora_wk(b, st, bo));
	unref(b, bo);
	/* lora.bnb.Linear4bit (tuners/lora/bnb.py lines 543–552): where
	 * torch.is_autocast_enabled() is False — under 2.6 that asks CUDA's
	 * autocast, so under the CPU's too (seen: False inside
	 * torch.autocast("cpu")) — output.to(expected_dtype), result's: an
	 * fp32 copy of the 16-bit term before the sum (ToCopyBackward) */
	st->odt = b->s->tensor[m].dtype;
	st->ocast = conv && st->bnb && st->odt != b->s->tensor[y].dtype;
	if (st->ocast) {
		T m32 = to_dtype(b, m, b->s->tensor[y].dtype, "_to_copy (PEFT's output.to(expected_dtype))");
		unref(b, m);
		m = m32;
	}
	T out = like(b, "add (result + lora)", y);
	op(b, AG_OP_ADD, y, m, NO, out, NO, NO)->arg[0] = 1;
	unref(b, y); /* `result` is rebound */
	unref(b, m);
	if (x != x0) /* forward returns: its local x, the fp32 copy */
		unref(b, x);
	return out;
}

/* Adapter k is lora.bnb.Linear4bit's (its base layer 4-bit). */
static void lora_over_4bit(struct bld *b, int32_t k)
{
	b->M->lora[k].bnb = 1;
}

/* x's gradient through PEFT's x.to(float32) (its ToCopyBackward: back to
 * x's 16-bit type, a new tensor) where it made a copy. */
static T lora_x_back(struct bld *b, const struct lora_st *st, T dx)
{
	return st->xcast ? ac_grad_back_to(b, dx, st->xdt) : dx;
}

/* The adapter's branch of the sum's backward, from g (one holder of it
 * taken): MulBackward0 (g * scaling, a new tensor; the fp32 copy of the
 * number for the kernel), lora_B's MmBackward, lora_A's, the dropout's
 * MulBackward0 (its noise let go); x's gradient arrives at *xbuf where x
 * requires grad. */
static void lora_bwd(struct bld *b, T g, int32_t k, T *xbuf)
{
	struct lora_st *st = &b->M->lora[k];
	if (st->wk == NO) { /* no node: the branch requires no grad */
		unref(b, g);
		return;
	}
	if (st->ocast) /* output.to(expected_dtype)'s ToCopyBackward: g in the term's 16-bit type */
		g = ac_grad_back_to(b, g, st->odt);
	T cs = cast_scalar_as(b, st->wk, b->s->tensor[g].dtype);
	T dm = like(b, "mul (scaling backward)", g);
	op(b, AG_OP_MUL_SCALAR, g, NO, NO, dm, NO, NO)->arg[0] = st->scaling;
	unref(b, cs);
	unref(b, g);
	unref(b, st->wk);
	st->wk = NO;
	if (b->nrunpack) /* (2.x: lora_B's node may be the first that unpacks: the layer's last linear) */
		nr_unpack_at(b);
	T da = NO;
	lora_unit_mark(b, k, 'B', "bwd");
	b->adapter = 1;
	linear_bwd(b, dm, 1, &st->sb, &b->M->pt[st->b], &da);
	b->adapter = 0;
	lora_unit_mark(b, k, 'B', "bwd_end");
	if (da == NO) {
		if (st->drop != NO)
			unref(b, st->drop);
		st->drop = NO;
		return;
	}
	lora_unit_mark(b, k, 'A', "bwd");
	if (st->drop == NO) {
		T dx = NO;
		b->adapter = 1;
		linear_bwd(b, da, 1, &st->sa, &b->M->pt[st->a], &dx);
		b->adapter = 0;
		if (dx != NO)
			arrive(b, xbuf, lora_x_back(b, st, dx));
		lora_unit_mark(b, k, 'A', "bwd_end");
		return;
	}
	T dd = NO; /* the dropout output's gradient, then x's */
	b->adapter = 1;
	linear_bwd(b, da, 1, &st->sa, &b->M->pt[st->a], &dd);
	b->adapter = 0;
	lora_unit_mark(b, k, 'A', "bwd_end");
	if (dd != NO)
		arrive(b, xbuf, lora_x_back(b, st, dropout_bwd(b, dd, 1, st->drop)));
	else
		unref(b, st->drop);
	st->drop = NO;
}

/* pt q's module name (its Hugging Face name less ".weight" or ".bias") into out. */
static void lora_module_name(struct bld *b, const struct pt *q, char *out, size_t n)
{
	part_name(b, q->param, q->part, out, n);
	char *dot = strrchr(out, '.');
	if (dot)
		*dot = '\0';
}

/* PEFT's name of base layer q's adapter weight, lora_A (ab = 0) or
 * lora_B: MODULE.lora_A.default.weight (util/lora.h's zs_lora_module). */
static void lora_weight_name(struct bld *b, const struct pt *q, int ab, char *out, size_t n)
{
	char mod[256];
	lora_module_name(b, q, mod, sizeof mod);
	snprintf(out, n, "%s.%s.weight", mod, zs_lora_module(ab));
}

/* Which of base layer q's adapters spec freezes by their PEFT names
 * (MODULE.lora_A.default.weight, MODULE.lora_B.default.weight): bit 0
 * lora_A, bit 1 lora_B. */
static int lora_frozen(struct bld *b, const struct pt *q, const char *spec)
{
	char name[320];
	int fz = 0;
	for (int ab = 0; ab < 2; ab++) {
		lora_weight_name(b, q, ab, name, sizeof name);
		if (zs_freeze_match(spec, name, b->m->layers))
			fz |= 1 << ab;
	}
	return fz;
}

/* A new adapter parameter [rows, cols] of layer `module`, trained. */
static size_t lora_param(struct bld *b, struct model *M, int32_t module, uint64_t rows, uint64_t cols)
{
	struct pt *q = &M->pt[M->npt];
	memset(q, 0, sizeof *q);
	q->param = q->part = q->lora = q->q4 = -1;
	q->g = q->m = q->v = q->step = q->w16 = NO;
	b->module = module;
	/* the model's dtype: fp32, or bf16 under DeepSpeed's bf16 (mdt), whose
	 * module.bfloat16() (engine.py 1228-1231 at 38327e0) runs after
	 * get_peft_model and casts the adapters with every other parameter
	 * (PEFT's autocast_adapter_dtype had left fp32 adapters fp32: a
	 * no-op over an fp32 model; docs/finetune.md, "DeepSpeed's bf16") */
	/* (--load-dtype bf16: PEFT's autocast_adapter_dtype=True, get_peft_model's
	 * default (mapping_func.py line 35, v0.20.0), keeps the adapters fp32
	 * over the bf16 model: cast_adapter_dtype, tuners/tuners_utils.py
	 * lines 2243-2288, upcasts bf16 ones; over a uint8 Params4bit
	 * _move_adapter_to_device_of_base_layer casts them to no float dtype) */
	/* (--lora-dtype bf16: TRL's cast after get_peft_model, param.data =
	 * param.data.to(torch.bfloat16); the fp32 adapters it replaces are
	 * not made: a few KiB at the set-up, before any step) */
	q->w = mk(b, "parameter", b->o->lora_bf16 ? AG_BF16 : b->o->load_bf16 ? AG_F32 : b->o->mdt, 2, SH(rows, cols),
	          AG_ROLE_PARAM, ZS_CAT_PARAM32, -1);
	b->rg[q->w] = 1;
	b->module = -1;
	return M->npt++;
}

/* PEFT's inject_adapter over the built model: every base parameter
 * frozen (_mark_only_adapters_as_trainable, bias "none"), and after each
 * targeted linear layer's own parameters (LoraLinear registers
 * base_layer first) its lora_A and lora_B, made after the whole model as
 * get_peft_model makes them. lora_A: kaiming_uniform_(a = sqrt(5)) in
 * PyTorch, here from zerosim's RNG (bernoulli_ signs of 1/sqrt(in), the
 * same bound: no bytes either way); lora_B zeros. Returns the number of
 * layers adapted. */
static size_t lora_setup(struct bld *b, struct model *M)
{
	const char *targets = zs_lora_targets(b->m, b->o->lora_targets, NULL); /* ag_step_build checked it */
	size_t n = M->npt;
	struct pt *old = M->pt;
	M->pt = zs_calloc(3 * n + 1, sizeof *M->pt); /* at most two adapters a parameter */
	M->npt = 0;
	char name[256], next[256], wname[256];
	for (size_t k = 0; k < n; k++) {
		struct pt *q = &M->pt[M->npt++];
		*q = old[k];
		q->frozen = 1;
		b->rg[q->w] = 0;
		lora_module_name(b, q, name, sizeof name);
		if (k + 1 < n) {
			lora_module_name(b, &old[k + 1], next, sizeof next);
			if (strcmp(name, next) == 0)
				continue;
		}
		/* the layer's last parameter: its weight, a linear layer's
		 * (2-D; not an embedding, not the output embedding)? */
		size_t w = M->npt - 1;
		for (;;) {
			part_name(b, M->pt[w].param, M->pt[w].part, wname, sizeof wname);
			size_t l = strlen(wname);
			if ((l > 7 && strcmp(wname + l - 7, ".weight") == 0) || w == 0)
				break;
			lora_module_name(b, &M->pt[w - 1], next, sizeof next);
			if (strcmp(next, name) != 0)
				break;
			w--;
		}
		const struct ag_tensor *wt = &b->s->tensor[M->pt[w].w];
		size_t l = strlen(wname);
		if (wt->ndim != 2 || l <= 7 || strcmp(wname + l - 7, ".weight") != 0 || strcmp(name, "lm_head") == 0 ||
		    strstr(name, "wte") || strstr(name, "wpe") || strstr(name, "embed_tokens"))
			continue;
		if (b->o->quant_nf4) { /* a linear layer: bnb's Linear4bit, adapted or not */
			q4_quantize(b, M, w);
			wt = &b->s->tensor[M->pt[w].w]; /* the array grew */
		}
		if (!zs_lora_target(targets, name))
			continue;
		/* nn.Linear's weight is [out, in], transformers' Conv1D's [in, out] */
		int conv = b->m->family == ZS_FAMILY_GPT2;
		uint64_t in = wt->shape[conv ? 0 : 1], out = wt->shape[conv ? 1 : 0], r = b->o->lora_r;
		int32_t module = (int32_t)b->p->tensor[M->pt[w].param].module;
		M->lora = zs_realloc(M->lora, (M->nlora + 1) * sizeof *M->lora);
		struct lora_st *st = &M->lora[M->nlora];
		memset(st, 0, sizeof *st);
		st->scaling = b->o->lora_alpha / (double)r; /* LoraLayer.update_layer, line 277 */
		st->wk = st->drop = NO;
		st->a = lora_param(b, M, module, r, in);
		T A = M->pt[st->a].w;
		op(b, AG_OP_BERNOULLI_, A, NO, NO, A, NO, NO)->arg[0] = 0.5;
		op(b, AG_OP_ADD_SCALAR_, A, NO, NO, A, NO, NO)->arg[0] = -0.5;
		op(b, AG_OP_MUL_SCALAR_, A, NO, NO, A, NO, NO)->arg[0] = 2 / sqrt((double)in);
		st->b = lora_param(b, M, module, out, r);
		op(b, AG_OP_FILL, NO, NO, NO, M->pt[st->b].w, NO, NO)->arg[0] = 0;
		/* their places in the order a case's "lora" lists them (engine/ag_exec.c
		 * feeds a case's values there in place of these ops' draws) */
		b->s->tensor[A].adapter = 2 * (uint32_t)M->nlora + 1;
		b->s->tensor[M->pt[st->b].w].adapter = 2 * (uint32_t)M->nlora + 2;
		M->pt[w].lora = (int32_t)M->nlora++;
		/* --freeze over PEFT's model: the adapters it names frozen (bit 0
		 * lora_A, bit 1 lora_B), as tests/ft_torch.py freezes by name
		 * after wrapping; the base is frozen already */
		int fz = b->o->freeze && *b->o->freeze ? lora_frozen(b, &M->pt[w], b->o->freeze) : 0;
		for (int ab = 0; ab < 2; ab++)
			if (fz & (1 << ab)) {
				struct pt *f = &M->pt[ab ? st->b : st->a];
				f->frozen = 1;
				b->rg[f->w] = 0;
			}
	}
	free(old);
	q4_stream(b, M);
	for (size_t i = 0; i < M->npt; i++)
		if (M->pt[i].param >= 0)
			b->pt_of[(size_t)M->pt[i].param * 4 + (size_t)(M->pt[i].part + 1)] = (int32_t)i;
	return M->nlora;
}

/* The FSDP unit (transformer_auto_wrap_policy's: a block's index, -1
 * for the root) of pt q, an adapter's its base layer's. */
static long long pt_unit(struct bld *b, const struct pt *q)
{
	int32_t module = q->param >= 0 ? (int32_t)b->p->tensor[q->param].module : b->s->tensor[q->w].module;
	return module >= 0 ? b->p->module[module].index : -1;
}

/* --fsdp-orig-params on with --lora-r: no PEFT wrap policy, so each
 * block's unit holds its frozen base and its adapters (the training
 * script's transformer_auto_wrap_policy alone; docs/finetune.md, "FSDP
 * with use_orig_params=True"): a unit with a trained adapter trains, and
 * every frozen base parameter in it has its gradient computed (as
 * unit_trained's for --freeze: add_param's, which lora_setup's freezing
 * of the base undid). */
static void lora_orig_params(struct bld *b, struct model *M)
{
	for (size_t i = 0; i < M->npt; i++) {
		struct pt *q = &M->pt[i];
		b->s->tensor[q->w].orig_frozen = 0;
		if (!q->frozen)
			continue;
		long long u = pt_unit(b, q);
		int trains = 0;
		for (size_t j = 0; j < M->npt && !trains; j++)
			trains = !M->pt[j].frozen && pt_unit(b, &M->pt[j]) == u;
		if (trains)
			b->s->tensor[q->w].orig_frozen = 1;
	}
	for (size_t i = 0; i < M->npt; i++)
		if (b->s->tensor[M->pt[i].w].orig_frozen) {
			/* its gradient computed, never stepped (util/ag_fsdp.c) */
			M->pt[i].frozen = 0;
			b->rg[M->pt[i].w] = 1;
		}
}

/* LlamaRMSNorm op by op: x.pow(2).mean(-1, keepdim=True); x *
 * rsqrt(variance + eps); weight * that. */
/* kx: x requires grad (pow, mean, rsqrt and x * r have nodes and keep
 * x, x², r); kw: the weight does (weight * xr keeps xr: mul saves one
 * operand for the other's gradient only, the codegen's guard_for). */
struct rms_saved {
	T x, p2, r, xr, eps_w;
	int kx, kw;
	T w1;              /* gemma: (1 + w), kept for x's gradient */
	enum ag_dtype xdt; /* the input's dtype: a 16-bit one went through rmsnorm_amp */
};
static T rmsnorm_amp(struct bld *b, T x, struct pt *w, struct rms_saved *sv);
static void rmsnorm_amp_bwd(struct bld *b, T g, struct rms_saved *sv, struct pt *w, T *xbuf);
static T gemma_rmsnorm(struct bld *b, T x, struct pt *w, struct rms_saved *sv);
static int gemma3(const struct zs_model *m);
static void gemma_rmsnorm_bwd(struct bld *b, T g, struct rms_saved *sv, struct pt *w, T *xbuf);

/* x.pow(2).mean(-1, keepdim=True), the RMSNorms' variance (returned, [.., 1]):
 * pow saves its input where x requires grad (kx); mean is sum().div_(numel)
 * inside, a wrapped number for a moment; 1.13's MeanBackward0 keeps its
 * input whole (self.sym_numel() is not yet a saved scalar:
 * docs/torch_saved.md), 2.6's its sizes (sv->p2). */
static T rms_variance(struct bld *b, T x, int kx, struct rms_saved *sv)
{
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	uint64_t sh[AG_MAXDIM];
	for (unsigned i = 0; i < o->ndim; i++)
		sh[i] = o->shape[i];
	sh[o->ndim - 1] = 1;
	T p2 = like(b, "pow (x^2, RMSNorm)", x);
	op(b, AG_OP_POW_SCALAR, x, NO, NO, p2, NO, NO)->arg[0] = 2;
	if (kx)
		ref(b, x); /* pow saves its input */
	T var = tmp(b, "mean (RMSNorm variance)", AG_F32, o->ndim, sh);
	op(b, AG_OP_MEAN_LAST, p2, NO, NO, var, NO, NO);
	T w_ = wrapped(b, (double)o->shape[o->ndim - 1]);
	unref(b, cast_scalar(b, w_));
	unref(b, w_);
	if (b->o->version == ZS_TORCH_1_13 && kx)
		sv->p2 = p2;
	else {
		sv->p2 = NO;
		unref(b, p2);
	}
	return var;
}

/* Its normalisation up to x * r (returned); *r and *var the holders of
 * rsqrt's result and the variance the caller lets go after weight's mul
 * (var_ NULL: the variance goes as `+ eps` consumes it, Gemma2RMSNorm's
 * one expression); sv->x, sv->r set. */
static T rms_xr(struct bld *b, T x, struct pt *w, struct rms_saved *sv, T *r_, T *var_)
{
	int kx = RG(b, x), kw = RG(b, w->w);
	sv->kx = kx, sv->kw = kw;
	sv->w1 = NO; /* gemma's alone */
	T var = rms_variance(b, x, kx, sv);
	T ve = scalar_op(b, AG_OP_ADD_SCALAR, "add (variance + eps)", var, b->m->norm_eps, NULL);
	if (!var_) { /* Gemma2RMSNorm's one expression: the mean goes as the add consumes it */
		unref(b, var);
		var = NO;
	}
	T r = like(b, "rsqrt (RMSNorm)", ve);
	op(b, AG_OP_RSQRT, ve, NO, NO, r, NO, NO);
	if (kx)
		ref(b, r); /* rsqrt saves its result */
	unref(b, ve);
	T xr = like(b, "mul (x rsqrt)", x);
	op(b, AG_OP_MUL, x, r, NO, xr, NO, NO);
	if (kx) {
		ref(b, x);  /* mul saves both operands */
		ref(b, r);  /* and mul saves it */
	}
	sv->x = kx ? x : NO, sv->r = kx ? r : NO;
	*r_ = r;
	if (var_)
		*var_ = var;
	return xr;
}

static T rmsnorm(struct bld *b, T x, struct pt *w, struct rms_saved *sv)
{
	if (b->m->gemma)
		return gemma_rmsnorm(b, x, w, sv);
	/* after module.bfloat16(): the input bf16, LlamaRMSNorm's fp32
	 * upcast and its cast back (modeling_llama.py LlamaRMSNorm.forward) */
	if (b->s->tensor[x].dtype != AG_F32)
		return rmsnorm_amp(b, x, w, sv);
	sv->xdt = AG_F32;
	T r, var;
	T xr = rms_xr(b, x, w, sv, &r, &var);
	T y = like(b, "mul (weight x)", x);
	op(b, AG_OP_MUL, w->w, xr, NO, y, NO, NO);
	unref(b, r); /* the temporary */
	unref(b, var); /* forward returns: `variance` goes */
	sv->xr = xr;
	/* xr: the name rebinding hands its holder to weight's mul, which keeps
	 * it for the weight's gradient only */
	if (!sv->kw) {
		unref(b, xr);
		sv->xr = NO;
	}
	return y;
}

/* Its backward below weight's mul, from x * r's gradient dxr (released):
 * x's gradients arrive at *xbuf. */
static void rms_xr_bwd(struct bld *b, T dxr, struct rms_saved *sv, T *xbuf)
{
	const struct ag_tensor o_ = b->s->tensor[dxr], *o = &o_; /* x's shape; a copy: the array grows */
	uint64_t sh[AG_MAXDIM];
	for (unsigned i = 0; i < o->ndim; i++)
		sh[i] = o->shape[i];
	sh[o->ndim - 1] = 1;
	/* MulBackward (x * r): x's g·r, r's g·x summed to [.., 1] */
	T dx = like(b, "mul (RMSNorm backward)", sv->x);
	op(b, AG_OP_MUL, dxr, sv->r, NO, dx, NO, NO);
	T drf = like(b, "mul (RMSNorm backward)", sv->x);
	op(b, AG_OP_MUL, dxr, sv->x, NO, drf, NO, NO);
	T dr = tmp(b, "sum (RMSNorm rsqrt grad)", AG_F32, o->ndim, sh);
	op(b, AG_OP_SUM_TO, drf, NO, NO, dr, NO, NO);
	unref(b, drf);
	unref(b, dxr);
	unref(b, sv->x);
	unref(b, sv->r);
	arrive(b, xbuf, dx);
	/* RsqrtBackward: -0.5 * grad * result.pow(3) (the pow first) */
	T r3 = like(b, "pow (rsqrt backward)", dr);
	op(b, AG_OP_POW_SCALAR, sv->r, NO, NO, r3, NO, NO)->arg[0] = 3;
	T hg = scalar_op(b, AG_OP_MUL_SCALAR, "mul (-0.5 grad)", dr, -0.5, NULL);
	T dve = like(b, "mul (rsqrt backward)", dr);
	op(b, AG_OP_MUL, hg, r3, NO, dve, NO, NO);
	unref(b, r3);
	unref(b, hg);
	unref(b, dr);
	unref(b, sv->r);
	/* AddBackward (variance + eps) passes; MeanBackward: expand / numel */
	int64_t est[AG_MAXDIM];
	for (unsigned i = 0; i < o->ndim; i++)
		est[i] = b->s->tensor[dve].stride[i];
	est[o->ndim - 1] = 0;
	T dvx = vw(b, dve, o->ndim, o->shape, est, 0);
	T dp2 = scalar_op(b, AG_OP_MUL_SCALAR, "div (mean backward)", dvx, 1.0 / (double)o->shape[o->ndim - 1], NULL);
	unref(b, dvx);
	unref(b, dve);
	unref(b, sv->p2);
	/* PowBackward: grad * (2 * x.pow(1)) */
	T x1 = like(b, "pow (pow backward)", sv->x);
	op(b, AG_OP_POW_SCALAR, sv->x, NO, NO, x1, NO, NO)->arg[0] = 1;
	T x2 = scalar_op(b, AG_OP_MUL_SCALAR, "mul (2 x)", x1, 2.0, NULL);
	T dxp = like(b, "mul (pow backward)", sv->x);
	op(b, AG_OP_MUL, dp2, x2, NO, dxp, NO, NO);
	unref(b, x1);
	unref(b, x2);
	unref(b, dp2);
	unref(b, sv->x);
	arrive(b, xbuf, dxp);
}

/* MulBackward (weight * xr) from RMSNorm's output gradient g (released):
 * weight's g·xr (xr promoted to fp32 when 16-bit: TensorIterator's copy
 * for the kernel), xr's g·w, each when its operand requires grad; then
 * validate_outputs: the weight's summed to [d], xr's cast to xdt (xr's
 * dtype: a 16-bit xr under autocast); the node's input and saved xr
 * released; weight's AccumulateGrad. Returns xr's gradient (NO: none). */
static T rms_w_bwd(struct bld *b, T g, struct rms_saved *sv, struct pt *w, enum ag_dtype xdt)
{
	T dwf = NO, dxr = NO, dw = NO;
	if (sv->kw) {
		T xp = sv->xr;
		if (b->s->tensor[xp].dtype != AG_F32 && b->s->tensor[g].dtype == AG_F32 && promotes_by_copy(b))
			xp = to_dtype(b, xp, AG_F32, "_to_copy (type promotion)");
		dwf = like(b, "mul (RMSNorm weight grad)", g);
		op(b, AG_OP_MUL, g, xp, NO, dwf, NO, NO);
		if (xp != sv->xr)
			unref(b, xp);
	}
	if (sv->kx) {
		dxr = like(b, "mul (RMSNorm backward)", g);
		op(b, AG_OP_MUL, g, w->w, NO, dxr, NO, NO);
	}
	if (sv->kw) {
		dw = like(b, "sum (RMSNorm weight grad)", w->w);
		op(b, AG_OP_SUM_TO, dwf, NO, NO, dw, NO, NO);
		unref(b, dwf);
	}
	if (dxr != NO && xdt != b->s->tensor[dxr].dtype)
		dxr = ac_grad_back_to(b, dxr, xdt);
	unref(b, g);
	unref(b, sv->xr);
	if (dw != NO)
		accumulate(b, w, dw);
	return dxr;
}

/* RMSNorm's backward from its output's gradient g (released); the input's
 * gradients arrive at *xbuf. */
static void rmsnorm_bwd(struct bld *b, T g, struct rms_saved *sv, struct pt *w, T *xbuf)
{
	if (b->m->gemma) {
		gemma_rmsnorm_bwd(b, g, sv, w, xbuf);
		return;
	}
	if (sv->xdt != AG_F32) {
		rmsnorm_amp_bwd(b, g, sv, w, xbuf);
		return;
	}
	T dxr = rms_w_bwd(b, g, sv, w, AG_F32);
	if (sv->kx)
		rms_xr_bwd(b, dxr, sv, xbuf);
}

/* apply_rotary_pos_emb for one of q, k ([B, n, T, hd] view x): x·cos +
 * rotate_half(x)·sin. */
struct rope_saved {
	T cos, sin;
	enum ag_dtype xdt; /* x's dtype (autocast: bf16 q or k against fp32 cos and sin) */
};

/* An operand of a binary op whose other operand is of dtype `to`, as
 * TensorIterator takes it: itself, or, of a lower float type than fp32,
 * on the CPU a copy in fp32 for the kernel (promotes_by_copy; the caller
 * lets it go after the op). */
static T promoted(struct bld *b, T x, enum ag_dtype to)
{
	if (b->s->tensor[x].dtype == to || to != AG_F32 || !promotes_by_copy(b)) {
		ref(b, x);
		return x;
	}
	return to_dtype(b, x, to, "_to_copy (type promotion)");
}

/* LlamaRMSNorm over a 16-bit x (qwen3's q_norm and k_norm under
 * autocast, on q_proj's and k_proj's bf16 outputs): its forward as
 * modeling_qwen3.py (000c33fdfde1, Qwen3RMSNorm) writes it:
 * hidden_states.to(float32) (a copy: ToCopyBackward), the fp32 norm as
 * rmsnorm's (pow, mean, rsqrt and mul are in no autocast list), then
 * weight * hidden_states.to(input_dtype): the bf16 copy, which mul keeps
 * for the weight's gradient, promoted against the fp32 weight
 * (TensorIterator's fp32 copy for the kernel), an fp32 result. The fp32
 * x * r goes when forward returns. */
static T rmsnorm_amp(struct bld *b, T x, struct pt *w, struct rms_saved *sv)
{
	enum ag_dtype dt = b->s->tensor[x].dtype, wdt = b->s->tensor[w->w].dtype;
	sv->xdt = dt;
	T x32 = to_dtype(b, x, AG_F32, "_to_copy (RMSNorm's to(float32))");
	T r, var;
	T xr = rms_xr(b, x32, w, sv, &r, &var);
	unref(b, x32); /* the name is rebound: pow and mul keep it */
	T xb = to_dtype(b, xr, dt, "_to_copy (RMSNorm's to(input_dtype))");
	/* an fp32 weight (autocast) promotes: fp32; a bf16 one
	 * (module.bfloat16()) multiplies in bf16 */
	T xp = promoted(b, xb, wdt);
	T y = like(b, "mul (weight x)", wdt == AG_F32 ? xr : xb);
	op(b, AG_OP_MUL, w->w, xp, NO, y, NO, NO);
	unref(b, xp);
	unref(b, r); /* the temporary */
	unref(b, var); /* forward returns: `variance` and the fp32 `hidden_states` go */
	unref(b, xr);
	sv->xr = xb;
	if (!sv->kw) {
		unref(b, xb);
		sv->xr = NO;
	}
	return y;
}

/* Its backward from the fp32 output's gradient g (released): MulBackward
 * (weight * xb): weight's g·xb (xb promoted: an fp32 copy for the
 * kernel), xb's g·w, then validate_outputs: the weight's summed to [d],
 * xb's cast to bf16; weight's AccumulateGrad; the ToCopyBackward of
 * .to(input_dtype) (back to fp32); rmsnorm's fp32 backward into x32's
 * buffer; the ToCopyBackward of .to(float32): x's gradient in bf16 to
 * *xbuf. */
static void rmsnorm_amp_bwd(struct bld *b, T g, struct rms_saved *sv, struct pt *w, T *xbuf)
{
	T dxr = rms_w_bwd(b, g, sv, w, sv->xdt);
	if (!sv->kx)
		return;
	T b32 = NO;
	rms_xr_bwd(b, ac_grad_back(b, dxr), sv, &b32);
	arrive(b, xbuf, ac_grad_back_to(b, b32, sv->xdt));
}

static T rope(struct bld *b, T x, T cos4, T sin4, struct rope_saved *sv)
{
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	uint64_t B = o->shape[0], n = o->shape[1], Tn = o->shape[2], hd = o->shape[3];
	enum ag_dtype rt = b->s->tensor[cos4].dtype; /* bf16 x fp32: fp32 */
	sv->xdt = o->dtype;
	T xp = promoted(b, x, rt);
	T xc = TMP("mul (x cos)", rt, B, n, Tn, hd);
	op(b, AG_OP_MUL, xp, cos4, NO, xc, NO, NO);
	unref(b, xp);
	int keep = RG(b, x); /* mul keeps cos (and sin) for x's grad only */
	if (keep)
		ref(b, cos4);
	T x2 = vw(b, x, 4, SH(B, n, Tn, hd / 2), o->stride, hd / 2);
	T x1 = vw(b, x, 4, SH(B, n, Tn, hd / 2), o->stride, 0);
	T nx2 = TMP("neg (rotate_half)", o->dtype, B, n, Tn, hd / 2);
	op(b, AG_OP_NEG, x2, NO, NO, nx2, NO, NO);
	T rot = TMP("cat (rotate_half)", o->dtype, B, n, Tn, hd);
	op(b, AG_OP_CAT_LAST, nx2, x1, NO, rot, NO, NO);
	unref(b, nx2);
	unref(b, x1);
	unref(b, x2);
	T rp = promoted(b, rot, rt);
	T rs = TMP("mul (rotate_half sin)", rt, B, n, Tn, hd);
	op(b, AG_OP_MUL, rp, sin4, NO, rs, NO, NO);
	unref(b, rp);
	if (keep)
		ref(b, sin4);
	unref(b, rot);
	T y = TMP("add (rope)", rt, B, n, Tn, hd);
	op(b, AG_OP_ADD, xc, rs, NO, y, NO, NO)->arg[0] = 1;
	unref(b, xc);
	unref(b, rs);
	sv->cos = keep ? cos4 : NO, sv->sin = keep ? sin4 : NO;
	return y;
}

/* Its backward from g (held elsewhere too: released by the caller's
 * AddBackward bookkeeping through `owned`); x's grads arrive at *xbuf. */
static void rope_bwd(struct bld *b, T g, struct rope_saved *sv, T *xbuf)
{
	const struct ag_tensor o_ = b->s->tensor[g], *o = &o_; /* a copy: the array grows */
	uint64_t B = o->shape[0], n = o->shape[1], Tn = o->shape[2], hd = o->shape[3];
	/* MulBackward (rot * sin); under autocast validate_outputs casts the
	 * fp32 product to rot's bf16 */
	T drot = TMP("mul (rope backward, g sin)", o->dtype, B, n, Tn, hd);
	op(b, AG_OP_MUL, g, sv->sin, NO, drot, NO, NO);
	if (sv->xdt != o->dtype)
		drot = ac_grad_back_to(b, drot, sv->xdt);
	unref(b, sv->sin);
	/* CatBackward: narrow views; NegBackward; the slices' backward
	 * (slice_backward: zeros of x's shape, the grad copied in) */
	T p0 = vw(b, drot, 4, SH(B, n, Tn, hd / 2), b->s->tensor[drot].stride, 0);
	T p1 = vw(b, drot, 4, SH(B, n, Tn, hd / 2), b->s->tensor[drot].stride, hd / 2);
	unref(b, drot);
	T dn = TMP("neg (rotate_half backward)", sv->xdt, B, n, Tn, hd / 2);
	op(b, AG_OP_NEG, p0, NO, NO, dn, NO, NO);
	unref(b, p0);
	T s2 = TMP("slice_backward (x2)", sv->xdt, B, n, Tn, hd);
	uint64_t half = hd / 2; /* x2 = x[..., hd/2:] */
	op(b, AG_OP_COPY, dn, NO, NO, s2, NO, NO)->arg[1] = (double)half;
	unref(b, dn);
	T s1 = TMP("slice_backward (x1)", sv->xdt, B, n, Tn, hd);
	op(b, AG_OP_COPY, p1, NO, NO, s1, NO, NO);
	unref(b, p1);
	arrive(b, xbuf, s2);
	arrive(b, xbuf, s1);
	/* MulBackward (x * cos) */
	T dxc = TMP("mul (rope backward, g cos)", o->dtype, B, n, Tn, hd);
	op(b, AG_OP_MUL, g, sv->cos, NO, dxc, NO, NO);
	if (sv->xdt != o->dtype)
		dxc = ac_grad_back_to(b, dxc, sv->xdt);
	unref(b, g);
	unref(b, sv->cos);
	arrive(b, xbuf, dxc);
}

/* repeat_kv's expand: x [B, kv, T, hd] (any strides) as [B, kv, rep, T,
 * hd], the rep dim of stride 0; the clone reads it in that order. */
static T expand_kv(struct bld *b, T x, uint64_t rep)
{
	const struct ag_tensor o_ = b->s->tensor[x], *o = &o_; /* a copy: the array grows */
	return vw(b, x, 5, SH(o->shape[0], o->shape[1], rep, o->shape[2], o->shape[3]),
	          (const int64_t[]){ o->stride[0], o->stride[1], 0, o->stride[2], o->stride[3] }, 0);
}

/* repeat_kv (modeling_llama.py): x[:, :, None].expand(B, kv, rep, T,
 * hd).reshape(B, kv·rep, T, hd), x's holder taken: a view where kv and
 * the stride-0 rep merge (computeStride, as dims01_merge: kv = 1), else
 * a contiguous copy (*copied set). */
static T repeat_kv(struct bld *b, T x, uint64_t rep, const char *what, int *copied)
{
	T xe = expand_kv(b, x, rep);
	const struct ag_tensor o_ = b->s->tensor[xe], *o = &o_; /* a copy: the array grows */
	uint64_t sh[4] = { o->shape[0], o->shape[1] * rep, o->shape[3], o->shape[4] };
	T r;
	*copied = !dims01_merge(o->shape + 1, o->stride + 1);
	if (*copied) {
		r = tmp(b, what, o->dtype, 4, sh);
		op(b, AG_OP_COPY, xe, NO, NO, r, NO, NO);
	} else {
		r = vw(b, xe, 4, sh, (const int64_t[]){ o->stride[0], rep == 1 ? o->stride[1] : o->stride[2],
		                                         o->stride[3], o->stride[4] }, 0);
	}
	unref(b, xe);
	unref(b, x);
	return r;
}

/* ExpandBackward of k's or v's repeat over the heads: g [B·h, ...] (its
 * holder taken) summed over rep into a new [B, kv, 1, T, hd]. */
static T heads_sum(struct bld *b, T g, uint64_t B, uint64_t kv, uint64_t Tn, uint64_t hd, int transposed,
                   const char *what)
{
	/* g as [B, kv, rep, T, hd]: a [B·h, T, hd] grad as it lies, or k^T's
	 * [B·h, hd, T] through the transpose */
	uint64_t rep = b->s->tensor[g].shape[0] / (B * kv);
	int64_t e = (int64_t)(Tn * hd);
	T gv = vw(b, g, 5, SH(B, kv, rep, Tn, hd),
	          transposed ? (const int64_t[]){ (int64_t)rep * e * (int64_t)kv, (int64_t)rep * e, e, 1, (int64_t)Tn }
	                     : (const int64_t[]){ (int64_t)rep * e * (int64_t)kv, (int64_t)rep * e, e, (int64_t)hd, 1 },
	          0);
	T s = TMP(what, b->s->tensor[g].dtype, B, kv, 1, Tn, hd);
	op(b, AG_OP_SUM_TO, gv, NO, NO, s, NO, NO);
	unref(b, gv);
	unref(b, g);
	return s;
}

/* repeat_kv's backward for g [B·h, ...] (a view over [B, kv, rep, T, hd]):
 * ExpandBackward's sum over rep, then the four SliceBackwards of
 * x[:, :, None, :, :] (each a new tensor of x's shape); with n_rep 1
 * (modeling_llama.py's repeat_kv returns its input) g itself, viewed.
 * Returns the grad of the [B, kv, T, hd] input. */
static T repeat_kv_bwd(struct bld *b, T g, uint64_t B, uint64_t kv, uint64_t Tn, uint64_t hd, int transposed)
{
	enum ag_dtype dt = b->s->tensor[g].dtype;
	if (b->s->tensor[g].shape[0] == B * kv) { /* n_rep 1: repeat_kv returned x, no node; g as it lies */
		int64_t e = (int64_t)(Tn * hd);
		T r = vw(b, g, 4, SH(B, kv, Tn, hd),
		         transposed ? (const int64_t[]){ e * (int64_t)kv, e, 1, (int64_t)Tn }
		                    : (const int64_t[]){ e * (int64_t)kv, e, (int64_t)hd, 1 },
		         0);
		unref(b, g);
		return r;
	}
	T s = heads_sum(b, g, B, kv, Tn, hd, transposed, "sum (repeat_kv backward)");
	for (int i = 0; i < 4; i++) {
		T n = TMP("slice_backward (repeat_kv's [:, :, None])", dt, B, kv, 1, Tn, hd);
		op(b, AG_OP_COPY, s, NO, NO, n, NO, NO);
		unref(b, s);
		s = n;
	}
	T r = reshape(b, s, 4, SH(B, kv, Tn, hd));
	unref(b, s);
	return r;
}

/* ------------------------------------------------------------------------ */
/* Mixtral's block (tests/hf_torch.py MixtralDecoderLayer over
 * tests/moe_torch.py's SparseMoeBlock: MixtralSparseMoeBlock of
 * modeling_mixtral.py at 00d4b3d2, lines 78-142, router_jitter_noise 0;
 * and qwen2_moe's and qwen3_moe's, hf_torch.py's QwenMoeDecoderLayer over
 * moe_torch.py's Qwen2MoeSparseMoeBlock and Qwen3MoeSparseMoeBlock: the
 * same routed ops, norm_topk_prob, the shared expert), in fp32, its allocations as PyTorch 1.13's allocator records them
 * (tests/moe_hf_torch.sh). The routing is the run's (ag_options.moe_counts):
 * n_e tokens to expert e in block i sizes every per-expert tensor. */

struct moe_expert_saved {
	T idx, top_x;          /* torch.where's two columns: views of one nonzero [n, 2] int64, held by
	                        * IndexAddBackward (top_x), the routing weight's IndexBackward (both) and
	                        * hidden_states[None, top_x]'s (top_x): one holder each */
	struct lin_saved w1, w3, w2;
	T w1o, silu, w3o;      /* SiluBackward's input; MulBackward's pair */
	T w2o, rw;             /* w2's output and routing_weights[top_x, idx, None] [n, 1]: MulBackward's pair
	                        * (under autocast w2o bf16, rw fp32: moe_fwd) */
	T prod;                /* their product, index_add_'s source (IndexAddBackward keeps it) */
};

struct moe_saved {
	struct lin_saved gate;
	T probs;               /* the router's softmax (SoftmaxBackward keeps it) */
	int lcast;             /* autocast: the logits were bf16, softmax's dtype=torch.float copied them
	                        * (a ToCopyBackward between SoftmaxBackward and the gate's mm) */
	T topi;                /* topk's indices [BT, k] (TopkBackward keeps them) */
	T ssum, vclone;        /* DivBackward0 of the in-place routing_weights /= sum: the sum [BT, 1] and
	                        * a clone of the original self (autograd's for an in-place op it needs) */
	T logits;              /* router_logits: returned, gone when the layer returns */
	/* qwen2_moe's shared expert (a Qwen2MoeMLP) and its gate */
	struct lin_saved sgp, sup, sdown, sgate;
	T sgo, ssilu, suo;     /* SiluBackward's input; MulBackward's pair */
	T sig, sy;             /* sigmoid(shared_expert_gate(x)) (SigmoidBackward and MulBackward keep it) and
	                        * shared_expert(x): MulBackward's pair */
	struct moe_expert_saved *ex; /* E of them (zs_calloc'd here, freed by moe_bwd) */
};

/* The block's module under the layer: mixtral's block_sparse_moe,
 * qwen2_moe's and qwen3_moe's mlp. */
static const char *moe_blk(const struct zs_model *m)
{
	return m->qwen_moe || m->fused_experts ? "mlp" : "block_sparse_moe";
}

/* An expert's three linears by role (MOE_GATE: silu's input, MOE_UP: its
 * multiplier, MOE_DOWN: the output), named as the family names them:
 * mixtral's w1, w3, w2; Qwen2MoeMLP's (qwen3_moe's experts too)
 * gate_proj, up_proj, down_proj. */
enum { MOE_GATE, MOE_UP, MOE_DOWN };
static const char *moe_tail(const struct zs_model *m, int role)
{
	static const char *const tails[2][3] = { { "w1", "w3", "w2" }, { "gate_proj", "up_proj", "down_proj" } };
	return tails[m->qwen_moe != 0][role];
}

/* The block's parameters as it registers them: the gate, then each
 * expert's linears (MixtralBlockSparseTop2MLP: w1, w2, w3, lines 66-68;
 * Qwen2MoeMLP: gate_proj, up_proj, down_proj), then qwen2_moe's
 * shared_expert (a Qwen2MoeMLP) and shared_expert_gate (util/step.c's
 * moe_block, which cites both files). */
static void moe_params(struct bld *b, struct model *M, unsigned long long L)
{
	const struct zs_model *m = b->m;
	static const int order[2][3] = { { MOE_GATE, MOE_DOWN, MOE_UP }, { MOE_GATE, MOE_UP, MOE_DOWN } };
	const char *blk = moe_blk(m);
	char n[256];
	snprintf(n, sizeof n, "model.layers.%llu.%s.gate.weight", L, blk);
	add_param(b, M, find_tensor(b, n), -1);
	for (int t = 0; m->fused_experts && t < 2; t++) { /* 5.x's MixtralExperts: gate_up_proj, down_proj */
		snprintf(n, sizeof n, "model.layers.%llu.mlp.experts.%s", L, t ? "down_proj" : "gate_up_proj");
		add_param(b, M, find_tensor(b, n), -1);
	}
	for (uint64_t e = 0; !m->fused_experts && e < m->experts; e++)
		for (int t = 0; t < 3; t++) {
			snprintf(n, sizeof n, "model.layers.%llu.%s.experts.%llu.%s.weight", L, blk, (unsigned long long)e,
			         moe_tail(m, order[m->qwen_moe != 0][t]));
			add_param(b, M, find_tensor(b, n), -1);
		}
	if (m->shared_ffn > 0)
		for (int t = 0; t < 4; t++) {
			snprintf(n, sizeof n, "model.layers.%llu.mlp.shared_expert%s.weight", L,
			         (const char *const[]){ ".gate_proj", ".up_proj", ".down_proj", "_gate" }[t]);
			add_param(b, M, find_tensor(b, n), -1);
		}
}

/* out = in0 <k> in1 (in1 NO for a unary op), a new tensor shaped as `shape`. */
static T moe_op(struct bld *b, enum ag_op k, const char *what, T shape, T in0, T in1)
{
	T out = like(b, what, shape);
	op(b, k, in0, in1, NO, out, NO, NO);
	return out;
}

/* Expert e's linear of role r (MOE_GATE, ...) in block i: its module, its weight. */
static int32_t moe_mod(struct bld *b, int i, uint64_t e, int r)
{
	return modname(b, "model.layers.%d.%s.experts.%llu.%s", i, moe_blk(b->m), (unsigned long long)e,
	               moe_tail(b->m, r));
}

static struct pt *moe_w(struct bld *b, struct model *M, int i, uint64_t e, int r)
{
	return PF(M, b, "model.layers.%d.%s.experts.%llu.%s.weight", i, moe_blk(b->m), (unsigned long long)e,
	          moe_tail(b->m, r));
}

/* A broadcast operand's gradient: full (released) summed to [rows, 1],
 * in full's dtype (qwen2_moe's sigmoid gate under autocast: bf16). */
static T moe_sum_to(struct bld *b, const char *what, T full, uint64_t rows)
{
	T out = TMP(what, b->s->tensor[full].dtype, rows, 1);
	op(b, AG_OP_SUM_TO, full, NO, NO, out, NO, NO);
	unref(b, full);
	return out;
}

/* An index's gradient through the None of its indexing
 * (`routing_weights[top_x, idx, None]`, `hidden_states[None, top_x]`:
 * an unsqueeze, then the index): IndexBackward's zeros are the
 * unsqueezed shape and UnsqueezeBackward hands on a view of them (in
 * `shape`), so 2.6's InputBuffer adds to it out of place (a view: its
 * storage has two holders), as 1.13's always does. z's holder is the
 * view's. */
static T moe_squeezed(struct bld *b, T z, unsigned nd, const uint64_t *shape)
{
	T v = reshape(b, z, nd, shape);
	unref(b, z);
	return v;
}

/* What of the options the block is not described under (one line into
 * *cause, -1), or a routing whose blocks do not route B·T·k assignments;
 * else 0. Described: 1.13 and 2.6 (eager attention; 2.6's departures in
 * moe_bwd), zero_grad zeros and set_to_none (an expert idle in a step
 * then keeps no grad and Adam skips it: adam_single's and adam_foreach's
 * q->g NO), and the three under 1.13's bf16 autocast (moe_fwd's,
 * moe_bwd's and the shared expert's casts), each checked against the allocator
 * (tests/moe_hf_torch.sh, its torch26 mode for 2.6). */
static int moe_refuse(const struct zs_model *m, const struct ag_options *o, char **cause)
{
	const char *no = o->moe_counts == NULL                ? "no routing (give --routing)"
	                 : o->attn == ZS_ATTN_SDPA            ? "--attn sdpa (2.6's default; give --attn eager)"
	                 : o->amp != AG_F32 && o->version != ZS_TORCH_1_13 ? "autocast under 2.6 (not compared yet; give "
	                                                                     "--torch-version 1.13 or --precision fp32)"
	                 : o->amp != AG_F32 && m->router_logits ? "autocast and output_router_logits true (the aux "
	                                                          "loss's casts not described yet; give "
	                                                          "--precision fp32)"
	                 : o->optim_impl == ZS_OPTIM_FUSED    ? "--optimizer-impl fused (give single or foreach)"
	                 : o->quant_nf4 ? "--quant-base"
	                 : o->recompute                       ? "--recompute full (give none)"
	                 : o->grad_accum > 1 && m->router_logits ? "--grad-accum and output_router_logits true (the "
	                                                           "aux loss's topk per micro-step not described yet; "
	                                                           "give --grad-accum 1)"
	                 : o->zero1_world ? "ZeroRedundancyOptimizer (give --schemes dp)"
	                 : m->attn_pdrop > 0                  ? "attention_dropout (give a config with 0)"
	                 : o->drop_logits                     ? "--logits dropped (the outputs' router_logits and "
	                                                        "aux loss not compared yet; give --logits kept)"
	                                                      : NULL;
	if (no)
		return refuse(cause, "--model %s: the PyTorch step of a mixture (%s) with %s is not described yet", m->name,
		              m->model_type, no);
	/* LoRA: adapters outside the block (q_proj,v_proj, PEFT's default for
	 * mixtral) leave it as it is, its parameters frozen (tests/moe_hf_torch.sh);
	 * an adapter on the router or an expert (inside the routed loop, on the
	 * expert's tokens alone) is not described. transformers 5.x's fused
	 * experts (gate_up_proj [E, 2I, d] and down_proj, 3-D nn.Parameters:
	 * issue #25) are no nn.Linear, the module PEFT v0.20.0's LoRA layer
	 * (peft/tuners/lora/layer.py's Linear, tests/ft_torch.py's LoraLinear)
	 * wraps, so zerosim follows 4.x's ModuleList of linears alone. */
	const char *lt = o->lora_r ? zs_lora_targets(m, o->lora_targets, NULL) : NULL;
	for (uint64_t l = 0; lt != NULL && l < m->layers; l++)
		for (uint64_t e = 0; e <= m->experts; e++)
			for (int r = 0; r < (e < m->experts ? 3 : m->shared_ffn > 0 ? 5 : 1); r++) {
				char mod[160];
				if (e == m->experts) /* the router, then qwen2_moe's shared expert and its gate */
					snprintf(mod, sizeof mod, "model.layers.%llu.%s.%s", (unsigned long long)l, moe_blk(m),
					         (const char *const[]){ "gate", "shared_expert.gate_proj", "shared_expert.up_proj",
					                                "shared_expert.down_proj", "shared_expert_gate" }[r]);
				else
					snprintf(mod, sizeof mod, "model.layers.%llu.%s.experts.%llu.%s", (unsigned long long)l,
					         moe_blk(m), (unsigned long long)e, moe_tail(m, r));
				if (zs_lora_target(lt, mod))
					return refuse(cause, "--lora-targets %s: %s is in the mixture block: an adapter on the router "
					              "or an expert is not described yet (give attention targets such as "
					              "q_proj,v_proj); transformers 5.x's fused 3-D experts are no nn.Linear, which "
					              "PEFT v0.20.0's LoRA layer wraps, so they are out", lt, mod);
			}
	/* under --grad-accum K the routing is the K micro-steps' lists of
	 * counts, micro-step major (moe_counts) */
	uint64_t want = o->batch * o->seq * m->experts_per_tok, K = o->grad_accum > 1 ? o->grad_accum : 1;
	for (uint64_t l = 0; l < K * m->layers; l++) {
		uint64_t sum = 0;
		for (uint64_t e = 0; e < m->experts; e++)
			sum += o->moe_counts[l * m->experts + e];
		if (sum != want)
			return refuse(cause, "--model %s: the routing's block %llu%s routes %llu assignments, B·T·k is %llu",
			              m->name, (unsigned long long)(l % m->layers), K > 1 ? " of a micro-step" : "",
			              (unsigned long long)sum, (unsigned long long)want);
	}
	return 0;
}

/* Block i's counts in the micro-step being written: under --grad-accum K
 * each micro-step routes its own micro-batch, so ag_options.moe_counts
 * holds K lists of L blocks, micro-step major ([k][block][expert]); an
 * expert idle in one micro-step and used in another is sized by each
 * micro-step's own count (its grad made or added to by AccumulateGrad,
 * accumulate()). */
static const uint64_t *moe_counts(struct bld *b, int i)
{
	size_t k = b->micro > 0 ? (size_t)b->micro : 0;
	return b->o->moe_counts + (k * b->m->layers + (size_t)i) * b->m->experts;
}

/* torch.nn.functional.one_hot(ix, E) of the choices ix [rows, k]
 * (aten's one_hot on the CPU: min() and max() checked through item(),
 * zeros [rows, k, E] int64, scatter_ of ones): the mask, one holder. */
static T one_hot(struct bld *b, T ix, uint64_t rows, uint64_t K, uint64_t E)
{
	enum ag_op range[2] = { AG_OP_MIN_ALL, AG_OP_MAX_ALL };
	for (int r = 0; r < 2; r++) {
		T v = tmp(b, r ? "max (one_hot)" : "min (one_hot)", AG_I64, 0, NULL);
		op(b, range[r], ix, NO, NO, v, NO, NO);
		unref(b, v);
	}
	T oh = TMP("one_hot (expert_mask)", AG_I64, rows, K, E);
	op(b, AG_OP_FILL, NO, NO, NO, oh, NO, NO);
	T ids3 = reshape(b, ix, 3, SH(rows, K, 1));
	op(b, AG_OP_SCATTER_, oh, ids3, NO, oh, NO, NO)->arg[0] = 1;
	unref(b, ids3);
	return oh;
}

/* qwen2_moe's shared expert, where Qwen2MoeSparseMoeBlock.forward runs
 * it (modeling_qwen2_moe.py at 00a3f938: after the routed loop, its locals
 * alive): shared_expert(x) (gate_proj, silu, up_proj, their product,
 * down_proj: Qwen2MoeMLP), shared_expert_gate(x) [BT, 1], its sigmoid,
 * their product [BT, d] and final_hidden_states + it, a new [BT, d] (the
 * routed sum and the product go as the name is rebound). */
static T moe_shared_fwd(struct bld *b, struct model *M, T xv, T fin, int i, struct moe_saved *s)
{
	b->module = modname(b, "model.layers.%d.mlp.shared_expert.gate_proj", i);
	s->sgo = linear(b, xv, PF(M, b, "model.layers.%d.mlp.shared_expert.gate_proj.weight", i), &s->sgp);
	s->ssilu = moe_op(b, AG_OP_SILU, "silu", s->sgo, s->sgo, NO);
	b->module = modname(b, "model.layers.%d.mlp.shared_expert.up_proj", i);
	s->suo = linear(b, xv, PF(M, b, "model.layers.%d.mlp.shared_expert.up_proj.weight", i), &s->sup);
	T mu = moe_op(b, AG_OP_MUL, "mul (silu(gate_proj x) * up_proj x)", s->ssilu, s->ssilu, s->suo);
	b->module = modname(b, "model.layers.%d.mlp.shared_expert.down_proj", i);
	s->sy = linear(b, mu, PF(M, b, "model.layers.%d.mlp.shared_expert.down_proj.weight", i), &s->sdown);
	unref(b, mu);
	b->module = modname(b, "model.layers.%d.mlp.shared_expert_gate", i);
	T gl = linear(b, xv, PF(M, b, "model.layers.%d.mlp.shared_expert_gate.weight", i), &s->sgate);
	b->module = modname(b, "model.layers.%d.mlp", i);
	s->sig = moe_op(b, AG_OP_SIGMOID, "sigmoid (shared_expert_gate)", gl, gl, NO);
	unref(b, gl);
	ref(b, s->sig); /* SigmoidBackward's result and MulBackward's self */
	T so = moe_op(b, AG_OP_MUL, "mul (sigmoid * shared_expert)", s->sy, s->sig, s->sy);
	/* autocast: the product is bf16 (shared_expert_gate's and down_proj's
	 * mm's bf16, sigmoid and mul in no autocast list: their input's dtype),
	 * final_hidden_states fp32, so the add promotes: TensorIterator copies
	 * the product to fp32 for the kernel (made before the sum, freed after
	 * it ran), the sum fp32 (1.13's allocator: tests/moe_hf_torch.sh) */
	T sop = b->s->tensor[so].dtype != AG_F32 ? to_dtype(b, so, AG_F32, "_to_copy (add's type promotion)") : so;
	T sum = like(b, "add (final_hidden_states + shared)", fin);
	op(b, AG_OP_ADD, fin, sop, NO, sum, NO, NO)->arg[0] = 1;
	if (sop != so)
		unref(b, sop);
	unref(b, so);
	unref(b, fin);
	return sum;
}

/* Its backward from g2 (the block output's gradient [BT, d], the caller's
 * holder), before the routed experts' (its nodes are newer): MulBackward
 * (the sigmoid's g·shared summed to [BT, 1] after the shared output's
 * g·sigmoid), SigmoidBackward, the gate's MmBackward, then the shared
 * expert's down_proj, MulBackward, up_proj, SiluBackward, gate_proj; x's
 * gradients into *xb. */
static void moe_shared_bwd(struct bld *b, struct model *M, T g2, int i, struct moe_saved *s, T *xb)
{
	uint64_t BT = b->o->batch * b->o->seq;
	b->module = modname(b, "model.layers.%d.mlp", i);
	/* autocast: the product was bf16, so AddBackward0's gradient for it
	 * (g2 itself, fp32) is cast to bf16 by validate_outputs first; the
	 * MulBackward0 below then runs in bf16, its sum [BT, 1] too, and the
	 * copy goes after the sum, before the saved pair (1.13's allocator:
	 * tests/moe_hf_torch.sh) */
	T gs = b->s->tensor[s->sy].dtype != AG_F32 ? to_dtype(b, g2, b->s->tensor[s->sy].dtype, "_to_copy (validate_outputs)")
	                                           : g2;
	T dsf = moe_op(b, AG_OP_MUL, "mul (backward)", s->sy, gs, s->sy);
	T dsy = moe_op(b, AG_OP_MUL, "mul (backward)", s->sy, gs, s->sig);
	T dsig = moe_sum_to(b, "sum (to the gate's shape)", dsf, BT); /* validate_outputs, before the node's release */
	if (gs != g2)
		unref(b, gs);
	unref(b, s->sy);
	unref(b, s->sig);
	T dgl = moe_op(b, AG_OP_SIGMOID_BWD, "sigmoid_backward", s->sig, dsig, s->sig);
	unref(b, dsig);
	unref(b, s->sig);
	b->module = modname(b, "model.layers.%d.mlp.shared_expert_gate", i);
	linear_bwd(b, dgl, 1, &s->sgate, PF(M, b, "model.layers.%d.mlp.shared_expert_gate.weight", i), xb);
	T dmu = NO, dsl, dup;
	b->module = modname(b, "model.layers.%d.mlp.shared_expert.down_proj", i);
	linear_bwd(b, dsy, 1, &s->sdown, PF(M, b, "model.layers.%d.mlp.shared_expert.down_proj.weight", i), &dmu);
	mul_bwd(b, "mul (backward)", dmu, s->ssilu, s->suo, &dsl, &dup);
	b->module = modname(b, "model.layers.%d.mlp.shared_expert.up_proj", i);
	linear_bwd(b, dup, 1, &s->sup, PF(M, b, "model.layers.%d.mlp.shared_expert.up_proj.weight", i), xb);
	b->module = modname(b, "model.layers.%d.mlp.shared_expert.gate_proj", i);
	T dgp = moe_op(b, AG_OP_SILU_BWD, "silu_backward", s->sgo, dsl, s->sgo);
	unref(b, dsl);
	unref(b, s->sgo);
	linear_bwd(b, dgp, 1, &s->sgp, PF(M, b, "model.layers.%d.mlp.shared_expert.gate_proj.weight", i), xb);
}

/* torch.where over expert e's mask [k, BT] (released): nonzero [n, 2]
 * int64, its two columns (the slots, the tokens) kept in c as views. */
static void moe_where(struct bld *b, T mask, uint64_t n, struct moe_expert_saved *c)
{
	T nz = TMP("nonzero (torch.where)", AG_I64, n, 2);
	op(b, AG_OP_NONZERO, mask, NO, NO, nz, NO, NO);
	unref(b, mask);
	c->idx = vw(b, nz, 1, SH(n), (const int64_t[]){ 2 }, 0);
	c->top_x = vw(b, nz, 1, SH(n), (const int64_t[]){ 2 }, 1);
	unref(b, nz);
}

/* transformers 5.x's fused experts under the eager implementation
 * (--experts-impl eager, zs_model.fused_experts; tests/moe_torch.py's
 * FusedExperts, op for op from integrations/moe.py at 8b584a67 of
 * huggingface/transformers, its reference Experts class, a comment at
 * lines 29-65, the parameters at 37-38): expert e's body in the loop over expert_hit. `expert_idx =
 * expert_idx[0]` is a 0-dim view (ix), so `expert_idx ==
 * self.num_experts` wraps the Python int (8 bytes) for eq's 0-dim bool,
 * and `expert_mask[expert_idx]` and `self.gate_up_proj[expert_idx]` are
 * selects (views: no copy, unlike 4.x's expert_mask index); torch.where's
 * nonzero [n, 2]; `hidden_states[token_idx]` [n, d] (no None: an index of
 * the 2-D states, not 4.x's unsqueezed one); F.linear over gate_up_proj[e]
 * (mm [n, 2F], its chunk(2) two views, which SiluBackward and MulBackward
 * keep, so the [n, 2F] lives until both released them); act(gate) * up;
 * F.linear over down_proj[e] [n, d]; the routing weight [n, 1] and the
 * weighted output, index_add_'s source, as 4.x's. Allocations and frees
 * as 1.13's and 2.6's allocators record them (tests/moe_hf_torch.sh:
 * hf_torch.py --experts eager). The 2-D views: gate_up_proj (E·2F, d),
 * expert e's rows e·2F.. (gate's F, then up's); down_proj (E·d, F). */
static void moe_fused_fwd(struct bld *b, struct model *M, int i, uint64_t e, T ix, T em, T xv, T rw, T fin,
                          struct moe_expert_saved *c)
{
	const struct zs_model *m = b->m;
	uint64_t BT = b->o->batch * b->o->seq, d = m->hidden, E = m->experts, K = m->experts_per_tok;
	uint64_t F = m->intermediate;
	const uint64_t *cnt = moe_counts(b, i);
	uint64_t n = cnt[e];
	/* what the command refuses before (zs_config_check_torch), refused
	 * here too for any other caller */
	if (b->o->amp != AG_F32 || b->o->grad_accum > 1 || b->o->lora_r || !RG(b, xv))
		unsupported(b, "--experts-impl eager with autocast, --grad-accum, LoRA or a frozen input (the fused "
		               "experts are described in the plain loop's fp32 step only)");
	/* `if expert_idx == self.num_experts: continue`: eq.Scalar's wrapped
	 * number, then its 0-dim bool (AG_OP_GT stands for eq: the same sizes) */
	T w = host_scalar(b, tmp(b, "scalar (wrapped number)", AG_I64, 0, NULL));
	op(b, AG_OP_FILL, NO, NO, NO, w, NO, NO)->arg[0] = (double)E;
	T eq = tmp(b, "eq (expert_idx == num_experts)", AG_BOOL, 0, NULL);
	op(b, AG_OP_GT, ix, w, NO, eq, NO, NO);
	unref(b, w);
	unref(b, eq);
	/* torch.where(expert_mask[expert_idx]): a select of the permuted mask */
	moe_where(b, vw(b, em, 2, SH(K, BT), (const int64_t[]){ (int64_t)E, (int64_t)(K * E) }, e), n, c);
	T cur = TMP("index (hidden_states[token_idx])", AG_F32, n, d);
	op(b, AG_OP_INDEX, xv, c->top_x, NO, cur, NO, NO);
	b->module = modname(b, "model.layers.%d.mlp.experts", i);
	struct pt *gu = PF(M, b, "model.layers.%d.mlp.experts.gate_up_proj", i);
	struct pt *dp = PF(M, b, "model.layers.%d.mlp.experts.down_proj", i);
	if (gu->frozen || dp->frozen)
		unsupported(b, "--experts-impl eager with frozen experts");
	T wv = vw(b, gu->w, 2, SH(2 * F, d), NULL, e * 2 * F * d); /* gate_up_proj[expert_idx] */
	T wt = transpose_last2(b, wv);
	unref(b, wv);
	T y = TMP("mm (gate_up_proj)", AG_F32, n, 2 * F);
	op(b, AG_OP_MM, cur, wt, NO, y, NO, NO);
	unref(b, wt);
	c->w1.x2 = cur; /* MmBackward's self, for the weight's gradient (the name's hold is no byte) */
	c->w1o = vw(b, y, 2, SH(n, F), (const int64_t[]){ (int64_t)(2 * F), 1 }, 0); /* gate */
	c->w3o = vw(b, y, 2, SH(n, F), (const int64_t[]){ (int64_t)(2 * F), 1 }, F);  /* up */
	unref(b, y);
	c->silu = TMP("silu", AG_F32, n, F);
	op(b, AG_OP_SILU, c->w1o, NO, NO, c->silu, NO, NO);
	T mu = TMP("mul (act(gate) * up)", AG_F32, n, F);
	op(b, AG_OP_MUL, c->silu, c->w3o, NO, mu, NO, NO);
	wv = vw(b, dp->w, 2, SH(d, F), NULL, e * d * F); /* down_proj[expert_idx] */
	wt = transpose_last2(b, wv);
	unref(b, wv);
	c->w2o = TMP("mm (down_proj)", AG_F32, n, d);
	op(b, AG_OP_MM, mu, wt, NO, c->w2o, NO, NO);
	unref(b, wt);
	c->w2.x2 = mu;
	b->module = modname(b, "model.layers.%d.mlp", i);
	c->rw = TMP("index (top_k_weights[token_idx, top_k_pos, None])", AG_F32, n, 1);
	op(b, AG_OP_INDEX, rw, c->top_x, c->idx, c->rw, NO, NO);
	c->prod = moe_op(b, AG_OP_MUL, "mul (expert output * routing weight)", c->w2o, c->w2o, c->rw);
	op(b, AG_OP_INDEX_ADD_, fin, c->top_x, c->prod, fin, NO, NO);
	ref(b, c->top_x); /* three nodes hold the indices: IndexAddBackward, the two IndexBackwards */
	ref(b, c->top_x);
}

/* A fused parameter's gradient from expert e's slice dw (released):
 * SelectBackward0's select_backward, zeros of the whole parameter with
 * the slice copied in (1.13's and 2.6's FunctionsManual.cpp), into the
 * parameter's input buffer (*buf: 1.13 sums out of place, 2.6 in place,
 * arrive()); AccumulateGrad runs once the last hit expert's has come
 * (`last`: its sequence number is the highest, so it runs as soon as it
 * is ready). */
static void moe_fused_grad(struct bld *b, struct pt *q, T dw, uint64_t off, T *buf, int last)
{
	T z = like(b, "zeros (select_backward)", q->w);
	op(b, AG_OP_FILL, NO, NO, NO, z, NO, NO);
	const struct ag_tensor o_ = b->s->tensor[dw], *o = &o_; /* a copy: the array grows */
	T slot = vw(b, z, 2, o->shape, NULL, off);
	op(b, AG_OP_COPY, dw, NO, NO, slot, NO, NO);
	unref(b, slot);
	unref(b, dw);
	arrive(b, buf, z);
	if (last) {
		accumulate(b, q, *buf);
		*buf = NO;
	}
}

/* Expert e's backward from dy (the weighted output's gradient w.r.t. the
 * expert's output [n, d], released), as 1.13 and 2.6 run it: down_proj's
 * MmBackward (the weight's [d, F], then the input's [n, F]; the gradient
 * and the saved input go), its SelectBackward (moe_fused_grad), then
 * MulBackward (act(gate) * up), SiluBackward (the gate view's release
 * frees the [n, 2F]), SplitBackward's cat [n, 2F], gate_up_proj's
 * MmBackward and SelectBackward, and hidden_states[token_idx]'s
 * IndexBackward (new_zeros [BT, d]: no view, so 2.6 adds to x's buffer in
 * place; the nonzero goes with its last holder). fb: the two parameters'
 * buffers; last: the lowest hit expert, whose backward runs last. */
static void moe_fused_bwd(struct bld *b, struct model *M, int i, uint64_t e, T dy, struct moe_expert_saved *c,
                          T fb[2], int last, T *xb)
{
	const struct zs_model *m = b->m;
	uint64_t BT = b->o->batch * b->o->seq, d = m->hidden, F = m->intermediate, n = moe_counts(b, i)[e];
	struct pt *gu = PF(M, b, "model.layers.%d.mlp.experts.gate_up_proj", i);
	struct pt *dp = PF(M, b, "model.layers.%d.mlp.experts.down_proj", i);
	b->module = modname(b, "model.layers.%d.mlp.experts", i);
	/* down_proj: mm(mu, W_e^t) */
	T dw = TMP("mm (linear backward, weight)", AG_F32, d, F);
	T gt = transpose_last2(b, dy);
	op(b, AG_OP_MM, gt, c->w2.x2, NO, dw, NO, NO);
	unref(b, gt);
	T dmu = TMP("mm (linear backward, input)", AG_F32, n, F);
	T wv = vw(b, dp->w, 2, SH(d, F), NULL, e * d * F);
	op(b, AG_OP_MM, dy, wv, NO, dmu, NO, NO);
	unref(b, wv);
	unref(b, dy);
	unref(b, c->w2.x2);
	moe_fused_grad(b, dp, dw, e * d * F, &fb[1], last);
	T dsl, dup;
	mul_bwd(b, "mul (backward)", dmu, c->silu, c->w3o, &dsl, &dup);
	T dgate = moe_op(b, AG_OP_SILU_BWD, "silu_backward", dsl, dsl, c->w1o);
	unref(b, dsl);
	unref(b, c->w1o);
	T dgu = TMP("cat (split backward)", AG_F32, n, 2 * F);
	op(b, AG_OP_CAT_LAST, dgate, dup, NO, dgu, NO, NO);
	unref(b, dgate);
	unref(b, dup);
	/* gate_up_proj: mm(cur, W_e^t) */
	dw = TMP("mm (linear backward, weight)", AG_F32, 2 * F, d);
	gt = transpose_last2(b, dgu);
	op(b, AG_OP_MM, gt, c->w1.x2, NO, dw, NO, NO);
	unref(b, gt);
	T dx = TMP("mm (linear backward, input)", AG_F32, n, d);
	wv = vw(b, gu->w, 2, SH(2 * F, d), NULL, e * 2 * F * d);
	op(b, AG_OP_MM, dgu, wv, NO, dx, NO, NO);
	unref(b, wv);
	unref(b, dgu);
	unref(b, c->w1.x2);
	moe_fused_grad(b, gu, dw, e * 2 * F * d, &fb[0], last);
	b->module = modname(b, "model.layers.%d.mlp", i);
	T zx = TMP("new_zeros (index backward)", AG_F32, BT, d);
	op(b, AG_OP_FILL, NO, NO, NO, zx, NO, NO);
	op(b, AG_OP_INDEX_PUT_ACC_, zx, c->top_x, NO, zx, NO, NO)->in[3] = dx;
	unref(b, dx);
	unref(b, c->top_x);
	arrive(b, xb, zx);
}

/* The block's forward over x (post_attention_layernorm's output [B, T, d],
 * the caller's holder): final_hidden_states [B, T, d], one holder. One
 * expert's tokens: expert_mask[expert_idx] (an int64 copy [1, k, BT]),
 * torch.where's nonzero [n, 2] (the copy gone), hidden_states[None, top_x]
 * [1, n, d], w1, silu, w3, their product, w2, routing_weights[top_x, idx,
 * None] [n, 1], the product (its own storage, kept as index_add_'s
 * source); index_add_ into final_hidden_states in place. */
static T moe_fwd(struct bld *b, struct model *M, T x, int i, struct moe_saved *s)
{
	const struct zs_model *m = b->m;
	uint64_t B = b->o->batch, Tn = b->o->seq, BT = B * Tn, d = m->hidden, E = m->experts;
	uint64_t K = m->experts_per_tok;
	const uint64_t *cnt = moe_counts(b, i);
	s->ex = zs_calloc(E, sizeof *s->ex);
	/* a sparse block whose input requires no grad (everything before it
	 * frozen) with some of its own parameters frozen: PyTorch saves only
	 * what the trained ones need, the ops below save as if all were
	 * (seen: mixtral --freeze embeddings,blocks:0-0, 109,184 B over
	 * 1.13's peak); not described yet */
	if (!b->rg[x]) {
		char blkname[128], name[256];
		snprintf(blkname, sizeof blkname, "model.layers.%d.%s.", i, moe_blk(m));
		for (size_t k = 0; k < M->npt; k++) {
			if (!M->pt[k].frozen || M->pt[k].param < 0)
				continue;
			part_name(b, M->pt[k].param, M->pt[k].part, name, sizeof name);
			if (strncmp(name, blkname, strlen(blkname)) == 0) {
				unsupported(b, "a mixture's sparse block whose input requires no grad (every parameter before it "
				               "frozen) with some of its own parameters frozen");
				break;
			}
		}
	}
	T xv = reshape(b, x, 2, SH(BT, d)); /* hidden_states.view(-1, hidden_dim) */
	b->module = modname(b, "model.layers.%d.%s.gate", i, moe_blk(m));
	s->logits = linear(b, xv, PF(M, b, "model.layers.%d.%s.gate.weight", i, moe_blk(m)), &s->gate);
	int32_t blk = modname(b, "model.layers.%d.%s", i, moe_blk(m));
	b->module = blk;
	/* softmax in float32 (`F.softmax(router_logits, dim=1,
	 * dtype=torch.float)`, modeling_mixtral.py at 00d4b3d2 line 120: fp32
	 * logits are not copied; under autocast the gate's mm gave bf16 ones,
	 * which softmax's dtype copies to fp32 first, the copy gone once
	 * _softmax ran: SoftmaxBackward keeps its result), topk, the weights'
	 * sum, and routing_weights /= it in place (DivBackward0 keeps a clone
	 * of the original and the sum) */
	s->lcast = b->s->tensor[s->logits].dtype != AG_F32;
	T lf = s->lcast ? to_dtype(b, s->logits, AG_F32, "_to_copy (softmax's dtype=torch.float)") : s->logits;
	s->probs = moe_op(b, AG_OP_SOFTMAX, "_softmax (router)", lf, lf, NO);
	if (s->lcast)
		unref(b, lf);
	T rw = TMP("topk (routing_weights)", AG_F32, BT, K);
	s->topi = TMP("topk (selected_experts)", AG_I64, BT, K);
	op(b, AG_OP_TOPK, s->probs, NO, NO, rw, s->topi, NO)->arg[0] = (double)K;
	s->ssum = s->vclone = NO;
	if (!m->topk_raw) { /* qwen's norm_topk_prob false: the weights as topk gives them */
		s->ssum = TMP("sum (routing_weights)", AG_F32, BT, 1);
		op(b, AG_OP_SUM_TO, rw, NO, NO, s->ssum, NO, NO);
		s->vclone = moe_op(b, AG_OP_COPY, "clone (div_'s original self)", rw, rw, NO);
		op(b, AG_OP_DIV, rw, s->ssum, NO, rw, NO, NO);
	}
	T fin = TMP("zeros (final_hidden_states)", AG_F32, BT, d);
	op(b, AG_OP_FILL, NO, NO, NO, fin, NO, NO);
	/* one_hot, permute(2, 1, 0): a view */
	T oh = one_hot(b, s->topi, BT, K, E);
	T em = vw(b, oh, 3, SH(E, K, BT), (const int64_t[]){ 1, (int64_t)E, (int64_t)(K * E) }, 0);
	unref(b, oh);
	/* expert_hit = greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero():
	 * the 0 a wrapped int64 number for the moment */
	T es = TMP("sum (expert_mask)", AG_I64, E);
	op(b, AG_OP_SUM_LEAD, em, NO, NO, es, NO, NO);
	T zero = host_scalar(b, tmp(b, "scalar (wrapped number)", AG_I64, 0, NULL));
	op(b, AG_OP_FILL, NO, NO, NO, zero, NO, NO);
	T hitb = TMP("gt (expert hit)", AG_BOOL, E);
	op(b, AG_OP_GT, es, zero, NO, hitb, NO, NO);
	unref(b, zero);
	unref(b, es);
	uint64_t hit = 0;
	for (uint64_t e = 0; e < E; e++)
		hit += cnt[e] > 0;
	T hitn = TMP("nonzero (expert_hit)", AG_I64, hit, 1);
	op(b, AG_OP_NONZERO, hitb, NO, NO, hitn, NO, NO);
	unref(b, hitb);
	/* the loop's `current_state` [n, d]: its name holds it until the next
	 * expert's is bound, the last one's until the block returns (the
	 * experts' mm's keep it in fp32; under autocast they keep bf16 copies,
	 * so the name's is its last holder) */
	T cur_name = NO;
	for (uint64_t e = 0, j = 0; e < E; e++) {
		struct moe_expert_saved *c = &s->ex[e];
		uint64_t n = cnt[e];
		if (n == 0)
			continue;
		b->module = blk;
		if (m->fused_experts) {
			T ix = vw(b, hitn, 0, NULL, NULL, j++); /* `expert_idx = expert_idx[0]`: a 0-dim view */
			moe_fused_fwd(b, M, i, e, ix, em, xv, rw, fin, c);
			unref(b, ix);
			continue;
		}
		T eidx = vw(b, hitn, 1, SH(1), (const int64_t[]){ 1 }, j++);
		T sel = TMP("index (expert_mask[expert_idx])", AG_I64, 1, K, BT);
		op(b, AG_OP_INDEX, em, eidx, NO, sel, NO, NO);
		unref(b, eidx);
		T sq = reshape(b, sel, 2, SH(K, BT));
		unref(b, sel);
		moe_where(b, sq, n, c);
		T cur = TMP("index (hidden_states[None, top_x])", AG_F32, 1, n, d);
		op(b, AG_OP_INDEX, xv, c->top_x, NO, cur, NO, NO);
		T cur2 = reshape(b, cur, 2, SH(n, d));
		unref(b, cur);
		if (cur_name != NO)
			unref(b, cur_name);
		cur_name = cur2;
		b->module = moe_mod(b, i, e, MOE_GATE);
		c->w1o = linear(b, cur2, moe_w(b, M, i, e, MOE_GATE), &c->w1);
		c->silu = moe_op(b, AG_OP_SILU, "silu", c->w1o, c->w1o, NO);
		b->module = moe_mod(b, i, e, MOE_UP);
		c->w3o = linear(b, cur2, moe_w(b, M, i, e, MOE_UP), &c->w3);
		T mu = moe_op(b, AG_OP_MUL, "mul (silu(w1 x) * w3 x)", c->silu, c->silu, c->w3o);
		b->module = moe_mod(b, i, e, MOE_DOWN);
		c->w2o = linear(b, mu, moe_w(b, M, i, e, MOE_DOWN), &c->w2);
		unref(b, mu);
		b->module = blk;
		c->rw = TMP("index (routing_weights[top_x, idx, None])", AG_F32, n, 1);
		op(b, AG_OP_INDEX, rw, c->top_x, c->idx, c->rw, NO, NO);
		/* autocast: w2's output is bf16, the weight fp32: TensorIterator
		 * promotes, copying w2o to fp32 for the kernel (made before the
		 * output, freed after it ran); the product is fp32, as
		 * final_hidden_states (zeros of hidden_states.dtype, the norm's
		 * fp32 output), so `.to(hidden_states.dtype)` copies nothing */
		T w2p = b->s->tensor[c->w2o].dtype != AG_F32
		                ? to_dtype(b, c->w2o, AG_F32, "_to_copy (mul's type promotion)") : c->w2o;
		c->prod = moe_op(b, AG_OP_MUL, "mul (expert output * routing weight)", w2p, w2p, c->rw);
		if (w2p != c->w2o)
			unref(b, w2p);
		op(b, AG_OP_INDEX_ADD_, fin, c->top_x, c->prod, fin, NO, NO);
		ref(b, c->top_x); /* three nodes hold the indices: IndexAddBackward, the two IndexBackwards */
		ref(b, c->top_x);
	}
	if (m->shared_ffn > 0)
		fin = moe_shared_fwd(b, M, xv, fin, i, s);
	/* the block returns: routing_weights, the one-hot mask and expert_hit
	 * go (5.x's fused experts: the experts module returns first, its mask
	 * and expert_hit, then the block, its top_k_weights) */
	if (!m->fused_experts)
		unref(b, rw);
	unref(b, em);
	unref(b, hitn);
	if (m->fused_experts)
		unref(b, rw);
	if (cur_name != NO)
		unref(b, cur_name);
	unref(b, xv);
	T out = reshape(b, fin, 3, SH(B, Tn, d));
	unref(b, fin);
	return out;
}

/* Its backward from g (the block output's gradient [B, T, d]; the
 * caller's holder): x's gradients to *xbuf. The experts hit, last first
 * (autograd's order: each one's nodes are newer than the index_add_
 * before it): IndexAddBackward (index_select of g; the kept source goes),
 * MulBackward (the weight's gradient summed to [n, 1]), the weight's
 * IndexBackward (new_zeros [BT, k], _index_put_impl_ in place) into the
 * routing weights' buffer, w2, MulBackward, w3, SiluBackward, w1,
 * hidden_states[None, top_x]'s IndexBackward (new_zeros [BT, d]; the
 * nonzero goes with its last holder) into x's. Then the router:
 * DivBackward0 (other's −g·((self/other)/other), then self's g/other;
 * validate_outputs sums other's to [BT, 1]), SumBackward's expand into
 * the same buffer, TopkBackward (zeros [BT, E], scatter_), SoftmaxBackward,
 * the gate's MmBackward. 2.6 (traced: tests/moe_hf_torch.sh torch26):
 * MulBackward0 and DivBackward0 let other_ go before self_, and its
 * InputBuffer sums in place where it may (arrive(): the expert input's
 * two mm gradients, not the IndexBackward views, moe_squeezed). */
static void moe_bwd(struct bld *b, struct model *M, T g, int i, struct moe_saved *s, T *xbuf)
{
	const struct zs_model *m = b->m;
	uint64_t BT = b->o->batch * b->o->seq, d = m->hidden, E = m->experts, K = m->experts_per_tok;
	const uint64_t *cnt = moe_counts(b, i);
	int32_t blk = modname(b, "model.layers.%d.%s", i, moe_blk(m));
	T g2 = reshape(b, g, 2, SH(BT, d));
	T rwbuf = NO, xb = NO;
	T fb[2] = { NO, NO }; /* fused experts: gate_up_proj's and down_proj's input buffers */
	uint64_t first_hit = 0; /* the expert whose backward runs last (the lowest hit) */
	while (first_hit + 1 < E && cnt[first_hit] == 0)
		first_hit++;
	if (m->shared_ffn > 0)
		moe_shared_bwd(b, M, g2, i, s, &xb);
	for (uint64_t e = E; e-- > 0;) {
		struct moe_expert_saved *c = &s->ex[e];
		uint64_t n = cnt[e];
		if (n == 0)
			continue;
		b->module = blk;
		T isel = TMP("index_select (index_add_ backward)", AG_F32, n, d);
		op(b, AG_OP_INDEX, g2, c->top_x, NO, isel, NO, NO);
		unref(b, c->prod);
		unref(b, c->top_x);
		/* MulBackward0: other's g·w2o first, then self's g·rw (1.13's
		 * order, seen under autocast: in fp32 the two are alike); under
		 * autocast (w2o bf16, rw and g fp32) other's promotes w2o (a fp32
		 * copy for the kernel) and validate_outputs casts self's fp32
		 * product to bf16 (the fp32 one goes), then sums other's to [n, 1] */
		int mixed = b->s->tensor[c->w2o].dtype != AG_F32;
		T w2p = mixed ? to_dtype(b, c->w2o, AG_F32, "_to_copy (mul's type promotion)") : c->w2o;
		T drwf = moe_op(b, AG_OP_MUL, "mul (backward)", isel, isel, w2p);
		if (mixed)
			unref(b, w2p);
		T dw2o = moe_op(b, AG_OP_MUL, "mul (backward)", isel, isel, c->rw);
		if (mixed)
			dw2o = ac_grad_back_to(b, dw2o, b->s->tensor[c->w2o].dtype);
		T drw = moe_sum_to(b, "sum (to the weight's shape)", drwf, n);
		unref(b, isel);
		/* release_variables: 1.13's MulBackward0 lets self_ go first, 2.6's
		 * other_ (both traced) */
		if (b->o->version == ZS_TORCH_1_13) {
			unref(b, c->w2o);
			unref(b, c->rw);
		} else {
			unref(b, c->rw);
			unref(b, c->w2o);
		}
		T zr = TMP("new_zeros (index backward)", AG_F32, BT, K);
		op(b, AG_OP_FILL, NO, NO, NO, zr, NO, NO);
		op(b, AG_OP_INDEX_PUT_ACC_, zr, c->top_x, c->idx, zr, NO, NO)->in[3] = drw;
		unref(b, drw);
		unref(b, c->top_x);
		unref(b, c->idx);
		arrive(b, &rwbuf, moe_squeezed(b, zr, 2, SH(BT, K)));
		if (m->fused_experts) {
			moe_fused_bwd(b, M, i, e, dw2o, c, fb, e == first_hit, &xb);
			continue;
		}
		T dmu = NO, cb = NO, dsl, dup;
		b->module = moe_mod(b, i, e, MOE_DOWN);
		linear_bwd(b, dw2o, 1, &c->w2, moe_w(b, M, i, e, MOE_DOWN),
		           &dmu);
		mul_bwd(b, "mul (backward)", dmu, c->silu, c->w3o, &dsl, &dup);
		b->module = moe_mod(b, i, e, MOE_UP);
		linear_bwd(b, dup, 1, &c->w3, moe_w(b, M, i, e, MOE_UP),
		           &cb);
		b->module = moe_mod(b, i, e, MOE_GATE);
		T dgp = moe_op(b, AG_OP_SILU_BWD, "silu_backward", c->w1o, dsl, c->w1o);
		unref(b, dsl);
		unref(b, c->w1o);
		linear_bwd(b, dgp, 1, &c->w1, moe_w(b, M, i, e, MOE_GATE),
		           &cb);
		b->module = blk;
		T zx = TMP("new_zeros (index backward)", AG_F32, BT, d);
		op(b, AG_OP_FILL, NO, NO, NO, zx, NO, NO);
		op(b, AG_OP_INDEX_PUT_ACC_, zx, c->top_x, NO, zx, NO, NO)->in[3] = cb;
		unref(b, cb);
		unref(b, c->top_x);
		arrive(b, &xb, moe_squeezed(b, zx, 2, SH(BT, d)));
	}
	unref(b, g2);
	free(s->ex);
	s->ex = NULL;
	b->module = blk;
	T dself = rwbuf;
	if (!m->topk_raw) { /* the renormalisation's (k >= 1: some expert is hit, the buffer holds its weights' gradient) */
		T a = moe_op(b, AG_OP_DIV, "div (div backward)", s->vclone, s->vclone, s->ssum);
		T a2 = moe_op(b, AG_OP_DIV, "div (div backward)", s->vclone, a, s->ssum);
		T ng = moe_op(b, AG_OP_NEG, "neg (div backward)", rwbuf, rwbuf, NO);
		T r = moe_op(b, AG_OP_MUL, "mul (div backward)", rwbuf, ng, a2);
		unref(b, a);
		unref(b, a2);
		unref(b, ng);
		dself = moe_op(b, AG_OP_DIV, "div (div backward)", rwbuf, rwbuf, s->ssum);
		T dother = moe_sum_to(b, "sum (to other's shape)", r, BT);
		unref(b, rwbuf);
		if (b->o->version == ZS_TORCH_1_13) { /* release_variables: self_, other_ (2.6: other_ first) */
			unref(b, s->vclone);
			unref(b, s->ssum);
		} else {
			unref(b, s->ssum);
			unref(b, s->vclone);
		}
		T ex = vw(b, dother, 2, SH(BT, K), (const int64_t[]){ 1, 0 }, 0); /* SumBackward's expand */
		unref(b, dother);
		arrive(b, &dself, ex);
	}
	{ /* the router's */
		T dz = TMP("zeros (topk backward)", AG_F32, BT, E);
		op(b, AG_OP_FILL, NO, NO, NO, dz, NO, NO);
		op(b, AG_OP_SCATTER_, dz, s->topi, dself, dz, NO, NO);
		unref(b, dself);
		unref(b, s->topi);
		T dl = moe_op(b, AG_OP_SOFTMAX_BWD, "_softmax_backward_data (router)", s->probs, dz, s->probs);
		unref(b, dz);
		unref(b, s->probs);
		if (M->aux != NULL) /* the logits' other gradient, the aux loss's, waits in the gate's buffer */
			dl = moe_aux_arrive(b, M, i, dl);
		if (s->lcast) /* autocast: softmax's dtype copy's ToCopyBackward, back to the logits' bf16 */
			dl = ac_grad_back_to(b, dl, b->o->amp);
		b->module = modname(b, "model.layers.%d.%s.gate", i, moe_blk(m));
		linear_bwd(b, dl, 1, &s->gate, PF(M, b, "model.layers.%d.%s.gate.weight", i, moe_blk(m)), &xb);
	}
	if (xb != NO) {
		T v = reshape(b, xb, 3, SH(b->o->batch, b->o->seq, d));
		unref(b, xb);
		arrive(b, xbuf, v);
	}
}

/* ------------------------------------------------------------------------ */
/* A mixture's auxiliary load-balancing loss (output_router_logits true).
 * MixtralForCausalLM.forward (modeling_mixtral.py at 00d4b3d2, 702-711)
 * takes load_balancing_loss_func (531-610) of every layer's router_logits,
 * which the model returns (MixtralPreTrainedModel._can_record_outputs'
 * OutputRecorder of the block's second output, 446-450), after the loss
 * (700), and adds `router_aux_loss_coef * aux_loss` to it in place;
 * Qwen2MoeForCausalLM and Qwen3MoeForCausalLM do the same with their
 * copies of the function. No attention mask (training without padding:
 * the branch at 573-578): cat of the logits [L·BT, E], softmax, topk (its
 * values discarded), one_hot [L·BT, k, E] int64, its float copy, the two
 * means over dim 0, their product, the sum, · num_experts. What 1.13's
 * autograd keeps (derivatives.yaml): softmax's result (SoftmaxBackward0's
 * `result`; MeanBackward1 keeps its input whole in 1.13, the same
 * tensor: docs/torch_saved.md), tokens_per_expert (MulBackward0's self,
 * for the probabilities' gradient only: the mask requires none), the two
 * Python numbers the muls keep (wrapped: num_experts, the coefficient);
 * cat, sum and unsqueeze keep sizes; topk's node goes with the discarded
 * values at the function's return. Its backward runs first (its nodes are
 * the newest): the gradient of the concatenated logits [L·BT, E] is cut
 * by CatBackward0 into L views, each waiting in its gate's input buffer
 * until that block's router adds its own (moe_aux_arrive: 1.13's
 * InputBuffer sums out of place), so the whole tensor lives until block
 * 0's router. Checked against 1.13's allocator (tests/moe_hf_torch.sh). */
struct moe_aux {
	T *router;    /* [L]: each layer's router_logits [BT, E], the model's output (to the step's end) */
	T *gview;     /* [L]: CatBackward0's view of the aux gradient in layer i's gate's buffer (NO: none) */
	T probs, tpe; /* softmax's result [L·BT, E]; tokens_per_expert [k, E] */
	T wcoef, wE;  /* the wrapped numbers the two MulBackward0 keep: router_aux_loss_coef, num_experts */
	T aux_loss;   /* the 0-dim aux loss, the model's output (to the step's end) */
};

/* Block i's router_logits as its layer returns: gone, or, where the
 * auxiliary loss is asked for, recorded as the model's output. */
static void moe_logits_out(struct bld *b, struct model *M, int i, T logits)
{
	if (!b->m->router_logits) {
		unref(b, logits);
		return;
	}
	uint64_t L = b->m->layers;
	if (M->aux == NULL) {
		M->aux = zs_calloc(1, sizeof *M->aux);
		M->aux->router = zs_calloc(L, sizeof *M->aux->router);
		M->aux->gview = zs_calloc(L, sizeof *M->aux->gview);
		for (uint64_t l = 0; l < L; l++)
			M->aux->router[l] = M->aux->gview[l] = NO;
	}
	M->aux->router[i] = logits;
}

/* The aux loss after the model's loss (loss, taken in place: `loss +=`). */
static void moe_aux_fwd(struct bld *b, struct model *M, T loss)
{
	const struct zs_model *m = b->m;
	struct moe_aux *a = M->aux;
	uint64_t L = m->layers, BT = b->o->batch * b->o->seq, E = m->experts, K = m->experts_per_tok, N = L * BT;
	T cat = TMP("cat (router logits)", AG_F32, N, E);
	for (uint64_t l = 0; l < L; l++) {
		T rows = vw(b, cat, 2, SH(BT, E), NULL, l * BT * E);
		op(b, AG_OP_COPY, a->router[l], NO, NO, rows, NO, NO);
		unref(b, rows);
	}
	a->probs = moe_op(b, AG_OP_SOFTMAX, "_softmax (aux loss)", cat, cat, NO);
	/* (ag_exec counts a block's choices at the step's first L topk only) */
	T vals = TMP("topk (aux loss values)", AG_F32, N, K);
	T sel = TMP("topk (aux loss selected_experts)", AG_I64, N, K);
	op(b, AG_OP_TOPK, a->probs, NO, NO, vals, sel, NO)->arg[0] = (double)K;
	T mask = one_hot(b, sel, N, K, E);
	T maskf = TMP("_to_copy (expert_mask.float())", AG_F32, N, K, E);
	op(b, AG_OP_COPY, mask, NO, NO, maskf, NO, NO);
	/* torch.mean(x, dim=0): the sum, then div_ by the rows through a
	 * wrapped number; 1.13's MeanBackward1 keeps the probabilities */
	a->tpe = TMP("mean (tokens_per_expert)", AG_F32, K, E);
	op(b, AG_OP_SUM_TO, maskf, NO, NO, a->tpe, NO, NO);
	scalar_op_(b, AG_OP_DIV_SCALAR_, a->tpe, NO, (double)N);
	unref(b, maskf);
	T rp = TMP("mean (router_prob_per_expert)", AG_F32, E);
	op(b, AG_OP_SUM_TO, a->probs, NO, NO, rp, NO, NO);
	scalar_op_(b, AG_OP_DIV_SCALAR_, rp, NO, (double)N);
	ref(b, a->probs);
	T ru = reshape(b, rp, 2, SH(1, E)); /* .unsqueeze(0) */
	T prod = TMP("mul (tokens_per_expert * router_prob_per_expert)", AG_F32, K, E);
	op(b, AG_OP_MUL, a->tpe, ru, NO, prod, NO, NO);
	unref(b, ru);
	T overall = tmp(b, "sum (overall_loss)", AG_F32, 0, NULL);
	op(b, AG_OP_SUM_TO, prod, NO, NO, overall, NO, NO);
	unref(b, prod);
	a->aux_loss = scalar_op(b, AG_OP_MUL_SCALAR, "mul (overall_loss * num_experts)", overall, (double)E, &a->wE);
	/* the function returns: its locals in order (routing_weights and
	 * tokens_per_expert stay with their nodes) */
	unref(b, cat);
	unref(b, vals);
	unref(b, sel);
	unref(b, mask);
	unref(b, rp);
	unref(b, overall);
	T scaled = scalar_op(b, AG_OP_MUL_SCALAR, "mul (router_aux_loss_coef * aux_loss)", a->aux_loss,
	                     m->router_aux_coef, &a->wcoef);
	op(b, AG_OP_ADD_, loss, scaled, NO, loss, NO, NO)->arg[0] = 1;
	unref(b, scaled);
}

/* MulBackward0 of x · a wrapped number w (kept): g · w through w's fp32
 * copy; then release_variables lets w go. */
static T wrapped_mul_bwd(struct bld *b, const char *what, T g, T w)
{
	T out = tmp(b, what, AG_F32, 0, NULL);
	T c = cast_scalar(b, w);
	op(b, AG_OP_MUL, g, c, NO, out, NO, NO);
	unref(b, c);
	return out;
}

/* Its backward from the loss's gradient `one` (the caller's): down to
 * CatBackward0's views in a->gview. */
static void moe_aux_bwd(struct bld *b, struct model *M, T one)
{
	const struct zs_model *m = b->m;
	struct moe_aux *a = M->aux;
	uint64_t L = m->layers, BT = b->o->batch * b->o->seq, E = m->experts, K = m->experts_per_tok, N = L * BT;
	/* AddBackward0 passes the gradient itself to both operands */
	T g1 = wrapped_mul_bwd(b, "mul (MulBackward0: grad * router_aux_loss_coef)", one, a->wcoef);
	unref(b, a->wcoef);
	T g2 = wrapped_mul_bwd(b, "mul (MulBackward0: grad * num_experts)", g1, a->wE);
	unref(b, g1);
	unref(b, a->wE);
	/* SumBackward0: grad.expand([k, E]); MulBackward0: the probabilities'
	 * side alone, grad · tokens_per_expert, summed to [1, E] by
	 * validate_outputs (k > 1); the expanded input, then the saved self go */
	T ge = vw(b, g2, 2, SH(K, E), (const int64_t[]){ 0, 0 }, 0);
	unref(b, g2);
	T dp = TMP("mul (MulBackward0: grad * tokens_per_expert)", AG_F32, K, E);
	op(b, AG_OP_MUL, ge, a->tpe, NO, dp, NO, NO);
	if (K > 1) {
		T s = TMP("sum (to router_prob_per_expert's [1, E])", AG_F32, 1, E);
		op(b, AG_OP_SUM_TO, dp, NO, NO, s, NO, NO);
		unref(b, dp);
		dp = s;
	}
	unref(b, ge);
	unref(b, a->tpe);
	/* UnsqueezeBackward0: a view [E]; MeanBackward1: its expand to
	 * [L·BT, E] over the rows (as the RMSNorms' mean backward) */
	T dq = reshape(b, dp, 1, SH(E));
	unref(b, dp);
	T dx = vw(b, dq, 2, SH(N, E), (const int64_t[]){ 0, 1 }, 0);
	T dm = scalar_op(b, AG_OP_MUL_SCALAR, "div (mean backward)", dx, 1.0 / (double)N, NULL);
	unref(b, dx);
	unref(b, dq);
	unref(b, a->probs);
	T dl = moe_op(b, AG_OP_SOFTMAX_BWD, "_softmax_backward_data (aux loss)", a->probs, dm, a->probs);
	unref(b, dm);
	unref(b, a->probs);
	for (uint64_t l = 0; l < L; l++) /* CatBackward0: each layer's rows */
		a->gview[l] = vw(b, dl, 2, SH(BT, E), NULL, l * BT * E);
	unref(b, dl);
}

/* Block i's router gradient dl (taken) into its gate's buffer, which
 * holds the aux loss's view: their sum, the gate's MmBackward's input. */
static T moe_aux_arrive(struct bld *b, struct model *M, int i, T dl)
{
	T buf = M->aux->gview[i];
	M->aux->gview[i] = NO;
	arrive(b, &buf, dl);
	return buf;
}

/* `del loss; outputs = None`: the loop's outputs go, the tuple from its
 * last item (MoeCausalLMOutputWithPast's: a mixture's router_logits, the
 * last layer's first, then the logits, the aux loss), then the graph
 * (graph_goes) before the loss's storage. */
static void outputs_go(struct bld *b, struct model *M)
{
	if (M->lossk != NO)
		unref(b, M->lossk);
	struct moe_aux *a = M->aux;
	for (uint64_t l = a != NULL ? b->m->layers : 0; l-- > 0;)
		unref(b, a->router[l]);
	unref(b, M->logits);
	if (a != NULL) {
		unref(b, a->aux_loss);
		free(a->router);
		free(a->gview);
		free(a);
		M->aux = NULL;
	}
	graph_goes(b, M);
	unref(b, M->loss);
}

struct llama_layer_saved {
	struct rms_saved n1, n2;
	struct lin_saved q, k, v, o, gate, up, down;
	struct rope_saved rq, rk;
	struct rms_saved qn, kn;     /* qwen3's q_norm and k_norm */
	T qkv_pass;                  /* phi3: the holder of the rope's gradient that k_pass's and q_pass's
	                              * narrow views keep (their SliceBackward runs after both ropes) */
	T qe, ktc, sc_w, attw, vr;   /* attention's saved: q_embed, k^T's copy, scaling's number, the weights
	                              * bmm keeps (the dropout's output), v repeated */
	T sm, drop_attn;             /* softmax's result; the dropout's noise (NO for p = 0) */
	struct sdpa_saved sd;        /* --attn sdpa: the flash kernel's saved set */
	T gate_o, silu_o, up_o;      /* the MLP's */
	T qf;                        /* autocast: the fp32 q_embed whose bf16 cast bmm keeps (NO: none) */
	int vcast;                   /* autocast cast an fp32 v for bmm (a 4-bit v_proj's result) */
	T drop_resid, drop_mlp;      /* phi3: its residual dropouts' noise (NO: p = 0, or another family) */
	/* requires_grad (--freeze): the layer's input, q/k/v (all or none),
	 * o_proj's output, the residual sum h2, gate/up (both or none), the
	 * MLP's output */
	int rin, ka, rpo, rh2, km, rmo;
	int kk;                      /* k requires grad (LoRA on q_proj and v_proj over a layer input that
	                              * requires none: q and v do, k not) */
	/* gemma: post_attention_layernorm (n3, after attention; n2 is then
	 * pre_feedforward_layernorm) and post_feedforward_layernorm (n4); the
	 * scores' soft-capping; a sliding layer's mask and its tril */
	struct rms_saved n3, n4;
	struct softcap_saved cap;
	T swmask, swtril;
	struct moe_saved moe;        /* mixtral: its block in the MLP's place (moe.ex NULL: none) */
};

/* SDPA's math path for the llama family (fewer k/v heads than heads:
 * enable_gqa, which 2.6's CPU flash kernel does not take): sdpa_math,
 * its saved set in the layer's fields. Returns the merged heads
 * [B, T, h·hd]. qcontig: q lies contiguous as [B, h, T, hd] (phi3's cat). */
static T sdpa_math_fwd(struct bld *b, struct llama_layer_saved *s, T qe, T ke, T vt, uint64_t rep, int qcontig)
{
	struct sdpa_math ms;
	T ac = sdpa_math(b, &ms, s->kk, qe, ke, vt, rep, qcontig);
	s->qe = ms.q, s->ktc = ms.kt, s->attw = ms.attw, s->sm = ms.sm, s->vr = ms.v, s->drop_attn = ms.drop;
	s->sc_w = s->qf = NO;
	return ac;
}

/* repeat_interleave's backward for g [B·h, ...] (a view over [B, kv,
 * rep, T, hd]; k^T's [B·h, hd, T] through the transpose): ExpandBackward's
 * sum over rep alone (unsqueeze's backward is a view). Returns the
 * [B, kv, T, hd] grad; g's holder taken. */
static T repeat_interleave_bwd(struct bld *b, T g, uint64_t B, uint64_t kv, uint64_t Tn, uint64_t hd, int transposed)
{
	T sm = heads_sum(b, g, B, kv, Tn, hd, transposed, "sum (repeat_interleave backward)");
	T r = reshape(b, sm, 4, SH(B, kv, Tn, hd));
	unref(b, sm);
	return r;
}

/* The llama family's math-path backward from the merged heads' gradient
 * dac (its holder taken), in 2.6's order (autograd runs the later-made
 * node first): sdpa_math_bwd_core, then v's and k's repeat sums, q·√scale's
 * MulBackward. dq [B, h, T, hd], dk and dv [B, kv, T, hd], contiguous. */
static void sdpa_math_bwd(struct bld *b, struct llama_layer_saved *s, T dac, uint64_t B, uint64_t h, uint64_t kv,
                          uint64_t Tn, uint64_t hd, T *dq, T *dk, T *dv)
{
	struct sdpa_math ms = { s->qe, s->ktc, s->attw, s->sm, s->vr, s->drop_attn };
	T dqc, dks, dvr;
	sdpa_math_bwd_core(b, &ms, dac, B, h, Tn, hd, &dqc, &dks, &dvr);
	s->qe = s->ktc = s->attw = s->sm = s->vr = s->drop_attn = NO;
	*dv = repeat_interleave_bwd(b, dvr, B, kv, Tn, hd, 0);
	*dk = dks != NO ? repeat_interleave_bwd(b, dks, B, kv, Tn, hd, 1) : NO;
	T dqs = sdpa_q_scale_bwd(b, dqc, hd);
	*dq = reshape(b, dqs, 4, SH(B, h, Tn, hd));
	unref(b, dqs);
}

/* Phi-3's layer in model.parameters() order (modeling_phi3.py:
 * Phi3Attention registers o_proj before qkv_proj; Phi3MLP gate_up_proj,
 * down_proj; then the two norms), each fused tensor one parameter. */
static void phi3_layer_params(struct bld *b, struct model *M, unsigned long long L)
{
	static const char *const order[] = { "self_attn.o_proj", "self_attn.qkv_proj", "mlp.gate_up_proj",
		                             "mlp.down_proj", "input_layernorm", "post_attention_layernorm" };
	char n[256];
	for (size_t j = 0; j < sizeof order / sizeof *order; j++) {
		snprintf(n, sizeof n, "model.layers.%llu.%s.weight", L, order[j]);
		add_param(b, M, find_tensor(b, n), -1);
	}
}

static void llama_setup(struct bld *b, struct model *M)
{
	const struct zs_model *m = b->m;
	/* model.parameters() order (tests/hf_torch.py's modules, as
	 * transformers registers them): embed_tokens; each layer's self_attn
	 * (q, k, v, o), mlp (gate, up, down), input_layernorm,
	 * post_attention_layernorm; norm; lm_head when untied */
	char n[256];
	add_param(b, M, find_tensor(b, "model.embed_tokens.weight"), -1);
	M->escale = M->inv_freq_local = NO;
	if (gemma3(m)) /* Gemma3TextScaledWordEmbedding's buffer (persistent=False) */
	{
		M->escale = mk(b, "embed_scale buffer", AG_F32, 0, NULL, AG_ROLE_BUFFER, ZS_CAT_PARAM32, -1);
		op(b, AG_OP_FILL, NO, NO, NO, M->escale, NO, NO)->arg[0] = sqrt((double)m->hidden);
	}
	for (uint64_t l = 0; l < m->layers; l++) {
		unsigned long long L = (unsigned long long)l;
		snprintf(n, sizeof n, "model.layers.%llu.self_attn.qkv_proj.weight", L);
		if (find_tensor(b, n) >= 0) {
			phi3_layer_params(b, M, L);
			continue;
		}
		snprintf(n, sizeof n, "model.layers.%llu.self_attn.{q,k,v}_proj.weight", L);
		int32_t qkv = find_tensor(b, n);
		/* qwen2's biases: each projection's weight, then its bias */
		snprintf(n, sizeof n, "model.layers.%llu.self_attn.{q,k,v}_proj.bias", L);
		int32_t qkvb = find_tensor(b, n);
		for (int part = 0; part < 3; part++) {
			add_param(b, M, qkv, part);
			if (qkvb >= 0)
				add_param(b, M, qkvb, part);
		}
		snprintf(n, sizeof n, "model.layers.%llu.self_attn.o_proj.weight", L);
		add_param(b, M, find_tensor(b, n), -1);
		/* qwen3's q_norm and k_norm, registered after o_proj */
		snprintf(n, sizeof n, "model.layers.%llu.self_attn.{q,k}_norm.weight", L);
		int32_t qkn = find_tensor(b, n);
		if (qkn >= 0) {
			add_param(b, M, qkn, 0);
			add_param(b, M, qkn, 1);
		}
		if (m->experts > 0) {
			moe_params(b, M, L);
		} else {
			snprintf(n, sizeof n, "model.layers.%llu.mlp.{gate,up}_proj.weight", L);
			int32_t gu = find_tensor(b, n);
			add_param(b, M, gu, 0);
			add_param(b, M, gu, 1);
			snprintf(n, sizeof n, "model.layers.%llu.mlp.down_proj.weight", L);
			add_param(b, M, find_tensor(b, n), -1);
		}
		snprintf(n, sizeof n, "model.layers.%llu.input_layernorm.weight", L);
		add_param(b, M, find_tensor(b, n), -1);
		snprintf(n, sizeof n, "model.layers.%llu.post_attention_layernorm.weight", L);
		add_param(b, M, find_tensor(b, n), -1);
		if (m->gemma) { /* Gemma2DecoderLayer registers these two after post_attention_layernorm */
			snprintf(n, sizeof n, "model.layers.%llu.pre_feedforward_layernorm.weight", L);
			add_param(b, M, find_tensor(b, n), -1);
			snprintf(n, sizeof n, "model.layers.%llu.post_feedforward_layernorm.weight", L);
			add_param(b, M, find_tensor(b, n), -1);
		}
	}
	add_param(b, M, find_tensor(b, "model.norm.weight"), -1);
	/* LlamaRotaryEmbedding's inv_freq (persistent=False), registered after
	 * norm, and `self.original_inv_freq = self.inv_freq` beside it
	 * (modeling_llama.py at 5dd4a635): the same tensor, until
	 * module.bfloat16() (DeepSpeed's bf16, ag_options.mdt) swaps the
	 * buffer for a bf16 copy and the attribute keeps the fp32 one */
	if (b->o->mdt != AG_F32 && !b->o->load_bf16) {
		T orig = mk(b, "original_inv_freq (fp32)", AG_F32, 1, SH(m->head_dim / 2), AG_ROLE_BUFFER, ZS_CAT_PARAM32,
		            -1);
		struct ag_event *e = op(b, AG_OP_ROPE_INV_FREQ, NO, NO, NO, orig, NO, NO);
		e->arg[0] = m->rope_theta;
		e->arg[1] = gemma3(m) ? m->rope_factor : 0;
	}
	/* loaded in bf16 (--load-dtype bf16) the constructor computes it
	 * under the bf16 default dtype, but as `torch.arange(..., dtype=
	 * torch.int64).float()` (_compute_default_rope_parameters): fp32 */
	M->inv_freq = mk(b, "inv_freq buffer", b->o->load_bf16 ? AG_F32 : b->o->mdt, 1, SH(m->head_dim / 2), AG_ROLE_BUFFER, ZS_CAT_PARAM32, -1);
	/* gemma3_text's global layers' linear rope_scaling (zs_model's
	 * rope_factor): the same buffer, divided in place as it is made
	 * (_compute_linear_scaling_rope_parameters' `inv_freq /= factor`);
	 * inv_freq_local is rotary_emb_local's, the default's */
	struct ag_event *ie = op(b, AG_OP_ROPE_INV_FREQ, NO, NO, NO, M->inv_freq, NO, NO);
	ie->arg[0] = m->rope_theta;
	ie->arg[1] = gemma3(m) ? m->rope_factor : 0;
	if (gemma3(m)) { /* Gemma3RotaryEmbedding's second buffer, the sliding layers' */
		M->inv_freq_local = mk(b, "inv_freq buffer (sliding_attention)", AG_F32, 1, SH(m->head_dim / 2),
		                       AG_ROLE_BUFFER, ZS_CAT_PARAM32, -1);
		op(b, AG_OP_ROPE_INV_FREQ, NO, NO, NO, M->inv_freq_local, NO, NO)->arg[0] = m->rope_local_theta;
	}
	if (!m->tied)
		add_param(b, M, find_tensor(b, "lm_head.weight"), -1);
}

/* The parameter of fused tensor `name`'s part, or the plain one. */
static struct pt *PP(struct model *M, struct bld *b, int part, const char *fmt, ...)
{
	char name[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(name, sizeof name, fmt, ap);
	va_end(ap);
	struct pt *q = P_part(M, b, name, part);
	if (!q) {
		fprintf(stderr, "zerosim: autograd: no parameter %s part %d\n", name, part);
		abort();
	}
	return q;
}

/* Layer i's bias of q, k or v (part 0, 1, 2), NULL where the family's
 * projections have none (qwen2's have: Qwen2Attention, bias=True). */
static struct pt *qkv_bias(struct model *M, struct bld *b, int i, int part)
{
	char name[128];
	snprintf(name, sizeof name, "model.layers.%d.self_attn.{q,k,v}_proj.bias", i);
	return P_part(M, b, name, part);
}

/* Layer i's per-head norm of q or k (part 0, 1), NULL where the family
 * has none (qwen3's q_norm and k_norm: Qwen3RMSNorm(head_dim)). */
static struct pt *qk_norm(struct model *M, struct bld *b, int i, int part)
{
	char name[128];
	if (part > 1)
		return NULL;
	snprintf(name, sizeof name, "model.layers.%d.self_attn.{q,k}_norm.weight", i);
	return P_part(M, b, name, part);
}

/* One of layer i's q, k, v (part 0, 1, 2; n heads) from the normed input
 * x: its projection (biased in qwen2), viewed [B, T, n, hd], through the
 * head's norm in qwen3 (Qwen3Attention.forward: q_norm(q_proj(x)
 * .view(hidden_shape)).transpose(1, 2), q's made and normed before k's
 * projection), and transposed to [B, n, T, hd] (a view). */
static T head_states(struct bld *b, struct model *M, T x, int i, int part, uint64_t n, struct lin_saved *ls,
                     struct rms_saved *ns)
{
	uint64_t B = b->o->batch, Tn = b->o->seq, hd = b->m->head_dim;
	const char *qkv = (const char *const[]){ "q", "k", "v" }[part];
	ds3_mark(b, "fwd", "model.layers.%d.self_attn.%s_proj", i, qkv);
	T y = linear_b(b, x, PP(M, b, part, "model.layers.%d.self_attn.{q,k,v}_proj.weight", i), qkv_bias(M, b, i, part),
	               ls);
	ds3_mark(b, "fwd_end", "model.layers.%d.self_attn.%s_proj", i, qkv);
	struct pt *nw = qk_norm(M, b, i, part);
	if (nw && ns) { /* v has none (ns NULL) */
		T y4 = reshape(b, y, 4, SH(B, Tn, n, hd));
		unref(b, y);
		int32_t mod = b->module;
		b->module = modname(b, "model.layers.%d.self_attn.{q,k}_norm", i);
		y = b->s->tensor[y4].dtype != AG_F32 ? rmsnorm_amp(b, y4, nw, ns) : rmsnorm(b, y4, nw, ns);
		unref(b, y4);
		b->module = mod;
	}
	T t = vw(b, y, 4, SH(B, n, Tn, hd),
	         (const int64_t[]){ (int64_t)(Tn * n * hd), (int64_t)hd, (int64_t)(n * hd), 1 }, 0);
	unref(b, y);
	return t;
}

/* ViewBackward's reshape of the heads' grad pv ([B, T, n, hd], lying as
 * the transpose of a contiguous [B, n, T, hd]) to [B, T, n·hd]: a view
 * where n and hd merge (dims01_merge: n or T is 1), else a copy. */
static T heads_grad_merged(struct bld *b, T pv, uint64_t n)
{
	uint64_t B = b->o->batch, Tn = b->o->seq, hd = b->m->head_dim;
	if (dims01_merge(SH(n, hd), (const int64_t[]){ (int64_t)(Tn * hd), 1 }))
		return reshape(b, pv, 3, SH(B, Tn, n * hd));
	T c = TMP("clone (heads' grad to [B, T, n hd])", b->s->tensor[pv].dtype, B, Tn, n * hd);
	op(b, AG_OP_COPY, pv, NO, NO, c, NO, NO);
	return c;
}

/* Its backward from the grad g of the [B, n, T, hd] states (released):
 * TransposeBackward's view; in qwen3 the head's norm backward, whose sum
 * lies in the transposed grad's layout (TensorIterator follows its first
 * operand), so ViewBackward's reshape to [B, T, n·hd] copies (unless n or
 * T is 1: heads_grad_merged), as it does without a norm; then the
 * projection's backward, x's grad to *xbuf. */
static void head_states_bwd(struct bld *b, struct model *M, T g, int i, int part, uint64_t n, struct lin_saved *ls,
                            struct rms_saved *ns, T *xbuf)
{
	uint64_t B = b->o->batch, Tn = b->o->seq, hd = b->m->head_dim;
	/* TransposeBackward: the [B, n, T, hd] grad read as [B, T, n, hd] */
	T pv = vw(b, g, 4, SH(B, Tn, n, hd), (const int64_t[]){ (int64_t)(n * Tn * hd), (int64_t)hd, (int64_t)(Tn * hd), 1 },
	          0);
	unref(b, g);
	struct pt *nw = qk_norm(M, b, i, part);
	if (nw && ns) {
		int32_t mod = b->module;
		b->module = modname(b, "model.layers.%d.self_attn.{q,k}_norm", i);
		T nb = NO;
		if (b->o->amp != AG_F32) /* autocast: the norm's input was the projection's bf16 output */
			rmsnorm_amp_bwd(b, pv, ns, nw, &nb);
		else
			rmsnorm_bwd(b, pv, ns, nw, &nb);
		b->module = mod;
		if (nb == NO) /* the projection's output requires no grad: the norm's weight's alone */
			return;
		pv = reshape(b, nb, 4, SH(B, Tn, n, hd));
		unref(b, nb);
	}
	/* autocast: bf16 for a bf16 state (qwen3's: the norm's input's) */
	T c = heads_grad_merged(b, pv, n);
	unref(b, pv);
	const char *qkv = (const char *const[]){ "q", "k", "v" }[part];
	ds3_mark(b, "bwd", "model.layers.%d.self_attn.%s_proj", i, qkv);
	T lb;
	linear_b_bwd(b, c, 1, ls, PP(M, b, part, "model.layers.%d.self_attn.{q,k,v}_proj.weight", i),
	             qkv_bias(M, b, i, part), ds3_buf(b, xbuf, &lb));
	ds3_hand(b, xbuf, &lb, "model.layers.%d.self_attn.%s_proj", i, qkv);
}

/* Phi-3's q, k, v (modeling_phi3.py 00d4b3d2142c, Phi3Attention.forward):
 * qkv = qkv_proj(x), one [B, T, (h + 2 kv) hd] product; query_states =
 * qkv[..., :h hd], key_states and value_states the next two slices (views,
 * each a SliceBackward node), each .view(B, T, n, hd).transpose(1, 2): into
 * st[0..2], views holding qkv's storage. */
static void phi3_states(struct bld *b, struct model *M, T x, int i, struct lin_saved *ls, T st[3])
{
	uint64_t B = b->o->batch, Tn = b->o->seq, hd = b->m->head_dim, h = b->m->heads, kv = b->m->kv_heads;
	uint64_t width = (h + 2 * kv) * hd, n[3] = { h, kv, kv }, off[3] = { 0, h * hd, (h + kv) * hd };
	T y = linear(b, x, PF(M, b, "model.layers.%d.self_attn.qkv_proj.weight", i), ls);
	for (int j = 0; j < 3; j++)
		st[j] = vw(b, y, 4, SH(B, n[j], Tn, hd),
		           (const int64_t[]){ (int64_t)(Tn * width), (int64_t)hd, (int64_t)width, 1 }, off[j]);
	unref(b, y);
}

/* matmul's k^T in phi3 (the repeat_kv copy kr contiguous: reshaping
 * k^T to [B·h, hd, T] is a view), kt being kr's transpose or, under
 * autocast, its bf16 cast: `.to()` keeps the transposed strides
 * (preserve_format of a dense tensor), so the reshape is a view of the
 * cast, which bmm then keeps (made contiguous here: the same bytes). */
static T phi3_kt_operand(struct bld *b, T kr, T kt)
{
	uint64_t B = b->o->batch, Tn = b->o->seq, hd = b->m->head_dim, h = b->m->heads;
	if (b->o->amp != AG_F32)
		return vw(b, kt, 3, SH(B * h, hd, Tn), NULL, 0);
	return vw(b, kr, 3, SH(B * h, hd, Tn), (const int64_t[]){ (int64_t)(Tn * hd), 1, (int64_t)hd }, 0);
}

/* apply_rotary_pos_emb's partial-rotary cat (modeling_phi3.py 00d4b3d2142c:
 * cat([rope(x[..., :rotary_dim]), x[..., rotary_dim:]], -1), rotary_dim =
 * hd): the full slice is x itself (the indexing returns self), the pass an
 * empty view; the cat a copy of the rope's sum, which it releases. */
static T phi3_cat_pass(struct bld *b, T y)
{
	T c = like(b, "cat (rope, pass)", y);
	op(b, AG_OP_COPY, y, NO, NO, c, NO, NO);
	unref(b, y);
	return c;
}

/* Its backward after the ropes' (which left k's and q's gradients in
 * buf[1], buf[2]; pass[1], pass[2] the holders the empty passes' narrow
 * views keep of the cats' gradients; buf[0] v's): k_pass's, then q_pass's
 * SliceBackward (slice_backward's zeros of the rope input's shape; the
 * cat's gradient goes; the zeros added to the buffer); v's, k's, q's
 * TransposeBackward and ViewBackward (the grad read as [B, T, n, hd] and
 * reshaped: heads_grad_merged); then the three SliceBackwards of qkv, v's
 * first (zeros of [B, T, (h + 2 kv) hd], the slice copied in, summed in
 * qkv's buffer), and qkv_proj's backward, x's grad to *xbuf. The order is
 * autograd's: higher sequence numbers first, the slices of qkv made
 * before the views. */
static void phi3_states_bwd(struct bld *b, struct model *M, int i, T buf[3], T pass[3], struct lin_saved *ls, T *xbuf)
{
	uint64_t B = b->o->batch, Tn = b->o->seq, hd = b->m->head_dim, h = b->m->heads, kv = b->m->kv_heads;
	uint64_t width = (h + 2 * kv) * hd, n[3] = { kv, kv, h }, off[3] = { (h + kv) * hd, h * hd, 0 };
	for (int j = 1; j < 3; j++) {
		T z = like(b, "slice_backward (the rope's empty pass)", buf[j]);
		op(b, AG_OP_FILL, NO, NO, NO, z, NO, NO)->arg[0] = 0;
		unref(b, pass[j]);
		arrive(b, &buf[j], z);
	}
	T c[3];
	for (int j = 0; j < 3; j++) {
		T pv = vw(b, buf[j], 4, SH(B, Tn, n[j], hd),
		          (const int64_t[]){ (int64_t)(n[j] * Tn * hd), (int64_t)hd, (int64_t)(Tn * hd), 1 }, 0);
		unref(b, buf[j]);
		c[j] = heads_grad_merged(b, pv, n[j]);
		unref(b, pv);
	}
	T g = NO;
	for (int j = 0; j < 3; j++) {
		T z = TMP("slice_backward (qkv's slice)", b->s->tensor[c[j]].dtype, B, Tn, width);
		op(b, AG_OP_COPY, c[j], NO, NO, z, NO, NO)->arg[1] = (double)off[j];
		unref(b, c[j]);
		arrive(b, &g, z);
	}
	linear_bwd(b, g, 1, ls, PF(M, b, "model.layers.%d.self_attn.qkv_proj.weight", i), xbuf);
}

/* Phi3MLP.forward (modeling_phi3.py 00d4b3d2142c): up_states =
 * gate_up_proj(x); gate, up_states = up_states.chunk(2, dim=-1) (views);
 * up_states * silu(gate). silu keeps gate and mul keeps up (views: the
 * fused product stays whole) and silu's result. Returns the product.
 * --freeze: the two chunks of one product require grad together (*km);
 * where they need none (a frozen gate_up_proj over an input that needs
 * none) silu and mul make no nodes and save nothing: silu's result goes
 * after the mul, `up` with its rebinding, *sl and *up come back NO and
 * *gate is the name the caller drops when forward returns (after
 * down_proj: the fused product lives until then). */
static T phi3_mlp(struct bld *b, struct model *M, T x, int i, struct lin_saved *ls, T *gate, T *sl, T *up, int *km)
{
	uint64_t B = b->o->batch, Tn = b->o->seq, f = b->m->intermediate;
	T gu = linear(b, x, PF(M, b, "model.layers.%d.mlp.gate_up_proj.weight", i), ls);
	const int64_t st[] = { (int64_t)(Tn * 2 * f), (int64_t)(2 * f), 1 };
	*gate = vw(b, gu, 3, SH(B, Tn, f), st, 0);
	*up = vw(b, gu, 3, SH(B, Tn, f), st, f);
	unref(b, gu);
	*sl = like(b, "silu", *gate);
	op(b, AG_OP_SILU, *gate, NO, NO, *sl, NO, NO);
	T mu = like(b, "mul (up * silu(gate))", *sl);
	op(b, AG_OP_MUL, *up, *sl, NO, mu, NO, NO);
	*km = RG(b, gu);
	if (!*km) {
		unref(b, *sl);
		unref(b, *up);
		*sl = *up = NO;
	}
	return mu;
}

/* Its backward from down_proj's input gradient dmu (released): MulBackward
 * (up's g·silu first, then silu's g·up), SiluBackward, then chunk's
 * SplitBackward: cat of the two halves' gradients, one [B, T, 2I] tensor,
 * into gate_up_proj's backward. */
static void phi3_mlp_bwd(struct bld *b, struct model *M, int i, T dmu, struct lin_saved *ls, T gate, T sl, T up,
                         T *xbuf)
{
	uint64_t B = b->o->batch, Tn = b->o->seq, f = b->m->intermediate;
	T dup = like(b, "mul (up backward)", sl);
	op(b, AG_OP_MUL, dmu, sl, NO, dup, NO, NO);
	T dsl = like(b, "mul (silu backward)", sl);
	op(b, AG_OP_MUL, dmu, up, NO, dsl, NO, NO);
	unref(b, dmu);
	unref(b, sl);
	unref(b, up);
	T dg = like(b, "silu_backward", sl);
	op(b, AG_OP_SILU_BWD, dsl, gate, NO, dg, NO, NO);
	unref(b, dsl);
	unref(b, gate);
	T cat = TMP("cat (SplitBackward of chunk)", b->s->tensor[dg].dtype, B, Tn, 2 * f);
	op(b, AG_OP_CAT_LAST, dg, dup, NO, cat, NO, NO);
	unref(b, dg);
	unref(b, dup);
	linear_bwd(b, cat, 1, ls, PF(M, b, "model.layers.%d.mlp.gate_up_proj.weight", i), xbuf);
}

/* Phi3DecoderLayer's `residual + self.resid_attn_dropout(hidden_states)`
 * and `residual + self.resid_mlp_dropout(hidden_states)` (modeling_phi3.py
 * 00d4b3d2142c; nn.Dropout(resid_pdrop)): the CPU's _dropout_impl over the
 * sublayer's output y (dropout() above: p = 0 returns y itself), the add,
 * the dropout's output let go after the add, then y's name (the sublayer's
 * `hidden_states`, rebound by the caller when the add returns; no node
 * keeps y: MulBackward0 saves the noise only). The noise autograd keeps
 * goes to *kept (NO for p = 0). a's and y's holders are taken. */
static T phi3_resid_dropout_add(struct bld *b, T a, T y, T *kept)
{
	T yd = dropout(b, y, b->m->resid_pdrop, kept);
	T out = residual_add(b, a, yd, 0);
	unref(b, y);
	return out;
}

/* LlamaMLP's backward from down_proj's input gradient dmu (released):
 * MulBackward (silu's g·up, then up's g·silu), up_proj's backward,
 * SiluBackward, gate_proj's; x's grads to *xbuf. */
static void swiglu_bwd(struct bld *b, struct model *M, int i, T dmu, struct llama_layer_saved *s, T *xbuf)
{
	T dsl, dup;
	mul_bwd(b, "mul (swiglu backward)", dmu, s->silu_o, s->up_o, &dsl, &dup);
	const char *gun = "model.layers.%d.mlp.{gate,up}_proj.weight";
	ds3_mark(b, "bwd", "model.layers.%d.mlp.up_proj", i);
	T lb;
	linear_bwd(b, dup, 1, &s->up, PP(M, b, 1, gun, i), ds3_buf(b, xbuf, &lb));
	ds3_hand(b, xbuf, &lb, "model.layers.%d.mlp.up_proj", i);
	/* gemma's GeluBackward0 (gelu_backward, approximate "tanh") in SiLU's place */
	T dgp = like(b, b->m->gemma ? "gelu_backward" : "silu_backward", s->gate_o);
	op(b, b->m->gemma ? AG_OP_GELU_TANH_BWD : AG_OP_SILU_BWD, dsl, s->gate_o, NO, dgp, NO, NO);
	unref(b, dsl);
	unref(b, s->gate_o);
	ds3_mark(b, "bwd", "model.layers.%d.mlp.gate_proj", i);
	linear_bwd(b, dgp, 1, &s->gate, PP(M, b, 0, gun, i), ds3_buf(b, xbuf, &lb));
	ds3_hand(b, xbuf, &lb, "model.layers.%d.mlp.gate_proj", i);
}

/* Gemma 2 and Gemma 3's text model (tests/hf_torch.py Gemma2ForCausalLM:
 * modeling_gemma2.py 9a80143ca260, modeling_gemma3.py 008f5c8c): llama's
 * step with the ops below in its place (docs/schedule.md, "Gemma"). */

/* Gemma2RMSNorm op by op (fp32: x.float() and .type_as(x) are x): _norm
 * x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps), every temporary going
 * as the expression ends (the mean after the add, the sum after rsqrt, the
 * rsqrt after x * r when no node keeps it); then output * (1.0 +
 * weight.float()): add with a wrapped 1.0 (AddBackward0 keeps nothing),
 * the product, whose MulBackward0 keeps the normalised x for (1 + w)'s
 * gradient and (1 + w) for x's. */
static T gemma_rmsnorm(struct bld *b, T x, struct pt *w, struct rms_saved *sv)
{
	int kx = RG(b, x), kw = RG(b, w->w);
	T r;
	T xr = rms_xr(b, x, w, sv, &r, NULL);
	unref(b, r); /* the expression's temporary */
	T w1 = scalar_op(b, AG_OP_ADD_SCALAR, "add (1.0 + weight)", w->w, 1.0, NULL);
	T y = like(b, "mul (output (1 + weight))", x);
	op(b, AG_OP_MUL, xr, w1, NO, y, NO, NO);
	/* mul keeps each operand for the other's gradient only; the temporary
	 * (1 + w) goes, then `output` is rebound */
	sv->w1 = kx ? w1 : NO;
	if (!kx)
		unref(b, w1);
	sv->xr = kw ? xr : NO;
	if (!kw)
		unref(b, xr);
	return y;
}

/* Its backward from the output's gradient g (released): MulBackward0,
 * self's (x * r's) g·(1 + w) first, then other's g·output summed to [d]
 * (validate_outputs); the node's input and saved tensors go; AddBackward0
 * of (1 + w) (the later node) hands the sum to the weight's
 * AccumulateGrad; then x * r's backward as LlamaRMSNorm's, x's gradients
 * to *xbuf. */
static void gemma_rmsnorm_bwd(struct bld *b, T g, struct rms_saved *sv, struct pt *w, T *xbuf)
{
	T dxr = NO, dw = NO;
	if (sv->kx) {
		dxr = like(b, "mul (Gemma2RMSNorm backward)", g);
		op(b, AG_OP_MUL, g, sv->w1, NO, dxr, NO, NO);
	}
	if (sv->kw) {
		T dwf = like(b, "mul (Gemma2RMSNorm weight grad)", g);
		op(b, AG_OP_MUL, g, sv->xr, NO, dwf, NO, NO);
		dw = like(b, "sum (Gemma2RMSNorm weight grad)", w->w);
		op(b, AG_OP_SUM_TO, dwf, NO, NO, dw, NO, NO);
		unref(b, dwf);
	}
	unref(b, g);
	/* release_variables: 1.13's MulBackward0 lets self_ go first, 2.6's
	 * other_ (both traced) */
	if (b->o->version == ZS_TORCH_1_13) {
		unref(b, sv->xr);
		unref(b, sv->w1);
	} else {
		unref(b, sv->w1);
		unref(b, sv->xr);
	}
	sv->xr = sv->w1 = NO;
	if (dw != NO)
		accumulate(b, w, dw);
	if (sv->kx)
		rms_xr_bwd(b, dxr, sv, xbuf);
}

/* Soft-capping, cap · tanh(x / cap) as Gemma writes it (eager_attention_
 * forward's scores, Gemma2ForCausalLM.forward's logits): x / cap (a wrapped
 * number DivBackward0 keeps for grad / other; x goes, the name rebound),
 * tanh (TanhBackward0 keeps its result), * cap (a wrapped number
 * MulBackward0 keeps); each kernel reads TensorIterator's fp32 copy of its
 * number. Nothing is kept where x requires no grad. x's holder is taken. */
static T softcap_fwd(struct bld *b, T x, double cap, struct softcap_saved *sv)
{
	int k = RG(b, x);
	T w = wrapped(b, cap), c = cast_scalar(b, w);
	T d = like(b, "div (/ softcap)", x);
	op(b, AG_OP_DIV, x, c, NO, d, NO, NO);
	unref(b, c);
	/* DivBackward0 and MulBackward0 keep their wrapped numbers (2.x's
	 * non-reentrant forward too: nr_wrapped) */
	T *kw = nr_wrapped(b, k ? &sv->wdiv : NULL);
	if (kw)
		*kw = w;
	else
		unref(b, w);
	unref(b, x);
	T t = like(b, "tanh (softcap)", d);
	op(b, AG_OP_TANH, d, NO, NO, t, NO, NO);
	unref(b, d);
	T y = scalar_op(b, AG_OP_MUL_SCALAR, "mul (* softcap)", t, cap, nr_wrapped(b, k ? &sv->wmul : NULL));
	sv->th = k ? t : NO;
	if (!k) {
		unref(b, t);
		sv->wdiv = sv->wmul = NO;
	}
	return y;
}

/* Its backward from g (released): MulBackward0 (g · cap through the kept
 * number's fp32 copy), TanhBackward0, DivBackward0 (g / cap), each node's
 * input and saved tensors going after it runs. */
static T softcap_bwd(struct bld *b, T g, double cap, struct softcap_saved *sv)
{
	T c = cast_scalar(b, sv->wmul);
	T g1 = like(b, "mul (softcap backward)", g);
	op(b, AG_OP_MUL_SCALAR, g, NO, NO, g1, NO, NO)->arg[0] = cap;
	unref(b, c);
	unref(b, g);
	unref(b, sv->wmul);
	T g2 = like(b, "tanh_backward (softcap)", g1);
	op(b, AG_OP_TANH_BWD, g1, sv->th, NO, g2, NO, NO);
	unref(b, g1);
	unref(b, sv->th);
	c = cast_scalar(b, sv->wdiv);
	T g3 = like(b, "div (softcap backward)", g2);
	op(b, AG_OP_DIV, g2, c, NO, g3, NO, NO);
	unref(b, c);
	unref(b, g2);
	unref(b, sv->wdiv);
	sv->wdiv = sv->th = sv->wmul = NO;
	return g3;
}

/* Whether layer l of a gemma slides (Gemma2DecoderLayer.is_sliding: l even;
 * gemma3_text: unless (l + 1) is a multiple of sliding_window_pattern), and
 * has a window to slide. */
static int gemma_sliding(const struct zs_model *m, uint64_t l)
{
	if (!m->gemma || !m->sliding_window)
		return 0;
	return m->window_pattern ? (l + 1) % m->window_pattern != 0 : l % 2 == 0;
}

/* Gemma2DecoderLayer.forward's sliding-window mask over the model's
 * [B, 1, T, T] causal mask view cmv (eager): torch.ones_like(mask,
 * dtype=bool) (the expanded view is not dense: a contiguous [B, 1, T, T]),
 * tril(diagonal=-window) (ones_like's result goes), torch.where(that,
 * min_dtype, mask): 1.13's where.ScalarSelf makes the scalar a 4-byte
 * scalar_tensor for the kernel. The where result (*mask, the layer's
 * `attention_mask`) and the tril (*tril) are held until the layer returns;
 * the slice [..., 0 : max(T, window)] is the whole. */
static void gemma_sliding_mask(struct bld *b, T cmv, T *mask, T *tril)
{
	uint64_t B = b->o->batch, Tn = b->o->seq;
	T ones = TMP("ones_like (sliding window)", AG_BOOL, B, 1, Tn, Tn);
	op(b, AG_OP_FILL, NO, NO, NO, ones, NO, NO)->arg[0] = 1;
	*tril = TMP("tril (sliding window)", AG_BOOL, B, 1, Tn, Tn);
	op(b, AG_OP_SLIDING_MASK, ones, NO, NO, *tril, NO, NO)->arg[0] = (double)b->m->sliding_window;
	unref(b, ones);
	T mn = tmp(b, "scalar_tensor (min_dtype)", AG_F32, 0, NULL);
	op(b, AG_OP_FILL, NO, NO, NO, mn, NO, NO)->arg[0] = -3.4028234663852886e38;
	*mask = TMP("where (sliding window mask)", AG_F32, B, 1, Tn, Tn);
	op(b, AG_OP_WHERE, *tril, mn, cmv, *mask, NO, NO);
	unref(b, mn);
}

/* Whether m is Gemma 3's text model (gemma3_text: a layer pattern). */
static int gemma3(const struct zs_model *m)
{
	return m->gemma && m->window_pattern != 0;
}

/* Gemma3Attention.forward's q_norm or k_norm (part 0, 1) of layer i on the
 * transposed [B, n, T, hd] heads x (a view of the projection): Gemma3RMSNorm
 * (Gemma2RMSNorm's ops), the name rebound to its output. */
static T gemma3_head_norm(struct bld *b, struct model *M, int i, int part, T x, struct rms_saved *sv)
{
	int32_t mod = b->module;
	b->module = modname(b, "model.layers.%d.self_attn.{q,k}_norm", i);
	T y = rmsnorm(b, x, qk_norm(M, b, i, part), sv);
	unref(b, x);
	b->module = mod;
	return y;
}

/* Its backward from the normed heads' grad g (released): the grad of the
 * transposed heads (NO where they require none). */
static T gemma3_head_norm_bwd(struct bld *b, struct model *M, int i, int part, T g, struct rms_saved *sv)
{
	int32_t mod = b->module;
	b->module = modname(b, "model.layers.%d.self_attn.{q,k}_norm", i);
	T xb = NO;
	rmsnorm_bwd(b, g, sv, qk_norm(M, b, i, part), &xb);
	b->module = mod;
	return xb;
}

/* x + v for an int64 x and a Python int v: the wrapped number is int64
 * already, TensorIterator takes it without a copy (seen in 1.13's
 * allocator: 8 bytes and the result, no more). */
static T int_scalar_op(struct bld *b, const char *what, T x, double v)
{
	T w = wrapped(b, v);
	T out = like(b, what, x);
	op(b, AG_OP_ADD_SCALAR, x, NO, NO, out, NO, NO)->arg[0] = v;
	unref(b, w);
	return out;
}

/* masking_utils.py (00c4411c) _preprocess_mask_arguments' check for packed
 * sequences, find_packed_sequence_indices over position_ids.expand(B, -1)
 * (training: no 2D mask, no cache): position_ids[:, :1] - 1 (a wrapped 1
 * and its int64 copy), torch.diff with it prepended (cat, then the
 * difference), != 1, cumsum (of the bool as int64), [:, -1] == 0, all();
 * one sequence a row: None, every temporary gone as it returns. The
 * engine fills what nothing reads. */
static void gemma3_packed_check(struct bld *b, T cp)
{
	uint64_t B = b->o->batch, Tn = b->o->seq;
	T first = vw(b, cp, 2, SH(B, 1), (const int64_t[]){ 0, 1 }, 0);
	T fd = int_scalar_op(b, "sub (position_ids[:, :1] - 1)", first, -1.0);
	unref(b, first);
	T ct = TMP("cat (diff's prepended first value)", AG_I64, B, Tn + 1);
	op(b, AG_OP_FILL, NO, NO, NO, ct, NO, NO)->arg[0] = 0;
	T pd = TMP("sub (position_diff)", AG_I64, B, Tn);
	op(b, AG_OP_FILL, NO, NO, NO, pd, NO, NO)->arg[0] = 1;
	unref(b, ct);
	T w = wrapped(b, 1.0);
	T ne = TMP("ne (position_diff != 1)", AG_BOOL, B, Tn);
	op(b, AG_OP_FILL, NO, NO, NO, ne, NO, NO)->arg[0] = 0;
	unref(b, w);
	T c0 = TMP("cumsum (the bool as int64)", AG_I64, B, Tn);
	op(b, AG_OP_COPY, ne, NO, NO, c0, NO, NO);
	T cs = TMP("cumsum (packed_sequence_mask)", AG_I64, B, Tn);
	op(b, AG_OP_COPY, c0, NO, NO, cs, NO, NO);
	unref(b, c0);
	unref(b, ne);
	w = wrapped(b, 0.0);
	T eq = TMP("eq (packed_sequence_mask[:, -1] == 0)", AG_BOOL, B);
	op(b, AG_OP_FILL, NO, NO, NO, eq, NO, NO)->arg[0] = 1;
	unref(b, w);
	T all = tmp(b, "all", AG_BOOL, 0, NULL);
	op(b, AG_OP_FILL, NO, NO, NO, all, NO, NO)->arg[0] = 1;
	unref(b, eq);
	unref(b, all);
	unref(b, fd);
	unref(b, pd);
	unref(b, cs);
}

/* One of Gemma3TextModel.forward's masks (modeling_gemma3.py 0018aa64:
 * create_causal_mask, or create_sliding_window_causal_mask when `window`)
 * as masking_utils.py (00c4411c) builds it for eager attention: the packed
 * check, then eager_mask's sdpa_mask without vmap: arange(B), arange(1),
 * arange(T) + q_offset and arange(T) + kv_offset (each arange a temporary
 * of the add), the mask function on their broadcast views (causal: kv <=
 * q; sliding: and_masks' new_ones(()) & (kv > q - window) & (kv <= q)),
 * expand(B, -1, T, T), torch.where(mask, torch.tensor(0.0), min_dtype)
 * (1.13's where.ScalarOther: a scalar_tensor); returns the [B, 1, T, T]
 * fp32 mask, every temporary gone. The engine holds the window's
 * complement (kv <= q - window) in the two temporaries before the causal
 * &, and takes that & as (kv <= q) - it: the mask it adds is the model's. */
static T gemma3_mask(struct bld *b, T cp, uint64_t window)
{
	uint64_t B = b->o->batch, Tn = b->o->seq;
	gemma3_packed_check(b, cp);
	T ba = TMP("arange (batch_arange)", AG_I64, B), ha = TMP("arange (head_arange)", AG_I64, 1);
	op(b, AG_OP_ARANGE, NO, NO, NO, ba, NO, NO);
	op(b, AG_OP_ARANGE, NO, NO, NO, ha, NO, NO);
	T ar[2];
	for (int j = 0; j < 2; j++) { /* q_arange, kv_arange: arange(T) + offset 0 */
		T a = TMP("arange (T)", AG_I64, Tn);
		op(b, AG_OP_ARANGE, NO, NO, NO, a, NO, NO);
		ar[j] = int_scalar_op(b, j ? "add (kv_arange)" : "add (q_arange)", a, 0.0);
		unref(b, a);
	}
	T mask, ones = NO;
	if (window) {
		ones = tmp(b, "new_ones (and_masks' start)", AG_BOOL, 0, NULL);
		op(b, AG_OP_FILL, NO, NO, NO, ones, NO, NO)->arg[0] = 1;
		T qv = reshape(b, ar[0], 4, SH(1, 1, Tn, 1));
		T qw = int_scalar_op(b, "sub (q_idx - sliding_window)", qv, -(double)window);
		unref(b, qv);
		T gt = TMP("gt (kv_idx > q_idx - sliding_window)", AG_BOOL, 1, 1, Tn, Tn);
		op(b, AG_OP_SLIDING_MASK, NO, NO, NO, gt, NO, NO)->arg[0] = (double)window;
		unref(b, qw);
		T a1 = TMP("bitwise_and (result & sliding overlay)", AG_BOOL, 1, 1, Tn, Tn);
		op(b, AG_OP_MUL, ones, gt, NO, a1, NO, NO);
		unref(b, gt);
		unref(b, ones);
		T le = TMP("le (kv_idx <= q_idx)", AG_BOOL, 1, 1, Tn, Tn);
		op(b, AG_OP_TRIL_MASK, NO, NO, NO, le, NO, NO);
		mask = TMP("bitwise_and (result & causal)", AG_BOOL, 1, 1, Tn, Tn);
		op(b, AG_OP_ADD, le, a1, NO, mask, NO, NO)->arg[0] = -1;
		unref(b, le);
		unref(b, a1);
	} else {
		mask = TMP("le (kv_idx <= q_idx)", AG_BOOL, 1, 1, Tn, Tn);
		op(b, AG_OP_TRIL_MASK, NO, NO, NO, mask, NO, NO);
	}
	T zero = tmp(b, "tensor (0.0)", AG_F32, 0, NULL);
	op(b, AG_OP_FILL, NO, NO, NO, zero, NO, NO)->arg[0] = 0;
	T mn = tmp(b, "scalar_tensor (min_dtype)", AG_F32, 0, NULL);
	op(b, AG_OP_FILL, NO, NO, NO, mn, NO, NO)->arg[0] = -3.4028234663852886e38;
	T mx = vw(b, mask, 4, SH(B, 1, Tn, Tn), (const int64_t[]){ 0, 0, (int64_t)Tn, 1 }, 0);
	T out = TMP(window ? "where (sliding_attention mask)" : "where (full_attention mask)", AG_F32, B, 1, Tn, Tn);
	op(b, AG_OP_WHERE, mx, zero, mn, out, NO, NO);
	unref(b, mx);
	unref(b, zero);
	unref(b, mn);
	unref(b, ba);
	unref(b, ha);
	unref(b, ar[0]);
	unref(b, ar[1]);
	unref(b, mask);
	return out;
}

/* LlamaRotaryEmbedding.forward under no_grad (modeling_llama.py; gemma3_text:
 * Gemma3RotaryEmbedding.forward at 0018aa64 with its layer type's buffer)
 * over inv_freq buffer `inv`: cos and sin [1, T, hd], as [1, 1, T, hd] views
 * in *cos4 and *sin4. Llama's file takes cos() and sin() before scaling
 * them; Gemma 3's `cos = emb.cos() * attention_scaling` first (cos_first). */
static void rotary(struct bld *b, T inv, T cp, int cos_first, T *cos4, T *sin4)
{
	uint64_t Tn = b->o->seq, hd = b->m->head_dim;
	mark(b, "fwd:rotary_emb:start");
	/* inv_freq[None, :, None].float(): after module.bfloat16() a copy */
	T ivf = vw(b, inv, 3, SH(1, hd / 2, 1), (const int64_t[]){ 0, 1, 1 }, 0);
	if (b->s->tensor[inv].dtype != AG_F32) {
		T i32 = to_dtype(b, ivf, AG_F32, "_to_copy (inv_freq.float())");
		unref(b, ivf);
		ivf = i32;
	}
	T pf = TMP("_to_copy (position_ids float)", AG_F32, 1, 1, Tn);
	op(b, AG_OP_COPY, cp, NO, NO, pf, NO, NO);
	/* inv_freq[None, :, None].expand(1, -1, 1) @ position_ids[:, None, :] */
	T fr = TMP("bmm (inv_freq x positions)", AG_F32, 1, hd / 2, Tn);
	op(b, AG_OP_BMM, ivf, pf, NO, fr, NO, NO);
	unref(b, ivf);
	/* freqs = that.transpose(1, 2): cat((freqs, freqs), -1) reads the view */
	T frt = transpose_last2(b, fr);
	T em = TMP("cat (freqs, freqs)", AG_F32, 1, Tn, hd);
	op(b, AG_OP_CAT_LAST, frt, frt, NO, em, NO, NO);
	unref(b, frt);
	T cs0 = TMP("cos", AG_F32, 1, Tn, hd);
	op(b, AG_OP_COS, em, NO, NO, cs0, NO, NO);
	T cs = NO;
	if (cos_first) {
		cs = scalar_op(b, AG_OP_MUL_SCALAR, "mul (cos * attention_scaling)", cs0, 1.0, NULL);
		unref(b, cs0);
	}
	T sn0 = TMP("sin", AG_F32, 1, Tn, hd);
	op(b, AG_OP_SIN, em, NO, NO, sn0, NO, NO);
	if (!cos_first) {
		cs = scalar_op(b, AG_OP_MUL_SCALAR, "mul (cos * attention_scaling)", cs0, 1.0, NULL);
		unref(b, cs0);
	}
	T sn = scalar_op(b, AG_OP_MUL_SCALAR, "mul (sin * attention_scaling)", sn0, 1.0, NULL);
	unref(b, sn0);
	/* cos.to(x.dtype), sin.to(x.dtype): copies after module.bfloat16(),
	 * the fp32 tables gone as the function returns */
	if (b->o->mdt != AG_F32) {
		T c16 = to_dtype(b, cs, b->o->mdt, "_to_copy (cos.to(x.dtype))");
		T s16 = to_dtype(b, sn, b->o->mdt, "_to_copy (sin.to(x.dtype))");
		unref(b, cs);
		unref(b, sn);
		cs = c16, sn = s16;
	}
	unref(b, pf);
	unref(b, fr);
	unref(b, em);
	mark(b, "fwd:rotary_emb:end");
	*cos4 = vw(b, cs, 4, SH(1, 1, Tn, hd), NULL, 0), *sin4 = vw(b, sn, 4, SH(1, 1, Tn, hd), NULL, 0);
	unref(b, cs);
	unref(b, sn);
}

/* LlamaForCausalLM's forward (the loss inside, as the reference's), the
 * loss's and the model's backward. */

/* What LlamaModel.forward hands each decoder layer: the mask (NO under
 * SDPA), the position embeddings (gemma3_text: each layer type's), and
 * the settings the layer reads. */
struct llama_args {
	T cm, cos4, sin4;
	T g3mask[2], g3cos[2], g3sin[2];
	T cp;                       /* cache_position (position_ids is its view): checkpointed, a gemma's ctx keeps it */
	int phi3, g3, sdpa;
	double scaling;
};

/* The decoder layer i's forward over hs (its holder taken): its output,
 * one holder; what autograd keeps in *s. */
static T llama_layer_fwd(struct bld *b, struct model *M, struct llama_layer_saved *s, const struct llama_args *a,
                         int i, T hs)
{
	const struct zs_model *m = b->m;
	uint64_t B = b->o->batch, Tn = b->o->seq, h = m->heads, hd = m->head_dim;
	uint64_t kv = m->kv_heads, rep = h / kv, f = m->intermediate;
	int phi3 = a->phi3, g3 = a->g3, sdpa = a->sdpa;
	double scaling = a->scaling;
	uint64_t l = (uint64_t)i;
	T cm = a->cm, cos4 = a->cos4, sin4 = a->sin4;
	const T *g3mask = a->g3mask, *g3cos = a->g3cos, *g3sin = a->g3sin;
	mark(b, "fwd:layers.%d:start", i);
	/* the caller's `hidden_states` holds the layer's input until the
	 * layer returns (no event where a node keeps it anyway) */
	T hin = hs;
	ref(b, hin);
	T lcm = cm; /* the mask this layer's attention adds */
	s->swmask = s->swtril = NO;
	if (g3) { /* its type's mask and position embeddings */
		lcm = g3mask[gemma_sliding(m, l)];
		cos4 = g3cos[gemma_sliding(m, l)], sin4 = g3sin[gemma_sliding(m, l)];
	} else if (!sdpa && gemma_sliding(m, l)) {
		T cmv = vw(b, cm, 4, SH(B, 1, Tn, Tn), (const int64_t[]){ 0, 0, (int64_t)Tn, 1 }, 0);
		gemma_sliding_mask(b, cmv, &s->swmask, &s->swtril);
		unref(b, cmv);
		lcm = s->swmask;
	}
	b->module = modname(b, "model.layers.%d.input_layernorm", i);
	ds3_mark(b, "fwd", "model.layers.%d.input_layernorm", i);
	T x1 = rmsnorm(b, hs, PF(M, b, "model.layers.%d.input_layernorm.weight", i), &s->n1);
	ds3_mark(b, "fwd_end", "model.layers.%d.input_layernorm", i);
	T residual = hs;
	b->module = modname(b, "model.layers.%d.self_attn.{q,k,v}_proj", i);
	/* q, k, v: view(B, T, n, hd).transpose(1, 2) of each projection
	 * (phi3: of qkv_proj's slices) */
	T qt, kt, vt;
	if (phi3) {
		b->module = modname(b, "model.layers.%d.self_attn.qkv_proj", i);
		T st[3];
		phi3_states(b, M, x1, i, &s->q, st);
		qt = st[0], kt = st[1], vt = st[2];
	} else {
		qt = head_states(b, M, x1, i, 0, h, &s->q, g3 ? NULL : &s->qn);
		kt = head_states(b, M, x1, i, 1, kv, &s->k, g3 ? NULL : &s->kn);
		vt = head_states(b, M, x1, i, 2, kv, &s->v, NULL);
		if (g3) { /* Gemma3Attention: q_norm and k_norm on the transposed q and k */
			qt = gemma3_head_norm(b, M, i, 0, qt, &s->qn);
			kt = gemma3_head_norm(b, M, i, 1, kt, &s->kn);
		}
	}
	s->rin = RG(b, hs);
	s->ka = RG(b, qt);
	s->kk = RG(b, kt);
	/* q and v requiring grad, k not: q @ k^T keeps k^T's copy alone
	 * (its self, q, is saved for k^T's gradient only); under SDPA the
	 * math path's bmm the same (sdpa_math_fwd), the flash kernel keeps
	 * its five and makes dk anyway (llama_layer_bwd) */
	int qv_only = s->ka && !s->kk && RG(b, vt) && !phi3;
	if ((s->kk != s->ka || RG(b, vt) != s->ka) && !qv_only)
		unsupported(b, "a layer whose input requires no grad with only some of q_proj, k_proj and v_proj "
		            "frozen");
	/* a refused list is built on to its end (the refusal is made there):
	 * as if q required grad, so that v's gradient finds the weights kept */
	int ka = s->ka || b->unsupported;
	T qe = rope(b, qt, cos4, sin4, &s->rq);
	if (phi3)
		qe = phi3_cat_pass(b, qe);
	T ke = rope(b, kt, cos4, sin4, &s->rk);
	if (phi3)
		ke = phi3_cat_pass(b, ke);
	unref(b, qt);
	unref(b, kt);
	T ac, kr = NO, qname = NO, vname = NO;
	if (sdpa) {
		/* integrations/sdpa_attention.py (transformers e2feb59b6212,
		 * sdpa_attention_forward): no repeat_kv here (from 2.5 it
		 * passes enable_gqa, which the CPU runs in the math path
		 * where kv < h); the flash kernel's output [B, T, h, hd]
		 * makes transpose(1, 2).contiguous() and reshape views */
		if (kv != h) /* enable_gqa: the math path */
			ac = sdpa_math_fwd(b, s, qe, ke, vt, rep, phi3);
		else
			ac = sdpa_fwd(b, &s->sd, qe, ke, vt);
	} else {
		/* repeat_kv: expand and reshape, a copy unless kv is 1 (a
		 * view, the heads of stride 0); n_rep 1 returns k and v
		 * themselves. Their names hold them to forward's end */
		T vr = vt;
		kr = ke;
		int kvcopy = 0; /* k and v reach matmul as contiguous copies */
		if (rep > 1) {
			kr = repeat_kv(b, ke, rep, "clone (repeat_kv k)", &kvcopy);
			vr = repeat_kv(b, vt, rep, "clone (repeat_kv v)", &kvcopy);
		}
		/* matmul(q, k^T): k^T copied to [B·h, hd, T] (the bytes of
		 * the copy matmul makes of q, whose rope sum lies in the
		 * transposed projection's layout); phi3's cat leaves q
		 * contiguous: no copy, bmm keeps k^T as a view. Under
		 * autocast matmul casts k^T (the right operand first) and
		 * q_embed, both fp32 after the rope's promotion, and keeps
		 * q's cast */
		T ktr = transpose_last2(b, kr);
		T qf = NO; /* autocast: the fp32 q_embed, its name held to forward's end */
		if (b->o->amp != AG_F32) {
			T ktb = ac_cast(b, ktr);
			unref(b, ktr);
			ktr = ktb;
			qf = qe;
			qe = ac_cast(b, qf);
		}
		int qcp = !phi3 && rope_sum_copies(B, h, Tn, hd);
		/* k^T as bmm takes it: with n_rep 1 the rope's sum as q
		 * (copied where qcp), after repeat_kv's view (kv = 1) as its
		 * strides say (a copy unless B is 1) */
		int kcp = rep == 1 ? qcp : !dims01_merge(b->s->tensor[ktr].shape, b->s->tensor[ktr].stride);
		T ktc = phi3 && (kvcopy || b->o->amp != AG_F32) ? phi3_kt_operand(b, kr, ktr)
		        : matmul_operand(b, ktr, kvcopy ? qcp : kcp, "clone (matmul's copy of k^T)");
		/* q_embed as [B·h, T, hd]: where k reaches matmul as it lies,
		 * matmul copies each as above; else a view (phi3's
		 * contiguous q; llama's copy of q counted as k^T's above,
		 * whose repeat is contiguous: the same bytes) */
		T qe3 = !kvcopy ? matmul_operand(b, qe, qcp, "clone (matmul's copy of q)")
		                : reshape(b, qe, 3, SH(B * h, Tn, hd));
		T sc = TMP("bmm (q k^T)", b->s->tensor[qe3].dtype, B * h, Tn, Tn);
		op(b, AG_OP_BMM, qe3, ktc, NO, sc, NO, NO);
		unref(b, ktr); /* matmul returns: an autocast copy of k^T goes */
		if (!kvcopy && qcp && qf == NO)
			qname = qe; /* query_states: its name holds it to forward's end */
		else
			unref(b, qe);
		qe = qe3;
		if (!ka) { /* matmul's copy goes when it returns */
			unref(b, ktc);
			ktc = NO;
		}
		T aw = scalar_op(b, AG_OP_MUL_SCALAR, "mul (scores * scaling)", sc, scaling,
		                     nr_wrapped(b, ka ? &s->sc_w : NULL));
		unref(b, sc);
		if (m->gemma && m->attn_softcap > 0) /* eager_attention_forward's softcap */
			aw = softcap_fwd(b, aw, m->attn_softcap, &s->cap);
		/* + the fp32 mask: bf16 scores promoted under autocast; after
		 * module.bfloat16() the mask and the scores bf16 */
		enum ag_dtype adt = b->s->tensor[aw].dtype == b->s->tensor[lcm].dtype ? b->s->tensor[aw].dtype : AG_F32;
		T am = TMP("add (causal mask)", adt, B, h, Tn, Tn);
		T cmv = lcm == cm ? vw(b, cm, 4, SH(B, 1, Tn, Tn), (const int64_t[]){ 0, 0, (int64_t)Tn, 1 }, 0)
		                  : reshape(b, lcm, 4, SH(B, 1, Tn, Tn));
		T aw4 = reshape(b, aw, 4, SH(B, h, Tn, Tn));
		T awp = promoted(b, aw4, adt);
		op(b, AG_OP_ADD, awp, cmv, NO, am, NO, NO)->arg[0] = 1;
		unref(b, awp);
		unref(b, aw4);
		unref(b, cmv);
		unref(b, aw);
		/* softmax(dim=-1, dtype=torch.float32): a bf16 input's fp32 copy
		 * first (SoftMax.cpp's input_.toType(dtype)), gone as it returns */
		T am32 = adt == AG_F32 ? NO : to_dtype(b, am, AG_F32, "_to_copy (softmax's dtype=float32)");
		T sm = TMP("_softmax", AG_F32, B, h, Tn, Tn);
		op(b, AG_OP_SOFTMAX, am32 != NO ? am32 : am, NO, NO, sm, NO, NO);
		if (am32 != NO)
			unref(b, am32);
		unref(b, am);
		if (ka)
			ref(b, sm); /* softmax saves its result */
		/* .to(query_states.dtype): after module.bfloat16() a bf16 copy,
		 * the dropout's input and bmm's operand */
		T smin = sm;
		if (b->o->mdt != AG_F32) {
			smin = to_dtype(b, sm, b->o->mdt, "_to_copy (.to(query_states.dtype))");
			unref(b, sm); /* the name is rebound (SoftmaxBackward's holder stays) */
		}
		/* nn.functional.dropout(attn_weights, p=attention_dropout) */
		T smd = dropout(b, smin, m->attn_pdrop, &s->drop_attn);
		unref(b, smin); /* the name is rebound */
		s->sm = ka ? sm : NO;
		/* the weights and v repeated (contiguous) as bmm takes them;
		 * autocast's matmul casts the fp32 weights (v is bf16; an fp32
		 * v, a 4-bit v_proj's result, is cast first: the arguments
		 * right to left, the copy keeping v's strides) */
		s->vcast = b->o->amp != AG_F32 && b->s->tensor[vr].dtype != b->o->amp;
		if (s->vcast) {
			if (rep == 1) /* .to() keeps the transposed projection's strides: matmul's copy of it */
				unsupported(b, "QLoRA under autocast with as many k/v heads as heads (matmul's copy of v's "
				               "bf16 cast)");
			T vb = to_dtype(b, vr, b->o->amp, "_to_copy (autocast)");
			vname = vr; /* value_states: held to forward's end */
			vr = vb;
			kvcopy = 1; /* the cast is contiguous: bmm takes its view */
		}
		if (b->o->amp != AG_F32) {
			T smb = ac_cast(b, smd);
			unref(b, smd);
			smd = smb;
		}
		T sm3 = reshape(b, smd, 3, SH(B * h, Tn, Tn));
		unref(b, smd);
		sm = sm3;
		T vr3 = !kvcopy ? bmm_operand(b, vr, "clone (matmul's copy of v)") : reshape(b, vr, 3, SH(B * h, Tn, hd));
		if (!kvcopy)
			vname = vr; /* value_states: held to forward's end */
		else
			unref(b, vr);
		vr = vr3;
		T ao = TMP("bmm (attention x v)", b->s->tensor[sm].dtype, B * h, Tn, hd);
		op(b, AG_OP_BMM, sm, vr, NO, ao, NO, NO);
		/* the view's holder passes to bmm's node */
		s->qe = qe, s->ktc = ktc, s->attw = sm, s->vr = vr;
		T aot = vw(b, ao, 4, SH(B, Tn, h, hd), (const int64_t[]){ (int64_t)(h * Tn * hd), (int64_t)hd,
		                                                           (int64_t)(Tn * hd), 1 }, 0);
		ac = TMP("clone (transpose(1, 2).contiguous())", b->s->tensor[ao].dtype, B, Tn, h * hd);
		op(b, AG_OP_COPY, aot, NO, NO, ac, NO, NO);
		unref(b, aot);
		unref(b, ao);
		s->qf = qf;
	}
	b->module = modname(b, "model.layers.%d.self_attn.o_proj", i);
	ds3_mark(b, "fwd", "model.layers.%d.self_attn.o_proj", i);
	T po = linear(b, ac, PF(M, b, "model.layers.%d.self_attn.o_proj.weight", i), &s->o);
	ds3_mark(b, "fwd_end", "model.layers.%d.self_attn.o_proj", i);
	s->rpo = RG(b, po);
	unref(b, ac);
	if (!sdpa && s->qf != NO)
		unref(b, s->qf); /* forward returns: the fp32 query_states goes (autocast) */
	/* forward returns: its locals go in their order, query_states (the
	 * names held above), key_states, value_states */
	unref(b, qname);
	unref(b, kr);
	unref(b, vname);
	if (!sdpa && ka && !s->kk) { /* q_embed: no node keeps it (k requires no grad) */
		unref(b, s->qe);
		s->qe = NO;
	}
	if (!sdpa && !ka) { /* and the names no node holds: q, the weights, v */
		unref(b, s->qe);
		unref(b, s->attw);
		unref(b, s->vr);
		s->qe = s->ktc = s->attw = s->vr = NO;
	}
	if (sdpa) { /* and the states sdpa keeps */
		unref(b, qe);
		unref(b, ke);
		unref(b, vt);
	}
	b->module = -1;
	unref(b, x1); /* hidden_states is rebound to the attention's output (fp32: the views q, k, v keep it) */
	s->drop_resid = s->drop_mlp = NO;
	if (m->gemma) { /* Gemma2DecoderLayer: post_attention_layernorm before the residual add */
		b->module = modname(b, "model.layers.%d.post_attention_layernorm", i);
		T pn = rmsnorm(b, po, PF(M, b, "model.layers.%d.post_attention_layernorm.weight", i), &s->n3);
		unref(b, po); /* the name is rebound */
		po = pn;
		b->module = -1;
	}
	T h2 = phi3 ? phi3_resid_dropout_add(b, residual, po, &s->drop_resid) : residual_add(b, residual, po, 0);
	s->rh2 = RG(b, h2);
	const char *n2name = m->gemma ? "model.layers.%d.pre_feedforward_layernorm"
	                              : "model.layers.%d.post_attention_layernorm";
	b->module = modname(b, n2name, i);
	ds3_mark(b, "fwd", "model.layers.%d.post_attention_layernorm", i);
	T x2 = rmsnorm(b, h2, PF(M, b, m->gemma ? "model.layers.%d.pre_feedforward_layernorm.weight"
	                                         : "model.layers.%d.post_attention_layernorm.weight", i), &s->n2);
	ds3_mark(b, "fwd_end", "model.layers.%d.post_attention_layernorm", i);
	const char *gun = "model.layers.%d.mlp.{gate,up}_proj.weight";
	T mu = NO, mo = NO;
	if (m->experts > 0) /* mixtral: its block in the MLP's place */
		mo = moe_fwd(b, M, x2, i, &s->moe);
	else if (phi3) {
		b->module = modname(b, "model.layers.%d.mlp.gate_up_proj", i);
		mu = phi3_mlp(b, M, x2, i, &s->gate, &s->gate_o, &s->silu_o, &s->up_o, &s->km);
	} else {
		b->module = modname(b, "model.layers.%d.mlp.{gate,up}_proj", i);
		ds3_mark(b, "fwd", "model.layers.%d.mlp.gate_proj", i);
		T gp = linear(b, x2, PP(M, b, 0, gun, i), &s->gate);
		ds3_mark(b, "fwd_end", "model.layers.%d.mlp.gate_proj", i);
		/* gemma: ACT2FN gelu_pytorch_tanh, one op (GeluBackward0 keeps its input) */
		T sl = like(b, m->gemma ? "gelu (tanh)" : "silu", gp);
		op(b, m->gemma ? AG_OP_GELU_TANH : AG_OP_SILU, gp, NO, NO, sl, NO, NO);
		int km = s->km = RG(b, gp);
		if (!km) /* no SiluBackward keeps it: the temporary goes */
			unref(b, gp);
		ds3_mark(b, "fwd", "model.layers.%d.mlp.up_proj", i);
		T up = linear(b, x2, PP(M, b, 1, gun, i), &s->up);
		ds3_mark(b, "fwd_end", "model.layers.%d.mlp.up_proj", i);
		if (RG(b, up) != km)
			unsupported(b, "a layer whose MLP input requires no grad with one of gate_proj and up_proj "
			            "frozen");
		mu = like(b, "mul (silu(gate) * up)", sl);
		op(b, AG_OP_MUL, sl, up, NO, mu, NO, NO);
		s->gate_o = gp, s->silu_o = sl, s->up_o = up;
		if (!km) {
			unref(b, sl);
			unref(b, up);
			s->gate_o = s->silu_o = s->up_o = NO;
		}
	}
	if (mu != NO) {
		b->module = modname(b, "model.layers.%d.mlp.down_proj", i);
		ds3_mark(b, "fwd", "model.layers.%d.mlp.down_proj", i);
		mo = linear(b, mu, PF(M, b, "model.layers.%d.mlp.down_proj.weight", i), &s->down);
		ds3_mark(b, "fwd_end", "model.layers.%d.mlp.down_proj", i);
		unref(b, mu);
	}
	s->rmo = RG(b, mo);
	if (phi3 && !s->km) { /* forward returns: `gate` goes, no node keeps the fused product */
		unref(b, s->gate_o);
		s->gate_o = NO;
	}
	unref(b, x2);
	b->module = -1;
	if (m->gemma) { /* post_feedforward_layernorm before the residual add */
		b->module = modname(b, "model.layers.%d.post_feedforward_layernorm", i);
		T pn = rmsnorm(b, mo, PF(M, b, "model.layers.%d.post_feedforward_layernorm.weight", i), &s->n4);
		unref(b, mo);
		mo = pn;
		b->module = -1;
	}
	hs = phi3 ? phi3_resid_dropout_add(b, h2, mo, &s->drop_mlp) : residual_add(b, h2, mo, 0);
	if (s->moe.ex != NULL) /* the block's router_logits as the layer returns */
		moe_logits_out(b, M, i, s->moe.logits);
	/* the layer returns: its `attention_mask` (the sliding window's
	 * where) and sliding_window_mask go */
	unref(b, s->swmask);
	unref(b, s->swtril);
	(void)f;
	(void)rep;
	mark(b, "fwd:layers.%d:end", i);
	unref(b, hin);
	return hs;
}

/* Layer i's backward from xbuf (the gradient of its output, its holder
 * taken): the gradient of its input, NO where it requires none. */
static T llama_layer_bwd(struct bld *b, struct model *M, struct llama_layer_saved *s, const struct llama_args *a,
                         int i, T xbuf)
{
	const struct zs_model *m = b->m;
	uint64_t B = b->o->batch, Tn = b->o->seq, h = m->heads, hd = m->head_dim;
	uint64_t kv = m->kv_heads;
	int phi3 = a->phi3, g3 = a->g3, sdpa = a->sdpa;
	double scaling = a->scaling;
	/* AddBackward (h2 + mlp): to both (those that require grad;
	 * autocast: the MLP's a bf16 copy, validate_outputs) */
	T g = xbuf;
	T hbuf = s->rh2 ? g : NO;
	int mcast = b->o->amp != AG_F32 && s->rmo && s->moe.ex == NULL; /* a mixture's output is fp32 (moe_fwd) */
	if (mcast) {
		g = to_dtype(b, g, b->o->amp, "_to_copy (validate_outputs)");
		if (!s->rh2) /* the residual requires no grad (--freeze): the node's input goes */
			unref(b, xbuf);
	}
	nr_unpack_at(b); /* (the add's node ends: non-reentrant's rerun here) */
	/* the MLP */
	b->module = modname(b, "model.layers.%d.mlp.down_proj", i);
	T dmu = NO, dx2 = NO;
	if (s->rmo) {
		/* phi3's resid_mlp_dropout: its MulBackward0 first (fp32) */
		if (s->drop_mlp != NO)
			g = dropout_bwd(b, g, !s->rh2, s->drop_mlp);
		else if (s->rh2 && !mcast)
			ref(b, g);
		if (m->gemma) { /* post_feedforward_layernorm's backward first */
			b->module = modname(b, "model.layers.%d.post_feedforward_layernorm", i);
			T dmo = NO;
			rmsnorm_bwd(b, g, &s->n4, PF(M, b, "model.layers.%d.post_feedforward_layernorm.weight", i),
			            &dmo);
			b->module = modname(b, "model.layers.%d.mlp.down_proj", i);
			g = dmo;
		}
		if (s->moe.ex != NULL) {
			moe_bwd(b, M, g, i, &s->moe, &dx2);
			unref(b, g);
		} else {
			ds3_mark(b, "bwd", "model.layers.%d.mlp.down_proj", i);
			linear_bwd(b, g, 1, &s->down, PF(M, b, "model.layers.%d.mlp.down_proj.weight", i), &dmu);
			if (dmu != NO)
				ds3_mark(b, "bwd_end", "model.layers.%d.mlp.down_proj", i);
		}
	}
	if (phi3) {
		b->module = modname(b, "model.layers.%d.mlp.gate_up_proj", i);
		if (dmu != NO)
			phi3_mlp_bwd(b, M, i, dmu, &s->gate, s->gate_o, s->silu_o, s->up_o, &dx2);
	} else {
		b->module = modname(b, "model.layers.%d.mlp.{gate,up}_proj", i);
		if (dmu != NO)
			swiglu_bwd(b, M, i, dmu, s, &dx2);
	}
	b->module = modname(b, m->gemma ? "model.layers.%d.pre_feedforward_layernorm"
	                                : "model.layers.%d.post_attention_layernorm", i);
	if (dx2 != NO) {
		ds3_mark(b, "bwd", "model.layers.%d.post_attention_layernorm", i);
		T lb;
		rmsnorm_bwd(b, dx2, &s->n2, PF(M, b, m->gemma ? "model.layers.%d.pre_feedforward_layernorm.weight"
		                                                 : "model.layers.%d.post_attention_layernorm.weight", i),
		            ds3_buf(b, &hbuf, &lb));
		ds3_hand(b, &hbuf, &lb, "model.layers.%d.post_attention_layernorm", i);
	}
	if (hbuf == NO)
		return NO;
	/* AddBackward (residual + attn): to both; the attention first */
	g = hbuf;
	T rbuf = s->rin ? g : NO;
	if (b->o->amp != AG_F32 && s->rpo) { /* validate_outputs' bf16 copy for o_proj */
		g = to_dtype(b, g, b->o->amp, "_to_copy (validate_outputs)");
		if (!s->rin) /* as the MLP's above */
			unref(b, hbuf);
	}
	b->module = modname(b, "model.layers.%d.self_attn.o_proj", i);
	T dac = NO;
	if (s->rpo) {
		/* phi3's resid_attn_dropout: its MulBackward0 first (fp32) */
		if (s->drop_resid != NO)
			g = dropout_bwd(b, g, !s->rin, s->drop_resid);
		else if (s->rin && b->o->amp == AG_F32)
			ref(b, g);
		if (m->gemma) { /* post_attention_layernorm's backward first */
			b->module = modname(b, "model.layers.%d.post_attention_layernorm", i);
			T dpo = NO;
			rmsnorm_bwd(b, g, &s->n3, PF(M, b, "model.layers.%d.post_attention_layernorm.weight", i), &dpo);
			b->module = modname(b, "model.layers.%d.self_attn.o_proj", i);
			g = dpo;
		}
		ds3_mark(b, "bwd", "model.layers.%d.self_attn.o_proj", i);
		linear_bwd(b, g, 1, &s->o, PF(M, b, "model.layers.%d.self_attn.o_proj.weight", i), &dac);
		if (dac != NO)
			ds3_mark(b, "bwd_end", "model.layers.%d.self_attn.o_proj", i);
	}
	b->module = modname(b, "model.layers.%d.self_attn.{q,k,v}_proj", i);
	T dv = NO, kbuf = NO, qbuf = NO, pass[3] = { NO, NO, NO };
	if (dac == NO) {
		/* the attention requires no grad */
	} else if (sdpa && kv != h) {
		/* the math path's; then the ropes of k and q */
		T dk4, dq4;
		sdpa_math_bwd(b, s, dac, B, h, kv, Tn, hd, &dq4, &dk4, &dv);
		if (phi3) { /* the passes' narrow views hold the cats' grads, as in eager */
			ref(b, dk4);
			pass[1] = dk4;
			ref(b, dq4);
			pass[2] = dq4;
		}
		if (dk4 != NO) /* NO: k requires no grad */
			rope_bwd(b, dk4, &s->rk, &kbuf);
		rope_bwd(b, dq4, &s->rq, &qbuf);
	} else if (sdpa) {
		/* the kernel's backward; the ropes of k and q on its
		 * [B, T, h, hd]-laid grads (their slice_backward zeros make
		 * the sums contiguous [B, h, T, hd] again) */
		T gv[3];
		sdpa_bwd(b, &s->sd, dac, gv);
		dv = gv[2];
		/* autocast: the casts' ToCopyBackward, q's (made later: its
		 * sequence number higher) first, each an fp32 copy of the
		 * bf16 grad, which goes */
		if (s->sd.qcast)
			gv[0] = sdpa_grad_back(b, gv[0]);
		if (s->sd.kcast && s->kk)
			gv[1] = sdpa_grad_back(b, gv[1]);
		/* k requires no grad: the kernel's backward makes dk all the
		 * same (derivatives.yaml 2.6.0 lines 2880-2882: query, key,
		 * value all from one call of
		 * _scaled_dot_product_flash_attention_for_cpu_backward, no
		 * grad_input_mask), and autograd's engine lets it go with the
		 * node's outputs (no edge takes it), before the next node runs */
		if (s->kk)
			rope_bwd(b, gv[1], &s->rk, &kbuf);
		else
			unref(b, gv[1]);
		rope_bwd(b, gv[0], &s->rq, &qbuf);
	} else {
		T dvr;
		T dam = attn_v_bwd(b, dac, s->attw, s->sm, s->drop_attn, s->vr, B, h, Tn, hd, &dvr, s->vcast);
		/* AddBackward (+ mask) passes (autocast: cast to the bf16
		 * scores' dtype, validate_outputs); MulBackward (* scaling) */
		enum ag_dtype sdt = b->s->tensor[s->ktc].dtype;
		if (b->s->tensor[dam].dtype != sdt)
			dam = ac_grad_back_to(b, dam, sdt);
		if (m->gemma && m->attn_softcap > 0) /* the softcap's nodes (* cap, tanh, / cap) */
			dam = softcap_bwd(b, dam, m->attn_softcap, &s->cap);
		T cs_ = cast_scalar_as(b, s->sc_w, sdt);
		T dsc = TMP("mul (scaling backward)", sdt, B * h, Tn, Tn);
		op(b, AG_OP_MUL_SCALAR, dam, NO, NO, dsc, NO, NO)->arg[0] = scaling;
		unref(b, cs_);
		unref(b, dam);
		unref(b, s->sc_w);
		/* BmmBackward (q @ k^T) */
		T dq, dkt;
		qk_bwd(b, dsc, s->qe, s->ktc, B * h, Tn, hd, &dq, &dkt);
		/* autocast: the casts' ToCopyBackward, q's (the later) first */
		if (s->qf != NO) {
			if (dq != NO)
				dq = ac_grad_back(b, dq);
			if (dkt != NO)
				dkt = ac_grad_back(b, dkt);
		}
		/* v's repeat_kv, then k's, then the ropes of k and q */
		dv = repeat_kv_bwd(b, dvr, B, kv, Tn, hd, 0);
		if (dkt != NO) {
			T dkr = repeat_kv_bwd(b, dkt, B, kv, Tn, hd, 1);
			if (phi3) { /* k_pass's narrow view of the cat's grad holds it */
				ref(b, dkr);
				pass[1] = dkr;
			}
			rope_bwd(b, dkr, &s->rk, &kbuf);
		}
		T dq4 = reshape(b, dq, 4, SH(B, h, Tn, hd));
		unref(b, dq);
		if (phi3) {
			ref(b, dq4);
			pass[2] = dq4;
		}
		rope_bwd(b, dq4, &s->rq, &qbuf);
	}
	if (phi3) {
		T bufs[3] = { dv, kbuf, qbuf }, xb = NO;
		if (dac != NO)
			phi3_states_bwd(b, M, i, bufs, pass, &s->q, &xb);
		b->module = modname(b, "model.layers.%d.input_layernorm", i);
		if (xb != NO)
			rmsnorm_bwd(b, xb, &s->n1, PF(M, b, "model.layers.%d.input_layernorm.weight", i), &rbuf);
		return rbuf;
	}
	/* each projection's view(B, T, n, hd).transpose(1, 2): the grad
	 * reshaped back to [B, T, n·hd], a copy; sdpa's dv lies as
	 * [B, T, n, hd] already: a view */
	T xbuf1 = NO;
	T proj[3] = { dv, kbuf, qbuf };
	struct lin_saved *ls[3] = { &s->v, &s->k, &s->q };
	int part[3] = { 2, 1, 0 };
	struct rms_saved *hn[3] = { NULL, &s->kn, &s->qn };
	/* Gemma3Attention's k_norm and q_norm, made after the three
	 * projections: their backward before any projection's */
	for (int j = 1; j < 3 && g3 && dac != NO; j++)
		if (proj[j] != NO)
			proj[j] = gemma3_head_norm_bwd(b, M, i, part[j], proj[j], hn[j]);
	for (int j = 0; j < 3 && dac != NO; j++) {
		uint64_t n = j == 2 ? h : kv;
		if (sdpa && kv == h && j == 0) {
			T c = reshape(b, dv, 3, SH(B, Tn, n * hd));
			unref(b, dv);
			ds3_mark(b, "bwd", "model.layers.%d.self_attn.v_proj", i);
			T lb;
			linear_bwd(b, c, 1, ls[j], PP(M, b, part[j], "model.layers.%d.self_attn.{q,k,v}_proj.weight", i),
			           ds3_buf(b, &xbuf1, &lb));
			ds3_hand(b, &xbuf1, &lb, "model.layers.%d.self_attn.v_proj", i);
			continue;
		}
		if (proj[j] != NO) /* k's: NO where k requires no grad */
			head_states_bwd(b, M, proj[j], i, part[j], n, ls[j], g3 ? NULL : hn[j], &xbuf1);
	}
	b->module = modname(b, "model.layers.%d.input_layernorm", i);
	if (xbuf1 != NO) {
		ds3_mark(b, "bwd", "model.layers.%d.input_layernorm", i);
		T lb;
		rmsnorm_bwd(b, xbuf1, &s->n1, PF(M, b, "model.layers.%d.input_layernorm.weight", i),
		            ds3_buf(b, &rbuf, &lb));
		ds3_hand(b, &rbuf, &lb, "model.layers.%d.input_layernorm", i);
	}
	return rbuf;
}

/* llama_step's layers for layer_fwd and layer_bwd */
struct llama_layers {
	struct llama_layer_saved *S;
	const struct llama_args *a;
};

static T llama_layers_fwd(struct bld *b, struct model *M, int i, T hs, void *ctx)
{
	const struct llama_layers *x = ctx;
	return llama_layer_fwd(b, M, &x->S[i], x->a, i, hs);
}

static T llama_layers_bwd(struct bld *b, struct model *M, int i, T g, void *ctx)
{
	const struct llama_layers *x = ctx;
	return llama_layer_bwd(b, M, &x->S[i], x->a, i, g);
}

/* What checkpointed layer i's call gives its ctx (struct ckpt_ctx).
 * gemma2 as modeling_gemma2.py at 9a80143ca260 calls it (Gemma2Model.forward:
 * self._gradient_checkpointing_func(decoder_layer.__call__, hidden_states,
 * position_embeddings, causal_mask, position_ids, past_key_values,
 * output_attentions, use_cache, cache_position, last_cache_position), all
 * positional): save_for_backward keeps the mask, position_ids and
 * cache_position (a view of cache_position's storage, then itself),
 * ctx.inputs the (cos, sin) tuple. gemma3_text as its Gemma3DecoderLayer, a
 * GradientCheckpointingLayer (modeling_gemma3.py at 0018aa64,
 * modeling_layers.py: partial(super().__call__, **kwargs) over the hidden
 * states alone), is called: the partial binds Gemma3TextModel.forward's
 * keywords in order -- its type's mask, its (cos, sin), position_ids,
 * past_key_values, output_attentions, use_cache, cache_position. llama (and
 * mistral, taken as llama) as 4.48's LlamaModel.forward calls it
 * (modeling_llama.py at 5dd4a63548857797: decoder_layer.__call__,
 * hidden_states, causal_mask, position_ids, past_key_values,
 * output_attentions, use_cache, cache_position, position_embeddings, all
 * positional): gemma2's ctx. qwen2, qwen3 and phi3 as their 5.x loops call
 * a GradientCheckpointingLayer (modeling_qwen2.py at 63bb72374703,
 * Qwen2Model.forward: attention_mask, position_ids, past_key_values,
 * use_cache, cache_position, position_embeddings, keywords the partial
 * binds), and so every family under FSDP (AG_CKPT_IN_UNIT: the checkpoint
 * inside the unit's __call__): the mask, position_ids, cache_position,
 * (cos, sin) until the graph goes. tests/hf_torch.py's call_layer makes
 * the same calls. */
static void llama_hold(const struct bld *b, int i, struct ckpt_ctx *c, const void *ctx)
{
	const struct llama_args *a = ((const struct llama_layers *)ctx)->a;
	int positional = b->o->recompute == AG_CKPT_LOOP &&
	                 (strcmp(b->m->model_type, "llama") == 0 || strcmp(b->m->model_type, "mistral") == 0);
	if (a->g3) {
		int k = gemma_sliding(b->m, (uint64_t)i);
		/* fn goes last first: the mask, sin, cos, position_ids, cache_position */
		*c = (struct ckpt_ctx){ .rng = c->rng, .draws0 = c->draws0, .nfn = 5,
		                        .fn = { a->cp, a->cp, a->g3cos[k], a->g3sin[k], a->g3mask[k] } };
	} else if (b->m->gemma || positional) {
		*c = (struct ckpt_ctx){ .rng = c->rng, .draws0 = c->draws0, .nsv = 3, .nin = 2,
		                        .sv = { a->cm, a->cp, a->cp }, .in = { a->cos4, a->sin4 } };
	} else {
		/* fn goes last first: the mask, position_ids, cache_position, sin, cos */
		*c = (struct ckpt_ctx){ .rng = c->rng, .draws0 = c->draws0, .nfn = 5,
		                        .fn = { a->cos4, a->sin4, a->cp, a->cp, a->cm } };
	}
}

static void llama_step(struct bld *b, struct model *M)
{
	const struct zs_model *m = b->m;
	uint64_t B = b->o->batch, Tn = b->o->seq, d = m->hidden, hd = m->head_dim;
	uint64_t L = m->layers;
	int phi3 = m->hf_fused; /* Hugging Face's fused qkv_proj and gate_up_proj (modeling_phi3.py) */
	int g3 = gemma3(m);
	struct llama_layer_saved *S = zs_calloc(L, sizeof *S);
	struct pt *emb = PF(M, b, "model.embed_tokens.weight"), *nw = PF(M, b, "model.norm.weight");
	struct pt *head = m->tied ? emb : PF(M, b, "lm_head.weight");
	M->fcap = (struct softcap_saved){ NO, NO, NO };

	b->phase = ZS_PH_FORWARD;
	mark(b, "phase:forward");
	b->module = modname(b, "model.embed_tokens");
	mark(b, "fwd:embed_tokens:start");
	ds3_mark(b, "fwd", "model.embed_tokens");
	T ie = TMP("embedding (embed_tokens)", b->o->mdt, B, Tn, d);
	op(b, AG_OP_EMBEDDING, emb->w, M->ids, NO, ie, NO, NO);
	ds3_mark(b, "fwd_end", "model.embed_tokens");
	input_require_grads(b, M, emb, ie);
	if (g3) { /* Gemma3TextScaledWordEmbedding: the lookup * embed_scale (a buffer MulBackward0 keeps) */
		T sc = like(b, "mul (embedding * embed_scale)", ie);
		op(b, AG_OP_MUL, ie, M->escale, NO, sc, NO, NO);
		unref(b, ie);
		ie = sc;
	}
	mark(b, "fwd:embed_tokens:end");
	b->module = -1;
	/* cache_position = arange(T); position_ids its unsqueeze */
	T cp = TMP("arange (cache_position)", AG_I64, Tn);
	op(b, AG_OP_ARANGE, NO, NO, NO, cp, NO, NO);
	/* _update_causal_mask (eager): full(min), triu(1), *= arange > cp;
	 * under sdpa no mask (masking_utils' sdpa_mask skips it for is_causal
	 * without padding: tests/hf_torch.py makes none) */
	int sdpa = b->o->attn == ZS_ATTN_SDPA;
	T cm = NO;
	if (!sdpa && !g3) {
		/* torch.finfo(inputs_embeds.dtype).min: fp32's, or bf16's after
		 * module.bfloat16() */
		enum ag_dtype mt = b->o->mdt;
		double mn = mt == AG_BF16 ? -3.3895313892515355e38 : -3.4028234663852886e38;
		T full = TMP("full (causal mask)", mt, Tn, Tn);
		op(b, AG_OP_FILL, NO, NO, NO, full, NO, NO)->arg[0] = mn;
		cm = TMP("triu (causal mask)", mt, Tn, Tn);
		op(b, AG_OP_CAUSAL_ADD_MASK, NO, NO, NO, cm, NO, NO)->arg[0] = mn;
		unref(b, full);
		T ar = TMP("arange (mask)", AG_I64, Tn);
		op(b, AG_OP_ARANGE, NO, NO, NO, ar, NO, NO);
		T gt = TMP("gt (mask)", AG_BOOL, Tn, Tn);
		op(b, AG_OP_TRIL_MASK, NO, NO, NO, gt, NO, NO);
		unref(b, ar);
		/* mul_ by a bool: TensorIterator's float copy of it for a moment */
		T gf = TMP("mul_ (the bool as float)", mt, Tn, Tn);
		op(b, AG_OP_COPY, gt, NO, NO, gf, NO, NO);
		unref(b, gf);
		unref(b, gt);
	}
	/* Gemma3TextModel.forward: the full and the sliding masks
	 * (masking_utils), then rotary_emb once per entry of layer_types, each
	 * call's (cos, sin) replacing its type's (the old pair goes as the
	 * dict's entry is rebound) */
	T g3mask[2] = { NO, NO }, g3cos[2] = { NO, NO }, g3sin[2] = { NO, NO };
	T cos4 = NO, sin4 = NO;
	if (g3) {
		if (sdpa) { /* sdpa_mask skips both (no padding, T under the window): the packed checks alone */
			gemma3_packed_check(b, cp);
			gemma3_packed_check(b, cp);
		} else {
			g3mask[0] = gemma3_mask(b, cp, 0);
			g3mask[1] = gemma3_mask(b, cp, m->sliding_window);
		}
		for (uint64_t l = 0; l < L; l++) {
			int k = gemma_sliding(m, l);
			T c4, s4;
			rotary(b, k ? M->inv_freq_local : M->inv_freq, cp, 1, &c4, &s4);
			unref(b, g3cos[k]);
			unref(b, g3sin[k]);
			g3cos[k] = c4, g3sin[k] = s4;
		}
	} else { /* rotary_emb (under no_grad): cos, sin [1, T, hd] */
		rotary(b, M->inv_freq, cp, 0, &cos4, &sin4);
	}
	T hs = ie, nrm = NO;
	if (m->gemma && !g3) {
		/* Gemma2Model.forward: normalizer = torch.tensor(hidden_size**0.5,
		 * dtype), a 4-byte tensor; hidden_states * normalizer, whose
		 * MulBackward0 keeps it (inputs_embeds only for its gradient) */
		nrm = tmp(b, "tensor (normalizer)", AG_F32, 0, NULL);
		op(b, AG_OP_FILL, NO, NO, NO, nrm, NO, NO)->arg[0] = sqrt((double)d);
		hs = like(b, "mul (embeddings * normalizer)", ie);
		op(b, AG_OP_MUL, ie, nrm, NO, hs, NO, NO);
		if (RG(b, ie))
			ref(b, nrm);
	} else {
		ref(b, hs); /* `inputs_embeds` and `hidden_states` both name it */
	}
	double scaling = attn_scale(m, hd);
	struct llama_args la = { .cm = cm, .cos4 = cos4, .sin4 = sin4, .cp = cp, .phi3 = phi3, .g3 = g3,
	                         .sdpa = sdpa, .scaling = scaling };
	for (int k = 0; k < 2; k++)
		la.g3mask[k] = g3mask[k], la.g3cos[k] = g3cos[k], la.g3sin[k] = g3sin[k];
	struct llama_layers lx = { S, &la };
	const struct layer_fns lf = { llama_layers_fwd, llama_layers_bwd, &lx, llama_hold };
	T *saved = b->o->recompute ? zs_calloc(L, sizeof *saved) : NULL;
	for (uint64_t l = 0; l < L; l++)
		hs = layer_fwd(b, M, &lf, saved, (int)l, hs);
	b->module = modname(b, "model.norm");
	mark(b, "fwd:norm:start");
	struct rms_saved ns;
	ds3_mark(b, "fwd", "model.norm");
	T xn = rmsnorm(b, hs, nw, &ns);
	ds3_mark(b, "fwd_end", "model.norm");
	mark(b, "fwd:norm:end");
	unref(b, hs); /* the caller rebinds `hidden_states` after the module's hooks */
	T xn2, lg, lsm, tgt, tw;
	/* the forward's `hidden_states` (the final norm's output) is one of
	 * its locals (tests/hf_torch.py: model, head and loss one forward):
	 * outside gemma's it goes after cache_position and the mask (seen
	 * under autocast, where no fp32 view of it is kept: the tiny mixtral
	 * of tests/moe_hf_torch.sh) */
	ref(b, xn);
	T loss = head_fwd(b, M, xn, head, &xn2, &lg, &lsm, &tgt, &tw);
	if (m->gemma)
		unref(b, xn);
	if (M->aux != NULL) /* a mixture's auxiliary loss, added to the loss */
		moe_aux_fwd(b, M, loss);
	ac_clear(b, M); /* the autocast region exits (nothing of Llama's is only the cache's) */
	/* the model's forward returns: cache_position, the mask, inputs_embeds
	 * (kept by the first norm) and the position embeddings (by the ropes) */
	if (g3) { /* Gemma3TextModel.forward's locals: the masks, each type's position embeddings */
		unref(b, ie);
		unref(b, cp);
		for (int k = 0; k < 2; k++) {
			unref(b, g3mask[k]);
			unref(b, g3cos[k]);
			unref(b, g3sin[k]);
		}
		cos4 = sin4 = NO;
	} else if (m->gemma) { /* Gemma2Model.forward's locals: inputs_embeds (no node keeps it) first */
		unref(b, ie);
		unref(b, cp);
		unref(b, cm);
		unref(b, nrm);
	} else {
		unref(b, cp);
		unref(b, cm);
		unref(b, xn);
		unref(b, ie);
	}
	unref(b, cos4);
	unref(b, sin4);
	drop_outputs(b, &lg);
	scale_loss(b, M, loss);

	T one, held;
	/* backward from the requires_grad flags, as gpt2_step's */
	T dxn = head_bwd(b, M, lsm, tgt, tw, xn2, head, &one, &held, RG(b, xn));
	b->module = modname(b, "model.norm");
	T xbuf = NO;
	if (dxn != NO) {
		mark(b, "bwd:norm:start");
		mark(b, "bwd:lm_head:end");
		T dxn3 = reshape(b, dxn, 3, SH(B, Tn, d));
		unref(b, dxn);
		ds3_mark(b, "bwd_end", "lm_head");
		ds3_mark(b, "bwd", "model.norm");
		T lb;
		rmsnorm_bwd(b, dxn3, &ns, nw, ds3_buf(b, &xbuf, &lb));
		ds3_hand(b, &xbuf, &lb, "model.norm");
	}
	for (int i = (int)L - 1; i >= 0 && xbuf != NO; i--)
		xbuf = layer_bwd(b, M, &lf, saved, i, (int)L, "layers", "norm", xbuf);
	free(saved);
	if (xbuf != NO && g3) {
		/* inputs_embeds is embed_tokens' output: its hooks, then
		 * Gemma3TextScaledWordEmbedding's MulBackward0 (g · embed_scale) */
		mark(b, "bwd:embed_tokens:start");
		mark(b, "bwd:rotary_emb:end");
		mark(b, "bwd:layers.0:end");
		b->module = modname(b, "model.embed_tokens");
		T ge = like(b, "mul (embed_scale backward)", xbuf);
		op(b, AG_OP_MUL, xbuf, M->escale, NO, ge, NO, NO);
		unref(b, xbuf);
		embedding_bwd(b, M, ge, emb, held);
	} else if (xbuf != NO && m->gemma) {
		/* layer 0's input is inputs_embeds * normalizer: its MulBackward0
		 * (g · normalizer; the node's input and the kept normalizer go)
		 * before inputs_embeds' own hooks */
		mark(b, "bwd:layers.0:end");
		T ge = like(b, "mul (normalizer backward)", xbuf);
		op(b, AG_OP_MUL, xbuf, nrm, NO, ge, NO, NO);
		unref(b, xbuf);
		unref(b, nrm);
		mark(b, "bwd:embed_tokens:start");
		mark(b, "bwd:rotary_emb:end");
		b->module = modname(b, "model.embed_tokens");
		embedding_bwd(b, M, ge, emb, held);
	} else if (xbuf != NO) { /* inputs_embeds requires grad: the token table does */
		mark(b, "bwd:embed_tokens:start");
		mark(b, "bwd:rotary_emb:end");
		mark(b, "bwd:layers.0:end");
		b->module = modname(b, "model.embed_tokens");
		if (M->leaf != NO)
			leaf_grad(M, xbuf);
		else {
			ds3_mark(b, "bwd", "model.embed_tokens");
			embedding_bwd(b, M, xbuf, emb, held);
		}
	}
	unref(b, one);
	grad_scaler_backward_end(b, M);
	/* a sparse block whose backward never ran (nothing in it needs a
	 * gradient) still holds its expert table */
	for (uint64_t l = 0; l < L; l++)
		free(S[l].moe.ex);
	free(S);
	M->loss = loss;
	M->logits = lg;
}

/* ------------------------------------------------------------------------ */
/* The optimizer and zero_grad */

/* torch.autograd.profiler.record_function around Optimizer.step and
 * zero_grad, 1.13: a zeros(1) handle and the 288-byte one
 * _record_function_enter returns, both gone before the body runs (2.x's
 * _record_function_enter_new returns a ScriptObject: no tensor). CPU
 * allocations: on CUDA they are not the device's. */
static void record_function(struct bld *b)
{
	if (b->o->device != ZS_DEVICE_CPU || b->o->version != ZS_TORCH_1_13)
		return;
	T h = tmp(b, AG_RF_HANDLE, AG_F32, 1, SH(1));
	op(b, AG_OP_FILL, NO, NO, NO, h, NO, NO)->arg[0] = 0;
	T r = tmp(b, AG_RF_ENTER, AG_BOOL, 1, SH(288));
	op(b, AG_OP_FILL, NO, NO, NO, r, NO, NO)->arg[0] = 0;
	unref(b, r);
	unref(b, h);
}

/* ZeroRedundancyOptimizer over o->zero1_world ranks (util/ag_zero1.h):
 * the partition of M's trainable parameters, each rank's in its order
 * (sel, with rank r's from start[r] to start[r + 1]). A frozen one
 * (--freeze, LoRA's base) is not given to it: the training script passes
 * the requires_grad ones, as Trainer.create_optimizer filters them, so it
 * takes no share of a rank's load and is never broadcast. */
static void zero1_partition(const struct bld *b, const struct model *M, struct pt **sel, size_t *start)
{
	unsigned N = b->o->zero1_world;
	uint64_t *numel = zs_calloc(M->npt ? M->npt : 1, sizeof *numel);
	unsigned *rank_of = zs_calloc(M->npt ? M->npt : 1, sizeof *rank_of);
	size_t *order = zs_calloc(M->npt ? M->npt : 1, sizeof *order);
	struct pt **given = zs_calloc(M->npt ? M->npt : 1, sizeof(struct pt *));
	size_t n = 0;
	for (size_t i = 0; i < M->npt; i++)
		if (!M->pt[i].frozen) {
			given[n] = &M->pt[i];
			numel[n++] = b->s->tensor[M->pt[i].w].bytes / 4; /* fp32 parameters */
		}
	ag_zero1_partition(numel, n, N, rank_of, order);
	size_t k = 0;
	for (unsigned r = 0; r < N; r++) {
		start[r] = k;
		for (size_t i = 0; i < n; i++)
			if (rank_of[order[i]] == r)
				sel[k++] = given[order[i]];
	}
	start[N] = k;
	free(given);
	free(numel);
	free(rank_of);
	free(order);
}

/* The module a parameter's optimizer events run in: its step_params
 * module, or none for a wrapper's own parameter (FSDP's flat ones). */
static int32_t pt_module(const struct bld *b, const struct pt *q)
{
	return q->param >= 0 && b->p != NULL ? (int32_t)b->p->tensor[q->param].module : -1;
}

/* Adam's state for the parameters qs[0..n), made by its first step
 * (first_step's list). */
static void adam_state(struct bld *b, struct pt *const *qs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct pt *q = qs[i];
		if (q->frozen) /* not in the optimizer (Trainer.create_optimizer's requires_grad filter) */
			continue;
		b->module = pt_module(b, q);
		if (b->own_state) { /* a wrapper's storages (ag_optimizer_events): made here, in that order */
			const T st[3] = { q->step, q->m, q->v };
			for (int k = 0; k < 3; k++) {
				ev(b, AG_EV_ALLOC)->t = st[k];
				op(b, AG_OP_FILL, NO, NO, NO, st[k], NO, NO)->arg[0] = 0;
			}
			continue;
		}
		q->step = mk(b, "Adam step", AG_F32, 0, NULL, AG_ROLE_ADAM_STEP, ZS_CAT_ADAM_M, q->param);
		/* The CUDA rule for Adam's step counter: a CPU tensor unless
		 * capturable or fused (adam.py's _init_group, 2.6.0: `torch.zeros((),
		 * ..., device=p.device) if group["capturable"] or group["fused"]
		 * else torch.tensor(0.0, ...)`; 1.13.0 alike, `torch.zeros((1,), ...,
		 * device=p.device) if capturable or fused else torch.tensor(0.)`):
		 * on a GPU 0 device bytes but for fused Adam's */
		if (b->o->device == ZS_DEVICE_CUDA && b->o->optim_impl != ZS_OPTIM_FUSED)
			b->s->tensor[q->step].host = 1;
		op(b, AG_OP_FILL, NO, NO, NO, q->step, NO, NO)->arg[0] = 0;
		const struct ag_tensor w_ = b->s->tensor[q->w], *w = &w_; /* a copy: the array grows */
		/* zeros_like(p): the parameter's dtype, bf16 for TRL's adapters
		 * (--lora-dtype bf16, where they are all Adam steps; fp32 else) */
		enum ag_dtype sdt = b->o->lora_bf16 ? w->dtype : AG_F32;
		q->m = mk(b, "Adam exp_avg", sdt, w->ndim, w->shape, AG_ROLE_ADAM_M, ZS_CAT_ADAM_M, q->param);
		op(b, AG_OP_FILL, NO, NO, NO, q->m, NO, NO)->arg[0] = 0;
		q->v = mk(b, "Adam exp_avg_sq", sdt, w->ndim, w->shape, AG_ROLE_ADAM_V, ZS_CAT_ADAM_V, q->param);
		op(b, AG_OP_FILL, NO, NO, NO, q->v, NO, NO)->arg[0] = 0;
		b->s->tensor[q->step].part = b->s->tensor[q->m].part = b->s->tensor[q->v].part = q->part;
	}
	b->module = -1;
}

/* torch.optim.Adam's single-tensor step (1.13 adam.py _single_tensor_adam
 * 319-410; 2.6 340-476): per parameter, in its param_groups' order. */
static void adam_single(struct bld *b, struct pt *const *qs, size_t n)
{
	const struct ag_options *o = b->o;
	T prev = NO;
	for (size_t i = 0; i < n; i++) {
		struct pt *q = qs[i];
		if (q->g == NO)
			continue;
		b->module = pt_module(b, q);
		scalar_op_(b, AG_OP_ADD_SCALAR_, q->step, NO, 1);     /* step_t += 1 */
		if (o->version == ZS_TORCH_1_13) {
			scalar_op_(b, AG_OP_MUL_SCALAR_, q->m, NO, o->beta1); /* exp_avg.mul_(beta1) */
			op(b, AG_OP_ADD_, q->m, q->g, NO, q->m, NO, NO)->arg[0] = 1 - o->beta1;
		} else {
			/* exp_avg.lerp_(grad, 1 - beta1): lerp_.Scalar, no wrapped number */
			op(b, AG_OP_LERP_, q->m, q->g, NO, q->m, NO, NO)->arg[0] = 1 - o->beta1;
		}
		scalar_op_(b, AG_OP_MUL_SCALAR_, q->v, NO, o->beta2);
		struct ag_event *e = op(b, AG_OP_ADDCMUL_, q->v, q->g, q->g, q->v, NO, NO);
		e->arg[0] = 1 - o->beta2;
		/* denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps) */
		T sq = like(b, "sqrt (Adam)", q->v);
		op(b, AG_OP_SQRT, q->v, NO, NO, sq, NO, NO);
		T dn = scalar_op(b, AG_OP_MUL_SCALAR, "div (Adam's denom)", sq, 1.0, NULL);
		unref(b, sq);
		scalar_op_(b, AG_OP_ADD_SCALAR_, dn, NO, o->eps);
		unref(b, prev); /* the loop's name `denom` now holds the new one */
		prev = dn;
		e = op(b, AG_OP_ADDCDIV_, q->w, q->m, dn, q->w, NO, NO);
		e->arg[0] = -o->lr;
	}
	unref(b, prev);
	b->module = -1;
}

/* torch.optim.Adam's foreach step, 1.13 (_multi_tensor_adam, adam.py
 * 415-521): each list op runs per tensor on the CPU's slow path (a
 * wrapped number each where it takes a scalar); exp_avg_sq_sqrt and
 * denom are two lists of temporaries the size of every parameter, alive
 * together until the function returns (freed list by list, each from its
 * last tensor: CPython's list dealloc). 2.6 (line 485): lerp_, the steps
 * by a 0-dim tensor, eps added in place: one list. */
static void adam_foreach(struct bld *b, struct pt *const *qs, size_t nqs)
{
	const struct ag_options *o = b->o;
	size_t n = 0;
	struct pt **q = zs_calloc(nqs ? nqs : 1, sizeof(struct pt *));
	for (size_t i = 0; i < nqs; i++)
		if (qs[i]->g != NO)
			q[n++] = qs[i];
	T *sq = zs_calloc(n ? n : 1, sizeof *sq), *dn = zs_calloc(n ? n : 1, sizeof *dn);
	if (o->version == ZS_TORCH_1_13) {
		for (size_t i = 0; i < n; i++) /* _foreach_add_(state_steps, 1) */
			scalar_op_(b, AG_OP_ADD_SCALAR_, q[i]->step, NO, 1);
	} else {
		/* 2.6 (adam.py 602-607), CPU step tensors: _foreach_add_(steps,
		 * torch.tensor(1.0, device="cpu"), alpha=1.0) */
		T one = host_scalar(b, tmp(b, "tensor (1.0, the steps' increment)", AG_F32, 0, NULL));
		op(b, AG_OP_FILL, NO, NO, NO, one, NO, NO)->arg[0] = 1;
		for (size_t i = 0; i < n; i++)
			op(b, AG_OP_ADD_SCALAR_, q[i]->step, NO, NO, q[i]->step, NO, NO)->arg[0] = 1;
		unref(b, one);
	}
	if (o->version == ZS_TORCH_1_13) {
		for (size_t i = 0; i < n; i++) /* _foreach_mul_(exp_avgs, beta1) */
			scalar_op_(b, AG_OP_MUL_SCALAR_, q[i]->m, NO, o->beta1);
		for (size_t i = 0; i < n; i++) /* _foreach_add_(exp_avgs, grads, alpha=1 - beta1) */
			op(b, AG_OP_ADD_, q[i]->m, q[i]->g, NO, q[i]->m, NO, NO)->arg[0] = 1 - o->beta1;
	} else {
		for (size_t i = 0; i < n; i++) /* _foreach_lerp_(exp_avgs, grads, 1 - beta1) */
			op(b, AG_OP_LERP_, q[i]->m, q[i]->g, NO, q[i]->m, NO, NO)->arg[0] = 1 - o->beta1;
	}
	for (size_t i = 0; i < n; i++) /* _foreach_mul_(exp_avg_sqs, beta2) */
		scalar_op_(b, AG_OP_MUL_SCALAR_, q[i]->v, NO, o->beta2);
	for (size_t i = 0; i < n; i++)
		op(b, AG_OP_ADDCMUL_, q[i]->v, q[i]->g, q[i]->g, q[i]->v, NO, NO)->arg[0] = 1 - o->beta2;
	for (size_t i = 0; i < n; i++) { /* _foreach_sqrt(exp_avg_sqs) */
		b->module = pt_module(b, q[i]);
		sq[i] = like(b, "_foreach_sqrt (Adam)", q[i]->v);
		op(b, AG_OP_SQRT, q[i]->v, NO, NO, sq[i], NO, NO);
	}
	for (size_t i = 0; i < n; i++) /* _foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt) */
		scalar_op_(b, AG_OP_MUL_SCALAR_, sq[i], NO, 1.0);
	for (size_t i = 0; i < n; i++) {
		b->module = pt_module(b, q[i]);
		if (o->version == ZS_TORCH_1_13) /* denom = _foreach_add(exp_avg_sq_sqrt, eps) */
			dn[i] = scalar_op(b, AG_OP_ADD_SCALAR, "_foreach_add (Adam's denom)", sq[i], o->eps, NULL);
		else { /* 2.6 (adam.py 678): _foreach_add_(exp_avg_sq_sqrt, eps), in place */
			scalar_op_(b, AG_OP_ADD_SCALAR_, sq[i], NO, o->eps);
			dn[i] = NO;
		}
	}
	for (size_t i = 0; i < n; i++)
		op(b, AG_OP_ADDCDIV_, q[i]->w, q[i]->m, dn[i] != NO ? dn[i] : sq[i], q[i]->w, NO, NO)->arg[0] = -o->lr;
	for (size_t i = n; i-- > 0;)
		unref(b, sq[i]);
	for (size_t i = n; i-- > 0;)
		unref(b, dn[i]);
	b->module = -1;
	free(sq);
	free(dn);
	free(q);
}

/* torch.optim.Adam(fused=True), 2.x (adam.py _fused_adam, 2.6.0 712; 785-786): the
 * step counters by _foreach_add_(device_state_steps, 1) — on the CPU the
 * foreach slow path, each tensor's add_ of a Python number (a wrapped
 * number and its fp32 copy) —, then one _fused_adam_ over the lists, which
 * makes no temporary (aten/src/ATen/native/FusedAdam.cpp and its CPU
 * kernel; CUDA's multi-tensor-apply kernel neither). The executor runs
 * _fused_adam_ tensor by tensor: the same values, the same bytes. */
static void adam_fused(struct bld *b, struct pt *const *qs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct pt *q = qs[i];
		if (q->g == NO)
			continue;
		b->module = pt_module(b, q);
		scalar_op_(b, AG_OP_ADD_SCALAR_, q->step, NO, 1);
	}
	for (size_t i = 0; i < n; i++) {
		struct pt *q = qs[i];
		if (q->g == NO)
			continue;
		b->module = pt_module(b, q);
		struct ag_event *e = ev(b, AG_EV_OP);
		e->op = AG_OP_ADAM_FUSED_;
		e->in[0] = q->w, e->in[1] = q->g, e->in[2] = q->m, e->in[3] = q->v;
		e->out[0] = q->w;
	}
	b->module = -1;
}

static void zero_grad(struct bld *b, struct model *M)
{
	record_function(b);
	for (size_t i = 0; i < M->npt; i++) {
		struct pt *q = &M->pt[i];
		if (q->g == NO)
			continue;
		if (b->o->zero_grad == ZS_ZERO_GRAD_ZEROS) {
			op(b, AG_OP_ZERO_, q->g, NO, NO, q->g, NO, NO);
		} else {
			unref(b, q->g);
			q->g = NO;
		}
	}
}

/* The one description of Adam over some parameters: the plain loop's
 * (every one, model order), ZeroRedundancyOptimizer's (each rank's own,
 * its partition order) and a wrapper's own (FSDP's flat shards,
 * ag_optimizer_events). The parameters are lists, qs[start[k] ..
 * start[k + 1]) for k < nlists, each an optimizer's param_groups in its
 * order; with per_rank list k is rank k's local optimizer, its events
 * rank k's alone (ag_event.only_rank).
 *
 * The optimizer's phase: its mark, 1.13's record_function (with per_rank
 * ZeroRedundancyOptimizer.step's, then the local Adam's step's: two),
 * Adam over each list as --optimizer-impl says. */
static void optimizer_phase(struct bld *b, struct pt *const *qs, const size_t *start, unsigned nlists,
                            int per_rank)
{
	mark(b, "phase:optimizer");
	record_function(b);
	if (per_rank)
		record_function(b);
	grad_scaler_unscale(b, qs, start[nlists]);
	for (unsigned k = 0; k < nlists; k++) {
		b->only_rank = per_rank ? k + 1 : 0;
		struct pt *const *q = qs + start[k];
		size_t n = start[k + 1] - start[k];
		/* the first step(): each parameter's state made as Adam meets it
		 * (Debian 12's 1.13 adam.py 202-222, step()'s loop over the
		 * group's parameters with a grad, before the functional adam()
		 * at 234; Debian 13's 2.6 _init_group, 135-181, called at 234:
		 * step, exp_avg, exp_avg_sq), then the update over all of them */
		if (b->make_state) {
			adam_state(b, q, n);
			b->only_rank = per_rank ? k + 1 : 0;
		}
		if (b->o->optim_impl == ZS_OPTIM_FOREACH)
			adam_foreach(b, q, n);
		else if (b->o->optim_impl == ZS_OPTIM_FUSED)
			adam_fused(b, q, n);
		else
			adam_single(b, q, n);
	}
	b->only_rank = 0;
	grad_scaler_update(b);
}

static void optimizer_events(struct ag_step *s, const struct ag_options *o, const struct ag_param_state *ps,
                             size_t n, struct ag_event **list, size_t *nlist, size_t *cap, int make)
{
	struct bld B_ = { .s = s, .o = o, .module = -1, .phase = ZS_PH_OPTIMIZER, .tcap = s->ntensors, .cap = *cap,
	                  .micro = -1 };
	struct bld *b = &B_;
	b->refs = zs_calloc(s->ntensors ? s->ntensors : 1, sizeof *b->refs);
	b->rg = zs_calloc(s->ntensors ? s->ntensors : 1, sizeof *b->rg); /* under no_grad: none requires grad */
	for (size_t t = 0; t < s->ntensors; t++)
		b->refs[t] = s->tensor[t].storage == t; /* the caller's: never released here */
	use(b, list, nlist);
	b->make_state = b->own_state = make;
	/* --precision amp-fp16: the scaler's state, made by the step's first
	 * scale() (grad_scaler_scale), found by its role, so that a
	 * wrapper's own optimizer (FSDP's shards: ShardedGradScaler)
	 * unscales and updates around its Adam as the plain loop's */
	struct model Ms = {0};
	Ms.gs_scale = Ms.gs_growth = Ms.gs_scaled = Ms.gs_found = NO;
	for (size_t t = 0; t < s->ntensors && o->amp == AG_F16; t++)
		if (s->tensor[t].storage == t && s->tensor[t].role == AG_ROLE_SCALER)
			*(Ms.gs_scale == NO ? &Ms.gs_scale : &Ms.gs_growth) = (T)t;
	Ms.gs_sharded = 1; /* (its one caller under autocast: FSDP's; DeepSpeed's takes none) */
	if (Ms.gs_growth != NO)
		b->M = &Ms;
	struct pt *pt = zs_calloc(n ? n : 1, sizeof *pt), **q = zs_calloc(n ? n : 1, sizeof(struct pt *));
	for (size_t i = 0; i < n; i++) {
		pt[i] = (struct pt){ .w = ps[i].w, .g = ps[i].g, .m = ps[i].m, .v = ps[i].v, .step = ps[i].step,
		                     .param = -1, .part = -1 };
		q[i] = &pt[i];
	}
	optimizer_phase(b, q, (const size_t[]){ 0, n }, 1, 0);
	*cap = b->cap;
	free(q);
	free(pt);
	free(b->refs);
	free(b->rg);
	free(b->masks);
}

void ag_optimizer_events(struct ag_step *s, const struct ag_options *o, const struct ag_param_state *ps, size_t n,
                         struct ag_event **list, size_t *nlist, size_t *cap)
{
	optimizer_events(s, o, ps, n, list, nlist, cap, 0);
}

void ag_optimizer_first_events(struct ag_step *s, const struct ag_options *o, const struct ag_param_state *ps,
                               size_t n, struct ag_event **list, size_t *nlist, size_t *cap)
{
	optimizer_events(s, o, ps, n, list, nlist, cap, 1);
}

/* ------------------------------------------------------------------------ */

const char *ag_step1_lacking(const struct zs_config *c)
{
	/* the first step as its own list (ag_step.step1): the plain loop's,
	 * and DDP's (dp and zero1, under accumulation too; with
	 * find_unused_parameters on the constructor's buckets, which are
	 * never rebuilt, _DDPSink cloning step 1's own outputs; util/ag_ddp.c);
	 * FSDP's of 1.13 and 2.6, under accumulation, frozen units and
	 * PEFT's adapter units too (util/ag_fsdp.c, held to step_peaks[0] by
	 * tests/hf_torch.sh, ft_fsdp.sh and ft_fsdp_lora.sh); DeepSpeed's
	 * ZeRO-1 and 2 (util/ag_ds.c writes its own from the steady list,
	 * held to step_peaks[0] by tests/ds_bf16_torch.sh); ZeRO-3's at N = 1
	 * (util/ag_ds3.c writes it: a fetch there is a view, so step 1 differs
	 * in Adam's state and _global_grad_norm alone) and at N > 1 (its
	 * gathers and releases module by module at the step's leaf marks,
	 * where the model's are described: ag_step1_check refuses the rest) */
	(void)c;
	return NULL;
}

/* ZeRO-3 at N > 1 over a model whose leaf marks are not described
 * (ag_ds3_marks_lacking): what lacks, or NULL. */
static const char *ds3_step1_lacking(const struct zs_config *c, const struct zs_model *m)
{
	if (c->wrapper != ZS_WRAPPER_DEEPSPEED || c->nschemes == 0 || c->schemes[0] != ZS_ZERO3)
		return NULL;
	int many = 0;
	for (size_t i = 0; i < c->nworld; i++)
		many |= c->world[i] > 1;
	if (!many)
		return NULL;
	struct ag_options o;
	ag_options_from_config(&o, c, 1, 1);
	return ag_ds3_marks_lacking(m, &o);
}

int ag_ds3_step1_built(const struct zs_config *c, const struct zs_model *m)
{
	return ds3_step1_lacking(c, m) == NULL;
}

int ag_step1_check(const struct zs_config *c, const struct zs_model *m, char **cause)
{
	if (c->steps != 1)
		return 0;
	const char *what = ag_step1_lacking(c), *no = ds3_step1_lacking(c, m);
	if (what == NULL && m->experts > 0)
		what = "a mixture of experts";
	if (what == NULL && no != NULL)
		return zs_fail(cause, "--steps 1: --wrapper deepspeed --schemes zero3 at N > 1 over %s has no first step "
		               "of its own yet (its one step would be the steady step's over the set-up's state, which "
		               "PyTorch never runs); give --steps 2", no);
	if (what == NULL)
		return 0;
	return zs_fail(cause, "--steps 1: %s has no first step of its own yet (its one step would be the steady "
	               "step's over the set-up's state, which PyTorch never runs); give --steps 2", what);
}

void ag_options_from_config(struct ag_options *o, const struct zs_config *c, uint64_t batch, uint64_t seq)
{
	memset(o, 0, sizeof *o);
	o->batch = batch;
	o->seq = seq;
	o->version = c->torch_version;
	o->device = c->torch_device;
	/* the "default"s as util/config.c resolves them for the files */
	o->optim_impl = zs_optim_impl_resolve(c);
	o->zero_grad = zs_zero_grad_resolve(c);
	o->attn = zs_attn_resolve(c);
	o->optimizer = c->optimizer;
	/* the run's training settings (--lr, --beta1, --beta2, --eps, or a
	 * spec's or a case's): the values the optimizer's kernels use */
	o->lr = c->lr;
	o->beta1 = c->beta1;
	o->beta2 = c->beta2;
	o->eps = c->eps;
	o->seed = c->seed;
	o->amp = c->precision == ZS_AMP_BF16 ? AG_BF16 : c->precision == ZS_AMP_FP16 ? AG_F16 : AG_F32;
	o->lora_amp = o->amp;
	/* a bf16-loaded model under bf16 autocast: every op of the model meets
	 * bf16 operands (Linear4bit's compute dtype, the norms' .to(input_dtype),
	 * the rope's .to(x.dtype), lm_head's bf16 weight) or is an fp32 op of
	 * its own (the softmax's dtype=float32, logits.float()), so autocast's
	 * cached_cast returns each as it is; only the fp32 adapters' linears
	 * cast (docs/finetune.md, "QLoRA loaded in bf16 under autocast") */
	if (c->load_bf16 && o->amp == AG_BF16)
		o->amp = AG_F32;
	o->mdt = (c->precision == ZS_MIXED && c->wrapper == ZS_WRAPPER_DEEPSPEED) || c->load_bf16 ? AG_BF16 : AG_F32;
	o->load_bf16 = c->load_bf16;
	o->lora_bf16 = c->lora_bf16;
	if (o->lora_bf16) /* bf16 adapters over bf16 operands: autocast casts nothing in them either */
		o->lora_amp = AG_F32;
	o->grad_accum = c->grad_accum ? c->grad_accum : 1;
	o->recompute = !c->hf_recompute ? AG_CKPT_NONE : c->wrapper == ZS_WRAPPER_FSDP ? AG_CKPT_IN_UNIT : AG_CKPT_LOOP;
	o->nonreentrant = o->recompute && c->recompute_nonreentrant;
	o->drop_logits = c->logits_dropped;
	o->ddp_no_sync = c->ddp_no_sync;
	o->step1 = ag_step1_lacking(c) == NULL;
	o->fsdp_prefetch = c->prefetch == ZS_PREFETCH_BACKWARD_PRE;
	o->fsdp_orig_params = c->wrapper == ZS_WRAPPER_FSDP && c->fsdp_orig_params;
	o->freeze = c->freeze[0] ? c->freeze : NULL;
	o->lora_r = c->lora_r;
	o->lora_alpha = c->lora_alpha;
	o->lora_dropout = c->lora_dropout;
	o->lora_targets = c->lora_targets[0] ? c->lora_targets : NULL;
	o->quant_nf4 = c->quant_nf4;
	o->double_quant = c->double_quant;
	o->moe_counts = c->moe_counts;
}


/* What of autocast is described (docs/schedule.md, "Autocast" and
 * "Float16 autocast"): bf16 on the CPU (float16 on 2.6's, under
 * GradScaler), the eager step of every family described (gpt2, llama,
 * mistral, qwen2, qwen3, phi3) without dropout; the rest refused by name. */
static int amp_check(const struct zs_model *m, const struct ag_options *o, char **cause)
{
	/* 1.13's CPU autocast takes bf16 only: torch.autocast("cpu",
	 * dtype=torch.float16) fails at its first op ("Currently, AutocastCPU
	 * only support Bfloat16 as the autocast_cpu_dtype", seen here); 2.6
	 * runs float16 on the CPU too */
	if (o->amp == AG_F16 && o->version == ZS_TORCH_1_13)
		return refuse(cause, "--precision amp-fp16: PyTorch 1.13's autocast on the CPU takes bfloat16 only (give "
		              "--precision amp-bf16)");
	/* 2.6's float16 on the CPU: bf16's cast policy with float16 (one
	 * lower_precision_fp list for both: autocast_mode.h's
	 * get_lower_precision_fp_from_device_type, the CPU's
	 * get_autocast_cpu_dtype()), under GradScaler("cpu")
	 * (grad_scaler_scale); the plain loop and DDP, single and foreach
	 * Adam, checked against 2.6's allocator (tests/hf_torch.sh torch26),
	 * LoRA, --grad-accum, ZeroRedundancyOptimizer and FSDP's
	 * ShardedGradScaler (ft_lora.sh, ft_zero1.sh, ft_fsdp.sh,
	 * ft_fsdp_lora.sh torch26); the rest by name */
	if (o->amp == AG_F16) {
		const char *no = o->optim_impl == ZS_OPTIM_FUSED
		                         ? "--optimizer-impl fused (fused Adam takes the scaler's grad_scale and found_inf "
		                           "itself: _step_supports_amp_scaling; give single or foreach)"
		                 : m->experts > 0      ? "a mixture of experts"
		                                       : NULL;
		if (no)
			return refuse(cause, "--precision amp-fp16: float16 autocast (GradScaler's step) with %s is not "
			              "described yet", no);
	}
	/* bf16 q, k, v take the CPU's flash kernel too (sdp_utils_cpp.cpp,
	 * use_flash_attention_cpp: cpp_supported_flash_dtypes holds
	 * kBFloat16): described where it runs (sdpa_fwd: gpt2, and a llama
	 * family's with as many k/v heads as heads), checked against 2.6's
	 * allocator on the plain loop and DDP (tests/hf_torch.sh torch26,
	 * ft_lora.sh), checkpointed too (the rerun under no_grad keeps
	 * nothing: the casts go as the op returns). The math path (fewer k/v
	 * heads: its autocast dtypes are not traced), QLoRA's fp32 v (4-bit
	 * v_proj) and FSDP's views of the flat parameter are not.
	 * ZeroRedundancyOptimizer, dropped logits and LoRA checkpointed hold
	 * against 2.6 as they are (tests/hf_torch.sh torch26, ft_lora.sh). */
	if (o->attn == ZS_ATTN_SDPA) {
		const char *no = m->kv_heads != m->heads ? "fewer k/v heads than heads (SDPA's math path)"
		                 : o->quant_nf4 ? "--quant-base nf4 (a 4-bit v_proj's fp32 v)"
		                 : o->amp_param_views ? "--wrapper fsdp"
		                                : NULL;
		if (no)
			return refuse(cause, "--precision %s: autocast with --attn sdpa and %s is not described yet "
			              "(give --attn eager)", o->amp == AG_F16 ? "amp-fp16" : "amp-bf16", no);
	}
	if (m->embd_pdrop > 0 || m->attn_pdrop > 0 || m->resid_pdrop > 0)
		return refuse(cause, "--precision %s: autocast with dropout (the model's config) is not described "
		              "yet (give a config with dropout 0)", o->amp == AG_F16 ? "amp-fp16" : "amp-bf16");
	return 0;
}

/* One step into the list in use: K micro-steps (forward, backward) then
 * one optimizer step over the lists opt[start[k] .. start[k + 1]) (k <
 * nlists: ZeroRedundancyOptimizer's ranks, util/ag_zero1.h), zero_grad,
 * the loop's outputs let go. The grads the first backward makes (or
 * zero_grad kept) take the later ones' in place (accumulate():
 * AccumulateGrad). It ends in the state it starts from at steady state;
 * the first step's (b->make_state) starts from the set-up's. */
static void one_step(struct bld *b, struct model *M, const T *ids, const T *labels, struct pt *const *opt,
                     const size_t *start, unsigned nlists)
{
	const struct ag_options *o = b->o;
	unsigned K = o->grad_accum, zw = o->zero1_world;
	for (unsigned k = 0; k < K; k++) {
		if (K > 1) {
			mark(b, "micro:%u", k);
			b->micro = (int)k;
		}
		M->ids = ids[k];
		M->labels = labels[k];
		if (b->m->family == ZS_FAMILY_GPT2)
			gpt2_step(b, M);
		else
			llama_step(b, M);
		b->micro = -1;
		if (k + 1 < K) {
			/* `del loss; outputs = None` before the next micro-step (the
			 * tuple goes from its last item); the last micro-step's are
			 * held to the step's end, as at K = 1 */
			outputs_go(b, M);
		}
	}
	b->phase = ZS_PH_OPTIMIZER;
	optimizer_phase(b, opt, start, nlists, zw != 0);
	/* _sync_params: rank by rank, each of its parameters broadcast from
	 * it in partition order, in place */
	for (unsigned r = 0; r < zw; r++)
		for (size_t k = start[r]; k < start[r + 1]; k++)
			op(b, AG_OP_BROADCAST_, opt[k]->w, NO, NO, opt[k]->w, NO, NO)->arg[0] = r;
	mark(b, "phase:zero_grad");
	zero_grad(b, M);
	b->s->loss = M->loss;
	b->s->logits = M->logits;
	outputs_go(b, M);
	mark(b, "phase:between");
}

const char *ag_ds3_marks_lacking(const struct zs_model *m, const struct ag_options *o)
{
	return m->hf_fused     ? "fused qkv_proj and gate_up_proj"
	       : m->qkv_bias    ? "q_proj, k_proj and v_proj with biases"
	       : m->gemma       ? "the gemmas' extra norms"
	       : m->qk_norm     ? "q_norm and k_norm"
	       : m->experts > 0 ? "a mixture's experts"
	       : o->lora_r      ? "--lora-r"
	       : o->quant_nf4   ? "--quant-base nf4"
	       : o->recompute   ? "--recompute full"
	       /* (held to DeepSpeed's hooks in fp32 with every parameter
	        * trained alone: tests/ds3_torch.sh) */
	       : o->freeze && *o->freeze ? "--freeze"
	       /* micro-step 1 records the trace, 2 on run on the complete
	        * one (ppc.py reset_step, 228-262, at each forward's start)
	        * from nothing gathered: not built */
	       : o->grad_accum > 1 ? "--grad-accum"
	       : o->amp != AG_F32 || o->mdt != AG_F32 ? "16-bit compute (autocast, DeepSpeed's bf16)"
	       /* the first step at N > 1 is held to 1.13's replay alone (2.6's
	        * module-hook marks differ: docs/schedule.md "Under PyTorch 2.6") */
	       : o->version != ZS_TORCH_1_13 ? "PyTorch 2.6 (its first step is compared under 1.13 alone)"
	                                        : NULL;
}

int ag_step_build(struct ag_step *s, const struct zs_model *m, const struct step_params *p,
                  const struct ag_options *o, char **cause)
{
	memset(s, 0, sizeof *s);
	s->loss1 = s->logits1 = AG_NONE;
	/* The step is written from modeling_gpt2.py, modeling_llama.py
	 * (mistral's is llama's), modeling_qwen2.py (llama's with biased q, k,
	 * v), modeling_qwen3.py (llama's with q_norm and k_norm),
	 * modeling_phi3.py (fused qkv_proj and gate_up_proj), modeling_gemma2.py
	 * and modeling_gemma3.py (the Gemma section): another family's modules
	 * are not described. */
	static const char *const described[] = { "gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2",
		                                 "gemma3_text", "mixtral", "qwen2_moe", "qwen3_moe" };
	size_t fam = 0;
	while (fam < sizeof described / sizeof *described && strcmp(m->model_type, described[fam]) != 0)
		fam++;
	if (fam == sizeof described / sizeof *described)
		return refuse(cause, "--model %s: the PyTorch step of a %s is not described yet (gpt2, llama, "
		              "mistral, qwen2, qwen3, phi3, gemma2, gemma3_text, mixtral, qwen2_moe and qwen3_moe are)", m->name, m->model_type);
	/* module.bfloat16() (DeepSpeed's bf16, ag_options.mdt): gpt2's and
	 * llama's step, checked against PyTorch 1.13's allocator
	 * (tests/ds_bf16_torch.sh); the other families by name */
	if (o->mdt != AG_F32 && fam > 1 && !o->load_bf16)
		return refuse(cause, "--model %s: DeepSpeed's bf16 (--precision mixed) over the PyTorch step of a %s is not "
		              "described yet (gpt2 and llama are)", m->name, m->model_type);
	/* mixtral's block (moe_fwd): as checked against 1.13's allocator
	 * (tests/moe_hf_torch.sh), its routing the step's own; the rest by name */
	if (m->experts > 0 && moe_refuse(m, o, cause) < 0)
		return -1;
	/* gemma2 (Gemma2ForCausalLM, fp32, eager attention, plain loop, DDP, FSDP;
	 * checked against PyTorch 1.13 and 2.6 by tests/hf_torch.sh): the rest
	 * of it is not described. transformers' sdpa_attention_forward takes
	 * no softcap (integrations/sdpa_attention.py) and Gemma2ForCausalLM
	 * warns to train with eager; SDPA is still transformers' default for it
	 * (Gemma2PreTrainedModel at 9a80143ca260 has _supports_sdpa and no
	 * _check_and_enable_sdpa swapping it for eager, as 4.42-4.4x had), so
	 * 2.x's default --attn sdpa is kept and refused, with that reason. gemma3_text the same (1.13 and 2.6),
	 * and under 2.6's SDPA too (the refusals below for a window the
	 * sequence reaches hold); its Gemma3Attention (modeling_gemma3.py at
	 * 0018aa64) gives its attention function no softcap, so a config's
	 * attn_logit_softcapping, which zerosim's own model applies, is not
	 * followed; create_sliding_window_causal_mask raises without a
	 * sliding_window. */
	if (m->gemma) {
		int g3 = gemma3(m);
		const char *no = g3 && m->attn_softcap > 0 ? "attn_logit_softcapping (give a config without it)"
		                 : g3 && !m->sliding_window  ? "no sliding_window"
		                 : !g3 && o->attn == ZS_ATTN_SDPA ? "--attn sdpa (transformers' default too: 4.49's gemma2 no "
		                                                    "longer swaps it for eager, and its SDPA drops the softcap; "
		                                                    "give --attn eager)"
		                 : o->amp != AG_F32            ? "autocast (give --precision fp32)"
		                 : o->freeze && *o->freeze     ? "--freeze"
		                 : o->lora_r                   ? "--lora-r"
		                 : o->grad_accum > 1           ? "--grad-accum (give 1)"
		                 : o->zero1_world              ? "ZeroRedundancyOptimizer (give --schemes dp)"
		                 : m->attn_pdrop > 0           ? "attention_dropout (give a config with 0)"
		                                               : NULL;
		if (no)
			return refuse(cause, "--model %s: the PyTorch step of a %s with %s is not described yet", m->name,
			              m->model_type, no);
	}
	/* activation checkpointing: the decoder layers in fp32 on the plain
	 * loop of 1.13 and 2.6, checked against their allocators
	 * (tests/hf_torch.sh, make check-torch26), with --freeze, --lora-r
	 * (input_require_grads), --grad-accum and ZeroRedundancyOptimizer
	 * against 1.13's (tests/ft_freeze.sh, ft_lora.sh, ft_accum.sh,
	 * ft_zero1.sh), the models' dropout and --lora-dropout too (the rerun
	 * draws the forward's masks: layer_bwd, preserve_rng_state), and under
	 * bf16 autocast (the rerun a region of its own); gemma2 and gemma3_text
	 * on the plain loop and DDP of both (llama_hold: what their
	 * transformers releases' calls give each ctx); 2.6's SDPA over fewer
	 * k/v heads (sdpa_math_fwd under no_grad keeps nothing); the rest by
	 * name. LoRA under FSDP: PEFT's wrap policy (lora_A, lora_B units of
	 * their own) around a checkpointed layer is not described; a gemma under
	 * FSDP is refused by util/ag_ddp.c. */
	if (o->recompute) {
		/* non-reentrant (layer_bwd_nonreentrant; 2.x's early stop from
		 * the layer's saved set, ckpt_early_stop): every dense family in
		 * fp32 or bf16 autocast, eager, on the plain loop, DDP and FSDP,
		 * against 1.13's and 2.6's allocators (tests/hf_torch.sh); with
		 * --grad-accum and ZeroRedundancyOptimizer (ft_zero1.sh), and
		 * --lora-r on the plain loop and DDP (the adapters' numbers:
		 * lora_wk; tests/ft_lora.sh "non-reentrant:"), the bf16-loaded
		 * QLoRA and TRL's bf16 adapters too (2.6) */
		int nr = o->nonreentrant;
		const char *no = o->fsdp_unit_marks ? "--lora-r under --wrapper fsdp (give --wrapper none or ddp)"
		                 : nr && m->experts > 0 ? "--recompute-impl non-reentrant with a mixture of experts"
		                 : nr && o->attn == ZS_ATTN_SDPA ? "--recompute-impl non-reentrant with --attn sdpa (give --attn eager)"
		                                               : NULL;
		if (no)
			return refuse(cause, "--recompute full: Hugging Face's gradient checkpointing with %s is not described "
			              "yet", no);
	}
	/* numerics the engine does not run change the ops too (phi3's
	 * partial_rotary_factor slices the rope's input and cats; rope_scaling
	 * types compute other tables): not described */
	if (m->unrun[0] != '\0')
		return refuse(cause, "--model %s: %s; the PyTorch step is described for those numerics only", m->name,
		              m->unrun);
	/* DeepSpeed's ZeRO-3 leaf marks (ds3_mark): gpt2's modules and
	 * llama's layer so far; a family whose leaves differ (phi3's fused
	 * projections, the gemmas' extra norms, qwen3's q_norm and k_norm, a
	 * mixture's experts) or an adapter's, by name */
	if (o->ds3_leaf_marks) {
		const char *no = ag_ds3_marks_lacking(m, o);
		if (no)
			return refuse(cause, "--model %s: DeepSpeed's ZeRO-3 module marks over %s are not described yet",
			              m->name, no);
	}
	/* --load-dtype bf16: the plain loop, DDP and FSDP, checked against
	 * 2.6's allocator (tests/ft_lora.sh, ft_fsdp_lora.sh torch26), under
	 * bf16 autocast and (reentrant) --recompute full too */
	if (o->load_bf16) {
		const char *no = o->zero1_world ? "ZeroRedundancyOptimizer (give --schemes dp)"
		                 : fam != 1 ? "a model that is not a llama (llama's step is checked)"
		                 : o->lora_dropout > 0 ? "--lora-dropout (give 0)"
		                 : o->freeze && *o->freeze ? "--freeze"
		                 : o->attn == ZS_ATTN_SDPA ? "--attn sdpa (give --attn eager)"
		                 /* no row has a bf16 dropout's noise */
		                 : m->embd_pdrop > 0 || m->attn_pdrop > 0 || m->resid_pdrop > 0
		                         ? "dropout (the model's config; give a config without it)"
		                                           : NULL;
		if (no)
			return refuse(cause, "--load-dtype bf16 with %s is not described yet", no);
	}
	if (o->optimizer != ZS_ADAM)
		return refuse(cause, "--optimizer: the PyTorch step describes Adam only");
	/* --torch-device cuda: the plain loop's step with the CUDA rules, each
	 * where it applies (host_scalar: wrapped numbers and their copies;
	 * record_function's handles, 1.13; Adam's step counters, adam_state;
	 * LayerNorm's backward without the CPU's scratch, layer_norm_bwd;
	 * native_dropout's bool mask, dropout;
	 * Adam's foreach default, zs_optim_impl_resolve; checkpointing's
	 * random states, rng_state; an embedding's sort path past 3,072
	 * indices, emb_dense_bwd), fp32 and eager attention; bf16 autocast
	 * for gpt2 and llama: CUDA's lists where they differ from the CPU's
	 * (gpt2's softmax and gelu_new's pow in fp32) and no promotion copies
	 * (promotes_by_copy); QLoRA's llama loaded in bf16 under it (PEFT's
	 * conversions, lora_fwd's conv). Predicted from source, not yet
	 * measured on a GPU (tests/gpu_torch.py is that check; docs/schedule.md,
	 * "The CPU against CUDA"). What is not described there is refused by
	 * name. */
	if (o->device == ZS_DEVICE_CUDA) {
		const char *no =
			o->lora_bf16 ? "--lora-dtype bf16 (TRL's bf16 adapters; give --lora-dtype fp32 --precision amp-bf16)"
			: o->load_bf16 && !(o->quant_nf4 && o->lora_r && o->lora_amp == AG_BF16 && fam == 1)
				? "--load-dtype bf16 but QLoRA's llama under bf16 autocast (--quant-base nf4 --lora-r "
				  "--precision amp-bf16)"
			: o->mdt != AG_F32 && !o->load_bf16 ? "a 16-bit module (DeepSpeed's bf16; give --precision fp32)"
			: o->amp == AG_F16 ? "float16 autocast (GradScaler(\"cuda\") and softmax's half_to_float kernel; give "
			                     "--precision amp-bf16)"
			: o->amp != AG_F32 && fam > 1 ? "bf16 autocast over a model that is not a gpt2 or a llama"
			: o->amp != AG_F32 && (o->lora_r || o->quant_nf4)
				? "bf16 autocast with --lora-r or --quant-base but QLoRA's llama loaded in bf16 (PEFT's and "
				  "bitsandbytes' casts under CUDA's autocast over fp32 weights; --load-dtype bf16 is built)"
			: o->amp != AG_F32 && o->freeze && *o->freeze ? "bf16 autocast with --freeze"
			: (o->amp != AG_F32 || o->lora_amp != AG_F32) && o->grad_accum > 1
				? "bf16 autocast with --grad-accum (give 1)"
			: o->attn == ZS_ATTN_SDPA ? "--attn sdpa (CUDA's flash and memory-efficient kernels; give --attn eager)"
			: m->experts > 0          ? "a mixture of experts (nonzero's and the routing's CUDA scratch)"
			: o->zero1_world          ? "ZeroRedundancyOptimizer (give --schemes dp)"
				: NULL;
		if (no)
			return refuse(cause, "--torch-device cuda: the PyTorch step with %s is not described yet (or give "
			              "--torch-device cpu)", no);
	}
	/* 1.13's fused Adam (adam.py 122, _fused_adam) is CUDA's alone, and
	 * under --torch-device cuda not described yet */
	if (o->optim_impl == ZS_OPTIM_FUSED && o->version == ZS_TORCH_1_13)
		return refuse(cause, "--optimizer-impl fused: PyTorch 1.13's fused Adam %s (give --torch-version 2.6)",
		              o->device == ZS_DEVICE_CPU ? "runs on CUDA only" : "on CUDA is not described yet");

	if (o->attn == ZS_ATTN_SDPA && o->version == ZS_TORCH_1_13)
		return refuse(cause, "--attn sdpa: PyTorch 1.13 has no scaled_dot_product_attention (give --attn eager, or "
		              "--torch-version 2.6)");
	/* a bf16 module's SDPA (DeepSpeed's bf16): 2.6's CPU flash kernel
	 * runs in bf16 (sdpa_fwd), checked against 2.6's allocator
	 * (tests/ds_torch26.sh); the math path (fewer k/v heads than heads,
	 * or attention dropout) first copies q, k and v to fp32 and its
	 * output back (attention.cpp, _scaled_dot_product_attention_math's
	 * query_acc, key_acc, value_acc and .to(origin_dtype)), which
	 * sdpa_math does not describe */
	if (o->attn == ZS_ATTN_SDPA && o->mdt != AG_F32 && (m->kv_heads != m->heads || m->attn_pdrop > 0))
		return refuse(cause, "--attn sdpa with a bf16 module (DeepSpeed's bf16) and %s: SDPA's math path, whose fp32 "
		              "copies of q, k and v are not described yet (give --attn eager, or --precision fp32)",
		              m->kv_heads != m->heads ? "fewer k/v heads than heads" : "attention dropout");
	/* transformers 5.x passes enable_gqa=True from torch 2.5 with no mask
	 * (integrations/sdpa_attention.py, use_gqa_in_sdpa); 2.6's CPU flash
	 * kernel takes no grouped heads, so SDPA runs its math path
	 * (sdpa_math_fwd: repeat_interleave of k and v, a T x T weights
	 * tensor kept) */
	/* masking_utils' sdpa_mask skips the mask (is_causal) only while the
	 * sequence is shorter than a sliding window; past it a mask is given */
	if (o->attn == ZS_ATTN_SDPA && m->sliding_window && o->seq >= m->sliding_window)
		return refuse(cause, "--attn sdpa: --seq %llu reaches the sliding window (%llu): SDPA gets a mask, not "
		              "described yet (give --attn eager)", (unsigned long long)o->seq,
		              (unsigned long long)m->sliding_window);
	/* as many k/v heads as heads: the flash kernel, whose output follows
	 * q's layout (phi3's cat leaves q contiguous: the caller's
	 * transpose(1, 2).contiguous() then copies, measured) and whose dv
	 * reaches qwen2's biased v_proj as a view: not described for those two */
	if (o->attn == ZS_ATTN_SDPA && (fam == 3 || fam == 5) && m->kv_heads == m->heads)
		return refuse(cause, "--attn sdpa: a %s with as many k/v heads as heads (%llu) takes the CPU's flash "
		              "kernel, not described yet for it (give --attn eager)", m->model_type,
		              (unsigned long long)m->heads);
	/* attention dropout: 2.6's CPU SDPA takes its math path (sdp_utils_cpp's
	 * check_for_dropout), with at::dropout's noise kept (sdpa_math):
	 * GPT-2's, and the llama's with fewer k/v heads (the math path already),
	 * fp32, the plain loop and DDP, checked against 2.6's allocator
	 * (tests/hf_torch.sh torch26, the sdpa-dropout rows); the rest by name */
	if (o->attn == ZS_ATTN_SDPA && m->attn_pdrop > 0) {
		const char *no = fam > 1 ? "a family but gpt2 and llama"
		                 : fam == 1 && m->kv_heads == m->heads
		                         ? "a llama with as many k/v heads as heads (the math path over the ropes' layout)"
		                 : o->recompute       ? "--recompute full"
		                 : o->lora_r          ? "--lora-r"
		                 : o->freeze && *o->freeze ? "--freeze"
		                 : o->grad_accum > 1  ? "--grad-accum above 1"
		                 : o->zero1_world     ? "ZeroRedundancyOptimizer"
		                 : o->drop_logits     ? "--logits dropped"
		                                      : NULL;
		if (no)
			return refuse(cause, "--attn sdpa: attention dropout (attn_pdrop %g: SDPA's math path) with %s is not "
			              "described yet (give --attn eager, or attn_pdrop 0)", m->attn_pdrop, no);
	}
	if (o->amp != AG_F32 && amp_check(m, o, cause) < 0)
		return -1;
	if (o->grad_accum < 1)
		return refuse(cause, "--grad-accum: at least 1 micro-step");
	int freezing = o->freeze && *o->freeze;
	/* (accumulation with frozen parameters is checked: tests/ft_accum.sh;
	 * every family's, qwen2's biased projections, qwen3's q/k norms and
	 * phi3's fused qkv_proj and gate_up_proj included: tests/ft_freeze.sh;
	 * under autocast too; under ZeroRedundancyOptimizer: tests/ft_zero1.sh).
	 * LoRA: the plain loop's step (and DDP's over it), fp32 or autocast,
	 * eager attention (util/config.c refuses the rest: FSDP;
	 * tests/ft_lora.sh), every family of the step. PEFT's
	 * TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
	 * (src/peft/utils/constants.py) has no phi3 entry: get_peft_model
	 * then asks for target_modules, and so does zerosim (util/lora.h). */
	if (o->lora_r && zs_lora_targets(m, o->lora_targets, cause) == NULL)
		return -1;
	/* PEFT adapts lm_head when it is named (peft/tuners/tuners_utils.py,
	 * v0.20.0, check_target_module_exists 1927-1933: a key in
	 * target_modules matches); all-linear leaves it out
	 * (_maybe_include_all_linear_layers), and so does zerosim */
	if (o->lora_r && o->lora_targets && strcmp(o->lora_targets, "all-linear") != 0 &&
	    zs_lora_target(o->lora_targets, "lm_head"))
		return refuse(cause, "--lora-targets %s: an adapter on the output embedding (lm_head) is not described "
		              "yet (give other targets)", o->lora_targets);
	struct bld B_ = { .s = s, .o = o, .p = p, .m = m, .module = -1, .phase = ZS_PH_SETUP, .micro = -1 };
	struct bld *b = &B_;
	struct model M = { 0 };
	M.qmap = M.leaf = M.leafgrad = NO;
	M.gs_scale = M.gs_growth = M.gs_scaled = M.gs_found = NO;
	b->M = &M;
	use(b, &s->setup, &s->nsetup);
	if (m->family == ZS_FAMILY_GPT2)
		gpt2_setup(b, &M);
	else
		llama_setup(b, &M);
	size_t adapted = o->lora_r ? lora_setup(b, &M) : 1;
	if (o->lora_r && o->fsdp_orig_params)
		lora_orig_params(b, &M);
	size_t ntrain = 0; /* (--fsdp-orig-params: a frozen one whose gradient is computed is frozen here) */
	for (size_t i = 0; i < M.npt; i++)
		ntrain += !M.pt[i].frozen && !s->tensor[M.pt[i].w].orig_frozen;
	if (!ntrain)
		b->unsupported = "it freezes every parameter: nothing to train";
	/* a pattern that freezes nothing is a mistake (--freeze all), not
	 * the full run: refused as a LoRA target that matches nothing is */
	size_t nadapter = 0; /* LoRA: the adapters, the only parameters --freeze can change */
	for (size_t i = 0; i < M.npt; i++)
		nadapter += M.pt[i].param < 0;
	int none_frozen = freezing && (M.nlora > 0 ? ntrain == nadapter : ntrain == M.npt);
	if (none_frozen)
		b->unsupported = "no parameter matches";
	/* and so is one term that matches nothing beside others that do
	 * (--freeze embeddings,blocks:0-9 on a model of 2 blocks: a typo or
	 * the wrong model, never a no-op the user meant) */
	char unmatched[ZS_FREEZE_MAX + 1] = "";
	if (freezing && !none_frozen && freeze_unmatched(b, &M, unmatched, sizeof unmatched))
		b->unsupported = "a term matches no parameter";
	/* the batch, held across steps: under --grad-accum K, every
	 * micro-step's (the loop holds the K micro-batches of the optimizer
	 * step: tests/ft_torch.py draws them at once, labels a clone) */
	unsigned K = o->grad_accum;
	T *ids = zs_calloc(K, sizeof *ids), *labels = zs_calloc(K, sizeof *labels);
	for (unsigned k = 0; k < K; k++) {
		ids[k] = mk(b, "input_ids", AG_I64, 2, SH(o->batch, o->seq), AG_ROLE_INPUT, ZS_CAT_ACTIVATIONS, -1);
		s->tensor[ids[k]].micro = k;
		op(b, AG_OP_FILL, NO, NO, NO, ids[k], NO, NO)->arg[0] = 0;
		labels[k] = mk(b, "labels", AG_I64, 2, SH(o->batch, o->seq), AG_ROLE_INPUT, ZS_CAT_ACTIVATIONS, -1);
		s->tensor[labels[k]].micro = k;
		op(b, AG_OP_COPY, ids[k], NO, NO, labels[k], NO, NO);
	}
	/* The first step as a list of its own (ag_options.step1; not yet for
	 * a mixture, whose lists the engine builds step by step for their
	 * routing): nothing before it, the grads made by its backward,
	 * Adam's state by its step(). Else the first step's prefix: the
	 * grads (zeros: kept from the first backward on) and Adam's state,
	 * then the steady step. */
	int one = o->step1 && m->experts == 0;
	use(b, &s->first_step, &s->nfirst);
	if (!one && o->zero_grad == ZS_ZERO_GRAD_ZEROS)
		for (size_t i = 0; i < M.npt; i++) {
			struct pt *q = &M.pt[i];
			if (q->frozen)
				continue;
			b->module = pt_module(b, q);
			q->g = like(b, "grad", q->w);
			op(b, AG_OP_ZERO_, q->g, NO, NO, q->g, NO, NO);
			b->s->tensor[q->g].role = AG_ROLE_GRAD;
			b->s->tensor[q->g].cat = ZS_CAT_GRAD32;
			b->s->tensor[q->g].param = q->param;
			b->s->tensor[q->g].part = q->part;
		}
	b->module = -1;
	/* The optimizer's parameter lists (optimizer_phase): every one in
	 * model order, or under ZeroRedundancyOptimizer (util/ag_zero1.h)
	 * each rank's own in its partition order, its state in its section */
	unsigned zw = o->zero1_world, nlists = zw ? zw : 1;
	struct pt **opt = zs_calloc(M.npt ? M.npt : 1, sizeof(struct pt *));
	size_t *start = zs_calloc(nlists + 1, sizeof *start);
	if (zw)
		zero1_partition(b, &M, opt, start);
	else {
		for (size_t i = 0; i < M.npt; i++)
			opt[i] = &M.pt[i];
		start[1] = M.npt;
	}
	for (unsigned r = 0; !one && r < nlists; r++) {
		b->only_rank = zw ? r + 1 : 0;
		adam_state(b, opt + start[r], start[r + 1] - start[r]);
	}
	b->only_rank = 0;
	for (int first = one; first >= 0; first--) {
		use(b, first ? &s->step1 : &s->event, first ? &s->nstep1 : &s->nevents);
		b->make_state = first;
		b->draws = 0; /* a step's masks are keyed on its own draws (AG_OP_BERNOULLI_) */
		one_step(b, &M, ids, labels, opt, start, nlists);
		if (first) { /* step 1's own outputs (DDP's _DDPSink clones them too) */
			s->loss1 = s->loss;
			s->logits1 = s->logits;
		}
	}
	b->make_state = 0;
	free(ids);
	free(labels);
	free(opt);
	free(start);
	free(M.pt);
	free(M.lora);
	free(M.q4);
	free(M.cached);
	free(M.ck);
	free(M.bias);
	free(M.masked_bias);
	free(b->refs);
	free(b->rg);
	free(b->masks);
	free(b->pt_of);
	names_free(b->tensors);
	names_free(b->modules);
	if (b->emb_sort) {
		ag_step_free(s);
		return refuse(cause, "--torch-device cuda: the PyTorch step with more than 3,072 tokens a step into a "
		              "trained embedding (embedding_dense_backward_cuda's sort path and its scratch) is not "
		              "described yet (give --batch x --seq up to 3,072, or --torch-device cpu)");
	}
	if (b->unsupported) {
		ag_step_free(s);
		if (!adapted)
			return refuse(cause, "--lora-targets %s: no linear layer of %s matches", o->lora_targets ? o->lora_targets
			              : "(the default)", m->name);
		if (!freezing)
			return refuse(cause, "--lora-r %u: %s (not described yet)", o->lora_r, b->unsupported);
		const char *lr = M.nlora > 0 ? " adapter" : " parameter";
		const char *why = M.nlora > 0 ? " (LoRA freezes every base parameter already)" : "";
		if (none_frozen)
			return refuse(cause, "--freeze %s: no%s of %s matches%s", o->freeze, lr, m->name, why);
		if (*unmatched)
			return refuse(cause, "--freeze %s: its term '%s' matches no%s of %s%s", o->freeze, unmatched, lr,
			              m->name, why);
		return refuse(cause, "--freeze %s: %s%s", o->freeze, b->unsupported,
		              ntrain ? " (not described yet)" : "");
	}
	return 0;
}

unsigned ag_step_lists(const struct ag_step *s, unsigned step, const struct ag_event *ev[2], size_t n[2])
{
	if (step == 0 && s->step1 != NULL) {
		ev[0] = s->step1;
		n[0] = s->nstep1;
		return 1;
	}
	if (step == 1 && s->step2 != NULL) {
		ev[0] = s->step2;
		n[0] = s->nstep2;
		return 1;
	}
	unsigned k = 0;
	if (step == 0) {
		ev[k] = s->first_step;
		n[k++] = s->nfirst;
	}
	ev[k] = s->event;
	n[k++] = s->nevents;
	return k;
}

int ag_event_on_rank(const struct ag_event *e, unsigned rank)
{
	return e->only_rank == 0 || e->only_rank == rank + 1;
}

void ag_step_free(struct ag_step *s)
{
	free(s->tensor);
	free(s->setup);
	free(s->first_step);
	free(s->event);
	free(s->step1);
	free(s->step2);
	for (size_t i = 0; i < s->nlabels; i++)
		free(s->labels[i]);
	free(s->labels);
	memset(s, 0, sizeof *s);
}
