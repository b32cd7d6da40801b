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
#include <string.h>

#include "theory/theory.h"
#include "util/schedule.h"
#include "util/step.h"
#include "util/util.h"

/* The elements of p's parameter tensors in model order (util/step.h);
 * the caller frees them. */
static uint64_t *numels(const struct step_params *p)
{
	uint64_t *n = zs_calloc(p->ntensors > 0 ? p->ntensors : 1, sizeof *n);
	for (size_t i = 0; i < p->ntensors; i++)
		n[i] = p->tensor[i].numel;
	return n;
}

/* The shape's, from the MLP's description; *nt of them. */
static uint64_t *tensors(const struct theory_shape *s, size_t *nt)
{
	struct step_params p;
	step_params_mlp(&p, s->widths, s->nwidths);
	uint64_t *n = numels(&p);
	*nt = p.ntensors;
	step_params_free(&p);
	return n;
}

void theory_greedy_partition(const uint64_t *n, size_t nt, unsigned world, uint64_t *load)
{
	int *done = zs_calloc(nt > 0 ? nt : 1, sizeof *done);
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
	free(done);
}

void theory_torch_partition(const struct theory_shape *s, unsigned world, uint64_t *load)
{
	size_t nt;
	uint64_t *n = tensors(s, &nt);
	theory_greedy_partition(n, nt, world, load);
	free(n);
}

void theory_torch_zero1(const uint64_t *n, size_t nt, const struct theory_bytes *b, unsigned world,
                        struct theory_schedule *out)
{
	uint64_t *load = zs_calloc(world, sizeof *load), most = 0;
	theory_greedy_partition(n, nt, world, load);
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

	/* _sync_params: one broadcast per tensor (DDP's all-reduce: theory_torch_ddp). */
	out->comm_bytes = out->comm_elements = 0;
	for (size_t i = 0; i < nt; i++) {
		uint64_t e = (world - 1) * ((n[i] + world - 1) / world);
		out->comm_elements += e;
		out->comm_bytes += e * b->p;
	}
}

/* dist._DEFAULT_FIRST_BUCKET_BYTES: the first bucket's limit. */
#define DDP_FIRST_BUCKET_BYTES 1048576

size_t theory_ddp_bucket_list(const uint64_t *t, size_t nt, unsigned grad_bytes, double cap_mb, uint64_t *n)
{
	uint64_t limit = DDP_FIRST_BUCKET_BYTES, bytes = 0;
	uint64_t cap = (uint64_t)(cap_mb * 1024 * 1024); /* int(bucket_cap_mb * 1024 * 1024) */
	size_t nb = 0;
	int open = 0;
	for (size_t j = nt; j-- > 0;) { /* gradient-ready order: the last tensor first */
		if (!open) {
			n[nb++] = 0;
			bytes = 0;
			open = 1;
		}
		n[nb - 1] += t[j];
		bytes += t[j] * grad_bytes;
		if (bytes >= limit) { /* closed; the limit moves on to the cap */
			open = 0;
			limit = cap;
		}
	}
	return nb;
}

size_t theory_ddp_buckets(const struct theory_shape *s, double cap_mb, uint64_t *n)
{
	size_t nt;
	uint64_t *t = tensors(s, &nt);
	size_t nb = theory_ddp_bucket_list(t, nt, s->bytes.g, cap_mb, n);
	free(t);
	return nb;
}

/* DistributedDataParallel (torch's dp, and under zero1): its buckets, Ψ·g
 * of their own, resident on every rank from construction; the grads
 * all-reduced bucket by bucket, 2(N-1)·ceil(n_b/N) elements each, added to
 * what the scheme sends besides. */
void theory_torch_ddp(const uint64_t *t, size_t nt, unsigned grad_bytes, double cap_mb, unsigned world,
                      struct theory_schedule *out)
{
	uint64_t *n = zs_calloc(nt > 0 ? nt : 1, sizeof *n), bucket = out->params * grad_bytes;
	size_t nb = theory_ddp_bucket_list(t, nt, grad_bytes, cap_mb, n);
	out->resident_breakdown[THEORY_BUCKETS] = out->peak_breakdown[THEORY_BUCKETS] = bucket;
	out->resident_bytes += bucket;
	out->peak_bytes += bucket;
	for (size_t i = 0; i < nb; i++) {
		uint64_t e = 2ull * (world - 1) * ((n[i] + world - 1) / world);
		out->comm_elements += e;
		out->comm_bytes += e * grad_bytes;
	}
	free(n);
}

/* One all-gather and one reduce-scatter per unit: (N-1)·S·(p+g) bytes. */
static void one_gather_per_unit(const struct theory_shape *s, unsigned world, struct theory_schedule *out)
{
	uint64_t pass = (uint64_t)(world - 1) * out->shard_elements;
	out->comm_bytes = pass * (s->bytes.p + s->bytes.g);
	out->comm_elements = 2 * pass;
}

/* FSDP's backward at N > 1, moment by moment (docs/schedule.md, "torch"):
 * the gathered params, full grads and the collectives' buffers (category
 * buckets) above R + A + D, the paper's zero3's rest of the peak (every
 * activation and the scratch alive through backward; forward holds less
 * of each). A gathered copy is padded, N·s_u. Elements are gp bytes
 * gathered, fg a full grad, mp a slot of the 16-bit local shard an
 * all-gather sends from (_mp_shard; 0 in fp32), cast a slot of the
 * reduce-scatter's output cast to fp32 (0 in fp32). */
struct fsdp_walk {
	uint64_t cur[THEORY_NCATEGORIES], total, peak, at[THEORY_NCATEGORIES];
};

static void fw_add(struct fsdp_walk *w, enum theory_category c, uint64_t bytes)
{
	w->cur[c] += bytes;
	w->total += bytes;
	if (w->total > w->peak) { /* the first reached of equals */
		w->peak = w->total;
		memcpy(w->at, w->cur, sizeof w->cur);
	}
}

static void fw_sub(struct fsdp_walk *w, enum theory_category c, uint64_t bytes)
{
	w->cur[c] -= bytes;
	w->total -= bytes;
}

struct fsdp_elem {
	unsigned gp, fg, mp, cast;
};

/* Unit u's unshard: _mp_shard (its s_u slots), the gathered copy padded
 * to N·s_u (_full_param_padded), then _mp_shard freed. */
static void fw_gather(struct fsdp_walk *w, const struct fsdp_elem *e, unsigned world, uint64_t sh, int *held)
{
	fw_add(w, THEORY_BUCKETS, sh * e->mp);
	fw_add(w, THEORY_GATHERED_PARAMS, world * sh * e->gp);
	fw_sub(w, THEORY_BUCKETS, sh * e->mp);
	*held = 1;
}

static uint64_t fw_slots(const struct theory_schedule *out, size_t u, unsigned world)
{
	return (out->units[u] + world - 1) / world;
}

static void fsdp_transients(const struct fsdp_elem *e, int keep_all, int keep_root, int prefetch, unsigned world,
                            struct theory_schedule *out)
{
	struct fsdp_walk w = {0};
	int *held = zs_calloc(out->nunits > 0 ? out->nunits : 1, sizeof *held);
	for (size_t u = 0; u < out->nunits; u++) {
		held[u] = keep_all || (keep_root && u == 0);
		if (held[u])
			fw_add(&w, THEORY_GATHERED_PARAMS, world * fw_slots(out, u, world) * e->gp);
	}
	for (size_t u = out->nunits; u-- > 0;) {
		uint64_t n = out->units[u], sh = fw_slots(out, u, world);
		if (!held[u])
			fw_gather(&w, e, world, sh, &held[u]);
		if (prefetch && u > 0 && !held[u - 1]) /* BACKWARD_PRE: the next unit of backward */
			fw_gather(&w, e, world, fw_slots(out, u - 1, world), &held[u - 1]);
		fw_add(&w, THEORY_FULL_GRADS, n * e->fg);
		/* _post_backward_hook: the unit resharded, then F.pad's copy
		 * (N·s_u), the output shard and, in mixed precision, its fp32
		 * cast beside it; all freed as the hook returns. */
		fw_sub(&w, THEORY_GATHERED_PARAMS, world * sh * e->gp);
		held[u] = 0;
		uint64_t staged = (world * sh + sh) * e->fg + sh * e->cast;
		fw_add(&w, THEORY_BUCKETS, (world * sh + sh) * e->fg);
		fw_add(&w, THEORY_BUCKETS, sh * e->cast);
		fw_sub(&w, THEORY_BUCKETS, staged);
		fw_sub(&w, THEORY_FULL_GRADS, n * e->fg);
	}
	uint64_t *pb = out->peak_breakdown;
	const enum theory_category cats[] = { THEORY_GATHERED_PARAMS, THEORY_FULL_GRADS, THEORY_BUCKETS };
	for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++) {
		out->peak_bytes += w.at[cats[i]] - pb[cats[i]];
		pb[cats[i]] = w.at[cats[i]];
	}
	free(held);
}

/* FSDP's FULL_SHARD: the paper's zero3's shards, but the root unit (the
 * whole model, unit=model) stays gathered from its forward to its
 * backward: one all-gather and one reduce-scatter. */
static void torch_zero3(const struct theory_shape *s, enum zs_unit unit, unsigned world, struct theory_schedule *out)
{
	if (world > 1 && unit == ZS_UNIT_MODEL)
		one_gather_per_unit(s, world, out);
}

/* FSDP's SHARD_GRAD_OP: between steps only shards, as the paper's zero3;
 * no unit is freed after its forward, so backward sends no all-gather. */
static void torch_zero2(const struct theory_shape *s, enum zs_unit unit, unsigned world,
                        struct theory_schedule *out)
{
	if (world == 1)
		return;
	theory_schedule(s, ZS_ZERO3, unit, world, out);
	one_gather_per_unit(s, world, out);
}

/* FSDP's MixedPrecision (param_dtype, reduce_dtype fp16) under --precision
 * mixed: FSDP in fp32 for the resident state (fp32 FlatParameter and grad
 * shards, the optimizer's state over them, no master: 4 + 4 + k32 bytes
 * per slot, k32 = 8 with Adam, 4 with SGD) with fp16 working copies: the
 * gathered params and the full grads 2 bytes an element, both collectives
 * fp16. At N = 1 (NO_SHARD) the working copy and the grads of one unit at
 * a time, cast from and into the full fp32 ones: the largest unit's
 * n·(2 + 2) at the peak. */
static void fsdp_mixed(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                       enum zs_unit unit, unsigned world, struct theory_schedule *out)
{
	struct theory_shape s32 = *s;
	theory_bytes_per_param(ZS_FP32, c->optimizer, &s32.bytes);
	theory_schedule(&s32, scheme, unit, world, out);
	if (scheme == ZS_ZERO2)
		torch_zero2(&s32, unit, world, out);
	else
		torch_zero3(&s32, unit, world, out);
	out->comm_bytes = out->comm_elements * 2;
	if (world > 1)
		return;
	uint64_t *pb = out->peak_breakdown, largest = 0;
	for (size_t u = 0; u < out->nunits; u++)
		largest = out->units[u] > largest ? out->units[u] : largest;
	pb[THEORY_GATHERED_PARAMS] = pb[THEORY_FULL_GRADS] = largest * 2;
	out->peak_bytes += largest * 4;
}

void theory_framework_schedule(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                               enum zs_unit unit, unsigned world, struct theory_schedule *out)
{
	if (c->framework != ZS_FW_TORCH)
		return;
	if (scheme == ZS_DP)
		out->comm_bytes = out->comm_elements = 0; /* DDP's all-reduce is by bucket */
	size_t nt;
	uint64_t *n = tensors(s, &nt);
	if (scheme == ZS_ZERO1)
		theory_torch_zero1(n, nt, &s->bytes, world, out);
	if (scheme <= ZS_ZERO1)
		theory_torch_ddp(n, nt, s->bytes.g, c->bucket_cap_mb, world, out);
	free(n);
	if (scheme < ZS_ZERO2)
		return;
	int mixed = c->precision == ZS_MIXED;
	if (mixed)
		fsdp_mixed(s, c, scheme, unit, world, out);
	else if (scheme == ZS_ZERO2)
		torch_zero2(s, unit, world, out);
	else
		torch_zero3(s, unit, world, out);
	/* The transients at N > 1: 16-bit working copies and full grads in
	 * mixed precision, with _mp_shard and the fp32 cast of the output. */
	const struct fsdp_elem e = { s->bytes.p, s->bytes.g, mixed ? s->bytes.p : 0, mixed ? sizeof(float) : 0 };
	if (world > 1)
		fsdp_transients(&e, scheme == ZS_ZERO2, unit == ZS_UNIT_MODEL,
		                scheme == ZS_ZERO3 && c->prefetch == ZS_PREFETCH_BACKWARD_PRE, world, out);
}

/* Rank k's model states differ from the binding rank's by its share of
 * the optimizer state (torch's zero1); the transients and bytes sent are
 * every rank's. */
static void push(cJSON *arr, double v) { cJSON_AddItemToArray(arr, cJSON_CreateNumber(v)); }

void theory_framework_json(cJSON *schedule, const struct theory_request *req, enum zs_scheme scheme,
                          unsigned world, const struct theory_schedule *sc)
{
	const struct zs_config *c = req->config;
	struct theory_shape s = {c->widths, c->nwidths, c->batch, {0}};
	uint64_t *load = zs_calloc(world, sizeof *load), most = 0;
	theory_request_bytes(req, &s.bytes);
	if (c->framework == ZS_FW_TORCH && scheme == ZS_ZERO1) {
		struct theory_desc own;
		const struct theory_desc *d = theory_request_desc(req, &own);
		uint64_t *n = numels(&d->params);
		theory_greedy_partition(n, d->params.ntensors, world, load);
		free(n);
		if (d == &own)
			theory_desc_free(&own);
	}
	for (unsigned k = 0; k < world; k++)
		most = load[k] > most ? load[k] : most;
	cJSON *per = cJSON_AddObjectToObject(schedule, "per_rank");
	zs_json_add_number(schedule, "imbalance_bytes", sc->imbalance_bytes);
	cJSON *ra = cJSON_AddArrayToObject(per, "resident_bytes"), *pa = cJSON_AddArrayToObject(per, "peak_bytes");
	cJSON *ca = cJSON_AddArrayToObject(per, "comm_bytes_per_step");
	for (unsigned k = 0; k < world; k++) {
		uint64_t less = (most - load[k]) * s.bytes.k;
		push(ra, (double)(sc->resident_bytes - less));
		push(pa, (double)(sc->peak_bytes - less));
		push(ca, sc->steps_differ ? sc->comm_bytes_mean : (double)sc->comm_bytes);
	}
	free(load);
}

/* A transformer's tables are the paper's level; the framework's bytes are
 * the JSON's schedule. */
static const char model_note[] = " On a transformer the peak table above each unit's is the paper's level "
                                 "(Korthikanti's activations); the framework's exact schedule, as measure runs "
                                 "it, is the two step-schedule tables (each row's \"schedule\" in --out's JSON).";

char *theory_framework_text(const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	if (c->framework == ZS_FW_PAPER)
		return NULL;
	if (c->framework == ZS_FW_TORCH) {
		char cap[32];
		return zs_asprintf("\nFramework torch: dp is DistributedDataParallel (bucket_cap_mb %s; its gradient "
		                   "buckets, a second gradient-sized buffer, are resident: category buckets, counted "
		                   "in the schedule's tables above), zero1 is "
		                   "ZeroRedundancyOptimizer over it (whole tensors; the tables show the rank that "
		                   "holds the most), zero2 and zero3 are FSDP (backward_prefetch %s; in mixed "
		                   "precision its MixedPrecision: fp32 shards, no master, fp16 working copies; "
		                   "each unit's post-backward hook holds a padded copy of its grads and an output "
		                   "shard: category buckets, in the peak).%s\n",
		                   zs_number_text(c->bucket_cap_mb, cap, sizeof cap),
		                   c->prefetch == ZS_PREFETCH_BACKWARD_PRE ? "BACKWARD_PRE" : "None",
		                   req->model != NULL ? model_note : "");
	}
	char *ds = theory_deepspeed_text(req);
	if (ds == NULL || req->model == NULL)
		return ds;
	char *both = zs_asprintf("%s%s\n", ds, model_note + 1);
	free(ds);
	return both;
}
