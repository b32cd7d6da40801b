/*
 * model — a transformer's shape, read from a Hugging Face style
 * config.json (the file `transformers` writes beside a model's weights).
 * Two families, the keys they are read from, and their defaults:
 *
 *   gpt2 (model_type "gpt2"): n_embd, n_layer, n_head, vocab_size,
 *     n_positions; n_inner (absent or null: 4·n_embd); tie_word_embeddings
 *     (default true). Learned position embeddings, LayerNorm, biases,
 *     GELU MLP.
 *   llama (model_type "llama" or "mistral"): hidden_size,
 *     intermediate_size, num_hidden_layers, num_attention_heads,
 *     vocab_size, max_position_embeddings; num_key_value_heads (default:
 *     the heads; must divide them); head_dim (default hidden_size / heads);
 *     tie_word_embeddings (default false). RMSNorm, no biases, SwiGLU MLP.
 *   qwen2 (model_type "qwen2": Qwen2, Qwen2.5): llama's keys and shape,
 *     with biases on q_proj, k_proj and v_proj; sliding_window counts only
 *     when use_sliding_window is true (default false) and some layer is at
 *     or past max_window_layers (default 28).
 *   phi3 (model_type "phi3": Phi-3): llama's keys and shape, its q, k
 *     and v one tensor qkv_proj and its gate and up one tensor
 *     gate_up_proj, as Hugging Face holds them (one module each, which
 *     FSDP and DeepSpeed gather whole); rms_norm_eps default 1e-5;
 *     sliding_window absent or null: none.
 *   qwen3 (model_type "qwen3": Qwen3): llama's keys and shape, no biases
 *     (attention_bias true is refused), an RMSNorm over head_dim on each
 *     head's queries (q_norm) and keys (k_norm) before the rotary
 *     embedding; head_dim default 128 (Qwen3Config's, not hidden / heads);
 *     sliding_window as qwen2's (use_sliding_window, max_window_layers).
 *   gemma2 (model_type "gemma2": Gemma 2): llama's keys; RMSNorm by
 *     (1 + w), a norm after attention and after the MLP besides the two
 *     before, GeGLU with tanh GELU (hidden_activation), the embedding times
 *     sqrt(hidden_size), the scores scaled by query_pre_attn_scalar^-1/2
 *     (default 256) and soft-capped, c·tanh(s/c), by attn_logit_softcapping
 *     (default 50), the logits by final_logit_softcapping (default 30; null:
 *     none); head_dim default 256, tied, pad_token_id default 0;
 *     sliding_window (default 4096) on every other layer.
 *   gemma3_text (Gemma 3's text model): gemma2's block plus an RMSNorm by
 *     (1 + w) over head_dim on each query and key head before rope
 *     (q_norm, k_norm, as qwen3's); five sliding-window layers to one global
 *     (sliding_window_pattern, default 6: layer l slides unless (l + 1) is
 *     a multiple of it; layer_types, where given, must spell that
 *     pattern); the sliding layers rotate with rope_local_base_freq
 *     (default 10000), the global ones with rope_theta (default 1e6); no
 *     soft-capping unless attn_logit_softcapping / final_logit_softcapping
 *     are set (defaults null); sliding_window default 4096. Every key
 *     defaults as Gemma3TextConfig's (vocabulary 262208, hidden 2304,
 *     intermediate 9216, 26 layers, 8 heads, 4 key-value heads, 131072
 *     positions).
 *   gemma3 (Gemma3Config, a multimodal Gemma 3: gemma-3-4b, 12b, 27b): read
 *     by its text_config, a gemma3_text config, and predicted as that text
 *     model (model_type "gemma3_text"): vision_config (the SigLIP tower)
 *     and the projector are ignored, not counted.
 *   mixtral (model_type "mixtral": Mixtral): llama's keys and block, its
 *     MLP a mixture of experts as transformers 4.x holds it
 *     (MixtralSparseMoeBlock: a router `gate` (E, hidden) and a ModuleList
 *     of E SwiGLU experts w1, w3 (intermediate, hidden) and w2 (hidden,
 *     intermediate)); num_local_experts E (default 8), num_experts_per_tok
 *     k (default 2, at most E), router_aux_loss_coef (0.001) and
 *     output_router_logits (false: no auxiliary loss in the loss);
 *     rms_norm_eps 1e-5, rope_theta 1e6, sliding_window none, as
 *     MixtralConfig's defaults. The engine trains it in fp32 or mixed,
 *     any recompute, under the paper's schemes (not the auxiliary loss nor
 *     router_jitter_noise: unrun where the config asks for them), and the
 *     theory follows that step under --routing (its activations follow
 *     the routing).
 *   qwen2_moe (model_type "qwen2_moe": Qwen1.5-MoE, Qwen2-MoE): qwen2's
 *     attention (q, k, v biased unless qkv_bias is false), every block's
 *     MLP transformers 4.x's Qwen2MoeSparseMoeBlock: the router mlp.gate
 *     (E, hidden), a ModuleList of E SwiGLU experts (gate_proj, up_proj
 *     (moe_intermediate_size, hidden), down_proj), the shared expert
 *     (the same, shared_expert_intermediate_size wide) and its gate
 *     shared_expert_gate (1, hidden), the shared output times
 *     sigmoid(gate(x)); num_experts (60), num_experts_per_tok (4),
 *     norm_topk_prob (false: the top-k probabilities are not
 *     renormalised), Qwen2MoeConfig's defaults (configuration_qwen2_moe.py
 *     at 008e5743). `intermediate` holds moe_intermediate_size, the
 *     experts' width; intermediate_size, the dense MLP's, is read and
 *     unused: dense blocks among the sparse ones (decoder_sparse_step
 *     other than 1, mlp_only_layers not empty) and sliding windows
 *     (use_sliding_window true) are refused by name.
 *   qwen3_moe (model_type "qwen3_moe": Qwen3-30B-A3B): qwen3's attention
 *     (no biases, q_norm and k_norm; head_dim hidden_size / heads where
 *     absent, Qwen3MoeConfig having no such field), every block's MLP
 *     Qwen3MoeSparseMoeBlock (modeling_qwen3_moe.py at 00d4b3d2): qwen2_moe's
 *     router and experts without the shared expert; num_experts (128),
 *     num_experts_per_tok (8), moe_intermediate_size (768), norm_topk_prob
 *     (false), Qwen3MoeConfig's defaults (configuration_qwen3_moe.py at
 *     008e5743); dense blocks and sliding windows refused as qwen2_moe's.
 *   Every mixture: output_router_logits true (the auxiliary loss) is
 *     run in the PyTorch step only (util/autograd.c); elsewhere measure
 *     and theory refuse it (zs_model_router_check).
 *
 * Keys that change no byte count but the numbers the engine's transformer
 * computes are read too: the norms' epsilon (gpt2 layer_norm_epsilon,
 * default 1e-5; llama rms_norm_eps, default 1e-6, as transformers'
 * GPT2Config and LlamaConfig/MistralConfig), llama's rope_theta (default
 * 10000) and mistral's sliding_window (default 4096; null: none; qwen2's
 * only under use_sliding_window; phi3's default none). A value
 * the engine does not run (another activation, rope_scaling, a
 * partial_rotary_factor other than 1, gpt2's
 * attention scaled otherwise) is kept as `unrun`: the theory reads the
 * shape anyway, measure refuses it. The dropout probabilities (gpt2
 * embd_pdrop, attn_pdrop, resid_pdrop, default 0.1 each as GPT2Config's;
 * the llama family's attention_dropout, default 0.0) are read for the
 * plain PyTorch loop's step (util/autograd.h), the one run that has
 * dropout; a value outside 0..1 is refused. Other keys (token ids, ...)
 * are ignored, but for the
 * llama family's pad_token_id (nn.Embedding's padding_idx: no lookup's
 * gradient reaches its row; default none, phi3's 32000; null: none; a
 * row the table lacks is unrun, as transformers refuses it); keys that would
 * change the shape in a way zerosim does not model (a mixture of experts,
 * attention or MLP biases in a llama, quantisation) are refused by name.
 *
 * This is plain data shared by the theory and the engine: it knows the
 * shape, not what any stage computes from it.
 */
#ifndef ZS_UTIL_MODEL_H
#define ZS_UTIL_MODEL_H

#include <stdint.h>
#include <cjson/cJSON.h>

enum zs_family { ZS_FAMILY_GPT2, ZS_FAMILY_LLAMA };

/* Limits that keep every product of the shape far inside 64 bits. */
#define ZS_MODEL_MAX_WIDTH 1048576      /* hidden, head_dim x heads */
#define ZS_MODEL_MAX_FFN 16777216       /* intermediate */
#define ZS_MODEL_MAX_LAYERS 10000
#define ZS_MODEL_MAX_HEADS 65536
#define ZS_MODEL_MAX_VOCAB 16777216
#define ZS_MODEL_MAX_POSITIONS 16777216
#define ZS_MODEL_MAX_EXPERTS 4096

struct zs_model {
	char name[64];          /* the shipped name, or the file's name without .json */
	char model_type[32];    /* as the file spells it: gpt2, llama, mistral, qwen2, phi3, qwen3, ... */
	enum zs_family family;
	uint64_t hidden;        /* h */
	uint64_t intermediate;  /* the MLP's inner width */
	uint64_t layers;        /* decoder blocks, L */
	uint64_t heads;         /* attention heads, a */
	uint64_t kv_heads;      /* key-value heads (gpt2: = heads) */
	uint64_t head_dim;      /* per head (gpt2: h / a) */
	uint64_t vocab;         /* V */
	uint64_t positions;     /* longest sequence the model takes */
	int tied;               /* the output head is the token embedding */
	int qkv_bias;           /* llama family: q_proj, k_proj, v_proj have biases (qwen2) */
	int hf_fused;           /* llama family: q/k/v and gate/up are single Hugging Face
	                           tensors, qkv_proj and gate_up_proj (phi3) */
	int qk_norm;            /* llama family: each head's queries and keys pass an RMSNorm over
	                           head_dim, q_norm and k_norm, before the rotary embedding (qwen3) */
	int gemma;              /* llama family, gemma2: RMSNorm scales by (1 + w), norms after
	                           attention and the MLP as well as before, GeGLU (tanh GELU),
	                           embeddings times sqrt(hidden_size) */
	uint64_t pad_row;       /* llama family: 1 + pad_token_id, the row nn.Embedding's
	                           padding_idx keeps from the lookups' gradient; 0: none */
	double norm_eps;        /* the norms' epsilon */
	double rope_theta;      /* llama's rotary base (gpt2: 0) */
	double embd_pdrop;      /* gpt2: the embeddings' dropout (llama: 0) */
	double attn_pdrop;      /* the attention weights' (llama: attention_dropout) */
	double resid_pdrop;     /* gpt2: after c_proj and the MLP; phi3: resid_pdrop, after each
	                           sublayer (llama: 0) */
	double attn_scalar;     /* gemma2: query_pre_attn_scalar, the scores scaled by its -1/2
	                           power (0: head_dim's) */
	double attn_softcap;    /* gemma2: attn_logit_softcapping, c·tanh(s/c) (0: none) */
	double final_softcap;   /* gemma2: final_logit_softcapping on the logits (0: none) */
	uint64_t sliding_window;/* mistral's attention window, 0 for none */
	uint64_t window_pattern;/* gemma3_text: every window_pattern-th layer is global, the
	                           others slide and rotate by rope_local_theta (0: none) */
	double rope_local_theta;/* gemma3_text: rope_local_base_freq (0: every layer rope_theta) */
	double rope_factor;     /* gemma3_text: rope_scaling {"rope_type": "linear", "factor": f}'s f, the
	                           global layers' inverse frequencies divided by it (0 or 1: none) */
	uint64_t experts;       /* mixtral: num_local_experts, qwen2_moe and qwen3_moe: num_experts, E, each block's experts
	                           (0: a dense MLP) */
	uint64_t experts_per_tok;/* num_experts_per_tok, k, the experts each token is routed to */
	double router_aux_coef; /* mixtral: router_aux_loss_coef, the load-balancing loss's weight */
	int router_logits;      /* mixtral: output_router_logits, the auxiliary loss added to the loss */
	double router_jitter;   /* mixtral: router_jitter_noise, the router's multiplicative noise in training
	                           (0: none; else refused by zs_model_router_check) */
	int fused_experts;      /* mixtral under --experts-impl eager (transformers 5.x): the block is `mlp`, its
	                           router mlp.gate and its experts two fused parameters, mlp.experts.gate_up_proj
	                           [E, 2F, d] and down_proj [E, d, F] (util/step.c's moe_block); set by the
	                           command, never by a config file */
	int qwen_moe;           /* qwen2_moe's and qwen3_moe's block: mlp.gate, each expert's gate_proj,
	                           up_proj, down_proj in that order, then (qwen2_moe) the shared
	                           expert and its gate */
	uint64_t shared_ffn;    /* qwen2_moe: shared_expert_intermediate_size, the shared expert's
	                           inner width (0: none, mixtral) */
	int topk_raw;           /* qwen2_moe, qwen3_moe with norm_topk_prob false: the top-k probabilities
	                           weigh the experts as they are (mixtral renormalises them) */
	char unrun[160];        /* why the engine cannot train this config
	                           ("" when it can): numerics only */
};

/* Read a model given on the command line: an argument ending in ".json",
 * or containing '/' and naming an existing file or more than ORG/NAME, is
 * a config file; ORG/NAME otherwise is a Hugging Face Hub id: a shipped
 * config's (data/models/hub.txt), in any case, else its config.json in
 * the local Hugging Face cache (HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE,
 * HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub,
 * the first set: models--ORG--NAME/snapshots/REV/config.json, REV what
 * refs/main holds), never the network; anything else is the name of a
 * config shipped in data/models/ (util/datafile.h finds the folder), in
 * any case. A shipped config's name in the outputs is its file's
 * spelling; a cached one's is NAME. An unknown name lists the shipped
 * ones; an id found nowhere names the path looked at. Returns 0, or -1
 * with *cause (one line naming the file and the key). */
int zs_model_load(const char *arg, struct zs_model *m, char **cause);

/* The file a --model argument reads (the argument itself when it names a
 * file, the shipped or cached config's path for a known name or id), for checking that no
 * output replaces it; NULL when it names none. Free it. */
char *zs_model_file(const char *arg);

/* Read the shape from a parsed config; `where` names it in messages. On
 * failure *m is unchanged. */
int zs_model_from_json(const cJSON *config, const char *where, struct zs_model *m, char **cause);
/* What of a mixture's router neither measure nor theory follows
 * (router_jitter_noise > 0: MixtralSparseMoeBlock's noise on the router's
 * input in training; output_router_logits true, the auxiliary
 * load-balancing loss, outside the PyTorch step: pytorch_step 0): one
 * line into *cause, -1; else 0. Both commands call it. */
int zs_model_router_check(const struct zs_model *m, int pytorch_step, char **cause);

/* --experts-impl eager (eager 1): the mixture's experts as transformers
 * 5.x fuses them (m->fused_experts), mixtral's so far; a model that is
 * no mixture, or another family's, is one line into *cause, -1. eager 0
 * leaves m as it is. The theory and tests/ag_events call it. */
int zs_model_fused_experts(struct zs_model *m, int eager, char **cause);

/* The family's name: "gpt2" or "llama". */
const char *zs_family_name(enum zs_family f);

/* The shape as measured.json and theory.json write it (docs/formats.md):
 * parent's "model", {"name", "model_type", "family", "hidden_size", ...,
 * "tie_word_embeddings"}, returned for the keys a writer adds after. */
cJSON *zs_model_json(cJSON *parent, const struct zs_model *m);
/* The shape back from what zs_model_json wrote (o, a file's config.model;
 * `where` names it): the keys the parameters' description reads
 * (util/step.h's step_params_build: the widths, counts and the type's
 * modules), not the numerics; a mixture of experts is refused (its
 * experts are not written). Returns 0, or -1 with *cause. */
int zs_model_from_written(const cJSON *o, const char *where, struct zs_model *m, char **cause);
/* The dropout probabilities the plain PyTorch loop trains with, into the
 * model's object o as its config names them (gpt2: embd_pdrop, attn_pdrop,
 * resid_pdrop; the llama family: attention_dropout). */
void zs_model_dropout_json(cJSON *o, const struct zs_model *m);

#endif
