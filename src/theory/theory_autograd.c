/*
 * theory_autograd — the theory of eager PyTorch's plain training loop
 * (--framework torch --wrapper none): the sum of util/autograd.c's step,
 * allocation by allocation (docs/schedule.md, "The PyTorch step").
 *
 * Resident: what the step list's `setup` and `first_step` (or its first
 * step's own list, `step1`) leave allocated (parameters, buffers, the
 * batch, grads under zero_grad zeros, Adam's m, v and step counters).
 * Peak: the most live after any event of the run's steps (the first
 * step's own list where there is one, then the steady step, as --steps
 * runs them), its breakdown by the storages' categories at that event,
 * and each phase's own most live (set-up: the resident). Nothing is added: what the
 * list does not allocate the theory does not count. Under torch's zero1
 * (--wrapper ddp --schemes zero1, util/ag_zero1.h) the list holds each
 * rank's own sections: it is summed rank by rank, and the figures are the
 * binding rank's (the highest peak, the first of equals).
 */
#include "theory/theory.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "util/ag_ddp.h"
#include "util/autograd.h"
#include "util/step.h"
#include "util/util.h"

/* Whether each rank walks a list of its own: a mixture's ranks routing
 * apart under DDP (zs_config.moe_run_ranks), each rank's routed tensors
 * sized by its own counts. */
static int own_lists(const struct zs_config *c, unsigned world)
{
	return c->moe_run != NULL && c->moe_run_ranks > 1 && world > 1;
}

/* Rank `rank`'s list of step `step` of the routing file's run (a
 * mixture's, zs_config.moe_run: each step's list its own routing's; under
 * own_lists each rank's its own), else the one list every rank and step
 * walks. */
static int build_step(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq,
                      unsigned world, unsigned rank, unsigned step, struct step_params *p, struct ag_step *s,
                      char **cause)
{
	struct ag_options o;
	ag_options_from_config(&o, c, batch, seq);
	/* (a step's lists: under --grad-accum K its K micro-steps' blocks) */
	if (c->moe_run != NULL)
		o.moe_counts = c->moe_run + ((size_t)(own_lists(c, world) ? rank : 0) * c->moe_run_steps + step) *
		                                    (o.grad_accum > 1 ? o.grad_accum : 1) * m->layers * m->experts;
	step_params_build(p, m);
	/* under --wrapper ddp, DDP's pass (util/ag_ddp.h): under dp a rank's
	 * bytes are the same at every N; under zero1 each rank's are its own;
	 * under fsdp FSDP's (util/ag_fsdp.h), its shards 1/N of each unit */
	int rc = ag_step_build_run(s, m, p, &o, c, world ? world : 1, cause);
	if (rc < 0)
		step_params_free(p);
	return rc;
}

/* The steady step's list (the run's last). */
static int build(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq, unsigned world,
                 unsigned rank, struct step_params *p, struct ag_step *s, char **cause)
{
	unsigned last = c->moe_run != NULL && c->moe_run_steps > 0 ? c->moe_run_steps - 1 : 0;
	return build_step(m, c, batch, seq, world, rank, last, p, s, cause);
}

int theory_autograd_check(const struct zs_model *m, const struct zs_config *c, uint64_t seq, int bf16,
                          char **cause)
{
	/* under --wrapper deepspeed, mixed (and bf16, its bytes) is DeepSpeed's
	 * bf16: module.bfloat16() (util/config.c check_ds_wrapper) */
	if ((c->precision == ZS_MIXED || bf16) && c->wrapper != ZS_WRAPPER_DEEPSPEED)
		return zs_fail(cause, "--precision %s: the PyTorch step (--wrapper %s) is PyTorch's own: fp32 or "
		               "autocast (give --precision fp32 or amp-bf16)", bf16 ? "bf16" : zs_precision_name(c->precision),
		               zs_wrapper_name(c->wrapper));
	struct step_params p;
	struct ag_step s;
	/* a mixture's routing is its batch's (ag_options.moe_counts); under
	 * --torch-device cuda the step's tokens decide what is described
	 * (AG_CUDA_EMB_FAST_TOKENS): the run's batch, at most 3,072 tokens into
	 * a trained embedding */
	/* (FSDP's use_orig_params: what is built depends on N, each the run lists) */
	int each = c->wrapper == ZS_WRAPPER_FSDP && c->fsdp_orig_params;
	for (size_t k = 0; k < (each ? c->nworld : 1); k++) {
		int rc = build(m, c, m->experts > 0 || c->torch_device == ZS_DEVICE_CUDA ? c->batch : 1, seq,
		               each ? c->world[k] : c->wrapper == ZS_WRAPPER_FSDP ? 2 : 1, 0, &p, &s, cause);
		if (rc < 0)
			return rc;
		ag_step_free(&s);
		step_params_free(&p);
	}
	return 0;
}

/* Event e on rank `rank` (zero1's sections are each one rank's,
 * util/ag_zero1.h). */
static void apply(const struct ag_step *s, const struct ag_event *e, unsigned rank, uint64_t cur[ZS_NCATS],
                  uint64_t *total)
{
	if ((e->kind != AG_EV_ALLOC && e->kind != AG_EV_FREE) || !ag_event_on_rank(e, rank))
		return;
	const struct ag_tensor *t = &s->tensor[e->t];
	if (e->kind == AG_EV_ALLOC) {
		cur[t->cat] += ag_device_bytes(t);
		*total += ag_device_bytes(t);
	} else {
		cur[t->cat] -= ag_device_bytes(t);
		*total -= ag_device_bytes(t);
	}
}

/* What a collective of the step (DDP's, util/ag_ddp.h; FSDP's,
 * util/ag_fsdp.h) sends a rank, counted as every other collective of the
 * theory is: the ring over the buffer padded to N·ceil(n/N) elements, an
 * all-reduce 2(N-1)/N of it, a broadcast, reduce-scatter or all-gather
 * (N-1)/N; nothing at N = 1. */
static void count_collective(const struct ag_step *s, const struct ag_event *e, unsigned world,
                             struct theory_schedule *out)
{
	if (e->kind != AG_EV_OP || world < 2 ||
	    (e->op != AG_OP_ALL_REDUCE_SUM_ && e->op != AG_OP_BROADCAST_ && e->op != AG_OP_ALL_GATHER &&
	     e->op != AG_OP_REDUCE_SCATTER_SUM))
		return;
	/* the whole buffer: an all-gather's output, any other's input */
	const struct ag_tensor *t = &s->tensor[e->op == AG_OP_ALL_GATHER ? e->out[0] : e->in[0]];
	uint64_t n = 1;
	for (unsigned k = 0; k < t->ndim; k++)
		n *= t->shape[k];
	uint64_t elems = (uint64_t)(world - 1) * ((n + world - 1) / world) * (e->op == AG_OP_ALL_REDUCE_SUM_ ? 2 : 1);
	out->comm_elements += elems;
	out->comm_bytes += elems * ag_dtype_size(t->dtype);
}

/* The ranks whose bytes differ (zero1's: every one; else rank 0 stands
 * for all). */
static unsigned ranks_of(const struct ag_step *s, unsigned world)
{
	for (size_t i = 0; i < s->nsetup + s->nfirst + s->nevents; i++) {
		const struct ag_event *e = i < s->nsetup ? &s->setup[i]
		                           : i < s->nsetup + s->nfirst ? &s->first_step[i - s->nsetup]
		                                                       : &s->event[i - s->nsetup - s->nfirst];
		if (e->only_rank != 0)
			return world ? world : 1;
	}
	for (size_t i = 0; i < s->nstep1; i++)
		if (s->step1[i].only_rank != 0)
			return world ? world : 1;
	for (size_t i = 0; i < s->nstep2; i++)
		if (s->step2[i].only_rank != 0)
			return world ? world : 1;
	return 1;
}

/* Events ev[0..n) into out: each phase's most and the peak (the first
 * event to reach it, as a tracker keeps it); collectives counted with
 * `comm`. */
static void walk_events(const struct ag_step *s, const struct ag_event *ev, size_t n, unsigned rank, unsigned world,
                        int comm, uint64_t cur[ZS_NCATS], uint64_t *total, struct theory_schedule *out)
{
	for (size_t i = 0; i < n; i++) {
		const struct ag_event *e = &ev[i];
		apply(s, e, rank, cur, total);
		if (comm)
			count_collective(s, e, world, out);
		out->phase_entered[e->phase] = 1;
		if (*total > out->phase_peak[e->phase])
			out->phase_peak[e->phase] = *total;
		if (*total > out->peak_bytes) {
			out->peak_bytes = *total;
			out->peak_phase = e->phase;
			memcpy(out->peak_breakdown, cur, ZS_NCATS * sizeof *cur);
		}
	}
}

/* The walk of a step whose first step is a list of its own (step1), over
 * `steps` steps: the set-up (its own peak counts), the first step from
 * the set-up's state (its peak first_step_peak), then the second step's
 * list (ag_step_lists: DDP's own step2, or the steady step) and, from
 * the third on, the steady step (a later one runs what the third does).
 * The resident is the state after the first step, which every later one
 * ends in too; the collectives the last step's. */
static void walk_step1(const struct ag_step *s, const struct step_params *p, unsigned rank, unsigned world,
                       unsigned steps, struct theory_schedule *out)
{
	*out = (struct theory_schedule){ 0 };
	uint64_t cur[ZS_NCATS] = { 0 }, total = 0;
	out->params = p->numel;
	out->nunits = 1;
	out->shard_elements = out->padded_elements = p->numel;
	out->has_phases = 1;
	for (size_t i = 0; i < s->nsetup; i++) {
		apply(s, &s->setup[i], rank, cur, &total);
		if (total > out->peak_bytes) {
			out->peak_bytes = total;
			memcpy(out->peak_breakdown, cur, sizeof cur);
		}
	}
	struct theory_schedule one = { 0 }; /* the first step's own most */
	uint64_t c1[ZS_NCATS], t1 = total, t0 = total;
	memcpy(c1, cur, sizeof cur);
	walk_events(s, s->step1, s->nstep1, rank, world, 0, c1, &t1, &one);
	out->first_step_peak = one.peak_bytes > total ? one.peak_bytes : total;
	walk_events(s, s->step1, s->nstep1, rank, world, steps == 1, cur, &total, out);
	out->resident_bytes = total;
	memcpy(out->resident_breakdown, cur, sizeof cur);
	/* the state each step starts from (docs/formats.md): the first
	 * step's (the set-up's end) where it is the only one, as a --steps 1
	 * --timeline records it; else the state after it, every later one's */
	uint64_t setup_phase = steps > 1 ? total : t0;
	/* the steps after the first, up to the first steady one (the
	 * second's own list, then the steady step; the collectives counted
	 * in the last walked) */
	unsigned last = s->step2 != NULL ? 2 : 1;
	if (steps - 1 < last)
		last = steps - 1;
	for (unsigned t = 1; t <= last; t++) {
		const struct ag_event *ev[2];
		size_t n[2];
		for (unsigned l = 0, nl = ag_step_lists(s, t, ev, n); l < nl; l++)
			walk_events(s, ev[l], n[l], rank, world, t == last, cur, &total, out);
	}
	out->phase_entered[ZS_PH_SETUP] = 1;
	out->phase_peak[ZS_PH_SETUP] = setup_phase;
	/* the traffic of steps 1, 2 and the steady one apart (DDP's step 1
	 * reduces one bucket, its step 2 broadcasts the rebuilt buckets'
	 * indices): where they differ, the mean over --steps, as measure
	 * reports it (steps_differ) */
	struct theory_schedule c[3];
	for (unsigned t = 0; t < 3; t++) {
		const struct ag_event *ev[2];
		size_t n[2];
		c[t] = (struct theory_schedule){ 0 };
		for (unsigned l = 0, nl = ag_step_lists(s, t, ev, n); l < nl; l++)
			for (size_t i = 0; i < n[l]; i++)
				count_collective(s, &ev[l][i], world, &c[t]);
	}
	if (steps > 0 && (c[0].comm_bytes != c[2].comm_bytes || c[1].comm_bytes != c[2].comm_bytes)) {
		double later = steps > 2 ? steps - 2 : 0;
		out->steps_differ = 1;
		out->comm_bytes_mean = ((double)c[0].comm_bytes + (steps > 1 ? (double)c[1].comm_bytes : 0) +
		                        later * (double)c[2].comm_bytes) / steps;
		out->comm_elements_mean = ((double)c[0].comm_elements + (steps > 1 ? (double)c[1].comm_elements : 0) +
		                           later * (double)c[2].comm_elements) / steps;
	}
}

/* Rank `rank`'s sum of the list into out (its bytes; comm: world's) over
 * `steps` steps (walk_step1 where the first step is a list of its
 * own). */
static void walk(const struct ag_step *s, const struct step_params *p, unsigned rank, unsigned world,
                 unsigned steps, struct theory_schedule *out)
{
	if (s->step1 != NULL) {
		walk_step1(s, p, rank, world, steps, out);
		return;
	}
	*out = (struct theory_schedule){ 0 };
	uint64_t cur[ZS_NCATS] = { 0 }, total = 0, setup_peak = 0, setup_at[ZS_NCATS] = { 0 };
	/* the set-up's own peak counts in peak_bytes (not in its phase's,
	 * the state the steps start from): DDP's construction flattens every
	 * parameter, frozen ones too, into one broadcast copy (util/ag_ddp.c
	 * broadcast_coalesced), under LoRA at short sequences the run's peak
	 * (PyTorch 1.13's and the engine's too: tests/ft_lora.sh's seq 16 row) */
	for (size_t i = 0; i < s->nsetup; i++) {
		apply(s, &s->setup[i], rank, cur, &total);
		if (total > setup_peak) {
			setup_peak = total;
			memcpy(setup_at, cur, sizeof cur);
		}
	}
	for (size_t i = 0; i < s->nfirst; i++)
		apply(s, &s->first_step[i], rank, cur, &total);
	out->params = p->numel;
	out->nunits = 1;
	out->shard_elements = out->padded_elements = p->numel;
	out->resident_bytes = total;
	memcpy(out->resident_breakdown, cur, sizeof cur);
	out->peak_bytes = total > setup_peak ? total : setup_peak;
	memcpy(out->peak_breakdown, total > setup_peak ? cur : setup_at, sizeof cur);
	out->has_phases = 1;
	out->phase_entered[ZS_PH_SETUP] = 1;
	out->phase_peak[ZS_PH_SETUP] = total; /* the state each step starts from (docs/formats.md) */
	for (size_t i = 0; i < s->nevents; i++) {
		const struct ag_event *e = &s->event[i];
		apply(s, e, rank, cur, &total);
		count_collective(s, e, world, out);
		out->phase_entered[e->phase] = 1;
		if (total > out->phase_peak[e->phase])
			out->phase_peak[e->phase] = total;
		if (total > out->peak_bytes) {
			out->peak_bytes = total;
			out->peak_phase = e->phase;
			memcpy(out->peak_breakdown, cur, sizeof cur);
		}
	}
}

/* The binding rank: the highest peak, the first of equals (0 where the
 * ranks are equal). Of one list walked by every rank. */
static unsigned binding_of(const struct ag_step *s, const struct step_params *p, unsigned world, unsigned steps)
{
	unsigned n = ranks_of(s, world), b = 0;
	uint64_t most = 0;
	for (unsigned r = 0; n > 1 && r < n; r++) {
		struct theory_schedule one;
		walk(s, p, r, world, steps, &one);
		if (r == 0 || one.peak_bytes > most) {
			most = one.peak_bytes;
			b = r;
		}
	}
	return b;
}

/* Rank r's sum into out: the steady step's, its peak the most of the
 * run's steps' lists after the first (a mixture's routing file's run:
 * each step routes its own way; the first step to reach it, as measure's
 * tracker keeps its peak's breakdown; its lists under own_lists rank r's
 * own). Not the first step's: the list runs it with the grads and Adam's
 * state its set-up made, where 1.13 makes the state after the first
 * backward (its first step peaks below the others), so measure leaves it
 * out too (ag_exec.c's tfm_run). */
static int walk_rank(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq,
                     unsigned world, unsigned r, struct theory_schedule *out, char **cause)
{
	unsigned S = c->moe_run != NULL && c->moe_run_steps > 0 ? c->moe_run_steps : 1;
	struct theory_schedule most = {0};
	for (unsigned t = S > 1; t < S; t++) {
		struct step_params p;
		struct ag_step s;
		struct theory_schedule one;
		if (build_step(m, c, batch, seq, world, r, c->moe_run != NULL ? t : 0, &p, &s, cause) < 0)
			return -1;
		walk(&s, &p, r, world, c->steps, &one);
		ag_step_free(&s);
		step_params_free(&p);
		if (t == (S > 1) || one.peak_bytes > most.peak_bytes)
			most = one;
		for (int ph = 0; ph < ZS_NPHASES; ph++)
			if (one.phase_peak[ph] > most.phase_peak[ph])
				most.phase_peak[ph] = one.phase_peak[ph];
		if (t + 1 == S) { /* the steady step's, but the run's peak */
			uint64_t peak = most.peak_bytes, at[ZS_NCATS], ph[ZS_NPHASES];
			enum zs_phase phase = most.peak_phase;
			memcpy(at, most.peak_breakdown, sizeof at);
			memcpy(ph, most.phase_peak, sizeof ph);
			*out = one;
			out->peak_bytes = peak;
			out->peak_phase = phase;
			memcpy(out->peak_breakdown, at, sizeof at);
			memcpy(out->phase_peak, ph, sizeof ph);
		}
	}
	return 0;
}

/* How many ranks' sums differ (the rest are rank 0's): under own_lists
 * every rank's, else the steady list's ranks_of; 0 with *cause where the
 * list is not built. */
static unsigned ranks_differ(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq,
                             unsigned world, char **cause)
{
	struct step_params p;
	struct ag_step s;
	if (own_lists(c, world))
		return world;
	if (build(m, c, batch, seq, world, 0, &p, &s, cause) < 0)
		return 0;
	unsigned n = ranks_of(&s, world);
	ag_step_free(&s);
	step_params_free(&p);
	return n;
}

/* A mixture's (zs_config.moe_run): every rank's sum (each[world]) and the
 * binding rank (the highest peak, the first of equals); -1 with *cause. */
static int run_ranks(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq,
                     unsigned world, struct theory_schedule *each, unsigned *b, char **cause)
{
	unsigned n = ranks_differ(m, c, batch, seq, world, cause);
	if (n == 0)
		return -1;
	*b = 0;
	for (unsigned r = 0; r < (world ? world : 1); r++) {
		if (r >= n)
			each[r] = each[0];
		else if (walk_rank(m, c, batch, seq, world, r, &each[r], cause) < 0)
			return -1;
		if (each[r].peak_bytes > each[*b].peak_bytes)
			*b = r;
	}
	return 0;
}

/* Keep the events of rank `rank` (and every rank's) in list ev[0..*n). */
static void keep_rank(struct ag_event *ev, size_t *n, unsigned rank)
{
	size_t k = 0;
	for (size_t i = 0; i < *n; i++)
		if (ag_event_on_rank(&ev[i], rank))
			ev[k++] = ev[i];
	*n = k;
}

void theory_autograd_binding_rank(struct ag_step *s, const struct step_params *p, unsigned world, unsigned steps)
{
	unsigned b = binding_of(s, p, world, steps);
	keep_rank(s->setup, &s->nsetup, b);
	keep_rank(s->first_step, &s->nfirst, b);
	keep_rank(s->event, &s->nevents, b);
	keep_rank(s->step1, &s->nstep1, b);
	keep_rank(s->step2, &s->nstep2, b);
}

int theory_autograd_ranks(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq,
                          unsigned world, uint64_t *resident, uint64_t *peak, unsigned *binding, char **cause)
{
	struct step_params p;
	struct ag_step s;
	if (c->moe_run != NULL) {
		struct theory_schedule *each = zs_calloc(world ? world : 1, sizeof *each);
		int rc = run_ranks(m, c, batch, seq, world, each, binding, cause);
		for (unsigned r = 0; rc == 0 && r < (world ? world : 1); r++) {
			resident[r] = each[r].resident_bytes;
			peak[r] = each[r].peak_bytes;
		}
		free(each);
		return rc;
	}
	if (build(m, c, batch, seq, world, 0, &p, &s, cause) < 0)
		return -1;
	unsigned n = ranks_of(&s, world);
	for (unsigned r = 0; r < (world ? world : 1); r++) {
		struct theory_schedule one;
		walk(&s, &p, r < n ? r : 0, world, c->steps, &one); /* past n: rank 0's bytes are every rank's */
		resident[r] = one.resident_bytes;
		peak[r] = one.peak_bytes;
	}
	*binding = binding_of(&s, &p, world, c->steps);
	ag_step_free(&s);
	step_params_free(&p);
	return 0;
}

int theory_autograd_schedule(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq,
                             unsigned world, struct theory_schedule *out, char **cause)
{
	struct step_params p;
	struct ag_step s;
	if (c->moe_run != NULL) {
		struct theory_schedule *each = zs_calloc(world ? world : 1, sizeof *each);
		unsigned b;
		int rc = run_ranks(m, c, batch, seq, world, each, &b, cause);
		if (rc == 0)
			*out = each[b];
		free(each);
		return rc;
	}
	if (build(m, c, batch, seq, world, 0, &p, &s, cause) < 0)
		return -1;
	walk(&s, &p, binding_of(&s, &p, world, c->steps), world, c->steps, out);
	ag_step_free(&s);
	step_params_free(&p);
	return 0;
}

/* Rank `rank`'s live bytes at each mark of the run's last step (of
 * `steps`), into object o: the steady step's, or with --steps 1 the first
 * step's own list where there is one (with --steps 2 the second's). */
static void marks_of(cJSON *o, const struct ag_step *s, unsigned rank, unsigned steps)
{
	uint64_t cur[ZS_NCATS] = { 0 }, total = 0;
	const struct ag_event *ev = s->event;
	size_t n = s->nevents;
	for (size_t i = 0; i < s->nsetup; i++)
		apply(s, &s->setup[i], rank, cur, &total);
	if (s->step1 != NULL && steps == 1) {
		ev = s->step1;
		n = s->nstep1;
	} else if (s->step1 != NULL) {
		for (size_t i = 0; i < s->nstep1; i++)
			apply(s, &s->step1[i], rank, cur, &total);
	}
	if (s->step2 != NULL && steps == 2) {
		ev = s->step2;
		n = s->nstep2;
	} else if (s->step2 != NULL && steps > 2) {
		for (size_t i = 0; i < s->nstep2; i++)
			apply(s, &s->step2[i], rank, cur, &total);
	}
	for (size_t i = 0; i < s->nfirst; i++)
		apply(s, &s->first_step[i], rank, cur, &total);
	for (size_t i = 0; i < n; i++) {
		apply(s, &ev[i], rank, cur, &total);
		if (ev[i].kind == AG_EV_MARK)
			zs_json_add_number(o, ev[i].label, (double)total);
	}
}

/* Rank r's marks into o: of s, or under own_lists of its own list. */
static void rank_marks(cJSON *o, const struct ag_step *s, const struct zs_model *m, const struct zs_config *c,
                       uint64_t batch, uint64_t seq, unsigned world, unsigned r)
{
	struct step_params p;
	struct ag_step own;
	if (!own_lists(c, world)) {
		marks_of(o, s, r, c->steps);
		return;
	}
	if (build(m, c, batch, seq, world, r, &p, &own, NULL) < 0)
		return;
	marks_of(o, &own, r, c->steps);
	ag_step_free(&own);
	step_params_free(&p);
}

/* rank_marks' arguments but the rank, for zs_json_rank_marks. */
struct marks_ctx {
	const struct ag_step *s;
	const struct zs_model *m;
	const struct zs_config *c;
	uint64_t batch, seq;
	unsigned world;
};
static void each_rank_marks(cJSON *o, unsigned r, const void *ctx)
{
	const struct marks_ctx *x = ctx;
	rank_marks(o, x->s, x->m, x->c, x->batch, x->seq, x->world, r);
}

void theory_autograd_marks_json(cJSON *parent, const struct zs_model *m, const struct zs_config *c, uint64_t batch,
                                uint64_t seq, unsigned world)
{
	struct step_params p;
	struct ag_step s;
	if (build(m, c, batch, seq, world, 0, &p, &s, NULL) < 0)
		return;
	/* the binding rank's (theory_autograd_schedule's) */
	unsigned n = ranks_of(&s, world), b = binding_of(&s, &p, world, c->steps);
	if (c->moe_run != NULL) { /* a mixture's run: the binding rank of its steps' peaks */
		struct theory_schedule *each = zs_calloc(world ? world : 1, sizeof *each);
		n = ranks_differ(m, c, batch, seq, world, NULL);
		if (run_ranks(m, c, batch, seq, world, each, &b, NULL) < 0)
			n = 0;
		free(each);
	}
	cJSON *o = n ? cJSON_AddObjectToObject(parent, "marks") : NULL;
	if (n && o == NULL)
		zs_oom(__FILE__, __LINE__);
	if (n)
		rank_marks(o, &s, m, c, batch, seq, world, b);
	if (n > 1) { /* zero1's, a mixture's ranks routing apart: the rank, and every rank's marks in per_rank */
		zs_json_add_number(parent, "marks_rank", b);
		cJSON *per = cJSON_GetObjectItemCaseSensitive(parent, "per_rank");
		if (per == NULL && (per = cJSON_AddObjectToObject(parent, "per_rank")) == NULL)
			zs_oom(__FILE__, __LINE__);
		const struct marks_ctx x = { &s, m, c, batch, seq, world };
		zs_json_rank_marks(per, n, each_rank_marks, &x);
	}
	ag_step_free(&s);
	step_params_free(&p);
}
