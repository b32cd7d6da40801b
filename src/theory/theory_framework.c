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
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* qsort_r */
#endif
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "util/ag_ddp.h"
#include "util/nf4.h"
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

/* largest first, ties in model order (qsort is not stable: the index
 * decides) */
static int by_size(const void *a, const void *b, void *numels)
{
	const uint64_t *n = numels;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	if (n[i] != n[j])
		return n[i] > n[j] ? -1 : 1;
	return i < j ? -1 : i > j;
}

void theory_greedy_partition(const uint64_t *n, size_t nt, unsigned world, uint64_t *load)
{
	size_t *order = zs_calloc(nt > 0 ? nt : 1, sizeof *order);
	for (size_t i = 0; i < nt; i++)
		order[i] = i;
	qsort_r(order, nt, sizeof *order, by_size, (void *)n);
	for (unsigned k = 0; k < world; k++)
		load[k] = 0;
	/* each to the first least-loaded rank: an empty rank is least loaded,
	 * and no rank past the first empty one has been used, so the search
	 * stops there (N far above the tensors' count costs nothing) */
	for (size_t i = 0; i < nt; i++) {
		unsigned min = 0;
		for (unsigned k = 1; k < world && load[min] != 0; k++)
			if (load[k] < load[min])
				min = k;
		load[min] += n[order[i]];
	}
	free(order);
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
	/* ranks past the tensors' count hold none: the binding load is the
	 * same over min(N, tensors) ranks (a --device-mem search walks every N) */
	unsigned used = nt < world ? (unsigned)(nt > 0 ? nt : 1) : world;
	uint64_t *load = zs_calloc(used, sizeof *load), most = 0;
	theory_greedy_partition(n, nt, used, load);
	for (unsigned k = 0; k < used; k++)
		most = load[k] > most ? load[k] : most;
	free(load);

	/* The binding rank holds its tensors' optimizer state; nothing is
	 * padded, and the peak adds dp's tensors only. */
	uint64_t *rb = out->resident_breakdown, *pb = out->peak_breakdown;
	rb[ZS_CAT_MASTER32] = most * b->master;
	rb[ZS_CAT_ADAM_M] = rb[ZS_CAT_ADAM_V] = most * b->adam;
	rb[ZS_CAT_MOMENTUM] = most * b->momentum;
	out->resident_bytes = out->peak_bytes = 0;
	for (int c = 0; c < ZS_NCATS; c++) {
		if (c < ZS_CAT_GATHERED)
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
	out->resident_breakdown[ZS_CAT_BUCKETS] = out->peak_breakdown[ZS_CAT_BUCKETS] = bucket;
	out->resident_bytes += bucket;
	out->peak_bytes += bucket;
	for (size_t i = 0; i < nb; i++) {
		uint64_t e = 2ull * (world - 1) * ((n[i] + world - 1) / world);
		out->comm_elements += e;
		out->comm_bytes += e * grad_bytes;
	}
	free(n);
}

/* torch's DDP, ZeroRedundancyOptimizer and FSDP are the walk's
 * (theory_walk.c, theory_walk_schedule) on the MLP's description as on a
 * transformer's. */
void theory_framework_schedule(const struct theory_shape *s, const struct zs_config *c, enum zs_scheme scheme,
                               enum zs_unit unit, unsigned world, struct theory_schedule *out)
{
	if (c->framework == ZS_FW_TORCH)
		theory_schedule_walk(s, c, scheme, unit, world, out);
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
	/* torch's zero1 over the PyTorch step (--wrapper ddp), DeepSpeed's
	 * engine over it and FSDP with use_orig_params (each rank's Adam state
	 * its shard's trained pieces): every rank's own sum of the list
	 * (util/ag_zero1.h, util/ag_ds.h, util/ag_fsdp.h) */
	uint64_t *res = NULL, *pk = NULL;
	unsigned bind = 0;
	int listed = ((c->wrapper == ZS_WRAPPER_DDP && scheme == ZS_ZERO1) || c->wrapper == ZS_WRAPPER_DEEPSPEED ||
	              (c->wrapper == ZS_WRAPPER_FSDP && c->fsdp_orig_params)) &&
	             req->model != NULL;
	if (listed) {
		res = zs_calloc(world, sizeof *res);
		pk = zs_calloc(world, sizeof *pk);
		listed = theory_autograd_ranks(req->model, c, c->batch, req->act.seq, world, res, pk, &bind, NULL) == 0;
	} else if (c->framework == ZS_FW_TORCH && scheme == ZS_ZERO1) {
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
	/* (the PyTorch step's zero1 marks may have made it: theory_autograd.c) */
	cJSON *per = cJSON_GetObjectItemCaseSensitive(schedule, "per_rank");
	if (per == NULL)
		per = cJSON_AddObjectToObject(schedule, "per_rank");
	zs_json_add_number(schedule, "imbalance_bytes", sc->imbalance_bytes);
	cJSON *ra = cJSON_AddArrayToObject(per, "resident_bytes"), *pa = cJSON_AddArrayToObject(per, "peak_bytes");
	cJSON *ca = cJSON_AddArrayToObject(per, "comm_bytes_per_step");
	for (unsigned k = 0; k < world; k++) {
		uint64_t less = (most - load[k]) * s.bytes.k;
		push(ra, listed ? (double)res[k] : (double)(sc->resident_bytes - less));
		push(pa, listed ? (double)pk[k] : (double)(sc->peak_bytes - less));
		push(ca, sc->steps_differ ? sc->comm_bytes_mean : (double)sc->comm_bytes);
	}
	if (listed)
		zs_json_add_number(schedule, "peak_rank", bind);
	free(res);
	free(pk);
	free(load);
}

/* A transformer's headline is the framework's exact step; the paper's
 * level beside it is the reference (theory_text.c). */
static const char model_note[] = " On a transformer each unit's first table judges the peak, its fit and the "
                                 "largest micro-batch on the framework's exact step, as measure runs it (each "
                                 "row's \"schedule\" in --out's JSON), with the paper's level (Korthikanti's "
                                 "activations) beside it as the reference.";

/* --quant-base nf4: what the 4-bit base holds, from the shapes
 * (nf4_base_count), and its largest dequantized temporary; NULL without it. */
static char *qlora_text(const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	if (!c->quant_nf4 || req->desc == NULL || !req->desc->has_params)
		return NULL;
	struct nf4_base q;
	nf4_base_count(&req->desc->params, c->double_quant, &q);
	return zs_asprintf("\n4-bit base (--quant-base nf4%s): bitsandbytes' Linear4bit in place of %llu base linear "
	                   "layers (%llu weights): %.2f GB as NF4, packed codes and %s (%.3f bits a weight, %.2f GB in "
	                   "fp32); the embeddings, norms and head stay %s (%.2f GB). Each layer's forward and "
	                   "backward dequantizes its weight into %s temporary, freed after its matmul (the "
	                   "largest %.2f MB)%s, and PEFT clones an adapted layer's output (docs/finetune.md, \"QLoRA's "
	                   "4-bit base\"%s).\n",
	                   c->double_quant ? " --double-quant on" : "", (unsigned long long)q.layers,
	                   (unsigned long long)q.weights, (double)q.held / 1e9,
	                   c->double_quant ? "an 8-bit absmax per 64 with an fp32 constant per 256 blocks"
	                                   : "an fp32 absmax per 64",
	                   q.weights ? (double)q.held * 8 / (double)q.weights : 0.0, (double)q.weights * 4 / 1e9,
	                   c->load_bf16 ? "bf16, as the model was loaded (--load-dtype bf16)" : "fp32",
	                   (double)q.rest * (c->load_bf16 ? 2 : 4) / 1e9, c->load_bf16 ? "a bf16" : "an fp32",
	                   (double)q.largest * (c->load_bf16 ? 2 : 4) / 1e6,
	                   c->precision == ZS_AMP_BF16 && !c->load_bf16 ? "; under bf16 autocast bitsandbytes' compute dtype is bf16: "
	                                                 "the temporary is copied to bf16 for the product (half as "
	                                                 "much again at once), the input and result copied to and "
	                                                 "from bf16 where they are fp32"
	                                               : "",
	                   !c->load_bf16 ? ""
	                   : c->precision == ZS_AMP_BF16 && c->torch_device == ZS_DEVICE_CUDA
	                           ? ", and \"QLoRA loaded in bf16 under autocast, and checkpointed\": the adapters fp32, "
	                             "their weights cast to bf16 by autocast, their bf16 input taken as it is (PEFT converts "
	                             "only where CUDA's autocast is off), their term bf16"
	                   : c->precision == ZS_AMP_BF16 ? ", and \"QLoRA loaded in bf16 under autocast, and checkpointed\": "
	                                                   "the adapters fp32, their input copied up, then with their weights "
	                                                   "cast to bf16 by autocast, their term bf16"
	                   : ", and \"QLoRA loaded in bf16\": the adapters fp32, their input copied up and their term "
	                     "back down");
}

char *theory_framework_text(const struct theory_request *req)
{
	const struct zs_config *c = req->config;
	if (c->framework == ZS_FW_PAPER)
		return NULL;
	if (c->wrapper == ZS_WRAPPER_NONE) {
		char *q = qlora_text(req);
		char *r = zs_asprintf("\nFramework %s, --wrapper none: one process's plain training loop over Hugging "
		                   "Face's model (no DDP, FSDP or DeepSpeed engine: every scheme is the same loop), its "
		                   "peak the sum of "
		                   "PyTorch %s's own step allocation by allocation (docs/schedule.md, \"The PyTorch "
		                   "step\"): autograd's saved tensors, the loss, the tied head's held gradient, Adam's "
		                   "temporaries; the parameters, buffers, token ids, grads and Adam's m, v and step "
		                   "counters between steps.\n",
		                   c->framework == ZS_FW_DEEPSPEED ? "deepspeed" : "torch", c->torch_version == ZS_TORCH_1_13 ? "1.13" : "2.6");
		if (q == NULL)
			return r;
		char *both = zs_asprintf("%s%s", r, q);
		free(r);
		free(q);
		return both;
	}
	if (c->wrapper == ZS_WRAPPER_DEEPSPEED && c->schemes[0] == ZS_ZERO3)
		return zs_asprintf("\nFramework deepspeed, --wrapper deepspeed: DeepSpeed's engine, ZeRO stage 3 in fp32 "
		                   "(reduce_bucket_size %.0f elements, persistence threshold %.0f), over Hugging Face's "
		                   "model in PyTorch 1.13's own step, allocation by allocation (docs/schedule.md, "
		                   "\"DeepSpeed over the PyTorch step\", its ZeRO-3 part): each parameter partitioned, "
		                   "ceil(n/N) elements a rank, in one flat buffer, each rank's fp32 partition, gradient "
		                   "partition and Adam's state over it; a persisting parameter gathered whole after each "
		                   "step() and read by forward and backward, each bucket reduce-scattered into the "
		                   "rank's gradient partition, the copies released by step() before the norm and Adam "
		                   "and gathered again after; the ranks differ, and the tables show the rank of the "
		                   "highest peak (every rank's in --out's per_rank).\n",
		                   c->ds_reduce_bucket, c->ds_persist);
	if (c->wrapper == ZS_WRAPPER_DEEPSPEED)
		return zs_asprintf("\nFramework deepspeed, --wrapper deepspeed: DeepSpeed's engine, ZeRO stage %d in %s "
		                   "(reduce_bucket_size %.0f elements), over Hugging Face's model in PyTorch 1.13's own step, "
		                   "allocation by allocation (docs/schedule.md, \"DeepSpeed over the PyTorch step\"): the "
		                   "parameters one flat buffer padded to a multiple of 2N, each rank's fp32 partition and "
		                   "Adam's state over it, the reduce bucket from backward's start to its end, each gradient "
		                   "copied into it and freed (%s), the rank's own gradients in grads_in_partition, then the "
		                   "norm, the flat gradient partition, Adam and the all-gather; the ranks differ, and the "
		                   "tables show the rank of the highest peak (every rank's in --out's per_rank).\n",
		                   c->schemes[0] == ZS_ZERO2 ? 2 : 1,
		                   c->precision == ZS_MIXED ? "bf16 (the module cast to bf16, module.bfloat16(); fp32 "
		                                              "partition)" : "fp32",
		                   c->ds_reduce_bucket,
		                   c->schemes[0] == ZS_ZERO2 ? "at its AccumulateGrad hook" : "after backward, in order");
	if (c->framework == ZS_FW_TORCH) {
		char cap[32];
		if (c->wrapper == ZS_WRAPPER_DDP) {
			int z = ag_zero1_scheme(c); /* with ZeroRedundancyOptimizer: torch's zero1 */
			return zs_asprintf("\nFramework torch, --wrapper ddp%s: %sDistributedDataParallel (bucket_cap_mb %s, "
			                   "the first bucket %s) over Hugging Face's model in PyTorch %s's own step, "
			                   "allocation by allocation (docs/schedule.md, \"%s over the PyTorch step\"): %s\n",
			                   z ? " --schemes zero1" : "", z ? "ZeroRedundancyOptimizer(optimizer_class=Adam) over " : "",
			                   zs_number_text(c->bucket_cap_mb, cap, sizeof cap),
			                   (uint64_t)ag_ddp_first_bucket_bytes(c) == (uint64_t)AG_DDP_FIRST_BUCKET_BYTES ? "1 MiB"
			                                                                                        : "the cap",
			                   c->torch_version == ZS_TORCH_1_13 ? "1.13" : "2.6", z ? "ZeroRedundancyOptimizer" : "DDP",
			                   z ? "DDP's bytes, but each rank keeps Adam's state and makes Adam's temporaries for "
			                       "its own parameters only (whole tensors, largest first to the least-loaded "
			                       "rank), then broadcasts them; the ranks differ, and the tables show the rank of "
			                       "the highest peak (every rank's in --out's per_rank)."
			                     : "the plain loop's bytes, the reducer's fp32 gradient buckets (resident: category "
			                       "buckets), each gradient's copy into its bucket divided by N, the buffers' "
			                       "broadcast at every forward; every rank holds the same bytes at any N.");
		}
		if (c->wrapper == ZS_WRAPPER_FSDP) {
			/* --prefetch's default is none, 1.13's default and not 2.6's
			 * (BACKWARD_PRE): the text says which the figures are */
			const int v113 = c->torch_version == ZS_TORCH_1_13, pre = c->prefetch == ZS_PREFETCH_BACKWARD_PRE;
			/* SHARD_GRAD_OP: one scheme a run; its units stay whole from
			 * forward to post-backward, so the prefetch's _unshard finds
			 * the storage allocated and gathers nothing (2.6's
			 * _flat_param.py, FlatParamHandle.needs_unshard) */
			const int sgo = c->schemes[0] == ZS_ZERO2;
			return zs_asprintf("\nFramework torch, --wrapper fsdp: FullyShardedDataParallel %s as PyTorch "
			                   "%s runs it (a unit per block and the root, backward_prefetch %s) over Hugging "
			                   "Face's model in its own step, allocation by allocation (docs/schedule.md, \"FSDP "
			                   "over the PyTorch step\"): each unit's flat parameter padded to a multiple of N and "
			                   "sharded, gathered before its forward %s, its "
			                   "gradients held for the split's cat, %s reduce-scattered into a shard; "
			                   "Adam over the shards.\n",
			                   sgo ? "SHARD_GRAD_OP" : "FULL_SHARD", v113 ? "1.13" : "2.6",
			                   v113  ? "None"
			                   : pre ? (sgo ? "BACKWARD_PRE, 2.6's default, which gathers nothing here: the next "
			                                  "unit is still whole from its forward"
			                                : "BACKWARD_PRE, 2.6's default: each pre-backward hook gathers the next "
			                                  "unit too")
			                         : "None, not 2.6's default BACKWARD_PRE (--prefetch backward-pre)",
			                   sgo ? "and kept to its post-backward hook (not gathered again)"
			                       : "and again at its pre-backward hook",
			                   v113 ? "the padded copy" : "the flat gradient (a padded copy where N does not divide it)");
		}
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
