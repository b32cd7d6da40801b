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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_lookup.h"
#include "util/autograd.h"
#include "util/config.h"
#include "util/freeze.h"
#include "util/lora.h"

/* A shipped model's step description and its adapters for r and targets. */
struct fixture {
	struct zs_model m;
	struct step_params p;
	struct zs_lora_set s;
};
static void adapt(struct fixture *f, const char *model, unsigned r, const char *targets)
{
	char *cause = NULL, path[512];
	/* a path into the source tree from make check's srcdir (a VPATH build:
	 * distcheck); a shipped name as zerosim finds it */
	const char *src = getenv("srcdir");
	snprintf(path, sizeof path, "%s/%s", src != NULL ? src : ".", model);
	f->m = shipped(strchr(model, '/') != NULL ? path : model);
	step_params_build(&f->p, &f->m);
	ck_assert_msg(zs_lora_build(&f->s, &f->p, &f->m, r, targets, &cause) == 0, "%s", cause);
}
static void release(struct fixture *f)
{
	zs_lora_free(&f->s);
	step_params_free(&f->p);
}

/* The adapters' elements for a shipped model, r and targets. */
static uint64_t trained(const char *model, unsigned r, const char *targets)
{
	struct fixture f;
	adapt(&f, model, r, targets);
	uint64_t n = zs_lora_trained(&f.s);
	release(&f);
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
	struct fixture f;
	char name[160];
	adapt(&f, "report/models/llama-tiny.json", 4, NULL);
	ck_assert_uint_eq(f.s.n, 4);
	static const char *const want[] = {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.v_proj.weight",
	                                   "model.layers.1.self_attn.q_proj.weight", "model.layers.1.self_attn.v_proj.weight"};
	static const uint64_t row0[] = {0, 96, 0, 96}, out[] = {64, 32, 64, 32};
	for (size_t i = 0; i < f.s.n; i++) {
		const struct zs_lora *a = &f.s.a[i];
		ck_assert_str_eq(step_part_name(&f.p, a->tensor, a->part, name, sizeof name), want[i]);
		ck_assert_uint_eq(a->row0, row0[i]);
		ck_assert_uint_eq(a->out, out[i]);
		ck_assert_uint_eq(a->in, 64);
	}
	ck_assert(f.s.a[0].tensor < f.s.a[2].tensor);
	release(&f);
}
END_TEST

/* gpt2's Conv1D holds (in, out): c_attn's adapters are A [r, 64], B [192, r] */
START_TEST(test_conv1d_in_and_out_are_the_transposed_weights)
{
	struct fixture f;
	adapt(&f, "report/models/gpt2-tiny.json", 4, NULL);
	ck_assert_uint_eq(f.s.n, 2);
	ck_assert_ptr_eq(&f.p.tensor[f.s.a[1].tensor], named(&f.p, "transformer.h.1.attn.c_attn.weight"));
	ck_assert_int_eq(f.s.a[1].part, -1);
	ck_assert_uint_eq(f.s.a[1].in, 64);
	ck_assert_uint_eq(f.s.a[1].out, 192);
	release(&f);
}
END_TEST

/* PEFT raises "Target modules ... not found" only when nothing matched;
 * the output embedding is no candidate here (the command line refuses
 * lm_head by name first: util/autograd.c, ag_step_build) */
START_TEST(test_targets_that_match_nothing_are_refused)
{
	struct fixture f;
	adapt(&f, "report/models/gpt2-tiny.json", 4, "c_attn,q_porj"); /* one term that matches is enough */
	ck_assert_uint_eq(f.s.n, 2);
	zs_lora_free(&f.s);
	static const char *const none[] = {"lm_head", "q_proj"};
	for (size_t i = 0; i < 2; i++) {
		char *cause = NULL, want[96];
		ck_assert_int_eq(zs_lora_build(&f.s, &f.p, &f.m, 4, none[i], &cause), -1);
		snprintf(want, sizeof want, "--lora-targets %s: no linear layer of gpt2-tiny matches", none[i]);
		ck_assert_msg(strstr(cause, want) != NULL, "%s", cause);
		free(cause);
	}
	release(&f);
}
END_TEST

/* PEFT v0.20.0's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
 * (peft/utils/constants.py 65-112) by model_type: gpt2 69, llama 83,
 * mistral 93, mixtral 94, gemma2 98, gemma3_text 99 (gemma-3-4b's text
 * model, as zerosim reads it), qwen2 101, qwen3 102; phi3, qwen2_moe and
 * qwen3_moe have no entry, and get_peft_model asks for target_modules */
START_TEST(test_default_targets_are_pefts_mapping)
{
	static const struct {
		const char *model, *targets;
	} row[] = {{"gpt2", "c_attn"},           {"llama-2-7b", "q_proj,v_proj"},   {"mistral-7b", "q_proj,v_proj"},
	           {"mixtral-8x7b", "q_proj,v_proj"}, {"gemma-2-2b", "q_proj,v_proj"}, {"gemma-3-4b", "q_proj,v_proj"},
	           {"qwen2.5-0.5b", "q_proj,v_proj"}, {"qwen3-8b", "q_proj,v_proj"},   {"phi-3-mini-4k", NULL},
	           {"qwen1.5-moe-a2.7b", NULL},      {"qwen3-30b-a3b", NULL}};
	for (size_t i = 0; i < sizeof row / sizeof *row; i++) {
		struct zs_model m = shipped(row[i].model);
		const char *got = zs_lora_default_targets(&m);
		ck_assert_msg(row[i].targets == NULL ? got == NULL : got != NULL && strcmp(got, row[i].targets) == 0,
		              "%s: %s", row[i].model, got ? got : "(none)");
	}
}
END_TEST

/* where PEFT has none, the run names them or is refused */
START_TEST(test_phi3_without_targets_is_refused)
{
	struct fixture f;
	char *cause = NULL;
	f.m = shipped("phi-3-mini-4k");
	step_params_build(&f.p, &f.m);
	ck_assert_int_eq(zs_lora_build(&f.s, &f.p, &f.m, 4, NULL, &cause), -1);
	ck_assert_str_eq(cause, "--lora-r: PEFT has no default LoRA targets for a phi3 (give --lora-targets, e.g. "
	                        "all-linear)");
	free(cause);
	ck_assert_int_eq(zs_lora_build(&f.s, &f.p, &f.m, 4, "qkv_proj", &cause), 0);
	ck_assert_uint_eq(f.s.n, f.m.layers); /* one fused qkv_proj a block */
	release(&f);
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

/* The description with its adapters (zs_lora_describe): trains PEFT's
 * count and nothing else, Ψ the base's and the adapters', the trained
 * tensors named and ordered as model.parameters() lists the
 * requires_grad ones after get_peft_model (Hugging Face registers
 * q, k, v, o_proj, then gate, up, down_proj), each block's trained
 * elements the tail of its layer (one run: --unit layer lays it out). */
static void with_adapters(const char *model, unsigned r, const char *targets, uint64_t peft,
                          const char *const *names, size_t nnames)
{
	struct fixture f;
	char name[192];
	adapt(&f, model, r, targets);
	uint64_t base = f.p.numel;
	zs_lora_describe(&f.p, &f.s, 0);
	ck_assert_uint_eq(zs_freeze_trained(&f.p), peft);
	ck_assert_uint_eq(f.p.numel, base + peft);
	size_t k = 0;
	for (size_t i = 0; i < f.p.ntensors; i++)
		if (step_trained(&f.p, i) && k < nnames)
			ck_assert_str_eq(step_tensor_name(&f.p, i, name, sizeof name), names[k++]);
	ck_assert_uint_eq(k, nnames);
	size_t n;
	struct zs_freeze_run *run = zs_freeze_units(&f.p, 1, 0, &n, NULL);
	ck_assert_ptr_nonnull(run);
	for (size_t u = 0; u < n; u++) /* embedding and head: none trained; a block: its tail */
		ck_assert(run[u].n == 0 || run[u].off + run[u].n == f.p.layer[u].offset + f.p.layer[u].numel);
	free(run);
	ck_assert_ptr_null(zs_freeze_units(&f.p, 0, 0, &n, NULL)); /* --unit model: runs apart */
	release(&f);
}

START_TEST(test_the_description_with_adapters_trains_pefts_tensors)
{
	static const char *const gpt2[] = {
	    "transformer.h.0.attn.c_attn.lora_A.default.weight", "transformer.h.0.attn.c_attn.lora_B.default.weight",
	    "transformer.h.1.attn.c_attn.lora_A.default.weight", "transformer.h.1.attn.c_attn.lora_B.default.weight"};
	with_adapters("report/models/gpt2-tiny.json", 4, NULL, 2048, gpt2, 4);
	static const char *const llama[] = {
	    "model.layers.0.self_attn.q_proj.lora_A.default.weight", "model.layers.0.self_attn.q_proj.lora_B.default.weight",
	    "model.layers.0.self_attn.k_proj.lora_A.default.weight", "model.layers.0.self_attn.k_proj.lora_B.default.weight",
	    "model.layers.0.self_attn.v_proj.lora_A.default.weight", "model.layers.0.self_attn.v_proj.lora_B.default.weight",
	    "model.layers.0.self_attn.o_proj.lora_A.default.weight", "model.layers.0.self_attn.o_proj.lora_B.default.weight",
	    "model.layers.0.mlp.gate_proj.lora_A.default.weight",    "model.layers.0.mlp.gate_proj.lora_B.default.weight",
	    "model.layers.0.mlp.up_proj.lora_A.default.weight",      "model.layers.0.mlp.up_proj.lora_B.default.weight",
	    "model.layers.0.mlp.down_proj.lora_A.default.weight",    "model.layers.0.mlp.down_proj.lora_B.default.weight",
	    "model.layers.1.self_attn.q_proj.lora_A.default.weight"};
	with_adapters("report/models/llama-tiny.json", 8, "all-linear", 18688, llama, 15);
	with_adapters("report/models/llama-tiny.json", 4, NULL, 1792, llama, 0);
	with_adapters("report/models/gpt2-tiny.json", 4, "all-linear", 8192, gpt2, 0);
}
END_TEST

/* Their shapes: lora_A [r, in], lora_B [out, r] (layer.py 259-260), v's
 * out its 32 rows of the fused {q,k,v}_proj. */
START_TEST(test_adapter_shapes_are_a_r_in_and_b_out_r)
{
	struct fixture f;
	char name[192];
	adapt(&f, "report/models/llama-tiny.json", 4, NULL);
	zs_lora_describe(&f.p, &f.s, 0);
	const struct step_tensor *a = named(&f.p, "model.layers.0.self_attn.v_proj.lora_A.default.weight");
	const struct step_tensor *b = named(&f.p, "model.layers.0.self_attn.v_proj.lora_B.default.weight");
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(a->shape[0], 4);
	ck_assert_uint_eq(a->shape[1], 64);
	ck_assert_uint_eq(b->shape[0], 32);
	ck_assert_uint_eq(b->shape[1], 4);
	ck_assert_str_eq(step_module_name(&f.p, b->module, name, sizeof name),
	                 "model.layers.0.self_attn.v_proj.lora_B.default");
	release(&f);
}
END_TEST

/* What the step keeps with llama-tiny's adapters (util/step.h), B·T =
 * 2·16 rows: the step's buffers, --freeze's marks applied (the base is
 * frozen), then the adapters' own (step_buffers_lora). */
static void saved_with(struct fixture *f, struct step_buffers *b, unsigned r, const char *targets, double dropout,
                       int mixed, enum zs_recompute rc)
{
	adapt(f, "report/models/llama-tiny.json", r, targets);
	zs_lora_describe(&f->p, &f->s, dropout);
	step_buffers_build(b, &f->m, &f->p, 2, 16, mixed, rc);
	step_buffers_freeze(b, &f->p, rc);
	step_buffers_lora(b, &f->p, 2, 16, mixed, rc);
}

/* Whether layer l's saved tensor a lives to its backward (not freed by
 * the forward that reads it: step_buffers_freeze's freed_fwd). */
static int kept(const struct step_buffers *b, size_t l, enum step_act a)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->buf[i].role == STEP_SAVED && b->buf[i].index == (unsigned)a && b->buf[i].layer == l)
			return b->buf[i].freed_fwd == 0;
	ck_abort_msg("layer %zu saves no %s", l, step_act_name(a));
	return -1;
}

/* A frozen base linear's input (ln1 for q/k/v, atty for o_proj, ln2 for
 * gate/up, fch_act for down_proj) is kept only where an adapter on it
 * reads it: lora_A's weight gradient reads x (PEFT's
 * lora_A(dropout(x)), nn.Identity at p = 0); with dropout it reads the
 * dropout's output instead, kept apart. The adapters' own matmuls are
 * not among the block's four linears (counted, they made every input
 * kept). */
static void inputs_kept(unsigned r, const char *targets, double dropout, const int want[4])
{
	static const enum step_act in[4] = {STEP_ACT_LN1, STEP_ACT_ATTY, STEP_ACT_LN2, STEP_ACT_FCH_ACT};
	struct fixture f;
	struct step_buffers b;
	saved_with(&f, &b, r, targets, dropout, 0, ZS_RECOMPUTE_NONE);
	for (size_t l = 1; l <= 2; l++)
		for (int j = 0; j < 4; j++)
			ck_assert_msg(kept(&b, l, in[j]) == want[j], "%s p=%g: layer %zu's %s %s", targets ? targets : "q,v",
			              dropout, l, step_act_name(in[j]), want[j] ? "freed" : "kept");
	free(b.buf);
	release(&f);
}

START_TEST(test_a_frozen_linear_keeps_its_input_only_for_its_adapter)
{
	static const int qv[4] = {1, 0, 0, 0}, all[4] = {1, 1, 1, 1}, od[4] = {0, 1, 0, 1}, none[4] = {0, 0, 0, 0};
	inputs_kept(4, NULL, 0, qv);
	inputs_kept(8, "all-linear", 0, all);
	inputs_kept(4, "o_proj,down_proj", 0, od);
	inputs_kept(4, NULL, 0.1, none);
	inputs_kept(8, "all-linear", 0.1, none);
}
END_TEST

/* The adapters' buffers by hand (llama-tiny: 2 blocks, d 64, F 176; B·T
 * 32): q, v at r 4 keep x·Aᵀ, 32·4 each, 2·2·128 = 512 elements, and the
 * scratch dlora 128; all-linear at r 8 with dropout 0.1: 7 adapters a
 * block (in 64 but down_proj's 176), x·Aᵀ 7·32·8 = 1,792, the dropout's
 * output and noise 2·32·(6·64 + 176) = 35,840, a block: 75,264 in all;
 * scratch dlora 256 and dlora_x 32·176 = 5,632. Each made before its
 * layer's forward and freed after its backward; under full recompute
 * rebuilt; in mixed 16-bit. */
static void lora_buffers(unsigned r, const char *targets, double dropout, int mixed, enum zs_recompute rc,
                         uint64_t saved, uint64_t dt, uint64_t dx)
{
	struct fixture f;
	struct step_buffers b;
	saved_with(&f, &b, r, targets, dropout, mixed, rc);
	uint64_t n = 0, sc[2] = {0, 0};
	for (size_t i = 0; i < b.n; i++) {
		const struct step_buffer *x = &b.buf[i];
		if (x->role == STEP_LORA) {
			n += x->elements;
			ck_assert(x->when == STEP_AT_LAYER && x->freed_after == x->layer && x->layer >= 1 && x->layer <= 2);
			ck_assert_int_eq(x->recomputed, rc == ZS_RECOMPUTE_FULL);
			ck_assert_uint_eq(x->esize, mixed ? 2 : 4);
			ck_assert_ptr_nonnull(f.p.module[x->index].adapter);
			ck_assert_uint_eq(f.p.module[x->index].layer, x->layer);
		} else if (x->role == STEP_LORA_SCRATCH) {
			sc[x->index] += x->elements;
			ck_assert(x->when == STEP_AT_BACKWARD && x->cat == ZS_CAT_SCRATCH && x->esize == 4);
		}
	}
	ck_assert_uint_eq(n, saved);
	ck_assert_uint_eq(sc[STEP_LORA_DT], dt);
	ck_assert_uint_eq(sc[STEP_LORA_DX], dx);
	free(b.buf);
	release(&f);
}

/* Under FSDP (o->fsdp_unit_marks) the step marks each adapter that is a
 * unit of its own, PEFT's policy's: a trained one. A frozen one is
 * flattened into its block's unit (util/ag_fsdp.c make_units), so no
 * mark names it and the pass sees only marks of units it made. Counts
 * the marks of gpt2-tiny's c_attn adapters (two, r 4) under freeze, by
 * lora_A (ab[0]) and lora_B (ab[1]). */
static void unit_marks(const char *freeze, size_t ab[2])
{
	char path[512];
	const char *src = getenv("srcdir"); /* a VPATH build's (distcheck), as adapt's */
	snprintf(path, sizeof path, "%s/report/models/gpt2-tiny.json", src != NULL ? src : ".");
	struct zs_model m = shipped(path);
	struct zs_config c;
	zs_config_defaults(&c);
	c.framework = ZS_FW_TORCH;
	c.wrapper = ZS_WRAPPER_FSDP;
	c.precision = ZS_FP32;
	c.torch_device = ZS_DEVICE_CPU;
	c.attn = ZS_ATTN_EAGER;
	c.lora_r = 4;
	snprintf(c.freeze, sizeof c.freeze, "%s", freeze);
	struct ag_options o;
	ag_options_from_config(&o, &c, 2, 16);
	o.fsdp_unit_marks = 1;
	struct step_params p;
	struct ag_step s;
	char *cause = NULL;
	step_params_build(&p, &m);
	ck_assert_msg(ag_step_build(&s, &m, &p, &o, &cause) == 0, "%s", cause);
	ab[0] = ab[1] = 0;
	const struct ag_event *list[3] = {s.first_step, s.event, s.step1};
	size_t n[3] = {s.nfirst, s.nevents, s.nstep1};
	for (int l = 0; l < 3; l++)
		for (size_t i = 0; i < n[l]; i++) {
			const char *x = list[l][i].label;
			int k;
			char which;
			if (list[l][i].kind == AG_EV_MARK && x != NULL && sscanf(x, "unit:lora.%d.%c:", &k, &which) == 2)
				ab[which == 'B']++;
		}
	ag_step_free(&s);
	step_params_free(&p);
}

START_TEST(test_fsdp_marks_no_frozen_adapter)
{
	size_t ab[2];
	unit_marks("", ab);
	ck_assert(ab[0] > 0 && ab[0] == ab[1]);
	unit_marks("re:lora_A", ab);
	ck_assert_uint_eq(ab[0], 0);
	ck_assert_uint_gt(ab[1], 0);
	unit_marks("transformer.h.1.*", ab);
	ck_assert(ab[0] > 0 && ab[0] == ab[1]);
	size_t half = ab[0];
	unit_marks("", ab);
	ck_assert_uint_eq(2 * half, ab[0]);
}
END_TEST

/* util/freeze.h's one check of a term that freezes nothing (the PyTorch
 * step's and the paper's with LoRA): the first such term, trimmed, in
 * the spec's order; none when each term names some parameter. */
START_TEST(test_the_first_term_that_freezes_nothing_is_named)
{
	static const char *const names[] = {"model.layers.0.self_attn.q_proj.lora_A.default.weight",
	                                    "model.layers.1.self_attn.q_proj.lora_B.default.weight"};
	char term[ZS_FREEZE_MAX + 1] = "x";
	ck_assert_int_eq(zs_freeze_unmatched("blocks:0-0, re:lora_B", names, 2, 2, term, sizeof term), 0);
	ck_assert_str_eq(term, "");
	ck_assert_int_eq(zs_freeze_unmatched("blocks:0-0, embeddings ,blocks:5-6", names, 2, 2, term, sizeof term), 1);
	ck_assert_str_eq(term, "embeddings");
	ck_assert_int_eq(zs_freeze_unmatched("*.lora_A.*,blocks:1-1,all-but-last:1", names, 2, 2, term, sizeof term), 0);
	ck_assert_int_eq(zs_freeze_unmatched("re:lora_A", names, 0, 2, term, sizeof term), 1);
	ck_assert_str_eq(term, "re:lora_A");
}
END_TEST

START_TEST(test_the_adapters_buffers_are_counted_by_hand)
{
	lora_buffers(4, NULL, 0, 0, ZS_RECOMPUTE_NONE, 512, 128, 0);
	lora_buffers(4, NULL, 0, 1, ZS_RECOMPUTE_FULL, 512, 128, 0);
	lora_buffers(8, "all-linear", 0.1, 0, ZS_RECOMPUTE_NONE, 2 * (1792 + 35840), 256, 5632);
	lora_buffers(8, "all-linear", 0.1, 1, ZS_RECOMPUTE_SELECTIVE, 2 * (1792 + 35840), 256, 5632);
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
	tcase_add_test(tc, test_default_targets_are_pefts_mapping);
	tcase_add_test(tc, test_phi3_without_targets_is_refused);
	tcase_add_test(tc, test_the_description_with_adapters_trains_pefts_tensors);
	tcase_add_test(tc, test_adapter_shapes_are_a_r_in_and_b_out_r);
	tcase_add_test(tc, test_a_frozen_linear_keeps_its_input_only_for_its_adapter);
	tcase_add_test(tc, test_the_adapters_buffers_are_counted_by_hand);
	tcase_add_test(tc, test_the_first_term_that_freezes_nothing_is_named);
	tcase_add_test(tc, test_fsdp_marks_no_frozen_adapter);
	suite_add_tcase(s, tc);
	return s;
}

int main(void) { return run_with_shipped(lora_suite()); }
