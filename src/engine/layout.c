/*
 * layout — units and shards of the flat vector (layout.h).
 */
#include "config.h"

#include <string.h>

#include "engine/layout.h"

static void add_unit(struct zs_layout *lo, size_t off, size_t first)
{
	lo->unit[lo->nunits++] = (struct zs_layout_unit){.off = off, .first = first, .last = first};
}

void layout_init(struct zs_layout *lo, const struct zs_model *m, enum zs_scheme scheme, unsigned world,
                 enum zs_unit unit)
{
	memset(lo, 0, sizeof *lo);
	lo->nparams = m->nparams;
	lo->world = world;
	for (size_t l = 0; l < m->nlayers; l++) {
		const struct zs_layer *ly = &m->layer[l];
		if (lo->nunits == 0 || (unit == ZS_UNIT_LAYER && ly->nparams > 0))
			add_unit(lo, ly->param_off, l);
		struct zs_layout_unit *un = &lo->unit[lo->nunits - 1];
		un->last = l;
		if (ly->nparams > 0)
			un->n = ly->param_off + ly->nparams - un->off;
	}
	for (size_t u = 0; u < lo->nunits; u++) {
		struct zs_layout_unit *un = &lo->unit[u];
		un->s = (un->n + world - 1) / world;
		un->soff = lo->shard;
		lo->shard += un->s;
	}
	for (int st = 0; st < ZS_NSTATES; st++)
		lo->span[st] = world == 1 ? ZS_FULL : zs_shards[scheme][st];
}

enum zs_state layout_state(enum zs_buf b)
{
	switch (b) {
	case ZS_BUF_PARAMS:
	case ZS_BUF_GATHERED:
		return ZS_STATE_PARAMS;
	case ZS_BUF_GRADS:
	case ZS_BUF_FULL_GRADS:
		return ZS_STATE_GRADS;
	default:
		return ZS_STATE_OPTIM;
	}
}

enum zs_span layout_span(const struct zs_layout *lo, enum zs_buf b) { return lo->span[layout_state(b)]; }

size_t layout_len(const struct zs_layout *lo, enum zs_buf b)
{
	return layout_span(lo, b) == ZS_SHARD ? lo->shard : lo->nparams;
}

struct zs_slice layout_own(const struct zs_layout *lo, enum zs_buf b, size_t u, unsigned k)
{
	const struct zs_layout_unit *un = &lo->unit[u];
	if (lo->span[ZS_STATE_OPTIM] == ZS_FULL && layout_span(lo, b) == ZS_FULL)
		return (struct zs_slice){un->off, un->n, un->off};
	size_t lo_k = (size_t)k * un->s;
	size_t count = lo_k >= un->n ? 0 : (un->n - lo_k < un->s ? un->n - lo_k : un->s);
	size_t at = layout_span(lo, b) == ZS_SHARD ? un->soff : un->off + lo_k;
	return (struct zs_slice){un->off + lo_k, count, at};
}
