/*
 * theory_alloc — the theory's walk as a trace of blocks (theory.h, struct
 * theory_trace) and its replay through PyTorch's caching allocator
 * (util/cuda_alloc.h), the same model measure feeds with the engine's
 * tracked blocks: where the walk's trace is the engine's, block for block,
 * the two replays agree to the byte (tests/alloc_replay.sh checks it).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "theory/theory_nccl.h"
#include "util/ag_ddp.h"
#include "util/autograd.h"
#include "util/step.h"
#include "util/util.h"

static void push_ev(struct theory_trace *t, struct theory_tev e)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 256;
		t->ev = zs_realloc(t->ev, t->cap * sizeof *t->ev);
	}
	t->ev[t->n++] = e;
}

void theory_trace_alloc(struct theory_trace *t, enum zs_phase ph, enum zs_cat c, uint64_t bytes, uint64_t key)
{
	/* A zero-byte buffer takes no block (PyTorch's allocate(0) neither):
	 * nothing to replay. */
	if (bytes == 0)
		return;
	struct theory_tev e = {ph, 1, c, bytes, ++t->next_id, key};
	push_ev(t, e);
	if (t->nlive == t->caplive) {
		t->caplive = t->caplive ? 2 * t->caplive : 64;
		t->live = zs_realloc(t->live, t->caplive * sizeof *t->live);
	}
	t->live[t->nlive++] = e;
}

static void drop(struct theory_trace *t, size_t i, enum zs_phase ph)
{
	struct theory_tev e = t->live[i];
	e.phase = ph;
	e.alloc = 0;
	push_ev(t, e);
	memmove(t->live + i, t->live + i + 1, (t->nlive - i - 1) * sizeof *t->live);
	t->nlive--;
}

/* The block a free names: a step buffer's own (by key); else the oldest
 * live framework block of that category and size (a unit's gathered copy
 * is released before the next is made); else the newest blocks of that
 * category that make the bytes up together (a hook's buffers freed as one
 * sum). */
void theory_trace_free(struct theory_trace *t, enum zs_phase ph, enum zs_cat c, uint64_t bytes, uint64_t key)
{
	if (bytes == 0)
		return;
	for (size_t i = 0; i < t->nlive; i++)
		if (key != 0 ? t->live[i].key == key
		             : t->live[i].key == 0 && t->live[i].cat == c && t->live[i].bytes == bytes) {
			drop(t, i, ph);
			return;
		}
	uint64_t left = bytes;
	for (size_t i = t->nlive; key == 0 && left > 0 && i-- > 0;)
		if (t->live[i].key == 0 && t->live[i].cat == c && t->live[i].bytes <= left) {
			left -= t->live[i].bytes;
			drop(t, i, ph);
		}
	if (left != 0 || key != 0)
		t->unmatched = 1;
}

void theory_trace_matmul(struct theory_trace *t, enum zs_phase ph)
{
	if (t->matmul_run)
		return;
	t->matmul_run = 1;
	/* not live: no free of the walk's names it */
	if (t->workspace > 0)
		push_ev(t, (struct theory_tev){ph, 1, ZS_CAT_SCRATCH, t->workspace, CUDA_ALLOC_WORKSPACE_ID, 0});
}

void theory_trace_release(struct theory_trace *t)
{
	free(t->ev);
	free(t->live);
	memset(t, 0, sizeof *t);
}

void theory_device_overhead(const struct theory_request *req, enum zs_scheme scheme, unsigned world,
                            struct theory_overhead *o)
{
	*o = (struct theory_overhead){0};
	if (req->overhead_given) {
		o->given = 1;
		o->total = (uint64_t)req->overhead;
		return;
	}
	/* docs/schedule.md, "The device's fixed costs", gives each source. */
	o->context = THEORY_CUDA_CONTEXT_BYTES;
	theory_overhead_nccl(req, scheme, world, o);
	o->total = o->context + o->nccl;
}

/* What cudaMalloc may hand out: --device-mem less --reserve less the fixed
 * costs; 0 (no limit) without --device-mem, 1 byte where nothing is left
 * (every segment then fails, as on the GPU). */
static uint64_t capacity_of(const struct theory_request *req, const struct theory_overhead *o)
{
	if (req->device_mem <= 0)
		return 0;
	double cap = theory_request_usable(req) - (double)o->total;
	return cap >= 1 ? (uint64_t)cap : 1;
}

/* Replay tr through a fresh allocator of `capacity` bytes into h. */
static void replay(const struct theory_trace *tr, const struct cuda_alloc_opts *opts, uint64_t capacity,
                   struct theory_held *h)
{
	char *cause = NULL;
	struct cuda_alloc *a = cuda_alloc_create(opts, capacity, &cause);
	if (a == NULL) { /* the options were checked where they were parsed */
		free(cause);
		h->covered = 0;
		return;
	}
	unsigned step = 0;
	for (size_t i = 0; i < tr->n && !h->oom; i++) {
		const struct theory_tev *e = &tr->ev[i];
		/* each step begins with its forward's first block */
		if (e->phase == ZS_PH_FORWARD && (i == 0 || tr->ev[i - 1].phase != ZS_PH_FORWARD))
			step++;
		int rc = e->alloc ? cuda_alloc_alloc(a, e->id, e->bytes, &cause) : cuda_alloc_free(a, e->id, &cause);
		if (rc == CUDA_ALLOC_OOM) {
			h->oom = 1;
			h->oom_step = step;
			h->oom_phase = e->phase;
			h->oom_cat = e->cat;
			h->oom_workspace = e->id == CUDA_ALLOC_WORKSPACE_ID;
			h->oom_bytes = e->bytes;
		} else if (rc != 0) { /* ids are the trace's own: cannot happen */
			free(cause);
			cause = NULL;
			break;
		}
		if (e->alloc && rc == 0)
			cuda_alloc_note(a, &h->run);
	}
	cuda_alloc_stats(a, &h->run.st);
	cuda_alloc_destroy(a);
}

/* The plain loop's trace is its PyTorch step's list (util/autograd.h),
 * block for block as the engine's executor allocates it: the set-up, then
 * each step's lists (ag_step_lists: the first step's own). */
static void trace_events(struct theory_trace *tr, const struct ag_step *s, const struct ag_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct ag_event *e = &ev[i];
		if (e->kind == AG_EV_OP && AG_OP_CUBLAS(e->op)) /* as the engine's executor: ag_exec.c */
			theory_trace_matmul(tr, e->phase);
		if (e->kind != AG_EV_ALLOC && e->kind != AG_EV_FREE)
			continue;
		const struct ag_tensor *t = &s->tensor[e->t];
		if (t->host) /* a CPU scalar under --torch-device cuda: not the device allocator's */
			continue;
		if (e->kind == AG_EV_ALLOC)
			theory_trace_alloc(tr, e->phase, t->cat, t->bytes, (uint64_t)e->t + 1);
		else
			theory_trace_free(tr, e->phase, t->cat, t->bytes, (uint64_t)e->t + 1);
	}
}

static int plain_loop(const struct theory_request *req)
{
	return zs_wrapper_step(req->config) && req->model != NULL;
}

int theory_plain_step(const struct theory_request *req, unsigned world, struct step_params *p, struct ag_step *s)
{
	struct ag_options opt;
	char *cause = NULL;
	step_params_build(p, req->model);
	ag_options_from_config(&opt, req->config, req->config->batch, req->act.seq);
	if (ag_step_build_run(s, req->model, p, &opt, req->config, world ? world : 1, &cause) < 0) {
		free(cause);
		step_params_free(p);
		return -1;
	}
	/* zero1's ranks differ (util/ag_zero1.h): the binding rank's */
	theory_autograd_binding_rank(s, p, world ? world : 1, req->config->steps);
	return 0;
}

static int plain_loop_trace(const struct theory_request *req, unsigned world, struct theory_trace *tr)
{
	const struct zs_config *c = req->config;
	struct step_params p;
	struct ag_step s;
	if (theory_plain_step(req, world, &p, &s) < 0)
		return -1;
	step_params_free(&p);
	trace_events(tr, &s, s.setup, s.nsetup);
	for (unsigned step = 0; step < c->steps; step++) {
		const struct ag_event *ev[2];
		size_t n[2];
		for (unsigned l = 0, nl = ag_step_lists(&s, step, ev, n); l < nl; l++)
			trace_events(tr, &s, ev[l], n[l]);
	}
	ag_step_free(&s);
	return tr->unmatched ? -1 : 0;
}

/* The walk's trace of (scheme, unit, N) over desc d (or the plain loop's),
 * replayed: the allocator limited to what cudaMalloc may hand out, or (limited 0)
 * unlimited: the whole step's allocated peak, for "on allocated". */
static void held_of(const struct theory_request *req, const struct theory_desc *d, enum zs_scheme scheme,
                    enum zs_unit unit, unsigned world, const struct cuda_alloc_opts *opts, int limited,
                    struct theory_held *h)
{
	const struct zs_config *c = req->config;
	struct theory_trace tr = {.steps = c->steps, .workspace = opts->cublas_workspace};
	struct theory_bytes b;
	theory_request_bytes(req, &b);
	*h = (struct theory_held){0};
	theory_device_overhead(req, scheme, world, &h->fixed);
	if ((plain_loop(req) ? plain_loop_trace(req, world, &tr) : theory_walk_trace(d, &b, c, scheme, unit, world, &tr)) == 0) {
		h->covered = 1;
		replay(&tr, opts, limited ? capacity_of(req, &h->fixed) : 0, h);
	}
	theory_trace_release(&tr);
}

static int row_covered(const struct theory_request *req, const struct theory_row *r)
{
	return plain_loop(req) || (req->desc != NULL && (req->shape_known || (req->model != NULL && r->model_sched)));
}

void theory_alloc_held(const struct theory_request *req, const struct theory_row *r,
                       const struct cuda_alloc_opts *opts, struct theory_held *h)
{
	*h = (struct theory_held){0};
	if (row_covered(req, r))
		held_of(req, req->desc, r->scheme, r->unit, r->world, opts, 1, h);
}

/* Whether micro-batch `batch` of row r does not fit: on held (held 1),
 * its replay runs out of memory; on allocated (held 0), the same step's
 * allocated peak, each block as the allocator rounds it, replayed without
 * a limit, is above the usable memory. */
static int misfit_at(const struct theory_request *req, const struct theory_row *r, uint64_t batch, int held)
{
	struct zs_config c = *req->config;
	struct theory_request alt = *req;
	struct theory_desc d;
	struct theory_held h;
	c.batch = (unsigned)batch;
	alt.config = &c;
	alt.desc = NULL;
	theory_desc_build(&d, &alt);
	alt.desc = &d;
	held_of(&alt, &d, r->scheme, r->unit, r->world, req->alloc, held, &h);
	theory_desc_free(&d);
	if (!h.covered)
		return 1;
	return held ? h.oom : (double)h.run.st.allocated_peak > theory_request_usable(req);
}

/* The largest micro-batch that fits on held (held 1) or on allocated
 * (held 0), from `known`, a micro-batch known to fit (0: none known). */
static uint64_t search_max_batch(const struct theory_request *req, const struct theory_row *r, int held,
                                 uint64_t known)
{
	/* Reserved grows with the micro-batch as the walk's peak does (every
	 * activation and scratch block is b times its b = 1 bytes), so the
	 * largest b is found as theory_walk_max_batch finds it, each probe a
	 * replay. */
	if (req->device_mem <= 0 || !row_covered(req, r) || (known == 0 && misfit_at(req, r, 1, held)))
		return 0;
	uint64_t lo = known > 1 ? known : 1, hi = 2 * lo, b = req->config->batch;
	if (b > lo && !misfit_at(req, r, b, held)) {
		lo = b;
		hi = 2 * b;
	}
	int exact = 1;
	while (hi <= THEORY_WALK_MAX_BATCH && hi <= UINT32_MAX &&
	       (exact = req->model == NULL || theory_tfm_exact(req->model, &req->act, hi)) &&
	       !misfit_at(req, r, hi, held)) {
		lo = hi;
		hi *= 2;
	}
	if (hi > THEORY_WALK_MAX_BATCH || hi > UINT32_MAX || !exact)
		return lo; /* the cap: more than any rank runs */
	while (hi - lo > 1) { /* lo fits, hi does not */
		uint64_t mid = lo + (hi - lo) / 2;
		if (!misfit_at(req, r, mid, held))
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

uint64_t theory_alloc_max_batch(const struct theory_request *req, const struct theory_row *r)
{
	return search_max_batch(req, r, 1, 0);
}

uint64_t theory_alloc_max_batch_allocated(const struct theory_request *req, const struct theory_row *r,
                                          uint64_t held)
{
	/* Where a micro-batch fits on held its reserved peak, at least its
	 * allocated peak, is within the usable memory less the fixed costs:
	 * it fits on allocated, so the search starts there and "on allocated"
	 * is never below "on held". */
	return search_max_batch(req, r, 0, held);
}

void theory_alloc_json(cJSON *row, const struct theory_request *req, const struct theory_row *r)
{
	struct theory_held h;
	theory_alloc_held(req, r, req->alloc, &h);
	if (!h.covered) {
		cJSON_AddNullToObject(row, "allocator");
		return;
	}
	cJSON *o = cJSON_AddObjectToObject(row, "allocator");
	double v[ZS_ALLOC_NKEYS];
	zs_alloc_values(&h.run, v);
	for (size_t i = 0; i < ZS_ALLOC_NKEYS; i++)
		zs_json_add_number(o, zs_alloc_keys[i], v[i]);
	cJSON *f = cJSON_AddObjectToObject(o, "device_overhead");
	if (h.fixed.given) {
		cJSON_AddNullToObject(f, "cuda_context_bytes");
		cJSON_AddNullToObject(f, "nccl_bytes");
	} else {
		zs_json_add_number(f, "cuda_context_bytes", (double)h.fixed.context);
		zs_json_add_number(f, "nccl_bytes", (double)h.fixed.nccl);
	}
	theory_nccl_json(f, &h.fixed);
	zs_json_add_number(f, "total_bytes", (double)h.fixed.total);
	/* The headline's largest micro-batch on what the GPU holds (the
	 * row's max_batch is the paper level's): the text's "held" column. */
	if (req->device_mem > 0) {
		uint64_t held = theory_alloc_max_batch(req, r);
		zs_json_add_number(o, "max_batch_held", (double)held);
		zs_json_add_number(o, "max_batch_allocated", (double)theory_alloc_max_batch_allocated(req, r, held));
	} else {
		cJSON_AddNullToObject(o, "max_batch_held");
		cJSON_AddNullToObject(o, "max_batch_allocated");
	}
	if (!h.oom) {
		cJSON_AddNullToObject(o, "oom");
		return;
	}
	cJSON *w = cJSON_AddObjectToObject(o, "oom");
	zs_json_add_number(w, "step", h.oom_step);
	cJSON_AddStringToObject(w, "phase", zs_phase_name(h.oom_phase));
	cJSON_AddStringToObject(w, "category", h.oom_workspace ? "cublas_workspace" : zs_cat_name(h.oom_cat));
	zs_json_add_number(w, "bytes", (double)h.oom_bytes);
}
