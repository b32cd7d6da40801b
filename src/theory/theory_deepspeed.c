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
#include "util/schedule.h"
#include "util/util.h"

/* The largest parameter tensor: the offload's temporary grad buffers. */
static uint64_t largest_tensor(const struct theory_shape *s)
{
	uint64_t m = 0;
	for (size_t l = 0; l + 1 < s->nwidths; l++)
		m = (uint64_t)s->widths[l] * s->widths[l + 1] > m ? (uint64_t)s->widths[l] * s->widths[l + 1] : m;
	for (size_t l = 1; l < s->nwidths; l++)
		m = s->widths[l] > m ? s->widths[l] : m;
	return m;
}

/* ZeRO-1 and ZeRO-2 as docs/schedule.md's "DeepSpeed" gives them, from the
 * shape and DeepSpeed's settings: the paper's units, shards and collectives
 * (a reduce-scatter of each unit's grads, an all-gather of its params; none
 * at N = 1), with
 *   resident  R = Ψ·p + S·(g + 4 + o)   (fp16 params, the grad partition,
 *                                        the fp32 partition, o = the
 *                                        optimizer's 8 or 4 over it)
 *   backward  R + A + D + n_b·B·g + G   (n_b buckets of B elements; G the
 *                                        full grads: Ψ·g for ZeRO-1, the
 *                                        largest unit's n·g for ZeRO-2)
 *   optimizer R + S·4 (+ S·g in mixed precision: the flat fp16 copy the
 *                                        fp32 gradient partition is made from)
 * and the peak the larger of the two, backward's when they are equal (it
 * comes first). */
void theory_deepspeed_schedule(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                               enum zs_unit unit, unsigned world, struct theory_schedule *out)
{
	if (c->framework != ZS_FW_DEEPSPEED || (scheme != ZS_ZERO1 && scheme != ZS_ZERO2))
		return;
	const struct theory_bytes *b = &s->bytes;
	theory_schedule(s, ZS_ZERO2, unit, world, out); /* units, shards, collectives, A and D */
	uint64_t S = out->shard_elements, psi = out->params, opt = 2ull * b->adam + b->momentum, largest = 0;
	uint64_t *rb = out->resident_breakdown, *pb = out->peak_breakdown;
	enum theory_category pc = b->p == 2 ? THEORY_PARAM16 : THEORY_PARAM32;
	enum theory_category gc = b->g == 2 ? THEORY_GRAD16 : THEORY_GRAD32;
	for (size_t u = 0; u < out->nunits; u++)
		largest = out->units[u] > largest ? out->units[u] : largest;
	memset(rb, 0, sizeof out->resident_breakdown);
	rb[pc] = psi * b->p;
	rb[gc] = S * b->g;
	rb[THEORY_MASTER32] = S * 4;
	rb[THEORY_ADAM_M] = S * b->adam;
	rb[THEORY_ADAM_V] = S * b->adam;
	rb[THEORY_MOMENTUM] = S * b->momentum;
	uint64_t bucket = (uint64_t)(1 + c->ds_overlap_comm) * (uint64_t)c->ds_reduce_bucket * b->g;
	uint64_t full = scheme == ZS_ZERO1 ? psi * b->g : largest * b->g;
	uint64_t act = pb[THEORY_ACTIVATIONS], scratch = pb[THEORY_SCRATCH];
	/* Offloaded: the grad partition (fp32), the fp32 partition and the
	 * optimizer state on the host, with a buffer of the largest tensor's
	 * grads there and one on the device; the step's device copy of the
	 * fp32 partition replaces the fp32 gradient partition. */
	int off = c->offload == ZS_OFFLOAD_OPTIMIZER;
	uint64_t tmax = largest_tensor(s), step_extra = off ? S * 4 : S * 4 + (b->g == 2 ? S * b->g : 0);
	if (off) {
		out->host_resident_bytes = S * (4 + 4 + opt) + tmax * b->g;
		out->host_peak_bytes = out->host_resident_bytes;
		out->host_resident_bytes_per_node = out->host_resident_bytes * c->ranks_per_node;
		rb[gc] = tmax * b->g;
		rb[THEORY_MASTER32] = rb[THEORY_ADAM_M] = rb[THEORY_ADAM_V] = rb[THEORY_MOMENTUM] = 0;
	}
	out->resident_bytes = 0;
	for (int k = 0; k < THEORY_NCATEGORIES; k++)
		out->resident_bytes += rb[k];
	uint64_t backward = out->resident_bytes + act + scratch + bucket + full;
	uint64_t step = out->resident_bytes + step_extra;
	memcpy(pb, rb, sizeof out->resident_breakdown);
	if (backward >= step) {
		pb[THEORY_ACTIVATIONS] = act;
		pb[THEORY_SCRATCH] = scratch;
		pb[THEORY_FULL_GRADS] = full;
		pb[THEORY_BUCKETS] = bucket;
	} else if (off) {
		pb[THEORY_MASTER32] += S * 4;
	} else {
		pb[THEORY_GRAD32] += S * 4;
		pb[THEORY_GRAD16] += b->g == 2 ? S * b->g : 0;
	}
	out->peak_bytes = backward >= step ? backward : step;
	out->padding_bytes = (double)(out->padded_elements - psi) / world * (double)(b->g + 4 + opt);
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

/* Ψ and the largest layer (DeepSpeed's module): the MLP's, else Ψ and
 * --largest-unit (a transformer's largest module is not one of its units). */
static void request_model(const struct theory_request *req, double *params, double *largest)
{
	const struct zs_config *c = req->config;
	*params = theory_request_params(req);
	*largest = req->largest_unit;
	if (!req->shape_known)
		return;
	*params = (double)zs_params(c->widths, c->nwidths);
	*largest = 0;
	for (size_t l = 0; l + 1 < c->nwidths; l++)
		*largest = fmax(*largest, (double)zs_layer_params(c->widths, l));
}

void theory_deepspeed_zero3(const struct theory_shape *s, const struct zs_config *c, unsigned world,
                            struct theory_deepspeed_z3 *out)
{
	const struct theory_bytes *b = &s->bytes;
	uint64_t per_shard = b->p + b->g + 4 + 2ull * b->adam + b->momentum;
	*out = (struct theory_deepspeed_z3){0};
	for (size_t l = 0; l + 1 < s->nwidths; l++)
		for (int bias = 0; bias < 2; bias++) {
			uint64_t n = bias ? s->widths[l + 1] : (uint64_t)s->widths[l] * s->widths[l + 1];
			int persist = (double)n <= c->ds_persist;
			out->tensors++;
			out->persistent_tensors += (unsigned)persist;
			out->persistent_params += persist ? n : 0;
			out->shard_elements += (n + world - 1) / world;
			out->persistent_shard += persist ? (n + world - 1) / world : 0;
		}
	out->partitioned_params = theory_params(s) - out->persistent_params;
	out->resident_bytes = out->persistent_params * b->p + out->shard_elements * per_shard +
	                      (uint64_t)c->ds_reduce_bucket * b->g;
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
		uint64_t S = z.shard_elements, whole = z.persistent_params * b->p, bucket = (uint64_t)c->ds_reduce_bucket * b->g;
		if (c->offload == ZS_OFFLOAD_NONE) {
			out->device_bytes = z.resident_bytes;
		} else if (c->offload == ZS_OFFLOAD_OPTIMIZER) {
			out->device_bytes = whole + S * b->p + bucket;
			out->host_bytes = S * (b->g + 4 + opt);
		} else {
			out->device_bytes = whole + z.persistent_shard * b->p + bucket;
			out->host_bytes = (S - z.persistent_shard) * b->p + S * (b->g + 4 + opt);
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

static int memory_json(cJSON *row, const struct theory_request *req, enum zs_scheme scheme, enum zs_unit unit,
                       unsigned world)
{
	const struct zs_config *c = req->config;
	struct theory_shape s = {c->widths, c->nwidths, c->batch, {0}};
	struct theory_deepspeed_mem m;
	theory_request_bytes(req, &s.bytes);
	theory_deepspeed_memory(&s, c, scheme, unit, world, &m);
	cJSON *o = cJSON_AddObjectToObject(row, "deepspeed_memory");
	return o == NULL || cJSON_AddStringToObject(o, "offload", zs_offload_name(c->offload)) == NULL ||
	       zs_json_add_number(o, "device_bytes", (double)m.device_bytes) == NULL ||
	       zs_json_add_number(o, "host_bytes", (double)m.host_bytes) == NULL ||
	       zs_json_add_number(o, "ranks_per_node", c->ranks_per_node) == NULL ||
	       zs_json_add_number(o, "host_bytes_per_node", (double)m.host_bytes_per_node) == NULL ||
	       zs_json_add_number(o, "startup_host_bytes_per_node", (double)m.startup_host_bytes_per_node) == NULL
	       ? -1 : 0;
}

static int zero3_json(cJSON *row, const struct theory_request *req, unsigned world)
{
	const struct zs_config *c = req->config;
	struct theory_shape s = {c->widths, c->nwidths, c->batch, {0}};
	struct theory_deepspeed_z3 z;
	theory_request_bytes(req, &s.bytes);
	theory_deepspeed_zero3(&s, c, world, &z);
	cJSON *o = cJSON_AddObjectToObject(row, "deepspeed_zero3");
	return o == NULL || zs_json_add_number(o, "persist_threshold", c->ds_persist) == NULL ||
	       zs_json_add_number(o, "tensors", z.tensors) == NULL ||
	       zs_json_add_number(o, "persistent_tensors", z.persistent_tensors) == NULL ||
	       zs_json_add_number(o, "persistent_params", (double)z.persistent_params) == NULL ||
	       zs_json_add_number(o, "partitioned_params", (double)z.partitioned_params) == NULL ||
	       zs_json_add_number(o, "shard_elements", (double)z.shard_elements) == NULL ||
	       zs_json_add_number(o, "resident_bytes", (double)z.resident_bytes) == NULL ? -1 : 0;
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

int theory_framework_row_json(cJSON *row, const struct theory_request *req, enum zs_scheme scheme,
                              enum zs_unit unit, unsigned world)
{
	const struct zs_config *c = req->config;
	double psi, largest, host;
	if (c->framework != ZS_FW_DEEPSPEED)
		return 0;
	if (scheme == ZS_ZERO3 && req->shape_known && zero3_json(row, req, world) < 0)
		return -1;
	if (req->shape_known && memory_json(row, req, scheme, unit, world) < 0)
		return -1;
	request_model(req, &psi, &largest);
	double est = theory_deepspeed_estimator(psi, largest, scheme, world, c->ranks_per_node, c->offload, &host);
	if (est < 0)
		return cJSON_AddNullToObject(row, "deepspeed_estimate") != NULL ? 0 : -1;
	cJSON *o = cJSON_AddObjectToObject(row, "deepspeed_estimate");
	return o == NULL ||
	       cJSON_AddStringToObject(o, "function", scheme == ZS_ZERO2 ? "estimate_zero2_model_states_mem_needs"
	                                                                 : "estimate_zero3_model_states_mem_needs") == NULL ||
	       zs_json_add_number(o, "device_bytes", est) == NULL ||
	       zs_json_add_number(o, "device_bytes_per_param", est / psi) == NULL ||
	       (scheme == ZS_ZERO3 && zs_json_add_number(o, "largest_layer_params", largest) == NULL) ||
	       (c->offload != ZS_OFFLOAD_NONE && cJSON_AddStringToObject(o, "offload", zs_offload_name(c->offload)) == NULL) ||
	       zs_json_add_number(o, "host_bytes_per_node", host) == NULL ? -1 : 0;
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
	if (req->model != NULL && largest <= 0)
		snprintf(lname, sizeof lname, "not derived yet for --model");
	else if (largest > 0)
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
	                       "parameters%s.\nThe zero3 rows above are the paper's.\n",
	                       why, c->ds_persist, z.persistent_tensors, z.tensors, (unsigned long long)z.persistent_params,
	                       (unsigned long long)z.persistent_params + (unsigned long long)z.partitioned_params,
	                       z.partitioned_params == 0 ? "; it partitions none of this model's parameters" : "");
	free(why);
	return z3;
}
