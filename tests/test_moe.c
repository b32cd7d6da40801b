/*
 * test_moe — mixtures of experts (issue #25), Mixtral first, against
 * values from outside zerosim:
 *   - Mixtral-8x7B's published parameter count, 46,702,792,704, worked by
 *     hand from its config.json's numbers;
 *   - the description's tensors named and shaped as transformers 4.x's
 *     MixtralForCausalLM holds them (modeling_mixtral.py at 00d4b3d2), each
 *     expert its own modules;
 *   - MixtralConfig's defaults, and configs refused by the key's name;
 *   - the engine's mixture-of-experts kernels (engine/moe_kernels.h):
 *     routing as MixtralSparseMoeBlock computes it, checked by hand on a
 *     small case, and their backward by finite differences in double
 *     precision's reach (router and an expert);
 *   - a tiny mixtral of those kernels and tfm.h's attention
 *     (engine/tfm_moe.h) trained on the synthetic task: its loss falls,
 *     and each layer's routing sends every token to k experts;
 *   - Qwen2-MoE (qwen2_moe): Qwen1.5-MoE-A2.7B's count worked by hand
 *     against its model card, its tensors named as Qwen2MoeForCausalLM's
 *     (modeling_qwen2_moe.py at 00a3f938, a 4.x layout), Qwen2MoeConfig's
 *     defaults and the refusals, and the shared expert, its gate and the
 *     unnormalised top-k by finite differences.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/moe_kernels.h"
#include "engine/optim.h"
#include "engine/tfm.h"
#include "engine/tfm_kernels.h"
#include "util/model.h"
#include "util/step.h"
#include "util/util.h"

#include "model_lookup.h"
#include "moe_model.h"

static int parse(const char *json, struct zs_model *m, char **cause)
{
	cJSON *root = cJSON_Parse(json);
	ck_assert_ptr_nonnull(root);
	int rc = zs_model_from_json(root, "cfg.json", m, cause);
	cJSON_Delete(root);
	return rc;
}

/* Mixtral-8x7B (mistralai/Mixtral-8x7B-v0.1's config.json: hidden 4096,
 * intermediate 14336, 32 layers, 32 heads of 128, 8 key-value heads, 8
 * experts, vocabulary 32,000, untied), counted by hand:
 *   embed_tokens and lm_head 32000·4096 = 131,072,000 each
 *   a block: the two norms 2·4096 = 8,192; q_proj and o_proj 4096·4096 =
 *     16,777,216 each; k_proj and v_proj 1024·4096 = 4,194,304 each;
 *     the router 8·4096 = 32,768; 8 experts of w1, w2, w3 at
 *     4096·14336 = 58,720,256 each: 1,409,286,144; in all 1,451,270,144,
 *     times 32 = 46,440,644,608
 *   the final norm 4,096:
 *   2·131,072,000 + 46,440,644,608 + 4,096 = 46,702,792,704, the count
 *   Mistral AI publishes (46.7B). */
START_TEST(test_mixtral_8x7b_has_46702792704_parameters_by_hand)
{
	struct zs_model m = shipped("mixtral-8x7b");
	ck_assert_str_eq(m.model_type, "mixtral");
	ck_assert_uint_eq(m.experts, 8);
	ck_assert_uint_eq(m.experts_per_tok, 2);
	uint64_t block = 2 * 4096ull + 2 * 16777216ull + 2 * 4194304ull + 32768ull + 8 * 3 * 58720256ull;
	ck_assert_uint_eq(block, 1451270144ull);
	ck_assert_uint_eq(step_params_count(&m), 2 * 131072000ull + 32 * block + 4096ull);
	ck_assert_uint_eq(step_params_count(&m), 46702792704ull);
}
END_TEST

/* Each expert is modules of its own, named as MixtralForCausalLM's
 * named_parameters() names them and in its order (modeling_mixtral.py at
 * 00d4b3d2: MixtralSparseMoeBlock registers gate at 98, then the experts
 * at 100; MixtralBlockSparseTop2MLP w1, w2, w3 at 66-68), so the flat
 * vector is model.parameters() concatenated; a block is one unit: its
 * layer holds its router and every expert. */
START_TEST(test_mixtral_description_names_each_expert)
{
	struct zs_model m = shipped("mistralai/mixtral-8x7b-v0.1");
	struct step_params p;
	char buf[160];

	ck_assert_str_eq(m.name, "mixtral-8x7b");
	step_params_build(&p, &m);
	const struct step_tensor *g = named(&p, "model.layers.0.block_sparse_moe.gate.weight");
	ck_assert_uint_eq(g->shape[0], 8);
	ck_assert_uint_eq(g->shape[1], 4096);
	const struct step_tensor *w1 = named(&p, "model.layers.31.block_sparse_moe.experts.7.w1.weight");
	ck_assert_uint_eq(w1->shape[0], 14336);
	ck_assert_uint_eq(w1->shape[1], 4096);
	ck_assert_uint_eq(w1->nparts, 0);
	/* the order: gate, then expert 0's w1, w2, w3, expert 1's w1 ... */
	static const char *const order[] = {
		"model.layers.3.block_sparse_moe.gate.weight", "model.layers.3.block_sparse_moe.experts.0.w1.weight",
		"model.layers.3.block_sparse_moe.experts.0.w2.weight", "model.layers.3.block_sparse_moe.experts.0.w3.weight",
		"model.layers.3.block_sparse_moe.experts.1.w1.weight",
	};
	size_t at = (size_t)(named(&p, order[0]) - p.tensor);
	for (size_t i = 1; i < sizeof order / sizeof order[0]; i++)
		ck_assert_str_eq(step_tensor_name(&p, at + i, buf, sizeof buf), order[i]);
	const struct step_tensor *w2 = named(&p, "model.layers.3.block_sparse_moe.experts.0.w2.weight");
	ck_assert_uint_eq(w2->shape[0], 4096);
	ck_assert_uint_eq(w2->shape[1], 14336);
	ck_assert_str_eq(step_module_name(&p, w2->module, buf, sizeof buf), "model.layers.3.block_sparse_moe.experts.0.w2");
	/* a block: the norm, q/k/v, o_proj, the norm, the router, 3 modules an expert */
	ck_assert_uint_eq(p.nmodules, 1 + 32 * (5 + 3 * 8) + 2);
	ck_assert_uint_eq(p.layer[1].numel, 1451270144ull);
	/* the largest nn.Module is a table */
	ck_assert_uint_eq(step_params_largest_hf_module(&p), 131072000ull);
	step_params_free(&p);
}
END_TEST

/* A config refused, and what the one line must name. */
struct refusal {
	const char *json, *names;
};

static void expect_refused(const struct refusal *bad, size_t n)
{
	struct zs_model m;
	for (size_t i = 0; i < n; i++) {
		char *cause = NULL;
		ck_assert_msg(parse(bad[i].json, &m, &cause) < 0, "accepted: %s", bad[i].json);
		ck_assert_msg(strstr(cause, bad[i].names) != NULL, "'%s' does not name %s", cause, bad[i].names);
		free(cause);
	}
}

#define MIXTRAL "\"model_type\": \"mixtral\", \"hidden_size\": 64, \"intermediate_size\": 96, " \
	"\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 100, \"max_position_embeddings\": 32"

/* MixtralConfig's defaults (configuration_mixtral.py at 008e5743): 8
 * experts, top 2, router_aux_loss_coef 0.001, output_router_logits false,
 * rms_norm_eps 1e-5, rope_theta 1e6, no window; the engine runs these
 * (no unrun sentence); the auxiliary loss (output_router_logits true) in
 * the PyTorch step only, the router's noise nowhere (both refused by
 * zs_model_router_check). Bad values are refused by the key's name. */
START_TEST(test_mixtral_defaults_and_refusals)
{
	struct zs_model m;
	char *cause = NULL;

	ck_assert_int_eq(parse("{" MIXTRAL "}", &m, &cause), 0);
	ck_assert_uint_eq(m.experts, 8);
	ck_assert_uint_eq(m.experts_per_tok, 2);
	ck_assert_double_eq_tol(m.router_aux_coef, 0.001, 1e-15);
	ck_assert_int_eq(m.router_logits, 0);
	ck_assert_double_eq_tol(m.norm_eps, 1e-5, 1e-15);
	ck_assert_double_eq_tol(m.rope_theta, 1e6, 1e-6);
	ck_assert_uint_eq(m.sliding_window, 0);
	ck_assert_str_eq(m.unrun, "");
	ck_assert_int_eq(parse("{" MIXTRAL ", \"num_local_experts\": 4, \"num_experts_per_tok\": 1, "
	                       "\"output_router_logits\": true, \"router_aux_loss_coef\": 0.02}", &m, &cause), 0);
	ck_assert_uint_eq(m.experts, 4);
	ck_assert_uint_eq(m.experts_per_tok, 1);
	ck_assert_int_eq(m.router_logits, 1);
	ck_assert_str_eq(m.unrun, ""); /* the PyTorch step runs it; the engine's step refuses it */
	ck_assert_int_eq(zs_model_router_check(&m, 1, &cause), 0);
	ck_assert_int_eq(zs_model_router_check(&m, 0, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "\"output_router_logits\" is true: the router's auxiliary load-balancing "
	                                    "loss is run and predicted in the PyTorch step only"));
	free(cause);
	cause = NULL;
	ck_assert_int_eq(parse("{" MIXTRAL ", \"router_jitter_noise\": 0.1}", &m, &cause), 0);
	ck_assert_double_eq(m.router_jitter, 0.1);
	ck_assert_int_eq(zs_model_router_check(&m, 1, &cause), -1);
	ck_assert_ptr_nonnull(strstr(cause, "\"router_jitter_noise\" is 0.1: the router's noise is neither run nor"));
	free(cause);
	cause = NULL;
	static const struct refusal bad[] = {
		{ "{" MIXTRAL ", \"num_local_experts\": 2, \"num_experts_per_tok\": 3}", "\"num_experts_per_tok\" (3)" },
		{ "{" MIXTRAL ", \"num_local_experts\": 0.5}", "\"num_local_experts\"" },
		{ "{" MIXTRAL ", \"num_local_experts\": 5000}", "\"num_local_experts\"" },
		{ "{" MIXTRAL ", \"router_aux_loss_coef\": -1}", "\"router_aux_loss_coef\"" },
		{ "{" MIXTRAL ", \"output_router_logits\": 1}", "\"output_router_logits\"" },
		{ "{" MIXTRAL ", \"router_jitter_noise\": 2}", "\"router_jitter_noise\"" },
		/* Qwen-MoE's keys are not Mixtral's */
		{ "{" MIXTRAL ", \"moe_intermediate_size\": 8}", "\"moe_intermediate_size\"" },
		/* a dense family with experts is still refused */
		{ "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
		  "\"num_attention_heads\": 8, \"vocab_size\": 100, \"max_position_embeddings\": 32, "
		  "\"num_local_experts\": 8}", "\"num_local_experts\"" },
	};
	expect_refused(bad, sizeof bad / sizeof bad[0]);
}
END_TEST


/* Qwen1.5-MoE-A2.7B (Qwen/Qwen1.5-MoE-A2.7B's config.json: hidden 2048,
 * 24 layers, 16 heads and 16 key-value heads of 128, 60 experts of
 * moe_intermediate_size 1408, top 4, shared_expert_intermediate_size
 * 5632, vocabulary 151,936, untied; intermediate_size 5632 is the dense
 * MLP's, which no block has), counted by hand:
 *   embed_tokens and lm_head 151936·2048 = 311,164,928 each
 *   a block: the two norms 2·2048 = 4,096; q_proj, k_proj, v_proj
 *     2048·2048 + 2048 (biased) = 4,196,352 each, 12,589,056; o_proj
 *     4,194,304; the router 60·2048 = 122,880; 60 experts of gate_proj,
 *     up_proj, down_proj at 1408·2048 = 2,883,584 each: 519,045,120;
 *     the shared expert 3·5632·2048 = 34,603,008; its gate 2,048; in all
 *     570,560,512, times 24 = 13,693,452,288
 *   the final norm 2,048:
 *   2·311,164,928 + 13,693,452,288 + 2,048 = 14,315,784,192, the model
 *   card's "14.3B parameters in total" (huggingface.co/Qwen/
 *   Qwen1.5-MoE-A2.7B, README.md), which counts every parameter: the
 *   embedding and the untied head (622,329,856) with all 60 experts of
 *   each block; its "2.7B activated" counts 4 of them and the shared one. */
START_TEST(test_qwen1_5_moe_a2_7b_has_14315784192_parameters_by_hand)
{
	struct zs_model m = shipped("Qwen/Qwen1.5-MoE-A2.7B");
	ck_assert_str_eq(m.name, "qwen1.5-moe-a2.7b");
	ck_assert_str_eq(m.model_type, "qwen2_moe");
	ck_assert_uint_eq(m.experts, 60);
	ck_assert_uint_eq(m.experts_per_tok, 4);
	ck_assert_uint_eq(m.intermediate, 1408);
	ck_assert_uint_eq(m.shared_ffn, 5632);
	ck_assert_int_eq(m.topk_raw, 1);
	ck_assert_int_eq(m.qkv_bias, 1);
	ck_assert_int_eq(m.tied, 0);
	ck_assert_uint_eq(m.positions, 8192);
	ck_assert_double_eq_tol(m.rope_theta, 1e6, 1e-6);
	ck_assert_str_eq(m.unrun, "");
	uint64_t block = 2 * 2048ull + 3 * 4196352ull + 4194304ull + 122880ull + 60 * 3 * 2883584ull +
	                 3 * 5632ull * 2048ull + 2048ull;
	ck_assert_uint_eq(block, 570560512ull);
	ck_assert_uint_eq(step_params_count(&m), 2 * 311164928ull + 24 * block + 2048ull);
	ck_assert_uint_eq(step_params_count(&m), 14315784192ull);
	ck_assert_uint_eq((step_params_count(&m) + 50000000ull) / 100000000ull, 143); /* "14.3B" */
}
END_TEST

/* Qwen2MoeForCausalLM's named_parameters() of a block, in its order
 * (Qwen2MoeSparseMoeBlock.__init__ at 00a3f938: gate, experts, shared_expert,
 * shared_expert_gate; Qwen2MoeMLP: gate_proj, up_proj, down_proj), each
 * expert its own modules, the shared expert's too; a block is one unit. */
START_TEST(test_qwen2_moe_description_names_each_expert)
{
	struct zs_model m = shipped("qwen1.5-moe-a2.7b");
	struct step_params p;
	char buf[160];

	step_params_build(&p, &m);
	static const char *const order[] = {
		"model.layers.5.post_attention_layernorm.weight", "model.layers.5.mlp.gate.weight",
		"model.layers.5.mlp.experts.0.gate_proj.weight", "model.layers.5.mlp.experts.0.up_proj.weight",
		"model.layers.5.mlp.experts.0.down_proj.weight", "model.layers.5.mlp.experts.1.gate_proj.weight",
	};
	size_t at = (size_t)(named(&p, order[0]) - p.tensor);
	for (size_t i = 1; i < sizeof order / sizeof order[0]; i++)
		ck_assert_str_eq(step_tensor_name(&p, at + i, buf, sizeof buf), order[i]);
	static const char *const tail[] = {
		"model.layers.5.mlp.experts.59.down_proj.weight", "model.layers.5.mlp.shared_expert.gate_proj.weight",
		"model.layers.5.mlp.shared_expert.up_proj.weight", "model.layers.5.mlp.shared_expert.down_proj.weight",
		"model.layers.5.mlp.shared_expert_gate.weight", "model.layers.6.input_layernorm.weight",
	};
	at = (size_t)(named(&p, tail[0]) - p.tensor);
	for (size_t i = 1; i < sizeof tail / sizeof tail[0]; i++)
		ck_assert_str_eq(step_tensor_name(&p, at + i, buf, sizeof buf), tail[i]);
	const struct step_tensor *t = named(&p, "model.layers.5.mlp.experts.59.down_proj.weight");
	ck_assert_uint_eq(t->shape[0], 2048);
	ck_assert_uint_eq(t->shape[1], 1408);
	ck_assert_str_eq(step_module_name(&p, t->module, buf, sizeof buf), "model.layers.5.mlp.experts.59.down_proj");
	t = named(&p, "model.layers.5.mlp.shared_expert.up_proj.weight");
	ck_assert_uint_eq(t->shape[0], 5632);
	ck_assert_uint_eq(t->shape[1], 2048);
	t = named(&p, "model.layers.5.mlp.shared_expert_gate.weight");
	ck_assert_uint_eq(t->shape[0], 1);
	ck_assert_uint_eq(t->shape[1], 2048);
	t = named(&p, "model.layers.5.self_attn.{q,k,v}_proj.bias");
	ck_assert_uint_eq(t->shape[0], 3 * 2048);
	/* the norm, q/k/v, o_proj, the norm, the router, 3 an expert, 4 shared */
	ck_assert_uint_eq(p.nmodules, 1 + 24 * (5 + 3 * 60 + 4) + 2);
	ck_assert_uint_eq(p.layer[1].numel, 570560512ull);
	step_params_free(&p);
}
END_TEST

/* A Qwen-MoE config's defaults: experts, top-k, the experts' width and
 * the shared expert's (want), norm_topk_prob false, q/k/v biased as given,
 * the Qwen block's layout, rms_norm_eps 1e-6, untied, run as it is. */
static void expect_qwen_defaults(const struct zs_model *m, const uint64_t want[4], int qkv_bias)
{
	ck_assert_uint_eq(m->experts, want[0]);
	ck_assert_uint_eq(m->experts_per_tok, want[1]);
	ck_assert_uint_eq(m->intermediate, want[2]);
	ck_assert_uint_eq(m->shared_ffn, want[3]);
	ck_assert_int_eq(m->topk_raw, 1);
	ck_assert_int_eq(m->qkv_bias, qkv_bias);
	ck_assert_int_eq(m->qwen_moe, 1);
	ck_assert_double_eq_tol(m->norm_eps, 1e-6, 1e-15);
	ck_assert_int_eq(m->tied, 0);
	ck_assert_str_eq(m->unrun, "");
}

#define QWEN_MOE "\"model_type\": \"qwen2_moe\", \"hidden_size\": 64, \"intermediate_size\": 96, " \
	"\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 100, \"max_position_embeddings\": 32"

/* Qwen2MoeConfig's defaults (configuration_qwen2_moe.py at 008e5743): 60
 * experts, top 4, moe_intermediate_size 1408, shared_expert_intermediate_size
 * 5632, norm_topk_prob false, qkv_bias true, rms_norm_eps 1e-6, rope_theta
 * 10000 (4.x's), no tie; dense blocks among the sparse ones, sliding
 * windows and Mixtral's key are refused by name. */
START_TEST(test_qwen2_moe_defaults_and_refusals)
{
	struct zs_model m;
	char *cause = NULL;

	ck_assert_int_eq(parse("{" QWEN_MOE "}", &m, &cause), 0);
	expect_qwen_defaults(&m, (const uint64_t[4]){60, 4, 1408, 5632}, 1);
	ck_assert_double_eq_tol(m.rope_theta, 10000.0, 1e-9);
	ck_assert_int_eq(parse("{" QWEN_MOE ", \"num_experts\": 4, \"num_experts_per_tok\": 2, \"qkv_bias\": false, "
	                       "\"norm_topk_prob\": true, \"decoder_sparse_step\": 1, \"mlp_only_layers\": [], "
	                       "\"output_router_logits\": true}", &m, &cause), 0);
	ck_assert_uint_eq(m.experts, 4);
	ck_assert_int_eq(m.topk_raw, 0);
	ck_assert_int_eq(m.qkv_bias, 0);
	ck_assert_int_eq(m.router_logits, 1);
	ck_assert_str_eq(m.unrun, "");
	static const struct refusal bad[] = {
		{ "{" QWEN_MOE ", \"decoder_sparse_step\": 2}", "\"decoder_sparse_step\"" },
		{ "{" QWEN_MOE ", \"mlp_only_layers\": [1]}", "\"mlp_only_layers\"" },
		{ "{" QWEN_MOE ", \"use_sliding_window\": true}", "\"use_sliding_window\"" },
		{ "{" QWEN_MOE ", \"num_experts\": 2, \"num_experts_per_tok\": 3}", "\"num_experts_per_tok\" (3)" },
		{ "{" QWEN_MOE ", \"num_experts\": null}", "\"num_experts\"" },
		{ "{" QWEN_MOE ", \"norm_topk_prob\": 1}", "\"norm_topk_prob\"" },
		{ "{" QWEN_MOE ", \"shared_expert_intermediate_size\": 0.5}", "\"shared_expert_intermediate_size\"" },
		/* Mixtral's key is not Qwen-MoE's */
		{ "{" QWEN_MOE ", \"num_local_experts\": 8}", "\"num_local_experts\"" },
		/* nor Qwen-MoE's a dense family's */
		{ "{\"model_type\": \"qwen2\", \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 2, "
		  "\"num_attention_heads\": 8, \"vocab_size\": 100, \"max_position_embeddings\": 32, "
		  "\"shared_expert_intermediate_size\": 64}", "\"shared_expert_intermediate_size\"" },
	};
	expect_refused(bad, sizeof bad / sizeof bad[0]);
}
END_TEST

/* Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B's config.json: hidden 2048, 48
 * layers, 32 heads and 4 key-value heads of head_dim 128 (not 2048 / 32),
 * 128 experts of moe_intermediate_size 768, top 8 renormalised, no shared
 * expert, vocabulary 151,936, untied; intermediate_size 6144 is the dense
 * MLP's, which no block has: mlp_only_layers []), counted by hand:
 *   embed_tokens and lm_head 151936·2048 = 311,164,928 each
 *   a block: the two norms 2·2048 = 4,096; q_proj 4096·2048 = 8,388,608,
 *     k_proj and v_proj 512·2048 = 1,048,576 each, o_proj 2048·4096 =
 *     8,388,608 (no biases); q_norm and k_norm 128 each; the router
 *     128·2048 = 262,144; 128 experts of gate_proj, up_proj, down_proj at
 *     768·2048 = 1,572,864 each: 603,979,776; in all 623,120,640, times 48
 *     = 29,909,790,720
 *   the final norm 2,048:
 *   2·311,164,928 + 29,909,790,720 + 2,048 = 30,532,122,624, the model
 *   card's 30.5B in total (huggingface.co/Qwen/Qwen3-30B-A3B, README.md;
 *   read here as the pages that quote it give it, the card itself not
 *   reachable). Its 3.3B activated is 8 experts a block:
 *   48·(623,120,640 - 120·4,718,592) + 622,331,904 = 3,353,032,704
 *   (the embedding and the head counted; 3.35B, which the card writes
 *   3.3B). */
START_TEST(test_qwen3_30b_a3b_has_30532122624_parameters_by_hand)
{
	struct zs_model m = shipped("Qwen/Qwen3-30B-A3B");
	ck_assert_str_eq(m.name, "qwen3-30b-a3b");
	ck_assert_str_eq(m.model_type, "qwen3_moe");
	ck_assert_uint_eq(m.experts, 128);
	ck_assert_uint_eq(m.experts_per_tok, 8);
	ck_assert_uint_eq(m.intermediate, 768);
	ck_assert_uint_eq(m.shared_ffn, 0);
	ck_assert_uint_eq(m.head_dim, 128);
	ck_assert_uint_eq(m.kv_heads, 4);
	ck_assert_int_eq(m.topk_raw, 0);
	ck_assert_int_eq(m.qkv_bias, 0);
	ck_assert_int_eq(m.qk_norm, 1);
	ck_assert_int_eq(m.tied, 0);
	ck_assert_uint_eq(m.positions, 40960);
	ck_assert_uint_eq(m.sliding_window, 0);
	ck_assert_double_eq_tol(m.rope_theta, 1e6, 1e-6);
	ck_assert_str_eq(m.unrun, "");
	uint64_t expert = 3 * 768ull * 2048ull;
	uint64_t attn = 2 * 2048ull + 8388608ull + 2 * 1048576ull + 8388608ull + 2 * 128ull;
	uint64_t block = attn + 262144ull + 128 * expert;
	ck_assert_uint_eq(block, 623120640ull);
	ck_assert_uint_eq(step_params_count(&m), 2 * 311164928ull + 48 * block + 2048ull);
	ck_assert_uint_eq(step_params_count(&m), 30532122624ull);
	ck_assert_uint_eq((step_params_count(&m) + 50000000ull) / 100000000ull, 305); /* "30.5B" */
	uint64_t active = 2 * 311164928ull + 48 * (attn + 262144ull + 8 * expert) + 2048ull;
	ck_assert_uint_eq(active, 3353032704ull);
	ck_assert_uint_eq(active / 100000000ull, 33); /* "3.3B" */
}
END_TEST

/* Qwen3MoeForCausalLM's parameters of a block, in the order the
 * description keeps them, the step's: the fused q/k/v, q_norm and k_norm,
 * o_proj (Qwen3MoeAttention.__init__ registers q/k/v/o_proj before the
 * norms, so its named_parameters() lists o_proj first; the description
 * follows the forward's use), then Qwen3MoeSparseMoeBlock.__init__'s at
 * 00d4b3d2: gate, experts (Qwen3MoeMLP: gate_proj, up_proj, down_proj); no
 * shared expert; a block is one unit. */
START_TEST(test_qwen3_moe_description_names_each_expert)
{
	struct zs_model m = shipped("qwen3-30b-a3b");
	struct step_params p;
	char buf[160];

	step_params_build(&p, &m);
	static const char *const order[] = {
		"model.layers.7.self_attn.{q,k,v}_proj.weight", "model.layers.7.self_attn.{q,k}_norm.weight",
		"model.layers.7.self_attn.o_proj.weight", "model.layers.7.post_attention_layernorm.weight",
		"model.layers.7.mlp.gate.weight", "model.layers.7.mlp.experts.0.gate_proj.weight",
		"model.layers.7.mlp.experts.0.up_proj.weight", "model.layers.7.mlp.experts.0.down_proj.weight",
	};
	size_t at = (size_t)(named(&p, order[0]) - p.tensor);
	for (size_t i = 1; i < sizeof order / sizeof order[0]; i++)
		ck_assert_str_eq(step_tensor_name(&p, at + i, buf, sizeof buf), order[i]);
	at = (size_t)(named(&p, "model.layers.7.mlp.experts.127.down_proj.weight") - p.tensor);
	ck_assert_str_eq(step_tensor_name(&p, at + 1, buf, sizeof buf), "model.layers.8.input_layernorm.weight");
	const struct step_tensor *t = named(&p, "model.layers.7.mlp.experts.127.down_proj.weight");
	ck_assert_uint_eq(t->shape[0], 2048);
	ck_assert_uint_eq(t->shape[1], 768);
	t = named(&p, "model.layers.7.self_attn.{q,k,v}_proj.weight");
	ck_assert_uint_eq(t->shape[0], 4096 + 2 * 512);
	ck_assert_uint_eq(t->shape[1], 2048);
	/* the norm, q/k/v, the q/k norms, o_proj, the norm, the router, 3 an expert */
	ck_assert_uint_eq(p.nmodules, 1 + 48 * (6 + 3 * 128) + 2);
	ck_assert_uint_eq(p.layer[1].numel, 623120640ull);
	step_params_free(&p);
}
END_TEST

#define QWEN3_MOE "\"model_type\": \"qwen3_moe\", \"hidden_size\": 64, \"intermediate_size\": 96, " \
	"\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 100, \"max_position_embeddings\": 32"

/* Qwen3MoeConfig's defaults (configuration_qwen3_moe.py at 008e5743): 128
 * experts, top 8, moe_intermediate_size 768, norm_topk_prob false,
 * rms_norm_eps 1e-6, no tie, no head_dim field (Qwen3MoeAttention:
 * hidden_size / heads), no shared expert (its key ignored, as the block
 * never reads it); dense blocks among the sparse ones, sliding windows,
 * attention biases and Mixtral's key are refused by name. */
START_TEST(test_qwen3_moe_defaults_and_refusals)
{
	struct zs_model m;
	char *cause = NULL;

	ck_assert_int_eq(parse("{" QWEN3_MOE "}", &m, &cause), 0);
	expect_qwen_defaults(&m, (const uint64_t[4]){128, 8, 768, 0}, 0);
	ck_assert_uint_eq(m.head_dim, 8);
	ck_assert_int_eq(m.qk_norm, 1);
	ck_assert_int_eq(parse("{" QWEN3_MOE ", \"num_experts\": 4, \"num_experts_per_tok\": 2, \"head_dim\": 16, "
	                       "\"norm_topk_prob\": true, \"decoder_sparse_step\": 1, \"mlp_only_layers\": [], "
	                       "\"shared_expert_intermediate_size\": 64, \"qkv_bias\": true}", &m, &cause), 0);
	ck_assert_uint_eq(m.experts, 4);
	ck_assert_uint_eq(m.head_dim, 16);
	ck_assert_uint_eq(m.shared_ffn, 0);
	ck_assert_int_eq(m.qkv_bias, 0);
	ck_assert_int_eq(m.topk_raw, 0);
	ck_assert_int_eq(parse("{" QWEN3_MOE ", \"output_router_logits\": true}", &m, &cause), 0);
	ck_assert_int_eq(m.router_logits, 1);
	ck_assert_str_eq(m.unrun, "");
	static const struct refusal bad[] = {
		{ "{" QWEN3_MOE ", \"decoder_sparse_step\": 2}", "\"decoder_sparse_step\"" },
		{ "{" QWEN3_MOE ", \"mlp_only_layers\": [0]}", "\"mlp_only_layers\"" },
		{ "{" QWEN3_MOE ", \"use_sliding_window\": true}", "sliding-window layers of qwen3_moe" },
		{ "{" QWEN3_MOE ", \"attention_bias\": true}", "\"attention_bias\"" },
		{ "{" QWEN3_MOE ", \"num_experts\": 4, \"num_experts_per_tok\": 5}", "\"num_experts_per_tok\" (5)" },
		{ "{" QWEN3_MOE ", \"moe_intermediate_size\": null}", "\"moe_intermediate_size\"" },
		{ "{" QWEN3_MOE ", \"num_local_experts\": 8}", "\"num_local_experts\"" },
	};
	expect_refused(bad, sizeof bad / sizeof bad[0]);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* The kernels */

/* A small mixture: 6 tokens of width 8, 4 experts, top 2, inner width 5;
 * qwen2_moe's shared expert 7 wide. */
enum { BT = 6, D = 8, E = 4, K = 2, FF = 5, SS = 7 };

struct moe_case {
	float x[BT * D], gate[E * D], w1[E][FF * D], w2[E][D * FF], w3[E][FF * D], r[BT * D];
	float s1[SS * D], s2[D * SS], s3[SS * D], sgate[D]; /* the shared expert's gate, down, up proj; its gate */
};

static float draw(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return ((float)((*s >> 8) & 0xffff) / 65536.0f - 0.5f);
}

static void fill(struct moe_case *c, unsigned seed)
{
	for (size_t i = 0; i < BT * D; i++)
		c->x[i] = draw(&seed), c->r[i] = draw(&seed);
	for (size_t i = 0; i < E * D; i++)
		c->gate[i] = 2.0f * draw(&seed);
	for (size_t e = 0; e < E; e++) {
		for (size_t i = 0; i < FF * D; i++)
			c->w1[e][i] = draw(&seed);
		for (size_t i = 0; i < FF * D; i++)
			c->w3[e][i] = draw(&seed);
		for (size_t i = 0; i < D * FF; i++)
			c->w2[e][i] = draw(&seed);
	}
	for (size_t i = 0; i < SS * D; i++)
		c->s1[i] = draw(&seed), c->s2[i] = draw(&seed), c->s3[i] = draw(&seed);
	for (size_t i = 0; i < D; i++)
		c->sgate[i] = 2.0f * draw(&seed);
}

/* The layer's saved tensors. */
struct moe_saved {
	float probs[BT * E], w[BT * K], out[BT * D];
	int idx[BT * K];
	size_t counts[E], start[E + 1], tok[BT * K], slot[BT * K];
	float xe[BT * K * D], gu[BT * K * 2 * FF], act[BT * K * FF], ye[BT * K * D];
	float sgu[BT * 2 * SS], sact[BT * SS], sye[BT * D], sg[BT];
};

/* Mixtral's block, or (qwen) Qwen2-MoE's: the top-k as they are and the
 * shared expert. */
static int qwen;

/* loss = Σ out · r, in double from the fp32 out */
static double forward(struct moe_saved *s, const struct moe_case *c)
{
	memset(s, 0, sizeof *s);
	moe_router_forward(s->probs, c->x, c->gate, BT, D, E);
	moe_topk(s->idx, s->w, s->counts, s->probs, BT, E, K, !qwen);
	moe_dispatch(s->start, s->tok, s->slot, s->idx, BT, E, K);
	for (size_t e = 0; e < E; e++) {
		size_t a = s->start[e], n = s->start[e + 1] - a;
		moe_expert_forward(s->out, s->xe + a * D, s->gu + a * 2 * FF, s->act + a * FF, s->ye + a * D, c->x,
		                   c->w1[e], c->w2[e], c->w3[e], s->w, s->tok + a, s->slot + a, n, K, D, FF);
	}
	if (qwen)
		moe_shared_forward(s->out, s->sgu, s->sact, s->sye, s->sg, c->x, c->s1, c->s2, c->s3, c->sgate, BT, D, SS);
	double loss = 0.0;
	for (size_t i = 0; i < BT * D; i++)
		loss += (double)s->out[i] * c->r[i];
	return loss;
}

static void backward(struct moe_case *g, const struct moe_saved *s, const struct moe_case *c)
{
	static float dw[BT * K], dye[BT * D], dact[BT * SS], dgu[BT * 2 * SS], dxe[BT * D], dl[BT * E], dxr[BT * D];
	memset(g, 0, sizeof *g);
	for (size_t e = 0; e < E; e++) {
		size_t a = s->start[e], n = s->start[e + 1] - a;
		moe_expert_backward(g->x, g->w1[e], g->w2[e], g->w3[e], dw, dye, dact, dgu, dxe, c->r, s->xe + a * D,
		                    s->gu + a * 2 * FF, s->act + a * FF, s->ye + a * D, c->w1[e], c->w2[e], c->w3[e],
		                    s->w, s->tok + a, s->slot + a, n, K, D, FF);
	}
	if (qwen)
		moe_shared_backward(g->x, g->s1, g->s2, g->s3, g->sgate, dye, dact, dgu, dxe, dl, dxr, c->r, c->x, s->sgu,
		                    s->sact, s->sye, s->sg, c->s1, c->s2, c->s3, c->sgate, BT, D, SS);
	moe_router_backward(g->x, g->gate, dl, dxr, dw, s->idx, s->w, s->probs, c->x, c->gate, BT, D, E, K, !qwen);
}

/* MixtralSparseMoeBlock's routing by hand on one row: softmax, top 2,
 * renormalised, and the tokens counted per expert. */
START_TEST(test_moe_routing_is_softmax_topk_renormalised)
{
	/* one token, width 1, x = 1: the logits are the gate's column */
	const float x[1] = {1.0f}, gate[4] = {0.0f, 2.0f, 1.0f, 2.0f};
	float probs[4], w[2];
	int idx[2];
	size_t counts[4] = {0}, start[5], tok[2], slot[2];

	moe_router_forward(probs, x, gate, 1, 1, 4);
	double z = 1.0 + 2.0 * exp(2.0) + exp(1.0);
	ck_assert_double_eq_tol(probs[1], exp(2.0) / z, 1e-6);
	moe_topk(idx, w, counts, probs, 1, 4, 2, 1);
	/* a tie: torch.topk's order aside, the lower expert first */
	ck_assert_int_eq(idx[0], 1);
	ck_assert_int_eq(idx[1], 3);
	ck_assert_double_eq_tol(w[0], 0.5, 1e-7);
	ck_assert_uint_eq(counts[0] + counts[2], 0);
	ck_assert_uint_eq(counts[1] + counts[3], 2);
	moe_dispatch(start, tok, slot, idx, 1, 4, 2);
	ck_assert_uint_eq(start[1], 0);
	ck_assert_uint_eq(start[2], 1);
	ck_assert_uint_eq(start[4], 2);
	ck_assert_uint_eq(slot[1], 1);
}
END_TEST

/* The backward against central differences of the loss, for every
 * element of the router, one expert's w1, w2 and w3, and the input: the
 * routing is held where the perturbation would change a choice (no
 * element is checked whose ±h flips a top-k choice; the test counts
 * them, and most elements are checked). */
/* The central differences of every element of the tensors t (a
 * perturbed copy's, pc, against c's gradients g), the routing held. */
static void check_finite_differences(void)
{
	static struct moe_case c, g, pc;
	static struct moe_saved s, sp, sm;
	fill(&c, 7);
	forward(&s, &c);
	backward(&g, &s, &c);
	/* every expert gets some token, the test's premise */
	for (size_t e = 0; e < E; e++)
		ck_assert_uint_gt(s.counts[e], 0);
	const float h = 1e-2f;
	struct { float *p, *gp; size_t n; const char *name; } t[] = {
		{ pc.gate, g.gate, E * D, "gate" }, { pc.w1[1], g.w1[1], FF * D, "w1[1]" },
		{ pc.w2[1], g.w2[1], D * FF, "w2[1]" }, { pc.w3[1], g.w3[1], FF * D, "w3[1]" }, { pc.x, g.x, BT * D, "x" },
		{ pc.s1, g.s1, SS * D, "shared gate_proj" }, { pc.s2, g.s2, D * SS, "shared down_proj" },
		{ pc.s3, g.s3, SS * D, "shared up_proj" }, { pc.sgate, g.sgate, D, "shared_expert_gate" },
	};
	size_t checked = 0, skipped = 0;
	for (size_t k = 0; k < sizeof t / sizeof t[0] - (qwen ? 0 : 4); k++)
		for (size_t i = 0; i < t[k].n; i++) {
			pc = c;
			float v = t[k].p[i];
			t[k].p[i] = v + h;
			double lp = forward(&sp, &pc);
			t[k].p[i] = v - h;
			double lm = forward(&sm, &pc);
			if (memcmp(sp.idx, s.idx, sizeof s.idx) != 0 || memcmp(sm.idx, s.idx, sizeof s.idx) != 0) {
				skipped++;
				continue;
			}
			double fd = (lp - lm) / (2.0 * h), an = t[k].gp[i];
			ck_assert_msg(fabs(fd - an) <= 2e-3 + 2e-2 * fabs(fd), "%s[%zu]: finite differences %.6g, backward %.6g",
			              t[k].name, i, fd, an);
			checked++;
		}
	ck_assert_msg(checked > 10 * skipped, "%zu checked, %zu skipped", checked, skipped);
	printf("%s: %zu elements' gradients checked by finite differences, %zu skipped (a choice flips)\n",
	       qwen ? "qwen2_moe" : "mixtral", checked, skipped);
}

/* The backward against central differences of the loss, for every
 * element of the router, one expert's w1, w2 and w3, and the input: the
 * routing is held where the perturbation would change a choice (no
 * element is checked whose ±h flips a top-k choice; the test counts
 * them, and most elements are checked). */
START_TEST(test_moe_backward_matches_finite_differences)
{
	qwen = 0;
	check_finite_differences();
}
END_TEST

/* Qwen2-MoE's block the same way (Qwen2MoeSparseMoeBlock.forward at
 * 00a3f938): the top-k probabilities as they are (norm_topk_prob false,
 * Qwen1.5-MoE-A2.7B's), and besides the router, an expert and the input,
 * every element of the shared expert's gate_proj, up_proj, down_proj and
 * of shared_expert_gate, whose gradient flows through the sigmoid. */
START_TEST(test_qwen2_moe_backward_matches_finite_differences)
{
	qwen = 1;
	check_finite_differences();
	qwen = 0;
}
END_TEST

/* ------------------------------------------------------------------------ */
/* A tiny mixtral, whole: the embedding, two Mixtral blocks, the head */

#define TINY "\"model_type\": \"mixtral\", \"hidden_size\": 64, \"intermediate_size\": 96, " \
	"\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"vocab_size\": 64, " \
	"\"max_position_embeddings\": 32, \"num_local_experts\": 4, \"num_experts_per_tok\": 2"

enum { TB = 4, TT = 16, TL = 2 };

/* The tiny mixtral the task names (d 64, 2 layers, 4 experts, top 2)
 * trained for 100 steps on the synthetic task: the loss falls from about
 * ln 64 (an untrained head's) to less than half of it, and every step
 * each layer's routing sends each of the B·T tokens to 2 experts (Σ
 * counts = B·T·k, no expert more than B·T), the counts printed. */
START_TEST(test_tiny_mixtral_trains)
{
	static struct moe_model t;
	struct zs_model hf;
	struct tfm_dims d;
	struct tfm_task task;
	struct optim o;
	int in[TB * TT], tgt[TB * TT];
	char *cause = NULL;
	ck_assert_int_eq(parse("{" TINY "}", &hf, &cause), 0);
	tfm_dims_from_config(&d, &hf);
	ck_assert_int_eq(tfm_dims_check(&d, &cause), 0);
	ck_assert_uint_eq(d.experts, 4);
	ck_assert_uint_eq(d.top_k, 2);
	tfm_blas_init();
	ck_assert_msg(moe_model_init(&t, &d, TB, TT, 1, &cause) == 0, "%s", cause);
	tfm_task_init(&task, d.vocab, 1);
	optim_init(&o, ZS_ADAM, 1e-2);
	float first = 0.0f, last = 0.0f;
	for (unsigned s = 0; s < 100; s++) {
		tfm_task_batch(in, tgt, &task, 1, s, 0, TB, TT);
		float loss = moe_model_step(&t, &o, s + 1, in, tgt);
		ck_assert_msg(isfinite(loss), "step %u: loss %g", s, (double)loss);
		first = s == 0 ? loss : first;
		last = loss;
		for (size_t l = 0; l < TL; l++) {
			size_t sum = 0;
			for (size_t e = 0; e < 4; e++) {
				ck_assert_uint_le(t.ma[l].counts[e], TB * TT);
				sum += t.ma[l].counts[e];
			}
			ck_assert_uint_eq(sum, TB * TT * 2);
		}
		if (s == 0 || s == 99)
			printf("tiny mixtral step %u: loss %.4f, tokens per expert: layer 0 %zu %zu %zu %zu, layer 1 %zu %zu "
			       "%zu %zu\n", s + 1, (double)loss, t.ma[0].counts[0], t.ma[0].counts[1], t.ma[0].counts[2],
			       t.ma[0].counts[3], t.ma[1].counts[0], t.ma[1].counts[1], t.ma[1].counts[2], t.ma[1].counts[3]);
	}
	ck_assert_msg(fabs(first - logf(64.0f)) < 0.5f, "first loss %g, ln 64 %g", (double)first, log(64.0));
	ck_assert_msg(last < 0.5f * first, "loss %g after 100 steps, %g at the first", (double)last, (double)first);
	tfm_task_free(&task);
	moe_model_free(&t);
}
END_TEST

static Suite *moe_suite(void)
{
	Suite *s = suite_create("moe");
	TCase *model = tcase_create("model");

	suite_add_tcase(s, model);
	tcase_add_test(model, test_mixtral_8x7b_has_46702792704_parameters_by_hand);
	tcase_add_test(model, test_mixtral_description_names_each_expert);
	tcase_add_test(model, test_mixtral_defaults_and_refusals);
	tcase_add_test(model, test_qwen1_5_moe_a2_7b_has_14315784192_parameters_by_hand);
	tcase_add_test(model, test_qwen2_moe_description_names_each_expert);
	tcase_add_test(model, test_qwen2_moe_defaults_and_refusals);
	tcase_add_test(model, test_qwen3_30b_a3b_has_30532122624_parameters_by_hand);
	tcase_add_test(model, test_qwen3_moe_description_names_each_expert);
	tcase_add_test(model, test_qwen3_moe_defaults_and_refusals);
	TCase *kernels = tcase_create("kernels");
	suite_add_tcase(s, kernels);
	tcase_add_test(kernels, test_moe_routing_is_softmax_topk_renormalised);
	tcase_add_test(kernels, test_moe_backward_matches_finite_differences);
	tcase_add_test(kernels, test_qwen2_moe_backward_matches_finite_differences);
	TCase *model_run = tcase_create("tiny");
	suite_add_tcase(s, model_run);
	tcase_set_timeout(model_run, 60);
	tcase_add_test(model_run, test_tiny_mixtral_trains);
	return s;
}

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	return run_with_shipped(moe_suite());
}
