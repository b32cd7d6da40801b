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
 *     precision's reach (router and an expert).
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/model.h"
#include "util/step.h"
#include "util/util.h"

static struct zs_model shipped(const char *name)
{
	struct zs_model m;
	char *cause = NULL;

	ck_assert_msg(zs_model_load(name, &m, &cause) == 0, "%s: %s", name, cause);
	return m;
}

static int parse(const char *json, struct zs_model *m, char **cause)
{
	cJSON *root = cJSON_Parse(json);
	ck_assert_ptr_nonnull(root);
	int rc = zs_model_from_json(root, "cfg.json", m, cause);
	cJSON_Delete(root);
	return rc;
}

static const struct step_tensor *named(const struct step_params *p, const char *name)
{
	char buf[160];
	for (size_t i = 0; i < p->ntensors; i++)
		if (strcmp(step_tensor_name(p, i, buf, sizeof buf), name) == 0)
			return &p->tensor[i];
	ck_abort_msg("no tensor %s", name);
	return NULL;
}

/* Mixtral-8x7B (mistralai/Mixtral-8x7B-v0.1's config.json: hidden 4096,
 * intermediate 14336, 32 layers, 32 heads of 128, 8 key-value heads, 8
 * experts, vocabulary 32,000, untied), counted by hand:
 *   embed_tokens and lm_head 32000·4096 = 131,072,000 each
 *   a block: the two norms 2·4096 = 8,192; q_proj and o_proj 4096·4096 =
 *     16,777,216 each; k_proj and v_proj 1024·4096 = 4,194,304 each;
 *     the router 8·4096 = 32,768; 8 experts of w1, w3, w2 at
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
 * named_parameters() names them (w1 and w3 fused as llama's gate and up);
 * a block is one unit: its layer holds its router and every expert. */
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
	const struct step_tensor *w13 = named(&p, "model.layers.31.block_sparse_moe.experts.7.{w1,w3}.weight");
	ck_assert_uint_eq(w13->shape[0], 2 * 14336);
	ck_assert_uint_eq(w13->nparts, 2);
	ck_assert_uint_eq(w13->part_rows[1], 14336);
	const struct step_tensor *w2 = named(&p, "model.layers.3.block_sparse_moe.experts.0.w2.weight");
	ck_assert_uint_eq(w2->shape[0], 4096);
	ck_assert_uint_eq(w2->shape[1], 14336);
	ck_assert_str_eq(step_module_name(&p, w2->module, buf, sizeof buf), "model.layers.3.block_sparse_moe.experts.0.w2");
	/* a block: the norm, q/k/v, o_proj, the norm, the router, 2 modules an expert */
	ck_assert_uint_eq(p.nmodules, 1 + 32 * (5 + 2 * 8) + 2);
	ck_assert_uint_eq(p.layer[1].numel, 1451270144ull);
	/* no fused module is Hugging Face's: the largest nn.Module is a table */
	ck_assert_uint_eq(step_params_largest_hf_module(&p), 131072000ull);
	step_params_free(&p);
}
END_TEST

#define MIXTRAL "\"model_type\": \"mixtral\", \"hidden_size\": 64, \"intermediate_size\": 96, " \
	"\"num_hidden_layers\": 2, \"num_attention_heads\": 8, \"vocab_size\": 100, \"max_position_embeddings\": 32"

/* MixtralConfig's defaults (configuration_mixtral.py at 008e5743): 8
 * experts, top 2, router_aux_loss_coef 0.001, output_router_logits false,
 * rms_norm_eps 1e-5, rope_theta 1e6, no window; measure's refusal is the
 * model's unrun sentence. Bad values are refused by the key's name. */
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
	ck_assert_ptr_nonnull(strstr(m.unrun, "mixture of experts"));
	ck_assert_int_eq(parse("{" MIXTRAL ", \"num_local_experts\": 4, \"num_experts_per_tok\": 1, "
	                       "\"output_router_logits\": true, \"router_aux_loss_coef\": 0.02}", &m, &cause), 0);
	ck_assert_uint_eq(m.experts, 4);
	ck_assert_uint_eq(m.experts_per_tok, 1);
	ck_assert_int_eq(m.router_logits, 1);
	static const struct { const char *json, *names; } bad[] = {
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
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		cause = NULL;
		ck_assert_msg(parse(bad[i].json, &m, &cause) < 0, "accepted: %s", bad[i].json);
		ck_assert_msg(strstr(cause, bad[i].names) != NULL, "'%s' does not name %s", cause, bad[i].names);
		free(cause);
	}
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
	return s;
}

int main(void)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	const char *srcdir = getenv("srcdir");
	if (getenv("ZEROSIM_DATADIR") == NULL)
		setenv("ZEROSIM_DATADIR", srcdir != NULL ? srcdir : ".", 1);
	SRunner *sr = srunner_create(moe_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
