/*
 * theory_tfm — the paper level for transformers: parameters per unit
 * from a Hugging Face shape (util/model.h), activations from Korthikanti
 * et al. (2022), Table 2 without parallelism, and the peak they make with
 * the model states of ZeRO (SC'20) and the transients of docs/schedule.md.
 *
 * Parameters are the step description's (util/step.h: Hugging Face's
 * tensors, their shapes and modules, built from the config), summed per
 * unit; they give the published counts (tests/test_theory.c).
 *
 * Activations (Korthikanti §4.1, Table 2), with 2-byte activations:
 * sbh(34 + 5as/h) per layer; 34sbh with selective recomputation (the
 * attention scores, 5as²b, are recomputed); 2sbh with full (only the
 * layer input is kept). Flash attention never stores the scores: the
 * 5as/h term goes. Outside the layers, as the paper lists them: the
 * embeddings' dropout mask sbh (gpt2: llama has no dropout), the final
 * norm's input 2sbh, the head's input 2sbh, and the fp32 logits 4sbv the
 * loss keeps, with their gradient 4sbv at the start of backward. In fp32
 * precision every 2-byte term doubles (the masks stay 1 byte).
 * docs/schedule.md says where the formula does not fit a family exactly.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "theory/theory.h"
#include "util/step.h"
#include "util/util.h"

static const char *const act_names[THEORY_NACTS] = {
	"layers", "recomputed_layer", "embedding_dropout_mask", "final_norm_input",
	"head_input", "logits", "logits_grad",
};

const char *theory_act_name(enum theory_act a)
{
	return a < THEORY_NACTS ? act_names[a] : "?";
}

/* ------------------------------------------------------------------------ */
/* Parameters */

/* The units of `--unit layer`, from the description's layers (util/step.h). */
void theory_units_of(const struct step_params *p, struct theory_units *u)
{
	u->embeddings = p->layer[0].numel;
	u->layers = p->nlayers - 2;
	u->block = u->layers > 0 ? p->layer[1].numel : 0;
	u->head = p->layer[p->nlayers - 1].numel;
}

void theory_tfm_units(const struct zs_model *m, struct theory_units *u)
{
	struct step_params p;

	step_params_build(&p, m);
	theory_units_of(&p, u);
	step_params_free(&p);
}

uint64_t theory_tfm_params(const struct zs_model *m)
{
	return step_params_count(m);
}

/* ------------------------------------------------------------------------ */
/* Activations */

/* sbh and 5as²b at micro-batch b, with 2-byte activations. */
static uint64_t sbh(const struct zs_model *m, const struct theory_act_opts *o, uint64_t b)
{
	return o->seq * b * m->hidden;
}

static uint64_t scores(const struct zs_model *m, const struct theory_act_opts *o, uint64_t b)
{
	return o->flash ? 0 : 5 * m->heads * o->seq * o->seq * b;
}

/* Korthikanti's 2-byte activations double in fp32; the 1-byte dropout
 * masks do not: in a layer the attention's and the MLP's, sbh each, and of
 * the scores' 5as²b the softmax's mask as²b. */
uint64_t theory_layer_activations(const struct zs_model *m, const struct theory_act_opts *o,
                                  uint64_t batch)
{
	uint64_t x = sbh(m, o, batch), sc = scores(m, o, batch) / 5; /* as²b */

	switch (o->recompute) {
	case ZS_RECOMPUTE_FULL:
		return 2 * x * o->elem / 2;
	case ZS_RECOMPUTE_SELECTIVE:
		return 32 * x * o->elem / 2 + 2 * x;
	case ZS_RECOMPUTE_NONE:
	default:
		return (32 * x + 4 * sc) * o->elem / 2 + 2 * x + sc;
	}
}

uint64_t theory_activations(const struct zs_model *m, const struct theory_act_opts *o,
                            uint64_t batch, uint64_t terms[THEORY_NACTS])
{
	uint64_t x = sbh(m, o, batch), sc = scores(m, o, batch) / 5, sum = 0; /* sc: as²b */
	uint64_t logits = 4 * o->seq * batch * m->vocab;

	terms[THEORY_ACT_LAYERS] = m->layers * theory_layer_activations(m, o, batch);
	/* The backward of one layer holds what recomputation rebuilt. */
	switch (o->recompute) {
	case ZS_RECOMPUTE_SELECTIVE:
		terms[THEORY_ACT_RECOMPUTED] = 4 * sc * o->elem / 2 + sc;
		break;
	case ZS_RECOMPUTE_FULL:
		terms[THEORY_ACT_RECOMPUTED] = (32 * x + 4 * sc) * o->elem / 2 + 2 * x + sc;
		break;
	case ZS_RECOMPUTE_NONE:
	default:
		terms[THEORY_ACT_RECOMPUTED] = 0;
		break;
	}
	terms[THEORY_ACT_EMBEDDING_DROPOUT] = m->family == ZS_FAMILY_GPT2 ? x : 0;
	terms[THEORY_ACT_FINAL_NORM_INPUT] = x * o->elem;
	terms[THEORY_ACT_HEAD_INPUT] = x * o->elem;
	terms[THEORY_ACT_LOGITS] = logits;
	terms[THEORY_ACT_LOGITS_GRAD] = logits;
	for (int a = 0; a < THEORY_NACTS; a++)
		sum += terms[a];
	return sum;
}

int theory_tfm_exact(const struct zs_model *m, const struct theory_act_opts *o, uint64_t batch)
{
	double h = (double)m->hidden, s = (double)o->seq, b = (double)batch;
	double layer = s * b * h * 34 + 5 * (double)m->heads * s * s * b;
	/* Above the sum of every term, in fp32 (twice the 2-byte terms). */
	double act = ((double)m->layers + 1) * layer * 2 + 8 * s * b * (double)m->vocab + 8 * s * b * h;

	return act < 0x1p52;
}

/* ------------------------------------------------------------------------ */
/* Peak */

void theory_tfm_peak(const struct zs_model *m, const struct theory_act_opts *o,
                       const struct theory_bytes *b, uint64_t batch, enum zs_scheme scheme,
                       enum zs_unit unit, unsigned world, struct theory_peak *out)
{
	struct step_params p;

	step_params_build(&p, m);
	theory_peak_of(m, &p, o, b, batch, scheme, unit, world, out);
	step_params_free(&p);
}

/* --freeze at the paper level: each unit's elements and its trainable
 * ones (util/step.h's step_trained, the tensors theory.json's
 * trainable_params counts), one run a unit: the description's layers for
 * unit=layer (those with parameters, theory_units_list's), the whole for
 * unit=model. Returns the number of runs. */
static size_t frozen_runs(const struct step_params *p, enum zs_unit unit,
                          struct theory_unit_run *runs, struct theory_unit_run *trained)
{
	size_t n = 0;
	for (size_t l = 0; l < p->nlayers; l++) {
		const struct step_layer *ly = &p->layer[l];
		if (unit == ZS_UNIT_LAYER ? ly->numel > 0 : n == 0)
			runs[n] = trained[n] = (struct theory_unit_run){ 0, 1 }, n++;
		if (n == 0)
			continue;
		runs[n - 1].elements += ly->numel;
		for (size_t i = ly->first; i < ly->first + ly->n; i++)
			if (step_trained(p, i))
				trained[n - 1].elements += p->tensor[i].numel;
	}
	return n;
}

void theory_peak_of(const struct zs_model *m, const struct step_params *p, const struct theory_act_opts *o,
                    const struct theory_bytes *b, uint64_t batch, enum zs_scheme scheme,
                    enum zs_unit unit, unsigned world, struct theory_peak *out)
{
	struct theory_units u;
	struct theory_unit_run runs[3], *fr = NULL, *ft = NULL;
	size_t n = 0;
	uint64_t one[THEORY_NACTS];

	*out = (struct theory_peak){0};
	theory_units_of(p, &u);
	if (step_params_frozen(p)) {
		fr = zs_calloc(p->nlayers + 1, sizeof *fr);
		ft = zs_calloc(p->nlayers + 1, sizeof *ft);
		n = frozen_runs(p, unit, fr, ft);
	} else if (unit == ZS_UNIT_MODEL) {
		runs[n++] = (struct theory_unit_run){ u.embeddings + u.layers * u.block + u.head, 1 };
	} else {
		runs[n++] = (struct theory_unit_run){ u.embeddings, 1 };
		runs[n++] = (struct theory_unit_run){ u.block, u.layers };
		if (u.head > 0)
			runs[n++] = (struct theory_unit_run){ u.head, 1 };
	}
	theory_states_trained(fr != NULL ? fr : runs, ft, n, b, scheme, world, &out->states);
	free(fr);
	free(ft);
	out->activations = theory_activations(m, o, batch, out->act);
	out->activations_per_sequence = theory_activations(m, o, 1, one);

	memcpy(out->peak_breakdown, out->states.resident_breakdown, sizeof out->peak_breakdown);
	out->peak_breakdown[ZS_CAT_GATHERED] = out->states.gathered_params;
	out->peak_breakdown[ZS_CAT_FULL_GRADS] = out->states.full_grads;
	out->peak_breakdown[ZS_CAT_ACTIVATIONS] = out->activations;
	for (int c = 0; c < ZS_NCATS; c++)
		out->peak_bytes += out->peak_breakdown[c];
}

