/*
 * theory_json — the theory's zerosim-theory/1 tree (docs/formats.md).
 * Every cJSON_Add* is checked: the helpers below return -1 when cJSON
 * could not allocate, and theory_json() cleans up through one label.
 */
#include "config.h"

#include "theory/theory.h"
#include "util/schedule.h"
#include "util/util.h"

/* ------------------------------------------------------------------------ */
/* Checked adds: 0, or -1 when cJSON ran out of memory. */

static int num(cJSON *o, const char *key, double v)
{
	return zs_json_add_number(o, key, v) != NULL ? 0 : -1;
}

static int str(cJSON *o, const char *key, const char *v)
{
	return cJSON_AddStringToObject(o, key, v) != NULL ? 0 : -1;
}

static int null(cJSON *o, const char *key)
{
	return cJSON_AddNullToObject(o, key) != NULL ? 0 : -1;
}

/* A number, or null when `known` is 0. */
static int num_or_null(cJSON *o, const char *key, int known, double v)
{
	return known ? num(o, key, v) : null(o, key);
}

/* true/false from 1/0, null from -1. */
static int tristate(cJSON *o, const char *key, int v)
{
	if (v < 0)
		return null(o, key);
	return cJSON_AddBoolToObject(o, key, v) != NULL ? 0 : -1;
}

static int object(cJSON *parent, const char *key, cJSON **out)
{
	*out = cJSON_AddObjectToObject(parent, key);
	return *out != NULL ? 0 : -1;
}

static int array(cJSON *parent, const char *key, cJSON **out)
{
	*out = cJSON_AddArrayToObject(parent, key);
	return *out != NULL ? 0 : -1;
}

static int push(cJSON *arr, cJSON *item)
{
	if (item == NULL)
		return -1;
	if (!cJSON_AddItemToArray(arr, item)) {
		cJSON_Delete(item);
		return -1;
	}
	return 0;
}

static int push_num(cJSON *arr, double v)
{
	return push(arr, cJSON_CreateNumber(v));
}

/* ------------------------------------------------------------------------ */

static int breakdown(cJSON *parent, const char *key, const uint64_t *cat)
{
	cJSON *b;

	if (object(parent, key, &b) < 0)
		return -1;
	for (int c = 0; c < THEORY_NCATEGORIES; c++)
		if (zs_cat_listed((enum zs_cat)c, (double)cat[c]) &&
		    num(b, theory_category_name((enum theory_category)c), (double)cat[c]) < 0)
			return -1;
	return 0;
}

static int comm(cJSON *o, double bytes, double elements, double psi)
{
	return num(o, "comm_bytes_per_rank_per_step", bytes) < 0 ||
	       num(o, "comm_per_param_fp32", bytes / (4 * psi)) < 0 ||
	       num(o, "comm_elements_per_param", elements / psi) < 0 ? -1 : 0;
}

static int floor_json(cJSON *row, const struct theory_row *r, double psi)
{
	cJSON *o;

	return object(row, "floor", &o) < 0 ||
	       num(o, "resident_bytes", r->floor.resident_bytes) < 0 ||
	       num(o, "resident_bytes_per_param", r->floor.resident_bytes / psi) < 0 ||
	       comm(o, r->floor.comm_bytes, r->floor.comm_elements, psi) < 0 ? -1 : 0;
}

/* The exact schedule: the MLP's, or zerosim's own transformer's. */
static int schedule_json(cJSON *row, const struct theory_row *r)
{
	const struct theory_schedule *s = &r->sched;
	double psi = (double)s->params;
	cJSON *o, *units;

	if (object(row, "schedule", &o) < 0 || array(o, "units", &units) < 0)
		return -1;
	for (size_t u = 0; u < s->nunits; u++)
		if (push_num(units, (double)s->units[u]) < 0)
			return -1;
	return num(o, "shard_elements", (double)s->shard_elements) < 0 ||
	       num(o, "padded_elements", (double)s->padded_elements) < 0 ||
	       num(o, "resident_bytes", (double)s->resident_bytes) < 0 ||
	       num(o, "resident_bytes_per_param", (double)s->resident_bytes / psi) < 0 ||
	       breakdown(o, "resident_breakdown", s->resident_breakdown) < 0 ||
	       num(o, "padding_bytes", s->padding_bytes) < 0 ||
	       num(o, "peak_bytes", (double)s->peak_bytes) < 0 ||
	       num(o, "peak_bytes_per_param", (double)s->peak_bytes / psi) < 0 ||
	       breakdown(o, "peak_breakdown", s->peak_breakdown) < 0 ||
	       (s->host_resident_bytes > 0 && (num(o, "host_resident_bytes", (double)s->host_resident_bytes) < 0 ||
	                                       num(o, "host_peak_bytes", (double)s->host_peak_bytes) < 0 ||
	                                       num(o, "host_resident_bytes_per_node",
	                                           (double)s->host_resident_bytes_per_node) < 0)) ||
	       comm(o, s->steps_differ ? s->comm_bytes_mean : (double)s->comm_bytes,
	            s->steps_differ ? s->comm_elements_mean : (double)s->comm_elements, psi) < 0 ? -1 : 0;
}

/* A transformer's peak at the paper level, every part by name. */
static int peak_json(cJSON *row, const struct theory_request *req, const struct theory_row *r)
{
	const struct theory_peak *p = &r->peak;
	const struct theory_states *st = &p->states;
	double psi = (double)st->params;
	struct theory_units u;
	cJSON *o, *units, *acts;

	if (object(row, "peak", &o) < 0 || array(o, "units", &units) < 0)
		return -1;
	theory_model_units(req->model, &u);
	if (r->unit == ZS_UNIT_MODEL) {
		if (push_num(units, psi) < 0)
			return -1;
	} else {
		if (push_num(units, (double)u.embeddings) < 0)
			return -1;
		for (uint64_t l = 0; l < u.layers; l++)
			if (push_num(units, (double)u.block) < 0)
				return -1;
		if (u.head > 0 && push_num(units, (double)u.head) < 0)
			return -1;
	}
	if (num(o, "largest_unit", (double)st->largest_unit) < 0 ||
	    num(o, "shard_elements", (double)st->shard_elements) < 0 ||
	    num(o, "padded_elements", (double)st->padded_elements) < 0 ||
	    num(o, "resident_bytes", (double)st->resident_bytes) < 0 ||
	    breakdown(o, "resident_breakdown", st->resident_breakdown) < 0 ||
	    num(o, "padding_bytes", st->padding_bytes) < 0 ||
	    num(o, "gathered_params_bytes", (double)st->gathered_params) < 0 ||
	    num(o, "full_grads_bytes", (double)st->full_grads) < 0 ||
	    num(o, "activations_bytes", (double)p->activations) < 0 ||
	    object(o, "activations_breakdown", &acts) < 0)
		return -1;
	for (int a = 0; a < THEORY_NACTS; a++)
		if (num(acts, theory_act_name((enum theory_act)a), (double)p->act[a]) < 0)
			return -1;
	return num(o, "activations_bytes_per_sequence", (double)p->activations_per_sequence) < 0 ||
	       num(o, "peak_bytes", (double)p->peak_bytes) < 0 ||
	       num(o, "peak_bytes_per_param", (double)p->peak_bytes / psi) < 0 ||
	       breakdown(o, "peak_breakdown", p->peak_breakdown) < 0 ? -1 : 0;
}

static int row_json(cJSON *rows, const struct theory_request *req, const struct theory_row *r)
{
	struct theory_bytes b;
	double psi = theory_request_params(req);
	cJSON *o = cJSON_CreateObject(), *s;

	if (push(rows, o) < 0)
		return -1;
	theory_request_bytes(req, &b);
	if (str(o, "scheme", zs_scheme_name(r->scheme)) < 0 || num(o, "world", r->world) < 0 ||
	    str(o, "unit", zs_unit_name(r->unit)) < 0 || floor_json(o, r, psi) < 0)
		return -1;

	if (req->model != NULL) {
		if ((r->model_sched ? schedule_json(o, r) : null(o, "schedule")) < 0 || peak_json(o, req, r) < 0)
			return -1;
		if (r->model_sched && req->config->framework != ZS_FW_PAPER &&
		    theory_framework_json(cJSON_GetObjectItemCaseSensitive(o, "schedule"), req, r->scheme, r->world,
		                          &r->sched) < 0)
			return -1;
	} else if (req->shape_known) {
		if (schedule_json(o, r) < 0)
			return -1;
		if (req->config->framework != ZS_FW_PAPER &&
		    theory_framework_json(cJSON_GetObjectItemCaseSensitive(o, "schedule"), req, r->scheme, r->world,
		                          &r->sched) < 0)
			return -1;
	} else if (req->largest_unit > 0 && r->scheme == ZS_ZERO3) {
		/* Only the ZeRO-3 transient is known for a model without shape. */
		if (object(o, "schedule", &s) < 0 ||
		    num(s, "transient_bytes", req->largest_unit * (b.p + b.g)) < 0)
			return -1;
	} else if (null(o, "schedule") < 0) {
		return -1;
	}

	return tristate(o, "fits", r->fits) < 0 || tristate(o, "fits_peak", r->fits_peak) < 0 ||
	       num_or_null(o, "max_batch", r->fits_peak >= 0, (double)r->max_batch) < 0 ||
	       (req->config->framework != ZS_FW_PAPER && theory_framework_row_json(o, req, r->scheme, r->unit, r->world) < 0)
	       ? -1 : 0;
}

static int model_json(cJSON *cfg, const struct zs_model *m)
{
	struct theory_units u;
	cJSON *o, *units;

	theory_model_units(m, &u);
	return object(cfg, "model", &o) < 0 ||
	       str(o, "name", m->name) < 0 ||
	       str(o, "model_type", m->model_type) < 0 ||
	       str(o, "family", zs_family_name(m->family)) < 0 ||
	       num(o, "hidden_size", (double)m->hidden) < 0 ||
	       num(o, "intermediate_size", (double)m->intermediate) < 0 ||
	       num(o, "layers", (double)m->layers) < 0 ||
	       num(o, "attention_heads", (double)m->heads) < 0 ||
	       num(o, "key_value_heads", (double)m->kv_heads) < 0 ||
	       num(o, "head_dim", (double)m->head_dim) < 0 ||
	       num(o, "vocab_size", (double)m->vocab) < 0 ||
	       num(o, "max_positions", (double)m->positions) < 0 ||
	       cJSON_AddBoolToObject(o, "tie_word_embeddings", m->tied) == NULL ||
	       object(o, "units", &units) < 0 ||
	       num(units, "embeddings", (double)u.embeddings) < 0 ||
	       num(units, "block", (double)u.block) < 0 ||
	       num(units, "blocks", (double)u.layers) < 0 ||
	       num_or_null(units, "head", u.head > 0, (double)u.head) < 0 ? -1 : 0;
}

static int config_json(cJSON *root, const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	struct theory_bytes b;
	cJSON *cfg, *arr, *bpp;
	int model = req->model != NULL;

	theory_request_bytes(req, &b);
	if (object(root, "config", &cfg) < 0)
		return -1;
	if (req->shape_known) {
		if (array(cfg, "layers", &arr) < 0)
			return -1;
		for (size_t i = 0; i < c->nwidths; i++)
			if (push_num(arr, (double)c->widths[i]) < 0)
				return -1;
	} else if (null(cfg, "layers") < 0) {
		return -1;
	}
	if (num_or_null(cfg, "batch", req->shape_known || model, c->batch) < 0 ||
	    array(cfg, "world", &arr) < 0)
		return -1;
	for (size_t i = 0; i < c->nworld; i++)
		if (push_num(arr, c->world[i]) < 0)
			return -1;
	if (array(cfg, "schemes", &arr) < 0)
		return -1;
	for (size_t i = 0; i < c->nschemes; i++)
		if (push(arr, cJSON_CreateString(zs_scheme_name(c->schemes[i]))) < 0)
			return -1;
	if (array(cfg, "units", &arr) < 0)
		return -1;
	for (size_t i = 0; i < c->nunits; i++)
		if (push(arr, cJSON_CreateString(zs_unit_name(c->units[i]))) < 0)
			return -1;
	if (str(cfg, "precision", theory_request_precision(req)) < 0 ||
	    str(cfg, "optimizer", zs_optimizer_name(c->optimizer)) < 0 ||
	    (c->framework != ZS_FW_PAPER && str(cfg, "framework", zs_framework_name(c->framework)) < 0) ||
	    (c->framework == ZS_FW_TORCH && (num(cfg, "bucket_cap_mb", c->bucket_cap_mb) < 0 ||
	                                     str(cfg, "prefetch", zs_prefetch_name(c->prefetch)) < 0)) ||
	    zs_config_json_deepspeed(cfg, c) < 0 ||
	    (c->framework == ZS_FW_DEEPSPEED && num(cfg, "steps", c->steps) < 0) || /* zero3's comm is a mean */
	    object(cfg, "bytes_per_param", &bpp) < 0 ||
	    num(bpp, "param", b.p) < 0 || num(bpp, "grad", b.g) < 0 ||
	    num(bpp, "optimizer", b.k) < 0 ||
	    num_or_null(cfg, "largest_unit", req->largest_unit > 0, req->largest_unit) < 0 ||
	    num_or_null(cfg, "device_mem_bytes", req->device_mem > 0, req->device_mem) < 0 ||
	    num_or_null(cfg, "reserve_bytes", req->device_mem > 0, req->reserve) < 0)
		return -1;
	/* A transformer's shape and activation options; null for the others. */
	if (model) {
		if (model_json(cfg, req->model) < 0 || num(cfg, "seq", (double)req->act.seq) < 0 ||
		    str(cfg, "recompute", zs_recompute_name(req->act.recompute)) < 0 ||
		    cJSON_AddBoolToObject(cfg, "flash_attn", req->act.flash) == NULL)
			return -1;
	} else if (null(cfg, "model") < 0 || null(cfg, "seq") < 0 || null(cfg, "recompute") < 0 ||
	           null(cfg, "flash_attn") < 0) {
		return -1;
	}
	return 0;
}

cJSON *theory_json(const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	cJSON *root = cJSON_CreateObject(), *rows;
	int ok = 0;

	if (root == NULL || str(root, "format", "zerosim-theory/1") < 0 ||
	    str(root, "generator", PACKAGE_STRING) < 0 ||
	    num(root, "params", theory_request_params(req)) < 0 || config_json(root, req) < 0 ||
	    array(root, "rows", &rows) < 0)
		goto end;
	for (size_t s = 0; s < c->nschemes; s++)
		for (size_t u = 0; u < c->nunits; u++)
			for (size_t w = 0; w < c->nworld; w++) {
				struct theory_row r;

				theory_row(req, c->schemes[s], c->units[u], c->world[w], &r);
				if (row_json(rows, req, &r) < 0)
					goto end;
			}
	ok = 1;
end:
	if (!ok) {
		cJSON_Delete(root);
		root = NULL;
	}
	return root;
}
