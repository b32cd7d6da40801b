/*
 * lora — LoRA's adapters (--lora-r, issue #23) over the step description
 * (util/step.h), from the shape alone: which of the model's linear layers
 * PEFT v0.20.0 adapts, and each adapter's lora_A [r, in] and lora_B
 * [out, r] (peft/tuners/lora/layer.py, LoraLayer.update_layer lines
 * 259-260; docs/finetune.md, "LoRA as PEFT writes it").
 *
 * It is the part of the contract that does not depend on how a framework
 * runs the adapters: the PyTorch step (util/autograd.c) matches its
 * targets with zs_lora_target; the paper's step (engine and theory)
 * walks the description zs_lora_step_params builds from zs_lora_build's
 * list (docs/finetune.md, "LoRA under the paper's schedule and DeepSpeed's
 * own step"; DeepSpeed's own step refuses --lora-r).
 *
 * Ownership: zs_lora_build allocates s->a; zs_lora_free releases it.
 * Out of memory is fatal.
 */
#ifndef ZS_UTIL_LORA_H
#define ZS_UTIL_LORA_H

#include <stddef.h>
#include <stdint.h>

#include "util/config.h"
#include "util/model.h"
#include "util/step.h"

/* PEFT's default targets for m's model_type (peft/utils/constants.py at
 * v0.20.0, TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, lines
 * 65-112): gpt2's "c_attn" (line 69); "q_proj,v_proj" for llama (83),
 * mistral (93), mixtral (94), gemma2 (98), gemma3_text (99), qwen2 (101)
 * and qwen3 (102). NULL where the mapping has no entry (phi3, qwen2_moe,
 * qwen3_moe): get_peft_model then asks for target_modules. */
const char *zs_lora_default_targets(const struct zs_model *m);
/* The targets a run adapts: `given` where it is set, else PEFT's default
 * for m; NULL, with one line in *cause, where there is neither. */
const char *zs_lora_targets(const struct zs_model *m, const char *given, char **cause);

/* Whether the module named `module` (its Hugging Face name) is one of
 * `targets`: PEFT's check_target_module_exists (peft/tuners/tuners_utils.py
 * at v0.20.0) for a list, the name is a target or ends with "." and one;
 * "all-linear": every linear layer (the caller leaves out the output
 * embedding, as _maybe_include_all_linear_layers does). */
int zs_lora_target(const char *targets, const char *module);

/* One adapted Hugging Face linear layer. A fused tensor of the step
 * description (llama's {q,k,v}_proj, {gate,up}_proj) is adapted part by
 * part: PEFT wraps Hugging Face's own modules, q_proj and v_proj apart. */
struct zs_lora {
	size_t tensor;    /* the base weight, a tensor of the step description */
	int part;         /* its part of a fused tensor (q 0, k 1, v 2; gate 0, up 1), -1 for a whole one */
	uint64_t row0;    /* its first output feature among the tensor's (the rows of the parts before it) */
	uint64_t in, out; /* lora_A [r, in], lora_B [out, r] */
};

struct zs_lora_set {
	struct zs_lora *a;
	size_t n;
	unsigned r;
};

/* The adapters of p (m's step description) for rank r and `targets`
 * (NULL or "": the family's default), in the order of the model's
 * parameters after get_peft_model (model.parameters(): each adapted
 * layer's lora_A then lora_B right after its base_layer's tensors;
 * LoraLayer.__init__, peft/tuners/lora/layer.py lines 125-131, and
 * LoraModel._replace_module, model.py line 351, which keeps the parent's
 * order): the step description's tensor order, a fused tensor's parts in
 * their row order. Every linear layer but the output embedding (lm_head,
 * which PEFT adapts when named: refused by name in util/autograd.c) and
 * the tables is a candidate. Returns 0, or -1 with *cause where no
 * layer matches (PEFT's "Target modules ... not found in the base model",
 * tuners_utils.py lines 990-1011) or r is 0. */
int zs_lora_build(struct zs_lora_set *s, const struct step_params *p, const struct zs_model *m, unsigned r,
                  const char *targets, char **cause);
void zs_lora_free(struct zs_lora_set *s);

/* LoRA in the step description (docs/finetune.md, "LoRA under the
 * paper's schedule and DeepSpeed's own step"): add s's adapters (built
 * over this p) to p, each adapted module's lora_A [r, in] then lora_B
 * [out, r] modules of their own (step_module's adapter), one weight each,
 * right after it in the modules' (forward) order and at the end of its
 * layer's tensors (a layer's base tensors first: its trained elements
 * are its tail), and mark every base tensor frozen, the adapters trained
 * (PEFT's mark_only_lora_as_trainable, bias "none"); `dropout`,
 * --lora-dropout, goes in p->lora_dropout (which of the inputs the step
 * keeps: util/step.h's step_buffers_lora). */
void zs_lora_describe(struct step_params *p, const struct zs_lora_set *s, double dropout);

/* PEFT's name of a targeted layer's adapter module under it, lora_A
 * (b = 0) or lora_B (b = 1), adapter "default" (LoraLayer.update_layer's
 * self.lora_A[adapter_name] and self.lora_B[adapter_name], ModuleDicts:
 * peft/tuners/lora/layer.py lines 259-260 at v0.20.0, docs/finetune.md;
 * get_peft_model's adapter_name "default"): "lora_A.default"; its weight
 * is MODULE.lora_A.default.weight. The one spelling zs_lora_describe and
 * the PyTorch step's list (util/autograd.c) name adapters by. */
const char *zs_lora_module(int b);

/* The step description zerosim's own step runs for c over `shape` (the
 * model the kernels run; hf, the model read, names PEFT's default targets
 * by its model_type): step_params_build, --freeze's marks
 * (zs_freeze_saved_spec), then under --framework paper with --lora-r
 * c's adapters (zs_lora_build, zs_lora_describe). The one place the
 * engine's layout, its net and the theory's walk take it from. Returns 0,
 * or -1 with *cause (p released) where no layer matches the targets. */
int zs_lora_step_params(struct step_params *p, const struct zs_model *shape, const struct zs_model *hf,
                        const struct zs_config *c, char **cause);
/* PEFT's model for c over `shape`, whatever the framework runs it
 * (get_peft_model: every base parameter frozen, the adapters trained):
 * zs_lora_step_params's description under --framework paper, and the
 * same parameters under every framework that takes --lora-r (the PyTorch
 * step, util/autograd.c, makes its own adapters from zs_lora_target):
 * what the theory's floors and paper level count, Ψ the base's and the
 * adapters' elements, Ψ_t the adapters' (docs/schedule.md, "The floors
 * under `--freeze`"). Returns 0, or -1 with *cause (p released). */
int zs_lora_params(struct step_params *p, const struct zs_model *shape, const struct zs_model *hf,
                   const struct zs_config *c, char **cause);
/* --lora-r under --framework paper (0 under any other, or without it):
 * what the paper's step runs with adapters, every --unit and --schemes
 * of c laid out over m's description (zs_freeze_units), or -1 with one
 * line in *cause (the MLP, a mixture of experts, a gemma, --unit model,
 * zero3 at N > 1, targets that match nothing; with --freeze, which then
 * names adapters: a term that names none, a pattern that freezes them
 * all, a block whose trained adapters are not one run). */
int zs_lora_paper_check(const struct zs_config *c, const struct zs_model *m, char **cause);
/* Whether zerosim's own step runs c's adapters (util/lora.h's description
 * in the engine's net and the theory's walk): --lora-r under --framework
 * paper, or deepspeed without --wrapper deepspeed (DeepSpeed's own step). */
int zs_lora_engine(const struct zs_config *c);

/* The adapters' elements, Σ r·(in + out): PEFT's trainable count
 * (PeftModel.get_nb_trainable_parameters, peft_model.py line 955). */
uint64_t zs_lora_trained(const struct zs_lora_set *s);

#endif
