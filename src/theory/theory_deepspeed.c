/*
 * theory_deepspeed — DeepSpeed beside zerosim, from the shape alone
 * (docs/schedule.md, "DeepSpeed"). Nothing here asks the engine.
 *
 * DeepSpeed's own estimators, deepspeed/runtime/zero/stage_1_and_2.py
 * estimate_zero2_model_states_mem_needs (lines 2430-2447 at 38327e0, the
 * formula at 2444, since f4cb866 of June 2024; before it printed
 * 4Ψ + 16Ψ/N) and stage3.py estimate_zero3_model_states_mem_needs (lines
 * 3008-3044; 4L at 3019, the sum at 3038), the rows without offload.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "util/ds_coord.h"
#include "util/schedule.h"
#include "util/step.h"
#include "util/util.h"

/* The largest parameter tensor of the MLP's description (util/step.h):
 * the offload's temporary grad buffers. */
static uint64_t largest_tensor(const struct theory_shape *s)
{
	struct step_params p;
	step_params_mlp(&p, s->widths, s->nwidths);
	uint64_t m = step_params_largest_tensor(&p);
	step_params_free(&p);
	return m;
}

/* ZeRO-1 and ZeRO-2 as docs/schedule.md's "DeepSpeed" gives them are the
 * walk's (theory_walk.c): the paper's units, shards and collectives (a
 * reduce-scatter of each unit's grads, an all-gather of its params; none
 * at N = 1), theory_deepspeed_resident's state, backward's n_b buckets of
 * B elements and full grads (Ψ·g for ZeRO-1, a unit's n·g at a time for
 * ZeRO-2), then step()'s buffers; ZeRO-3's by module, the coordinator's
 * answers (util/ds_coord.h) on the MLP's units. */
void theory_deepspeed_schedule(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                               enum zs_unit unit, unsigned world, struct theory_schedule *out)
{
	if (c->framework == ZS_FW_DEEPSPEED && scheme != ZS_DP)
		theory_schedule_walk(s, c, scheme, unit, world, out);
}

void theory_deepspeed_resident(const struct theory_bytes *b, const struct zs_config *c, uint64_t tmax,
                               unsigned world, uint64_t ntrain, uint64_t S, struct theory_schedule *out,
                               uint64_t *step)
{
	uint64_t psi = out->params, opt = 2ull * b->adam + b->momentum;
	uint64_t *rb = out->resident_breakdown;
	enum zs_cat pc = b->p == 2 ? ZS_CAT_PARAM16 : ZS_CAT_PARAM32;
	enum zs_cat gc = b->g == 2 ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32;
	memset(rb, 0, sizeof out->resident_breakdown);
	memset(step, 0, ZS_NCATS * sizeof *step);
	rb[pc] = psi * b->p;
	rb[gc] = S * b->g;
	rb[ZS_CAT_MASTER32] = S * 4;
	rb[ZS_CAT_ADAM_M] = S * b->adam;
	rb[ZS_CAT_ADAM_V] = S * b->adam;
	rb[ZS_CAT_MOMENTUM] = S * b->momentum;
	/* Offloaded: the grad partition (fp32), the fp32 partition and the
	 * optimizer state on the host, with a buffer of the largest tensor's
	 * grads there and one on the device; the step's device copy of the
	 * fp32 partition replaces the fp32 gradient partition. */
	if (c->offload == ZS_OFFLOAD_OPTIMIZER) {
		out->host_resident_bytes = S * (4 + 4 + opt) + tmax * b->g;
		out->host_peak_bytes = out->host_resident_bytes;
		out->host_resident_bytes_per_node = out->host_resident_bytes * c->ranks_per_node;
		rb[gc] = tmax * b->g;
		rb[ZS_CAT_MASTER32] = rb[ZS_CAT_ADAM_M] = rb[ZS_CAT_ADAM_V] = rb[ZS_CAT_MOMENTUM] = 0;
		step[ZS_CAT_MASTER32] = S * 4;
	} else {
		step[ZS_CAT_GRAD32] = S * 4;
		step[ZS_CAT_GRAD16] = b->g == 2 ? S * b->g : 0;
	}
	out->resident_bytes = 0;
	for (int k = 0; k < ZS_NCATS; k++)
		out->resident_bytes += rb[k];
	/* the padding of what is partitioned: the trainable elements (--freeze) */
	out->padding_bytes = (double)((uint64_t)world * S - ntrain) / world * (double)(b->g + 4 + opt);
}

/* Python's int(18 * total_params / total_gpus): true division, then
 * truncation; the same doubles here. */
double theory_deepspeed_estimate(double params, double largest_layer, enum zs_scheme scheme, unsigned world)
{
	double shard = trunc(18 * params / world);
	if (scheme == ZS_ZERO2)
		return 2 * params + shard;
	if (scheme == ZS_ZERO3 && largest_layer > 0)
		return 4 * largest_layer + shard;
	return -1;
}

/* Ψ and the largest layer (DeepSpeed's module): the MLP's, a
 * transformer's largest nn.Module, else Ψ and --largest-unit. */
static void request_model(const struct theory_request *req, double *params, double *largest)
{
	*params = theory_request_params(req);
	*largest = req->largest_unit;
	if (req->model == NULL && !req->shape_known)
		return;
	struct theory_desc own;
	const struct theory_desc *d = theory_request_desc(req, &own);
	*params = (double)d->params.numel;
	if (req->model != NULL) {
		*largest = (double)step_params_largest_hf_module(&d->params);
	} else {
		*largest = 0;
		for (size_t l = 0; l < d->params.nlayers; l++)
			*largest = fmax(*largest, (double)d->params.layer[l].numel);
	}
	if (d == &own)
		theory_desc_free(&own);
}

void theory_deepspeed_zero3(const struct theory_shape *s, const struct zs_config *c, unsigned world,
                            struct theory_deepspeed_z3 *out)
{
	const struct theory_bytes *b = &s->bytes;
	uint64_t per_shard = b->p + b->g + 4 + 2ull * b->adam + b->momentum;
	struct step_params p;
	*out = (struct theory_deepspeed_z3){0};
	step_params_mlp(&p, s->widths, s->nwidths);
	for (size_t t = 0; t < p.ntensors; t++) {
		uint64_t n = p.tensor[t].numel;
		int persist = (double)n <= c->ds_persist;
		out->tensors++;
		out->persistent_tensors += (unsigned)persist;
		out->persistent_params += persist ? n : 0;
		out->shard_elements += (n + world - 1) / world;
		out->persistent_shard += persist ? (n + world - 1) / world : 0;
	}
	out->partitioned_params = p.numel - out->persistent_params;
	for (size_t t = 0; t < p.ntensors; t++) /* whole between steps: as _post_step gathered them */
		if ((double)p.tensor[t].numel <= c->ds_persist)
			out->persistent_held += ds_coord_block(p.tensor[t].numel, world, out->persistent_tensors, 0,
			                                      c->offload == ZS_OFFLOAD_PARAMS);
	step_params_free(&p);
	out->resident_bytes = out->persistent_held * b->p + out->shard_elements * per_shard +
	                      (uint64_t)c->ds_reduce_bucket * b->g;
}
/* DeepSpeed's PartitionedParameterCoordinator (util/ds_coord.h: its rules,
 * which the engine runs too) over the MLP's description (util/step.h): its
 * tensors in model order (ds_id order: each layer's weight, then its
 * bias) and its modules, unit=layer the description's (one a linear
 * layer), unit=model one of them all. */
static struct ds_coord *coord_init(const struct theory_shape *s, const struct zs_config *c, enum zs_unit unit,
                                   unsigned world)
{
	struct step_params p;
	step_params_mlp(&p, s->widths, s->nwidths);
	uint64_t *n = zs_calloc(p.ntensors, sizeof *n);
	size_t *first = zs_calloc(p.nmodules, sizeof *first), *count = zs_calloc(p.nmodules, sizeof *count), nm = 0;
	for (size_t t = 0; t < p.ntensors; t++)
		n[t] = p.tensor[t].numel;
	for (size_t i = 0; i < p.nmodules; i++)
		if (unit == ZS_UNIT_LAYER || i == 0) {
			first[nm] = p.module[i].first;
			count[nm++] = unit == ZS_UNIT_LAYER ? p.module[i].n : p.ntensors;
		}
	struct ds_coord *d = ds_coord_new(n, p.ntensors, first, count, nm, c, world);
	free(n);
	free(first);
	free(count);
	step_params_free(&p);
	return d;
}
void theory_deepspeed_live(const struct theory_shape *s, const struct zs_config *c, enum zs_unit unit,
                           struct theory_deepspeed_live *out)
{
	struct ds_coord *d = coord_init(s, c, unit, 1);
	const size_t *got;
	*out = (struct theory_deepspeed_live){0};
	ds_coord_begin_step(d, 1);
	for (size_t j = 0; j < d->ntrace; j++) {
		ds_coord_fetch(d, c, j, 0, &got);
		out->first_step = ds_coord_live(d) > out->first_step ? ds_coord_live(d) : out->first_step;
		ds_coord_release(d, j, 0, NULL);
	}
	ds_coord_begin_step(d, 2);
	for (size_t j = 0; j < d->ntrace; j++) {
		if (j == d->nmodules)
			out->at_backward = ds_coord_live(d);
		ds_coord_fetch(d, c, j, 1, &got);
		if (j == 0)
			out->first_fetch = ds_coord_live(d);
		out->peak = ds_coord_live(d) > out->peak ? ds_coord_live(d) : out->peak;
		ds_coord_release(d, j, 1, NULL);
	}
	ds_coord_free(d);
}

/* ZeRO-3's state between steps, from S = Σ ceil(n_t/N) and the persistent
 * params' elements: per shard element the fp16 partition, the grad
 * partition, the fp32 partition and the optimizer state, and the bucket
 * (B·g) from set-up, into base[] (the device's) and out's resident and
 * host fields, with the persistent params whole beside them in out's
 * resident. Offloaded: the grad partitions, the fp32 partition, its fp32
 * grad and the optimizer state on the host, with the params the fp16
 * partitions too; the host's peak is the step's overflow check over the
 * host's fp16 grad partitions (mixed precision: an fp16 abs and a bool,
 * S_t·3) or its fp16 copy on the way to the device (mixed precision,
 * --offload optimizer), a sub group's at a time: the larger. */
void theory_ds3_resident(const struct theory_bytes *b, const struct zs_config *c, uint64_t S, uint64_t S_t,
                         uint64_t ntrain, uint64_t persist, uint64_t sub_max, unsigned world,
                         struct theory_schedule *out, uint64_t *base)
{
	enum zs_cat pc = b->p == 2 ? ZS_CAT_PARAM16 : ZS_CAT_PARAM32;
	enum zs_cat gc = b->g == 2 ? ZS_CAT_GRAD16 : ZS_CAT_GRAD32;
	uint64_t opt = 2ull * b->adam + b->momentum, B = (uint64_t)c->ds_reduce_bucket;
	int off = c->offload != ZS_OFFLOAD_NONE, offp = c->offload == ZS_OFFLOAD_PARAMS;
	memset(base, 0, ZS_NCATS * sizeof *base);
	base[pc] = offp ? 0 : S * b->p;
	base[gc] = off ? 0 : S_t * b->g;
	base[ZS_CAT_MASTER32] = off ? 0 : S_t * 4;
	base[ZS_CAT_ADAM_M] = base[ZS_CAT_ADAM_V] = off ? 0 : S_t * b->adam;
	base[ZS_CAT_MOMENTUM] = off ? 0 : S_t * b->momentum;
	base[ZS_CAT_BUCKETS] = B * b->g;
	out->host_resident_bytes = off ? S_t * (b->g + 4 + 4 + opt) + (offp ? S * b->p : 0) : 0;
	uint64_t copy = off && !offp && b->p == 2 ? sub_max * b->p : 0, check = off && b->g == 2 ? S_t * (b->g + 1) : 0;
	out->host_peak_bytes = out->host_resident_bytes + (copy > check ? copy : check);
	out->host_resident_bytes_per_node = out->host_resident_bytes * c->ranks_per_node;
	out->shard_elements = S;
	out->padded_elements = (uint64_t)world * S;
	out->padding_bytes = (double)(out->padded_elements - out->params) / world * (double)b->p +
	                     (double)((uint64_t)world * S_t - ntrain) / world * (double)(b->g + 4 + opt);
	memset(out->resident_breakdown, 0, sizeof out->resident_breakdown);
	memcpy(out->resident_breakdown, base, ZS_NCATS * sizeof *base);
	out->resident_breakdown[ZS_CAT_GATHERED] = persist * b->p;
	out->resident_bytes = 0;
	for (int k = 0; k < ZS_NCATS; k++)
		out->resident_bytes += out->resident_breakdown[k];
}

void theory_deepspeed_memory(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                             enum zs_unit unit, unsigned world, struct theory_deepspeed_mem *out)
{
	const struct theory_bytes *b = &s->bytes;
	uint64_t opt = 2ull * b->adam + b->momentum, psi = theory_params(s), tmax = largest_tensor(s);
	*out = (struct theory_deepspeed_mem){0};
	if (scheme == ZS_ZERO3) {
		struct theory_deepspeed_z3 z;
		theory_deepspeed_zero3(s, c, world, &z);
		uint64_t S = z.shard_elements, whole = z.persistent_held * b->p, bucket = (uint64_t)c->ds_reduce_bucket * b->g;
		if (c->offload == ZS_OFFLOAD_NONE) {
			out->device_bytes = z.resident_bytes;
		} else if (c->offload == ZS_OFFLOAD_OPTIMIZER) { /* the fp32 partition's fp32 grad kept too */
			out->device_bytes = whole + S * b->p + bucket;
			out->host_bytes = S * (b->g + 4 + 4 + opt);
		} else { /* every fp16 partition in the host flat buffer, persistent ones too */
			out->device_bytes = whole + bucket;
			out->host_bytes = S * (b->p + b->g + 4 + 4 + opt);
		}
	} else if (scheme == ZS_ZERO1 || scheme == ZS_ZERO2) {
		struct theory_schedule sc;
		theory_schedule(s, ZS_ZERO2, unit, world, &sc);
		uint64_t S = sc.shard_elements;
		if (c->offload == ZS_OFFLOAD_NONE) {
			out->device_bytes = psi * b->p + S * (b->g + 4 + opt);
		} else {
			out->device_bytes = psi * b->p + tmax * b->g;
			out->host_bytes = S * (4 + 4 + opt) + tmax * b->g;
		}
	} else {
		out->device_bytes = psi * (b->p + b->g + b->k);
	}
	out->host_bytes_per_node = out->host_bytes * c->ranks_per_node;
	out->startup_host_bytes_per_node = 4 * psi * c->ranks_per_node;
}

static void memory_json(cJSON *row, const struct theory_request *req, enum zs_scheme scheme, enum zs_unit unit,
                       unsigned world)
{
	const struct zs_config *c = req->config;
	struct theory_shape s = {c->widths, c->nwidths, c->batch, {0}};
	struct theory_deepspeed_mem m;
	theory_request_bytes(req, &s.bytes);
	theory_deepspeed_memory(&s, c, scheme, unit, world, &m);
	cJSON *o = cJSON_AddObjectToObject(row, "deepspeed_memory");
	cJSON_AddStringToObject(o, "offload", zs_offload_name(c->offload));
	zs_json_add_number(o, "device_bytes", (double)m.device_bytes);
	zs_json_add_number(o, "host_bytes", (double)m.host_bytes);
	zs_json_add_number(o, "ranks_per_node", c->ranks_per_node);
	zs_json_add_number(o, "host_bytes_per_node", (double)m.host_bytes_per_node);
	zs_json_add_number(o, "startup_host_bytes_per_node", (double)m.startup_host_bytes_per_node);
}

static void zero3_json(cJSON *row, const struct theory_request *req, enum zs_unit unit, unsigned world)
{
	const struct zs_config *c = req->config;
	struct theory_shape s = {c->widths, c->nwidths, c->batch, {0}};
	struct theory_deepspeed_z3 z;
	struct theory_deepspeed_live lv;
	theory_request_bytes(req, &s.bytes);
	theory_deepspeed_zero3(&s, c, world, &z);
	theory_deepspeed_live(&s, c, unit, &lv);
	cJSON *o = cJSON_AddObjectToObject(row, "deepspeed_zero3"), *l = cJSON_AddObjectToObject(o, "live_params");
	zs_json_add_number(l, "prefetch_bucket", c->ds_prefetch_bucket);
	zs_json_add_number(l, "max_live", c->ds_max_live);
	zs_json_add_number(l, "first_step", (double)lv.first_step);
	zs_json_add_number(l, "first_fetch", (double)lv.first_fetch);
	zs_json_add_number(l, "at_backward", (double)lv.at_backward);
	zs_json_add_number(l, "peak", (double)lv.peak);
	zs_json_add_number(l, "peak_bytes", (double)(lv.peak * s.bytes.p));
	zs_json_add_number(o, "persist_threshold", c->ds_persist);
	zs_json_add_number(o, "tensors", z.tensors);
	zs_json_add_number(o, "persistent_tensors", z.persistent_tensors);
	zs_json_add_number(o, "persistent_params", (double)z.persistent_params);
	zs_json_add_number(o, "partitioned_params", (double)z.partitioned_params);
	zs_json_add_number(o, "shard_elements", (double)z.shard_elements);
	zs_json_add_number(o, "resident_bytes", (double)z.resident_bytes);
}

/* estimate_zero2_model_states_mem_needs (stage_1_and_2.py 2430-2447) and
 * estimate_zero3_model_states_mem_needs (stage3.py 3008-3044), each
 * product in Python's order, truncated as int() does. */
double theory_deepspeed_estimator(double params, double largest_layer, enum zs_scheme scheme, unsigned world,
                                  unsigned per_node, enum zs_offload o, double *host_per_node)
{
	const double factor = 1.5, gpus_factor = 1 / ((double)world / per_node);
	double gpu = -1, cpu = 0;
	if (scheme == ZS_ZERO2 && o != ZS_OFFLOAD_NONE) {
		gpu = 2 * params;
		cpu = params * fmax(4.0 * world, 16) * factor;
	} else if (scheme == ZS_ZERO2) {
		gpu = 2 * params + trunc(18 * params / world);
		cpu = params * 4 * per_node * factor;
	} else if (scheme == ZS_ZERO3 && largest_layer > 0) {
		double lmem = 4 * largest_layer;
		if (o == ZS_OFFLOAD_PARAMS) {
			gpu = lmem;
			cpu = params * 18 * gpus_factor * factor;
		} else if (o == ZS_OFFLOAD_OPTIMIZER) {
			gpu = lmem + trunc(2 * params / world);
			cpu = params * 16 * gpus_factor * factor;
		} else {
			gpu = lmem + trunc(18 * params / world);
			cpu = largest_layer * 4 * per_node * factor;
		}
	}
	*host_per_node = trunc(cpu);
	return gpu < 0 ? -1 : trunc(gpu);
}

void theory_framework_row_json(cJSON *row, const struct theory_request *req, enum zs_scheme scheme,
                              enum zs_unit unit, unsigned world)
{
	const struct zs_config *c = req->config;
	double psi, largest, host;
	if (c->framework != ZS_FW_DEEPSPEED)
		return;
	if (scheme == ZS_ZERO3 && req->shape_known)
		zero3_json(row, req, unit, world);
	if (req->shape_known)
		memory_json(row, req, scheme, unit, world);
	request_model(req, &psi, &largest);
	double est = theory_deepspeed_estimator(psi, largest, scheme, world, c->ranks_per_node, c->offload, &host);
	if (est < 0) {
		cJSON_AddNullToObject(row, "deepspeed_estimate");
		return;
	}
	cJSON *o = cJSON_AddObjectToObject(row, "deepspeed_estimate");
	cJSON_AddStringToObject(o, "function", scheme == ZS_ZERO2 ? "estimate_zero2_model_states_mem_needs"
	                                                          : "estimate_zero3_model_states_mem_needs");
	zs_json_add_number(o, "device_bytes", est);
	zs_json_add_number(o, "device_bytes_per_param", est / psi);
	if (scheme == ZS_ZERO3)
		zs_json_add_number(o, "largest_layer_params", largest);
	if (c->offload != ZS_OFFLOAD_NONE)
		cJSON_AddStringToObject(o, "offload", zs_offload_name(c->offload));
	zs_json_add_number(o, "host_bytes_per_node", host);
}

/* zerosim's figures for where a rank's bytes live, by N and scheme. */
static char *memory_text(const struct theory_request *req, const struct theory_bytes *b, char *out)
{
	const struct zs_config *c = req->config;
	struct theory_shape s = {c->widths, c->nwidths, c->batch, *b};
	char *t = zs_asprintf("%s\nzerosim: where a rank's bytes live between steps (--offload %s, %u rank%s a node):\n"
	                      "%8s %6s %18s %18s %18s %18s\n", out, zs_offload_name(c->offload), c->ranks_per_node,
	                      c->ranks_per_node == 1 ? "" : "s", "N", "scheme", "device", "host", "host per node",
	                      "start-up per node");
	free(out);
	for (size_t w = 0; w < c->nworld; w++)
		for (size_t i = 0; i < c->nschemes; i++) {
			struct theory_deepspeed_mem m;
			char d[48], h[48], n[48], u[48];
			theory_deepspeed_memory(&s, c, c->schemes[i], c->units[0], c->world[w], &m);
			char *line = zs_asprintf("%s%8u %6s %18s %18s %18s %18s\n", t, c->world[w], zs_scheme_name(c->schemes[i]),
			                         theory_grouped(d, sizeof d, (double)m.device_bytes),
			                         theory_grouped(h, sizeof h, (double)m.host_bytes),
			                         theory_grouped(n, sizeof n, (double)m.host_bytes_per_node),
			                         theory_grouped(u, sizeof u, (double)m.startup_host_bytes_per_node));
			free(t);
			t = line;
		}
	char *why = zs_asprintf("%sThe start-up figure is the full fp32 model each rank of a node loads on the\n"
	                        "host before DeepSpeed partitions it (4 bytes a parameter a rank; ZeRO-3's\n"
	                        "zero.Init builds the model partitioned instead).\n", t);
	free(t);
	return why;
}

char *theory_deepspeed_text(const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	double psi, largest;
	request_model(req, &psi, &largest);
	char *out = zs_asprintf("\nDeepSpeed's own estimate of model states (bytes), %s, beside zerosim's floor\n"
	                        "(device per GPU; host per node of %u GPU%s, DeepSpeed's cpu_mem):\n"
	                        "%8s %6s %20s %20s %20s\n",
	                        c->offload == ZS_OFFLOAD_NONE ? "without offload"
	                        : c->offload == ZS_OFFLOAD_OPTIMIZER ? "optimizer offloaded" : "optimizer and params offloaded",
	                        c->ranks_per_node, c->ranks_per_node == 1 ? "" : "s", "N", "scheme", "deepspeed",
	                        "zerosim floor", "deepspeed host");
	struct theory_bytes b;
	theory_request_bytes(req, &b);
	for (size_t w = 0; w < c->nworld; w++)
		for (size_t i = 0; i < c->nschemes; i++) {
			double host, est = theory_deepspeed_estimator(psi, largest, c->schemes[i], c->world[w], c->ranks_per_node,
			                                              c->offload, &host);
			if (est < 0)
				continue;
			struct theory_floor f;
			theory_floor(psi, c->schemes[i], c->world[w], &b, &f);
			char a[48], z[48], h[48];
			char *line = zs_asprintf("%s%8u %6s %20s %20s %20s\n", out, c->world[w], zs_scheme_name(c->schemes[i]),
			                         theory_grouped(a, sizeof a, est), theory_grouped(z, sizeof z, f.resident_bytes),
			                         theory_grouped(h, sizeof h, host));
			free(out);
			out = line;
		}
	char lname[64] = "give --largest-unit L";
	if (largest > 0)
		snprintf(lname, sizeof lname, "L = %.17g", largest);
	char *why = zs_asprintf("%sDeepSpeed shards 18 bytes per parameter (fp16 grads, fp32 grads, fp32 params,\n"
	                        "Adam's two states) where the paper's zero2 shards 14 (no fp32 gradient\n"
	                        "partition) and its zero3 16; DeepSpeed's zero3 adds 4L for the largest layer\n"
	                        "(%s), which zerosim's schedule counts as a transient at the peak.\n",
	                        out, lname);
	free(out);
	if (req->shape_known) { /* what the estimate leaves out, and zerosim's rows have */
		char bk[48];
		char *more = zs_asprintf("%sIt leaves out the reduce bucket DeepSpeed allocates whatever the model\n"
		                         "(--ds-reduce-bucket: %s bytes a rank here%s) and the\n"
		                         "activations; zerosim's zero1 and zero2 rows are DeepSpeed's step with them.\n",
		                         why, theory_grouped(bk, sizeof bk, c->ds_reduce_bucket * b.g),
		                         c->ds_overlap_comm ? ", twice with overlap_comm" : "");
		free(why);
		why = more;
	}
	int zero3 = 0;
	for (size_t i = 0; i < c->nschemes; i++)
		zero3 |= c->schemes[i] == ZS_ZERO3;
	if (req->shape_known)
		why = memory_text(req, &b, why);
	if (!zero3 || !req->shape_known)
		return why;
	struct theory_shape s = {c->widths, c->nwidths, c->batch, b};
	struct theory_deepspeed_z3 z;
	theory_deepspeed_zero3(&s, c, c->world[0], &z);
	char *z3 = zs_asprintf("%s\nDeepSpeed's ZeRO-3 (stage3.py) keeps a tensor of at most %.17g elements\n"
	                       "(--ds-persist) whole on every rank: %u of the %u tensors, %llu of the %llu\n"
	                       "parameters%s.\n",
	                       why, c->ds_persist, z.persistent_tensors, z.tensors, (unsigned long long)z.persistent_params,
	                       (unsigned long long)z.persistent_params + (unsigned long long)z.partitioned_params,
	                       z.partitioned_params == 0 ? "; it partitions none of this model's parameters" : "");
	free(why);
	for (size_t u = 0; u < c->nunits; u++) {
		struct theory_deepspeed_live lv;
		theory_deepspeed_live(&s, c, c->units[u], &lv);
		char *line = zs_asprintf("%s\nDeepSpeed's parameter coordinator, unit=%s (%s), in\n"
		                         "parameters whole on a rank, the persistent ones included: step 1 (the trace\n"
		                         "being recorded) at most %llu at once; from step 2 (--ds-prefetch-bucket\n"
		                         "%.17g, --ds-max-live %.17g) %llu after the first module's fetch and\n"
		                         "prefetch, %llu at the start of backward, at most %llu. --ds-max-live\n"
		                         "bounds only what a fetch prefetches: what a forward gathered stays until\n"
		                         "its backward (the reuse distance, 1e9, or the prefetch's marks) whatever\n"
		                         "it is.\n",
		                         z3, zs_unit_name(c->units[u]),
		                         c->units[u] == ZS_UNIT_LAYER ? "a module per layer" : "the model one module",
		                         (unsigned long long)lv.first_step, c->ds_prefetch_bucket, c->ds_max_live,
		                         (unsigned long long)lv.first_fetch, (unsigned long long)lv.at_backward,
		                         (unsigned long long)lv.peak);
		free(z3);
		z3 = line;
	}
	return z3;
}

/* _create_fp16_sub_groups over the partition_numel of the trainable
 * tensors, ceil(tt/N); each sub group's _prepare_fp32_grad_for_sub_group
 * (stage3.py 1895-1915): _flatten_dense_tensors is a cat of its slots,
 * or the one tensor's narrow itself (torch/csrc/utils/tensor_flatten.h),
 * and .to(float32) copies the fp16 one and returns an fp32 one as it is;
 * offloaded, the host fp32 grad is ready and nothing is made (1920-1922). */
size_t theory_ds3_sub_groups(const struct theory_bytes *b, const struct zs_config *c, const uint64_t *tt, size_t nt,
                             unsigned world, struct theory_ds3_sub *out)
{
	uint64_t *s = zs_calloc(nt + 1, sizeof *s);
	size_t *end = zs_calloc(nt + 1, sizeof *end);
	for (size_t t = 0; t < nt; t++)
		s[t] = (tt[t] + world - 1) / world;
	size_t n = ds_sub_groups(s, nt, c->ds_sub_group, end);
	for (size_t i = 0, t = 0; i < n; i++) {
		uint64_t slots = 0, trained = 0;
		for (; t < end[i]; t++) {
			slots += s[t];
			trained += s[t] > 0;
		}
		int flat = trained > 1, made = c->offload == ZS_OFFLOAD_NONE;
		out[i] = (struct theory_ds3_sub){slots, made && flat && b->g == 2 ? slots * b->g : 0,
		                                 made && (flat || b->g == 2) ? slots * 4 : 0};
	}
	free(s);
	free(end);
	return n;
}
