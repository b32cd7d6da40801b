/*
 * report_tfm — the report's transformer section (`zerosim report
 * --transformer FILE`, once per model): from each model's theory.json
 * (`zerosim theory --model`, docs/formats.md "A transformer") it writes
 *
 *   transformer.tex       the section the template inputs when present: per
 *                         model its units (the largest, which ZeRO-3
 *                         gathers whole, named), the peak against the
 *                         paper's floor by cause, and Korthikanti et al.'s
 *                         activations term by term beside the engine's,
 *                         each departure with its cause
 *   figures/fig7-transformer.gp, .dat
 *                         the peak per rank by category at the largest N,
 *                         one panel per model (fig4's categories, colours
 *                         and patterns)
 *   figures/fig9-host-transformer.gp, .dat
 *                         with offloaded measurements, their host bytes per
 *                         rank against N (fig8's kind), a panel per model,
 *                         beside the section's host lines
 *
 * Without --transformer both are removed, so that a reused folder shows no
 * stale section and the MLP's report is what it was. Every number comes
 * from the files.
 */
#ifndef ZS_REPORT_TFM_H
#define ZS_REPORT_TFM_H

#include <stddef.h>

#include "report/report_data.h"

#define REPORT_FIGURE_TFM "fig7-transformer"
#define REPORT_TFM_TEX "transformer.tex"

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
};

struct report_tfm_model {
	const char *path;                    /* the theory.json, as given */
	char name[64], family[16], precision[16], recompute[16], optimizer[16];
	char framework[16];                  /* config.framework: paper, torch, deepspeed */
	char offload[16];                    /* config.deepspeed.offload, "none" when absent */
	struct report_framework fw;          /* its settings; strings valid while loading only */
	double params, seq, batch, hidden, blocks, heads, kv_heads, vocab, ffn;
	int tied, flash;
	double u_embeddings, u_block, u_head;   /* elements; u_head 0 when tied */
	double p, g, k;                      /* bytes per working param, grad, optimizer state */
	struct cJSON *model;                 /* config.model without its units, to match a measurement's */
	char **term;                         /* activation terms, in the file's order */
	size_t nterms;
	struct report_tfm_row *rows;
	size_t nrows;
	const char *measured_path;           /* its measured.json, or NULL */
};

struct report_tfm {
	struct report_tfm_model *models;     /* as many as given (fig7 draws a panel each) */
	size_t n;
};

/* Load every file: a transformer's theory.json (zerosim-theory/1), and
 * optionally its measured.json (zerosim-measured/1 of `zerosim measure
 * --model`), joined to the theory of the same model, precision and
 * framework on (scheme, world, unit) by the MLP's loader (report_load,
 * report_data.h). Checked as the MLP's files are (byte counts,
 * breakdowns that sum to their totals, no key, row or run given twice),
 * and no model given twice. -1 with *cause set on bad input (exit 2); the
 * caller frees *t with report_tfm_free(). */
int report_tfm_load(const char *const *paths, size_t n, struct report_tfm *t, char **cause);

/* The same from parsed trees (format not checked), added to t: a theory,
 * then the measurement of a model already added. */
int report_tfm_add(const cJSON *theory, const char *path, struct report_tfm *t, char **cause);
int report_tfm_add_measured(const cJSON *measured, const char *path, struct report_tfm *t,
                            char **cause);

/* Whether any model carries a measurement; how many measured runs the
 * schedule does not explain. */
int report_tfm_measured(const struct report_tfm *t);
size_t report_tfm_unexplained(const struct report_tfm *t);

/* Print one line per model on stdout (its runs, measured, unexplained) and
 * every unexplained run on stderr; returns the unexplained runs. Prints
 * nothing without a model. */
size_t report_tfm_summary(const struct report_tfm *t);

void report_tfm_free(struct report_tfm *t);

/* The unit the section shows (layer when the file has it), the largest N
 * of that unit, and a row, or NULL. */
enum zs_unit report_tfm_unit(const struct report_tfm_model *m);
unsigned report_tfm_world(const struct report_tfm_model *m);
const struct report_tfm_row *report_tfm_find(const struct report_tfm_model *m, enum zs_scheme s,
                                             unsigned world, enum zs_unit u);

/* flags.txt's lines of the transformers: each offloaded run's host
 * bytes (report_host_line), as the MLP's; nothing without one. */
void report_tfm_text(const struct report_tfm *t, struct zs_buf *b);

/* Write transformer.tex into `out` and fig7's script and data into
 * `figdir`, or remove them when t holds no model. */
int report_tfm_write(const struct report_tfm *t, const char *out, const char *figdir,
                     char **cause);

#endif
