/*
 * report_tfm_data — a transformer's files as the report holds them: each
 * model (its theory.json's config and units) with its rows, joined with
 * its measured runs. report_tfm (report_tfm.h) loads them and writes the
 * transformer section; report_figures draws fig7-transformer and
 * fig9-host-transformer from them. The types are here, below both, since
 * the section's writer draws its figures with report_figures.
 */
#ifndef ZS_REPORT_TFM_DATA_H
#define ZS_REPORT_TFM_DATA_H

#include <stddef.h>

#include "report/report_data.h"
#include "report/report_moe.h"
#include "util/freeze.h"
#include "util/model.h"

/* One theory row of a transformer. Bytes are per rank. */
struct report_tfm_row {
	/* The run, as the MLP's (report_data.h): its key; the paper's floor
	 * (run.floor, floor.resident_bytes) and ZeRO-3's largest unit
	 * (run.largest_unit, elements), from the theory; the exact schedule of
	 * zerosim's own transformer (run.has_schedule) where the theory has one
	 * for the request; the measurement of the same (scheme, world, unit)
	 * where a measured.json of the model was given (run.has_measured), with
	 * the host bytes of an offloaded one. The comm bytes are -1 where a file
	 * does not give them. */
	struct report_run run;
	/* The theory's own level: the schedule's model states with
	 * Korthikanti's activations (peak.*). */
	double resident, padding, gathered, full_grads, activations, peak;
	double peak_bd[REPORT_NCATS];        /* peak.peak_breakdown */
	double *act;                         /* peak.activations_breakdown, by term (nterms) */
	double s_imbalance;                  /* schedule.imbalance_bytes (a framework's), or 0 */
	/* report_run_unexplained(&run), the MLP's rule: the measurement and
	 * the schedule differ by a byte in resident, peak, a category of
	 * either, or the comm bytes (where both files give them). */
	int unexplained;
	/* Measured where the theory has no schedule to check it against. */
	int unchecked;
	/* A mixture's departure by its routing (report_moe.h): the note
	 * naming it (the row is then not unexplained), or one giving the size
	 * beyond the routing's bound (it stays unexplained), or NULL. */
	char *routing;
};

struct report_tfm_model {
	const char *path;                    /* the theory.json, as given */
	char name[64], family[16], precision[16], recompute[16], optimizer[16];
	char framework[16];                  /* config.framework: paper, torch, deepspeed */
	char offload[16];                    /* config.deepspeed.offload, "none" when absent */
	struct report_framework fw;          /* its settings; strings valid while loading only */
	double params, seq, batch, hidden, blocks, heads, kv_heads, vocab, ffn;
	/* --freeze: config.freeze as written, "" for a run that trains every
	 * parameter, and Ψ_t, the trained ones (theory.json's
	 * trainable_params; params without freeze), which its floors count */
	char freeze[ZS_FREEZE_MAX + 1];
	double trained;
	/* --lora-r under any step (config.lora_r, 0 without): the adapters
	 * are Ψ_t, the base frozen (docs/finetune.md); the targets as the
	 * file names them ("default": the family's); the PyTorch step's
	 * dropout on the adapters' input and QLoRA's 4-bit base
	 * (config.quant_base nf4, double_quant) */
	double lora_r, lora_alpha, lora_dropout;
	int nf4, double_quant;
	/* with nf4: the base's 4-bit linear weights and the bytes stored for
	 * them (util/nf4.h's nf4_base_count over config.model's description) */
	double q4_weights, q4_held;
	char lora_targets[ZS_LORA_TARGETS_MAX + 1];
	/* from the step description (util/lora.h's zs_lora_build over
	 * config.model): the targets it resolved ("default": PEFT's for the
	 * family), its adapters and Σ r over them (x·Aᵀ's width) */
	char lora_resolved[ZS_LORA_TARGETS_MAX + 1];
	double lora_n, lora_rsum;
	/* Σ in over the adapters (the dropout's copies' width), and the
	 * adapters' elements --freeze freezes (config.freeze with LoRA) */
	double lora_insum, lora_frozen;
	int tied, flash;
	int torch_step;                      /* config.wrapper none, ddp or fsdp: the PyTorch step, not zerosim's own */
	int ds_step;                         /* config.wrapper deepspeed: DeepSpeed's engine over the PyTorch step */
	int dropout;                         /* the PyTorch step's config.model has a dropout probability > 0 */
	double u_embeddings, u_block, u_head;   /* elements; u_head 0 when tied */
	double p, g, k;                      /* bytes per working param, grad, optimizer state */
	struct cJSON *model;                 /* config.model without its units, to match a measurement's */
	char **term;                         /* activation terms, in the file's order */
	size_t nterms;
	struct report_tfm_row *rows;
	size_t nrows;
	const char *measured_path;           /* its measured.json, or NULL */
	struct report_moe moe;               /* a mixture's theory routing (config.routing) */
	/* config.model.model_type, and the shape read back from config.model
	 * (util/model.h's zs_model_from_written; a mixture's as its dense
	 * attention block, its experts from config.routing), whose step
	 * description (util/step.h) names the family's departures from
	 * Korthikanti's layer; has_shape 0 where it cannot be read back. */
	char model_type[32];
	struct zs_model shape;
	int has_shape, mixture;
};

struct report_tfm {
	struct report_tfm_model *models;     /* as many as given (fig7 draws a panel each) */
	size_t n;
};

/* Whether any model carries a measurement. */
int report_tfm_measured(const struct report_tfm *t);

/* The unit the section shows (layer when the file has it), the largest N
 * of that unit, and a row, or NULL. */
enum zs_unit report_tfm_unit(const struct report_tfm_model *m);
unsigned report_tfm_world(const struct report_tfm_model *m);
const struct report_tfm_row *report_tfm_find(const struct report_tfm_model *m, enum zs_scheme s,
                                             unsigned world, enum zs_unit u);

#endif
