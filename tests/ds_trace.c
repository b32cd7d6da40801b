/*
 * ds_trace — the hooks DeepSpeed ZeRO-3's coordinator fires, as zerosim
 * walks them (util/ds_coord.h), for tests/ds_ckpt_hooks.py to hold
 * against real PyTorch.
 *
 *   tests/ds_trace TIED LAYERS [TARGETS]
 *
 * builds a GPT-2 (n_embd 16, n_head 2, vocab 32, n_positions 8, LAYERS
 * blocks, its head tied to wte when TIED is 1) as the step description
 * does (util/step.h: its modules, their tensors, no_grad_in), its
 * coordinator with full recompute (ds_coord_new_recompute, each block's
 * modules one checkpointed group, as the engine's ds3_checkpointed makes
 * them) and walks two steps of its trace, writing a line a hook:
 *
 *   STEP fetch NAME      the trace entry's fetch (ds_coord_fetch)
 *   STEP release NAME    the release after it, when ds_coord_release
 *                        releases something
 *
 * NAME the module's Hugging Face name (step_module_name). Both steps walk
 * the trace as step 1 records it (complete 0), where a release drops every
 * param of the module the entry just fetched: it releases nothing only
 * where the coordinator's rule says its hook does not fire (a no_grad_in
 * module's backward). Exit 0, or 2 for usage.
 */
#include "config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/config.h"
#include "util/ds_coord.h"
#include "util/lora.h"
#include "util/model.h"
#include "util/step.h"
#include "util/util.h"

/* The model of config cfg (freed), or 1 with the error printed. */
static int model_of(cJSON *cfg, struct zs_model *m)
{
	char *cause = NULL;
	int bad = zs_model_from_json(cfg, "ds_trace", m, &cause) != 0;
	cJSON_Delete(cfg);
	if (bad)
		zs_print_error("ds_trace", cause);
	return bad;
}

/* Each module's answer of the coordinator's rule (util/ds_coord.h:
 * ds_coord_grad_flow_lora over p's trained tensors and adapters, with
 * input_grad as under full recompute), into no_grad_in (p's modules). */
static void lora_grad_flow(const struct step_params *p, int input_grad, int *no_grad_in)
{
	size_t n = p->nmodules;
	uint64_t *trained = zs_calloc(n + 1, sizeof *trained);
	int *adapter = zs_calloc(n + 1, sizeof *adapter);
	size_t *base = zs_calloc(n + 1, sizeof *base);
	for (size_t i = 0; i < n; i++) {
		const struct step_module *md = &p->module[i];
		for (size_t t = md->first; t < md->first + md->n; t++)
			trained[i] += step_trained(p, t) ? p->tensor[t].numel : 0;
		no_grad_in[i] = md->no_grad_in;
		adapter[i] = md->adapter == NULL ? 0 : strncmp(md->adapter, "lora_A", 6) == 0 ? 1 : 2;
		base[i] = md->base;
	}
	ds_coord_grad_flow_lora(n, trained, input_grad, no_grad_in, adapter, base);
	free(trained);
	free(adapter);
	free(base);
}

/* ds_trace lora LAYERS TARGETS: a llama (hidden 16, 2 heads, 1 k/v head,
 * intermediate 32, vocab 32, LAYERS blocks) with LoRA r 2 on TARGETS
 * (--lora-targets' syntax), described as the engine and the theory
 * describe it (util/lora.h's zs_lora_step_params: the base frozen, each
 * adapter a module after its base), and each module's answer from
 * ds_coord_grad_flow_lora, without recompute (the rule both ask): a line
 * "NAME N" a module with parameters, N 0 (its backward fetches and
 * releases it), 1 (fetched for backward, never released after: no input
 * needs grad) or 2 (no backward: its output needs no grad). */
static int lora_flow(int layers, const char *targets)
{
	cJSON *cfg = cJSON_CreateObject();
	cJSON_AddStringToObject(cfg, "model_type", "llama");
	cJSON_AddNumberToObject(cfg, "hidden_size", 16);
	cJSON_AddNumberToObject(cfg, "num_hidden_layers", layers);
	cJSON_AddNumberToObject(cfg, "num_attention_heads", 2);
	cJSON_AddNumberToObject(cfg, "num_key_value_heads", 1);
	cJSON_AddNumberToObject(cfg, "intermediate_size", 32);
	cJSON_AddNumberToObject(cfg, "vocab_size", 32);
	cJSON_AddNumberToObject(cfg, "max_position_embeddings", 8);
	cJSON_AddBoolToObject(cfg, "tie_word_embeddings", 0);
	struct zs_model m;
	char *cause = NULL;
	if (model_of(cfg, &m) != 0)
		return 1;
	struct zs_config c;
	zs_config_defaults(&c);
	c.framework = ZS_FW_DEEPSPEED;
	c.lora_r = 2;
	snprintf(c.lora_targets, sizeof c.lora_targets, "%s", targets);
	struct step_params p;
	if (zs_lora_step_params(&p, &m, &m, &c, &cause) != 0) {
		zs_print_error("ds_trace", cause);
		return 1;
	}
	size_t n = p.nmodules;
	int *no_grad_in = zs_calloc(n + 1, sizeof *no_grad_in);
	lora_grad_flow(&p, 0, no_grad_in);
	char name[200];
	for (size_t i = 0; i < n; i++)
		if (p.module[i].n > 0) {
			step_module_name(&p, i, name, sizeof name);
			printf("%s %d\n", name, no_grad_in[i]);
		}
	free(no_grad_in);
	step_params_free(&p);
	return 0;
}

int main(int argc, char **argv)
{
	zs_json_init(); /* before any cJSON call (util.h) */
	if (argc == 4 && strcmp(argv[1], "lora") == 0 && atoi(argv[2]) >= 1)
		return lora_flow(atoi(argv[2]), argv[3]);
	if ((argc != 3 && argc != 4) || (strcmp(argv[1], "0") != 0 && strcmp(argv[1], "1") != 0) || atoi(argv[2]) < 1) {
		fprintf(stderr, "usage: ds_trace TIED(0|1) LAYERS [TARGETS] | ds_trace lora LAYERS TARGETS\n");
		return 2;
	}
	cJSON *cfg = cJSON_CreateObject();
	cJSON_AddStringToObject(cfg, "model_type", "gpt2");
	cJSON_AddNumberToObject(cfg, "n_embd", 16);
	cJSON_AddNumberToObject(cfg, "n_layer", atoi(argv[2]));
	cJSON_AddNumberToObject(cfg, "n_head", 2);
	cJSON_AddNumberToObject(cfg, "vocab_size", 32);
	cJSON_AddNumberToObject(cfg, "n_positions", 8);
	cJSON_AddBoolToObject(cfg, "tie_word_embeddings", strcmp(argv[1], "1") == 0);
	struct zs_model m;
	char *cause = NULL;
	if (model_of(cfg, &m) != 0)
		return 1;
	struct step_params p;
	struct zs_config c;
	zs_config_defaults(&c);
	c.framework = ZS_FW_DEEPSPEED;
	if (argc == 4) { /* LoRA r 2 on TARGETS, the base frozen (util/lora.h) */
		c.lora_r = 2;
		snprintf(c.lora_targets, sizeof c.lora_targets, "%s", argv[3]);
	}
	if (zs_lora_step_params(&p, &m, &m, &c, &cause) != 0) {
		zs_print_error("ds_trace", cause);
		return 1;
	}
	uint64_t *n = zs_calloc(p.ntensors, sizeof *n);
	size_t *first = zs_calloc(p.nmodules, sizeof *first), *count = zs_calloc(p.nmodules, sizeof *count);
	long *group = zs_calloc(p.nmodules, sizeof *group);
	int *no_grad_in = zs_calloc(p.nmodules, sizeof *no_grad_in);
	for (size_t t = 0; t < p.ntensors; t++)
		n[t] = p.tensor[t].numel;
	for (size_t i = 0; i < p.nmodules; i++) {
		const struct step_module *s = &p.module[i];
		first[i] = s->first;
		count[i] = s->n;
		/* the blocks (with TARGETS no checkpointing: its rule under full
		 * recompute takes the tables' outputs needing grad, which depends
		 * on the order in which transformers' and DeepSpeed's forward
		 * hooks were registered; not compared here) */
		group[i] = argc == 3 && s->layer >= 1 && s->layer + 1 < p.nlayers ? (long)s->layer : -1;
		no_grad_in[i] = s->no_grad_in;
	}
	if (argc == 4)
		lora_grad_flow(&p, 0, no_grad_in);
	struct ds_coord *d = ds_coord_new_recompute(n, p.ntensors, first, count, p.nmodules, group, no_grad_in, &c, 1);
	size_t *released = zs_calloc(p.ntensors + 1, sizeof *released), *post = zs_calloc(p.ntensors + 1, sizeof *post);
	char name[160];
	for (unsigned step = 1; step <= 2; step++) {
		ds_coord_begin_step(d, step);
		for (size_t j = 0; j < d->ntrace; j++) {
			const size_t *got;
			step_module_name(&p, d->trace[j], name, sizeof name);
			ds_coord_fetch(d, &c, j, 0, &got);
			printf("%u fetch %s\n", step, name);
			if (ds_coord_release(d, j, 0, released) > 0)
				printf("%u release %s\n", step, name);
		}
		size_t nreleased = 0;
		ds_coord_step(d, released, &nreleased, post);
	}
	ds_coord_free(d);
	free(released);
	free(post);
	free(n);
	free(first);
	free(count);
	free(group);
	free(no_grad_in);
	step_params_free(&p);
	return 0;
}
