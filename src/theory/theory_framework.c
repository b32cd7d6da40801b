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
	uint64_t sent = 2 * (world - 1) * out->shard_elements;
	out->comm_bytes = sent * b->g;
	size_t nt = tensors(s, n);
	for (size_t i = 0; i < nt; i++) {
		uint64_t e = (world - 1) * ((n[i] + world - 1) / world);
		sent += e;
		out->comm_bytes += e * b->p;
	}
	out->comm_elements = sent;
}

void theory_framework_schedule(const struct theory_shape *s, enum zs_scheme scheme, unsigned world,
                               struct theory_schedule *out)
{
	if (s->framework == ZS_FW_TORCH && scheme == ZS_ZERO1)
		torch_zero1(s, world, out);
}

/* Rank k's model states differ from the binding rank's by its share of
 * the optimizer state (torch's zero1); the transients and bytes sent are
 * every rank's. */
void theory_framework_json(cJSON *schedule, const struct theory_shape *s, enum zs_scheme scheme,
                           unsigned world, const struct theory_schedule *sc)
{
	uint64_t *load = zs_calloc(world, sizeof *load), most = 0;
	int uneven = s->framework == ZS_FW_TORCH && scheme == ZS_ZERO1;
	if (uneven)
		theory_torch_partition(s, world, load);
	for (unsigned k = 0; k < world; k++)
		most = load[k] > most ? load[k] : most;
	zs_json_add_number(schedule, "imbalance_bytes", sc->imbalance_bytes);
	cJSON *per = cJSON_AddObjectToObject(schedule, "per_rank");
	cJSON *ra = cJSON_AddArrayToObject(per, "resident_bytes"), *pa = cJSON_AddArrayToObject(per, "peak_bytes");
	cJSON *ca = cJSON_AddArrayToObject(per, "comm_bytes_per_step");
	if (ra == NULL || pa == NULL || ca == NULL)
		zs_oom(__FILE__, __LINE__);
	for (unsigned k = 0; k < world; k++) {
		uint64_t less = (most - load[k]) * s->bytes.k;
		if (!cJSON_AddItemToArray(ra, cJSON_CreateNumber((double)(sc->resident_bytes - less))) ||
		    !cJSON_AddItemToArray(pa, cJSON_CreateNumber((double)(sc->peak_bytes - less))) ||
		    !cJSON_AddItemToArray(ca, cJSON_CreateNumber((double)sc->comm_bytes)))
			zs_oom(__FILE__, __LINE__);
	}
	free(load);
}
