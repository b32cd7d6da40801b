/*
 * measure_json — see measure_json.h. Byte counts are integers below 2^53,
 * exact as JSON numbers; ratios are plain doubles.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "engine/measure_json.h"
#include "engine/tfm.h"
#include "engine/tracker.h"
#include "util/lora.h"
#include "util/util.h"

static void push(cJSON *a, double v) { cJSON_AddItemToArray(a, cJSON_CreateNumber(v)); }

/* The tracker counts in size_t; the breakdown's writer is the theory's too. */
static void breakdown(cJSON *parent, const char *key, const size_t *b)
{
	uint64_t bytes[ZS_NCATS];
	for (int c = 0; c < ZS_NCATS; c++)
		bytes[c] = b[c];
	zs_cat_json(parent, key, bytes);
}

/* Ψ: the MLP's widths', or the transformer's (with LoRA's adapters
 * under every framework that takes --lora-r: PEFT's model, util/lora.h,
 * as theory.json's params counts it). */
static double params_of(const struct zs_config *c)
{
	if (c->tfm == NULL)
		return zs_config_params(c);
	if (!c->lora_r)
		return (double)tfm_nparams(&c->tfm->dims);
	struct zs_model shape;
	struct step_params p;
	tfm_dims_shape(&shape, &c->tfm->dims);
	if (zs_lora_params(&p, &shape, &c->tfm->hf, c, NULL) != 0)
		abort(); /* the CLI refused it (zs_lora_paper_check; the PyTorch step's own check) */
	double n = (double)p.numel;
	step_params_free(&p);
	return n;
}

/* "layers": the MLP's widths; null for a transformer, whose shape is
 * "model" (with "seq" and "recompute" beside it: added keys, as
 * zerosim-theory/1 writes them). */
static void shape(cJSON *o, const struct zs_config *c)
{
	if (c->tfm == NULL) {
		cJSON *layers = cJSON_AddArrayToObject(o, "layers");
		for (size_t l = 0; l < c->nwidths; l++)
			push(layers, (double)c->widths[l]);
		return;
	}
	cJSON_AddNullToObject(o, "layers");
	cJSON *mo = zs_model_json(o, &c->tfm->hf);
	if (zs_wrapper_step(c)) /* the PyTorch step's dropout (zerosim's own step has none) */
		zs_model_dropout_json(mo, &c->tfm->hf);
	zs_json_add_number(o, "seq", (double)c->tfm->seq);
	cJSON_AddStringToObject(o, "recompute", zs_recompute_name(c->tfm->recompute));
}

void measure_digest_string(char *buf, size_t n, unsigned long long digest)
{
	snprintf(buf, n, "xxh3:%016llx", digest);
}

cJSON *measure_json_new(const struct zs_config *c, const char *case_path)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "format", "zerosim-measured/1");
	cJSON_AddStringToObject(root, "generator", PACKAGE_STRING);
	cJSON *cfg = cJSON_AddObjectToObject(root, "config");
	shape(cfg, c);
	zs_json_add_number(cfg, "params", params_of(c));
	zs_json_add_number(cfg, "steps", c->steps);
	zs_json_add_number(cfg, "batch", c->batch);
	if (case_path != NULL) { /* the case holds the weights and batches: no seed is used */
		cJSON_AddNullToObject(cfg, "seed");
	} else {
		zs_json_add_number(cfg, "seed", (double)c->seed);
	}
	zs_json_add_number(cfg, "lr", c->lr);
	if (c->optimizer == ZS_ADAM) { /* Adam's; SGD has none */
		zs_json_add_number(cfg, "beta1", c->beta1);
		zs_json_add_number(cfg, "beta2", c->beta2);
		zs_json_add_number(cfg, "eps", c->eps);
	}
	cJSON_AddStringToObject(cfg, "precision", zs_precision_name(c->precision));
	cJSON_AddStringToObject(cfg, "optimizer", zs_optimizer_name(c->optimizer));
	zs_config_json_framework(cfg, c, c->tfm != NULL);
	unsigned p, g, k;
	zs_bytes_per_param(c->precision, c->optimizer, &p, &g, &k);
	cJSON *bpp = cJSON_AddObjectToObject(cfg, "bytes_per_param");
	zs_json_add_number(bpp, "param", p);
	zs_json_add_number(bpp, "grad", g);
	zs_json_add_number(bpp, "optimizer", k);
	if (case_path != NULL)
		cJSON_AddStringToObject(cfg, "case", case_path);
	else
		cJSON_AddNullToObject(cfg, "case");
	cJSON_AddArrayToObject(root, "runs");
	return root;
}

/* A log's events, in order: phase, op, category, bytes, the rank's bytes
 * after it, and (alloc and free) the block's id. A live block has no
 * current_bytes (it was allocated before the log began). */
static void events_json(cJSON *parent, const char *key, const struct zs_event *ev, size_t n, int live)
{
	cJSON *tl = cJSON_AddArrayToObject(parent, key);
	for (size_t e = 0; e < n; e++, ev++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToArray(tl, o);
		int block = ev->op == ZS_OP_ALLOC || ev->op == ZS_OP_FREE;
		if (live) {
			zs_json_add_number(o, "id", (double)ev->id);
			cJSON_AddStringToObject(o, "category", zs_cat_name(ev->cat));
			zs_json_add_number(o, "bytes", (double)ev->bytes);
			continue;
		}
		cJSON_AddStringToObject(o, "phase", zs_phase_name(ev->phase));
		cJSON_AddStringToObject(o, "op", tracker_op_name(ev->op));
		cJSON_AddStringToObject(o, "category", block ? zs_cat_name(ev->cat) : "none");
		zs_json_add_number(o, "bytes", (double)ev->bytes);
		zs_json_add_number(o, "current_bytes", (double)ev->current);
		if (block || ev->op == ZS_OP_WORKSPACE)
			zs_json_add_number(o, "id", (double)ev->id);
	}
}

/* A mixture of experts' routing: the tokens each expert got, in each
 * block, at each step, on each rank ("routing", docs/formats.md); under
 * --grad-accum K (the PyTorch step) each step's K micro-steps' blocks,
 * micro-step major, "micro_steps" K beside "blocks" L. */
static void routing_json(cJSON *run, const struct zs_result *res)
{
	size_t L = res->routing_blocks, E = res->routing_experts, K = res->routing_micro > 1 ? res->routing_micro : 1;
	size_t nblocks = L / K; /* the model's (L: a step's lists) */
	cJSON *o = cJSON_AddObjectToObject(run, "routing");
	zs_json_add_number(o, "blocks", (double)nblocks);
	if (K > 1)
		zs_json_add_number(o, "micro_steps", (double)K);
	zs_json_add_number(o, "experts", (double)E);
	cJSON *ranks = cJSON_AddArrayToObject(o, "tokens_per_expert");
	for (unsigned k = 0; k < res->world; k++) {
		cJSON *steps = cJSON_CreateArray();
		cJSON_AddItemToArray(ranks, steps);
		for (unsigned t = 0; t < res->steps; t++) {
			cJSON *blocks = cJSON_CreateArray();
			cJSON_AddItemToArray(steps, blocks);
			for (size_t l = 0; l < L; l++) {
				cJSON *counts = cJSON_CreateArray();
				cJSON_AddItemToArray(blocks, counts);
				for (size_t e = 0; e < E; e++)
					push(counts, (double)res->routing[(((size_t)k * res->steps + t) * L + l) * E + e]);
			}
		}
	}
}

/* The caching allocator's replay: per rank, and the rank whose reserved
 * peak is the highest (the one a device would run out on first). */
static void allocator_json(cJSON *run, const struct zs_result *res)
{
	unsigned N = res->world, b = 0;
	for (unsigned k = 1; k < N; k++)
		if (res->alloc[k].st.reserved_peak > res->alloc[b].st.reserved_peak)
			b = k;
	cJSON *a = cJSON_AddObjectToObject(run, "allocator");
	zs_json_add_number(a, "rank", b);
	cJSON *per = cJSON_CreateObject(), *arr[ZS_ALLOC_NKEYS];
	for (size_t i = 0; i < ZS_ALLOC_NKEYS; i++)
		arr[i] = cJSON_AddArrayToObject(per, zs_alloc_keys[i]);
	for (unsigned k = 0; k < N; k++) {
		double v[ZS_ALLOC_NKEYS];
		zs_alloc_values(&res->alloc[k], v);
		for (size_t i = 0; i < ZS_ALLOC_NKEYS; i++) {
			if (k == b)
				zs_json_add_number(a, zs_alloc_keys[i], v[i]);
			push(arr[i], v[i]);
		}
	}
	cJSON_AddItemToObject(a, "per_rank", per);
}

/* Rank k's marks (zs_json_rank_marks's fill; ctx the zs_result). */
static void rank_marks(cJSON *o, unsigned k, const void *ctx)
{
	const struct zs_result *res = ctx;
	for (size_t i = 0; i < res->nmarks; i++)
		zs_json_add_number(o, res->mark_label[i], (double)res->rank_mark_bytes[(size_t)k * res->nmarks + i]);
}

void measure_json_add_run(cJSON *root, const struct zs_config *c, const struct zs_result *res)
{
	double psi = params_of(c);
	unsigned N = res->world, b = res->binding_rank;
	cJSON *run = cJSON_CreateObject();
	cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(root, "runs"), run);
	cJSON_AddStringToObject(run, "scheme", zs_scheme_name(res->scheme));
	zs_json_add_number(run, "world", N);
	cJSON_AddStringToObject(run, "unit", zs_unit_name(res->unit));
	cJSON_AddStringToObject(run, "backend", res->os_peak != NULL ? "mpi" : "inprocess");
	zs_json_add_number(run, "processes", res->processes);
	cJSON *units = cJSON_AddArrayToObject(run, "units");
	for (size_t u = 0; u < res->nunits; u++)
		push(units, (double)res->unit_n[u]);
	zs_json_add_number(run, "shard_elements", (double)res->shard_elements);
	zs_json_add_number(run, "padded_elements", (double)res->padded_elements);

	zs_json_add_number(run, "resident_bytes", (double)res->resident[b]);
	zs_json_add_number(run, "resident_bytes_per_param", (double)res->resident[b] / psi);
	breakdown(run, "resident_breakdown", res->resident_breakdown);
	zs_json_add_number(run, "peak_bytes", (double)res->peak[b]);
	zs_json_add_number(run, "peak_bytes_per_param", (double)res->peak[b] / psi);
	zs_json_add_number(run, "peak_rank", b);
	breakdown(run, "peak_breakdown", res->peak_breakdown);
	if (res->first_step_peak > 0) /* the PyTorch step's first step, a list of its own */
		zs_json_add_number(run, "first_step_peak", (double)res->first_step_peak);
	if (res->nmarks > 0) { /* the plain loop's boundaries, as the theory's schedule gives them */
		cJSON *marks = cJSON_AddObjectToObject(run, "marks");
		if (marks == NULL)
			zs_oom(__FILE__, __LINE__);
		for (size_t i = 0; i < res->nmarks; i++)
			zs_json_add_number(marks, res->mark_label[i], (double)res->mark_bytes[i]);
	}

	cJSON *per = cJSON_AddObjectToObject(run, "per_rank");
	cJSON *ra = cJSON_AddArrayToObject(per, "resident_bytes"), *pa = cJSON_AddArrayToObject(per, "peak_bytes"), *ca = cJSON_AddArrayToObject(per, "comm_bytes_per_step");
	for (unsigned k = 0; k < N; k++) {
		unsigned long long sent = 0;
		for (int kind = 0; kind < ZS_NCOLL; kind++)
			sent += res->comm[k].bytes[kind];
		push(ra, (double)res->resident[k]);
		push(pa, (double)res->peak[k]);
		push(ca, (double)sent / res->steps);
	}
	if (res->rank_mark_bytes != NULL) /* torch's zero1: every rank's marks (the ranks differ) */
		zs_json_rank_marks(per, N, rank_marks, res);
	if (res->host_resident != NULL) {
		/* With --offload: the host bytes apart from the device's. */
		zs_json_add_number(run, "host_resident_bytes", (double)res->host_resident[b]);
		zs_json_add_number(run, "host_peak_bytes", (double)res->host_peak[b]);
		/* A node holds ranks [jR, (j+1)R): the most any node holds. */
		size_t R = c->ranks_per_node, node = 0;
		for (unsigned j = 0; j < N / R; j++) {
			size_t sum = 0;
			for (size_t k = j * R; k < (j + 1) * R; k++)
				sum += res->host_resident[k];
			node = sum > node ? sum : node;
		}
		zs_json_add_number(run, "host_resident_bytes_per_node", (double)node);
		cJSON *hr = cJSON_AddArrayToObject(per, "host_resident_bytes"), *hp = cJSON_AddArrayToObject(per, "host_peak_bytes");
		for (unsigned k = 0; k < N; k++) {
			push(hr, (double)res->host_resident[k]);
			push(hp, (double)res->host_peak[k]);
		}
	}
	if (res->os_peak != NULL) {
		/* Under MPI: each rank's process, as the kernel counts it. */
		cJSON *oa = cJSON_AddArrayToObject(per, "os_peak_bytes");
		for (unsigned k = 0; k < N; k++)
			push(oa, (double)res->os_peak[k]);
	}

	/* The binding rank for comm is the one that sends the most. */
	unsigned cb = 0;
	unsigned long long most = 0;
	for (unsigned k = 0; k < N; k++) {
		unsigned long long sent = 0;
		for (int kind = 0; kind < ZS_NCOLL; kind++)
			sent += res->comm[k].bytes[kind];
		if (sent > most) {
			most = sent;
			cb = k;
		}
	}
	unsigned long long elems = 0;
	cJSON *coll = cJSON_AddObjectToObject(run, "collectives");
	for (int kind = 0; kind < ZS_NCOLL; kind++) {
		if (kind == ZS_BROADCAST && res->comm[cb].calls[kind] == 0)
			continue; /* only torch's zero1 broadcasts: the others' output stays as it was */
		cJSON *one = cJSON_AddObjectToObject(coll, coll_kind_name((enum zs_coll_kind)kind));
		zs_json_add_number(one, "calls_per_step", (double)res->comm[cb].calls[kind] / res->steps);
		zs_json_add_number(one, "bytes_per_step", (double)res->comm[cb].bytes[kind] / res->steps);
		if (res->os_peak != NULL) {
			zs_json_add_number(one, "mpi_calls_per_step", (double)res->comm[cb].wire_calls[kind] / res->steps);
			zs_json_add_number(one, "mpi_bytes_per_step", (double)res->comm[cb].wire_bytes[kind] / res->steps);
		}
		elems += res->comm[cb].elements[kind];
	}
	double bytes_step = (double)most / res->steps;
	zs_json_add_number(run, "comm_bytes_per_rank_per_step", bytes_step);
	zs_json_add_number(run, "comm_per_param_fp32", bytes_step / (4.0 * psi));
	zs_json_add_number(run, "comm_elements_per_param", (double)elems / res->steps / psi);

	cJSON *losses = cJSON_AddArrayToObject(run, "losses");
	for (unsigned t = 0; t < res->steps; t++)
		push(losses, res->losses[t]);
	zs_json_add_number(run, "final_loss", res->losses[res->steps - 1]);
	char digest[32];
	measure_digest_string(digest, sizeof digest, res->digest);
	cJSON_AddStringToObject(run, "weights_digest", digest);
	if (res->routing != NULL)
		routing_json(run, res);

	if (res->alloc != NULL)
		allocator_json(run, res);
	if (res->timeline == NULL) {
		cJSON_AddNullToObject(run, "timeline");
		return;
	}
	events_json(run, "timeline", res->timeline, res->ntimeline, 0);
	/* Which allocator the ids and sizes are meant to be replayed through
	 * (the model in util/cuda_alloc.h follows it). */
	cJSON_AddStringToObject(run, "cuda_alloc", "pytorch-" CUDA_ALLOC_TORCH_RELEASE);
	const struct zs_evlog *l = res->timeline_logs;
	events_json(run, "timeline_live", l[0].live, l[0].nlive, 1);
	if (res->ntimeline_logs < 2)
		return;
	cJSON *ranks = cJSON_AddArrayToObject(run, "timeline_ranks");
	for (unsigned k = 1; k < res->ntimeline_logs; k++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToArray(ranks, o);
		zs_json_add_number(o, "rank", k);
		events_json(o, "timeline", l[k].events, l[k].nevents, 0);
		events_json(o, "timeline_live", l[k].live, l[k].nlive, 1);
	}
}

cJSON *measure_json_weights(const struct zs_config *c, const struct zs_result *res)
{
	cJSON *root = cJSON_CreateObject();
	cJSON_AddStringToObject(root, "format", "zerosim-weights/1");
	shape(root, c);
	cJSON_AddStringToObject(root, "scheme", zs_scheme_name(res->scheme));
	zs_json_add_number(root, "world", res->world);
	cJSON_AddStringToObject(root, "unit", zs_unit_name(res->unit));
	char digest[32];
	measure_digest_string(digest, sizeof digest, res->digest);
	cJSON_AddStringToObject(root, "digest", digest);
	size_t psi = (size_t)params_of(c);
	cJSON *w = cJSON_AddArrayToObject(root, "weights");
	for (size_t i = 0; i < psi; i++)
		push(w, res->weights[i]);
	return root;
}
