/*
 * ds_coord — DeepSpeed's ZeRO-3 coordinator's rules (ds_coord.h).
 */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/ds_coord.h"
#include "util/util.h"

int ds_coord_in(const struct ds_coord *d, size_t t, size_t m)
{
	return t >= d->mod_first[m] && t < d->mod_first[m] + d->mod_n[m];
}

size_t ds_coord_leaf(const struct step_params *p, size_t l)
{
	for (size_t i = 1; i < p->nmodules; i++)
		if (p->module[i].layer == l && p->module[i].expert >= 0)
			return p->module[i - 1].layer == l ? i - 1 : p->nmodules;
	return p->nmodules;
}

uint64_t ds_coord_live(const struct ds_coord *d)
{
	uint64_t live = 0;
	for (size_t t = 0; t < d->ntensors; t++)
		live += d->avail[t] ? d->n[t] : 0;
	return live;
}

static void gather(struct ds_coord *d, size_t t)
{
	if (!d->avail[t]) {
		d->fetched[d->nfetched++] = t;
		d->avail[t] = 1;
		d->n_avail += (double)d->n[t]; /* __all_gather_params_, 473-484 */
		d->gathered += d->s[t];
	}
}

/* The blocks of one gathering call's params, fetched[from, nfetched)
 * (ds_coord.h, ds_coord_step). */
uint64_t ds_coord_block(uint64_t n, unsigned world, size_t ncall, int fetch, int offp)
{
	if (world == 1) /* a view of the partition (a device copy of it offloaded), or _allgather_params's */
		return !fetch && ncall == 1 ? n : offp ? n : 0;
	return (ncall == 1) == (fetch != 0) ? (n + world - 1) / world * world : n;
}

static void call_held(struct ds_coord *d, size_t from, int fetch)
{
	for (size_t i = from; i < d->nfetched; i++)
		d->held[d->fetched[i]] = ds_coord_block(d->n[d->fetched[i]], d->world, d->nfetched - from, fetch, d->offp);
}

/* fetch_sub_module (285-418) of trace entry j, the trace complete or not:
 * the module's params not whole in one call (314), the prefetch's in
 * another (412). */
static void fetch(struct ds_coord *d, const struct zs_config *c, size_t j, int complete)
{
	size_t m = d->trace[j], not_fetched = 0;
	d->nfetched = 0;
	for (size_t t = d->mod_first[m]; t < d->mod_first[m] + d->mod_n[m]; t++) {
		not_fetched += d->recent[t] < (double)j; /* 356-357 */
		gather(d, t);
	}
	call_held(d, 0, 1);
	size_t own = d->nfetched;
	if (!complete)
		return;
	for (size_t i = 0; i < not_fetched && d->head < d->nqueue; i++, d->head++) /* 358-362 */
		d->recent[d->qt[d->head]] = (double)d->qs[d->head];
	if (c->ds_prefetch_bucket <= 0) /* 380 */
		return;
	double room = fmin(c->ds_max_live - d->n_avail, c->ds_prefetch_bucket), numel = 0; /* 381-382 */
	int *chosen = zs_calloc(d->ntensors, sizeof *chosen);
	while (d->head < d->nqueue && numel < room) { /* 385-402 */
		size_t t = d->qt[d->head], step = d->qs[d->head++];
		int want = !d->avail[t] && !chosen[t];
		d->recent[t] = fmax(d->recent[t], (double)step);
		if (want) {
			chosen[t] = 1;
			numel += (double)d->n[t];
		}
	}
	for (size_t t = 0; t < d->ntensors; t++)
		if (chosen[t])
			gather(d, t);
	call_held(d, own, 1);
	free(chosen);
}

/* release_sub_module (422-441) after trace entry j (__step_id is j + 1):
 * every param of the module while the trace is recorded; once it is
 * complete, __params_to_release (524-555): not the persistent ones, not
 * one a prefetch marked for a later step, not one the next modules within
 * the reuse distance use. The tensors released into out (if not NULL),
 * how many. */
size_t ds_coord_release(struct ds_coord *d, size_t j, int complete, size_t *out)
{
	size_t m = d->trace[j], nout = 0;
	if (d->bwd[j] && d->no_grad_in[m]) /* no post-backward hook (ds_coord.h) */
		return 0;
	int *keep = zs_calloc(d->ntensors, sizeof *keep);
	if (complete) {
		for (size_t t = 0; t < d->ntensors; t++)
			keep[t] = d->persist[t] || d->recent[t] > (double)(j + 1);
		double traversed = 0;
		for (size_t k = j + 1; k < d->ntrace && traversed < DS_REUSE_DISTANCE; k++)
			for (size_t t = d->mod_first[d->trace[k]]; t < d->mod_first[d->trace[k]] + d->mod_n[d->trace[k]]; t++) {
				keep[t] = 1;
				traversed += (double)d->n[t];
			}
	}
	for (size_t t = d->mod_first[m]; t < d->mod_first[m] + d->mod_n[m]; t++)
		if (!keep[t] && d->avail[t]) { /* __release_param, 515-520 */
			d->avail[t] = 0;
			d->n_avail -= (double)d->n[t];
			if (out != NULL)
				out[nout++] = t;
		}
	free(keep);
	return nout;
}

/* The trace (__submodule_order as step 1 records it: every fetch's
 * module, parameter_offload.py 464-466 and 488-490) into trace, each
 * entry's pass into bwd; how many. Forward, the modules in order; backward
 * in reverse, where a checkpointed block (group >= 0) first runs its
 * forward again, module by module (its pre-forward hooks fetch, its
 * post-forward hooks release, 290-335), then its backward; none for a
 * module that runs no backward (no_grad_in 2). */
static size_t build_trace(size_t nmod, const long *group, const int *no_grad_in, size_t *trace, int *bwd)
{
	size_t nt = 0;
	for (size_t m = 0; m < nmod; m++) {
		trace[nt] = m;
		bwd[nt++] = 0;
	}
	for (size_t m = nmod; m-- > 0;) {
		if (group != NULL && group[m] >= 0 && (m + 1 == nmod || group[m + 1] != group[m])) {
			size_t f = m;
			while (f > 0 && group[f - 1] == group[m])
				f--;
			for (size_t k = f; k <= m; k++) {
				trace[nt] = k;
				bwd[nt++] = 0;
			}
		}
		if (no_grad_in[m] == 2) /* its output needs no grad: no backward (ds_coord.h) */
			continue;
		trace[nt] = m;
		bwd[nt++] = 1;
	}
	return nt;
}

/* The tensors n[0..nt) in modules [mod_first, + mod_n), the trace and
 * its parameter queue (record_parameters, 210-219: each entry's params in
 * ds_id order, with the entry's step). */
static void setup(struct ds_coord *d, const uint64_t *n, size_t nt, const size_t *mod_first, const size_t *mod_n,
                  size_t nmod, const long *group, const int *no_grad_in, const struct zs_config *c, unsigned world)
{
	memset(d, 0, sizeof *d);
	d->ntensors = nt;
	d->n = zs_calloc(nt, sizeof *d->n);
	d->s = zs_calloc(nt, sizeof *d->s);
	d->held = zs_calloc(nt, sizeof *d->held);
	d->world = world;
	d->offp = c->offload == ZS_OFFLOAD_PARAMS;
	d->persist = zs_calloc(nt, sizeof *d->persist);
	d->avail = zs_calloc(nt, sizeof *d->avail);
	d->recent = zs_calloc(nt, sizeof *d->recent);
	d->fetched = zs_calloc(nt, sizeof *d->fetched);
	d->mod_first = zs_calloc(nmod, sizeof *d->mod_first);
	d->mod_n = zs_calloc(nmod, sizeof *d->mod_n);
	d->no_grad_in = zs_calloc(nmod + 1, sizeof *d->no_grad_in);
	d->trace = zs_calloc(3 * nmod, sizeof *d->trace); /* at most: forward, a recompute, backward */
	d->bwd = zs_calloc(3 * nmod, sizeof *d->bwd);
	for (size_t t = 0; t < nt; t++) {
		d->n[t] = n[t];
		d->s[t] = (n[t] + world - 1) / world;
		d->persist[t] = (double)n[t] <= c->ds_persist; /* partition_parameters.py 1130 */
	}
	d->nmodules = nmod;
	memcpy(d->mod_first, mod_first, nmod * sizeof *mod_first);
	memcpy(d->mod_n, mod_n, nmod * sizeof *mod_n);
	if (no_grad_in != NULL)
		memcpy(d->no_grad_in, no_grad_in, nmod * sizeof *no_grad_in);
	d->ntrace = build_trace(nmod, group, d->no_grad_in, d->trace, d->bwd);
	size_t nq = 0;
	for (size_t j = 0; j < d->ntrace; j++)
		nq += mod_n[d->trace[j]];
	d->qt = zs_calloc(nq + 1, sizeof *d->qt);
	d->qs = zs_calloc(nq + 1, sizeof *d->qs);
	for (size_t j = 0; j < d->ntrace; j++)
		for (size_t t = mod_first[d->trace[j]]; t < mod_first[d->trace[j]] + mod_n[d->trace[j]]; t++) {
			d->qt[d->nqueue] = t;
			d->qs[d->nqueue++] = j;
		}
}

void ds_coord_grad_flow_lora(size_t nmod, const uint64_t *trained, int input_grad, int *no_grad_in,
                             const int *adapter, const size_t *base)
{
	int flow = 0; /* the running output needs grad */
	int *in = zs_calloc(nmod + 1, sizeof *in); /* whether module m's input needs grad */
	for (size_t m = 0; m < nmod; m++) {
		int table = no_grad_in[m], kind = adapter != NULL ? adapter[m] : 0;
		in[m] = kind == 1 ? in[base[m]] : kind == 2 ? in[m - 1] || trained[m - 1] > 0 : flow && !table;
		no_grad_in[m] = in[m] ? 0 : trained[m] > 0 ? 1 : 2;
		flow |= trained[m] > 0 || (table && input_grad);
	}
	free(in);
}

void ds_coord_grad_flow(size_t nmod, const uint64_t *trained, int input_grad, int *no_grad_in)
{
	ds_coord_grad_flow_lora(nmod, trained, input_grad, no_grad_in, NULL, NULL);
}

void ds_coord_free(struct ds_coord *d)
{
	free(d->n);
	free(d->s);
	free(d->held);
	free(d->persist);
	free(d->avail);
	free(d->recent);
	free(d->fetched);
	free(d->mod_first);
	free(d->mod_n);
	free(d->no_grad_in);
	free(d->trace);
	free(d->bwd);
	free(d->qt);
	free(d->qs);
	free(d);
}

struct ds_coord *ds_coord_new(const uint64_t *n, size_t nt, const size_t *mod_first, const size_t *mod_n,
                              size_t nmod, const struct zs_config *c, unsigned world)
{
	return ds_coord_new_recompute(n, nt, mod_first, mod_n, nmod, NULL, NULL, c, world);
}

struct ds_coord *ds_coord_new_recompute(const uint64_t *n, size_t nt, const size_t *mod_first, const size_t *mod_n,
                                        size_t nmod, const long *group, const int *no_grad_in,
                                        const struct zs_config *c, unsigned world)
{
	struct ds_coord *d = zs_malloc(sizeof *d);
	setup(d, n, nt, mod_first, mod_n, nmod, group, no_grad_in, c, world);
	return d;
}

size_t ds_coord_fetch(struct ds_coord *d, const struct zs_config *c, size_t j, int complete,
                       const size_t **fetched)
{
	fetch(d, c, j, complete);
	*fetched = d->fetched;
	return d->nfetched;
}

/* A step's start: step 1 records the trace (reset_step, 228-262) with
 * nothing whole (the model was partitioned when it was built); from step
 * 2 the trace is complete, and what is whole is what the last step()
 * left: release_and_reset_all (444-457) dropped everything and zeroed the
 * count, then _post_step gathered the persistent params (stage3.py
 * 2054-2056) outside it. */
void ds_coord_begin_step(struct ds_coord *d, unsigned step)
{
	d->head = 0;
	d->n_avail = 0;
	for (size_t t = 0; t < d->ntensors; t++) {
		d->avail[t] = step > 1 && d->persist[t];
		d->recent[t] = -1e10;
	}
	d->gathered = 0;
}

void ds_coord_begin_micro(struct ds_coord *d)
{
	d->head = 0;
	for (size_t t = 0; t < d->ntensors; t++)
		d->recent[t] = -1e10;
	d->gathered = 0;
}

/* step(): everything released (the persistent too), then _post_step
 * gathers the persistent params; their tensors into out, how many. */
size_t ds_coord_step(struct ds_coord *d, size_t *released, size_t *nreleased, size_t *out)
{
	size_t n = 0;
	*nreleased = 0;
	for (size_t t = 0; t < d->ntensors; t++) {
		if (d->avail[t])
			released[(*nreleased)++] = t;
		d->avail[t] = 0;
	}
	d->nfetched = 0;
	for (size_t t = 0; t < d->ntensors; t++)
		if (d->persist[t]) {
			gather(d, t);
			out[n++] = t;
		}
	call_held(d, 0, 0);
	d->flat = n == 1 ? d->s[out[0]] * d->world : 0; /* _allgather_params's, 1899-1902, at any N */
	return n;
}

uint64_t ds_coord_starved(const struct step_params *p, const uint64_t *counts, size_t E)
{
	uint64_t n = 0;
	for (size_t t = 0; t < p->ntensors; t++) {
		const struct step_module *md = &p->module[p->tensor[t].module];
		if (md->expert >= 0 && counts[(size_t)md->index * E + (size_t)md->expert] == 0 &&
		    step_trained(p, t))
			n += p->tensor[t].numel;
	}
	return n;
}

int ds_coord_starved_built(const struct zs_config *c, enum zs_scheme scheme, unsigned world)
{
	return c->framework == ZS_FW_DEEPSPEED && (scheme == ZS_ZERO1 || scheme == ZS_ZERO2) && world == 1 &&
	       c->grad_accum <= 1 && c->offload == ZS_OFFLOAD_NONE;
}

size_t ds_sub_groups(const uint64_t *s, size_t nt, double size, size_t *end)
{
	uint64_t total = 0, run = 0;
	size_t n = 0, last = nt;
	for (size_t t = 0; t < nt; t++) {
		total += s[t];
		last = s[t] > 0 ? t : last;
	}
	if (last == nt) /* nothing trains: no param group (stage3.py 496-497) */
		return 0;
	for (size_t t = 0; t < nt; t++) {
		run += s[t];
		if (s[t] > 0 && (size >= (double)total ? t == last : ((double)run >= size || t == last))) {
			end[n++] = t + 1;
			run = 0;
		}
	}
	end[n - 1] = nt;
	return n;
}
