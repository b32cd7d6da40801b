/*
 * theory_autograd — the theory of eager PyTorch's plain training loop
 * (--framework torch --wrapper none): the sum of util/autograd.c's step,
 * allocation by allocation (docs/schedule.md, "The PyTorch step").
 *
 * Resident: what the step list's `setup` and `first_step` leave allocated
 * (parameters, buffers, the batch, grads under zero_grad zeros, Adam's m,
 * v and step counters). Peak: the most live after any event of the steady
 * step, its breakdown by the storages' categories at that event, and each
 * phase's own most live (set-up: the resident). Nothing is added: what the
 * list does not allocate the theory does not count.
 */
#include "theory/theory.h"

#include <string.h>

#include <cjson/cJSON.h>

#include "util/ag_ddp.h"
#include "util/autograd.h"
#include "util/step.h"
#include "util/util.h"

static int build(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq, unsigned world,
                 struct step_params *p, struct ag_step *s, char **cause)
{
	struct ag_options o;
	ag_options_from_config(&o, c, batch, seq);
	step_params_build(p, m);
	/* under --wrapper ddp, DDP's pass (util/ag_ddp.h): a rank's bytes are
	 * the same at every N; under fsdp FSDP's (util/ag_fsdp.h), its shards
	 * 1/N of each unit */
	if (ag_step_build_run(s, m, p, &o, c, world, cause) < 0) {
		step_params_free(p);
		return -1;
	}
	return 0;
}

int theory_autograd_check(const struct zs_model *m, const struct zs_config *c, uint64_t seq, int bf16,
                          char **cause)
{
	if (c->precision != ZS_FP32 || bf16)
		return zs_fail(cause, "--precision %s: the PyTorch step (--wrapper %s) is described in fp32 "
		               "only yet (give --precision fp32)", bf16 ? "bf16" : zs_precision_name(c->precision),
		               zs_wrapper_name(c->wrapper));
	struct step_params p;
	struct ag_step s;
	if (build(m, c, 1, seq, c->wrapper == ZS_WRAPPER_FSDP ? 2 : 1, &p, &s, cause) < 0)
		return -1;
	ag_step_free(&s);
	step_params_free(&p);
	return 0;
}

static void apply(const struct ag_step *s, const struct ag_event *e, uint64_t cur[ZS_NCATS], uint64_t *total)
{
	if (e->kind != AG_EV_ALLOC && e->kind != AG_EV_FREE)
		return;
	const struct ag_tensor *t = &s->tensor[e->t];
	if (e->kind == AG_EV_ALLOC) {
		cur[t->cat] += t->bytes;
		*total += t->bytes;
	} else {
		cur[t->cat] -= t->bytes;
		*total -= t->bytes;
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

int theory_autograd_schedule(const struct zs_model *m, const struct zs_config *c, uint64_t batch, uint64_t seq,
                             unsigned world, struct theory_schedule *out, char **cause)
{
	struct step_params p;
	struct ag_step s;
	if (build(m, c, batch, seq, world, &p, &s, cause) < 0)
		return -1;
	*out = (struct theory_schedule){ 0 };
	uint64_t cur[ZS_NCATS] = { 0 }, total = 0;
	for (size_t i = 0; i < s.nsetup; i++)
		apply(&s, &s.setup[i], cur, &total);
	for (size_t i = 0; i < s.nfirst; i++)
		apply(&s, &s.first_step[i], cur, &total);
	out->params = p.numel;
	out->nunits = 1;
	out->shard_elements = out->padded_elements = p.numel;
	out->resident_bytes = total;
	memcpy(out->resident_breakdown, cur, sizeof cur);
	out->peak_bytes = total;
	memcpy(out->peak_breakdown, cur, sizeof cur);
	out->has_phases = 1;
	out->phase_entered[ZS_PH_SETUP] = 1;
	out->phase_peak[ZS_PH_SETUP] = total;
	for (size_t i = 0; i < s.nevents; i++) {
		const struct ag_event *e = &s.event[i];
		apply(&s, e, cur, &total);
		count_collective(&s, e, world, out);
		out->phase_entered[e->phase] = 1;
		if (total > out->phase_peak[e->phase])
			out->phase_peak[e->phase] = total;
		if (total > out->peak_bytes) {
			out->peak_bytes = total;
			memcpy(out->peak_breakdown, cur, sizeof cur);
		}
	}
	ag_step_free(&s);
	step_params_free(&p);
	return 0;
}

void theory_autograd_marks_json(cJSON *parent, const struct zs_model *m, const struct zs_config *c, uint64_t batch,
                                uint64_t seq, unsigned world)
{
	struct step_params p;
	struct ag_step s;
	if (build(m, c, batch, seq, world, &p, &s, NULL) < 0)
		return;
	uint64_t cur[ZS_NCATS] = { 0 }, total = 0;
	for (size_t i = 0; i < s.nsetup; i++)
		apply(&s, &s.setup[i], cur, &total);
	for (size_t i = 0; i < s.nfirst; i++)
		apply(&s, &s.first_step[i], cur, &total);
	cJSON *o = cJSON_AddObjectToObject(parent, "marks");
	if (o == NULL)
		zs_oom(__FILE__, __LINE__);
	for (size_t i = 0; i < s.nevents; i++) {
		apply(&s, &s.event[i], cur, &total);
		if (s.event[i].kind == AG_EV_MARK)
			zs_json_add_number(o, s.event[i].label, (double)total);
	}
	ag_step_free(&s);
	step_params_free(&p);
}
