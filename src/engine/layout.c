/*
 * layout — units and shards of the flat vector (layout.h).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "engine/layout.h"
#include "util/util.h"

static void add_unit(struct zs_layout *lo, size_t off, size_t first)
{
	lo->unit[lo->nunits++] = (struct zs_layout_unit){.off = off, .first = first, .last = first};
}

void layout_init(struct zs_layout *lo, const struct zs_net *m, enum zs_scheme scheme, unsigned world,
                 enum zs_unit unit)
{
	memset(lo, 0, sizeof *lo);
	lo->nparams = m->nparams;
	lo->world = world;
	lo->mode = unit;
	size_t ntensors = 0;
	for (size_t l = 0; l < m->nlayers; l++)
		ntensors += m->layer[l].nptensors;
	lo->unit = zs_calloc(m->nlayers, sizeof *lo->unit);
	lo->tensor = zs_calloc(ntensors, sizeof *lo->tensor);
	for (size_t l = 0; l < m->nlayers; l++) {
		const struct zs_layer *ly = &m->layer[l];
		if (lo->nunits == 0 || (unit == ZS_UNIT_LAYER && ly->nparams > 0))
			add_unit(lo, ly->param_off, l);
		struct zs_layout_unit *un = &lo->unit[lo->nunits - 1];
		un->last = l;
		if (ly->nparams > 0)
			un->n = ly->param_off + ly->nparams - un->off;
		for (size_t i = 0, off = ly->param_off; i < ly->nptensors; off += ly->ptensor[i++])
			lo->tensor[lo->ntensors++] =
			        (struct zs_layout_tensor){.off = off, .n = ly->ptensor[i], .unit = lo->nunits - 1};
	}
	for (size_t u = 0; u < lo->nunits; u++) {
		struct zs_layout_unit *un = &lo->unit[u];
		un->s = (un->n + world - 1) / world;
		un->soff = lo->shard;
		lo->shard += un->s;
		un->toff = un->off, un->tn = un->n, un->ts = un->s, un->tsoff = un->soff, un->tbase = un->off;
	}
	lo->ntrain = lo->nparams;
	lo->tshard = lo->shard;
	for (int st = 0; st < ZS_NSTATES; st++)
		lo->span[st] = world == 1 ? ZS_FULL : zs_shards[scheme][st];
}

/* Per tensor: each tensor trainable when inside its unit's run. */
static void tensor_runs(struct zs_layout *lo)
{
	lo->tshard = 0;
	for (size_t i = 0, base = 0; i < lo->ntensors; i++) {
		struct zs_layout_tensor *t = &lo->tensor[i];
		const struct zs_layout_unit *un = &lo->unit[t->unit];
		t->tn = t->off >= un->toff && t->off + t->n <= un->toff + un->tn ? t->n : 0;
		t->ts = (t->tn + lo->world - 1) / lo->world;
		t->tsoff = lo->tshard;
		t->tbase = base;
		lo->tshard += t->ts;
		base += t->tn;
	}
}

void layout_freeze(struct zs_layout *lo, const struct zs_freeze_run *run, size_t nunits)
{
	if (nunits != lo->nunits)
		abort(); /* the same units (util/step.c's zs_freeze_units walks the description's layers as layout_init) */
	lo->ntrain = lo->tshard = 0;
	for (size_t u = 0; u < lo->nunits; u++) {
		struct zs_layout_unit *un = &lo->unit[u];
		un->toff = run[u].off;
		un->tn = run[u].n;
		un->ts = (un->tn + lo->world - 1) / lo->world;
		un->tsoff = lo->tshard;
		un->tbase = lo->ntrain;
		lo->tshard += un->ts;
		lo->ntrain += un->tn;
	}
	if (lo->per_tensor)
		tensor_runs(lo);
}

int layout_trained(enum zs_rankbuf b) { return layout_state(b) != ZS_STATE_PARAMS; }

void layout_free(struct zs_layout *lo)
{
	free(lo->unit);
	free(lo->tensor);
	free(lo->hole);
	lo->unit = NULL;
	lo->tensor = NULL;
	lo->hole = NULL;
}

void layout_quantize(struct zs_layout *lo, const struct zs_slice *hole, size_t n)
{
	if (lo->span[ZS_STATE_PARAMS] != ZS_FULL && !lo->per_tensor)
		abort(); /* units of sharded params with a 4-bit base: refused before (util/config.c) */
	lo->hole = zs_calloc(n ? n : 1, sizeof *lo->hole);
	lo->nholes = n;
	lo->quant = 0;
	for (size_t i = 0; i < n; i++) {
		lo->hole[i] = (struct zs_slice){hole[i].first, hole[i].count, lo->quant};
		lo->quant += hole[i].count;
	}
}

void layout_pack(struct zs_layout *lo, size_t t, size_t n)
{
	lo->tensor[t].n = n;
	lo->tensor[t].packed = 1;
	lo->tensor[t].pat = lo->packed;
	lo->packed += n;
}

/* The first hole that ends after e (nholes: none). */
static size_t hole_after(const struct zs_layout *lo, size_t e)
{
	size_t a = 0, b = lo->nholes;
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (lo->hole[m].first + lo->hole[m].count <= e)
			a = m + 1;
		else
			b = m;
	}
	return a;
}

size_t layout_params_at(const struct zs_layout *lo, size_t e)
{
	if (lo->nholes == 0)
		return e;
	size_t h = hole_after(lo, e);
	return e - (h < lo->nholes ? lo->hole[h].at : lo->quant);
}

size_t layout_held(const struct zs_layout *lo, size_t *e, size_t end)
{
	size_t h = hole_after(lo, *e);
	for (; h < lo->nholes && lo->hole[h].first <= *e; h++) /* adjacent holes one after another */
		*e = lo->hole[h].first + lo->hole[h].count;
	if (*e >= end)
		return 0;
	size_t stop = h < lo->nholes && lo->hole[h].first < end ? lo->hole[h].first : end;
	return stop - *e;
}

/* zero_redundancy_optimizer.py, _partition_parameters: the tensors sorted
 * by size, largest first (Python's sort is stable: ties keep model order),
 * each given to _get_min_index(sizes), the first rank with the fewest. */
static void partition_tensors(struct zs_layout *lo)
{
	size_t *order = zs_calloc(lo->ntensors, sizeof *order), *load = zs_calloc(lo->world, sizeof *load);
	for (size_t i = 0; i < lo->ntensors; i++) {
		size_t j = i;
		for (; j > 0 && lo->tensor[order[j - 1]].n < lo->tensor[i].n; j--)
			order[j] = order[j - 1];
		order[j] = i;
	}
	for (size_t i = 0; i < lo->ntensors; i++) {
		struct zs_layout_tensor *t = &lo->tensor[order[i]];
		unsigned min = 0;
		for (unsigned k = 1; k < lo->world; k++)
			min = load[k] < load[min] ? k : min;
		t->owner = min;
		load[min] += t->n;
	}
	memset(load, 0, lo->world * sizeof *load);
	for (size_t i = 0; i < lo->ntensors; i++) { /* packed in model order */
		lo->tensor[i].at = load[lo->tensor[i].owner];
		load[lo->tensor[i].owner] += lo->tensor[i].n;
	}
	free(order);
	free(load);
}

void layout_use_row(struct zs_layout *lo, const enum zs_span *row)
{
	if (lo->world == 1)
		return;
	memcpy(lo->span, row, sizeof lo->span);
	if (row[ZS_STATE_OPTIM] == ZS_TENSORS)
		partition_tensors(lo);
}

void layout_shard_tensors(struct zs_layout *lo)
{
	lo->per_tensor = 1;
	lo->shard = 0;
	for (size_t i = 0; i < lo->ntensors; i++) {
		struct zs_layout_tensor *t = &lo->tensor[i];
		t->s = (t->n + lo->world - 1) / lo->world;
		t->soff = lo->shard;
		lo->shard += t->s;
	}
	tensor_runs(lo);
}

size_t layout_npieces(const struct zs_layout *lo)
{
	return lo->span[ZS_STATE_OPTIM] == ZS_TENSORS || lo->per_tensor ? lo->ntensors : lo->nunits;
}

size_t layout_rank_len(const struct zs_layout *lo, enum zs_rankbuf b, unsigned k)
{
	if (layout_span(lo, b) != ZS_TENSORS)
		return layout_len(lo, b);
	size_t n = 0;
	for (size_t i = 0; i < lo->ntensors; i++)
		n += lo->tensor[i].owner == k ? lo->tensor[i].n : 0;
	return n;
}

enum zs_state layout_state(enum zs_rankbuf b)
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

enum zs_span layout_span(const struct zs_layout *lo, enum zs_rankbuf b) { return lo->span[layout_state(b)]; }

size_t layout_len(const struct zs_layout *lo, enum zs_rankbuf b)
{
	if (layout_trained(b))
		return layout_span(lo, b) == ZS_SHARD ? lo->tshard : lo->ntrain;
	return layout_span(lo, b) == ZS_SHARD ? lo->shard : lo->nparams - lo->quant + lo->packed;
}

struct zs_slice layout_own(const struct zs_layout *lo, enum zs_rankbuf b, size_t u, unsigned k)
{
	if (lo->span[ZS_STATE_OPTIM] == ZS_TENSORS) {
		const struct zs_layout_tensor *t = &lo->tensor[u];
		return (struct zs_slice){t->off, t->owner == k ? t->n : 0, layout_span(lo, b) == ZS_TENSORS ? t->at : t->off};
	}
	size_t off, n, s, soff, base;
	if (lo->per_tensor) { /* u is a tensor: a unit's index may not reach it */
		const struct zs_layout_tensor *t = &lo->tensor[u];
		if (layout_trained(b))
			off = t->off, n = t->tn, s = t->ts, soff = t->tsoff, base = t->tbase;
		else
			off = t->off, n = t->n, s = t->s, soff = t->soff, base = t->packed ? lo->nparams + t->pat : t->off;
	} else if (layout_trained(b)) {
		const struct zs_layout_unit *un = &lo->unit[u];
		off = un->toff, n = un->tn, s = un->ts, soff = un->tsoff, base = un->tbase;
	} else {
		const struct zs_layout_unit *un = &lo->unit[u];
		off = un->off, n = un->n, s = un->s, soff = un->soff, base = un->off;
	}
	if (lo->span[ZS_STATE_OPTIM] == ZS_FULL && layout_span(lo, b) == ZS_FULL)
		return (struct zs_slice){off, n, base};
	size_t lo_k = (size_t)k * s;
	size_t count = lo_k >= n ? 0 : (n - lo_k < s ? n - lo_k : s);
	size_t at = layout_span(lo, b) == ZS_SHARD ? soff : base + lo_k;
	return (struct zs_slice){off + lo_k, count, at};
}
