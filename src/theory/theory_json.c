/*
 * theory_json — the theory's zerosim-theory/1 tree (docs/formats.md).
 * cJSON allocates through zs_malloc (zs_json_init), so no add can fail:
 * out of memory ends the program with one line.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "util/autograd.h"
#include "util/schedule.h"
#include "util/step.h"
#include "util/util.h"

/* ------------------------------------------------------------------------ */

static void num(cJSON *o, const char *key, double v) { zs_json_add_number(o, key, v); }

/* A number, or null when `known` is 0. */
static void num_or_null(cJSON *o, const char *key, int known, double v)
{
	if (known)
		num(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

/* true/false from 1/0, null from -1. */
static void tristate(cJSON *o, const char *key, int v)
{
	if (v < 0)
		cJSON_AddNullToObject(o, key);
	else
		cJSON_AddBoolToObject(o, key, v);
}

static void push_num(cJSON *arr, double v) { cJSON_AddItemToArray(arr, cJSON_CreateNumber(v)); }

/* ------------------------------------------------------------------------ */

static void comm(cJSON *o, double bytes, double elements, double psi)
{
	num(o, "comm_bytes_per_rank_per_step", bytes);
	num(o, "comm_per_param_fp32", bytes / (4 * psi));
	num(o, "comm_elements_per_param", elements / psi);
}

static void floor_json(cJSON *row, const struct theory_row *r, double psi)
{
	cJSON *o = cJSON_AddObjectToObject(row, "floor");
	num(o, "resident_bytes", r->floor.resident_bytes);
	num(o, "resident_bytes_per_param", r->floor.resident_bytes / psi);
	comm(o, r->floor.comm_bytes, r->floor.comm_elements, psi);
}

/* ------------------------------------------------------------------------ */
/* The plain loop's live storages at each phase's most (schedule.peak_live,
 * docs/formats.md): util/autograd.h's step walked as theory_autograd.c
 * walks it, and at the first event where a phase reaches its most, every
 * live storage grouped by what it is — the parameters, grads, Adam's state,
 * the buffers and the batch by their role; the step's own tensors by the op
 * that made it (`what`), the kind of module that made it and the phase it
 * was made in. The groups of a phase sum to its phase_peak_bytes; the
 * same at the start of each module's backward (schedule.mark_live, summing
 * to its mark). The report's "zerosim against PyTorch" names its departures
 * from them. */

struct live_group {
	const char *what, *module;
	enum ag_role role;
	enum zs_phase made;
	uint64_t bytes, count;
};

static const char *const role_names[] = {
	[AG_ROLE_PARAM] = "param", [AG_ROLE_GRAD] = "grad", [AG_ROLE_ADAM_M] = "adam_m",
	[AG_ROLE_ADAM_V] = "adam_v", [AG_ROLE_ADAM_STEP] = "adam_step", [AG_ROLE_BUFFER] = "buffer",
	[AG_ROLE_INPUT] = "input", [AG_ROLE_SCALER] = "grad_scaler", [AG_ROLE_TEMP] = "temp",
};

static int live_cmp(const void *a, const void *b)
{
	const struct live_group *x = a, *y = b;
	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : strcmp(x->what, y->what);
}

/* Walk n events: live[] and the total follow them; made[] gets each
 * allocation's phase; with at[] (index per phase, or SIZE_MAX), the most of
 * each phase and the first event reaching it. */
static void live_walk(const struct ag_step *s, const struct ag_event *ev, size_t n, unsigned char *live,
                      enum zs_phase *made, uint64_t *total, uint64_t *most, size_t *at)
{
	for (size_t i = 0; i < n; i++) {
		const struct ag_event *e = &ev[i];
		if (e->kind == AG_EV_ALLOC) {
			live[e->t] = 1;
			made[e->t] = e->phase;
			*total += ag_device_bytes(&s->tensor[e->t]);
		} else if (e->kind == AG_EV_FREE) {
			live[e->t] = 0;
			*total -= ag_device_bytes(&s->tensor[e->t]);
		}
		if (at != NULL && (at[e->phase] == SIZE_MAX || *total > most[e->phase])) {
			most[e->phase] = *total;
			at[e->phase] = i;
		}
	}
}

static void live_groups_json(cJSON *arr, const struct ag_step *s, const struct step_params *p,
                             const unsigned char *live, const enum zs_phase *made)
{
	struct live_group *g = zs_calloc(s->ntensors + 1, sizeof *g);
	size_t ng = 0;
	for (size_t t = 0; t < s->ntensors; t++) {
		const struct ag_tensor *x = &s->tensor[t];
		if (!live[t] || x->storage != t)
			continue;
		struct live_group k = {.role = x->role, .made = made[t], .what = role_names[x->role]};
		if (x->role == AG_ROLE_TEMP) {
			k.what = x->what;
			if (x->module >= 0 && (size_t)x->module < p->nmodules) {
				const struct step_module *md = &p->module[x->module];
				k.module = md->suffix[0] ? md->suffix : md->prefix;
			}
		}
		size_t j = 0;
		while (j < ng && !(g[j].role == k.role && g[j].made == k.made && !strcmp(g[j].what, k.what) &&
		                   (g[j].module == k.module ||
		                    (g[j].module && k.module && !strcmp(g[j].module, k.module)))))
			j++;
		if (j == ng)
			g[ng++] = k;
		g[j].bytes += ag_device_bytes(x);
		g[j].count++;
	}
	qsort(g, ng, sizeof *g, live_cmp);
	for (size_t j = 0; j < ng; j++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "what", g[j].what);
		if (g[j].module)
			cJSON_AddStringToObject(o, "module", g[j].module);
		else
			cJSON_AddNullToObject(o, "module");
		cJSON_AddStringToObject(o, "role", role_names[g[j].role]);
		cJSON_AddStringToObject(o, "made", zs_phase_name(g[j].made));
		num(o, "count", (double)g[j].count);
		num(o, "bytes", (double)g[j].bytes);
		cJSON_AddItemToArray(arr, o);
	}
	free(g);
}

static void peak_live_json(cJSON *parent, const struct theory_request *req, unsigned world)
{
	struct step_params p;
	struct ag_step s;
	if (theory_plain_step(req, world, &p, &s) < 0)
		return;
	unsigned char *live = zs_calloc(s.ntensors + 1, 1);
	enum zs_phase *made = zs_calloc(s.ntensors + 1, sizeof *made);
	uint64_t total = 0, most[ZS_NPHASES] = { 0 };
	size_t at[ZS_NPHASES];
	for (int ph = 0; ph < ZS_NPHASES; ph++)
		at[ph] = SIZE_MAX;
	/* the run's last step (the steady one, or with --steps 1 the first
	 * step's own list where there is one), from the state it starts in */
	const struct ag_event *step = s.event;
	size_t nstep = s.nevents;
	live_walk(&s, s.setup, s.nsetup, live, made, &total, NULL, NULL);
	if (s.step1 != NULL && req->config->steps == 1) {
		step = s.step1;
		nstep = s.nstep1;
	} else if (s.step1 != NULL) {
		live_walk(&s, s.step1, s.nstep1, live, made, &total, NULL, NULL);
		/* (the second step's own list: the last with --steps 2, else
		 * walked before the steady one) */
		if (s.step2 != NULL && req->config->steps == 2) {
			step = s.step2;
			nstep = s.nstep2;
		} else if (s.step2 != NULL) {
			live_walk(&s, s.step2, s.nstep2, live, made, &total, NULL, NULL);
		}
		/* what the first step left (its grads, Adam's state) was made
		 * before this step, as the set-up's prefix made it */
		for (size_t t = 0; t < s.ntensors; t++)
			if (live[t])
				made[t] = ZS_PH_SETUP;
	}
	live_walk(&s, s.first_step, s.nfirst, live, made, &total, NULL, NULL);
	unsigned char *start = zs_malloc(s.ntensors + 1);
	enum zs_phase *made0 = zs_malloc((s.ntensors + 1) * sizeof *made0);
	memcpy(start, live, s.ntensors + 1);
	memcpy(made0, made, (s.ntensors + 1) * sizeof *made0);
	uint64_t total0 = total;
	live_walk(&s, step, nstep, live, made, &total, most, at);
	cJSON *o = cJSON_AddObjectToObject(parent, "peak_live");
	for (int ph = 0; ph < ZS_NPHASES; ph++) {
		if (at[ph] == SIZE_MAX || ph == ZS_PH_SETUP)
			continue;
		memcpy(live, start, s.ntensors + 1);
		memcpy(made, made0, (s.ntensors + 1) * sizeof *made);
		total = total0;
		live_walk(&s, step, at[ph] + 1, live, made, &total, NULL, NULL);
		live_groups_json(cJSON_AddArrayToObject(o, zs_phase_name((enum zs_phase)ph)), &s, &p, live, made);
	}
	/* and at the start of each module's backward (the marks the reference
	 * checks), where a gradient held across modules shows */
	cJSON *mk = cJSON_AddObjectToObject(parent, "mark_live");
	memcpy(live, start, s.ntensors + 1);
	memcpy(made, made0, (s.ntensors + 1) * sizeof *made);
	for (size_t i = 0; i < nstep; i++) {
		const struct ag_event *e = &step[i];
		live_walk(&s, e, 1, live, made, &total, NULL, NULL);
		size_t n = e->kind == AG_EV_MARK ? strlen(e->label) : 0;
		if (n > 10 && !strncmp(e->label, "bwd:", 4) && !strcmp(e->label + n - 6, ":start"))
			live_groups_json(cJSON_AddArrayToObject(mk, e->label), &s, &p, live, made);
	}
	free(start);
	free(made0);
	free(live);
	free(made);
	ag_step_free(&s);
	step_params_free(&p);
}

/* The exact schedule: the MLP's, or zerosim's own transformer's. */
static void schedule_json(cJSON *row, const struct theory_request *req, const struct theory_row *r)
{
	const struct theory_schedule *s = &r->sched;
	double psi = (double)s->params;
	cJSON *o = cJSON_AddObjectToObject(row, "schedule"), *units = cJSON_AddArrayToObject(o, "units");
	size_t nu;
	uint64_t *n = theory_units_list(&req->desc->params, r->unit, &nu);

	for (size_t u = 0; u < nu; u++)
		push_num(units, (double)n[u]);
	free(n);
	num(o, "shard_elements", (double)s->shard_elements);
	num(o, "padded_elements", (double)s->padded_elements);
	num(o, "resident_bytes", (double)s->resident_bytes);
	num(o, "resident_bytes_per_param", (double)s->resident_bytes / psi);
	zs_cat_json(o, "resident_breakdown", s->resident_breakdown);
	num(o, "padding_bytes", s->padding_bytes);
	num(o, "peak_bytes", (double)s->peak_bytes);
	num(o, "peak_bytes_per_param", (double)s->peak_bytes / psi);
	zs_cat_json(o, "peak_breakdown", s->peak_breakdown);
	if (s->first_step_peak > 0) /* the PyTorch step's first step, a list of its own */
		num(o, "first_step_peak", (double)s->first_step_peak);
	if (s->has_phases) { /* the walk's most in each phase the step enters, and where it binds */
		cJSON *ph = cJSON_AddObjectToObject(o, "phase_peak_bytes");
		for (int p = 0; p < ZS_NPHASES; p++)
			if (s->phase_entered[p])
				num(ph, zs_phase_name((enum zs_phase)p), (double)s->phase_peak[p]);
		cJSON_AddStringToObject(o, "binding_phase", zs_phase_name(theory_binding_phase(s)));
	}
	if (req->model != NULL && zs_wrapper_step(req->config)) {
		theory_autograd_marks_json(o, req->model, req->config, req->config->batch, req->act.seq, r->world);
		peak_live_json(o, req, r->world);
	}
	if (s->host_resident_bytes > 0) {
		num(o, "host_resident_bytes", (double)s->host_resident_bytes);
		num(o, "host_peak_bytes", (double)s->host_peak_bytes);
		num(o, "host_resident_bytes_per_node", (double)s->host_resident_bytes_per_node);
	}
	comm(o, s->steps_differ ? s->comm_bytes_mean : (double)s->comm_bytes,
	     s->steps_differ ? s->comm_elements_mean : (double)s->comm_elements, psi);
}

/* A transformer's peak at the paper level, every part by name. */
static void peak_json(cJSON *row, const struct theory_request *req, const struct theory_row *r)
{
	const struct theory_peak *p = &r->peak;
	const struct theory_states *st = &p->states;
	double psi = (double)st->params;
	struct theory_units u;
	cJSON *o = cJSON_AddObjectToObject(row, "peak"), *units = cJSON_AddArrayToObject(o, "units");

	theory_units_of(&req->desc->params, &u);
	if (r->unit == ZS_UNIT_MODEL) {
		push_num(units, psi);
	} else {
		push_num(units, (double)u.embeddings);
		for (uint64_t l = 0; l < u.layers; l++)
			push_num(units, (double)u.block);
		if (u.head > 0)
			push_num(units, (double)u.head);
	}
	if (zs_config_trains_part(req->config)) /* the paper level's Ψ_t (docs/formats.md) */
		num(o, "trainable_params", (double)st->trained);
	num(o, "largest_unit", (double)st->largest_unit);
	num(o, "shard_elements", (double)st->shard_elements);
	num(o, "padded_elements", (double)st->padded_elements);
	num(o, "resident_bytes", (double)st->resident_bytes);
	zs_cat_json(o, "resident_breakdown", st->resident_breakdown);
	num(o, "padding_bytes", st->padding_bytes);
	num(o, "gathered_params_bytes", (double)st->gathered_params);
	num(o, "full_grads_bytes", (double)st->full_grads);
	num(o, "activations_bytes", (double)p->activations);
	cJSON *acts = cJSON_AddObjectToObject(o, "activations_breakdown");
	for (int a = 0; a < THEORY_NACTS; a++)
		num(acts, theory_act_name((enum theory_act)a), (double)p->act[a]);
	num(o, "activations_bytes_per_sequence", (double)p->activations_per_sequence);
	num(o, "peak_bytes", (double)p->peak_bytes);
	num(o, "peak_bytes_per_param", (double)p->peak_bytes / psi);
	zs_cat_json(o, "peak_breakdown", p->peak_breakdown);
}

/* ------------------------------------------------------------------------ */
/* A mixture of experts' routing (docs/formats.md, zerosim-theory/1's
 * "routing"; the reader is theory_routing.c): config's "routing" (its
 * mode; balanced and worst's counts a block, a file's path; the routed
 * bytes a token), and a row's schedule's "per_rank" (each rank's
 * resident, peak from its own counts, and bytes sent), "peak_rank" and,
 * from a file, the run's "routing" as measured. Nothing for another
 * model. */

/* The bytes one more token on the step's busiest expert adds to the
 * backward's scratch, its routed rows (step_moe_row: dye, dxe, dact, dgu)
 * at their element sizes in the walk's own buffers: (2d + 3F)·4 at fp32,
 * what one assignment's saved tensors (xe, gu, act, ye) cost too. Since
 * Σ n_e = B·T·k whatever the routing, it is what a routing moves the peak
 * by, a token of the largest count (docs/schedule.md, "Mixtures of
 * experts"); the report bounds a departure by it. */
static uint64_t routed_token_bytes(const struct theory_desc *d)
{
	uint64_t n = 0;
	for (size_t i = 0; d->model != NULL && d->has_buffers && i < d->bufs.n; i++)
		if (d->bufs.buf[i].role == STEP_MOE_SCRATCH)
			n += step_moe_row(d->model, &d->bufs.buf[i]) * d->bufs.buf[i].esize;
	return n;
}

static void routing_config_json(cJSON *cfg, const struct theory_request *req)
{
	const struct zs_model *m = req->model;
	if (m == NULL || m->experts == 0)
		return;
	const struct theory_routing *r = req->act.routing;
	enum theory_routing_mode mode = r != NULL ? r->mode : THEORY_ROUTING_BALANCED;
	cJSON *o = cJSON_AddObjectToObject(cfg, "routing");
	cJSON_AddStringToObject(o, "mode", theory_routing_name(mode));
	num(o, "routed_bytes_per_token", (double)routed_token_bytes(req->desc));
	if (mode == THEORY_ROUTING_FILE) {
		cJSON_AddStringToObject(o, "file", r->file);
		return;
	}
	struct theory_rank_counts rc;
	theory_rank_counts(&rc, r, m, (uint64_t)req->config->batch * req->act.seq, ZS_DP, ZS_UNIT_MODEL, 1, 0);
	cJSON *a = cJSON_AddArrayToObject(o, "tokens_per_expert");
	for (size_t e = 0; e < rc.experts; e++)
		push_num(a, (double)rc.counts[e]);
	theory_rank_counts_free(&rc);
}

static void routing_row_json(cJSON *schedule, const struct theory_request *req, const struct theory_row *r)
{
	const struct zs_model *m = req->model;
	if (m == NULL || m->experts == 0 || schedule == NULL)
		return;
	const struct theory_schedule *s = &r->sched;
	struct theory_bytes b;
	uint64_t *peaks = zs_calloc(r->world, sizeof *peaks);
	theory_request_bytes(req, &b);
	theory_walk_rank_peaks(req->desc, &b, req->config, r->scheme, r->unit, r->world, peaks);
	/* the walk is the engine's step's: the PyTorch step's rank peaks
	 * where its own description does (under --wrapper ddp, ranks routing
	 * apart, each its own list: theory_autograd_ranks) */
	uint64_t *res = zs_calloc(r->world, sizeof *res);
	unsigned bind = 0;
	for (unsigned k = 0; k < r->world; k++)
		res[k] = s->resident_bytes;
	for (unsigned k = 0; zs_wrapper_step(req->config) && k < r->world; k++)
		peaks[k] = s->peak_bytes;
	if (zs_wrapper_step(req->config) && req->config->moe_run != NULL)
		(void)theory_autograd_ranks(m, req->config, req->config->batch, req->act.seq, r->world, res, peaks, &bind,
		                            NULL);
	/* (under DeepSpeed theory_framework_json wrote one from rank 0's walk: each rank's replaces it; every
	 * rank's marks, where theory_autograd_marks_json wrote them, stay) */
	cJSON *old = cJSON_GetObjectItemCaseSensitive(schedule, "per_rank");
	cJSON *marks = old != NULL ? cJSON_DetachItemFromObjectCaseSensitive(old, "marks") : NULL;
	cJSON_DeleteItemFromObjectCaseSensitive(schedule, "per_rank");
	cJSON *per = cJSON_AddObjectToObject(schedule, "per_rank");
	cJSON *ra = cJSON_AddArrayToObject(per, "resident_bytes"), *pa = cJSON_AddArrayToObject(per, "peak_bytes");
	cJSON *ca = cJSON_AddArrayToObject(per, "comm_bytes_per_step");
	for (unsigned k = 0; k < r->world; k++) {
		push_num(ra, (double)res[k]);
		push_num(pa, (double)peaks[k]);
		push_num(ca, s->steps_differ ? s->comm_bytes_mean : (double)s->comm_bytes); /* ZeRO-3's step 1 records */
	}
	if (marks != NULL)
		cJSON_AddItemToObject(per, "marks", marks);
	free(res);
	free(peaks);
	num(schedule, "peak_rank", zs_wrapper_step(req->config) && req->config->moe_run != NULL ? bind
	                                                                                               : s->peak_rank);
	const struct theory_routing_run *x = theory_routing_per_rank(req->act.routing)
	                                         ? theory_routing_run_of(req->act.routing, r->scheme, r->unit, r->world)
	                                         : NULL;
	if (x != NULL)
		cJSON_AddItemToObject(schedule, "routing", cJSON_Duplicate(x->json, 1));
}

/* ------------------------------------------------------------------------ */

static void row_json(cJSON *rows, const struct theory_request *req, const struct theory_row *r)
{
	struct theory_bytes b;
	double psi = theory_request_params(req);
	cJSON *o = cJSON_CreateObject();

	cJSON_AddItemToArray(rows, o);
	theory_request_bytes(req, &b);
	cJSON_AddStringToObject(o, "scheme", zs_scheme_name(r->scheme));
	num(o, "world", r->world);
	cJSON_AddStringToObject(o, "unit", zs_unit_name(r->unit));
	floor_json(o, r, psi);

	if (req->model != NULL) {
		if (r->model_sched)
			schedule_json(o, req, r);
		else
			cJSON_AddNullToObject(o, "schedule");
		peak_json(o, req, r);
		if (r->model_sched && req->config->framework != ZS_FW_PAPER)
			theory_framework_json(cJSON_GetObjectItemCaseSensitive(o, "schedule"), req, r->scheme, r->world,
			                      &r->sched);
		if (r->model_sched)
			routing_row_json(cJSON_GetObjectItemCaseSensitive(o, "schedule"), req, r);
	} else if (req->shape_known) {
		schedule_json(o, req, r);
		if (req->config->framework != ZS_FW_PAPER)
			theory_framework_json(cJSON_GetObjectItemCaseSensitive(o, "schedule"), req, r->scheme, r->world,
			                      &r->sched);
	} else if (req->largest_unit > 0 && r->scheme == ZS_ZERO3) {
		/* Only the ZeRO-3 transient is known for a model without shape. */
		num(cJSON_AddObjectToObject(o, "schedule"), "transient_bytes", req->largest_unit * (b.p + b.g));
	} else {
		cJSON_AddNullToObject(o, "schedule");
	}

	if (req->alloc != NULL) /* --allocator cuda: the step's blocks replayed */
		theory_alloc_json(o, req, r);
	tristate(o, "fits", r->fits);
	tristate(o, "fits_peak", r->fits_peak);
	num_or_null(o, "max_batch", r->fits_peak >= 0, (double)r->max_batch);
	if (req->config->framework != ZS_FW_PAPER)
		theory_framework_row_json(o, req, r->scheme, r->unit, r->world);
}

static void model_json(cJSON *cfg, const struct zs_model *m, const struct step_params *p, int torch_step)
{
	struct theory_units u;
	cJSON *o = zs_model_json(cfg, m);
	if (torch_step) /* the PyTorch step's dropout (zerosim's own step has none) */
		zs_model_dropout_json(o, m);

	theory_units_of(p, &u);
	cJSON *units = cJSON_AddObjectToObject(o, "units");
	num(units, "embeddings", (double)u.embeddings);
	num(units, "block", (double)u.block);
	num(units, "blocks", (double)u.layers);
	num_or_null(units, "head", u.head > 0, (double)u.head);
}

static void config_json(cJSON *root, const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	struct theory_bytes b;
	cJSON *arr;
	int model = req->model != NULL;

	theory_request_bytes(req, &b);
	cJSON *cfg = cJSON_AddObjectToObject(root, "config");
	if (req->shape_known) {
		arr = cJSON_AddArrayToObject(cfg, "layers");
		for (size_t i = 0; i < c->nwidths; i++)
			push_num(arr, (double)c->widths[i]);
	} else {
		cJSON_AddNullToObject(cfg, "layers");
	}
	num_or_null(cfg, "batch", req->shape_known || model, c->batch);
	arr = cJSON_AddArrayToObject(cfg, "world");
	for (size_t i = 0; i < c->nworld; i++)
		push_num(arr, c->world[i]);
	arr = cJSON_AddArrayToObject(cfg, "schemes");
	for (size_t i = 0; i < c->nschemes; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(zs_scheme_name(c->schemes[i])));
	arr = cJSON_AddArrayToObject(cfg, "units");
	for (size_t i = 0; i < c->nunits; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateString(zs_unit_name(c->units[i])));
	cJSON_AddStringToObject(cfg, "precision", theory_request_precision(req));
	cJSON_AddStringToObject(cfg, "optimizer", zs_optimizer_name(c->optimizer));
	zs_config_json_framework(cfg, c, req->model != NULL);
	if (c->framework == ZS_FW_DEEPSPEED)
		num(cfg, "steps", c->steps); /* zero3's comm is a mean */
	cJSON *bpp = cJSON_AddObjectToObject(cfg, "bytes_per_param");
	num(bpp, "param", b.p);
	num(bpp, "grad", b.g);
	num(bpp, "optimizer", b.k);
	num_or_null(cfg, "largest_unit", req->largest_unit > 0, req->largest_unit);
	num_or_null(cfg, "device_mem_bytes", req->device_mem > 0, req->device_mem);
	num_or_null(cfg, "reserve_bytes", req->device_mem > 0, req->reserve);
	/* A transformer's shape and activation options; null for the others. */
	if (model) {
		model_json(cfg, req->model, &req->desc->params, zs_wrapper_step(req->config));
		num(cfg, "seq", (double)req->act.seq);
		cJSON_AddStringToObject(cfg, "recompute", zs_recompute_name(req->act.recompute));
		cJSON_AddBoolToObject(cfg, "flash_attn", req->act.flash);
		routing_config_json(cfg, req);
	} else {
		cJSON_AddNullToObject(cfg, "model");
		cJSON_AddNullToObject(cfg, "seq");
		cJSON_AddNullToObject(cfg, "recompute");
		cJSON_AddNullToObject(cfg, "flash_attn");
	}
}

cJSON *theory_json(const struct theory_request *request)
{
	const struct zs_config *c = request->config;
	cJSON *root = cJSON_CreateObject();
	/* the step description, built once for every row */
	struct theory_desc own;
	struct theory_request copy = *request;
	copy.desc = theory_request_desc(request, &own);
	const struct theory_request *req = &copy;

	cJSON_AddStringToObject(root, "format", "zerosim-theory/1");
	cJSON_AddStringToObject(root, "generator", PACKAGE_STRING);
	num(root, "params", theory_request_params(req));
	if (zs_config_trains_part(c) && req->model != NULL) /* Ψ_t, the floors' (docs/formats.md) */
		num(root, "trainable_params", theory_request_trained(req));
	config_json(root, req);
	cJSON *rows = cJSON_AddArrayToObject(root, "rows");
	for (size_t s = 0; s < c->nschemes; s++)
		for (size_t u = 0; u < c->nunits; u++)
			for (size_t w = 0; w < c->nworld; w++) {
				struct theory_row r;

				theory_row(req, c->schemes[s], c->units[u], c->world[w], &r);
				row_json(rows, req, &r);
			}
	if (copy.desc == &own)
		theory_desc_free(&own);
	return root;
}
