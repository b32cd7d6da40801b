/*
 * ag_fsdp — FullyShardedDataParallel over the PyTorch step (util/ag_fsdp.h).
 *
 * Written from PyTorch 1.13's FSDP (Debian 12's python3-torch,
 * /usr/lib/python3/dist-packages/torch/distributed/fsdp/):
 *   flat_param.py      flatten_params (torch.cat of the unit's parameters,
 *                      388), _get_shard (chunk(world_size), clone, F.pad
 *                      to the first chunk's size, 543-562), unshard ->
 *                      _alloc_padded_unsharded_flat_param (_alloc_storage
 *                      of _padded_unsharded_size, 687-699) and
 *                      _all_gather_flat_param (dist._all_gather_base,
 *                      722-746), reshard -> _free_unsharded_flat_param
 *                      (913-927), _get_unflat_views (torch.split of the
 *                      flat parameter, .view(shape): the parameters'
 *                      gradients meet in SplitWithSizesBackward, 944-971),
 *                      prepare_gradient (the sharded .grad moved aside,
 *                      775-835);
 *   fully_sharded_data_parallel.py  forward (record_function, the root
 *                      kept unsharded after forward, 2697-2727), backward
 *                      _prefetch default None (980), _post_backward_hook
 *                      (record_function, _reshard, F.pad of the flattened
 *                      gradient, torch.zeros_like(chunks[0]), the
 *                      communication hook, _saved_grad_shard += output or
 *                      = output, 3191-3355), _should_free_unsharded_flat_param
 *                      (3386-3390);
 *   torch/distributed/algorithms/_comm_hooks/default_hooks.py
 *                      reduce_scatter_hook (grad.div_(predivide) before,
 *                      output.div_(postdivide) after, each only when > 1)
 * and checked against 1.13's allocator by tests/hf_torch.sh
 * (hf_torch.py --fsdp 2: the profiler's trace of each allocation).
 * PyTorch 2.6's FSDP1 (Debian 13's python3-torch, the same folder) is
 * this list but for the reduce-scatter's input, padded into a new tensor
 * only where N shards exceed the unit's elements, and its empty_like
 * output (_runtime_utils.py _get_reduce_scatter_tensors, 880-892); its
 * record_function allocates nothing on the CPU (util/ag_pass.c); checked
 * by tests/hf_torch.sh torch26 and tests/ft_fsdp.sh torch26
 * (docs/schedule.md, "Under PyTorch 2.6": every difference, cited).
 */
#include "util/ag_fsdp.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/ag_pass.h"
#include "util/util.h"

#define NO AG_NONE

struct unit {
	long long block;         /* its block, -1 for the root, -2 for an adapter (LoRA: PEFT's policy) */
	long long parent;        /* an adapter's block (its unit nests in that block's), else -1 */
	char name[64];           /* the unit's name in the step's marks ("h.0", "layers.1", "lora.0.A") */
	uint32_t *params;        /* its parameter storages (the model's), in flattening order */
	uint64_t *off;           /* each one's first element in the flat parameter */
	uint32_t *held;          /* backward: each one's gradient, held by the split until the cat (NO: not in) */
	unsigned char *pending;  /* backward: the plain loop freed that gradient already (it goes at the cat) */
	size_t nparams, ngot;
	size_t nwant;            /* the gradients this micro-step's backward brings (units_want): nparams
	                          * but for a mixture's expert that got no token (its view unused) */
	uint64_t numel, padded, shard;
	enum ag_dtype dt;        /* its flat parameter's dtype, its parameters' (FSDP flattens one dtype: fp32, or
	                          * bf16 where the model is loaded in bf16, --load-dtype bf16) */
	uint32_t gathered;       /* _full_param_padded: the padded unsharded flat parameter */
	uint32_t sh, grad, m, v, step; /* the sharded flat parameter, its .grad (NO while None), Adam's */
	uint32_t ugrad;          /* under no_sync(): the unsharded flat gradient kept across micro-steps (NO: none) */
	int done;                /* its post-backward hook is written */
	int frozen;              /* its flat parameter requires no grad (--freeze, LoRA's base): no
	                          * post-backward hook, no gradient, no Adam state */
	int live;                /* its gathered flat parameter is allocated */
	int inuse;               /* the flat parameter's data is that gathered copy (unshard), not the
	                          * shard (a reshard, freeing or not: flat_param.py 884-892, 929-938) */
	int mixed_dt;            /* its parameters are not of one dtype (refused) */
	int ckpt;                /* checkpointed (--recompute full): its pre-backward hook runs before the rerun */
	/* --fsdp-orig-params on (use_orig_params=True): */
	unsigned char *stepped;  /* per slot: the optimizer steps that parameter (trained, not orig_frozen) */
	uint32_t *om, *ov, *ost; /* per rank r and slot j, [r * nparams + j]: Adam's state of the parameter's
	                          * piece of rank r's shard (NO: no piece there, or not stepped) */
	int reset;               /* every original .grad None (set_to_none): the sharded flat gradient goes at
	                          * the root's next pre-forward */
	uint32_t regrad;         /* the sharded flat gradient that went there: the next reduce-scatter's output
	                          * is made as it (one storage a step, so the steady list runs again) */
	unsigned char *bare;     /* per rank: its shard holds no piece the optimizer steps (every original
	                          * .grad of it None after a reduce-scatter: bare_free) */
	unsigned char *gone;     /* per rank: a bare rank's sharded gradient let go at a forward */
	int synced;              /* its last post-backward reduce-scattered (the original .grads are views of the
	                          * sharded gradient; under no_sync() of the unsharded one, none None) */
};

/* A slot of a unit, in model.parameters()' order (the optimizer's under
 * use_orig_params: the original parameters; key: param_keys'). */
struct slot { uint32_t t; size_t i, j; uint64_t key; };

double ag_fsdp_predivide(unsigned world)
{
	double f = 1;
	while (world % (unsigned)f == 0 && (double)world / f > f)
		f *= 2;
	return f;
}

static uint32_t sto(const struct ag_step *s, uint32_t t) { return s->tensor[t].storage; }



/* The unit's unshard: the padded unsharded flat parameter allocated and
 * all-gathered from every rank's shard (after the record_function of
 * FSDP's forward or pre-backward hook), unless it is still gathered
 * (SHARD_GRAD_OP kept it: 1.13's FlatParamHandle.unshard, flat_param.py
 * 656-675, only switches to it when needs_unshard() is False). */
static void unshard_gather(struct ag_pass *p, struct unit *u, enum zs_phase ph)
{
	u->inuse = 1;
	if (u->live)
		return;
	agp_alloc(p, u->gathered, ph);
	agp_op(p, ph, AG_OP_ALL_GATHER, u->sh, u->gathered);
	u->live = 1;
}

static void unshard(struct ag_pass *p, const struct ag_options *o, struct unit *u, enum zs_phase ph)
{
	agp_record_function(p, o, ph);
	unshard_gather(p, u, ph);
}

/* BACKWARD_PRE's prefetch (2.6): a pre-backward hook, after its own
 * unshard, gathers the unit whose forward ended before its own
 * (_prefetch_handle over the post-forward order, _runtime_utils.py
 * 680-683, 1198-1225; _exec_order_utils.py 89-107,
 * get_handle_to_backward_prefetch): the root's the last block, a block's
 * the block before, block 0's none (the root is gathered). */
static void prefetch(struct ag_pass *p, const struct ag_options *o, struct unit *u)
{
	if (!u->live)
		unshard(p, o, u, ZS_PH_BACKWARD);
}

/* A block unit's _pre_backward_hook: its record_function and unshard
 * (none when prefetched or, SHARD_GRAD_OP, kept since its forward), then
 * BACKWARD_PRE's prefetch of the block before (u: all units). */
static void pre_backward(struct ag_pass *p, const struct ag_options *o, struct unit *u, struct unit *v)
{
	unshard(p, o, v, ZS_PH_BACKWARD);
	if (o->fsdp_prefetch && v->block > 0)
		prefetch(p, o, &u[v->block - 1]);
}

/* use_orig_params, at the root's pre-forward: a bare rank (its shard
 * holds no piece the optimizer steps) whose original .grads are all None
 * lets the sharded flat gradient go, under zero_grad zeros and between
 * micro-steps too (_reset_flat_param_grad_info_if_needed, _flat_param.py
 * 2.6.0 2417-2441, from _root_pre_forward, _runtime_utils.py 584): after
 * a reduce-scatter each original .grad is a view of the shard's piece, None
 * for a frozen one or one with no piece there (_use_sharded_grad_views
 * 2159-2216); after a no_sync() backward a view of the unsharded gradient,
 * every one (_use_unsharded_grad_views 2018-2060), so none None. */
static void bare_free(struct ag_pass *p, struct unit *u, unsigned world)
{
	if (u->grad == NO || !u->synced)
		return;
	for (unsigned r = 0; r < world; r++)
		if (u->bare[r] && !u->gone[r]) {
			size_t from = p->nev;
			agp_free(p, u->grad, ZS_PH_FORWARD);
			agp_rank_only(p, from, r);
			u->gone[r] = 1;
		}
}

/* The unit's reshard: its gathered flat parameter freed. */
static void reshard(struct ag_pass *p, struct unit *u, enum zs_phase ph)
{
	agp_free(p, u->gathered, ph);
	u->live = u->inuse = 0;
}

/* A unit's post-forward reshard: FULL_SHARD frees its gathered copy,
 * SHARD_GRAD_OP only switches its flat parameter to the shard (1.13's
 * forward: free only for a non-root FULL_SHARD unit, 2710-2713). */
static void post_forward(struct ag_pass *p, struct unit *u, int sgo)
{
	if (sgo)
		u->inuse = 0;
	else
		reshard(p, u, ZS_PH_FORWARD);
}

/* Once the unit's last gradient is in: the split's cat, the flat
 * parameter's AccumulateGrad and the post-backward hook. Under no_sync()
 * (sync 0) the hook reshards and returns: the unsharded flat gradient
 * stays the flat parameter's .grad (fully_sharded_data_parallel.py 3243,
 * _finalize_params 3479) and the next micro-step's AccumulateGrad adds
 * into it (prepare_gradient keeps a .grad of the unsharded size,
 * flat_param.py 786-790); the engine holds the cat, its input, through
 * the post hooks (engine.cpp call_function's inputs), freed after. */
static void post_backward(struct ag_pass *p, const struct ag_options *o, struct unit *u, unsigned world,
                          double pre, int sync, int sgo)
{
	const enum zs_phase ph = ZS_PH_BACKWARD;
	/* a view no gradient reached (a mixture's expert that got no token:
	 * util/autograd.c's moe_fwd runs the hit experts alone) is undefined
	 * in the split's backward, which makes it at::zeros of its split size
	 * before the cat and lets it go when it returns (1.13's
	 * split_with_sizes_backward, FunctionsManual.cpp: grads_all_defined) */
	uint32_t *zeros = NULL;
	for (size_t j = 0; j < u->nparams; j++)
		if (u->held[j] == NO) {
			if (zeros == NULL)
				zeros = zs_malloc(u->nparams * sizeof *zeros);
			/* its split size: its slot of the flat parameter */
			uint64_t n = (j + 1 < u->nparams ? u->off[j + 1] : u->numel) - u->off[j];
			zeros[j] = agp_storage(p, "zeros (SplitWithSizesBackward: an unused view's gradient)", u->dt, n, 0,
			                       ZS_CAT_FULL_GRADS);
			agp_alloc(p, zeros[j], ph);
			agp_op(p, ph, AG_OP_FILL, NO, zeros[j])->arg[0] = 0;
		}
	uint32_t cat = agp_storage(p, "cat (SplitWithSizesBackward: the unsharded flat gradient)", u->dt, u->numel, 0,
	                           ZS_CAT_FULL_GRADS);
	agp_alloc(p, cat, ph);
	for (size_t j = 0; j < u->nparams; j++) {
		uint32_t g = u->held[j] != NO ? u->held[j] : zeros[j];
		agp_op(p, ph, AG_OP_COPY, g, agp_view_shaped(p, cat, g, u->off[j]));
	}
	for (size_t j = 0; zeros != NULL && j < u->nparams; j++)
		if (u->held[j] == NO)
			agp_free(p, zeros[j], ph);
	free(zeros);
	for (size_t j = 0; j < u->nparams; j++)
		if (u->pending[j])
			agp_free(p, sto(p->s, u->held[j]), ph);
	uint32_t acc = cat; /* the flat parameter's .grad: the cat itself (stolen) or the kept one */
	if (u->ugrad != NO) { /* AccumulateGrad: .grad += new, in place */
		struct ag_event *e = agp_op(p, ph, AG_OP_ADD_, u->ugrad, u->ugrad);
		e->in[1] = cat;
		e->arg[0] = 1;
		acc = u->ugrad;
	}
	agp_record_function(p, o, ph);
	/* _reshard: FULL_SHARD frees it, in no_sync() too; SHARD_GRAD_OP only
	 * when it syncs (_should_free_unsharded_flat_param, 3386-3390): under
	 * no_sync() its gathered copy stays for the next micro-step */
	if (sync || !sgo)
		reshard(p, u, ph);
	if (!sync) {
		if (u->ugrad == NO)
			u->ugrad = cat;
		else
			agp_free(p, cat, ph);
		u->done = 1;
		u->synced = 0;
		return;
	}
	/* 1.13 pads always, into a new tensor; 2.x only where the unit's
	 * elements fall short of N shards, and its output is empty_like,
	 * not zeros_like (_runtime_utils.py _get_reduce_scatter_tensors) */
	const int v113 = o->version == ZS_TORCH_1_13;
	uint32_t pad = acc;
	if (v113 || u->padded > u->numel) {
		pad = agp_storage(p, "constant_pad_nd (F.pad: the padded flat gradient)", u->dt, u->padded, 0,
		                  ZS_CAT_BUCKETS);
		agp_alloc(p, pad, ph);
		agp_op(p, ph, AG_OP_FILL, NO, pad)->arg[0] = 0;
		agp_op(p, ph, AG_OP_COPY, acc, agp_view_shaped(p, pad, acc, 0));
	}
	/* use_orig_params: a bare rank let its sharded gradient go at the
	 * forward (bare_free) and takes the output as it, the others add it
	 * into theirs; a collective writes one storage on every rank, so each
	 * other rank moves its kept gradient aside first (aside: its bytes
	 * the output's, live as long) and adds it into the output, that
	 * unit's gradient still (the sum's operands swapped: the same sum) */
	uint32_t aside = NO;
	for (unsigned r = 0; r < world && u->gone != NULL && u->grad != NO; r++)
		if (u->gone[r]) {
			aside = agp_storage(p, "empty_like (the reduce-scatter's output shard: the kept gradient moved aside)",
			                    u->dt, u->shard, 0, ZS_CAT_BUCKETS);
			for (unsigned k = 0; k < world; k++) {
				size_t from = p->nev;
				if (u->gone[k])
					continue;
				agp_alloc(p, aside, ph);
				agp_op(p, ph, AG_OP_COPY, u->grad, aside);
				agp_free(p, u->grad, ph);
				agp_rank_only(p, from, k);
			}
			u->regrad = u->grad;
			u->grad = NO;
			break;
		}
	uint32_t out = u->grad == NO && u->regrad != NO
	                       ? u->regrad
	                       : agp_storage(p, v113 ? "zeros_like (the reduce-scatter's output shard)"
	                                             : "empty_like (the reduce-scatter's output shard)",
	                                     u->dt, u->shard, 0, ZS_CAT_BUCKETS);
	u->regrad = NO;
	agp_alloc(p, out, ph);
	if (v113)
		agp_op(p, ph, AG_OP_FILL, NO, out)->arg[0] = 0;
	if (pre > 1)
		agp_scalar_inplace(p, AG_OP_DIV_SCALAR_, pad, pre, ph);
	agp_op(p, ph, AG_OP_REDUCE_SCATTER_SUM, pad, out);
	if ((double)world / pre > 1)
		agp_scalar_inplace(p, AG_OP_DIV_SCALAR_, out, (double)world / pre, ph);
	if (u->grad != NO) { /* _saved_grad_shard += output */
		struct ag_event *e = agp_op(p, ph, AG_OP_ADD_, u->grad, u->grad);
		e->in[1] = out;
		e->arg[0] = 1;
	} else { /* _saved_grad_shard = output: the shard's .grad */
		u->grad = out;
		struct ag_tensor *g = &p->s->tensor[out];
		g->what = "grad (FSDP's sharded flat gradient)";
		g->role = AG_ROLE_GRAD;
		g->cat = ZS_CAT_GRAD32;
	}
	for (unsigned k = 0; k < world && aside != NO; k++) {
		size_t from = p->nev;
		if (u->gone[k])
			continue;
		struct ag_event *e = agp_op(p, ph, AG_OP_ADD_, out, out);
		e->in[1] = aside;
		e->arg[0] = 1;
		agp_free(p, aside, ph);
		agp_rank_only(p, from, k);
	}
	for (unsigned k = 0; k < world && u->gone != NULL; k++)
		u->gone[k] = 0;
	u->synced = 1;
	if (pad != acc)
		agp_free(p, pad, ph);
	if (u->grad != out)
		agp_free(p, out, ph);
	if (acc != cat) /* the hook's locals let the accumulated .grad go, then the engine the cat */
		agp_free(p, acc, ph);
	agp_free(p, cat, ph);
	u->ugrad = NO;
	u->done = 1;
}

/* optimizer.zero_grad() over the flat parameters: each shard's .grad
 * zeroed (set_to_none False) or dropped, in the optimizer's order. */
static void zero_grad(struct ag_pass *p, const struct ag_options *o, struct unit *u, const size_t *order, size_t nu,
                      enum zs_phase ph)
{
	for (size_t k = 0; k < nu; k++) {
		struct unit *v = &u[order[k]];
		if (v->grad == NO)
			continue;
		if (o->zero_grad == ZS_ZERO_GRAD_ZEROS) {
			/* (use_orig_params: each original .grad, a view of it, zeroed;
			 * a frozen one's slot is zeroed at the next unshard,
			 * _writeback_orig_params 2219, 2317-2321, 2413: the whole
			 * shard's the same bytes) */
			agp_op(p, ph, AG_OP_ZERO_, v->grad, v->grad);
		} else if (o->fsdp_orig_params) {
			/* the original parameters' .grads set to None, views of the
			 * sharded flat gradient, which stays the flat parameter's
			 * .grad until the root's next pre-forward (fsdp_list) */
			v->reset = 1;
		} else {
			agp_free(p, v->grad, ph);
			v->grad = NO;
		}
	}
}

/* use_orig_params: the piece of slot j of u in rank r's shard (its
 * _shard_param_infos' offset_in_shard and numel_in_shard, _flat_param.py
 * 2.6.0 _get_shard_metadata, 1001): 1 with *at and *n, or 0 where none. */
static int piece(const struct unit *u, size_t j, unsigned r, uint64_t *at, uint64_t *n)
{
	uint64_t lo = (uint64_t)r * u->shard, hi = lo + u->shard;
	uint64_t a = u->off[j], b = j + 1 < u->nparams ? u->off[j + 1] : u->numel;
	uint64_t s = a > lo ? a : lo, e = b < hi ? b : hi;
	if (s >= e)
		return 0;
	*at = s - lo;
	*n = e - s;
	return 1;
}

static int slot_cmp(const void *a, const void *b)
{
	const struct slot *x = a, *y = b;
	return (x->key > y->key) - (x->key < y->key);
}

/* The slots the optimizer steps (*n of them), in model.parameters()'
 * order (param_keys'). */
static struct slot *orig_slots(const struct unit *u, size_t nu, const uint64_t *key, size_t *n)
{
	size_t k = 0;
	for (size_t i = 0; i < nu; i++)
		for (size_t j = 0; j < u[i].nparams; j++)
			k += u[i].stepped[j];
	struct slot *sl = zs_malloc((k ? k : 1) * sizeof *sl);
	k = 0;
	for (size_t i = 0; i < nu; i++)
		for (size_t j = 0; j < u[i].nparams; j++)
			if (u[i].stepped[j])
				sl[k++] = (struct slot){ u[i].params[j], i, j, key[u[i].params[j]] };
	qsort(sl, k, sizeof *sl, slot_cmp);
	*n = k;
	return sl;
}

/* use_orig_params: Adam over each rank's pieces of the original
 * parameters it steps (the training script's optimizer over
 * model.parameters()' requires_grad ones: views of the rank's shard,
 * _use_sharded_views, _flat_param.py 2105-2156; a parameter with no
 * piece there is a size-0 tensor whose .grad is None, which Adam skips;
 * each one's .grad a view of the sharded flat gradient,
 * _use_sharded_grad_views 2159-2216, None for a frozen one): one list a
 * rank (only_rank), the phase's mark once. first: the first step()'s,
 * its state made there. */
static void orig_adam(struct ag_pass *p, const struct ag_options *o, struct unit *u, const struct slot *sl,
                      size_t ns, unsigned world, int first)
{
	struct ag_param_state *ps = zs_malloc((ns ? ns : 1) * sizeof *ps);
	for (unsigned r = 0; r < world; r++) {
		size_t n = 0, from = p->nev;
		for (size_t k = 0; k < ns; k++) {
			struct unit *v = &u[sl[k].i];
			size_t j = sl[k].j, x = (size_t)r * v->nparams + j;
			uint64_t at, len;
			if (v->om[x] == NO || !piece(v, j, r, &at, &len))
				continue;
			ps[n++] = (struct ag_param_state){ agp_view1(p, v->sh, at, len), agp_view1(p, v->grad, at, len),
			                                   v->om[x], v->ov[x], v->ost[x] };
		}
		(first ? ag_optimizer_first_events : ag_optimizer_events)(p->s, o, ps, n, &p->ev, &p->nev, &p->cap);
		p->cap_tensors = p->s->ntensors; /* it grew the tensors by its own */
		for (size_t i = from; i < p->nev; i++) {
			if (p->ev[i].kind == AG_EV_MARK && r > 0) { /* the phase's mark: rank 0's list carries it */
				memmove(&p->ev[i], &p->ev[i + 1], (p->nev - i - 1) * sizeof *p->ev);
				p->nev--;
				i--;
			} else if (p->ev[i].kind != AG_EV_MARK) {
				p->ev[i].only_rank = r + 1;
			}
		}
	}
	free(ps);
}

static void units_free(struct unit *u, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(u[i].stepped);
		free(u[i].bare);
		free(u[i].gone);
		free(u[i].om);
		free(u[i].ov);
		free(u[i].ost);
		free(u[i].params);
		free(u[i].off);
		free(u[i].held);
		free(u[i].pending);
	}
	free(u);
}

static int is_label(const struct ag_event *e, const char *l)
{
	return e->kind == AG_EV_MARK && e->label != NULL && strcmp(e->label, l) == 0;
}

/* Whether e is the mark `l` or a micro-step's `l@k` (--grad-accum:
 * util/autograd.c names them so). */
static int is_label_k(const struct ag_event *e, const char *l)
{
	size_t n = strlen(l);
	return e->kind == AG_EV_MARK && e->label != NULL && strncmp(e->label, l, n) == 0 &&
	       (e->label[n] == '\0' || e->label[n] == '@');
}

/* Whether op e writes the plain .grad (is_pg) AccumulateGrad made of the
 * incoming gradient: its sum into one (ADD_) or its clone
 * (clone_obey_contract's COPY, of the .grad's dtype). Not autocast's
 * ToCopyBackward (a 16-bit gradient's fp32 copy, util/autograd.c's
 * ac_grad_back): AccumulateGrad may take that new tensor as it came. */
static int into_pg(const struct ag_step *s, const struct ag_event *e, const unsigned char *is_pg)
{
	return e->out[0] != NO && is_pg[sto(s, e->out[0])] &&
	       (e->op != AG_OP_COPY || s->tensor[e->in[0]].dtype == s->tensor[e->out[0]].dtype);
}

/* The block unit whose mark "KIND:NAME:WHICH" e is, or NULL. */
static struct unit *block_mark(const struct ag_event *e, struct unit *u, size_t nu, const char *kind,
                               const char *which)
{
	if (e->kind != AG_EV_MARK || e->label == NULL)
		return NULL;
	for (size_t i = 0; i < nu; i++) {
		char want[96];
		snprintf(want, sizeof want, "%s:%s:%s", kind, u[i].name, which);
		if (u[i].block >= 0 && is_label_k(e, want))
			return &u[i];
	}
	return NULL;
}


/* QLoRA under FSDP (--quant-base nf4; docs/finetune.md, "QLoRA under
 * FSDP"): a 4-bit layer's packed codes, fp32 elements (quant_storage), are
 * its weight to FSDP -- the Params4bit in the weight's place, flattened
 * into the block's unit with the rest (the quant state, attributes, stays
 * whole on every rank) -- and the weight's fp32 form, freed once
 * quantized in set-up, is none. */
static int is_q4_codes(const struct ag_tensor *x)
{
	return x->role == AG_ROLE_BUFFER && x->what != NULL && strcmp(x->what, AG_Q4_CODES) == 0;
}

/* A storage FSDP flattens: a parameter (but a quantized weight's fp32
 * form) or a 4-bit layer's codes. */
static int flattened(const struct ag_step *s, uint32_t t)
{
	const struct ag_tensor *x = &s->tensor[t];
	return x->storage == t && (x->role == AG_ROLE_PARAM ? !x->q4 : is_q4_codes(x));
}

/* Each parameter storage's place in model.parameters()' order, as a
 * key to sort by: the base model's storages in ag_step_build's order
 * (that one), each LoRA adapter (made after the whole model) right after
 * its base layer's last parameter, lora_A then lora_B (LoraLinear
 * registers base_layer, then lora_A, lora_B: tests/ft_torch.py). The
 * caller frees the array. */
static uint64_t *param_keys(const struct ag_step *s)
{
	uint64_t *key = zs_calloc(s->ntensors ? s->ntensors : 1, sizeof *key);
	for (uint32_t t = 0; t < s->ntensors; t++) {
		const struct ag_tensor *x = &s->tensor[t];
		if (x->storage != t || x->role != AG_ROLE_PARAM)
			continue;
		key[t] = (uint64_t)t << 2;
		if (x->param >= 0 || x->adapter == 0)
			continue;
		for (uint32_t w = 0; w < s->ntensors; w++) /* its base layer's last parameter */
			if (s->tensor[w].storage == w && s->tensor[w].role == AG_ROLE_PARAM && s->tensor[w].param >= 0 &&
			    s->tensor[w].module == x->module)
				key[t] = ((uint64_t)w << 2) + 1 + ((x->adapter - 1) & 1);
	}
	return key;
}

/* The units: one per block (their order), then the root (*iroot), then,
 * with LoRA, one per adapter (PEFT's fsdp_auto_wrap_policy: each leaf
 * whose weight requires grad, lora_A and lora_B, a unit nested in its
 * block's); each parameter storage of s in the unit of its module's
 * block, an adapter's (a parameter of no step_params tensor: lora_A, then
 * lora_B, each adapted layer in turn) its own. trained: agp_trained_params'. */
static struct unit *make_units(const struct ag_step *s, const struct step_params *p, const unsigned char *trained,
                               int orig, size_t *nu, size_t *iroot)
{
	long long nblocks = 0;
	for (size_t i = 0; i < p->nmodules; i++)
		if (p->module[i].index + 1 > nblocks)
			nblocks = p->module[i].index + 1;
	/* a frozen adapter (--freeze with --lora-r) is no unit of its own: the
	 * lambda policy asks module.weight.requires_grad when FSDP wraps
	 * (peft/utils/other.py v0.20.0 1282-1287), after the freezing, so its
	 * lora_A or lora_B is flattened into its block's unit (the root's, for
	 * an adapter outside the blocks) with the frozen base (here after the
	 * block's base parameters, in PyTorch beside its base_layer: a frozen
	 * unit's bytes are its numel's alone, no gradient views its slots) */
	size_t nadapt = 0;
	for (uint32_t t = 0; t < s->ntensors && !orig; t++)
		if (s->tensor[t].storage == t && s->tensor[t].role == AG_ROLE_PARAM && s->tensor[t].param < 0 && trained[t])
			nadapt++;
	size_t n = (size_t)nblocks + 1 + nadapt;
	struct unit *u = zs_calloc(n, sizeof *u);
	for (size_t i = 0; i < n; i++) {
		u[i].block = i < (size_t)nblocks ? (long long)i : i == (size_t)nblocks ? -1 : -2;
		u[i].parent = -1;
		u[i].grad = u[i].ugrad = u[i].regrad = NO;
		u[i].frozen = 1;
	}
	for (size_t i = 0; i < p->nmodules; i++) {
		const struct step_module *md = &p->module[i];
		if (md->index < 0 || u[md->index].name[0])
			continue;
		const char *dot = strrchr(md->prefix, '.');
		snprintf(u[md->index].name, sizeof u[md->index].name, "%s.%lld", dot ? dot + 1 : md->prefix, md->index);
	}
	strcpy(u[nblocks].name, "root");
	size_t na = 0, ka = 0; /* the adapters' units so far; the adapter parameters so far (the marks' K) */
	for (uint32_t t = 0; t < s->ntensors; t++) {
		const struct ag_tensor *x = &s->tensor[t];
		if (!flattened(s, t))
			continue;
		struct unit *v;
		if (x->param < 0 && (!trained[t] || orig)) { /* (use_orig_params: no PEFT policy, every adapter) */
			long long b = x->module >= 0 ? p->module[x->module].index : -1;
			v = &u[b >= 0 && b < nblocks ? (size_t)b : (size_t)nblocks];
			ka++;
		} else if (x->param < 0) {
			v = &u[(size_t)nblocks + 1 + na];
			snprintf(v->name, sizeof v->name, "lora.%zu.%c", ka / 2, ka % 2 ? 'B' : 'A');
			v->parent = x->module >= 0 ? p->module[x->module].index : -1;
			na++;
			ka++;
		} else {
			long long b = p->module[p->tensor[x->param].module].index;
			v = &u[b >= 0 && b < nblocks ? (size_t)b : (size_t)nblocks];
		}
		/* one dtype a unit: FlatParamHandle._validate_tensors_to_flatten
		 * (torch/distributed/fsdp/_flat_param.py 781-797, 2.6.0) raises
		 * "Must flatten tensors with uniform dtype" otherwise */
		if (v->nparams == 0)
			v->dt = x->dtype;
		else if (v->dt != x->dtype)
			v->mixed_dt = 1;
		v->params = zs_realloc(v->params, (v->nparams + 1) * sizeof *v->params);
		v->off = zs_realloc(v->off, (v->nparams + 1) * sizeof *v->off);
		v->params[v->nparams] = t;
		v->off[v->nparams++] = v->numel;
		v->numel += agp_elements(x);
		if (trained[t])
			v->frozen = 0;
	}
	/* use_orig_params: where each adapter sits in the flat parameter
	 * decides which rank's shard holds it (FlatParamHandle flattens
	 * module.parameters()' order: _init_utils.py 2.6.0, 626 and 1147-1166,
	 * _get_orig_params) */
	uint64_t *key = orig ? param_keys(s) : NULL;
	for (size_t i = 0; i < n && orig; i++) {
		struct unit *v = &u[i];
		for (size_t j = 1; j < v->nparams; j++)
			for (size_t k = j; k > 0 && key[v->params[k - 1]] > key[v->params[k]]; k--) {
				uint32_t t = v->params[k];
				v->params[k] = v->params[k - 1];
				v->params[k - 1] = t;
			}
		for (size_t j = 0, at = 0; j < v->nparams; at += agp_elements(&s->tensor[v->params[j]]), j++)
			v->off[j] = at;
	}
	free(key);
	*nu = n;
	*iroot = (size_t)nblocks;
	return u;
}

/* A unit mixing trainable and frozen parameters, or NULL. */
static const struct unit *mixed_unit(const struct unit *u, size_t nu, const unsigned char *trained)
{
	for (size_t i = 0; i < nu; i++)
		for (size_t j = 0; j < u[i].nparams; j++)
			if (trained[u[i].params[j]] != !u[i].frozen)
				return &u[i];
	return NULL;
}

/* model.parameters()'s order of the units (nested FSDP modules' flat
 * parameters, depth first): the root's, then each block's followed by
 * its adapters'. */
static size_t *units_order(const struct unit *u, size_t nu, size_t iroot)
{
	size_t *order = zs_malloc(nu * sizeof *order), k = 0;
	order[k++] = iroot;
	for (size_t b = 0; b < iroot; b++) {
		order[k++] = b;
		for (size_t i = iroot + 1; i < nu; i++)
			if (u[i].parent == (long long)b)
				order[k++] = i;
	}
	for (size_t i = iroot + 1; i < nu; i++)
		if (u[i].parent < 0 || u[i].parent >= (long long)iroot)
			order[k++] = i;
	return order;
}

/* The policy's wrapping order (depth first, children before parents):
 * each block's adapters, then the block, ..., the root last. */
static size_t *units_postorder(const struct unit *u, size_t nu, size_t iroot)
{
	size_t *post = zs_malloc(nu * sizeof *post), k = 0;
	for (size_t b = 0; b < iroot; b++) {
		for (size_t i = iroot + 1; i < nu; i++)
			if (u[i].parent == (long long)b)
				post[k++] = i;
		post[k++] = b;
	}
	for (size_t i = iroot + 1; i < nu; i++)
		if (u[i].parent < 0 || u[i].parent >= (long long)iroot)
			post[k++] = i;
	post[k++] = iroot;
	return post;
}

/* The adapter unit whose mark "unit:NAME:WHERE" e is (*where points at
 * its WHERE, which a micro-step's "@k" may follow), or NULL. */
static struct unit *unit_mark(const struct ag_event *e, struct unit *u, size_t nu, const char **where)
{
	if (e->kind != AG_EV_MARK || e->label == NULL || strncmp(e->label, "unit:", 5) != 0)
		return NULL;
	for (size_t i = 0; i < nu; i++) {
		size_t n = strlen(u[i].name);
		const char *l = e->label + 5;
		if (u[i].block == -2 && strncmp(l, u[i].name, n) == 0 && l[n] == ':') {
			*where = l + n + 1;
			return &u[i];
		}
	}
	return NULL;
}

/* Whether a unit mark's WHERE w is `kind`. */
static int is_where(const char *w, const char *kind)
{
	size_t n = strlen(kind);
	return strncmp(w, kind, n) == 0 && (w[n] == '\0' || w[n] == '@');
}

/* use_orig_params: what is not built, by name (0 or -1 with *cause).
 * Each original parameter's start aligned to 16 bytes and the unit's
 * elements padded to a multiple of N inside the flat parameter
 * (_init_flat_param_and_metadata, _flat_param.py 2.6.0: 693-702 and
 * 742-759; _get_aligned_numel 2734-2739): padding tensors, whose views' gradients
 * the split's backward makes, not described; a rank holding no trained
 * element of a unit that trains lets its sharded gradient go at each
 * forward even under zero_grad zeros (no original .grad of its own),
 * not described. */
static int orig_check(const struct unit *u, size_t nu, const struct ag_step *s, const struct ag_options *o,
                      unsigned world, char **cause)
{
	if (o->recompute)
		return zs_fail(cause, "--fsdp-orig-params on with --recompute full: not compared with PyTorch yet (give "
		               "--recompute none)");
	for (size_t i = 0; i < nu; i++) {
		const struct unit *v = &u[i];
		uint64_t align = 16 / ag_dtype_size(v->dt);
		for (size_t j = 0; j < v->nparams; j++)
			if (agp_elements(&s->tensor[v->params[j]]) % align != 0)
				return zs_fail(cause, "--fsdp-orig-params on: unit %s's parameters need FSDP's 16-byte alignment "
				               "padding (_flat_param.py 693-702): not described yet", v->name);
		if (v->numel % world != 0)
			return zs_fail(cause, "--fsdp-orig-params on: unit %s's %llu elements need padding to a multiple of "
			               "N = %u inside its flat parameter (_flat_param.py 742-759): not described yet", v->name,
			               (unsigned long long)v->numel, world);
	}
	return 0;
}

int ag_fsdp_check(const struct ag_step *s, const struct step_params *p, const struct ag_options *o, unsigned world,
                  char **cause)
{
	size_t nu = 0, iroot = 0;
	unsigned char *trained = zs_calloc(s->ntensors ? s->ntensors : 1, 1);
	uint32_t *grad_of = zs_malloc((s->ntensors ? s->ntensors : 1) * sizeof *grad_of);
	agp_trained_params(s, s->ntensors, trained, grad_of);
	struct unit *u = make_units(s, p, trained, o->fsdp_orig_params, &nu, &iroot);
	const struct unit *m = mixed_unit(u, nu, trained);
	int rc = 0;
	/* 1.13: flat_param.py 334-340 (no use_orig_params); 2.6: _flat_param.py
	 * 800-808 under use_orig_params=False, FSDP's default and the references' */
	int v1 = o->version == ZS_TORCH_1_13;
	if (o->fsdp_orig_params)
		rc = orig_check(u, nu, s, o, world ? world : 1, cause);
	else if (m != NULL)
		rc = zs_fail(cause, "--freeze: --wrapper fsdp's unit %s (transformer_auto_wrap_policy's) would hold frozen "
		             "and trainable parameters, and PyTorch %s refuses that: \"%s\" (%s): freeze whole blocks, or "
		             "the root's parameters all or none", m->name, v1 ? "1.13" : "2.6",
		             v1 ? "`FlatParameter` requires uniform `requires_grad`"
		                : "Must flatten tensors with uniform `requires_grad` when `use_orig_params=False`",
		             v1 ? "flat_param.py 334-340" : "_flat_param.py 800-808");
	/* 2.x's reshard-only hook of a checkpointed frozen unit: not compared */
	for (size_t i = 0; i < nu && rc == 0 && o->version != ZS_TORCH_1_13 && o->recompute; i++)
		if (u[i].frozen)
			rc = zs_fail(cause, "--recompute full with frozen parameters under --wrapper fsdp --torch-version 2.6: "
			             "not compared with PyTorch yet (give --recompute none or --torch-version 1.13)");
	units_free(u, nu);
	free(trained);
	free(grad_of);
	return rc;
}

/* made[g] set for each plain .grad g that list src[0..n) allocates
 * itself (clone_obey_contract's copy): not those AccumulateGrad took as
 * they came (which a later micro-step's AccumulateGrad adds into, under
 * --grad-accum) */
static void made_pg_of(const struct ag_step *s, const struct ag_event *src, size_t n, const unsigned char *is_pg,
                       unsigned char *made)
{
	if (src == NULL) /* no such list (a step without a first step of its own) */
		return;
	for (size_t i = 0; i < n; i++) {
		const struct ag_event *e = &src[i];
		if (e->kind == AG_EV_OP && e->phase == ZS_PH_BACKWARD && e->op == AG_OP_COPY && into_pg(s, e, is_pg))
			made[sto(s, e->out[0])] = 1;
	}
}

/* --recompute full, as Hugging Face runs it under FSDP: the checkpoint
 * inside the unit (FSDP(layer).forward -> GradientCheckpointingLayer's
 * __call__ -> checkpoint), so the unit's output is the
 * CheckpointFunction's and FSDP's pre-backward hook on it (registered
 * by FSDP's forward before any later module's hooks) gathers the unit
 * before the rerun, at the mark of that gradient: the one before the
 * unit's first "refwd:" mark. Per event of src[0..n): the unit whose
 * hook runs there, or -1; each such unit marked ckpt. */
static int32_t *ckpt_hooks(const struct ag_event *src, size_t n, struct unit *u, size_t nu)
{
	int32_t *pre_at = zs_malloc((n ? n : 1) * sizeof *pre_at);
	for (size_t i = 0, last = SIZE_MAX; i < n; i++) {
		const struct ag_event *e = &src[i];
		struct unit *v = block_mark(e, u, nu, "refwd", "start");
		pre_at[i] = -1;
		if (v != NULL && last != SIZE_MAX) {
			pre_at[last] = (int32_t)(v - u);
			v->ckpt = 1;
		}
		if (e->kind == AG_EV_MARK)
			last = i;
	}
	return pre_at;
}

/* _lazy_init at the run's first forward (1.13's
 * fully_sharded_data_parallel.py 1812-1866, inside FSDP's
 * record_function, 2702-2703): _init_param_attributes over the root's
 * handle, then every other unit's in fsdp_modules' order (the root
 * first, depth first: `order`), each making _full_param_padded, zeros of
 * the padded unsharded size (1955-1959), and freeing its storage at once
 * (_free_storage, 1961); the streams, the buffers' cast (to the device
 * they are on) and the execution order's data allocate nothing here.
 * 2.6 (Debian 13's torch/distributed/fsdp/_runtime_utils.py _lazy_init
 * 110-141 from _root_pre_forward 516; _share_state_and_init_handle_attrs
 * 169-232): init_flat_param_attributes over the root's handle, then every
 * other state's in _get_fsdp_states' order (_traversal_utils.py 80-88: a
 * pre-order walk, the same `order`), each `torch.empty` of the padded
 * unsharded size, its storage freed at once (_flat_param.py 1251-1266):
 * the same bytes, unfilled. */
static void lazy_init(struct ag_pass *p, const struct ag_options *o, const struct unit *u, const size_t *order,
                      size_t nu)
{
	for (size_t k = 0; k < nu; k++) {
		const struct unit *v = &u[order[k]];
		uint32_t z = agp_storage(p, o->version == ZS_TORCH_1_13
		                                ? "zeros (_init_param_attributes' _full_param_padded, then _free_storage)"
		                                : "empty (init_flat_param_attributes' _full_param_padded, then _free_storage)",
		                         v->dt, v->padded, 0, ZS_CAT_GATHERED);
		agp_alloc(p, z, ZS_PH_FORWARD);
		if (o->version == ZS_TORCH_1_13)
			agp_op(p, ZS_PH_FORWARD, AG_OP_FILL, NO, z)->arg[0] = 0;
		agp_free(p, z, ZS_PH_FORWARD);
	}
}

/* The first iteration's _check_order (1.13's alone: 2.6's returns at once
 * unless TORCH_DISTRIBUTED_DEBUG is DETAIL, _exec_order_utils.py 51 and
 * 189-190; 1.13's fully_sharded_data_parallel.py
 * 547-620, from record_pre_forward, 535, in every unit's _pre_forward,
 * 2752, before its unshard; is_first_iter until the post-backward
 * callback's next_iter, 721): whatever the debug level, the handles'
 * count and indices all-gathered across the ranks and compared rank pair
 * by rank pair -- int32 zeros(N) and tensor([count]), each pair's `!=` a
 * bool read by `if` (_local_scalar_dense) and freed; then int32 zeros(N *
 * count) and tensor(indices) (one handle a unit), the pairs again; the
 * four freed as it returns, the 4-byte ones first (as 1.13's allocator
 * saw it at N = 2). The exchanges write nothing zerosim reads: no op. */
static void check_order(struct ag_pass *p, unsigned world)
{
	const enum zs_phase ph = ZS_PH_FORWARD;
	uint32_t t[4];
	for (int round = 0; round < 2; round++) {
		t[round] = agp_storage(p, round ? "world_indices (int32 zeros, _check_order)"
		                                : "world_num_valid_indices (int32 zeros, _check_order)",
		                       AG_F32, world, 0, ZS_CAT_SCRATCH);
		agp_alloc(p, t[round], ph);
		agp_op(p, ph, AG_OP_FILL, NO, t[round])->arg[0] = 0;
		t[2 + round] = agp_storage(p, round ? "local_indices (int32, _check_order)"
		                                    : "local_num_valid_indices (int32, _check_order)",
		                           AG_F32, 1, 0, ZS_CAT_SCRATCH);
		agp_alloc(p, t[2 + round], ph);
		agp_op(p, ph, AG_OP_FILL, NO, t[2 + round])->arg[0] = 1;
		for (unsigned pair = 0; pair < world * (world - 1) / 2; pair++) {
			uint32_t ne = agp_storage(p, "ne (bool, _check_order's rank pair)", AG_BOOL, 1, 0, ZS_CAT_SCRATCH);
			agp_alloc(p, ne, ph);
			agp_op(p, ph, AG_OP_FILL, NO, ne)->arg[0] = 0;
			agp_free(p, ne, ph);
		}
	}
	agp_free(p, t[2], ph);
	agp_free(p, t[3], ph);
	agp_free(p, t[0], ph);
	agp_free(p, t[1], ph);
}

/* Every unit's gradients anew: a list's start, a micro-step's. */
static void units_anew(struct unit *u, size_t nu)
{
	for (size_t k = 0; k < nu; k++) {
		u[k].ngot = 0;
		u[k].done = 0;
		for (size_t j = 0; j < u[k].nparams; j++) {
			u[k].held[j] = NO;
			u[k].pending[j] = 0;
		}
	}
}

/* Each unit's gradients the backward of the micro-step at src[i..nsrc)
 * brings (up to the next micro-step's mark): the split's backward runs
 * once those are in, a mixture's idle expert's view never reached (its
 * zeros made there: post_backward). */
static void units_want(struct unit *u, size_t nu, const struct ag_step *s, const struct ag_event *src, size_t i,
                       size_t nsrc, const unsigned char *is_pg, const int32_t *unit_of)
{
	for (size_t k = 0; k < nu; k++)
		u[k].nwant = 0;
	for (size_t j = i; j < nsrc; j++) {
		const struct ag_event *e = &src[j];
		if (j > i && e->kind == AG_EV_MARK && e->label != NULL && strncmp(e->label, "micro:", 6) == 0 &&
		    strtoul(e->label + 6, NULL, 10) > 0)
			break;
		uint32_t pg = e->kind == AG_EV_GRAD_READY ? sto(s, e->t) : NO;
		if (pg != NO && is_pg[pg] && unit_of[pg] >= 0)
			u[unit_of[pg]].nwant++;
	}
}

/* What every list of the run shares (ag_fsdp_apply's). */
struct fsdp_run {
	struct ag_pass *p;
	const struct ag_options *o;
	struct unit *u;
	size_t nu, iroot, nt0;
	const size_t *order;
	unsigned world;
	int sgo;
	const int32_t *unit_of, *slot_of;
	const unsigned char *is_pg, *made_pg;
	unsigned char *fed;
	const struct slot *slots; /* use_orig_params: the optimizer's (orig_slots) */
	size_t nslots;
};

/* One list of the step, src[0..nsrc), into r->p's list: the plain loop's
 * step 1 (first: the grads made by its backward, Adam's state by its
 * step(); FSDP's _lazy_init at its first forward) or steady step, under
 * FSDP. 0, or -1 with *cause. */
static int fsdp_list(const struct fsdp_run *r, const struct ag_event *src, size_t nsrc, int first, char **cause)
{
	struct ag_pass *p_ = r->p;
	struct ag_step *s = p_->s;
	const struct ag_options *o = r->o;
	struct unit *u = r->u;
	const size_t nu = r->nu, iroot = r->iroot, nt0 = r->nt0, *order = r->order;
	const unsigned world = r->world;
	const int shard_grad_op = r->sgo;
	const int32_t *unit_of = r->unit_of, *slot_of = r->slot_of;
	const unsigned char *is_pg = r->is_pg, *made_pg = r->made_pg;
	unsigned char *fed = r->fed;
	const double pre = ag_fsdp_predivide(world);
	int lazy = first;
	int32_t *pre_at = ckpt_hooks(src, nsrc, u, nu);
	units_anew(u, nu);
	units_want(u, nu, s, src, 0, nsrc, is_pg, unit_of);
	struct unit *root = &u[iroot], *ready = NULL;
	int root_prebwd = 0, skip_optimizer = 0, zeroed = 0, rc = 0;
	size_t nmarks[2] = { 0, 0 };
	/* --grad-accum K: K micro-steps, each FSDP's forward and backward;
	 * under no_sync() (--ddp-no-sync on, the first K - 1) no
	 * reduce-scatter, the unsharded flat gradients kept (post_backward) */
	const unsigned K = o->grad_accum ? o->grad_accum : 1;
	unsigned micro = 0;
	int sync = !(o->ddp_no_sync && K > 1);
	for (size_t i = 0; i < nsrc && rc == 0; i++) {
		const struct ag_event *e = &src[i];
		struct unit *v;
		const char *where = NULL;
		if (skip_optimizer) {
			if (!is_label(e, "phase:zero_grad"))
				continue;
			skip_optimizer = 0;
		}
		/* a unit's hook runs once its last gradient is in and the
		 * engine's work on that node's inputs is done: before the next
		 * mark (the next unit's pre-backward hook, or backward's end) */
		if (ready != NULL && e->kind == AG_EV_MARK) {
			post_backward(p_, o, ready, world, pre, sync, shard_grad_op);
			ready = NULL;
		}
		/* backward's end (the next micro-step's mark or the
		 * optimizer's): the root's queued _wait_for_post_backward
		 * reshards what no post-backward hook did, the frozen units'
		 * (_catch_all_reshard, 3428-3455, over fsdp_modules: the root
		 * first, depth first, 3524; SHARD_GRAD_OP's only when it syncs:
		 * _should_free_unsharded_flat_param). It skips a unit whose flat
		 * parameter is its shard already (3446-3450): under SHARD_GRAD_OP
		 * a frozen block whose output requires no grad (no pre-backward
		 * hook: nothing switched it back) keeps its gathered copy, from
		 * its first forward on, every later unshard finding it there
		 * (flat_param.py 666-673) */
		if (e->kind == AG_EV_MARK && e->label != NULL &&
		    (strcmp(e->label, "phase:optimizer") == 0 ||
		     (strncmp(e->label, "micro:", 6) == 0 && strtoul(e->label + 6, NULL, 10) > 0)))
			for (size_t k = 0; k < nu; k++)
				if (u[order[k]].live && u[order[k]].inuse && u[order[k]].frozen && (sync || !shard_grad_op))
					reshard(p_, &u[order[k]], ZS_PH_BACKWARD);
		if (pre_at[i] >= 0)
			pre_backward(p_, o, u, &u[pre_at[i]]);
		if (e->kind == AG_EV_MARK && e->label != NULL && strncmp(e->label, "unit:", 5) == 0) {
			/* the step marks only the units made here (a frozen adapter
			 * is none: util/autograd.c lora_unit_mark) */
			if ((v = unit_mark(e, u, nu, &where)) == NULL) {
				rc = zs_fail(cause, "--wrapper fsdp: internal error: the mark %s names no unit", e->label);
				break;
			}
			/* an adapter's unit (PEFT's policy): its forward unshards,
			 * runs and reshards (not the root); its output's gradient
			 * hook unshards; the post-backward hook at its end, above */
			if (is_where(where, "fwd") || is_where(where, "bwd"))
				unshard(p_, o, v, is_where(where, "fwd") ? ZS_PH_FORWARD : ZS_PH_BACKWARD);
			else if (is_where(where, "fwd_end"))
				post_forward(p_, v, shard_grad_op);
			continue;
		}
		switch (e->kind) {
		case AG_EV_MARK:
			if (e->label != NULL && strncmp(e->label, "micro:", 6) == 0 && micro + 1 < K &&
			    strtoul(e->label + 6, NULL, 10) > 0) {
				/* the next micro-step */
				micro++;
				sync = !(o->ddp_no_sync && micro + 1 < K);
				units_anew(u, nu);
				units_want(u, nu, s, src, i, nsrc, is_pg, unit_of);
				agp_copy(p_, e);
			} else if (is_label_k(e, "phase:forward")) {
				/* the root's forward: resharded in the last backward;
				 * the run's first, its _lazy_init inside FSDP's
				 * record_function, before the unshard */
				agp_copy(p_, e);
				agp_record_function(p_, o, ZS_PH_FORWARD);
				if (lazy)
					lazy_init(p_, o, u, order, nu);
				lazy = 0;
				/* use_orig_params: _root_pre_forward's
				 * _reset_flat_param_grad_info_if_needed over every handle
				 * (_runtime_utils.py 584, _flat_param.py 2417-2441): a flat
				 * parameter whose original .grads are all None lets its
				 * .grad go */
				for (size_t k = 0; k < nu && o->fsdp_orig_params; k++)
					if (u[order[k]].reset && u[order[k]].grad != NO) {
						agp_free(p_, u[order[k]].grad, ZS_PH_FORWARD);
						u[order[k]].regrad = u[order[k]].grad;
						u[order[k]].grad = NO;
						u[order[k]].reset = 0;
						memset(u[order[k]].gone, 0, world);
					} else {
						bare_free(p_, &u[order[k]], world);
					}
				if (first && micro == 0 && o->version == ZS_TORCH_1_13)
					check_order(p_, world);
				unshard_gather(p_, root, ZS_PH_FORWARD);
			} else if ((v = block_mark(e, u, nu, "fwd", "start")) != NULL) {
				agp_record_function(p_, o, ZS_PH_FORWARD);
				if (first && micro == 0 && o->version == ZS_TORCH_1_13)
					check_order(p_, world);
				unshard_gather(p_, v, ZS_PH_FORWARD);
				agp_copy(p_, e);
				nmarks[0]++;
			} else if ((v = block_mark(e, u, nu, "fwd", "end")) != NULL) {
				agp_copy(p_, e);
				post_forward(p_, v, shard_grad_op);
			} else if (is_label_k(e, "phase:backward")) {
				agp_copy(p_, e);
				root_prebwd = 1;
			} else if ((v = block_mark(e, u, nu, "bwd", "start")) != NULL) {
				agp_copy(p_, e);
				if (!v->ckpt)
					pre_backward(p_, o, u, v);
				nmarks[1]++;
			} else if ((v = block_mark(e, u, nu, "bwd", "end")) != NULL) {
				/* 2.x: a frozen unit's reshard-only hook, a multi-grad
				 * hook on its forward's inputs that require grad
				 * (_register_post_backward_reshard_only_hook,
				 * _runtime_utils.py 1462-1505, from _pre_forward 402),
				 * runs when their gradient is in: a hook on the same
				 * tensor as this mark's, registered before it (FSDP's
				 * forward wraps the block's), after the unit below's
				 * pre-backward hook (registered in its post-forward);
				 * _post_backward_reshard (783-789) frees as
				 * _should_free_in_backward says (801-817) */
				if (o->version != ZS_TORCH_1_13 && v->frozen && v->inuse) {
					agp_record_function(p_, o, ZS_PH_BACKWARD);
					if (sync || !shard_grad_op)
						reshard(p_, v, ZS_PH_BACKWARD);
					else
						v->inuse = 0;
				}
				agp_copy(p_, e);
			} else if (is_label(e, "phase:optimizer")) {
				for (size_t k = 0; k < nu && rc == 0; k++)
					if (!u[k].done && !u[k].frozen)
						rc = zs_fail(cause, "--wrapper fsdp: internal error: unit %s got %zu of its %zu "
						             "gradients in backward", u[k].name, u[k].ngot, u[k].nwant);
				if (o->fsdp_orig_params) {
					orig_adam(p_, o, u, r->slots, r->nslots, world, first);
					skip_optimizer = 1;
					continue;
				}
				struct ag_param_state *ps = zs_malloc(nu * sizeof *ps);
				size_t nps = 0;
				for (size_t k = 0; k < nu; k++) {
					const struct unit *x = &u[order[k]];
					if (!x->frozen) /* Trainer's optimizer: requires_grad's alone */
						ps[nps++] = (struct ag_param_state){ x->sh, x->grad, x->m, x->v, x->step };
				}
				/* the first step(): Adam's state made before the update */
				(first ? ag_optimizer_first_events : ag_optimizer_events)(s, o, ps, nps, &p_->ev, &p_->nev,
				                                                            &p_->cap);
				p_->cap_tensors = s->ntensors; /* it grew the tensors by its own */
				free(ps);
				skip_optimizer = 1;
			} else {
				agp_copy(p_, e);
			}
			break;
		case AG_EV_ALLOC: /* a plain .grad made for a copy or a sum goes; one AccumulateGrad took stays */
			if (!is_pg[e->t] || !made_pg[e->t])
				agp_copy(p_, e);
			break;
		case AG_EV_OP:
			if (e->phase == ZS_PH_BACKWARD && (e->op == AG_OP_ADD_ || e->op == AG_OP_COPY) && into_pg(s, e, is_pg)) {
				uint32_t pg = sto(s, e->out[0]);
				v = &u[unit_of[pg]];
				v->held[slot_of[pg]] = e->op == AG_OP_ADD_ ? e->in[1] : e->in[0];
				fed[pg] = 1;
			} else if (e->op == AG_OP_ZERO_ && e->phase != ZS_PH_BACKWARD && is_pg[sto(s, e->out[0])]) {
				/* zero_grad's zero_ of a plain .grad: FSDP's own instead */
				if (!zeroed)
					zero_grad(p_, o, u, order, nu, e->phase);
				zeroed = 1;
			} else {
				agp_copy(p_, e);
				if (root_prebwd && e->phase == ZS_PH_BACKWARD) {
					/* the root's _pre_backward_hook on the loss's
					 * gradient: the root is still gathered (its unshard
					 * switches the flat parameter back to it) */
					unshard(p_, o, root, ZS_PH_BACKWARD);
					if (o->fsdp_prefetch && iroot > 0)
						prefetch(p_, o, &u[iroot - 1]);
					root_prebwd = 0;
				}
			}
			break;
		case AG_EV_GRAD_READY: {
			uint32_t pg = sto(s, e->t);
			if (!is_pg[pg] || unit_of[pg] < 0) {
				agp_copy(p_, e);
				break;
			}
			v = &u[unit_of[pg]];
			size_t j = (size_t)slot_of[pg];
			if (!fed[pg]) { /* AccumulateGrad took the incoming gradient itself */
				v->held[j] = e->t;
				v->pending[j] = 1;
				s->tensor[pg].role = AG_ROLE_TEMP;
			}
			fed[pg] = 0;
			if (v->done || ++v->ngot > v->nwant) {
				rc = zs_fail(cause, "--wrapper fsdp: internal error: a gradient of unit %s arrives twice in "
				             "backward", v->name);
				break;
			}
			if (v->ngot == v->nwant)
				ready = v;
			break;
		}
		case AG_EV_FREE: {
			uint32_t t = e->t;
			int drop = 0;
			for (size_t k = 0; k < nu && !drop; k++)
				for (size_t j = 0; j < u[k].nparams && !drop; j++)
					if (!u[k].done && u[k].held[j] != NO && sto(s, u[k].held[j]) == t) {
						u[k].pending[j] = 1;
						drop = 1;
					}
			if (!drop && t < nt0 && is_pg[t]) { /* zero_grad(set_to_none=True) of a plain .grad */
				drop = 1;
				if (!zeroed)
					zero_grad(p_, o, u, order, nu, e->phase);
				zeroed = 1;
			}
			if (!drop)
				agp_copy(p_, e);
			break;
		}
		}
	}
	/* (a frozen block whose output requires no grad, a frozen prefix's,
	 * runs no backward: 1.13 registers no pre-backward hook on such an
	 * output, _register_pre_backward_hooks' _register_hook) */
	size_t ntrained = 0;
	for (size_t i = 0; i < iroot; i++)
		ntrained += !u[i].frozen;
	if (rc == 0 && (nmarks[0] != K * iroot || nmarks[1] > K * iroot || nmarks[1] < K * ntrained))
		rc = zs_fail(cause, "--wrapper fsdp: internal error: %zu and %zu of the %zu blocks' forward and backward "
		             "marks found", nmarks[0], nmarks[1], K * iroot);
	free(pre_at);
	return rc;
}

int ag_fsdp_apply(struct ag_step *s, const struct step_params *p, const struct ag_options *o, unsigned world,
                  int shard_grad_op, char **cause)
{
	if (world < 1)
		return zs_fail(cause, "--wrapper fsdp: N must be at least 1");
	size_t nu = 0, iroot = 0;
	const size_t nt0 = s->ntensors;
	unsigned char *trained = zs_calloc(nt0 ? nt0 : 1, 1);
	uint32_t *grad_of = zs_malloc((nt0 ? nt0 : 1) * sizeof *grad_of);
	agp_trained_params(s, nt0, trained, grad_of);
	struct unit *u = make_units(s, p, trained, o->fsdp_orig_params, &nu, &iroot);
	const struct unit *mixed = mixed_unit(u, nu, trained);
	for (size_t i = 0; i < nu; i++)
		if (u[i].mixed_dt) {
			int r = zs_fail(cause, "--wrapper fsdp: FSDP unit %s holds parameters of more than one dtype (FSDP's "
			                "\"Must flatten tensors with uniform dtype\"): not described", u[i].name);
			units_free(u, nu);
			free(trained);
			free(grad_of);
			return r;
		}
	for (size_t i = 0; i < nu; i++)
		if (u[i].nparams == 0 || mixed != NULL) {
			int r = zs_fail(cause, "--wrapper fsdp: internal error: FSDP unit %s holds %s", mixed ? mixed->name : u[i].name,
			                mixed ? "frozen and trainable parameters" : "no parameter");
			units_free(u, nu);
			free(trained);
			free(grad_of);
			return r;
		}
	struct ag_pass P = {.s = s, .cap_tensors = s->ntensors};
	struct ag_pass *p_ = &P;
	/* per original storage: the unit and slot of a parameter (or of its
	 * plain .grad), and whether it is a plain .grad */
	int32_t *unit_of = zs_malloc((nt0 ? nt0 : 1) * sizeof *unit_of), *slot_of = zs_malloc((nt0 ? nt0 : 1) * sizeof *slot_of);
	unsigned char *is_pg = zs_calloc(nt0 ? nt0 : 1, 1), *fed = zs_calloc(nt0 ? nt0 : 1, 1);
	uint32_t *orig = zs_malloc((nt0 ? nt0 : 1) * sizeof *orig); /* a parameter's stand-in before FSDP */
	for (size_t t = 0; t < nt0; t++) {
		unit_of[t] = slot_of[t] = -1;
		orig[t] = NO;
	}
	for (size_t i = 0; i < nu; i++) {
		struct unit *v = &u[i];
		v->padded = (v->numel + world - 1) / world * world;
		v->shard = v->padded / world;
		v->held = zs_malloc(v->nparams * sizeof *v->held);
		v->pending = zs_calloc(v->nparams, 1);
		for (size_t j = 0; j < v->nparams; j++) {
			v->held[j] = NO;
			unit_of[v->params[j]] = (int32_t)i;
			slot_of[v->params[j]] = (int32_t)j;
		}
		v->gathered = agp_storage(p_, "_full_param_padded (FSDP's gathered flat parameter)", v->dt, v->padded, 0,
		                          ZS_CAT_GATHERED);
		v->sh = agp_storage(p_, "FlatParameter (this rank's shard)", v->dt, v->shard, 0, ZS_CAT_PARAM32);
		s->tensor[v->sh].role = AG_ROLE_PARAM;
		v->m = agp_storage(p_, "Adam exp_avg (shard)", v->dt, v->shard, 0, ZS_CAT_ADAM_M);
		s->tensor[v->m].role = AG_ROLE_ADAM_M;
		v->v = agp_storage(p_, "Adam exp_avg_sq (shard)", v->dt, v->shard, 0, ZS_CAT_ADAM_V);
		s->tensor[v->v].role = AG_ROLE_ADAM_V;
		v->step = agp_storage(p_, "Adam step", AG_F32, 0, 1, ZS_CAT_ADAM_M);
		s->tensor[v->step].role = AG_ROLE_ADAM_STEP;
		/* use_orig_params: Adam's state per rank and stepped slot */
		v->stepped = zs_calloc(v->nparams, 1);
		v->om = zs_malloc((size_t)world * v->nparams * sizeof *v->om);
		v->ov = zs_malloc((size_t)world * v->nparams * sizeof *v->ov);
		v->ost = zs_malloc((size_t)world * v->nparams * sizeof *v->ost);
		for (size_t j = 0; j < v->nparams; j++)
			v->stepped[j] = o->fsdp_orig_params && trained[v->params[j]] && !s->tensor[v->params[j]].orig_frozen;
		v->bare = zs_calloc(world, 1); /* (a trained unit's rank, until a stepped piece is found there) */
		memset(v->bare, o->fsdp_orig_params && !v->frozen, world);
		v->gone = zs_calloc(world, 1);
		v->synced = s->step1 == NULL; /* (the steady list's start: after a step's reduce-scatter) */
		for (unsigned r = 0; r < world; r++)
			for (size_t j = 0; j < v->nparams; j++) {
				size_t x = (size_t)r * v->nparams + j;
				uint64_t at, len;
				v->om[x] = v->ov[x] = v->ost[x] = NO;
				if (!v->stepped[j] || !piece(v, j, r, &at, &len))
					continue;
				v->bare[r] = 0;
				v->om[x] = agp_storage(p_, "Adam exp_avg (a parameter's piece of the shard)", v->dt, len, 0,
				                       ZS_CAT_ADAM_M);
				s->tensor[v->om[x]].role = AG_ROLE_ADAM_M;
				v->ov[x] = agp_storage(p_, "Adam exp_avg_sq (a parameter's piece of the shard)", v->dt, len, 0,
				                       ZS_CAT_ADAM_V);
				s->tensor[v->ov[x]].role = AG_ROLE_ADAM_V;
				v->ost[x] = agp_storage(p_, "Adam step", AG_F32, 0, 1, ZS_CAT_ADAM_M);
				s->tensor[v->ost[x]].role = AG_ROLE_ADAM_STEP;
			}
		if (o->zero_grad == ZS_ZERO_GRAD_ZEROS && !v->frozen && s->step1 == NULL) {
			v->grad = agp_storage(p_, "grad (FSDP's sharded flat gradient)", v->dt, v->shard, 0, ZS_CAT_GRAD32);
			s->tensor[v->grad].role = AG_ROLE_GRAD;
		}
	}
	/* the plain loop's .grad storages, each its parameter's unit and slot */
	for (size_t t = 0; t < nt0; t++) {
		const struct ag_tensor *x = &s->tensor[t];
		if (x->storage != t || x->role != AG_ROLE_GRAD)
			continue;
		is_pg[t] = 1;
		if (x->param < 0) { /* an adapter's: its parameter by the optimizer's order */
			if (grad_of[t] != NO) {
				unit_of[t] = unit_of[grad_of[t]];
				slot_of[t] = slot_of[grad_of[t]];
			}
			continue;
		}
		for (size_t i = 0; i < nu && unit_of[t] < 0; i++)
			for (size_t j = 0; j < u[i].nparams; j++) {
				const struct ag_tensor *w = &s->tensor[u[i].params[j]];
				if (w->param == x->param && w->part == x->part) {
					unit_of[t] = (int32_t)i;
					slot_of[t] = (int32_t)j;
					break;
				}
			}
	}
	/* the plain .grads the step allocates itself (clone_obey_contract's
	 * copy): not those AccumulateGrad took as they came (which a later
	 * micro-step's AccumulateGrad adds into, under --grad-accum) */
	unsigned char *made_pg = zs_calloc(nt0 ? nt0 : 1, 1);
	made_pg_of(s, s->event, s->nevents, is_pg, made_pg);
	made_pg_of(s, s->step1, s->nstep1, is_pg, made_pg);
	/* The parameters before FSDP: stand-ins of the set-up's own; the
	 * model's become views of the unit's gathered flat parameter (and
	 * every view of them a view of it). */
	for (size_t i = 0; i < nu; i++)
		for (size_t j = 0; j < u[i].nparams; j++) {
			uint32_t w = u[i].params[j], w0 = agp_newt(p_);
			s->tensor[w0] = s->tensor[w];
			s->tensor[w0].storage = w0;
			orig[w] = w0;
		}
	for (size_t t = 0; t < nt0; t++) {
		struct ag_tensor *x = &s->tensor[t];
		uint32_t w = x->storage;
		if (unit_of[w] < 0 || is_pg[w] || (s->tensor[w].role != AG_ROLE_PARAM && !is_q4_codes(&s->tensor[w])))
			continue;
		const struct unit *v = &u[unit_of[w]];
		x->offset += v->off[slot_of[w]];
		if (t == w)
			x->bytes = 0;
	}
	for (size_t t = 0; t < nt0; t++) {
		struct ag_tensor *x = &s->tensor[t];
		uint32_t w = x->storage;
		if (w < nt0 && orig[w] != NO)
			x->storage = u[unit_of[w]].gathered;
	}
	/* set-up: the model's (its parameters the stand-ins), then FSDP's
	 * construction, the blocks' units first (the auto-wrap policy wraps
	 * the children before the root) */
	for (size_t i = 0; i < s->nsetup; i++)
		agp_copy_renamed(p_, &s->setup[i], orig, nt0);
	/* (the policy wraps depth first, children before parents: a block's
	 * adapters, the block, ..., the root) */
	size_t *order = units_order(u, nu, iroot), *post = units_postorder(u, nu, iroot);
	for (size_t k = 0; k < nu; k++) {
		struct unit *v = &u[post[k]];
		uint32_t flat = agp_storage(p_, "cat (flatten_params: the unsharded flat parameter)", v->dt, v->numel, 0,
		                            ZS_CAT_PARAM32);
		agp_alloc(p_, flat, ZS_PH_SETUP);
		for (size_t j = 0; j < v->nparams; j++) {
			uint32_t w0 = orig[v->params[j]];
			agp_op(p_, ZS_PH_SETUP, AG_OP_COPY, w0, agp_view_shaped(p_, flat, w0, v->off[j]));
		}
		for (size_t j = 0; j < v->nparams; j++)
			agp_free(p_, orig[v->params[j]], ZS_PH_SETUP);
		agp_alloc(p_, v->sh, ZS_PH_SETUP);
		agp_op(p_, ZS_PH_SETUP, AG_OP_SHARD, flat, v->sh);
		agp_free(p_, flat, ZS_PH_SETUP);
	}
	agp_take(p_, &s->setup, &s->nsetup);
	/* the first step's own, over the shards in the optimizer's order
	 * (model.parameters(): the root's flat parameter, then the blocks') */
	for (size_t k = 0; k < nu; k++)
		if (u[order[k]].grad != NO) {
			agp_alloc(p_, u[order[k]].grad, ZS_PH_SETUP);
			agp_op(p_, ZS_PH_SETUP, AG_OP_ZERO_, u[order[k]].grad, u[order[k]].grad);
		}
	size_t nslots = 0;
	uint64_t *key = param_keys(s);
	struct slot *slots = orig_slots(u, nu, key, &nslots);
	free(key);
	for (unsigned r = 0; r < world && s->step1 == NULL; r++) { /* use_orig_params: each rank's own */
		size_t from = p_->nev;
		for (size_t k = 0; k < nslots; k++) {
			const struct unit *v = &u[slots[k].i];
			size_t x = (size_t)r * v->nparams + slots[k].j;
			if (v->om[x] == NO)
				continue;
			const uint32_t st[3] = { v->ost[x], v->om[x], v->ov[x] };
			for (int q = 0; q < 3; q++) {
				agp_alloc(p_, st[q], ZS_PH_SETUP);
				agp_op(p_, ZS_PH_SETUP, AG_OP_FILL, NO, st[q])->arg[0] = 0;
			}
		}
		agp_rank_only(p_, from, r);
	}
	for (size_t k = 0; k < nu && s->step1 == NULL && !o->fsdp_orig_params; k++) {
		const struct unit *v = &u[order[k]];
		if (v->frozen)
			continue;
		agp_alloc(p_, v->step, ZS_PH_SETUP);
		agp_op(p_, ZS_PH_SETUP, AG_OP_FILL, NO, v->step)->arg[0] = 0;
		agp_alloc(p_, v->m, ZS_PH_SETUP);
		agp_op(p_, ZS_PH_SETUP, AG_OP_FILL, NO, v->m)->arg[0] = 0;
		agp_alloc(p_, v->v, ZS_PH_SETUP);
		agp_op(p_, ZS_PH_SETUP, AG_OP_FILL, NO, v->v)->arg[0] = 0;
	}
	/* (the checkpointed units: the steady list's, as step 1's) */
	free(ckpt_hooks(s->event, s->nevents, u, nu));
	/* SHARD_GRAD_OP: a frozen block whose output requires no grad (a
	 * frozen prefix's: no pre-backward hook, no backward mark) keeps the
	 * copy its first forward gathered for good (_catch_all_reshard skips
	 * it: the unit's post-forward reshard, 2710-2713, left its flat
	 * parameter on the shard) -- the first step's own, as Adam's state;
	 * where step 1 is a list of its own, its forward's unshard gathers it
	 * and its post-forward keeps it (post_forward) */
	for (size_t k = 0; k < nu && shard_grad_op && s->step1 == NULL; k++) {
		struct unit *v = &u[post[k]];
		int bwd = v->ckpt;
		for (size_t i = 0; i < s->nevents && !bwd; i++)
			bwd = block_mark(&s->event[i], u, nu, "bwd", "start") == v;
		if (v->block < 0 || !v->frozen || bwd)
			continue;
		agp_alloc(p_, v->gathered, ZS_PH_SETUP);
		agp_op(p_, ZS_PH_SETUP, AG_OP_ALL_GATHER, v->sh, v->gathered);
		v->live = 1;
	}
	agp_take(p_, &s->first_step, &s->nfirst);
	/* the lists: step 1 where it is one of its own (s->step1), then the
	 * steady step, from the state step 1 leaves */
	struct fsdp_run R = {.p = p_, .o = o, .u = u, .nu = nu, .iroot = iroot, .nt0 = nt0, .order = order,
	                     .world = world, .sgo = shard_grad_op, .unit_of = unit_of, .slot_of = slot_of,
	                     .is_pg = is_pg, .made_pg = made_pg, .fed = fed, .slots = slots, .nslots = nslots};
	int rc = 0;
	if (s->step1 != NULL) {
		rc = fsdp_list(&R, s->step1, s->nstep1, 1, cause);
		if (rc == 0)
			agp_take(p_, &s->step1, &s->nstep1);
	}
	if (rc == 0)
		rc = fsdp_list(&R, s->event, s->nevents, 0, cause);
	if (rc == 0)
		agp_take(p_, &s->event, &s->nevents);
	free(p_->ev);
	free(slots);
	free(order);
	free(post);
	free(trained);
	free(grad_of);
	free(unit_of);
	free(slot_of);
	free(is_pg);
	free(made_pg);
	free(fed);
	free(orig);
	units_free(u, nu);
	return rc;
}
