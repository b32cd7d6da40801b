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
 * from the files. The rows loaded are report_tfm_data.h's types, which the
 * figures (report_figures.h) draw from.
 */
#ifndef ZS_REPORT_TFM_H
#define ZS_REPORT_TFM_H

#include <stddef.h>

#include "report/report_figures.h"
#include "report/report_tfm_data.h"

#define REPORT_TFM_TEX "transformer.tex"

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

/* How many measured runs the schedule does not explain. */
size_t report_tfm_unexplained(const struct report_tfm *t);

/* Print one line per model on stdout (its runs, measured, unexplained) and
 * every unexplained run on stderr; returns the unexplained runs. Prints
 * nothing without a model. */
size_t report_tfm_summary(const struct report_tfm *t);

void report_tfm_free(struct report_tfm *t);

/* diff.json's "transformers" (docs/formats.md): per model its name,
 * precision, framework, Ψ (and, frozen, freeze and trainable_params) and
 * the points of its measured rows that have a schedule, resident and
 * peak, against the floor as the MLP's (report_classify_point). The
 * caller owns the array. */
cJSON *report_tfm_diff_json(const struct report_tfm *t);

/* flags.txt's lines of the transformers: each offloaded run's host
 * bytes (report_host_line), as the MLP's; nothing without one. */
void report_tfm_text(const struct report_tfm *t, struct zs_buf *b);

/* Write transformer.tex into `out` and fig7's script and data into
 * `figdir`, or remove them when t holds no model. */
int report_tfm_write(const struct report_tfm *t, const char *out, const char *figdir,
                     char **cause);

#endif
