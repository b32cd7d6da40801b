/*
 * step — the model's parameters as data (step.h). The names and shapes are
 * Hugging Face's, as transformers' modeling files declare them:
 * modeling_gpt2.py (GPT2Model: wte, wpe, h.N.{ln_1, attn.c_attn,
 * attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}, ln_f; Conv1D holds its weight
 * (in, out)) and modeling_llama.py (LlamaModel: embed_tokens,
 * layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
 * post_attention_layernorm, mlp.{gate,up,down}_proj}, norm; nn.Linear
 * holds (out, in)); the head is lm_head in both. Qwen2 is llama's, with
 * q_proj, k_proj and v_proj biased (modeling_qwen2.py, Qwen2Attention).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "util/step.h"
#include "util/util.h"

struct builder {
	struct step_params *p;
	size_t cap_t, cap_m;
};

static size_t module(struct builder *b, size_t layer, char *name)
{
	struct step_params *p = b->p;
	if (p->nmodules == b->cap_m) {
		b->cap_m = b->cap_m ? 2 * b->cap_m : 16;
		p->module = zs_realloc(p->module, b->cap_m * sizeof *p->module);
	}
	p->module[p->nmodules] = (struct step_module){name, layer, p->ntensors, 0};
	return p->nmodules++;
}

/* A tensor of the module added last, of shape (r) or (r, c). */
static struct step_tensor *tensor(struct builder *b, const char *leaf, uint64_t r, uint64_t c)
{
	struct step_params *p = b->p;
	struct step_module *m = &p->module[p->nmodules - 1];
	if (p->ntensors == b->cap_t) {
		b->cap_t = b->cap_t ? 2 * b->cap_t : 32;
		p->tensor = zs_realloc(p->tensor, b->cap_t * sizeof *p->tensor);
	}
	struct step_tensor *t = &p->tensor[p->ntensors++];
	*t = (struct step_tensor){zs_asprintf("%s.%s", m->name, leaf), c > 0 ? 2 : 1, {r, c}, c > 0 ? r * c : r,
	                          p->nmodules - 1, 0, {0, 0, 0}};
	m->n++;
	return t;
}

/* A module of a weight (r) or (r, c), and a bias (bias_n) when bias_n > 0;
 * returns the weight's index. */
static size_t linear(struct builder *b, size_t layer, char *name, uint64_t r, uint64_t c, uint64_t bias_n)
{
	module(b, layer, name);
	tensor(b, "weight", r, c);
	if (bias_n > 0)
		tensor(b, "bias", bias_n, 0);
	return b->p->module[b->p->nmodules - 1].first;
}

/* Tensor i fuses Hugging Face's tensors of a, b and c rows (c 0: two). */
static void parts(struct step_params *p, size_t i, uint64_t a, uint64_t b, uint64_t c)
{
	struct step_tensor *t = &p->tensor[i];
	t->nparts = c > 0 ? 3 : 2;
	t->part_rows[0] = a;
	t->part_rows[1] = b;
	t->part_rows[2] = c;
}

static void close_layer(struct step_params *p, size_t l, size_t first)
{
	uint64_t n = 0;
	for (size_t i = first; i < p->ntensors; i++)
		n += p->tensor[i].numel;
	p->layer[l] = (struct step_layer){first, p->ntensors - first, p->numel, n};
	p->numel += n;
}

void step_params_build(struct step_params *p, const struct zs_model *m)
{
	int gpt2 = m->family == ZS_FAMILY_GPT2;
	uint64_t h = m->hidden, V = m->vocab, I = m->intermediate, L = m->layers, bias = gpt2 ? 1 : 0;
	uint64_t q = m->heads * m->head_dim, kv = m->kv_heads * m->head_dim, head = L + 1;
	const char *top = gpt2 ? "transformer" : "model";
	const char *lnf = gpt2 ? "transformer.ln_f" : "model.norm";
	struct builder b = {p, 0, 0};

	memset(p, 0, sizeof *p);
	p->nlayers = L + 2;
	p->tied = m->tied;
	p->layer = zs_calloc(p->nlayers, sizeof *p->layer);

	/* Layer 0: the tables; tied, the final norm's tensors after them (its
	 * module runs in the last layer). */
	linear(&b, 0, zs_asprintf("%s.%s", top, gpt2 ? "wte" : "embed_tokens"), V, h, 0);
	if (gpt2)
		linear(&b, 0, zs_strdup("transformer.wpe"), m->positions, h, 0);
	size_t norm_module = 0;
	if (m->tied) {
		norm_module = p->nmodules;
		linear(&b, head, zs_strdup(lnf), h, 0, bias * h);
	}
	close_layer(p, 0, 0);

	for (uint64_t l = 0; l < L; l++) {
		size_t first = p->ntensors;
		char *at = gpt2 ? zs_asprintf("transformer.h.%llu", (unsigned long long)l)
		                : zs_asprintf("model.layers.%llu", (unsigned long long)l);
		if (gpt2) {
			linear(&b, l + 1, zs_asprintf("%s.ln_1", at), h, 0, h);
			linear(&b, l + 1, zs_asprintf("%s.attn.c_attn", at), h, q + 2 * kv, q + 2 * kv);
			linear(&b, l + 1, zs_asprintf("%s.attn.c_proj", at), q, h, h);
			linear(&b, l + 1, zs_asprintf("%s.ln_2", at), h, 0, h);
			linear(&b, l + 1, zs_asprintf("%s.mlp.c_fc", at), h, I, I);
			linear(&b, l + 1, zs_asprintf("%s.mlp.c_proj", at), I, h, h);
		} else {
			linear(&b, l + 1, zs_asprintf("%s.input_layernorm", at), h, 0, 0);
			size_t w = linear(&b, l + 1, zs_asprintf("%s.self_attn.{q,k,v}_proj", at), q + 2 * kv, h,
			                  m->qkv_bias ? q + 2 * kv : 0);
			parts(p, w, q, kv, kv);
			if (m->qkv_bias)
				parts(p, w + 1, q, kv, kv);
			linear(&b, l + 1, zs_asprintf("%s.self_attn.o_proj", at), h, q, 0);
			linear(&b, l + 1, zs_asprintf("%s.post_attention_layernorm", at), h, 0, 0);
			parts(p, linear(&b, l + 1, zs_asprintf("%s.mlp.{gate,up}_proj", at), 2 * I, h, 0), I, I, 0);
			linear(&b, l + 1, zs_asprintf("%s.mlp.down_proj", at), h, I, 0);
		}
		free(at);
		close_layer(p, l + 1, first);
	}

	size_t first = p->ntensors;
	if (!m->tied) {
		linear(&b, head, zs_strdup(lnf), h, 0, bias * h);
		linear(&b, head, zs_strdup("lm_head"), V, h, 0);
	} else {
		/* Forward order: the norm's module before the head's. Its entry
		 * was made in layer 0's place; move it to the end. */
		struct step_module norm = p->module[norm_module];
		memmove(&p->module[norm_module], &p->module[norm_module + 1],
		        (p->nmodules - norm_module - 1) * sizeof *p->module);
		p->module[p->nmodules - 1] = norm;
		for (size_t i = 0; i < p->ntensors; i++)
			if (p->tensor[i].module > norm_module)
				p->tensor[i].module--;
			else if (p->tensor[i].module == norm_module)
				p->tensor[i].module = p->nmodules - 1;
		module(&b, head, zs_strdup("lm_head"));
		p->module[p->nmodules - 1].first = 0; /* the token table */
		p->module[p->nmodules - 1].n = 1;
	}
	close_layer(p, head, first);
}

void step_params_mlp(struct step_params *p, const size_t *widths, size_t nwidths)
{
	struct builder b = {p, 0, 0};

	memset(p, 0, sizeof *p);
	p->nlayers = nwidths - 1;
	p->layer = zs_calloc(p->nlayers, sizeof *p->layer);
	for (size_t l = 0; l < p->nlayers; l++) {
		size_t first = p->ntensors;
		linear(&b, l, zs_asprintf("%zu", l), widths[l + 1], widths[l], widths[l + 1]);
		close_layer(p, l, first);
	}
}

void step_params_free(struct step_params *p)
{
	for (size_t i = 0; i < p->ntensors; i++)
		free(p->tensor[i].name);
	for (size_t i = 0; i < p->nmodules; i++)
		free(p->module[i].name);
	free(p->tensor);
	free(p->module);
	free(p->layer);
	memset(p, 0, sizeof *p);
}

uint64_t step_params_largest_hf_module(const struct step_params *p)
{
	uint64_t max = 0;
	for (size_t i = 0; i < p->nmodules; i++) {
		const struct step_module *md = &p->module[i];
		uint64_t own = 0;
		for (size_t t = md->first; t < md->first + md->n; t++) {
			const struct step_tensor *x = &p->tensor[t];
			own += x->nparts > 0 ? 0 : x->numel;
		}
		max = own > max ? own : max;
		/* A fused module: each part is a module of Hugging Face's, its
		 * rows of every tensor (weight, and bias where there is one). */
		for (unsigned k = 0; k < 3; k++) {
			uint64_t part = 0;
			for (size_t t = md->first; t < md->first + md->n; t++) {
				const struct step_tensor *x = &p->tensor[t];
				if (k < x->nparts)
					part += x->part_rows[k] * (x->ndim == 2 ? x->shape[1] : 1);
			}
			max = part > max ? part : max;
		}
	}
	return max;
}
