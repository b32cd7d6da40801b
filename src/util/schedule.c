/*
 * schedule — see schedule.h; the tables of docs/schedule.md.
 */
#include "config.h"

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
int zs_cat_listed(enum zs_cat c, double bytes) { return c != ZS_CAT_BUCKETS || bytes != 0; }

const char *zs_phase_name(enum zs_phase p) { return (unsigned)p < ZS_NPHASES ? phase_names[p] : NULL; }

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
 * FULL_SHARD (fp32 only): between steps both hold only shards. */
static const enum zs_span torch_rows[ZS_NSCHEMES][ZS_NSTATES] = {
	[ZS_DP]    = {ZS_FULL,  ZS_FULL,  ZS_FULL},
	[ZS_ZERO1] = {ZS_FULL,  ZS_FULL,  ZS_TENSORS},
	[ZS_ZERO2] = {ZS_SHARD, ZS_SHARD, ZS_SHARD},
	[ZS_ZERO3] = {ZS_SHARD, ZS_SHARD, ZS_SHARD},
};
static const int torch_modelled[ZS_NSCHEMES] = {1, 1, 1, 1};

const enum zs_span *zs_row(enum zs_framework fw, enum zs_scheme scheme)
{
	if (fw == ZS_FW_PAPER)
		return zs_shards[scheme];
	if (fw == ZS_FW_TORCH && torch_modelled[scheme])
		return torch_rows[scheme];
	return NULL;
}

int zs_framework_check(const struct zs_config *c, int theory, char **cause)
{
	static const struct { enum zs_key key; const char *name, *what; } torch_only[] = {
		{ZS_KEY_BUCKET_CAP, "bucket-cap", "DDP's bucket size"},
		{ZS_KEY_PREFETCH, "prefetch", "FSDP's backward prefetch"},
	};
	for (size_t i = 0; i < sizeof torch_only / sizeof torch_only[0]; i++)
		if ((c->given & 1u << torch_only[i].key) && c->framework != ZS_FW_TORCH)
			return zs_fail(cause, "--%s is %s: it needs --framework torch", torch_only[i].name,
			               torch_only[i].what);
	if (theory && c->framework == ZS_FW_DEEPSPEED)
		return 0;
	for (size_t i = 0; i < c->nschemes; i++) {
		if (zs_row(c->framework, c->schemes[i]) == NULL)
			return zs_fail(cause, "--framework %s: %s is not modelled yet (%s)", zs_framework_name(c->framework),
			               zs_scheme_name(c->schemes[i]),
			               c->framework == ZS_FW_TORCH ? "torch models dp, zero1 and zero3: give --schemes dp,zero1,zero3"
			                                           : "the theory prints DeepSpeed's own estimate");
	}
	return 0;
}

uint64_t zs_layer_params(const size_t *widths, size_t l)
{
	return (uint64_t)widths[l] * widths[l + 1] + widths[l + 1];
}

uint64_t zs_params(const size_t *widths, size_t nwidths)
{
	uint64_t psi = 0;
	for (size_t l = 0; l + 1 < nwidths; l++)
		psi += zs_layer_params(widths, l);
	return psi;
}
