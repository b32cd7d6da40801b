/*
 * tfm_dump — the C half of the PyTorch agreement test (tests/tfm_torch.sh).
 *
 *   tests/tfm_dump gpt2|llama DIR
 *
 * builds the tiny model of that family (d 64, 2 layers, 4 heads, 2
 * key-value heads for llama, vocabulary 256, 32 positions, micro-batch 2),
 * takes its initial weights and three batches of the synthetic task from
 * seed 11, trains three fp32 Adam steps (lr 1e-3) and writes
 *
 *   DIR/run.json    the shape, the optimizer, every tensor's name, offset
 *                   and shape in the flat vector, each step's inputs and
 *                   targets (B × T token ids), each step's loss (before its
 *                   update) and the loss after the last update;
 *   DIR/init.f32    the initial weights, Ψ raw little-endian float32;
 *   DIR/grad1.f32   the first step's gradient, the same way;
 *   DIR/step1.f32   the weights after the first step, the same way;
 *   DIR/final.f32   the weights after the last step, the same way.
 *
 * tests/tfm_torch.py builds the same model in PyTorch from these files,
 * trains it on the same tokens and compares.
 */
#include "config.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/optim.h"
#include "engine/tfm.h"
#include "util/util.h"

enum { B = 2, T = 32, STEPS = 3 };
#define SEED 11
#define LR 1e-3

static void write_f32(const char *dir, const char *name, const float *w, size_t n)
{
	unsigned char *buf = zs_malloc(4 * n);
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &w[i], 4);
		for (int k = 0; k < 4; k++)
			buf[4 * i + (size_t)k] = (unsigned char)(u >> (8 * k));
	}
	char *path = zs_asprintf("%s/%s", dir, name), *cause = NULL;
	if (zs_write_atomic(path, (const char *)buf, 4 * n, &cause) != 0) {
		zs_print_error("tfm_dump", cause);
		exit(1);
	}
	free(path);
	free(buf);
}

static cJSON *shape(size_t a, size_t b)
{
	cJSON *s = cJSON_CreateArray();
	cJSON_AddItemToArray(s, cJSON_CreateNumber((double)a));
	if (b != 0)
		cJSON_AddItemToArray(s, cJSON_CreateNumber((double)b));
	return s;
}

static void add_tensor(cJSON *list, const char *name, const float *base, const float *t, size_t a, size_t b)
{
	if (t == NULL)
		return;
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", name);
	cJSON_AddNumberToObject(o, "offset", (double)(t - base));
	cJSON_AddItemToObject(o, "shape", shape(a, b));
	cJSON_AddItemToArray(list, o);
}

/* Every tensor of the flat vector, named as tests/tfm_torch.py names its
 * parameters. */
static cJSON *tensors(const struct tfm_dims *d, float *w)
{
	cJSON *list = cJSON_CreateArray();
	size_t C = d->d, Q = tfm_qkv_rows(d), U = tfm_up_rows(d), X = d->heads * d->head_dim;
	struct tfm_embed_params e;
	tfm_embed_view(&e, d, w);
	add_tensor(list, "wte", w, e.wte, d->vocab, C);
	add_tensor(list, "wpe", w, e.wpe, d->seq, C);
	for (size_t l = 0; l < d->layers; l++) {
		struct tfm_block_params p;
		tfm_block_view(&p, d, w, l);
		struct { const char *n; const float *t; size_t a, b; } t[] = {
			{"ln1_w", p.ln1_w, C, 0}, {"ln1_b", p.ln1_b, C, 0}, {"qkv_w", p.qkv_w, Q, C},
			{"qkv_b", p.qkv_b, Q, 0}, {"proj_w", p.proj_w, C, X}, {"proj_b", p.proj_b, C, 0},
			{"ln2_w", p.ln2_w, C, 0}, {"ln2_b", p.ln2_b, C, 0}, {"fc_w", p.fc_w, U, C},
			{"fc_b", p.fc_b, U, 0}, {"fcproj_w", p.fcproj_w, C, d->ffn}, {"fcproj_b", p.fcproj_b, C, 0},
		};
		for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
			char *name = zs_asprintf("h.%zu.%s", l, t[i].n);
			add_tensor(list, name, w, t[i].t, t[i].a, t[i].b);
			free(name);
		}
	}
	struct tfm_final_params f;
	tfm_final_view(&f, d, w);
	add_tensor(list, "lnf_w", w, f.norm_w, C, 0);
	add_tensor(list, "lnf_b", w, f.norm_b, C, 0);
	if (!d->tied)
		add_tensor(list, "head", w, f.head, d->vocab, C);
	return list;
}

static cJSON *ints(const int *v, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
	return a;
}

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[1], "gpt2") != 0 && strcmp(argv[1], "llama") != 0)) {
		fprintf(stderr, "usage: tfm_dump gpt2|llama DIR\n");
		return 2;
	}
	int llama = strcmp(argv[1], "llama") == 0;
	struct tfm_dims d = {llama ? TFM_LLAMA : TFM_GPT2, 64, 2, 4, llama ? 2 : 4, 16, llama ? 172 : 256, 256, T,
	                     !llama, 1e-5f, 10000.0f};
	struct tfm_model m;
	tfm_model_init(&m, &d, B, T, TFM_RECOMPUTE_NONE);
	tfm_init_weights(m.params, &d, SEED);
	write_f32(argv[2], "init.f32", m.params, m.nparams);

	cJSON *run = cJSON_CreateObject();
	cJSON_AddStringToObject(run, "family", argv[1]);
	struct { const char *k; double v; } dims[] = {
		{"d", (double)d.d}, {"layers", (double)d.layers}, {"heads", (double)d.heads},
		{"kv_heads", (double)d.kv_heads}, {"head_dim", (double)d.head_dim}, {"ffn", (double)d.ffn},
		{"vocab", (double)d.vocab}, {"seq", (double)d.seq}, {"tied", d.tied}, {"eps", (double)d.eps},
		{"rope_theta", (double)d.rope_theta}, {"batch", B}, {"steps", STEPS}, {"lr", LR},
		{"params", (double)m.nparams},
	};
	for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
		cJSON_AddNumberToObject(run, dims[i].k, dims[i].v);
	cJSON_AddItemToObject(run, "tensors", tensors(&d, m.params));

	float *mo = zs_calloc(m.nparams, sizeof *mo), *v = zs_calloc(m.nparams, sizeof *v);
	struct optim o;
	optim_init(&o, ZS_ADAM, LR);
	struct tfm_task task;
	tfm_task_init(&task, d.vocab, SEED);
	cJSON *steps = cJSON_AddArrayToObject(run, "batches"), *losses = cJSON_AddArrayToObject(run, "losses");
	int in[B * T], target[B * T];
	for (unsigned s = 0; s < STEPS; s++) {
		tfm_task_batch(in, target, &task, SEED, s, 0, B, T);
		cJSON *b = cJSON_CreateObject();
		cJSON_AddItemToObject(b, "inputs", ints(in, B * T));
		cJSON_AddItemToObject(b, "targets", ints(target, B * T));
		cJSON_AddItemToArray(steps, b);
		float loss = tfm_model_step(&m, in, target);
		cJSON_AddItemToArray(losses, cJSON_CreateNumber((double)loss));
		if (s == 0)
			write_f32(argv[2], "grad1.f32", m.grads, m.nparams);
		optim_update(&o, s + 1, m.params, mo, v, m.grads, ZS_F32, NULL, m.nparams);
		if (s == 0)
			write_f32(argv[2], "step1.f32", m.params, m.nparams);
	}
	cJSON_AddNumberToObject(run, "final_loss", (double)tfm_model_loss(&m, in, target));
	write_f32(argv[2], "final.f32", m.params, m.nparams);

	char *path = zs_asprintf("%s/run.json", argv[2]), *cause = NULL;
	int rc = zs_json_write(path, run, &cause);
	if (rc != 0)
		zs_print_error("tfm_dump", cause);
	free(cause);
	free(path);
	cJSON_Delete(run);
	free(mo);
	free(v);
	tfm_task_free(&task);
	tfm_model_free(&m);
	return rc == 0 ? 0 : 1;
}
