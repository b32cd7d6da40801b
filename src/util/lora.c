/*
 * lora — LoRA's adapters over the step description (lora.h), PEFT v0.20.0's
 * lora.Linear (peft/tuners/lora/layer.py; docs/finetune.md cites its lines).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/freeze.h"
#include "util/lora.h"
#include "util/nf4.h"
#include "util/util.h"

const char *zs_lora_default_targets(const struct zs_model *m)
{
	static const char *const qv[] = {"llama", "mistral", "mixtral", "gemma2", "gemma3_text", "qwen2", "qwen3"};
	if (strcmp(m->model_type, "gpt2") == 0)
		return "c_attn";
	for (size_t i = 0; i < sizeof qv / sizeof *qv; i++)
		if (strcmp(m->model_type, qv[i]) == 0)
			return "q_proj,v_proj";
	return NULL;
}

const char *zs_lora_targets(const struct zs_model *m, const char *given, char **cause)
{
	const char *t = given != NULL && *given ? given : zs_lora_default_targets(m);
	if (t == NULL)
		zs_set_cause(cause, "--lora-r: PEFT has no default LoRA targets for a %s (give --lora-targets, e.g. "
		             "all-linear)", m->model_type);
	return t;
}

int zs_lora_target(const char *targets, const char *module)
{
	if (strcmp(targets, "all-linear") == 0)
		return 1;
	size_t ml = strlen(module);
	for (const char *t = targets; *t;) {
		size_t n = strcspn(t, ",");
		if (n && ml >= n && memcmp(module + ml - n, t, n) == 0 && (ml == n || module[ml - n - 1] == '.'))
			return 1;
		t += n;
		if (*t == ',')
			t++;
	}
	return 0;
}

/* Whether module i of p is a linear layer PEFT may adapt: a matmul over a
 * 2-D weight that is neither a table's lookup (matmul 0) nor the output
 * embedding (lm_head; _maybe_include_all_linear_layers leaves it out of
 * all-linear, and no default names it). */
static int candidate(const struct step_params *p, size_t i)
{
	const struct step_module *md = &p->module[i];
	return md->matmul && md->n > 0 && p->tensor[md->first].ndim == 2 && strcmp(md->prefix, "lm_head") != 0;
}

int zs_lora_build(struct zs_lora_set *s, const struct step_params *p, const struct zs_model *m, unsigned r,
                  const char *targets, char **cause)
{
	memset(s, 0, sizeof *s);
	if (r == 0)
		return zs_fail(cause, "--lora-r: the rank must be at least 1");
	if ((targets = zs_lora_targets(m, targets, cause)) == NULL)
		return -1;
	s->r = r;
	size_t cap = 0;
	/* transformers' Conv1D (gpt2) holds its weight (in, out), nn.Linear (out, in) */
	int conv = m->family == ZS_FAMILY_GPT2;
	for (size_t i = 0; i < p->nmodules; i++) {
		if (!candidate(p, i))
			continue;
		size_t w = p->module[i].first;
		const struct step_tensor *t = &p->tensor[w];
		unsigned np = t->nparts ? t->nparts : 1;
		uint64_t row0 = 0;
		for (unsigned k = 0; k < np; k++) {
			uint64_t rows = t->nparts ? t->part_rows[k] : t->shape[conv ? 1 : 0];
			char name[256];
			step_part_name(p, w, t->nparts ? (int)k : -1, name, sizeof name);
			char *dot = strrchr(name, '.'); /* the module's name: less ".weight" */
			if (dot)
				*dot = '\0';
			if (zs_lora_target(targets, name)) {
				if (s->n == cap) {
					cap = cap ? 2 * cap : 16;
					s->a = zs_realloc(s->a, cap * sizeof *s->a);
				}
				s->a[s->n++] = (struct zs_lora){w, t->nparts ? (int)k : -1, row0, t->shape[conv ? 0 : 1], rows};
			}
			row0 += rows;
		}
	}
	if (s->n == 0)
		return zs_fail(cause, "--lora-targets %s: no linear layer of %s matches", targets, m->name);
	return 0;
}

void zs_lora_free(struct zs_lora_set *s)
{
	free(s->a);
	memset(s, 0, sizeof *s);
}

uint64_t zs_lora_trained(const struct zs_lora_set *s)
{
	uint64_t n = 0;
	for (size_t i = 0; i < s->n; i++)
		n += (uint64_t)s->r * (s->a[i].in + s->a[i].out);
	return n;
}

const char *zs_lora_module(int b) { return b ? "lora_B.default" : "lora_A.default"; }

void zs_lora_describe(struct step_params *p, const struct zs_lora_set *s, double dropout)
{
	size_t nt = p->ntensors + 2 * s->n, nm = p->nmodules + 2 * s->n, k = 0;
	struct step_tensor *t = zs_malloc(nt * sizeof *t);
	struct step_module *md = zs_malloc(nm * sizeof *md);
	size_t *tmap = zs_malloc(p->ntensors * sizeof *tmap), *at = zs_malloc((s->n + 1) * sizeof *at);
	size_t *mmap = zs_malloc(p->nmodules * sizeof *mmap);
	/* the tensors: each layer's own, then its adapters' pairs (s's order) */
	for (size_t l = 0; l < p->nlayers; l++) {
		struct step_layer *ly = &p->layer[l];
		size_t first = k;
		for (size_t i = ly->first; i < ly->first + ly->n; i++) {
			tmap[i] = k;
			t[k] = p->tensor[i];
			t[k++].frozen = p->tensor[i].nparts ? p->tensor[i].nparts : 1; /* the base: frozen */
		}
		for (size_t a = 0; a < s->n; a++)
			if (s->a[a].tensor >= ly->first && s->a[a].tensor < ly->first + ly->n)
				at[a] = k, k += 2;
		ly->first = first, ly->n = k - first; /* the new list's; offset and numel below */
	}
	/* the modules: each adapted one followed by its adapters' A and B */
	size_t x = 0;
	for (size_t i = 0; i < p->nmodules; i++) {
		size_t base = mmap[i] = x;
		md[x] = p->module[i];
		md[x++].first = tmap[p->module[i].first];
		for (size_t a = 0; a < s->n; a++) {
			const struct zs_lora *la = &s->a[a];
			if (p->tensor[la->tensor].module != i)
				continue;
			for (int b = 0; b < 2; b++) {
				size_t ti = at[a] + (size_t)b;
				md[x] = (struct step_module){"", -1, "", md[base].layer, ti, 1, 1, -1, "", 0,
				                             zs_lora_module(b), base, la->part};
				t[ti] = (struct step_tensor){"weight", 2, {b ? la->out : s->r, b ? s->r : la->in},
				                             (la->in * (1 - (uint64_t)b) + la->out * (uint64_t)b) * s->r, x++, 0,
				                             {0, 0, 0}, 0};
			}
		}
	}
	for (size_t i = 0; i < p->ntensors; i++)
		t[tmap[i]].module = mmap[p->tensor[i].module];
	free(p->tensor);
	free(p->module);
	p->tensor = t, p->ntensors = nt, p->module = md, p->nmodules = nm;
	uint64_t off = 0;
	for (size_t l = 0; l < p->nlayers; l++) {
		struct step_layer *ly = &p->layer[l];
		ly->offset = off, ly->numel = 0;
		for (size_t i = ly->first; i < ly->first + ly->n; i++)
			ly->numel += t[i].numel;
		off += ly->numel;
	}
	p->numel = off;
	p->freeze = "everything but LoRA's adapters";
	p->lora_dropout = dropout;
	step_params_first_matmuls(p);
	free(tmap);
	free(mmap);
	free(at);
}

int zs_lora_step_params(struct step_params *p, const struct zs_model *shape, const struct zs_model *hf,
                        const struct zs_config *c, char **cause)
{
	if (zs_lora_engine(c))
		return zs_lora_params(p, shape, hf, c, cause);
	step_params_build(p, shape);
	step_params_freeze(p, zs_freeze_saved_spec(c));
	return 0;
}

int zs_lora_params(struct step_params *p, const struct zs_model *shape, const struct zs_model *hf,
                   const struct zs_config *c, char **cause)
{
	step_params_build(p, shape);
	step_params_freeze(p, zs_freeze_saved_spec(c));
	if (!c->lora_r)
		return 0;
	struct zs_lora_set s;
	if (zs_lora_build(&s, p, hf, c->lora_r, c->lora_targets, cause) != 0) {
		step_params_free(p);
		return -1;
	}
	zs_lora_describe(p, &s, c->lora_dropout);
	zs_lora_free(&s);
	/* --freeze over PEFT's model: the base is frozen already, so it
	 * freezes the adapters it names (....lora_A.default.weight), as
	 * tests/ft_torch.py freezes by name after wrapping */
	for (size_t i = 0; c->freeze[0] && i < p->ntensors; i++) {
		char name[256];
		if (p->module[p->tensor[i].module].adapter == NULL)
			continue;
		step_tensor_name(p, i, name, sizeof name);
		if (zs_freeze_match(c->freeze, name, hf->layers))
			p->tensor[i].frozen = 1;
	}
	return 0;
}

/* --freeze over PEFT's model under the paper's step (the base frozen
 * already): every term of spec names an adapter of p (a term that names
 * none is a mistake, as the PyTorch step refuses it: util/freeze.h
 * zs_freeze_unmatched, the same text but for the step's name), and some
 * adapter stays trained. 0, or -1 with one line in *cause. */
static int frozen_adapters_check(const struct step_params *p, const char *spec, const struct zs_model *m,
                                 char **cause)
{
	enum { LEN = 256 };
	size_t nadapters = 0, nfrozen = 0;
	char *buf = zs_calloc(p->ntensors ? p->ntensors : 1, LEN);
	const char **names = zs_calloc(p->ntensors ? p->ntensors : 1, sizeof *names);
	for (size_t i = 0; i < p->ntensors; i++)
		if (p->module[p->tensor[i].module].adapter != NULL) {
			names[nadapters] = buf + nadapters * LEN;
			step_tensor_name(p, i, buf + nadapters++ * LEN, LEN);
			nfrozen += p->tensor[i].frozen != 0;
		}
	char term[ZS_FREEZE_MAX + 1];
	int unmatched = zs_freeze_unmatched(spec, names, nadapters, m->layers, term, sizeof term);
	free(names);
	free(buf);
	if (unmatched)
		return zs_fail(cause, "--freeze %s under --framework paper: its term '%s' matches no adapter of %s (LoRA "
		                      "freezes every base parameter already)", spec, term, m->name);
	if (nfrozen == nadapters)
		return zs_fail(cause, "--freeze %s with --lora-r: freezes every one of %s's %zu adapter tensors (nothing to "
		                      "train)", spec, m->name, nadapters);
	return 0;
}

int zs_lora_engine(const struct zs_config *c)
{
	return c->lora_r && (c->framework == ZS_FW_PAPER || (c->framework == ZS_FW_DEEPSPEED && !zs_wrapper_step(c)));
}

int zs_lora_paper_check(const struct zs_config *c, const struct zs_model *m, char **cause)
{
	if (!zs_lora_engine(c))
		return 0;
	if (m == NULL)
		return zs_fail(cause, "--lora-r under --framework %s: only with --model (a transformer: the MLP has no "
		                      "linear layers PEFT names)", zs_framework_name(c->framework));
	/* the adapters start as the PyTorch step's (engine.c), which runs no
	 * gemma with LoRA yet */
	if (m->experts > 0 || m->gemma)
		return zs_fail(cause, "--lora-r under --framework %s: %s (a %s) is not run with adapters yet (give "
		                      "--framework torch%s)", zs_framework_name(c->framework), m->name, m->experts > 0 ? "mixture of experts" : m->model_type,
		               m->experts > 0 ? "" : ", which refuses it too");
	struct step_params p;
	if (zs_lora_step_params(&p, m, m, c, cause) != 0)
		return -1;
	int bad = c->freeze[0] ? frozen_adapters_check(&p, c->freeze, m, cause) : 0;
	for (size_t u = 0; !bad && u < c->nunits; u++) {
		size_t n;
		struct zs_freeze_run *run = zs_freeze_units(&p, c->units[u] == ZS_UNIT_LAYER, 0, &n, NULL);
		if (run == NULL && c->units[u] == ZS_UNIT_LAYER) /* only frozen adapters part a block's tail */
			bad = zs_fail(cause, "--freeze %s with --lora-r under --framework paper: a block's trainable adapters "
			                     "are not one run of the flat vector (its adapters are its layer's tail, each "
			                     "lora_A then lora_B in the modules' order: freeze all of a block's, or those at "
			                     "the start or the end of its run; docs/finetune.md)", c->freeze);
		else if (run == NULL)
			bad = zs_fail(cause, "--lora-r under --framework %s --unit model: each block's adapters are its "
			                     "layer's tail, runs apart in the flat vector (docs/finetune.md): give --unit "
			                     "layer", zs_framework_name(c->framework));
		free(run);
	}
	/* DeepSpeed's ZeRO-3 partitions each tensor on its own
	 * (partition_parameters.py), a frozen one too: no unit is sharded
	 * whole (docs/finetune.md, "LoRA under DeepSpeed's ZeRO-3") */
	for (size_t i = 0; !bad && c->framework == ZS_FW_PAPER && i < c->nschemes; i++)
		for (size_t w = 0; !bad && w < c->nworld; w++)
			if (c->schemes[i] == ZS_ZERO3 && c->world[w] > 1)
				bad = zs_fail(cause, "--lora-r under --framework paper --schemes zero3 at N = %u: a block's unit "
				                     "holds its frozen base and its adapters, and zero3 shards a unit's optimizer "
				                     "state as its params (docs/finetune.md): give N = 1 or dp, zero1, zero2",
				              c->world[w]);
	/* the 4-bit base under DeepSpeed's ZeRO-3: the codes as elements of
	 * the model's dtype (util/nf4.h's nf4_storage_elements), which
	 * bitsandbytes' view takes only where they fill them */
	uint64_t n = 0;
	unsigned es = c->precision == ZS_MIXED ? 2 : 4;
	for (size_t i = 0; !bad && c->quant_nf4 && c->framework == ZS_FW_DEEPSPEED && i < c->nschemes; i++)
		if (c->schemes[i] == ZS_ZERO3 && !nf4_storage_exact(&p, es, &n))
			bad = zs_fail(cause, "--quant-base nf4 under --framework deepspeed --schemes zero3: a layer of %llu "
			                     "weights is not a multiple of %u (its codes, held as %u-byte elements of the "
			                     "model's dtype, would not fill them: docs/finetune.md)",
			              (unsigned long long)n, 2 * es, es);
	step_params_free(&p);
	return bad;
}
