/*
 * report_data — load, check and join measured.json and theory.json
 * (docs/formats.md). Everything the later stages need is copied into plain
 * structs here, so no other report module touches cJSON input.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_data.h"
#include "util/cuda_alloc.h"
#include "util/schedule.h"
#include "util/util.h"

/* The contract's categories (util/schedule.h), then "other". */
_Static_assert((int)REPORT_CAT_UNKNOWN == (int)ZS_NCATS, "report categories are the contract's");
_Static_assert((int)REPORT_NPHASES == (int)ZS_NPHASES, "report phases are the contract's");

const char *report_cat_name(enum report_cat c)
{
	return c == REPORT_CAT_UNKNOWN ? "other" : zs_cat_name((enum zs_cat)c);
}

int report_cat_is_state(enum report_cat c)
{
	return c <= REPORT_CAT_MOMENTUM;
}

const char *report_phase_name(enum report_phase p)
{
	return zs_phase_name((enum zs_phase)p);
}

const char *report_metric_name(enum report_metric m)
{
	static const char *const names[REPORT_NMETRICS] = {"resident", "peak", "comm"};
	return names[m];
}

/* ------------------------------------------------------------------------ */

/* A number for a message: whole numbers in full, others to 17 digits. */
static const char *num_text(double v, char *buf, size_t len)
{
	if (v == floor(v) && fabs(v) < 9007199254740992.0)   /* 2^53 */
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.17g", v);
	return buf;
}

/* A count the report computes with: a whole number from 0 to below 2^53,
 * where a double holds every integer exactly (docs/formats.md). `what` is
 * "a byte count" or "an element count". */
static int check_count(double v, const char *where, const char *key, const char *what, char **cause)
{
	char t[40];

	if (v < 0)
		return zs_fail(cause, "%s.%s is %s, not %s (a finite number, 0 or more)", where, key,
		               num_text(v, t, sizeof t), what);
	if (v != floor(v) || v >= 9007199254740992.0)
		return zs_fail(cause, "%s.%s is %s, not %s (a whole number below 2^53)", where, key,
		               num_text(v, t, sizeof t), what);
	return 0;
}

int report_read_share(const cJSON *o, const char *key, const char *where, double *out, char **cause)
{
	char t[40];

	if (zs_json_number(o, key, where, out, cause) < 0)
		return -1;
	if (*out < 0)
		return zs_fail(cause, "%s.%s is %s, not a byte count (a finite number, 0 or more)", where, key,
		               num_text(*out, t, sizeof t));
	if (*out >= 9007199254740992.0)
		return zs_fail(cause, "%s.%s is %s, not a byte count (a number below 2^53)", where, key,
		               num_text(*out, t, sizeof t));
	return 0;
}

static int read_count(const cJSON *o, const char *key, const char *where, const char *what,
                      double *out, char **cause)
{
	if (zs_json_number(o, key, where, out, cause) < 0)
		return -1;
	return check_count(*out, where, key, what, cause);
}

int report_read_bytes(const cJSON *o, const char *key, const char *where, double *out,
                      char **cause)
{
	return read_count(o, key, where, "a byte count", out, cause);
}

const char *report_run_label(enum zs_scheme s, unsigned world, enum zs_unit u, char *buf, size_t len)
{
	snprintf(buf, len, "%s N=%u unit=%s", zs_scheme_name(s), world, zs_unit_name(u));
	return buf;
}

int report_read_train(const cJSON *cfg, const char *where, struct report_train *t, char **cause)
{
	const cJSON *bpp;
	enum zs_precision pr = ZS_MIXED;
	enum zs_optimizer op = ZS_ADAM;

	if (zs_json_string(cfg, "precision", where, &t->precision, cause) < 0 ||
	    zs_json_string(cfg, "optimizer", where, &t->optimizer, cause) < 0 ||
	    zs_json_object(cfg, "bytes_per_param", where, &bpp, cause) < 0 ||
	    report_read_bytes(bpp, "param", where, &t->p, cause) < 0 ||
	    report_read_bytes(bpp, "grad", where, &t->g, cause) < 0 ||
	    report_read_bytes(bpp, "optimizer", where, &t->k, cause) < 0)
		return -1;
	if (zs_precision_parse(t->precision, &pr) < 0)
		return zs_fail(cause, "%s: unknown precision '%.40s' (mixed, fp32)", where, t->precision);
	if (zs_optimizer_parse(t->optimizer, &op) < 0)
		return zs_fail(cause, "%s: unknown optimizer '%.40s' (adam, sgd)", where, t->optimizer);
	return 0;
}

int report_read_framework(const cJSON *cfg, const char *where, struct report_framework *f, char **cause)
{
	f->framework = "paper"; /* absent: the paper's */
	if (cJSON_GetObjectItemCaseSensitive(cfg, "framework") != NULL &&
	    zs_json_string(cfg, "framework", where, &f->framework, cause) < 0)
		return -1;
	int known = 0;
	for (int i = 0; i < ZS_NFRAMEWORKS; i++)
		known |= strcmp(f->framework, zs_framework_name((enum zs_framework)i)) == 0;
	if (!known)
		return zs_fail(cause, "%s: unknown framework '%.40s' (paper, torch, deepspeed)", where, f->framework);
	const cJSON *ds = cJSON_GetObjectItemCaseSensitive(cfg, "deepspeed");
	f->ds_persist = f->ds_reduce_bucket = -1;
	f->ds_overlap = -1;
	f->offload = NULL;
	if (ds != NULL && (zs_json_object(cfg, "deepspeed", where, &ds, cause) < 0 ||
	                   report_read_bytes(ds, "persist", where, &f->ds_persist, cause) < 0))
		return -1;
	if (ds != NULL && cJSON_GetObjectItemCaseSensitive(ds, "reduce_bucket") != NULL &&
	    report_read_bytes(ds, "reduce_bucket", where, &f->ds_reduce_bucket, cause) < 0)
		return -1;
	const cJSON *ov = cJSON_GetObjectItemCaseSensitive(ds, "overlap_comm");
	if (ov != NULL && !cJSON_IsBool(ov))
		return zs_fail(cause, "%s: \"deepspeed.overlap_comm\" is not true or false", where);
	if (ov != NULL)
		f->ds_overlap = cJSON_IsTrue(ov);
	if (ds != NULL && cJSON_GetObjectItemCaseSensitive(ds, "offload") != NULL) {
		if (zs_json_string(ds, "offload", where, &f->offload, cause) < 0)
			return -1;
		int ok = 0; /* known values only: the string reaches the text */
		for (int o = 0; o < ZS_NOFFLOADS; o++)
			ok |= strcmp(f->offload, zs_offload_name((enum zs_offload)o)) == 0;
		if (!ok)
			return zs_fail(cause, "%s: unknown deepspeed.offload '%.40s' (none, optimizer, params)",
			               where, f->offload);
	}
	f->ranks_per_node = f->steps = -1;
	if (ds != NULL && cJSON_GetObjectItemCaseSensitive(ds, "ranks_per_node") != NULL &&
	    read_count(ds, "ranks_per_node", where, "a number of ranks", &f->ranks_per_node, cause) < 0)
		return -1;
	f->ds_sub_group = ds != NULL ? ZS_DS_SUB_GROUP : -1; /* written where it is not the default */
	if (ds != NULL && cJSON_GetObjectItemCaseSensitive(ds, "sub_group_size") != NULL &&
	    read_count(ds, "sub_group_size", where, "a number of elements", &f->ds_sub_group, cause) < 0)
		return -1;
	if (strcmp(f->framework, "deepspeed") == 0 && cJSON_GetObjectItemCaseSensitive(cfg, "steps") != NULL &&
	    read_count(cfg, "steps", where, "a number of steps", &f->steps, cause) < 0)
		return -1;
	f->bucket_cap = -1;
	f->prefetch = NULL;
	if (cJSON_GetObjectItemCaseSensitive(cfg, "bucket_cap_mb") != NULL &&
	    zs_json_number(cfg, "bucket_cap_mb", where, &f->bucket_cap, cause) < 0)
		return -1;
	if (cJSON_GetObjectItemCaseSensitive(cfg, "prefetch") != NULL &&
	    zs_json_string(cfg, "prefetch", where, &f->prefetch, cause) < 0)
		return -1;
	for (int i = 0; i < ZS_NTORCH_JSON_KEYS; i++) {
		f->torch[i] = NULL;
		if (cJSON_GetObjectItemCaseSensitive(cfg, zs_torch_json_keys[i]) != NULL &&
		    zs_json_string(cfg, zs_torch_json_keys[i], where, &f->torch[i], cause) < 0)
			return -1;
	}
	for (int i = 0; i < ZS_NSTEP_JSON_KEYS; i++) {
		const cJSON *v = f->step[i] = cJSON_GetObjectItemCaseSensitive(cfg, zs_step_json_keys[i]);
		if (v != NULL && !cJSON_IsNumber(v) && !cJSON_IsString(v) && !cJSON_IsBool(v))
			return zs_fail(cause, "%s.%s is not a number, a string, true or false", where,
			               zs_step_json_keys[i]);
	}
	f->grad_accum = 1;
	if (f->step[ZS_SJ_GRAD_ACCUM] != NULL) {
		unsigned long long k;
		if (zs_json_uint(cfg, zs_step_json_keys[ZS_SJ_GRAD_ACCUM], where, 1, ZS_MAX_GRAD_ACCUM, &k, cause) < 0)
			return -1;
		f->grad_accum = (double)k;
	}
	return 0;
}

/* A step setting for a message: its value, or what its absence means. */
static const char *step_text(const cJSON *v, int key, char *buf, size_t len)
{
	if (v == NULL)
		return key == ZS_SJ_GRAD_ACCUM ? "1" : "absent";
	if (cJSON_IsString(v))
		snprintf(buf, len, "'%.40s'", v->valuestring);
	else if (cJSON_IsBool(v))
		snprintf(buf, len, "%s", cJSON_IsTrue(v) ? "true" : "false");
	else if (!cJSON_PrintPreallocated((cJSON *)v, buf, (int)len, 0)) /* the shortest that reads back */
		num_text(v->valuedouble, buf, len);
	return buf;
}

/* Whether two files' step setting `key` is the same: both absent, equal,
 * or K given as 1 beside none (a K = 1 run writes none). */
static int same_step(const struct report_framework *a, const struct report_framework *b, int key)
{
	if (key == ZS_SJ_GRAD_ACCUM)
		return a->grad_accum == b->grad_accum;
	if (a->step[key] == NULL || b->step[key] == NULL)
		return a->step[key] == b->step[key];
	return cJSON_Compare(a->step[key], b->step[key], 1);
}

int report_same_framework(const struct report_framework *a, const struct report_framework *b, const char *an,
                          const char *bn, char **cause)
{
	if (strcmp(a->framework, b->framework) != 0)
		return zs_fail(cause, "%s and %s differ in framework: %.15s and %.15s", an, bn, a->framework,
		               b->framework);
	/* A framework's settings, where both files name them: two that differ
	 * are not one experiment (a departure would blame the code). */
	if (a->ds_persist >= 0 && b->ds_persist >= 0 && a->ds_persist != b->ds_persist)
		return zs_fail(cause, "%s and %s name different DeepSpeed persistence thresholds "
		               "(%.0f and %.0f elements)", an, bn, a->ds_persist, b->ds_persist);
	if (a->ds_sub_group >= 0 && b->ds_sub_group >= 0 && a->ds_sub_group != b->ds_sub_group)
		return zs_fail(cause, "%s and %s name different DeepSpeed ZeRO-3 sub_group_size (%.0f and %.0f elements)",
		               an, bn, a->ds_sub_group, b->ds_sub_group);
	if (a->bucket_cap >= 0 && b->bucket_cap >= 0 && a->bucket_cap != b->bucket_cap)
		return zs_fail(cause, "%s and %s differ in bucket_cap_mb: %g and %g", an, bn, a->bucket_cap,
		               b->bucket_cap);
	if (a->prefetch != NULL && b->prefetch != NULL && strcmp(a->prefetch, b->prefetch) != 0)
		return zs_fail(cause, "%s and %s differ in prefetch: %.15s and %.15s", an, bn, a->prefetch,
		               b->prefetch);
	for (int i = 0; i < ZS_NTORCH_JSON_KEYS; i++)
		if (a->torch[i] != NULL && b->torch[i] != NULL && strcmp(a->torch[i], b->torch[i]) != 0)
			return zs_fail(cause, "%s and %s differ in %s: %.15s and %.15s", an, bn, zs_torch_json_keys[i],
			               a->torch[i], b->torch[i]);
	for (int i = 0; i < ZS_NSTEP_JSON_KEYS; i++)
		if (!same_step(a, b, i)) {
			char x[48], y[48];
			return zs_fail(cause, "%s and %s differ in %s: %s and %s", an, bn, zs_step_json_keys[i],
			               step_text(a->step[i], i, x, sizeof x), step_text(b->step[i], i, y, sizeof y));
		}
	if (a->ds_reduce_bucket >= 0 && b->ds_reduce_bucket >= 0 && a->ds_reduce_bucket != b->ds_reduce_bucket)
		return zs_fail(cause, "%s and %s differ in DeepSpeed's reduce bucket: %.0f and %.0f elements", an,
		               bn, a->ds_reduce_bucket, b->ds_reduce_bucket);
	if (a->ds_overlap >= 0 && b->ds_overlap >= 0 && a->ds_overlap != b->ds_overlap)
		return zs_fail(cause, "%s and %s differ in DeepSpeed's overlap_comm", an, bn);
	if (a->offload != NULL && b->offload != NULL && strcmp(a->offload, b->offload) != 0)
		return zs_fail(cause, "%s and %s differ in offload: %.15s and %.15s", an, bn, a->offload,
		               b->offload);
	/* Ranks per node shape only the host bytes per node, which exist only
	 * offloaded (measure takes --ranks-per-node only then). */
	int offloaded = a->offload != NULL && strcmp(a->offload, "none") != 0 && b->offload != NULL &&
	                strcmp(b->offload, "none") != 0;
	if (offloaded && a->ranks_per_node >= 0 && b->ranks_per_node >= 0 && a->ranks_per_node != b->ranks_per_node)
		return zs_fail(cause, "%s and %s differ in ranks per node: %.0f and %.0f", an, bn, a->ranks_per_node,
		               b->ranks_per_node);
	return 0;
}

/* The model-describing part of a config object, read the same way from
 * both files so the comparison is like for like. */
struct model_cfg {
	size_t *widths; /* the caller frees */
	size_t nwidths;
	double batch;
	const char *precision, *optimizer;
	double p, g, k;
	struct report_framework fw;
};

static int read_model_cfg(const cJSON *cfg, const char *where, struct model_cfg *m, char **cause)
{
	const cJSON *layers, *w;
	unsigned long long v;

	memset(m, 0, sizeof *m);
	layers = cJSON_GetObjectItemCaseSensitive(cfg, "layers");
	const cJSON *model = cJSON_GetObjectItemCaseSensitive(cfg, "model");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(model, "name");
	if ((layers == NULL || cJSON_IsNull(layers)) && cJSON_IsString(name))
		return zs_fail(cause, "%s: the transformer %.64s (--model); --measured and --theory take an "
		               "MLP's files, a transformer's go to --transformer", where, name->valuestring);
	if (layers == NULL || cJSON_IsNull(layers))
		return zs_fail(cause, "%s: \"layers\" is null (a model given only as --params); "
		               "the report needs the layer widths to compare with a measurement", where);
	if (!cJSON_IsArray(layers))
		return zs_fail(cause, "%s: \"layers\" is not an array", where);
	m->widths = zs_calloc((size_t)cJSON_GetArraySize(layers) + 1, sizeof *m->widths);
	cJSON_ArrayForEach(w, layers) {
		if (!cJSON_IsNumber(w) || w->valuedouble < 1 || w->valuedouble > ZS_MAX_WIDTH ||
		    w->valuedouble != (double)(size_t)w->valuedouble)
			return zs_fail(cause, "%s: \"layers\" must be 2 or more widths in 1..%d", where, ZS_MAX_WIDTH);
		m->widths[m->nwidths++] = (size_t)w->valuedouble;
	}
	if (m->nwidths < 2)
		return zs_fail(cause, "%s: \"layers\" must be 2 or more widths in 1..%d", where, ZS_MAX_WIDTH);
	if (zs_json_uint(cfg, "batch", where, 1, ZS_MAX_BATCH, &v, cause) < 0)
		return -1;
	m->batch = (double)v;
	struct report_train tr;
	if (report_read_train(cfg, where, &tr, cause) < 0)
		return -1;
	m->precision = tr.precision;
	m->optimizer = tr.optimizer;
	m->p = tr.p;
	m->g = tr.g;
	m->k = tr.k;
	if (report_read_framework(cfg, where, &m->fw, cause) < 0)
		return -1;
	/* The paper's and DeepSpeed's --freeze is a transformer's (report_tfm.c
	 * reads its Ψ_t): their MLP has no frozen floors */
	if (m->fw.step[ZS_SJ_FREEZE] != NULL && strcmp(m->fw.framework, "torch") != 0)
		return zs_fail(cause, "%s: config.freeze in an MLP's file under %s: --freeze applies to a "
		               "transformer (--model), whose files go to --transformer", where, m->fw.framework);
	return 0;
}

/* The bytes per parameter are a fact of the precision and the optimizer. */
static int check_bytes_per_param(const struct model_cfg *m, const char *where, char **cause)
{
	enum zs_precision pr = ZS_MIXED;
	enum zs_optimizer op = ZS_ADAM;
	unsigned p, g, k;

	(void)zs_precision_parse(m->precision, &pr);
	(void)zs_optimizer_parse(m->optimizer, &op);
	zs_bytes_per_param(pr, op, &p, &g, &k);
	if (m->p != p || m->g != g || m->k != k)
		return zs_fail(cause, "%s: bytes_per_param is %.0f, %.0f, %.0f, but %s %s has %u, %u, %u", where,
		               m->p, m->g, m->k, m->precision, m->optimizer, p, g, k);
	return 0;
}

/* The configurations must describe the same model and run, or the join
 * would compare unlike things. */
static int same_model(const struct model_cfg *a, const struct model_cfg *b, const char *an,
                      const char *bn, char **cause)
{
	if (a->nwidths != b->nwidths || memcmp(a->widths, b->widths, a->nwidths * sizeof a->widths[0]) != 0)
		return zs_fail(cause, "%s and %s describe different models: the layer widths differ", an, bn);
	if (a->batch != b->batch)
		return zs_fail(cause, "%s and %s differ in batch: %.0f and %.0f", an, bn, a->batch, b->batch);
	if (strcmp(a->precision, b->precision) != 0)
		return zs_fail(cause, "%s and %s differ in precision: %s and %s", an, bn, a->precision,
		               b->precision);
	if (strcmp(a->optimizer, b->optimizer) != 0)
		return zs_fail(cause, "%s and %s differ in optimizer: %s and %s", an, bn, a->optimizer,
		               b->optimizer);
	if (a->p != b->p || a->g != b->g || a->k != b->k)
		return zs_fail(cause, "%s and %s differ in bytes_per_param", an, bn);
	return report_same_framework(&a->fw, &b->fw, an, bn, cause);
}

int report_read_key(const cJSON *o, const char *where, enum zs_scheme *s, unsigned *world,
                    enum zs_unit *u, char **cause)
{
	const char *str;
	unsigned long long w;

	if (zs_json_string(o, "scheme", where, &str, cause) < 0)
		return -1;
	if (zs_scheme_parse(str, s) < 0)
		return zs_fail(cause, "%s: unknown scheme '%s' (dp, zero1, zero2, zero3)", where, str);
	if (zs_json_uint(o, "world", where, 1, ZS_MAX_WORLD, &w, cause) < 0)
		return -1;
	*world = (unsigned)w;
	if (zs_json_string(o, "unit", where, &str, cause) < 0)
		return -1;
	if (zs_unit_parse(str, u) < 0)
		return zs_fail(cause, "%s: unknown unit '%s' (model, layer)", where, str);
	return 0;
}

/* Read the breakdown `key` of o into bd (a category this report does not
 * know is summed into REPORT_CAT_UNKNOWN) and check that it sums exactly to
 * `total`, o's `total_key` (docs/formats.md). `lab` names the run. */
int report_read_breakdown(const cJSON *o, const char *key, const char *where, const char *lab,
                          const char *total_key, double total, double *bd, char **cause)
{
	const cJSON *obj, *c;
	double sum = 0;
	char a[40], b[40];
	int i;

	if (zs_json_object(o, key, where, &obj, cause) < 0)
		return -1;
	cJSON_ArrayForEach(c, obj) {
		if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble) || c->valuedouble < 0)
			return zs_fail(cause, "%s: %s.%s is not a byte count (a finite number, 0 or more)", where,
			               key, c->string);
		if (c->valuedouble != floor(c->valuedouble) || c->valuedouble >= 9007199254740992.0)
			return zs_fail(cause, "%s: %s.%s is not a byte count (a whole number below 2^53)", where, key,
			               c->string);
		for (i = 0; i < REPORT_CAT_UNKNOWN; i++)
			if (strcmp(c->string, report_cat_name((enum report_cat)i)) == 0)
				break;
		bd[i] += c->valuedouble;
		sum += c->valuedouble;
	}
	/* Byte counts are whole numbers below 2^53, so the sum is exact. */
	if (sum != total)
		return zs_fail(cause, "%s (%s): %s sums to %s B, but %s is %s B; a breakdown must sum to "
		               "its total", where, lab, key, num_text(sum, a, sizeof a), total_key,
		               num_text(total, b, sizeof b));
	return 0;
}

/* Every rank's resident bytes, kept only when they differ (the per-rank
 * figure draws them); each must be a byte count. */
static int read_ranks(const cJSON *run, const char *where, struct report_run *r, char **cause)
{
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "per_rank"),
	                                                  "resident_bytes"), *v;
	int uneven = 0, n = cJSON_GetArraySize(a);
	if (!cJSON_IsArray(a) || n != (int)r->world)
		return 0; /* optional: older files, or made elsewhere */
	cJSON_ArrayForEach(v, a) {
		if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
			return zs_fail(cause, "%s: \"per_rank.resident_bytes\" holds something other than a byte count",
			               where);
		uneven |= v->valuedouble != a->child->valuedouble;
	}
	if (!uneven)
		return 0;
	r->rank_resident = zs_calloc((size_t)n, sizeof *r->rank_resident);
	r->nranks = 0;
	for (v = a->child; v != NULL; v = v->next)
		r->rank_resident[r->nranks++] = v->valuedouble;
	return 0;
}

/* The run's "allocator" (measure --allocator cuda): the replay's figures
 * of its rank with the highest reserved peak, which flags.txt names. */
static int read_alloc_summary(const cJSON *run, const char *where, struct report_run *r, char **cause)
{
	const cJSON *al = cJSON_GetObjectItemCaseSensitive(run, "allocator");
	char at[320];
	double rank;
	if (!cJSON_IsObject(al))
		return 0;
	snprintf(at, sizeof at, "%s.allocator", where);
	if (zs_json_number(al, "rank", at, &rank, cause) < 0 ||
	    report_read_bytes(al, "allocated_peak_bytes", at, &r->alloc_allocated_peak, cause) < 0 ||
	    report_read_bytes(al, "reserved_peak_bytes", at, &r->alloc_reserved_peak, cause) < 0 ||
	    report_read_bytes(al, "allocated_at_reserved_peak_bytes", at, &r->alloc_at_reserved, cause) < 0 ||
	    report_read_bytes(al, "fragmentation_bytes", at, &r->alloc_frag, cause) < 0 ||
	    zs_json_number(al, "fragmentation_ratio", at, &r->alloc_frag_ratio, cause) < 0)
		return -1;
	if (!(rank >= 0 && rank < r->world && rank == floor(rank)))
		return zs_fail(cause, "%s: \"rank\" is not one of the run's ranks", at);
	r->alloc_segments = r->alloc_reserved_at_allocated = -1;
	if (cJSON_GetObjectItemCaseSensitive(al, "segments_peak") != NULL &&
	    report_read_bytes(al, "segments_peak", at, &r->alloc_segments, cause) < 0)
		return -1;
	if (cJSON_GetObjectItemCaseSensitive(al, "reserved_at_allocated_peak_bytes") != NULL &&
	    report_read_bytes(al, "reserved_at_allocated_peak_bytes", at, &r->alloc_reserved_at_allocated, cause) < 0)
		return -1;
	r->alloc_rank = (unsigned)rank;
	r->has_alloc_summary = 1;
	return 0;
}

/* A block's id and bytes (an event's or a live block's), whole numbers. */
static int read_block(const cJSON *o, const char *at, uint64_t *id, uint64_t *bytes, char **cause)
{
	double v, b;
	if (zs_json_number(o, "id", at, &v, cause) < 0 || report_read_bytes(o, "bytes", at, &b, cause) < 0)
		return -1;
	if (!(v >= 1 && v <= 9007199254740992.0 && v == floor(v)))
		return zs_fail(cause, "%s: \"id\" is not a whole number from 1", at);
	*id = (uint64_t)v;
	*bytes = (uint64_t)b;
	return 0;
}

/* An event's phase, by name. */
static int read_phase(const cJSON *ev, const char *at, enum report_phase *out, char **cause)
{
	const char *str;
	int p;

	if (zs_json_string(ev, "phase", at, &str, cause) < 0)
		return -1;
	for (p = 0; p < REPORT_NPHASES; p++)
		if (strcmp(str, report_phase_name((enum report_phase)p)) == 0)
			break;
	if (p == REPORT_NPHASES)
		return zs_fail(cause, "%s: unknown phase '%s' (setup, forward, backward, reduce, "
		               "optimizer, gather)", at, str);
	*out = (enum report_phase)p;
	return 0;
}

/* The entry of timeline_ranks (--timeline-ranks all) for rank k, NULL
 * where the file has none with events. */
static const cJSON *rank_trace(const cJSON *run, unsigned k)
{
	const cJSON *e, *rk, *tl;

	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(run, "timeline_ranks")) {
		rk = cJSON_GetObjectItemCaseSensitive(e, "rank");
		tl = cJSON_GetObjectItemCaseSensitive(e, "timeline");
		if (cJSON_IsNumber(rk) && rk->valuedouble == (double)k && cJSON_IsArray(tl) &&
		    cJSON_GetArraySize(tl) > 0 && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(e, "timeline_live")))
			return e;
	}
	return NULL;
}

/* One rank's events (op, block id, phase) and live blocks from src (the
 * run, or its entry of timeline_ranks) into t. */
static int read_trace(const cJSON *src, const char *base, unsigned rank, struct report_trace *t, char **cause)
{
	const cJSON *tl = cJSON_GetObjectItemCaseSensitive(src, "timeline");
	const cJSON *live = cJSON_GetObjectItemCaseSensitive(src, "timeline_live"), *ev;
	const char *op;
	char at[320];
	size_t n = 0;
	double b;

	t->rank = rank;
	t->ntl = (size_t)cJSON_GetArraySize(tl);
	t->op = zs_calloc(t->ntl + 1, sizeof *t->op);
	t->id = zs_calloc(t->ntl + 1, sizeof *t->id);
	t->bytes = zs_calloc(t->ntl + 1, sizeof *t->bytes);
	t->phase = zs_calloc(t->ntl + 1, sizeof *t->phase);
	t->nlive = (size_t)cJSON_GetArraySize(live);
	t->live_id = zs_calloc(t->nlive + 1, sizeof *t->live_id);
	t->live_bytes = zs_calloc(t->nlive + 1, sizeof *t->live_bytes);
	cJSON_ArrayForEach(ev, tl) {
		snprintf(at, sizeof at, "%s.timeline[%zu]", base, n);
		if (zs_json_string(ev, "op", at, &op, cause) < 0 || read_phase(ev, at, &t->phase[n], cause) < 0)
			return -1;
		t->op[n] = strcmp(op, "alloc") == 0 ? 1 : strcmp(op, "free") == 0 ? -1 : 0;
		if (t->op[n] != 0 && read_block(ev, at, &t->id[n], &t->bytes[n], cause) < 0)
			return -1;
		/* cuBLAS's workspace: an alloc of the replay's, no block's id */
		if (strcmp(op, "workspace") == 0) {
			t->op[n] = 1;
			t->id[n] = CUDA_ALLOC_WORKSPACE_ID;
			if (report_read_bytes(ev, "bytes", at, &b, cause) < 0)
				return -1;
			t->bytes[n] = (uint64_t)b;
		}
		n++;
	}
	n = 0;
	cJSON_ArrayForEach(ev, live) {
		snprintf(at, sizeof at, "%s.timeline_live[%zu]", base, n);
		if (read_block(ev, at, &t->live_id[n], &t->live_bytes[n], cause) < 0)
			return -1;
		n++;
	}
	return 0;
}

/* With the run's allocator: each rank's events and live blocks the file
 * has, for fig10-allocator's replay: rank 0's (the run's own timeline)
 * and every other rank's in timeline_ranks (--timeline-ranks all). The
 * binding rank is alloc_rank where the file has its events, else rank
 * 0 stands in, tl_missing. A file without them (no --allocator) reads as
 * before. */
static int read_blocks(const cJSON *run, const char *where, struct report_run *r, char **cause)
{
	const cJSON *al = cJSON_GetObjectItemCaseSensitive(run, "allocator");
	char base[300];

	if (!cJSON_IsObject(al) || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(run, "timeline_live")))
		return 0;
	r->trace = zs_calloc(r->world + 1, sizeof *r->trace);
	r->ntrace = 0;
	for (unsigned k = 0; k < r->world; k++) {
		const cJSON *src = k == 0 ? run : rank_trace(run, k);
		if (src == NULL)
			continue;
		if (k == 0)
			snprintf(base, sizeof base, "%s", where);
		else
			snprintf(base, sizeof base, "%s.timeline_ranks[rank %u]", where, k);
		if (read_trace(src, base, k, &r->trace[r->ntrace++], cause) < 0)
			return -1;
	}
	r->tl_rank = 0;
	if (r->has_alloc_summary && r->alloc_rank != 0) {
		if (rank_trace(run, r->alloc_rank) != NULL)
			r->tl_rank = r->alloc_rank;
		else
			r->tl_missing = 1;
	}
	r->has_allocator = 1;
	return 0;
}

static int read_timeline(const cJSON *run, const char *where, struct report_run *r, char **cause)
{
	const cJSON *tl = cJSON_GetObjectItemCaseSensitive(run, "timeline"), *ev;
	char at[320];
	size_t n = 0;

	if (tl == NULL || cJSON_IsNull(tl))
		return 0;
	if (!cJSON_IsArray(tl))
		return zs_fail(cause, "%s: \"timeline\" is neither null nor an array", where);
	r->ntimeline = (size_t)cJSON_GetArraySize(tl);
	if (r->ntimeline == 0)
		return 0;
	r->timeline = zs_calloc(r->ntimeline, sizeof *r->timeline);
	r->phase = zs_calloc(r->ntimeline, sizeof *r->phase);
	cJSON_ArrayForEach(ev, tl) {
		snprintf(at, sizeof at, "%s.timeline[%zu]", where, n);
		if (report_read_bytes(ev, "current_bytes", at, &r->timeline[n], cause) < 0 ||
		    read_phase(ev, at, &r->phase[n], cause) < 0)
			return -1;
		n++;
	}
	return read_blocks(run, where, r, cause);
}

/* The operating system's figures of an MPI run, where present: each
 * rank's process peak RSS beside its tracked peak, the ranks split evenly
 * over "processes" in order. */
static int read_os(const cJSON *run, const char *where, struct report_run *r, char **cause)
{
	const cJSON *per = cJSON_GetObjectItemCaseSensitive(run, "per_rank");
	const cJSON *os = cJSON_GetObjectItemCaseSensitive(per, "os_peak_bytes");
	const cJSON *peak = cJSON_GetObjectItemCaseSensitive(per, "peak_bytes");
	double procs;

	if (os == NULL)
		return 0;
	if (read_count(run, "processes", where, "a number of processes", &procs, cause) < 0)
		return -1;
	if (!cJSON_IsArray(os) || !cJSON_IsArray(peak) || cJSON_GetArraySize(os) != (int)r->world ||
	    cJSON_GetArraySize(peak) != (int)r->world || procs < 1 || fmod(r->world, procs) != 0)
		return zs_fail(cause, "%s: per_rank.os_peak_bytes and peak_bytes need one entry per rank, "
		               "over a number of processes that divides N", where);
	r->os_ranks = r->world / (unsigned)procs;
	r->os_overhead = -HUGE_VAL;
	for (unsigned p = 0; p < (unsigned)procs; p++) {
		double most = 0, tracked = 0;
		for (unsigned k = p * r->os_ranks; k < (p + 1) * r->os_ranks; k++) {
			const cJSON *o = cJSON_GetArrayItem(os, (int)k), *t = cJSON_GetArrayItem(peak, (int)k);
			if (!cJSON_IsNumber(o) || !cJSON_IsNumber(t) || !(o->valuedouble >= 0) ||
			    !(t->valuedouble >= 0) || !isfinite(o->valuedouble) || !isfinite(t->valuedouble))
				return zs_fail(cause, "%s: per_rank holds something other than byte counts", where);
			most = fmax(most, o->valuedouble);
			tracked += t->valuedouble;
		}
		if ((most - tracked) / r->os_ranks > r->os_overhead) {
			r->os_process = p;
			r->os_peak = most;
			r->os_tracked = tracked;
			r->os_overhead = (most - tracked) / r->os_ranks;
		}
	}
	return 0;
}

/* The MLP's measured run, into the row its key joined (report_join_runs). */
static int read_run(const cJSON *run, const char *where, struct report_run *r, char **cause)
{
	const cJSON *units, *u;
	char lab[96];

	if (zs_json_array(run, "units", where, &units, cause) < 0)
		return -1;
	report_run_label(r->scheme, r->world, r->unit, lab, sizeof lab);
	cJSON_ArrayForEach(u, units) {
		if (!cJSON_IsNumber(u) || !isfinite(u->valuedouble) || u->valuedouble < 1 ||
		    u->valuedouble != floor(u->valuedouble) || u->valuedouble > ZS_MAX_PARAMS)
			return zs_fail(cause, "%s: \"units\" holds something other than an element count", where);
		if (u->valuedouble > r->largest_unit)
			r->largest_unit = u->valuedouble;
		r->units_total += u->valuedouble;
	}
	if (read_count(run, "shard_elements", where, "an element count", &r->shard_elements,
	               cause) < 0 ||
	    read_count(run, "padded_elements", where, "an element count", &r->padded_elements,
	               cause) < 0 ||
	    report_read_measured(run, where, lab, r->comm_mean ? REPORT_READ_COMM_SHARE : 0, r, cause) < 0 ||
	    read_os(run, where, r, cause) < 0)
		return -1;
	const cJSON *bc = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "collectives"),
	                                                  "broadcast");
	if (bc != NULL && report_read_bytes(bc, "bytes_per_step", where, &r->broadcast_bytes, cause) < 0)
		return -1;
	const cJSON *ag = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(run, "collectives"),
	                                                  "all_gather");
	if (ag != NULL && (r->comm_mean ? report_read_share : report_read_bytes)(ag, "bytes_per_step", where,
	                                                                  &r->allgather_bytes, cause) < 0)
		return -1;
	if (read_ranks(run, where, r, cause) < 0)
		return -1;
	if (read_alloc_summary(run, where, r, cause) < 0)
		return -1;
	return read_timeline(run, where, r, cause);
}

/* A breakdown the flags may let a schedule leave out (older theory.json
 * files give totals only); where present it is read and checked like a
 * measured one. *has tells whether it was there. */
static int read_sched_breakdown(const cJSON *sc, const char *key, const char *where, const char *lab,
                                const char *total_key, double total, double *bd, int optional, int *has,
                                char **cause)
{
	const cJSON *bd_obj = cJSON_GetObjectItemCaseSensitive(sc, key);

	*has = 0;
	if (optional && (bd_obj == NULL || cJSON_IsNull(bd_obj)))
		return 0;
	if (report_read_breakdown(sc, key, where, lab, total_key, total, bd, cause) < 0)
		return -1;
	*has = 1;
	return 0;
}

/* o's comm_bytes_per_rank_per_step: a share or bytes, -1 when optional
 * and absent. */
static int read_comm(const cJSON *o, const char *where, unsigned flags, double *out, char **cause)
{
	*out = -1;
	if ((flags & REPORT_READ_COMM_OPTIONAL) && cJSON_GetObjectItemCaseSensitive(o, "comm_bytes_per_rank_per_step") == NULL)
		return 0;
	return (flags & REPORT_READ_COMM_SHARE ? report_read_share : report_read_bytes)(
		o, "comm_bytes_per_rank_per_step", where, out, cause);
}

/* The host bytes of an offloaded run (report_host.h), read here with the
 * rest of the run since a report_run holds them: o's figures into v (-1
 * for each it lacks), and its per_rank arrays of the first two into rank[]
 * (NULL where absent, else one entry per rank); *any: whether o gives any
 * figure. */
static int read_host_figures(const cJSON *o, const char *where, unsigned world, double *v, double **rank, int *any,
                        char **cause)
{
	const cJSON *per = cJSON_GetObjectItemCaseSensitive(o, "per_rank");
	*any = 0;
	for (int h = 0; h < REPORT_NHOST; h++) {
		v[h] = -1;
		if (cJSON_GetObjectItemCaseSensitive(o, report_host_keys[h]) == NULL)
			continue;
		if (report_read_bytes(o, report_host_keys[h], where, &v[h], cause) < 0)
			return -1;
		*any = 1;
	}
	for (int h = 0; h < REPORT_HOST_NRANK; h++) {
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(per, report_host_keys[h]), *x;
		size_t k = 0;
		if (a == NULL)
			continue;
		if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != (int)world)
			return zs_fail(cause, "%s: per_rank.%s needs one entry per rank (%u)", where, report_host_keys[h],
			               world);
		rank[h] = zs_calloc(world, sizeof *rank[h]);
		cJSON_ArrayForEach(x, a) {
			if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || x->valuedouble < 0 ||
			    x->valuedouble != floor(x->valuedouble) || x->valuedouble >= 0x1p53)
				return zs_fail(cause, "%s: per_rank.%s holds something other than a byte count", where,
				               report_host_keys[h]);
			rank[h][k++] = x->valuedouble;
		}
	}
	return 0;
}

/* A measured run's host figures, and a theory row's schedule's. */
static int read_host(const cJSON *run, const char *where, unsigned world, struct report_host *h, char **cause)
{
	h->world = world;
	return read_host_figures(run, where, world, h->v, h->rank, &h->has, cause);
}

static int read_host_schedule(const cJSON *sc, const char *where, unsigned world, struct report_host *h,
                              char **cause)
{
	int any;
	return read_host_figures(sc, where, world, h->sched, h->sched_rank, &any, cause);
}

int report_read_measured(const cJSON *run, const char *where, const char *lab, unsigned flags,
                         struct report_run *r, char **cause)
{
	if (report_read_bytes(run, "resident_bytes", where, &r->measured[REPORT_RESIDENT], cause) < 0 ||
	    report_read_bytes(run, "peak_bytes", where, &r->measured[REPORT_PEAK], cause) < 0 ||
	    read_comm(run, where, flags, &r->measured[REPORT_COMM], cause) < 0 ||
	    report_read_breakdown(run, "resident_breakdown", where, lab, "resident_bytes",
	                          r->measured[REPORT_RESIDENT], r->resident_bd, cause) < 0 ||
	    report_read_breakdown(run, "peak_breakdown", where, lab, "peak_bytes", r->measured[REPORT_PEAK],
	                          r->peak_bd, cause) < 0 ||
	    read_host(run, where, r->world, &r->host, cause) < 0)
		return -1;
	r->has_measured = 1;
	return 0;
}

int report_read_schedule(const cJSON *sc, const char *at, const char *lab, unsigned flags,
                         struct report_run *r, char **cause)
{
	const int opt = (flags & REPORT_READ_BD_OPTIONAL) != 0;

	if (report_read_bytes(sc, "resident_bytes", at, &r->schedule[REPORT_RESIDENT], cause) < 0 ||
	    report_read_bytes(sc, "peak_bytes", at, &r->schedule[REPORT_PEAK], cause) < 0 ||
	    read_comm(sc, at, flags, &r->schedule[REPORT_COMM], cause) < 0 ||
	    read_sched_breakdown(sc, "resident_breakdown", at, lab, "resident_bytes", r->schedule[REPORT_RESIDENT],
	                         r->sched_resident_bd, opt, &r->has_sched_resident_bd, cause) < 0 ||
	    read_sched_breakdown(sc, "peak_breakdown", at, lab, "peak_bytes", r->schedule[REPORT_PEAK],
	                         r->sched_peak_bd, opt, &r->has_sched_peak_bd, cause) < 0 ||
	    read_host_schedule(sc, at, r->world, &r->host, cause) < 0)
		return -1;
	r->has_schedule = 1;
	return 0;
}

int report_read_trained(const cJSON *theory, const char *path, const char *what, double params, double *trained,
                        char **cause)
{
	unsigned long long v;
	if (cJSON_GetObjectItemCaseSensitive(theory, "trainable_params") == NULL)
		return zs_fail(cause, "%s: config.%s without trainable_params: a theory.json of an older zerosim, "
		               "whose floors count every parameter as trained; run zerosim theory again", path, what);
	if (zs_json_uint(theory, "trainable_params", path, 1, 9007199254740991.0, &v, cause) < 0)
		return -1;
	*trained = (double)v;
	if (*trained > params)
		return zs_fail(cause, "%s: trainable_params %.0f is above params %.0f", path, *trained, params);
	return 0;
}

int report_run_departs(const struct report_run *r, enum report_metric m, int *cat)
{
	*cat = -1;
	if (!r->has_measured || !r->has_schedule)
		return 0;
	if (m != REPORT_COMM) {
		const double *meas = m == REPORT_RESIDENT ? r->resident_bd : r->peak_bd;
		const double *sched = m == REPORT_RESIDENT ? r->sched_resident_bd : r->sched_peak_bd;
		if (m == REPORT_RESIDENT ? r->has_sched_resident_bd : r->has_sched_peak_bd)
			for (int c = 0; c < REPORT_NCATS && *cat < 0; c++)
				if (meas[c] != sched[c])
					*cat = c;
	}
	return (r->measured[m] >= 0 && r->schedule[m] >= 0 && r->measured[m] != r->schedule[m]) || *cat >= 0;
}

int report_run_unexplained(const struct report_run *r)
{
	int cat, any = 0;
	for (int m = 0; m < REPORT_NMETRICS; m++)
		any |= report_run_departs(r, (enum report_metric)m, &cat);
	return any;
}

void report_run_free(struct report_run *r)
{
	free(r->timeline);
	free(r->phase);
	free(r->rank_resident);
	for (size_t k = 0; k < r->ntrace; k++) {
		struct report_trace *t = &r->trace[k];
		free(t->op);
		free(t->id);
		free(t->bytes);
		free(t->phase);
		free(t->live_id);
		free(t->live_bytes);
	}
	free(r->trace);
	r->trace = NULL;
	r->ntrace = 0;
	report_host_free(&r->host);
	r->timeline = NULL;
	r->phase = NULL;
	r->rank_resident = NULL;
}

/* The row's allocator.device_overhead into r, where it has one (theory
 * --allocator cuda): total_bytes, and each part or -1 for null. */
static int read_fixed(const cJSON *row, const char *where, struct report_run *r, char **cause)
{
	static const char *const part[] = {"cuda_context_bytes", "nccl_bytes"};
	double *into[] = {&r->fixed_context, &r->fixed_nccl};
	const cJSON *al = cJSON_GetObjectItemCaseSensitive(row, "allocator");
	const cJSON *dv = cJSON_GetObjectItemCaseSensitive(al, "device_overhead");
	char at[320];

	if (!cJSON_IsObject(al) || dv == NULL || cJSON_IsNull(dv))
		return 0;
	snprintf(at, sizeof at, "%s.allocator.device_overhead", where);
	if (!cJSON_IsObject(dv))
		return zs_fail(cause, "%s is neither null nor an object", at);
	if (report_read_bytes(dv, "total_bytes", at, &r->fixed_total, cause) < 0)
		return -1;
	for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(dv, part[i]);
		*into[i] = -1;
		if (v != NULL && !cJSON_IsNull(v) && report_read_bytes(dv, part[i], at, into[i], cause) < 0)
			return -1;
	}
	r->has_fixed = 1;
	return 0;
}

/* Fill the theory side of r from its row. */
static int read_row(const cJSON *row, const char *where, struct report_run *r, char **cause)
{
	const cJSON *fl, *sc;
	char at[300], lab[96];

	report_run_label(r->scheme, r->world, r->unit, lab, sizeof lab);
	snprintf(at, sizeof at, "%s.floor", where);
	if (zs_json_object(row, "floor", where, &fl, cause) < 0 ||
	    report_read_share(fl, "resident_bytes", at, &r->floor[REPORT_RESIDENT], cause) < 0 ||
	    report_read_share(fl, "comm_bytes_per_rank_per_step", at, &r->floor[REPORT_COMM], cause) < 0)
		return -1;
	/* The paper counts no transients: the peak's floor is the resident one. */
	r->floor[REPORT_PEAK] = r->floor[REPORT_RESIDENT];
	sc = cJSON_GetObjectItemCaseSensitive(row, "schedule");
	if (sc == NULL || cJSON_IsNull(sc))
		return zs_fail(cause, "%s has no schedule model; the report needs one", where);
	snprintf(at, sizeof at, "%s.schedule", where);
	if (read_fixed(row, where, r, cause) < 0)
		return -1;
	return report_read_schedule(sc, at, lab, REPORT_READ_BD_OPTIONAL |
	                            (r->comm_mean ? REPORT_READ_COMM_SHARE : 0), r, cause);
}

/* Object keys of one object, for sorting: two equal neighbours are a
 * repeated key. */
static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int report_json_unique(const cJSON *node, const char *name, char **cause)
{
	const cJSON *c;
	int n = cJSON_GetArraySize(node), k = 0;

	if (!cJSON_IsObject(node) && !cJSON_IsArray(node))
		return 0;
	if (cJSON_IsObject(node) && n > 1) {
		const char **keys = zs_calloc((size_t)n, sizeof *keys);
		cJSON_ArrayForEach(c, node)
			keys[k++] = c->string;
		qsort(keys, (size_t)n, sizeof *keys, cmp_key);
		for (k = 1; k < n && strcmp(keys[k - 1], keys[k]) != 0; k++)
			;
		if (k < n) {
			zs_fail(cause, "%s: the key \"%.64s\" appears twice in one object; each key "
			        "must be given once", name, keys[k]);
			free(keys);
			return -1;
		}
		free(keys);
	}
	cJSON_ArrayForEach(c, node)
		if (report_json_unique(c, name, cause) < 0)
			return -1;
	return 0;
}

int report_rows_unique(const cJSON *rows, const char *name, const char *what, char **cause)
{
	const cJSON *a, *b;
	char where[256], lab[96];
	int i = 0;

	cJSON_ArrayForEach(a, rows) {
		enum zs_scheme s = ZS_DP, s2 = ZS_DP;
		enum zs_unit u = ZS_UNIT_MODEL, u2 = ZS_UNIT_MODEL;
		unsigned w = 0, w2 = 0;
		int j = i + 1;

		snprintf(where, sizeof where, "%s: %s[%d]", name, what, i++);
		if (report_read_key(a, where, &s, &w, &u, cause) < 0)
			return -1;
		for (b = a->next; b != NULL; b = b->next, j++) {
			snprintf(where, sizeof where, "%s: %s[%d]", name, what, j);
			if (report_read_key(b, where, &s2, &w2, &u2, cause) < 0)
				return -1;
			if (s == s2 && w == w2 && u == u2)
				return zs_fail(cause, "%s: %s[%d] and %s[%d] are both %s; each must be given once",
				               name, what, i - 1, what, j, report_run_label(s, w, u, lab, sizeof lab));
		}
	}
	return 0;
}

static int cmp_run(const void *a, const void *b)
{
	const struct report_run *x = a, *y = b;

	if (x->unit != y->unit)
		return x->unit < y->unit ? -1 : 1;
	if (x->scheme != y->scheme)
		return x->scheme < y->scheme ? -1 : 1;
	return x->world < y->world ? -1 : x->world > y->world;
}

/* ------------------------------------------------------------------------ */
/* The one loader (report_data.h): both families' files and rows. */

static struct report_run *row_at(void *rows, size_t size, size_t i)
{
	return (struct report_run *)((char *)rows + i * size);
}

int report_join_rows(const struct report_join *j, const cJSON *rows, const char *tname, void **out,
                     size_t *n, char **cause)
{
	const cJSON *row;
	char where[320];

	*out = NULL;
	*n = 0;
	if (report_rows_unique(rows, tname, "rows", cause) < 0)
		return -1;
	*out = zs_calloc((size_t)cJSON_GetArraySize(rows) + 1, j->row_size);
	cJSON_ArrayForEach(row, rows) {
		struct report_run *r = row_at(*out, j->row_size, *n);
		snprintf(where, sizeof where, "%s: rows[%zu]", tname, *n);
		(*n)++; /* freed with the others, whatever it holds */
		if (report_read_key(row, where, &r->scheme, &r->world, &r->unit, cause) < 0 ||
		    j->theory_row(row, where, r, j->ctx, cause) < 0)
			return -1;
	}
	return 0;
}

int report_join_runs(const struct report_join *j, const cJSON *runs, const char *mname, const char *tname,
                     void *rows, size_t n, char **cause)
{
	const cJSON *run;
	char where[320], lab[96];
	size_t i = 0, k;

	if (report_rows_unique(runs, mname, "runs", cause) < 0)
		return -1;
	cJSON_ArrayForEach(run, runs) {
		enum zs_scheme s = ZS_DP;
		enum zs_unit u = ZS_UNIT_MODEL;
		unsigned w = 0;

		snprintf(where, sizeof where, "%s: runs[%zu]", mname, i++);
		if (report_read_key(run, where, &s, &w, &u, cause) < 0)
			return -1;
		for (k = 0; k < n; k++) {
			const struct report_run *r = row_at(rows, j->row_size, k);
			if (r->scheme == s && r->world == w && r->unit == u)
				break;
		}
		if (k == n)
			return zs_fail(cause, "%s has no row for the measured run %s%s%s", tname,
			               report_run_label(s, w, u, lab, sizeof lab), j->model != NULL ? " of " : "",
			               j->model != NULL ? j->model : "");
		if (j->measured_run(run, where, row_at(rows, j->row_size, k), j->ctx, cause) < 0)
			return -1;
	}
	return 0;
}

int report_load(const struct report_family *f, const char *const *paths, const char *const *formats, size_t n,
                void *section, char **cause)
{
	cJSON **j = zs_calloc(n + 1, sizeof *j); /* NOLINT(bugprone-sizeof-expression): an array of pointers */
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++)
		rc = zs_json_load(paths[i], formats != NULL && formats[i] != NULL ? formats[i]
		                  : REPORT_THEORY_FORMAT " or " REPORT_MEASURED_FORMAT, &j[i], cause);
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n && rc == 0; i++) {
			const char *fmt = cJSON_GetObjectItemCaseSensitive(j[i], "format")->valuestring;
			if (pass == 0 && strcmp(fmt, REPORT_THEORY_FORMAT) == 0)
				rc = f->theory(section, j[i], paths[i], cause);
			else if (pass == 1 && strcmp(fmt, REPORT_MEASURED_FORMAT) == 0)
				rc = f->measured(section, j[i], paths[i], cause);
		}
	for (size_t i = 0; i < n; i++)
		cJSON_Delete(j[i]);
	free(j);
	return rc;
}

/* The MLP's section: one theory.json, held until its measurement comes,
 * since the checks that the two describe one model and run come first
 * (the measurement's config, then the theory's). */
struct mlp_load {
	struct report_data *d;
	const cJSON *theory;
	const char *tname, *mname;
	struct model_cfg mm, tm;
	int deepspeed;
	struct report_run *rows; /* the join's: every theory row */
	size_t nrows;
};

static int mlp_theory_row(const cJSON *row, const char *where, void *r, void *ctx, char **cause)
{
	const struct mlp_load *l = ctx;
	struct report_run *run = r;

	run->comm_mean = l->deepspeed && run->scheme == ZS_ZERO3;
	return read_row(row, where, run, cause);
}

static int mlp_measured_run(const cJSON *run, const char *where, void *row, void *ctx, char **cause)
{
	const struct mlp_load *l = ctx;
	struct report_run *r = row;

	if (read_run(run, where, r, cause) < 0)
		return -1;
	/* DeepSpeed's zero3 comm is a mean over the steps: a theory of other
	 * steps is another experiment (a file without steps is not checked). */
	if (r->comm_mean && l->mm.fw.steps >= 0 && l->tm.fw.steps >= 0 && l->mm.fw.steps != l->tm.fw.steps)
		return zs_fail(cause, "%s and %s differ in steps: %.0f and %.0f (DeepSpeed's zero3 comm is a mean over "
		               "them)", l->mname, l->tname, l->mm.fw.steps, l->tm.fw.steps);
	if (r->units_total != l->d->params) /* the units are the model, cut */
		return zs_fail(cause, "%s: \"units\" add up to %.0f elements, not the model's %.0f", where,
		               r->units_total, l->d->params);
	return 0;
}

static int mlp_theory(void *section, const cJSON *theory, const char *path, char **cause)
{
	struct mlp_load *l = section;

	(void)cause;
	l->theory = theory;
	l->tname = path;
	return 0;
}

static int mlp_measured(void *section, const cJSON *measured, const char *mname, char **cause)
{
	struct mlp_load *l = section;
	struct report_data *d = l->d;
	const cJSON *theory = l->theory, *mcfg, *tcfg, *runs, *rows;
	const char *tname = l->tname;
	struct model_cfg *mm = &l->mm, *tm = &l->tm;
	double tparams;
	char where[256];
	size_t i, j;

	if (report_json_unique(measured, mname, cause) < 0 || report_json_unique(theory, tname, cause) < 0)
		return -1;
	snprintf(where, sizeof where, "%s: config", mname);
	if (zs_json_object(measured, "config", mname, &mcfg, cause) < 0 ||
	    zs_json_number(mcfg, "params", where, &d->params, cause) < 0 ||
	    read_model_cfg(mcfg, where, mm, cause) < 0)
		return -1;
	d->trained = d->params; /* the MLP trains every parameter (read_model_cfg) */
	snprintf(where, sizeof where, "%s: config", tname);
	if (zs_json_number(theory, "params", tname, &tparams, cause) < 0 ||
	    zs_json_object(theory, "config", tname, &tcfg, cause) < 0 ||
	    read_model_cfg(tcfg, where, tm, cause) < 0)
		return -1;
	if (d->params != tparams)
		return zs_fail(cause, "%s and %s describe different models: %.0f and %.0f params", mname,
		               tname, d->params, tparams);
	/* Ψ is a fact of the layers: a file that says otherwise contradicts itself. */
	double psi = (double)zs_params(mm->widths, mm->nwidths);
	if (d->params != psi)
		return zs_fail(cause, "%s: config.params is %s, but its layers have %.0f parameters", mname,
		               num_text(d->params, where, sizeof where), psi);
	if (tparams != psi)
		return zs_fail(cause, "%s: params is %s, but its layers have %.0f parameters", tname,
		               num_text(tparams, where, sizeof where), psi);
	if (same_model(mm, tm, mname, tname, cause) < 0 || check_bytes_per_param(mm, mname, cause) < 0)
		return -1;
	d->widths = mm->widths; /* moved */
	mm->widths = NULL;
	d->nwidths = mm->nwidths;
	d->batch = mm->batch;
	snprintf(d->precision, sizeof d->precision, "%s", mm->precision);
	snprintf(d->optimizer, sizeof d->optimizer, "%s", mm->optimizer);
	snprintf(d->framework, sizeof d->framework, "%s", mm->fw.framework);
	const cJSON *alc = cJSON_GetObjectItemCaseSensitive(mcfg, "allocator");
	const cJSON *conf = cJSON_IsObject(alc) ? cJSON_GetObjectItemCaseSensitive(alc, "conf") : NULL;
	if (cJSON_IsObject(alc)) {
		d->has_alloc = 1;
		const char *cs = cJSON_GetStringValue(conf); /* NULL unless a string */
		snprintf(d->alloc_conf, sizeof d->alloc_conf, "%s", cs != NULL ? cs : "");
	}
	/* The theory's threshold is the one the finding reads (same_model
	 * refused two different ones). */
	d->ds_persist = tm->fw.ds_persist >= 0 ? tm->fw.ds_persist : mm->fw.ds_persist;
	d->offload = mm->fw.offload != NULL && strcmp(mm->fw.offload, "none") != 0;
	d->offload_params = mm->fw.offload != NULL && strcmp(mm->fw.offload, "params") == 0;
	d->grad_accum = mm->fw.grad_accum; /* the theory's is the same (same_model) */
	d->p = mm->p;
	d->g = mm->g;
	d->k = mm->k;
	l->mname = mname;
	l->deepspeed = strcmp(mm->fw.framework, "deepspeed") == 0;

	if (zs_json_array(measured, "runs", mname, &runs, cause) < 0 ||
	    zs_json_array(theory, "rows", tname, &rows, cause) < 0)
		return -1;
	if (cJSON_GetArraySize(runs) == 0)
		return zs_fail(cause, "%s holds no runs", mname);
	const struct report_join join = {sizeof(struct report_run), mlp_theory_row, mlp_measured_run, l, NULL};
	void *joined = NULL;
	int rc = report_join_rows(&join, rows, tname, &joined, &l->nrows, cause);
	l->rows = joined;
	if (rc < 0 || report_join_runs(&join, runs, mname, tname, l->rows, l->nrows, cause) < 0)
		return -1;
	/* The MLP's section draws its measured runs: a theory row without one
	 * is left out. */
	d->runs = zs_calloc(l->nrows + 1, sizeof *d->runs);
	for (i = 0; i < l->nrows; i++)
		if (l->rows[i].has_measured) {
			d->runs[d->nruns++] = l->rows[i];
			memset(&l->rows[i], 0, sizeof l->rows[i]); /* moved */
		}
	qsort(d->runs, d->nruns, sizeof *d->runs, cmp_run);
	/* Each unit's world sizes, as many as measured: the tables' rows and
	 * the figures' x axis. */
	for (int u = 0; u < ZS_NUNITS; u++) {
		unsigned *w = d->worlds[u] = zs_calloc(d->nruns + 1, sizeof *w);
		size_t n = 0;
		for (i = 0; i < d->nruns; i++) {
			unsigned x = d->runs[i].world;
			if (d->runs[i].unit != (enum zs_unit)u)
				continue;
			for (j = 0; j < n && w[j] < x; j++)
				;
			if (j < n && w[j] == x)
				continue;
			memmove(&w[j + 1], &w[j], (n - j) * sizeof *w);
			w[j] = x;
			n++;
		}
		d->nworlds[u] = n;
	}
	return 0;
}

static const struct report_family mlp_family = {mlp_theory, mlp_measured};

static void mlp_load_end(struct mlp_load *l, int rc)
{
	for (size_t i = 0; l->rows != NULL && i < l->nrows; i++)
		report_run_free(&l->rows[i]);
	free(l->rows);
	free(l->mm.widths);
	free(l->tm.widths);
	if (rc < 0)
		report_data_free(l->d);
}

int report_data_from_json(const cJSON *measured, const cJSON *theory, const char *mname,
                          const char *tname, struct report_data *d, char **cause)
{
	struct mlp_load l = {.d = d};

	memset(d, 0, sizeof *d);
	int rc = mlp_theory(&l, theory, tname, cause) < 0 ? -1 : mlp_measured(&l, measured, mname, cause);
	mlp_load_end(&l, rc);
	return rc;
}

int report_data_load(const char *measured_path, const char *theory_path, struct report_data *d,
                     char **cause)
{
	const char *paths[2] = {measured_path, theory_path};
	const char *formats[2] = {REPORT_MEASURED_FORMAT, REPORT_THEORY_FORMAT};
	struct mlp_load l = {.d = d};

	memset(d, 0, sizeof *d);
	int rc = report_load(&mlp_family, paths, formats, 2, &l, cause);
	mlp_load_end(&l, rc);
	return rc;
}

void report_data_free(struct report_data *d)
{
	size_t i;

	for (i = 0; d->runs != NULL && i < d->nruns; i++)
		report_run_free(&d->runs[i]);
	free(d->runs);
	d->runs = NULL;
	d->nruns = 0;
	free(d->widths);
	d->widths = NULL;
	d->nwidths = 0;
	for (int u = 0; u < ZS_NUNITS; u++) {
		free(d->worlds[u]);
		d->worlds[u] = NULL;
		d->nworlds[u] = 0;
	}
}

const struct report_run *report_data_find(const struct report_data *d, enum zs_scheme s,
                                          unsigned world, enum zs_unit u)
{
	size_t i;

	for (i = 0; i < d->nruns; i++)
		if (d->runs[i].scheme == s && d->runs[i].world == world && d->runs[i].unit == u)
			return &d->runs[i];
	return NULL;
}

size_t report_data_worlds(const struct report_data *d, enum zs_unit u, const unsigned **w)
{
	*w = d->worlds[u];
	return d->nworlds[u];
}

int report_data_has_unit(const struct report_data *d, enum zs_unit u)
{
	size_t i;

	for (i = 0; i < d->nruns; i++)
		if (d->runs[i].unit == u)
			return 1;
	return 0;
}
