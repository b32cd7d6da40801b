/*
 * theory_model — the paper level for transformers: parameters per unit
 * from a Hugging Face shape (util/model.h), activations from Korthikanti
 * et al. (2022), Table 2 without parallelism, and the peak they make with
 * the model states of ZeRO (SC'20) and the transients of docs/schedule.md.
 *
 * Parameter counts, per block (h hidden, I intermediate, q = heads·head_dim,
 * k = kv_heads·head_dim):
 *   gpt2:  LayerNorm 2h, fused QKV h(q+2k) + (q+2k), output qh + h,
 *          LayerNorm 2h, MLP hI + I and Ih + h;
 *          embeddings Vh + (positions)h, final LayerNorm 2h, head tied.
 *   llama: RMSNorm h, Q/K/V h(q+2k), O qh, RMSNorm h, SwiGLU 3hI;
 *          embeddings Vh, final RMSNorm h, head Vh unless tied.
 * These give the published counts (tests/test_theory.c).
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

#include <string.h>

#include "theory/theory.h"

static const char *const recompute_names[] = { "none", "selective", "full" };

const char *theory_recompute_name(enum theory_recompute r)
{
	return r <= THEORY_RECOMPUTE_FULL ? recompute_names[r] : "?";
}

int theory_recompute_parse(const char *s, enum theory_recompute *out)
{
	for (int r = 0; r <= THEORY_RECOMPUTE_FULL; r++)
		if (strcmp(s, recompute_names[r]) == 0) {
			*out = (enum theory_recompute)r;
			return 0;
		}
	return -1;
}

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

void theory_model_units(const struct zs_model *m, struct theory_units *u)
{
	uint64_t h = m->hidden, ffn = m->intermediate, v = m->vocab;
	uint64_t q = m->heads * m->head_dim, kv = m->kv_heads * m->head_dim;
	uint64_t norm;

	if (m->family == ZS_FAMILY_GPT2) {
		norm = 2 * h;   /* LayerNorm: weight and bias */
		u->block = norm + h * (q + 2 * kv) + (q + 2 * kv) + q * h + h
		           + norm + h * ffn + ffn + ffn * h + h;
		u->embeddings = v * h + m->positions * h;
	} else {
		norm = h;       /* RMSNorm: weight */
		u->block = norm + h * (q + 2 * kv) + q * h + norm + 3 * h * ffn;
		u->embeddings = v * h;
	}
	u->layers = m->layers;
	if (m->tied) {
		u->embeddings += norm;
		u->head = 0;
	} else {
		u->head = norm + v * h;
	}
}

uint64_t theory_model_params(const struct zs_model *m)
{
	struct theory_units u;

	theory_model_units(m, &u);
	return u.embeddings + u.layers * u.block + u.head;
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

uint64_t theory_layer_activations(const struct zs_model *m, const struct theory_act_opts *o,
                                  uint64_t batch)
{
	uint64_t two_byte;

	switch (o->recompute) {
	case THEORY_RECOMPUTE_FULL:
		two_byte = 2 * sbh(m, o, batch);
		break;
	case THEORY_RECOMPUTE_SELECTIVE:
		two_byte = 34 * sbh(m, o, batch);
		break;
	case THEORY_RECOMPUTE_NONE:
	default:
		two_byte = 34 * sbh(m, o, batch) + scores(m, o, batch);
		break;
	}
	return two_byte * o->elem / 2;
}

uint64_t theory_activations(const struct zs_model *m, const struct theory_act_opts *o,
                            uint64_t batch, uint64_t terms[THEORY_NACTS])
{
	uint64_t x = sbh(m, o, batch), sum = 0;
	uint64_t logits = 4 * o->seq * batch * m->vocab;

	terms[THEORY_ACT_LAYERS] = m->layers * theory_layer_activations(m, o, batch);
	/* The backward of one layer holds what recomputation rebuilt. */
	switch (o->recompute) {
	case THEORY_RECOMPUTE_SELECTIVE:
		terms[THEORY_ACT_RECOMPUTED] = scores(m, o, batch) * o->elem / 2;
		break;
	case THEORY_RECOMPUTE_FULL:
		terms[THEORY_ACT_RECOMPUTED] = (34 * x + scores(m, o, batch)) * o->elem / 2;
		break;
	case THEORY_RECOMPUTE_NONE:
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

int theory_model_exact(const struct zs_model *m, const struct theory_act_opts *o, uint64_t batch)
{
	double h = (double)m->hidden, s = (double)o->seq, b = (double)batch;
	double layer = s * b * h * 34 + 5 * (double)m->heads * s * s * b;
	/* Above the sum of every term, in fp32 (twice the 2-byte terms). */
	double act = ((double)m->layers + 1) * layer * 2 + 8 * s * b * (double)m->vocab + 8 * s * b * h;

	return act < 0x1p52;
}

/* ------------------------------------------------------------------------ */
/* Peak */

void theory_model_peak(const struct zs_model *m, const struct theory_act_opts *o,
                       const struct theory_bytes *b, uint64_t batch, enum zs_scheme scheme,
                       enum zs_unit unit, unsigned world, struct theory_peak *out)
{
	struct theory_units u;
	struct theory_unit_run runs[3];
	size_t n = 0;
	uint64_t one[THEORY_NACTS];

	*out = (struct theory_peak){0};
	theory_model_units(m, &u);
	if (unit == ZS_UNIT_MODEL) {
		runs[n++] = (struct theory_unit_run){ u.embeddings + u.layers * u.block + u.head, 1 };
	} else {
		runs[n++] = (struct theory_unit_run){ u.embeddings, 1 };
		runs[n++] = (struct theory_unit_run){ u.block, u.layers };
		if (u.head > 0)
			runs[n++] = (struct theory_unit_run){ u.head, 1 };
	}
	theory_states(runs, n, b, scheme, world, &out->states);
	out->activations = theory_activations(m, o, batch, out->act);
	out->activations_per_sequence = theory_activations(m, o, 1, one);

	memcpy(out->peak_breakdown, out->states.resident_breakdown, sizeof out->peak_breakdown);
	out->peak_breakdown[THEORY_GATHERED_PARAMS] = out->states.gathered_params;
	out->peak_breakdown[THEORY_FULL_GRADS] = out->states.full_grads;
	out->peak_breakdown[THEORY_ACTIVATIONS] = out->activations;
	for (int c = 0; c < THEORY_NCATEGORIES; c++)
		out->peak_bytes += out->peak_breakdown[c];
}
