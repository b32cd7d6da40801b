/*
 * model — Hugging Face config.json to a transformer shape. See model.h.
 * The keys and defaults are those of transformers' GPT2Config,
 * LlamaConfig / MistralConfig, Qwen2Config, Phi3Config and Qwen3Config.
 */
#include "config.h"

#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "util/buf.h"
#include "util/datafile.h"
#include "util/model.h"
#include "util/util.h"

const char *zs_family_name(enum zs_family f)
{
	return f == ZS_FAMILY_GPT2 ? "gpt2" : "llama";
}

void zs_model_dropout_json(cJSON *o, const struct zs_model *m)
{
	if (m->family == ZS_FAMILY_GPT2) {
		zs_json_add_number(o, "embd_pdrop", m->embd_pdrop);
		zs_json_add_number(o, "attn_pdrop", m->attn_pdrop);
		zs_json_add_number(o, "resid_pdrop", m->resid_pdrop);
	} else {
		zs_json_add_number(o, "attention_dropout", m->attn_pdrop);
	}
}

/* A whole-number key of a family, read into one field of the shape.
 * An optional key may be absent or null (the field is then 0 and gets
 * its default). */
struct key {
	const char *name;
	size_t field;           /* offsetof(struct zs_model, ...) */
	uint64_t max;
	int optional;
};

#define FIELD(f) offsetof(struct zs_model, f)

static const struct key gpt2_keys[] = {
	{ "n_embd", FIELD(hidden), ZS_MODEL_MAX_WIDTH, 0 },
	{ "n_layer", FIELD(layers), ZS_MODEL_MAX_LAYERS, 0 },
	{ "n_head", FIELD(heads), ZS_MODEL_MAX_HEADS, 0 },
	{ "vocab_size", FIELD(vocab), ZS_MODEL_MAX_VOCAB, 0 },
	{ "n_positions", FIELD(positions), ZS_MODEL_MAX_POSITIONS, 0 },
	{ "n_inner", FIELD(intermediate), ZS_MODEL_MAX_FFN, 1 },
	{ NULL, 0, 0, 0 }
};

static const struct key llama_keys[] = {
	{ "hidden_size", FIELD(hidden), ZS_MODEL_MAX_WIDTH, 0 },
	{ "intermediate_size", FIELD(intermediate), ZS_MODEL_MAX_FFN, 0 },
	{ "num_hidden_layers", FIELD(layers), ZS_MODEL_MAX_LAYERS, 0 },
	{ "num_attention_heads", FIELD(heads), ZS_MODEL_MAX_HEADS, 0 },
	{ "vocab_size", FIELD(vocab), ZS_MODEL_MAX_VOCAB, 0 },
	{ "max_position_embeddings", FIELD(positions), ZS_MODEL_MAX_POSITIONS, 0 },
	{ "num_key_value_heads", FIELD(kv_heads), ZS_MODEL_MAX_HEADS, 1 },
	{ "head_dim", FIELD(head_dim), ZS_MODEL_MAX_WIDTH, 1 },
	{ NULL, 0, 0, 0 }
};

/* The mixtures of experts read (read_moe): a type's bit. */
enum { MOE_MIXTRAL = 1, MOE_QWEN = 2, MOE_QWEN3 = 4 };

/* model_type -> family and its keys. */
static const struct {
	const char *type;
	const struct key *keys;
	const char *eps_key;    /* the norms' epsilon */
	double eps;             /* its default */
	uint64_t window;        /* sliding_window when absent (0: none) */
	const char *window_on;  /* the switch that must be true for sliding_window to count (NULL: none) */
	uint64_t window_from;   /* and the first layer it applies to, max_window_layers' default (0: every) */
	uint64_t head_dim;      /* head_dim when absent (0: hidden_size / heads) */
	double pad;             /* pad_token_id when absent (-1: none) */
	enum zs_family family;
	int window_key;         /* the family reads sliding_window */
	int tied;               /* tie_word_embeddings when absent */
	int qkv_bias;           /* q_proj, k_proj and v_proj have biases */
	int hf_fused;           /* qkv_proj and gate_up_proj are single tensors */
	int qk_norm;            /* an RMSNorm on each head's queries and keys */
	int gemma;              /* Gemma 2's norms, GeGLU, scaled embedding and soft-capping */
	int gemma3;             /* Gemma 3's layer pattern and local rotary base; no soft-caps by default */
	int moe;                /* a mixture of experts, MOE_MIXTRAL, MOE_QWEN or MOE_QWEN3: read_moe reads its keys */
	double rope_theta;      /* rope_theta when absent (0: 10000) */
} types[] = {
	{ .type = "gpt2", .keys = gpt2_keys, .eps_key = "layer_norm_epsilon", .eps = 1e-5, .pad = -1,
	  .family = ZS_FAMILY_GPT2, .tied = 1 },
	{ .type = "llama", .keys = llama_keys, .eps_key = "rms_norm_eps", .eps = 1e-6, .pad = -1,
	  .family = ZS_FAMILY_LLAMA },
	{ .type = "mistral", .keys = llama_keys, .eps_key = "rms_norm_eps", .eps = 1e-6, .window = 4096, .pad = -1,
	  .family = ZS_FAMILY_LLAMA, .window_key = 1 },
	/* Qwen2Config (configuration_qwen2.py 70-76, transformers 5.x): no tie,
	 * eps 1e-6, use_sliding_window false, sliding_window 4096 that
	 * __post_init__ drops unless use_sliding_window (84), and then only
	 * layers from max_window_layers (28) on slide (88-94); Qwen2Attention
	 * gives q_proj, k_proj and v_proj bias=True, o_proj bias=False
	 * (modeling_qwen2.py). */
	{ .type = "qwen2", .keys = llama_keys, .eps_key = "rms_norm_eps", .eps = 1e-6, .window = 4096,
	  .window_on = "use_sliding_window", .window_from = 28, .pad = -1, .family = ZS_FAMILY_LLAMA, .window_key = 1,
	  .qkv_bias = 1 },
	/* Phi3Config (configuration_phi3.py at d7991107, __init__): eps 1e-5,
	 * rope_theta 10000, no tie, num_key_value_heads the heads,
	 * sliding_window None, pad_token_id 32000; Phi3Attention's qkv_proj and Phi3MLP's
	 * gate_up_proj are one nn.Linear each, bias=False (modeling_phi3.py
	 * at 43c2b4816a65): llama's kernels, its fused tensors Hugging
	 * Face's own. */
	{ .type = "phi3", .keys = llama_keys, .eps_key = "rms_norm_eps", .eps = 1e-5, .pad = 32000,
	  .family = ZS_FAMILY_LLAMA, .window_key = 1, .hf_fused = 1 },
	/* Qwen3Config (configuration_qwen3.py at 008e5743): eps 1e-6, no tie,
	 * head_dim 128 when absent (not hidden_size / heads), attention_bias
	 * false (true is refused below), use_sliding_window false, sliding_window
	 * 4096 and max_window_layers 28 as Qwen2's (__post_init__), pad_token_id
	 * None; Qwen3Attention (modeling_qwen3.py at 000c33fd) has no q/k/v
	 * biases and normalises each head's queries and keys, q_norm and k_norm
	 * (Qwen3RMSNorm over head_dim, 50-64), before the rotary embedding. */
	{ .type = "qwen3", .keys = llama_keys, .eps_key = "rms_norm_eps", .eps = 1e-6, .window = 4096,
	  .window_on = "use_sliding_window", .window_from = 28, .head_dim = 128, .pad = -1, .family = ZS_FAMILY_LLAMA,
	  .window_key = 1, .qk_norm = 1 },
	/* Gemma2Config (configuration_gemma2.py at 008e5743, its fields):
	 * head_dim 256, rms_norm_eps 1e-6, pad_token_id 0, tie true,
	 * rope_theta 10000, sliding_window 4096 (Gemma2Attention: layers
	 * 0, 2, 4, ... slide), query_pre_attn_scalar 256,
	 * attn_logit_softcapping 50.0, final_logit_softcapping 30.0 (read in
	 * zs_model_from_json below); Gemma2RMSNorm, Gemma2MLP, Gemma2Model's
	 * normalizer and Gemma2DecoderLayer's four norms: modeling_gemma2.py at
	 * 006e8693. */
	{ .type = "gemma2", .keys = llama_keys, .eps_key = "rms_norm_eps", .eps = 1e-6, .window = 4096,
	  .head_dim = 256, .pad = 0, .family = ZS_FAMILY_LLAMA, .window_key = 1, .tied = 1, .gemma = 1 },
	/* Gemma3TextConfig (configuration_gemma3.py at 008f5c8c, __init__):
	 * head_dim 256, rms_norm_eps 1e-6, pad_token_id 0, tie true,
	 * rope_theta 1e6, rope_local_base_freq 1e4, sliding_window 4096,
	 * sliding_window_pattern 6, query_pre_attn_scalar 256, both soft-caps
	 * None (read in zs_model_from_json below); Gemma3RMSNorm, the q/k norms,
	 * Gemma3Attention's is_sliding and Gemma3TextModel's two rotary
	 * embeddings: modeling_gemma3.py at 008f5c8c. */
	{ .type = "gemma3_text", .keys = llama_keys, .eps_key = "rms_norm_eps", .eps = 1e-6, .window = 4096,
	  .head_dim = 256, .pad = 0, .family = ZS_FAMILY_LLAMA, .window_key = 1, .tied = 1, .gemma = 1, .qk_norm = 1,
	  .gemma3 = 1, .rope_theta = 1e6 },
	/* MixtralConfig (configuration_mixtral.py at 008e5743, its fields, the
	 * same defaults as 4.x's __init__): rms_norm_eps 1e-5, rope_theta 1e6,
	 * no tie, sliding_window None, pad_token_id None; the experts' keys
	 * are read by read_moe. */
	{ .type = "mixtral", .keys = llama_keys, .eps_key = "rms_norm_eps", .eps = 1e-5, .pad = -1,
	  .family = ZS_FAMILY_LLAMA, .window_key = 1, .rope_theta = 1e6, .moe = MOE_MIXTRAL },
	/* Qwen2MoeConfig (configuration_qwen2_moe.py at 008e5743, its fields):
	 * rms_norm_eps 1e-6, rope_theta 10000 (4.x's __init__), no tie,
	 * qkv_bias true (4.x's Qwen2MoeAttention: bias=True), pad_token_id
	 * None; use_sliding_window false (true is refused in read_moe); the
	 * experts' keys are read by read_moe. */
	{ .type = "qwen2_moe", .keys = llama_keys, .eps_key = "rms_norm_eps", .eps = 1e-6, .pad = -1,
	  .family = ZS_FAMILY_LLAMA, .qkv_bias = 1, .moe = MOE_QWEN },
	/* Qwen3MoeConfig (configuration_qwen3_moe.py at 008e5743, its fields):
	 * rms_norm_eps 1e-6, no tie, attention_bias false (true is refused
	 * below), use_sliding_window false (true is refused in read_moe),
	 * pad_token_id None, and no head_dim field: Qwen3MoeAttention.__init__
	 * (modeling_qwen3_moe.py at 00d4b3d2) takes getattr(config, "head_dim",
	 * hidden_size // num_attention_heads), gives q/k/v/o bias=attention_bias
	 * and q_norm and k_norm, Qwen3MoeRMSNorm(head_dim), as Qwen3's;
	 * rope_theta 10000 (4.x's __init__); the experts' keys are read by
	 * read_moe. */
	{ .type = "qwen3_moe", .keys = llama_keys, .eps_key = "rms_norm_eps", .eps = 1e-6, .pad = -1,
	  .family = ZS_FAMILY_LLAMA, .qk_norm = 1, .moe = MOE_QWEN3 },
};
#define TYPE_NAMES "gpt2, llama, mistral, qwen2, phi3, qwen3, gemma2, gemma3_text, gemma3, mixtral, qwen2_moe, qwen3_moe"

/* Keys whose value changes what the engine's transformer computes, and
 * the one value (as JSON text: a string, true, false or null) it runs;
 * absent is the default, which it runs. */
static const struct {
	enum zs_family family;
	int gemma;              /* -1: any of the family; 0 or 1: only where m->gemma is */
	const char *key, *runs[2];
} numerics[] = {
	{ ZS_FAMILY_GPT2, -1, "activation_function", { "\"gelu_new\"", "\"gelu_pytorch_tanh\"" } },
	{ ZS_FAMILY_GPT2, -1, "scale_attn_weights", { "true", NULL } },
	{ ZS_FAMILY_GPT2, -1, "scale_attn_by_inverse_layer_idx", { "false", NULL } },
	{ ZS_FAMILY_LLAMA, 0, "hidden_act", { "\"silu\"", NULL } },
	/* Gemma2MLP's act_fn is ACT2FN[config.hidden_activation]; hidden_act is
	 * not read (modeling_gemma2.py at 006e8693) */
	{ ZS_FAMILY_LLAMA, 1, "hidden_activation", { "\"gelu_pytorch_tanh\"", NULL } },
	/* Gemma2Config's use_bidirectional_attention (at 008e5743): no causal mask */
	{ ZS_FAMILY_LLAMA, 1, "use_bidirectional_attention", { "null", "false" } },
	/* gemma3_text's linear scaling is read by read_rope_scaling */
	{ ZS_FAMILY_LLAMA, 0, "rope_scaling", { "null", NULL } },
	/* transformers 5.x's per-layer-type rotary settings (Gemma3TextConfig
	 * at 0018aa64: rope_parameters by layer type); the engine reads
	 * rope_theta and rope_local_base_freq, 4.x's keys, only */
	{ ZS_FAMILY_LLAMA, 1, "rope_parameters", { "null", NULL } },
	/* newer Phi3Configs rotate only this fraction of each head (Phi-4-mini:
	 * 0.75); the kernels rotate all of it */
	{ ZS_FAMILY_LLAMA, -1, "partial_rotary_factor", { "1", NULL } },
};

/* m->unrun: the first of cfg's numerics the engine does not run. */
static void read_numerics(const cJSON *cfg, struct zs_model *m)
{
	for (size_t i = 0; i < sizeof numerics / sizeof numerics[0] && m->unrun[0] == '\0'; i++) {
		const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, numerics[i].key);
		if (numerics[i].family != m->family || it == NULL ||
		    (numerics[i].gemma >= 0 && numerics[i].gemma != m->gemma))
			continue;
		char *text = cJSON_PrintUnformatted(it);
		if (text == NULL)
			zs_oom(__FILE__, __LINE__);
		int runs = 0;
		for (int v = 0; v < 2 && numerics[i].runs[v] != NULL; v++)
			runs |= strcmp(text, numerics[i].runs[v]) == 0;
		if (!runs)
			snprintf(m->unrun, sizeof m->unrun, "\"%s\" is %.40s%s; the engine's transformer runs %s",
			         numerics[i].key, text, strlen(text) > 40 ? "..." : "", numerics[i].runs[0]);
		free(text);
	}
}

/* A positive finite number, or absent/null for the default. */
static int read_positive(const cJSON *cfg, const char *key, double def, const char *where, double *out,
                         char **cause)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, key);
	*out = def;
	if (it == NULL || cJSON_IsNull(it))
		return 0;
	if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || !(it->valuedouble > 0))
		return zs_fail(cause, "%s: \"%s\" must be a positive number", where, key);
	*out = it->valuedouble;
	return 0;
}

/* A dropout probability: a number from 0 to 1, or absent/null for the
 * default. */
static int read_prob(const cJSON *cfg, const char *key, double def, const char *where, double *out, char **cause)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, key);
	*out = def;
	if (it == NULL || cJSON_IsNull(it))
		return 0;
	if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < 0 || it->valuedouble > 1)
		return zs_fail(cause, "%s: \"%s\" must be a number from 0 to 1 (a dropout probability)", where, key);
	*out = it->valuedouble;
	return 0;
}

/* Keys that would change the shape in a way zerosim does not model: any
 * value other than absent, null, false or 0 is refused, with the reason. */
static const struct {
	const char *key, *why;
	int moe_reads;          /* the mixture-of-experts types that read it (MOE_MIXTRAL, MOE_QWEN) */
} refused[] = {
	{ "num_local_experts", "a mixture of experts is not modelled", MOE_MIXTRAL },
	{ "num_experts", "a mixture of experts is not modelled", MOE_QWEN | MOE_QWEN3 },
	{ "n_routed_experts", "a mixture of experts is not modelled", 0 },
	{ "num_experts_per_tok", "a mixture of experts is not modelled", MOE_MIXTRAL | MOE_QWEN | MOE_QWEN3 },
	{ "moe_intermediate_size", "a mixture of experts is not modelled", MOE_QWEN | MOE_QWEN3 },
	/* Qwen3MoeSparseMoeBlock has none and never reads it: ignored there */
	{ "shared_expert_intermediate_size", "a mixture of experts is not modelled", MOE_QWEN | MOE_QWEN3 },
	{ "quantization_config", "quantised weights are not modelled", 0 },
	{ "attention_bias", "biases in the attention projections are not modelled", 0 },
	{ "mlp_bias", "biases in the MLP are not modelled", 0 },
	{ "add_cross_attention", "cross-attention is not modelled", 0 },
};

static int read_key(const cJSON *cfg, const struct key *k, const char *where, struct zs_model *m,
                    char **cause)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, k->name);
	uint64_t *field = (uint64_t *)((char *)m + k->field);

	if (it == NULL || cJSON_IsNull(it)) {
		if (!k->optional)
			return zs_fail(cause, "%s: \"%s\" is missing", where, k->name);
		*field = 0;
		return 0;
	}
	if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble != floor(it->valuedouble) ||
	    it->valuedouble < 1 || it->valuedouble > (double)k->max)
		return zs_fail(cause, "%s: \"%s\" must be a whole number in 1..%llu", where, k->name,
		               (unsigned long long)k->max);
	*field = (uint64_t)it->valuedouble;
	return 0;
}

static int is_set(const cJSON *it)
{
	return it != NULL && !cJSON_IsNull(it) && !cJSON_IsFalse(it) &&
	       !(cJSON_IsNumber(it) && it->valuedouble == 0);
}

/* Gemma3TextConfig's defaults for the keys a config leaves out
 * (configuration_gemma3.py at 008f5c8c, __init__: vocab_size 262_208,
 * hidden_size 2304, intermediate_size 9216, num_hidden_layers 26,
 * num_attention_heads 8, num_key_value_heads 4 (not the heads),
 * max_position_embeddings 131_072; head_dim 256 is the type's). */
static void gemma3_text_defaults(struct zs_model *m)
{
	static const struct { size_t field; uint64_t def; } defs[] = {
		{ FIELD(vocab), 262208 }, { FIELD(hidden), 2304 }, { FIELD(intermediate), 9216 },
		{ FIELD(layers), 26 }, { FIELD(heads), 8 }, { FIELD(kv_heads), 4 }, { FIELD(positions), 131072 },
	};
	for (size_t d = 0; d < sizeof defs / sizeof defs[0]; d++) {
		uint64_t *v = (uint64_t *)(void *)((char *)m + defs[d].field);
		if (*v == 0)
			*v = defs[d].def;
	}
}

/* Gemma3TextConfig's layer pattern and local rotary base (at 008f5c8c):
 * Gemma3Attention.is_sliding = bool((layer_idx + 1) %
 * sliding_window_pattern), and Gemma3TextModel's rotary_emb_local is
 * rope_local_base_freq's. Later releases spell the pattern as
 * layer_types, a "sliding_attention" or "full_attention" for each layer:
 * read where it is one pattern's, refused by name otherwise. */
static int read_gemma3_layers(const cJSON *cfg, const char *where, struct zs_model *m, char **cause)
{
	const cJSON *pat = cJSON_GetObjectItemCaseSensitive(cfg, "sliding_window_pattern");
	m->window_pattern = 6;
	if (pat != NULL && !cJSON_IsNull(pat)) {
		if (!cJSON_IsNumber(pat) || pat->valuedouble != floor(pat->valuedouble) || pat->valuedouble < 1 ||
		    pat->valuedouble > ZS_MODEL_MAX_LAYERS)
			return zs_fail(cause, "%s: \"sliding_window_pattern\" must be a whole number in 1..%d", where,
			               ZS_MODEL_MAX_LAYERS);
		m->window_pattern = (uint64_t)pat->valuedouble;
	}
	const cJSON *lt = cJSON_GetObjectItemCaseSensitive(cfg, "layer_types");
	if (lt != NULL && !cJSON_IsNull(lt)) {
		uint64_t n = cJSON_IsArray(lt) ? (uint64_t)cJSON_GetArraySize(lt) : 0, first_full = 0;
		for (uint64_t l = 0; l < n && first_full == 0; l++) {
			const cJSON *e = cJSON_GetArrayItem(lt, (int)l);
			if (cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0)
				first_full = l + 1;
		}
		int ok = n == m->layers;
		if (ok)
			m->window_pattern = first_full != 0 ? first_full : m->layers + 1;
		for (uint64_t l = 0; l < n && ok; l++) {
			const cJSON *e = cJSON_GetArrayItem(lt, (int)l);
			ok = cJSON_IsString(e) && strcmp(e->valuestring, (l + 1) % m->window_pattern != 0 ? "sliding_attention"
			                                                                                   : "full_attention") == 0;
		}
		if (!ok)
			return zs_fail(cause, "%s: \"layer_types\" is not one global layer in every %llu, after %llu "
			               "sliding ones, for each of the %llu layers (the only pattern modelled)", where,
			               (unsigned long long)m->window_pattern, (unsigned long long)m->window_pattern - 1,
			               (unsigned long long)m->layers);
	}
	return read_positive(cfg, "rope_local_base_freq", 10000.0, where, &m->rope_local_theta, cause);
}

/* rope_scaling of a gemma (m->gemma): gemma3_text's linear one, {"rope_type"
 * (or 4.x's older "type"): "linear", "factor": f > 0}, into m->rope_factor.
 * Gemma3TextModel gives it to rotary_emb, the global layers', alone:
 * rotary_emb_local is made from a copy of the config whose rope_scaling is
 * {"rope_type": "default"} (modeling_gemma3.py, Gemma3TextModel.__init__,
 * 4.50; at 0018aa64, 5.x, rope_parameters["sliding_attention"] is the
 * default's), and the linear type's _compute_linear_scaling_rope_parameters
 * divides the default's inv_freq by the factor (modeling_rope_utils.py at
 * 0044e3b3: `inv_freq /= factor`), attention_scaling 1. Any other value
 * (another type, gemma2's) is a numeric the engine does not run
 * (m->unrun), as elsewhere. */
static void read_rope_scaling(const cJSON *cfg, struct zs_model *m)
{
	const cJSON *rs = cJSON_GetObjectItemCaseSensitive(cfg, "rope_scaling");
	if (!m->gemma || m->unrun[0] != '\0' || rs == NULL || cJSON_IsNull(rs))
		return;
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
	if (type == NULL)
		type = cJSON_GetObjectItemCaseSensitive(rs, "type");
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(rs, "factor");
	if (m->window_pattern != 0 && cJSON_IsObject(rs) && cJSON_GetArraySize(rs) == 2 && cJSON_IsString(type) &&
	    strcmp(type->valuestring, "linear") == 0 && cJSON_IsNumber(f) && isfinite((float)f->valuedouble) &&
	    (float)f->valuedouble > 0) { /* the engine's rope divides in float: 1e-50 would be 0 there */
		m->rope_factor = f->valuedouble;
		return;
	}
	char *text = cJSON_PrintUnformatted(rs);
	if (text == NULL)
		zs_oom(__FILE__, __LINE__);
	snprintf(m->unrun, sizeof m->unrun, "\"rope_scaling\" is %.40s%s; the engine's transformer runs null%s", text,
	         strlen(text) > 40 ? "..." : "", m->window_pattern != 0 ? " or gemma3_text's linear scaling" : "");
	free(text);
}

/* A flag of the config: true or false, absent or null for the default. */
static int read_bool(const cJSON *cfg, const char *key, int def, const char *where, int *out, char **cause)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, key);
	*out = def;
	if (it == NULL || cJSON_IsNull(it))
		return 0;
	if (!cJSON_IsBool(it))
		return zs_fail(cause, "%s: \"%s\" is neither true nor false", where, key);
	*out = cJSON_IsTrue(it);
	return 0;
}

/* The experts' keys of a type (kind: MOE_MIXTRAL or MOE_QWEN).
 *
 * MixtralConfig (configuration_mixtral.py at 008e5743): num_local_experts
 * (8) and num_experts_per_tok (2), which MixtralSparseMoeBlock's
 * torch.topk needs at most E of; router_aux_loss_coef (0.001) and
 * output_router_logits (false), which adds the load-balancing loss to the
 * loss (MixtralForCausalLM.forward); router_jitter_noise (0.0), which
 * multiplies the block's input by noise in training.
 *
 * Qwen2MoeConfig (configuration_qwen2_moe.py at 008e5743): num_experts
 * (60), num_experts_per_tok (4), moe_intermediate_size (1408),
 * shared_expert_intermediate_size (5632), norm_topk_prob (false),
 * router_aux_loss_coef and output_router_logits as Mixtral's; no jitter.
 * Qwen2MoeDecoderLayer (modeling_qwen2_moe.py, 4.x) makes block l sparse
 * when l is not in mlp_only_layers and (l + 1) % decoder_sparse_step is 0:
 * every block only for step 1 and an empty list, the one shape built.
 *
 * Qwen3MoeConfig (configuration_qwen3_moe.py at 008e5743): num_experts
 * (128), num_experts_per_tok (8), moe_intermediate_size (768),
 * norm_topk_prob (false), decoder_sparse_step (1), mlp_only_layers (None:
 * []), router_aux_loss_coef and output_router_logits as Mixtral's; no
 * shared expert, no jitter, no qkv_bias (attention_bias, refused when
 * set). Qwen3MoeSparseMoeBlock (modeling_qwen3_moe.py at 00d4b3d2) is
 * Qwen2-MoE's routed half: softmax in float32, top-k, divided by its sum
 * only under norm_topk_prob; Qwen3MoeDecoderLayer picks sparse blocks as
 * Qwen2MoeDecoderLayer does.
 *
 * The engine runs the blocks (the paper's schemes: cmd_measure.c), the
 * auxiliary loss only in the PyTorch step (util/autograd.c), the noise
 * nowhere: zs_model_router_check refuses what is not run. */
static int read_moe(const cJSON *cfg, const char *where, int kind, struct zs_model *m, char **cause)
{
	int qwen = kind != MOE_MIXTRAL, qwen3 = kind == MOE_QWEN3;
	const struct key moe_keys[] = {
		{ qwen ? "num_experts" : "num_local_experts", FIELD(experts), ZS_MODEL_MAX_EXPERTS, 1 },
		{ "num_experts_per_tok", FIELD(experts_per_tok), ZS_MODEL_MAX_EXPERTS, 1 },
		{ "moe_intermediate_size", FIELD(intermediate), ZS_MODEL_MAX_FFN, 1 },
		{ "shared_expert_intermediate_size", FIELD(shared_ffn), ZS_MODEL_MAX_FFN, 1 },
	};
	/* the defaults of the keys read: Mixtral's, Qwen2-MoE's, Qwen3-MoE's */
	const uint64_t def[3][4] = {{8, 2, 0, 0}, {60, 4, 1408, 5632}, {128, 8, 768, 0}};
	const uint64_t *dk = def[qwen3 ? 2 : qwen];
	for (size_t k = 0; k < (qwen3 ? 3u : qwen ? 4u : 2u); k++) {
		/* null is not the default here: the configs store None, and
		 * the block's range(num_experts) / torch.topk(k=None) fail */
		if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cfg, moe_keys[k].name)))
			return zs_fail(cause, "%s: \"%s\" is null (a whole number is needed: transformers' block fails on None)",
			               where, moe_keys[k].name);
		if (read_key(cfg, &moe_keys[k], where, m, cause) < 0)
			return -1;
	}
	m->experts = m->experts != 0 ? m->experts : dk[0];
	m->experts_per_tok = m->experts_per_tok != 0 ? m->experts_per_tok : dk[1];
	if (m->experts_per_tok > m->experts)
		return zs_fail(cause, "%s: \"num_experts_per_tok\" (%llu) is more than \"%s\" (%llu)", where,
		               (unsigned long long)m->experts_per_tok, moe_keys[0].name, (unsigned long long)m->experts);
	if (qwen) {
		int norm, windowed;
		m->qwen_moe = 1;
		/* intermediate_size, the dense MLP's, gives way to the experts' */
		m->intermediate = m->intermediate != 0 ? m->intermediate : dk[2];
		m->shared_ffn = m->shared_ffn != 0 ? m->shared_ffn : dk[3];
		if (read_bool(cfg, "norm_topk_prob", 0, where, &norm, cause) < 0 ||
		    (!qwen3 && read_bool(cfg, "qkv_bias", 1, where, &m->qkv_bias, cause) < 0) ||
		    read_bool(cfg, "use_sliding_window", 0, where, &windowed, cause) < 0)
			return -1;
		m->topk_raw = !norm;
		if (windowed)
			return zs_fail(cause, "%s: \"use_sliding_window\": sliding-window layers of %s are not modelled",
			               where, m->model_type);
		const cJSON *step = cJSON_GetObjectItemCaseSensitive(cfg, "decoder_sparse_step");
		if (step != NULL && !cJSON_IsNull(step) && !(cJSON_IsNumber(step) && step->valuedouble == 1))
			return zs_fail(cause, "%s: \"decoder_sparse_step\": dense blocks among the sparse ones are not modelled "
			               "(give 1)", where);
		const cJSON *only = cJSON_GetObjectItemCaseSensitive(cfg, "mlp_only_layers");
		if (only != NULL && !cJSON_IsNull(only) && !(cJSON_IsArray(only) && cJSON_GetArraySize(only) == 0))
			return zs_fail(cause, "%s: \"mlp_only_layers\": dense blocks among the sparse ones are not modelled "
			               "(give [])", where);
	}
	const cJSON *coef = cJSON_GetObjectItemCaseSensitive(cfg, "router_aux_loss_coef");
	m->router_aux_coef = 0.001;
	if (coef != NULL && !cJSON_IsNull(coef)) {
		if (!cJSON_IsNumber(coef) || !isfinite(coef->valuedouble) || coef->valuedouble < 0)
			return zs_fail(cause, "%s: \"router_aux_loss_coef\" must be a number of at least 0", where);
		m->router_aux_coef = coef->valuedouble;
	}
	if (read_bool(cfg, "output_router_logits", 0, where, &m->router_logits, cause) < 0)
		return -1;
	if (!qwen && read_prob(cfg, "router_jitter_noise", 0.0, where, &m->router_jitter, cause) < 0)
		return -1;
	return 0;
}

int zs_model_fused_experts(struct zs_model *m, int eager, char **cause)
{
	if (!eager)
		return 0;
	if (m->experts == 0 || m->qwen_moe)
		return zs_fail(cause, "--experts-impl eager: %s (%s) %s", m->name, m->model_type,
		               m->experts == 0 ? "is no mixture of experts"
		                               : "is not described with fused experts yet (mixtral is; give "
		                                 "--experts-impl modulelist)");
	m->fused_experts = 1;
	return 0;
}

int zs_model_router_check(const struct zs_model *m, int pytorch_step, char **cause)
{
	if (m->router_jitter > 0)
		return zs_fail(cause, "%s: \"router_jitter_noise\" is %g: the router's noise is neither run nor predicted "
		               "yet (give 0)", m->name, m->router_jitter);
	if (m->router_logits && !pytorch_step)
		return zs_fail(cause, "%s: \"output_router_logits\" is true: the router's auxiliary load-balancing loss is "
		               "run and predicted in the PyTorch step only (--framework torch; else give false)", m->name);
	return 0;
}

/* Gemma3Config (configuration_gemma3.py at 008f5c8c, __init__): a
 * multimodal checkpoint's config.json (google/gemma-3-4b-pt, -12b, -27b)
 * holds its text model under text_config, Gemma3TextConfig(**text_config)
 * (absent or null: Gemma3TextConfig()), and its SigLIP vision tower under
 * vision_config. zerosim predicts the text model: the Gemma3ForCausalLM
 * of text_config that Gemma3ForConditionalGeneration holds as its
 * language model, and that a text-only fine-tune loads and trains.
 * vision_config, mm_tokens_per_image and the image tokens' indices are
 * ignored: the vision tower and the projector are not counted (for
 * gemma-3-4b 416,866,032 and 2,950,272 parameters; docs/formats.md).
 * The keys refused anywhere are refused at the top level too (a quantised
 * checkpoint's quantization_config sits there). */
static int read_gemma3(const cJSON *cfg, const char *where, struct zs_model *out, char **cause)
{
	for (size_t r = 0; r < sizeof refused / sizeof refused[0]; r++)
		if (is_set(cJSON_GetObjectItemCaseSensitive(cfg, refused[r].key)))
			return zs_fail(cause, "%s: \"%s\": %s", where, refused[r].key, refused[r].why);
	const cJSON *text = cJSON_GetObjectItemCaseSensitive(cfg, "text_config");
	if (text != NULL && !cJSON_IsNull(text) && !cJSON_IsObject(text))
		return zs_fail(cause, "%s: \"text_config\" is not a JSON object (model_type gemma3's text model)", where);
	const cJSON *tt = cJSON_IsObject(text) ? cJSON_GetObjectItemCaseSensitive(text, "model_type") : NULL;
	if (tt != NULL && !(cJSON_IsString(tt) && strcmp(tt->valuestring, "gemma3_text") == 0))
		return zs_fail(cause, "%s: \"text_config\"'s \"model_type\" is not \"gemma3_text\" (model_type gemma3's text "
		               "model is a Gemma3TextConfig)", where);
	cJSON *copy = cJSON_IsObject(text) ? cJSON_Duplicate(text, 1) : cJSON_CreateObject();
	if (copy == NULL || (tt == NULL && cJSON_AddStringToObject(copy, "model_type", "gemma3_text") == NULL))
		zs_oom(__FILE__, __LINE__);
	struct zs_buf w = {0};
	zs_buf_printf(&w, "%s: text_config", where);
	char *in = zs_buf_take(&w);
	int rc = zs_model_from_json(copy, in, out, cause);
	free(in);
	cJSON_Delete(copy);
	return rc;
}

int zs_model_from_json(const cJSON *cfg, const char *where, struct zs_model *out, char **cause)
{
	struct zs_model m = {0};
	size_t t;

	if (!cJSON_IsObject(cfg))
		return zs_fail(cause, "%s: not a model config (the top level is not a JSON object)", where);
	/* cJSON would take the first of two, Python's json the last: refuse. */
	for (const cJSON *a = cfg->child; a != NULL; a = a->next)
		for (const cJSON *b = cfg->child; b != a; b = b->next)
			if (a->string != NULL && b->string != NULL && strcmp(a->string, b->string) == 0)
				return zs_fail(cause, "%s: the key \"%.64s\" is given twice", where, a->string);
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(cfg, "model_type");
	if (type == NULL)
		return zs_fail(cause, "%s: \"model_type\" is missing (" TYPE_NAMES ")", where);
	if (!cJSON_IsString(type))
		return zs_fail(cause, "%s: \"model_type\" is not a string (" TYPE_NAMES ")", where);
	if (strcmp(type->valuestring, "gemma3") == 0)
		return read_gemma3(cfg, where, out, cause);
	for (t = 0; t < sizeof types / sizeof types[0]; t++)
		if (strcmp(type->valuestring, types[t].type) == 0)
			break;
	if (t == sizeof types / sizeof types[0])
		return zs_fail(cause, "%s: \"model_type\" '%.40s' is not modelled (" TYPE_NAMES ")",
		               where, type->valuestring);
	for (size_t r = 0; r < sizeof refused / sizeof refused[0]; r++)
		if (!(types[t].moe & refused[r].moe_reads) && is_set(cJSON_GetObjectItemCaseSensitive(cfg, refused[r].key)))
			return zs_fail(cause, "%s: \"%s\": %s", where, refused[r].key, refused[r].why);
	snprintf(m.model_type, sizeof m.model_type, "%s", types[t].type);
	m.family = types[t].family;
	for (const struct key *k = types[t].keys; k->name != NULL; k++) {
		struct key o = *k;
		/* Gemma3TextConfig defaults every key (gemma3_text_defaults): a
		 * multimodal checkpoint's text_config (google/gemma-3-4b-pt's)
		 * gives hidden_size, intermediate_size and num_hidden_layers only */
		o.optional |= types[t].gemma3;
		if (read_key(cfg, &o, where, &m, cause) < 0)
			return -1;
	}

	if (types[t].gemma3)
		gemma3_text_defaults(&m);

	const cJSON *tie = cJSON_GetObjectItemCaseSensitive(cfg, "tie_word_embeddings");
	if (tie == NULL || cJSON_IsNull(tie))
		m.tied = types[t].tied;
	else if (cJSON_IsBool(tie))
		m.tied = cJSON_IsTrue(tie);
	else
		return zs_fail(cause, "%s: \"tie_word_embeddings\" is neither true nor false", where);

	if (read_positive(cfg, types[t].eps_key, types[t].eps, where, &m.norm_eps, cause) < 0 ||
	    (m.family == ZS_FAMILY_LLAMA && read_positive(cfg, "rope_theta", types[t].rope_theta > 0 ? types[t].rope_theta : 10000.0, where,
	                                                  &m.rope_theta, cause) < 0))
		return -1;
	/* The dropout probabilities the modules are built with (training
	 * mode): GPT2Config's embd_pdrop, attn_pdrop and resid_pdrop (default
	 * 0.1 each); LlamaConfig's and its kin's attention_dropout (default
	 * 0.0; llama has no other dropout). Only the plain PyTorch loop
	 * (util/autograd.c) reads them. */
	if (m.family == ZS_FAMILY_GPT2) {
		if (read_prob(cfg, "embd_pdrop", 0.1, where, &m.embd_pdrop, cause) < 0 ||
		    read_prob(cfg, "attn_pdrop", 0.1, where, &m.attn_pdrop, cause) < 0 ||
		    read_prob(cfg, "resid_pdrop", 0.1, where, &m.resid_pdrop, cause) < 0)
			return -1;
	} else if (read_prob(cfg, "attention_dropout", 0.0, where, &m.attn_pdrop, cause) < 0 ||
	           /* Phi3Config's resid_pdrop (default 0.0): Phi3DecoderLayer's
	            * resid_attn_dropout and resid_mlp_dropout */
	           (types[t].hf_fused && read_prob(cfg, "resid_pdrop", 0.0, where, &m.resid_pdrop, cause) < 0)) {
		return -1;
	}
	m.qkv_bias = types[t].qkv_bias;
	m.hf_fused = types[t].hf_fused;
	m.qk_norm = types[t].qk_norm;
	m.gemma = types[t].gemma;
	/* Gemma2Config's scalar and caps; a cap given null is none (the
	 * modeling file tests `is not None`) */
	if (m.gemma) {
		/* Gemma3TextConfig's caps default to None: none */
		double g3 = types[t].gemma3 ? 0.0 : 1.0;
		const struct { const char *key; double def; size_t field; int nullable; } caps[] = {
			{ "query_pre_attn_scalar", 256.0, offsetof(struct zs_model, attn_scalar), 0 },
			{ "attn_logit_softcapping", 50.0 * g3, offsetof(struct zs_model, attn_softcap), 1 },
			{ "final_logit_softcapping", 30.0 * g3, offsetof(struct zs_model, final_softcap), 1 },
		};
		for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
			const cJSON *it = cJSON_GetObjectItemCaseSensitive(cfg, caps[c].key);
			double *v = (double *)(void *)((char *)&m + caps[c].field);
			if (it != NULL && cJSON_IsNull(it) && caps[c].nullable)
				*v = 0.0;
			else if (read_positive(cfg, caps[c].key, caps[c].def, where, v, cause) < 0)
				return -1;
		}
	}
	if (types[t].gemma3 && read_gemma3_layers(cfg, where, &m, cause) < 0)
		return -1;
	if (types[t].moe && read_moe(cfg, where, types[t].moe, &m, cause) < 0)
		return -1;
	int windowed = types[t].window_key;
	if (windowed && types[t].window_on != NULL) {
		const cJSON *on = cJSON_GetObjectItemCaseSensitive(cfg, types[t].window_on);
		if (on != NULL && !cJSON_IsNull(on) && !cJSON_IsBool(on))
			return zs_fail(cause, "%s: \"%s\" is neither true nor false", where, types[t].window_on);
		windowed = cJSON_IsTrue(on);
	}
	if (windowed && types[t].window_from != 0) { /* no layer slides: no window */
		const cJSON *from = cJSON_GetObjectItemCaseSensitive(cfg, "max_window_layers");
		double first = (double)types[t].window_from;
		if (from != NULL && !cJSON_IsNull(from)) {
			if (!cJSON_IsNumber(from) || from->valuedouble < 0 || from->valuedouble != floor(from->valuedouble))
				return zs_fail(cause, "%s: \"max_window_layers\" must be a whole number", where);
			first = from->valuedouble;
		}
		windowed = first < (double)m.layers;
	}
	m.sliding_window = windowed ? types[t].window : 0;
	const cJSON *sw = cJSON_GetObjectItemCaseSensitive(cfg, "sliding_window");
	if (windowed && sw != NULL) {
		if (cJSON_IsNull(sw))
			m.sliding_window = 0;
		else if (!cJSON_IsNumber(sw) || sw->valuedouble != floor(sw->valuedouble) || sw->valuedouble < 1 ||
		         sw->valuedouble > ZS_MODEL_MAX_POSITIONS)
			return zs_fail(cause, "%s: \"sliding_window\" must be null or a whole number in 1..%d", where,
			               ZS_MODEL_MAX_POSITIONS);
		else
			m.sliding_window = (uint64_t)sw->valuedouble;
	}
	read_numerics(cfg, &m);
	read_rope_scaling(cfg, &m);
	/* LlamaModel, MistralModel, Qwen2Model, Phi3Model and Qwen3Model make embed_tokens
	 * nn.Embedding(vocab_size, hidden_size, pad_token_id): no lookup's
	 * gradient reaches that row (a negative one counts from the end), and
	 * one past the table is refused when the model is built. */
	if (m.family == ZS_FAMILY_LLAMA) {
		const cJSON *pad = cJSON_GetObjectItemCaseSensitive(cfg, "pad_token_id");
		double p = pad == NULL ? types[t].pad : cJSON_IsNull(pad) ? -1 : cJSON_IsNumber(pad) ? pad->valuedouble : NAN;
		if (pad != NULL && !cJSON_IsNull(pad) && !(cJSON_IsNumber(pad) && p == floor(p) && fabs(p) < 1e15))
			return zs_fail(cause, "%s: \"pad_token_id\" must be null or a whole number", where);
		if (pad != NULL && p < 0 && p >= -(double)m.vocab)
			p += (double)m.vocab;
		else if (pad != NULL && p < 0)
			p = (double)m.vocab; /* no row either way */
		if (!(pad == NULL && types[t].pad < 0) && !(pad != NULL && cJSON_IsNull(pad))) {
			if (p >= (double)m.vocab && m.unrun[0] == '\0')
				snprintf(m.unrun, sizeof m.unrun, "\"pad_token_id\" is %.0f%s, no row of the %llu-token table "
				         "(transformers' nn.Embedding refuses it)", pad != NULL ? pad->valuedouble : p,
				         pad == NULL ? " (Phi3Config's default)" : "", (unsigned long long)m.vocab);
			else if (p < (double)m.vocab)
				m.pad_row = (uint64_t)p + 1;
		}
	}

	const char *hkey = m.family == ZS_FAMILY_GPT2 ? "n_embd" : "hidden_size";
	const char *akey = m.family == ZS_FAMILY_GPT2 ? "n_head" : "num_attention_heads";
	if (m.family == ZS_FAMILY_GPT2) {
		if (m.intermediate == 0)
			m.intermediate = 4 * m.hidden;
		m.kv_heads = m.heads;
	} else if (m.kv_heads == 0) {
		m.kv_heads = m.heads;
	}
	if (m.heads > m.hidden)
		return zs_fail(cause, "%s: \"%s\" (%llu) is more than \"%s\" (%llu)", where, akey,
		               (unsigned long long)m.heads, hkey, (unsigned long long)m.hidden);
	if (m.head_dim == 0)
		m.head_dim = types[t].head_dim;
	if (m.head_dim == 0) {
		if (m.hidden % m.heads != 0)
			return zs_fail(cause, "%s: \"%s\" (%llu) does not divide \"%s\" (%llu)", where, akey,
			               (unsigned long long)m.heads, hkey, (unsigned long long)m.hidden);
		m.head_dim = m.hidden / m.heads;
	}
	if (m.heads % m.kv_heads != 0)
		return zs_fail(cause, "%s: \"num_key_value_heads\" (%llu) does not divide \"%s\" (%llu)",
		               where, (unsigned long long)m.kv_heads, akey, (unsigned long long)m.heads);
	if (m.head_dim * m.heads > ZS_MODEL_MAX_WIDTH)
		return zs_fail(cause, "%s: \"head_dim\" x \"%s\" is more than %d", where, akey,
		               ZS_MODEL_MAX_WIDTH);
	*out = m;
	return 0;
}

/* The shape as the outputs write it (zs_model_json) and the report reads
 * it back (zs_model_from_written): each key once, in the files' order. */
static const struct key written[] = {
	{ "hidden_size", FIELD(hidden), ZS_MODEL_MAX_WIDTH, 0 },
	{ "intermediate_size", FIELD(intermediate), ZS_MODEL_MAX_FFN, 0 },
	{ "layers", FIELD(layers), ZS_MODEL_MAX_LAYERS, 0 },
	{ "attention_heads", FIELD(heads), ZS_MODEL_MAX_HEADS, 0 },
	{ "key_value_heads", FIELD(kv_heads), ZS_MODEL_MAX_HEADS, 0 },
	{ "head_dim", FIELD(head_dim), ZS_MODEL_MAX_WIDTH, 0 },
	{ "vocab_size", FIELD(vocab), ZS_MODEL_MAX_VOCAB, 0 },
	{ "max_positions", FIELD(positions), ZS_MODEL_MAX_POSITIONS, 0 },
	{ NULL, 0, 0, 0 }
};

cJSON *zs_model_json(cJSON *parent, const struct zs_model *m)
{
	cJSON *o = cJSON_AddObjectToObject(parent, "model");
	cJSON_AddStringToObject(o, "name", m->name);
	cJSON_AddStringToObject(o, "model_type", m->model_type);
	cJSON_AddStringToObject(o, "family", zs_family_name(m->family));
	for (const struct key *k = written; k->name != NULL; k++)
		zs_json_add_number(o, k->name, (double)*(const uint64_t *)(const void *)((const char *)m + k->field));
	cJSON_AddBoolToObject(o, "tie_word_embeddings", m->tied);
	if (m->qwen_moe) { /* the rest of a qwen2_moe's block ("intermediate_size" is its experts') */
		zs_json_add_number(o, "shared_expert_intermediate_size", (double)m->shared_ffn);
		cJSON_AddBoolToObject(o, "norm_topk_prob", !m->topk_raw);
	}
	return o;
}

int zs_model_from_written(const cJSON *o, const char *where, struct zs_model *out, char **cause)
{
	struct zs_model m = {0};
	const char *type, *name;
	size_t t = 0;

	if (zs_json_string(o, "name", where, &name, cause) < 0 || zs_json_string(o, "model_type", where, &type, cause) < 0)
		return -1;
	while (t < sizeof types / sizeof types[0] && strcmp(type, types[t].type) != 0)
		t++;
	if (t == sizeof types / sizeof types[0])
		return zs_fail(cause, "%s: \"model_type\" '%.40s' is not modelled (" TYPE_NAMES ")", where, type);
	if (types[t].moe) /* (its experts' count is not written) */
		return zs_fail(cause, "%s: the shape of a %s (a mixture of experts) is not read back", where, type);
	for (const struct key *k = written; k->name != NULL; k++) {
		unsigned long long v;
		if (zs_json_uint(o, k->name, where, 1, (double)k->max, &v, cause) < 0)
			return -1;
		*(uint64_t *)(void *)((char *)&m + k->field) = v;
	}
	const cJSON *tie = cJSON_GetObjectItemCaseSensitive(o, "tie_word_embeddings");
	if (!cJSON_IsBool(tie))
		return zs_fail(cause, "%s: \"tie_word_embeddings\" is neither true nor false", where);
	snprintf(m.name, sizeof m.name, "%s", name);
	snprintf(m.model_type, sizeof m.model_type, "%s", types[t].type);
	m.family = types[t].family;
	m.tied = cJSON_IsTrue(tie);
	m.qkv_bias = types[t].qkv_bias;
	m.hf_fused = types[t].hf_fused;
	m.qk_norm = types[t].qk_norm;
	m.gemma = types[t].gemma;
	*out = m;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Files and shipped names */

static int read_config(const char *path, const char *name, struct zs_model *m, char **cause)
{
	cJSON *root;

	if (zs_json_read(path, &root, cause) < 0)
		return -1;
	struct zs_model t;
	int rc = zs_model_from_json(root, path, &t, cause);
	cJSON_Delete(root);
	if (rc < 0)
		return -1;
	snprintf(t.name, sizeof t.name, "%s", name);
	*m = t;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "gpt2, gpt2-large, ..." from the .json files in dir, sorted. */
static char *shipped_names(const char *dir)
{
	DIR *d = opendir(dir);
	char **names = NULL;
	size_t n = 0, cap = 0;
	const struct dirent *e;
	struct zs_buf list = {0};

	if (d == NULL)
		return zs_strdup("none");
	while ((e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);
		if (l <= 5 || e->d_name[0] == '.' || strcmp(e->d_name + l - 5, ".json") != 0)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			char **bigger = zs_calloc(cap, sizeof *bigger);
			if (n > 0)
				memcpy(bigger, names, n * sizeof *names);
			free(names);
			names = bigger;
		}
		names[n] = zs_strdup(e->d_name);
		names[n++][l - 5] = '\0';
	}
	closedir(d);
	if (n > 1)
		qsort(names, n, sizeof *names, by_name);
	for (size_t i = 0; i < n; i++) {
		zs_buf_printf(&list, "%s%s", i > 0 ? ", " : "", names[i]);
		free(names[i]);
	}
	free(names);
	if (n == 0)
		zs_buf_printf(&list, "none");
	return zs_buf_take(&list);
}

static int ends_with_json(const char *s)
{
	size_t l = strlen(s);

	return l > 5 && strcmp(s + l - 5, ".json") == 0;
}

static const char name_chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";

/* A plain name: name_chars only, not empty, not starting with '.'. */
static int plain(const char *s, size_t l)
{
	return l > 0 && s[0] != '.' && strspn(s, name_chars) >= l;
}

/* A Hugging Face Hub id: ORG/NAME, two plain names (the Hub's own rule
 * is narrower; this one keeps the cache path inside the cache). */
static int hub_id(const char *arg)
{
	const char *slash = strchr(arg, '/');

	return slash != NULL && strchr(slash + 1, '/') == NULL && plain(arg, (size_t)(slash - arg)) &&
	       plain(slash + 1, strlen(slash + 1));
}

/* dir/NAME.json for a shipped name, matched without regard to case (the
 * exact spelling first); *canon gets the file's own spelling. NULL when
 * there is none. */
static char *shipped_path(const char *dir, const char *arg, char canon[64])
{
	size_t l = strlen(arg);
	struct stat st;

	if (l >= 64 || !plain(arg, l))
		return NULL;
	char *path = zs_asprintf("%s/%s.json", dir, arg);
	/* stat, not open: a FIFO must not block; zs_read_file refuses it. */
	if (stat(path, &st) == 0) {
		snprintf(canon, 64, "%s", arg);
		return path;
	}
	free(path);
	path = NULL;
	DIR *d = opendir(dir);
	const struct dirent *e;
	while (d != NULL && path == NULL && (e = readdir(d)) != NULL)
		if (strlen(e->d_name) == l + 5 && strncasecmp(e->d_name, arg, l) == 0 &&
		    strcmp(e->d_name + l, ".json") == 0) {
			snprintf(canon, 64, "%.*s", (int)l, e->d_name);
			path = zs_asprintf("%s/%s", dir, e->d_name);
		}
	if (d != NULL)
		closedir(d);
	return path;
}

/* The shipped name whose Hub id (data/models/hub.txt) is id, in any case;
 * 0 when none is. */
static int shipped_id(const char *dir, const char *id, char name[64])
{
	char *path = zs_asprintf("%s/hub.txt", dir), *text = NULL, *cause = NULL;
	size_t len;
	int found = 0;

	if (zs_read_file(path, &text, &len, &cause) == 0) {
		for (char *line = strtok(text, "\n"); line != NULL && !found; line = strtok(NULL, "\n")) {
			char n[64], i[128];
			if (line[0] != '#' && sscanf(line, "%63s %127s", n, i) == 2 && strcasecmp(i, id) == 0) {
				snprintf(name, 64, "%s", n);
				found = 1;
			}
		}
	}
	free(text);
	free(cause);
	free(path);
	return found;
}

/* The Hugging Face cache folder as huggingface_hub chooses it
 * (src/huggingface_hub/constants.py 157-182 at ee0a4510): HF_HUB_CACHE,
 * else the legacy HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, HF_HOME
 * defaulting to XDG_CACHE_HOME/huggingface, that to ~/.cache/huggingface.
 * A variable set but empty counts as unset. */
static char *hf_cache(void)
{
	const char *v;

	if ((v = getenv("HF_HUB_CACHE")) != NULL && *v != '\0')
		return zs_strdup(v);
	if ((v = getenv("HUGGINGFACE_HUB_CACHE")) != NULL && *v != '\0')
		return zs_strdup(v);
	if ((v = getenv("HF_HOME")) != NULL && *v != '\0')
		return zs_asprintf("%s/hub", v);
	if ((v = getenv("XDG_CACHE_HOME")) != NULL && *v != '\0')
		return zs_asprintf("%s/huggingface/hub", v);
	v = getenv("HOME");
	return zs_asprintf("%s/.cache/huggingface/hub", v != NULL && *v != '\0' ? v : ".");
}

/* ORG/NAME's config.json in the local Hugging Face cache, laid out as
 * huggingface_hub's try_to_load_from_cache reads it (file_download.py
 * 1531-1565 at ee0a4510): CACHE/models--ORG--NAME (repo_folder_name,
 * 720-728, REPO_ID_SEPARATOR "--", constants.py 108), whose refs/main
 * holds the commit that snapshots/COMMIT/config.json belongs to. The
 * folder's case as the id gives it first, then any case; name gets
 * NAME as the folder spells it. NULL with *cause naming the path looked
 * at; never the network. */
static char *cached_config(const char *id, char name[64], char **cause)
{
	char *cache = hf_cache();
	char *folder = zs_asprintf("models--%.*s--%s", (int)(strchr(id, '/') - id), id, strchr(id, '/') + 1);
	char *repo = zs_asprintf("%s/%s", cache, folder), *path = NULL;
	struct stat st;

	if (stat(repo, &st) != 0) {
		DIR *d = opendir(cache);
		const struct dirent *e;
		while (d != NULL && (e = readdir(d)) != NULL)
			if (strcasecmp(e->d_name, folder) == 0) {
				free(repo);
				repo = zs_asprintf("%s/%s", cache, e->d_name);
				free(folder);
				folder = zs_strdup(e->d_name);
				break;
			}
		if (d != NULL)
			closedir(d);
	}
	char *ref = zs_asprintf("%s/refs/main", repo), *rev = NULL, *why = NULL;
	size_t len;
	if (stat(ref, &st) != 0 || !S_ISREG(st.st_mode) || zs_read_file(ref, &rev, &len, &why) != 0) {
		zs_fail(cause, "--model: '%.64s' is no shipped config's Hub id (data/models/hub.txt) and is not in "
		        "the Hugging Face cache (no %s)", id, ref);
	} else {
		/* huggingface_hub writes the commit with no newline; one an
		 * editor added is not part of it. */
		while (len > 0 && (rev[len - 1] == '\n' || rev[len - 1] == '\r' || rev[len - 1] == ' '))
			rev[--len] = '\0';
		if (!plain(rev, len) || strlen(rev) != len)
			zs_fail(cause, "--model: %s does not hold a revision", ref);
		else {
			path = zs_asprintf("%s/snapshots/%s/config.json", repo, rev);
			/* NAME: after models--ORG-- (the report takes no '/') */
			snprintf(name, 64, "%s", folder + strlen(folder) - strlen(strchr(id, '/') + 1));
			if (stat(path, &st) != 0) {
				zs_fail(cause, "--model: '%.64s' is in the Hugging Face cache without its config.json "
				        "(no %s)", id, path);
				free(path);
				path = NULL;
			}
		}
	}
	free(rev);
	free(why);
	free(ref);
	free(repo);
	free(folder);
	free(cache);
	return path;
}

/* What a --model argument reads: *path the config file and name the
 * model's name in the outputs. A shipped name or Hub id gets the shipped
 * name as the file spells it. Returns 0, or -1 with *cause. */
static int resolve(const char *arg, char **path, char name[64], char **cause)
{
	size_t l = strlen(arg);
	struct stat st;

	*path = NULL;
	if (l == 0)
		return zs_fail(cause, "--model: the name is empty");
	/* An existing file wins over an id of the same spelling. */
	if (ends_with_json(arg) || (strchr(arg, '/') != NULL && (!hub_id(arg) || stat(arg, &st) == 0))) {
		/* The name is the file's without .json; for a transformers
		 * folder's config.json, the folder's. */
		const char *base = strrchr(arg, '/');
		size_t bl;

		base = base != NULL ? base + 1 : arg;
		bl = strlen(base) - (ends_with_json(base) ? 5 : 0);
		if (bl == 6 && strncmp(base, "config", 6) == 0 && base > arg + 1) {
			const char *end = base - 1, *start = end;
			while (start > arg && start[-1] != '/')
				start--;
			if (end > start) {
				base = start;
				bl = (size_t)(end - start);
			}
		}
		/* The name is written into theory.json and read back by the
		 * report, which takes plain names only: other bytes become '_'. */
		snprintf(name, 64, "%.*s", (int)bl, base);
		for (char *c = name; *c != '\0'; c++)
			if (strchr(name_chars, *c) == NULL)
				*c = '_';
		if (name[0] == '\0')
			snprintf(name, 64, "model");
		*path = zs_strdup(arg);
		return 0;
	}

	char *dir = zs_datafile("data/models", cause);
	if (dir == NULL)
		return -1;
	char shipped[64];
	if (hub_id(arg) && shipped_id(dir, arg, shipped))
		*path = shipped_path(dir, shipped, name);
	else if (hub_id(arg)) {
		*path = cached_config(arg, name, cause);
		free(dir);
		return *path != NULL ? 0 : -1;
	} else
		*path = shipped_path(dir, arg, name);
	if (*path != NULL) {
		free(dir);
		return 0;
	}
	char *names = shipped_names(dir);
	zs_fail(cause, "--model: no shipped model '%.64s' (%s; or give a config.json path)", arg, names);
	free(names);
	free(dir);
	return -1;
}

char *zs_model_file(const char *arg)
{
	char *path = NULL, *cause = NULL, name[64];

	if (arg == NULL || resolve(arg, &path, name, &cause) != 0)
		path = NULL;
	free(cause);
	return path;
}

int zs_model_load(const char *arg, struct zs_model *m, char **cause)
{
	char *path, name[64];

	if (resolve(arg, &path, name, cause) != 0)
		return -1;
	int rc = read_config(path, name, m, cause);
	free(path);
	return rc;
}
