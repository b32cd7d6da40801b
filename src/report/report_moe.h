/*
 * report_moe — a mixture of experts' routing in the report (docs/design.md,
 * "The report"; the rule is docs/schedule.md's, "Mixtures of experts"): a
 * theory made with --routing balanced or worst takes every block's counts
 * alike, the measured run's router did not. Since Σ n_e = B·T·k whatever
 * the routing, the saved tensors' bytes stay; what moves is the busiest
 * expert's backward scratch, config.routing.routed_bytes_per_token a token
 * of the step's largest count. So a row whose peak departs by that alone,
 * within the bound its counts give, is named: "routing imbalance" above a
 * balanced theory, "within the worst-case routing bound" below a worst
 * one; a departure beyond the bound, or in the activations, stays
 * unexplained with its size. With --routing FILE of the same measurement
 * there is none to name.
 *
 * Ownership: report_moe_theory fills a struct whose list and arg it
 * allocates (report_moe_free releases them); a note is the caller's to free().
 */
#ifndef ZS_REPORT_MOE_H
#define ZS_REPORT_MOE_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "report/report_data.h"

enum report_moe_mode { REPORT_MOE_NONE, REPORT_MOE_BALANCED, REPORT_MOE_WORST };

struct report_moe {
	enum report_moe_mode mode;   /* the theory's config.routing.mode; NONE for a file's or none */
	double *tokens;              /* its tokens per expert, every block's */
	size_t experts;
	double top;                  /* the largest of them */
	double assignments;          /* their sum, B·T·k: what every block of a step routes */
	double token_bytes;          /* config.routing.routed_bytes_per_token; 0 where the file has none */
	char *arg;                   /* report_moe_arg's */
	cJSON *measured;             /* the first joined measured run's "routing" (report_moe_keep), for the figure */
	char measured_label[96];     /* its row's label */
};

/* The --routing the theory was made with, as its config.routing records
 * it: "balanced", "worst" or the FILE as given; NULL for a model without
 * experts (or a theory.json without config.routing). The caller frees it. */
char *report_moe_arg(const cJSON *theory);

/* Whether two report_moe_arg's name the same routing (NULL only NULL's):
 * one FILE under two spellings of its path counts as two. */
int report_moe_same(const char *a, const char *b);

/* The theory's config.routing into out (nothing for a file without it). 0,
 * or -1 with *cause for a malformed one. */
int report_moe_theory(const cJSON *theory, const char *path, struct report_moe *out, char **cause);
void report_moe_free(struct report_moe *t);

/* Whether measured run `run` (r, joined to a balanced or worst theory row)
 * departs by its routing alone: it records counts other than the
 * theory's, resident, comm and every category of the peak but the scratch
 * agree, and the peak departs by no more than the counts allow. Then 1,
 * and *note is one line naming it. 0 otherwise, with *note one line giving
 * the size beyond the bound where only the activations and scratch depart
 * (else NULL). */
int report_moe_imbalance(const struct report_moe *t, const cJSON *run, const struct report_run *r, char **note);

/* What the summary calls the rows report_moe_imbalance named. */
const char *report_moe_named(const struct report_moe *t);

/* Keep the measured run's routing (its "routing" object, copied) for the
 * figure, where t is a balanced or worst theory's and none is kept yet;
 * label names the run's row. */
void report_moe_keep(struct report_moe *t, const cJSON *run, const char *label);

#define REPORT_FIGURE_MOE "fig12-moe"
/* fig12-moe in dir: the kept run's tokens per expert of each block, the
 * mean over its ranks and steps as a bar, their least and most as an error
 * bar, beside the theory's (balanced's or worst's) as a mark; model names
 * the model. Where nothing is kept, the figure's files are removed. 0, or
 * -1 with *cause. */
int report_moe_figure(const struct report_moe *t, const char *model, const char *dir, char **cause);

#endif
