/*
 * test_lora — LoRA's adapters over the step description (util/lora.h),
 * held to what PEFT v0.20.0 counts and where it puts them: the trainable
 * counts real PyTorch printed for the tiny models of tests/ft_lora.sh
 * (tests/ft_torch.py's `trainable`, PeftModel.get_nb_trainable_parameters;
 * docs/finetune.md's table) and the llama-2-7b anchor that
 * print_trainable_parameters prints (32·2·8·(4096 + 4096) = 4,194,304).
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "model_lookup.h"
#include "util/lora.h"

/* The adapters' elements for a shipped model, r and targets. */
static uint64_t trained(const char *model, unsigned r, const char *targets)
{
	struct zs_model m = shipped(model);
	struct step_params p;
	struct zs_lora_set s;
	char *cause = NULL;
	step_params_build(&p, &m);
	ck_assert_msg(zs_lora_build(&s, &p, &m, r, targets, &cause) == 0, "%s", cause);
	uint64_t n = zs_lora_trained(&s);
	zs_lora_free(&s);
	step_params_free(&p);
	return n;
}

START_TEST(test_trainable_counts_are_pefts)
{
	/* tests/ft_lora.sh's table, real PyTorch with PEFT's LoraLinear */
	ck_assert_uint_eq(trained("report/models/gpt2-tiny.json", 4, NULL), 2048);
	ck_assert_uint_eq(trained("report/models/gpt2-tiny.json", 4, "all-linear"), 8192);
	ck_assert_uint_eq(trained("report/models/gpt2-tiny.json", 2, "c_fc,attn.c_proj"), 1792);
	ck_assert_uint_eq(trained("report/models/llama-tiny.json", 4, NULL), 1792);
	ck_assert_uint_eq(trained("report/models/llama-tiny.json", 4, "q_proj,v_proj"), 1792);
	ck_assert_uint_eq(trained("report/models/llama-tiny.json", 8, "all-linear"), 18688);
	/* print_trainable_parameters on llama-2-7b, r 8, q_proj and v_proj */
	ck_assert_uint_eq(trained("llama-2-7b", 8, NULL), 4194304);
}
END_TEST

/* llama's fused {q,k,v}_proj is adapted part by part, in
 * model.parameters()'s order: block 0's q then v, then block 1's; each
 * part's rows where the fused output holds them (q 64, k 32, v 32). */
START_TEST(test_fused_parts_are_adapted_apart_in_parameter_order)
{
	struct zs_model m = shipped("report/models/llama-tiny.json");
	struct step_params p;
	struct zs_lora_set s;
	char *cause = NULL, name[160];
	step_params_build(&p, &m);
	ck_assert_int_eq(zs_lora_build(&s, &p, &m, 4, NULL, &cause), 0);
	ck_assert_uint_eq(s.n, 4);
	static const char *const want[] = {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.v_proj.weight",
	                                   "model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.v_proj.weight"};
	static const uint64_t row0[] = {0, 96, 0, 96}, out[] = {64, 32, 64, 32};
	for (size_t i = 0; i < s.n; i++) {
		ck_assert_str_eq(step_part_name(&p, s.a[i].tensor, s.a[i].part, name, sizeof name), want[i]);
		ck_assert_uint_eq(s.a[i].row0, row0[i]);
		ck_assert_uint_eq(s.a[i].out, out[i]);
		ck_assert_uint_eq(s.a[i].in, 64);
	}
	ck_assert(s.a[0].tensor < s.a[2].tensor);
	zs_lora_free(&s);
	step_params_free(&p);
}
END_TEST

/* gpt2's Conv1D holds (in, out): c_attn's adapters are A [r, 64], B [192, r] */
START_TEST(test_conv1d_in_and_out_are_the_transposed_weights)
{
	struct zs_model m = shipped("report/models/gpt2-tiny.json");
	struct step_params p;
	struct zs_lora_set s;
	char *cause = NULL;
	step_params_build(&p, &m);
	ck_assert_int_eq(zs_lora_build(&s, &p, &m, 4, NULL, &cause), 0);
	ck_assert_uint_eq(s.n, 2);
	ck_assert_ptr_eq(&p.tensor[s.a[1].tensor], named(&p, "transformer.h.1.attn.c_attn.weight"));
	ck_assert_int_eq(s.a[1].part, -1);
	ck_assert_uint_eq(s.a[1].in, 64);
	ck_assert_uint_eq(s.a[1].out, 192);
	zs_lora_free(&s);
	step_params_free(&p);
}
END_TEST

/* PEFT raises "Target modules ... not found" only when nothing matched;
 * the output embedding is never a target */
START_TEST(test_targets_that_match_nothing_are_refused)
{
	struct zs_model m = shipped("report/models/gpt2-tiny.json");
	struct step_params p;
	struct zs_lora_set s;
	char *cause = NULL;
	step_params_build(&p, &m);
	ck_assert_int_eq(zs_lora_build(&s, &p, &m, 4, "lm_head", &cause), -1);
	ck_assert_msg(strstr(cause, "--lora-targets lm_head: no linear layer of gpt2-tiny matches") != NULL, "%s", cause);
	free(cause);
	cause = NULL;
	ck_assert_int_eq(zs_lora_build(&s, &p, &m, 4, "q_proj", &cause), -1);
	free(cause);
	cause = NULL;
	/* one term matching beside one that does not is accepted (PEFT's) */
	ck_assert_int_eq(zs_lora_build(&s, &p, &m, 4, "c_attn,q_porj", &cause), 0);
	ck_assert_uint_eq(s.n, 2);
	zs_lora_free(&s);
	step_params_free(&p);
}
END_TEST

START_TEST(test_a_target_is_a_whole_dotted_suffix)
{
	ck_assert(zs_lora_target("c_proj", "transformer.h.0.mlp.c_proj"));
	ck_assert(zs_lora_target("attn.c_proj", "transformer.h.0.attn.c_proj"));
	ck_assert(!zs_lora_target("attn.c_proj", "transformer.h.0.mlp.c_proj"));
	ck_assert(!zs_lora_target("proj", "model.layers.0.self_attn.q_proj"));
	ck_assert(zs_lora_target("all-linear", "model.layers.0.mlp.down_proj"));
}
END_TEST

static Suite *lora_suite(void)
{
	Suite *s = suite_create("lora");
	TCase *tc = tcase_create("adapters");
	tcase_add_test(tc, test_trainable_counts_are_pefts);
	tcase_add_test(tc, test_fused_parts_are_adapted_apart_in_parameter_order);
	tcase_add_test(tc, test_conv1d_in_and_out_are_the_transposed_weights);
	tcase_add_test(tc, test_targets_that_match_nothing_are_refused);
	tcase_add_test(tc, test_a_target_is_a_whole_dotted_suffix);
	suite_add_tcase(s, tc);
	return s;
}

int main(void) { return run_with_shipped(lora_suite()); }
