/*
 * report_moe — see report_moe.h.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/buf.h"
#include "report/report_moe.h"
#include "util/model.h"
#include "util/util.h"

static const char *const mode_names[] = {NULL, "balanced", "worst"};

static int read_theory(const cJSON *theory, const char *path, struct report_moe *out, char **cause)
{
	memset(out, 0, sizeof *out);
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(theory, "config");
	const cJSON *rt = cJSON_GetObjectItemCaseSensitive(cfg, "routing"), *tok, *v;
	const char *mode;
	if (rt == NULL)
		return 0;
	if (zs_json_string(rt, "mode", "config.routing", &mode, cause) < 0)
		return -1;
	enum report_moe_mode m = REPORT_MOE_NONE;
	for (int i = REPORT_MOE_BALANCED; i <= REPORT_MOE_WORST; i++)
		if (strcmp(mode, mode_names[i]) == 0)
			m = (enum report_moe_mode)i;
	if (m == REPORT_MOE_NONE)
		return 0;
	if (zs_json_array(rt, "tokens_per_expert", "config.routing", &tok, cause) < 0)
		return -1;
	/* A token's bytes are a share of a step: a whole, positive number no
	 * larger than the theory's largest peak (a peak holds at least the
	 * busiest expert's scratch). Additive: a theory.json from before it has
	 * no bound to give. */
	double cap = 0x1p53;
	const cJSON *row;
	cJSON_ArrayForEach(row, cJSON_GetObjectItemCaseSensitive(theory, "rows")) {
		const cJSON *pk = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(row, "schedule"),
		                                                   "peak_bytes");
		if (cJSON_IsNumber(pk) && pk->valuedouble > 0 && (cap == 0x1p53 || pk->valuedouble > cap))
			cap = fmin(pk->valuedouble, 0x1p53);
	}
	const cJSON *tb = cJSON_GetObjectItemCaseSensitive(rt, "routed_bytes_per_token");
	if (tb != NULL && (!cJSON_IsNumber(tb) || !(tb->valuedouble >= 1) || tb->valuedouble > cap ||
	                   tb->valuedouble != floor(tb->valuedouble)))
		return zs_fail(cause, "%s: config.routing.routed_bytes_per_token: not a whole number of bytes from 1 to "
		               "%.0f (the theory's largest peak)", path, cap);
	/* the counts --routing balanced or worst makes: E of them (1 to the
	 * most experts a model has), whole, balanced's within one of each
	 * other, worst's each 0 or the largest */
	out->experts = (size_t)cJSON_GetArraySize(tok);
	if (out->experts == 0 || out->experts > ZS_MODEL_MAX_EXPERTS)
		return zs_fail(cause, "%s: config.routing.tokens_per_expert: %zu experts, not 1 to %d", path, out->experts,
		               ZS_MODEL_MAX_EXPERTS);
	out->tokens = zs_calloc(out->experts, sizeof *out->tokens);
	size_t e = 0;
	double low = 0x1p53;
	cJSON_ArrayForEach(v, tok) {
		if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > 0x1p53 ||
		    v->valuedouble != floor(v->valuedouble)) {
			report_moe_free(out);
			return zs_fail(cause, "%s: config.routing.tokens_per_expert: not a list of counts", path);
		}
		out->tokens[e++] = v->valuedouble;
		out->top = v->valuedouble > out->top ? v->valuedouble : out->top;
		low = fmin(low, v->valuedouble);
	}
	int made = out->top > 0 && (m == REPORT_MOE_BALANCED ? out->top - low <= 1 : 1);
	for (e = 0; m == REPORT_MOE_WORST && e < out->experts; e++)
		made &= out->tokens[e] == 0 || out->tokens[e] == out->top;
	if (!made) {
		report_moe_free(out);
		return zs_fail(cause, "%s: config.routing.tokens_per_expert: not counts --routing %s makes", path,
		               mode_names[m]);
	}
	for (e = 0; e < out->experts; e++)
		out->assignments += out->tokens[e];
	out->token_bytes = tb != NULL ? tb->valuedouble : 0;
	out->mode = m;
	return 0;
}

char *report_moe_arg(const cJSON *theory)
{
	const cJSON *rt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(theory, "config"), "routing");
	const char *mode = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rt, "mode"));
	const char *file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rt, "file"));
	if (mode == NULL)
		return NULL;
	return zs_strdup(strcmp(mode, "file") == 0 && file != NULL ? file : mode);
}

int report_moe_theory(const cJSON *theory, const char *path, struct report_moe *out, char **cause)
{
	if (read_theory(theory, path, out, cause) < 0)
		return -1;
	out->arg = report_moe_arg(theory);
	return 0;
}

int report_moe_same(const char *a, const char *b)
{
	return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

void report_moe_free(struct report_moe *t)
{
	free(t->arg);
	free(t->tokens);
	cJSON_Delete(t->measured);
	memset(t, 0, sizeof *t);
}

const char *report_moe_named(const struct report_moe *t)
{
	return t->mode == REPORT_MOE_WORST ? "within the worst-case routing bound (the theory's --routing worst)"
	                                   : "departing by routing imbalance (the theory's --routing balanced)";
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

/* A measured run's counts ([rank][step][block][expert]) as the bound
 * takes them: the largest of any rank, step and block, where it is, and
 * of each step's largest (over its ranks and blocks: the scratch is sized
 * by the most tokens any expert of any block got that step) the least. */
struct run_counts {
	double top, low;
	const cJSON *most;           /* the block list holding top */
	int rank, step, block;
	int differs;                 /* a count other than the theory's */
};

/* NULL, or why the counts are not ones a router makes: a router of the
 * theory's model routes B·T·k assignments (the theory's sum) in every
 * block of every step, to its E experts, over the run's blocks, every rank
 * the same steps (docs/schedule.md, "Mixtures of experts"). */
static const char *run_counts(const struct report_moe *t, const cJSON *rt, const cJSON *tok, struct run_counts *c)
{
	const cJSON *rank, *step, *block, *v;
	const cJSON *nb = cJSON_GetObjectItemCaseSensitive(rt, "blocks");
	/* under the PyTorch step's --grad-accum K a step lists its K
	 * micro-steps' blocks ("micro_steps", docs/formats.md) */
	const cJSON *nm = cJSON_GetObjectItemCaseSensitive(rt, "micro_steps");
	double micro = cJSON_IsNumber(nm) ? nm->valuedouble : 1;
	double *step_top = NULL;
	size_t nsteps = 0;
	int k = 0;
	const char *why = NULL;
	memset(c, 0, sizeof *c);
	c->top = -1;
	cJSON_ArrayForEach(rank, tok) {
		size_t s = 0;
		cJSON_ArrayForEach(step, rank) {
			if (s == nsteps) {
				if (k > 0) {
					why = "a rank of more steps than the first";
					goto end;
				}
				step_top = zs_realloc(step_top, ++nsteps * sizeof *step_top);
				step_top[s] = 0;
			}
			int l = 0;
			cJSON_ArrayForEach(block, step) {
				size_t e = 0;
				double sum = 0;
				cJSON_ArrayForEach(v, block) {
					if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > t->assignments ||
					    v->valuedouble != floor(v->valuedouble)) {
						why = "a count that is not a whole number up to the B·T·k a block routes";
						goto end;
					}
					double n = v->valuedouble;
					if (t->mode == REPORT_MOE_WORST && n > t->top) { /* worst's largest is B·T */
						why = "a count above the B·T tokens a block has";
						goto end;
					}
					sum += n;
					c->differs |= n != t->tokens[e < t->experts ? e : 0];
					step_top[s] = n > step_top[s] ? n : step_top[s];
					if (n > c->top) {
						c->top = n;
						c->most = block;
						c->rank = k, c->step = (int)s, c->block = l;
					}
					e++;
				}
				if (e != t->experts) {
					why = "a block of other than the theory's experts";
					goto end;
				}
				if (sum != t->assignments) {
					why = "a block routing other than the theory's B·T·k assignments";
					goto end;
				}
				l++;
			}
			if (l == 0 || (cJSON_IsNumber(nb) && l != nb->valuedouble * micro)) {
				why = "a step of other than the run's blocks";
				goto end;
			}
			s++;
		}
		if (s != nsteps) {
			why = "a rank of fewer steps than the first";
			goto end;
		}
		k++;
	}
	c->low = c->top;
	for (size_t s = 0; s < nsteps; s++)
		c->low = step_top[s] < c->low ? step_top[s] : c->low;
	if (c->most == NULL)
		why = "no counts";
end:
	free(step_top);
	return why;
}

int report_moe_imbalance(const struct report_moe *t, const cJSON *run, const struct report_run *r, char **note)
{
	const cJSON *rt = cJSON_GetObjectItemCaseSensitive(run, "routing");
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(rt, "tokens_per_expert");
	struct run_counts c;
	*note = NULL;
	if (t->mode == REPORT_MOE_NONE || !cJSON_IsArray(tok) || !r->has_measured || !r->has_schedule ||
	    r->measured[REPORT_RESIDENT] != r->schedule[REPORT_RESIDENT] || r->measured[REPORT_COMM] != r->schedule[REPORT_COMM])
		return 0;
	for (int k = 0; k < REPORT_NCATS && r->has_sched_peak_bd; k++)
		if (k != REPORT_CAT_ACTIVATIONS && k != REPORT_CAT_SCRATCH && r->peak_bd[k] != r->sched_peak_bd[k])
			return 0;
	const char *why = run_counts(t, rt, tok, &c);
	if (why != NULL) {
		*note = zs_asprintf("measured routing.tokens_per_expert has %s: no router made it, the departure is not "
		                    "named", why);
		return 0;
	}
	if (!c.differs)
		return 0;
	/* The peak departs by the busiest expert's scratch alone: a step of
	 * largest count n is (n − top) tokens of it off the theory's at every
	 * moment of its backward, and equal elsewhere. So the peak's departure
	 * lies between (low − top)·u and (top_measured − top)·u, each bound
	 * clipped at 0 (docs/schedule.md, "Mixtures of experts"). */
	const char *mode = mode_names[t->mode];
	double u = t->token_bytes, d = r->measured[REPORT_PEAK] - r->schedule[REPORT_PEAK];
	double hi = fmax(0, c.top - t->top) * u, lo = fmin(0, c.low - t->top) * u;
	double act = r->has_sched_peak_bd ? r->peak_bd[REPORT_CAT_ACTIVATIONS] - r->sched_peak_bd[REPORT_CAT_ACTIVATIONS] : 0;
	double scr = r->has_sched_peak_bd ? r->peak_bd[REPORT_CAT_SCRATCH] - r->sched_peak_bd[REPORT_CAT_SCRATCH] : d;
	struct zs_buf b = {0};
	if (u > 0 && act == 0 && scr == d && d >= lo && d <= hi) {
		zs_buf_printf(&b, "%s: measured tokens per expert ", t->mode == REPORT_MOE_WORST
		                                                      ? "within the worst-case routing bound" : "routing imbalance");
		counts(&b, c.most);
		zs_buf_printf(&b, " (rank %d, step %d, block %d: the most on one expert) beside %s [", c.rank, c.step + 1,
		              c.block, mode);
		for (size_t e = 0; e < t->experts; e++)
			zs_buf_printf(&b, "%s%.0f", e > 0 ? ", " : "", t->tokens[e]);
		zs_buf_printf(&b, "]; peak %.0f B measured, %.0f B %s: %+.0f B, within %.0f to %.0f B (%.0f B a routed "
		              "token)", r->measured[REPORT_PEAK], r->schedule[REPORT_PEAK], mode, d, lo, hi, u);
		*note = zs_buf_take(&b);
		return 1;
	}
	if (u == 0)
		zs_buf_printf(&b, "config.routing has no routed_bytes_per_token (a theory.json from before it): the routing's "
		              "share of the peak's %+.0f B cannot be bounded; rerun zerosim theory", d);
	else
		zs_buf_printf(&b, "the routing (--routing %s; tokens per expert up to %.0f measured, %.0f %s) moves the peak "
		              "by %.0f to %.0f B (%.0f B a routed token) and the activations by none; measured: peak %+.0f B "
		              "(%.0f B beyond), activations %+.0f B, scratch %+.0f B", mode, c.top, t->top, mode, lo, hi, u,
		              d, d > hi ? d - hi : d < lo ? lo - d : 0, act, scr);
	*note = zs_buf_take(&b);
	return 0;
}

void report_moe_keep(struct report_moe *t, const cJSON *run, const char *label)
{
	const cJSON *rt = cJSON_GetObjectItemCaseSensitive(run, "routing");
	struct run_counts c;
	if (t->mode == REPORT_MOE_NONE || t->measured != NULL || !cJSON_IsObject(rt) ||
	    run_counts(t, rt, cJSON_GetObjectItemCaseSensitive(rt, "tokens_per_expert"), &c) != NULL)
		return; /* (counts no router made are not drawn: report_moe_imbalance names them) */
	t->measured = cJSON_Duplicate(rt, 1);
	snprintf(t->measured_label, sizeof t->measured_label, "%s", label);
}

static void remove_moe_figure(const char *dir)
{
	static const char *const ext[] = {"gp", "dat", "pdf", "png"};
	for (size_t i = 0; i < 4; i++) {
		char *path = zs_asprintf("%s/%s.%s", dir, REPORT_FIGURE_MOE, ext[i]);
		remove(path);
		free(path);
	}
}

int report_moe_figure(const struct report_moe *t, const char *model, const char *dir, char **cause)
{
	if (t->measured == NULL) {
		remove_moe_figure(dir);
		return 0;
	}
	const cJSON *tok = cJSON_GetObjectItemCaseSensitive(t->measured, "tokens_per_expert");
	const cJSON *nb = cJSON_GetObjectItemCaseSensitive(t->measured, "blocks");
	size_t E = t->experts, L = cJSON_IsNumber(nb) ? (size_t)nb->valuedouble : 0;
	if (L == 0) /* (run_counts held every step to blocks x micro_steps lists) */
		L = (size_t)cJSON_GetArraySize(cJSON_GetArrayItem(cJSON_GetArrayItem(tok, 0), 0));
	double *sum = zs_calloc(L * E, sizeof *sum), *lo = zs_calloc(L * E, sizeof *lo), *hi = zs_calloc(L * E, sizeof *hi);
	double n = 0;
	for (size_t i = 0; i < L * E; i++)
		lo[i] = 0x1p53;
	const cJSON *rank, *step, *block, *v;
	cJSON_ArrayForEach(rank, tok) {
		cJSON_ArrayForEach(step, rank) {
			size_t l = 0;
			cJSON_ArrayForEach(block, step) { /* under --grad-accum K: K micro-steps' L blocks each */
				size_t e = 0;
				cJSON_ArrayForEach(v, block) {
					size_t i = (l % L) * E + e++;
					sum[i] += v->valuedouble;
					lo[i] = fmin(lo[i], v->valuedouble);
					hi[i] = fmax(hi[i], v->valuedouble);
				}
				if (++l % L == 0)
					n++;
			}
		}
	}
	const char *mode = mode_names[t->mode];
	struct zs_buf dat = {0}, gp = {0};
	zs_buf_printf(&dat, "# %s, %s: tokens per expert of each block, measured (the mean over the run's ranks and\n"
	              "# steps, their least and most) beside the theory's --routing %s, B*T*k = %.0f a block.\n"
	              "# x block expert mean least most %s\n", model, t->measured_label, mode, t->assignments, mode);
	double top = 0;
	for (size_t l = 0; l < L; l++)
		for (size_t e = 0; e < E; e++) {
			size_t i = l * E + e;
			zs_buf_printf(&dat, "%zu %zu %zu %.9g %.0f %.0f %.0f\n", l * (E + 1) + e, l, e, sum[i] / n, lo[i], hi[i],
			              t->tokens[e]);
			top = fmax(top, fmax(hi[i], t->tokens[e]));
		}
	zs_buf_printf(&gp,
		"# %s.gp, written by zerosim report: a mixture's tokens per expert, measured against --routing %s.\n"
		"# Reads %s.dat; run `gnuplot %s.gp` in this folder to rewrite %s.pdf and %s.png.\n"
		"set encoding utf8\nset grid ytics back lc rgb '#dddddd'\nset border 3\nset tics nomirror\n"
		"set title \"%s, %s: tokens per expert in each block, measured against %s\\n"
		"(bar: the mean over the run's ranks and steps; error bar: the least and most; mark: %s)\"\n"
		"set ylabel 'tokens routed to the expert'\nset xlabel 'expert, block by block'\n"
		"set yrange [0:%.0f]\nset xrange [-1:%zu]\nset boxwidth 0.8\nset style fill solid 0.6 border -1\n"
		"set key outside right top\nset xtics scale 0 (",
		REPORT_FIGURE_MOE, mode, REPORT_FIGURE_MOE, REPORT_FIGURE_MOE, REPORT_FIGURE_MOE, REPORT_FIGURE_MOE, model,
		t->measured_label, mode, mode, top * 1.15 + 1, L * (E + 1) - 1);
	for (size_t l = 0; l < L; l++)
		zs_buf_printf(&gp, "%s\"block %zu\" %.1f", l ? ", " : "", l, (double)(l * (E + 1)) + (double)(E - 1) / 2.0);
	zs_buf_printf(&gp, ")\n");
	if (L > 16)
		zs_buf_printf(&gp, "set xtics rotate by 90 font ',7'\n");
	char plot[512];
	snprintf(plot, sizeof plot,
	         "plot '%s.dat' using 1:4 with boxes lc rgb '#0072B2' title 'measured (mean)', \\\n"
	         "  '' using 1:4:5:6 with yerrorbars lc rgb '#000000' pt 7 ps 0 title 'measured (least, most)', \\\n"
	         "  '' using 1:7 with points lc rgb '#D55E00' pt 7 ps 1.5*pts title '%s (the theory)'",
	         REPORT_FIGURE_MOE, mode);
	zs_buf_printf(&gp,
		"set terminal pdfcairo enhanced size 6in,3.3in font 'Helvetica,9' linewidth 1.5\n"
		"pts = 0.6; set pointsize pts\nset output '%s.pdf'\n%s\n"
		"set terminal pngcairo enhanced size 1100,600 font 'Helvetica,12'\n"
		"pts = 1.2; set pointsize pts\nset output '%s.png'\nreplot\nset output\n",
		REPORT_FIGURE_MOE, plot, REPORT_FIGURE_MOE);
	char *path = zs_asprintf("%s/%s.dat", dir, REPORT_FIGURE_MOE);
	int rc = zs_buf_write(&dat, path, cause);
	free(path);
	path = zs_asprintf("%s/%s.gp", dir, REPORT_FIGURE_MOE);
	if (rc == 0)
		rc = zs_buf_write(&gp, path, cause);
	free(path);
	zs_buf_free(&dat);
	zs_buf_free(&gp);
	free(sum);
	free(lo);
	free(hi);
	return rc;
}
