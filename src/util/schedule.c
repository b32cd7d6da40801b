/*
 * schedule — see schedule.h; the tables of docs/schedule.md.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "util/cuda_alloc.h"
#include "util/schedule.h"
#include "util/util.h"

static const char *const cat_names[ZS_NCATS] = {
	"param16", "param32", "grad16", "grad32", "master32", "adam_m", "adam_v",
	"momentum", "gathered_params", "full_grads", "activations", "scratch", "buckets",
};

static const char *const phase_names[ZS_NPHASES] = {
	"setup", "forward", "backward", "reduce", "optimizer", "gather",
};

const char *zs_cat_name(enum zs_cat c) { return (unsigned)c < ZS_NCATS ? cat_names[c] : NULL; }
void zs_cat_json(cJSON *parent, const char *key, const uint64_t bytes[ZS_NCATS])
{
	cJSON *o = cJSON_AddObjectToObject(parent, key);
	for (int c = 0; c < ZS_NCATS; c++)
		if (c != ZS_CAT_BUCKETS || bytes[c] != 0)
			zs_json_add_number(o, zs_cat_name((enum zs_cat)c), (double)bytes[c]);
}

const char *zs_phase_name(enum zs_phase p) { return (unsigned)p < ZS_NPHASES ? phase_names[p] : NULL; }

const char *const zs_alloc_keys[ZS_ALLOC_NKEYS] = {
	"allocated_peak_bytes", "reserved_at_allocated_peak_bytes", "reserved_peak_bytes",
	"allocated_at_reserved_peak_bytes", "fragmentation_bytes", "fragmentation_ratio",
	"segments_peak", "expandable_segments", "cuda_malloc_calls", "cuda_free_calls",
};

void zs_alloc_config_json(cJSON *root, const char *conf, uint64_t cublas_workspace)
{
	cJSON *a = cJSON_AddObjectToObject(cJSON_GetObjectItemCaseSensitive(root, "config"), "allocator");
	cJSON_AddStringToObject(a, "model", "pytorch-" CUDA_ALLOC_TORCH_RELEASE);
	cJSON_AddStringToObject(a, "conf", conf != NULL ? conf : "");
	zs_json_add_number(a, "cublas_workspace_bytes", (double)cublas_workspace);
}

void zs_alloc_values(const struct cuda_alloc_run *r, double v[ZS_ALLOC_NKEYS])
{
	const struct cuda_alloc_stats *st = &r->st;
	/* fragmentation: the reserved bytes not allocated when reserved first
	 * reached its peak, and their share of it */
	double at[ZS_ALLOC_NKEYS] = {
		(double)st->allocated_peak, (double)r->reserved_at_allocated_peak, (double)st->reserved_peak,
		(double)st->peak_allocated_at, (double)st->frag_at_peak,
		st->peak_reserved_at ? (double)st->frag_at_peak / (double)st->peak_reserved_at : 0,
		(double)st->segments_peak, (double)st->expandable_segments, (double)st->device_allocs,
		(double)st->device_frees};
	memcpy(v, at, sizeof at);
}

const enum zs_span zs_shards[ZS_NSCHEMES][ZS_NSTATES] = {
	/*            params    grads     optimizer state */
	[ZS_DP]    = {ZS_FULL,  ZS_FULL,  ZS_FULL},
	[ZS_ZERO1] = {ZS_FULL,  ZS_FULL,  ZS_SHARD},
	[ZS_ZERO2] = {ZS_FULL,  ZS_SHARD, ZS_SHARD},
	[ZS_ZERO3] = {ZS_SHARD, ZS_SHARD, ZS_SHARD},
};

/* torch's schemes (docs/schedule.md, "torch"): dp is DistributedDataParallel
 * (its gradient buckets a buffer of their own, not a state), zero1 is ZeroRedundancyOptimizer,
 * zero2 and zero3 are FullyShardedDataParallel's SHARD_GRAD_OP and
 * FULL_SHARD: between steps both hold only shards. */
static const enum zs_span torch_rows[ZS_NSCHEMES][ZS_NSTATES] = {
	[ZS_DP]    = {ZS_FULL,  ZS_FULL,  ZS_FULL},
	[ZS_ZERO1] = {ZS_FULL,  ZS_FULL,  ZS_TENSORS},
	[ZS_ZERO2] = {ZS_SHARD, ZS_SHARD, ZS_SHARD},
	[ZS_ZERO3] = {ZS_SHARD, ZS_SHARD, ZS_SHARD},
};

/* DeepSpeed's (docs/schedule.md, "DeepSpeed"): dp is a plain all-reduce,
 * as the paper's; ZeRO-1 and ZeRO-2 (deepspeed/runtime/zero/
 * stage_1_and_2.py) keep the fp16 params full and each rank's partition of
 * the reduced grads (contiguous_gradients' grads_in_partition), its fp32
 * partition and the optimizer state over it; their reduce buckets, the
 * autograd grads and the fp32 gradient partition are transients (hooks in
 * src/engine/scheme_deepspeed.c).
 * ZeRO-3 shards every state, each tensor on its own. */
static const enum zs_span deepspeed_rows[ZS_NSCHEMES][ZS_NSTATES] = {
	[ZS_DP]    = {ZS_FULL,  ZS_FULL,  ZS_FULL},
	[ZS_ZERO1] = {ZS_FULL,  ZS_SHARD, ZS_SHARD},
	[ZS_ZERO2] = {ZS_FULL,  ZS_SHARD, ZS_SHARD},
	[ZS_ZERO3] = {ZS_SHARD, ZS_SHARD, ZS_SHARD}, /* each tensor on its own (the engine's layout) */
};

const enum zs_span *zs_row(enum zs_framework fw, enum zs_scheme scheme)
{
	switch (fw) {
	case ZS_FW_TORCH:
		return torch_rows[scheme];
	case ZS_FW_DEEPSPEED:
		return deepspeed_rows[scheme];
	default:
		return zs_shards[scheme];
	}
}

int zs_framework_check(const struct zs_config *c, int theory, char **cause)
{
	static const enum zs_key ds_keys[] = {ZS_KEY_DS_REDUCE_BUCKET, ZS_KEY_DS_ALLGATHER_BUCKET, ZS_KEY_DS_OVERLAP_COMM,
	                                      ZS_KEY_DS_PERSIST, ZS_KEY_OFFLOAD, ZS_KEY_RANKS_PER_NODE,
	                                      ZS_KEY_DS_PREFETCH_BUCKET, ZS_KEY_DS_MAX_LIVE, ZS_KEY_DS_SUB_GROUP};
	static const char *const ds_names[] = {"--ds-reduce-bucket", "--ds-allgather-bucket", "--ds-overlap-comm",
	                                       "--ds-persist", "--offload", "--ranks-per-node",
	                                       "--ds-prefetch-bucket", "--ds-max-live", "--ds-sub-group-size"};
	for (size_t i = 0; i < sizeof ds_keys / sizeof ds_keys[0]; i++)
		if (c->framework != ZS_FW_DEEPSPEED && (c->given & ZS_KEY_BIT(ds_keys[i])))
			return zs_fail(cause, "%s is a DeepSpeed setting: give --framework deepspeed", ds_names[i]);
	for (size_t i = 0; i < c->nschemes && c->offload == ZS_OFFLOAD_PARAMS; i++)
		if (c->schemes[i] != ZS_ZERO3)
			return zs_fail(cause, "--offload params: only ZeRO-3 partitions the params (give --schemes zero3, "
			               "or --offload optimizer)");
	for (size_t i = 0; i < c->nschemes && c->offload != ZS_OFFLOAD_NONE; i++)
		if (c->schemes[i] == ZS_DP)
			return zs_fail(cause, "--offload %s: dp has no ZeRO optimizer to offload (give --schemes zero1,zero2,zero3)",
			               zs_offload_name(c->offload));
	/* A DeepSpeed setting no scheme of the sweep reads is refused, not
	 * recorded as if it had changed something. */
	unsigned has = 0; /* a bit per scheme of the sweep */
	for (size_t i = 0; i < c->nschemes; i++)
		has |= 1u << c->schemes[i];
	enum { Z12 = 1u << ZS_ZERO1 | 1u << ZS_ZERO2, Z3 = 1u << ZS_ZERO3 };
	static const struct { enum zs_key key; unsigned schemes; int theory_only; const char *why; } ds_use[] = {
		{ZS_KEY_DS_REDUCE_BUCKET, Z12 | Z3, 0, "--ds-reduce-bucket: DeepSpeed's dp is a plain all-reduce, with no "
		 "reduce bucket (give --schemes zero1, zero2 or zero3)"},
		{ZS_KEY_DS_OVERLAP_COMM, Z12 | Z3, 0, "--ds-overlap-comm: DeepSpeed's dp is a plain all-reduce, with no "
		 "reduce bucket to double (give --schemes zero1, zero2 or zero3)"},
		{ZS_KEY_DS_ALLGATHER_BUCKET, Z12, 0, "--ds-allgather-bucket is ZeRO-1/2's (stage 3 takes none): give "
		 "--schemes zero1 or zero2"},
		/* measure records it for the report's finding on the theory's zero3 */
		{ZS_KEY_DS_PERSIST, Z3, 1, "--ds-persist is ZeRO-3's param_persistence_threshold: give --schemes zero3"},
		{ZS_KEY_DS_PREFETCH_BUCKET, Z3, 0, "--ds-prefetch-bucket is ZeRO-3's stage3_prefetch_bucket_size: give "
		 "--schemes zero3"},
		{ZS_KEY_DS_MAX_LIVE, Z3, 0, "--ds-max-live is ZeRO-3's stage3_max_live_parameters: give --schemes zero3"},
		{ZS_KEY_DS_SUB_GROUP, Z3, 0, "--ds-sub-group-size is ZeRO-3's sub_group_size: give --schemes zero3"},
	};
	for (size_t i = 0; i < sizeof ds_use / sizeof ds_use[0] && c->framework == ZS_FW_DEEPSPEED; i++)
		if ((c->given & ZS_KEY_BIT(ds_use[i].key)) && !(has & ds_use[i].schemes) && (theory || !ds_use[i].theory_only))
			return zs_fail(cause, "%s", ds_use[i].why);
	if (!theory && (c->given & ZS_KEY_BIT(ZS_KEY_RANKS_PER_NODE)) && c->offload == ZS_OFFLOAD_NONE)
		return zs_fail(cause, "--ranks-per-node: the engine keeps host bytes only with --offload optimizer or params "
		               "(the theory uses the ranks of a node without it, for DeepSpeed's estimate)");
	for (size_t w = 0; w < c->nworld; w++)
		if (c->world[w] % c->ranks_per_node != 0)
			return zs_fail(cause, "--ranks-per-node %u does not divide N = %u (every node holds as many ranks)",
			               c->ranks_per_node, c->world[w]);
	static const struct { enum zs_key key; const char *name, *what; } torch_only[] = {
		{ZS_KEY_BUCKET_CAP, "bucket-cap", "DDP's bucket size"},
		{ZS_KEY_PREFETCH, "prefetch", "FSDP's backward prefetch"},
	};
	for (size_t i = 0; i < sizeof torch_only / sizeof torch_only[0]; i++)
		if ((c->given & ZS_KEY_BIT(torch_only[i].key)) && c->framework != ZS_FW_TORCH)
			return zs_fail(cause, "--%s is %s: it needs --framework torch", torch_only[i].name,
			               torch_only[i].what);
	return 0;
}

static const char *const recompute_names[] = {"none", "selective", "full"};

const char *zs_recompute_name(enum zs_recompute r)
{
	return r <= ZS_RECOMPUTE_FULL ? recompute_names[r] : "?";
}

int zs_recompute_parse(const char *s, enum zs_recompute *out)
{
	for (int r = 0; r <= ZS_RECOMPUTE_FULL; r++)
		if (strcmp(s, recompute_names[r]) == 0) {
			*out = (enum zs_recompute)r;
			return 0;
		}
	return -1;
}

int zs_moe_torch_takes(const char *model_type)
{
	/* the list's words, ", " and " and " between them */
	const char *w = ZS_MOE_TORCH_FAMILIES;
	size_t len = model_type != NULL ? strlen(model_type) : 0;
	while (len > 0 && *w != '\0') {
		size_t k = strcspn(w, ", ");
		if (k == len && strncmp(w, model_type, len) == 0 && strncmp(w, "and", k) != 0)
			return 1;
		w += k + strspn(w + k, ", ");
	}
	return 0;
}

void zs_moe_balanced(uint64_t *counts, size_t L, size_t E, uint64_t BTk)
{
	for (size_t l = 0; l < L; l++)
		for (size_t e = 0; e < E; e++)
			counts[l * E + e] = BTk / E + (e < BTk % E);
}

void zs_moe_scope(const struct zs_config *c, const char *model_type, unsigned flags, char *what, size_t n)
{
	what[0] = '\0';
	if (c->framework == ZS_FW_TORCH && !zs_moe_torch_takes(model_type))
		snprintf(what, n, "--framework torch for a %s (give --framework paper or deepspeed)",
		         model_type != NULL ? model_type : "mixture");
	/* DeepSpeed's engine over the PyTorch step's mixture block (util/ag_ds.c
	 * over util/autograd.c's block, each rank its own routing): ZeRO-1 and
	 * ZeRO-2 in fp32, as tests/ds_moe_torch.sh holds them to 1.13 */
	else if (c->wrapper == ZS_WRAPPER_DEEPSPEED && !zs_moe_torch_takes(model_type))
		snprintf(what, n, "--wrapper deepspeed for a %s (give --wrapper auto, zerosim's own DeepSpeed step)",
		         model_type != NULL ? model_type : "mixture");
	else if (c->wrapper == ZS_WRAPPER_DEEPSPEED && c->nschemes > 0 && c->schemes[0] == ZS_ZERO3)
		snprintf(what, n, "--wrapper deepspeed --schemes zero3 (give zero1 or zero2, or --wrapper auto)");
	else if (c->wrapper == ZS_WRAPPER_DEEPSPEED && c->precision != ZS_FP32)
		snprintf(what, n, "--wrapper deepspeed --precision %s (give fp32)", zs_precision_name(c->precision));
	/* (tests/ds_torch26.sh holds the dense models alone to 2.6) */
	else if (c->wrapper == ZS_WRAPPER_DEEPSPEED && c->torch_version != ZS_TORCH_1_13)
		snprintf(what, n, "--wrapper deepspeed under PyTorch 2.6 (give --torch-version 1.13)");
	else if (c->framework == ZS_FW_TORCH && c->wrapper != ZS_WRAPPER_NONE && c->wrapper != ZS_WRAPPER_DDP &&
	         c->wrapper != ZS_WRAPPER_FSDP)
		snprintf(what, n, "--framework torch --wrapper %s (give --wrapper none)", zs_wrapper_name(c->wrapper));
	/* FSDP: FULL_SHARD under 1.13, one micro-step a step, as
	 * tests/moe_hf_torch.sh holds it; the rest not compared yet */
	else if (c->framework == ZS_FW_TORCH && c->wrapper == ZS_WRAPPER_FSDP && c->nschemes > 0 &&
	         c->schemes[0] != ZS_ZERO3)
		snprintf(what, n, "--wrapper fsdp --schemes %s (give zero3: FULL_SHARD)", zs_scheme_name(c->schemes[0]));
	else if (c->framework == ZS_FW_TORCH && c->wrapper == ZS_WRAPPER_FSDP && c->torch_version != ZS_TORCH_1_13)
		snprintf(what, n, "--wrapper fsdp under PyTorch 2.6 (give --torch-version 1.13)");
	else if (c->framework == ZS_FW_TORCH && c->wrapper == ZS_WRAPPER_FSDP && c->grad_accum > 1)
		snprintf(what, n, "--wrapper fsdp --grad-accum %u (give 1)", c->grad_accum);
	/* (set_to_none: an expert idle in a step has no grad anywhere, which
	 * util/ag_fsdp.c's pass reads as a frozen parameter in a trained unit) */
	else if (c->framework == ZS_FW_TORCH && c->wrapper == ZS_WRAPPER_FSDP &&
	         zs_zero_grad_resolve(c) == ZS_ZERO_GRAD_NONE)
		snprintf(what, n, "--wrapper fsdp --zero-grad none (give zeros)");
	else if (c->framework != ZS_FW_PAPER && c->framework != ZS_FW_DEEPSPEED && c->framework != ZS_FW_TORCH)
		snprintf(what, n, "--framework %s (give --framework paper or deepspeed)", zs_framework_name(c->framework));
	else if (c->framework == ZS_FW_TORCH && c->precision != ZS_FP32 &&
	         !(c->precision == ZS_AMP_BF16 && c->wrapper == ZS_WRAPPER_NONE))
		snprintf(what, n, "--precision %s under --framework torch%s%s (give fp32%s)", zs_precision_name(c->precision),
		         c->precision == ZS_AMP_BF16 ? " --wrapper " : "",
		         c->precision == ZS_AMP_BF16 ? zs_wrapper_name(c->wrapper) : "",
		         c->precision == ZS_AMP_BF16 ? ", or --wrapper none" : " or amp-bf16");
	else if (c->precision != ZS_FP32 && c->precision != ZS_MIXED && c->framework != ZS_FW_TORCH)
		snprintf(what, n, "--precision %s (give fp32 or mixed)", zs_precision_name(c->precision));
	/* (under --framework torch, --wrapper none and ddp, the only wrappers
	 * left here, take --grad-accum: each micro-step its own routing) */
	else if (c->grad_accum > 1 && c->framework != ZS_FW_TORCH)
		snprintf(what, n, "--grad-accum %u (give 1)", c->grad_accum);
	else if (c->offload != ZS_OFFLOAD_NONE)
		snprintf(what, n, "--offload (give none)");
	/* (--freeze under --framework torch --wrapper none: the PyTorch
	 * step's mixture block with its frozen parameters, util/autograd.c) */
	else if ((c->freeze[0] || c->lora_r) && !(c->framework == ZS_FW_TORCH && c->wrapper == ZS_WRAPPER_NONE))
		snprintf(what, n, "--freeze or --lora-r outside --framework torch --wrapper none");
	else if (c->quant_nf4)
		snprintf(what, n, "--quant-base");
	else if (flags & ZS_MOE_MPI)
		snprintf(what, n, "--backend mpi");
	else if (flags & ZS_MOE_ALLOCATOR)
		snprintf(what, n, "--allocator cuda");
	else if (flags & ZS_MOE_CASE)
		snprintf(what, n, "a case file (--case, --write-case)");
	else if (flags & ZS_MOE_FLASH)
		snprintf(what, n, "--flash-attn (the engine keeps the scores)");
}
