/*
 * ag_ddp — DistributedDataParallel over the PyTorch step (util/ag_ddp.h).
 *
 * Written from PyTorch 1.13's torch/nn/parallel/distributed.py (Debian 12's
 * python3-torch, /usr/lib/python3/dist-packages/torch/nn/parallel/
 * distributed.py: the reducer made with bucket_size_limits [sys.maxsize]
 * when find_unused_parameters is False, 723-753; forward's
 * record_function, _rebuild_buckets and _sync_buffers, 1005-1060;
 * _sync_module_buffers -> dist._broadcast_coalesced, 1559-1650) and its
 * C++ side, torch/csrc/distributed/c10d/reducer.cpp (rebuild_buckets,
 * mark_variable_ready_dense -> copy_grad_to_bucket: at::mul_out(
 * bucket_view, grad, wrapped_scalar_tensor(1. / div_factor_));
 * finalize_backward -> copy_bucket_to_grad: grad.copy_(bucket_view)) and
 * comm.cpp (broadcast_coalesced: BroadcastWork flattens each bucket with
 * torch::utils::flatten_dense_tensors, which is a view for one tensor and
 * a cat for more; at most two buckets in flight, max_in_flight = 2), and
 * checked against 1.13's allocator by tests/hf_torch.sh (hf_torch.py
 * --ddp 2) and tests/ft_lora.sh's DDP rows.
 */
#include "util/ag_ddp.h"

#include <stdlib.h>
#include <string.h>

#include "util/ag_ds.h"
#include "util/ag_ds3.h"
#include "util/ag_fsdp.h"
#include "util/ag_pass.h"
#include "util/ag_zero1.h"
#include "util/util.h"

#define NO AG_NONE

/* One bucket's broadcast (comm.cpp's BroadcastWork): a bucket of one
 * tensor is broadcast in place (flatten_dense_tensors is a view of it), a
 * bucket of more is flattened into a new tensor (cat) and broadcast; its
 * finish() copies the flat tensor back (unflatten's views) and frees it. */
struct bc_work {
	uint32_t flat, *b, *v; /* flat: NO for a bucket of one tensor */
	size_t nb;
};

static void bc_start(struct ag_pass *p, struct bc_work *w, enum ag_dtype dt, enum zs_phase ph)
{
	if (w->nb == 1) {
		w->flat = NO;
		agp_op(p, ph, AG_OP_BROADCAST_, w->b[0], w->b[0]);
		return;
	}
	uint64_t total = 0;
	for (size_t k = 0; k < w->nb; k++)
		total += agp_elements(&p->s->tensor[w->b[k]]);
	w->flat = agp_storage(p, "cat (broadcast_coalesced)", dt, total, 0,
	                      ph == ZS_PH_SETUP ? ZS_CAT_BUCKETS : ZS_CAT_ACTIVATIONS);
	agp_alloc(p, w->flat, ph);
	w->v = zs_malloc(w->nb * sizeof *w->v);
	uint64_t off = 0;
	for (size_t k = 0; k < w->nb; k++) {
		w->v[k] = agp_view_as(p, w->flat, w->b[k], off);
		off += agp_elements(&p->s->tensor[w->b[k]]);
		agp_op(p, ph, AG_OP_COPY, w->b[k], w->v[k]);
	}
	agp_op(p, ph, AG_OP_BROADCAST_, w->flat, w->flat);
}

static void bc_finish(struct ag_pass *p, struct bc_work *w, enum zs_phase ph)
{
	if (w->flat != NO) {
		for (size_t k = 0; k < w->nb; k++)
			agp_op(p, ph, AG_OP_COPY, w->v[k], w->b[k]);
		agp_free(p, w->flat, ph);
		free(w->v);
	}
	free(w->b);
}

/* dist._broadcast_coalesced (comm.cpp broadcast_coalesced) of tensors
 * t[0..n) from rank 0, buckets of at most `limit` bytes a dtype
 * (compute_bucket_assignment_by_size), in the order of their first
 * tensor. At most two buckets are in flight (max_in_flight = 2): before
 * the third bucket's work starts, the first's finishes, so two flat
 * copies are live at once; the last two finish after the loop. */
static void broadcast_coalesced(struct ag_pass *p, const uint32_t *t, size_t n, double limit, enum zs_phase ph)
{
	unsigned char *done = zs_calloc(n ? n : 1, 1);
	struct bc_work fly[2]; /* the in-flight deque, oldest first */
	size_t nfly = 0;
	for (size_t i = 0; i < n; i++) {
		if (done[i])
			continue;
		/* the bucket of t[i]'s dtype from t[i] on */
		enum ag_dtype dt = p->s->tensor[t[i]].dtype;
		struct bc_work w = {.b = zs_malloc((n - i) * sizeof *w.b)};
		double bytes = 0;
		for (size_t j = i; j < n && bytes < limit; j++)
			if (!done[j] && p->s->tensor[t[j]].dtype == dt) {
				w.b[w.nb++] = t[j];
				done[j] = 1;
				bytes += (double)p->s->tensor[t[j]].bytes;
			}
		if (nfly == 2) {
			bc_finish(p, &fly[0], ph);
			fly[0] = fly[1];
			nfly = 1;
		}
		bc_start(p, &w, dt, ph);
		fly[nfly++] = w;
	}
	for (size_t k = 0; k < nfly; k++)
		bc_finish(p, &fly[k], ph);
	free(done);
}

/* QLoRA's 4-bit storages (util/autograd.c's QLoRA section: buffers of a
 * parameter, and bitsandbytes' one dynamic map). To DDP only the packed
 * weight is a module state: it is the Params4bit, a parameter (uint8
 * [(n + 1) / 2, 1], frozen) in the fp32 weight's place; the absmax, code
 * and double quantization's state are attributes of its quant_state and
 * the map a dict of functional.py (name2qmap): neither parameters nor
 * buffers, so neither broadcast at construction nor synced in forward. */
static int q4_packed(const struct ag_tensor *x)
{
	return x->role == AG_ROLE_BUFFER && x->dtype == AG_U8 && x->ndim == 2 && x->param >= 0;
}

static int q4_state(const struct ag_tensor *x)
{
	return x->role == AG_ROLE_BUFFER && (x->param >= 0 || strcmp(x->what, "create_dynamic_map") == 0);
}

/* Parameter storage p's module states into out (the packed weights of
 * its quantized parts, or p itself); returns how many. */
static size_t param_states(const struct ag_step *s, uint32_t p, uint32_t *out)
{
	const struct ag_tensor *x = &s->tensor[p];
	size_t n = 0;
	for (uint32_t t = 0; t < s->ntensors; t++) {
		const struct ag_tensor *q = &s->tensor[t];
		if (q->storage == t && q4_packed(q) && q->param == x->param &&
		    (x->part < 0 || q->part == x->part || (q->part < 0 && x->part == 0)))
			out[n++] = t;
	}
	if (n == 0)
		out[n++] = p;
	return n;
}

/* A LoRA adapter's parameter (lora_A, lora_B): a trained parameter
 * storage of no step_params tensor, its module the adapted layer's. */
static int is_adapter(const struct ag_tensor *x) { return x->role == AG_ROLE_PARAM && x->param < 0; }

/* The module states _sync_module_states broadcasts (distributed.py 1.13,
 * utils.py _sync_module_states: named_parameters() then named_buffers())
 * into out; returns how many. Parameters in the module's order: each
 * storage's packed weight in a 4-bit layer's weight's place, a layer's
 * adapters right after its own parameters (PEFT's LoraLinear registers
 * base_layer first, then lora_A and lora_B), though their storages are
 * made after the whole model. Then the buffers, bool ones left out (gloo
 * broadcasts no bool, "Invalid scalar type"; the reference leaves them
 * out with DDP's _set_params_and_buffers_to_ignore_for_model). */
static size_t states(const struct ag_step *s, const struct step_params *sp, uint32_t *out, int params, int buffers)
{
	size_t n = 0;
	for (uint32_t t = 0; params && t < s->ntensors; t++) {
		const struct ag_tensor *x = &s->tensor[t];
		if (x->storage != t || x->role != AG_ROLE_PARAM || x->param < 0)
			continue;
		n += param_states(s, t, out + n);
		int32_t m = (int32_t)sp->tensor[x->param].module;
		uint32_t u = t + 1; /* the next parameter storage */
		while (u < s->ntensors && !(s->tensor[u].storage == u && s->tensor[u].role == AG_ROLE_PARAM &&
		                            s->tensor[u].param >= 0))
			u++;
		if (u < s->ntensors && (int32_t)sp->tensor[s->tensor[u].param].module == m)
			continue; /* not the layer's last */
		for (uint32_t a = 0; a < s->ntensors; a++)
			if (s->tensor[a].storage == a && is_adapter(&s->tensor[a]) && s->tensor[a].module == m)
				out[n++] = a;
	}
	for (uint32_t t = 0; buffers && t < s->ntensors; t++) {
		const struct ag_tensor *x = &s->tensor[t];
		if (x->storage == t && x->role == AG_ROLE_BUFFER && x->dtype != AG_BOOL && !q4_state(x))
			out[n++] = t;
	}
	return n;
}

static int is_grad(const struct ag_step *s, uint32_t t)
{
	return t != NO && t < s->ntensors && s->tensor[t].storage == t && s->tensor[t].role == AG_ROLE_GRAD;
}

double ag_ddp_first_bucket_bytes(const struct zs_config *c)
{
	if (c->torch_version != ZS_TORCH_1_13 && (c->given & ZS_KEY_BIT(ZS_KEY_BUCKET_CAP)))
		return (double)(uint64_t)(c->bucket_cap_mb * 1024.0 * 1024.0);
	return AG_DDP_FIRST_BUCKET_BYTES;
}

/* Whether event e is a mark whose label is `what`, or `what@k` (a
 * micro-step's under --grad-accum: util/autograd.c names them so). */
static int is_mark(const struct ag_event *e, const char *what)
{
	if (e->kind != AG_EV_MARK || e->label == NULL)
		return 0;
	size_t n = strlen(what);
	return strncmp(e->label, what, n) == 0 && (e->label[n] == '\0' || e->label[n] == '@');
}

/* A micro-step's start under --grad-accum K > 1 ("micro:k"). */
static int is_micro(const struct ag_event *e)
{
	return e->kind == AG_EV_MARK && e->label != NULL && strncmp(e->label, "micro:", 6) == 0;
}

/* Whether tensor x is contiguous (row-major, as its storage lays it). */
static int contiguous(const struct ag_tensor *x)
{
	int64_t want = 1;
	for (unsigned k = x->ndim; k-- > 0;) {
		if (x->shape[k] != 1 && x->stride[k] != want)
			return 0;
		want *= (int64_t)x->shape[k];
	}
	return 1;
}

/* The parameter storage whose .grad storage g is (the same step_params
 * tensor and part), or NO. */
static uint32_t param_of_grad(const struct ag_step *s, uint32_t g)
{
	const struct ag_tensor *x = &s->tensor[g];
	for (uint32_t t = 0; t < s->ntensors; t++) {
		const struct ag_tensor *q = &s->tensor[t];
		if (q->storage == t && q->role == AG_ROLE_PARAM && q->param == x->param && q->part == x->part)
			return t;
	}
	return NO;
}

/* _DDPSink (distributed.py 1.13, 155-169 and 1080-1097: find_unused_parameters
 * True): forward returns a clone of each output tensor, the loss's first,
 * then the logits' (loss, logits: the list's own); as DDP.forward returns, the model's own outputs go
 * (the flattened list's items released last to first: the logits, then
 * the loss), nothing else holding them (checked: no later op of the step
 * reads them). *cl, *cg: the clones' storages, which the loop holds in
 * their place. 0, or -1 with *cause. */
static int ddp_sink(struct ag_pass *p, enum zs_phase ph, uint32_t loss, uint32_t logits, uint32_t *cl, uint32_t *cg,
                    char **cause)
{
	struct ag_step *s = p->s;
	uint32_t out[2] = {loss, logits}, *clone[2] = {cl, cg};
	static const char *const what[2] = {"clone (_DDPSink: the loss)", "clone (_DDPSink: the logits)"};
	for (int k = 0; k < 2; k++) {
		if (out[k] == NO || out[k] >= s->ntensors || !contiguous(&s->tensor[out[k]]))
			return zs_fail(cause, "--ddp-find-unused: internal error: the loop's outputs are not contiguous "
			               "tensors of the step");
		const struct ag_tensor *x = &s->tensor[out[k]];
		uint64_t n = 1;
		for (unsigned d = 0; d < x->ndim; d++)
			n *= x->shape[d];
		*clone[k] = agp_storage(p, what[k], x->dtype, n, x->ndim == 0, ZS_CAT_ACTIVATIONS);
		agp_alloc(p, *clone[k], ph);
		agp_op(p, ph, AG_OP_COPY, out[k], agp_view_as(p, *clone[k], out[k], 0));
	}
	agp_free(p, s->tensor[logits].storage, ph);
	agp_free(p, s->tensor[loss].storage, ph);
	return 0;
}

/* A layout of the reducer's buckets: each ready grad's bucket (the
 * reducer's index) and its view there, each bucket's storage and how many
 * grads it takes. */
struct layout {
	uint32_t *bucket_of, *bview, *buckets;
	size_t *pending, nbuckets;
};

/* Cut the grads ready[ord[0..n)] into buckets of L (fp32: every parameter
 * is), each closed once at or over its limit, the first's first_limit,
 * the others' cap, its tensors laid out in that order (reducer.cpp's
 * compute_bucket_assignment_by_size closes a bucket once its size reaches
 * the limit, after adding the tensor: every bucket holds one tensor at
 * least). */
static void cut(struct ag_pass *p, const uint32_t *ready, const size_t *ord, size_t n, uint64_t first_limit,
                uint64_t cap, struct layout *L)
{
	struct ag_step *s = p->s;
	L->bucket_of = zs_malloc(n * sizeof *L->bucket_of);
	L->bview = zs_malloc(n * sizeof *L->bview);
	L->buckets = zs_malloc(n * sizeof *L->buckets);
	L->pending = zs_calloc(n, sizeof *L->pending);
	L->nbuckets = 0;
	for (size_t i = 0; i < n;) {
		uint64_t limit = L->nbuckets == 0 ? first_limit : cap, bytes = 0, el = 0;
		size_t j = i;
		do {
			bytes += s->tensor[ready[ord[j]]].bytes;
			el += agp_elements(&s->tensor[ready[ord[j]]]);
			j++;
		} while (j < n && bytes < limit);
		/* the gradients' dtype (DDP buckets by dtype; every gradient
		 * is fp32 but TRL's bf16 adapters', --lora-dtype bf16, which
		 * are all the trained ones then) */
		uint32_t bk = agp_storage(p, "Reducer bucket (gradients)", s->tensor[ready[ord[i]]].dtype, el, 0,
		                          ZS_CAT_BUCKETS);
		uint64_t off = 0;
		for (size_t k = i; k < j; k++) {
			L->bucket_of[ord[k]] = (uint32_t)L->nbuckets;
			L->bview[ord[k]] = agp_view_as(p, bk, ready[ord[k]], off);
			off += agp_elements(&s->tensor[ready[ord[k]]]);
		}
		L->pending[L->nbuckets] = j - i;
		L->buckets[L->nbuckets++] = bk;
		i = j;
	}
}

static void layout_free(struct layout *L)
{
	free(L->bucket_of);
	free(L->bview);
	free(L->buckets);
	free(L->pending);
}

/* What every list of the run shares: the grads in their ready order
 * (ready[0..nused) accumulated in backward, ready[nused..ngrads) unused:
 * find_unused_parameters), the used maps, the buffers' states. */
struct ddp_run {
	const struct ag_options *o;
	unsigned world;
	int find_unused;
	const uint32_t *ready;
	size_t ngrads, nused;
	uint32_t used, used_dev;
	const uint32_t *st;
	size_t nbuf;
	uint32_t loss, logits; /* the list's outputs (_DDPSink's): step 1's own or the steady step's */
};

/* reducer.cpp's rebuild_buckets at step 2's forward (distributed.py 1.13,
 * forward: _rebuild_buckets after record_function's handles, before
 * _sync_buffers): sync_bucket_indices broadcasts rank 0's bucket indices
 * and sizes (int32: at::empty({total_size + 1}) on the host and its
 * device copy, broadcast, copied back; then at::empty({num_buckets}) and
 * its device copy the same), freed as the function returns (the
 * broadcast lists and the device copies first, in reverse order of their
 * making); then initialize_buckets clears the constructor's buckets
 * (buckets_.clear(): `old`'s storages freed) and makes each rebuilt one
 * (at::empty of its size), in the reducer's order. The int32 tensors are
 * held as 4-byte words (the list has no int32: the same bytes). */
static void rebuild(struct ag_pass *p, const struct ddp_run *r, const struct layout *old, const struct layout *L)
{
	const enum zs_phase ph = ZS_PH_FORWARD;
	uint32_t idx = agp_storage(p, "indices_tensor (int32, sync_bucket_indices)", AG_F32, r->ngrads + 1, 0,
	                           ZS_CAT_SCRATCH);
	agp_alloc(p, idx, ph);
	agp_op(p, ph, AG_OP_FILL, NO, idx);
	uint32_t idx_dev = agp_storage(p, "indices_tensor_device (int32)", AG_F32, r->ngrads + 1, 0, ZS_CAT_SCRATCH);
	agp_alloc(p, idx_dev, ph);
	agp_op(p, ph, AG_OP_COPY, idx, idx_dev);
	agp_op(p, ph, AG_OP_BROADCAST_, idx_dev, idx_dev);
	agp_op(p, ph, AG_OP_COPY, idx_dev, idx);
	uint32_t sz = agp_storage(p, "bucket_sizes_tensor (int32)", AG_F32, L->nbuckets, 0, ZS_CAT_SCRATCH);
	agp_alloc(p, sz, ph);
	agp_op(p, ph, AG_OP_FILL, NO, sz);
	uint32_t sz_dev = agp_storage(p, "bucket_sizes_tensor_device (int32)", AG_F32, L->nbuckets, 0, ZS_CAT_SCRATCH);
	agp_alloc(p, sz_dev, ph);
	agp_op(p, ph, AG_OP_COPY, sz, sz_dev);
	agp_op(p, ph, AG_OP_BROADCAST_, sz_dev, sz_dev);
	agp_op(p, ph, AG_OP_COPY, sz_dev, sz);
	agp_free(p, sz_dev, ph);
	agp_free(p, sz, ph);
	agp_free(p, idx_dev, ph);
	agp_free(p, idx, ph);
	for (size_t k = 0; k < old->nbuckets; k++)
		agp_free(p, old->buckets[k], ph);
	for (size_t k = 0; k < L->nbuckets; k++)
		agp_alloc(p, L->buckets[k], ph);
}

/* One list of the step, src[0..nsrc), into p's list, its hooks on the
 * buckets of L; `old` (or NULL): the buckets the forward of micro-step
 * `rebuild_micro` (the first forward after the first synchronized
 * backward: 0 in the second step's list, 1 in a first step whose first
 * micro-step synchronizes) rebuilds into L's (rebuild), the hooks before
 * it on old's. 0, or -1 with *cause. */
static int ddp_list(struct ag_pass *p, const struct ddp_run *r, const struct layout *L, const struct layout *old,
                    unsigned rebuild_micro, const struct ag_event *src, size_t nsrc, char **cause)
{
	struct ag_step *s = p->s;
	const struct ag_options *o = r->o;
	size_t ngrads = r->ngrads, nused = r->nused;
	/* the buckets the hooks write: old's until the rebuild, then L's */
	const struct layout *B = old != NULL && rebuild_micro > 0 ? old : L;
	size_t nbuckets = B->nbuckets, nmax = old != NULL && old->nbuckets > L->nbuckets ? old->nbuckets : L->nbuckets;
	/* each hook's event in the list: the first micro-step's, in the
	 * ready order (the later micro-steps' found as they come), and the
	 * grad it names (this list's own: under set_to_none the first step's
	 * grads are other storages than the steady step's, of the same
	 * parameters) */
	size_t *at = zs_malloc((ngrads ? ngrads : 1) * sizeof *at), nat = 0;
	uint32_t *mine = zs_malloc((ngrads ? ngrads : 1) * sizeof *mine);
	memcpy(mine, r->ready, ngrads * sizeof *mine);
	for (size_t i = 0; i < nsrc && nat < nused; i++) {
		const struct ag_event *e = &src[i];
		if (is_micro(e) && nat > 0)
			break;
		if (e->kind != AG_EV_GRAD_READY || e->phase != ZS_PH_BACKWARD || !is_grad(s, e->t))
			continue;
		if (e->t != r->ready[nat] && param_of_grad(s, e->t) != param_of_grad(s, r->ready[nat])) {
			free(at);
			free(mine);
			return zs_fail(cause, "--wrapper ddp: internal error: grad %s (%u) is not ready in the steady step's "
			               "order", s->tensor[e->t].what, e->t);
		}
		mine[nat] = e->t;
		at[nat++] = i;
	}
	if (nat != nused) {
		free(at);
		free(mine);
		return zs_fail(cause, "--wrapper ddp: internal error: %zu of the step's %zu grads are accumulated in "
		               "backward", nat, nused);
	}
	const uint32_t *ready = mine;
	size_t *npend = zs_malloc((nmax ? nmax : 1) * sizeof *npend); /* each micro-step's count */
	/* the step: K micro-steps (--grad-accum; one at K = 1), each a DDP
	 * forward and backward. Under no_sync() (micro-steps 0..K-2 with
	 * --ddp-no-sync on) forward skips reducer.prepare_for_backward
	 * (distributed.py 1.13 1047-1058), so Reducer::autograd_hook returns
	 * at once (!expect_autograd_hooks_): no bucket copy, no all-reduce, no
	 * finalize; the grads accumulate in param.grad and the buckets keep
	 * what the last synchronized backward left. Forward sets
	 * require_forward_param_sync to whether it synchronizes, and the next
	 * forward broadcasts the buffers only if it was set
	 * (will_sync_module_buffers, 1581-1586): after a no_sync micro-step, no
	 * broadcast. */
	size_t g = 0, next = 0;
	unsigned K = o->grad_accum ? o->grad_accum : 1, micro = 0;
	int in_forward = 0, sync = !(o->ddp_no_sync && K > 1), sync_bufs = 1, rc = 0, rebuilt = old == NULL;
	memcpy(npend, B->pending, nbuckets * sizeof *npend);
	/* find_unused: the model's outputs once the sink has cloned them
	 * (NO before), and the clones the loop holds in their place */
	uint32_t out_loss = NO, out_logits = NO, clone_loss = NO, clone_logits = NO;
	for (size_t i = 0; i < nsrc && rc == 0; i++) {
		const struct ag_event *e = &src[i];
		if (r->find_unused && is_mark(e, "phase:backward") && out_loss == NO) {
			if ((rc = ddp_sink(p, ZS_PH_FORWARD, r->loss, r->logits, &clone_loss, &clone_logits, cause)) != 0)
				break;
			out_loss = s->tensor[r->loss].storage;
			out_logits = s->tensor[r->logits].storage;
		}
		if (out_loss != NO && e->kind == AG_EV_FREE && (e->t == out_loss || e->t == out_logits)) {
			/* the loop's `del` of its outputs: the clones */
			agp_free(p, e->t == out_loss ? clone_loss : clone_logits, e->phase);
			continue;
		}
		if (out_loss != NO && (agp_touches(s, e, out_loss) || agp_touches(s, e, out_logits))) {
			rc = zs_fail(cause, "--ddp-find-unused: internal error: the step reads the model's outputs after "
			             "the sink has taken them");
			break;
		}
		if ((is_micro(e) && in_forward) || is_mark(e, "phase:optimizer")) {
			/* finalize_backward: every grad from its bucket view
			 * (finalize_bucket_dense: grad.copy_(bucket_view), in
			 * place). Under find_unused_parameters a parameter unused
			 * on every rank (the all-reduced local_used_map_ 0) is
			 * left alone there; its copy here writes what it holds:
			 * each rank's slot got its zeros times 1/N, their sum is
			 * zeros, the bits of the grad zero_grad zeroed */
			if (sync)
				for (size_t k = 0; k < ngrads; k++)
					agp_op(p, ZS_PH_BACKWARD, AG_OP_COPY, B->bview[k], ready[k]);
			if (is_micro(e)) {
				micro++;
				in_forward = 0;
				g = next = 0;
				memcpy(npend, B->pending, nbuckets * sizeof *npend);
				sync = !(o->ddp_no_sync && micro + 1 < K);
			}
		}
		agp_copy(p, e);
		if (is_mark(e, "phase:forward") && !in_forward) {
			in_forward = 1;
			agp_record_function(p, o, ZS_PH_FORWARD);
			if (!rebuilt && micro == rebuild_micro) {
				rebuild(p, r, old, L);
				rebuilt = 1;
				B = L;
				nbuckets = L->nbuckets;
				memcpy(npend, L->pending, nbuckets * sizeof *npend);
			}
			if (sync_bufs)
				broadcast_coalesced(p, r->st, r->nbuf, AG_DDP_BROADCAST_BUCKET_BYTES, ZS_PH_FORWARD);
			sync_bufs = sync;
		}
		if (e->kind == AG_EV_GRAD_READY && e->phase == ZS_PH_BACKWARD && is_grad(s, e->t) && micro > 0 &&
		    (g >= ngrads || e->t != ready[g])) {
			rc = zs_fail(cause, "--wrapper ddp: internal error: micro-step %u's grads are not ready in the "
			             "first's order", micro);
			break;
		}
		if (micro > 0 && e->kind == AG_EV_GRAD_READY && e->phase == ZS_PH_BACKWARD && is_grad(s, e->t))
			at[g] = i;
		if (g < nused && i == at[g] && !sync) {
			g++;
			continue;
		}
		/* the hook (Reducer::autograd_hook) of ready[g]; the step's first
		 * (g 0) under find_unused_parameters marks the unused parameters
		 * ready before its own (has_marked_unused_parameters_), each as a
		 * used one: its .grad is defined (the zeros zero_grad left), so
		 * mark_variable_ready_dense's mul_out copies it (zeros) into its
		 * bucket view */
		for (size_t h = g == 0 && nused < ngrads ? nused : g; g < nused && i == at[g];
		     h = h + 1 == ngrads ? g : h + 1) {
			/* mul_out(bucket_view, grad, 1/N) */
			uint32_t w = agp_storage(p, "scalar (wrapped number, 1/N)", AG_F64, 0, 1, ZS_CAT_ACTIVATIONS);
			agp_alloc(p, w, ZS_PH_BACKWARD);
			agp_op(p, ZS_PH_BACKWARD, AG_OP_FILL, NO, w)->arg[0] = 1.0 / r->world;
			uint32_t f = agp_storage(p, "scalar (fp32 copy)", AG_F32, 0, 1, ZS_CAT_ACTIVATIONS);
			agp_alloc(p, f, ZS_PH_BACKWARD);
			agp_op(p, ZS_PH_BACKWARD, AG_OP_COPY, w, f);
			agp_op(p, ZS_PH_BACKWARD, AG_OP_MUL_SCALAR, ready[h], B->bview[h])->arg[0] = 1.0 / r->world;
			agp_free(p, f, ZS_PH_BACKWARD);
			agp_free(p, w, ZS_PH_BACKWARD);
			/* mark_bucket_ready: the buckets are reduced in the
			 * reducer's order, each once it and those before it are
			 * complete (in ready order, the one just completed) */
			npend[B->bucket_of[h]]--;
			int reduced = 0;
			for (; next < nbuckets && npend[next] == 0; next++, reduced = 1)
				agp_op(p, ZS_PH_BACKWARD, AG_OP_ALL_REDUCE_SUM_, B->buckets[next], B->buckets[next]);
			/* the last bucket reduced: mark_variable_ready's
			 * all_reduce_local_used_map (local_used_map_dev_.copy_(
			 * local_used_map_), then its all-reduce) */
			if (r->find_unused && reduced && next == nbuckets) {
				agp_op(p, ZS_PH_BACKWARD, AG_OP_COPY, r->used, r->used_dev);
				agp_op(p, ZS_PH_BACKWARD, AG_OP_ALL_REDUCE_SUM_, r->used_dev, r->used_dev);
			}
			if (h == g) {
				g++;
				break;
			}
		}
	}
	if (rc == 0 && r->find_unused && out_loss == NO)
		rc = zs_fail(cause, "--ddp-find-unused: internal error: the step has no phase:backward mark");
	if (rc == 0 && !rebuilt)
		rc = zs_fail(cause, "--wrapper ddp: internal error: the list has no forward at micro-step %u to rebuild "
		             "the buckets in", rebuild_micro);
	free(at);
	free(mine);
	free(npend);
	return rc;
}

int ag_ddp_apply(struct ag_step *s, const struct step_params *sp, const struct ag_options *o, unsigned world,
                 double bucket_cap_mb, double first_bucket_bytes, int find_unused, char **cause)
{
	if (world < 1)
		return zs_fail(cause, "--wrapper ddp: internal error: a run of %u ranks", world);
	int has_forward = 0;
	for (size_t i = 0; i < s->nevents && !has_forward; i++)
		has_forward = is_mark(&s->event[i], "phase:forward");
	if (!has_forward)
		return zs_fail(cause, "--wrapper ddp: internal error: the step has no phase:forward mark");
	/* the first step as a list of its own (ag_options.step1): with
	 * find_unused_parameters on the constructor's buckets as every step
	 * (never rebuilt), _DDPSink cloning step 1's own outputs (loss1,
	 * logits1); a parameter unused in step 1 (a mixture's idle expert:
	 * its grad None, zeroed slot, clone_obey_contract) has no step 1 of
	 * its own (ag_step_build builds none for a mixture) */
	if (s->step1 != NULL && find_unused && (s->loss1 == NO || s->logits1 == NO))
		return zs_fail(cause, "--wrapper ddp: internal error: the first step's outputs are not known");
	/* The gradients' ready order: each grad's AccumulateGrad in backward
	 * (the steady step's grads: under set_to_none the first step's own
	 * list makes others, of the same parameters, left out here). */
	unsigned char *first_only = zs_calloc(s->ntensors ? s->ntensors : 1, 1);
	for (size_t i = 0; s->step1 != NULL && i < s->nstep1; i++)
		if (s->step1[i].kind == AG_EV_GRAD_READY && is_grad(s, s->step1[i].t))
			first_only[s->step1[i].t] = 1;
	for (size_t i = 0; i < s->nevents; i++)
		if (s->event[i].kind == AG_EV_GRAD_READY && is_grad(s, s->event[i].t))
			first_only[s->event[i].t] = 0;
	size_t ngrads = 0;
	for (uint32_t t = 0; t < s->ntensors; t++)
		if (is_grad(s, t) && !first_only[t])
			ngrads++;
	uint32_t *ready = zs_malloc((ngrads ? ngrads : 1) * sizeof *ready);
	size_t nready = 0;
	for (size_t i = 0; i < s->nevents; i++) {
		const struct ag_event *e = &s->event[i];
		if (is_micro(e) && nready > 0)
			break; /* the first micro-step's order: the buckets' */
		if (e->kind != AG_EV_GRAD_READY || e->phase != ZS_PH_BACKWARD || !is_grad(s, e->t))
			continue;
		for (size_t k = 0; k < nready; k++)
			if (ready[k] == e->t) {
				free(ready);
				free(first_only);
				return zs_fail(cause, "--wrapper ddp: internal error: grad %s (%u) accumulated twice in backward",
				               s->tensor[e->t].what, e->t);
			}
		if (nready == ngrads)
			break;
		ready[nready++] = e->t;
	}
	/* find_unused_parameters: a parameter whose gradient the step never
	 * accumulates (a mixture's expert that got no token on this rank:
	 * out of the autograd graph, util/autograd.c's moe_fwd runs the hit
	 * experts only) is one the reducer finds unused after forward
	 * (search_unused_parameters) and marks ready itself; its grad storage
	 * after the ready ones in `ready` (at ready[nready..ngrads)), in the
	 * step's tensor order */
	size_t nused = nready;
	if (find_unused && nready > 0 && nready < ngrads)
		for (uint32_t t = 0; t < s->ntensors && nready < ngrads; t++) {
			int seen = 0;
			for (size_t k = 0; k < nused && !seen; k++)
				seen = ready[k] == t;
			if (is_grad(s, t) && !first_only[t] && !seen)
				ready[nready++] = t;
		}
	free(first_only);
	if (nready != ngrads || ngrads == 0) {
		free(ready);
		return zs_fail(cause, "--wrapper ddp: internal error: %zu of the step's %zu grads are accumulated in "
		               "backward", nready, ngrads);
	}
	struct ag_pass P = {.s = s, .cap_tensors = s->ntensors};
	struct ag_pass *p = &P;
	/* The orders the buckets are cut in (indices into ready): the
	 * rebuilt buckets' (ord), the ready order; the constructor's (ctor),
	 * the parameters' in the module's order (distributed.py 1.13,
	 * _ddp_init_helper 720-740: _compute_bucket_assignment_by_size over
	 * `parameters`, the list then reversed for the reducer). With
	 * find_unused_parameters the reducer never rebuilds (reducer.cpp
	 * should_rebuild_buckets: static_graph_ or !find_unused_parameters_),
	 * so every step runs on the constructor's: bucket_size_limits
	 * [_DEFAULT_FIRST_BUCKET_BYTES, bucket_bytes_cap]. Without it the
	 * constructor cuts one bucket of every parameter (bucket_size_limits
	 * [sys.maxsize], 1.13 line 721, 2.6.0 line 1169), which the first step
	 * runs on where it is a list of its own (s->step1), and step 2's
	 * forward rebuilds (rebuild). */
	size_t *ord = zs_malloc(ngrads * sizeof *ord), *ctor = zs_malloc(ngrads * sizeof *ctor);
	uint32_t *pos = zs_malloc(ngrads * sizeof *pos); /* each ready grad's parameter storage */
	for (size_t k = 0; k < ngrads; k++) {
		ord[k] = ctor[k] = k;
		pos[k] = find_unused || s->step1 != NULL ? param_of_grad(s, ready[k]) : (uint32_t)k;
		if (pos[k] == NO) {
			uint32_t t = ready[k];
			free(ord), free(ctor), free(pos), free(ready);
			return zs_fail(cause, "--wrapper ddp: internal error: grad %s (%u) has no parameter", s->tensor[t].what,
			               t);
		}
	}
	for (size_t k = 1; k < ngrads; k++) /* by position (insertion: ready is nearly reversed) */
		for (size_t j = k; j > 0 && pos[ctor[j - 1]] > pos[ctor[j]]; j--) {
			size_t t = ctor[j];
			ctor[j] = ctor[j - 1];
			ctor[j - 1] = t;
		}
	free(pos);
	/* the cap in whole bytes, as DDP takes it (int(bucket_cap_mb * 1024 *
	 * 1024)); a cap of 0 gives each tensor after the first bucket its own */
	uint64_t cap = (uint64_t)(bucket_cap_mb * 1024.0 * 1024.0);
	struct layout L = {0}, L0 = {0};
	cut(p, ready, find_unused ? ctor : ord, ngrads, (uint64_t)first_bucket_bytes, cap, &L);
	const int rebuilds = s->step1 != NULL && !find_unused; /* step 2's forward rebuilds L0 into L */
	if (rebuilds)
		cut(p, ready, ctor, ngrads, UINT64_MAX, UINT64_MAX, &L0);
	free(ord);
	free(ctor);
	if (find_unused) { /* the reducer's list is the cut reversed */
		size_t nb = L.nbuckets;
		for (size_t k = 0; k < nb / 2; k++) {
			uint32_t t = L.buckets[k];
			size_t c = L.pending[k];
			L.buckets[k] = L.buckets[nb - 1 - k];
			L.pending[k] = L.pending[nb - 1 - k];
			L.buckets[nb - 1 - k] = t;
			L.pending[nb - 1 - k] = c;
		}
		for (size_t k = 0; k < ngrads; k++)
			L.bucket_of[k] = (uint32_t)(nb - 1 - L.bucket_of[k]);
	}
	/* set-up: the model's, then DDP's construction, then the batch (the
	 * loop draws it after wrapping the model: tests/ft_torch.py; its
	 * bytes are not live across the construction's broadcast copy, which
	 * under LoRA at short sequences is the run's peak) */
	size_t batch = 0;
	while (batch < s->nsetup && !(s->setup[batch].kind == AG_EV_ALLOC &&
	                              s->tensor[s->setup[batch].t].role == AG_ROLE_INPUT))
		batch++;
	for (size_t i = 0; i < batch; i++)
		agp_copy(p, &s->setup[i]);
	uint32_t *st = zs_malloc((s->ntensors ? s->ntensors : 1) * sizeof *st);
	size_t nst = states(s, sp, st, 1, 1);
	broadcast_coalesced(p, st, nst, AG_DDP_BROADCAST_BUCKET_BYTES, ZS_PH_SETUP);
	/* the constructor's buckets where the first step runs on them, else
	 * (the step's list every step's) the rebuilt ones, as the rebuild
	 * leaves them: the same bytes (the constructor's one bucket is Psi * 4
	 * bytes, as the rebuilt ones together are) */
	const struct layout *made = rebuilds ? &L0 : &L;
	for (size_t k = 0; k < made->nbuckets; k++)
		agp_alloc(p, made->buckets[k], ZS_PH_SETUP);
	/* find_unused_parameters: the reducer's used-parameter maps, made last
	 * in its constructor (initialize_local_used_map: local_used_map_ =
	 * at::zeros and local_used_map_dev_ = at::empty, int32, one a
	 * parameter the reducer holds), held as 4-byte words (the list has no
	 * int32: the same bytes, and a count of ranks is exact in fp32) */
	struct ddp_run r = {.o = o, .world = world, .find_unused = find_unused, .ready = ready, .ngrads = ngrads,
	                    .nused = nused, .used = NO, .used_dev = NO, .st = st, .loss = s->loss1,
	                    .logits = s->logits1};
	if (find_unused) {
		r.used = agp_storage(p, "local_used_map_ (int32, a word a parameter)", AG_F32, ngrads, 0, ZS_CAT_SCRATCH);
		agp_alloc(p, r.used, ZS_PH_SETUP);
		agp_op(p, ZS_PH_SETUP, AG_OP_FILL, NO, r.used);
		r.used_dev = agp_storage(p, "local_used_map_dev_ (int32)", AG_F32, ngrads, 0, ZS_CAT_SCRATCH);
		agp_alloc(p, r.used_dev, ZS_PH_SETUP);
	}
	for (size_t i = batch; i < s->nsetup; i++)
		agp_copy(p, &s->setup[i]);
	agp_take(p, &s->setup, &s->nsetup);
	r.nbuf = states(s, sp, st, 0, 1);
	/* the lists: step 1 on the constructor's bucket, step 2 rebuilding
	 * them in its forward (ag_step.step2), then the steady step on the
	 * rebuilt ones; or the steady step alone, every step's. The reducer
	 * records the rebuilt order in a synchronized backward's hooks
	 * (reducer.cpp autograd_hook: push_rebuilt_params, after its
	 * !expect_autograd_hooks_ return, which no_sync() takes) and rebuilds
	 * at the next forward (distributed.py 1.13, 1026): under --grad-accum
	 * K > 1 without no_sync() that is step 1's second micro-step (step 1
	 * then rebuilds, and step 2 is the steady step); with no_sync() on
	 * the first K - 1, step 2's first, as at K = 1 */
	int rc = 0;
	const unsigned K = o->grad_accum ? o->grad_accum : 1;
	if (s->step1 != NULL && find_unused) {
		/* find_unused_parameters: step 1 on the constructor's buckets,
		 * which every later step keeps (no rebuild, no step 2 of its own) */
		rc = ddp_list(p, &r, &L, NULL, 0, s->step1, s->nstep1, cause);
		if (rc == 0)
			agp_take(p, &s->step1, &s->nstep1);
	} else if (s->step1 != NULL && K > 1 && !o->ddp_no_sync) {
		rc = ddp_list(p, &r, &L, &L0, 1, s->step1, s->nstep1, cause);
		if (rc == 0)
			agp_take(p, &s->step1, &s->nstep1);
	} else if (s->step1 != NULL) {
		rc = ddp_list(p, &r, &L0, NULL, 0, s->step1, s->nstep1, cause);
		if (rc == 0)
			agp_take(p, &s->step1, &s->nstep1);
		r.loss = s->loss;
		r.logits = s->logits;
		if (rc == 0)
			rc = ddp_list(p, &r, &L, &L0, 0, s->event, s->nevents, cause);
		if (rc == 0)
			agp_take(p, &s->step2, &s->nstep2);
	}
	r.loss = s->loss;
	r.logits = s->logits;
	if (rc == 0)
		rc = ddp_list(p, &r, &L, NULL, 0, s->event, s->nevents, cause);
	if (rc == 0)
		agp_take(p, &s->event, &s->nevents);
	free(p->ev);
	free(st);
	free(ready);
	layout_free(&L);
	layout_free(&L0);
	return rc;
}

int ag_zero1_scheme(const struct zs_config *c) { return c->nschemes > 0 && c->schemes[0] == ZS_ZERO1; }

int ag_step_build_run(struct ag_step *s, const struct zs_model *m, const struct step_params *p,
                      const struct ag_options *o, const struct zs_config *c, unsigned world, char **cause)
{
	/* torch's zero1 (--schemes zero1): Adam inside ZeroRedundancyOptimizer
	 * over the ranks, util/ag_zero1.h; DDP's pass the same */
	/* --steps 1 where step 1 is not a list of its own: refused by name */
	if (ag_step1_check(c, m, cause) != 0)
		return -1;
	struct ag_options oz = *o;
	if (c->wrapper == ZS_WRAPPER_DDP && ag_zero1_scheme(c))
		oz.zero1_world = world;
	/* PEFT's wrap policy: each adapter an FSDP unit of its own */
	oz.fsdp_unit_marks = c->wrapper == ZS_WRAPPER_FSDP && c->lora_r > 0;
	/* its modules' parameters are views of the flat parameters */
	oz.amp_param_views = c->wrapper == ZS_WRAPPER_FSDP;
	/* a gemma's checkpointed layer (util/autograd.c's llama_hold) as
	 * transformers calls it under FSDP: not described */
	if (c->wrapper == ZS_WRAPPER_FSDP && o->recompute && m->gemma)
		return zs_fail(cause, "--recompute full: Hugging Face's gradient checkpointing of a %s under --wrapper fsdp "
		               "is not described yet (give --wrapper none or ddp)", m->model_type);
	/* SDPA's math path with attention dropout (util/autograd.c, sdpa_math):
	 * the plain loop and DDP checked against 2.6's allocator; FSDP's flat
	 * parameters over it not */
	if (c->wrapper == ZS_WRAPPER_FSDP && o->attn == ZS_ATTN_SDPA && m->attn_pdrop > 0)
		return zs_fail(cause, "--attn sdpa: attention dropout (attn_pdrop %g: SDPA's math path) under --wrapper fsdp "
		               "is not described yet (give --wrapper none or ddp, or --attn eager)", m->attn_pdrop);
	/* on a GPU the wrappers' collectives run over NCCL, their buffers and
	 * streams not read: the plain loop's step alone (util/autograd.c) */
	if (o->device == ZS_DEVICE_CUDA && c->wrapper != ZS_WRAPPER_NONE)
		return zs_fail(cause, "--torch-device cuda: --wrapper %s over NCCL is not described yet (the plain loop is: "
		               "give --wrapper none, or --torch-device cpu)", zs_wrapper_name(c->wrapper));
	/* stage 3's hooks in a checkpointed layer's rerun: not built */
	if (c->wrapper == ZS_WRAPPER_DEEPSPEED && c->schemes[0] == ZS_ZERO3 && o->recompute)
		return zs_fail(cause, "--recompute full with --wrapper deepspeed --schemes zero3: not built yet (give "
		               "--recompute none, or --schemes zero1 or zero2)");
	/* find_unused_parameters where a checkpointed layer reruns, or where
	 * the model returns more than the loss and the logits (a mixture's
	 * router logits and aux loss under output_router_logits, which
	 * _DDPSink clones too): not built. A mixture's expert idle on a rank
	 * is (ag_ddp_apply: its parameters marked ready unused). */
	if (c->wrapper == ZS_WRAPPER_DDP && c->ddp_find_unused && (m->router_logits || o->recompute))
		return zs_fail(cause, "--ddp-find-unused with %s: not built yet", m->router_logits
		               ? "output_router_logits true (_DDPSink's clones of the router logits and the aux loss)"
		               : "--recompute full (Hugging Face's Trainer passes find_unused_parameters False under "
		                 "gradient checkpointing)");
	/* DeepSpeed's ZeRO-1/2 pass writes its first step from the plain
	 * loop's steady list (util/ag_ds.c ds_step): the plain loop's own is
	 * not built */
	if (c->wrapper == ZS_WRAPPER_DEEPSPEED)
		oz.step1 = 0;
	/* ZeRO-3's first step at N > 1 gathers and releases at the leaf
	 * modules' marks (util/ag_ds3.c), where the model's are described */
	if (c->wrapper == ZS_WRAPPER_DEEPSPEED && c->schemes[0] == ZS_ZERO3 && world > 1 && ag_ds3_step1_built(c, m))
		oz.ds3_leaf_marks = 1;
	if (ag_step_build(s, m, p, &oz, cause) != 0)
		return -1;
	if (c->wrapper == ZS_WRAPPER_DEEPSPEED) {
		/* ZeRO-3's refusals at N > 1 are the run's whichever N its
		 * pre-check builds (cmd_measure's at N = 1): the largest listed */
		unsigned wmax = world;
		for (size_t i = 0; i < c->nworld; i++)
			wmax = c->world[i] > wmax ? c->world[i] : wmax;
		int rc;
		if (c->schemes[0] == ZS_ZERO3) {
			/* Init's order, module.parameters() (ds_id; frozen ones too) */
			uint32_t *order = zs_malloc((s->ntensors ? s->ntensors : 1) * sizeof *order);
			size_t norder = states(s, p, order, 1, 0);
			rc = ag_ds3_apply(s, p, &oz, world, wmax, (uint64_t)c->ds_reduce_bucket, order, norder, cause);
			free(order);
		} else
			rc = ag_ds_apply(s, &oz, world, c->schemes[0] == ZS_ZERO2, (uint64_t)c->ds_reduce_bucket, cause);
		if (rc != 0)
			ag_step_free(s);
		return rc;
	}
	/* a unit mixing frozen and trainable parameters: the input's */
	if (c->wrapper == ZS_WRAPPER_FSDP && ag_fsdp_check(s, p, &oz, world, cause) != 0) {
		ag_step_free(s);
		return -1;
	}
	/* Every step ag_step_build makes is one the passes take: their failure
	 * is zerosim's, not the input's. */
	if ((c->wrapper == ZS_WRAPPER_DDP &&
	     ag_ddp_apply(s, p, o, world, c->bucket_cap_mb, ag_ddp_first_bucket_bytes(c), c->ddp_find_unused,
	                  cause) != 0) ||
	    (c->wrapper == ZS_WRAPPER_FSDP && ag_fsdp_apply(s, p, o, world, c->schemes[0] == ZS_ZERO2, cause) != 0)) {
		ag_step_free(s);
		return -2;
	}
	return 0;
}
