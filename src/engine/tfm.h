/*
 * tfm — a decoder-only transformer of the gpt2 or the llama family, fp32:
 * its shape, its flat parameter layout, the activations its backward
 * needs, and the forward and backward of each of its layers (the token
 * embedding, one block, the head with its loss), as llm.c's train_gpt2.c
 * writes them.
 *
 * gpt2 (Radford et al. 2019): token + position embedding; each block
 * x += proj(attn(LN1(x))), x += fcproj(gelu(fc(LN2(x)))) with biases;
 * final LN; head. llama (Touvron et al. 2023): token embedding; each block
 * x += proj(attn(rope(RMS1(x)))), x += down(silu(gate)·up(RMS2(x)))
 * without biases (qwen2: biases on q, k and v; qwen3: an RMSNorm over
 * head_dim on each query and key head before rope), grouped-query attention;
 * final RMSNorm; head. The head is the token embedding when tied.
 *
 * Parameters live in one flat vector laid out by the step description
 * (util/step.h, built by tfm_params), each unit of `--unit layer`
 * (docs/schedule.md, "Transformers") one contiguous range: the embedding
 * [wte (V, d), wpe (seq, d) for gpt2] and, when the head is tied, the
 * final norm [w (d), b (d) for gpt2] right after it; block 0 .. L-1
 * (tfm_block_params' order); untied, the final norm and the head (V, d)
 * last. No size is worked here: the views take each tensor's place from
 * the description's modules (tfm_layer_slots). Queries, keys and values are one matrix (Q, d) with
 * Q = (H + 2·KV)·hd (rows: H query heads, KV key heads, KV value heads);
 * llama's gate and up are one matrix (2F, d) (rows: gate, then up).
 *
 * Ownership: the views (tfm_*_params, tfm_*_acts) point into memory the
 * caller owns. The engine runs these layers through its layer list
 * (tfm_net.c); tests/tfm_driver.c is a whole model of them for the tests
 * and the benchmark alone.
 */
#ifndef ZS_TFM_H
#define ZS_TFM_H

#include <stddef.h>
#include <stdint.h>

#include "util/model.h"
#include "util/step.h"
#include "util/schedule.h"

enum tfm_family { TFM_GPT2, TFM_LLAMA };

/* The shape, as a model config gives it (Hugging Face's config.json). */
struct tfm_dims {
	enum tfm_family family;
	size_t d;          /* width: n_embd, hidden_size */
	size_t layers;     /* L blocks */
	size_t heads;      /* H query heads */
	size_t kv_heads;   /* KV key-value heads (H for gpt2), divides H */
	size_t head_dim;   /* hd (d / H unless the config says otherwise; even for llama) */
	size_t ffn;        /* F: the MLP's hidden width (4d for gpt2, intermediate_size) */
	size_t vocab;      /* V */
	size_t seq;        /* the longest sequence: gpt2's n_positions (wpe rows) */
	int tied;          /* the head is wte */
	float eps;         /* the norms' epsilon */
	float rope_theta;  /* llama's rotary base */
	int qkv_bias;      /* llama family: q, k and v have biases (qwen2; gpt2 has all biases) */
	int hf_fused;      /* llama family: the fused q/k/v and gate/up are Hugging Face's own
	                      tensors (phi3): the same numbers, other names and modules */
	size_t pad_row;    /* 1 + the token whose table row no lookup's gradient reaches
	                      (nn.Embedding's padding_idx); 0: none */
	int qk_norm;       /* llama family: q_norm and k_norm on each head (qwen3) */
	int gemma;         /* llama family, gemma2: norms by (1 + w) before and after attention
	                      and the MLP, GeGLU, the embedding times sqrt(d) */
	float attn_scalar; /* gemma2: the scores scaled by its -1/2 power (0: hd's) */
	float attn_softcap;  /* gemma2: the scores soft-capped, c·tanh(s/c) (0: none) */
	float final_softcap; /* gemma2: the logits soft-capped (0: none) */
	size_t window_pattern;  /* gemma3_text: block l slides unless (l + 1) % it == 0 (0: none) */
	float rope_local_theta; /* gemma3_text: the sliding blocks' rotary base */
	size_t experts;    /* mixtral: E experts a block in place of the MLP, ffn their inner width (0: none) */
	size_t top_k;      /* mixtral: k experts each token is routed to (engine/tfm_moe.h) */
	int qwen_moe;      /* qwen2_moe's block: experts' gate_proj, up_proj, down_proj in that
	                      order, and a shared expert (zs_model's qwen_moe) */
	size_t shared_ffn; /* qwen2_moe: the shared expert's inner width (0: none) */
	int topk_raw;      /* qwen2_moe, norm_topk_prob false: top-k weights not renormalised */
	float rope_factor; /* gemma3_text: rope_scaling linear's factor, the global blocks' inverse
	                      frequencies divided by it (0 or 1: none; zs_model's rope_factor) */
};

/* Block l's rotary base: gemma3_text's sliding blocks
 * rope_local_theta, every other block rope_theta. */
float tfm_rope_theta(const struct tfm_dims *d, size_t l);

/* Block l's linear rope scaling: gemma3_text's global blocks
 * rope_factor (rotary_emb's), every other block 1 (rotary_emb_local's
 * default; zs_model's rope_factor). */
float tfm_rope_factor(const struct tfm_dims *d, size_t l);

/* 0 if d is a shape the kernels run, else -1 with a sentence in *cause. */
int tfm_dims_check(const struct tfm_dims *d, char **cause);

/* The shape of a Hugging Face config (util/model.h), with its norms'
 * epsilon and llama's rotary base. */
void tfm_dims_from_config(struct tfm_dims *d, const struct zs_model *hf);
/* Back: the shape d runs, as the step description reads it (the numerics
 * aside), for runs the tests build from dims alone. */
void tfm_dims_shape(struct zs_model *m, const struct tfm_dims *d);

/* Rows of the fused products the kernels run. */
size_t tfm_qkv_rows(const struct tfm_dims *d);   /* Q = (H + 2·KV)·hd */
size_t tfm_up_rows(const struct tfm_dims *d);    /* U: F (gpt2) or 2F (llama) */

/* The layout is the step description's (util/step.h), the one place the
 * parameters' sizes and places live: tfm_params builds it for d (the
 * caller frees it with step_params_free); tfm_nparams is its Ψ. */
void tfm_params(struct step_params *p, const struct tfm_dims *d);
size_t tfm_nparams(const struct tfm_dims *d);

/* Views into a flat vector of parameters (or of their gradients). */
struct tfm_embed_params {
	float *wte; /* (V, d) */
	float *wpe; /* (seq, d), NULL for llama */
};
struct tfm_block_params { /* absent tensors (llama's biases) are NULL */
	float *ln1_w, *ln1_b;       /* (d), (d) */
	float *qkv_w, *qkv_b;       /* (Q, d), (Q) */
	float *qk_norm_w;           /* (2, hd): q_norm's weight, then k_norm's (qwen3), else NULL */
	float *post_attn_w;         /* (d) gemma2: the norm after attention, else NULL */
	float *post_ff_w;           /* (d) gemma2: the norm after the MLP, else NULL */
	float *proj_w, *proj_b;     /* (d, H·hd), (d) */
	float *ln2_w, *ln2_b;       /* (d), (d) */
	float *fc_w, *fc_b;         /* (U, d), (U) */
	float *fcproj_w, *fcproj_b; /* (d, F), (d) */
	float rope_theta;           /* its block's rotary base (tfm_rope_theta) */
	float rope_factor;          /* its linear scaling (tfm_rope_factor) */
};
struct tfm_final_params {
	float *norm_w, *norm_b; /* (d), (d) — norm_b NULL for llama */
	float *head;            /* (V, d): wte when tied */
};

/* A layer's tensors by the modules it runs (the step description's, in
 * forward order): slot 2s + k is module s's k-th tensor (0 its weight, 1
 * its bias), NULL where absent. A block's modules are tfm_block_params'
 * pairs (ln1 .. fcproj; qwen3's q/k norm a module of its own after qkv);
 * the embedding's wte, wpe; the head's its final norm, then the head
 * (tied: the token table). The views read them. */
#define TFM_SLOTS 18
void tfm_block_view(struct tfm_block_params *v, float *const slot[TFM_SLOTS], const struct tfm_dims *d, size_t l);
void tfm_embed_view(struct tfm_embed_params *v, float *const slot[TFM_SLOTS]);
void tfm_final_view(struct tfm_final_params *v, float *const slot[TFM_SLOTS]);
/* The slots of layer l of p (0 the embedding, 1..L the blocks, L+1 the
 * head) in the flat vector `flat`. */
void tfm_layer_slots(float *slot[TFM_SLOTS], const struct step_params *p, size_t l, float *flat);

/* The activations the backward needs, B·T = BT rows, one tensor each:
 * the step description's (util/step.h: enum step_act, their sizes, which
 * are 16-bit in mixed precision). Absent tensors (llama's means) are
 * NULL. */

struct tfm_block_acts {
	float *ln1;          /* (BT, d) the first norm's output */
	float *ln1_mean;     /* (BT) gpt2 only */
	float *ln1_rstd;     /* (BT) */
	float *qkv;          /* (BT, Q) queries and keys after rope */
	float *qk_pre;       /* (BT, (H + KV)·hd) qwen3: the q and k heads before their norms */
	float *qk_rstd;      /* (BT, H + KV) qwen3: each head's 1/rms */
	float *att;          /* (B, H, T, T) the softmax */
	float *att_tanh;     /* (B, H, T, T) gemma2: tanh(scores / cap), or NULL */
	float *atty;         /* (BT, H·hd) attention's output */
	float *proj_out;     /* (BT, d) gemma2: the projection's output, the norm's input */
	float *proj_rstd;    /* (BT) gemma2 */
	float *res2;         /* (BT, d) the residual stream after attention */
	float *ln2;          /* (BT, d) */
	float *ln2_mean;     /* (BT) gpt2 only */
	float *ln2_rstd;     /* (BT) */
	float *fch;          /* (BT, U) fc's output: gelu's input, or gate and up */
	float *fch_act;      /* (BT, F) gelu(fch) or silu(gate)·up: fcproj's input */
	float *down_out;     /* (BT, d) gemma2: the MLP's output, the norm's input */
	float *down_rstd;    /* (BT) gemma2 */
	float *res3;         /* (BT, d) the block's output */
	/* Mixed precision: the 16-bit tensors (esize 2 in the step description) are rounded to
	 * fp16 values as they are written, so that what the next kernel
	 * reads is what a 16-bit tensor holds. 0 in fp32. */
	int f16;
};
struct tfm_head_acts {
	float *lnf;      /* (BT, d) the final norm's output */
	float *lnf_mean; /* (BT) gpt2 only */
	float *lnf_rstd; /* (BT) */
	float *logits;   /* (BT, V): logits, then d loss / d logits */
	int f16;         /* as tfm_block_acts' (lnf 16-bit, the logits rounded to fp16 values) */
};
/* The field that holds block tensor a (a < STEP_NBLOCK_ACTS), and head
 * tensor a (STEP_ACT_LNF <= a <= STEP_ACT_LOGITS). */
float **tfm_block_act_slot(struct tfm_block_acts *acts, enum step_act a);
float **tfm_head_act_slot(struct tfm_head_acts *acts, enum step_act a);

/* Scratch of the backward (nothing in it outlives one layer's backward,
 * except dres, which carries the residual stream's gradient down). */
struct tfm_scratch {
	float *dres; /* (BT, d) */
	float *dx;   /* (BT, max(d, H·hd)) */
	float *dqkv; /* (BT, Q) */
	float *dh;   /* (BT, F) */
	float *dup;  /* (BT, U) */
	float *datt; /* (T, T) one head's attention gradient */
};
/* (The scratch buffers' sizes are the step description's: STEP_SCRATCH.) */

/* ---- the layers: outputs first, sizes last ----------------------------- */

/* x (BT, d) = the embedding of in (B, T). */
void tfm_embed_forward(float *x, const struct tfm_embed_params *p, const int *in, const struct tfm_dims *d,
                       size_t B, size_t T);
void tfm_embed_backward(struct tfm_embed_params *g, const float *dx, const int *in, const struct tfm_dims *d,
                        size_t B, size_t T);

/* One block: a->res3 = block(x); x (BT, d) is the block's input. */
void tfm_block_forward(struct tfm_block_acts *a, const struct tfm_block_params *p, const float *x,
                       const struct tfm_dims *d, size_t B, size_t T);
/* Rebuild module s's part of what the block's backward reads from the
 * block's input x (full recompute, module by module: s = 0..n-1 rebuilds
 * every tensor but res3, which the backward does not read): the
 * forward's kernels on the same inputs, so the same bits; the last
 * module's output res3 is not rebuilt. */
void tfm_block_recompute_module(struct tfm_block_acts *a, const struct tfm_block_params *p, const float *x,
                                const struct tfm_dims *d, size_t B, size_t T, size_t s);
/* Rebuild the softmax a->att and a->atty from a->qkv (selective
 * recompute): the forward's kernel on the same input, so the same bits. */
void tfm_attention_recompute(struct tfm_block_acts *a, const struct tfm_dims *d, size_t B, size_t T);
/* On entry s->dres is d loss / d res3, on return d loss / d x; g += the
 * block's parameter gradients. */
/* The same, one module at a time (DeepSpeed's ZeRO-3 gathers params per
 * nn.Module): a block's modules are its norms and linears, 0 ln1, 1 qkv,
 * 2 proj, 3 ln2, 4 up, 5 down (module s reads the tensors of slots 2s and
 * 2s+1 of tfm_block_params); qwen3's are 0 ln1, 1 qkv, 2 the q/k norm
 * (with rope and the attention), then proj .. down as 3..6. Forward runs
 * them 0..n-1 (recompute 0..n-2), backward n-1..0; the embedding's 0 wte,
 * 1 wpe; the head's 0 the final norm, 1 the head. The bits are those of
 * the whole-layer calls. tfm_block_modules is n. gemma2's are ln1, qkv,
 * proj, the norm after attention, ln2, up, down, the norm after the MLP;
 * gemma3_text's gemma2's with the q/k norm after qkv (nine). */
#define TFM_BLOCK_MODULES 9
size_t tfm_block_modules(const struct tfm_dims *d);
void tfm_block_forward_module(struct tfm_block_acts *a, const struct tfm_block_params *p, const float *x,
                              const struct tfm_dims *d, size_t B, size_t T, size_t s);
void tfm_block_backward_module(struct tfm_block_params *g, struct tfm_scratch *sc, const struct tfm_block_acts *a,
                               const struct tfm_block_params *p, const float *x, const struct tfm_dims *d, size_t B,
                               size_t T, size_t s);
/* Module s in two halves for LoRA's branch (--lora-r: tfm_net.c), which
 * adds into a product's output between them: forward, TFM_PRODUCT runs
 * the module through its product (a module without one: all of it),
 * TFM_REST what follows it (the attention after qkv, the activation after
 * up, the residual after proj and down); backward, TFM_PRODUCT the
 * product's backward (dx written), TFM_REST what follows it (the
 * attention's, the activation's). TFM_WHOLE: both (the _module calls). */
enum tfm_half { TFM_WHOLE, TFM_PRODUCT, TFM_REST };
void tfm_block_forward_half(struct tfm_block_acts *a, const struct tfm_block_params *p, const float *x,
                            const struct tfm_dims *d, size_t B, size_t T, size_t s, enum tfm_half half);
void tfm_block_backward_half(struct tfm_block_params *g, struct tfm_scratch *sc, const struct tfm_block_acts *a,
                             const struct tfm_block_params *p, const float *x, const struct tfm_dims *d, size_t B,
                             size_t T, size_t s, enum tfm_half half);
/* Module s's product y (BT, out) = x (BT, in) · Wᵀ as LoRA's branch
 * reads it: x, y, and (sc not NULL) the gradient of y that its backward
 * reads (dy) and the gradient of x that it writes (dx). Returns 0 (l
 * zeroed) where the module runs no product. */
struct tfm_linear {
	float *x, *y, *dy, *dx;
	size_t in, out;
};
int tfm_block_linear(struct tfm_linear *l, const struct tfm_block_acts *a, const struct tfm_scratch *sc,
                     const struct tfm_dims *d, size_t s);
void tfm_embed_forward_module(float *x, const struct tfm_embed_params *p, const int *in, const struct tfm_dims *d,
                              size_t B, size_t T, size_t s);
void tfm_embed_backward_module(struct tfm_embed_params *g, const float *dx, const int *in, const struct tfm_dims *d,
                               size_t B, size_t T, size_t s);
void tfm_head_forward_module(struct tfm_head_acts *a, const struct tfm_final_params *p, const float *x,
                             const struct tfm_dims *d, size_t B, size_t T, size_t s);
void tfm_head_backward_module(struct tfm_final_params *g, struct tfm_scratch *s, const struct tfm_head_acts *a,
                              const struct tfm_final_params *p, const float *x, const struct tfm_dims *d, size_t B,
                              size_t T, size_t m);
void tfm_block_backward(struct tfm_block_params *g, struct tfm_scratch *s, const struct tfm_block_acts *a,
                        const struct tfm_block_params *p, const float *x, const struct tfm_dims *d, size_t B,
                        size_t T);

/* The head and the loss: returns the mean cross-entropy of the next
 * tokens target (B, T) given the last block's output x (BT, d); a->logits
 * holds d loss / d logits on return. tfm_head_logits stops before the
 * loss: a->logits holds the logits. */
void tfm_head_logits(struct tfm_head_acts *a, const struct tfm_final_params *p, const float *x,
                     const struct tfm_dims *d, size_t B, size_t T);
float tfm_head_forward(struct tfm_head_acts *a, const struct tfm_final_params *p, const float *x,
                       const int *target, const struct tfm_dims *d, size_t B, size_t T);
/* The loss of logits (BT, V) in place, as tfm_head_forward computes it
 * (gemma2's logits soft-capped: the gradient through the cap too). */
float tfm_loss(float *logits, const int *target, const struct tfm_dims *d, size_t BT);
/* s->dres = d loss / d x (written); g += the head's gradients. */
void tfm_head_backward(struct tfm_final_params *g, struct tfm_scratch *s, const struct tfm_head_acts *a,
                       const struct tfm_final_params *p, const float *x, const struct tfm_dims *d, size_t B,
                       size_t T);

/* ---- data --------------------------------------------------------------- */

/* The initial weights --seed gives (Ψ values): matrices and embeddings
 * uniform with standard deviation 0.02 (GPT-2's and Llama's
 * initializer_range), the residual stream's output projections 0.02 /
 * sqrt(2L) (GPT-2), biases 0, norm weights 1. */
void tfm_init_weights(float *w, const struct tfm_dims *d, uint64_t seed);
/* The same values for the elements [first, first + n) of the flat vector,
 * into w[0, n): each rank draws its own slots. */
void tfm_init_range(float *w, const struct tfm_dims *d, uint64_t seed, size_t first, size_t n);

/* The synthetic task: a permutation π of the vocabulary drawn from the
 * seed; each sequence starts at a token drawn from (seed, step, rank,
 * row) and continues x[t+1] = π(x[t]). Next-token prediction on it is
 * learnable by the embedding and head alone (the loss can fall to 0),
 * attention and MLP adding capacity. in and target are (B, T):
 * target[b][t] = in[b][t+1] = π(in[b][t]). */
struct tfm_task {
	size_t vocab;
	int *perm; /* (V) */
};
void tfm_task_init(struct tfm_task *task, size_t vocab, uint64_t seed);
void tfm_task_free(struct tfm_task *task);
void tfm_task_batch(int *in, int *target, const struct tfm_task *task, uint64_t seed, uint64_t step,
                    uint64_t rank, size_t B, size_t T);

/* A transformer run of `zerosim measure --model` (util/config.h's tfm):
 * the model, T = seq tokens per sequence, the recompute mode. */
struct zs_tfm_run {
	char name[64];
	struct zs_model hf;            /* the config it was read from */
	struct tfm_dims dims;
	size_t seq;
	enum zs_recompute recompute;
};

#endif
