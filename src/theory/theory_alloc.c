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

void theory_trace_release(struct theory_trace *t)
{
	free(t->ev);
	free(t->live);
	memset(t, 0, sizeof *t);
}

/* The plain loop's trace is its PyTorch step's list (util/autograd.h),
 * block for block as the engine's executor allocates it: the set-up, then
 * each step's events, the first step's own list before its first. */
static void trace_events(struct theory_trace *tr, const struct ag_step *s, const struct ag_event *ev, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct ag_event *e = &ev[i];
		if (e->kind != AG_EV_ALLOC && e->kind != AG_EV_FREE)
			continue;
		const struct ag_tensor *t = &s->tensor[e->t];
		if (e->kind == AG_EV_ALLOC)
			theory_trace_alloc(tr, e->phase, t->cat, t->bytes, (uint64_t)e->t + 1);
		else
			theory_trace_free(tr, e->phase, t->cat, t->bytes, (uint64_t)e->t + 1);
	}
}

static int plain_loop_trace(const struct theory_request *req, struct theory_trace *tr)
{
	const struct zs_config *c = req->config;
	struct step_params p;
	struct ag_options o;
	struct ag_step s;
	char *cause = NULL;
	step_params_build(&p, req->model);
	ag_options_from_config(&o, c, c->batch, req->act.seq);
	int rc = ag_step_build(&s, req->model, &p, &o, &cause);
	step_params_free(&p);
	if (rc != 0) {
		free(cause);
		return -1;
	}
	trace_events(tr, &s, s.setup, s.nsetup);
	for (unsigned step = 0; step < c->steps; step++) {
		if (step == 0)
			trace_events(tr, &s, s.first_step, s.nfirst);
		trace_events(tr, &s, s.event, s.nevents);
	}
	ag_step_free(&s);
	return tr->unmatched ? -1 : 0;
}

void theory_alloc_json(cJSON *row, const struct theory_request *req, const struct theory_row *r)
{
	const struct zs_config *c = req->config;
	struct theory_trace tr = {.steps = c->steps};
	struct theory_bytes b;
	int plain = c->wrapper == ZS_WRAPPER_NONE && req->model != NULL;
	int covered = plain || (req->desc != NULL && (req->shape_known || (req->model != NULL && r->model_sched)));
	theory_request_bytes(req, &b);
	if (!covered || (plain ? plain_loop_trace(req, &tr)
	                       : theory_walk_trace(req->desc, &b, c, r->scheme, r->unit, r->world, &tr)) != 0) {
		theory_trace_release(&tr);
		cJSON_AddNullToObject(row, "allocator");
		return;
	}
	/* cudaMalloc hands out what --device-mem leaves after --reserve. */
	double usable = req->device_mem > 0 ? theory_request_usable(req) : 0;
	char *cause = NULL;
	struct cuda_alloc *a = cuda_alloc_create(req->alloc, usable > 0 ? (uint64_t)usable : 0, &cause);
	if (a == NULL) { /* the options were checked where they were parsed */
		free(cause);
		theory_trace_release(&tr);
		cJSON_AddNullToObject(row, "allocator");
		return;
	}
	struct cuda_alloc_run run;
	memset(&run, 0, sizeof run);
	struct theory_tev oom_ev; /* a copy: the trace is released before it is written */
	const struct theory_tev *oom = NULL;
	unsigned step = 0, oom_step = 0;
	for (size_t i = 0; i < tr.n && oom == NULL; i++) {
		const struct theory_tev *e = &tr.ev[i];
		/* each step begins with its forward's first block */
		if (e->phase == ZS_PH_FORWARD && (i == 0 || tr.ev[i - 1].phase != ZS_PH_FORWARD))
			step++;
		int rc = e->alloc ? cuda_alloc_alloc(a, e->id, e->bytes, &cause) : cuda_alloc_free(a, e->id, &cause);
		if (rc == CUDA_ALLOC_OOM) {
			oom_ev = *e;
			oom = &oom_ev;
			oom_step = step;
		} else if (rc != 0) { /* ids are the trace's own: cannot happen */
			free(cause);
			cause = NULL;
			oom = NULL;
			break;
		}
		if (e->alloc && rc == 0)
			cuda_alloc_note(a, &run);
	}
	cuda_alloc_stats(a, &run.st);
	cuda_alloc_destroy(a);
	theory_trace_release(&tr);

	cJSON *o = cJSON_AddObjectToObject(row, "allocator");
	double v[ZS_ALLOC_NKEYS];
	zs_alloc_values(&run, v);
	for (size_t i = 0; i < ZS_ALLOC_NKEYS; i++)
		zs_json_add_number(o, zs_alloc_keys[i], v[i]);
	if (oom == NULL) {
		cJSON_AddNullToObject(o, "oom");
		return;
	}
	cJSON *w = cJSON_AddObjectToObject(o, "oom");
	zs_json_add_number(w, "step", oom_step);
	cJSON_AddStringToObject(w, "phase", zs_phase_name(oom->phase));
	cJSON_AddStringToObject(w, "category", zs_cat_name(oom->cat));
	zs_json_add_number(w, "bytes", (double)oom->bytes);
}
