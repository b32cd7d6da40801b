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
 * walks it.
 *
 * zerosim's kernels fuse two groups of Hugging Face's tensors: a block's
 * queries, keys and values are one matrix (gpt2's c_attn already is;
 * llama's q_proj, k_proj and v_proj are three), and llama's gate_proj and
 * up_proj are one. A fused tensor's name lists its parts, and it is one
 * module (docs/schedule.md says what that changes).
 *
 * Ownership: step_params_build fills a struct whose arrays and names it
 * allocates; step_params_free releases them. Out of memory is fatal.
 */
#ifndef ZS_UTIL_STEP_H
#define ZS_UTIL_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "util/model.h"

struct step_tensor {
	char *name;         /* Hugging Face's state_dict key ("transformer.h.0.ln_1.weight") */
	unsigned ndim;      /* 1 or 2 */
	uint64_t shape[2];  /* nn.Linear's (out, in); gpt2's Conv1D's (in, out); a table's (rows, d) */
	uint64_t numel;     /* shape[0] (·shape[1]) */
	size_t module;      /* the module that owns it */
	/* A fused tensor (see above): the rows of each Hugging Face tensor it
	 * joins, in order (q, k, v; gate, up); nparts 0 for any other. */
	unsigned nparts;
	uint64_t part_rows[3];
};

struct step_module {
	char *name;         /* "transformer.h.0.attn.c_attn", "lm_head" */
	size_t layer;       /* the layer whose step runs it */
	size_t first, n;    /* its tensors: tensor[first .. first+n-1] */
};

struct step_layer {
	size_t first, n;    /* the tensors it holds in the flat vector */
	uint64_t offset;    /* its first element in the flat vector */
	uint64_t numel;     /* its elements */
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
};

/* Build the parameters of the transformer m describes. */
void step_params_build(struct step_params *p, const struct zs_model *m);
/* Build the MLP's of widths d0..dL (nwidths = L + 1): layer l is the
 * nn.Linear "l" of nn.Sequential, weight (d(l+1), d(l)) and bias (d(l+1))
 * (tests/fsdp_torch.py builds it so); no table and no head. */
void step_params_mlp(struct step_params *p, const size_t *widths, size_t nwidths);
void step_params_free(struct step_params *p);

/* The largest nn.Module's own parameters (elements) of the Hugging Face
 * model, whose modules are not zerosim's fused ones: each part of a fused
 * tensor counts apart (DeepSpeed's model_to_params, docs/schedule.md). */
uint64_t step_params_largest_hf_module(const struct step_params *p);

#endif
