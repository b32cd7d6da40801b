/*
 * report_torch — the report's section "zerosim against PyTorch": for each
 * transformer given as a plain PyTorch loop's theory.json (`zerosim theory
 * --framework torch --wrapper none`, given to `zerosim report` with
 * --transformer like any transformer's theory), its peak beside the
 * paper's (`--framework paper`, the dp row at N = 1 of the same model's
 * theory.json, also given with --transformer), broken down by what is
 * alive there, every departure named with its bytes.
 *
 * Every figure comes from the files: the plain loop's schedule.peak_live
 * (the live storages at each phase's most, grouped by what made them),
 * schedule.mark_live (the same at each module's backward start) and its
 * resident and phase peaks (docs/formats.md); the paper's schedule
 * breakdown. The groups are sorted into classes by the op and module that
 * made them (report_torch_class); nothing is computed from the config.
 *
 * It writes torch.tex (the template inputs it when present) and
 * figures/fig11-torch.gp, .dat, or removes them when no plain loop was
 * given, so that a reused folder shows no stale section.
 */
#ifndef ZS_REPORT_TORCH_H
#define ZS_REPORT_TORCH_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "report/report_tfm_data.h"

#define REPORT_TORCH_TEX "torch.tex"
#define REPORT_FIGURE_TORCH "fig11-torch"

/* What a byte at the peak is, on either side. The paper's side has the
 * first three and ACT and SCRATCH (its schedule's categories); the rest
 * are PyTorch's departures from it. */
enum report_torch_class {
	RT_PARAM,    /* parameters */
	RT_GRAD,     /* .grad */
	RT_ADAM,     /* Adam's m and v */
	RT_ACT,      /* activations kept for backward (and the loop's logits) */
	RT_SCRATCH,  /* the paper's preallocated backward scratch */
	RT_BWD,      /* backward's gradients in flight */
	RT_LOSS,     /* the loss's buffers: log-softmax, its gradient, the labels */
	RT_TIED,     /* the tied head's gradient held in autograd's input buffer */
	RT_OPBYOP,   /* op-by-op GELU's or RMSNorm's intermediate tensors */
	RT_DROPOUT,  /* dropout's noise autograd keeps (the CPU's _dropout_impl) */
	RT_OPTIM,    /* the optimizer's temporaries */
	RT_STEP,     /* Adam's step counters */
	RT_BUFFER,   /* the model's registered buffers (causal mask, inv_freq) */
	RT_INPUT,    /* the batch: input ids and labels */
	RT_DEQUANT,  /* QLoRA: the 4-bit base's dequantized weight (and absmax), per layer */
	RT_QCLONE,   /* QLoRA: PEFT's defensive clone of the 4-bit layer's result */
	RT_NCLASSES
};
extern const char *const report_torch_class_title[RT_NCLASSES];

/* The class of one group of schedule.peak_live: its role, the op that
 * made it (`what`), its module kind (NULL for none), the phase it was
 * made in, and whether the model ties its head to the token table. */
enum report_torch_class report_torch_class(const char *role, const char *what, const char *module,
                                           const char *made, int tied);

enum { RT_FORWARD, RT_BACKWARD, RT_OPTIMIZER, RT_NPHASES };

/* One plain loop's run. Bytes are the one rank's. */
struct report_torch_run {
	const char *path;
	char name[64], model_type[32], version[8], zero_grad[8], optim_impl[16], attn[8], device[8];
	char freeze[128];                    /* config.freeze, "" when every parameter is trained */
	double grad_accum;                   /* config.grad_accum, 1 when absent */
	double lora_r;                       /* config.lora_r, 0 without LoRA */
	char lora_targets[128];              /* config.lora_targets, "" without LoRA */
	double lora_alpha, lora_dropout;     /* config.lora_alpha, lora_dropout; 0 without LoRA */
	int nf4, double_quant;               /* config.quant_base "nf4", config.double_quant true */
	/* a frozen or LoRA run: Ψ, Ψ_t (report_read_trained) and its own paper
	 * level's grads and Adam state at the peak (rows[0].peak, g and k over
	 * Ψ_t): what its gradients and Adam's state are judged against, and
	 * that level's peak, what a LoRA run's peak is a multiple of (the
	 * adapters trained, not the whole model); 0 where every parameter
	 * trains */
	double params, trained, level_grad, level_adam, level_peak;
	char precision[16];                  /* config.precision: fp32, amp-bf16 */
	int tied;
	double seq, batch;
	double resident, peak;
	double phase_peak[RT_NPHASES];       /* -1 where the file has none */
	int binding;                         /* the phase of the peak (RT_*) */
	double cls[RT_NCLASSES];             /* the peak by class (the binding phase's groups) */
	double opt_cls[RT_NCLASSES];         /* the optimizer step's most by class */
	double resident_grads;               /* resident_breakdown's grads */
	/* the tied head's gradient at the module-backward starts
	 * (mark_live): the most held, and the first and last marks holding it */
	double held;
	char held_from[48], held_to[48];
};

/* The paper's side of one model: the dp row at N = 1, unit layer. */
struct report_torch_model {
	char name[64];
	double seq, batch;
	double paper_peak, paper_resident;
	double paper_cls[RT_NCLASSES];
	char paper_binding[16];              /* the paper row's schedule.binding_phase, "" when not given */
	char *routing;                       /* a mixture's --routing (report_moe_arg), every run's; NULL without */
	struct report_torch_run *runs;       /* in the order given */
	size_t nruns;
};

/* The paper's rows seen among the other --transformer files: each one's
 * model, seq, batch and its dp row's (N = 1, unit layer) binding phase. */
struct report_torch_paper {
	char name[64], binding[16];
	double seq, batch;
};

struct report_torch {
	struct report_torch_model *models;
	size_t n;
	struct report_torch_paper *papers;
	size_t npapers;
};

/* Whether a parsed theory.json is a plain loop's (config.wrapper "none"). */
int report_torch_is_plain(const cJSON *theory);

/* Add a plain loop's theory.json (checked: its byte counts, the groups
 * summing to their phase's most) to t. -1 with *cause set on bad input. */
int report_torch_add(struct report_torch *t, const cJSON *theory, const char *path, char **cause);

/* Note a theory.json of the paper (config.framework absent or "paper"):
 * its dp row's binding phase, for report_torch_join. Anything else, or a
 * file without one, is passed over (the transformer section checks it). */
void report_torch_note_paper(struct report_torch *t, const cJSON *theory);

/* Join each model with the paper's dp row of the same model, seq, batch
 * and routing in tf (a transformer given with --transformer); -1 with
 * *cause set where none is given, or only one at another routing. */
int report_torch_join(struct report_torch *t, const struct report_tfm *tf, char **cause);

void report_torch_free(struct report_torch *t);

/* Write torch.tex into `out`, or remove it when t holds no model
 * (fig11's script and data are report_figures_torch's). */
int report_torch_write(const struct report_torch *t, const char *out, char **cause);

/* Run k of model m as the table, the text and fig11 name it: "2.6", or,
 * where another run of the model follows the same release, the release
 * with the settings that tell them apart ("2.6, set_to_none, sdpa"). */
const char *report_torch_label(const struct report_torch_model *m, size_t k, char *buf, size_t n);

#endif
