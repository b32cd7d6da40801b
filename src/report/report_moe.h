/*
 * report_moe — a mixture of experts' routing in the report (docs/design.md,
 * "The report"): a theory made with --routing balanced spreads each block's
 * B·T·k assignments evenly, the measured run's router did not, and the
 * peak moves with the largest expert (docs/schedule.md, "Mixtures of
 * experts"). Such a departure is named "routing imbalance", with the
 * measured counts beside the balanced ones, rather than unexplained; with
 * --routing FILE of the same measurement there is none to name.
 *
 * Ownership: report_moe_theory fills a struct whose list it allocates
 * (report_moe_free releases it); a note is the caller's to free().
 */
#ifndef ZS_REPORT_MOE_H
#define ZS_REPORT_MOE_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "report/report_data.h"

struct report_moe {
	int balanced;        /* the theory's config.routing.mode is "balanced" */
	double *tokens;      /* its tokens per expert, every block's */
	size_t experts;
};

/* The theory's config.routing into out (nothing for a file without it). 0,
 * or -1 with *cause for a malformed one. */
int report_moe_theory(const cJSON *theory, const char *path, struct report_moe *out, char **cause);
void report_moe_free(struct report_moe *t);

/* Whether measured run `run` (r, joined to a balanced theory row) departs
 * by its routing alone: the run records counts other than the balanced
 * ones, resident and comm agree, and of the peak's categories only the
 * activations and scratch differ. Then *note is one line naming it. */
int report_moe_imbalance(const struct report_moe *t, const cJSON *run, const struct report_run *r, char **note);

#endif
