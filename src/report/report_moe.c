/*
 * report_moe — see report_moe.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "report/report_moe.h"
#include "util/util.h"

int report_moe_theory(const cJSON *theory, const char *path, struct report_moe *out, char **cause)
{
	memset(out, 0, sizeof *out);
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(theory, "config");
	const cJSON *rt = cJSON_GetObjectItemCaseSensitive(cfg, "routing"), *tok, *v;
	const char *mode;
	if (rt == NULL)
		return 0;
	if (zs_json_string(rt, "mode", "config.routing", &mode, cause) < 0)
		return -1;
	if (strcmp(mode, "balanced") != 0)
		return 0;
	if (zs_json_array(rt, "tokens_per_expert", "config.routing", &tok, cause) < 0)
		return -1;
	out->experts = (size_t)cJSON_GetArraySize(tok);
	out->tokens = zs_calloc(out->experts > 0 ? out->experts : 1, sizeof *out->tokens);
	size_t e = 0;
	cJSON_ArrayForEach(v, tok) {
		if (!cJSON_IsNumber(v)) {
			report_moe_free(out);
			return zs_fail(cause, "%s: config.routing.tokens_per_expert: not a list of counts", path);
		}
		out->tokens[e++] = v->valuedouble;
	}
	out->balanced = 1;
	return 0;
}

void report_moe_free(struct report_moe *t)
{
	free(t->tokens);
	memset(t, 0, sizeof *t);
}

/* A list of counts as "[41, 23, 30, 34]". */
static void counts(struct zs_buf *b, const cJSON *list)
{
	const cJSON *v;
	const char *sep = "";
	zs_buf_printf(b, "[");
	cJSON_ArrayForEach(v, list) {
		zs_buf_printf(b, "%s%.0f", sep, cJSON_IsNumber(v) ? v->valuedouble : -1);
		sep = ", ";
	}
	zs_buf_printf(b, "]");
}

int report_moe_imbalance(const struct report_moe *t, const cJSON *run, const struct report_run *r, char **note)
{
	const cJSON *rt = cJSON_GetObjectItemCaseSensitive(run, "routing");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(rt, "tokens_per_expert"), *rank, *step, *block, *v;
	if (!t->balanced || !cJSON_IsArray(tok) || !r->has_measured || !r->has_schedule ||
	    r->measured[REPORT_RESIDENT] != r->schedule[REPORT_RESIDENT] || r->measured[REPORT_COMM] != r->schedule[REPORT_COMM])
		return 0;
	for (int c = 0; c < REPORT_NCATS && r->has_sched_peak_bd; c++)
		if (c != REPORT_CAT_ACTIVATIONS && c != REPORT_CAT_SCRATCH && r->peak_bd[c] != r->sched_peak_bd[c])
			return 0;
	/* the block whose one expert got the most tokens: what moves the peak */
	const cJSON *most = NULL;
	double top = -1;
	int differs = 0, k = 0, at_k = 0, at_t = 0, at_l = 0;
	cJSON_ArrayForEach(rank, tok) {
		int s = 0;
		cJSON_ArrayForEach(step, rank) {
			int l = 0;
			cJSON_ArrayForEach(block, step) {
				size_t e = 0;
				cJSON_ArrayForEach(v, block) {
					double n = cJSON_IsNumber(v) ? v->valuedouble : -1;
					differs |= e >= t->experts || n != t->tokens[e];
					if (n > top) {
						top = n;
						most = block;
						at_k = k, at_t = s, at_l = l;
					}
					e++;
				}
				l++;
			}
			s++;
		}
		k++;
	}
	if (!differs || most == NULL)
		return 0;
	struct zs_buf b = {0};
	zs_buf_printf(&b, "routing imbalance: measured tokens per expert ");
	counts(&b, most);
	zs_buf_printf(&b, " (rank %d, step %d, block %d: the most on one expert) beside balanced [", at_k, at_t + 1, at_l);
	for (size_t e = 0; e < t->experts; e++)
		zs_buf_printf(&b, "%s%.0f", e > 0 ? ", " : "", t->tokens[e]);
	zs_buf_printf(&b, "]; peak %.0f B measured, %.0f B balanced", r->measured[REPORT_PEAK], r->schedule[REPORT_PEAK]);
	*note = zs_buf_take(&b);
	return 1;
}
