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
 * Phi3 is llama's with Hugging Face's own fused tensors
 * (modeling_phi3.py at 43c2b4816a65: Phi3Attention's qkv_proj, rows q
 * then k then v, and Phi3MLP's gate_up_proj, rows gate then up, as its
 * chunk(2) splits them): the same matrices, one module and no parts.
 * Qwen3 is llama's with Qwen3Attention's q_norm and k_norm (modeling_qwen3.py
 * at 000c33fd: Qwen3RMSNorm(head_dim) each, applied between the projection
 * and the rotary embedding): one module of zerosim's, right after the
 * fused q/k/v, whose weight joins them (q_norm's head_dim elements, then
 * k_norm's), as the projections are joined.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/freeze.h"
#include "util/step.h"
#include "util/util.h"

struct builder {
	struct step_params *p;
	size_t cap_t, cap_m;
};

static size_t module(struct builder *b, size_t layer, const char *prefix, long long index, const char *suffix)
{
	struct step_params *p = b->p;
	if (p->nmodules == b->cap_m) {
		b->cap_m = b->cap_m ? 2 * b->cap_m : 16;
		p->module = zs_realloc(p->module, b->cap_m * sizeof *p->module);
	}
	p->module[p->nmodules] = (struct step_module){prefix, index, suffix, layer, p->ntensors, 0, 0, -1, "", 0, NULL, 0, -1};
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
	*t = (struct step_tensor){leaf, c > 0 ? 2 : 1, {r, c}, c > 0 ? r * c : r, p->nmodules - 1, 0, {0, 0, 0}, 0};
	m->n++;
	if (c > 0) /* a matrix: a linear's weight (a table's lookup says otherwise, table) */
		m->matmul = 1;
	return t;
}

/* A module of a weight (r) or (r, c), and a bias (bias_n) when bias_n > 0;
 * returns the weight's index. */
static size_t linear(struct builder *b, size_t layer, const char *prefix, long long index, const char *suffix,
                     uint64_t r, uint64_t c, uint64_t bias_n)
{
	module(b, layer, prefix, index, suffix);
	tensor(b, "weight", r, c);
	if (bias_n > 0)
		tensor(b, "bias", bias_n, 0);
	return b->p->module[b->p->nmodules - 1].first;
}

/* A table of rows × h (the embedding's): a lookup of ids, no matmul. */
static void table(struct builder *b, const char *prefix, uint64_t rows, uint64_t h)
{
	linear(b, 0, prefix, -1, "", rows, h, 0);
	b->p->module[b->p->nmodules - 1].matmul = 0;
	b->p->module[b->p->nmodules - 1].no_grad_in = 1;
}

void step_params_first_matmuls(struct step_params *p)
{
	for (size_t l = 0; l < p->nlayers; l++) {
		long s = 0;
		p->layer[l].matmul_module = -1;
		for (size_t i = 0; i < p->nmodules; i++) {
			if (p->module[i].layer != l)
				continue;
			if (p->module[i].matmul) {
				p->layer[l].matmul_module = s;
				break;
			}
			s++;
		}
	}
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

/* A mixture's MLP, as transformers 4.x registers it (a ModuleList of
 * experts, each expert's tensors its own modules, in registration order,
 * as model.parameters() lists them):
 *   mixtral (modeling_mixtral.py at 00d4b3d2): MixtralSparseMoeBlock
 *     78-142 registers the router gate (E, d), bias-free, at 98, then its
 *     experts at 100; MixtralBlockSparseTop2MLP 60-75 registers w1 (F, d),
 *     w2 (d, F) and w3 (F, d) at 66-68;
 *   qwen2_moe (modeling_qwen2_moe.py at 00a3f938, a 4.x-layout file):
 *     Qwen2MoeSparseMoeBlock.__init__ registers mlp.gate (E, d), bias-free,
 *     the experts (Qwen2MoeMLP of moe_intermediate_size: gate_proj,
 *     up_proj (F, d), down_proj (d, F), in that order), shared_expert
 *     (Qwen2MoeMLP of shared_expert_intermediate_size) and
 *     shared_expert_gate (1, d), bias-free. */
static void moe_block(struct builder *b, size_t layer, const char *blocks, long long at, const struct zs_model *m)
{
	uint64_t h = m->hidden, F = m->intermediate, S = m->shared_ffn;
	static const char *const tails[2][3] = {{"w1", "w2", "w3"}, {"gate_proj", "up_proj", "down_proj"}};
	const int q = m->qwen_moe != 0, down = q ? 2 : 1; /* w2 is the down projection */
	if (m->fused_experts) {
		/* transformers 5.x's mixtral (--experts-impl eager): the block is
		 * the layer's `mlp`, its router mlp.gate (MixtralTopKRouter, one
		 * (E, d) weight), then mlp.experts (MixtralExperts) with two fused
		 * parameters, gate_up_proj [E, 2F, d] and down_proj [E, d, F]
		 * (integrations/moe.py at 8b584a67, lines 29-39: the class its
		 * experts implementations read), held here as their 2-D views
		 * (E·2F, d) and (E·d, F): expert e's slices are rows e·2F.. and
		 * e·d.., gate's F rows before up's */
		linear(b, layer, blocks, at, "mlp.gate", m->experts, h, 0);
		module(b, layer, blocks, at, "mlp.experts");
		tensor(b, "gate_up_proj", m->experts * 2 * F, h);
		tensor(b, "down_proj", m->experts * h, F);
		return;
	}
	linear(b, layer, blocks, at, q ? "mlp.gate" : "block_sparse_moe.gate", m->experts, h, 0);
	for (uint64_t e = 0; e < m->experts; e++)
		for (int t = 0; t < 3; t++) {
			if (t == down)
				linear(b, layer, blocks, at, q ? "mlp.experts" : "block_sparse_moe.experts", h, F, 0);
			else
				linear(b, layer, blocks, at, q ? "mlp.experts" : "block_sparse_moe.experts", F, h, 0);
			b->p->module[b->p->nmodules - 1].expert = (long long)e;
			b->p->module[b->p->nmodules - 1].tail = tails[q][t];
		}
	if (S > 0) {
		linear(b, layer, blocks, at, "mlp.shared_expert.gate_proj", S, h, 0);
		linear(b, layer, blocks, at, "mlp.shared_expert.up_proj", S, h, 0);
		linear(b, layer, blocks, at, "mlp.shared_expert.down_proj", h, S, 0);
		linear(b, layer, blocks, at, "mlp.shared_expert_gate", 1, h, 0);
	}
}

static void close_layer(struct step_params *p, size_t l, size_t first)
{
	uint64_t n = 0;
	for (size_t i = first; i < p->ntensors; i++)
		n += p->tensor[i].numel;
	p->layer[l] = (struct step_layer){first, p->ntensors - first, p->numel, n, -1};
	p->numel += n;
}

void step_params_build(struct step_params *p, const struct zs_model *m)
{
	int gpt2 = m->family == ZS_FAMILY_GPT2;
	uint64_t h = m->hidden, V = m->vocab, I = m->intermediate, L = m->layers, bias = gpt2 ? 1 : 0;
	uint64_t q = m->heads * m->head_dim, kv = m->kv_heads * m->head_dim, head = L + 1;
	const char *lnf = gpt2 ? "transformer.ln_f" : "model.norm";
	const char *blocks = gpt2 ? "transformer.h" : "model.layers";

	memset(p, 0, sizeof *p);
	/* sized once: at most 12 tensors and 9 modules a block (and three a
	 * mixture's expert, four its shared expert), 4 of each outside (the theory builds this often) */
	struct builder b = {p, (16 + 3 * m->experts) * L + 8, (13 + 3 * m->experts) * L + 8};
	p->tensor = zs_malloc(b.cap_t * sizeof *p->tensor);
	p->module = zs_malloc(b.cap_m * sizeof *p->module);
	p->nlayers = L + 2;
	p->tied = m->tied;
	p->layer = zs_calloc(p->nlayers, sizeof *p->layer);

	/* Layer 0: the tables; tied, the final norm's tensors after them (its
	 * module runs in the last layer). */
	table(&b, gpt2 ? "transformer.wte" : "model.embed_tokens", V, h);
	if (gpt2)
		table(&b, "transformer.wpe", m->positions, h);
	size_t norm_module = 0;
	if (m->tied) {
		norm_module = p->nmodules;
		linear(&b, head, lnf, -1, "", h, 0, bias * h);
	}
	close_layer(p, 0, 0);

	for (uint64_t l = 0; l < L; l++) {
		size_t first = p->ntensors;
		long long at = (long long)l;
		if (gpt2) {
			linear(&b, l + 1, blocks, at, "ln_1", h, 0, h);
			linear(&b, l + 1, blocks, at, "attn.c_attn", h, q + 2 * kv, q + 2 * kv);
			linear(&b, l + 1, blocks, at, "attn.c_proj", q, h, h);
			linear(&b, l + 1, blocks, at, "ln_2", h, 0, h);
			linear(&b, l + 1, blocks, at, "mlp.c_fc", h, I, I);
			linear(&b, l + 1, blocks, at, "mlp.c_proj", I, h, h);
		} else {
			linear(&b, l + 1, blocks, at, "input_layernorm", h, 0, 0);
			size_t w = linear(&b, l + 1, blocks, at, m->hf_fused ? "self_attn.qkv_proj" : "self_attn.{q,k,v}_proj",
			                  q + 2 * kv, h, m->qkv_bias ? q + 2 * kv : 0);
			if (!m->hf_fused)
				parts(p, w, q, kv, kv);
			if (m->qkv_bias && !m->hf_fused)
				parts(p, w + 1, q, kv, kv);
			if (m->qk_norm) {
				w = linear(&b, l + 1, blocks, at, "self_attn.{q,k}_norm", 2 * m->head_dim, 0, 0);
				parts(p, w, m->head_dim, m->head_dim, 0);
			}
			linear(&b, l + 1, blocks, at, "self_attn.o_proj", h, q, 0);
			linear(&b, l + 1, blocks, at, "post_attention_layernorm", h, 0, 0);
			if (m->gemma) /* gemma2: post_attention_layernorm is after attention */
				linear(&b, l + 1, blocks, at, "pre_feedforward_layernorm", h, 0, 0);
			if (m->experts > 0) {
				moe_block(&b, l + 1, blocks, at, m);
			} else {
				w = linear(&b, l + 1, blocks, at, m->hf_fused ? "mlp.gate_up_proj" : "mlp.{gate,up}_proj",
				           2 * I, h, 0);
				if (!m->hf_fused)
					parts(p, w, I, I, 0);
				linear(&b, l + 1, blocks, at, "mlp.down_proj", h, I, 0);
			}
			if (m->gemma)
				linear(&b, l + 1, blocks, at, "post_feedforward_layernorm", h, 0, 0);
		}
		close_layer(p, l + 1, first);
	}

	size_t first = p->ntensors;
	if (!m->tied) {
		linear(&b, head, lnf, -1, "", h, 0, bias * h);
		linear(&b, head, "lm_head", -1, "", V, h, 0);
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
		module(&b, head, "lm_head", -1, "");
		p->module[p->nmodules - 1].first = 0; /* the token table */
		p->module[p->nmodules - 1].n = 1;
		p->module[p->nmodules - 1].matmul = 1;
	}
	close_layer(p, head, first);
	step_params_first_matmuls(p);
}

void step_params_mlp(struct step_params *p, const size_t *widths, size_t nwidths)
{
	memset(p, 0, sizeof *p);
	struct builder b = {p, 0, 0};
	p->nlayers = nwidths - 1;
	p->layer = zs_calloc(p->nlayers, sizeof *p->layer);
	for (size_t l = 0; l < p->nlayers; l++) {
		size_t first = p->ntensors;
		linear(&b, l, "", (long long)l, "", widths[l + 1], widths[l], widths[l + 1]);
		close_layer(p, l, first);
	}
	step_params_first_matmuls(p);
}

/* Part k of a fused tensor's or module's name: "{q,k,v}_proj" names its
 * parts in braces; the k-th word stands for them (k < 0: the name). */
static void select_part(const char *name, int k, char *out, size_t n)
{
	const char *l = strchr(name, '{'), *r = l ? strchr(l, '}') : NULL;
	if (k < 0 || r == NULL) {
		snprintf(out, n, "%s", name);
		return;
	}
	const char *a = l + 1;
	for (int j = 0; j < k && a < r; j++)
		a += strcspn(a, ",}") + 1;
	snprintf(out, n, "%.*s%.*s%s", (int)(l - name), name, (int)strcspn(a, ",}"), a, r + 1);
}

const char *step_module_name(const struct step_params *p, size_t i, char *out, size_t n)
{
	const struct step_module *m = &p->module[i];
	if (m->adapter != NULL) { /* its base's name (the adapted part), then lora_A.default or lora_B.default */
		char base[256];
		step_module_name(p, m->base, base, sizeof base);
		select_part(base, m->part, out, n);
		size_t k = strlen(out);
		if (k < n)
			snprintf(out + k, n - k, ".%s", m->adapter);
		return out;
	}
	int k = snprintf(out, n, "%s", m->prefix);
	if (m->index >= 0 && k >= 0 && (size_t)k < n)
		k += snprintf(out + k, n - (size_t)k, "%s%lld", k > 0 ? "." : "", m->index);
	if (*m->suffix != '\0' && k >= 0 && (size_t)k < n)
		k += snprintf(out + k, n - (size_t)k, "%s%s", k > 0 ? "." : "", m->suffix);
	if (m->expert >= 0 && k >= 0 && (size_t)k < n)
		snprintf(out + k, n - (size_t)k, ".%lld.%s", m->expert, m->tail);
	return out;
}

const char *step_tensor_name(const struct step_params *p, size_t i, char *out, size_t n)
{
	step_module_name(p, p->tensor[i].module, out, n);
	size_t k = strlen(out);
	if (k < n)
		snprintf(out + k, n - k, ".%s", p->tensor[i].leaf);
	return out;
}

void step_params_free(struct step_params *p)
{
	free(p->tensor);
	free(p->module);
	free(p->layer);
	memset(p, 0, sizeof *p);
}

/* The largest tensor's elements, of the trained ones alone where `trained`. */
static uint64_t largest(const struct step_params *p, int trained)
{
	uint64_t max = 0;
	for (size_t i = 0; i < p->ntensors; i++)
		if (p->tensor[i].numel > max && (!trained || step_trained(p, i)))
			max = p->tensor[i].numel;
	return max;
}

uint64_t step_params_largest_tensor(const struct step_params *p) { return largest(p, 0); }
uint64_t step_params_largest_trained(const struct step_params *p) { return largest(p, 1); }

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

/* ------------------------------------------------------------------------ */
/* The transformer's buffers */

static const char *const act_names[STEP_NACTS] = {
	"ln1", "ln1_mean", "ln1_rstd", "qkv", "qk_pre", "qk_rstd", "att", "att_tanh", "atty", "proj_out", "proj_rstd",
	"res2", "ln2", "ln2_mean", "ln2_rstd", "fch", "fch_act", "down_out", "down_rstd", "res3", "x0", "lnf", "lnf_mean", "lnf_rstd", "logits",
};

const char *step_act_name(enum step_act a)
{
	return a < STEP_NACTS ? act_names[a] : a == STEP_ACT_MLP_OUT ? "out" : "?";
}

struct bufs {
	struct step_buffers *b;
	size_t cap;
};

static void buf(struct bufs *x, struct step_buffer e)
{
	if (e.elements == 0)
		return;
	if (x->b->n == x->cap) {
		x->cap = x->cap ? 2 * x->cap : 64;
		x->b->buf = zs_realloc(x->b->buf, x->cap * sizeof *x->b->buf);
	}
	x->b->buf[x->b->n++] = e;
}

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t m = a > b ? a : b;
	return m > c ? m : c;
}

/* A mixtral block's routed tensors (enum step_moe), made for layer l,
 * freed after its backward: the indices int64, as PyTorch's; the
 * probabilities fp32 (softmax's dtype=torch.float); the routing weights
 * and the experts' tensors 16-bit in mixed (e16: transformers 4.x casts
 * the weights to the hidden states' dtype, and the experts are linears
 * on the 16-bit hidden states; modeling_mixtral.py at 00d4b3d2,
 * MixtralSparseMoeBlock.forward 105-142). Full recomputation (rc) makes
 * them all again in backward, the router's choice and each expert's rows
 * as the forward made them (the same input and weights), but the counts
 * (E), which size the backward's scratch at its start (moe_scratch). */
static void moe_buffers(struct bufs *x, const struct zs_model *m, uint64_t BT, uint64_t l, unsigned e16, int rc)
{
	static const char *const fixed[STEP_MOE_EXPERT] = {"probs", "experts", "weights", "counts", "start", "tok",
	                                                    "slot", "sgu", "sact", "sye", "sg"};
	static const char *const expert[4] = {"xe", "gu", "act", "ye"};
	uint64_t E = m->experts, k = m->experts_per_tok, S = m->shared_ffn, d = m->hidden;
	const uint64_t n[STEP_MOE_EXPERT] = {BT * E, BT * k, BT * k, E, E + 1, BT * k, BT * k,
	                                     BT * 2 * S, BT * S, BT * d, BT};
	const unsigned es[STEP_MOE_EXPERT] = {4, 8, e16, 8, 8, 8, 8, e16, e16, e16, e16};
	for (unsigned i = 0; i < STEP_MOE_EXPERT; i++)
		if (i < STEP_MOE_SGU || S > 0) /* the shared expert's: qwen2_moe's */
			buf(x, (struct step_buffer){fixed[i], STEP_MOE, i, (int)(l - 1), n[i], es[i], ZS_CAT_ACTIVATIONS,
			                            STEP_AT_LAYER, l, l, rc && i != STEP_MOE_COUNTS, 0});
	for (uint64_t e = 0; e < E; e++)
		for (unsigned j = 0; j < 4; j++) {
			struct step_buffer b = {expert[j], STEP_MOE, STEP_MOE_EXPERT + 4 * (unsigned)e + j, (int)(l - 1), 0,
			                        e16, ZS_CAT_ACTIVATIONS, STEP_AT_LAYER, l, l, rc, 0};
			b.elements = BT * step_moe_row(m, &b); /* the bound: every token */
			buf(x, b);
		}
}

/* The mixture's backward scratch (enum step_moe_scratch), until block
 * 0's backward as the other scratch. */
static void moe_scratch(struct bufs *x, const struct zs_model *m, uint64_t BT)
{
	static const char *const name[STEP_MOE_NSCRATCH] = {"dw", "dlogits", "dxr", "dye", "dxe", "dact", "dgu",
	                                                     "dsye", "dsxe", "dsact", "dsgu"};
	uint64_t S = m->shared_ffn;
	const uint64_t fixed[STEP_MOE_NSCRATCH] = {m->experts_per_tok, m->experts, m->hidden, 0, 0, 0, 0,
	                                           m->hidden, m->hidden, S, 2 * S};
	for (unsigned i = 0; i < (S > 0 ? STEP_MOE_NSCRATCH : STEP_MOE_DSYE); i++) {
		struct step_buffer b = {name[i], STEP_MOE_SCRATCH, i, -1, 0, 4, ZS_CAT_SCRATCH, STEP_AT_BACKWARD, 0, 1, 0, 0};
		uint64_t row = step_moe_row(m, &b);
		b.elements = BT * (row > 0 ? row : fixed[i]);
		buf(x, b);
	}
}

uint64_t step_moe_row(const struct zs_model *m, const struct step_buffer *b)
{
	uint64_t d = m->hidden, F = m->intermediate;
	if (b->role == STEP_MOE && b->index >= STEP_MOE_EXPERT) {
		const uint64_t row[4] = {d, 2 * F, F, d};
		return row[(b->index - STEP_MOE_EXPERT) % 4];
	}
	if (b->role == STEP_MOE_SCRATCH && b->index >= STEP_MOE_DYE && b->index <= STEP_MOE_DGU) {
		const uint64_t row[4] = {d, d, F, 2 * F};
		return row[b->index - STEP_MOE_DYE];
	}
	return 0;
}

long step_moe_expert(const struct step_buffer *b)
{
	return b->role == STEP_MOE && b->index >= STEP_MOE_EXPERT ? (long)((b->index - STEP_MOE_EXPERT) / 4) : -1;
}

/* The order is the engine's (tfm_net.c makes them in it): the batch, the
 * backward's scratch, the conversion buffers, then layer by layer what it
 * saves. In mixed precision the matmul outputs and what they feed (x0,
 * ln1, qkv, atty, res2, ln2, fch, fch_act, res3, lnf) are 16-bit; the
 * norms' statistics, the softmax and the logits stay fp32. */
void step_buffers_build(struct step_buffers *b, const struct zs_model *m, const struct step_params *p,
                        uint64_t batch, uint64_t seq, int mixed, enum zs_recompute recompute)
{
	int gpt2 = m->family == ZS_FAMILY_GPT2;
	uint64_t B = batch, T = seq, BT = B * T, h = m->hidden, L = m->layers, head = L + 1;
	uint64_t q = m->heads * m->head_dim, Q = q + 2 * m->kv_heads * m->head_dim;
	uint64_t F = m->intermediate, U = gpt2 ? F : 2 * F, mean = gpt2 ? BT : 0;
	const enum zs_cat A = ZS_CAT_ACTIVATIONS, S = ZS_CAT_SCRATCH;
	const unsigned e16 = mixed ? 2 : 4;
	static const char *const scratch[STEP_NSCRATCH] = {"dres", "dx", "dqkv", "dh", "dup", "datt"};
	/* gemma2's dup also holds the gradient of attention's projection's
	 * output, between its norm's backward and its own */
	uint64_t dup = m->gemma && h > U ? BT * h : BT * U;
	const uint64_t sc[STEP_NSCRATCH] = {BT * h, BT * (q > h ? q : h), BT * Q, BT * F, dup, T * T};
	/* a block's saved tensors: elements, and whether 16-bit in mixed */
	/* qwen3's head norms: their input, the q and k heads of each row
	 * (16-bit, a product's), and each head's 1/rms */
	uint64_t qk = m->qk_norm ? m->heads + m->kv_heads : 0;
	/* gemma2's: the soft-capped scores' tanh (fp32, as the softmax), and
	 * the projections' outputs before the norms after them, with 1/rms */
	uint64_t cap = m->gemma && m->attn_softcap > 0 ? B * m->heads * T * T : 0, post = m->gemma ? BT : 0;
	const uint64_t e[STEP_NBLOCK_ACTS] = {BT * h, mean, BT, BT * Q, BT * qk * m->head_dim, BT * qk,
	                                      B * m->heads * T * T, cap, BT * q, post * h, post, BT * h, BT * h, mean,
	                                      BT, BT * U, BT * F, post * h, post, BT * h};
	const int is16[STEP_NBLOCK_ACTS] = {1, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1};
	/* a mixture's blocks have no MLP: the router and experts save their
	 * own (moe_buffers), and the MLP's scratch dh and dup is not made */
	const int moe = m->experts > 0;

	b->n = 0;
	struct bufs x = {b, 16 + STEP_NBLOCK_ACTS * L + 8}; /* a first size; buf() grows it where a step has more */
	b->buf = zs_malloc(x.cap * sizeof *b->buf);
	buf(&x, (struct step_buffer){"tokens", STEP_TOKENS, 0, -1, BT, 4, A, STEP_AT_FORWARD, 0, 0, 0, 0});
	buf(&x, (struct step_buffer){"targets", STEP_TARGETS, 0, -1, BT, 4, A, STEP_AT_FORWARD, 0, head, 0, 0});
	for (unsigned i = 0; i < STEP_NSCRATCH; i++)
		buf(&x, (struct step_buffer){scratch[i], STEP_SCRATCH, i, -1, moe && (i == 3 || i == 4) ? 0 : sc[i], 4,
		                             S, STEP_AT_BACKWARD, 0, i == 0 ? 0 : 1, 0, 0});
	if (moe)
		moe_scratch(&x, m, BT);
	if (m->tied)
		buf(&x, (struct step_buffer){"dnorm", STEP_DNORM, 0, -1, gpt2 ? 2 * h : h, 4, S, STEP_AT_BACKWARD, 0, 0, 0, 0});
	if (mixed && p != NULL) {
		/* the kernels run in fp32: a layer's params widened (the largest
		 * layer's), its grads before they are rounded, a block's input
		 * and 16-bit tensors widened */
		uint64_t wmax = max3(p->layer[0].numel, L > 0 ? p->layer[1].numel : 0, p->layer[head].numel);
		uint64_t a16 = BT * h;
		for (int a = 0; a < STEP_NBLOCK_ACTS; a++)
			a16 += is16[a] && !(moe && (a == STEP_ACT_FCH || a == STEP_ACT_FCH_ACT)) ? e[a] : 0;
		/* a mixture's: the routing weights, then every expert's four,
		 * B·T·k rows in all whatever the routing (dropless) */
		if (moe) /* and the shared expert's four (qwen2_moe) */
			a16 += BT * m->experts_per_tok * (1 + 2 * h + 3 * F) + BT * (3 * m->shared_ffn + h + 1) *
			       (m->shared_ffn > 0);
		buf(&x, (struct step_buffer){"w32", STEP_W32, 0, -1, wmax, 4, S, STEP_AT_FORWARD, 0, 0, 0, 0});
		buf(&x, (struct step_buffer){"act32", STEP_ACT32, 0, -1, a16, 4, S, STEP_AT_FORWARD, 0, 0, 0, 0});
		buf(&x, (struct step_buffer){"g32", STEP_G32, 0, -1, wmax, 4, S, STEP_AT_BACKWARD, 0, 0, 0, 0});
	}
	buf(&x, (struct step_buffer){act_names[STEP_ACT_X0], STEP_SAVED, STEP_ACT_X0, -1, BT * h, e16, A,
	                             STEP_AT_LAYER, 0, 1, 0, 0});
	for (uint64_t l = 1; l <= L; l++)
		for (int a = 0; a < STEP_NBLOCK_ACTS; a++) {
			/* full recomputation keeps a block's output only; selective
			 * the softmax's input-output (Korthikanti et al. 2022, §5) */
			int rc = recompute == ZS_RECOMPUTE_FULL ? a != STEP_ACT_RES3
			         : recompute == ZS_RECOMPUTE_SELECTIVE && (a == STEP_ACT_ATT || a == STEP_ACT_ATT_TANH);
			int mlp = a == STEP_ACT_FCH || a == STEP_ACT_FCH_ACT;
			buf(&x, (struct step_buffer){act_names[a], STEP_SAVED, (unsigned)a, (int)(l - 1),
			                             moe && mlp ? 0 : e[a], is16[a] ? e16 : 4, A, STEP_AT_LAYER, l,
			                             a == STEP_ACT_RES3 ? l + 1 : l, rc, 0});
			if (moe && a == STEP_ACT_RES3 - 1)
				moe_buffers(&x, m, BT, l, e16, recompute == ZS_RECOMPUTE_FULL); /* before res3, the block's output, as the engine makes them */
		}
	/* the head: tied, the final norm's output and the logits are kept
	 * until the embedding's backward */
	const uint64_t he[4] = {BT * h, mean, BT, BT * m->vocab};
	for (int a = STEP_ACT_LNF; a <= STEP_ACT_LOGITS; a++) {
		int kept = m->tied && (a == STEP_ACT_LNF || a == STEP_ACT_LOGITS);
		buf(&x, (struct step_buffer){act_names[a], STEP_SAVED, (unsigned)a, -1, he[a - STEP_ACT_LNF],
		                             a == STEP_ACT_LNF ? e16 : 4, A, STEP_AT_LAYER, head, kept ? 0 : head, 0, 0});
	}
}

size_t step_graph_first(const struct step_params *p, enum zs_recompute recompute)
{
	size_t first = 0;
	for (size_t x = 0; step_params_frozen(p) && x < p->nmodules; x++) {
		const struct step_module *md = &p->module[x];
		size_t t = md->first;
		while (t < md->first + md->n && !step_trained(p, t))
			t++;
		first = md->layer;
		if (t < md->first + md->n)
			break;
	}
	return recompute == ZS_RECOMPUTE_FULL && first > 1 ? 1 : first;
}

int step_layer_no_backward(const struct step_params *p, enum zs_recompute recompute, size_t l)
{
	const struct step_layer *ly = &p->layer[l];
	if (l >= step_graph_first(p, recompute))
		return 0;
	for (size_t t = ly->first; t < ly->first + ly->n; t++)
		if (step_trained(p, t))
			return 0;
	return 1;
}

/* The head layer's weight (lm_head's; tied, the token table's): the first
 * tensor of the first linear in the last layer. */
static size_t head_weight(const struct step_params *p)
{
	size_t x = 0;
	while (x + 1 < p->nmodules && !(p->module[x].layer + 1 == p->nlayers && p->module[x].matmul))
		x++;
	return p->module[x].first;
}

/* Whether module x has a LoRA adapter that reads its input (util/lora.h:
 * lora_A's weight gradient reads its input, x itself without dropout,
 * the dropout's output with it, which step_buffers_lora keeps). */
static int adapter_reads_input(const struct step_params *p, size_t x)
{
	for (size_t y = x + 1; p->lora_dropout == 0 && y < p->nmodules && p->module[y].adapter != NULL; y++)
		if (p->module[y].base == x)
			return 1;
	return 0;
}

/* Whether layer l (in the graph) keeps saved tensor a, the input of one
 * of its linears, which only that linear's weight gradient reads
 * (tfm.c's matmul_backward reads its input for dW alone): not where the
 * weight is frozen, unless an adapter on it reads it (1.13: F.linear(x, w)
 * with w frozen saves no x, MmBackward0's _saved_self None;
 * derivatives.yaml's mm saves self for mat2's gradient only). A block's
 * four (the inputs of q/k/v, of the attention's projection, of up and of
 * down: their order in forward; its adapters' own matmuls are not among
 * them), under every recompute but selective's atty (which it rebuilds
 * with its scores, the attention's output): under full recompute
 * torch.utils.checkpoint reruns the block's forward inside backward and
 * autograd saves there what it saves in a forward, so a frozen linear's
 * input is made and dropped in the rerun, not kept for the block's
 * backward (the engine rebuilds it in the backward's scratch,
 * engine/tfm_net.c block_run); a mixture's block (more linears) keeps
 * them all. The head's, the final norm's output, under every recompute:
 * no checkpoint holds the head. */
static int linear_input_kept(const struct step_params *p, enum zs_recompute recompute, size_t l, unsigned a)
{
	static const unsigned in[4] = {STEP_ACT_LN1, STEP_ACT_ATTY, STEP_ACT_LN2, STEP_ACT_FCH_ACT};
	if (l + 1 == p->nlayers)
		return a != STEP_ACT_LNF || step_trained(p, head_weight(p));
	size_t k = 0, w[4] = {0};
	for (size_t x = 0; x < p->nmodules; x++)
		if (p->module[x].layer == l && p->module[x].matmul && p->module[x].adapter == NULL && k++ < 4)
			w[k - 1] = x;
	for (unsigned j = 0; j < 4 && k == 4 && l > 0; j++)
		if (in[j] == a && !(recompute == ZS_RECOMPUTE_SELECTIVE && a == STEP_ACT_ATTY))
			return step_trained(p, p->module[w[j]].first) || adapter_reads_input(p, w[j]);
	return 1;
}

void step_buffers_freeze(struct step_buffers *b, const struct step_params *p, enum zs_recompute recompute)
{
	size_t F = step_graph_first(p, recompute);
	for (size_t i = 0; step_params_frozen(p) && i < b->n; i++) {
		struct step_buffer *x = &b->buf[i];
		if (x->role != STEP_SAVED || x->when != STEP_AT_LAYER)
			continue;
		int out = x->index == STEP_ACT_X0 || x->index == STEP_ACT_RES3; /* the next layer's input */
		if (x->layer >= F ? linear_input_kept(p, recompute, x->layer, x->index)
		                  : out && x->layer + 1 == F) /* read by the first layer in the graph's backward */
			continue;
		x->recomputed = 0;
		x->freed_fwd = x->layer + (out && x->layer < F ? 2 : 1);
	}
	/* tied, the logits' gradient waits for the embedding's backward only
	 * where it makes the table's gradient */
	size_t head = p->nlayers - 1;
	for (size_t i = 0; p->tied && !step_trained(p, head_weight(p)) && i < b->n; i++)
		if (b->buf[i].role == STEP_SAVED && b->buf[i].index == STEP_ACT_LOGITS)
			b->buf[i].freed_after = head;
}

void step_buffers_lora(struct step_buffers *b, const struct step_params *p, uint64_t batch, uint64_t seq, int mixed,
                       enum zs_recompute recompute)
{
	const uint64_t BT = batch * seq;
	const unsigned e16 = mixed ? 2 : 4;
	const int drop = p->lora_dropout > 0, rc = recompute == ZS_RECOMPUTE_FULL;
	const size_t F = step_graph_first(p, recompute);
	struct bufs x = {b, b->n};
	uint64_t r = 0, in = 0;
	for (size_t y = 0; y < p->nmodules; y++) {
		const struct step_module *md = &p->module[y];
		if (md->adapter == NULL || strncmp(md->adapter, "lora_A", 6) != 0) /* each adapter's by its lora_A */
			continue;
		const struct step_tensor *A = &p->tensor[md->first]; /* [r, in] */
		size_t l = md->layer;
		r = A->shape[0], in = A->shape[1] > in ? A->shape[1] : in;
		/* --freeze over the adapters: outside autograd's graph (l < F)
		 * nothing is kept, and a frozen lora_B's (lora_A's) gradient
		 * reads no xa (dropped x): freed after the forward, as
		 * step_buffers_freeze frees a frozen linear's input (under full
		 * recompute, made again as the block's are) */
		const int out = l < F && !rc, no_b = (out || !step_trained(p, md->first + 1)) && !rc,
		          no_a = (out || !step_trained(p, md->first)) && !rc;
		buf(&x, (struct step_buffer){"lora_xa", STEP_LORA, (unsigned)y, (int)l - 1, BT * r, e16,
		                             ZS_CAT_ACTIVATIONS, STEP_AT_LAYER, l, l, rc, no_b ? l + 1 : 0});
		if (drop) {
			buf(&x, (struct step_buffer){"lora_drop", STEP_LORA, (unsigned)y, (int)l - 1, BT * A->shape[1], e16,
			                             ZS_CAT_ACTIVATIONS, STEP_AT_LAYER, l, l, rc, no_a ? l + 1 : 0});
			buf(&x, (struct step_buffer){"lora_noise", STEP_LORA, (unsigned)y, (int)l - 1, BT * A->shape[1], e16,
			                             ZS_CAT_ACTIVATIONS, STEP_AT_LAYER, l, l, rc, out ? l + 1 : 0});
		}
	}
	/* mixed: the kernels read one adapter's xa at a time widened, in
	 * act32 past the block's copies (engine/tfm_net.c xa32), and with
	 * dropout its output after it (dropout_fwd, of the widest input) */
	for (size_t i = 0; mixed && i < b->n; i++)
		if (b->buf[i].role == STEP_ACT32)
			b->buf[i].elements += BT * (r + (drop ? in : 0));
	buf(&x, (struct step_buffer){"dlora", STEP_LORA_SCRATCH, STEP_LORA_DT, -1, BT * r, 4, ZS_CAT_SCRATCH,
	                             STEP_AT_BACKWARD, 0, 1, 0, 0});
	if (drop)
		buf(&x, (struct step_buffer){"dlora_x", STEP_LORA_SCRATCH, STEP_LORA_DX, -1, BT * in, 4, ZS_CAT_SCRATCH,
		                             STEP_AT_BACKWARD, 0, 1, 0, 0});
}

const char *zs_freeze_saved_spec(const struct zs_config *c)
{
	return c->framework == ZS_FW_PAPER || c->framework == ZS_FW_DEEPSPEED ? c->freeze : "";
}

/* The order is the engine's (engine/net.c makes them in it). */
void step_buffers_mlp(struct step_buffers *b, const size_t *widths, size_t nwidths, uint64_t batch)
{
	const enum zs_cat A = ZS_CAT_ACTIVATIONS, S = ZS_CAT_SCRATCH;
	const size_t end = STEP_END_OF_BACKWARD;
	uint64_t dmax = 0;
	for (size_t l = 1; l < nwidths; l++)
		dmax = widths[l] > dmax ? widths[l] : dmax;
	b->n = 0;
	struct bufs x = {b, nwidths + 4}; /* a first size; buf() grows it */
	b->buf = zs_malloc(x.cap * sizeof *b->buf);
	buf(&x, (struct step_buffer){"delta0", STEP_SCRATCH, 0, -1, batch * dmax, 4, S, STEP_AT_BACKWARD, 0, end, 0, 0});
	buf(&x, (struct step_buffer){"delta1", STEP_SCRATCH, 1, -1, batch * dmax, 4, S, STEP_AT_BACKWARD, 0, end, 0, 0});
	buf(&x, (struct step_buffer){"x", STEP_TOKENS, 0, -1, batch * widths[0], 4, A, STEP_AT_FORWARD, 0, end, 0, 0});
	buf(&x, (struct step_buffer){"y", STEP_TARGETS, 0, -1, batch * widths[nwidths - 1], 4, A, STEP_AT_FORWARD, 0, end, 0, 0});
	for (size_t l = 0; l + 1 < nwidths; l++)
		buf(&x, (struct step_buffer){"out", STEP_SAVED, STEP_ACT_MLP_OUT, -1, batch * widths[l + 1], 4, A, STEP_AT_LAYER, l, end, 0, 0});
}

uint64_t step_params_count(const struct zs_model *m)
{
	struct step_params p;
	step_params_build(&p, m);
	uint64_t n = p.numel;
	step_params_free(&p);
	return n;
}

/* ------------------------------------------------------------------------ */
/* The paper's units under --freeze (util/freeze.h's patterns) */

/* Part k of tensor i's name (select_part). */
static void part_of(const struct step_params *p, size_t i, int k, char *out, size_t n)
{
	char name[256];
	step_tensor_name(p, i, name, sizeof name);
	select_part(name, k, out, n);
}

const char *step_part_name(const struct step_params *p, size_t i, int k, char *out, size_t n)
{
	part_of(p, i, p->tensor[i].nparts ? k : -1, out, n);
	return out;
}

static unsigned nparts(const struct step_tensor *t) { return t->nparts ? t->nparts : 1; }

void step_params_freeze(struct step_params *p, const char *spec)
{
	p->freeze = spec != NULL && *spec ? spec : NULL;
	for (size_t i = 0; i < p->ntensors; i++) {
		struct step_tensor *t = &p->tensor[i];
		t->frozen = 0;
		for (unsigned k = 0; p->freeze != NULL && k < nparts(t); k++) {
			char name[256];
			part_of(p, i, t->nparts ? (int)k : -1, name, sizeof name);
			t->frozen += zs_freeze_match(spec, name, p->nlayers - 2) != 0;
		}
	}
}

int step_trained(const struct step_params *p, size_t i)
{
	return p->tensor[i].frozen < nparts(&p->tensor[i]);
}

int step_params_frozen(const struct step_params *p) { return p->freeze != NULL; }

uint64_t zs_freeze_trained(const struct step_params *p)
{
	uint64_t t = 0;
	for (size_t i = 0; i < p->ntensors; i++)
		if (step_trained(p, i))
			t += p->tensor[i].numel;
	return t;
}

struct zs_freeze_run *zs_freeze_units(const struct step_params *p, int by_layer, int whole, size_t *nunits,
                                      char **cause)
{
	const char *spec = p->freeze;
	struct zs_freeze_run *run = zs_calloc(p->nlayers + 1, sizeof *run);
	size_t U = 0, u = SIZE_MAX;
	uint64_t end = 0; /* where unit u's run ended: a trainable tensor after a frozen one opens a second */
	int closed = 0;
	char name[256];
	for (size_t l = 0; l < p->nlayers; l++) {
		const struct step_layer *ly = &p->layer[l];
		if (U == 0 || (by_layer && ly->numel > 0)) {
			u = U++;
			run[u] = (struct zs_freeze_run){ly->offset, 0, 0};
			end = ly->offset, closed = 0;
		}
		run[u].size += ly->numel;
		uint64_t off = ly->offset;
		for (size_t i = ly->first; i < ly->first + ly->n; off += p->tensor[i++].numel) {
			unsigned np = nparts(&p->tensor[i]), hit = p->tensor[i].frozen;
			step_tensor_name(p, i, name, sizeof name);
			if (hit > 0 && hit < np) {
				(void)zs_fail(cause, "--freeze %s: freezes some parts of the fused tensor %s, not all (the "
				                     "engine's kernels fuse them; freeze all or none)", spec, name);
				free(run);
				return NULL;
			}
			if (hit) {
				closed = run[u].n > 0;
				continue;
			}
			if (closed || (run[u].n > 0 && off != end)) {
				free(run);
				if (cause == NULL)
					return NULL;
				/* what would be taken: --unit layer only where it is */
				size_t n2;
				struct zs_freeze_run *alt = by_layer ? NULL : zs_freeze_units(p, 1, whole, &n2, NULL);
				(void)zs_fail(cause, "--freeze %s under --unit %s: the trainable parameters "
				                     "of a unit are not one run of the flat vector (%s follows a frozen tensor; "
				                     "docs/schedule.md, \"Frozen parameters\"): %s", spec, by_layer ? "layer" : "model", name,
				              alt != NULL ? "give --unit layer"
				              : by_layer  ? "freeze only tensors at a layer's start or end (whole blocks, embeddings), "
				                            "or give --framework torch --wrapper none or ddp"
				                          : "freeze only tensors at the model's start or end (embeddings, "
				                            "all-but-last:N), or give --framework torch --wrapper none or ddp");
				free(alt);
				return NULL;
			}
			if (run[u].n == 0)
				run[u].off = off;
			run[u].n += p->tensor[i].numel;
			end = off + p->tensor[i].numel;
		}
	}
	for (size_t k = 0; whole && k < U; k++)
		if (run[k].n != 0 && run[k].n != run[k].size) {
			(void)zs_fail(cause, "--freeze %s under --framework paper --schemes zero3 --unit %s: unit %zu is "
			                     "part frozen, part trainable (zero3 shards its optimizer state as its params: a "
			                     "unit must be all frozen or all trainable; docs/schedule.md, \"Frozen "
			                     "parameters\")", spec, by_layer ? "layer" : "model", k);
			free(run);
			return NULL;
		}
	*nunits = U;
	return run;
}

int zs_freeze_paper_check(const struct zs_config *c, const struct zs_model *m, char **cause)
{
	int ds = c->framework == ZS_FW_DEEPSPEED;
	/* with --lora-r it names adapters: util/lora.h's zs_lora_paper_check */
	if (!c->freeze[0] || (c->framework != ZS_FW_PAPER && !ds) || c->lora_r)
		return 0;
	if (m == NULL)
		return zs_fail(cause, "--freeze %s under --framework %s: only with --model (a transformer: the MLP's "
		                      "layers have no Hugging Face names)", c->freeze, zs_framework_name(c->framework));
	struct step_params p;
	step_params_build(&p, m);
	step_params_freeze(&p, c->freeze);
	size_t nfrozen = 0;
	for (size_t i = 0; i < p.ntensors; i++)
		nfrozen += !step_trained(&p, i);
	int zero3 = 0, bad = nfrozen == 0 || nfrozen == p.ntensors;
	for (size_t i = 0; i < c->nschemes; i++)
		for (size_t w = 0; w < c->nworld; w++)
			zero3 |= c->schemes[i] == ZS_ZERO3 && c->world[w] > 1 && !ds;
	int units_bad = 0;
	for (size_t u = 0; !units_bad && u < c->nunits; u++) {
		size_t n;
		struct zs_freeze_run *run = zs_freeze_units(&p, c->units[u] == ZS_UNIT_LAYER, zero3, &n, cause);
		units_bad = run == NULL;
		free(run);
	}
	if (bad && !units_bad)
		(void)zs_fail(cause, "--freeze %s: freezes %s of %s's %zu parameter tensors (nothing to %s)", c->freeze,
		              nfrozen ? "every one" : "none", m->name, p.ntensors, nfrozen ? "train" : "freeze");
	bad |= units_bad;
	step_params_free(&p);
	return bad ? -1 : 0;
}
