/*
 * theory_framework — the frameworks' departures from the paper's schedule,
 * from the shape alone (docs/schedule.md, "Frameworks"). Nothing here asks
 * the engine: the partition below is worked again from the layer widths.
 *
 * torch's zero1 is ZeroRedundancyOptimizer (PyTorch 1.13,
 * torch/distributed/optim/zero_redundancy_optimizer.py): _partition_parameters
 * sorts the parameter tensors by numel, largest first, and gives each to
 * _get_min_index(sizes), the first rank with the fewest elements so far.
 * A rank holds the optimizer state of its tensors only; params and grads are
 * full. DDP all-reduces the grads (per unit, padded as every collective here
 * is) and _sync_params broadcasts each tensor from its owner, counted as
 * (N-1)·ceil(n/N) elements per rank (coll.h). No transients: the peak is
 * dp's, R + A + D.
 */
#include "config.h"

#include <stdlib.h>

#include "theory/theory.h"
#include "util/schedule.h"
#include "util/util.h"

/* The shape's parameter tensors in model order: layer l's weight
 * d_l·d_{l+1}, then its bias d_{l+1}. */
static size_t tensors(const struct theory_shape *s, uint64_t *n)
{
	size_t t = 0;
	for (size_t l = 0; l + 1 < s->nwidths; l++) {
		n[t++] = (uint64_t)s->widths[l] * s->widths[l + 1];
		n[t++] = s->widths[l + 1];
	}
	return t;
}

void theory_torch_partition(const struct theory_shape *s, unsigned world, uint64_t *load)
{
	uint64_t n[2 * ZS_MAX_WIDTHS];
	size_t nt = tensors(s, n);
	int done[2 * ZS_MAX_WIDTHS] = {0};
	for (unsigned k = 0; k < world; k++)
		load[k] = 0;
	for (size_t i = 0; i < nt; i++) {
		size_t big = nt; /* the largest left, the first of equals */
		for (size_t j = 0; j < nt; j++)
			if (!done[j] && (big == nt || n[j] > n[big]))
				big = j;
		done[big] = 1;
		unsigned min = 0;
		for (unsigned k = 1; k < world; k++)
			if (load[k] < load[min])
				min = k;
		load[min] += n[big];
	}
}

static void torch_zero1(const struct theory_shape *s, unsigned world, struct theory_schedule *out)
{
	const struct theory_bytes *b = &s->bytes;
	uint64_t *load = zs_calloc(world, sizeof *load), most = 0, n[2 * ZS_MAX_WIDTHS];
	theory_torch_partition(s, world, load);
	for (unsigned k = 0; k < world; k++)
		most = load[k] > most ? load[k] : most;
	free(load);

	/* The binding rank holds its tensors' optimizer state; nothing is
	 * padded, and the peak adds dp's tensors only. */
	uint64_t *rb = out->resident_breakdown, *pb = out->peak_breakdown;
	rb[THEORY_MASTER32] = most * b->master;
	rb[THEORY_ADAM_M] = rb[THEORY_ADAM_V] = most * b->adam;
	rb[THEORY_MOMENTUM] = most * b->momentum;
	out->resident_bytes = out->peak_bytes = 0;
	for (int c = 0; c < THEORY_NCATEGORIES; c++) {
		if (c < THEORY_GATHERED_PARAMS)
			pb[c] = rb[c];
		out->resident_bytes += rb[c];
		out->peak_bytes += pb[c];
	}
	out->padding_bytes = 0;
	out->imbalance_bytes = (double)most * b->k - (double)out->params * b->k / world;

	/* DDP's all-reduce of every unit, then one broadcast per tensor. */
	uint64_t sent = 2ull * (world - 1) * out->shard_elements;
	out->comm_bytes = sent * b->g;
	size_t nt = tensors(s, n);
	for (size_t i = 0; i < nt; i++) {
		uint64_t e = (world - 1) * ((n[i] + world - 1) / world);
		sent += e;
		out->comm_bytes += e * b->p;
	}
	out->comm_elements = sent;
}

/* FSDP's FULL_SHARD: the paper's zero3, but the root unit (the whole
 * model, unit=model) stays gathered from its forward to its backward: one
 * all-gather and one reduce-scatter, (N-1)·S·(p+g) bytes. The peak is the
 * paper's: backward holds the gathered params and full grads either way. */
static void torch_zero3(const struct theory_shape *s, enum zs_unit unit, unsigned world,
                        struct theory_schedule *out)
{
	if (unit != ZS_UNIT_MODEL || world == 1)
		return;
	uint64_t pass = (uint64_t)(world - 1) * out->shard_elements;
	out->comm_bytes = pass * (s->bytes.p + s->bytes.g);
	out->comm_elements = 2 * pass;
}

/* FSDP's SHARD_GRAD_OP: between steps only shards, as the paper's zero3;
 * no unit is freed after its forward, so backward sends no all-gather and
 * unit u's backward holds units 0..u gathered and u's full grads:
 * peak = R + A + D + max_u (Σ_{v<=u} n_v·p + n_u·g), the first reached in
 * time (backward runs from the last unit: the largest u of equals). */
static void torch_zero2(const struct theory_shape *s, enum zs_unit unit, unsigned world,
                        struct theory_schedule *out)
{
	if (world == 1)
		return;
	theory_schedule(s, ZS_ZERO3, unit, world, out);
	uint64_t *pb = out->peak_breakdown, before = 0, best = 0, held = 0, grads = 0;
	for (size_t u = 0; u < out->nunits; u++)
		before += out->units[u];
	for (size_t u = out->nunits; u-- > 0;) { /* before = Σ_{v<=u} n_v */
		uint64_t here = before * s->bytes.p + out->units[u] * s->bytes.g;
		if (here > best) {
			best = here;
			held = before * s->bytes.p;
			grads = out->units[u] * s->bytes.g;
		}
		before -= out->units[u];
	}
	out->peak_bytes += held + grads - pb[THEORY_GATHERED_PARAMS] - pb[THEORY_FULL_GRADS];
	pb[THEORY_GATHERED_PARAMS] = held;
	pb[THEORY_FULL_GRADS] = grads;
	uint64_t pass = (uint64_t)(world - 1) * out->shard_elements;
	out->comm_bytes = pass * (s->bytes.p + s->bytes.g);
	out->comm_elements = 2 * pass;
}

void theory_framework_schedule(const struct theory_shape *s, enum zs_framework fw, enum zs_scheme scheme,
                               enum zs_unit unit, unsigned world, struct theory_schedule *out)
{
	if (fw == ZS_FW_TORCH && scheme == ZS_ZERO1)
		torch_zero1(s, world, out);
	if (fw == ZS_FW_TORCH && scheme == ZS_ZERO2)
		torch_zero2(s, unit, world, out);
	if (fw == ZS_FW_TORCH && scheme == ZS_ZERO3)
		torch_zero3(s, unit, world, out);
}

/* Rank k's model states differ from the binding rank's by its share of
 * the optimizer state (torch's zero1); the transients and bytes sent are
 * every rank's. */
static int push(cJSON *arr, double v)
{
	cJSON *n = cJSON_CreateNumber(v);
	if (n == NULL || !cJSON_AddItemToArray(arr, n)) {
		cJSON_Delete(n);
		return -1;
	}
	return 0;
}

int theory_framework_json(cJSON *schedule, const struct theory_request *req, enum zs_scheme scheme,
                          unsigned world, const struct theory_schedule *sc)
{
	const struct zs_config *c = req->config;
	struct theory_shape s = {c->widths, c->nwidths, c->batch, {0}};
	uint64_t *load = zs_calloc(world, sizeof *load), most = 0;
	theory_request_bytes(req, &s.bytes);
	if (c->framework == ZS_FW_TORCH && scheme == ZS_ZERO1)
		theory_torch_partition(&s, world, load);
	for (unsigned k = 0; k < world; k++)
		most = load[k] > most ? load[k] : most;
	cJSON *per = cJSON_AddObjectToObject(schedule, "per_rank"), *ra = NULL, *pa = NULL, *ca = NULL;
	int rc = schedule == NULL || zs_json_add_number(schedule, "imbalance_bytes", sc->imbalance_bytes) == NULL ||
	         (ra = cJSON_AddArrayToObject(per, "resident_bytes")) == NULL ||
	         (pa = cJSON_AddArrayToObject(per, "peak_bytes")) == NULL ||
	         (ca = cJSON_AddArrayToObject(per, "comm_bytes_per_step")) == NULL ? -1 : 0;
	for (unsigned k = 0; k < world && rc == 0; k++) {
		uint64_t less = (most - load[k]) * s.bytes.k;
		rc = push(ra, (double)(sc->resident_bytes - less)) < 0 || push(pa, (double)(sc->peak_bytes - less)) < 0 ||
		     push(ca, (double)sc->comm_bytes) < 0 ? -1 : 0;
	}
	free(load);
	return rc;
}

char *theory_framework_text(const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	if (c->framework == ZS_FW_PAPER)
		return NULL;
	if (c->framework == ZS_FW_TORCH)
		return zs_asprintf("\nFramework torch: dp is DistributedDataParallel (its gradient buckets not "
		                   "counted), zero1 is ZeroRedundancyOptimizer (whole tensors; the tables show the "
		                   "rank that holds the most).\n");
	return theory_deepspeed_text(req);
}
