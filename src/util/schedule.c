/*
 * schedule — see schedule.h; the tables of docs/schedule.md.
 */
#include "config.h"

#include "util/schedule.h"

static const char *const cat_names[ZS_NCATS] = {
	"param16", "param32", "grad16", "grad32", "master32", "adam_m", "adam_v",
	"momentum", "gathered_params", "full_grads", "activations", "scratch",
};

static const char *const phase_names[ZS_NPHASES] = {
	"setup", "forward", "backward", "reduce", "optimizer", "gather",
};

const char *zs_cat_name(enum zs_cat c) { return (unsigned)c < ZS_NCATS ? cat_names[c] : NULL; }
const char *zs_phase_name(enum zs_phase p) { return (unsigned)p < ZS_NPHASES ? phase_names[p] : NULL; }

const enum zs_span zs_shards[ZS_NSCHEMES][ZS_NSTATES] = {
	/*            params    grads     optimizer state */
	[ZS_DP]    = {ZS_FULL,  ZS_FULL,  ZS_FULL},
	[ZS_ZERO1] = {ZS_FULL,  ZS_FULL,  ZS_SHARD},
	[ZS_ZERO2] = {ZS_FULL,  ZS_SHARD, ZS_SHARD},
	[ZS_ZERO3] = {ZS_SHARD, ZS_SHARD, ZS_SHARD},
};

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
